//! `LinkArgs`: every nvlink 13.5 option as clap defines it (nvlink's short names as
//! aliases), and `request`, which checks the values in nvlink's order and builds the
//! `LinkRequest` the phases read.

use super::*;

#[derive(Parser, Debug, Default, Clone)]
#[command(
    name = "nvlinkrs",
    disable_help_flag = true,
    disable_version_flag = true,
    about = "An open device linker for CUDA: a drop-in for nvlink.",
    after_help = "Options take one or two dashes and `=value` or a separate value, as nvlink's do.\n\
                  Other commands: `nvlinkrs inspect [--json] FILE...`."
)]
pub struct LinkArgs {
    /// With LTO: trade run-time speed for compile speed (0, min, mid, max).
    #[arg(
        long = "Ofast-compile",
        visible_alias = "Ofc",
        value_name = "0|min|mid|max"
    )]
    pub ofast_compile: Option<String>,
    /// With LTO: pass these options on to libNVVM (comma-separated).
    #[arg(long = "Xnvvm", action = ArgAction::Append, value_name = "OPTIONS")]
    pub xnvvm: Vec<String>,
    /// With LTO: pass these options on to ptxas (comma-separated).
    #[arg(long = "Xptxas", action = ArgAction::Append, value_name = "OPTIONS")]
    pub xptxas: Vec<String>,
    /// Target architecture: sm_NN[a|f] (or compute_NN to JIT).
    #[arg(long = "arch", value_name = "ARCH")]
    pub arch: Option<String>,
    /// The host CPU: X86, X86_64, ARMv7, AARCH64, PPC64LE, RISCV64, unknown (noted in the image).
    #[arg(long = "cpu-arch", value_name = "CPU")]
    pub cpu_arch: Option<String>,
    /// The host link is a shared library (nvcc -shared); the device image is the same.
    #[arg(long = "shared", hide = true)]
    pub shared: bool,
    /// Options for the host linker (used only to generate a host linker script).
    #[arg(long = "host-linker-options", visible_alias = "Xlinker", action = ArgAction::Append, hide = true)]
    pub host_linker_options: Vec<String>,
    /// Accepted as nvlink does; it changes nothing in the image.
    #[arg(long = "uumn", hide = true)]
    pub uumn: bool,
    /// Link for debugging: keep every function and the debug information.
    #[arg(long = "debug", visible_alias = "g")]
    pub debug: bool,
    /// Guard device stacks against overflow (not done yet: refused).
    #[arg(long = "device-stack-protector", value_name = "true|false")]
    pub device_stack_protector: Option<String>,
    #[arg(long = "device-stack-protector-frame-size-threshold", hide = true)]
    pub device_stack_protector_frame_size_threshold: Option<String>,
    /// Print no info messages.
    #[arg(long = "disable-infos")]
    pub disable_infos: bool,
    /// Print no warnings.
    #[arg(long = "disable-warnings", visible_alias = "w")]
    pub disable_warnings: bool,
    /// Link-time optimization of the device IR in the inputs (as -lto).
    #[arg(long = "dlto")]
    pub dlto: bool,
    /// Print the call graph of the linked code, names demangled.
    #[arg(long = "dump-callgraph")]
    pub dump_callgraph: bool,
    /// Print the call graph of the linked code, names as linked.
    #[arg(long = "dump-callgraph-no-demangle")]
    pub dump_callgraph_no_demangle: bool,
    /// With LTO: write the optimized PTX instead of an image.
    #[arg(long = "emit-ptx")]
    pub emit_ptx: bool,
    /// Warn about more possible problems (not done yet: refused).
    #[arg(long = "extra-warnings", visible_alias = "extrawarn")]
    pub extra_warnings: bool,
    /// Write a host linker script instead of linking (not done yet: refused).
    #[arg(long = "gen-host-linker-script", visible_alias = "ghls", num_args = 0..=1, require_equals = true, default_missing_value = "lcs-aug")]
    pub gen_host_linker_script: Option<String>,
    /// Print this help.
    #[arg(long = "help", visible_alias = "h")]
    pub help: bool,
    /// Keep device code the host objects do not refer to.
    #[arg(long = "ignore-host-info")]
    pub ignore_host_info: bool,
    /// Keep unused libcudadevrt code (not done yet: refused).
    #[arg(long = "keep-system-libraries")]
    pub keep_system_libraries: bool,
    /// Keep only the kernels whose names contain one of these.
    #[arg(long = "kernels-used", action = ArgAction::Append)]
    pub kernels_used: Vec<String>,
    /// Link lib<name>.a, searched in the -L folders.
    #[arg(long = "library", visible_alias = "l", action = ArgAction::Append)]
    pub library: Vec<String>,
    /// Search this folder for -l libraries.
    #[arg(long = "library-path", visible_alias = "L", action = ArgAction::Append)]
    pub library_path: Vec<PathBuf>,
    /// Link code built for tools patching (not done yet: refused).
    #[arg(long = "link-as-tools-patch", visible_alias = "astoolspatch")]
    pub link_as_tools_patch: bool,
    /// Link-time optimization of the device IR in the inputs.
    #[arg(long = "link-time-opt", visible_alias = "lto")]
    pub link_time_opt: bool,
    /// Pointer size of the host (only 64).
    #[arg(long = "machine", visible_alias = "m", value_name = "64")]
    pub machine: Option<String>,
    /// With LTO: at most this many registers per function.
    #[arg(long = "maxrregcount", value_name = "N")]
    pub maxrregcount: Option<String>,
    /// With LTO: libNVVM's newer NVVM for every target (added for IR nvlinkrs wrote).
    #[arg(long = "nvvm-latest")]
    pub nvvm_latest: bool,
    /// With LTO: the libNVVM folder (default: the toolkit's nvvm/).
    #[arg(long = "nvvmpath", value_name = "DIR")]
    pub nvvmpath: Option<PathBuf>,
    /// Read more options from this file.
    #[arg(long = "options-file", visible_alias = "optf", action = ArgAction::Append)]
    pub options_file: Vec<PathBuf>,
    /// Write the linked image to this file.
    #[arg(long = "output-file", visible_alias = "o", value_name = "FILE")]
    pub output_file: Option<PathBuf>,
    /// Keep the applied relocations in the image.
    #[arg(long = "preserve-relocs")]
    pub preserve_relocs: bool,
    /// Write the registration list nvcc's host link needs to this file.
    #[arg(long = "register-link-binaries", value_name = "FILE")]
    pub register_link_binaries: Option<PathBuf>,
    /// Link into a relocatable object that can be linked again.
    #[arg(long = "relocatable-link", visible_alias = "r")]
    pub relocatable_link: bool,
    /// Add the target architecture to every message.
    #[arg(long = "report-arch")]
    pub report_arch: bool,
    /// With LTO: let libNVVM use this many threads.
    #[arg(long = "split-compile", value_name = "N")]
    pub split_compile: Option<String>,
    /// With LTO: compile the program in this many pieces at once.
    #[arg(long = "split-compile-extended", value_name = "N")]
    pub split_compile_extended: Option<String>,
    /// Do not warn about inputs without code for the target.
    #[arg(long = "suppress-arch-warning")]
    pub suppress_arch_warning: bool,
    /// With -g: leave the debug information out.
    #[arg(long = "suppress-debug-info")]
    pub suppress_debug_info: bool,
    /// Do not warn when a kernel's stack size cannot be determined (its calls recurse).
    #[arg(long = "suppress-stack-size-warning")]
    pub suppress_stack_size_warning: bool,
    /// Append how long each step took to this CSV file.
    #[arg(long = "time", value_name = "FILE")]
    pub time: Option<PathBuf>,
    /// Read the unified-index file (not done yet: refused).
    #[arg(long = "uidx-file", visible_alias = "uidx")]
    pub uidx_file: Option<PathBuf>,
    /// Drop device code the host objects do not refer to (the default).
    #[arg(long = "use-host-info")]
    pub use_host_info: bool,
    /// Keep only the device variables whose names contain one of these.
    #[arg(long = "variables-used", action = ArgAction::Append)]
    pub variables_used: Vec<String>,
    /// Print what the link did: resources of each kernel, LTO options.
    #[arg(long = "verbose", visible_alias = "v")]
    pub verbose: bool,
    /// Print the link's steps as they run.
    #[arg(long = "verbose2", visible_alias = "v2")]
    pub verbose2: bool,
    /// Print the version and the toolkit, ptxas and libNVVM found.
    #[arg(long = "version", visible_alias = "V")]
    pub version: bool,
    /// Treat every warning as an error.
    #[arg(long = "warning-as-error", visible_alias = "Werror")]
    pub warning_as_error: bool,
    // Options nvlink accepts without listing them in --help.
    #[arg(long = "disable-smem-reservation", hide = true)]
    pub disable_smem_reservation: Option<String>,
    #[arg(long = "dont-reserve-null-pointer", hide = true)]
    pub dont_reserve_null_pointer: bool,
    #[arg(long = "allow-undefined-globals", hide = true)]
    pub allow_undefined_globals: bool,
    #[arg(long = "syscall-const-offset", hide = true)]
    pub syscall_const_offset: Option<String>,
    #[arg(long = "force-rela", hide = true)]
    pub force_rela: bool,
    #[arg(long = "verbose-keep", hide = true)]
    pub verbose_keep: bool,
    #[arg(long = "verbose-tkinfo", hide = true, value_name = "true|false")]
    pub verbose_tkinfo: Option<String>,
    /// The host compiler nvcc uses; it does not affect the device link.
    #[arg(long = "host-ccbin", hide = true)]
    pub host_ccbin: Option<String>,
    #[arg(long = "nv-host", hide = true)]
    pub nv_host: Option<String>,
    #[arg(long = "enable-extended-smem", hide = true, value_name = "true|false")]
    pub enable_extended_smem: Option<String>,
    /// Link without the cache (also NVLINKRS_CACHE=0); it is on by default.
    #[arg(long = "no-cache")]
    pub no_cache: bool,
    #[arg(long = "tool-name", hide = true)]
    pub tool_name: Option<String>,
    #[arg(long = "cuda-api-version", hide = true)]
    pub cuda_api_version: Option<String>,
    #[arg(long = "force-whole-lto", hide = true)]
    pub force_whole_lto: bool,
    #[arg(long = "force-partial-lto", hide = true)]
    pub force_partial_lto: bool,
    #[arg(long = "dot-file", visible_alias = "dot", hide = true)]
    pub dot_file: Option<PathBuf>,
    #[arg(long = "war4860824", hide = true)]
    pub war4860824: bool,
    // nvlinkrs's own options.
    /// Root of the CUDA toolkit to use (ptxas, libNVVM, libdevice).
    #[arg(long = "cuda-path", value_name = "DIR")]
    pub cuda_path: Option<PathBuf>,
    /// Keep and reuse stage results in DIR (also NVLINKRS_CACHE_DIR; default ~/.cache/nvlinkrs/links).
    #[arg(long = "cache-dir", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// A shared cache tier behind the local one: redis://, s3://, webdav+http://,
    /// memcached://, file:// (also NVLINKRS_REMOTE_CACHE; NVLINKRS_REMOTE_CACHE_MODE=read-only).
    #[arg(long = "remote-cache", value_name = "URL")]
    pub remote_cache: Option<String>,
    /// Write a JSON report of the link to FILE: stage times, cache hits and misses.
    #[arg(long = "report-json", value_name = "FILE")]
    pub report_json: Option<PathBuf>,
    /// Print progress as plain lines with the elapsed time (also NVLINKRS_PROGRESS=1).
    #[arg(long = "progress")]
    pub progress: bool,
    /// Link through the per-user daemon (also NVLINKRS_DAEMON=1).
    #[arg(long = "daemon")]
    pub daemon: bool,
    /// For the edit-relink loop (development builds; also NVLINKRS_INCREMENTAL=1): -lto/-dlto
    /// as partitions, after an edit only those whose code changed are compiled again; at
    /// sm_100+ the finalizer's per-unit jobs built by the daemon, whose worker is taken.
    #[arg(long = "incremental")]
    pub incremental: bool,
    /// With -lto -r: link the inputs' IR into one LTO IR module (LLVM) and write it as a
    /// .ltoir (as a host object holding it when the output is named *.o) that a later -lto
    /// link takes with -nvvm-latest up to sm_90 (nvlinkrs adds it;
    /// nvlink needs it given).
    #[arg(long = "emit-ltoir")]
    pub emit_ltoir: bool,
    #[command(flatten)]
    pub observe: ObserveArgs,
    #[arg(value_name = "FILE")]
    pub inputs: Vec<PathBuf>,
}

impl LinkArgs {
    /// Checks values the way nvlink does, in nvlink's order, and builds the request.
    pub fn request(&self) -> Result<LinkRequest> {
        if let Some(m) = &self.machine
            && m != "64"
        {
            return Err(Error::fatal(format!(
                "Value '{m}' is not defined for option 'machine'"
            )));
        }
        let arch_s = self
            .arch
            .as_deref()
            .ok_or_else(|| Error::fatal("Unknown arch name '(null)'"))?;
        let (target_kind, target) = target(arch_s)?;
        if target_kind == TargetKind::Lto {
            return Err(Error::fatal(format!(
                "Link target of '{arch_s}' is virtual target that is not JIT-able; use 'sm_' target instead"
            )));
        }
        // (a compute_XX target writes no image, and needs no -o)
        let output = match (&self.output_file, target_kind) {
            (Some(o), _) => o.clone(),
            (None, TargetKind::Virtual) => PathBuf::new(),
            (None, _) => return Err(Error::fatal("Must specify output file with -o option")),
        };
        // (libraries alone are no input to nvlink)
        if self.inputs.is_empty() {
            return Err(Error::fatal(
                "No input files specified; use option --help for more information",
            ));
        }
        check_conflicts(self)?;
        // without -nvvmpath (nvlink requires one), libNVVM comes from the toolkit found
        let lto = self.link_time_opt || self.dlto;
        Ok(LinkRequest {
            machine: self.machine.clone(),
            cpu_arch: self.cpu_arch.clone(),
            target,
            target_kind,
            output,
            inputs: self.inputs.clone(),
            libraries: self.library.clone(),
            library_paths: self.library_path.clone(),
            lto,
            nvvmpath: self.nvvmpath.clone(),
            cuda_path: self.cuda_path.clone(),
            verbose: self.verbose,
            verbose2: self.verbose2,
            verbose_keep: self.verbose_keep,
            debug: self.debug,
            preserve_relocs: self.preserve_relocs,
            emit_ptx: self.emit_ptx,
            ignore_host_info: self.ignore_host_info,
            kernels_used: comma_list(&self.kernels_used),
            variables_used: comma_list(&self.variables_used),
            maxrregcount: self
                .maxrregcount
                .as_deref()
                .map(number_value)
                .transpose()?
                .flatten(),
            split_compile: self
                .split_compile
                .as_deref()
                .map(number_value)
                .transpose()?
                .flatten(),
            lto_spelled_dlto: self.dlto && !self.link_time_opt,
            report_json: self.report_json.clone(),
            options_files: self.options_file.clone(),
            observe: self
                .observe
                .observe(std::env::var(TRACE_VAR).ok().as_deref())?,
            cache: crate::cache::place::choose(
                self.no_cache,
                self.cache_dir.clone(),
                self.remote_cache.as_deref(),
            ),
            split_compile_extended: self
                .split_compile_extended
                .as_deref()
                .map(number_value)
                .transpose()?
                .flatten(),
            ofast_compile: self
                .ofast_compile
                .clone()
                .filter(|l| l != "0" && !l.is_empty()),
            xnvvm: nvvm_list(&self.xnvvm),
            xptxas: comma_list(&self.xptxas),
            register_link_binaries: self.register_link_binaries.clone(),
            time: self.time.clone(),
            relocatable: self.relocatable_link,
            emit_ltoir: self.emit_ltoir,
            incremental: self.incremental,
            nvvm_latest: self.nvvm_latest,
            dump_callgraph: if self.dump_callgraph {
                Some(true)
            } else if self.dump_callgraph_no_demangle {
                Some(false)
            } else {
                None
            },
            disable_smem_reservation: self
                .disable_smem_reservation
                .as_deref()
                .map(bool_value)
                .transpose()?
                .unwrap_or(false),
            allow_undefined_globals: self.allow_undefined_globals,
            // nvlink's -r is a partial LTO link (relocatable-compile options to libNVVM)
            force_partial_lto: self.force_partial_lto || self.relocatable_link,
            force_whole_lto: self.force_whole_lto,
            recorded: Recorded {
                suppress_stack_size_warning: self.suppress_stack_size_warning,
                suppress_arch_warning: self.suppress_arch_warning,
                disable_warnings: self.disable_warnings,
                warning_as_error: self.warning_as_error,
                disable_infos: self.disable_infos,
                keep_system_libraries: self.keep_system_libraries,
                report_arch: self.report_arch,
                extra_warnings: self.extra_warnings,
                use_host_info: self.use_host_info,
                verbose_tkinfo: self.verbose_tkinfo.as_deref() == Some("true"),
            },
            tool_name: self.tool_name.clone(),
            nvjitlink: false,
            nvjitlink_cudadevrt: false,
            image_in_memory: false,
        })
    }
}
