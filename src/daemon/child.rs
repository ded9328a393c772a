//! A link run by the daemon as a child process, and what keeps it from outliving the
//! clients waiting for it: the child dies with the daemon (`PR_SET_PDEATHSIG`), and runs
//! in its own process group, which is killed (ptxas included) once no client waits.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

/// How a child link ended.
pub enum Ended {
    Done {
        status: ExitStatus,
        stderr: Vec<u8>,
        stdout: Vec<u8>,
    },
    /// Killed: nobody waited for it any more.
    Abandoned,
}

/// Runs `cmd` to its end (seen as it happens), or until `abandoned` says no client waits
/// (asked every 50 ms).
pub fn run(mut cmd: Command, mut abandoned: impl FnMut() -> bool) -> std::io::Result<Ended> {
    // SAFETY: getpid before the fork; the closure calls only async-signal-safe functions.
    let daemon = unsafe { libc::getpid() };
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // the daemon died before the line above: do not run on without it
            if libc::getppid() != daemon {
                return Err(std::io::Error::other("the daemon is gone"));
            }
            Ok(())
        });
    }
    let mut child = cmd
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let err = drain(
        child
            .stderr
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let out = drain(
        child
            .stdout
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let group = child.id() as i32;
    // a waiter reaps the child the moment it ends; this thread asks every 50 ms whether
    // anyone still waits (a poll of the child would add up to 50 ms to every link)
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(status) => {
                let _ = waiter.join();
                return Ok(Ended::Done {
                    status: status?,
                    stderr: err.join().unwrap_or_default(),
                    stdout: out.join().unwrap_or_default(),
                });
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(std::io::Error::other("the link's waiter ended without it"));
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        if abandoned() {
            // SAFETY: kill(2) on the child's own process group (the link and its ptxas);
            // the group's leader is not reaped until the waiter has seen it end, so the
            // id cannot have been reused.
            unsafe { libc::kill(-group, libc::SIGKILL) };
            let _ = waiter.join();
            return Ok(Ended::Abandoned);
        }
    }
}
