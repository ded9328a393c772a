//! The `nvlinkrs` command: nvlink's command line (or a subcommand, `nvlinkrs::commands`)
//! → the library → exit code.

use std::path::PathBuf;
use std::process::ExitCode;

use nvlinkrs::diag::{Diagnostics, Error};
use nvlinkrs::{cli, commands};

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
    let mut req = parsed.request()?;
    cli::refuse_unimplemented(&given)?;
    // (a background build of incremental LTO's partitions writes a scratch image)
    let _scratch = nvlinkrs::lto::incremental::background::adjust(&mut req)?;
    nvlinkrs::link(&req, diag, process).map(|_| ())
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
    // (an input cut short by another process while mapped: nvlink's error, not a crash)
    nvlinkrs::input::sigbus::install();
    // before any file is opened: the descriptors of make's jobserver, if it shares one
    let jobserver = nvlinkrs::jobs::connect_jobserver();
    let args: Vec<String> = std::env::args().skip(1).collect();
    use nvlinkrs::child::started_as;
    if started_as(&args, nvlinkrs::lto::isolated::SUBCOMMAND) {
        return ExitCode::from(nvlinkrs::lto::isolated::child_main(&args[1..]) as u8);
    }
    if started_as(&args, nvlinkrs::finalize::worker::SUBCOMMAND) {
        return ExitCode::from(nvlinkrs::finalize::worker::serve(&args[1..]) as u8);
    }
    // through the daemon, when asked (it answers with the link's own output and exit
    // code; when it cannot be reached, the link runs here)
    let mut args = args;
    let setting = std::env::var("NVLINKRS_DAEMON").unwrap_or_default();
    let via_daemon = args.iter().any(|a| a == "--daemon") || setting == "1" || setting == "only";
    args.retain(|a| a != "--daemon");
    let subcommand = args.first().is_some_and(|a| commands::is_subcommand(a));
    if via_daemon && !subcommand && !nvlinkrs::daemon::stays_in_process(&args) {
        if let Some(code) =
            nvlinkrs::daemon::client_link(&args, &tool_name(), nvlinkrs::request_key)
        {
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
            Ok(command) => commands::run(command),
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
            finalizer: None,
        };
        in_worker(|| link_main(&args, &mut diag, &process, started))
    };
    match result {
        Ok(()) if diag.error_count() == 0 => ExitCode::SUCCESS,
        Ok(()) => ExitCode::from(255),
        Err(e) => ExitCode::from(diag.report(&e)),
    }
}
