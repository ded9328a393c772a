//! `EIATTR_EXTERNS` (0x0F) in the output, as nvlink 13.5 writes it. A function's record
//! lists the functions it calls that are undefined in its input; in the image only those
//! no input defines stay (the ones the driver provides: `malloc`, `free`, `vprintf`,
//! `__assertfail`, the device runtime's system calls) and kernels (launched from the
//! device), by output symbol index, in the record's order. A kernel's list then takes,
//! function by function in output order over its call tree, the entries of their lists
//! it does not have yet; the image's only kernel takes those of every kept function, the
//! ones it does not reach included (a `-g` link keeps them all), as it takes their
//! barrier counts. A record stays in place, however much its list grew; a new record
//! goes at the end (after a new barrier count, before it when the kernel's call tree
//! recurses or names a driver function before a function with barriers), and the
//! image's only kernel's moves to the end, after a new barrier count,
//! whenever its call tree added entries to it (seen with -G code, where `assert` calls a
//! function of its own). A list left empty has no record. (The placement rules were
//! read off nvlink's output for 60 generated programs at sm_90, plain and `-g`, 32 at
//! sm_100, and `extgrow*.cu`.) `.nv.prototype` keeps the entries of the functions no input defines
//! that a live function's list names.

use super::*;

/// MIN_STACK_SIZE / CRS_STACK_SIZE of a kernel whose call tree recurses (`.nv.info`'s
/// records, which this file finishes).
pub(super) const UNKNOWN_STACK: u32 = 0xFFFF_FFFF;

/// What the live functions' `EXTERNS` records name, read once the live code is known
/// (`read_externs`) and only read after.
#[derive(Default)]
pub(super) struct ExternRefs {
    /// Each live function's own entries that stay, as input symbols.
    own: Vec<Vec<SymKey>>,
    /// The functions no input defines that those entries name (representatives).
    driver: HashSet<SymKey>,
}

impl Merger<'_> {
    /// Reads each live function's own list (before the symbols are numbered: the
    /// prototype table needs to know which driver functions are named). Reads `code` and
    /// `res`; hands on the `ExternRefs`.
    pub(super) fn read_externs(&self) -> Result<ExternRefs> {
        let own: Vec<Vec<SymKey>> = (0..self.code.funcs().len())
            .into_par_iter()
            .map(FuncId)
            .map(|f| self.own_externs(f))
            .collect::<Result<_>>()?;
        let mut driver: HashSet<SymKey> = (own.iter().flatten())
            .filter(|&&k| self.target(k).is_none())
            .map(|&k| self.representative(k))
            .collect();
        // (and those a replaced copy of a live function calls: nvlink keeps the calls
        // of a copy a later one replaced, `calls_kept`, and their symbols and
        // prototypes, though no list names them; in a link that keeps every function,
        // -g or -r, those of a copy that lost when read too, though not its calls)
        let every = self.opts().relocatable || self.keeps_all();
        for i in 0..self.inputs().len() {
            let c = &self.inputs()[i].cubin;
            for (a, b, group) in c.callgraph_entries()? {
                let ka = SymKey::new(i, a as usize);
                if group != 1 || !self.is_replaced(ka) || !(every || self.calls_kept(ka)) {
                    continue;
                }
                if !self.func_of(ka).is_some_and(|f| self.code.live()[f]) {
                    continue;
                }
                let Some(kb) = usize::try_from(b)
                    .ok()
                    .filter(|&b| b < c.symbols.len())
                    .map(|b| SymKey::new(i, b))
                else {
                    continue;
                };
                let sb = self.sym(kb);
                if !sb.defined() && sb.ty == STT_FUNC && self.target(kb).is_none() {
                    driver.insert(self.representative(kb));
                }
            }
        }
        Ok(ExternRefs { own, driver })
    }

    /// The list of every live function, as output symbol indices, by function.
    pub(super) fn extern_lists(
        &self,
        trees: &CallTrees,
        placement: &Placement,
        symtab: &SymbolTable,
        externs: &ExternRefs,
    ) -> Vec<Vec<u32>> {
        let own: Vec<Vec<u32>> = (externs.own.iter())
            .map(|l| {
                let mut out: Vec<u32> = Vec::with_capacity(l.len());
                for o in l.iter().filter_map(|&k| self.out_index(symtab, k)) {
                    if !out.contains(&(o as u32 + 1)) {
                        out.push(o as u32 + 1);
                    }
                }
                out
            })
            .collect();
        if self.opts().relocatable || own.iter().all(|l| l.is_empty()) {
            return own;
        }
        // (the image's only kernel takes the lists of every kept function, those it does
        // not reach included, as it takes their barrier counts: a -g link keeps them all;
        // in the image's order of code, its own among them: `malloc vprintf free` for a
        // kernel calling printf and free whose callee's code, placed first, calls malloc)
        // (each function's code's place in the image: a kernel takes its tree's lists in
        // that order, which is the functions' own but where a relocatable input's
        // symbols are in another order than its code, an `-r` output holding
        // libcudadevrt)
        let code_at: Vec<Option<usize>> = (self.code.funcs().iter())
            .map(|g| (placement.of(&SecKey::new(g.key.input, g.text))).map(|&(o, _)| o))
            .collect();
        let every: Vec<FuncId> = match self.only_kernel() {
            true => {
                let mut every: Vec<FuncId> = FuncId::all(self.code.funcs().len())
                    .filter(|&g| self.code.live()[g])
                    .collect();
                every.sort_by_key(|&g| code_at[g.0]);
                every
            }
            false => Vec::new(),
        };
        (0..self.code.funcs().len())
            .into_par_iter()
            .map(FuncId)
            .map(|f| {
                let mut list = own[f].clone();
                // (a kernel only --preserve-relocs keeps, one the kernel filter leaves
                // out, keeps its own list: `devlaunch.cu`'s `top`)
                if self.code.live()[f] && self.code.funcs()[f].entry && self.reached(f) {
                    let mut tree;
                    let funcs = if !every.is_empty() {
                        &every
                    } else {
                        tree = match self.code.any_listed_only() {
                            true => self.called_tree(trees, f),
                            false => trees.of(f).to_vec(),
                        };
                        tree.sort_by_key(|&g| code_at[g.0]);
                        &tree
                    };
                    if !every.is_empty() {
                        list.clear();
                    }
                    for &g in funcs {
                        for &o in &own[g] {
                            if !list.contains(&o) {
                                list.push(o);
                            }
                        }
                    }
                }
                list
            })
            .collect()
    }

    /// Kernel `f`'s call tree without what only the compiler's lists of functions whose
    /// address a function takes (`.nv.callgraph` group 4, `listed_only`) add: what a
    /// kernel's `EXTERNS` list takes in (read off nvlink 13.5: a kernel calling a
    /// function that makes an object with virtual functions does not get the
    /// `free` its deleting destructor calls). In the tree's order.
    pub(super) fn called_tree(&self, trees: &CallTrees, f: FuncId) -> Vec<FuncId> {
        let mut seen: HashSet<FuncId> = HashSet::default();
        let mut stack = vec![f];
        while let Some(g) = stack.pop() {
            if seen.insert(g) {
                let callees = self.code.funcs()[g].callees.iter();
                stack.extend(callees.filter(|&&h| {
                    !self.code.funcs()[h].entry && !self.code.funcs()[g].listed_only.contains(&h)
                }));
            }
        }
        (trees.of(f).iter().copied())
            .filter(|g| seen.contains(g))
            .collect()
    }

    /// Function `f`'s own record: the entries that stay, as input symbols.
    fn own_externs(&self, f: FuncId) -> Result<Vec<SymKey>> {
        if !self.code.live()[f] {
            return Ok(Vec::new());
        }
        let i = self.code.funcs()[f].key.input;
        let c = &self.inputs()[i].cubin;
        let list = (self.code.funcs()[f].extern_entries.iter())
            .map(|&e| SymKey::new(i, e as usize))
            .filter(|&k| {
                k.sym < c.symbols.len()
                    && (self.target(k).is_none()
                        || self.func_of(k).is_some_and(|g| self.code.funcs()[g].entry))
            })
            .collect();
        Ok(list)
    }

    /// Function `f`'s records (in output order) finished: its `EXTERNS` list `list`
    /// (`index` maps an output index) and, for a kernel (`props`), what its call tree
    /// needs.
    #[allow(clippy::too_many_arguments)] // (the products it reads, each by name)
    pub(super) fn finish_records(
        &self,
        symtab: &SymbolTable,
        externs: &ExternRefs,
        f: FuncId,
        recs: &mut Vec<Record>,
        list: &[u32],
        props: Option<KernelProps>,
        index: impl Fn(u32) -> u32,
    ) {
        let own = !externs.own[f].is_empty();
        let Some(props) = props else {
            if !self.opts().relocatable && !self.code.funcs()[f].entry {
                handed::drop_fragments(recs);
            }
            place_externs(recs, list, own, index);
            return;
        };
        // (a record stays in place, a new one goes at the end: after a new barrier
        // count, but before it when the kernel's call tree recurses or names a driver
        // function first (`externs_before_barriers`); the image's only
        // kernel's record moves to the end, after a new barrier count, when its call
        // tree added entries to it, whatever the layout)
        let only = self.only_kernel();
        let in_place = !only || list.len() <= self.own_extern_count(symtab, externs, f);
        if (props.stack == UNKNOWN_STACK || props.externs_first) && !only {
            // (an unknown stack's record first: a relinked `-r` output, whose kernels
            // have no `CRS_STACK_SIZE` of ptxas's, gets it before a new list)
            stack_record(recs, props.stack);
            place_externs(recs, list, in_place, index);
            kernel_records(recs, props, only);
        } else {
            kernel_records(recs, props, only);
            place_externs(recs, list, in_place, index);
        }
    }

    /// Whether kernel `f`'s new record comes before its new barrier count: its call tree,
    /// walked in output order, names a function of the driver before it reaches a
    /// function with barriers (nvlink 13.5 adds, function by function, the barrier count
    /// first, then the list; generated program 21 at sm_100, `managed.cu`'s `k_list`).
    pub(super) fn externs_before_barriers(
        &self,
        trees: &CallTrees,
        symtab: &SymbolTable,
        externs: &ExternRefs,
        f: FuncId,
    ) -> bool {
        let c = &self.inputs()[self.code.funcs()[f].key.input].cubin;
        let has_record = self.info_section_of(f).is_some_and(|s| {
            info::parse(c.bytes(s), &c.origin, &s.name, s.offset)
                .is_ok_and(|rs| rs.iter().any(|r| r.attr == info::EXTERNS))
        });
        if has_record || self.code.funcs()[f].barriers > 0 {
            return false;
        }
        let names = |g: FuncId| {
            externs.own[g]
                .iter()
                .any(|&k| self.out_index(symtab, k).is_some())
        };
        let first = (trees.of(f).iter()).find(|&&g| names(g) || self.code.funcs()[g].barriers > 0);
        first.is_some_and(|&g| self.code.funcs()[g].barriers == 0)
    }

    /// Whether the image has one kernel (stops at the second).
    pub(super) fn only_kernel(&self) -> bool {
        let mut kernels = (0..self.code.funcs().len())
            .filter(|&g| self.code.live()[g] && self.code.funcs()[g].entry);
        kernels.nth(1).is_none()
    }

    /// How many distinct output symbols function `f`'s own list names.
    fn own_extern_count(&self, symtab: &SymbolTable, externs: &ExternRefs, f: FuncId) -> usize {
        let mut own: Vec<usize> = (externs.own[f].iter())
            .filter_map(|&k| self.out_index(symtab, k))
            .collect();
        own.sort_unstable();
        own.dedup();
        own.len()
    }

    /// Whether a function no input defines is named by a live function's list.
    pub(super) fn is_driver_function(&self, externs: &ExternRefs, k: SymKey) -> bool {
        self.target(k).is_none() && externs.driver.contains(&self.representative(k))
    }
}

/// Puts `list` into `recs` (records in output order): in place of the EXTERNS record
/// while some of its own entries stay (`in_place`), else at the end; no record for an
/// empty list. `index` maps an output index.
fn place_externs(recs: &mut Vec<Record>, list: &[u32], in_place: bool, index: impl Fn(u32) -> u32) {
    let at = recs.iter().position(|r| r.attr == info::EXTERNS);
    if let Some(at) = at {
        recs.remove(at);
    }
    if list.is_empty() {
        return;
    }
    let payload: info::Payload = list.iter().flat_map(|&o| index(o).to_le_bytes()).collect();
    let r = Record::sval(info::EXTERNS, payload);
    match at.filter(|_| in_place) {
        Some(at) => recs.insert(at, r),
        None => recs.push(r),
    }
}

/// A kernel's records once its call tree is known: `CRS_STACK_SIZE` unknown when the
/// tree recurses ([`stack_record`]), then what its callees hand it, its barrier counts
/// among them ([`barrier_record`], [`mbarrier_record`]).
fn kernel_records(recs: &mut Vec<Record>, props: KernelProps, only: bool) {
    stack_record(recs, props.stack);
    props.handed.place(recs, only, |recs, attr| match attr {
        info::NUM_BARRIERS => barrier_record(recs, props.barriers),
        _ => mbarrier_record(recs, props.mbarriers),
    });
}

/// `CRS_STACK_SIZE` unknown when the kernel's call tree recurses (`stack`), added when
/// ptxas gave none (a second call finds it set).
fn stack_record(recs: &mut Vec<Record>, stack: u32) {
    if stack != UNKNOWN_STACK {
        return;
    }
    let mut found = false;
    for r in recs.iter_mut().filter(|r| r.attr == info::CRS_STACK_SIZE) {
        r.payload = info::Payload::from_slice(&UNKNOWN_STACK.to_le_bytes());
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

/// The barrier count raised to the call tree's (added when missing, where nvlink meets
/// the first callee with one: `handed::Handed::place`).
fn barrier_record(recs: &mut Vec<Record>, barriers: u32) {
    if barriers > 0 {
        match recs.iter_mut().find(|r| r.attr == info::NUM_BARRIERS) {
            Some(r) => r.value = barriers as u16,
            None => recs.push(Record::head(
                info::FMT_BVAL,
                info::NUM_BARRIERS,
                barriers as u16,
            )),
        }
    }
}

/// The memory-barrier count raised to the call tree's (added when missing; NVSHMEM's
/// reductions give 0xffff, which nvlink 13.5 adds at the end of a calling kernel's records).
fn mbarrier_record(recs: &mut Vec<Record>, mbarriers: Option<u16>) {
    if let Some(mbarriers) = mbarriers {
        match recs.iter_mut().find(|r| r.attr == info::NUM_MBARRIERS) {
            Some(r) => r.value = r.value.max(mbarriers),
            None => recs.push(Record::head(info::FMT_HVAL, info::NUM_MBARRIERS, mbarriers)),
        }
    }
}
