//! nvlink's command line. `LinkArgs` (clap) defines every nvlink 13.5 option, its short
//! names as aliases; `normalize` first rewrites nvlink's spellings (one or two dashes,
//! `-opt=value` or `-opt value`, `-L<dir>`, `-l<lib>`, `-m64`, `-optf FILE`) into clap's
//! `--long=value` form, giving nvlink's messages for unknown options. `LinkRequest` is the
//! validated result the phases read.

use std::collections::HashMap;
use std::path::PathBuf;

use clap::{ArgAction, CommandFactory, FromArgMatches, Parser, parser::ValueSource};

use crate::arch::{Arch, TargetKind};
use crate::diag::{Error, Result};
pub mod incremental;
mod observe;
mod optcheck;

pub use observe::{Observe, ObserveArgs, TRACE_VAR, TraceTo};
use optcheck::{CPU_ARCHS, check_conflicts, one_of, target};
pub use optcheck::{bool_value, int_value, number_value};

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
    /// Keep the applied relocations in the image (up to sm_90).
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
    /// -lto/-dlto as partitions: after an edit only those whose code changed are compiled
    /// again (development builds; also NVLINKRS_INCREMENTAL=1).
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

/// Options this version carries out. Any other option given is refused by name rather
/// than ignored (see `refuse_unimplemented`).
const IMPLEMENTED: &[&str] = &[
    "arch",
    "extra-warnings",
    "preserve-relocs",
    "cpu-arch",
    "machine",
    "output-file",
    "library",
    "library-path",
    "options-file",
    "link-time-opt",
    "dlto",
    "nvvmpath",
    "host-ccbin",
    "verbose",
    "disable-warnings",
    "disable-infos",
    "warning-as-error",
    "report-arch",
    "suppress-arch-warning",
    "help",
    "version",
    "cuda-path",
    "inputs",
    "Xnvvm",
    "Xptxas",
    "debug",
    "emit-ptx",
    "ignore-host-info",
    "use-host-info",
    "kernels-used",
    "variables-used",
    "maxrregcount",
    "relocatable-link",
    "dump-callgraph",
    "dump-callgraph-no-demangle",
    "disable-smem-reservation",
    "allow-undefined-globals",
    "force-partial-lto",
    "register-link-binaries",
    "time",
    "verbose2",
    "verbose-keep",
    "force-whole-lto",
    "split-compile",
    "split-compile-extended",
    "Ofast-compile",
    "keep-system-libraries",
    "cache-dir",
    "no-cache",
    "remote-cache",
    "report-json",
    // accepted with nvlink's meaning: nothing changes in the image (nvlink 13.5's output
    // is the same with and without them on the merge fixtures at sm_90 and sm_100, and
    // on an LTO link for --shared and --uumn)
    "shared",
    "uumn",
    "host-linker-options",
    "war4860824",
    "dont-reserve-null-pointer",
    "enable-extended-smem",
    "device-stack-protector-frame-size-threshold",
    "cuda-api-version",
    "verbose-tkinfo",
    // (the name messages start with and the image's note gives)
    "tool-name",
    "suppress-stack-size-warning",
    "progress",
    "daemon",
    "nvvm-latest",
    "emit-ltoir",
    "incremental",
    "time-trace",
    "time-trace-granularity",
    "explain",
];

/// nvlinkrs' own options: not nvlink's, taken with one dash or two.
const OWN: &[&str] = &[
    "cuda-path",
    "cache-dir",
    "remote-cache",
    "report-json",
    "verbose-keep",
    "progress",
    "daemon",
    "emit-ltoir",
    "incremental",
    "time-trace",
    "time-trace-granularity",
    "explain",
];

struct OptSpec {
    canonical: String,
    /// How nvlink spells it: an option with a short name (`-o`) takes it after one
    /// dash and its long name (`--output-file`) after two; one without, either.
    spelling: Spelling,
    takes_value: bool,
    /// `-ghls[=mode]`: a value only after `=`.
    optional_value: bool,
    multiple: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Spelling {
    OneDash,
    TwoDashes,
    Any,
}

fn option_table() -> HashMap<String, OptSpec> {
    let cmd = LinkArgs::command();
    let mut t = HashMap::new();
    for a in cmd.get_arguments() {
        let Some(long) = a.get_long() else { continue };
        let num = a.get_num_args();
        let takes_value = a.get_action().takes_values();
        let optional_value = num.is_some_and(|n| n.min_values() == 0) && takes_value;
        let multiple = matches!(a.get_action(), ArgAction::Append);
        let has_short = a.get_all_aliases().is_some_and(|v| !v.is_empty());
        let spec = |spelling| OptSpec {
            spelling,
            canonical: long.to_string(),
            takes_value,
            optional_value,
            multiple,
        };
        // (--register-link-binaries has a short name nvlink does not show)
        let long_spelling = if OWN.contains(&long) {
            Spelling::Any
        } else if has_short || long == "register-link-binaries" {
            Spelling::TwoDashes
        } else {
            Spelling::Any
        };
        t.insert(long.to_string(), spec(long_spelling));
        for alias in a.get_all_aliases().into_iter().flatten() {
            t.insert(alias.to_string(), spec(Spelling::OneDash));
        }
    }
    t
}

/// The options, among those `--help` shows without a short name, that nvlink takes only
/// after two dashes (`--register-link-binaries`): `--help` spells them so.
pub fn two_dashes_only() -> Vec<String> {
    let shown = |a: &clap::Arg| a.get_visible_aliases().is_none_or(|v| v.is_empty());
    let named: Vec<String> = LinkArgs::command()
        .get_arguments()
        .filter(|a| shown(a))
        .filter_map(|a| a.get_long().map(String::from))
        .collect();
    let table = option_table();
    named
        .into_iter()
        .filter(|n| {
            table
                .get(n)
                .is_some_and(|s| s.spelling == Spelling::TwoDashes)
        })
        .collect()
}

/// nvlink accepts `-L<dir>`, `-l<lib>` and `-m<bits>` with the value attached.
const ATTACHED: [(char, &str); 3] = [('L', "library-path"), ('l', "library"), ('m', "machine")];

/// Splits an options file (or a driver's `-v` trace line) the way a shell would split a
/// simple command line.
pub fn split_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut has = false;
    let mut quote: Option<char> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, '"' | '\'') => {
                quote = Some(c);
                has = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, '\\') | (Some('"'), '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                    has = true;
                }
            }
            (None, c) if c.is_whitespace() => {
                if has {
                    out.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            (_, c) => {
                cur.push(c);
                has = true;
            }
        }
    }
    if has {
        out.push(cur);
    }
    out
}

/// Rewrites nvlink-style arguments into `--canonical[=value]` words and positional inputs.
/// Returns the words and the warnings nvlink would print for them.
pub fn normalize(args: &[String]) -> Result<(Vec<String>, Vec<String>)> {
    let table = option_table();
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    let mut seen: HashMap<String, String> = HashMap::new();
    let mut queue: std::collections::VecDeque<String> = args.iter().cloned().collect();
    let mut optf_depth = 0usize;
    while let Some(a) = queue.pop_front() {
        if !a.starts_with('-') || a == "-" {
            out.push(a);
            continue;
        }
        let two = a.starts_with("--");
        let body = a.strip_prefix("--").unwrap_or(&a[1..]);
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (body, None),
        };
        let spelled = |spec: &&OptSpec| match spec.spelling {
            Spelling::Any => true,
            Spelling::OneDash => !two,
            Spelling::TwoDashes => two,
        };
        let (spec, value) = if let Some(spec) = table.get(name).filter(spelled) {
            let value = if !spec.takes_value {
                None
            } else if inline.is_some() || spec.optional_value {
                inline
            } else if spec.canonical == "Ofast-compile" {
                // its level may be left out (then the next word, an option, is not taken)
                match queue.front() {
                    Some(next) if !next.starts_with('-') => queue.pop_front(),
                    _ => Some(String::new()),
                }
            } else {
                let flag = a.split_once('=').map_or(a.as_str(), |(f, _)| f);
                Some(
                    queue
                        .pop_front()
                        .ok_or_else(|| Error::fatal(format!("argument expected after '{flag}'")))?,
                )
            };
            (spec, value)
        } else if let Some((_, long)) = ATTACHED
            .iter()
            .find(|(c, _)| !two && body.starts_with(*c) && body.len() > 1)
        {
            (&table[*long], Some(body[1..].to_string()))
        } else {
            // nvlink drops the first dash when it names the option, and any `=value`
            let flag = a.split_once('=').map_or(a.as_str(), |(f, _)| f);
            return Err(Error::fatal(format!("Unknown option '{}'", &flag[1..])));
        };
        if spec.canonical == "options-file" {
            let path = value.unwrap_or_default();
            let text = std::fs::read_to_string(&path)
                .map_err(|_| Error::fatal(format!("Could not open options file '{path}'")))?;
            optf_depth += 1;
            if optf_depth > 64 {
                return Err(Error::fatal(format!(
                    "options file '{path}' includes options files more than 64 deep"
                )));
            }
            for w in split_words(&text).into_iter().rev() {
                queue.push_front(w);
            }
            continue;
        }
        if !spec.multiple {
            let v = value.clone().unwrap_or_default();
            if let Some(prev) = seen.insert(spec.canonical.clone(), v.clone())
                && prev != v
            {
                warnings.push(format!(
                        "incompatible redefinition for option '{}', the last value of this option was used",
                        spec.canonical
                    ));
            }
        }
        match value {
            Some(v) => out.push(format!("--{}={v}", spec.canonical)),
            None => out.push(format!("--{}", spec.canonical)),
        }
    }
    Ok((out, warnings))
}

/// Parses nvlink's arguments (without the program name).
pub fn parse(args: &[String]) -> Result<(LinkArgs, Vec<String>, Vec<String>)> {
    let (words, warnings) = normalize(args)?;
    let cmd = LinkArgs::command().args_override_self(true);
    let matches = cmd
        .try_get_matches_from(std::iter::once("nvlinkrs".to_string()).chain(words))
        .map_err(|e| {
            Error::fatal(
                e.render()
                    .to_string()
                    .lines()
                    .next()
                    .unwrap_or("bad command line")
                    .trim_start_matches("error: ")
                    .to_string(),
            )
        })?;
    let parsed = LinkArgs::from_arg_matches(&matches).map_err(|e| Error::fatal(e.to_string()))?;
    // nvlink checks typed values while it reads the command line, before anything else.
    if let Some(m) = &parsed.machine {
        int_value(m)?;
    }
    if let Some(a) = &parsed.arch {
        target(a)?;
    }
    one_of("cpu-arch", parsed.cpu_arch.as_deref(), CPU_ARCHS)?;
    one_of(
        "gen-host-linker-script",
        parsed.gen_host_linker_script.as_deref(),
        &["lcs-aug", "lcs-abs"],
    )?;
    for v in [
        &parsed.disable_smem_reservation,
        &parsed.device_stack_protector,
        &parsed.enable_extended_smem,
        &parsed.verbose_tkinfo,
    ]
    .into_iter()
    .flatten()
    {
        bool_value(v)?;
    }
    for v in [
        &parsed.maxrregcount,
        &parsed.split_compile,
        &parsed.split_compile_extended,
        &parsed.syscall_const_offset,
        &parsed.device_stack_protector_frame_size_threshold,
    ]
    .into_iter()
    .flatten()
    {
        int_value(v)?;
    }
    let given: Vec<String> = LinkArgs::command()
        .get_arguments()
        .filter(|a| matches.value_source(a.get_id().as_str()) == Some(ValueSource::CommandLine))
        .filter_map(|a| a.get_long().map(str::to_string))
        .collect();
    Ok((parsed, warnings, given))
}

/// Refuses, by name, every given option this version does not carry out.
pub fn refuse_unimplemented(given: &[String]) -> Result<()> {
    if let Some(o) = given.iter().find(|o| !IMPLEMENTED.contains(&o.as_str())) {
        return Err(Error::fatal(format!(
            "option '-{o}' is recognised but not implemented yet by nvlinkrs {}; refusing rather than ignoring it",
            env!("CARGO_PKG_VERSION")
        )));
    }
    Ok(())
}

/// What the link phases read: validated, with nvlink's messages for bad values.
#[derive(Debug, Clone)]
pub struct LinkRequest {
    /// `-m64` as given (recorded in the output's tool note).
    pub machine: Option<String>,
    /// `-cpu-arch` as given (recorded in the output's tool note).
    pub cpu_arch: Option<String>,
    pub target: Arch,
    pub target_kind: TargetKind,
    pub output: PathBuf,
    pub inputs: Vec<PathBuf>,
    pub libraries: Vec<String>,
    pub library_paths: Vec<PathBuf>,
    pub lto: bool,
    pub nvvmpath: Option<PathBuf>,
    pub cuda_path: Option<PathBuf>,
    pub verbose: bool,
    pub verbose2: bool,
    pub verbose_keep: bool,
    pub debug: bool,
    /// `--preserve-relocs`: the relocations applied kept too, in `.nv.resolvedrela.*`
    /// sections (and, as nvlink does, everything kept as in a debug link).
    pub preserve_relocs: bool,
    pub emit_ptx: bool,
    pub ignore_host_info: bool,
    /// `-kernels-used`, `-variables-used`, `-Xnvvm`, `-Xptxas`: one element per value,
    /// comma lists already split.
    pub kernels_used: Vec<String>,
    pub variables_used: Vec<String>,
    pub maxrregcount: Option<u32>,
    pub split_compile: Option<u32>,
    /// `-split-compile-extended=N`: libNVVM cuts the program into pieces, ptxas assembles
    /// them on N threads (0: one per core).
    pub split_compile_extended: Option<u32>,
    /// `-dlto` rather than `-lto` / `--link-time-opt` (the tool note records the spelling).
    pub lto_spelled_dlto: bool,
    /// The cache: on by default, see [`crate::cache::place`].
    pub cache: crate::cache::place::Place,
    /// `--report-json FILE`
    pub report_json: Option<PathBuf>,
    /// `--time-trace`, `--explain`: what the link shows of itself.
    pub observe: Observe,
    pub ofast_compile: Option<String>,
    pub xnvvm: Vec<String>,
    pub xptxas: Vec<String>,
    pub register_link_binaries: Option<PathBuf>,
    pub time: Option<PathBuf>,
    /// `-r`
    pub relocatable: bool,
    /// `--emit-ltoir` (with `-lto -r`): the linked IR as one `.ltoir`, not an image.
    pub emit_ltoir: bool,
    /// `-nvvm-latest`: libNVVM's newer NVVM for every target (`-nvvm-version=nvvm-latest`).
    pub nvvm_latest: bool,
    /// `-dump-callgraph` (true) / `-dump-callgraph-no-demangle` (false)
    pub dump_callgraph: Option<bool>,
    pub disable_smem_reservation: bool,
    pub allow_undefined_globals: bool,
    /// `-force-partial-lto`, or `-r` (which nvlink treats as it): relocatable LTO output.
    pub force_partial_lto: bool,
    /// `-force-whole-lto`: nvlink 13.5's default made explicit (a whole program unless an
    /// input lacks IR, libcudadevrt aside, which still makes the link partial). Only
    /// `optcheck`'s conflicts read it; nothing else does, as in nvlink.
    pub force_whole_lto: bool,
    /// Options that change only messages, which the tool note records.
    pub recorded: Recorded,
    /// `-tool-name NAME`: what messages and the image's note call the linker.
    pub tool_name: Option<String>,
    /// `--incremental`: incremental LTO (with `NVLINKRS_INCREMENTAL`, read from the link's
    /// environment snapshot: `Plan::incremental`).
    pub incremental: bool,
    /// A link for the drop-in libnvJitLink (`nvjitlink/`): the inputs are private copies
    /// of what its caller handed over in memory, in a folder of their own (the cache keys
    /// them by file name and content, not by the folder, so that the same link is found
    /// again), and the image's own note is nvJitLink's.
    pub nvjitlink: bool,
    /// The drop-in's caller gave libcudadevrt itself (not the `-lcudadevrt` the drop-in
    /// adds to an LTO link of host objects): nvJitLink takes every member of it.
    pub nvjitlink_cudadevrt: bool,
}

/// Options that change messages, not the image; nvlink records them in its tool note.
#[derive(Debug, Clone, Default)]
pub struct Recorded {
    pub suppress_stack_size_warning: bool,
    pub suppress_arch_warning: bool,
    pub disable_warnings: bool,
    pub warning_as_error: bool,
    pub disable_infos: bool,
    pub keep_system_libraries: bool,
    pub report_arch: bool,
    pub extra_warnings: bool,
    pub use_host_info: bool,
    /// `-verbose-tkinfo=true`: the note records the files as a debug link's does.
    pub verbose_tkinfo: bool,
}

/// The values of a repeatable option whose values are also comma lists
/// (`-Xnvvm a,b -Xnvvm c`, `-kernels-used=k1,k2`), one element each, in order.
pub fn comma_list(values: &[String]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| v.split(','))
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .collect()
}

/// `-Xnvvm` values: comma lists whose elements nvlink also splits at spaces
/// (`-Xnvvm "-ftz=1 -prec-div=0"` is two options; a tab is not a separator).
pub fn nvvm_list(values: &[String]) -> Vec<String> {
    comma_list(values)
        .iter()
        .flat_map(|v| v.split(' '))
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .collect()
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
        })
    }
}

#[cfg(test)]
mod tests;
