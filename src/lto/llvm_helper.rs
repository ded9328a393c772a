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

/// `NVLINKRS_LLVM_HELPER`, else `nvlinkrs-llvm` in the directory of the running program
/// (or its parent, for test binaries under `target/*/deps`).
pub fn locate() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NVLINKRS_LLVM_HELPER") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [dir.join(NAME), dir.parent()?.join(NAME)]
        .into_iter()
        .find(|p| p.is_file())
}

/// Runs one request; `what` names the input in messages.
pub fn run(args: &[&str], stdin: &[u8], what: &str) -> Result<Vec<u8>> {
    run_with_jobs(args, stdin, what, None)
}

/// As [`run`], the helper's pool taking its tokens from `jobserver` (make's).
pub fn run_with_jobs(
    args: &[&str],
    stdin: &[u8],
    what: &str,
    jobserver: Option<&jobserver::Client>,
) -> Result<Vec<u8>> {
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
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // the helper's pool takes make's tokens as this process's does
    crate::jobs::pass_jobserver(jobserver, &mut cmd);
    let mut child = cmd
        .spawn()
        .map_err(|e| Error::fatal(format!("'{what}': cannot start {}: {e}", helper.display())))?;
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
    let status = out.status;
    if status.success() {
        return Ok(out.stdout);
    }
    let msg = String::from_utf8_lossy(&out.stderr).trim().to_string();
    Err(Error::fatal(if msg.is_empty() {
        format!("'{what}': {NAME} failed ({status})")
    } else {
        msg
    }))
}
