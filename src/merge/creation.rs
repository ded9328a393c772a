//! nvlink's creation order: the names of the sections nvlink makes, in the order it
//! makes them, those it later drops included (`.symtab_shndx`, the parameter banks'
//! `.rel` twins, a kernel's unused `.nv.shared.<k>`, `.nv.prototype`), with the local
//! functions and data objects where it meets them, and the global names its symbol
//! table was built from, the dropped table symbols (`__UDT`, `__UFT`...) included.
//! Below sm_100 its string tables list the names in that order; at every SM the local
//! symbols and each group of sections (`.nv.info.<fn>`, the constant banks, the
//! memory-only sections) come in that order. Read off nvlink 13.5 on the merge fixtures
//! and generated programs: per input, first the code of each live function in function
//! symbol order (a static function's name before it; a kernel's `.nv.info.<k>` and
//! `.nv.shared.<k>` after it), then the sections its data objects lie in, in symbol
//! order (the `_param` marks of sm_7x/sm_8x bring the parameter banks there), then the
//! other sections named by section symbols, in order (a parameter bank with its `.rel`
//! twin), then the `.nv.info.<fn>` of the other live functions, then the relocation
//! sections in section order; the linker's tables last. A live function whose copy in
//! an earlier input (the chosen one when read) a later input's replaced (fewer
//! registers) has its sections made at that copy's place (nvlink made them there, then
//! put the kept copy's bytes in them).

use super::*;
use crate::bytes::Name;

/// The sections every image starts its list with.
const FIRST: [&str; 8] = [
    ".shstrtab",
    ".strtab",
    ".symtab",
    ".symtab_shndx",
    ".note.nv.tkinfo",
    ".note.nv.cuinfo",
    ".nv.info",
    ".nv.compat",
];

/// A name in nvlink's creation order: a section's, or a local function's or data
/// object's (its symbol).
pub(super) type Created = (Name, Option<SymKey>);

/// nvlink's creation order of the image's sections and local symbols: the
/// creation-order step's product (`Merger::creation_order`), read by the symbols step and
/// the last one.
#[derive(Default)]
pub(super) struct Order {
    /// The names in creation order.
    created: Vec<Created>,
    /// Where each name comes in `created`.
    at: HashMap<Name, usize>,
    /// Each output section's place in `created`, for the sections made before the step.
    ranks: Vec<usize>,
}

impl Order {
    /// The name `n` as the creation order holds it, if it does.
    pub(super) fn name(&self, n: &str) -> Option<Name> {
        self.at.get_key_value(n).map(|(k, _)| k.clone())
    }

    /// The names in creation order, taken by the last step.
    pub(super) fn take_created(&mut self) -> Vec<Created> {
        std::mem::take(&mut self.created)
    }
}

/// The linker's own tables, made after every input's sections.
const LAST: [&str; 3] = [".nv.callgraph", ".nv.prototype", ".nv.rel.action"];

/// The creation list as it is made: each name once (a local function's sections under
/// `copy_name` where another input's function of the same name made them first).
#[derive(Default)]
struct Made {
    names: Vec<Created>,
    seen: HashMap<Name, usize>,
    /// A local function's section names and the input whose copy made them first.
    first_copy: HashMap<Name, usize>,
}

impl Made {
    /// Section name `n` where nvlink makes it, unless made before; `copy`: a local
    /// function's sections, of that input (-G units' own `__assert_fail`,
    /// `__fAtomicAdd`).
    fn add(&mut self, n: Name, copy: Option<usize>) {
        let n = match (self.seen.contains_key(&n), copy) {
            (false, _) => {
                if let Some(i) = copy {
                    self.first_copy.insert(n.clone(), i);
                }
                n
            }
            (true, Some(i)) if self.first_copy.get(&n).is_some_and(|&j| j != i) => copy_name(&n, i),
            _ => return,
        };
        if let std::collections::hash_map::Entry::Vacant(v) = self.seen.entry(n) {
            self.names.push((v.key().clone(), None));
            v.insert(self.names.len() - 1);
        }
    }

    /// A local function's or data object's symbol (and name) here.
    fn local(&mut self, name: Name, key: SymKey) {
        self.names.push((name, Some(key)));
    }
}

/// What holds for every input of the link: whether the parameter banks' `.rel` twins
/// and `.nv.rel.action` are made (not under -r), and whether the host objects' tables
/// decide the kernels.
#[derive(Clone, Copy)]
struct Rules {
    twins: bool,
    tables: bool,
}

impl<'a> Merger<'a> {
    /// Section names in nvlink's creation order, each once, and between them the local
    /// functions and data objects where nvlink meets them (`Some`: their symbols, and
    /// in `.strtab` the names of those the image keeps, come there).
    /// Also returns where each section name comes in the list.
    pub(super) fn created_sections(
        &self,
        notes: &super::notes::Notes,
        banks: &super::bank2::Bank2,
    ) -> (Vec<Created>, HashMap<Name, usize>) {
        let mut made = Made::default();
        for n in FIRST {
            // (`.nv.compat` where the image has one: none below sm_80)
            if n != ".nv.compat" || notes.has_compat() {
                made.add(Name::from(n), None);
            }
        }
        let rules = Rules {
            // (a parameter bank's `.rel` twin, and `.nv.rel.action`, are not made under -r)
            twins: !self.opts().relocatable,
            // (under -r a kernel the filter drops stays, made as a plain function is;
            // so does one `-kernels-used` drops under --preserve-relocs without -g, not
            // one the host objects' tables leave out)
            tables: self.opts().kernels.as_ref().is_none_or(|k| k.tables),
        };
        for i in 0..self.inputs().len() {
            // (a copy a later input's replaced: nvlink made its sections here, and the
            // kept copy's bytes went into them; by its code section)
            let taken_over = self.taken_over(i);
            let any_code = self.created_code(i, &taken_over, rules, &mut made);
            self.created_data(i, &taken_over, rules, &mut made);
            // (an input without device code has an empty `.debug_frame` and no section
            // symbol for it: nvlink makes it here all the same; one with code has one)
            if !any_code && let Some(s) = unnamed_debug_frame(&self.inputs()[i].cubin) {
                made.add(Name::from(s), None);
            }
            self.created_rest(i, &taken_over, rules, &mut made);
        }
        for n in LAST {
            if n == ".nv.rel.action" {
                // (the kernels' banks `bank2` made, where nvlink makes them)
                for &id in banks.made() {
                    made.add(self.out[id].name.clone(), None);
                }
                if !rules.twins {
                    continue;
                }
            }
            made.add(Name::from(n), None);
        }
        (made.names, made.seen)
    }

    /// Whether function `f` is made as a kernel (its `.nv.info.<k>` and `.nv.shared.<k>`
    /// with its code).
    fn made_as_entry(&self, f: FuncId, rules: Rules) -> bool {
        self.code.funcs()[f].entry
            && ((rules.twins && (rules.tables || !self.preserving_only()) && !self.lto_unlisted(f))
                || self.kernel_kept(f))
    }

    /// Input `i` when function `f` is a local one: its sections are that input's copy.
    fn local_copy(&self, i: usize, f: FuncId) -> Option<usize> {
        (self.sym(self.code.funcs()[f].key).bind == STB_LOCAL).then_some(i)
    }

    /// Whether input `i`'s section `si` is one nvlink makes no section of its name for:
    /// a dropped function's (not one of a copy a later input's replaced: its constant
    /// bank, relocations), or a device function's bank 2 and its relocations
    /// (`bank2.rs`).
    fn made_none(&self, i: usize, si: usize, taken_over: &HashMap<usize, FuncId>) -> bool {
        let c = &self.inputs()[i].cubin;
        let over = c.sections.get(si).is_some_and(|s| {
            (s.flags & SHF_INFO_LINK != 0 || matches!(s.ty, SHT_RELA | SHT_REL))
                && taken_over.contains_key(&(s.info as usize))
        });
        self.is_dropped_function_section(i, si) && !over || self.is_function_bank2(i, si)
    }

    /// Input `i`'s code of each live function, in function symbol order, a kernel's
    /// info and window with it; whether it had any.
    fn created_code(
        &self,
        i: usize,
        taken_over: &HashMap<usize, FuncId>,
        rules: Rules,
        made: &mut Made,
    ) -> bool {
        let c = &self.inputs()[i].cubin;
        let fn_name = |f: FuncId| self.sym(self.code.funcs()[f].key).name.as_str();
        let mut any_code = false;
        for (s, at) in self.code.func_at()[i].iter().enumerate() {
            let Some(f) = *at else {
                let over = (c.symbols.get(s))
                    .filter(|sym| sym.ty == STT_FUNC)
                    .map(|sym| sym.shndx as usize);
                if let Some((&f, t)) = over.and_then(|t| Some((taken_over.get(&t)?, t))) {
                    any_code = true;
                    made.add(c.sections[t].name.clone(), None);
                    if self.made_as_entry(f, rules) {
                        made.add(concat(".nv.info.", fn_name(f)), None);
                        made.add(concat(".nv.shared.", fn_name(f)), None);
                    }
                }
                continue;
            };
            if self.dropped_by_host_tables(f) {
                made.add(concat(".nv.shared.", fn_name(f)), None);
            }
            if let Some(s) = c.sections.get(self.code.funcs()[f].text)
                && self.code.live()[f]
            {
                // (a local function's symbol, and name, before its code)
                any_code = true;
                let key = self.code.funcs()[f].key;
                if self.sym(key).bind == STB_LOCAL {
                    made.local(self.sym(key).name.clone(), key);
                }
                made.add(s.name.clone(), self.local_copy(i, f));
                if self.made_as_entry(f, rules) {
                    made.add(concat(".nv.info.", fn_name(f)), None);
                    made.add(concat(".nv.shared.", fn_name(f)), None);
                }
            }
        }
        any_code
    }

    /// Input `i`'s sections its data objects lie in, in symbol order (an undefined
    /// dynamic shared array's is `.nv_debug.shared`).
    fn created_data(
        &self,
        i: usize,
        taken_over: &HashMap<usize, FuncId>,
        rules: Rules,
        made: &mut Made,
    ) {
        let c = &self.inputs()[i].cubin;
        let twins = rules.twins;
        for (si, sym) in c.symbols.iter().enumerate() {
            if kind(sym) != Kind::Data {
                continue;
            }
            // (a removed kernel of libNVVM's output the host tables leave out: nvlink
            // makes the `.nv.shared.<k>` its own shared arrays lie in here, generated
            // program 11; not its parameter bank, program 2 at sm_80)
            let unlisted = |si: usize| {
                c.sections
                    .get(si)
                    .is_some_and(|s| s.name.starts_with(".nv.shared."))
                    && (self.owner(i, si))
                        .is_some_and(|f| !self.code.live()[f] && self.lto_unlisted(f))
            };
            // (a kernel `-kernels-used` removed names the window its own `__shared__`
            // array lies in here, though nothing of it is kept: sweep 45's `histo`)
            let window = (c.sections.get(sym.shndx as usize))
                .filter(|s| s.name.starts_with(".nv.shared.") && twins && sym.defined());
            if let Some(s) = window
                && (self.owner(i, sym.shndx as usize)).is_some_and(|f| {
                    self.code.funcs()[f].entry && !self.code.live()[f] && !self.lto_unlisted(f)
                })
            {
                made.add(s.name.clone(), None);
                continue;
            }
            let name: Name = match c.sections.get(sym.shndx as usize) {
                _ if is_dynamic_shared(sym) => ".nv_debug.shared".into(),
                Some(s) if sym.defined() && !self.made_none(i, sym.shndx as usize, taken_over) => {
                    s.name.clone()
                }
                Some(s) if sym.defined() && unlisted(sym.shndx as usize) => s.name.clone(),
                _ => {
                    // (libcudadevrt's undefined local `.nv.ptx.const0.size`, which -r
                    // keeps, where it comes among them; under -r a local of a replaced
                    // function's bank too, `symbols::kept_copy_of`)
                    let replaced_local = !twins && sym.bind == STB_LOCAL && sym.defined();
                    if replaced_local || super::cudadevrt::is_linker_symbol(sym) {
                        made.local(sym.name.clone(), SymKey::new(i, si));
                    }
                    continue;
                }
            };
            if self
                .owner(i, sym.shndx as usize)
                .is_some_and(|f| !self.code.live()[f])
                && !unlisted(sym.shndx as usize)
            {
                continue;
            }
            let bank = name.starts_with(".nv.constant0.") && twins;
            if bank {
                let rel = concat(".rel", &name);
                made.add(name, None);
                made.add(rel, None);
            } else {
                made.add(name, None);
            }
            if sym.bind == STB_LOCAL {
                made.local(sym.name.clone(), SymKey::new(i, si));
            }
        }
    }

    /// Input `i`'s other sections named by section symbols, its other live functions'
    /// info, then its relocation sections in section order.
    fn created_rest(
        &self,
        i: usize,
        taken_over: &HashMap<usize, FuncId>,
        rules: Rules,
        made: &mut Made,
    ) {
        let c = &self.inputs()[i].cubin;
        let twins = rules.twins;
        let dropped = |si: usize| self.made_none(i, si, taken_over);
        // the other sections named by section symbols
        for (si, s) in self.by_section_symbols(i) {
            let skip = s.flags & SHF_EXECINSTR != 0
                || matches!(
                    s.ty,
                    SHT_NOTE | SHT_CUDA_INFO | SHT_CUDA_CALLGRAPH | SHT_CUDA_PROTOTYPE
                )
                || s.name.starts_with(".nv.merc.")
                || s.name.starts_with(".nv.capmerc.")
                || dropped(si)
                || self.owner(i, si).is_some_and(|f| !self.code.live()[f]);
            if skip {
                continue;
            }
            made.add(s.name.clone(), None);
            if s.name.starts_with(".nv.constant0.") && twins {
                made.add(concat(".rel", &s.name), None);
            }
        }
        // the other live functions' info
        let sections = (c.symbols.iter())
            .filter(|s| s.ty == STT_SECTION)
            .filter(|s| c.sections.get(s.shndx as usize).is_some());
        for si in sections.map(|s| s.shndx as usize) {
            let live_code = (self.code.func_of_text().get(&SecKey::new(i, si)).copied())
                .filter(|&f| self.code.live()[f]);
            let f = live_code.or_else(|| taken_over.get(&si).copied());
            if let Some(f) = f.filter(|&f| !self.made_as_entry(f, rules)) {
                let name = concat(
                    ".nv.info.",
                    self.sym(self.code.funcs()[f].key).name.as_str(),
                );
                made.add(name, self.local_copy(i, f));
            }
        }
        // relocation sections, in section order (not those of bank-2 data, a
        // kernel's own included, in an executable link below sm_100: nvlink does not
        // make them; at sm_100+ a kernel's stays, empty, beside its Mercury twin's)
        let of_bank2 = |s: &Section| {
            twins
                && !self.mercury_layout()
                && (c.sections.get(s.info as usize)).is_some_and(|t| constant_bank(t.ty) == Some(2))
        };
        for (si, s) in c.sections.iter().enumerate() {
            if matches!(s.ty, SHT_RELA | SHT_REL)
                && !s.name.starts_with(".nv.merc.")
                && !dropped(si)
                && !of_bank2(s)
            {
                let copy = (self.owner(i, si)).and_then(|f| self.local_copy(i, f));
                made.add(s.name.clone(), copy);
                if let Some(n) = self.resolved_twin(&s.name) {
                    made.add(n.into(), copy);
                }
            }
        }
    }

    /// Input `i`'s copies of live functions that were the chosen ones when read and a
    /// later input's copy replaced, by their code section: the kept function (see
    /// `calls_kept`).
    fn taken_over(&self, i: usize) -> HashMap<usize, FuncId> {
        let c = &self.inputs()[i].cubin;
        (1..c.symbols.len())
            .filter(|&s| c.symbols[s].ty == STT_FUNC && c.symbols[s].defined())
            .filter_map(|s| {
                let k = SymKey::new(i, s);
                if !self.is_replaced(k) || !self.calls_kept(k) {
                    return None;
                }
                let f = self.func_of(k).filter(|&f| self.code.live()[f])?;
                let t = c.symbols[s].shndx as usize;
                c.sections.get(t)?;
                Some((t, f))
            })
            .collect()
    }

    /// The creation-order step: nvlink's creation order of the sections made so far,
    /// once the sections and the call-graph tables are made, for the symbols step and
    /// the last one. Reads `out` (every section made so far), `code`, `res`, `opts`,
    /// `notes` (whether `.nv.compat` was made) and `banks` (the banks `bank2` made);
    /// hands on the `Order`. It takes the products of the steps whose sections it orders,
    /// `layout` (shared memory's windows) and `tables` (the call-graph tables' sections)
    /// among them, so that it runs after them (the sections made after it, `.nv.info`'s,
    /// the Mercury ones and the kept relocation sections, are ranked by their names as
    /// they come: `creation_rank_of`).
    pub(super) fn creation_order(
        &self,
        notes: &super::notes::Notes,
        banks: &super::bank2::Bank2,
        _layout: &SharedLayout,
        _tables: &super::callgraph::TableSections,
    ) -> Order {
        let (created, at) = self.created_sections(notes, banks);
        let ranks = (0..self.out.len())
            .map(|id| self.section_rank_in(&at, id))
            .collect();
        Order { created, at, ranks }
    }

    /// Output section `id`'s place in nvlink's creation order ([`creation_rank`]).
    pub(super) fn creation_rank_of(&self, order: &Order, id: usize) -> usize {
        match order.ranks.get(id) {
            Some(&r) => r,
            None => self.section_rank_in(&order.at, id),
        }
    }

    /// Output section `id`'s place in the creation order whose names come at `at`: by
    /// its name, or for a section of a local function whose name another input's
    /// function made first, under the name `copy_name` gives its input's copy.
    fn section_rank_in(&self, at: &HashMap<Name, usize>, id: usize) -> usize {
        let origin = |id: usize| self.out.function_input(id);
        let input = origin(id).or_else(|| match self.out[id].info {
            Ref::Section(t) => origin(t),
            _ => None,
        });
        let name = &self.out[id].name;
        match input.and_then(|i| at.get(copy_name(base_name(name), i).as_str())) {
            Some(&r) => r,
            None => creation_rank(at, name),
        }
    }

    /// Input `i`'s sections named by its section symbols, in their order; from sm_100 the
    /// functions' parameter banks (`.nv.constant0.<fn>`) among them come in the order of
    /// their functions' symbols, whatever the order of the banks' section symbols (read
    /// off nvlink 13.5: libcudadevrt's banks have section symbols in the reverse of its
    /// functions' order; nvlink's sm_100 and sm_120 images follow the functions, its sm_90
    /// images the section symbols).
    fn by_section_symbols(&self, i: usize) -> Vec<(usize, &'a Section)> {
        let c = &self.inputs()[i].cubin;
        let mut out: Vec<(usize, &'a Section)> = c
            .symbols
            .iter()
            .filter(|s| s.ty == STT_SECTION)
            .filter_map(|s| Some((s.shndx as usize, c.sections.get(s.shndx as usize)?)))
            .collect();
        if self.opts().target.is_some_and(|t| t.sm >= 100) {
            let bank_of = |si: usize, s: &Section| {
                s.name
                    .starts_with(".nv.constant0.")
                    .then(|| self.owner(i, si))
                    .flatten()
                    .map(|f| self.code.funcs()[f].key.sym)
            };
            let slots: Vec<usize> = (0..out.len())
                .filter(|&k| bank_of(out[k].0, out[k].1).is_some())
                .collect();
            let mut banks: Vec<(usize, &'a Section)> = slots.iter().map(|&k| out[k]).collect();
            banks.sort_by_key(|&(si, s)| bank_of(si, s));
            for (k, b) in slots.into_iter().zip(banks) {
                out[k] = b;
            }
        }
        out
    }

    /// A kernel the host objects' tables leave out: nvlink still makes its
    /// `.nv.shared.<k>` where its code would come (not for one `-kernels-used` drops, nor
    /// for one of libNVVM's output, `lto_unlisted`).
    fn dropped_by_host_tables(&self, f: FuncId) -> bool {
        self.code.funcs()[f].entry
            && !self.code.live()[f]
            && self.opts().kernels.as_ref().is_some_and(|k| k.tables)
            && !self.lto_unlisted(f)
    }

    /// A kernel of libNVVM's output (a whole-program LTO) that the host objects' tables
    /// do not name, in a link other than a debug one (`-g` makes it a kernel's; under
    /// `--preserve-relocs` too it is a plain function's): nvlink makes its sections as a
    /// plain function's, its `.nv.info.<k>`
    /// among the other functions' and no `.nv.shared.<k>` (nor an empty window: see
    /// `shared::shared_sections`), whether device code launches
    /// it (kept) or not (dropped). Read off nvlink 13.5: a unit whose host code launches
    /// `parent`, which launches `child` (`.nv.info._Z5childPi` after the constant banks,
    /// no `.nv.shared._Z5childPi`), and `devlaunch.cu`.
    pub(super) fn lto_unlisted(&self, f: FuncId) -> bool {
        let input = self.code.funcs()[f].key.input;
        self.origin(input) == "lto.cubin"
            && !self.opts().debug
            && self.opts().kernels.as_ref().is_some_and(|k| k.tables)
            && !self.kernel_kept(f)
    }

    /// Under `--preserve-relocs`, the `.nv.resolvedrela` section nvlink makes right after
    /// the first relocation section of a section (`.rel`, or `.rela`), kept or not.
    fn resolved_twin(&self, relocations: &str) -> Option<String> {
        if !self.opts().preserve_relocs {
            return None;
        }
        let of =
            (relocations.strip_prefix(".rela")).or_else(|| relocations.strip_prefix(".rel"))?;
        Some(format!(".nv.resolvedrela{of}"))
    }

    /// The local symbols made so far (the section symbols, then the inputs'
    /// locals) put in creation order: a local function's or data object's symbol comes
    /// where nvlink met it, among the section symbols (a static function's right before
    /// its code's, a string constant `$str` right after its `.nv.global.init`); the
    /// others keep their order after those.
    pub(super) fn interleave_locals(&self, order: &Order, t: &mut symbols::SymbolTable) {
        let n = t.symbols().len();
        let mut pos = vec![usize::MAX; n];
        for (id, at) in t.section_symbols() {
            pos[at] = self.creation_rank_of(order, id);
        }
        for (p, (_, local)) in order.created.iter().enumerate() {
            if let Some(at) = local.and_then(|k| t.index_of(&k)) {
                pos[at] = p;
            }
        }
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&at| pos[at]);
        t.reorder(0, &order);
    }

    /// Global names in the order nvlink's symbol table was built from them: the ones
    /// the image lists, and the unified-table symbols it drops, in global order.
    pub(super) fn created_globals(&self, listed: &HashSet<&str>) -> Vec<Name> {
        self.res()
            .globals()
            .iter()
            .filter(|g| listed.contains(g.name) || is_table_symbol(g.name))
            .map(|g| self.sym(g.def.unwrap_or(g.first)).name.clone())
            .collect()
    }
}

/// The `.strtab` names of `created` (the sections' and the local objects' the image
/// lists): a parameter bank's `.rel` twin comes before the bank there.
pub(super) fn created_strtab(created: &[Created], listed: &HashSet<&str>) -> Vec<Name> {
    let mut out: Vec<Name> = Vec::with_capacity(created.len());
    let mut it = created.iter().peekable();
    while let Some((s, local)) = it.next() {
        if local.is_some() {
            if listed.contains(s.as_str()) {
                out.push(s.clone());
            }
            continue;
        }
        match it.peek() {
            Some((rel, None))
                if s.starts_with(".nv.constant0.")
                    && rel.strip_prefix(".rel") == Some(s.as_str()) =>
            {
                out.push(rel.clone());
                out.push(s.clone());
                it.next();
            }
            _ => out.push(s.clone()),
        }
    }
    out
}

/// A section's name as `created` knows it: a Mercury section's without its prefix (it
/// comes where its SASS twin does).
fn base_name(name: &str) -> &str {
    super::mercury::stripped(name).unwrap_or(name)
}

/// How `created` names the sections of input `i`'s local function whose name another
/// input's made first.
fn copy_name(name: &str, i: usize) -> Name {
    Name::from(format!("{name}\u{1}{i}"))
}

/// Whether `created` names a section so (`copy_name`): not a name of the image's.
pub(super) fn is_copy_name(name: &str) -> bool {
    name.contains('\u{1}')
}

/// `.debug_frame` when `c` has it and no section symbol names it.
fn unnamed_debug_frame(c: &Cubin) -> Option<&'static str> {
    let frame = |i: usize| c.sections.get(i).is_some_and(|s| s.name == ".debug_frame");
    let named = (c.symbols.iter()).any(|s| s.ty == STT_SECTION && frame(s.shndx as usize));
    (!named && (0..c.sections.len()).any(frame)).then_some(".debug_frame")
}

/// The position `name` has in `created` (a capsule-Mercury section takes its SASS
/// twin's); sections nvlink's list does not name come after those it does.
pub(super) fn creation_rank(created: &HashMap<Name, usize>, name: &str) -> usize {
    let base = base_name(name);
    // (the Mercury module bank takes `.nv.constant3`'s place; a kernel's Mercury bank 2,
    // and its relocations, take its SASS bank's)
    match base {
        ".nv.constant.user" => return created.get(".nv.constant3").copied().unwrap_or(usize::MAX),
        ".rela.nv.constant.user" => {
            return created
                .get(".rela.nv.constant3")
                .copied()
                .unwrap_or(usize::MAX);
        }
        _ => {}
    }
    for (merc, sass) in [
        (".nv.constant.optimizer.", ".nv.constant2."),
        (".rela.nv.constant.optimizer.", ".rela.nv.constant2."),
    ] {
        if let Some(k) = base.strip_prefix(merc) {
            return joined(sass, k, |n| created.get(n).copied()).unwrap_or(usize::MAX);
        }
    }
    created.get(base).copied().unwrap_or(usize::MAX)
}

/// What `f` answers of `a` + `b`, joined on the stack (no allocation for a name that
/// is already known).
pub(super) fn joined<R>(a: &str, b: &str, f: impl FnOnce(&str) -> R) -> R {
    let mut buf = smallvec::SmallVec::<[u8; 256]>::new();
    buf.extend_from_slice(a.as_bytes());
    buf.extend_from_slice(b.as_bytes());
    f(std::str::from_utf8(&buf).expect("two strings joined are a string"))
}

/// `a` followed by `b`, as a name (made without the formatting machinery: thousands of
/// `.nv.info.<fn>` names are made per link).
pub(super) fn concat(a: &str, b: &str) -> Name {
    let mut s = String::with_capacity(a.len() + b.len());
    s.push_str(a);
    s.push_str(b);
    Name::from(s)
}
