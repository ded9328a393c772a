//! `.nv.info`: the global records renumbered (kernels' register counts and stack sizes
//! over their call trees, the recursion warning) and each live function's own section,
//! with the records its call tree adds to a kernel (on sm_100+ reversed only as far as
//! the Mercury copy has them).

use super::externs::{ExternRefs, UNKNOWN_STACK};
use super::*;

/// The `.nv.info` step's product, which the Mercury step's copies of the records read:
/// each function's `EXTERNS` list (output symbol indices) and each live kernel's
/// registers, stack and barriers over its call tree.
#[derive(Default)]
pub(super) struct KernelInfo {
    externs: Vec<Vec<u32>>,
    props: HashMap<FuncId, KernelProps>,
}

impl KernelInfo {
    /// Function `f`'s `EXTERNS` list.
    pub(super) fn externs(&self, f: FuncId) -> &[u32] {
        &self.externs[f.0]
    }

    /// Kernel `f`'s registers, stack and barriers (none for another function).
    pub(super) fn props(&self, f: FuncId) -> Option<KernelProps> {
        self.props.get(&f).copied()
    }
}

impl<'a> Merger<'a> {
    /// Adds `.nv.info` and each live function's `.nv.info.<fn>` to the output; hands
    /// on each function's `EXTERNS` list and each kernel's registers, stack and barriers,
    /// which the Mercury step's copies of the records read. Reads `trees` (and lets them
    /// go), `code`, the inputs' records (`parsed`), `res`, `placement` (where the
    /// functions went), `externs` and `symtab` (the records' symbol indices); writes
    /// `out` and says its warnings and errors. The spine reports the
    /// register limits' errors and the relocations' failure after it, in nvlink's order.
    pub(super) fn info(
        &mut self,
        trees: CallTrees,
        placement: &Placement,
        symtab: &SymbolTable,
        externs: &ExternRefs,
    ) -> Result<KernelInfo> {
        let exec = !self.opts().relocatable;
        let ki = KernelInfo {
            props: self.kernel_props(&trees, symtab, externs),
            externs: self.extern_lists(&trees, placement, symtab, externs),
        };
        let mut global = self.global_records(symtab, &ki.props)?;
        if exec {
            global.extend(self.stack_records(symtab, &ki.props)?);
            self.check_cta_groups(&ki.props)?;
        }
        // (an image without global records has, as nvlink's, no section: one without
        // inputs, or one whose kernels the host-reference tables or -kernels-used all
        // leave out, `-kernels-used=nosuchkernel`; a link of variables only has a record)
        if !global.is_empty() {
            let mut o = OutSection::new(".nv.info", SHT_CUDA_INFO, 0);
            o.align = 4;
            o.link = Ref::Symtab;
            o.data = info::encode_all(&global);
            self.new_section(o, false);
        }
        // per-function records (in parallel; added in function order)
        let per: Vec<Result<Option<OutSection>>> = {
            (0..self.code.funcs().len())
                .into_par_iter()
                .map(FuncId)
                .map(|f| self.function_info_section(placement, symtab, externs, f, &ki))
                .collect()
        };
        for o in per {
            if let Some(o) = o? {
                self.new_section(o, false);
            }
        }
        // (nothing after `.nv.info` reads the call trees)
        Ok(ki)
    }

    /// (registers, stack, barriers) over each live kernel's call tree, computed once.
    fn kernel_props(
        &self,
        trees: &CallTrees,
        symtab: &SymbolTable,
        externs: &ExternRefs,
    ) -> HashMap<FuncId, KernelProps> {
        let kernels = self.code.kernels().to_vec();
        // (the deepest frame chains share one table: a function's is the same
        // whichever kernel reaches it)
        let mut memo = vec![None; self.code.funcs().len()];
        let stacks: Vec<u32> = (kernels.iter())
            .map(|&f| {
                self.stack_depth(f, &mut Vec::new(), &mut memo)
                    .unwrap_or(UNKNOWN_STACK)
            })
            .collect();
        let only = self.only_kernel();
        let mut props: Vec<KernelProps> = (kernels.par_iter().zip(stacks))
            .map(|(&f, stack)| self.propagated(trees, symtab, externs, f, stack, only))
            .collect();
        // (nvlink 13.5: the one kernel of a link also counts the barriers of the
        // functions it does not reach, those whose address is taken; with two
        // kernels neither does)
        if let [KernelProps { barriers: bars, .. }] = props.as_mut_slice() {
            let live = FuncId::all(self.code.funcs().len()).filter(|&g| self.code.live()[g]);
            *bars = live
                .map(|g| self.code.funcs()[g].barriers)
                .fold(*bars, u32::max);
        }
        kernels.into_iter().zip(props).collect()
    }

    /// The inputs' `.nv.info` records the image keeps, renumbered (a kernel's register
    /// count its call tree's, `props`), in nvlink's order (the last input's first).
    fn global_records(
        &self,
        symtab: &SymbolTable,
        props: &HashMap<FuncId, KernelProps>,
    ) -> Result<Vec<Record>> {
        let exec = !self.opts().relocatable;
        let mut global: Vec<Record> = Vec::new();
        for i in 0..self.inputs().len() {
            let c = &self.inputs()[i].cubin;
            let Some(si) = c
                .sections
                .iter()
                .position(|s| s.name == ".nv.info" && s.ty == SHT_CUDA_INFO)
            else {
                continue;
            };
            let s = &c.sections[si];
            for mut r in self.parsed()[i].records.clone()? {
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
                    let k = SymKey::new(i, sym);
                    if self.target(k) != Some(k) || self.symbol_is_dead(k) {
                        continue;
                    }
                    let Some(o) = self.out_index(symtab, k) else {
                        continue;
                    };
                    let mut v = r.payload.u32_at(4).unwrap_or(0);
                    // (a relocatable output keeps each kernel's own count: the final
                    // link propagates)
                    if r.attr == info::REGCOUNT
                        && exec
                        && let Some(p) = self.func_defined_by(k).and_then(|f| props.get(&f))
                    {
                        v = p.registers;
                    }
                    r = Record::sym_pair(r.attr, o as u32 + 1, v);
                }
                global.push(r);
            }
        }
        global.reverse();
        Ok(global)
    }

    /// The output symbols of the kernels whose `MIN_STACK_SIZE` an extensible whole
    /// program (ptxas `-ewp`, e_type 0xff00: incremental LTO's partitions) gives: ptxas
    /// writes one for a kernel whose call tree recurses (0xffffffff), which
    /// [`Merger::global_records`] keeps.
    fn stacks_given(&self, symtab: &SymbolTable) -> std::collections::HashSet<usize> {
        let mut given = std::collections::HashSet::new();
        for (i, p) in self.parsed().iter().enumerate() {
            if self.inputs()[i].cubin.e_type != super::shared::EWP {
                continue;
            }
            for r in p.records.as_deref().unwrap_or(&[]) {
                if r.attr == info::MIN_STACK_SIZE
                    && let Some((sym, _)) = r.sym_value()
                    && let Some(o) = self.out_index(symtab, SymKey::new(i, sym as usize))
                {
                    given.insert(o);
                }
            }
        }
        given
    }

    /// An executable's stack records (`MIN_STACK_SIZE` for each kernel the image keeps,
    /// in the order of the kernels' symbols), after nvlink's warning for each call in a
    /// kernel whose callee's call tree has a cycle.
    fn stack_records(
        &self,
        symtab: &SymbolTable,
        props: &HashMap<FuncId, KernelProps>,
    ) -> Result<Vec<Record>> {
        let mut global = Vec::new();
        // nvlink warns once for each call in a kernel's call list (repeats counted)
        // whose callee's call tree has a cycle; nvlink's call lists are needed only
        // when the merged graph (which has every edge they have) has a cycle at all
        let merged: Vec<Vec<FuncId>> = FuncId::all(self.code.funcs().len())
            .map(|f| match self.code.live()[f] {
                true if self.code.funcs()[f].self_call => vec![f],
                true => self.code.funcs()[f].callees.iter().copied().collect(),
                false => Vec::new(),
            })
            .collect();
        let (edges, cyclic) = if cycle_below(&merged).contains(&true) {
            let cl = self.call_lists()?;
            let edges: Vec<Vec<FuncId>> = FuncId::all(self.code.funcs().len())
                .map(|f| cl.callees(f))
                .collect();
            let cyclic = cycle_below(&edges);
            (edges, cyclic)
        } else {
            (Vec::new(), Vec::new())
        };
        let mut warnings = Vec::new();
        for (f, calls) in FuncId::all(edges.len()).zip(&edges) {
            if !(self.code.live()[f] && self.code.funcs()[f].entry) {
                continue;
            }
            for &g in calls {
                if cyclic[g] {
                    warnings.push(format!(
                        "Stack size for entry function '{}' cannot be statically determined",
                        self.sym(self.code.funcs()[f].key).name
                    ));
                }
            }
        }
        if !self.opts().suppress_stack_size_warning {
            self.diag().warnings(&warnings);
        }
        // (in the order of the kernels' symbols: local ones, such as libcudadevrt's
        // static kernels, before the global ones)
        // (a --preserve-relocs link without -g keeps the kernels the kernel filter
        // leaves out without a record: `saxpy.cu`'s `doubler` at sm_100; the ones
        // device code launches get theirs, `dp.cu`'s `child`)
        let mut stacks: Vec<(usize, u32)> = FuncId::all(self.code.funcs().len())
            .filter(|&f| self.code.live()[f] && self.code.funcs()[f].entry && self.reached(f))
            .filter_map(|f| Some((symtab.index_of(&self.code.funcs()[f].key)?, props[&f].stack)))
            .collect();
        stacks.sort_by_key(|&(o, _)| o);
        // (a kernel whose stack an extensible whole program's ptxas gave, as it does a
        // recursive one's "cannot be determined", keeps that record alone)
        let given = self.stacks_given(symtab);
        stacks.retain(|(o, _)| !given.contains(o));
        for (o, stack) in stacks {
            global.push(Record::sym_pair(info::MIN_STACK_SIZE, o as u32 + 1, stack));
        }
        Ok(global)
    }

    /// Function `f`'s `.nv.info.<fn>` in the output, if it has one: its records with the
    /// symbols renumbered, `EXTERNS` as `externs` says, in nvlink's order, a kernel's with what
    /// its call tree needs (`ki`).
    fn function_info_section(
        &self,
        placement: &Placement,
        symtab: &SymbolTable,
        externs: &ExternRefs,
        f: FuncId,
        ki: &KernelInfo,
    ) -> Result<Option<OutSection>> {
        let exec = !self.opts().relocatable;
        if !self.code.live()[f] {
            return Ok(None);
        }
        let i = self.code.funcs()[f].key.input;
        let c = &self.inputs()[i].cubin;
        let text = self.code.funcs()[f].text;
        let Some(s) = self.info_section_of(f) else {
            return Ok(None);
        };
        let parsed = info::parse(c.bytes(s), &c.origin, &s.name, s.offset)?;
        let mut recs = Vec::with_capacity(parsed.len() + 4);
        for mut r in parsed {
            if r.attr == info::PARAM_CBANK && r.payload.len() >= 4 {
                let sym = r.payload.u32_at(0).unwrap_or(0) as usize;
                if sym < c.symbols.len()
                    && let Some(o) = self.out_index(symtab, SymKey::new(i, sym))
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
        let kernel = (exec && self.code.funcs()[f].entry)
            .then(|| ki.props(f))
            .flatten();
        self.finish_records(symtab, externs, f, &mut recs, ki.externs(f), kernel, |o| o);
        recs.extend(tail);
        // (sm_100+ only: at sm_90 nvlink leaves the kernel's own value)
        if let Some(k) = kernel.filter(|_| self.mercury_layout()) {
            k.handed.raise_trigger(&mut recs);
        }
        // (sm_100+: attribute 0x6D, 0 in every function ptxas 13.5 writes, is added where
        // an older ptxas's code has none: NVSHMEM 3.8's device library, built by 13.0)
        if exec
            && self.mercury_layout()
            && c.has_mercury()
            && !recs.iter().any(|r| r.attr == ATTR_6D)
        {
            recs.push(Record {
                format: info::FMT_BVAL,
                attr: ATTR_6D,
                value: 0,
                payload: info::Payload::from_slice(&[]),
            });
        }
        let mut o = OutSection::new(&s.name, SHT_CUDA_INFO, SHF_INFO_LINK);
        o.align = 4;
        o.link = Ref::Symtab;
        if let Some(&(t, _)) = placement.of(&SecKey::new(i, text)) {
            o.info = Ref::Section(t);
        }
        o.data = info::encode_all(&recs);
        Ok(Some(o))
    }

    /// nvlink's error for each kernel whose tree uses both CTA granularities (`handed.rs`).
    fn check_cta_groups(&self, props: &HashMap<FuncId, KernelProps>) -> Result<()> {
        let only = self.only_kernel();
        let mut refused = false;
        // (nvlink reports them input by input, each input's last kernel first)
        let mut kernels = self.code.kernels().to_vec();
        kernels.sort_by_key(|&f| (self.code.funcs()[f].key.input, std::cmp::Reverse(f.0)));
        for f in kernels {
            let gathered = props[&f].handed;
            if !gathered.mixes_groups(&self.code.funcs()[f].handed) {
                continue;
            }
            let message = handed::mixed_groups_error(&self.sym(self.code.funcs()[f].key).name);
            self.diag().error(&message);
            if only && gathered.mixes_groups(&handed::Handed::default()) {
                self.diag().error(&message);
            }
            refused = true;
        }
        match refused {
            // the messages are printed; nvlink adds nothing and exits 255
            true => Err(Error::error("")),
            false => Ok(()),
        }
    }

    /// The attributes of the Mercury copy of a function's `.nv.info` (`None` without one).
    fn merc_info_attrs(&self, i: usize, info_name: &str) -> Option<HashSet<u8>> {
        let c = &self.inputs()[i].cubin;
        let name = format!(".nv.merc{info_name}");
        let s = c
            .sections
            .iter()
            .find(|s| s.ty == SHT_MERC_INFO && s.name == name)?;
        let recs = info::parse(c.bytes(s), &c.origin, &s.name, s.offset).ok()?;
        Some(recs.iter().map(|r| r.attr).collect())
    }

    /// A kernel's properties with everything it calls: the register and barrier maxima
    /// over its call tree, and `stack`, its deepest frame chain (`only`: the image's only
    /// kernel).
    fn propagated(
        &self,
        trees: &CallTrees,
        symtab: &SymbolTable,
        externs: &ExternRefs,
        f: FuncId,
        stack: u32,
        only: bool,
    ) -> KernelProps {
        let reach = trees.of(f);
        // (registers as nvlink's call graph propagates them: not into what only the
        // compiler's lists of taken addresses reach, a virtual destructor's 36 into the
        // kernel that makes the object, 24, in the drop-in's LTO link beside libcudadevrt)
        let called;
        let calls = match self.code.any_listed_only() {
            true => {
                called = self.called_tree(trees, f);
                &called[..]
            }
            false => reach,
        };
        let regs = calls
            .iter()
            .map(|&g| self.code.funcs()[g].regs)
            .max()
            .unwrap_or(0);
        let bars = reach
            .iter()
            .map(|&g| self.code.funcs()[g].barriers)
            .max()
            .unwrap_or(0);
        let mbarriers_of = |g: FuncId| (self.code.funcs()[g].mbarriers).filter(|&m| m > 0 || !only);
        // (the memory barriers of every function of the tree added up, each function
        // once; 0xffff, not known, stays)
        let mbarriers = (reach.iter().filter_map(|&g| mbarriers_of(g))).reduce(|a, m| {
            if a == 0xffff || m == 0xffff {
                0xffff
            } else {
                a.saturating_add(m)
            }
        });
        // (the records new to the kernel, callee by callee: the only kernel takes those of
        // every live function, as it takes their barriers; handed.rs)
        let handed = match only {
            true => handed::Handed::gathered(
                (FuncId::all(self.code.funcs().len()))
                    .filter(|&g| g != f && self.code.live()[g] && !self.code.funcs()[g].entry)
                    .map(|g| self.code.funcs()[g].handed),
            ),
            false => handed::Handed::gathered(
                (reach.iter().filter(|&&g| g != f)).map(|&g| self.code.funcs()[g].handed),
            ),
        };
        KernelProps {
            registers: regs,
            stack,
            barriers: bars,
            mbarriers,
            externs_first: self.externs_before_barriers(trees, symtab, externs, f),
            handed,
        }
    }

    /// The deepest chain of frames below `f`; `None` when the call tree has a cycle.
    /// `memo` may be kept from one kernel to the next: a function's answer does not
    /// depend on the path that reached it (a cycle found through a function on the path
    /// runs through every function after it on the path, so all of them have one below).
    fn stack_depth(
        &self,
        f: FuncId,
        path: &mut Vec<FuncId>,
        memo: &mut [Option<Option<u32>>],
    ) -> Option<u32> {
        if let Some(d) = memo[f.0] {
            return d;
        }
        if path.contains(&f) || self.code.funcs()[f].self_call {
            return None;
        }
        path.push(f);
        let mut deepest = Some(0u32);
        // (not the functions only the compiler's list of indirect targets names, which
        // nvlink's stack sizes do not follow)
        for &g in (self.code.funcs()[f].callees.iter()).filter(|&&g| {
            !self.code.funcs()[g].entry && !self.code.funcs()[f].listed_only.contains(&g)
        }) {
            deepest = match (deepest, self.stack_depth(g, path, memo)) {
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            };
        }
        path.pop();
        let d = deepest.map(|x| self.code.funcs()[f].frame + x);
        memo[f.0] = Some(d);
        d
    }
}

/// For each function, whether a cycle can be reached from it (itself included): what is
/// left after peeling off, again and again, the functions all of whose callees are gone.
fn cycle_below(edges: &[Vec<FuncId>]) -> Vec<bool> {
    let mut pending: Vec<usize> = edges.iter().map(Vec::len).collect();
    let mut callers: Vec<Vec<FuncId>> = vec![Vec::new(); edges.len()];
    for (f, callees) in FuncId::all(edges.len()).zip(edges) {
        for &g in callees {
            callers[g].push(f);
        }
    }
    let mut done: Vec<FuncId> = FuncId::all(edges.len())
        .filter(|&f| pending[f] == 0)
        .collect();
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

/// A per-function `.nv.info` attribute of sm_100+ code (unnamed; 0 wherever seen).
const ATTR_6D: u8 = 0x6D;

/// What `.nv.info` records for a live kernel over its call tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct KernelProps {
    pub(super) registers: u32,
    /// The stack (nvlink's value for one it cannot bound when the tree recurses).
    pub(super) stack: u32,
    pub(super) barriers: u32,
    /// `NUM_MBARRIERS` over the call tree, each function's added up (`None`: none has one;
    /// a record of 0 counts where the image has more than one kernel, as nvlink 13.5 adds
    /// it there).
    pub(super) mbarriers: Option<u16>,
    /// A new `EXTERNS` record comes before a new barrier count (`externs.rs`).
    pub(super) externs_first: bool,
    /// The records its callees hand it, its new barrier counts among them (nvlink adds
    /// them as it meets the callees that carry them; `handed.rs`).
    pub(super) handed: handed::Handed,
}
