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

impl<'a> Merger<'a> {
    /// The register count ptxas recorded for a function (global REGCOUNT record).
    fn regcount(&self, k: SymKey) -> u32 {
        self.sym_value(k, info::REGCOUNT)
    }

    pub(super) fn resolve(&mut self) -> Result<()> {
        for i in 0..self.inputs.len() {
            let errors_before = self.diag.error_count();
            let c = &self.inputs[i].cubin;
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
                self.resolve_one(SymKey::new(i, s));
            }
            if self.diag.error_count() > errors_before {
                return Err(Error::fatal("merge_elf failed"));
            }
        }
        Ok(())
    }

    fn resolve_one(&mut self, k: SymKey) {
        let s = self.sym(k);
        let id = match self.global_ids.entry(s.name.as_str()) {
            std::collections::hash_map::Entry::Occupied(e) => *e.get(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(self.globals.len() as u32);
                self.global_of[k.input][k.sym] = self.globals.len() as u32;
                self.globals.push(Global {
                    name: s.name.as_str(),
                    def: s.defined().then_some(k),
                    first: k,
                });
                if s.defined() {
                    self.once_chosen.insert(k);
                }
                return;
            }
        };
        self.global_of[k.input][k.sym] = id;
        let g = &self.globals[id as usize];
        let (first, def) = (g.first, g.def);
        let here = self.origin(k.input);
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
            self.globals[id as usize].def = Some(k);
            self.once_chosen.insert(k);
            return;
        };
        let old = self.sym(d);
        let replace = match (old.bind == STB_WEAK, s.bind == STB_WEAK) {
            (false, false) => {
                self.diag.error(&format!(
                    "Multiple definition of '{}' in '{}', first defined in '{}'",
                    s.name,
                    here,
                    self.origin(d.input)
                ));
                false
            }
            (true, false) => true,
            (false, true) => false,
            (true, true) => kind(s) == Kind::Function && self.regcount(k) < self.regcount(d),
        };
        if replace {
            self.globals[id as usize].def = Some(k);
            self.once_chosen.insert(k);
        }
    }

    /// Fills `resolved` once the definitions are chosen.
    pub(super) fn settle(&mut self) {
        self.resolved = (0..self.inputs.len())
            .map(|i| {
                self.inputs[i]
                    .cubin
                    .symbols
                    .iter()
                    .enumerate()
                    .map(|(s, sym)| {
                        if sym.bind == STB_LOCAL {
                            (
                                sym.defined().then_some(SymKey::new(i, s)),
                                SymKey::new(i, s),
                            )
                        } else {
                            match self.global_id(SymKey::new(i, s)).map(|g| &self.globals[g]) {
                                Some(g) => (g.def, g.def.unwrap_or(g.first)),
                                None => (None, SymKey::new(i, s)),
                            }
                        }
                    })
                    .collect()
            })
            .collect();
    }

    pub(super) fn undefined(&mut self) -> Result<()> {
        if self.opts.relocatable {
            return Ok(());
        }
        let unresolved: Vec<(&str, usize)> = self
            .globals
            .iter()
            .filter(|g| {
                !(g.def.is_some()
                    || is_table_symbol(g.name)
                    || is_syscall(g.name)
                    || is_dynamic_shared(self.sym(g.first))
                    || kind(self.sym(g.first)) == Kind::Data && self.opts.allow_undefined_globals)
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
                let from = match (origin == "lto.cubin", self.opts.lto_from.is_empty()) {
                    (true, false) => format!(
                        "\n  lto.cubin: what libNVVM compiled from the IR of '{}'",
                        self.opts.lto_from.join("', '")
                    ),
                    _ => String::new(),
                };
                missing.push(format!(
                    "Undefined reference to '{name}' in '{origin}'{from}"
                ));
            }
        }
        for m in &missing {
            self.diag.error(m);
        }
        if !missing.is_empty() {
            // the messages are printed; nvlink adds nothing and exits 255
            return Err(Error::error(""));
        }
        Ok(())
    }

    /// For every name an input leaves undefined, the first input whose live code or
    /// allocated data refers to it; and every undefined name any relocation refers to.
    fn undefined_uses(&self) -> (HashMap<&'a str, usize>, HashSet<&'a str>) {
        let mut first = HashMap::default();
        let mut used = HashSet::default();
        for i in 0..self.inputs.len() {
            let c = &self.inputs[i].cubin;
            for (ri, rs) in c.sections.iter().enumerate() {
                if !matches!(rs.ty, SHT_RELA | SHT_REL) {
                    continue;
                }
                let Some(target) = c.sections.get(rs.info as usize) else {
                    continue;
                };
                let live = match self.func_of_text.get(&SecKey::new(i, rs.info as usize)) {
                    Some(&f) => self.live[f],
                    None => target.flags & SHF_ALLOC != 0 && target.flags & SHF_EXECINSTR == 0,
                };
                for r in self.relocs(i, ri).unwrap_or_default() {
                    let s = &c.symbols[r.sym as usize];
                    if !s.defined() {
                        used.insert(s.name.as_str());
                        if live {
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
        || matches!(
            name.strip_prefix(".nv.reservedSmem."),
            Some("offset0" | "offset1" | "begin" | "end" | "cap")
        )
}
