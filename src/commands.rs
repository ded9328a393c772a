//! The command line above the link: nvlinkrs' own subcommands (`inspect`, `compare`,
//! `cache`, `stats`, `daemon`, `shim`, parsed with clap; what each does in `commands/run.rs`) and
//! the `--help` text, one line per nvlink option in our words and then the subcommands.
//! Anything else is a link.

use std::path::{Path, PathBuf};

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

use crate::cli::LinkArgs;

mod run;
mod stats;
pub use run::run;

#[derive(Parser, Debug)]
#[command(name = "nvlinkrs", disable_help_subcommand = true)]
struct Commands {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Print every input opened, down to its device code (--json: as JSON).
    Inspect {
        #[arg(long)]
        json: bool,
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// Judge two linked cubins: byte-identical, equivalent, or their differences (exit 2).
    Compare {
        expected: PathBuf,
        actual: PathBuf,
        /// How many differences to list before counting the rest by kind.
        #[arg(long, value_name = "N", default_value_t = 20)]
        limit: usize,
        /// Compare everything but the code: kernels, their parameters and launch bounds,
        /// variables and their initial bytes (an incremental link against whole-program).
        #[arg(long = "except-code", conflicts_with = "code")]
        except_code: bool,
        /// List each kernel's registers, instructions, stack and calls in both images (its
        /// code with the functions it reaches through relocations), and their code sizes.
        #[arg(long)]
        code: bool,
    },
    /// The cache of link results: its size, emptying it, checking every entry.
    Cache {
        action: CacheAction,
        /// The cache folder (else NVLINKRS_CACHE_DIR).
        #[arg(long, value_name = "DIR")]
        cache_dir: Option<PathBuf>,
    },
    /// The cache's counters across links: hits, misses, bytes, time spent and saved.
    Stats {
        /// As JSON.
        #[arg(long)]
        json: bool,
        /// Start the counters again from zero (after printing them).
        #[arg(long)]
        zero: bool,
        /// The cache folder (else NVLINKRS_CACHE_DIR, else the default one).
        #[arg(long, value_name = "DIR")]
        cache_dir: Option<PathBuf>,
    },
    /// The per-user link daemon: start it, stop it, or say whether it runs.
    Daemon { action: DaemonAction },
    /// Make a toolkit whose nvcc runs nvlinkrs as its nvlink (links to the original).
    Shim {
        /// The toolkit to overlay (else the one nvlinkrs finds).
        #[arg(long, value_name = "DIR")]
        cuda_path: Option<PathBuf>,
        /// Remove the overlay: only what `shim` made.
        #[arg(long)]
        remove: bool,
        /// The overlay's folder (made, or made again to update it).
        overlay: PathBuf,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheAction {
    Stats,
    Clear,
    Verify,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DaemonAction {
    Start,
    Stop,
    Status,
    /// (what `start` runs in the background)
    #[value(hide = true)]
    Serve,
}

/// Whether a first argument names a subcommand (else the arguments are a link's).
pub fn is_subcommand(first: &str) -> bool {
    Commands::command()
        .get_subcommands()
        .any(|c| c.get_name() == first)
}

/// A subcommand's command line (its name first).
pub fn parse(args: &[String]) -> Result<Command, clap::Error> {
    Commands::try_parse_from(std::iter::once("nvlinkrs".to_string()).chain(args.iter().cloned()))
        .map(|c| c.command)
}

/// `nvlinkrs --help`: how to call it, one line per option (as nvlink spells it), the
/// subcommands.
pub fn help_text() -> String {
    let link = LinkArgs::command();
    let two_dashes = crate::cli::two_dashes_only();
    let mut rows: Vec<(String, String)> = Vec::new();
    for a in link.get_arguments() {
        let Some(long) = a.get_long() else { continue };
        if a.is_hide_set() {
            continue;
        }
        let value = match a.get_action().takes_values() {
            true => {
                let name = a
                    .get_value_names()
                    .and_then(|v| v.first().map(|n| n.to_string()))
                    .unwrap_or_else(|| "VALUE".into());
                format!(" <{name}>")
            }
            false => String::new(),
        };
        let spelling = match a.get_visible_aliases().and_then(|v| v.first().copied()) {
            Some(short) => format!("-{short}, --{long}{value}"),
            None if two_dashes.iter().any(|t| t == long) => format!("--{long}{value}"),
            None => format!("-{long}{value}"),
        };
        let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
        rows.push((spelling, help));
    }
    let width = rows
        .iter()
        .map(|(s, _)| s.len())
        .filter(|&n| n <= 36)
        .max()
        .unwrap_or(0);
    let mut out = String::from(
        "An open device linker for CUDA: a drop-in for nvlink.\n\n\
         Usage: nvlinkrs [OPTIONS] FILE...      link device code (nvlink's command line)\n       \
         nvlinkrs COMMAND [ARGS]...        one of the commands below\n\n\
         Options (as nvlink spells them: a short name after one dash, a long one after two;\n\
         a value after `=` or as the next word):\n",
    );
    for (spelling, help) in rows {
        out += &format!("  {spelling:<width$}  {help}\n");
    }
    out += "\nCommands (`nvlinkrs COMMAND --help` for each):\n";
    let commands = Commands::command();
    for c in commands.get_subcommands() {
        let about = c.get_about().map(|a| a.to_string()).unwrap_or_default();
        out += &format!("  {:<8}  {about}\n", c.get_name());
    }
    out += "\nEnvironment: NVLINKRS_CACHE_DIR (cache folder), NVLINKRS_DAEMON=1 (link through the\n\
            daemon), NVLINKRS_PROGRESS=1 (progress lines), NVLINKRS_JOBS=K (threads),\n\
            NVLINKRS_FINALIZER=nvjitlink (sm_100+ control bits from libnvJitLink),\n\
            NVLINKRS_REMOTE_CACHE=URL and NVLINKRS_REMOTE_CACHE_MODE=read-only|read-write (a\n\
            shared cache tier), NVLINKRS_PTXAS_LAUNCHER=CMD (runs each ptxas job), CUDA_HOME.\n";
    out
}

/// `nvlinkrs --version`: which nvlinkrs, and which ptxas and libNVVM it found, and where.
pub fn version_report(cuda_path: Option<&Path>, nvvmpath: Option<&Path>) -> String {
    let mut s = format!(
        "nvlinkrs {} (an open device linker for CUDA; drop-in for nvlink 13.5)\n",
        env!("CARGO_PKG_VERSION")
    );
    match crate::toolkit::Toolkit::discover(cuda_path, nvvmpath) {
        Ok(tk) => {
            s += &format!(
                "toolkit:  {} (found via {})\n",
                tk.root.display(),
                tk.found_via
            );
            s += &format!(
                "ptxas:    {} ({})\n",
                tk.ptxas().display(),
                tk.ptxas_version().unwrap_or_else(|| "cannot run it".into())
            );
            match tk.libnvvm(nvvmpath) {
                Some(p) => {
                    let v = crate::lto::libnvvm_version(&p)
                        .map(|(a, b)| format!("libNVVM {a}.{b}"))
                        .unwrap_or_else(|e| format!("cannot load it: {}", e.message()));
                    s += &format!("libNVVM:  {} ({v})\n", p.display());
                }
                None => s += "libNVVM:  not found\n",
            }
        }
        Err(e) => s += &format!("toolkit:  {e}\n"),
    }
    s += &format!("LLVM:     {}\n", llvm_line());
    s
}

/// What `--version` says of LLVM: built in or not, and where its helper process is (a
/// wheel leaves it out: LLVM bitcode inputs are then refused by name).
fn llvm_line() -> String {
    if !cfg!(feature = "llvm") {
        return "not built in (LLVM bitcode inputs are refused)".into();
    }
    match crate::lto::llvm_helper::locate() {
        Some(helper) => format!("LLVM 22, in {}", helper.display()),
        None => format!(
            "LLVM 22, but its helper {} is not beside this program (LLVM bitcode inputs are refused)",
            crate::lto::llvm_helper::NAME
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_has_one_line_per_option_and_the_commands() {
        let h = help_text();
        for line in [
            "-o, --output-file <FILE>",
            "-arch <ARCH>",
            "-g, --debug",
            "-lto, --link-time-opt",
            "-cuda-path <DIR>",
        ] {
            assert!(
                h.lines().any(|l| l.trim_start().starts_with(line)),
                "{line}:\n{h}"
            );
        }
        // every visible option has a description on its line
        let options: Vec<&str> = h
            .lines()
            .skip_while(|l| !l.starts_with("Options"))
            .skip(2)
            .take_while(|l| !l.is_empty())
            .collect();
        assert!(options.len() > 40, "{h}");
        for l in &options {
            let words: Vec<&str> = l.split("  ").filter(|w| !w.trim().is_empty()).collect();
            assert!(words.len() >= 2, "no description: {l}");
        }
        // each option as the text spells it is one the command line takes (it listed
        // `-register-link-binaries`, which is refused: nvlink takes two dashes only)
        for l in &options {
            let spelled = l.trim_start().split([',', ' ']).next().unwrap();
            let mut args = vec![spelled.to_string()];
            if l.contains(" <") {
                args.push("x".into());
            }
            if let Err(e) = crate::cli::normalize(&args) {
                // (a value may be refused: `-optf x` names no file)
                let refused = e.message().starts_with("Unknown option");
                assert!(!refused, "{spelled}, as --help spells it: {}", e.message());
            }
        }
        assert!(h.contains("\n  --register-link-binaries <FILE>  "), "{h}");
        for c in ["inspect", "compare", "cache", "daemon", "shim"] {
            assert!(h.contains(&format!("\n  {c} ")), "{c}:\n{h}");
            assert!(is_subcommand(c));
        }
        assert!(!is_subcommand("a.o"));
    }

    #[test]
    fn subcommands_parse_with_clap() {
        let a = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        match parse(&a("inspect --json x.o y.o")).unwrap() {
            Command::Inspect { json, files } => {
                assert!(json);
                assert_eq!(files.len(), 2);
            }
            c => panic!("{c:?}"),
        }
        assert!(matches!(
            parse(&a("cache stats --cache-dir d")).unwrap(),
            Command::Cache {
                action: CacheAction::Stats,
                cache_dir: Some(_)
            }
        ));
        assert!(parse(&a("cache bogus")).is_err());
        assert!(parse(&a("compare only-one")).is_err());
        assert!(matches!(
            parse(&a("shim --cuda-path c ov")).unwrap(),
            Command::Shim { cuda_path: Some(_), remove: false, overlay } if overlay.as_path() == std::path::Path::new("ov")
        ));
        assert!(matches!(
            parse(&a("shim --remove ov")).unwrap(),
            Command::Shim {
                cuda_path: None,
                remove: true,
                ..
            }
        ));
        assert!(parse(&a("shim")).is_err());
    }
}
