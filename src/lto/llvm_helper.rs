//! The `nvlinkrs-llvm` helper process: where LLVM runs. Linking libLLVM costs every
//! process that loads it about 20 ms before `main` (its static constructors), more than a
//! whole small nvlink link, so the linker itself never links LLVM; the work that needs it
//! (reading bitcode, the LLVM engine's link, optimization and code generation) goes to
//! this helper, which is built beside `nvlinkrs` when the `llvm` cargo feature is on. Requests are a subcommand and
//! arguments; bulk input comes on stdin, the answer on stdout, a failure as exit status 1
//! with the message on stderr.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::diag::{Error, Result};

/// The helper's file name.
pub const NAME: &str = "nvlinkrs-llvm";

/// The helper this process's environment names ([`locate_in`]).
pub fn locate() -> Option<PathBuf> {
    locate_in(&crate::linkenv::LinkEnv::current())
}

/// `NVLINKRS_LLVM_HELPER` (of `env`), else `nvlinkrs-llvm` in the directory of the
/// running program (or its parent, for test binaries under `target/*/deps`).
pub fn locate_in(env: &crate::linkenv::LinkEnv) -> Option<PathBuf> {
    if let Some(p) = env.get("NVLINKRS_LLVM_HELPER") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [dir.join(NAME), dir.parent()?.join(NAME)]
        .into_iter()
        .find(|p| p.is_file())
}

/// Runs one request that needs no job tokens and does no I/O but its pipes (`link-ir`,
/// `summarize`); `what` names the input in messages. Such a helper is never idle: one
/// that uses no CPU time for [`super::isolated::STALL`] is stuck (or not the helper) and
/// is stopped, as is one whose answer outgrows [`answer_limit`] of its request (its
/// stderr is kept to [`STDERR_LIMIT`]), so that a wrong `NVLINKRS_LLVM_HELPER` fails the
/// link rather than hanging it or filling memory.
pub fn run(args: &[&str], stdin: Vec<u8>, what: &str) -> Result<Vec<u8>> {
    let mut cmd = command(what)?;
    cmd.args(args);
    let child = spawn(&mut cmd, what)?;
    let (request, limit) = (stdin.len(), answer_limit(stdin.len()));
    let (status, out, err) = supervise(child, stdin, limit)?;
    match status {
        Ending::Exited(status) => finish(status, out, &err, what),
        Ending::Stalled => Err(Error::fatal(format!(
            "'{what}': {NAME} used no CPU time for {} s and was stopped",
            super::isolated::STALL.as_secs()
        ))),
        Ending::TooLong => Err(Error::fatal(format!(
            "'{what}': {NAME} answered more than {limit} bytes to a {}-byte request and was stopped",
            request
        ))),
        Ending::OutputLeftOpen => Err(Error::fatal(format!(
            "'{what}': {NAME} ended but its output stayed open (a process it started holds it)"
        ))),
    }
}

/// The most a `link-ir` or `summarize` answer may take: a linked module is about as
/// large as its modules together, a summary smaller than its module.
pub fn answer_limit(request: usize) -> u64 {
    4 * request as u64 + (64 << 20)
}

/// The most of a helper's stderr kept for its message.
pub const STDERR_LIMIT: u64 = 1 << 20;

/// How a supervised helper ended.
enum Ending {
    Exited(std::process::ExitStatus),
    Stalled,
    TooLong,
    /// It ended, but its stdout stayed open (a process it started holds it).
    OutputLeftOpen,
}

/// Feeds the helper its request and reads its answer (at most `limit` bytes) and stderr,
/// watching its CPU time. The pipes are served by threads of their own that are left
/// behind where a process the helper started keeps them open after it ended (a script
/// as `NVLINKRS_LLVM_HELPER`): the link does not wait for them.
fn supervise(
    mut child: std::process::Child,
    body: Vec<u8>,
    limit: u64,
) -> Result<(Ending, Vec<u8>, Vec<u8>)> {
    use std::io::Read;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc::{RecvTimeoutError, channel};
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let pid = child.id();
    let too_long = Arc::new(AtomicBool::new(false));
    std::thread::spawn(move || {
        if let Some(mut p) = stdin {
            let _ = p.write_all(&body);
        }
    });
    let (out_tx, out_rx) = channel();
    let flag = too_long.clone();
    std::thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(p) = stdout {
            let _ = p.take(limit + 1).read_to_end(&mut v);
        }
        if v.len() as u64 > limit {
            flag.store(true, Ordering::SeqCst);
        }
        let _ = out_tx.send(v);
    });
    let (err_tx, err_rx) = channel();
    std::thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(mut p) = stderr {
            let _ = (&mut p).take(STDERR_LIMIT).read_to_end(&mut v);
            let _ = err_tx.send(v);
            // the rest drained, so that the helper is not blocked on it
            let _ = std::io::copy(&mut p, &mut std::io::sink());
        } else {
            let _ = err_tx.send(v);
        }
    });
    let cpu = super::isolated::cpu_ticks;
    let mut last = (cpu(pid), std::time::Instant::now());
    // (woken by the end of the answer, which comes as the helper ends: no added wait)
    let mut out = None;
    let ending = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Ending::Exited(st),
            Ok(None) => {}
            Err(e) => return Err(Error::fatal(format!("waiting for {NAME}: {e}"))),
        }
        if too_long.load(Ordering::SeqCst) {
            break Ending::TooLong;
        }
        match out {
            None => match out_rx.recv_timeout(std::time::Duration::from_millis(50)) {
                Ok(v) => out = Some(v),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => out = Some(Vec::new()),
            },
            Some(_) => std::thread::sleep(std::time::Duration::from_millis(2)),
        }
        let now = cpu(pid);
        if now != last.0 {
            last = (now, std::time::Instant::now());
        } else if now.is_some() && last.1.elapsed() >= super::isolated::STALL {
            break Ending::Stalled;
        }
    };
    if !matches!(ending, Ending::Exited(_)) {
        let _ = child.kill();
        let _ = child.wait();
    }
    // (the helper's own ends close as it ends; a little grace for the last bytes)
    let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let left = || until.saturating_duration_since(std::time::Instant::now());
    let out = out
        .ok_or(())
        .or_else(|_| out_rx.recv_timeout(left()).map_err(|_| ()));
    let err = err_rx.recv_timeout(left()).unwrap_or_default();
    let ending = match (ending, out.is_ok()) {
        (_, _) if too_long.load(Ordering::SeqCst) => Ending::TooLong,
        (Ending::Exited(_), false) => Ending::OutputLeftOpen,
        (e, _) => e,
    };
    Ok((ending, out.unwrap_or_default(), err))
}

/// The helper's command for a request, its pipes set; an error where there is none.
fn command(what: &str) -> Result<Command> {
    let Some(helper) = locate() else {
        return Err(Error::fatal(if cfg!(feature = "llvm") {
            format!(
                "'{what}': LLVM bitcode needs the {NAME} helper, which is not beside this program (set NVLINKRS_LLVM_HELPER)"
            )
        } else {
            format!(
                "'{what}': this nvlinkrs was built without LLVM (cargo feature \"llvm\"); it cannot read LLVM bitcode"
            )
        }));
    };
    let mut cmd = Command::new(&helper);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    Ok(cmd)
}

/// Starts the helper, naming it where it cannot be started.
fn spawn(cmd: &mut Command, what: &str) -> Result<std::process::Child> {
    cmd.spawn().map_err(|e| {
        let helper = cmd.get_program().to_string_lossy().into_owned();
        Error::fatal(format!("'{what}': cannot start {helper}: {e}"))
    })
}

/// The answer of a helper that ended with `status`, or its message.
fn finish(
    status: std::process::ExitStatus,
    stdout: Vec<u8>,
    stderr: &[u8],
    what: &str,
) -> Result<Vec<u8>> {
    if status.success() {
        return Ok(stdout);
    }
    let msg = String::from_utf8_lossy(stderr).trim().to_string();
    Err(Error::fatal(if msg.is_empty() {
        format!("'{what}': {NAME} failed ({status})")
    } else {
        msg
    }))
}

/// As [`run`], the helper's pool taking its tokens from `jobserver` (make's).
pub fn run_with_jobs(
    args: &[&str],
    stdin: &[u8],
    what: &str,
    jobserver: Option<&jobserver::Client>,
) -> Result<Vec<u8>> {
    let mut cmd = command(what)?;
    cmd.args(args);
    // the helper's pool takes make's tokens as this process's does
    crate::jobs::pass_jobserver(jobserver, &mut cmd);
    let mut child = spawn(&mut cmd, what)?;
    // feed stdin from a thread while `wait_with_output` drains stdout and stderr, so
    // no pipe can fill up and stall either side
    let pipe = child.stdin.take();
    let out = std::thread::scope(|s| {
        s.spawn(move || {
            if let Some(mut p) = pipe {
                let _ = p.write_all(stdin);
            }
        });
        child.wait_with_output()
    })
    .map_err(|e| Error::fatal(format!("'{what}': waiting for {NAME}: {e}")))?;
    finish(out.status, out.stdout, &out.stderr, what)
}
