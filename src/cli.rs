//! nvlink's command line. `LinkArgs` (clap) defines every nvlink 13.5 option, its short
//! names as aliases; `normalize` first rewrites nvlink's spellings (one or two dashes,
//! `-opt=value` or `-opt value`, `-L<dir>`, `-l<lib>`, `-m64`, `-optf FILE`) into clap's
//! `--long=value` form, giving nvlink's messages for unknown options. `LinkRequest` is the
//! validated result the phases read.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use clap::{ArgAction, CommandFactory, FromArgMatches, Parser, parser::ValueSource};

use crate::arch::{Arch, TargetKind};
use crate::diag::{Error, Result};
pub mod incremental;
mod observe;
mod optcheck;

mod args;

pub use args::LinkArgs;
pub use observe::{Observe, ObserveArgs, TRACE_VAR, TraceTo};
use optcheck::{CPU_ARCHS, check_conflicts, one_of, target};
pub use optcheck::{bool_value, int_value, number_value};

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
/// Returns the words, the warnings nvlink would print for them and the options files
/// read (`-optf`, whose words are in the list in their place).
pub fn normalize(args: &[String]) -> Result<(Vec<String>, Vec<String>, Vec<PathBuf>)> {
    let table = option_table();
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    let mut seen: HashMap<String, String> = HashMap::new();
    let mut queue: std::collections::VecDeque<String> = args.iter().cloned().collect();
    let mut optf_depth = 0usize;
    let mut read = Vec::new();
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
            let text = read_options_file(&path)?;
            read.push(PathBuf::from(&path));
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
        // (an empty output name is a file nvlink cannot open; clap's words were its own)
        if spec.canonical == "output-file" && value.as_deref() == Some("") {
            return Err(Error::fatal("Could not open output file ''"));
        }
        match value {
            Some(v) => out.push(format!("--{}={v}", spec.canonical)),
            None => out.push(format!("--{}", spec.canonical)),
        }
    }
    Ok((out, warnings, read))
}

/// The most an options file holds: an endless one (`-optf /dev/zero`, which nvlink reads
/// for ever) is refused, not read to the end of memory.
const MAX_OPTIONS_FILE: u64 = 64 << 20;

/// The text of the options file `path` (`-optf`), at most [`MAX_OPTIONS_FILE`] bytes.
fn read_options_file(path: &str) -> Result<String> {
    use std::io::Read;
    let could_not = || Error::fatal(format!("Could not open options file '{path}'"));
    let f = crate::input::open_to_read(Path::new(path)).map_err(|_| could_not())?;
    let mut text = String::new();
    f.take(MAX_OPTIONS_FILE + 1)
        .read_to_string(&mut text)
        .map_err(|_| could_not())?;
    if text.len() as u64 > MAX_OPTIONS_FILE {
        return Err(could_not().context(format!("it holds more than {MAX_OPTIONS_FILE} bytes")));
    }
    Ok(text)
}

/// Parses nvlink's arguments (without the program name).
pub fn parse(args: &[String]) -> Result<(LinkArgs, Vec<String>, Vec<String>)> {
    let (words, warnings, options_files) = normalize(args)?;
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
    let mut parsed =
        LinkArgs::from_arg_matches(&matches).map_err(|e| Error::fatal(e.to_string()))?;
    parsed.options_file = options_files;
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
    /// The options files read (`-optf`): files beside the output never go over them.
    pub options_files: Vec<PathBuf>,
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
    /// The drop-in's links: the image's bytes are kept in the link's record
    /// ([`Timings::take_image`]) for the caller, and a whole-link cache hit writes no
    /// output file (the caller reads none).
    pub image_in_memory: bool,
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

#[cfg(test)]
mod tests;
