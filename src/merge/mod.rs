//! The device ELF merge: relocatable cubins in, one executable (or, with `-r`, one
//! relocatable) cubin image out, the way nvlink links them. The steps run in order, each
//! reading what the earlier ones built; `link_with_steps` is the spine. Each step is an
//! `impl Merger` block in a file of its own, listed here in the order the spine runs them
//! (a file named twice holds two steps that run apart):
//!
//! - `mod.rs`: the merge's ids (`SymKey`, `SecKey`, `FuncId`), the queries every step
//!   makes of the merge state (`Merger`, state.rs: a symbol's definition, function,
//!   output index, value at link time) and the spine.
//! - `resolve.rs` (`resolve`): each global name's definition chosen: the `Resolution`
//!   product, made before the merge state, which holds a shared reference to it.
//! - `functions.rs` (`Merger::with_functions`): the merge state made, with its function
//!   graph complete (the `CodeGraph` product: what no kernel reaches dropped) and each
//!   live kernel's call tree (`CallTrees`).
//! - `reglimit.rs` (`check_register_limits`): register counts propagated as nvlink does
//!   and kernels' `-maxrregcount` limits checked.
//! - `functions.rs` (`address_taken_warnings`): `-extrawarn`'s warnings.
//! - `externs.rs` (`read_externs`): each live function's `EXTERNS` list read (written
//!   with `.nv.info`, `finish_records`).
//! - `resolve.rs` (`undefined`): the undefined references, once the live code is known.
//! - `notes.rs` (`notes`): the notes and `.nv.compat` (`compat.rs`: its records).
//! - `sections.rs` (`sections`): input sections placed (function sections one to one,
//!   shared names as pieces: the `Placement` product, placement.rs), sm_100+
//!   debug pieces pruned (`Frames`); nvlink's limit on constant data checked.
//! - `bank2.rs` (`bank2`): the device functions' constant bank 2 merged into their
//!   kernels' banks, their pieces added to the `Placement` (the banks' Mercury twins are
//!   the Mercury step's, `mercury/banks.rs`).
//! - `shared.rs` (`shared`): shared memory laid out per kernel: the `SharedLayout`
//!   product.
//! - `callgraph.rs` (`tables`): `.nv.callgraph`, `.nv.prototype`, `.nv.rel.action` made
//!   before the symbols, whose section symbols they get (filled in later).
//! - `creation.rs` (`creation_order`): nvlink's creation order of the names made so far
//!   (the `Order` product), which the symbol table and the last step follow.
//! - `symbols.rs` (`symbols`): the output symbol table (the `SymbolTable` product).
//! - `relocations.rs` (`relocations`, then `RelocWork::apply`): relocations applied or
//!   kept.
//! - `nvinfo.rs` (`info`): `.nv.info` and each function's `.nv.info.<fn>`
//!   (`handed.rs`: what a kernel takes from the functions it calls).
//! - `callgraph.rs` (`callgraph`, `dump_callgraph`): the call-graph sections filled,
//!   `-dump-callgraph`.
//! - `mercury.rs` (`mercury`, with `mercury/`: the banks' twins, the relocations, the
//!   records): the sm_100+ capsule-Mercury half of the image.
//! - `notes.rs` (`finish`): kept relocation sections, the final section order and the
//!   image handed to the writer (`creation.rs`: nvlink's creation order of names).
//!
//! How the steps share what they make, so that a step's signature says what it reads and
//! writes (and its comment says which parts, by these names; every step may read the
//! inputs, `parsed` and `opts`, which a comment names where one option decides):
//!
//! - The merge state, `Merger` (state.rs), holds what every step reads: the inputs,
//!   `parsed`, `opts`, `diag` and `res` (shared references, private to state.rs and read
//!   through accessors: no step can change or re-point them) and `code` (made in full by
//!   `Merger::with_functions`, which the spine calls to make the merge state; its fields
//!   private to functions.rs, read elsewhere through accessors that hand shared
//!   references), and one thing the steps write: `out`, the image's sections as they are
//!   built (output.rs: which get a section symbol, which are a function's own). A step
//!   taking `&self` writes nothing but its messages (`diag`, in the spine's order, which
//!   is nvlink's order of its messages; `-dump-callgraph` prints its dump); one taking
//!   `&mut self` also adds sections to `out`, or fills them (the compiler checks which
//!   steps may write), in the spine's order, which is the order of the sections in
//!   `out`; where a later step reads them, a product orders the two (below).
//! - Every other product is handed by the spine, so that the compiler checks that it is
//!   made before it is read: `CallTrees` (to the register limits, bank 2, shared memory
//!   and `.nv.info`, which takes it and lets it go), the register limits' errors (which
//!   the spine reports after `.nv.info`), `ExternRefs` (what the live functions'
//!   `EXTERNS` records name, as `externs`: to the call-graph tables, the symbols,
//!   `.nv.info`, the call-graph step, `-dump-callgraph` and the Mercury step), `Notes`
//!   (whether `.nv.compat` was made: to the sections, whose sections follow the notes',
//!   and the creation order), `Frames` (the sections step's pruned sm_100+ debug pieces:
//!   `.debug_frame`, the line tables, `.nv_debug_info_reg_sass`; to the relocations),
//!   the `Placement` (where each input section went: made by `sections`, `Unbanked`
//!   until `bank2`, the only step that can open it, adds the device functions' bank
//!   pieces and hands it on, read-only from then: to shared memory, the symbols, which
//!   copy what `out_index` needs of it, the relocations, `.nv.info`, the Mercury step
//!   and `finish`), `Bank2` (the device functions' bank-2
//!   places: to the creation order, the Mercury step and `finish`), `SharedLayout` (as
//!   `layout`: to the creation order, which orders its windows, the symbols, the
//!   relocations, the Mercury step and `finish`), the call-graph tables (`TableSections`,
//!   made empty by `tables`, taken by the creation order, which orders them, and by
//!   `callgraph`, which fills them and hands on `Tables`: added to by the Mercury step,
//!   placed by `finish`, so both run after they are filled), nvlink's creation `Order`
//!   (to the symbols and `finish`, which takes its list of names), the `SymbolTable` (as
//!   `symtab`: to the relocations, `.nv.info`, the call-graph step, the Mercury step and
//!   `finish`, which takes it), the relocations' kept lists and failure (`Relocated`: the
//!   Mercury step adds to the lists, the spine reports the failure, `finish` makes
//!   sections of the lists), `KernelInfo` (to the Mercury step) and the Mercury symbol
//!   table (`MercSymbols`, to `finish`).
//! - So which sections exist when a step runs follows from the products it takes: each
//!   step that makes sections a later one reads hands on a product that step takes
//!   (the creation order takes `Notes`, `Bank2`, `SharedLayout` and `TableSections`, the
//!   last two for that order alone). Only the order of the messages (nvlink's) is the
//!   spine's alone.
//!
//! Beside the steps: `calllists.rs`, nvlink's numbered call lists (built on demand by
//! reglimit, nvinfo and callgraph), and `cudadevrt.rs`, the symbols of libcudadevrt the
//! linker fills in.

mod bank2;
mod callgraph;
mod calllists;
mod compat;
mod creation;
mod cudadevrt;
mod externs;
mod functions;
mod handed;
mod linetable;
mod memorder;
mod mercury;
mod notes;
mod nvinfo;
mod output;
mod parsed;
mod placement;
mod reglimit;
mod regsass;
mod relocations;
mod resolve;
mod sections;
mod shared;
mod state;
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

use functions::CallTrees;
use nvinfo::KernelProps;
use parsed::Parsed;
use placement::Placement;
use relocations::RelocList;
use resolve::{Kind, kind};
use shared::SharedLayout;
use state::Merger;
use symbols::SymbolTable;

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
    /// The image's own note is libnvJitLink's (the drop-in, `nvjitlink/`), not nvlink's.
    pub jit_note: bool,
    /// `-extrawarn`: nvlink's extra warnings (functions whose address is taken and that
    /// nothing calls directly).
    pub extra_warnings: bool,
}

/// One input cubin and where it came from.
pub struct Input {
    pub cubin: Cubin,
    /// From libcudadevrt (its code goes only where something calls it).
    pub cudadevrt: bool,
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

/// A section of an input: the input's position and the section's index in it.
/// (Ordered and hashed as the pair `(input, sec)`, as `SymKey`.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct SecKey {
    input: usize,
    sec: usize,
}

impl SecKey {
    const fn new(input: usize, sec: usize) -> SecKey {
        SecKey { input, sec }
    }
}

/// A function of the program: its position in `CodeGraph::funcs()` (nvlink's function
/// order).
/// (Ordered and hashed as that position; vectors with an entry per function are indexed
/// by it directly.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct FuncId(usize);

impl FuncId {
    /// Every function id below `n`, in order.
    fn all(n: usize) -> impl DoubleEndedIterator<Item = FuncId> + Clone {
        (0..n).map(FuncId)
    }
}

impl<T> std::ops::Index<FuncId> for Vec<T> {
    type Output = T;
    fn index(&self, f: FuncId) -> &T {
        &self[f.0]
    }
}

impl<T> std::ops::IndexMut<FuncId> for Vec<T> {
    fn index_mut(&mut self, f: FuncId) -> &mut T {
        &mut self[f.0]
    }
}

pub fn link(inputs: &[Input], opts: &MergeOptions, diag: &Diagnostics) -> Result<Image> {
    let ctx = crate::context::LinkContext::new(diag, &Default::default(), Vec::new());
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
        let now = std::time::Instant::now();
        crate::trace::event("merge", name, t, now, Vec::new);
        steps.push((name, now - t));
        t = now;
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
    let res = resolve::resolve(inputs, &parsed, diag)?;
    lap("resolve");
    let (mut m, trees) = Merger::with_functions(inputs, &parsed, opts, diag, &res)?;
    let register_errors = m.check_register_limits(&trees)?;
    m.address_taken_warnings()?;
    let externs = m.read_externs()?;
    lap("functions");
    m.undefined()?; // (resolve.rs: it needs the live code)
    lap("undefined");
    let notes = m.notes();
    let (frames, placement) = m.sections(&notes)?;
    let (banks, placement) = m.bank2(&trees, placement);
    lap("sections");
    let layout = m.shared(&trees, &placement);
    lap("shared");
    let table_sections = m.tables(&externs); // (callgraph.rs: its sections get section symbols)
    let mut order = m.creation_order(&notes, &banks, &layout, &table_sections);
    let symtab = m.symbols(&placement, &layout, &externs, &order);
    lap("symbols");
    let work = m.relocations(&placement, &layout, &symtab, &frames);
    let mercury_layout = m.mercury_layout();
    let relocations::Relocated { mut kept, failure } = work.apply(&mut m.out, mercury_layout)?;
    drop(frames);
    lap("relocations");
    let kernel_info = m.info(trees, &placement, &symtab, &externs)?;
    // (failures nvlink reports after the `.nv.info` step's warnings: a stack size that
    // cannot be determined is said before a register limit a kernel's callee breaks)
    if !register_errors.is_empty() {
        for e in &register_errors {
            diag.error(e);
        }
        return Err(Error::error(""));
    }
    if let Some(e) = failure {
        return Err(e);
    }
    lap("info");
    let mut tables = m.callgraph(&symtab, &externs, table_sections)?;
    if opts.dump_callgraph {
        m.dump_callgraph(&externs)?;
    }
    lap("callgraph");
    let merc_symbols = m.mercury(
        &placement,
        &layout,
        &symtab,
        &externs,
        &kernel_info,
        &banks,
        &mut tables,
        &mut kept,
    )?;
    lap("mercury");
    let image = m.finish(
        &placement,
        &layout,
        symtab,
        kept,
        merc_symbols,
        tables,
        &mut order,
        &banks,
    );
    ctx.dispose(m);
    ctx.dispose(res);
    // (freed, not left to the exit: the writer reuses their room, 0.3 MB off the
    // 128-unit link's peak)
    drop(parsed);
    lap("finish");
    Ok((image, steps))
}

impl<'a> Merger<'a> {
    /// nvlink's sm_100+ layout (`Image::mercury_layout`).
    fn mercury_layout(&self) -> bool {
        self.opts().target.is_some_and(|t| t.sm >= 100)
    }

    /// Debug links, and `--preserve-relocs` links (nvlink lays them out the same way):
    /// every function kept, shared variables' symbols kept.
    fn keeps_all(&self) -> bool {
        self.opts().debug || self.opts().preserve_relocs
    }

    /// A `--preserve-relocs` link without `-g`: it keeps all, but its roots are a plain
    /// link's (`reached`); a debug link's are every kernel.
    fn preserving_only(&self) -> bool {
        self.opts().preserve_relocs && !self.opts().debug
    }

    /// Whether dynamic (`extern`) shared arrays keep a symbol, with one offset for every
    /// function: a debug link's; a `--preserve-relocs` link without `-g` lays them out
    /// as a plain link does (an offset per function, no symbol, no listed relocation).
    fn dynamic_shared_symbols(&self) -> bool {
        self.opts().debug
    }

    fn sym(&self, k: SymKey) -> &'a Symbol {
        &self.inputs()[k.input].cubin.symbols[k.sym]
    }

    fn origin(&self, i: usize) -> &'a str {
        &self.inputs()[i].cubin.origin
    }

    /// Function `f`'s `.nv.info.<fn>` section in its input, if it has one.
    fn info_section_of(&self, f: FuncId) -> Option<&'a Section> {
        let c = &self.inputs()[self.code.funcs()[f].key.input].cubin;
        self.code.funcs()[f].info.map(|si| &c.sections[si])
    }

    /// The value of a function's global `.nv.info` record `attr` (0 without one).
    fn sym_value(&self, SymKey { input: i, sym: s }: SymKey, attr: u8) -> u32 {
        self.parsed()[i].sym_value(s, attr)
    }

    /// The entries of relocation section `ri` of input `i`.
    fn relocs(&self, i: usize, ri: usize) -> Result<&'a [Reloc]> {
        self.parsed()[i].relocs[ri].as_deref().map_err(Clone::clone)
    }

    /// The definition a symbol of an input stands for: itself when local or chosen,
    /// the chosen definition of its name when global.
    fn target(&self, k: SymKey) -> Option<SymKey> {
        self.res().target(k)
    }

    /// The global name a symbol of an input stands for (`None` for a local).
    fn global_id(&self, k: SymKey) -> Option<usize> {
        self.res().global_id(k)
    }

    /// The function a symbol defines (as the chosen definition), if any.
    fn func_defined_by(&self, SymKey { input: i, sym: s }: SymKey) -> Option<FuncId> {
        self.code.func_at()[i][s]
    }

    /// The function a symbol of an input stands for, if it is one.
    fn func_of(&self, k: SymKey) -> Option<FuncId> {
        self.target(k).and_then(|t| self.func_defined_by(t))
    }

    /// The symbol a global name stands for in the output: its chosen definition, else
    /// its first reference.
    fn representative(&self, k: SymKey) -> SymKey {
        self.res().representative(k)
    }

    /// The output symbol an input symbol stands for, in `symtab`.
    fn out_index(&self, symtab: &SymbolTable, k: SymKey) -> Option<usize> {
        let s = self.sym(k);
        if s.ty == STT_SECTION {
            return symtab.section_symbol_of_input(&SecKey::new(k.input, s.shndx as usize));
        }
        if s.bind == STB_LOCAL {
            return symtab.index_of(&k);
        }
        symtab.index_of(&self.representative(k))
    }

    /// Whether the symbol is a global definition another input's definition replaced.
    fn is_replaced(&self, k: SymKey) -> bool {
        let sym = self.sym(k);
        sym.defined() && sym.bind != STB_LOCAL && sym.ty != STT_SECTION && self.target(k) != Some(k)
    }

    /// Whether input `k.input`'s call-graph entries for function symbol `k` are read: the
    /// chosen definition's, and those of a copy that was the chosen one when nvlink read
    /// it, which a later one replaced (nvlink reads the inputs in order: a weak
    /// definition that replaces the one before takes over its symbol with the calls
    /// read so far, and a copy that loses when read is ignored; a Thrust unit's
    /// constructor calling `malloc` beside a `-G` unit's copy, which has fewer
    /// registers: fixtures `wkfde1.cu`, `wkfde2.cu`, `wklive.cu`).
    fn calls_kept(&self, k: SymKey) -> bool {
        !self.is_replaced(k) || self.res().once_chosen(k)
    }

    /// Whether the symbol stands for a function (or a section of one) that was removed.
    fn symbol_is_dead(&self, k: SymKey) -> bool {
        let s = self.sym(k);
        if s.ty == STT_SECTION {
            return self.is_dropped_function_section(k.input, s.shndx as usize);
        }
        self.func_of(k).is_some_and(|f| !self.code.live()[f])
    }

    /// Whether a relocation target lies in a constant bank (a module bank or a kernel's
    /// parameter bank): nvlink's sm_100+ `--preserve-relocs` image lists none of the
    /// relocations it applies against one (docs/rules/preserve-relocs.md).
    fn in_constant_bank(&self, k: SymKey) -> bool {
        let s = self.sym(k);
        let t = if s.ty == STT_SECTION {
            Some(k)
        } else {
            self.target(k)
        };
        t.is_some_and(|t| {
            let ts = self.sym(t);
            (self.inputs()[t.input].cubin.sections.get(ts.shndx as usize))
                .is_some_and(|sec| constant_bank(sec.ty).is_some())
        })
    }

    /// Whether a relocation for target `k`'s generic (load) address, in a section of
    /// `flags`, is left for the driver though the bank offset is known: initialised data
    /// (not code) holding a `__constant__` variable's address, `__constant__ const char
    /// *p = ctab;`, as nvlink leaves it (its R_CUDA_G64 and R_MERCURY_G64 alike).
    fn constant_address_for_driver(&self, flags: u64, k: SymKey) -> bool {
        flags & crate::elf::cubin::SHF_EXECINSTR == 0 && self.in_constant_bank(k)
    }

    /// `(value, constant bank, known at link time)` of a relocation target (a shared
    /// variable's offset from `layout`, a piece's from `placement`).
    fn link_value(
        &self,
        placement: &Placement,
        layout: &SharedLayout,
        k: SymKey,
    ) -> (u64, u32, bool) {
        let s = self.sym(k);
        if !s.defined() && s.bind != STB_LOCAL && is_table_symbol(&s.name) {
            return (0, 0, true);
        }
        if let Some(v) = self.linker_value(s) {
            return (v, 0, true);
        }
        if s.ty != STT_SECTION
            && let Some(o) = layout.offset(self.representative(k))
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
        let c = &self.inputs()[t.input].cubin;
        let Some(sec) = c.sections.get(ts.shndx as usize) else {
            return (0, 0, false);
        };
        let piece = placement
            .of(&SecKey::new(t.input, ts.shndx as usize))
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

    fn new_section(&mut self, s: OutSection, symbol: bool) -> usize {
        self.out.push(s, symbol)
    }
}
