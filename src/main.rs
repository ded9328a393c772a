//! The `nvlinkrs` command: nvlink's command line (or a subcommand, `nvlinkrs::commands`)
//! → the library → exit code.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use nvlinkrs::commands::{CacheAction, Command, DaemonAction};
use nvlinkrs::diag::{Diagnostics, Error};
use nvlinkrs::{cli, commands, toolkit};

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

fn inspect_main(files: &[PathBuf], json: bool) -> Result<(), Error> {
    let out = nvlinkrs::inspect(files, json)?;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(out.as_bytes())
        .and_then(|_| stdout.flush())
        .map_err(|e| Error::fatal(format!("cannot write to stdout: {e}")))
}

fn link_main(
    args: &[String],
    diag: &mut Diagnostics,
    process: &nvlinkrs::Process,
    started: std::time::Instant,
) -> Result<(), Error> {
    if args.is_empty() {
        // nvlink's words for a bare command, then where to start
        return Err(Error::fatal("Unknown arch name '(null)'").context(
            "no arguments: give the device objects to link and -o OUTPUT (nvlinkrs --help lists the options and subcommands)",
        ));
    }
    let (mut parsed, warnings, given) = cli::parse(args)?;
    // without -arch (nvcc always gives one): the architecture every input holds code for
    let mut inferred = None;
    if parsed.arch.is_none()
        && !parsed.help
        && !parsed.version
        && parsed.output_file.is_some()
        && !parsed.inputs.is_empty()
    {
        let lto = parsed.link_time_opt || parsed.dlto;
        let arch =
            nvlinkrs::target::infer(&parsed.inputs, &parsed.library, &parsed.library_path, lto)?;
        parsed.arch = Some(arch.to_string());
        inferred = Some(arch);
    }
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
    if let Some(name) = &parsed.tool_name {
        diag.set_tool(name);
    }
    if parsed.progress || std::env::var("NVLINKRS_PROGRESS").is_ok_and(|v| v == "1") {
        nvlinkrs::jobs::plain_progress(started);
    }
    for w in &warnings {
        diag.warning(w);
    }
    if let (Some(arch), true) = (inferred, parsed.verbose) {
        diag.info(&format!(
            "no -arch given: linking for {arch}, the architecture every input holds code for"
        ));
    }
    if parsed.help {
        nvlinkrs::diag::to_stdout(&commands::help_text());
        return Ok(());
    }
    if parsed.version {
        nvlinkrs::diag::to_stdout(&nvlinkrs::commands::version_report(
            parsed.cuda_path.as_deref(),
            parsed.nvvmpath.as_deref(),
        ));
        return Ok(());
    }
    // nvlink's own command-line errors first, then what nvlinkrs does not carry out
    let req = parsed.request()?;
    cli::refuse_unimplemented(&given)?;
    nvlinkrs::link(&req, diag, process).map(|_| ())
}

/// `nvlinkrs compare EXPECTED ACTUAL`: the differential harness's judgement of two
/// linked cubins (exit 0 when equivalent, 2 when not).
fn compare_main(expected: &PathBuf, actual: &PathBuf, limit: usize) -> Result<(), Error> {
    let read = |p: &PathBuf| {
        std::fs::read(p)
            .map_err(|e| Error::fatal(format!("Could not read file '{}': {e}", p.display())))
    };
    let report = nvlinkrs::elf::equiv::compare(&read(expected)?, &read(actual)?)?;
    // a closed stdout (`| head`) ends the listing, not the process
    use std::io::Write;
    let mut out = std::io::stdout().lock();
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

/// `nvlinkrs cache stats|clear|verify [--cache-dir DIR]` (else `NVLINKRS_CACHE_DIR`, else
/// the default directory links use).
fn cache_main(action: CacheAction, dir: Option<PathBuf>) -> Result<(), Error> {
    let dir = dir
        .or_else(|| {
            std::env::var_os("NVLINKRS_CACHE_DIR")
                .map(PathBuf::from)
                .filter(|d| !d.as_os_str().is_empty())
        })
        .or_else(nvlinkrs::cache::place::default_dir)
        .ok_or_else(|| {
            Error::fatal("cache: no --cache-dir, no NVLINKRS_CACHE_DIR, and neither XDG_CACHE_HOME nor HOME to find the default cache")
        })?;
    // (opening makes the directory: a command about a cache never does)
    if std::fs::symlink_metadata(&dir).is_err() {
        nvlinkrs::diag::to_stdout(&format!("no cache at {}\n", dir.display()));
        return Ok(());
    }
    let cache = nvlinkrs::cache::Cache::open(&dir, nvlinkrs::cache::DEFAULT_CAP)?;
    match action {
        CacheAction::Stats => {
            let s = cache.stats();
            println!(
                "cache {}\nentries {}\nbytes {}",
                dir.display(),
                s.entries,
                s.bytes
            );
            Ok(())
        }
        CacheAction::Clear => cache.clear(),
        CacheAction::Verify => {
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
    }
}

/// `nvlinkrs daemon start|stop|status` (and `serve`, what `start` runs in the background).
fn daemon_main(action: DaemonAction) -> Result<(), Error> {
    use nvlinkrs::daemon;
    let socket = daemon::socket_path();
    match action {
        DaemonAction::Start => {
            let pid = daemon::start(&socket)?;
            println!("pid {pid}");
            Ok(())
        }
        DaemonAction::Stop => {
            if daemon::stop(&socket) {
                println!("stopped");
            } else {
                println!("not running");
            }
            Ok(())
        }
        DaemonAction::Status => {
            let now = daemon::status::query(&socket)?;
            nvlinkrs::diag::to_stdout(&daemon::status::text(&socket, now.as_ref()));
            Ok(())
        }
        DaemonAction::Serve => daemon::serve(),
    }
}

/// `nvlinkrs shim [--cuda-path DIR] [--remove] OVERLAY`: makes OVERLAY a toolkit whose
/// `bin/nvcc` runs this nvlinkrs as its nvlink (see `nvlinkrs::shim`), or removes it.
fn shim_main(cuda_path: Option<PathBuf>, remove: bool, overlay: PathBuf) -> Result<(), Error> {
    if remove {
        nvlinkrs::shim::remove(&overlay)?;
        println!("removed the nvlinkrs overlay {}", overlay.display());
        return Ok(());
    }
    let toolkit = match cuda_path {
        Some(p) => p,
        None => toolkit::Toolkit::discover(None, None)?.root,
    };
    let me = std::env::current_exe()
        .map_err(|e| Error::fatal(format!("shim: cannot find nvlinkrs's own path: {e}")))?;
    let o = nvlinkrs::shim::install(&toolkit, &overlay, &me)?;
    print!(
        "{} is the CUDA toolkit {} with nvlinkrs as its nvlink\n{}",
        o.root.display(),
        o.toolkit.display(),
        o.recipe()
    );
    Ok(())
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

fn run_command(command: Command) -> Result<(), Error> {
    match command {
        Command::Inspect { json, files } => inspect_main(&files, json),
        Command::Compare {
            expected,
            actual,
            limit,
        } => compare_main(&expected, &actual, limit),
        Command::Cache { action, cache_dir } => cache_main(action, cache_dir),
        Command::Daemon { action } => daemon_main(action),
        Command::Shim {
            cuda_path,
            remove,
            overlay,
        } => shim_main(cuda_path, remove, overlay),
    }
}

/// Notes which of descriptors 0-2 were closed when the process started: Rust's runtime
/// opens /dev/null on them before `main`, where `-o /dev/stdout >&-` must fail as nvlink's.
/// Run by the loader before that runtime starts.
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static NOTE_CLOSED_STD_FDS: extern "C" fn() = {
    extern "C" fn note() {
        let closed = (0..3)
            .filter(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1)
            .fold(0u8, |m, fd| m | 1 << fd);
        nvlinkrs::output::note_closed_at_start(closed);
    }
    note
};

fn main() -> ExitCode {
    let started = std::time::Instant::now();
    grow_heap_in_large_steps();
    // before any file is opened: the descriptors of make's jobserver, if it shares one
    let jobserver = nvlinkrs::jobs::connect_jobserver();
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
    let subcommand = args.first().is_some_and(|a| commands::is_subcommand(a));
    if via_daemon && !subcommand && !nvlinkrs::daemon::stays_in_process(&args) {
        if let Some(code) = nvlinkrs::daemon::client_link(&args, &tool_name()) {
            return ExitCode::from(code as u8);
        }
        // NVLINKRS_DAEMON=only: no link in process (for tests and for checking a setup)
        if setting == "only" && std::env::var_os("NVLINKRS_IN_DAEMON").is_none() {
            nvlinkrs::diag::to_stderr(&format!(
                "{} fatal   : the daemon could not be reached\n",
                tool_name()
            ));
            return ExitCode::from(1);
        }
    }
    let mut diag = Diagnostics::new(&tool_name());
    let result = if subcommand {
        match commands::parse(&args) {
            Ok(command) => run_command(command),
            Err(e) => {
                // clap's usage or help text; help is not an error
                let _ = e.print();
                return ExitCode::from(if e.use_stderr() { 1 } else { 0 });
            }
        }
    } else {
        // the process ends after this link: its large structures are left to the exit
        let process = nvlinkrs::Process {
            jobserver,
            one_shot: true,
        };
        in_worker(|| link_main(&args, &mut diag, &process, started))
    };
    match result {
        Ok(()) if diag.error_count() == 0 => ExitCode::SUCCESS,
        Ok(()) => ExitCode::from(255),
        Err(e) => ExitCode::from(diag.report(&e)),
    }
}
