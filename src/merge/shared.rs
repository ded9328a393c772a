//! Shared memory: one offset per shared variable, laid out per kernel window as nvlink
//! 13.5 does (slots for variables several kernels hold, each kernel's own after them,
//! dynamic `extern` arrays last; an extensible-whole-program object's kernels with the
//! room ptxas laid out), the `.nv.shared.<kernel>` windows and
//! `.nv_debug.shared`; nvlink's list sort (also read by symbols.rs, for `-r`).

use super::*;

/// `e_type` of an extensible-whole-program object (ptxas `-ewp`).
pub(crate) const EWP: u16 = 0xFF00;

/// Shared memory as the `shared` step laid it out: what the later steps (symbols,
/// relocations, Mercury, the writer's null symbol) read of it. Made by this step alone.
#[derive(Default)]
pub(super) struct SharedLayout {
    /// Each shared variable's offset (by its representative).
    offset: HashMap<SymKey, u64>,
    /// Outside debug links, a dynamic shared array's offset as each function that
    /// refers to it sees it: (function, array) → offset (-1: a function no kernel
    /// reaches).
    dynamic_offset: HashMap<(FuncId, SymKey), u64>,
    /// Debug links: the section each shared variable's symbol goes in (its one kernel's
    /// window, or `.nv_debug.shared`).
    home: HashMap<SymKey, Option<usize>>,
    /// The reservation at the start of each kernel's shared window (0x400 on sm_90+).
    reserve: u64,
    /// The null symbol's value (`laid_out_shared`).
    null_symbol_value: u64,
    /// Debug links: whether `.nv_debug.shared` holds variables other than dynamic arrays.
    debug_holds_variables: bool,
}

impl SharedLayout {
    /// Shared variable `v`'s offset (`v` a representative).
    pub(super) fn offset(&self, v: SymKey) -> Option<u64> {
        self.offset.get(&v).copied()
    }

    /// Dynamic shared array `v`'s offset as function `f` sees it.
    pub(super) fn dynamic_offset(&self, f: FuncId, v: SymKey) -> Option<u64> {
        self.dynamic_offset.get(&(f, v)).copied()
    }

    /// Debug links: the output section shared variable `v`'s symbol goes in, if laid
    /// out (`Some(None)`: none).
    pub(super) fn home(&self, v: SymKey) -> Option<Option<usize>> {
        self.home.get(&v).copied()
    }

    pub(super) fn reserve(&self) -> u64 {
        self.reserve
    }

    pub(super) fn null_symbol_value(&self) -> u64 {
        self.null_symbol_value
    }

    pub(super) fn debug_holds_variables(&self) -> bool {
        self.debug_holds_variables
    }
}

/// Shared memory as `shared` lays it out, step by step.
struct Layout {
    /// Variable → the kernels (positions in `CodeGraph::kernels`) whose call tree uses it;
    /// every shared variable some function refers to is there, held or not (the
    /// variables of removed functions take room; those no code refers to do not).
    held: BTreeMap<SymKey, Vec<usize>>,
    /// Function → the kernels (positions in `CodeGraph::kernels`) that reach it; listed
    /// only for functions that refer to a dynamic (size 0) array.
    kernels_of: Vec<Vec<usize>>,
    /// Function → whether a kernel reaches it.
    reached: Vec<bool>,
    /// Each variable's offset, once placed.
    at: BTreeMap<SymKey, u64>,
    /// Per kernel: the end of what it holds so far, and the largest alignment.
    win: Vec<(Option<u64>, u64)>,
    /// The kernel of each window: `CodeGraph::kernels` (the positions above), then the
    /// kernels only `--preserve-relocs` keeps, the host tables leaving them out
    /// (`unreached_windows`).
    windows: Vec<FuncId>,
}

impl Layout {
    /// Variable `v` at offset `o`, in the window of every kernel holding it.
    fn place(&mut self, m: &Merger, v: SymKey, o: u64) {
        self.at.insert(v, o);
        let s = m.sym(v);
        for &k in &self.held[&v] {
            hold(&mut self.win[k], o + s.size, align_of(s));
        }
    }
}

/// A kernel's window now holds something ending at `end`, aligned to `a`.
fn hold(w: &mut (Option<u64>, u64), end: u64, a: u64) {
    w.0 = Some(w.0.unwrap_or(0).max(end));
    w.1 = w.1.max(a);
}

/// A shared variable's alignment (its symbol's value).
fn align_of(s: &Symbol) -> u64 {
    s.value.max(1)
}

/// The name nvlink's `-r` gives each kernel's instance of the dynamic (`extern`) shared
/// arrays.
const EXTERN_SHARED_INSTANCE: &str = "externsharedinstance";

impl<'a> Merger<'a> {
    /// Dynamic shared array `v`'s alignment in `.nv_debug.shared`: its symbol's value,
    /// but for an `-r` output's `externsharedinstance`, whose value is an offset of
    /// nvlink's relocatable layout (which the kernel windows still take as an
    /// alignment, as nvlink does: 0x30 gives a window aligned to 48), the alignment
    /// of that input's `.nv_debug.shared`.
    fn dynamic_align(&self, v: SymKey) -> u64 {
        let s = self.sym(v);
        if s.name != EXTERN_SHARED_INSTANCE {
            return align_of(s);
        }
        let c = &self.inputs()[v.input].cubin;
        let debug = c.sections.iter().find(|x| *x.name == *".nv_debug.shared");
        debug.map_or(align_of(s), |x| x.align.max(1))
    }

    /// The shared memory step: the windows made (output sections), the layout the later
    /// steps read returned. Reads `trees`, `code` (each function's shared variables),
    /// `res` and `placement` (where the kernels' code went, each window's `sh_info`);
    /// writes `out` (the windows; under `-r`, the alignment of the inputs' shared
    /// sections); hands on the `SharedLayout`, which `creation_order` takes (so it runs
    /// after, ordering the windows made here).
    pub(super) fn shared(&mut self, trees: &CallTrees, placement: &Placement) -> SharedLayout {
        let mut laid = SharedLayout::default();
        if self.opts().relocatable {
            self.relocatable_shared_alignment();
            return laid;
        }
        // Every shared variable gets one offset, the same in every kernel window that
        // holds it; variables no kernel holds together may overlap. What nvlink 13.5
        // does, as observed (docs/rules/shared-memory.md):
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
        // 4. Once step 1 placed anything, every window is as aligned as the strictest
        //    variable of 0.
        // sm_90 and newer reserve 1 KiB at the end of every kernel's window.
        let sm = self.opts().target.map_or(0, |t| t.sm);
        let reserve = if self.opts().disable_smem_reservation || sm < 90 {
            0
        } else {
            0x400
        };
        let mut l = self.shared_users(trees);
        let unnamed = self.laid_out_shared(&mut l);
        // (nvlink's sm_90 layout adds the reservation to the null symbol's value once
        // for each window section without a variable: a relinked `-r` output's)
        if !self.mercury_layout() {
            laid.null_symbol_value = unnamed * reserve;
        }
        // 0. the order steps 1 and 2 take the variables in: every shared variable of
        //    the inputs (those no code refers to included, a global once: where it is
        //    defined, else its first reference) but kernels' own locals
        let shared = self.sorted_shared_candidates();
        let shared = list_sort(
            &shared,
            &|&a, &b| self.sym(a).size > self.sym(b).size,
            false,
        );
        let shared: Vec<SymKey> = shared
            .into_iter()
            .filter(|v| l.held.contains_key(v))
            .collect();
        let slotted = self.shared_slots(&mut l, &shared);
        self.kernels_own_shared(&mut l, &shared);
        self.dynamic_shared(&mut l, slotted, &mut laid);
        // 4. When step 1 placed anything, every window is as aligned as the strictest
        //    variable of step 0's list, whichever kernel holds it or none (read off
        //    nvlink 13.5: a template kernel's 32-aligned array, a weak global, of one
        //    kernel or of a removed one, aligns every other kernel's window once two
        //    kernels share a variable; kernels' own locals do not: smem5.cu's `short`)
        if slotted {
            let strictest = shared.iter().map(|&v| align_of(self.sym(v))).max();
            for w in l.win.iter_mut().filter(|w| w.0.is_some()) {
                w.1 = w.1.max(strictest.unwrap_or(1));
            }
        }
        self.shared_sections(placement, l, reserve, sm, &mut laid);
        laid
    }

    /// `-r`: the shared sections stay the inputs' (concatenated by name, nothing laid
    /// out), but nvlink 13.5 aligns every `.nv.shared.<kernel>` window and
    /// `.nv_debug.shared` as the strictest dynamic (`extern`) array of the link asks,
    /// whichever kernels use it (read off `-r` links of `smem.cu` and of programs with
    /// a 16- or 32-aligned array used by a kernel, a device function or none).
    fn relocatable_shared_alignment(&mut self) {
        let dynamic = self
            .inputs()
            .iter()
            .flat_map(|u| &u.cubin.symbols)
            .filter(|s| is_dynamic_shared(s))
            .map(align_of)
            .max();
        if let Some(a) = dynamic {
            for o in self.out.iter_mut() {
                if o.ty == SHT_CUDA_SHARED {
                    o.align = o.align.max(a);
                }
            }
        }
    }

    /// Which kernels hold each shared variable some function refers to, and which
    /// kernels reach each function; nothing placed yet.
    fn shared_users(&self, trees: &CallTrees) -> Layout {
        // variable → the kernels (positions in `kernels`) whose call tree uses it;
        // every shared variable some function refers to is there, held or not (the
        // variables of removed functions take room; those no code refers to do not)
        let mut held: BTreeMap<SymKey, Vec<usize>> = BTreeMap::new();
        for func in self.code.funcs() {
            for &v in &func.shared {
                held.entry(v).or_default();
            }
        }
        // function → the kernels (positions in `kernels`) that reach it, listed only for
        // the functions that refer to a dynamic array (the only ones asked)
        let lists: Vec<bool> = (self.code.funcs().iter())
            .map(|f| f.shared.iter().any(|&v| self.sym(v).size == 0))
            .collect();
        let mut kernels_of: Vec<Vec<usize>> = vec![Vec::new(); self.code.funcs().len()];
        let mut reached = vec![false; self.code.funcs().len()];
        for (ki, tree) in trees.all().iter().enumerate() {
            let mut vars: BTreeSet<SymKey> = BTreeSet::new();
            for &g in tree {
                reached[g.0] = true;
                if lists[g.0] {
                    kernels_of[g].push(ki);
                }
                vars.extend(self.code.funcs()[g].shared.iter().copied());
            }
            for v in vars {
                held.entry(v).or_default().push(ki);
            }
        }
        let windows = self.unreached_windows(&mut held, &mut kernels_of, &mut reached);
        Layout {
            // (alignment 1 to start: a window of `char` arrays is aligned 1, as nvlink writes it)
            win: vec![(None, 1); windows.len()],
            held,
            kernels_of,
            reached,
            at: BTreeMap::new(),
            windows,
        }
    }

    /// The kernels whose windows are laid out: the live kernels, then, in a
    /// `--preserve-relocs` link without `-g`, each kernel only that option keeps because
    /// the host objects' tables leave it out, as a kernel whose call tree is itself: it
    /// holds the variables its own code uses (its locals, a global it uses directly, a
    /// dynamic array), while what only its callees use goes to `.nv_debug.shared`, as a
    /// variable no kernel holds. Read off nvlink 13.5 at sm_90 and sm_100 (a CUB
    /// `BlockReduce`'s temporary storage in a kernel no host code launches, whose symbol
    /// nvlinkrs lost, refusing the link; `tests/merge/preserve.rs`).
    fn unreached_windows(
        &self,
        held: &mut BTreeMap<SymKey, Vec<usize>>,
        kernels_of: &mut [Vec<usize>],
        reached: &mut [bool],
    ) -> Vec<FuncId> {
        let mut windows = self.code.kernels().to_vec();
        // (only for the host tables: one `-kernels-used` leaves out is laid out otherwise
        // by nvlink, which nvlinkrs does not follow yet: it gets no window, and a link
        // whose left-out kernel uses a local is refused)
        let tables = self.opts().kernels.as_ref().is_some_and(|k| k.tables);
        if !self.preserving_only() || !tables {
            return windows;
        }
        let unreached = FuncId::all(self.code.funcs().len())
            .filter(|&f| self.code.live()[f] && self.code.funcs()[f].entry && !self.reached(f));
        for f in unreached {
            let vars = &self.code.funcs()[f].shared;
            let ki = windows.len();
            windows.push(f);
            reached[f.0] = true;
            if vars.iter().any(|&v| self.sym(v).size == 0) {
                kernels_of[f.0].push(ki);
            }
            for &v in vars {
                held.entry(v).or_default().push(ki);
            }
        }
        windows
    }

    /// A kernel's `.nv.shared.<kernel>` section that holds no variable takes its size
    /// in the kernel's window: an extensible-whole-program object (ptxas `-ewp`, e_type
    /// 0xff00: incremental LTO's partitions) comes with each kernel's shared memory laid
    /// out there, without the variables, and nvlink's `-r` output with the room its
    /// `externsharedinstance` layout took (0x10 or 0x20 beyond the kernel's own
    /// variables: a kernel with only an `extern` array then gets it at 0x20). How many
    /// such sections of objects other than `-ewp` ones there are.
    fn laid_out_shared(&self, l: &mut Layout) -> u64 {
        let mut unnamed = 0;
        for (ki, &f) in self.code.kernels().iter().enumerate() {
            let SymKey { input: i, sym: s } = self.code.funcs()[f].key;
            let c = &self.inputs()[i].cubin;
            let name = format!(".nv.shared.{}", c.symbols[s].name);
            let Some(n) = c.sections.iter().position(|x| *x.name == *name) else {
                continue;
            };
            let holds = || {
                c.symbols
                    .iter()
                    .any(|y| y.shndx as usize == n && y.ty != STT_SECTION)
            };
            if c.e_type == EWP || !holds() {
                let sec = &c.sections[n];
                hold(&mut l.win[ki], sec.size, sec.align.max(1));
                unnamed += (c.e_type != EWP) as u64;
            }
        }
        unnamed
    }

    /// Step 1 (see `shared`): the variables not held by exactly one kernel, in slots;
    /// whether there was any.
    fn shared_slots(&self, l: &mut Layout, shared: &[SymKey]) -> bool {
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
            .filter(|v| l.held[v].len() != 1 && self.sym(*v).size > 0);
        for v in first {
            let ks = &l.held[&v];
            let (a, n) = (align_of(self.sym(v)), self.sym(v).size);
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
                l.place(self, v, o);
            }
            // (a kernel's window is as aligned as its slots, not only its variables)
            for &k in &s.kernels {
                l.win[k].1 = l.win[k].1.max(s.align);
            }
        }
        !slots.is_empty()
    }

    /// Step 2: each kernel's own variables after what it holds from step 1.
    fn kernels_own_shared(&self, l: &mut Layout, shared: &[SymKey]) {
        // 2. each kernel's own variables: its function's locals, then the others
        let mut own: Vec<Vec<SymKey>> = vec![Vec::new(); l.win.len()];
        let locals = l.held.keys().filter(|&&v| self.is_kernel_local(v));
        for &v in locals.chain(shared) {
            if let [k] = l.held[&v].as_slice()
                && self.sym(v).size > 0
            {
                own[*k].push(v);
            }
        }
        let before = |&a: &SymKey, &b: &SymKey| {
            (align_of(self.sym(a)), std::cmp::Reverse(self.sym(a).size))
                > (align_of(self.sym(b)), std::cmp::Reverse(self.sym(b).size))
        };
        for (ki, vs) in own.into_iter().enumerate() {
            for v in list_sort(&vs, &before, true) {
                let o = l.win[ki]
                    .0
                    .unwrap_or(0)
                    .next_multiple_of(align_of(self.sym(v)));
                l.place(self, v, o);
            }
        }
    }

    /// Step 3: the dynamic (`extern`, size 0) arrays, after everything their kernels
    /// hold (`slotted`: step 1 placed something).
    fn dynamic_shared(&self, l: &mut Layout, slotted: bool, laid: &mut SharedLayout) {
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
        if slotted {
            for (&v, ks) in &l.held {
                if !is_dynamic_shared(self.sym(v)) {
                    continue;
                }
                let a = align_of(self.sym(v));
                for w in l.win.iter_mut() {
                    hold(w, 0, a);
                }
                if ks.is_empty() {
                    l.at.insert(v, 0);
                }
            }
        }
        // A kept function no kernel reaches (its address is taken) sees a dynamic array
        // at offset -1; a debug link, which keeps them all, puts an array only they use
        // at 0.
        let one_offset = self.dynamic_shared_symbols();
        if one_offset {
            for (&v, ks) in &l.held {
                if ks.is_empty() && is_dynamic_shared(self.sym(v)) {
                    l.at.entry(v).or_insert(0);
                }
            }
        } else {
            let unreached: Vec<(FuncId, SymKey)> = FuncId::all(self.code.funcs().len())
                .filter(|&f| self.code.live()[f] && !l.reached[f.0])
                .flat_map(|f| self.code.funcs()[f].shared.iter().map(move |&v| (f, v)))
                .filter(|&(_, v)| is_dynamic_shared(self.sym(v)))
                .collect();
            for key in unreached {
                laid.dynamic_offset.insert(key, u64::MAX);
            }
        }
        let mut open: Vec<SymKey> = l
            .held
            .iter()
            .filter(|(v, ks)| !ks.is_empty() && self.sym(**v).size == 0)
            .map(|(v, _)| *v)
            .collect();
        open.sort_by_key(|&v| (std::cmp::Reverse(align_of(self.sym(v))), v));
        // (array, its alignment, the functions kernels reach that refer to it, in
        // function order: one pass over the functions)
        let mut users: Vec<(SymKey, u64, Vec<FuncId>)> = open
            .iter()
            .map(|&v| (v, align_of(self.sym(v)), Vec::new()))
            .collect();
        let user_of: HashMap<SymKey, usize> =
            open.iter().enumerate().map(|(u, &v)| (v, u)).collect();
        for f in FuncId::all(self.code.funcs().len()).filter(|&f| l.reached[f.0]) {
            for v in &self.code.funcs()[f].shared {
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
                    let o = end_of(&l.win, &l.kernels_of[f], *a);
                    for &k in &l.kernels_of[f] {
                        grown |= l.win[k].0.is_none_or(|e| e < o);
                        hold(&mut l.win[k], o, *a);
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
                let o = end_of(&l.win, &l.kernels_of[f], a);
                if !one_offset {
                    laid.dynamic_offset.insert((f, v), o);
                }
                furthest = furthest.max(o);
            }
            if one_offset {
                l.place(self, v, furthest);
            } else {
                l.at.insert(v, furthest);
            }
        }
    }

    /// The `.nv.shared.<kernel>` windows and `.nv_debug.shared` for what `l` placed, and
    /// the offsets the later steps read.
    fn shared_sections(
        &mut self,
        placement: &Placement,
        l: Layout,
        reserve: u64,
        sm: u32,
        laid: &mut SharedLayout,
    ) {
        let kernels = l.windows.clone();
        let mut window_of: Vec<Option<usize>> = vec![None; kernels.len()];
        for (ki, &f) in kernels.iter().enumerate() {
            let (Some(window), max_align) = l.win[ki] else {
                continue;
            };
            // (a kernel nvlink makes as a plain function, libNVVM's that the host tables
            // leave out, gets no empty window: generated program 4 at sm_100, whose
            // dynamic arrays give every other kernel one)
            if window == 0 && self.lto_unlisted(f) {
                continue;
            }
            let SymKey { input: i, sym: s } = self.code.funcs()[f].key;
            let name = format!(".nv.shared.{}", self.inputs()[i].cubin.symbols[s].name);
            let mut o = OutSection::new(name, SHT_NOBITS, SHF_WRITE | SHF_ALLOC | SHF_INFO_LINK);
            o.align = max_align;
            o.mem_size = window + reserve;
            if let Some(&(t, _)) = placement.of(&SecKey::new(i, self.code.funcs()[f].text)) {
                o.info = Ref::Section(t);
            }
            // (a window holding nothing has no section symbol in nvlink's sm_100+
            // layout, nor where there is no reservation: the window is empty)
            let symbol = window > 0 || (reserve > 0 && !self.mercury_layout());
            window_of[ki] = Some(self.new_section(o, symbol));
        }
        // dynamic shared arrays: an empty `.nv_debug.shared` as aligned as the strictest
        let dynamic = l
            .held
            .keys()
            .filter(|&&v| is_dynamic_shared(self.sym(v)))
            .map(|&v| self.dynamic_align(v))
            .max();
        // (--preserve-relocs without -g keeps no dynamic array's symbol: the arrays go
        // as in a plain link, below)
        let dynamic_kept = dynamic.filter(|_| self.dynamic_shared_symbols());
        if self.keeps_all() {
            // a debug link keeps the shared variables' symbols: in the window of the one
            // kernel that holds one, else in `.nv_debug.shared` (a dynamic array there,
            // taking no room), aligned as the variables laid out (8 for a double
            // array, 1 for char arrays: `smem4.cu`, `smem5.cu`)
            let mut debug_end = dynamic_kept.map(|_| 0);
            let mut held_align = None;
            for (&v, ks) in &l.held {
                let Some(&o) = l.at.get(&v) else { continue };
                let dynamic = is_dynamic_shared(self.sym(v));
                if dynamic && dynamic_kept.is_none() {
                    continue;
                }
                let home = match ks.as_slice() {
                    [k] if !dynamic => window_of[*k],
                    _ => None,
                };
                // (aligned as the strictest variable outside the kernels' own windows,
                // wherever it lies: a function's array one kernel holds counts, a
                // kernel's own local does not; `review.rs`, `smem5.cu`)
                if !dynamic && !self.is_kernel_local(v) {
                    held_align = held_align.max(Some(align_of(self.sym(v))));
                }
                if home.is_none() && !dynamic {
                    debug_end = Some(debug_end.unwrap_or(0).max(o + self.sym(v).size));
                    laid.debug_holds_variables = true;
                }
                laid.home.insert(v, home);
            }
            if let Some(end) = debug_end {
                let mut o = OutSection::new(".nv_debug.shared", SHT_NOBITS, SHF_WRITE | SHF_ALLOC);
                o.align = match held_align {
                    Some(a) => a.max(dynamic.unwrap_or(1)),
                    None => dynamic.unwrap_or(4).max(4),
                };
                o.mem_size = end + reserve;
                // (no section symbol when it is empty: dynamic arrays alone below sm_90)
                let symbol = o.mem_size > 0;
                let id = self.new_section(o, symbol);
                for home in laid.home.values_mut() {
                    home.get_or_insert(id);
                }
            } else if let Some(a) = dynamic.filter(|_| dynamic_kept.is_none()) {
                self.plain_dynamic_window(a, reserve, sm);
            }
        } else if let Some(a) = dynamic {
            self.plain_dynamic_window(a, reserve, sm);
        }
        // (a live function no kernel reaches — its address is taken — still needs its
        // variables' offsets)
        laid.offset = l.at.into_iter().collect();
        laid.reserve = reserve;
    }

    /// A plain link's `.nv_debug.shared` for the dynamic arrays: as large as the
    /// reservation on sm_100+, empty before.
    /// (A `--preserve-relocs` link below sm_100 makes it as a debug link does: the
    /// reservation's size, with a section symbol when not empty: `dyn1.cu` at sm_90.)
    fn plain_dynamic_window(&mut self, a: u64, reserve: u64, sm: u32) {
        let mut o = OutSection::new(".nv_debug.shared", SHT_NOBITS, SHF_WRITE | SHF_ALLOC);
        o.align = a;
        let debug_like = self.keeps_all() && !self.mercury_layout();
        o.mem_size = if sm >= 100 || debug_like { reserve } else { 0 };
        let symbol = debug_like && o.mem_size > 0;
        self.new_section(o, symbol);
    }

    /// A kernel's own local: ptxas puts it in that kernel's `.nv.shared.` section (the
    /// kernel's function is all that refers to it).
    fn is_kernel_local(&self, SymKey { input: i, sym: s }: SymKey) -> bool {
        let c = &self.inputs()[i].cubin;
        let sym = &c.symbols[s];
        sym.defined()
            && c.sections
                .get(sym.shndx as usize)
                .is_some_and(|sec| sec.name.starts_with(".nv.shared."))
    }

    /// The shared variables nvlink sorts first when it lays out shared memory (`shared`,
    /// step 0), in input order: all but kernels' own locals, a global once.
    pub(super) fn sorted_shared_candidates(&self) -> Vec<SymKey> {
        (0..self.inputs().len())
            .flat_map(|i| (1..self.inputs()[i].cubin.symbols.len()).map(move |s| SymKey::new(i, s)))
            .filter(|&k| {
                let sym = self.sym(k);
                sym.other & STO_SHARED != 0
                    && !matches!(sym.ty, STT_FUNC | STT_SECTION)
                    && self.representative(k) == k
                    && !self.is_kernel_local(k)
            })
            .collect()
    }
}

/// nvlink's sort of shared variables, a merge sort on linked lists (observed: the
/// order it gives equal keys depends only on their number and input order, and no
/// stable sort gives it). The items are dealt in turn onto the heads of two lists (so
/// each holds every other item, reversed), both are sorted the same way, and the two
/// are merged; where neither head goes `before` the other, `ties_first` takes the first
/// list's head, else the second's.
pub(super) fn list_sort<T: Copy>(
    items: &[T],
    before: &dyn Fn(&T, &T) -> bool,
    ties_first: bool,
) -> Vec<T> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
