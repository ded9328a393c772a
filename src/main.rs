//! The `nvlinkrs` command: nvlink's command line (or `inspect`) → the library → exit code.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use nvlinkrs::diag::{Diagnostics, Error};
use nvlinkrs::{cli, toolkit};

/// Messages carry the name the program was started under: `nvlink` when it stands in
/// for nvlink in a toolkit's `bin/`, `nvlinkrs` otherwise.
fn tool_name() -> String {
    std::env::args_os()
        .next()
        .and_then(|a| {
            PathBuf::from(a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "nvlinkrs".into())
}

fn inspect_main(args: &[String]) -> Result<(), Error> {
    let mut json = false;
    let mut files = Vec::new();
    for a in args {
        match a.as_str() {
            "--json" => json = true,
            "-h" | "--help" => {
                println!(
                    "usage: nvlinkrs inspect [--json] FILE...\n\nPrints every input opened down to its device code."
                );
                return Ok(());
            }
            s if s.starts_with('-') && s.len() > 1 => {
                return Err(Error::fatal(format!("inspect: unknown option '{s}'")));
            }
            s => files.push(PathBuf::from(s)),
        }
    }
    if files.is_empty() {
        return Err(Error::fatal("inspect: no input files"));
    }
    let out = nvlinkrs::inspect(&files, json)?;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(out.as_bytes())
        .and_then(|_| stdout.flush())
        .map_err(|e| Error::fatal(format!("cannot write to stdout: {e}")))
}

fn link_main(args: &[String], diag: &mut Diagnostics) -> Result<(), Error> {
    let (parsed, warnings, given) = cli::parse(args)?;
    diag.configure(
        parsed.disable_warnings,
        parsed.disable_infos,
        parsed.warning_as_error,
        parsed
            .arch
            .as_ref()
            .filter(|_| parsed.report_arch)
            .map(|a| format!(" (target: {a})"))
            .unwrap_or_default(),
    );
    for w in &warnings {
        diag.warning(w);
    }
    if parsed.help {
        print!("{}", cli::help_text());
        return Ok(());
    }
    if parsed.version {
        print!(
            "{}",
            toolkit::version_report(parsed.cuda_path.as_deref(), parsed.nvvmpath.as_deref())
        );
        return Ok(());
    }
    cli::refuse_unimplemented(&given)?;
    let req = parsed.request()?;
    nvlinkrs::link(&req, diag).map(|_| ())
}

/// `nvlinkrs compare EXPECTED ACTUAL`: the differential harness's judgement of two
/// linked cubins (exit 0 when equivalent, 2 when not).
fn compare_main(args: &[String]) -> Result<(), Error> {
    let [expected, actual] = args else {
        return Err(Error::fatal(
            "usage: nvlinkrs compare EXPECTED.cubin ACTUAL.cubin",
        ));
    };
    let read = |p: &String| {
        std::fs::read(p).map_err(|e| Error::fatal(format!("Could not read file '{p}': {e}")))
    };
    let report = nvlinkrs::elf::equiv::compare(&read(expected)?, &read(actual)?)?;
    // a closed stdout (`| head`) ends the listing, not the process
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for d in &report.differences {
        if writeln!(out, "{d}").is_err() {
            break;
        }
    }
    if report.identical {
        let _ = writeln!(out, "byte-identical");
    } else if report.equivalent() {
        let _ = writeln!(out, "equivalent (not byte-identical)");
    } else {
        std::process::exit(2);
    }
    Ok(())
}

/// `nvlinkrs cache stats|clear|verify [--cache-dir DIR]` (else `NVLINKRS_CACHE_DIR`, else
/// the default directory links use).
fn cache_main(args: &[String]) -> Result<(), Error> {
    let usage = || Error::fatal("usage: nvlinkrs cache stats|clear|verify [--cache-dir DIR]");
    let (cmd, rest) = args.split_first().ok_or_else(usage)?;
    let dir = match rest {
        [flag, dir] if flag == "--cache-dir" => PathBuf::from(dir),
        [one] if one.starts_with("--cache-dir=") => PathBuf::from(&one["--cache-dir=".len()..]),
        [] => std::env::var_os("NVLINKRS_CACHE_DIR")
            .map(PathBuf::from)
            .filter(|d| !d.as_os_str().is_empty())
            .or_else(nvlinkrs::cache::place::default_dir)
            .ok_or_else(|| {
                Error::fatal("cache: no --cache-dir, no NVLINKRS_CACHE_DIR, and neither XDG_CACHE_HOME nor HOME to find the default cache")
            })?,
        _ => return Err(usage()),
    };
    let cache = nvlinkrs::cache::Cache::open(&dir, nvlinkrs::cache::DEFAULT_CAP)?;
    match cmd.as_str() {
        "stats" => {
            let s = cache.stats();
            println!(
                "cache {}\nentries {}\nbytes {}",
                dir.display(),
                s.entries,
                s.bytes
            );
            Ok(())
        }
        "clear" => cache.clear(),
        "verify" => {
            let bad = cache.verify();
            for b in &bad {
                println!("corrupt {}", b.display());
            }
            if bad.is_empty() {
                println!("{} entries intact", cache.stats().entries);
                Ok(())
            } else {
                Err(Error::fatal(format!(
                    "cache: {} corrupt entries",
                    bad.len()
                )))
            }
        }
        _ => Err(usage()),
    }
}

/// `nvlinkrs daemon start|stop|status` (and `serve`, what `start` runs in the background).
fn daemon_main(args: &[String]) -> Result<(), Error> {
    use nvlinkrs::daemon;
    let socket = daemon::socket_path();
    match args.first().map(String::as_str) {
        Some("start") => {
            let pid = daemon::start(&socket)?;
            println!("pid {pid}");
            Ok(())
        }
        Some("stop") => {
            if daemon::stop(&socket) {
                println!("stopped");
            } else {
                println!("not running");
            }
            Ok(())
        }
        Some("status") => {
            let now = daemon::status::query(&socket)?;
            print!("{}", daemon::status::text(&socket, now.as_ref()));
            Ok(())
        }
        Some("serve") => daemon::serve(),
        _ => Err(Error::fatal("usage: nvlinkrs daemon start|stop|status")),
    }
}

/// glibc grows each thread's heap a few pages at a time by default; a link allocates and
/// frees tens of megabytes in many threads, and the growth (a system call and a lock on the
/// address space each time) cost 10-18% of a 128-unit link. A 16 MiB pad reserves
/// address space, not memory: pages count toward the peak only once written.
fn grow_heap_in_large_steps() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a tuning value of the allocator, before any thread starts.
    unsafe {
        libc::mallopt(libc::M_TOP_PAD, 16 << 20);
    }
}

/// Runs `f` on a thread of a rayon pool of one thread per core: the serial phases between
/// parallel ones then have the cores to themselves (run from the main thread, they share
/// them with the pool's idle workers, which spin a while before sleeping: a 128-unit
/// merge link 5 to 10% slower). The pool's stacks are as deep as a main thread's would be
/// for libNVVM and LLVM (32 MiB, reserved, not committed).
fn in_worker<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    match rayon::ThreadPoolBuilder::new().stack_size(32 << 20).build() {
        Ok(pool) => pool.install(f),
        Err(_) => f(),
    }
}

fn main() -> ExitCode {
    grow_heap_in_large_steps();
    // before any file is opened: the descriptors of make's jobserver, if it shares one
    nvlinkrs::jobs::connect_jobserver();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(nvlinkrs::lto::isolated::SUBCOMMAND) {
        return ExitCode::from(nvlinkrs::lto::isolated::child_main(&args[1..]) as u8);
    }
    // through the daemon, when asked (it answers with the link's own output and exit
    // code; when it cannot be reached, the link runs here)
    let mut args = args;
    let setting = std::env::var("NVLINKRS_DAEMON").unwrap_or_default();
    let via_daemon = args.iter().any(|a| a == "--daemon") || setting == "1" || setting == "only";
    args.retain(|a| a != "--daemon");
    let subcommand = matches!(
        args.first().map(String::as_str),
        Some("inspect" | "compare" | "cache" | "daemon")
    );
    if via_daemon && !subcommand {
        if let Some(code) = nvlinkrs::daemon::client_link(&args, &tool_name()) {
            return ExitCode::from(code as u8);
        }
        // NVLINKRS_DAEMON=only: no link in process (for tests and for checking a setup)
        if setting == "only" && std::env::var_os("NVLINKRS_IN_DAEMON").is_none() {
            eprintln!("{} fatal   : the daemon could not be reached", tool_name());
            return ExitCode::from(1);
        }
    }
    let mut diag = Diagnostics::new(&tool_name());
    let result = match args.first().map(String::as_str) {
        Some("inspect") => inspect_main(&args[1..]),
        Some("compare") => compare_main(&args[1..]),
        Some("cache") => cache_main(&args[1..]),
        Some("daemon") => daemon_main(&args[1..]),
        _ => {
            nvlinkrs::one_shot_process();
            in_worker(|| link_main(&args, &mut diag))
        }
    };
    match result {
        Ok(()) if diag.error_count() == 0 => ExitCode::SUCCESS,
        Ok(()) => ExitCode::from(255),
        Err(e) => ExitCode::from(diag.report(&e)),
    }
}
