//! sm_100+ capsule Mercury, merged in step with the SASS. Beside each function's SASS,
//! ptxas for sm_100 and newer writes a compact Mercury copy the driver finalizes
//! (`.nv.capmerc.text.<fn>`), with a symbol table of its own (`.nv.merc.symtab`, names in
//! the shared `.strtab`), relocations (`.nv.merc.rela.*`), `.nv.info` copies, a call graph
//! and a `.debug_frame`; its constant bank and initialised data are views of the SASS
//! ones (the same file bytes). nvlink 13.5 keeps and merges all of it. This module builds
//! that half of the image from the decisions the merge already took (live functions,
//! placed sections, output symbols). The rules nvlink's sm_100+ links change on the SASS
//! side live with the steps they change: `.debug_frame` and the line tables lose the
//! entries of removed functions and `.nv_debug_info_reg_sass` is cleared of them
//! (sections.rs, linetable.rs, regsass.rs), the line tables' string bases move with
//! `.debug_str` (linetable.rs), and a function's `.nv.info` records are reversed only as
//! far as the Mercury copy has them (nvinfo.rs).
//!
//! Rules read off nvlink 13.5 (fixtures `merge/*_100.cubin`, `*_120.cubin`):
//! * the Mercury symbol table is the SASS one without the parameter banks' section
//!   symbols (which sm_100+ images put last for that reason), so both number alike;
//!   a section symbol is named after its Mercury section without the `.nv.merc`/
//!   `.nv.capmerc` prefix and points at it (at the SASS section where there is none:
//!   `.nv.global`, `.nv.shared.*`); symbols keep ptxas's CUDA types and `st_other`, and
//!   the Mercury sizes, values of undefined symbols (0 for `.nv.reservedSmem.*`);
//! * a capsule's first word is the section index of its function's SASS `.text`;
//! * Mercury relocations: the ones the SASS side resolves at link time (constant banks,
//!   shared memory, the unified-table offsets) are dropped and the capsule left as it is
//!   (their offsets are in the finalized code, past the capsule's bytes); `.debug_frame`
//!   CIE pointers are applied, a removed function's FDE gets a zero range; unified
//!   address pairs become plain ones; the rest stay, in reverse order, as on the SASS side;
//! * a Mercury section that is a view of a SASS one in the inputs (debug information,
//!   abbreviations, strings) stays one; its relocations against other views go (the
//!   SASS side wrote them), those against a section with bytes of its own
//!   (`.nv.merc.debug_line`) stay for the driver;
//! * `.nv.merc.nv.info` and `.nv.merc.nv.callgraph` are the SASS ones over the Mercury
//!   symbols; per-function records are reversed, `EXTERNS` as on the SASS side, kernels' barrier
//!   and stack records propagated as on the SASS side.

use super::relocations::{KeptList, applied_under_r, is_unplaced_label, line_reference};
use super::*;

/// The Mercury step's symbol table: its output section and its symbols.
pub(super) type MercSymbols = (usize, Vec<OutSymbol>);

mod banks;
mod records;
mod relocs;

/// The Mercury section's name without its prefix: what its section symbol is called and,
/// but for the constant bank, the name of the SASS section it stands for.
pub(super) fn stripped(merc: &str) -> Option<&str> {
    merc.strip_prefix(".nv.capmerc")
        .or_else(|| merc.strip_prefix(".nv.merc"))
}

/// The SASS section a Mercury section stands for.
fn sass_name(merc: &str) -> Option<&str> {
    match stripped(merc)? {
        ".nv.constant.user" => Some(".nv.constant3"),
        s => Some(s),
    }
}

/// The SASS section of input `c` a Mercury section stands for (a function's bank 2,
/// `.nv.merc.nv.constant.optimizer.<fn>`, stands for `.nv.constant2.<fn>`): the `nth`
/// section named as Mercury section `merc`'s SASS twin (the last one
/// when there are fewer): an `-r` output holds one `.text.<f>` and one
/// `.nv.capmerc.text.<f>` per unit's local function `f`, the k-th capsule the k-th code's.
fn sass_twin_nth(c: &Cubin, merc: &str, nth: usize) -> Option<usize> {
    let name = sass_name(merc)?;
    let joined;
    let name = match name.strip_prefix(".nv.constant.optimizer.") {
        Some(f) => {
            joined = creation::concat(".nv.constant2.", f);
            joined.as_str()
        }
        None => name,
    };
    let mut same = (c.sections.iter().enumerate()).filter(|(_, s)| *s.name == *name);
    let first = same.next()?.0;
    Some(same.take(nth).last().map_or(first, |(k, _)| k))
}

/// How one input's Mercury view maps onto its SASS one.
struct View {
    /// Mercury section → SASS section of the same input.
    sass_of: HashMap<usize, usize>,
    merc_of: HashMap<usize, usize>,
    /// Mercury symbol → SASS symbol of the same input.
    normal_of: Vec<Option<usize>>,
    /// SASS symbol → Mercury symbol.
    merc_sym_of: HashMap<usize, usize>,
}

impl View {
    /// The SASS twin of Mercury section `merc` (a capsule's code section).
    pub(super) fn sass_text(&self, merc: usize) -> Option<usize> {
        self.sass_of.get(&merc).copied()
    }

    fn of(c: &Cubin) -> View {
        let mut sass_of = HashMap::default();
        let mut merc_of = HashMap::default();
        let mut seen: HashMap<&str, usize> = HashMap::default();
        for (i, s) in c.sections.iter().enumerate() {
            if !s.is_mercury() {
                continue;
            }
            let nth = seen.entry(s.name.as_str()).or_insert(0);
            *nth += 1;
            if let Some(n) = sass_twin_nth(c, &s.name, *nth - 1) {
                sass_of.insert(i, n);
                merc_of.insert(n, i);
            }
        }
        // (a name's symbols in order: an `-r` output holds one local `$str` per unit, the
        // k-th Mercury one the k-th SASS one)
        let mut by_name: HashMap<&str, Vec<usize>> = HashMap::default();
        let mut section_sym: HashMap<usize, usize> = HashMap::default();
        for (k, s) in c.symbols.iter().enumerate().skip(1) {
            if s.ty == STT_SECTION {
                section_sym.entry(s.shndx as usize).or_insert(k);
            } else {
                by_name.entry(s.name.as_str()).or_default().push(k);
            }
        }
        let mut seen: HashMap<&str, usize> = HashMap::default();
        let normal_of: Vec<Option<usize>> = c
            .merc_symbols
            .iter()
            .enumerate()
            .map(|(k, s)| match k {
                0 => Some(0),
                _ if s.ty == STT_SECTION => {
                    let sec = s.shndx as usize;
                    let sec = sass_of.get(&sec).copied().unwrap_or(sec);
                    section_sym.get(&sec).copied()
                }
                _ => {
                    let same = by_name.get(s.name.as_str())?;
                    let nth = seen.entry(s.name.as_str()).or_insert(0);
                    *nth += 1;
                    same.get(*nth - 1).or(same.last()).copied()
                }
            })
            .collect();
        let mut merc_sym_of = HashMap::default();
        for (k, n) in normal_of.iter().enumerate().skip(1) {
            if let Some(n) = n {
                merc_sym_of.entry(*n).or_insert(k);
            }
        }
        View {
            sass_of,
            merc_of,
            normal_of,
            merc_sym_of,
        }
    }
}

/// What `mercury`'s sub-steps share while they build the Mercury half.
struct Capsules {
    exec: bool,
    /// An image without inputs (it still has the Mercury symbol table and call graph).
    empty: bool,
    views: Vec<View>,
    /// Flags, alignment and type of each Mercury section kind, from the first input
    /// that has it.
    proto: HashMap<String, Section>,
    /// `.nv.merc.symtab`.
    symtab: usize,
    /// Mercury sections placed from the inputs: (input, section) → (output, offset).
    placed: HashMap<(usize, usize), (usize, u64)>,
    /// SASS output section → its Mercury view.
    view_of: HashMap<usize, usize>,
    /// SASS code section → (input, input section).
    code_of: HashMap<usize, (usize, usize)>,
    /// (capsule, its function's symbol).
    capsule_fn: Vec<(usize, SymKey)>,
    /// Capsule → its SASS code section.
    text_of_capsule: HashMap<usize, usize>,
    /// (SASS table, Mercury table).
    tables: Vec<(usize, usize)>,
    /// Output symbol → its Mercury symbol's index (+1).
    merc_index: Vec<Option<u32>>,
    /// A device function's Mercury bank 2 → its places, one per kernel bank holding it
    /// (`banks.rs`; `placed` has the first).
    copies: HashMap<(usize, usize), Vec<(usize, u64)>>,
    /// A kernel's Mercury bank → its SASS bank, the size of the kernel's own data at its
    /// start (0 without), and its place in nvlink's order of the banks.
    sass_bank: HashMap<usize, (usize, u64, usize)>,
}

impl Capsules {
    /// A new Mercury section, with the flags, alignment and entry size of its kind.
    pub(super) fn section(&self, name: &str, key: &str, ty: u32) -> OutSection {
        let mut o = OutSection::new(name, ty, 0x1000_0000);
        if let Some(p) = self.proto.get(key) {
            o.flags = p.flags;
            o.align = p.align;
            o.entsize = p.entsize;
        }
        o
    }

    /// The output Mercury symbol of input `i`'s Mercury symbol `k`.
    fn merc_out(&self, m: &Merger, symtab: &SymbolTable, i: usize, k: usize) -> Option<u32> {
        let n = self.views[i].normal_of.get(k).copied().flatten()?;
        self.merc_index[m.out_index(symtab, SymKey::new(i, n))?]
    }

    /// An output symbol index (+1) as the Mercury symbol index (+1).
    fn remap(&self, o: u32) -> u32 {
        o.checked_sub(1)
            .and_then(|o| self.merc_index.get(o as usize).copied().flatten())
            .unwrap_or(0)
    }
}

impl Merger<'_> {
    /// Builds the capsule-Mercury half of the image (see the module comment), adding to
    /// `kept` (the relocations step's lists) an empty list for each SASS section whose
    /// Mercury twin keeps relocations; hands on the Mercury symbol table (its section and
    /// its symbols), which `finish` writes. Reads `code`, `res`, `out` (its SASS sections,
    /// the filled call-graph tables among them), `placement` (where the SASS twins of
    /// the Mercury sections went), `symtab`, `layout`, `externs`, `banks` and `ki` (the
    /// records' `EXTERNS` lists and kernels' values); writes `out`, `kept`
    /// and `tables` (the references of its copies of the call-graph tables) and warns
    /// where it leaves a capsule's bank offsets as ptxas wrote them; after
    /// `callgraph` (whose `Tables` it takes).
    #[allow(clippy::too_many_arguments)] // (the products it reads, each by name)
    pub(super) fn mercury(
        &mut self,
        placement: &Placement,
        layout: &SharedLayout,
        symtab: &SymbolTable,
        externs: &super::externs::ExternRefs,
        ki: &nvinfo::KernelInfo,
        banks: &bank2::Bank2,
        tables: &mut callgraph::Tables,
        kept: &mut Vec<KeptList>,
    ) -> Result<Option<MercSymbols>> {
        // an image without inputs (none had code for the target) still has nvlink's
        // Mercury symbol table and call graph
        let empty = self.inputs().is_empty() && self.mercury_layout();
        if !empty && !self.inputs().iter().any(|i| i.cubin.has_mercury()) {
            return Ok(None);
        }
        let exec = !self.opts().relocatable;
        let views: Vec<View> = self.inputs().iter().map(|i| View::of(&i.cubin)).collect();
        // flags, alignment and type of each Mercury section kind, from the first input
        // that has it
        let mut proto: HashMap<String, Section> = HashMap::default();
        for inp in self.inputs() {
            for s in inp.cubin.sections.iter().filter(|s| s.is_mercury()) {
                let key = if s.ty == SHT_CAPMERC_TEXT {
                    ".nv.capmerc.text".to_string()
                } else if s.ty == SHT_MERC_RELA {
                    ".nv.merc.rela".to_string()
                } else if s.ty == SHT_MERC_INFO && s.name != ".nv.merc.nv.info" {
                    ".nv.merc.nv.info.".to_string()
                } else {
                    s.name.to_string()
                };
                proto.entry(key).or_insert_with(|| s.clone());
            }
        }
        let mut st = Capsules {
            exec,
            empty,
            views,
            proto,
            symtab: 0,
            placed: HashMap::default(),
            view_of: HashMap::default(),
            code_of: HashMap::default(),
            capsule_fn: Vec::new(),
            text_of_capsule: HashMap::default(),
            tables: Vec::new(),
            merc_index: Vec::new(),
            copies: HashMap::default(),
            sass_bank: HashMap::default(),
        };
        let mut sym = st.section(".nv.merc.symtab", ".nv.merc.symtab", SHT_MERC_SYMTAB);
        sym.link = Ref::Raw(2);
        sym.align = 8;
        sym.entsize = 24;
        st.symtab = self.new_section(sym, false);
        self.merc_capsules(placement, layout, &mut st);
        self.merc_sections(placement, &mut st);
        self.merc_banks(placement, banks, &mut st); // (banks.rs)
        self.merc_tables(&mut st);
        let msyms = self.merc_symbol_table(layout, symtab, &mut st);
        self.merc_relocations(placement, layout, symtab, &st, banks, kept)?;
        self.merc_info(symtab, externs, &st, ki, tables)?;
        Ok(Some((st.symtab, msyms)))
    }

    /// The capsules (`.nv.capmerc.text.<fn>`), in the order of the live functions' SASS
    /// code sections.
    fn merc_capsules(&mut self, placement: &Placement, layout: &SharedLayout, st: &mut Capsules) {
        // capsules, in the order of the SASS code sections
        let mut text_of: Vec<(usize, usize, usize)> = Vec::new(); // (out text, input, text)
        for f in FuncId::all(self.code.funcs().len()) {
            if !self.code.live()[f] {
                continue;
            }
            let i = self.code.funcs()[f].key.input;
            if let Some(&(t, _)) = placement.of(&SecKey::new(i, self.code.funcs()[f].text)) {
                text_of.push((t, i, self.code.funcs()[f].text));
            }
        }
        text_of.sort();
        // SASS code section → (input, input section)
        st.code_of = text_of.iter().map(|&(t, i, text)| (t, (i, text))).collect();
        for &(t, i, text) in &text_of {
            let c = &self.inputs()[i].cubin;
            let Some(&m) = st.views[i].merc_of.get(&text) else {
                continue;
            };
            let s = &c.sections[m];
            let mut o = st.section(&s.name, ".nv.capmerc.text", s.ty);
            o.align = s.align;
            o.link = Ref::Section(st.symtab);
            o.data = c.bytes(s).to_vec();
            self.patch_bank_fields(placement, layout, i, m, &mut o.data, &st.views[i]); // (records.rs)
            if o.data.len() >= 4 {
                o.patches.push((0, Ref::Section(t)));
            }
            let id = self.out.push_function(o, false, i);
            st.placed.insert((i, m), (id, 0));
            st.view_of.insert(t, id);
            st.text_of_capsule.insert(id, t);
            let f = self.code.func_of_text()[&SecKey::new(i, text)];
            st.capsule_fn.push((id, self.code.funcs()[f].key));
        }
    }

    /// The other Mercury sections with bytes of their own (`.nv.merc.debug_frame`), and
    /// the views of SASS data.
    fn merc_sections(&mut self, placement: &Placement, st: &mut Capsules) {
        // the other sections with bytes of their own (`.nv.merc.debug_frame`), merged by
        // name in input order; the views of SASS sections share their bytes
        let mut by_name: HashMap<String, usize> = HashMap::default();
        // (a view: the same file bytes as the SASS section it stands for)
        let is_view = |c: &Cubin, s: &Section, n: usize| {
            c.sections.get(n).is_some_and(|t| t.offset == s.offset) && s.has_bytes()
        };
        // debug sections some input has with bytes of their own are not views in the
        // output (ptxas made `.nv_debug_info_reg_type` a view in one unit, not another)
        let mut own: HashSet<&str> = HashSet::default();
        for (i, view) in st.views.iter().enumerate() {
            let c = &self.inputs()[i].cubin;
            for (si, s) in c.sections.iter().enumerate() {
                if let Some(&n) = view.sass_of.get(&si)
                    && s.flags & SHF_ALLOC == 0
                    && !is_view(c, s, n)
                {
                    own.insert(s.name.as_str());
                }
            }
        }
        for (i, view) in st.views.iter().enumerate() {
            let c = &self.inputs()[i].cubin;
            for (si, s) in c.sections.iter().enumerate() {
                if !s.is_mercury()
                    || matches!(
                        s.ty,
                        SHT_CAPMERC_TEXT
                            | SHT_MERC_RELA
                            | SHT_MERC_INFO
                            | SHT_MERC_SYMTAB
                            | SHT_MERC_CALLGRAPH
                            | SHT_MERC_PROTOTYPE
                    )
                {
                    continue;
                }
                let sass = view.sass_of.get(&si).copied();
                // (bank 2 goes into the kernels' banks, `merc_banks`, or with a
                // function no kernel reaches)
                if st.exec && sass.is_some_and(|n| constant_bank(c.sections[n].ty) == Some(2)) {
                    continue;
                }
                // (views: the loaded data, constant bank and initialised data, and the
                // debug sections nvlink keeps as views, `.nv.merc.debug_info`,
                // `.debug_abbrev`, `.debug_str`: they hold what the SASS side's
                // relocations wrote)
                let shared = sass.filter(|&n| {
                    is_view(c, s, n) && (s.flags & SHF_ALLOC != 0 || !own.contains(s.name.as_str()))
                });
                if let Some(n) = shared {
                    // a view: same bytes as the SASS section, wherever that went
                    let Some(&(out, at)) = placement.of(&SecKey::new(i, n)) else {
                        continue;
                    };
                    let id = *by_name.entry(s.name.to_string()).or_insert_with(|| {
                        let mut o = OutSection::new(&s.name, s.ty, s.flags);
                        o.alias = Some(out);
                        self.new_section(o, false)
                    });
                    // (aligned as the strictest input's view, as the SASS section is)
                    self.out[id].align = self.out[id].align.max(s.align);
                    self.capsule_info(st, i, s, id);
                    st.placed.insert((i, si), (id, at));
                    st.view_of.insert(out, id);
                    continue;
                }
                let id = *by_name.entry(s.name.to_string()).or_insert_with(|| {
                    let mut o = OutSection::new(&s.name, s.ty, s.flags);
                    o.entsize = s.entsize;
                    self.new_section(o, false)
                });
                self.capsule_info(st, i, s, id);
                let o = &mut self.out[id];
                let a = s.align.max(1);
                o.align = o.align.max(a);
                let at = if s.has_bytes() {
                    o.data
                        .resize((o.data.len() as u64).next_multiple_of(a) as usize, 0);
                    let at = o.data.len() as u64;
                    o.data.extend_from_slice(c.bytes(s));
                    at
                } else if s.ty == SHT_CUDA_SHARED_RESERVED {
                    sections::reserved_piece(o, &c.merc_symbols, (si, s), st.exec)
                } else {
                    let at = o.mem_size.next_multiple_of(a);
                    o.mem_size = at + s.size;
                    at
                };
                st.placed.insert((i, si), (id, at));
                if let Some(n) = sass
                    && let Some(&(out, _)) = placement.of(&SecKey::new(i, n))
                {
                    st.view_of.insert(out, id);
                }
                // (the line tables' string bases, as on the SASS side)
                if s.name == ".nv.merc.debug_line" {
                    self.rebase_piece(placement, (i, id, at, s.size));
                }
            }
        }
    }

    /// A Mercury section that belongs to a function's capsule (`sh_info`, with
    /// `SHF_INFO_LINK`: an `-r` output's `.nv.merc.nv.constant.optimizer.<f>`, a device
    /// function's `switch` table) names that capsule in the output too. (Was 0: nvlink
    /// and libnvJitLink crashed, SIGSEGV, linking such an `-r` output.)
    fn capsule_info(&mut self, st: &Capsules, i: usize, s: &Section, id: usize) {
        if s.flags & SHF_INFO_LINK != 0
            && let Some(&(cap, _)) = st.placed.get(&(i, s.info as usize))
            && self.out[cap].ty == SHT_CAPMERC_TEXT
        {
            self.out[id].info = Ref::Section(cap);
        }
    }

    /// `.nv.merc.nv.callgraph` and `.nv.merc.nv.prototype` (filled in `merc_info`).
    fn merc_tables(&mut self, st: &mut Capsules) {
        // (they have section symbols)
        for n in 0..self.out.len() {
            let (name, ty) = match self.out[n].ty {
                SHT_CUDA_CALLGRAPH => (".nv.merc.nv.callgraph", SHT_MERC_CALLGRAPH),
                SHT_CUDA_PROTOTYPE => (".nv.merc.nv.prototype", SHT_MERC_PROTOTYPE),
                _ => continue,
            };
            let wanted = st.proto.contains_key(name) || (st.empty && ty == SHT_MERC_CALLGRAPH);
            if !wanted {
                continue;
            }
            let mut o = st.section(name, name, ty);
            o.link = Ref::Section(st.symtab);
            o.entsize = 8;
            o.align = o.align.max(4);
            let id = self.new_section(o, false);
            st.view_of.insert(n, id);
            st.tables.push((n, id));
        }
    }

    /// The Mercury symbol table (see the module comment); each capsule's `sh_info` its
    /// function's symbol.
    fn merc_symbol_table(
        &mut self,
        layout: &SharedLayout,
        symtab: &SymbolTable,
        st: &mut Capsules,
    ) -> Vec<OutSymbol> {
        // the symbol table: the SASS one without the parameter banks' section symbols
        let symbols = symtab.symbols();
        let mut key_of: Vec<Option<SymKey>> = vec![None; symbols.len()];
        for (k, o) in symtab.mapped() {
            key_of[o] = Some(k);
        }
        st.merc_index = vec![None; symbols.len()];
        let mut msyms: Vec<OutSymbol> = Vec::new();
        for (o, s) in symbols.iter().enumerate() {
            let mut m = s.clone();
            if s.ty == STT_SECTION {
                let sec = s.section.unwrap_or(0);
                if self.out[sec].name.starts_with(".nv.constant0") {
                    continue;
                }
                if let Some(&v) = st.view_of.get(&sec) {
                    m.section = Some(v);
                    m.name = stripped(&self.out[v].name).unwrap_or(&s.name).into();
                }
            } else {
                m.section = s
                    .section
                    .map(|sec| st.view_of.get(&sec).copied().unwrap_or(sec));
                // the input's own Mercury symbol: CUDA type, st_other, Mercury size
                let ms = key_of[o].and_then(|SymKey { input: i, sym: k }| {
                    let mk = *st.views[i].merc_sym_of.get(&k)?;
                    Some((i, mk, &self.inputs()[i].cubin.merc_symbols[mk]))
                });
                if let Some((i, mk, ms)) = ms {
                    m.ty = ms.ty;
                    m.other = ms.other;
                    m.size = ms.size;
                    m.value = match st.placed.get(&(i, ms.shndx as usize)) {
                        Some(&(_, at))
                            if st.exec && sections::reserved(&self.inputs()[i].cubin, ms) =>
                        {
                            at + sections::reserved_offset(&self.inputs()[i].cubin.merc_symbols, mk)
                        }
                        Some(&(_, at)) if ms.defined() => ms.value + at,
                        _ if ms.defined() => s.value,
                        _ => ms.value,
                    };
                    // (a shared variable's symbol, kept by --preserve-relocs or -g: its
                    // offset without the reservation; internal as on the SASS side)
                    if st.exec && ms.other & STO_SHARED != 0 && s.ty != STT_FUNC {
                        m.other |= s.other & 0x3;
                        if !is_dynamic_shared(ms) {
                            m.value = s.value.saturating_sub(layout.reserve());
                        }
                    }
                }
                // (under -r every undefined data object is a CUDA object, as on the
                // SASS side)
                if !st.exec && s.section.is_none() && m.ty == STT_OBJECT {
                    m.ty = STT_CUDA_OBJECT;
                }
                if resolve::is_driver_value(&s.name) {
                    m.ty = STT_CUDA_OBJECT;
                    if s.section.is_none() {
                        m.value = ms.map_or(0, |x| x.2.value);
                    }
                }
            }
            st.merc_index[o] = Some(msyms.len() as u32 + 1);
            msyms.push(m);
        }
        for &(id, f) in &st.capsule_fn {
            if let Some(o) = symtab.index_of(&f) {
                self.out[id].info = Ref::Raw(st.merc_index[o].unwrap_or(0));
            }
        }
        msyms
    }

    /// `.nv.merc.nv.info`, the per-function records (`ki`: their `EXTERNS` lists and
    /// kernels' values), call graph and prototypes over the Mercury symbols (the tables'
    /// string references copied into `tables`).
    fn merc_info(
        &mut self,
        symtab: &SymbolTable,
        externs: &super::externs::ExternRefs,
        st: &Capsules,
        ki: &nvinfo::KernelInfo,
        tables: &mut callgraph::Tables,
    ) -> Result<()> {
        // (the SASS `.nv.info` sections: global first, then per function)
        let sass: Vec<(Ref, crate::bytes::Name, Vec<u8>)> = self
            .out
            .iter()
            .filter(|s| s.ty == SHT_CUDA_INFO)
            .map(|s| (s.info, s.name.clone(), s.data.clone()))
            .collect();
        if let Some((_, name, data)) = sass.iter().find(|s| s.1 == ".nv.info")
            && st.proto.contains_key(".nv.merc.nv.info")
        {
            let mut recs = info::parse(data, "the merged image", name, 0)?;
            for r in recs.iter_mut().filter(|r| r.has_symbol()) {
                let v = st.remap(r.payload.u32_at(0).unwrap_or(0));
                r.payload[..4].copy_from_slice(&v.to_le_bytes());
            }
            let mut o = st.section(".nv.merc.nv.info", ".nv.merc.nv.info", SHT_MERC_INFO);
            o.link = Ref::Section(st.symtab);
            o.data = info::encode_all(&recs);
            self.new_section(o, false);
        }
        for &(n, id) in &st.tables {
            let callgraph = self.out[n].ty == SHT_CUDA_CALLGRAPH;
            let mut data = Vec::with_capacity(self.out[n].data.len());
            let mut group = 0;
            for e in self.out[n].data.chunks_exact(8) {
                let a = e.u32_at(0).unwrap_or(0);
                let b = e.u32_at(4).unwrap_or(0);
                if callgraph && a == 0 && (-4..=-1).contains(&(b as i32)) {
                    group = -(b as i32);
                    data.extend_from_slice(e);
                    continue;
                }
                let b = if callgraph && (group == 1 || group == 4) {
                    st.remap(b)
                } else {
                    b
                };
                data.extend_from_slice(&st.remap(a).to_le_bytes());
                data.extend_from_slice(&b.to_le_bytes());
            }
            self.out[id].data = data;
            // (its strings where the SASS table has them)
            tables.copy_references(n, id);
        }
        // per-function records, in the order of the SASS ones
        for (info_ref, sname, _) in sass.iter().filter(|s| s.1 != ".nv.info") {
            let Ref::Section(t) = *info_ref else { continue };
            let Some(&(i, text)) = st.code_of.get(&t) else {
                continue;
            };
            let Some(&cap) = st.view_of.get(&t) else {
                continue;
            };
            let c = &self.inputs()[i].cubin;
            let name = format!(".nv.merc{sname}");
            // (the one of this function's capsule: an `-r` output has one per unit's
            // local function of a name)
            let capsule = st.views[i].merc_of.get(&text).copied();
            let infos = || (c.sections.iter()).filter(|m| m.ty == SHT_MERC_INFO && m.name == name);
            let Some(ms) =
                (infos().find(|m| Some(m.info as usize) == capsule)).or_else(|| infos().next())
            else {
                continue;
            };
            let f = self.code.func_of_text()[&SecKey::new(i, text)];
            let mut recs = Vec::new();
            for mut r in info::parse(c.bytes(ms), &c.origin, &ms.name, ms.offset)? {
                if r.has_symbol() {
                    let k = r.payload.u32_at(0).unwrap_or(0) as usize;
                    let v = st.merc_out(self, symtab, i, k).unwrap_or(0);
                    r.payload[..4].copy_from_slice(&v.to_le_bytes());
                }
                recs.push(r);
            }
            recs.reverse();
            let kernel = (st.exec && self.code.funcs()[f].entry)
                .then(|| ki.props(f))
                .flatten();
            self.finish_records(symtab, externs, f, &mut recs, ki.externs(f), kernel, |o| {
                st.remap(o)
            });
            let mut o = st.section(&name, ".nv.merc.nv.info.", SHT_MERC_INFO);
            o.flags |= SHF_INFO_LINK;
            o.link = Ref::Section(st.symtab);
            o.info = Ref::Section(cap);
            o.data = info::encode_all(&recs);
            self.new_section(o, false);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_names_map_to_their_sass_counterparts() {
        assert_eq!(sass_name(".nv.capmerc.text._Z3bari"), Some(".text._Z3bari"));
        assert_eq!(
            sass_name(".nv.merc.nv.constant.user"),
            Some(".nv.constant3")
        );
        assert_eq!(
            stripped(".nv.merc.nv.constant.user"),
            Some(".nv.constant.user")
        );
        assert_eq!(sass_name(".nv.merc.debug_frame"), Some(".debug_frame"));
        assert_eq!(sass_name(".text.x"), None);
    }
}
