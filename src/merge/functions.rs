//! Functions: the program's function graph (one node per chosen definition; edges from
//! relocations in its code and from the inputs' `.nv.callgraph`, indirect calls by
//! prototype) and liveness (what a kept kernel or data reaches; everything in `-r`, `-g`
//! and `--preserve-relocs` links).

use super::*;

impl<'a> Merger<'a> {
    pub(super) fn functions(&mut self) -> Result<()> {
        // each input's chosen definitions, in parallel, numbered in input order
        let found: Vec<Result<Vec<Func>>> = (0..self.inputs.len())
            .into_par_iter()
            .map(|i| self.input_functions(i))
            .collect();
        for list in found {
            for func in list? {
                let f = FuncId(self.funcs.len());
                self.func_of_text
                    .insert(SecKey::new(func.key.input, func.text), f);
                self.func_at[func.key.input][func.key.sym] = Some(f);
                self.funcs.push(func);
            }
        }
        // edges: relocations in a function's sections (in parallel, per function)
        let edges: Vec<Result<(BTreeSet<FuncId>, BTreeSet<SymKey>)>> = (0..self.funcs.len())
            .into_par_iter()
            .map(FuncId)
            .map(|f| self.relocation_edges(f))
            .collect();
        for (func, e) in self.funcs.iter_mut().zip(edges) {
            (func.callees, func.shared) = e?;
        }
        // Call-graph entries: direct calls (groups 1 and 4), and for indirect calls the
        // functions whose address is taken (2) and the callers (3), by prototype; an
        // indirect call of prototype P may reach every function of prototype P whose
        // address is taken anywhere in the program.
        let mut taken: Vec<(String, FuncId)> = Vec::new();
        let mut callers: Vec<(String, FuncId)> = Vec::new();
        for i in 0..self.inputs.len() {
            let c = &self.inputs[i].cubin;
            for (a, b, group) in c.callgraph_entries()? {
                let Some(fa) = self.func_of(SymKey::new(i, a as usize)) else {
                    continue;
                };
                match group {
                    1 | 4 => {
                        let fb = usize::try_from(b)
                            .ok()
                            .filter(|&b| b < c.symbols.len())
                            .and_then(|b| self.func_of(SymKey::new(i, b)));
                        match fb {
                            Some(fb) if fb != fa => {
                                self.funcs[fa].callees.insert(fb);
                            }
                            Some(_) if group == 1 => self.funcs[fa].self_call = true,
                            _ => {}
                        }
                    }
                    2 | 3 => {
                        if let Some(p) = c.strtab_string(b) {
                            if group == 2 { &mut taken } else { &mut callers }.push((p, fa));
                        }
                    }
                    _ => {}
                }
            }
        }
        let mut taken_of: HashMap<&str, Vec<FuncId>> = HashMap::default();
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
        let (info_of, relocs_of) = sections_by_code(c);
        let mut out = Vec::new();
        for s in 1..c.symbols.len() {
            let sym = &c.symbols[s];
            if sym.ty != STT_FUNC
                || !sym.defined()
                || self.target(SymKey::new(i, s)) != Some(SymKey::new(i, s))
            {
                continue;
            }
            let text = sym.shndx as usize;
            let info = info_of.get(&text).copied();
            let records = match info.map(|si| &c.sections[si]) {
                Some(s) => info::parse(c.bytes(s), &c.origin, &s.name, s.offset)?,
                None => Vec::new(),
            };
            let barriers = records
                .iter()
                .find(|r| r.attr == info::NUM_BARRIERS)
                .map_or(0, |r| (r.value & 0xFF) as u32);
            out.push(Func {
                key: SymKey::new(i, s),
                text,
                info,
                relocs: relocs_of.get(&text).cloned().unwrap_or_default(),
                entry: sym.is_entry(),
                regs: self.sym_value(SymKey::new(i, s), info::REGCOUNT),
                frame: self.sym_value(SymKey::new(i, s), info::FRAME_SIZE),
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
    fn relocation_edges(&self, f: FuncId) -> Result<(BTreeSet<FuncId>, BTreeSet<SymKey>)> {
        let i = self.funcs[f].key.input;
        let (mut callees, mut shared) = (BTreeSet::new(), BTreeSet::new());
        for &ri in &self.funcs[f].relocs {
            for r in self.relocs(i, ri)? {
                let sk = SymKey::new(i, r.sym as usize);
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

    pub(super) fn reach(&mut self) {
        let n = self.funcs.len();
        let all = self.opts.relocatable || self.keeps_all();
        self.live = vec![all; n];
        if all {
            return;
        }
        let kept = |m: &Self, f: FuncId| {
            let SymKey { input: i, sym: s } = m.funcs[f].key;
            m.inputs[i].system
                || m.opts
                    .kernels
                    .as_ref()
                    .is_none_or(|k| k.keeps_kernel(&m.inputs[i].cubin.symbols[s].name))
        };
        let mut stack: Vec<FuncId> = FuncId::all(n)
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
                    if let Some(f) = self.func_of(SymKey::new(i, r.sym as usize)) {
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

    /// Each live kernel's call tree, once, for the steps that read it (shared memory,
    /// `.nv.info`, `EXTERNS`, the register limits): the kernel and the functions it
    /// calls, directly or not, in function order. Another kernel a kernel's code refers
    /// to is launched (dynamic parallelism), not called: its call tree is not the
    /// caller's (nvlink gives the launching kernel none of its shared variables,
    /// barriers, registers or stack). The walks run over one flat copy of the edges
    /// that leaves the kernels out, in parallel, each thread marking what it has seen
    /// with the kernel's number instead of clearing a table per kernel.
    pub(super) fn call_trees(&mut self) {
        let n = self.funcs.len();
        let mut start = Vec::with_capacity(n + 1);
        let mut next = Vec::new();
        start.push(0);
        for func in &self.funcs {
            next.extend(func.callees.iter().filter(|&&g| !self.funcs[g].entry));
            start.push(next.len());
        }
        self.kernels = FuncId::all(n)
            .filter(|&f| self.live[f] && self.funcs[f].entry)
            .collect();
        self.trees = self
            .kernels
            .par_iter()
            .map_init(
                || vec![None; n],
                |seen: &mut Vec<Option<FuncId>>, &f| {
                    seen[f] = Some(f);
                    let (mut out, mut stack) = (vec![f], vec![f]);
                    while let Some(g) = stack.pop() {
                        for &h in &next[start[g.0]..start[g.0 + 1]] {
                            if seen[h] != Some(f) {
                                seen[h] = Some(f);
                                out.push(h);
                                stack.push(h);
                            }
                        }
                    }
                    out.sort_unstable();
                    out
                },
            )
            .collect();
    }

    /// Live kernel `f`'s call tree (`call_trees`).
    pub(super) fn tree(&self, f: FuncId) -> &[FuncId] {
        let k = self.kernels.binary_search(&f).expect("a live kernel");
        &self.trees[k]
    }
}

/// Input `c`'s sections that belong to a function, by the code section their `sh_info`
/// names: the first `.nv.info.<fn>`, and the relocation sections in order (one pass
/// over the sections, instead of one per function).
type ByCode = (HashMap<usize, usize>, HashMap<usize, Vec<usize>>);

fn sections_by_code(c: &Cubin) -> ByCode {
    let (mut info_of, mut relocs_of): ByCode = Default::default();
    for (si, s) in c.sections.iter().enumerate() {
        let text = s.info as usize;
        if s.ty == SHT_CUDA_INFO && s.flags & SHF_INFO_LINK != 0 {
            info_of.entry(text).or_insert(si);
        } else if matches!(s.ty, SHT_RELA | SHT_REL) {
            relocs_of.entry(text).or_default().push(si);
        }
    }
    (info_of, relocs_of)
}
