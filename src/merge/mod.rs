//! The device ELF merge: relocatable cubins in, one executable (or, with `-r`, one
//! relocatable) cubin image out, the way nvlink links them. The steps run in order, each
//! reading what the earlier ones built (`link_with_steps` is the spine), each in a file of
//! its own as an `impl Merger` block: `resolve` (global symbols: strong over weak, the weak
//! function with fewer registers, duplicate and size errors), `functions` (the function
//! graph, and what no kernel reaches dropped), `sections` (per-function sections one to
//! one, shared-name sections as pieces in input order), `shared` (shared memory per
//! kernel), `symbols`, `relocations` (the link-time ones applied, the driver's kept),
//! `nvinfo` (`.nv.info`), `callgraph` (`.nv.callgraph`, `.nv.prototype`), `notes` (and the
//! image handed to the writer), `mercury` (the sm_100+ capsule half). This file holds the
//! merge state (`Merger`) and the queries every step shares.

mod callgraph;
mod devrt;
mod externs;
mod functions;
pub mod gather;
mod linetable;
mod mercury;
mod notes;
mod nvinfo;
mod reglimit;
mod relocations;
mod resolve;
pub mod resources;
mod sections;
mod shared;
mod symbols;

use std::collections::{BTreeMap, BTreeSet};

use rayon::prelude::*;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::arch::Arch;
use crate::bytes::Le;
use crate::diag::{Diagnostics, Error, Result};
use crate::elf::cubin::*;
use crate::elf::info::{self, Record};
use crate::elf::reloc;
use crate::elf::write::{Image, OutSection, OutSymbol, Ref};

use relocations::RelocList;

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
    pub kernels: Option<crate::input::HostRefs>,
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

/// A symbol of an input: the input's position and the symbol's index in its table.
/// (Ordered and hashed as the pair `(input, sym)`: maps keyed by it iterate alike.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct SymKey {
    input: usize,
    sym: usize,
}

impl SymKey {
    const fn new(input: usize, sym: usize) -> SymKey {
        SymKey { input, sym }
    }
}

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

struct Func {
    key: SymKey,
    text: usize,
    /// Its `.nv.info.<fn>` section in its input (the first naming its code).
    info: Option<usize>,
    /// The relocation sections of its code in its input, in order.
    relocs: Vec<usize>,
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
    let ctx = crate::context::LinkContext::new(diag, &Default::default());
    link_with_steps(inputs, opts, &ctx).map(|(image, _)| image)
}

/// One step of the merge and its wall time (what `--report-json` lists as
/// `merge_steps`).
pub type Step = (&'static str, std::time::Duration);

/// `link`, with the time each step took.
pub fn link_with_steps(
    inputs: &[Input],
    opts: &MergeOptions,
    ctx: &crate::context::LinkContext,
) -> Result<(Image, Vec<Step>)> {
    let diag = ctx.diag;
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
    m.call_trees();
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
    ctx.dispose(m);
    // (freed, not left to the exit: the writer reuses their room, 0.3 MB off the
    // 128-unit link's peak)
    drop(parsed);
    lap("finish");
    Ok((image, steps))
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
    /// The live kernels, in function order, and each one's call tree (`call_trees`);
    /// the trees are let go after `.nv.info`.
    kernels: Vec<usize>,
    trees: Vec<Vec<usize>>,
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
            kernels: Vec::new(),
            trees: Vec::new(),
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
        &self.inputs[k.input].cubin.symbols[k.sym]
    }

    fn origin(&self, i: usize) -> &'a str {
        &self.inputs[i].cubin.origin
    }

    /// Function `f`'s `.nv.info.<fn>` section in its input, if it has one.
    fn info_section_of(&self, f: usize) -> Option<&'a Section> {
        let c = &self.inputs[self.funcs[f].key.input].cubin;
        self.funcs[f].info.map(|si| &c.sections[si])
    }

    /// The value of a function's global `.nv.info` record `attr` (0 without one).
    fn sym_value(&self, SymKey { input: i, sym: s }: SymKey, attr: u8) -> u32 {
        let v = &self.parsed[i].sym_values;
        v.binary_search_by_key(&(attr, s), |&(a, x, _)| (a, x as usize))
            .map_or(0, |at| v[at].2)
    }

    /// The entries of relocation section `ri` of input `i`.
    fn relocs(&self, i: usize, ri: usize) -> Result<&'a [Reloc]> {
        self.parsed[i].relocs[ri].as_deref().map_err(Clone::clone)
    }

    /// The definition a symbol of an input stands for: itself when local or chosen,
    /// the chosen definition of its name when global.
    fn target(&self, k: SymKey) -> Option<SymKey> {
        self.resolved[k.input][k.sym].0
    }

    /// The global name a symbol of an input stands for (`None` for a local).
    fn global_id(&self, k: SymKey) -> Option<usize> {
        match self.global_of[k.input][k.sym] {
            NO_GLOBAL => None,
            g => Some(g as usize),
        }
    }

    /// The function a symbol defines (as the chosen definition), if any.
    fn func_defined_by(&self, SymKey { input: i, sym: s }: SymKey) -> Option<usize> {
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
        self.resolved[k.input][k.sym].1
    }

    fn new_section(&mut self, s: OutSection, symbol: bool) -> usize {
        self.out.push(s);
        self.section_symbol.push(symbol);
        self.out.len() - 1
    }
}
