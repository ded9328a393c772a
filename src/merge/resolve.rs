//! Resolve: each global name's definition chosen over the inputs (strong over weak, the
//! weak function with fewer registers; duplicate, size and managed-attribute errors), the
//! per-symbol answers the later steps read (`settle`), and, once the live code is known,
//! the undefined references nvlink reports (the driver's functions excepted).

use super::*;

/// The functions the driver provides, which a link leaves undefined: nvlink 13.5's own
/// table of them, in its order (read out of the nvlink binary, a table of 50 names that
/// is checked before a name is reported undefined; `tests/merge/driver.rs` links a call
/// to every `cuda*`/`cnp*` name that binary holds and every device API of the headers
/// through both linkers). libcudadevrt's functions call the `cnp*` ones (a `-g` link,
/// which keeps every function, leaves them undefined); device code calls the
/// device-graph, subgrid, fabric and memcpy ones directly. `cnpFoo` or `cudaGraphFoo`
/// is an undefined reference.
const DRIVER_FUNCTIONS: [&str; 50] = [
    "vprintf",
    "malloc",
    "free",
    "vfprintf",
    "__assertfail",
    "__profile",
    "cnpGetParameterBuffer",
    "cnpLaunchDevice",
    "cnpCtxSynchronize",
    "cnpFuncGetAttribute",
    "cnpStreamCreate",
    "cnpStreamDestroy",
    "cnpStreamWaitEvent",
    "cnpEventCreate",
    "cnpEventRecord",
    "cnpEventDestroy",
    "cnpDeviceGetName",
    "cnpDeviceGetAttribute",
    "cnpGetDeviceCount",
    "cnpGetDevice",
    "cnpGetLastError",
    "cnpSetLastError",
    "cnpGetCacheConfig",
    "cnpGetSharedMemConfig",
    "cnpGetLimit",
    "cnpDeviceGetTotalMem",
    "cnpGetParameterBufferV2",
    "cnpLaunchDeviceV2",
    "cudaGraphLaunch",
    "cudaGraphSetConditional",
    "cudaGraphKernelNodeSetParam",
    "cudaGraphKernelNodeSetGridDim",
    "cudaGraphKernelNodeSetEnabled",
    "cudaGraphKernelNodeUpdatesApply",
    "cudaSubgridSynchronousWorkspaceInitialize",
    "cudaSubgridSynchronousWorkspaceCompleteAndFetchWorkItem",
    "cudaSubgridSynchronousWorkspaceAdvanceWorkset",
    "cudaSubgridSynchronousWorkspaceGetWorksetUserData",
    "cudaSubgridWarpSpecializedWorkspaceInitialize",
    "cudaSubgridWarpSpecializedWorkspaceAdvanceWorkset",
    "cudaSubgridWarpSpecializedWorkspaceGetWorksetUserData",
    "cudaSubgridWarpSpecializedWorkspaceFetchWorkItem",
    "cudaSubgridWarpSpecializedWorkspaceWaitOnWorkItemDependencies",
    "cudaSubgridWarpSpecializedWorkspaceCompleteWorkItem",
    "cudaSubgridScheduleManageWarpSpecializedWorkspaceAndDependencies",
    "cudaFabricOpErrorStatusCount",
    "cudaFabricOpErrorStatusGet",
    "cudaResizeSharedMemory",
    "cudaDeviceMemcpyAsync",
    "cudaDeviceMemcpyBatchAsync",
];

/// `st_other`'s memory-space bits of a variable: global (0x20), shared (0x40, `STO_SHARED`),
/// constant (0x80).
const MEMORY_SPACE: u8 = 0xE0;

/// What resolution gives the later steps: every global name once, in nvlink's symbol
/// order, and for each input symbol its global name, the definition it stands for and
/// its representative. Read only after [`resolve`] made it.
pub(super) struct Resolution<'a> {
    /// Global names in nvlink's symbol order (per input: functions, then the rest).
    globals: Vec<Global<'a>>,
    /// Per input and symbol: its global (`NO_GLOBAL` for locals).
    global_of: Vec<Vec<u32>>,
    /// Per input and symbol: `(target, representative)` (`Resolution::target`,
    /// `Resolution::representative`).
    resolved: Vec<Vec<(Option<SymKey>, SymKey)>>,
    /// The global definitions that were the chosen one when nvlink read them (the
    /// first, and each that replaced the one before): `Merger::calls_kept`.
    once_chosen: HashSet<SymKey>,
}

impl<'a> Resolution<'a> {
    /// The global names, in nvlink's symbol order.
    pub(super) fn globals(&self) -> &[Global<'a>] {
        &self.globals
    }

    /// The definition a symbol of an input stands for: itself when local or chosen,
    /// the chosen definition of its name when global.
    pub(super) fn target(&self, k: SymKey) -> Option<SymKey> {
        self.resolved[k.input][k.sym].0
    }

    /// The symbol a global name stands for in the output: its chosen definition, else
    /// its first reference.
    pub(super) fn representative(&self, k: SymKey) -> SymKey {
        self.resolved[k.input][k.sym].1
    }

    /// The global name a symbol of an input stands for (`None` for a local).
    pub(super) fn global_id(&self, k: SymKey) -> Option<usize> {
        match self.global_of[k.input][k.sym] {
            NO_GLOBAL => None,
            g => Some(g as usize),
        }
    }

    /// Whether definition `k` was the chosen one when nvlink read it.
    pub(super) fn once_chosen(&self, k: SymKey) -> bool {
        self.once_chosen.contains(&k)
    }
}

/// Resolution of the inputs' global names, input by input (each input's functions, then
/// the rest): the chosen definitions, nvlink's errors (duplicates, size, memory space and
/// managed attribute), then each symbol's answers. Reads the inputs alone (`parsed`: the
/// register counts two weak functions are chosen by).
pub(super) fn resolve<'a>(
    inputs: &'a [Input],
    parsed: &[Parsed],
    diag: &Diagnostics,
) -> Result<Resolution<'a>> {
    let mut r = Resolver {
        inputs,
        parsed,
        diag,
        global_ids: HashMap::default(),
        res: Resolution {
            globals: Vec::new(),
            global_of: (inputs.iter())
                .map(|i| vec![NO_GLOBAL; i.cubin.symbols.len()])
                .collect(),
            resolved: Vec::new(),
            once_chosen: HashSet::default(),
        },
    };
    for (i, input) in inputs.iter().enumerate() {
        let errors_before = diag.error_count();
        let c = &input.cubin;
        let order: Vec<usize> = (1..c.symbols.len())
            .filter(|&s| c.symbols[s].bind != STB_LOCAL && c.symbols[s].ty != STT_SECTION)
            .filter(|&s| kind(&c.symbols[s]) == Kind::Function)
            .chain(
                (1..c.symbols.len())
                    .filter(|&s| c.symbols[s].bind != STB_LOCAL)
                    .filter(|&s| kind(&c.symbols[s]) != Kind::Function),
            )
            .collect();
        for s in order {
            r.resolve_one(SymKey::new(i, s));
        }
        if diag.error_count() > errors_before {
            return Err(Error::fatal("merge_elf failed"));
        }
    }
    let mut res = r.res;
    res.resolved = settled(inputs, &res);
    Ok(res)
}

/// The resolution as it is made.
struct Resolver<'a, 'p> {
    inputs: &'a [Input],
    parsed: &'p [Parsed],
    diag: &'p Diagnostics,
    global_ids: HashMap<&'a str, u32>,
    res: Resolution<'a>,
}

impl<'a> Resolver<'a, '_> {
    fn sym(&self, k: SymKey) -> &'a Symbol {
        &self.inputs[k.input].cubin.symbols[k.sym]
    }

    fn origin(&self, i: usize) -> &'a str {
        &self.inputs[i].cubin.origin
    }

    /// The register count ptxas recorded for a function (global REGCOUNT record).
    fn regcount(&self, k: SymKey) -> u32 {
        self.parsed[k.input].sym_value(k.sym, info::REGCOUNT)
    }

    fn resolve_one(&mut self, k: SymKey) {
        let s = self.sym(k);
        let id = match self.global_ids.entry(s.name.as_str()) {
            std::collections::hash_map::Entry::Occupied(e) => *e.get(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(self.res.globals.len() as u32);
                self.res.global_of[k.input][k.sym] = self.res.globals.len() as u32;
                self.res.globals.push(Global {
                    name: s.name.as_str(),
                    def: s.defined().then_some(k),
                    first: k,
                });
                if s.defined() {
                    self.res.once_chosen.insert(k);
                }
                return;
            }
        };
        self.res.global_of[k.input][k.sym] = id;
        let g = &self.res.globals[id as usize];
        let (first, def) = (g.first, g.def);
        let here = self.origin(k.input);
        // (a kernel one input declares as a plain function: clang's `-fgpu-rdc` code
        // naming another unit's kernel in `__clang_gpu_used_external`; nvlink's error)
        let other = self.sym(def.unwrap_or(first));
        if s.ty == STT_FUNC && other.ty == STT_FUNC && s.is_entry() != other.is_entry() {
            self.diag.error(&format!(
                "Function '{}' not declared __global__ in all source files",
                crate::demangle::demangle(&s.name)
            ));
        }
        // size agreement for data
        if kind(s) == Kind::Data {
            let prev = def.unwrap_or(first);
            let p = self.sym(prev);
            // (the memory space, `st_other`'s global, shared and constant bits: a
            // `__device__` variable named `extern __constant__` elsewhere is nvlink's
            // error; nvlinkrs linked it, and the kernel read bank 3 at the variable's
            // address)
            let space = |o: u8| o & MEMORY_SPACE;
            if space(p.other) != 0 && space(s.other) != 0 && space(p.other) != space(s.other) {
                self.diag.error(&format!(
                    "Memory space doesn't match for '{}' in '{}', first specified in '{}'",
                    s.name,
                    here,
                    self.origin(prev.input)
                ));
            }
            if p.size != 0 && s.size != 0 && p.size != s.size && !is_table_symbol(&s.name) {
                self.diag.error(&format!(
                    "Size doesn't match for '{}' in '{}', first specified in '{}'",
                    s.name,
                    here,
                    self.origin(prev.input)
                ));
            }
            if (p.other ^ s.other) & STO_MANAGED != 0 {
                self.diag.error(&format!(
                    "Managed attribute doesn't match for '{}' in '{}', first specified in '{}'",
                    s.name,
                    here,
                    self.origin(prev.input)
                ));
            }
        }
        if !s.defined() {
            return;
        }
        let Some(d) = def else {
            self.res.globals[id as usize].def = Some(k);
            self.res.once_chosen.insert(k);
            return;
        };
        let old = self.sym(d);
        let replace = match (old.bind == STB_WEAK, s.bind == STB_WEAK) {
            (false, false) => {
                // (for a variable nvlink names the input that named it first, defining it
                // or not: `use.o def.o def.o`, `first defined in 'use.o'`, new-user review
                // of 2026-12-01; for a function, the first definition's)
                let named = match kind(s) {
                    Kind::Data => first,
                    _ => d,
                };
                self.diag.error(&format!(
                    "Multiple definition of '{}' in '{}', first defined in '{}'",
                    s.name,
                    here,
                    self.origin(named.input)
                ));
                false
            }
            (true, false) => true,
            (false, true) => false,
            (true, true) => kind(s) == Kind::Function && self.regcount(k) < self.regcount(d),
        };
        if replace {
            self.res.globals[id as usize].def = Some(k);
            self.res.once_chosen.insert(k);
        }
    }
}

/// Each input symbol's `(target, representative)`, once the definitions are chosen.
fn settled(inputs: &[Input], res: &Resolution) -> Vec<Vec<(Option<SymKey>, SymKey)>> {
    (0..inputs.len())
        .map(|i| {
            (inputs[i].cubin.symbols.iter().enumerate())
                .map(|(s, sym)| {
                    let k = SymKey::new(i, s);
                    if sym.bind == STB_LOCAL {
                        (sym.defined().then_some(k), k)
                    } else {
                        match res.global_id(k).map(|g| &res.globals[g]) {
                            Some(g) => (g.def, g.def.unwrap_or(g.first)),
                            None => (None, k),
                        }
                    }
                })
                .collect()
        })
        .collect()
}

impl<'a> Merger<'a> {
    /// nvlink's errors for the references no input defines, once the live code is known
    /// (what only removed code refers to is no error). Reads `res` and `code`; writes
    /// nothing (the errors go to the diagnostics).
    pub(super) fn undefined(&self) -> Result<()> {
        if self.opts().relocatable {
            return Ok(());
        }
        let unresolved: Vec<(&str, usize)> = self
            .res()
            .globals
            .iter()
            .filter(|g| {
                !(g.def.is_some()
                    || is_table_symbol(g.name)
                    || is_syscall(g.name)
                    || is_dynamic_shared(self.sym(g.first))
                    || kind(self.sym(g.first)) == Kind::Data && self.opts().allow_undefined_globals)
            })
            .map(|g| (g.name, g.first.input))
            .collect();
        // (the walk over every relocation only when some name has no definition)
        if unresolved.is_empty() {
            return Ok(());
        }
        let (first_use, used) = self.undefined_uses();
        let mut missing = Vec::new();
        for (name, listed) in unresolved {
            // a name only dead code uses is no error; one nothing uses is (nvlink reports
            // a renamed weak `__UDT_END` in the input that lists it)
            let reported = first_use
                .get(name)
                .copied()
                .or((!used.contains(name)).then_some(listed));
            if let Some(i) = reported {
                let origin = self.origin(i);
                // nvlink's text, then which inputs `lto.cubin` was compiled from
                let from = match (origin == "lto.cubin", self.opts().lto_from.is_empty()) {
                    (true, false) => format!(
                        "\n  lto.cubin: what libNVVM compiled from the IR of '{}'",
                        self.opts().lto_from.join("', '")
                    ),
                    _ => String::new(),
                };
                missing.push(format!(
                    "Undefined reference to '{name}' in '{origin}'{from}"
                ));
            }
        }
        for m in &missing {
            self.diag().error(m);
        }
        if !missing.is_empty() {
            // the messages are printed; nvlink adds nothing and exits 255
            return Err(Error::error(""));
        }
        Ok(())
    }

    /// For every name an input leaves undefined, the first input whose live code or
    /// allocated data refers to it (a variable: whose code, live or not, as nvlink 13.5
    /// reports it); and every undefined name any relocation refers to.
    fn undefined_uses(&self) -> (HashMap<&'a str, usize>, HashSet<&'a str>) {
        let mut first = HashMap::default();
        let mut used = HashSet::default();
        let narrowed = self.opts().kernels.is_some();
        for i in 0..self.inputs().len() {
            let c = &self.inputs()[i].cubin;
            for (ri, rs) in c.sections.iter().enumerate() {
                if !matches!(rs.ty, SHT_RELA | SHT_REL) {
                    continue;
                }
                let Some(target) = c.sections.get(rs.info as usize) else {
                    continue;
                };
                let code = self
                    .code
                    .func_of_text()
                    .get(&SecKey::new(i, rs.info as usize));
                let live = match code {
                    Some(&f) => self.code.live()[f],
                    None => target.flags & SHF_ALLOC != 0 && target.flags & SHF_EXECINSTR == 0,
                };
                for r in self.relocs(i, ri).unwrap_or_default() {
                    let s = &c.symbols[r.sym as usize];
                    if !s.defined() {
                        used.insert(s.name.as_str());
                        // (a variable counts wherever code reads it, dead code too: an
                        // unused function, a kernel no host object launches; a function
                        // only where the code is live, but in a narrowed link a kernel
                        // whose descriptor code takes or a function whose address it
                        // takes, wherever that code, as `functions::reach` keeps them)
                        let address =
                            narrowed && (reloc::is_func_desc(r.ty) || reloc::is_unified(r.ty));
                        if live || (code.is_some() && (kind(s) == Kind::Data || address)) {
                            first.entry(s.name.as_str()).or_insert(i);
                        }
                    }
                }
            }
        }
        (first, used)
    }
}

/// Names the driver provides (calls to them stay undefined in the output): nvlink's
/// table, any `__cuda_syscall*` name, and the reserved shared-memory symbols.
fn is_syscall(name: &str) -> bool {
    DRIVER_FUNCTIONS.contains(&name)
        || name.starts_with("__cuda_syscall")
        || name.starts_with("__nv_reservedSMEM")
        || is_driver_value(name)
}

/// The undefined objects whose value ptxas gives (`.nv.reservedSmem.cap` 0x400,
/// `-G` tcgen05 code's `__tcgen05_tmem_max_col_size` 0x200): nvlink keeps them
/// undefined, as CUDA objects, with that value on the SASS side and 0 on the Mercury one.
pub(super) fn is_driver_value(name: &str) -> bool {
    name == "__tcgen05_tmem_max_col_size"
        || matches!(
            name.strip_prefix(".nv.reservedSmem."),
            Some("offset0" | "offset1" | "begin" | "end" | "cap")
        )
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Function,
    Data,
    Other,
}

/// What a symbol is, as resolution ranks it.
pub(super) fn kind(s: &Symbol) -> Kind {
    match s.ty {
        STT_FUNC => Kind::Function,
        STT_OBJECT | STT_CUDA_OBJECT => Kind::Data,
        _ => Kind::Other,
    }
}

/// A global name: its definition (chosen), its first symbol.
pub(super) struct Global<'a> {
    pub(super) name: &'a str,
    pub(super) def: Option<SymKey>,
    pub(super) first: SymKey,
}

/// No global: a local symbol's entry in `Merger::global_of`.
pub(super) const NO_GLOBAL: u32 = u32::MAX;
