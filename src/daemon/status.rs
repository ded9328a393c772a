//! `nvlinkrs daemon status`: whether this user's daemon runs, on which socket, for how
//! long, how many links it has served, and its background work (`idle` when none). No daemon is an answer, not an error; a socket
//! directory or server that is not to be trusted is (nothing is sent to it).

use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use super::{guard, receive, send};
use crate::diag::Result;

/// What a running daemon says of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub pid: u32,
    pub uptime: Duration,
    /// Links answered to clients since it started.
    pub served: u64,
    /// Links running now.
    pub running: u64,
    /// Background builds (incremental LTO's partitions) queued and running.
    pub background_queued: u64,
    pub background_running: u64,
}

/// The status frames a daemon answers with.
pub fn frames(s: &Status) -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("pid", s.pid.to_string().into_bytes()),
        ("uptime_ms", s.uptime.as_millis().to_string().into_bytes()),
        ("served", s.served.to_string().into_bytes()),
        ("running", s.running.to_string().into_bytes()),
        ("bg_queued", s.background_queued.to_string().into_bytes()),
        ("bg_running", s.background_running.to_string().into_bytes()),
    ]
}

/// Asks the daemon on `socket`: `None` when none answers (or one of another nvlinkrs
/// binary, which stops on being asked), an error when its directory or server is not this
/// user's.
pub fn query(socket: &Path) -> Result<Option<Status>> {
    let dir = socket.parent().expect("socket in a directory");
    if std::fs::symlink_metadata(dir).is_err() {
        return Ok(None);
    }
    guard::check_dir(dir)?;
    let Ok(mut stream) = UnixStream::connect(socket) else {
        return Ok(None);
    };
    guard::check_server(&stream, socket)?;
    let exe = guard::exe_identity();
    if send(&mut stream, &[("status", b""), ("exe", exe.as_bytes())]).is_err() {
        return Ok(None);
    }
    let Ok(answer) = receive(&mut stream) else {
        return Ok(None);
    };
    let number = |name: &str| -> Option<u64> {
        let (_, v) = answer.iter().find(|(k, _)| k == name)?;
        std::str::from_utf8(v).ok()?.parse().ok()
    };
    Ok(Some(Status {
        pid: number("pid")
            .and_then(|p| u32::try_from(p).ok())
            .unwrap_or(0),
        uptime: Duration::from_millis(number("uptime_ms").unwrap_or(0)),
        served: number("served").unwrap_or(0),
        running: number("running").unwrap_or(0),
        background_queued: number("bg_queued").unwrap_or(0),
        background_running: number("bg_running").unwrap_or(0),
    })
    .filter(|s| s.pid != 0))
}

/// What `daemon status` prints: the last line says whether background work is queued
/// (`background idle` when none, as with no daemon: nothing can be queued then).
pub fn text(socket: &Path, status: Option<&Status>) -> String {
    match status {
        None => format!(
            "not running\nsocket {}\nbackground idle\n",
            socket.display()
        ),
        Some(s) => format!(
            "running\npid {}\nsocket {}\nuptime {} s\nlinks served {}\nlinks running {}\n{}\n",
            s.pid,
            socket.display(),
            s.uptime.as_secs(),
            s.served,
            s.running,
            match (s.background_queued, s.background_running) {
                (0, 0) => "background idle".to_string(),
                (q, r) => format!("background {q} queued, {r} running"),
            }
        ),
    }
}
