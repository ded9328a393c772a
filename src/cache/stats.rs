//! The cache's counters across links, kept in its directory ([`FILE`]) as sccache's
//! server keeps its own: links run (through the daemon or not, failed or not), the
//! whole-link cache's hits and misses, every stage's hits (local and from the shared tier),
//! misses, stores and bytes, the time the links took and the time hits saved (what each
//! entry found had taken to make, less the lookup), and the fallbacks (a finalizer that
//! failed, a shared tier that failed). Each process adds what it did under an exclusive
//! lock on the file (`flock`), read, added to and written back in place, so that links
//! ending together all count; `nvlinkrs stats` reads it, `--zero` empties it. The shared
//! tier's own counters by URL stay in their file ([`super::remote::STATS`]), which is
//! updated the same way ([`update_locked`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::tally::StageCounts;

/// The counters' file in the cache's root.
pub const FILE: &str = super::guard::STATS;

/// The most of a counters file read.
const MAX: u64 = 1 << 20;

/// What one link was, for the counters.
#[derive(Clone, Debug, Default)]
pub struct LinkFacts {
    /// The whole-link cache's answer: `hit`, `miss`, `not cached` (or `off`, `changed`).
    pub whole_link: String,
    pub failed: bool,
    pub took: Duration,
    /// It ran in a link process of the daemon.
    pub daemon: bool,
    /// The finalizer failed and the link went on without it.
    pub finalizer_fell_back: bool,
    /// The shared tier failed during the link (and was left alone after).
    pub shared_tier_failed: bool,
}

/// The whole-link cache's answers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WholeLink {
    pub hits: u64,
    pub misses: u64,
    /// Links the cache does not take (`-v`, `-time`, a FIFO input, ...).
    pub not_cached: u64,
}

/// Fallbacks: links that went on without something that failed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Fallbacks {
    pub finalizer: u64,
    pub shared_tier: u64,
}

/// The counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Totals {
    /// When counting started (seconds since the epoch): the first link, or the last
    /// `--zero`.
    pub since_unix: u64,
    pub links: u64,
    pub failed_links: u64,
    pub daemon_requests: u64,
    pub whole_link: WholeLink,
    pub stages: BTreeMap<String, StageCounts>,
    /// The links' wall time, in microseconds.
    pub time_spent_us: u64,
    pub fallbacks: Fallbacks,
}

impl Totals {
    /// One link's counts.
    pub fn of_link(link: &LinkFacts, stages: BTreeMap<String, StageCounts>) -> Totals {
        let mut t = Totals::of_stages(stages);
        t.links = 1;
        t.failed_links = link.failed as u64;
        t.daemon_requests = link.daemon as u64;
        match link.whole_link.as_str() {
            "hit" => t.whole_link.hits = 1,
            "miss" | "changed" => t.whole_link.misses = 1,
            "not cached" => t.whole_link.not_cached = 1,
            _ => {}
        }
        t.time_spent_us = link.took.as_micros() as u64;
        t.fallbacks = Fallbacks {
            finalizer: link.finalizer_fell_back as u64,
            shared_tier: link.shared_tier_failed as u64,
        };
        t
    }

    /// The counts of a process's stages alone (a helper process, not a link).
    pub fn of_stages(stages: BTreeMap<String, StageCounts>) -> Totals {
        Totals {
            stages,
            ..Default::default()
        }
    }

    fn add(&mut self, o: &Totals) {
        if self.since_unix == 0 {
            self.since_unix = now_unix();
        }
        self.links = self.links.saturating_add(o.links);
        self.failed_links = self.failed_links.saturating_add(o.failed_links);
        self.daemon_requests = self.daemon_requests.saturating_add(o.daemon_requests);
        self.whole_link.hits = self.whole_link.hits.saturating_add(o.whole_link.hits);
        self.whole_link.misses = self.whole_link.misses.saturating_add(o.whole_link.misses);
        self.whole_link.not_cached = self
            .whole_link
            .not_cached
            .saturating_add(o.whole_link.not_cached);
        for (stage, c) in &o.stages {
            self.stages.entry(stage.clone()).or_default().add(c);
        }
        self.time_spent_us = self.time_spent_us.saturating_add(o.time_spent_us);
        self.fallbacks.finalizer = self
            .fallbacks
            .finalizer
            .saturating_add(o.fallbacks.finalizer);
        self.fallbacks.shared_tier = self
            .fallbacks
            .shared_tier
            .saturating_add(o.fallbacks.shared_tier);
    }

    /// The time hits saved, all stages together, in microseconds.
    pub fn time_saved_us(&self) -> u64 {
        (self.stages.values()).fold(0u64, |t, c| t.saturating_add(c.saved_us))
    }
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Adds `mine` to the counters of the cache at `dir`.
pub fn add(dir: &Path, mine: &Totals) -> std::io::Result<()> {
    update_locked(&dir.join(FILE), |text| {
        let mut all: Totals = serde_json::from_str(text).unwrap_or_default();
        all.add(mine);
        serde_json::to_vec_pretty(&all).map_err(std::io::Error::other)
    })
}

/// The counters of the cache at `dir` (nothing counted: all zero).
pub fn read(dir: &Path) -> Totals {
    super::guard::read_regular(&dir.join(FILE), MAX)
        .ok()
        .flatten()
        .and_then(|t| serde_json::from_slice(&t).ok())
        .unwrap_or_default()
}

/// Sets the counters of the cache at `dir` to zero, the shared tiers' too, counting
/// from now: the counters as they were, read under the same lock (a link that ends
/// meanwhile is counted in one or the other, never lost).
pub fn zero(dir: &Path) -> std::io::Result<Totals> {
    let mut before = Totals::default();
    update_locked(&dir.join(FILE), |text| {
        before = serde_json::from_str(text).unwrap_or_default();
        let fresh = Totals {
            since_unix: now_unix(),
            ..Default::default()
        };
        serde_json::to_vec_pretty(&fresh).map_err(std::io::Error::other)
    })?;
    update_locked(
        &dir.join(super::guard::SHARED_STATS),
        |_| Ok(b"{}".to_vec()),
    )?;
    Ok(before)
}

/// How long a link waits for the counters' lock before it leaves its counts out (a
/// process stopped while holding it never holds up the links after it).
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Set in a process whose links must not wait on another's lock at all (the drop-in
/// libnvJitLink, in its host's process: a hit costs a millisecond or two, and a stopped
/// process holding the lock made each of its links wait [`LOCK_WAIT`]).
static NO_WAITING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes this process's links leave their counts out rather than wait for the lock.
pub fn never_wait_for_the_lock() {
    NO_WAITING.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Takes an exclusive `flock` on `file` (on its open file description: released when the
/// last descriptor of it closes), waiting at most `wait`. The wait is the kernel's queue, in
/// a thread of its own on a copy of the descriptor, which keeps the lock for `file` when it
/// gets it in time and lets it go when it gets it too late (was: polling without waiting,
/// which let links that ended together keep taking the lock from one, whose counts were
/// then left out: 7 of 8 counted with three CPU hogs beside them).
fn lock_within(file: &std::fs::File, wait: Duration) -> std::io::Result<()> {
    // (a free lock taken at once, on this thread: the common case makes no thread)
    let fd = std::os::fd::AsRawFd::as_raw_fd(file);
    // SAFETY: flock on the caller's open descriptor, without blocking.
    if unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(());
    }
    if wait.is_zero() || NO_WAITING.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::WouldBlock,
            "the counters' lock is held",
        ));
    }
    let waiter = file.try_clone()?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&waiter);
        let got = loop {
            // SAFETY: flock on a descriptor this thread owns (a copy of the caller's).
            if unsafe { libc::flock(fd, libc::LOCK_EX) } == 0 {
                break Ok(());
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                break Err(e);
            }
        };
        // (too late: the caller has gone, and closing `waiter` lets the lock go)
        let _ = tx.send(got);
    });
    match rx.recv_timeout(wait) {
        Ok(got) => got,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "the counters' lock was held too long",
        )),
    }
}

/// Rewrites the file at `path` (made 0600 when missing; left alone when it is not a
/// regular file) with what `f` makes of its text, under an exclusive lock on it, so that
/// processes updating it together all count.
pub fn update_locked(
    path: &Path,
    f: impl FnOnce(&str) -> std::io::Result<Vec<u8>>,
) -> std::io::Result<()> {
    use std::io::{Read, Seek, Write};
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Ok(());
    }
    lock_within(&file, LOCK_WAIT)?;
    // (a damaged file, not text, counts as empty: counting starts again)
    let mut bytes = Vec::new();
    (&mut file).take(MAX).read_to_end(&mut bytes)?;
    let out = f(&String::from_utf8_lossy(&bytes))?;
    // (written over, then cut to its length: no blocks freed and taken again when the
    // counters keep their size, as they mostly do)
    file.rewind()?;
    file.write_all(&out)?;
    file.set_len(out.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_link(whole: &str) -> Totals {
        let mut stages = BTreeMap::new();
        stages.insert(
            "ptxas".to_string(),
            StageCounts {
                local_hits: 2,
                misses: 1,
                saved_us: 10,
                ..Default::default()
            },
        );
        Totals::of_link(
            &LinkFacts {
                whole_link: whole.into(),
                took: Duration::from_micros(7),
                ..Default::default()
            },
            stages,
        )
    }

    /// Threads adding at once, each through its own open file (as processes do): no
    /// count is lost.
    #[test]
    fn counters_added_at_once_all_count() {
        let d = tempfile::tempdir().unwrap();
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..25 {
                        add(d.path(), &one_link("miss")).unwrap();
                    }
                });
            }
        });
        let t = read(d.path());
        assert_eq!(t.links, 200);
        assert_eq!(t.whole_link.misses, 200);
        assert_eq!(t.stages["ptxas"].local_hits, 400);
        assert_eq!(t.time_saved_us(), 2000);
        assert_eq!(t.time_spent_us, 1400);
        assert!(t.since_unix > 0);
        zero(d.path()).unwrap();
        let z = read(d.path());
        assert_eq!((z.links, z.stages.len()), (0, 0));
    }
}
