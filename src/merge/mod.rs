//! The device ELF merge: relocatable cubins in, one executable (or, with `-r`, one
//! relocatable) cubin image out, the way nvlink links them. The steps run in order, each
//! reading what the earlier ones built: resolve global symbols (strong over weak, the
//! weak function with fewer registers, duplicate and size errors), build the function
//! graph and drop what no kernel reaches, merge sections (per-function sections one to
//! one, shared-name sections as pieces in input order), allocate shared memory per kernel,
//! resolve relocations (apply the link-time ones, keep the driver's), rebuild `.nv.info`,
//! `.nv.callgraph`, `.nv.prototype`, notes and symbols, and hand the image to the writer.

mod devrt;
mod externs;
pub mod gather;
mod mercury;
mod reglimit;
pub mod resources;

use std::collections::{BTreeMap, BTreeSet};

use rayon::prelude::*;

use crate::fasthash::{HashMap, HashSet};

use crate::arch::Arch;
use crate::bytes::Le;
use crate::diag::{Diagnostics, Error, Result};
use crate::elf::cubin::*;
use crate::elf::info::{self, Record};
use crate::elf::reloc;
use crate::elf::write::{Image, OutSection, OutSymbol, Ref};

/// What the merge needs from the command line.
#[derive(Clone, Debug, Default)]
pub struct MergeOptions {
    pub target: Option<Arch>,
    /// `-r`: a relocatable output; nothing removed, weak undefined made global.
    pub relocatable: bool,
    /// `-g`: debug links keep every function, reached or not.
    pub debug: bool,
    /// `--preserve-relocs`: the relocations applied are also listed, in
    /// `.nv.resolvedrela.*` sections; everything is kept as in a debug link.
    pub preserve_relocs: bool,
    pub disable_smem_reservation: bool,
    pub allow_undefined_globals: bool,
    /// The command line recorded in the linker's own `.note.nv.tkinfo` entry.
    pub note_command_line: String,
    /// The output's file name, which a debug link's tool note records.
    pub note_output: Option<String>,
    /// `-dump-callgraph` / `-dump-callgraph-no-demangle`.
    pub dump_callgraph: bool,
    /// The kernels to keep when the link is narrowed (host references or
    /// `-kernels-used`); `None` keeps every kernel.
    pub kernels: Option<crate::lto::HostRefs>,
    /// The inputs whose IR libNVVM compiled into the `lto.cubin` input (partial LTO),
    /// named after nvlink's message for an undefined reference in it.
    pub lto_from: Vec<String>,
    /// `-suppress-stack-size-warning`: no warning for a kernel whose call tree recurses.
    pub suppress_stack_size_warning: bool,
    /// `-tool-name NAME`: the tool the image's own note names (else nvlink).
    pub tool_name: Option<String>,
}

/// One input cubin and where it came from.
pub struct Input {
    pub cubin: Cubin,
    /// From libcudadevrt (its code goes only where something calls it).
    pub system: bool,
}

/// Unified-table and reservation symbols every relocatable cubin declares.
fn is_table_symbol(name: &str) -> bool {
    // (most names fail the prefix test; the list is read only for those that pass)
    name.starts_with("__U")
        && matches!(
            name,
            "__UFT_OFFSET"
                | "__UDT_OFFSET"
                | "__UFT_CANONICAL"
                | "__UDT_CANONICAL"
                | "__UFT"
                | "__UDT"
                | "__UFT_END"
                | "__UDT_END"
        )
}

/// An `extern __shared__` array of no size that no input defines: the kernel's dynamic
/// shared memory, placed after everything its kernels hold (nvlink does not report it
/// undefined; a sized one it does).
fn is_dynamic_shared(s: &Symbol) -> bool {
    !s.defined() && s.ty == STT_CUDA_OBJECT && s.other & STO_SHARED != 0 && s.size == 0
}

/// The device runtime's entry points the driver provides: libcudadevrt's functions call
/// them (a `-g` link, which keeps every function, leaves them undefined). The names
/// nvlink 13.5 accepts, no others (`cnpFoo` is an undefined reference).
const CNP_FUNCTIONS: [&str; 22] = [
    "CtxSynchronize",
    "DeviceGetAttribute",
    "DeviceGetName",
    "DeviceGetTotalMem",
    "EventCreate",
    "EventDestroy",
    "EventRecord",
    "FuncGetAttribute",
    "GetCacheConfig",
    "GetDevice",
    "GetDeviceCount",
    "GetLastError",
    "GetLimit",
    "GetParameterBuffer",
    "GetParameterBufferV2",
    "GetSharedMemConfig",
    "LaunchDevice",
    "LaunchDeviceV2",
    "SetLastError",
    "StreamCreate",
    "StreamDestroy",
    "StreamWaitEvent",
];

/// A label ptxas could not place (`$L__tmp…` in a `-G` unit's `.debug_loc`): an
/// undefined local symbol. nvlink drops the debug sections' relocations against one and
/// keeps their bytes.
fn is_unplaced_label(s: &Symbol) -> bool {
    s.bind == STB_LOCAL && !s.defined() && s.ty != STT_SECTION
}

/// Functions the driver provides (calls to them stay undefined in the output).
fn is_syscall(name: &str) -> bool {
    name == "vprintf"
        || name == "malloc"
        || name == "free"
        || name == "__assertfail"
        || name.starts_with("__cuda_syscall")
        || name
            .strip_prefix("cnp")
            .is_some_and(|n| CNP_FUNCTIONS.contains(&n))
        || name.starts_with("__nv_reservedSMEM")
        || matches!(
            name.strip_prefix(".nv.reservedSmem."),
            Some("offset0" | "offset1" | "begin" | "end" | "cap")
        )
}

type SymKey = (usize, usize); // (input, symbol index)

/// MIN_STACK_SIZE / CRS_STACK_SIZE of a kernel whose call tree recurses.
const UNKNOWN_STACK: u32 = 0xFFFF_FFFF;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Function,
    Data,
    Other,
}

fn kind(s: &Symbol) -> Kind {
    match s.ty {
        STT_FUNC => Kind::Function,
        STT_OBJECT | STT_CUDA_OBJECT => Kind::Data,
        _ => Kind::Other,
    }
}

struct Global<'a> {
    name: &'a str,
    def: Option<SymKey>,
    first: SymKey,
}

/// No global: a local symbol's entry in `Merger::global_of`.
const NO_GLOBAL: u32 = u32::MAX;

/// No function: an entry of `Merger::func_at`.
const NO_FUNC: u32 = u32::MAX;

/// nvlink's numbered call graph ([`Merger::call_lists`]).
struct CallLists {
    nodes: usize,
    /// Each function's node number.
    node: Vec<usize>,
    func_of_node: HashMap<usize, usize>,
    /// Each live function's call list, as node numbers, in the order they were added.
    calls: Vec<Vec<usize>>,
    /// Each global name's node number (0: not a function).
    of_global: Vec<usize>,
}

impl CallLists {
    /// `f`'s calls that reach a live function, as functions, in order.
    fn callees(&self, f: usize) -> Vec<usize> {
        self.calls[f]
            .iter()
            .filter_map(|n| self.func_of_node.get(n).copied())
            .collect()
    }
}

struct Func {
    key: SymKey,
    text: usize,
    entry: bool,
    regs: u32,
    frame: u32,
    barriers: u32,
    callees: BTreeSet<usize>,
    /// Calls itself (a callgraph edge to itself).
    self_call: bool,
    shared: BTreeSet<SymKey>,
}

/// What the steps read from each input more than once, parsed once (in parallel).
struct Parsed {
    /// Global `.nv.info` records (`info` reports an unreadable section; the steps before
    /// it read it as empty).
    records: Result<Vec<Record>>,
    /// Entries of every relocation section, by section index (empty for the others).
    relocs: Vec<Result<Vec<Reloc>>>,
    /// The (attribute, symbol, value) records (`REGCOUNT`, `FRAME_SIZE`, ...), by
    /// attribute and symbol, the first of each.
    sym_values: Vec<(u8, u32, u32)>,
}

impl Parsed {
    fn of(c: &Cubin) -> Parsed {
        let records = match c
            .sections
            .iter()
            .find(|s| s.name == ".nv.info" && s.ty == SHT_CUDA_INFO)
        {
            Some(s) => info::parse(c.bytes(s), &c.origin, &s.name, s.offset),
            None => Ok(Vec::new()),
        };
        let relocs = c
            .sections
            .iter()
            .enumerate()
            .map(|(i, s)| match s.ty {
                SHT_RELA | SHT_REL => c.relocations(i),
                _ => Ok(Vec::new()),
            })
            .collect();
        let mut sym_values: Vec<(u8, u32, u32)> = records
            .as_deref()
            .unwrap_or(&[])
            .iter()
            .filter_map(|r| r.sym_value().map(|(s, v)| (r.attr, s, v)))
            .collect();
        // (stable: the first record of a symbol stays first)
        sym_values.sort_by_key(|&(a, s, _)| (a, s));
        sym_values.dedup_by_key(|&mut (a, s, _)| (a, s));
        Parsed {
            records,
            relocs,
            sym_values,
        }
    }
}

pub fn link(inputs: &[Input], opts: &MergeOptions, diag: &Diagnostics) -> Result<Image> {
    link_with_steps(inputs, opts, diag).map(|(image, _)| image)
}

/// One step of the merge and its wall time (what `--report-json` lists as
/// `merge_steps`).
pub type Step = (&'static str, std::time::Duration);

/// `link`, with the time each step took.
pub fn link_with_steps(
    inputs: &[Input],
    opts: &MergeOptions,
    diag: &Diagnostics,
) -> Result<(Image, Vec<Step>)> {
    let mut steps = Vec::new();
    let mut t = std::time::Instant::now();
    let mut lap = |name: &'static str| {
        steps.push((name, t.elapsed()));
        t = std::time::Instant::now();
    };
    let parsed: Vec<Parsed> = inputs.par_iter().map(|i| Parsed::of(&i.cubin)).collect();
    // a relocation section that cannot be read (or that nvlink refuses) ends the link,
    // whether or not a kept function's code is what it relocates
    let unreadable = parsed
        .iter()
        .flat_map(|p| &p.relocs)
        .find_map(|r| r.as_ref().err());
    if let Some(e) = unreadable {
        return Err(e.clone());
    }
    lap("parse");
    let mut m = Merger::new(inputs, &parsed, opts, diag);
    m.resolve()?;
    m.settle();
    lap("resolve");
    m.functions()?;
    m.reach();
    m.check_register_limits()?;
    m.read_externs()?;
    lap("functions");
    m.undefined()?;
    lap("undefined");
    m.notes();
    m.sections()?;
    lap("sections");
    m.shared();
    lap("shared");
    m.tables();
    m.symbols();
    lap("symbols");
    m.relocations()?;
    lap("relocations");
    m.info()?;
    lap("info");
    m.callgraph()?;
    if opts.dump_callgraph {
        m.dump_callgraph()?;
    }
    lap("callgraph");
    m.mercury()?;
    lap("mercury");
    let image = m.finish();
    crate::dispose(m);
    // (freed, not left to the exit: the writer reuses their room, 0.3 MB off the
    // 128-unit link's peak)
    drop(parsed);
    lap("finish");
    Ok((image, steps))
}

/// A relocation resolved at link time: patched into its output section.
#[derive(Clone, Copy)]
struct Patch {
    at: u64,
    ty: u32,
    value: u64,
    bank: u32,
    clear: bool,
}

/// Replaced runs of a section, (offset, length), and their new bytes in order.
type Edits = (Vec<(usize, usize)>, Vec<u8>);

/// The relocations of a section written from an input's mapping, as the bytes that
/// replace the input's: each run of overlapping or touching fields copied once from
/// `src`, the patches made in it in their order.
fn edits<'p>(src: &[u8], patches: impl Iterator<Item = &'p Patch> + Clone) -> Result<Edits> {
    let mut spans: Vec<(u64, u64)> = patches
        .clone()
        .map(|p| (p.at, p.at.saturating_add(reloc::extent(p.ty))))
        .collect();
    spans.sort_unstable();
    // runs: (offset in the section, length, offset in the bytes)
    let mut runs: Vec<(usize, usize, usize)> = Vec::new();
    let mut bytes = Vec::new();
    for (s, e) in spans {
        // (an offset past the end is left to `reloc::apply`'s message, on the whole
        // section)
        let (s, e) = (
            s.min(src.len() as u64) as usize,
            e.min(src.len() as u64) as usize,
        );
        match runs.last_mut() {
            Some(last) if s <= last.0 + last.1 => {
                let end = e.max(last.0 + last.1);
                bytes.extend_from_slice(&src[last.0 + last.1..end]);
                last.1 = end - last.0;
            }
            _ => {
                runs.push((s, e - s, bytes.len()));
                bytes.extend_from_slice(&src[s..e]);
            }
        }
    }
    for p in patches {
        let i = runs
            .partition_point(|r| r.0 as u64 <= p.at)
            .saturating_sub(1);
        match runs.get(i) {
            Some(&(s, n, b))
                if p.at >= s as u64
                    && p.at.saturating_add(reloc::extent(p.ty)) <= (s + n) as u64 =>
            {
                reloc::apply(
                    &mut bytes[b..b + n],
                    p.at - s as u64,
                    p.ty,
                    p.value,
                    p.bank,
                    p.clear,
                )?
            }
            _ => reloc::apply(&mut src.to_vec(), p.at, p.ty, p.value, p.bank, p.clear)?,
        }
    }
    Ok((runs.into_iter().map(|(s, n, _)| (s, n)).collect(), bytes))
}

/// A relocation kept in the output: (offset, symbol, type, addend).
type RelocEntry = (u64, u32, u32, i64);

/// ELF symbol visibility `STV_INTERNAL` (`st_other` low bits).
const STV_INTERNAL: u8 = 1;

/// The relocation sections of the output: kept for the driver (or the next link) with
/// or without addends, and with `--preserve-relocs` those applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum RelocList {
    Rel,
    Rela,
    Resolved,
}

/// What becomes of one input's relocations (`Merger::plan_relocations`), per relocation
/// section and in order: the patches to make in an output section, and the entries to
/// keep in the relocation section of (output section, RELA?).
#[derive(Default)]
struct RelocPlan {
    patches: Vec<(usize, Vec<Patch>)>,
    /// The edits of the output sections written from this input's mapping (all their
    /// relocations are this input's).
    edits: Vec<(usize, Edits)>,
    kept: Vec<((usize, RelocList), Vec<RelocEntry>)>,
}

/// What the relocations against one input symbol need to know of it.
#[derive(Clone, Copy)]
struct SymFacts {
    /// Its function (or function's section) was removed.
    dead: bool,
    /// A global definition another input's replaced.
    replaced: bool,
    /// `Merger::link_value`.
    value: (u64, u32, bool),
    out_index: Option<usize>,
    /// A section symbol of a non-alloc section.
    in_nonalloc_section: bool,
    /// For a section symbol: where its piece went in the output section.
    section_piece: Option<u64>,
}

struct Merger<'a> {
    inputs: &'a [Input],
    parsed: &'a [Parsed],
    opts: &'a MergeOptions,
    diag: &'a Diagnostics,
    /// Global names in nvlink's symbol order (per input: functions, then the rest).
    globals: Vec<Global<'a>>,
    global_ids: HashMap<&'a str, u32>,
    /// Per input and symbol: its global (`NO_GLOBAL` for locals).
    global_of: Vec<Vec<u32>>,
    /// Per input and symbol: `(target, representative)` — see `target` and
    /// `representative`; filled after resolution.
    resolved: Vec<Vec<(Option<SymKey>, SymKey)>>,
    funcs: Vec<Func>,
    func_of_text: HashMap<(usize, usize), usize>,
    /// Per input and symbol: the function it defines (`NO_FUNC` when none).
    func_at: Vec<Vec<u32>>,
    live: Vec<bool>,
    /// Input section → (output section, offset of its piece).
    placed: HashMap<(usize, usize), (usize, u64)>,
    out: Vec<OutSection>,
    by_name: HashMap<(&'a str, u32), usize>,
    /// Output section → whether it gets a section symbol.
    section_symbol: Vec<bool>,
    shared_offset: HashMap<SymKey, u64>,
    /// Outside debug links, a dynamic shared array's offset as each function that
    /// refers to it sees it: (function, array) → offset.
    dynamic_offset: HashMap<(usize, SymKey), u64>,
    symbols: Vec<OutSymbol>,
    sym_of: HashMap<SymKey, usize>,
    section_sym_index: HashMap<usize, usize>,
    kept_relocs: Vec<(usize, RelocList, Vec<u8>)>,
    leading_strings: Vec<String>,
    callgraph_id: usize,
    prototype_id: Option<usize>,
    address_taken: HashSet<usize>,
    /// (prototype, function) of every address-taken function, each once (the dump's
    /// indirect callees).
    taken_by_prototype: Vec<(String, usize)>,
    /// nvlink's sm_100+ layout (`Image::mercury_layout`).
    mercury_layout: bool,
    /// The capsule-Mercury symbol table, built by `mercury`.
    merc_symbols: Option<(usize, Vec<OutSymbol>)>,
    /// Each function's `EXTERNS` list, output symbol indices (`info`, `externs.rs`).
    externs: Vec<Vec<u32>>,
    /// Each live function's own `EXTERNS` entries that stay, as input symbols.
    extern_refs: Vec<Vec<SymKey>>,
    /// Each function's own `EXTERNS` record's entry count (0 without one).
    extern_slots: Vec<usize>,
    /// The functions no input defines that those entries name (representatives).
    driver_functions: HashSet<SymKey>,
    /// (registers, stack, barriers) over each live kernel's call tree (`info`).
    props: HashMap<usize, (u32, u32, u32)>,
    /// Debug links: the section each shared variable's symbol goes in (its one kernel's
    /// window, or `.nv_debug.shared`).
    shared_home: HashMap<SymKey, Option<usize>>,
    /// The reservation at the start of each kernel's shared window (0x400 on sm_90+).
    shared_reserve: u64,
    /// Debug links: whether `.nv_debug.shared` holds variables other than dynamic arrays.
    debug_shared_holds_variables: bool,
    /// `.debug_frame` pieces that lost entries (sm_100+), by (input, section).
    frames: HashMap<(usize, usize), mercury::PrunedFrame>,
}

impl<'a> Merger<'a> {
    fn new(
        inputs: &'a [Input],
        parsed: &'a [Parsed],
        opts: &'a MergeOptions,
        diag: &'a Diagnostics,
    ) -> Self {
        Merger {
            inputs,
            parsed,
            opts,
            diag,
            globals: Vec::new(),
            global_ids: HashMap::default(),
            global_of: inputs
                .iter()
                .map(|i| vec![NO_GLOBAL; i.cubin.symbols.len()])
                .collect(),
            resolved: Vec::new(),
            funcs: Vec::new(),
            func_of_text: HashMap::default(),
            func_at: inputs
                .iter()
                .map(|i| vec![NO_FUNC; i.cubin.symbols.len()])
                .collect(),
            live: Vec::new(),
            placed: HashMap::default(),
            out: Vec::new(),
            by_name: HashMap::default(),
            section_symbol: Vec::new(),
            shared_offset: HashMap::default(),
            dynamic_offset: HashMap::default(),
            symbols: Vec::new(),
            sym_of: HashMap::default(),
            section_sym_index: HashMap::default(),
            kept_relocs: Vec::new(),
            leading_strings: Vec::new(),
            callgraph_id: 0,
            prototype_id: None,
            address_taken: HashSet::default(),
            taken_by_prototype: Vec::new(),
            mercury_layout: !opts.relocatable && opts.target.is_some_and(|t| t.sm >= 100),
            merc_symbols: None,
            frames: HashMap::default(),
            shared_home: HashMap::default(),
            shared_reserve: 0,
            debug_shared_holds_variables: false,
            props: HashMap::default(),
            externs: Vec::new(),
            extern_refs: Vec::new(),
            extern_slots: Vec::new(),
            driver_functions: HashSet::default(),
        }
    }

    /// Debug links, and `--preserve-relocs` links (nvlink lays them out the same way):
    /// every function kept, shared variables' symbols kept.
    fn keeps_all(&self) -> bool {
        self.opts.debug || self.opts.preserve_relocs
    }

    fn sym(&self, k: SymKey) -> &'a Symbol {
        &self.inputs[k.0].cubin.symbols[k.1]
    }
    fn origin(&self, i: usize) -> &'a str {
        &self.inputs[i].cubin.origin
    }

    /// Function `f`'s `.nv.info.<fn>` section in its input, if it has one.
    fn info_section_of(&self, f: usize) -> Option<&'a Section> {
        let c = &self.inputs[self.funcs[f].key.0].cubin;
        let text = self.funcs[f].text;
        c.sections.iter().find(|s| {
            s.ty == SHT_CUDA_INFO && s.info as usize == text && s.flags & SHF_INFO_LINK != 0
        })
    }

    /// The register count ptxas recorded for a function (global REGCOUNT record).
    fn regcount(&self, k: SymKey) -> u32 {
        self.sym_value(k, info::REGCOUNT)
    }

    /// The value of a function's global `.nv.info` record `attr` (0 without one).
    fn sym_value(&self, (i, s): SymKey, attr: u8) -> u32 {
        let v = &self.parsed[i].sym_values;
        v.binary_search_by_key(&(attr, s), |&(a, x, _)| (a, x as usize))
            .map_or(0, |at| v[at].2)
    }

    /// The entries of relocation section `ri` of input `i`.
    fn relocs(&self, i: usize, ri: usize) -> Result<&'a [Reloc]> {
        self.parsed[i].relocs[ri].as_deref().map_err(Clone::clone)
    }

    // ---- resolution -------------------------------------------------------------

    fn resolve(&mut self) -> Result<()> {
        for i in 0..self.inputs.len() {
            let errors_before = self.diag.error_count();
            let c = &self.inputs[i].cubin;
            let order: Vec<usize> = (1..c.symbols.len())
                .filter(|&s| c.symbols[s].bind != STB_LOCAL && c.symbols[s].ty != STT_SECTION)
                .filter(|&s| kind(&c.symbols[s]) == Kind::Function)
                .chain(
                    (1..c.symbols.len())
                        .filter(|&s| c.symbols[s].bind != STB_LOCAL)
                        .filter(|&s| kind(&c.symbols[s]) != Kind::Function),
                )
                .collect();
            for s in order {
                self.resolve_one((i, s));
            }
            if self.diag.error_count() > errors_before {
                return Err(Error::fatal("merge_elf failed"));
            }
        }
        Ok(())
    }

    fn resolve_one(&mut self, k: SymKey) {
        let s = self.sym(k);
        let id = match self.global_ids.entry(s.name.as_str()) {
            std::collections::hash_map::Entry::Occupied(e) => *e.get(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(self.globals.len() as u32);
                self.global_of[k.0][k.1] = self.globals.len() as u32;
                self.globals.push(Global {
                    name: s.name.as_str(),
                    def: s.defined().then_some(k),
                    first: k,
                });
                return;
            }
        };
        self.global_of[k.0][k.1] = id;
        let g = &self.globals[id as usize];
        let (first, def) = (g.first, g.def);
        let here = self.origin(k.0);
        // size agreement for data
        if kind(s) == Kind::Data {
            let prev = def.unwrap_or(first);
            let p = self.sym(prev);
            if p.size != 0 && s.size != 0 && p.size != s.size && !is_table_symbol(&s.name) {
                self.diag.error(&format!(
                    "Size doesn't match for '{}' in '{}', first specified in '{}'",
                    s.name,
                    here,
                    self.origin(prev.0)
                ));
            }
            if (p.other ^ s.other) & STO_MANAGED != 0 {
                self.diag.error(&format!(
                    "Managed attribute doesn't match for '{}' in '{}', first specified in '{}'",
                    s.name,
                    here,
                    self.origin(prev.0)
                ));
            }
        }
        if !s.defined() {
            return;
        }
        let Some(d) = def else {
            self.globals[id as usize].def = Some(k);
            return;
        };
        let old = self.sym(d);
        let replace = match (old.bind == STB_WEAK, s.bind == STB_WEAK) {
            (false, false) => {
                self.diag.error(&format!(
                    "Multiple definition of '{}' in '{}', first defined in '{}'",
                    s.name,
                    here,
                    self.origin(d.0)
                ));
                false
            }
            (true, false) => true,
            (false, true) => false,
            (true, true) => kind(s) == Kind::Function && self.regcount(k) < self.regcount(d),
        };
        if replace {
            self.globals[id as usize].def = Some(k);
        }
    }

    /// The definition a symbol of an input stands for: itself when local or chosen,
    /// the chosen definition of its name when global.
    fn target(&self, k: SymKey) -> Option<SymKey> {
        self.resolved[k.0][k.1].0
    }

    /// The function a symbol defines (as the chosen definition), if any.
    fn func_defined_by(&self, (i, s): SymKey) -> Option<usize> {
        match self.func_at[i][s] {
            NO_FUNC => None,
            f => Some(f as usize),
        }
    }

    /// The function a symbol of an input stands for, if it is one.
    fn func_of(&self, k: SymKey) -> Option<usize> {
        self.target(k).and_then(|t| self.func_defined_by(t))
    }

    /// The symbol a global name stands for in the output: its chosen definition, else
    /// its first reference.
    fn representative(&self, k: SymKey) -> SymKey {
        self.resolved[k.0][k.1].1
    }

    /// Fills `resolved` once the definitions are chosen.
    fn settle(&mut self) {
        self.resolved = (0..self.inputs.len())
            .map(|i| {
                self.inputs[i]
                    .cubin
                    .symbols
                    .iter()
                    .enumerate()
                    .map(|(s, sym)| {
                        if sym.bind == STB_LOCAL {
                            (sym.defined().then_some((i, s)), (i, s))
                        } else {
                            match self.globals.get(self.global_of[i][s] as usize) {
                                Some(g) => (g.def, g.def.unwrap_or(g.first)),
                                None => (None, (i, s)),
                            }
                        }
                    })
                    .collect()
            })
            .collect();
    }

    // ---- functions and reachability ---------------------------------------------

    fn functions(&mut self) -> Result<()> {
        // each input's chosen definitions, in parallel, numbered in input order
        let found: Vec<Result<Vec<Func>>> = (0..self.inputs.len())
            .into_par_iter()
            .map(|i| self.input_functions(i))
            .collect();
        for list in found {
            for func in list? {
                let f = self.funcs.len();
                self.func_of_text.insert((func.key.0, func.text), f);
                self.func_at[func.key.0][func.key.1] = f as u32;
                self.funcs.push(func);
            }
        }
        // edges: relocations in a function's sections (in parallel, per function)
        let edges: Vec<Result<(BTreeSet<usize>, BTreeSet<SymKey>)>> = (0..self.funcs.len())
            .into_par_iter()
            .map(|f| self.relocation_edges(f))
            .collect();
        for (f, e) in edges.into_iter().enumerate() {
            (self.funcs[f].callees, self.funcs[f].shared) = e?;
        }
        // Call-graph entries: direct calls (groups 1 and 4), and for indirect calls the
        // functions whose address is taken (2) and the callers (3), by prototype; an
        // indirect call of prototype P may reach every function of prototype P whose
        // address is taken anywhere in the program.
        let mut taken: Vec<(String, usize)> = Vec::new();
        let mut callers: Vec<(String, usize)> = Vec::new();
        for i in 0..self.inputs.len() {
            let c = &self.inputs[i].cubin;
            for (a, b, group) in callgraph_entries(c)? {
                let Some(fa) = self.func_of((i, a as usize)) else {
                    continue;
                };
                match group {
                    1 | 4 => {
                        let fb = usize::try_from(b)
                            .ok()
                            .filter(|&b| b < c.symbols.len())
                            .and_then(|b| self.func_of((i, b)));
                        match fb {
                            Some(fb) if fb != fa => {
                                self.funcs[fa].callees.insert(fb);
                            }
                            Some(_) if group == 1 => self.funcs[fa].self_call = true,
                            _ => {}
                        }
                    }
                    2 | 3 => {
                        if let Some(p) = strtab_string(c, b) {
                            if group == 2 { &mut taken } else { &mut callers }.push((p, fa));
                        }
                    }
                    _ => {}
                }
            }
        }
        let mut taken_of: HashMap<&str, Vec<usize>> = HashMap::default();
        for (q, f) in &taken {
            taken_of.entry(q.as_str()).or_default().push(*f);
        }
        for (p, caller) in &callers {
            for f in taken_of.get(p.as_str()).into_iter().flatten() {
                if caller != f {
                    self.funcs[*caller].callees.insert(*f);
                } else {
                    self.funcs[*caller].self_call = true;
                }
            }
        }
        self.address_taken = taken.iter().map(|(_, f)| *f).collect();
        let mut seen = HashSet::default();
        taken.retain(|t| seen.insert(t.clone()));
        self.taken_by_prototype = taken;
        Ok(())
    }

    /// The functions input `i` defines for the program (its chosen definitions), without
    /// their edges.
    fn input_functions(&self, i: usize) -> Result<Vec<Func>> {
        let c = &self.inputs[i].cubin;
        let mut out = Vec::new();
        for s in 1..c.symbols.len() {
            let sym = &c.symbols[s];
            if sym.ty != STT_FUNC || !sym.defined() || self.target((i, s)) != Some((i, s)) {
                continue;
            }
            let text = sym.shndx as usize;
            let barriers = function_info(c, text)?
                .iter()
                .find(|r| r.attr == info::NUM_BARRIERS)
                .map_or(0, |r| (r.value & 0xFF) as u32);
            out.push(Func {
                key: (i, s),
                text,
                entry: sym.is_entry(),
                regs: self.sym_value((i, s), info::REGCOUNT),
                frame: self.sym_value((i, s), info::FRAME_SIZE),
                barriers,
                callees: BTreeSet::new(),
                self_call: false,
                shared: BTreeSet::new(),
            });
        }
        Ok(out)
    }

    /// What function `f`'s relocations refer to: the functions it calls (itself left
    /// out) and the shared variables it uses.
    fn relocation_edges(&self, f: usize) -> Result<(BTreeSet<usize>, BTreeSet<SymKey>)> {
        let (i, _) = self.funcs[f].key;
        let c = &self.inputs[i].cubin;
        let (mut callees, mut shared) = (BTreeSet::new(), BTreeSet::new());
        for (ri, rs) in c.sections.iter().enumerate() {
            if !matches!(rs.ty, SHT_RELA | SHT_REL) || rs.info as usize != self.funcs[f].text {
                continue;
            }
            for r in self.relocs(i, ri)? {
                let sk = (i, r.sym as usize);
                let sym = self.sym(sk);
                if sym.other & STO_SHARED != 0 && sym.ty != STT_FUNC {
                    // (an `extern` array no input defines: its name's first reference)
                    shared.insert(self.representative(sk));
                    continue;
                }
                if let Some(g) = self.func_of(sk)
                    && g != f
                {
                    callees.insert(g);
                }
            }
        }
        Ok((callees, shared))
    }

    fn reach(&mut self) {
        let n = self.funcs.len();
        let all = self.opts.relocatable || self.keeps_all();
        self.live = vec![all; n];
        if all {
            return;
        }
        let kept = |m: &Self, f: usize| {
            let (i, s) = m.funcs[f].key;
            m.inputs[i].system
                || m.opts
                    .kernels
                    .as_ref()
                    .is_none_or(|k| k.keeps_kernel(&m.inputs[i].cubin.symbols[s].name))
        };
        let mut stack: Vec<usize> = (0..n)
            .filter(|&f| self.funcs[f].entry && kept(self, f))
            .collect();
        // functions whose address is stored in data
        for i in 0..self.inputs.len() {
            let c = &self.inputs[i].cubin;
            for (ri, rs) in c.sections.iter().enumerate() {
                if !matches!(rs.ty, SHT_RELA | SHT_REL) {
                    continue;
                }
                let Some(t) = c.sections.get(rs.info as usize) else {
                    continue;
                };
                if t.flags & SHF_ALLOC == 0 || t.flags & SHF_EXECINSTR != 0 {
                    continue;
                }
                for r in self.relocs(i, ri).unwrap_or_default() {
                    if let Some(f) = self.func_of((i, r.sym as usize)) {
                        stack.push(f);
                    }
                }
            }
        }
        while let Some(f) = stack.pop() {
            if std::mem::replace(&mut self.live[f], true) {
                continue;
            }
            stack.extend(self.funcs[f].callees.iter().copied());
        }
    }

    fn undefined(&mut self) -> Result<()> {
        if self.opts.relocatable {
            return Ok(());
        }
        let unresolved: Vec<(&str, usize)> = self
            .globals
            .iter()
            .filter(|g| {
                !(g.def.is_some()
                    || is_table_symbol(g.name)
                    || is_syscall(g.name)
                    || is_dynamic_shared(self.sym(g.first))
                    || kind(self.sym(g.first)) == Kind::Data && self.opts.allow_undefined_globals)
            })
            .map(|g| (g.name, g.first.0))
            .collect();
        // (the walk over every relocation only when some name has no definition)
        if unresolved.is_empty() {
            return Ok(());
        }
        let (first_use, used) = self.undefined_uses();
        let mut missing = Vec::new();
        for (name, listed) in unresolved {
            // a name only dead code uses is no error; one nothing uses is (nvlink reports
            // a renamed weak `__UDT_END` in the input that lists it)
            let reported = first_use
                .get(name)
                .copied()
                .or((!used.contains(name)).then_some(listed));
            if let Some(i) = reported {
                let origin = self.origin(i);
                // nvlink's text, then which inputs `lto.cubin` was compiled from
                let from = match (origin == "lto.cubin", self.opts.lto_from.is_empty()) {
                    (true, false) => format!(
                        "\n  lto.cubin: what libNVVM compiled from the IR of '{}'",
                        self.opts.lto_from.join("', '")
                    ),
                    _ => String::new(),
                };
                missing.push(format!(
                    "Undefined reference to '{name}' in '{origin}'{from}"
                ));
            }
        }
        for m in &missing {
            self.diag.error(m);
        }
        if !missing.is_empty() {
            // the messages are printed; nvlink adds nothing and exits 255
            return Err(Error::error(""));
        }
        Ok(())
    }

    /// For every name an input leaves undefined, the first input whose live code or
    /// allocated data refers to it; and every undefined name any relocation refers to.
    fn undefined_uses(&self) -> (HashMap<&'a str, usize>, HashSet<&'a str>) {
        let mut first = HashMap::default();
        let mut used = HashSet::default();
        for i in 0..self.inputs.len() {
            let c = &self.inputs[i].cubin;
            for (ri, rs) in c.sections.iter().enumerate() {
                if !matches!(rs.ty, SHT_RELA | SHT_REL) {
                    continue;
                }
                let Some(target) = c.sections.get(rs.info as usize) else {
                    continue;
                };
                let live = match self.func_of_text.get(&(i, rs.info as usize)) {
                    Some(&f) => self.live[f],
                    None => target.flags & SHF_ALLOC != 0 && target.flags & SHF_EXECINSTR == 0,
                };
                for r in self.relocs(i, ri).unwrap_or_default() {
                    let s = &c.symbols[r.sym as usize];
                    if !s.defined() {
                        used.insert(s.name.as_str());
                        if live {
                            first.entry(s.name.as_str()).or_insert(i);
                        }
                    }
                }
            }
        }
        (first, used)
    }

    // ---- sections -----------------------------------------------------------------

    /// The function an input section belongs to (its code, info, parameter bank,
    /// relocations), if any.
    fn owner(&self, i: usize, sec: usize) -> Option<usize> {
        let c = &self.inputs[i].cubin;
        let s = c.sections.get(sec)?;
        if let Some(&f) = self.func_of_text.get(&(i, sec)) {
            return Some(f);
        }
        if s.flags & SHF_EXECINSTR != 0 && s.name.starts_with(".text.") {
            return None; // code of a discarded definition
        }
        if s.flags & SHF_INFO_LINK != 0 || matches!(s.ty, SHT_RELA | SHT_REL) {
            return self.func_of_text.get(&(i, s.info as usize)).copied();
        }
        None
    }

    fn is_dropped_function_section(&self, i: usize, sec: usize) -> bool {
        let c = &self.inputs[i].cubin;
        let Some(s) = c.sections.get(sec) else {
            return false;
        };
        let code_of = |t: usize| {
            c.sections
                .get(t)
                .is_some_and(|t| t.flags & SHF_EXECINSTR != 0 && t.name.starts_with(".text"))
        };
        if s.flags & SHF_EXECINSTR != 0 && s.name.starts_with(".text") {
            return self
                .func_of_text
                .get(&(i, sec))
                .is_none_or(|&f| !self.live[f]);
        }
        if (s.flags & SHF_INFO_LINK != 0 || matches!(s.ty, SHT_RELA | SHT_REL))
            && code_of(s.info as usize)
        {
            return self
                .func_of_text
                .get(&(i, s.info as usize))
                .is_none_or(|&f| !self.live[f]);
        }
        false
    }

    fn new_section(&mut self, s: OutSection, symbol: bool) -> usize {
        self.out.push(s);
        self.section_symbol.push(symbol);
        self.out.len() - 1
    }

    fn sections(&mut self) -> Result<()> {
        let exec = !self.opts.relocatable;
        for i in 0..self.inputs.len() {
            let c = &self.inputs[i].cubin;
            let has_symbol: HashSet<usize> = c
                .symbols
                .iter()
                .filter(|s| s.ty == STT_SECTION)
                .map(|s| s.shndx as usize)
                .collect();
            for (si, s) in c.sections.iter().enumerate().skip(1) {
                let skip = matches!(
                    s.ty,
                    SHT_SYMTAB | SHT_STRTAB | SHT_RELA | SHT_REL | SHT_NOTE
                ) || matches!(
                    s.ty,
                    SHT_CUDA_CALLGRAPH | SHT_CUDA_PROTOTYPE | SHT_CUDA_COMPAT | SHT_CUDA_RELOCINFO
                ) || s.ty == SHT_CUDA_INFO
                    || (exec && s.ty == SHT_CUDA_SHARED)
                    || s.name.starts_with(".nv.merc.")
                    || s.name.starts_with(".nv.capmerc.");
                if skip || self.is_dropped_function_section(i, si) {
                    continue;
                }
                let (ty, flags) = out_type(s, exec);
                if self.owner(i, si).is_some() {
                    let mut o = OutSection::new(&s.name, ty, flags);
                    o.align = s.align;
                    o.entsize = s.entsize;
                    o.link = if s.link != 0 {
                        Ref::Symtab
                    } else {
                        Ref::Raw(0)
                    };
                    // (written from the input's mapping, with the relocations' edits)
                    if s.has_bytes() {
                        o.source = Some(c.section_data(s));
                    }
                    o.mem_size = s.size;
                    let id = self.new_section(o, has_symbol.contains(&si));
                    self.placed.insert((i, si), (id, 0));
                    continue;
                }
                let key = (s.name.as_str(), s.ty);
                let id = match self.by_name.get(&key) {
                    Some(&id) => id,
                    None => {
                        let mut o = OutSection::new(&s.name, ty, flags);
                        o.entsize = s.entsize;
                        let id = self.new_section(o, false);
                        self.by_name.insert(key, id);
                        id
                    }
                };
                if has_symbol.contains(&si) {
                    self.section_symbol[id] = true;
                }
                let o = &mut self.out[id];
                o.align = o.align.max(s.align.max(1));
                let a = s.align.max(1);
                // sm_100+: without the entries of removed functions
                let frame = if self.mercury_layout && s.name == ".debug_frame" {
                    let base = (o.data.len() as u64).next_multiple_of(a);
                    self.pruned_frame(i, si, base)
                } else {
                    None
                };
                let o = &mut self.out[id];
                let at = if s.has_bytes() {
                    while !(o.data.len() as u64).is_multiple_of(a) {
                        o.data.push(0);
                    }
                    let at = o.data.len() as u64;
                    match frame {
                        Some(f) => {
                            o.data.extend_from_slice(&f.data);
                            self.frames.insert((i, si), f);
                        }
                        None => o.data.extend_from_slice(c.bytes(s)),
                    }
                    o.mem_size = o.data.len() as u64;
                    at
                } else {
                    let at = o.mem_size.next_multiple_of(a);
                    o.mem_size = at + s.size;
                    at
                };
                self.placed.insert((i, si), (id, at));
            }
        }
        // text and per-function sections point at their function's code
        for i in 0..self.inputs.len() {
            let c = &self.inputs[i].cubin;
            for (si, s) in c.sections.iter().enumerate() {
                let Some(&(id, _)) = self.placed.get(&(i, si)) else {
                    continue;
                };
                if s.info != 0
                    && s.flags & SHF_INFO_LINK != 0
                    && let Some(&(t, _)) = self.placed.get(&(i, s.info as usize))
                {
                    self.out[id].info = Ref::Section(t);
                }
            }
        }
        Ok(())
    }

    // ---- shared memory ------------------------------------------------------------

    fn shared(&mut self) {
        if self.opts.relocatable {
            return;
        }
        // Every shared variable gets one offset, the same in every kernel window that
        // holds it; variables no kernel holds together may overlap. What nvlink 13.5
        // does, as observed (DESIGN.md, "Shared memory"):
        // 0. The variables of the inputs other than kernels' own locals (globals, device
        //    functions' locals, `extern` arrays, those no code refers to), in input
        //    order, are list-sorted by size, largest first, ties to the second list
        //    (`list_sort`).
        // 1. Those not held by exactly one kernel — held by several, or by none (those
        //    of removed functions) — in that order go into slots: a variable joins the
        //    first slot holding no variable that shares a kernel with it and where it
        //    ends before the next slot starts, at the slot's start; a new slot opens
        //    after the last one when there is none. Slots start where the one before
        //    ends, aligned as their variables ask, worked out once all have joined.
        // 2. Each kernel's own variables — its function's locals in input order, then
        //    the others in the order of 0 — are list-sorted by alignment (largest
        //    first), then size (smallest first), ties to the first list, and follow
        //    the end of everything the kernel holds from step 1.
        // 3. The size-0 `extern` arrays follow everything their kernels hold.
        // sm_90 and newer reserve 1 KiB at the end of every kernel's window.
        let sm = self.opts.target.map_or(0, |t| t.sm);
        let reserve = if self.opts.disable_smem_reservation || sm < 90 {
            0
        } else {
            0x400
        };
        let align = |m: &Self, k: SymKey| m.sym(k).value.max(1);
        let kernels: Vec<usize> = (0..self.funcs.len())
            .filter(|&f| self.live[f] && self.funcs[f].entry)
            .collect();
        // variable → the kernels (positions in `kernels`) whose call tree uses it;
        // every shared variable some function refers to is there, held or not (the
        // variables of removed functions take room; those no code refers to do not)
        let mut held: BTreeMap<SymKey, Vec<usize>> = BTreeMap::new();
        for func in &self.funcs {
            for &v in &func.shared {
                held.entry(v).or_default();
            }
        }
        let trees: Vec<Vec<usize>> = kernels
            .par_iter()
            .map(|&k| self.reachable_from(k))
            .collect();
        // function → the kernels (positions in `kernels`) that reach it
        let mut kernels_of: Vec<Vec<usize>> = vec![Vec::new(); self.funcs.len()];
        for (ki, tree) in trees.iter().enumerate() {
            let vars: BTreeSet<SymKey> = tree
                .iter()
                .flat_map(|&g| self.funcs[g].shared.iter().copied())
                .collect();
            for v in vars {
                held.entry(v).or_default().push(ki);
            }
            for &g in tree {
                kernels_of[g].push(ki);
            }
        }
        let size = |m: &Self, v: SymKey| m.sym(v).size;
        let mut at: BTreeMap<SymKey, u64> = BTreeMap::new();
        // per kernel: the end of what it holds so far, and the largest alignment
        let mut win: Vec<(Option<u64>, u64)> = vec![(None, 4); kernels.len()];
        // a kernel's window now holds something ending at `end`, aligned to `a`
        let hold = |w: &mut (Option<u64>, u64), end: u64, a: u64| {
            w.0 = Some(w.0.unwrap_or(0).max(end));
            w.1 = w.1.max(a);
        };
        let place = |m: &Self,
                     at: &mut BTreeMap<SymKey, u64>,
                     win: &mut [(Option<u64>, u64)],
                     v: SymKey,
                     o: u64| {
            at.insert(v, o);
            for &k in &held[&v] {
                hold(&mut win[k], o + size(m, v), align(m, v));
            }
        };
        // 0. the order steps 1 and 2 take the variables in: every shared variable of
        //    the inputs (those no code refers to included, a global once: where it is
        //    defined, else its first reference) but kernels' own locals
        let shared = self.sorted_shared_candidates();
        let shared = list_sort(&shared, &|&a, &b| size(self, a) > size(self, b), false);
        let shared: Vec<SymKey> = shared
            .into_iter()
            .filter(|v| held.contains_key(v))
            .collect();
        // 1. slots: (the variables, size, alignment, the kernels holding them); where
        //    each starts is worked out from the ones before it (the end of the one
        //    before, aligned as its variables ask), so a variable joining a slot with a
        //    larger alignment moves that slot and the ones after it
        struct Slot {
            vars: Vec<SymKey>,
            size: u64,
            align: u64,
            kernels: BTreeSet<usize>,
        }
        let starts = |slots: &[Slot]| -> Vec<u64> {
            let mut end = 0u64;
            slots
                .iter()
                .map(|s| {
                    let at = end.next_multiple_of(s.align);
                    end = at + s.size;
                    at
                })
                .collect()
        };
        let mut slots: Vec<Slot> = Vec::new();
        let first = shared
            .iter()
            .copied()
            .filter(|v| held[v].len() != 1 && self.sym(*v).size > 0);
        for v in first {
            let ks = &held[&v];
            let (a, n) = (align(self, v), size(self, v));
            let at = starts(&slots);
            // (a slot it may join: none of its variables shares a kernel with this one,
            // and this one ends before the next slot starts)
            let free = |j: usize| {
                !ks.iter().any(|k| slots[j].kernels.contains(k))
                    && (j + 1 == slots.len()
                        || at[j].next_multiple_of(a.max(slots[j].align)) + n <= at[j + 1])
            };
            match (0..slots.len()).find(|&j| free(j)) {
                Some(j) => {
                    let s = &mut slots[j];
                    s.vars.push(v);
                    s.size = s.size.max(n);
                    s.align = s.align.max(a);
                    s.kernels.extend(ks);
                }
                None => slots.push(Slot {
                    vars: vec![v],
                    size: n,
                    align: a,
                    kernels: ks.iter().copied().collect(),
                }),
            }
        }
        for (s, o) in slots.iter().zip(starts(&slots)) {
            for &v in &s.vars {
                place(self, &mut at, &mut win, v, o);
            }
            // (a kernel's window is as aligned as its slots, not only its variables)
            for &k in &s.kernels {
                win[k].1 = win[k].1.max(s.align);
            }
        }
        // 2. each kernel's own variables: its function's locals, then the others
        let mut own: Vec<Vec<SymKey>> = vec![Vec::new(); kernels.len()];
        let locals = held.keys().filter(|&&v| self.is_kernel_local(v));
        for &v in locals.chain(&shared) {
            if let [k] = held[&v].as_slice()
                && self.sym(v).size > 0
            {
                own[*k].push(v);
            }
        }
        let before = |&a: &SymKey, &b: &SymKey| {
            (align(self, a), std::cmp::Reverse(size(self, a)))
                > (align(self, b), std::cmp::Reverse(size(self, b)))
        };
        for (ki, vs) in own.into_iter().enumerate() {
            for v in list_sort(&vs, &before, true) {
                let o = win[ki].0.unwrap_or(0).next_multiple_of(align(self, v));
                place(self, &mut at, &mut win, v, o);
            }
        }
        // 3. extern arrays: an offset per function referring to one, after everything
        //    the kernels reaching that function hold, once the windows of the kernels
        //    that share such a function have grown to the furthest of their ends (until
        //    none grows, over all arrays); a kept function no kernel reaches sees -1.
        //    A debug link gives each array one offset, the furthest.
        //    When step 1 placed anything, every kernel's window holds the dynamic
        //    arrays at offset 0 or after (read off nvlink: a kernel holding nothing
        //    gets an empty window, and every window their alignment; without a slot
        //    only the kernels reaching one do). One only removed functions refer to
        //    sits at 0.
        if !slots.is_empty() {
            for (&v, ks) in &held {
                if !is_dynamic_shared(self.sym(v)) {
                    continue;
                }
                let a = align(self, v);
                for w in win.iter_mut() {
                    hold(w, 0, a);
                }
                if ks.is_empty() {
                    at.insert(v, 0);
                }
            }
        }
        // A kept function no kernel reaches (its address is taken) sees a dynamic array
        // at offset -1; a debug link, which keeps them all, puts an array only they use
        // at 0.
        if self.keeps_all() {
            for (&v, ks) in &held {
                if ks.is_empty() && is_dynamic_shared(self.sym(v)) {
                    at.entry(v).or_insert(0);
                }
            }
        } else {
            let unreached: Vec<(usize, SymKey)> = (0..self.funcs.len())
                .filter(|&f| self.live[f] && kernels_of[f].is_empty())
                .flat_map(|f| self.funcs[f].shared.iter().map(move |&v| (f, v)))
                .filter(|&(_, v)| is_dynamic_shared(self.sym(v)))
                .collect();
            for key in unreached {
                self.dynamic_offset.insert(key, u64::MAX);
            }
        }
        let mut open: Vec<SymKey> = held
            .iter()
            .filter(|(v, ks)| !ks.is_empty() && self.sym(**v).size == 0)
            .map(|(v, _)| *v)
            .collect();
        open.sort_by_key(|&v| (std::cmp::Reverse(align(self, v)), v));
        // (array, its alignment, the functions kernels reach that refer to it, in
        // function order: one pass over the functions)
        let mut users: Vec<(SymKey, u64, Vec<usize>)> = open
            .iter()
            .map(|&v| (v, align(self, v), Vec::new()))
            .collect();
        let user_of: HashMap<SymKey, usize> =
            open.iter().enumerate().map(|(u, &v)| (v, u)).collect();
        for f in (0..self.funcs.len()).filter(|&f| !kernels_of[f].is_empty()) {
            for v in &self.funcs[f].shared {
                if let Some(&u) = user_of.get(v) {
                    users[u].2.push(f);
                }
            }
        }
        let end_of = |win: &[(Option<u64>, u64)], ks: &[usize], a: u64| {
            ks.iter()
                .filter_map(|&k| win[k].0)
                .max()
                .unwrap_or(0)
                .next_multiple_of(a)
        };
        // the windows of kernels sharing a function that uses an array grow to the
        // furthest of their ends, until none grows (over all arrays: growth for one
        // moves where another starts)
        loop {
            let mut grown = false;
            for (_, a, fs) in &users {
                for &f in fs {
                    let o = end_of(&win, &kernels_of[f], *a);
                    for &k in &kernels_of[f] {
                        grown |= win[k].0.is_none_or(|e| e < o);
                        hold(&mut win[k], o, *a);
                    }
                }
            }
            if !grown {
                break;
            }
        }
        // a debug link gives each array one offset, the furthest
        for (v, a, fs) in users {
            let mut furthest = 0;
            for f in fs {
                let o = end_of(&win, &kernels_of[f], a);
                if !self.keeps_all() {
                    self.dynamic_offset.insert((f, v), o);
                }
                furthest = furthest.max(o);
            }
            if self.keeps_all() {
                place(self, &mut at, &mut win, v, furthest);
            } else {
                at.insert(v, furthest);
            }
        }
        let mut window_of: Vec<Option<usize>> = vec![None; kernels.len()];
        for (ki, &f) in kernels.iter().enumerate() {
            let (Some(window), max_align) = win[ki] else {
                continue;
            };
            let (i, s) = self.funcs[f].key;
            let name = format!(".nv.shared.{}", self.inputs[i].cubin.symbols[s].name);
            let mut o = OutSection::new(&name, SHT_NOBITS, SHF_WRITE | SHF_ALLOC | SHF_INFO_LINK);
            o.align = max_align;
            o.mem_size = window + reserve;
            if let Some(&(t, _)) = self.placed.get(&(i, self.funcs[f].text)) {
                o.info = Ref::Section(t);
            }
            // (a window holding nothing has no section symbol in nvlink's sm_100+
            // layout, nor where there is no reservation: the window is empty)
            let symbol = window > 0 || (reserve > 0 && !self.mercury_layout);
            window_of[ki] = Some(self.new_section(o, symbol));
        }
        // dynamic shared arrays: an empty `.nv_debug.shared` as aligned as the strictest
        let dynamic = held
            .keys()
            .filter(|&&v| is_dynamic_shared(self.sym(v)))
            .map(|&v| align(self, v))
            .max();
        if self.keeps_all() {
            // a debug link keeps the shared variables' symbols: in the window of the one
            // kernel that holds one, else in `.nv_debug.shared` (a dynamic array there,
            // taking no room)
            let mut debug_end = dynamic.map(|_| 0);
            for (&v, ks) in &held {
                let Some(&o) = at.get(&v) else { continue };
                let dynamic = is_dynamic_shared(self.sym(v));
                let home = match ks.as_slice() {
                    [k] if !dynamic => window_of[*k],
                    _ => None,
                };
                if home.is_none() && !dynamic {
                    debug_end = Some(debug_end.unwrap_or(0).max(o + size(self, v)));
                    self.debug_shared_holds_variables = true;
                }
                self.shared_home.insert(v, home);
            }
            if let Some(end) = debug_end {
                let mut o = OutSection::new(".nv_debug.shared", SHT_NOBITS, SHF_WRITE | SHF_ALLOC);
                o.align = dynamic.unwrap_or(4).max(4);
                o.mem_size = end + reserve;
                // (no section symbol when it is empty: dynamic arrays alone below sm_90)
                let symbol = o.mem_size > 0;
                let id = self.new_section(o, symbol);
                for home in self.shared_home.values_mut() {
                    home.get_or_insert(id);
                }
            }
        } else if let Some(a) = dynamic {
            // (as large as the reservation on sm_100+, empty before)
            let mut o = OutSection::new(".nv_debug.shared", SHT_NOBITS, SHF_WRITE | SHF_ALLOC);
            o.align = a;
            o.mem_size = if sm >= 100 { reserve } else { 0 };
            self.new_section(o, false);
        }
        // (a live function no kernel reaches — its address is taken — still needs its
        // variables' offsets)
        self.shared_offset = at.into_iter().collect();
        self.shared_reserve = reserve;
    }

    /// A kernel's own local: ptxas puts it in that kernel's `.nv.shared.` section (the
    /// kernel's function is all that refers to it).
    fn is_kernel_local(&self, (i, s): SymKey) -> bool {
        let c = &self.inputs[i].cubin;
        let sym = &c.symbols[s];
        sym.defined()
            && c.sections
                .get(sym.shndx as usize)
                .is_some_and(|sec| sec.name.starts_with(".nv.shared."))
    }

    /// The shared variables nvlink sorts first when it lays out shared memory (`shared`,
    /// step 0), in input order: all but kernels' own locals, a global once.
    fn sorted_shared_candidates(&self) -> Vec<SymKey> {
        (0..self.inputs.len())
            .flat_map(|i| (1..self.inputs[i].cubin.symbols.len()).map(move |s| (i, s)))
            .filter(|&k| {
                let sym = self.sym(k);
                sym.other & STO_SHARED != 0
                    && !matches!(sym.ty, STT_FUNC | STT_SECTION)
                    && self.representative(k) == k
                    && !self.is_kernel_local(k)
            })
            .collect()
    }

    /// `-r` output: the shared variables' symbols put in an order from which nvlink's
    /// sort, when it links the output, gives the order it gives them linking the inputs
    /// (where equal sizes tie, its sort depends on the positions). The sort's
    /// permutation depends only on the sizes at each position: the variables are
    /// placed where that permutation takes each of them to its place in the direct
    /// link's order, when locals stay among locals and globals among globals (else the
    /// order stays).
    fn order_shared_for_relink(&mut self) {
        let wanted = {
            let d = self.sorted_shared_candidates();
            list_sort(&d, &|&a, &b| self.sym(a).size > self.sym(b).size, false)
        };
        // where they are now, in symbol-table order
        let mut now: Vec<(usize, SymKey)> = wanted
            .iter()
            .filter_map(|&k| self.sym_of.get(&k).map(|&at| (at, k)))
            .collect();
        if now.is_empty() || now.len() != wanted.len() {
            return;
        }
        now.sort_unstable();
        let positions: Vec<usize> = (0..now.len()).collect();
        let size = |p: usize| self.sym(now[p].1).size;
        let sigma = list_sort(&positions, &|&a, &b| size(a) > size(b), false);
        let mut place = vec![(0, 0); now.len()];
        for (&p, &k) in sigma.iter().zip(&wanted) {
            place[p] = k;
        }
        let local = |k: SymKey| self.sym(k).bind == STB_LOCAL;
        if (0..now.len()).any(|p| local(place[p]) != local(now[p].1)) {
            return;
        }
        let old: Vec<OutSymbol> = now
            .iter()
            .map(|&(at, _)| self.symbols[at].clone())
            .collect();
        let from: HashMap<SymKey, usize> =
            now.iter().enumerate().map(|(p, &(_, k))| (k, p)).collect();
        for (p, &k) in place.iter().enumerate() {
            let at = now[p].0;
            self.symbols[at] = old[from[&k]].clone();
            self.sym_of.insert(k, at);
        }
    }

    /// `f` and the functions it calls, directly or not. Another kernel `f`'s code refers
    /// to is launched (dynamic parallelism), not called: its call tree is not `f`'s
    /// (nvlink gives the launching kernel none of its shared variables, barriers,
    /// registers or stack).
    fn reachable_from(&self, f: usize) -> Vec<usize> {
        let mut seen = vec![false; self.funcs.len()];
        let mut out = Vec::new();
        let mut stack = vec![f];
        while let Some(g) = stack.pop() {
            if (g == f || !self.funcs[g].entry) && !std::mem::replace(&mut seen[g], true) {
                out.push(g);
                stack.extend(self.funcs[g].callees.iter().copied());
            }
        }
        out.sort_unstable();
        out
    }

    // ---- symbols --------------------------------------------------------------------

    fn symbols(&mut self) {
        let exec = !self.opts.relocatable;
        // locals: section symbols, then local functions and data (in nvlink's sm_100+
        // layout the parameter banks' section symbols come last, after the globals, so
        // that the capsule-Mercury symbol table, which has none, numbers alike)
        self.section_symbols(false);
        for i in 0..self.inputs.len() {
            let c = &self.inputs[i].cubin;
            for (s, sym) in c.symbols.iter().enumerate().skip(1) {
                if sym.bind != STB_LOCAL || sym.ty == STT_SECTION || !sym.defined() {
                    if !exec && let Some(o) = devrt::relocatable_symbol(sym) {
                        self.symbols.push(o);
                    }
                    continue;
                }
                // shared variables are placed per kernel; `_param` marks the
                // parameter bank on sm_7x/sm_8x, `_SREG` the driver's part of the bank
                // of a kernel without parameters
                let bank_mark = sym.name == "_param" || sym.name == "_SREG";
                if exec && (sym.other & STO_SHARED != 0 || bank_mark) {
                    // (a --preserve-relocs link keeps the marks, as internal objects)
                    if bank_mark
                        && self.opts.preserve_relocs
                        && let Some(mut o) = self.out_symbol((i, s))
                    {
                        (o.ty, o.other) = (STT_OBJECT, STV_INTERNAL);
                        self.sym_of.insert((i, s), self.symbols.len());
                        self.symbols.push(o);
                        continue;
                    }
                    self.debug_shared_symbol((i, s));
                    continue;
                }
                if let Some(o) = self.out_symbol((i, s)) {
                    self.sym_of.insert((i, s), self.symbols.len());
                    self.symbols.push(o);
                }
            }
        }
        for gi in 0..self.globals.len() {
            let g = &self.globals[gi];
            let (name, k) = (g.name, g.def.unwrap_or(g.first));
            let s = self.sym(k);
            if exec && s.other & STO_SHARED != 0 && s.ty != STT_FUNC {
                // (a debug link lists it, as a local, where nvlink does: in global order)
                self.debug_shared_symbol(k);
                continue;
            }
            if exec && is_table_symbol(name) {
                continue;
            }
            if let Some(f) = self.func_defined_by(k)
                && !self.live[f]
            {
                continue;
            }
            // (a function no input defines stays while a live function's EXTERNS list
            // names it)
            if exec && !s.defined() && s.ty == STT_FUNC && !self.is_driver_function(k) {
                continue;
            }
            let o = if s.defined() {
                self.out_symbol(k)
            } else {
                Some(OutSymbol {
                    name: name.to_string(),
                    value: s.value,
                    size: s.size,
                    bind: STB_GLOBAL,
                    ty: if self.mercury_layout && name.starts_with(".nv.reservedSmem") {
                        STT_CUDA_OBJECT
                    } else if exec && s.ty == STT_CUDA_OBJECT {
                        STT_OBJECT
                    } else {
                        s.ty
                    },
                    other: if exec {
                        s.other & (STO_ENTRY | STO_MANAGED)
                    } else {
                        s.other
                    },
                    section: None,
                })
            };
            if let Some(o) = o {
                self.sym_of.insert(k, self.symbols.len());
                self.symbols.push(o);
            }
        }
        self.section_symbols(true);
        if !exec {
            self.order_shared_for_relink();
        }
    }

    /// Debug links keep the symbol of a shared variable at its offset in the window that
    /// holds it (`shared_home`), as a local unless it is a global in `.nv_debug.shared`.
    fn debug_shared_symbol(&mut self, k: SymKey) {
        let (Some(&Some(home)), Some(&o)) = (self.shared_home.get(&k), self.shared_offset.get(&k))
        else {
            return;
        };
        let sym = self.sym(k);
        // (a global one stays global in `.nv_debug.shared`; a dynamic array's value there
        // is its offset, after the reservation only when other variables are there too:
        // read off nvlink)
        let before_reserve = is_dynamic_shared(sym) && !self.debug_shared_holds_variables;
        let global = sym.bind != STB_LOCAL && self.out[home].name == ".nv_debug.shared";
        self.sym_of.insert(k, self.symbols.len());
        self.symbols.push(OutSymbol {
            name: sym.name.clone(),
            value: if before_reserve {
                o
            } else {
                o + self.shared_reserve
            },
            size: sym.size,
            bind: if global { STB_GLOBAL } else { STB_LOCAL },
            ty: STT_OBJECT,
            // (STV_INTERNAL in a --preserve-relocs link that is not a debug link)
            other: if self.opts.preserve_relocs && !self.opts.debug {
                STV_INTERNAL
            } else {
                0
            },
            section: Some(home),
        });
    }

    /// The section symbols, in section order: those of the parameter banks in nvlink's
    /// sm_100+ layout (`banks`), or all the others.
    fn section_symbols(&mut self, banks: bool) {
        for id in 0..self.out.len() {
            let bank = self.mercury_layout && self.out[id].name.starts_with(".nv.constant0");
            if self.section_symbol[id] && bank == banks {
                self.section_sym_index.insert(id, self.symbols.len());
                self.symbols.push(OutSymbol {
                    name: self.out[id].name.clone(),
                    value: 0,
                    size: 0,
                    bind: STB_LOCAL,
                    ty: STT_SECTION,
                    other: 0,
                    section: Some(id),
                });
            }
        }
    }

    fn out_symbol(&self, k: SymKey) -> Option<OutSymbol> {
        let exec = !self.opts.relocatable;
        let s = self.sym(k);
        if let Some(f) = self.func_defined_by(k)
            && !self.live[f]
        {
            return None;
        }
        // (a shared variable's value in a relocatable file is its alignment, as for a
        // common symbol: it stays as it is)
        let common = !exec && s.other & STO_SHARED != 0 && s.ty != STT_FUNC;
        let (section, value) = match self.placed.get(&(k.0, s.shndx as usize)) {
            Some(&(id, _)) if common => (Some(id), s.value),
            Some(&(id, at)) => (Some(id), s.value + at),
            None if s.other & STO_SHARED != 0 && !exec => (None, s.value),
            None => return None,
        };
        Some(OutSymbol {
            name: s.name.clone(),
            value,
            size: s.size,
            bind: if s.bind == STB_WEAK && exec && !s.defined() {
                STB_GLOBAL
            } else {
                s.bind
            },
            ty: if exec && s.ty == STT_CUDA_OBJECT {
                STT_OBJECT
            } else {
                s.ty
            },
            other: if exec {
                s.other & (STO_ENTRY | STO_MANAGED)
            } else {
                s.other
            },
            section,
        })
    }

    /// The output symbol an input symbol stands for.
    fn out_index(&self, k: SymKey) -> Option<usize> {
        let s = self.sym(k);
        if s.ty == STT_SECTION {
            let &(id, _) = self.placed.get(&(k.0, s.shndx as usize))?;
            return self.section_sym_index.get(&id).copied();
        }
        if s.bind == STB_LOCAL {
            return self.sym_of.get(&k).copied();
        }
        self.sym_of.get(&self.representative(k)).copied()
    }

    // ---- relocations ----------------------------------------------------------------

    fn relocations(&mut self) -> Result<()> {
        // decided per input in parallel (reading only), then gathered in input order
        let plans: Vec<Result<RelocPlan>> = (0..self.inputs.len())
            .into_par_iter()
            .map(|i| self.plan_relocations(i))
            .collect();
        // (output section, list) → entries in merge order
        let mut lists: Vec<((usize, RelocList), Vec<RelocEntry>)> = Vec::new();
        let mut index: HashMap<(usize, RelocList), usize> = HashMap::default();
        let mut patches: Vec<Vec<Vec<Patch>>> = vec![Vec::new(); self.out.len()];
        for plan in plans {
            let plan = plan?;
            for (out, group) in plan.patches {
                patches[out].push(group);
            }
            for (out, e) in plan.edits {
                (self.out[out].edits, self.out[out].edit_bytes) = e;
            }
            for (key, entries) in plan.kept {
                match index.get(&key) {
                    Some(&li) => lists[li].1.extend(entries),
                    None => {
                        index.insert(key, lists.len());
                        lists.push((key, entries));
                    }
                }
            }
        }
        // each output section patched on its own (in parallel), in input order
        self.out
            .par_iter_mut()
            .zip(patches.into_par_iter())
            .try_for_each(|(o, groups)| {
                groups.iter().flatten().try_for_each(|p| {
                    reloc::apply(&mut o.data, p.at, p.ty, p.value, p.bank, p.clear)
                })
            })?;
        // (encoded in parallel, one section each)
        let encoded: Vec<(usize, RelocList, Vec<u8>)> = lists
            .into_par_iter()
            .map(|((out_id, list_kind), list)| {
                let mut data = Vec::with_capacity(list.len() * 24);
                for &(off, sym, ty, addend) in list.iter().rev() {
                    data.extend_from_slice(&off.to_le_bytes());
                    data.extend_from_slice(&((sym as u64) << 32 | ty as u64).to_le_bytes());
                    if list_kind != RelocList::Rel {
                        data.extend_from_slice(&addend.to_le_bytes());
                    }
                }
                (out_id, list_kind, data)
            })
            .collect();
        self.kept_relocs.extend(encoded);
        Ok(())
    }

    /// What becomes of input `i`'s relocations: patched into the image now, or kept for
    /// the driver (or the next link), in order. What a relocation needs of its symbol is
    /// worked out once per symbol.
    fn plan_relocations(&self, i: usize) -> Result<RelocPlan> {
        let exec = !self.opts.relocatable;
        let c = &self.inputs[i].cubin;
        let mut facts: Vec<Option<SymFacts>> = vec![None; c.symbols.len()];
        let mut plan = RelocPlan::default();
        // patches of the sections written from the mapping, by output section
        let mut own: Vec<(usize, Vec<Patch>)> = Vec::new();
        for (ri, rs) in c.sections.iter().enumerate() {
            if !matches!(rs.ty, SHT_RELA | SHT_REL) {
                continue;
            }
            let Some(&(out_id, piece)) = self.placed.get(&(i, rs.info as usize)) else {
                continue;
            };
            let mut patches = Vec::new();
            let mut kept = Vec::new();
            let mut resolved = Vec::new();
            let target = &c.sections[rs.info as usize];
            let target_nonalloc = target.flags & SHF_ALLOC == 0;
            let frame = self.frames.get(&(i, rs.info as usize));
            // (the function whose code this is: dynamic shared arrays' offsets depend on it)
            let func = self.func_of_text.get(&(i, rs.info as usize)).copied();
            for r in self.relocs(i, ri)? {
                let k = (i, r.sym as usize);
                let sym = self.sym(k);
                let f = *facts[k.1].get_or_insert_with(|| self.sym_facts(k));
                let mut at = piece + r.offset;
                if let Some(f) = frame {
                    // a pruned `.debug_frame`: entries moved or gone, CIE pointers
                    // already written
                    match f.moved(r.offset) {
                        Some(o) if sym.ty != STT_SECTION => at = piece + o,
                        _ => continue,
                    }
                }
                if r.offset
                    .checked_add(reloc::extent(r.ty))
                    .is_none_or(|e| e > target.size)
                {
                    return Err(Error::fatal(format!(
                        "'{}': relocation {} against '{}' at offset {:#x} of '{}' is past the end of the section",
                        c.origin,
                        reloc::name(r.ty),
                        sym.name,
                        r.offset,
                        target.name
                    )));
                }
                if (r.ty == reloc::R_CUDA_YIELD_OPCODE9_0
                    || r.ty == reloc::R_CUDA_YIELD_CLEAR_PRED4_87)
                    && exec
                {
                    continue;
                }
                // In debug sections, entries about a definition another input's
                // replaced go with it.
                let loser = target_nonalloc && f.replaced;
                // (never kept: nvlink's -r output drops them too)
                if r.ty == reloc::R_CUDA_UNUSED_CLEAR32 || r.ty == reloc::R_CUDA_UNUSED_CLEAR64 {
                    if f.dead {
                        patches.push(Patch {
                            at,
                            ty: r.ty,
                            value: 0,
                            bank: 0,
                            clear: true,
                        });
                    }
                    continue;
                }
                if loser || f.dead || target_nonalloc && is_unplaced_label(sym) {
                    continue;
                }
                // link-time value: section offset of the target (a dynamic shared
                // array's as the function holding the relocation sees it)
                let (mut value, bank, mut resolvable_here) = f.value;
                if is_dynamic_shared(sym)
                    && let Some(func) = func
                    && let Some(&o) = self.dynamic_offset.get(&(func, self.representative(k)))
                {
                    (value, resolvable_here) = (o, true);
                }
                // (debug information keeps the load addresses of variables, constant
                // ones included, for the driver: nvlink keeps those relocations)
                let load_address = target_nonalloc && reloc::is_global_address(r.ty);
                let apply_now = resolvable_here
                    && (exec || f.in_nonalloc_section || devrt::linker_value(sym).is_some())
                    && reloc::resolvable(r.ty)
                    && !load_address;
                // (the addend as the next link sees it: a section symbol's piece added)
                let addend = r.addend + f.section_piece.unwrap_or(0) as i64;
                if apply_now {
                    patches.push(Patch {
                        at,
                        ty: r.ty,
                        value: (value as i64).wrapping_add(r.addend) as u64,
                        bank,
                        clear: false,
                    });
                    // (--preserve-relocs lists it as the next link would see it)
                    if self.opts.preserve_relocs
                        && let Some(sym_index) = f.out_index
                    {
                        resolved.push((at, sym_index as u32 + 1, r.ty, addend));
                    }
                    continue;
                }
                let Some(sym_index) = f.out_index else {
                    if is_table_symbol(&sym.name) {
                        continue;
                    }
                    return Err(Error::fatal(format!(
                        "'{}': relocation {} at offset {:#x} of '{}' refers to symbol '{}', which is not in the output",
                        c.origin,
                        reloc::name(r.ty),
                        r.offset,
                        target.name,
                        sym.name
                    )));
                };
                let ty = if exec { reloc::rewritten(r.ty) } else { r.ty };
                kept.push((at, sym_index as u32 + 1, ty, addend));
            }
            if !patches.is_empty() {
                match self.out[out_id].source {
                    Some(_) => match own.iter_mut().find(|(o, _)| *o == out_id) {
                        Some((_, list)) => list.extend(patches),
                        None => own.push((out_id, patches)),
                    },
                    None => plan.patches.push((out_id, patches)),
                }
            }
            if !kept.is_empty() {
                let list = match rs.ty {
                    SHT_RELA => RelocList::Rela,
                    _ => RelocList::Rel,
                };
                plan.kept.push(((out_id, list), kept));
            }
            if !resolved.is_empty() {
                plan.kept.push(((out_id, RelocList::Resolved), resolved));
            }
        }
        for (out_id, patches) in own {
            let src = self.out[out_id].source.as_deref().unwrap_or_default();
            plan.edits.push((out_id, edits(src, patches.iter())?));
        }
        Ok(plan)
    }

    /// What relocations need to know of a symbol.
    fn sym_facts(&self, k: SymKey) -> SymFacts {
        let sym = self.sym(k);
        let c = &self.inputs[k.0].cubin;
        let section = (sym.ty == STT_SECTION).then_some(sym.shndx as usize);
        SymFacts {
            dead: self.symbol_is_dead(k),
            replaced: self.is_replaced(k),
            value: self.link_value(k),
            out_index: self.out_index(k),
            in_nonalloc_section: section
                .and_then(|s| c.sections.get(s))
                .is_some_and(|s| s.flags & SHF_ALLOC == 0),
            section_piece: section.and_then(|s| self.placed.get(&(k.0, s)).map(|p| p.1)),
        }
    }

    /// Whether the symbol is a global definition another input's definition replaced.
    fn is_replaced(&self, k: SymKey) -> bool {
        let sym = self.sym(k);
        sym.defined() && sym.bind != STB_LOCAL && sym.ty != STT_SECTION && self.target(k) != Some(k)
    }

    /// Whether the symbol stands for a function (or a section of one) that was removed.
    fn symbol_is_dead(&self, k: SymKey) -> bool {
        let s = self.sym(k);
        if s.ty == STT_SECTION {
            return self.is_dropped_function_section(k.0, s.shndx as usize);
        }
        self.func_of(k).is_some_and(|f| !self.live[f])
    }

    /// `(value, constant bank, known at link time)` of a relocation target.
    fn link_value(&self, k: SymKey) -> (u64, u32, bool) {
        let s = self.sym(k);
        if !s.defined() && s.bind != STB_LOCAL && is_table_symbol(&s.name) {
            return (0, 0, true);
        }
        if let Some(v) = devrt::linker_value(s) {
            return (v, 0, true);
        }
        if s.ty != STT_SECTION
            && let Some(&o) = self.shared_offset.get(&self.representative(k))
        {
            return (o, 0, true);
        }
        let Some(t) = (if s.ty == STT_SECTION {
            Some(k)
        } else {
            self.target(k)
        }) else {
            return (0, 0, false);
        };
        let ts = self.sym(t);
        let c = &self.inputs[t.0].cubin;
        let Some(sec) = c.sections.get(ts.shndx as usize) else {
            return (0, 0, false);
        };
        let piece = self
            .placed
            .get(&(t.0, ts.shndx as usize))
            .map_or(0, |p| p.1);
        let value = if ts.ty == STT_SECTION {
            piece
        } else {
            ts.value + piece
        };
        if let Some(bank) = constant_bank(sec.ty) {
            return (value, bank, true);
        }
        if sec.flags & SHF_ALLOC == 0 {
            return (value, 0, true);
        }
        (value, 0, false)
    }

    // ---- .nv.info -------------------------------------------------------------------

    fn info(&mut self) -> Result<()> {
        let exec = !self.opts.relocatable;
        // (registers, stack, barriers) over each live kernel's call tree, computed once
        self.props = {
            let kernels: Vec<usize> = (0..self.funcs.len())
                .filter(|&f| self.live[f] && self.funcs[f].entry)
                .collect();
            let mut props: Vec<(u32, u32, u32)> =
                kernels.par_iter().map(|&f| self.propagated(f)).collect();
            // (nvlink 13.5: the one kernel of a link also counts the barriers of the
            // functions it does not reach, those whose address is taken; with two
            // kernels neither does)
            if let [(_, _, bars)] = props.as_mut_slice() {
                let live = (0..self.funcs.len()).filter(|&g| self.live[g]);
                *bars = live.map(|g| self.funcs[g].barriers).fold(*bars, u32::max);
            }
            kernels.into_iter().zip(props).collect()
        };
        let props = std::mem::take(&mut self.props);
        self.externs = self.extern_lists();
        let mut global: Vec<Record> = Vec::new();
        for i in 0..self.inputs.len() {
            let c = &self.inputs[i].cubin;
            let Some(si) = c
                .sections
                .iter()
                .position(|s| s.name == ".nv.info" && s.ty == SHT_CUDA_INFO)
            else {
                continue;
            };
            let s = &c.sections[si];
            for mut r in self.parsed[i].records.clone()? {
                if exec && r.attr == info::MAX_STACK_SIZE {
                    continue;
                }
                if r.has_symbol() {
                    let sym = r.payload.u32_at(0).unwrap_or(0) as usize;
                    if sym >= c.symbols.len() {
                        return Err(crate::diag::malformed(
                            &c.origin,
                            s.offset,
                            format!(".nv.info record names symbol {sym}, which does not exist"),
                        ));
                    }
                    let k = (i, sym);
                    if self.target(k) != Some(k) || self.symbol_is_dead(k) {
                        continue;
                    }
                    let Some(o) = self.out_index(k) else { continue };
                    let mut v = r.payload.u32_at(4).unwrap_or(0);
                    if r.attr == info::REGCOUNT
                        && let Some(f) = self.func_defined_by(k).filter(|&f| self.funcs[f].entry)
                    {
                        v = props[&f].0;
                    }
                    r = Record::sym_pair(r.attr, o as u32 + 1, v);
                }
                global.push(r);
            }
        }
        global.reverse();
        if exec {
            // nvlink warns once for each call in a kernel's call list (repeats counted)
            // whose callee's call tree has a cycle; nvlink's call lists are needed only
            // when the merged graph (which has every edge they have) has a cycle at all
            let merged: Vec<Vec<usize>> = (0..self.funcs.len())
                .map(|f| match self.live[f] {
                    true if self.funcs[f].self_call => vec![f],
                    true => self.funcs[f].callees.iter().copied().collect(),
                    false => Vec::new(),
                })
                .collect();
            let (edges, cyclic) = if cycle_below(&merged).contains(&true) {
                let cl = self.call_lists()?;
                let edges: Vec<Vec<usize>> = (0..self.funcs.len()).map(|f| cl.callees(f)).collect();
                let cyclic = cycle_below(&edges);
                (edges, cyclic)
            } else {
                (Vec::new(), Vec::new())
            };
            let mut warnings = Vec::new();
            for (f, calls) in edges.iter().enumerate() {
                if !(self.live[f] && self.funcs[f].entry) {
                    continue;
                }
                for &g in calls {
                    if cyclic[g] {
                        warnings.push(format!(
                            "Stack size for entry function '{}' cannot be statically determined",
                            self.sym(self.funcs[f].key).name
                        ));
                    }
                }
            }
            if !self.opts.suppress_stack_size_warning {
                self.diag.warnings(&warnings);
            }
            // (in the order of the kernels' symbols: local ones, such as libcudadevrt's
            // static kernels, before the global ones)
            let mut stacks: Vec<(usize, u32)> = (0..self.funcs.len())
                .filter(|&f| self.live[f] && self.funcs[f].entry)
                .filter_map(|f| Some((*self.sym_of.get(&self.funcs[f].key)?, props[&f].1)))
                .collect();
            stacks.sort_by_key(|&(o, _)| o);
            for (o, stack) in stacks {
                global.push(Record::sym_pair(info::MIN_STACK_SIZE, o as u32 + 1, stack));
            }
        }
        // (an image without inputs has no global records and, as nvlink's, no section)
        if !(global.is_empty() && self.inputs.is_empty()) {
            let mut o = OutSection::new(".nv.info", SHT_CUDA_INFO, 0);
            o.align = 4;
            o.link = Ref::Symtab;
            o.data = info::encode_all(&global);
            self.new_section(o, false);
        }
        // per-function records (in parallel; added in function order)
        let per: Vec<Result<Option<OutSection>>> = {
            (0..self.funcs.len())
                .into_par_iter()
                .map(|f| self.function_info_section(f, &props))
                .collect()
        };
        for o in per {
            if let Some(o) = o? {
                self.new_section(o, false);
            }
        }
        self.props = props;
        Ok(())
    }

    /// Function `f`'s `.nv.info.<fn>` in the output, if it has one: its records with the
    /// symbols renumbered, `EXTERNS` as `externs` says, in nvlink's order, a kernel's with what
    /// its call tree needs (`props`).
    fn function_info_section(
        &self,
        f: usize,
        props: &HashMap<usize, (u32, u32, u32)>,
    ) -> Result<Option<OutSection>> {
        let exec = !self.opts.relocatable;
        if !self.live[f] {
            return Ok(None);
        }
        let (i, _) = self.funcs[f].key;
        let c = &self.inputs[i].cubin;
        let text = self.funcs[f].text;
        let Some(s) = self.info_section_of(f) else {
            return Ok(None);
        };
        let mut recs = Vec::new();
        for mut r in info::parse(c.bytes(s), &c.origin, &s.name, s.offset)? {
            if r.attr == info::PARAM_CBANK && r.payload.len() >= 4 {
                let sym = r.payload.u32_at(0).unwrap_or(0) as usize;
                if sym < c.symbols.len()
                    && let Some(o) = self.out_index((i, sym))
                {
                    r.payload[..4].copy_from_slice(&(o as u32 + 1).to_le_bytes());
                }
            }
            recs.push(r);
        }
        // sm_100+: only the records the Mercury copy also has are reversed; the
        // SASS-only ones follow in their order
        let mut tail = Vec::new();
        if let Some(attrs) = c
            .has_mercury()
            .then(|| self.merc_info_attrs(i, &s.name))
            .flatten()
        {
            let (head, rest): (Vec<Record>, Vec<Record>) =
                recs.into_iter().partition(|r| attrs.contains(&r.attr));
            recs = head;
            tail = rest;
        }
        recs.reverse();
        let kernel = (exec && self.funcs[f].entry).then(|| props[&f]);
        self.finish_records(f, &mut recs, kernel, |o| o);
        recs.extend(tail);
        let mut o = OutSection::new(&s.name, SHT_CUDA_INFO, SHF_INFO_LINK);
        o.align = 4;
        o.link = Ref::Symtab;
        if let Some(&(t, _)) = self.placed.get(&(i, text)) {
            o.info = Ref::Section(t);
        }
        o.data = info::encode_all(&recs);
        Ok(Some(o))
    }

    /// `(registers, stack, barriers)` of a function with everything it calls: the
    /// register and barrier maxima over the call tree and the deepest frame chain.
    fn propagated(&self, f: usize) -> (u32, u32, u32) {
        let reach = self.reachable_from(f);
        let regs = reach.iter().map(|&g| self.funcs[g].regs).max().unwrap_or(0);
        let bars = reach
            .iter()
            .map(|&g| self.funcs[g].barriers)
            .max()
            .unwrap_or(0);
        let mut memo = HashMap::default();
        let stack = self
            .stack_depth(f, &mut Vec::new(), &mut memo)
            .unwrap_or(UNKNOWN_STACK);
        (regs, stack, bars)
    }

    /// The deepest chain of frames below `f`; `None` when the call tree has a cycle.
    fn stack_depth(
        &self,
        f: usize,
        path: &mut Vec<usize>,
        memo: &mut HashMap<usize, Option<u32>>,
    ) -> Option<u32> {
        if let Some(&d) = memo.get(&f) {
            return d;
        }
        if path.contains(&f) || self.funcs[f].self_call {
            return None;
        }
        path.push(f);
        let mut deepest = Some(0u32);
        for &g in self.funcs[f]
            .callees
            .iter()
            .filter(|&&g| !self.funcs[g].entry)
        {
            deepest = match (deepest, self.stack_depth(g, path, memo)) {
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            };
        }
        path.pop();
        let d = deepest.map(|x| self.funcs[f].frame + x);
        memo.insert(f, d);
        d
    }

    // ---- callgraph and prototypes ----------------------------------------------------

    fn callgraph(&mut self) -> Result<()> {
        let mut groups: [BTreeSet<(u32, i64)>; 5] = Default::default();
        let mut protos: BTreeSet<(u32, u32)> = BTreeSet::new();
        let mut strings: Vec<String> = Vec::new();
        let mut string_at: HashMap<String, usize> = HashMap::default();
        let mut intern = |s: String, strings: &mut Vec<String>| -> String {
            if !string_at.contains_key(&s) {
                string_at.insert(s.clone(), strings.len());
                strings.push(s.clone());
            }
            s
        };
        let mut pending: Vec<(usize, u32, String)> = Vec::new();
        let mut pending_proto: Vec<(u32, String)> = Vec::new();
        for i in 0..self.inputs.len() {
            let c = &self.inputs[i].cubin;
            let string = |off: i64| strtab_string(c, off);
            for (a, b, group) in callgraph_entries(c)? {
                let ka = (i, a as usize);
                if self.symbol_is_dead(ka) {
                    continue;
                }
                let Some(oa) = self.out_index(ka) else {
                    continue;
                };
                match group {
                    1 | 4 => {
                        let Some(kb) = usize::try_from(b).ok().map(|b| (i, b)) else {
                            continue;
                        };
                        if kb.1 >= c.symbols.len() || self.symbol_is_dead(kb) {
                            continue;
                        }
                        if let Some(ob) = self.out_index(kb) {
                            groups[group].insert((oa as u32 + 1, ob as i64 + 1));
                        }
                    }
                    2 | 3 => {
                        if let Some(s) = string(b) {
                            let s = intern(s, &mut strings);
                            pending.push((group, oa as u32 + 1, s));
                        } else {
                            groups[group].insert((oa as u32 + 1, b));
                        }
                    }
                    _ => {}
                }
            }
            if let Some(ps) = c.sections.iter().find(|s| s.ty == SHT_CUDA_PROTOTYPE) {
                for e in c.bytes(ps).chunks_exact(8) {
                    let sym = e.u32_at(0).unwrap_or(0) as usize;
                    let off = e.u32_at(4).unwrap_or(0) as i64;
                    if sym >= c.symbols.len() || !self.prototype_kept((i, sym)) {
                        continue;
                    }
                    if let (Some(o), Some(s)) = (self.out_index((i, sym)), string(off)) {
                        let s = intern(s, &mut strings);
                        pending_proto.push((o as u32 + 1, s));
                    }
                }
            }
        }
        let offsets = crate::elf::write::leading_offsets(&strings);
        for (g, a, s) in pending {
            groups[g].insert((a, offsets[&s] as i64));
        }
        for (a, s) in pending_proto {
            protos.insert((a, offsets[&s]));
        }
        self.leading_strings = strings;
        let mut data = Vec::new();
        for g in 1..=4usize {
            data.extend_from_slice(&0u32.to_le_bytes());
            data.extend_from_slice(&(-(g as i32)).to_le_bytes());
            for &(a, b) in &groups[g] {
                data.extend_from_slice(&a.to_le_bytes());
                data.extend_from_slice(&(b as i32).to_le_bytes());
            }
        }
        self.out[self.callgraph_id].data = data;
        if let Some(p) = self.prototype_id {
            for (a, b) in protos {
                self.out[p].data.extend_from_slice(&a.to_le_bytes());
                self.out[p].data.extend_from_slice(&b.to_le_bytes());
            }
        }
        Ok(())
    }

    /// `-dump-callgraph` as nvlink prints it (both spellings print demangled names):
    /// every function symbol of the inputs is a node, numbered by first appearance
    /// (inputs in order, each symbol table in order; global names once, local symbols
    /// each); a node whose function was removed or never defined prints only its number.
    /// A function's callees are its input's `.nv.callgraph` calls (direct, then the
    /// indirect ones the compiler resolved), last added first, repeats and self-calls
    /// included; `^` marks kernels and `&` functions whose address is taken.
    /// nvlink's call graph as it reports it (`-dump-callgraph`, the recursion warning):
    /// every function symbol of the inputs is a node, numbered from 1 by first
    /// appearance (inputs in order, each symbol table in order; global names once, local
    /// symbols each). A live function's call list is its input's `.nv.callgraph` direct
    /// calls in order, then for each indirect call every address-taken function of its
    /// prototype in node order; repeats and self-calls stay.
    fn call_lists(&self) -> Result<CallLists> {
        // a node is a global name (by its id), or one input's local symbol; numbered
        // from 1 in the order of first appearance
        let mut of_global = vec![0usize; self.globals.len()];
        let mut of_local: HashMap<SymKey, usize> = HashMap::default();
        let mut count = 0;
        for (i, inp) in self.inputs.iter().enumerate() {
            for s in 1..inp.cubin.symbols.len() {
                if inp.cubin.symbols[s].ty != STT_FUNC {
                    continue;
                }
                let n = match self.global_of[i].get(s) {
                    Some(&g) if g != NO_GLOBAL => &mut of_global[g as usize],
                    _ => of_local.entry((i, s)).or_insert(0),
                };
                if *n == 0 {
                    count += 1;
                    *n = count;
                }
            }
        }
        let number = |(i, s): SymKey| -> Option<usize> {
            match self.global_of[i].get(s) {
                Some(&g) if g != NO_GLOBAL => Some(of_global[g as usize]),
                _ => of_local.get(&(i, s)).copied(),
            }
            .filter(|&n| n > 0)
        };
        let node: Vec<usize> = self
            .funcs
            .iter()
            .map(|f| number(f.key).expect("a function symbol is numbered"))
            .collect();
        let mut func_of_node: HashMap<usize, usize> = HashMap::default();
        for f in (0..self.funcs.len()).filter(|&f| self.live[f]) {
            func_of_node.insert(node[f], f);
        }
        // each input's entries once, each to the live function it defines (a weak copy's
        // entries stay with that copy); indirect calls are resolved after the direct ones
        let mut calls: Vec<Vec<usize>> = vec![Vec::new(); self.funcs.len()];
        let mut indirect: Vec<Vec<String>> = vec![Vec::new(); self.funcs.len()];
        for (i, inp) in self.inputs.iter().enumerate() {
            let c = &inp.cubin;
            for (a, b, group) in callgraph_entries(c)? {
                let Some(f) = self
                    .func_of((i, a as usize))
                    .filter(|&f| self.live[f] && self.funcs[f].key.0 == i)
                else {
                    continue;
                };
                match group {
                    1 => {
                        let callee = usize::try_from(b).ok().filter(|&b| b < c.symbols.len());
                        if let Some(n) = callee.and_then(|b| number((i, b))) {
                            calls[f].push(n);
                        }
                    }
                    3 => indirect[f].extend(strtab_string(c, b)),
                    _ => {}
                }
            }
        }
        let mut taken_nodes: HashMap<&str, Vec<usize>> = HashMap::default();
        for (q, g) in &self.taken_by_prototype {
            taken_nodes.entry(q.as_str()).or_default().push(node[*g]);
        }
        for list in taken_nodes.values_mut() {
            list.sort_unstable();
            list.dedup();
        }
        for (f, protos) in indirect.iter().enumerate() {
            for p in protos {
                if let Some(reached) = taken_nodes.get(p.as_str()) {
                    calls[f].extend(reached.iter().copied());
                }
            }
        }
        Ok(CallLists {
            nodes: count,
            node,
            func_of_node,
            calls,
            of_global,
        })
    }

    /// `-dump-callgraph` as nvlink prints it (both spellings print demangled names): the
    /// nodes of [`Self::call_lists`], a removed or undefined function's as its number
    /// alone (a function no input defines that a live `EXTERNS` list names as `N: name ->`),
    /// a function's calls last added first; `^` marks kernels and `&` functions whose
    /// address is taken. Then the register propagation lines.
    fn dump_callgraph(&self) -> Result<()> {
        use crate::demangle::demangle;
        let cl = self.call_lists()?;
        let mut lines = vec![String::new(); cl.nodes];
        for (f, func) in self.funcs.iter().enumerate() {
            if !self.live[f] {
                continue;
            }
            // (a kernel whose address is taken, one launched from the device, is `^&`)
            let marks = format!(
                "{}{}",
                if func.entry { "^" } else { "" },
                if self.address_taken.contains(&f) {
                    "&"
                } else {
                    ""
                }
            );
            let text: String = cl.calls[f].iter().rev().map(|n| format!(" {n}")).collect();
            lines[cl.node[f] - 1] = format!(
                "{marks}{} [{}] ->{text}",
                demangle(&self.sym(func.key).name),
                func.regs
            );
        }
        // (a function no input defines shows its name while a live function's EXTERNS
        // list names it: the driver's)
        for (g, global) in self.globals.iter().enumerate() {
            if global.def.is_none() && cl.of_global[g] > 0 && self.is_driver_function(global.first)
            {
                lines[cl.of_global[g] - 1] = format!("{} ->", demangle(global.name));
            }
        }
        let target = self.opts.target.map(|a| a.to_string()).unwrap_or_default();
        let mut text = format!(
            "callgraph for {target}:\n# A: s -> B // s (number A) potentially calls B\n# s [N]     // s uses N registers\n# ^s        // s is entry point\n# &s        // s has address taken\n"
        );
        for (n, line) in lines.iter().enumerate() {
            text += &format!("{}: {line}\n", n + 1);
        }
        for (e, f, regs) in self.register_propagation(&cl) {
            text += &format!(
                "regcount {regs} for {} propagated to entry {}\n",
                demangle(&self.sym(self.funcs[f].key).name),
                demangle(&self.sym(self.funcs[e].key).name)
            );
        }
        crate::diag::to_stderr(&text);
        Ok(())
    }

    // ---- notes and finish --------------------------------------------------------

    fn notes(&mut self) {
        let mut tk = tool_note(
            self.opts.tool_name.as_deref().unwrap_or("nvlink"),
            &self.opts.note_command_line,
            self.opts.note_output.as_deref(),
        );
        let mut cuinfo: Option<(Vec<u8>, u64, u32)> = None;
        for inp in self.inputs {
            let c = &inp.cubin;
            for s in &c.sections {
                if s.name == ".note.nv.tkinfo" {
                    tk.extend_from_slice(c.bytes(s));
                } else if s.name == ".note.nv.cuinfo" {
                    // the note with the lowest virtual architecture (a PTX input for
                    // compute_90 linked for sm_120 gives 90), the first of equals
                    let vsm = |d: &[u8]| d.u16_at(26).unwrap_or(u16::MAX);
                    let d = c.bytes(s);
                    if cuinfo
                        .as_ref()
                        .is_none_or(|(best, _, _)| vsm(d) < vsm(best))
                    {
                        cuinfo = Some((d.to_vec(), s.flags, s.info));
                    }
                }
            }
        }
        let mut t = OutSection::new(".note.nv.tkinfo", SHT_NOTE, 0x200_0000);
        t.align = 4;
        t.data = tk;
        let tid = self.new_section(t, true);
        if let (None, true, Some(target)) = (&cuinfo, self.inputs.is_empty(), self.opts.target) {
            // no input (none had code for the target): nvlink's own note, version 2,
            // the target SM and the toolkit version (13.5)
            let mut d = Vec::new();
            for v in [12u32, 8, 1000] {
                d.extend_from_slice(&v.to_le_bytes());
            }
            d.extend_from_slice(b"NVIDIA Corp\0");
            d.extend_from_slice(&2u16.to_le_bytes());
            d.extend_from_slice(&(target.sm as u16).to_le_bytes());
            d.extend_from_slice(&TOOLKIT_VERSION.to_le_bytes());
            cuinfo = Some((d, 0x100_0000, 0));
        }
        let cuinfo_id = cuinfo.map(|(d, flags, info)| {
            let mut c = OutSection::new(".note.nv.cuinfo", SHT_NOTE, flags);
            c.align = 4;
            c.link = Ref::Section(tid);
            c.info = Ref::Raw(info);
            c.data = d;
            self.new_section(c, true)
        });
        if let (None, Some(target)) = (self.inputs.first(), self.opts.target)
            && let Some(data) = empty_compat(target)
        {
            // no input: nvlink's own `.nv.compat` for the target, named by the note
            let mut o = OutSection::new(".nv.compat", SHT_CUDA_COMPAT, 0);
            o.align = 4;
            o.data = data;
            let compat = self.new_section(o, false);
            if let Some(n) = cuinfo_id {
                self.out[n].flags = 0x100_0040;
                self.out[n].info = Ref::Section(compat);
            }
        }
        if let Some(inp) = self.inputs.first() {
            let c = &inp.cubin;
            if let Some(s) = c.sections.iter().find(|s| s.ty == SHT_CUDA_COMPAT) {
                let mut o = OutSection::new(".nv.compat", SHT_CUDA_COMPAT, 0);
                o.align = 4;
                o.data = c.bytes(s).to_vec();
                if let Some(target) = self.opts.target
                    && let Ok(mut recs) = info::parse(&o.data, &c.origin, &s.name, s.offset)
                {
                    devrt::compat_max(&mut recs, &self.inputs);
                    compat_for_target(&mut recs, (c.e_flags >> 8) & 0xFF, target);
                    o.data = info::encode_all(&recs);
                }
                let compat = self.new_section(o, false);
                // the note's sh_info names `.nv.compat`
                if let Some(n) = cuinfo_id {
                    self.out[n].info = Ref::Section(compat);
                }
            }
        }
    }

    /// The sections nvlink creates that carry a section symbol: `.nv.callgraph`,
    /// `.nv.prototype` (filled in later) and `.nv.rel.action`.
    fn tables(&mut self) {
        let mut o = OutSection::new(".nv.callgraph", SHT_CUDA_CALLGRAPH, 0);
        o.align = 4;
        o.entsize = 8;
        o.link = Ref::Symtab;
        self.callgraph_id = self.new_section(o, true);
        if self.prototypes_needed() {
            let mut o = OutSection::new(".nv.prototype", SHT_CUDA_PROTOTYPE, 0);
            o.align = 4;
            o.entsize = 8;
            o.link = Ref::Symtab;
            self.prototype_id = Some(self.new_section(o, true));
        }
        let sm = self.opts.target.map_or(0, |a| a.sm);
        if !self.opts.relocatable && sm < 100 {
            let mut o = OutSection::new(".nv.rel.action", SHT_CUDA_RELOCINFO, 0);
            o.align = 8;
            o.entsize = 8;
            o.data = vec![
                0x73, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x11, 0x25, 0, 0x05, 0x36,
            ];
            self.new_section(o, true);
        }
    }

    /// Whether a `.nv.prototype` entry stays: its function is live and its address is
    /// not taken (those have their prototype in `.nv.callgraph`).
    /// A function no input defines (one the driver provides: malloc, vprintf, ...)
    /// keeps its entry while a live function's `EXTERNS` list names it.
    fn prototype_kept(&self, k: SymKey) -> bool {
        match self.func_of(k) {
            Some(f) => self.live[f] && !self.address_taken.contains(&f),
            None => self.is_driver_function(k),
        }
    }

    /// Whether some input's prototype table has an entry that stays (a libNVVM partial
    /// link's output has entries only for functions it defines, and nvlink keeps them;
    /// an entry for a function another input defines stays as that function would).
    fn prototypes_needed(&self) -> bool {
        (0..self.inputs.len()).any(|i| {
            let c = &self.inputs[i].cubin;
            c.sections
                .iter()
                .filter(|s| s.ty == SHT_CUDA_PROTOTYPE)
                .any(|ps| {
                    c.bytes(ps).chunks_exact(8).any(|e| {
                        let sym = e.u32_at(0).unwrap_or(0) as usize;
                        sym < c.symbols.len() && self.prototype_kept((i, sym))
                    })
                })
        })
    }

    fn finish(&mut self) -> Image {
        let exec = !self.opts.relocatable;
        for (out_id, list, data) in std::mem::take(&mut self.kept_relocs) {
            let (prefix, ty, entsize) = match list {
                RelocList::Rel => (".rel", SHT_REL, 16),
                RelocList::Rela => (".rela", SHT_RELA, 24),
                RelocList::Resolved => (".nv.resolvedrela", SHT_CUDA_RESOLVED_RELA, 24),
            };
            let name = format!("{prefix}{}", self.out[out_id].name);
            let mut o = OutSection::new(&name, ty, SHF_INFO_LINK);
            o.align = 8;
            o.entsize = entsize;
            o.link = Ref::Symtab;
            o.info = Ref::Section(out_id);
            o.data = data;
            self.new_section(o, false);
        }
        // final order
        let mut order: Vec<usize> = (0..self.out.len()).collect();
        order.sort_by_key(|&i| crate::elf::write::rank(&self.out[i], self.mercury_layout));
        let mut new_index = vec![0usize; self.out.len()];
        for (n, &i) in order.iter().enumerate() {
            new_index[i] = n;
        }
        let fix = |r: Ref| match r {
            Ref::Section(i) => Ref::Section(new_index[i]),
            r => r,
        };
        let merc_symbols = self.merc_symbols.take().map(|(at, syms)| {
            let syms = syms
                .into_iter()
                .map(|mut s| {
                    s.section = s.section.map(|i| new_index[i]);
                    s
                })
                .collect::<Vec<_>>();
            (new_index[at], syms)
        });
        // moved, not copied: the sections hold the whole image
        let mut unplaced: Vec<Option<OutSection>> = std::mem::take(&mut self.out)
            .into_iter()
            .map(Some)
            .collect();
        let sections: Vec<OutSection> = order
            .iter()
            .map(|&i| {
                let mut s = unplaced[i].take().expect("each section placed once");
                s.link = fix(s.link);
                s.info = fix(s.info);
                s.alias = s.alias.map(|a| new_index[a]);
                for p in &mut s.patches {
                    p.1 = fix(p.1);
                }
                s
            })
            .collect();
        let symbols: Vec<OutSymbol> = std::mem::take(&mut self.symbols)
            .into_iter()
            .map(|mut s| {
                s.section = s.section.map(|i| new_index[i]);
                s
            })
            .collect();
        // the text section's sh_info names its function symbol
        let mut sections = sections;
        for (k, &f_idx) in self.sym_of.iter() {
            if let Some(f) = self.func_defined_by(*k) {
                let (i, _) = self.funcs[f].key;
                if let Some(&(t, _)) = self.placed.get(&(i, self.funcs[f].text)) {
                    let s = &mut sections[new_index[t]];
                    let regs_top = s_info_top(&self.inputs[i].cubin, self.funcs[f].text);
                    s.info = Ref::Raw((f_idx as u32 + 1) | regs_top);
                }
            }
        }
        // without inputs (none had code for the target), nvlink's defaults: the CUDA
        // OS/ABI, ABI version 8, flags 0x05000004 around the SM (0x05000002 from sm_100)
        let no_input_flags = match self.mercury_layout {
            true => 0x0500_0002,
            false => 0x0500_0004,
        };
        let (first_flags, osabi, abi_version) =
            self.inputs.first().map_or((no_input_flags, 0x41, 8), |i| {
                (i.cubin.e_flags, i.cubin.osabi, i.cubin.abi_version)
            });
        // the debug byte: the highest among the inputs, plus one for each input with
        // debug information (above 0x06: -lineinfo 0x09, -G 0x0E, ...) past the first
        let levels = self.inputs.iter().map(|i| i.cubin.e_flags >> 24);
        let with_debug = levels.clone().filter(|&l| l > 6).count() as u32;
        let debug = levels.max().unwrap_or(first_flags >> 24) + with_debug.saturating_sub(1);
        Image {
            e_type: if exec { 2 } else { 1 },
            e_flags: (first_flags & 0x00FF_00FF)
                | (debug << 24)
                | (self.opts.target.map_or((first_flags >> 8) & 0xFF, |t| t.sm) << 8),
            osabi,
            abi_version,
            sections,
            symbols,
            leading_strings: std::mem::take(&mut self.leading_strings),
            program_headers: exec,
            mercury_layout: self.mercury_layout,
            merc_symbols,
        }
    }
}

/// A kernel's records once its call tree is known: `CRS_STACK_SIZE` unknown when the
/// tree recurses, the barrier count raised to the tree's (added when missing).
fn kernel_records(recs: &mut Vec<Record>, (_, stack, barriers): (u32, u32, u32)) {
    if stack == UNKNOWN_STACK {
        let mut found = false;
        for r in recs.iter_mut().filter(|r| r.attr == info::CRS_STACK_SIZE) {
            r.payload = UNKNOWN_STACK.to_le_bytes().to_vec();
            found = true;
        }
        if !found {
            // (a kernel ptxas gave no record: nvlink adds one, unknown)
            recs.push(Record::sval(
                info::CRS_STACK_SIZE,
                UNKNOWN_STACK.to_le_bytes().to_vec(),
            ));
        }
    }
    if barriers > 0 {
        match recs.iter_mut().find(|r| r.attr == info::NUM_BARRIERS) {
            Some(r) => r.value = barriers as u16,
            None => recs.push(Record {
                format: info::FMT_BVAL,
                attr: info::NUM_BARRIERS,
                value: barriers as u16,
                payload: Vec::new(),
            }),
        }
    }
}

/// The `.nv.compat` records nvlink 13.5 writes when no input has code for the target
/// (read off its output for every `-arch` it takes): none below sm_90; whether the
/// target is an `a` one; from sm_100 also `CAN_FASTPATH_FINALIZE` (9 for sm_100, 0x50
/// for sm_120, else 0) and `FINALIZER_VERSION` 0x0440.
fn empty_compat(target: Arch) -> Option<Vec<u8>> {
    use crate::arch::Variant;
    if target.sm < 90 {
        return None;
    }
    let accelerated = (target.variant == Variant::Accelerated) as u8;
    let mut d = vec![info::FMT_BVAL, 0x09, accelerated, 0];
    if target.sm >= 100 {
        let fastpath: u64 = match target.sm {
            100 => 9,
            120 => 0x50,
            _ => 0,
        };
        d.extend_from_slice(&[0x04, 0x0B, 8, 0]);
        d.extend_from_slice(&fastpath.to_le_bytes());
        d.extend_from_slice(&[0x03, 0x0E, 0x40, 0x04]);
    }
    Some(d)
}

/// `.nv.compat` as nvlink writes it for the target (read off nvlink 13.5 with sm_100 and
/// sm_120 code linked for their `a`, `f` and sibling targets): `ACCELERATOR_TARGET`
/// (0x09) says whether the target is an `a` one; `CAN_FASTPATH_FINALIZE` (0x0B) keeps
/// only its lowest bit for an `a` target (9 → 1, 0x50 → 0x10) and becomes 0 for another
/// SM of the family (sm_100 code for sm_103, sm_120 for sm_121).
fn compat_for_target(recs: &mut [Record], code_sm: u32, target: Arch) {
    use crate::arch::Variant;
    for r in recs.iter_mut() {
        match r.attr {
            0x09 if r.format == info::FMT_BVAL => {
                r.value = (target.variant == Variant::Accelerated) as u16;
            }
            0x0B if r.payload.len() == 8 => {
                let v = r.payload.u64_at(0).unwrap_or(0);
                let v = if target.sm != code_sm {
                    0
                } else if target.variant == Variant::Accelerated {
                    v & v.wrapping_neg()
                } else {
                    v
                };
                r.payload = v.to_le_bytes().to_vec();
            }
            _ => {}
        }
    }
}

/// The register count ptxas keeps in the top byte of a code section's `sh_info` (sm_75
/// to sm_89).
fn s_info_top(c: &Cubin, text: usize) -> u32 {
    c.sections.get(text).map_or(0, |s| s.info & 0xFF00_0000)
}

/// The section type and flags a merged section gets: executable output turns the
/// memory-space types into plain program data.
fn out_type(s: &Section, exec: bool) -> (u32, u64) {
    if !exec {
        return (s.ty, s.flags);
    }
    let ty = match s.ty {
        SHT_CUDA_GLOBAL | SHT_CUDA_SHARED => SHT_NOBITS,
        SHT_CUDA_GLOBAL_INIT => SHT_PROGBITS,
        t if constant_bank(t).is_some() => SHT_PROGBITS,
        t => t,
    };
    (ty, s.flags)
}

/// nvlink's sort of shared variables, a merge sort on linked lists (observed: the
/// order it gives equal keys depends only on their number and input order, and no
/// stable sort gives it). The items are dealt in turn onto the heads of two lists (so
/// each holds every other item, reversed), both are sorted the same way, and the two
/// are merged; where neither head goes `before` the other, `ties_first` takes the first
/// list's head, else the second's.
fn list_sort<T: Copy>(items: &[T], before: &dyn Fn(&T, &T) -> bool, ties_first: bool) -> Vec<T> {
    if items.len() <= 1 {
        return items.to_vec();
    }
    let dealt =
        |from: usize| -> Vec<T> { items.iter().skip(from).step_by(2).rev().copied().collect() };
    let a = list_sort(&dealt(0), before, ties_first);
    let b = list_sort(&dealt(1), before, ties_first);
    let mut out = Vec::with_capacity(items.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let take_b = if ties_first {
            before(&b[j], &a[i])
        } else {
            !before(&a[i], &b[j])
        };
        if take_b {
            out.push(b[j]);
            j += 1;
        } else {
            out.push(a[i]);
            i += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

/// For each function, whether a cycle can be reached from it (itself included): what is
/// left after peeling off, again and again, the functions all of whose callees are gone.
fn cycle_below(edges: &[Vec<usize>]) -> Vec<bool> {
    let mut pending: Vec<usize> = edges.iter().map(Vec::len).collect();
    let mut callers: Vec<Vec<usize>> = vec![Vec::new(); edges.len()];
    for (f, callees) in edges.iter().enumerate() {
        for &g in callees {
            callers[g].push(f);
        }
    }
    let mut done: Vec<usize> = (0..edges.len()).filter(|&f| pending[f] == 0).collect();
    let mut cyclic = vec![true; edges.len()];
    while let Some(g) = done.pop() {
        cyclic[g] = false;
        for &f in &callers[g] {
            pending[f] -= 1;
            if pending[f] == 0 {
                done.push(f);
            }
        }
    }
    cyclic
}

/// `(a, b, group)` of every `.nv.callgraph` entry; group n follows the marker (0, -n).
fn callgraph_entries(c: &Cubin) -> Result<Vec<(u32, i64, usize)>> {
    let mut out = Vec::new();
    for s in c.sections.iter().filter(|s| s.ty == SHT_CUDA_CALLGRAPH) {
        let mut group = 0usize;
        for e in c.bytes(s).chunks_exact(8) {
            let a = e.u32_at(0).unwrap_or(0);
            let b = e.u32_at(4).unwrap_or(0) as i32;
            if a == 0 && (-4..=-1).contains(&b) {
                group = (-b) as usize;
                continue;
            }
            if a as usize >= c.symbols.len() {
                return Err(crate::diag::malformed(
                    &c.origin,
                    s.offset,
                    format!(".nv.callgraph names symbol {a}, which does not exist"),
                ));
            }
            out.push((a, b as i64, group));
        }
    }
    Ok(out)
}

fn function_info(c: &Cubin, text: usize) -> Result<Vec<Record>> {
    match c
        .sections
        .iter()
        .find(|s| s.ty == SHT_CUDA_INFO && s.flags & SHF_INFO_LINK != 0 && s.info as usize == text)
    {
        Some(s) => info::parse(c.bytes(s), &c.origin, &s.name, s.offset),
        None => Ok(Vec::new()),
    }
}

/// The linker's own `.note.nv.tkinfo` entry.
/// The toolkit version nvlink writes in its notes (13.5).
const TOOLKIT_VERSION: u32 = 135;

fn tool_note(tool_name: &str, command_line: &str, output: Option<&str>) -> Vec<u8> {
    let mut blob = Vec::new();
    let field = |s: &str, blob: &mut Vec<u8>| {
        let at = blob.len() as u32;
        blob.extend_from_slice(s.as_bytes());
        blob.push(0);
        at
    };
    // the output's name comes first (empty but for debug links)
    let out = field(output.unwrap_or(""), &mut blob);
    let tool = field(tool_name, &mut blob);
    let version = field("Cuda compilation tools, release 13.5, V13.5.37", &mut blob);
    let branch = field("Build cuda_13.5.r13.5/compiler.39125733_0", &mut blob);
    let cmd = field(command_line, &mut blob);
    while blob.len() % 4 != 0 {
        blob.push(0);
    }
    let mut desc = Vec::new();
    for v in [2u32, out, tool, version, branch, cmd] {
        desc.extend_from_slice(&v.to_le_bytes());
    }
    desc.extend_from_slice(&blob);
    let mut n = Vec::new();
    n.extend_from_slice(&12u32.to_le_bytes());
    n.extend_from_slice(&(desc.len() as u32).to_le_bytes());
    n.extend_from_slice(&2000u32.to_le_bytes());
    n.extend_from_slice(b"NVIDIA Corp\0");
    n.extend_from_slice(&desc);
    n
}

/// The NUL-terminated string at `off` in a cubin's `.strtab`.
fn strtab_string(c: &Cubin, off: i64) -> Option<String> {
    let t = c.bytes(
        c.sections
            .iter()
            .find(|s| s.ty == SHT_STRTAB && s.name == ".strtab")?,
    );
    let rest = t.get(usize::try_from(off).ok()?..)?;
    let end = rest.iter().position(|&b| b == 0)?;
    Some(String::from_utf8_lossy(&rest[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes `edits` describes, spliced into `src` as the writer does.
    fn spliced(src: &[u8], runs: &[(usize, usize)], bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let (mut from, mut b) = (0, 0);
        for &(at, n) in runs {
            assert!(at >= from, "runs sorted and apart");
            out.extend_from_slice(&src[from..at]);
            out.extend_from_slice(&bytes[b..b + n]);
            (from, b) = (at + n, b + n);
        }
        out.extend_from_slice(&src[from..]);
        out
    }

    /// The orders nvlink 13.5 gives equal-size shared variables (read off its output):
    /// N `int[32]` locals of one kernel, and one each in N device functions the kernel
    /// calls (sorted by size, then by alignment and size), by input position.
    #[test]
    fn list_sort_gives_nvlinks_order_of_equal_keys() {
        let equal = |_: &usize, _: &usize| false;
        let kernel = |n: usize| list_sort(&(0..n).collect::<Vec<_>>(), &equal, true);
        let callees = |n: usize| {
            let bysize = list_sort(&(0..n).collect::<Vec<_>>(), &equal, false);
            list_sort(&bysize, &equal, true)
        };
        assert_eq!(kernel(2), [0, 1]);
        assert_eq!(kernel(5), [0, 4, 2, 3, 1]);
        assert_eq!(kernel(10), [8, 0, 4, 2, 6, 9, 1, 5, 3, 7]);
        assert_eq!(
            kernel(16),
            [10, 2, 14, 6, 8, 0, 12, 4, 11, 3, 15, 7, 9, 1, 13, 5]
        );
        assert_eq!(callees(2), [1, 0]);
        assert_eq!(callees(4), [0, 1, 2, 3]);
        assert_eq!(callees(5), [1, 0, 2, 4, 3]);
        assert_eq!(callees(10), [0, 7, 9, 5, 2, 8, 3, 6, 1, 4]);
        assert_eq!(callees(32), (0..32).rev().collect::<Vec<_>>());
        // and it sorts: (alignment largest first, then size smallest first)
        let items = [
            (4u64, 128u64),
            (8, 128),
            (1, 64),
            (4, 32),
            (8, 16),
            (4, 128),
        ];
        let before = |a: &(u64, u64), b: &(u64, u64)| {
            (a.0, std::cmp::Reverse(a.1)) > (b.0, std::cmp::Reverse(b.1))
        };
        let sorted = list_sort(&items, &before, true);
        assert_eq!(sorted[..3], [(8, 16), (8, 128), (4, 32)]);
        assert_eq!(sorted[5], (1, 64));
    }

    #[test]
    fn edits_give_the_bytes_of_patching_a_copy() {
        // overlapping, touching and repeated fields, in an order that is not sorted:
        // the result must be the same as patching the whole section in order
        let src: Vec<u8> = (0..256u32).map(|i| (i * 7 + 3) as u8).collect();
        let types = [
            reloc::R_CUDA_64,
            reloc::R_CUDA_ABS32_LO_32,
            reloc::R_CUDA_ABS32_HI_32,
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for round in 0..200 {
            let mut patches = Vec::new();
            for _ in 0..1 + round % 12 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let ty = types[(seed % 3) as usize];
                let at = (seed >> 8) % (256 - reloc::extent(ty));
                patches.push(Patch {
                    at,
                    ty,
                    value: seed.rotate_left(17),
                    bank: 0,
                    clear: false,
                });
            }
            let mut want = src.clone();
            for p in &patches {
                reloc::apply(&mut want, p.at, p.ty, p.value, p.bank, p.clear).unwrap();
            }
            let (runs, bytes) = edits(&src, patches.iter()).unwrap();
            assert_eq!(spliced(&src, &runs, &bytes), want, "round {round}");
            let patched: usize = runs.iter().map(|r| r.1).sum();
            assert_eq!(patched, bytes.len());
        }
    }

    #[test]
    fn an_edit_past_the_section_is_the_relocation_error() {
        let src = vec![0u8; 16];
        let p = Patch {
            at: 12,
            ty: reloc::R_CUDA_64,
            value: 1,
            bank: 0,
            clear: false,
        };
        let e = edits(&src, [p].iter()).unwrap_err();
        assert!(
            e.to_string()
                .contains("at offset 0xc passes the end of its 0x10-byte section"),
            "{e}"
        );
    }
}
