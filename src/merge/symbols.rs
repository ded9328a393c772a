//! Symbols: the output symbol table in nvlink's order (section symbols, locals, globals,
//! the parameter banks' section symbols last on sm_100+), debug links' shared-variable
//! symbols, the map from an input symbol to its output index, and for `-r` the shared
//! variables in an order that gives nvlink's layout when the output is linked again.

use super::shared::list_sort;
use super::*;

/// ELF symbol visibility `STV_INTERNAL` (`st_other` low bits).
pub(super) const STV_INTERNAL: u8 = 1;

/// The output symbol table: the symbols step's product, which the later steps read (an
/// input symbol's or a section's index, the symbols) and only the last one takes.
pub(super) struct SymbolTable {
    symbols: Vec<OutSymbol>,
    /// Input symbol → its output symbol's index.
    of: SymMap,
    /// Output section → its section symbol's index.
    section_index: HashMap<usize, usize>,
    /// Input section an input section symbol names → the output section it went to (a
    /// copy of that part of the `Placement`, which is complete before the symbols).
    section_of_input: HashMap<SecKey, usize>,
}

impl SymbolTable {
    /// An empty table for `inputs`, which the symbols step fills.
    pub(super) fn new(inputs: &[Input]) -> SymbolTable {
        SymbolTable {
            symbols: Vec::new(),
            of: SymMap::new(inputs.iter().map(|i| i.cubin.symbols.len())),
            section_index: HashMap::default(),
            section_of_input: HashMap::default(),
        }
    }

    /// The symbols, in the table's order.
    pub(super) fn symbols(&self) -> &[OutSymbol] {
        &self.symbols
    }

    /// The output index of input symbol `k` (its own entry: no global resolution).
    pub(super) fn index_of(&self, k: &SymKey) -> Option<usize> {
        self.of.get(k).copied()
    }

    /// The index of output section `id`'s section symbol.
    pub(super) fn section_symbol(&self, id: usize) -> Option<usize> {
        self.section_index.get(&id).copied()
    }

    /// The index of the section symbol standing for input section `k` (the symbol of
    /// the output section it went to).
    pub(super) fn section_symbol_of_input(&self, k: &SecKey) -> Option<usize> {
        self.section_symbol(*self.section_of_input.get(k)?)
    }

    /// Every (input symbol, output index), in input and symbol order.
    pub(super) fn mapped(&self) -> impl Iterator<Item = (SymKey, usize)> + '_ {
        self.of.iter()
    }

    /// Every (output section, its section symbol's index).
    pub(super) fn section_symbols(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.section_index.iter().map(|(&id, &at)| (id, at))
    }

    /// The symbols, taken for the image (the indices stay readable).
    pub(super) fn take_symbols(&mut self) -> Vec<OutSymbol> {
        std::mem::take(&mut self.symbols)
    }

    fn push(&mut self, k: SymKey, o: OutSymbol) {
        self.of.insert(k, self.symbols.len());
        self.symbols.push(o);
    }

    /// Output section `id`'s section symbol.
    fn push_section(&mut self, id: usize, o: OutSymbol) {
        self.section_index.insert(id, self.symbols.len());
        self.symbols.push(o);
    }

    /// The symbols from `start` on put in `order` (their present indices, each once),
    /// every index the table gives renumbered.
    pub(super) fn reorder(&mut self, start: usize, order: &[usize]) {
        let n = self.symbols.len();
        let mut new_at: Vec<usize> = (0..n).collect();
        for (to, &from) in order.iter().enumerate() {
            new_at[from] = start + to;
        }
        let mut old: Vec<Option<OutSymbol>> = self.symbols.drain(start..).map(Some).collect();
        self.symbols.extend(
            order
                .iter()
                .map(|&from| old[from - start].take().expect("once")),
        );
        for at in self.section_index.values_mut() {
            *at = new_at[*at];
        }
        for at in self.of.values_mut() {
            if *at < n {
                *at = new_at[*at];
            }
        }
    }

    /// The local symbols from `start` on moved before the global ones there, each group
    /// in its order.
    fn locals_first(&mut self, start: usize) {
        let n = self.symbols.len();
        let mut order: Vec<usize> = (start..n).collect();
        order.sort_by_key(|&at| self.symbols[at].bind != STB_LOCAL);
        if !order.iter().copied().eq(start..n) {
            self.reorder(start, &order);
        }
    }
}

/// Input symbol → its output symbol's index: a table per input, read in every step
/// that writes a symbol reference (a hash map's lookups were a tenth of the merge).
struct SymMap(Vec<Vec<usize>>);

impl SymMap {
    /// No output symbol.
    const NONE: usize = usize::MAX;

    fn new(sizes: impl Iterator<Item = usize>) -> SymMap {
        SymMap(sizes.map(|n| vec![Self::NONE; n]).collect())
    }

    fn get(&self, k: &SymKey) -> Option<&usize> {
        self.0[k.input].get(k.sym).filter(|&&v| v != Self::NONE)
    }

    fn insert(&mut self, k: SymKey, v: usize) {
        self.0[k.input][k.sym] = v;
    }

    /// The indices there are, to be renumbered.
    fn values_mut(&mut self) -> impl Iterator<Item = &mut usize> {
        self.0.iter_mut().flatten().filter(|v| **v != Self::NONE)
    }

    /// Every (input symbol, output index), in input and symbol order.
    fn iter(&self) -> impl Iterator<Item = (SymKey, usize)> + '_ {
        self.0.iter().enumerate().flat_map(|(i, t)| {
            t.iter()
                .enumerate()
                .filter(|(_, v)| **v != Self::NONE)
                .map(move |(s, &v)| (SymKey::new(i, s), v))
        })
    }
}

impl<'a> Merger<'a> {
    /// The symbols step: the output symbol table, once the sections are made and their
    /// creation order known (`order`, [`Merger::creation_order`]'s: after `sections`,
    /// `bank2`, `shared` and `tables`, whose sections get section symbols). Reads `out`
    /// (its sections, which get a section symbol), `res`, `code`, `placement` (where each
    /// symbol's section went), `layout` (which shared variables keep a symbol) and
    /// `externs` (the driver's functions a live list names); writes nothing; hands on the
    /// table (the `SymbolTable`, which the later steps take as `symtab`).
    pub(super) fn symbols(
        &self,
        placement: &Placement,
        layout: &SharedLayout,
        externs: &super::externs::ExternRefs,
        order: &super::creation::Order,
    ) -> SymbolTable {
        let exec = !self.opts().relocatable;
        let mut t = SymbolTable::new(self.inputs());
        // locals: section symbols, then local functions and data (in nvlink's sm_100+
        // layout the parameter banks' section symbols come last, after the globals, so
        // that the capsule-Mercury symbol table, which has none, numbers alike)
        let by_creation = self.sections_by_creation(order);
        self.section_symbols(&mut t, &by_creation, false);
        for i in 0..self.inputs().len() {
            let c = &self.inputs()[i].cubin;
            for (s, sym) in c.symbols.iter().enumerate().skip(1) {
                if sym.bind != STB_LOCAL || sym.ty == STT_SECTION || !sym.defined() {
                    if !exec && let Some(o) = self.relocatable_symbol(sym) {
                        t.push(SymKey::new(i, s), o);
                    }
                    continue;
                }
                // shared variables are placed per kernel; `_param` marks the
                // parameter bank on sm_7x/sm_8x, `_SREG` the driver's part of the bank
                // of a kernel without parameters; ptxas's other internal constants
                // (`<kernel>.const_opt.N.M`, a 64-bit immediate moved to bank 2, whose
                // relocations the link applies) go the same way
                let bank_mark =
                    sym.name == "_param" || sym.name == "_SREG" || sym.other & 0x3 == STV_INTERNAL;
                if exec && (sym.other & STO_SHARED != 0 || bank_mark) {
                    // (a --preserve-relocs link keeps the marks, as internal objects,
                    // but not those of a device function's bank 2, which went into its
                    // kernels' banks)
                    if bank_mark
                        && self.opts().preserve_relocs
                        && !self.is_function_bank2(i, sym.shndx as usize)
                        && let Some(mut o) = self.out_symbol(placement, SymKey::new(i, s))
                    {
                        (o.ty, o.other) = (STT_OBJECT, STV_INTERNAL);
                        t.push(SymKey::new(i, s), o);
                        continue;
                    }
                    self.debug_shared_symbol(layout, &mut t, SymKey::new(i, s));
                    continue;
                }
                if let Some(o) = self.out_symbol(placement, SymKey::new(i, s)) {
                    t.push(SymKey::new(i, s), o);
                }
            }
        }
        self.interleave_locals(order, &mut t); // (creation.rs)
        let locals_end = t.symbols.len();
        for gi in 0..self.res().globals().len() {
            let g = &self.res().globals()[gi];
            let (name, k) = (g.name, g.def.unwrap_or(g.first));
            let s = self.sym(k);
            if exec && s.other & STO_SHARED != 0 && s.ty != STT_FUNC {
                // (a debug link lists it, as a local, where nvlink does: in global order)
                self.debug_shared_symbol(layout, &mut t, k);
                self.preserved_dynamic_symbol(layout, &mut t, k);
                continue;
            }
            if exec && is_table_symbol(name) {
                continue;
            }
            if let Some(f) = self.func_defined_by(k)
                && !self.code.live()[f]
            {
                continue;
            }
            // (a function no input defines stays while a live function's EXTERNS list
            // names it)
            if exec && !s.defined() && s.ty == STT_FUNC && !self.is_driver_function(externs, k) {
                continue;
            }
            let o = if s.defined() {
                self.out_symbol(placement, k)
            } else {
                Some(OutSymbol {
                    name: s.name.clone(),
                    value: s.value,
                    size: s.size,
                    bind: STB_GLOBAL,
                    // (sm_100+: undefined data objects are CUDA objects, under -r all)
                    ty: if self.mercury_layout()
                        && (resolve::is_driver_value(name) || !exec && s.ty == STT_OBJECT)
                    {
                        STT_CUDA_OBJECT
                    } else {
                        image_type(s.ty, exec)
                    },
                    other: image_other(s.other, exec),
                    section: None,
                })
            };
            if let Some(o) = o {
                t.push(k, o);
            }
        }
        // (nvlink's sm_100+ layout puts the shared variables listed as locals in global
        // order after the other locals: `heavy.cu`'s `h_sh`, `caller.cu`'s `c_sh`)
        if exec && self.mercury_layout() {
            t.locals_first(locals_end);
        }
        self.section_symbols(&mut t, &by_creation, true);
        if !exec {
            self.order_shared_for_relink(&mut t);
        }
        self.sections_of_inputs(placement, &mut t);
        t
    }

    /// Where the input sections that an input section symbol names went (what
    /// `out_index` reads of the placement).
    fn sections_of_inputs(&self, placement: &Placement, t: &mut SymbolTable) {
        for (i, input) in self.inputs().iter().enumerate() {
            for s in input.cubin.symbols.iter().filter(|s| s.ty == STT_SECTION) {
                let k = SecKey::new(i, s.shndx as usize);
                if let Some(&(id, _)) = placement.of(&k) {
                    t.section_of_input.insert(k, id);
                }
            }
        }
    }

    /// nvlink's sm_90 `--preserve-relocs` image (not `-g`; not sm_75/sm_80, without a
    /// reservation) keeps a dynamic shared array's symbol where `.nv_debug.shared` holds
    /// variables: global, internal, at offset -1 past the reservation (0x3ff: `smem.cu`),
    /// its relocations applied and not listed, as where it has no symbol.
    fn preserved_dynamic_symbol(&self, layout: &SharedLayout, t: &mut SymbolTable, k: SymKey) {
        let sym = self.sym(k);
        if !self.opts().preserve_relocs
            || self.opts().debug
            || self.mercury_layout()
            || !layout.debug_holds_variables()
            || layout.reserve() == 0
            || !is_dynamic_shared(sym)
            || t.of.get(&k).is_some()
        {
            return;
        }
        let Some(home) = self.out.iter().position(|o| o.name == ".nv_debug.shared") else {
            return;
        };
        t.push(
            k,
            OutSymbol {
                name: sym.name.clone(),
                value: layout.reserve().wrapping_sub(1),
                size: sym.size,
                bind: STB_GLOBAL,
                ty: STT_OBJECT,
                other: STV_INTERNAL,
                section: Some(home),
            },
        );
    }

    /// Debug links keep the symbol of a shared variable at its offset in the window that
    /// holds it (`SharedLayout::home`), as a local unless it is a global in `.nv_debug.shared`.
    fn debug_shared_symbol(&self, layout: &SharedLayout, t: &mut SymbolTable, k: SymKey) {
        let (Some(Some(home)), Some(o)) = (layout.home(k), layout.offset(k)) else {
            return;
        };
        let sym = self.sym(k);
        // (a global one stays global in `.nv_debug.shared`; a dynamic array's value there
        // is its offset, after the reservation only when other variables are there too:
        // read off nvlink)
        let before_reserve = is_dynamic_shared(sym) && !layout.debug_holds_variables();
        let global = sym.bind != STB_LOCAL && self.out[home].name == ".nv_debug.shared";
        t.push(
            k,
            OutSymbol {
                name: sym.name.clone(),
                value: if before_reserve {
                    o
                } else {
                    o + layout.reserve()
                },
                size: sym.size,
                bind: if global { sym.bind } else { STB_LOCAL },
                ty: STT_OBJECT,
                // (STV_INTERNAL in a --preserve-relocs link that is not a debug link)
                other: if self.opts().preserve_relocs && !self.opts().debug {
                    STV_INTERNAL
                } else {
                    0
                },
                section: Some(home),
            },
        );
    }

    /// The output sections in nvlink's creation order (worked out once for both calls
    /// of [`Self::section_symbols`]).
    fn sections_by_creation(&self, order: &super::creation::Order) -> Vec<usize> {
        let mut ids: Vec<usize> = (0..self.out.len()).collect();
        ids.sort_by_key(|&id| self.creation_rank_of(order, id));
        ids
    }

    /// The section symbols of `by_creation` (the sections in nvlink's creation order):
    /// those of the parameter banks in nvlink's sm_100+ layout (`banks`), or all the
    /// others.
    fn section_symbols(&self, t: &mut SymbolTable, by_creation: &[usize], banks: bool) {
        for &id in by_creation {
            let bank = self.mercury_layout() && self.out[id].name.starts_with(".nv.constant0");
            if self.out.has_symbol(id) && bank == banks {
                // (sm_100+: a bank 2's is named after its Mercury twin, as ptxas names
                // it, `.nv.constant.optimizer.<fn>`)
                let name = match self.out[id].name.strip_prefix(".nv.constant2.") {
                    Some(f) if self.mercury_layout() => {
                        creation::concat(".nv.constant.optimizer.", f)
                    }
                    _ => self.out[id].name.clone(),
                };
                t.push_section(
                    id,
                    OutSymbol {
                        name,
                        value: 0,
                        size: 0,
                        bind: STB_LOCAL,
                        ty: STT_SECTION,
                        other: 0,
                        section: Some(id),
                    },
                );
            }
        }
    }

    /// `-r` output: the shared variables' symbols put in an order from which nvlink's
    /// sort, when it links the output, gives the order it gives them linking the inputs
    /// (where equal sizes tie, its sort depends on the positions). The sort's
    /// permutation depends only on the sizes at each position: the variables are
    /// placed where that permutation takes each of them to its place in the direct
    /// link's order, when locals stay among locals and globals among globals (else the
    /// order stays).
    fn order_shared_for_relink(&self, t: &mut SymbolTable) {
        let wanted = {
            let d = self.sorted_shared_candidates();
            list_sort(&d, &|&a, &b| self.sym(a).size > self.sym(b).size, false)
        };
        // where they are now, in symbol-table order
        let mut now: Vec<(usize, SymKey)> = wanted
            .iter()
            .filter_map(|&k| t.of.get(&k).map(|&at| (at, k)))
            .collect();
        if now.is_empty() || now.len() != wanted.len() {
            return;
        }
        now.sort_unstable();
        let positions: Vec<usize> = (0..now.len()).collect();
        let size = |p: usize| self.sym(now[p].1).size;
        let sigma = list_sort(&positions, &|&a, &b| size(a) > size(b), false);
        let mut place = vec![SymKey::new(0, 0); now.len()];
        for (&p, &k) in sigma.iter().zip(&wanted) {
            place[p] = k;
        }
        let local = |k: SymKey| self.sym(k).bind == STB_LOCAL;
        if (0..now.len()).any(|p| local(place[p]) != local(now[p].1)) {
            return;
        }
        let old: Vec<OutSymbol> = now.iter().map(|&(at, _)| t.symbols[at].clone()).collect();
        let from: HashMap<SymKey, usize> =
            now.iter().enumerate().map(|(p, &(_, k))| (k, p)).collect();
        for (p, &k) in place.iter().enumerate() {
            let at = now[p].0;
            t.symbols[at] = old[from[&k]].clone();
            t.of.insert(k, at);
        }
    }

    fn out_symbol(&self, placement: &Placement, k: SymKey) -> Option<OutSymbol> {
        let exec = !self.opts().relocatable;
        let s = self.sym(k);
        if let Some(f) = self.func_defined_by(k)
            && !self.code.live()[f]
        {
            return None;
        }
        // (a shared variable's value in a relocatable file is its alignment, as for a
        // common symbol: it stays as it is)
        let common = !exec && s.other & STO_SHARED != 0 && s.ty != STT_FUNC;
        let (section, value) = match placement.of(&SecKey::new(k.input, s.shndx as usize)) {
            Some(&(id, _)) if common => (Some(id), s.value),
            // (a reserved shared variable's value is its alignment too)
            Some(&(id, at)) if sections::reserved(&self.inputs()[k.input].cubin, s) => {
                let c = &self.inputs()[k.input].cubin;
                let placed = at + sections::reserved_offset(&c.symbols, k.sym);
                (Some(id), if exec { placed } else { s.value })
            }
            Some(&(id, at)) => (Some(id), s.value + at),
            None if s.other & STO_SHARED != 0 && !exec => (None, s.value),
            None if !exec => (self.kept_copy_of(k)?, s.value),
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
            ty: image_type(s.ty, exec),
            other: image_other(s.other, exec),
            section,
        })
    }
}

impl Merger<'_> {
    /// Under -r, a local (a `_SREG` mark) in the parameter bank of a function another
    /// input's copy replaced: nvlink keeps it, in the kept copy's bank.
    fn kept_copy_of(&self, k: SymKey) -> Option<Option<usize>> {
        let s = self.sym(k);
        let sec = self.inputs()[k.input]
            .cubin
            .sections
            .get(s.shndx as usize)?;
        if s.bind != STB_LOCAL
            || !sec.name.starts_with(".nv.constant0.")
            || !self.is_dropped_function_section(k.input, s.shndx as usize)
        {
            return None;
        }
        Some(Some(self.out.iter().position(|o| sec.name == o.name)?))
    }
}

/// A symbol's type in the image: an executable has no CUDA object type.
fn image_type(ty: u8, exec: bool) -> u8 {
    if exec && ty == STT_CUDA_OBJECT {
        STT_OBJECT
    } else {
        ty
    }
}

/// A symbol's `st_other` in the image: an executable keeps only the entry and managed
/// marks.
fn image_other(other: u8, exec: bool) -> u8 {
    if exec {
        other & (STO_ENTRY | STO_MANAGED)
    } else {
        other
    }
}
