//! The finalizer workers the daemon keeps: one per libnvJitLink (by path), started when a
//! link first asks for it and kept for the daemon's life, so that the library is loaded
//! once for all the daemon's links, not once per link ([`crate::finalize::worker`]). A
//! link process of the daemon (which names the daemon's socket in [`VAR`]) asks with a
//! `finalizer` request (the library's path) and is answered the worker's socket and pid;
//! it then sends its jobs there itself. A worker that crashed is replaced on the next
//! request; one asked about with `ended` (its pid) is described (`crashed (SIGSEGV)`)
//! once it has ended. A library replaced at its path gets a new worker. Its socket is in
//! the daemon's private directory.

use std::collections::HashMap;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use crate::child::FINALIZER as SUBCOMMAND;

/// Set by the daemon in its link processes: the daemon's socket, where they ask for a
/// finalizer worker.
pub const VAR: &str = "NVLINKRS_DAEMON_FINALIZER";

/// A worker the daemon started.
struct Started {
    child: crate::child::Background,
    socket: PathBuf,
    /// The library file it loaded (size, modification time, inode): a library replaced
    /// at the same path gets a worker of its own (the cache keys the new file's bytes).
    file: Option<(u64, std::time::SystemTime, u64)>,
}

/// What tells a library file from another at the same path.
fn file_of(lib: &Path) -> Option<(u64, std::time::SystemTime, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(lib).ok()?;
    Some((m.len(), m.modified().ok()?, m.ino()))
}

/// The daemon's workers, by library.
#[derive(Default)]
pub(super) struct Workers {
    kept: Mutex<HashMap<PathBuf, Started>>,
    started: std::sync::atomic::AtomicU64,
}

impl Workers {
    /// The answer to a `finalizer` request (`lib`, and `ended`: a worker's pid to
    /// describe): the worker's `socket` and `pid`, started if none runs; or, for `ended`,
    /// how that worker ended.
    pub(super) fn answer(
        &self,
        dir: &Path,
        lib: &Path,
        ended: Option<u32>,
    ) -> Vec<(String, Vec<u8>)> {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pid) = ended {
            let Some(k) = kept.get_mut(lib).filter(|k| k.child.pid == pid) else {
                return vec![("ended".into(), b"ended".to_vec())];
            };
            let how = match k.child.ending(Duration::from_secs(2)) {
                Some(Ok(ending)) => ending.failure(),
                Some(Err(e)) => format!("could not be watched ({e})"),
                None => "closed the connection".into(),
            };
            return vec![("ended".into(), how.into_bytes())];
        }
        if let Some(k) = kept.get_mut(lib)
            && k.child.ending(Duration::ZERO).is_none()
            && k.file.is_some()
            && k.file == file_of(lib)
        {
            return answer_for(k);
        }
        if let Some(old) = kept.remove(lib) {
            old.child.stop();
            let _ = std::fs::remove_file(&old.socket);
        }
        let n = self
            .started
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        match start(dir, lib, n) {
            Ok(k) => {
                let a = answer_for(&k);
                kept.insert(lib.to_path_buf(), k);
                a
            }
            Err(e) => vec![("error".into(), e.to_string().into_bytes())],
        }
    }

    /// Stops every worker (the daemon is stopping).
    pub(super) fn stop_all(&self) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        for (_, k) in kept.drain() {
            k.child.stop();
            let _ = std::fs::remove_file(&k.socket);
        }
    }
}

fn answer_for(k: &Started) -> Vec<(String, Vec<u8>)> {
    vec![
        (
            "socket".into(),
            k.socket.to_string_lossy().as_bytes().to_vec(),
        ),
        ("pid".into(), k.child.pid.to_string().into_bytes()),
        // (this executable, which a link outside the daemon must be: the worker speaks
        // its protocol)
        ("exe".into(), super::guard::exe_identity().into_bytes()),
    ]
}

/// Starts a worker for `lib`, listening in the daemon's directory.
fn start(dir: &Path, lib: &Path, n: u64) -> std::io::Result<Started> {
    let file = file_of(lib);
    let socket = dir.join(format!("finalizer-{}-{n}.sock", std::process::id()));
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket)?;
    // (run by `crate::child` on a thread of its own, which the worker outlives no more
    // than the daemon: its own process group, a flood of output stops it; no wall-clock
    // or stall limit, as it waits for the daemon's links: each job is watched by its link)
    let mut cmd = crate::child::command("/proc/self/exe");
    cmd.env(crate::child::CHILD_VAR, SUBCOMMAND)
        .arg(SUBCOMMAND)
        .arg(lib)
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(listener)));
    let limits = crate::child::Limits {
        wall: Duration::MAX,
        stall: None,
        stdout: 64 << 20,
    };
    let child = crate::child::run_in_background(cmd, Vec::new(), limits)?;
    Ok(Started {
        child,
        socket,
        file,
    })
}

/// The finalizer workers' sockets a killed daemon left in its directory (named with
/// its pid, `finalizer-<pid>-<n>.sock`), removed when that process no longer runs.
pub(super) fn sweep_sockets(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = (name.to_str())
            .and_then(|n| n.strip_prefix("finalizer-")?.strip_suffix(".sock"))
            .and_then(|rest| rest.split_once('-')?.0.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !super::guard::alive(pid) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

// ---- a link process's side -----------------------------------------------------------

/// The daemon's socket, where this link process runs under the daemon; else, for a
/// link that may use a running daemon's worker (`outside`), this user's daemon's when
/// one answers there (in a directory of this user's only; never started for it).
fn daemon_socket(outside: bool) -> Option<PathBuf> {
    if std::env::var_os(super::IN_DAEMON).is_some() {
        return std::env::var_os(VAR).map(PathBuf::from);
    }
    let socket = outside.then(super::socket_path)?;
    super::guard::check_dir(socket.parent()?).ok()?;
    Some(socket)
}

/// A daemon's answer: its frames.
type Answer = Vec<(String, Vec<u8>)>;

/// Asks the daemon; its answer's frames, and the daemon's pid (the kernel's word, from
/// the connection's peer credentials). A daemon that does not answer in 5 s is not
/// asked again in this process.
fn ask(socket: &Path, frames: &[(&str, &[u8])]) -> Option<(Answer, u32)> {
    static SILENT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if SILENT.load(std::sync::atomic::Ordering::Relaxed) {
        return None;
    }
    let mut stream = UnixStream::connect(socket).ok()?;
    let limit = Some(Duration::from_secs(5));
    stream.set_read_timeout(limit).ok()?;
    stream.set_write_timeout(limit).ok()?;
    super::guard::check_server(&stream, socket).ok()?;
    let (_, pid) = super::guard::peer(&stream)?;
    super::send(&mut stream, frames).ok()?;
    match super::receive(&mut stream) {
        Ok(answer) => Some((answer, pid)),
        Err(_) => {
            SILENT.store(true, std::sync::atomic::Ordering::Relaxed);
            None
        }
    }
}

/// The daemon's worker for `lib` (where this link runs under the daemon, or, with
/// `outside`, where this user's daemon runs, and the daemon gives one; `None` otherwise,
/// and the link starts its own): its socket and pid, the daemon's socket (where to ask
/// how it [`ended`]) and pid (its parent).
pub struct Kept {
    pub socket: PathBuf,
    pub pid: u32,
    pub daemon: PathBuf,
    pub parent: u32,
}

pub fn worker(lib: &Path, outside: bool) -> Option<Kept> {
    let daemon = daemon_socket(outside)?;
    let path = lib.to_string_lossy();
    let (answer, parent) = ask(&daemon, &[("finalizer", path.as_bytes())])?;
    let get = |k: &str| {
        (answer.iter())
            .find(|(n, _)| n == k)
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    };
    // (a daemon of another build of nvlinkrs: its worker may speak another protocol)
    if get("exe")? != super::guard::exe_identity() {
        return None;
    }
    // (the worker is the daemon's child: its parent is the pid the kernel gave for the
    // connection, not one the answer names)
    Some(Kept {
        socket: PathBuf::from(get("socket")?),
        pid: get("pid")?.parse().ok().filter(|&p| p > 1)?,
        daemon,
        parent: Some(parent).filter(|&p| p > 1)?,
    })
}

/// How the daemon's worker `pid` for `lib` ended, once it has.
pub fn ended(daemon: &Path, lib: &Path, pid: u32) -> Option<String> {
    let path = lib.to_string_lossy();
    let pid = pid.to_string();
    let (answer, _) = ask(
        daemon,
        &[("finalizer", path.as_bytes()), ("ended", pid.as_bytes())],
    )?;
    // (the daemon's words, printed: no control character of theirs reaches a terminal)
    (answer.iter()).find(|(k, _)| k == "ended").map(|(_, v)| {
        (String::from_utf8_lossy(v).chars())
            .map(|c| if c.is_control() { '?' } else { c })
            .take(200)
            .collect()
    })
}

/// Whether `pid` is a live worker of the daemon `parent` (its parent, and it has not
/// ended).
pub fn is_worker(pid: u32, parent: u32) -> bool {
    super::guard::state_and_parent(pid).is_some_and(|(state, ppid)| state != 'Z' && ppid == parent)
}

/// Stops the worker `pid` of the daemon `parent` (it made no progress): only a child of
/// the daemon that runs this executable (a group leader the daemon named, not the
/// worker, is left alone).
pub fn stop(pid: u32, parent: u32) {
    let ours = super::guard::exe_identity();
    let same = !ours.is_empty() && super::guard::exe_identity_of(&pid.to_string()) == ours;
    if same && is_worker(pid, parent) {
        crate::child::kill_group(pid);
    }
}

#[cfg(test)]
mod tests {
    /// A child of the daemon that does not run this executable is not stopped, though a
    /// daemon's answer named it as its worker (was: any process group whose leader's
    /// parent the answer named was killed, an attacker's review).
    #[test]
    fn a_process_named_as_the_worker_is_stopped_only_if_it_runs_this_executable() {
        use std::os::unix::process::CommandExt;
        let mut victim = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = victim.id();
        let parent = std::process::id();
        assert!(super::is_worker(pid, parent));
        super::stop(pid, parent);
        super::stop(pid, 0);
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(
            victim.try_wait().unwrap().is_none(),
            "the process was killed"
        );
        victim.kill().unwrap();
        victim.wait().unwrap();
    }
}
