//! Functions: the program's function graph (one node per chosen definition; edges from
//! relocations in its code and from the inputs' `.nv.callgraph`, indirect calls by
//! prototype) and liveness (what a kept kernel or data reaches; everything in `-r`, `-g`
//! and `--preserve-relocs` links).

use super::*;

/// The code graph the functions step makes (`graph`, `reach`, `call_trees`):
/// every function, which are live, the kernels. The later steps read it through its
/// accessors; only this file writes it (its fields are private here, the accessors hand
/// shared references).
pub(super) struct CodeGraph {
    /// Every defined function of the inputs, in nvlink's function order.
    funcs: Vec<Func>,
    /// A function's code section → the function.
    func_of_text: HashMap<SecKey, FuncId>,
    /// Per input and symbol: the function it defines, if any.
    func_at: Vec<Vec<Option<FuncId>>>,
    /// Per function: kept in the image.
    live: Vec<bool>,
    /// The functions a plain link would keep (the kernels the filter keeps, what device
    /// code launches or takes the address of, and their callees), in a `--preserve-relocs`
    /// link without `-g` (`preserving_only`), which keeps all; empty in the others (all
    /// reached).
    reached: Vec<bool>,
    /// The live kernels, in function order (`call_trees`).
    kernels: Vec<FuncId>,
    /// The functions whose address is taken.
    address_taken: HashSet<FuncId>,
    /// Some function has a callee only group 4 names (`Func::listed_only`): the call
    /// trees `EXTERNS` and register counts read then leave those out (`called_tree`).
    any_listed_only: bool,
    /// (prototype, function) of every address-taken function, each once (the dump's
    /// indirect callees).
    taken_by_prototype: Vec<(String, FuncId)>,
}

impl CodeGraph {
    /// No function yet, a slot per input symbol (`Merger::with_functions`).
    fn new(inputs: &[Input]) -> CodeGraph {
        CodeGraph {
            funcs: Vec::new(),
            func_of_text: HashMap::default(),
            func_at: (inputs.iter())
                .map(|i| vec![None; i.cubin.symbols.len()])
                .collect(),
            live: Vec::new(),
            reached: Vec::new(),
            kernels: Vec::new(),
            address_taken: HashSet::default(),
            any_listed_only: false,
            taken_by_prototype: Vec::new(),
        }
    }

    /// Every defined function of the inputs, in nvlink's function order (by `FuncId`).
    #[allow(clippy::ptr_arg)] // (a `Vec`, which `FuncId` indexes)
    pub(super) fn funcs(&self) -> &Vec<Func> {
        &self.funcs
    }

    /// A function's code section → the function.
    pub(super) fn func_of_text(&self) -> &HashMap<SecKey, FuncId> {
        &self.func_of_text
    }

    /// Per input and symbol: the function it defines, if any.
    pub(super) fn func_at(&self) -> &[Vec<Option<FuncId>>] {
        &self.func_at
    }

    /// Per function: kept in the image (by `FuncId`; after `reach`).
    pub(super) fn live(&self) -> &Vec<bool> {
        &self.live
    }

    /// The live kernels, in function order (after `call_trees`).
    pub(super) fn kernels(&self) -> &[FuncId] {
        &self.kernels
    }

    /// The functions whose address is taken.
    pub(super) fn address_taken(&self) -> &HashSet<FuncId> {
        &self.address_taken
    }

    /// Some function has a callee only group 4 names (`Func::listed_only`).
    pub(super) fn any_listed_only(&self) -> bool {
        self.any_listed_only
    }

    /// (prototype, function) of every address-taken function, each once.
    pub(super) fn taken_by_prototype(&self) -> &[(String, FuncId)] {
        &self.taken_by_prototype
    }
}

/// Each live kernel's call tree (`call_trees` makes it; the register limits, bank 2,
/// shared memory and `.nv.info` read it, and the spine lets it go after `.nv.info`).
pub(super) struct CallTrees {
    /// The live kernels, in function order (`CodeGraph::kernels`).
    kernels: Vec<FuncId>,
    /// Each one's call tree, in that order.
    trees: Vec<Vec<FuncId>>,
}

impl CallTrees {
    /// Each live kernel's call tree, as `CodeGraph::kernels` lists them.
    pub(super) fn all(&self) -> &[Vec<FuncId>] {
        &self.trees
    }

    /// Live kernel `f`'s call tree.
    pub(super) fn of(&self, f: FuncId) -> &[FuncId] {
        let k = self.kernels.binary_search(&f).expect("a live kernel");
        &self.trees[k]
    }
}

/// What a function's relocations refer to (`Merger::relocation_edges`).
struct Edges {
    /// The functions it calls (a relocation other than `UNIFIED*`).
    called: BTreeSet<FuncId>,
    /// The functions whose address it takes (`UNIFIED*` relocations).
    addressed: BTreeSet<FuncId>,
    shared: BTreeSet<SymKey>,
}

impl<'a> Merger<'a> {
    /// The functions step: the merge state, made here and only here, with its code graph
    /// made in full (`graph`, `reach`, `call_trees`, in that order): a `Merger` the
    /// later steps get has its `CodeGraph` complete, and only this file can write it.
    /// Reads the inputs, `parsed`, `opts` and `res`; hands on the merge state (no
    /// section made yet) and each live kernel's call tree.
    pub(super) fn with_functions(
        inputs: &'a [Input],
        parsed: &'a [Parsed],
        opts: &'a MergeOptions,
        diag: &'a Diagnostics,
        res: &'a resolve::Resolution<'a>,
    ) -> Result<(Merger<'a>, CallTrees)> {
        let mut m = Merger::new((inputs, parsed, opts, diag), res, CodeGraph::new(inputs));
        m.graph()?;
        m.reach();
        let trees = m.call_trees();
        Ok((m, trees))
    }

    /// The first of the three steps that make the `CodeGraph`: every chosen definition
    /// of a function (input order) with its calls, from its relocations and the inputs'
    /// `.nv.callgraph`. Reads the inputs and `res`; writes `code` (`funcs`,
    /// `func_of_text`, `func_at`, `address_taken`, `taken_by_prototype`).
    fn graph(&mut self) -> Result<()> {
        // each input's chosen definitions, in parallel, numbered in input order
        let found: Vec<Result<Vec<Func>>> = (0..self.inputs().len())
            .into_par_iter()
            .map(|i| self.input_functions(i))
            .collect();
        for list in found {
            for func in list? {
                let f = FuncId(self.code.funcs.len());
                self.code
                    .func_of_text
                    .insert(SecKey::new(func.key.input, func.text), f);
                self.code.func_at[func.key.input][func.key.sym] = Some(f);
                self.code.funcs.push(func);
            }
        }
        // edges: relocations in a function's sections (in parallel, per function)
        let edges: Vec<Result<Edges>> = (0..self.code.funcs.len())
            .into_par_iter()
            .map(FuncId)
            .map(|f| self.relocation_edges(f))
            .collect();
        // (a function whose address alone the code takes, `UNIFIED*` relocations, and that
        // group 4 lists, is not called: nvlink's call list, and so its register counts,
        // do not follow it: `address_taken_functions_and_emptied_links_as_nvlink`)
        let mut called: Vec<(FuncId, FuncId)> = Vec::new();
        for (f, (func, e)) in self.code.funcs.iter_mut().zip(edges).enumerate() {
            let Edges {
                called: calls,
                addressed,
                shared,
            } = e?;
            called.extend(calls.iter().map(|&g| (FuncId(f), g)));
            func.callees = calls;
            func.callees.extend(addressed);
            func.shared = shared;
        }
        // Call-graph entries: direct calls (groups 1 and 4), and for indirect calls the
        // functions whose address is taken (2) and the callers (3), by prototype; an
        // indirect call of prototype P may reach every function of prototype P whose
        // address is taken anywhere in the program.
        let mut taken: Vec<(String, FuncId)> = Vec::new();
        let mut callers: Vec<(String, FuncId)> = Vec::new();
        // (the calls the code's relocations and the groups 1 and 3 make, and the group 4
        // names: what only group 4 names is `listed_only`)
        let mut listed: Vec<(FuncId, FuncId)> = Vec::new();
        for i in 0..self.inputs().len() {
            let c = &self.inputs()[i].cubin;
            for (a, b, group) in c.callgraph_entries()? {
                // (a later replaced definition's entries go with it: its calls are not
                // the kept copy's, and a local function only it calls is dead in nvlink
                // 13.5; an earlier one's stay, see `calls_kept`)
                let ka = SymKey::new(i, a as usize);
                if !self.calls_kept(ka) {
                    continue;
                }
                let Some(fa) = self.func_of(ka) else {
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
                                self.code.funcs[fa].callees.insert(fb);
                                if group == 4 {
                                    listed.push((fa, fb));
                                } else {
                                    called.push((fa, fb));
                                }
                            }
                            Some(_) if group == 1 => self.code.funcs[fa].self_call = true,
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
                    self.code.funcs[*caller].callees.insert(*f);
                    called.push((*caller, *f));
                } else {
                    self.code.funcs[*caller].self_call = true;
                }
            }
        }
        let called: HashSet<(FuncId, FuncId)> = called.into_iter().collect();
        for (f, g) in listed {
            if !called.contains(&(f, g)) {
                self.code.funcs[f].listed_only.insert(g);
            }
        }
        self.code.address_taken = taken.iter().map(|(_, f)| *f).collect();
        self.code.any_listed_only = self.code.funcs.iter().any(|g| !g.listed_only.is_empty());
        let mut seen = HashSet::default();
        taken.retain(|t| seen.insert(t.clone()));
        self.code.taken_by_prototype = taken;
        Ok(())
    }

    /// The functions input `i` defines for the program (its chosen definitions), without
    /// their edges.
    fn input_functions(&self, i: usize) -> Result<Vec<Func>> {
        let c = &self.inputs()[i].cubin;
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
            let mbarriers = (records.iter())
                .find(|r| r.attr == info::NUM_MBARRIERS && r.format == info::FMT_HVAL)
                .map(|r| r.value);
            let max_regs = (records.iter())
                .find(|r| r.attr == reglimit::MAXREG_COUNT && r.format == info::FMT_HVAL)
                .map(|r| r.value as u32);
            let extern_entries = (records.iter().filter(|r| r.attr == info::EXTERNS))
                .flat_map(|r| r.payload.chunks_exact(4))
                .map(|e| e.u32_at(0).unwrap_or(0))
                .collect();
            let handed = handed::Handed::of(&records);
            out.push(Func {
                key: SymKey::new(i, s),
                text,
                info,
                max_regs,
                extern_entries,
                relocs: relocs_of.get(&text).cloned().unwrap_or_default(),
                entry: sym.is_entry(),
                regs: self.sym_value(SymKey::new(i, s), info::REGCOUNT),
                frame: self.sym_value(SymKey::new(i, s), info::FRAME_SIZE),
                barriers,
                mbarriers,
                handed,
                callees: BTreeSet::new(),
                listed_only: BTreeSet::new(),
                self_call: false,
                shared: BTreeSet::new(),
            });
        }
        Ok(out)
    }

    /// What function `f`'s relocations refer to: the functions it calls or whose address
    /// it takes (itself left out) and the shared variables it uses.
    fn relocation_edges(&self, f: FuncId) -> Result<Edges> {
        let i = self.code.funcs[f].key.input;
        // (gathered in lists and made sets at once, which sorts each list once)
        let (mut callees, mut shared, mut addressed) = (Vec::new(), Vec::new(), Vec::new());
        for &ri in &self.code.funcs[f].relocs {
            for r in self.relocs(i, ri)? {
                let sk = SymKey::new(i, r.sym as usize);
                let sym = self.sym(sk);
                if sym.other & STO_SHARED != 0 && sym.ty != STT_FUNC {
                    // (an `extern` array no input defines: its name's first reference)
                    shared.push(self.representative(sk));
                    continue;
                }
                if let Some(g) = self.func_of(sk)
                    && g != f
                {
                    match reloc::is_unified(r.ty) {
                        true => addressed.push(g),
                        false => callees.push(g),
                    }
                }
            }
        }
        Ok(Edges {
            called: callees.into_iter().collect(),
            addressed: addressed.into_iter().collect(),
            shared: shared.into_iter().collect(),
        })
    }

    /// `-extrawarn`: nvlink's warning for each function whose address is taken and that no
    /// kept function calls, directly or by an indirect call of its prototype (read off
    /// nvlink 13.5: a function-pointer table's functions are warned of when the host
    /// code does not launch the kernel that calls through it, not when it does), in the
    /// call graph's node order. Reads `code` and `res`; writes nothing (the warnings go
    /// to the diagnostics).
    pub(super) fn address_taken_warnings(&self) -> Result<()> {
        if !self.opts().extra_warnings || self.code.address_taken.is_empty() {
            return Ok(());
        }
        let cl = self.call_lists()?;
        let called: HashSet<FuncId> = FuncId::all(self.code.funcs.len())
            .filter(|&g| self.code.live[g])
            .flat_map(|g| cl.callees(g))
            .collect();
        let mut warned: Vec<FuncId> = (self.code.address_taken.iter().copied())
            .filter(|f| !called.contains(f))
            .collect();
        warned.sort_by_key(|&f| (cl.node[f], f));
        for f in warned {
            self.diag().warning(&format!(
                "Function '{}' has address taken but no calls to it found",
                self.sym(self.code.funcs[f].key).name
            ));
        }
        Ok(())
    }

    /// Whether the kernel filter (`-kernels-used`, the host objects' tables) keeps
    /// function `f` if it is a kernel (a system library's always).
    pub(super) fn kernel_kept(&self, f: FuncId) -> bool {
        let SymKey { input: i, sym: s } = self.code.funcs[f].key;
        self.inputs()[i].cudadevrt
            || (self.opts().kernels.as_ref())
                .is_none_or(|k| k.keeps_kernel(&self.inputs()[i].cubin.symbols[s].name))
    }

    /// Liveness: what the kept kernels and data reach (everything in `-r`, `-g` and
    /// `--preserve-relocs` links). Reads `code` (its calls), `res` and the kernel filter
    /// (`opts.kernels`); writes `code.live` and `code.reached`; after `graph`.
    fn reach(&mut self) {
        let n = self.code.funcs.len();
        let all = self.opts().relocatable || self.keeps_all();
        self.code.live = vec![false; n];
        let mut stack: Vec<FuncId> = FuncId::all(n)
            .filter(|&f| self.code.funcs[f].entry && self.kernel_kept(f))
            .collect();
        // functions whose address some code takes (`.nv.callgraph` group 2), whether or
        // not that code stays: nvlink 13.5 keeps them (one taken only by a dropped kernel,
        // or by a function nothing calls)
        stack.extend(self.code.address_taken.iter().copied());
        // functions whose address is stored in data; in a narrowed link, also the kernels
        // whose descriptor code takes (`FUNC_DESC*`: launches from the device) and the
        // functions whose address code takes (`UNIFIED*`: a function pointer), whatever
        // that code: nvlink 13.5 keeps them even where it goes (a kernel the host never
        // launches, a function nothing calls) or is the kernel itself (a recursive launch;
        // `a.cu`'s `kern_fp`, which stores `bar` and `local_helper` in a table, dropped
        // beside `launch1.cu`: both functions stay).
        // (A launching kernel's references to its own code, for the return, do not count.)
        let narrowed = self.opts().kernels.is_some();
        for i in 0..self.inputs().len() {
            let c = &self.inputs()[i].cubin;
            for (ri, rs) in c.sections.iter().enumerate() {
                if !matches!(rs.ty, SHT_RELA | SHT_REL) {
                    continue;
                }
                let Some(t) = c.sections.get(rs.info as usize) else {
                    continue;
                };
                let code = t.flags & SHF_EXECINSTR != 0;
                if t.flags & SHF_ALLOC == 0 || (code && !narrowed) {
                    continue;
                }
                for r in self.relocs(i, ri).unwrap_or_default() {
                    let pointer = reloc::is_unified(r.ty);
                    if code && !reloc::is_func_desc(r.ty) && !pointer {
                        continue;
                    }
                    if let Some(f) = self.func_of(SymKey::new(i, r.sym as usize))
                        && (!code || pointer || self.code.funcs[f].entry)
                    {
                        stack.push(f);
                    }
                }
            }
        }
        while let Some(f) = stack.pop() {
            if std::mem::replace(&mut self.code.live[f], true) {
                continue;
            }
            stack.extend(self.code.funcs[f].callees.iter().copied());
        }
        // (a --preserve-relocs link without -g, which keeps all, still knows what a
        // plain one would keep: its roots)
        if all {
            let reached = std::mem::replace(&mut self.code.live, vec![true; n]);
            if !self.opts().relocatable && self.preserving_only() {
                self.code.reached = reached;
            }
        }
    }

    /// Whether function `f` is one a plain link would keep (`reach`).
    pub(super) fn reached(&self, f: FuncId) -> bool {
        self.code.reached.get(f.0).copied().unwrap_or(true)
    }

    /// Each live kernel's call tree, once, for the steps that read it (the register
    /// limits, bank 2, shared memory, `.nv.info` and its `EXTERNS` lists): the kernel and
    /// the functions it calls, directly or not, in function order. Another kernel a
    /// kernel's code refers to is launched (dynamic parallelism), not called: its call
    /// tree is not the caller's (nvlink gives the launching kernel none of its shared variables,
    /// barriers, registers or stack). The graph without the edges into kernels is cut
    /// into its strongly connected components (`components`: each function and edge
    /// visited once), and each component's reach is its own functions and the reaches
    /// of the components it calls, made once and shared by every caller, whichever
    /// kernel's tree it falls in; a kernel, which nothing calls in that graph, is a
    /// component of its own, and its reach is its tree.
    /// Reads `code` (its calls and liveness); writes `code`'s kernels; hands on the trees
    /// (`CallTrees`). After `reach`.
    fn call_trees(&mut self) -> CallTrees {
        let n = self.code.funcs.len();
        let mut start = Vec::with_capacity(n + 1);
        let mut next = Vec::new();
        start.push(0);
        for func in &self.code.funcs {
            next.extend(func.callees.iter().filter(|&&g| !self.code.funcs[g].entry));
            start.push(next.len());
        }
        // (a kernel only --preserve-relocs keeps, one the kernel filter leaves out, is
        // laid out as a function: no window, nothing propagated; `-kernels-used`)
        self.code.kernels = FuncId::all(n)
            .filter(|&f| self.code.live[f] && self.code.funcs[f].entry && self.reached(f))
            .collect();
        let comp = components(&start, &next, &self.code.kernels);
        CallTrees {
            trees: reaches(&start, &next, &comp, &self.code.kernels),
            kernels: self.code.kernels.clone(),
        }
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

/// No component: a function no live kernel reaches (`components`).
const UNREACHED: usize = usize::MAX;

/// The strongly connected components of the call graph `start`/`next` (function `g`
/// calls `next[start[g]..start[g + 1]]`) that `roots` reach, by Tarjan's algorithm with
/// an explicit stack: each function's component, numbered in the order they are
/// completed, so that a component comes after every component it calls (`UNREACHED`
/// for the functions not reached).
fn components(start: &[usize], next: &[FuncId], roots: &[FuncId]) -> Vec<usize> {
    let n = start.len() - 1;
    let mut t = Tarjan {
        index: vec![UNREACHED; n],
        low: vec![0; n],
        open: Vec::new(),
        walk: Vec::new(),
        visited: 0,
    };
    let mut comp = vec![UNREACHED; n];
    let mut done = 0;
    for &FuncId(r) in roots {
        if t.index[r] != UNREACHED {
            continue;
        }
        t.visit(r, start);
        while let Some(&(g, e)) = t.walk.last() {
            if e < start[g + 1] {
                t.walk.last_mut().expect("a walk").1 += 1;
                let FuncId(h) = next[e];
                if t.index[h] == UNREACHED {
                    t.visit(h, start);
                } else if comp[h] == UNREACHED {
                    // (visited, its component still open: h is on a cycle through g)
                    t.low[g] = t.low[g].min(t.index[h]);
                }
                continue;
            }
            t.walk.pop();
            if let Some(&(caller, _)) = t.walk.last() {
                t.low[caller] = t.low[caller].min(t.low[g]);
            }
            if t.low[g] == t.index[g] {
                while let Some(h) = t.open.pop() {
                    comp[h] = done;
                    if h == g {
                        break;
                    }
                }
                done += 1;
            }
        }
    }
    comp
}

/// `components`' walk: each function's visit number and the lowest one it reaches,
/// the functions visited whose component is still open, and the path (function, its
/// next edge).
struct Tarjan {
    index: Vec<usize>,
    low: Vec<usize>,
    open: Vec<usize>,
    walk: Vec<(usize, usize)>,
    visited: usize,
}

impl Tarjan {
    fn visit(&mut self, g: usize, start: &[usize]) {
        (self.index[g], self.low[g]) = (self.visited, self.visited);
        self.visited += 1;
        self.open.push(g);
        self.walk.push((g, start[g]));
    }
}

/// Each root's reach in the call graph `start`/`next` (itself included, in function
/// order), from the graph's components (`components`): a component's reach is its
/// functions and the reaches of the components it calls, each made once, from the
/// callees up, and let go once every component calling it has read it. The roots
/// must be called by no function of the graph (each is then a component of its own).
fn reaches(start: &[usize], next: &[FuncId], comp: &[usize], roots: &[FuncId]) -> Vec<Vec<FuncId>> {
    let count = comp
        .iter()
        .filter(|&&c| c != UNREACHED)
        .max()
        .map_or(0, |&c| c + 1);
    let mut members: Vec<Vec<FuncId>> = vec![Vec::new(); count];
    for (g, &c) in comp.iter().enumerate().filter(|&(_, &c)| c != UNREACHED) {
        members[c].push(FuncId(g));
    }
    // the components each one calls, and how many components call each
    let calls: Vec<Vec<usize>> = (members.iter().enumerate())
        .map(|(c, m)| {
            let mut to: Vec<usize> = (m.iter())
                .flat_map(|&FuncId(g)| &next[start[g]..start[g + 1]])
                .map(|&FuncId(h)| comp[h])
                .filter(|&d| d != c)
                .collect();
            to.sort_unstable();
            to.dedup();
            to
        })
        .collect();
    let mut readers = vec![0usize; count];
    for &d in calls.iter().flatten() {
        readers[d] += 1;
    }
    let mut reach: Vec<Vec<FuncId>> = vec![Vec::new(); count];
    for c in 0..count {
        let mut r = std::mem::take(&mut members[c]);
        if calls[c].len() <= 4 {
            // (each list is in order: merged, not sorted again)
            for &d in &calls[c] {
                r = union(&r, &reach[d]);
            }
        } else {
            for &d in &calls[c] {
                r.extend_from_slice(&reach[d]);
            }
            r.sort_unstable();
            r.dedup();
        }
        for &d in &calls[c] {
            readers[d] -= 1;
            if readers[d] == 0 {
                reach[d] = Vec::new();
            }
        }
        reach[c] = r;
    }
    (roots.iter())
        .map(|&FuncId(k)| std::mem::take(&mut reach[comp[k]]))
        .collect()
}

/// The functions of two lists in order, each once (both in order).
fn union(a: &[FuncId], b: &[FuncId]) -> Vec<FuncId> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        out.push(x.min(y));
        i += usize::from(x <= y);
        j += usize::from(y <= x);
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

/// A function of the program (an entry of the `CodeGraph`).
pub(super) struct Func {
    pub(super) key: SymKey,
    pub(super) text: usize,
    /// Its `.nv.info.<fn>` section in its input (the first naming its code).
    pub(super) info: Option<usize>,
    /// What the register limits and `EXTERNS` read of that section, taken when it is
    /// first parsed (the records themselves are not kept: a 128-unit link's would
    /// add megabytes to its peak): its `MAXREG_COUNT`, and its `EXTERNS` entries
    /// (input symbol indices, every record's in order).
    pub(super) max_regs: Option<u32>,
    pub(super) extern_entries: Vec<u32>,
    /// The relocation sections of its code in its input, in order.
    pub(super) relocs: Vec<usize>,
    pub(super) entry: bool,
    pub(super) regs: u32,
    pub(super) frame: u32,
    pub(super) barriers: u32,
    /// Its `NUM_MBARRIERS` value (`None`: no record).
    pub(super) mbarriers: Option<u16>,
    /// Its own records a calling kernel takes (`handed.rs`).
    pub(super) handed: handed::Handed,
    pub(super) callees: BTreeSet<FuncId>,
    /// Of `callees`, those only the compiler's list of indirect targets (`.nv.callgraph`
    /// group 4) names: nvlink's call list, and its stack sizes, do not follow them (a
    /// `-G` deleting destructor's and its complete destructor's lists name each other).
    pub(super) listed_only: BTreeSet<FuncId>,
    /// Calls itself (a callgraph edge to itself).
    pub(super) self_call: bool,
    pub(super) shared: BTreeSet<SymKey>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The graph as `call_trees` builds it from callee lists.
    fn graph(callees: &[&[usize]]) -> (Vec<usize>, Vec<FuncId>) {
        let mut start = vec![0];
        let mut next = Vec::new();
        for c in callees {
            next.extend(c.iter().map(|&g| FuncId(g)));
            start.push(next.len());
        }
        (start, next)
    }

    /// Each root's reach by a walk of its own (what `call_trees` did before it shared
    /// the components' reaches).
    fn walked(start: &[usize], next: &[FuncId], root: FuncId) -> Vec<FuncId> {
        let mut seen = BTreeSet::from([root]);
        let mut stack = vec![root];
        while let Some(FuncId(g)) = stack.pop() {
            for &h in &next[start[g]..start[g + 1]] {
                if seen.insert(h) {
                    stack.push(h);
                }
            }
        }
        seen.into_iter().collect()
    }

    #[test]
    fn shared_reaches_equal_each_kernels_own_walk() {
        // kernels 0, 1 and 7; 2 → 3 → 4 → 2 a cycle below both 0 and 1, 5 a shared leaf,
        // 6 called from inside the cycle, 8 reached by nothing, 9 calls itself through 10
        let callees: &[&[usize]] = &[
            &[2, 5],
            &[5, 4, 9],
            &[3],
            &[4, 6],
            &[2, 5],
            &[],
            &[],
            &[],
            &[5],
            &[10],
            &[9],
        ];
        let (start, next) = graph(callees);
        let roots = [FuncId(0), FuncId(1), FuncId(7)];
        let comp = components(&start, &next, &roots);
        assert_eq!(comp[8], UNREACHED);
        assert!(comp[2] == comp[3] && comp[3] == comp[4] && comp[4] != comp[6]);
        assert!(comp[9] == comp[10] && comp[9] != comp[2]);
        // (a component after every component it calls)
        assert!(comp[6] < comp[2] && comp[5] < comp[2] && comp[2] < comp[0]);
        let trees = reaches(&start, &next, &comp, &roots);
        for (k, tree) in roots.iter().zip(&trees) {
            assert_eq!(tree, &walked(&start, &next, *k), "kernel {k:?}");
        }
        let ids = |v: &[usize]| v.iter().map(|&g| FuncId(g)).collect::<Vec<_>>();
        assert_eq!(trees[0], ids(&[0, 2, 3, 4, 5, 6]));
        assert_eq!(trees[1], ids(&[1, 2, 3, 4, 5, 6, 9, 10]));
        assert_eq!(trees[2], ids(&[7]));
    }

    #[test]
    fn a_long_chain_is_walked_without_recursion() {
        // (a recursive walk would overflow the test thread's stack)
        let n = 200_000;
        let callees: Vec<Vec<usize>> = (0..n)
            .map(|g| if g + 1 < n { vec![g + 1] } else { vec![1] })
            .collect();
        let refs: Vec<&[usize]> = callees.iter().map(Vec::as_slice).collect();
        let (start, next) = graph(&refs);
        let comp = components(&start, &next, &[FuncId(0)]);
        // 1..n is one cycle (the last calls 1), 0 a component of its own
        assert!(comp[1..].iter().all(|&c| c == comp[1]) && comp[0] != comp[1]);
        let trees = reaches(&start, &next, &comp, &[FuncId(0)]);
        assert_eq!(trees[0].len(), n);
    }
}
