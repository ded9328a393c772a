//! What nvlinkrs' own subcommands do once parsed: `inspect` and `compare` print to
//! stdout, `cache` reports on or empties a cache directory (`stats`: its counters, in
//! `super::stats`), `daemon` starts, stops or
//! asks the link daemon, `shim` makes or removes an overlay toolkit.

use std::io::Write;
use std::path::PathBuf;

use super::{CacheAction, Command, DaemonAction};
use crate::diag::{Error, Result};

/// `nvlinkrs inspect [--json] FILE...`: the input trees on stdout.
fn inspect_main(files: &[PathBuf], json: bool) -> Result<()> {
    let out = crate::inspect(files, json)?;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(out.as_bytes())
        .and_then(|_| stdout.flush())
        .map_err(|e| Error::fatal(format!("cannot write to stdout: {e}")))
}

/// What `compare` compares.
enum Compare {
    Whole,
    ExceptCode,
    Code,
}

/// `nvlinkrs compare EXPECTED ACTUAL`: the differential harness's judgement of two
/// linked cubins (exit 0 when equivalent, 2 when not).
fn compare_main(expected: &PathBuf, actual: &PathBuf, limit: usize, how: Compare) -> Result<()> {
    let read = |p: &PathBuf| {
        std::fs::read(p)
            .map_err(|e| Error::fatal(format!("Could not read file '{}': {e}", p.display())))
    };
    let (e, a) = (read(expected)?, read(actual)?);
    let mut out = std::io::stdout().lock();
    match how {
        Compare::Whole => {}
        Compare::Code => {
            let (ek, ak) = (
                crate::elf::codestats::kernels(&e, &expected.display().to_string())?,
                crate::elf::codestats::kernels(&a, &actual.display().to_string())?,
            );
            for line in crate::elf::codestats::report(&ek, &ak) {
                if writeln!(out, "{line}").is_err() {
                    break;
                }
            }
            return Ok(());
        }
        Compare::ExceptCode => {
            // (the same bytes: said so, not "equivalent but for the code", which reads as
            // a difference in the code)
            if e[..] == a[..] {
                let _ = writeln!(out, "byte-identical");
                return Ok(());
            }
            let report = crate::elf::interface::compare(&e, &a)?;
            for d in report.summary(limit) {
                let _ = writeln!(out, "{d}");
            }
            for n in &report.notes {
                let _ = writeln!(out, "note: {n}");
            }
            if report.equivalent() {
                let _ = writeln!(out, "equivalent but for the code");
                return Ok(());
            }
            let _ = writeln!(
                out,
                "not equivalent: {} differences",
                report.differences.len()
            );
            let _ = out.flush();
            std::process::exit(2);
        }
    }
    let report = crate::elf::equiv::compare(&e, &a)?;
    // a closed stdout (`| head`) ends the listing, not the process
    for d in report.summary(limit) {
        if writeln!(out, "{d}").is_err() {
            break;
        }
    }
    for n in &report.notes {
        let _ = writeln!(out, "note: {n}");
    }
    if report.identical {
        let _ = writeln!(out, "byte-identical");
    } else if report.equivalent() && !report.notes.is_empty() {
        let _ = writeln!(out, "equivalent but for the tool note's command line");
    } else if report.equivalent() {
        let _ = writeln!(out, "equivalent (not byte-identical)");
    } else {
        let _ = writeln!(
            out,
            "not equivalent: {} differences",
            report.differences.len()
        );
        let _ = out.flush();
        std::process::exit(2);
    }
    Ok(())
}

/// `nvlinkrs cache stats|clear|verify [--cache-dir DIR]`.
fn cache_main(action: CacheAction, dir: Option<PathBuf>) -> Result<()> {
    let dir = crate::cache::place::command_dir(dir)?;
    // (opening makes the directory: a command about a cache never does)
    if std::fs::symlink_metadata(&dir).is_err() {
        crate::diag::to_stdout(&format!("no cache at {}\n", dir.display()));
        return Ok(());
    }
    let cache = crate::cache::Cache::open(&dir, crate::cache::DEFAULT_CAP)?;
    match action {
        CacheAction::Stats => {
            crate::diag::to_stdout(&super::stats::text(&dir, &cache));
            Ok(())
        }
        CacheAction::Clear => cache.clear(),
        CacheAction::Verify => {
            let bad = cache.verify();
            for b in &bad {
                say(&format!("corrupt {}\n", b.display()));
            }
            if bad.is_empty() {
                say(&format!("{} entries intact\n", cache.stats().entries));
                Ok(())
            } else {
                Err(Error::fatal(format!(
                    "cache: {} corrupt entries",
                    bad.len()
                )))
            }
        }
    }
}

/// `nvlinkrs daemon start|stop|status` (and `serve`, what `start` runs in the background).
fn daemon_main(action: DaemonAction) -> Result<()> {
    use crate::daemon;
    let socket = daemon::socket_path();
    match action {
        DaemonAction::Start => {
            let pid = daemon::start(&socket)?;
            say(&format!("pid {pid}\n"));
            Ok(())
        }
        DaemonAction::Stop => {
            if daemon::stop(&socket) {
                say("stopped\n");
            } else {
                say("not running\n");
            }
            Ok(())
        }
        DaemonAction::Status => {
            let now = daemon::status::query(&socket)?;
            crate::diag::to_stdout(&daemon::status::text(&socket, now.as_ref()));
            Ok(())
        }
        DaemonAction::Serve => daemon::serve(),
    }
}

/// `nvlinkrs shim [--cuda-path DIR] [--remove] OVERLAY`: makes OVERLAY a toolkit whose
/// `bin/nvcc` runs this nvlinkrs as its nvlink (see `crate::shim`), or removes it.
fn shim_main(cuda_path: Option<PathBuf>, remove: bool, overlay: PathBuf) -> Result<()> {
    if remove {
        crate::shim::remove(&overlay)?;
        say(&format!(
            "removed the nvlinkrs overlay {}\n",
            overlay.display()
        ));
        return Ok(());
    }
    // (made again without `--cuda-path`, an overlay keeps the toolkit it was made from)
    let toolkit = match cuda_path {
        Some(p) => p,
        None => match crate::shim::Overlay::read(&overlay)? {
            Some(o) => o.toolkit,
            None => crate::toolkit::Toolkit::discover(None, None)?.root,
        },
    };
    let me = std::env::current_exe()
        .map_err(|e| Error::fatal(format!("shim: cannot find nvlinkrs's own path: {e}")))?;
    let o = crate::shim::install(&toolkit, &overlay, &me)?;
    say(&format!(
        "{} is the CUDA toolkit {} with nvlinkrs as its nvlink\n{}",
        o.root.display(),
        o.toolkit.display(),
        o.recipe()
    ));
    Ok(())
}

/// A subcommand's answer on stdout; a reader that has gone (`| head -1`) ends nothing.
fn say(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().write_all(text.as_bytes());
}

/// Runs one of nvlinkrs' own subcommands.
pub fn run(command: Command) -> Result<()> {
    match command {
        Command::Inspect { json, files } => inspect_main(&files, json),
        Command::Compare {
            expected,
            actual,
            limit,
            except_code,
            code,
        } => {
            let how = match (except_code, code) {
                (true, _) => Compare::ExceptCode,
                (_, true) => Compare::Code,
                _ => Compare::Whole,
            };
            compare_main(&expected, &actual, limit, how)
        }
        Command::Cache { action, cache_dir } => cache_main(action, cache_dir),
        Command::Stats {
            json,
            zero,
            cache_dir,
        } => super::stats::main(cache_dir, json, zero),
        Command::Daemon { action } => daemon_main(action),
        Command::Shim {
            cuda_path,
            remove,
            overlay,
        } => shim_main(cuda_path, remove, overlay),
    }
}
