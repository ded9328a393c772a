//! The link's plan: what the request ([`LinkRequest`]) means for each phase. The toolkit
//! (found at most once per link, when a phase first needs it), the merge's options and
//! the kernels it keeps, ptxas's and libNVVM's settings, and the assemble phase (`objects`):
//! every input's cubin for the merge, PTX through ptxas `-c`, each checked against the
//! target, unused libcudadevrt objects left out.

use std::sync::OnceLock;

use crate::cli::LinkRequest;
use crate::context::LinkContext;
use crate::diag::{Diagnostics, Error, Result};
use crate::input::HostInfo;
use crate::toolkit::Toolkit;
use crate::{arch, bytes, elf, merge, ptxas_driver, toolnote};

/// The request, and what is found from it once.
pub struct Plan<'r> {
    pub req: &'r LinkRequest,
    kit: OnceLock<Result<Toolkit>>,
}

impl<'r> Plan<'r> {
    pub fn new(req: &'r LinkRequest) -> Plan<'r> {
        Plan {
            req,
            kit: OnceLock::new(),
        }
    }

    /// The CUDA toolkit (`--cuda-path`, `-nvvmpath`, the environment...), found on first
    /// use and kept for the rest of the link.
    pub fn toolkit(&self) -> Result<&Toolkit> {
        let req = self.req;
        self.kit
            .get_or_init(|| Toolkit::discover(req.cuda_path.as_deref(), req.nvvmpath.as_deref()))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// What nvlinkrs refuses, or warns about, before reading an input.
    pub fn check(&self, diag: &Diagnostics) -> Result<()> {
        let req = self.req;
        if req.preserve_relocs && req.target.sm >= 100 {
            // (nvlink lists the capsule-Mercury relocations too there; not done yet)
            return Err(Error::fatal(format!(
                "option '--preserve-relocs' is not implemented by nvlinkrs for '{}' (sm_100 and newer) yet; refusing rather than writing another image than nvlink's",
                req.target
            )));
        }
        if req.preserve_relocs && req.target.sm >= 90 {
            // (nvlink 13.5's words, its spelling kept)
            diag.warning(&format!(
                "Option '--preserve-relocs' is not fully implemented for gpu archtecture '{}' and may not work as expected",
                req.target
            ));
        }
        Ok(())
    }

    pub fn merge_options(&self) -> merge::MergeOptions {
        let req = self.req;
        merge::MergeOptions {
            target: Some(req.target),
            relocatable: req.relocatable,
            debug: req.debug,
            preserve_relocs: req.preserve_relocs,
            disable_smem_reservation: req.disable_smem_reservation,
            allow_undefined_globals: req.allow_undefined_globals,
            note_command_line: toolnote::command_line(req),
            note_output: req.debug.then(|| toolnote::file_name(&req.output)),
            dump_callgraph: req.dump_callgraph.is_some(),
            kernels: None,
            lto_from: Vec::new(),
            suppress_stack_size_warning: req.recorded.suppress_stack_size_warning,
            tool_name: req.tool_name.clone(),
        }
    }

    /// The kernels a link keeps: `-kernels-used` when given; else the kernels named in
    /// the host-reference tables when they apply (nvlink then drops every other kernel)
    /// and speak for all the code merged (`described`: every unit but libcudadevrt's
    /// comes from a host object). A cubin, PTX or fatbin file, or libNVVM's output in a
    /// partial-LTO link, has no tables, and nvlink then keeps every kernel, in every unit.
    pub fn kernel_filter(
        &self,
        hosts: &[HostInfo],
        described: bool,
    ) -> Option<crate::input::HostRefs> {
        let req = self.req;
        if !req.kernels_used.is_empty() {
            return Some(crate::input::HostRefs::from_used(&req.kernels_used, &[]));
        }
        (described && host_tables_apply(req, hosts)).then(|| {
            crate::input::HostRefs::from_tables(
                hosts
                    .iter()
                    .filter(|h| !h.cudadevrt)
                    .flat_map(|h| h.host_refs.iter().map(|(s, e)| (*s, e.as_slice()))),
            )
        })
    }

    pub fn ptxas_options(&self, relocatable: bool) -> ptxas_driver::PtxasOptions {
        let req = self.req;
        ptxas_driver::PtxasOptions {
            target: req.target,
            relocatable,
            maxrregcount: req.maxrregcount.filter(|&n| n > 0),
            debug: req.debug,
            extra: req.xptxas.clone(),
            split_compile: req.split_compile.filter(|&n| n != 1),
            member: Vec::new(),
        }
    }

    /// A cubin the merge can take: relocatable, for the target's SM.
    pub fn check_object(&self, c: &elf::cubin::Cubin) -> Result<()> {
        let req = self.req;
        if c.e_type == 0xFF00 {
            // nvlink links it; its shared memory comes already laid out per kernel
            return Err(Error::fatal(format!(
                "'{}' holds --extensible-whole-program code (e_type 0xff00), which nvlinkrs does not link yet; refusing rather than writing another image than nvlink's",
                c.origin
            )));
        }
        if c.e_type != 1 {
            return Err(Error::fatal(format!(
                "'{}' is not a relocatable device object (e_type {}); only objects built with -rdc=true / -dc / ptxas -c can be linked",
                c.origin, c.e_type
            )));
        }
        let sm = (c.e_flags >> 8) & 0xFF;
        if !arch::sass_compatible(arch::Arch::plain(sm), req.target) {
            return Err(Error::fatal(format!(
                "Arch mismatch: '{}' is sm_{sm}, the link is for {}",
                c.origin, req.target
            )));
        }
        Ok(())
    }

    /// The assemble phase: the cubins of the merge, in input order: SASS as found, PTX
    /// through ptxas `-c` (in parallel), the LTO result first.
    pub fn objects(
        &self,
        ctx: &LinkContext,
        units: Vec<crate::gather::Unit>,
        lto_cubins: Vec<merge::Input>,
    ) -> Result<Vec<merge::Input>> {
        use crate::gather::Source;
        let jobs: Vec<ptxas_driver::Job> = units
            .iter()
            .filter_map(|u| match &u.source {
                Source::Ptx(p, member) => Some(ptxas_driver::Job {
                    name: u.origin.clone(),
                    ptx: p.to_vec(),
                    options: ptxas_driver::PtxasOptions {
                        member: member.clone(),
                        ..self.ptxas_options(true)
                    },
                }),
                Source::Cubin(_) => None,
            })
            .collect();
        let mut assembled = if jobs.is_empty() {
            Vec::new()
        } else {
            let ptxas = ptxas_driver::for_link(self.toolkit()?, ctx.cache())?;
            ptxas_driver::assemble_all(&ctx.jobs, ptxas.as_ref(), &jobs, 0)?
        }
        .into_iter();
        let mut raw: Vec<(String, bytes::Bytes, bool)> = Vec::new();
        for u in units {
            let data = match u.source {
                Source::Cubin(b) => b,
                Source::Ptx(..) => {
                    let a = assembled.next().expect("one result per job")?;
                    ctx.diag.tool_output(&a.messages);
                    bytes::Bytes::from_vec(a.cubin)
                }
            };
            raw.push((u.origin, data, u.system));
        }
        use rayon::prelude::*;
        let parsed: Vec<Result<merge::Input>> = raw
            .into_par_iter()
            .map(|(origin, data, system)| {
                let cubin = elf::cubin::Cubin::parse(data, &origin)?;
                self.check_object(&cubin)?;
                Ok(merge::Input { cubin, system })
            })
            .collect();
        let mut out = lto_cubins;
        for p in parsed {
            out.push(p?);
        }
        Ok(drop_unused_system(out))
    }
}

/// Whether the host objects' reference tables narrow the link: unless
/// `--ignore-host-info`, when a program object (not libcudadevrt) has one that is not
/// empty. libcudadevrt's own tables count only beside a program's (observed: with no
/// program table, nvlink passes no lists and every kernel stays).
pub(crate) fn host_tables_apply(req: &LinkRequest, hosts: &[HostInfo]) -> bool {
    !req.ignore_host_info
        && hosts
            .iter()
            .any(|h| !h.cudadevrt && !h.host_refs.is_empty())
}

/// libcudadevrt objects nothing refers to are left out (nvlink drops them, debug
/// frames and notes included), and so is a second copy of one already kept: a library
/// named twice (CMake's device link line has `-lcudadevrt` and nvcc adds its own) gives
/// its members once, as an archive member is only taken for a symbol still undefined.
fn drop_unused_system(inputs: Vec<merge::Input>) -> Vec<merge::Input> {
    use std::collections::HashSet;
    let global = |s: &&elf::cubin::Symbol| s.bind != elf::cubin::STB_LOCAL;
    let wanted: HashSet<&str> = inputs
        .iter()
        .filter(|i| !i.system)
        .flat_map(|i| i.cubin.symbols.iter())
        .filter(|s| !s.defined() && global(s))
        .map(|s| s.name.as_str())
        .collect();
    let mut defined: HashSet<&str> = inputs
        .iter()
        .filter(|i| !i.system)
        .flat_map(|i| i.cubin.symbols.iter())
        .filter(|s| s.defined() && global(s))
        .map(|s| s.name.as_str())
        .collect();
    let mut keep = Vec::with_capacity(inputs.len());
    for i in &inputs {
        let k = !i.system
            || i.cubin.symbols.iter().any(|s| {
                s.defined()
                    && global(&s)
                    && wanted.contains(s.name.as_str())
                    && !defined.contains(s.name.as_str())
            });
        if k && i.system {
            defined.extend(
                i.cubin
                    .symbols
                    .iter()
                    .filter(|s| s.defined() && global(s))
                    .map(|s| s.name.as_str()),
            );
        }
        keep.push(k);
    }
    inputs
        .into_iter()
        .zip(keep)
        .filter_map(|(i, k)| k.then_some(i))
        .collect()
}
