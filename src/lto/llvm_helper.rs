//! The `nvlinkrs-llvm` helper process: where LLVM runs. Linking libLLVM costs every
//! process that loads it about 20 ms before `main` (its static constructors), more than a
//! whole small nvlink link, so the linker itself never links LLVM; the work that needs it
//! (reading bitcode, the LLVM engine's link, optimization and code generation) goes to
//! this helper, which is built beside `nvlinkrs` when the `llvm` cargo feature is on. Requests are a subcommand and
//! arguments; bulk input comes on stdin, the answer on stdout, a failure as exit status 1
//! with the message on stderr.

use std::path::PathBuf;
use std::process::Command;

use crate::child;
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
/// that uses no CPU time for [`child::STALL`] is stuck (or not the helper) and is
/// stopped, as is one that runs past two minutes plus ten seconds per MiB of request, or
/// whose answer outgrows [`answer_limit`] of its request (`crate::child` supervises it),
/// so that a wrong `NVLINKRS_LLVM_HELPER` fails the link rather than hanging it or
/// filling memory.
pub fn run(args: &[&str], stdin: Vec<u8>, what: &str) -> Result<Vec<u8>> {
    let mut cmd = command(what)?;
    cmd.args(args);
    let s = std::time::Duration::from_secs;
    let limits = child::Limits {
        wall: child::Limits::wall_for(stdin.len(), s(120), s(10)),
        stall: Some(child::STALL),
        stdout: answer_limit(stdin.len()),
    };
    let request = stdin.len();
    let done = child::run(&mut cmd, stdin, limits).map_err(|e| start_error(&cmd, what, e))?;
    finish(done, what, request)
}

/// The most a `link-ir` or `summarize` answer may take: a linked module is about as
/// large as its modules together, a summary smaller than its module.
pub fn answer_limit(request: usize) -> u64 {
    4 * request as u64 + (64 << 20)
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
    Ok(child::command(&helper))
}

/// The message for a helper that cannot be started (or watched).
fn start_error(cmd: &Command, what: &str, e: std::io::Error) -> Error {
    Error::fatal(format!(
        "'{what}': cannot start {}: {e}",
        child::program(cmd)
    ))
}

/// The answer of a helper that ended as `done` says, or its message.
fn finish(done: child::Finished, what: &str, request: usize) -> Result<Vec<u8>> {
    let status = match done.ending {
        child::Ending::Exited(st) if st.success() => return Ok(done.stdout),
        child::Ending::Exited(st) => st,
        child::Ending::TooLong(limit) => {
            return Err(Error::fatal(format!(
                "'{what}': {NAME} answered more than {limit} bytes to a {request}-byte request and was stopped"
            )));
        }
        other => {
            return Err(Error::fatal(format!(
                "'{what}': {NAME} {}",
                other.describe()
            )));
        }
    };
    let msg = String::from_utf8_lossy(&done.stderr).trim().to_string();
    Err(Error::fatal(if msg.is_empty() {
        format!("'{what}': {NAME} failed ({status})")
    } else {
        msg
    }))
}

/// As [`run`], the helper's pool taking its tokens from `jobserver` (make's).
pub fn run_with_jobs(
    args: &[&str],
    stdin: Vec<u8>,
    what: &str,
    jobserver: Option<&jobserver::Client>,
) -> Result<Vec<u8>> {
    let mut cmd = command(what)?;
    cmd.args(args);
    // the helper's pool takes make's tokens as this process's does
    crate::jobs::pass_jobserver(jobserver, &mut cmd);
    // (it may wait for job tokens: no stall limit; the LLVM engine's PTX is kept to 64
    // times its bitcode plus 256 MiB)
    let s = std::time::Duration::from_secs;
    let limits = child::Limits {
        wall: child::Limits::wall_for(stdin.len(), s(600), s(60)),
        stall: None,
        stdout: 64 * stdin.len() as u64 + (256 << 20),
    };
    let request = stdin.len();
    let done = child::run(&mut cmd, stdin, limits).map_err(|e| start_error(&cmd, what, e))?;
    finish(done, what, request)
}
