//! Who the daemon and its clients trust: the socket's directory must be a real directory
//! of this user that nobody else can enter (checked without following a link, never
//! chmodded), the process at the other end of the socket must run as this user (its peer
//! credentials), and a client and the daemon must run the same nvlinkrs binary (an
//! upgrade replaces it under a running daemon).

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::os::unix::net::UnixStream;
use std::path::Path;

use crate::diag::{Error, Result};

pub fn uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Checks that `dir` (not followed if a link) is a directory of this user closed to
/// everyone else.
pub fn check_dir(dir: &Path) -> Result<()> {
    match crate::cache::unsafe_dir(dir, 0o077, "is open to other users (not 0700)") {
        Ok(None) => Ok(()),
        Ok(Some(why)) => Err(Error::fatal(format!(
            "daemon: '{}' {why}; refusing to use it",
            dir.display()
        ))),
        Err(e) => Err(Error::fatal(format!("daemon: '{}': {e}", dir.display()))),
    }
}

/// Creates the daemon's directory 0700 when missing (never changing one that exists),
/// then checks it.
pub fn private_dir(dir: &Path) -> Result<()> {
    if let Some(parent) = dir.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(Error::fatal(format!(
                "daemon: cannot create '{}': {e}",
                dir.display()
            )));
        }
    }
    check_dir(dir)
}

/// The user id and process id of the process at the other end of a Unix socket.
pub fn peer(stream: &UnixStream) -> Option<(u32, u32)> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid socket descriptor and a buffer of the size passed.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some((cred.uid, cred.pid as u32))
}

/// Checks that the server at the other end of `stream` runs as this user.
pub fn check_server(stream: &UnixStream, socket: &Path) -> Result<()> {
    match peer(stream) {
        Some((u, _)) if u == uid() => Ok(()),
        Some((u, _)) => Err(Error::fatal(format!(
            "daemon: the socket '{}' is served by user {u}, not by you; refusing to use it",
            socket.display()
        ))),
        None => Err(Error::fatal(format!(
            "daemon: cannot tell who serves '{}'",
            socket.display()
        ))),
    }
}

/// The identity of the running nvlinkrs binary: device, inode, size and modification time
/// of the file it was started from (a replaced binary is another file).
pub fn exe_identity() -> String {
    exe_identity_of("self")
}

/// [`exe_identity`] of the process `pid` (`self`: this one); empty when it cannot be read.
pub fn exe_identity_of(pid: &str) -> String {
    std::fs::metadata(format!("/proc/{pid}/exe"))
        .map(|m| {
            format!(
                "{}:{}:{}:{}",
                m.dev(),
                m.ino(),
                m.size(),
                m.mtime_nsec() + m.mtime() * 1_000_000_000
            )
        })
        .unwrap_or_default()
}

/// True when the client or the daemon at the other end has hung up.
pub fn hung_up(stream: &UnixStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut p = libc::pollfd {
        fd: stream.as_raw_fd(),
        events: libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no waiting.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
}

/// Waits up to `ms` milliseconds for `fd` to have something to read (a listener: a
/// connection to accept); returns at once when it has.
pub fn wait_readable(fd: &impl std::os::fd::AsRawFd, ms: i32) {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd; an interrupted or failed poll only ends the wait early.
    unsafe { libc::poll(&mut p, 1, ms) };
}

/// Process `pid`'s state letter and parent's pid, from `/proc/<pid>/stat` (`None`: no
/// such process).
pub fn state_and_parent(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // (the fields after the parenthesised command name: state, then parent)
    let mut f = stat.get(stat.rfind(')')? + 2..)?.split(' ');
    let state = f.next()?.chars().next()?;
    Some((state, f.next()?.parse().ok()?))
}

/// Whether process `pid` runs (not ended, nor a zombie waiting to be reaped).
pub fn alive(pid: u32) -> bool {
    state_and_parent(pid).is_some_and(|(state, _)| !matches!(state, 'Z' | 'X'))
}
