//! Background work of the daemon: the partitions of an incremental link's program built
//! after its first (whole-program) link answered, and the sm_100+ finalizer's per-unit
//! jobs of an incremental link that finalized its whole program in one job. A request
//! carries the link's arguments, working directory, environment snapshot and cache key,
//! like a link's; the daemon queues it, answers at once, and runs the jobs one at a time
//! on a thread of its own as child links at the lowest priority (nice 19, one job of the budget) with
//! `NVLINKRS_INCREMENTAL=partitions` and the background mark, which makes the child write
//! its image to a private scratch folder it removes (the user's output is not touched).
//! A job reads the link's inputs when it runs, not when it is queued, so a newer request
//! for the same link (the same arguments, directory and environment, whatever its key)
//! takes the place of one still queued: rapid edits queue one build, not one per edit.
//! At most [`MAX_QUEUED`] jobs wait; past that the oldest is dropped (its link's next
//! relink asks again).
//! A link with an input or an options file that is not a regular file (a FIFO, a
//! device) asks for none, and a build opens only regular files.
//! `daemon status` reports the queue (`idle` when empty). The link asking for it does so
//! through [`request`], once it is done.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::cli::LinkRequest;
use crate::diag::Diagnostics;
use crate::linkenv::LinkEnv;
use crate::lto::incremental::background::{IMAGE, MARK, as_background, is_background};

/// One queued build: the request's frames.
type Job = Vec<(String, Vec<u8>)>;

/// The most builds that wait in the queue (distinct links: a build of a link already
/// queued takes the queued one's place).
pub const MAX_QUEUED: usize = 16;

/// Whether two jobs build the same link: the same frames but for the cache key, which
/// changes with the inputs' contents, and make's `MAKEFLAGS`, which names a new jobserver
/// on every make run and which the build does not take (`command`).
fn same_link(a: &Job, b: &Job) -> bool {
    let kept =
        |(k, v): &&(String, Vec<u8>)| k != "key" && !(k == "env" && v.starts_with(b"MAKEFLAGS="));
    let link = |j: &Job| j.iter().filter(kept).cloned().collect::<Vec<_>>();
    link(a) == link(b)
}

#[derive(Default)]
pub struct Queue {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    /// The child running now, by pid.
    running: Option<u32>,
    stopping: bool,
}

impl Queue {
    /// Queues a request's build: in the place of a queued build of the same link (which
    /// would read the same files when it ran), else last, dropping the oldest when
    /// [`MAX_QUEUED`] wait.
    pub fn push(&self, job: Job) {
        let mut s = self.state.lock().unwrap();
        if let Some(at) = s.jobs.iter().position(|j| same_link(j, &job)) {
            s.jobs[at] = job;
            return;
        }
        if s.jobs.len() >= MAX_QUEUED {
            s.jobs.pop_front();
        }
        s.jobs.push_back(job);
        self.wake.notify_all();
    }

    /// (queued, running) for `daemon status`.
    pub fn counts(&self) -> (u64, u64) {
        let s = self.state.lock().unwrap();
        (s.jobs.len() as u64, s.running.is_some() as u64)
    }

    pub fn busy(&self) -> bool {
        let (q, r) = self.counts();
        q + r > 0
    }

    /// Ends the worker: the queue is dropped, a running build is killed.
    pub fn stop(&self) {
        let mut s = self.state.lock().unwrap();
        s.stopping = true;
        s.jobs.clear();
        if let Some(pid) = s.running {
            // SAFETY: kill(2) on the process group of a child this daemon started (the
            // build and its ptxas jobs); child::run reaps it.
            unsafe {
                libc::kill(-(pid as libc::pid_t), libc::SIGKILL);
            }
        }
        self.wake.notify_all();
    }

    /// The worker: runs the jobs one by one until stopped.
    pub fn work(&self, forwarded: impl Fn(&str) -> bool) {
        loop {
            let job = {
                let mut s = self.state.lock().unwrap();
                loop {
                    if s.stopping {
                        return;
                    }
                    if let Some(j) = s.jobs.pop_front() {
                        break j;
                    }
                    s = self.wake.wait(s).unwrap();
                }
            };
            let Some(mut cmd) = command(&job, &forwarded) else {
                continue;
            };
            // (the pid recorded before the child can run long: stop() kills its group)
            let _ = crate::child::run_started(&mut cmd, Vec::new(), limits(), |pid| {
                self.state.lock().unwrap().running = Some(pid)
            });
            self.state.lock().unwrap().running = None;
        }
    }
}

/// Asks this user's daemon (started when none runs) for the partitions of the link `req`
/// (or the finalizer's jobs of its units: `what`, as `-v` says it), in the environment
/// `env` (its snapshot), to be built in the background; under `-v` says whether it took
/// them. The request carries the snapshot and the cache key of the
/// link the background build runs ([`key`], made by `key_of`: `linkcache::key_of`, which
/// the spine hands in, as the daemon does not import the link cache), as a link's
/// request to the daemon does.
pub fn request(
    req: &LinkRequest,
    env: &LinkEnv,
    diag: &Diagnostics,
    key_of: KeyOfRequest,
    what: &str,
) {
    if is_background(env) || req.nvjitlink {
        return;
    }
    // (the build reads the inputs and options files again when it runs: one that is not
    // a regular file, a FIFO or a device, would not give it what this link read, and a
    // FIFO's read would hold the daemon's one worker until a writer came; the build
    // itself opens only regular files, `input::open_to_read`, for one put there later)
    let odd = (req.inputs.iter().chain(&req.options_files))
        .find(|p| !std::fs::metadata(p).is_ok_and(|m| m.is_file()));
    if let Some(odd) = odd {
        if req.verbose {
            let shown = odd.display();
            diag.info(&format!(
                "{what} are not built in the background: '{shown}' is not a regular file"
            ));
        }
        return;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let queued = queue(&args, env, key(req, env, key_of).as_deref());
    if req.verbose {
        diag.info(&match queued {
            true => format!("{what} are being built in the background (nvlinkrs daemon status)"),
            false => format!("{what}: no daemon could take the background build; NVLINKRS_INCREMENTAL=partitions builds them in a link"),
        });
    }
}

/// The whole-link cache key of the background build of `req` (in partitions mode, marked,
/// its request as `lto::incremental::background::adjust` makes it), from the link's
/// snapshot `env`: what queued builds are merged by (`None`: the link is not cached, and
/// its build is never merged).
fn key(req: &LinkRequest, env: &LinkEnv, key_of: KeyOfRequest) -> Option<String> {
    let mut req = req.clone();
    as_background(&mut req, PathBuf::from(IMAGE));
    let mut env = env.clone();
    env.set(crate::cli::incremental::VAR, Some("partitions"));
    env.set(MARK, Some("1"));
    key_of(&req, &env)
}

/// Asks this user's daemon (started when none runs; where this process is one of a
/// daemon's links, that daemon: [`home_socket`]) to build the partitions of the link of
/// `args` in the background; false when no daemon could take it. As a link's request, it
/// carries the link's environment snapshot `env` and the cache key of the build (`key`,
/// when it has one).
fn queue(args: &[String], env: &crate::linkenv::LinkEnv, key: Option<&str>) -> bool {
    let Ok(cwd) = std::env::current_dir() else {
        return false;
    };
    let mut frames: Vec<(&str, Vec<u8>)> = vec![("background", Vec::new())];
    frames.extend(args.iter().map(|a| ("arg", a.clone().into_bytes())));
    frames.push(("cwd", cwd.to_string_lossy().into_owned().into_bytes()));
    frames.extend(env.forwarded().map(|kv| ("env", kv.into_bytes())));
    if let Some(key) = key {
        frames.push(("key", key.as_bytes().to_vec()));
    }
    frames.push(("exe", super::guard::exe_identity().into_bytes()));
    let refs: Vec<(&str, &[u8])> = frames.iter().map(|(k, v)| (*k, v.as_slice())).collect();
    let Ok(Some(mut stream)) = super::connect_trusted(&home_socket()) else {
        return false;
    };
    // (a daemon that is stopped or stuck does not hold the link that asked: it answers
    // at once, the build queued)
    let limit = Some(Duration::from_secs(5));
    if stream.set_read_timeout(limit).is_err() || stream.set_write_timeout(limit).is_err() {
        return false;
    }
    super::send(&mut stream, &refs).is_ok()
        && super::receive(&mut stream)
            .is_ok_and(|a| a.iter().any(|(k, v)| k == "exit" && v == b"0"))
}

/// The socket of the daemon to ask: the daemon's own where this process is one of its
/// link processes (it hands them its socket's path: their `XDG_RUNTIME_DIR` and `TMPDIR`
/// are the client's, which may name another), else this user's ([`super::socket_path`]).
fn home_socket() -> PathBuf {
    match std::env::var_os(super::IN_DAEMON).and(std::env::var_os(super::finalizer::VAR)) {
        Some(socket) => PathBuf::from(socket),
        None => super::socket_path(),
    }
}

/// The whole-link cache key of a request in an environment (`linkcache::key_of`).
pub type KeyOfRequest = fn(&LinkRequest, &LinkEnv) -> Option<String>;

/// What a background build may take (`child::Limits`): an hour of wall time (or
/// `NVLINKRS_CHILD_TIMEOUT`'s seconds), no stall limit (it may wait for the cache's
/// lock), and a MiB of output (it prints nothing but errors).
fn limits() -> crate::child::Limits {
    let hour = std::time::Duration::from_secs(3600);
    crate::child::Limits {
        wall: crate::child::Limits::wall_for(0, hour, std::time::Duration::ZERO),
        stall: None,
        stdout: 1 << 20,
    }
}

/// The child link of a job: the daemon's own binary, in the request's directory with
/// the request's environment, at the lowest priority, its output thrown away.
fn command(job: &Job, forwarded: &impl Fn(&str) -> bool) -> Option<std::process::Command> {
    let text = |v: &[u8]| String::from_utf8_lossy(v).into_owned();
    let cwd = job
        .iter()
        .find(|(k, _)| k == "cwd")
        .map(|(_, v)| PathBuf::from(text(v)))
        .filter(|c| c.is_absolute() && c.is_dir())?;
    // (child::command: its own process group, killed with the daemon's worker thread)
    let mut cmd = crate::child::command("/proc/self/exe");
    cmd.args(job.iter().filter(|(k, _)| k == "arg").map(|(_, v)| text(v)))
        .current_dir(cwd)
        .env_clear()
        .env(super::IN_DAEMON, "1");
    for (_, v) in job.iter().filter(|(k, _)| k == "env") {
        if let Some((name, value)) = text(v).split_once('=')
            && forwarded(name)
            && name != "MAKEFLAGS"
        {
            cmd.env(name, value);
        }
    }
    cmd.env(crate::cli::incremental::VAR, "partitions")
        .env(MARK, "1")
        .env("NVLINKRS_JOBS", "1");
    // SAFETY: setpriority(2) is async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::setpriority(libc::PRIO_PROCESS, 0, 19);
            Ok(())
        });
    }
    Some(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(output: &str, key: Option<&str>) -> Job {
        let mut j: Job = vec![
            ("background".into(), Vec::new()),
            ("arg".into(), b"-dlto".to_vec()),
            ("arg".into(), format!("-o{output}").into_bytes()),
            ("cwd".into(), b"/".to_vec()),
        ];
        j.extend(key.map(|k| ("key".to_string(), k.as_bytes().to_vec())));
        j
    }

    fn queued(q: &Queue) -> Vec<Job> {
        q.state.lock().unwrap().jobs.iter().cloned().collect()
    }

    /// A newer build of a link takes the place of the queued one, whatever the key (an
    /// edit changes it); builds of other links keep theirs.
    #[test]
    fn a_newer_build_of_a_queued_link_takes_its_place() {
        let q = Queue::default();
        q.push(job("a", Some("k1")));
        q.push(job("b", Some("k1")));
        q.push(job("a", Some("k2")));
        q.push(job("b", None));
        assert_eq!(queued(&q), vec![job("a", Some("k2")), job("b", None)]);
        // (under make: each make run names its own jobserver, which the build leaves out)
        let under_make = |key: &str, fifo: &str| {
            let mut j = job("a", Some(key));
            let flags = format!("MAKEFLAGS= -j2 --jobserver-auth=fifo:{fifo}");
            j.push(("env".into(), flags.into_bytes()));
            j
        };
        q.push(under_make("k3", "GMfifo1"));
        q.push(under_make("k4", "GMfifo2"));
        let want = vec![under_make("k4", "GMfifo2"), job("b", None)];
        assert_eq!(queued(&q), want);
        q.stop();
        assert_eq!(q.counts(), (0, 0));
    }

    /// Rapid links of many outputs queue at most `MAX_QUEUED` builds, the newest.
    #[test]
    fn the_queue_keeps_the_newest_builds_past_its_cap() {
        let q = Queue::default();
        for n in 0..MAX_QUEUED + 3 {
            q.push(job(&n.to_string(), Some("k")));
        }
        let jobs = queued(&q);
        assert_eq!(jobs.len(), MAX_QUEUED);
        assert_eq!(jobs[0], job("3", Some("k")));
        assert_eq!(
            jobs[MAX_QUEUED - 1],
            job(&(MAX_QUEUED + 2).to_string(), Some("k"))
        );
    }
}
