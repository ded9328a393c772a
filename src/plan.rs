//! The link's plan: what the request ([`LinkRequest`]) means for each phase, in the
//! environment the link was started in (one [`LinkEnv`] snapshot, which the cache key
//! reads too). The toolkit and the libNVVM it loads (found at most once per link, when a
//! phase first needs them), the inputs in order, the checks made before an input is read,
//! the merge's options and the kernels it keeps, and ptxas's settings.
//! (libNVVM's are made in `lto::phase`, which uses this plan: here they would make `plan`
//! and `lto` import each other.)

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::cli::LinkRequest;
use crate::diag::{Diagnostics, Error, Result};
use crate::input::HostInfo;
use crate::linkenv::LinkEnv;
use crate::toolkit::Toolkit;
use crate::{merge, ptxas_driver, toolnote};

/// The request, the environment it runs in, and what is found from them once.
pub struct Plan<'r> {
    pub req: &'r LinkRequest,
    /// The variables the link reads, taken once ([`LinkEnv`]).
    pub env: LinkEnv,
    kit: OnceLock<Result<Toolkit>>,
    /// The input list, `-l` libraries found, once: the whole-link key and the link read
    /// the same files (a library appearing in an earlier `-L` folder meanwhile was
    /// linked under the key of the one found first).
    inputs: OnceLock<Vec<PathBuf>>,
}

impl<'r> Plan<'r> {
    /// The plan of `req` in this process's environment.
    pub fn new(req: &'r LinkRequest) -> Plan<'r> {
        Plan::with_env(req, LinkEnv::current())
    }

    pub fn with_env(req: &'r LinkRequest, env: LinkEnv) -> Plan<'r> {
        Plan {
            req,
            env,
            kit: OnceLock::new(),
            inputs: OnceLock::new(),
        }
    }

    /// The CUDA toolkit (`--cuda-path`, `-nvvmpath`, the environment...), found on first
    /// use and kept for the rest of the link.
    pub fn toolkit(&self) -> Result<&Toolkit> {
        let req = self.req;
        self.kit
            .get_or_init(|| {
                Toolkit::discover_in(req.cuda_path.as_deref(), req.nvvmpath.as_deref(), &self.env)
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The libNVVM an LTO link loads: `<nvvmpath>/lib64/libnvvm.so`, as nvlink looks for
    /// it, else (without `-nvvmpath`, which nvlink requires) the toolkit's; `None` when
    /// neither names one.
    pub fn libnvvm(&self) -> Option<PathBuf> {
        match self.req.nvvmpath.as_deref() {
            Some(nvvmpath) => Some(nvvmpath.join("lib64").join("libnvvm.so")),
            None => self.toolkit().ok()?.libnvvm(None),
        }
    }

    /// The libNVVM an LTO link loads ([`Plan::libnvvm`]), or nvlink's message for a link
    /// without `-nvvmpath`, saying the toolkit has none either.
    pub fn libnvvm_to_load(&self) -> Result<PathBuf> {
        match self.libnvvm() {
            Some(path) => Ok(path),
            None => {
                self.toolkit()?;
                Err(Error::fatal("-nvvmpath should be specified with -lto")
                    .context("no libNVVM in the CUDA toolkit found either (nvvm/lib64/libnvvm.so)"))
            }
        }
    }

    /// Incremental LTO's mode (`--incremental`, `NVLINKRS_INCREMENTAL` in the link's
    /// snapshot); always off for the drop-in libnvJitLink, which links as nvJitLink does
    /// whatever the host program's environment says. A value it does not know is an error.
    pub fn incremental(&self) -> Result<crate::cli::incremental::Mode> {
        match self.req.nvjitlink {
            true => Ok(crate::cli::incremental::Mode::Off),
            false => crate::cli::incremental::choose(self.req.incremental, &self.env),
        }
    }

    /// The link's inputs in nvlink's order: the files as given, then the `-l` libraries
    /// found (looked for once).
    pub fn inputs(&self) -> Vec<PathBuf> {
        let req = self.req;
        (self.inputs.get_or_init(|| {
            crate::input::input_list(&req.inputs, &req.libraries, &req.library_paths, &self.env)
        }))
        .clone()
    }

    /// What nvlinkrs warns about, or refuses (an incremental mode it does not know),
    /// before reading an input.
    pub fn check(&self, diag: &Diagnostics) -> Result<()> {
        let req = self.req;
        self.incremental()?;
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
            // (a debug link's note, and one with -verbose-tkinfo=true, names the output)
            note_output: (req.debug || req.recorded.verbose_tkinfo)
                .then(|| toolnote::file_name(&req.output)),
            dump_callgraph: req.dump_callgraph.is_some(),
            kernels: None,
            lto_from: Vec::new(),
            suppress_stack_size_warning: req.recorded.suppress_stack_size_warning,
            tool_name: req.tool_name.clone(),
            jit_note: req.nvjitlink,
            extra_warnings: req.recorded.extra_warnings,
        }
    }

    /// The kernels a link keeps: `-kernels-used` when given; else the kernels named in
    /// the host-reference tables when they apply (nvlink then drops every other kernel)
    /// and speak for all the code merged (`described`: every unit but libcudadevrt's
    /// comes from a host object, or is libNVVM's output of a whole-program LTO that needs
    /// libcudadevrt). A cubin, PTX or fatbin file, or libNVVM's output in a partial-LTO
    /// link, has no tables, and nvlink then keeps every kernel, in every unit. The merge
    /// keeps with them the kernels device code launches (`merge::functions`).
    pub fn kernel_filter(
        &self,
        hosts: &[HostInfo],
        described: bool,
    ) -> Option<crate::input::HostRefs> {
        let req = self.req;
        if !req.kernels_used.is_empty() {
            return Some(crate::input::HostRefs::from_used(&req.kernels_used, &[]));
        }
        // (under -r they do not: every kernel stays one, where -kernels-used makes the
        // others plain functions in nvlink's creation order)
        (described && !req.relocatable && host_tables_apply(req, hosts)).then(|| {
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
            // (nvlink hands its -Ofc level on to ptxas, before the -Xptxas options)
            extra: (req.ofast_compile.iter())
                .flat_map(|l| ["-Ofc".to_string(), l.clone()])
                .chain(req.xptxas.iter().cloned())
                .collect(),
            split_compile: req.split_compile.filter(|&n| n != 1),
            member: Vec::new(),
        }
    }
}

/// Whether the host objects' reference tables narrow the link: unless
/// `--ignore-host-info`, when a program object (not libcudadevrt) has a kernel table
/// (`.nvHRKE`, `.nvHRKI`) with an entry. A host object that refers to device variables
/// only (`cudaMemcpyToSymbol`, its kernels fetched by name through the driver API) does
/// not: nvlink then keeps every kernel, and hands libNVVM no lists at all (read off
/// nvlink 13.5 with host objects of each kind and a logging libNVVM). libcudadevrt's own
/// tables count only beside a program's.
pub(crate) fn host_tables_apply(req: &LinkRequest, hosts: &[HostInfo]) -> bool {
    !req.ignore_host_info
        && hosts.iter().any(|h| {
            !h.cudadevrt
                && h.host_refs
                    .iter()
                    .any(|(s, e)| matches!(*s, ".nvHRKE" | ".nvHRKI") && !e.is_empty())
        })
}
