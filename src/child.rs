//! The one supervisor of the child processes a link starts: libNVVM's split compile
//! (`lto::isolated`), the LLVM helper (`lto::llvm_helper`), libnvJitLink's finalizer
//! (`finalize::isolated`) and the daemon's background builds (`daemon::background`). Such a child runs code the link cannot trust in its own process,
//! so it is held to [`Limits`]: a wall-clock limit, optionally a stall limit (no CPU time
//! for so long), and a cap on its answer (stdout; its stderr is kept to [`STDERR_KEPT`] and
//! the rest drained). A child past a limit is killed with its whole process group; so is
//! whatever it leaves in its group when it ends (a grandchild holding the pipes).
//!
//! The interface is two calls: [`command`] makes the child's `Command` (its three ends
//! piped, a process group of its own, killed when the thread that starts it ends, as a
//! link killed by the user or the daemon ends), [`run`] (or [`run_started`]) starts it, feeds it its request
//! and returns how it ended with what it wrote; a [`Cancel`] lets another thread stop a
//! child whose answer is no longer needed. Nothing else is shared between callers;
//! each phrases its own messages from the [`Ending`]. The hidden subcommands by which
//! nvlinkrs runs itself as such a child are here too ([`self_command`], [`started_as`]).

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What a child may take before it is stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock time from its start.
    pub wall: Duration,
    /// Time without using any CPU (`None`: never stopped for that; for a child that may
    /// wait, as for job tokens). Where `/proc` cannot be read no stall is declared.
    pub stall: Option<Duration>,
    /// Bytes of stdout; one more stops it.
    pub stdout: u64,
}

/// The usual stall limit: a child that computes (a library's compile) and does no I/O
/// but its pipes has made no progress when it used no CPU time for this long.
pub const STALL: Duration = Duration::from_secs(10);

/// The environment variable that sets every child's wall-clock limit, in seconds (a
/// positive integer; else the caller's default stands).
pub const TIMEOUT_VAR: &str = "NVLINKRS_CHILD_TIMEOUT";

impl Limits {
    /// The wall-clock limit for a request of `request` bytes: `base`, plus `per_mib` for
    /// each MiB (begun) of it; or [`TIMEOUT_VAR`]'s seconds where that is set.
    pub fn wall_for(request: usize, base: Duration, per_mib: Duration) -> Duration {
        let set = std::env::var(TIMEOUT_VAR).ok();
        match set.and_then(|v| v.trim().parse::<u64>().ok()) {
            Some(s) if s > 0 => Duration::from_secs(s),
            _ => base + per_mib * u32::try_from(request.div_ceil(1 << 20)).unwrap_or(u32::MAX),
        }
    }
}

/// The most of a child's stderr kept (for its message); the rest is read and dropped.
pub const STDERR_KEPT: u64 = 1 << 20;

/// How a child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// It exited (or a signal ended it) by itself.
    Exited(ExitStatus),
    /// Stopped: no CPU time for [`Limits::stall`].
    Stalled(Duration),
    /// Stopped: it ran for [`Limits::wall`].
    TimedOut(Duration),
    /// Stopped: it wrote more than [`Limits::stdout`] bytes.
    TooLong(u64),
    /// It ended, but its stdout stayed open (a process outside its group holds it).
    OutputLeftOpen,
}

impl Ending {
    /// How a child that is to run until it is told (a worker) ended, as [`describe`]
    /// says, but `"failed (exit status: 3)"` for one that exited by itself.
    ///
    /// [`describe`]: Ending::describe
    pub fn failure(&self) -> String {
        use std::os::unix::process::ExitStatusExt;
        match self {
            Ending::Exited(st) if st.signal().is_none() => format!("failed ({st})"),
            other => other.describe(),
        }
    }

    /// Why a child that did not exit by itself was stopped, as the end of a sentence
    /// whose subject is the child (`"ran for 60 s, its limit, and was stopped"`); for
    /// [`Ending::Exited`] its status (`"ended by exit status: 3"`, `"crashed (SIGSEGV)"`).
    pub fn describe(&self) -> String {
        use std::os::unix::process::ExitStatusExt;
        match self {
            Ending::Exited(st) => match st.signal() {
                None => format!("ended by {st}"),
                Some(n) => format!("crashed ({})", signal_name(n)),
            },
            Ending::Stalled(d) => {
                format!("used no CPU time for {} s and was stopped", d.as_secs())
            }
            Ending::TimedOut(d) => format!("ran for {} s, its limit, and was stopped", d.as_secs()),
            Ending::TooLong(n) => format!("wrote more than {n} bytes and was stopped"),
            Ending::OutputLeftOpen => {
                "ended but its output stayed open (a process it started holds it)".to_string()
            }
        }
    }
}

/// `SIGSEGV` for 11, ..., `signal N` for one without a name here.
pub fn signal_name(n: i32) -> String {
    let name = match n {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGABRT => "SIGABRT",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        _ => return format!("signal {n}"),
    };
    name.to_string()
}

/// What [`run`] gives back.
#[derive(Debug)]
pub struct Finished {
    pub ending: Ending,
    /// At most [`Limits::stdout`] bytes (empty where it stayed open).
    pub stdout: Vec<u8>,
    /// At most [`STDERR_KEPT`] bytes.
    pub stderr: Vec<u8>,
}

/// A command for `program` as a supervised child: stdin, stdout and stderr piped, a
/// process group of its own (so that it is stopped with whatever it started), and
/// `SIGKILL` when the thread that starts it ends (Linux `PR_SET_PDEATHSIG`: [`run`]'s
/// caller waits for it on that thread, so the child never outlives the link).
pub fn command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(program);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    #[cfg(target_os = "linux")]
    // SAFETY: the closure only calls prctl, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd
}

/// The hidden subcommand of the sm_100+ finalizer's worker (`finalize::worker`), which
/// the daemon starts too.
pub const FINALIZER: &str = "__finalize";

/// Set (to the subcommand) in the environment of nvlinkrs run as its own child: a first
/// argument that names a hidden subcommand is one only with it (else it is an input file
/// of that name).
pub const CHILD_VAR: &str = "NVLINKRS_CHILD";

/// This program as a supervised child running the hidden subcommand `name` ([`command`]).
pub fn self_command(name: &str) -> std::io::Result<Command> {
    // (the running program itself, even where its file was deleted or replaced since it
    // started, as a package upgrade during a build does: `current_exe` then names a path
    // that is gone or another program)
    let own = std::path::Path::new("/proc/self/exe");
    let exe = match cfg!(target_os = "linux") && own.exists() {
        true => own.to_path_buf(),
        false => std::env::current_exe()?,
    };
    let mut cmd = command(&exe);
    cmd.env(CHILD_VAR, name).arg(name);
    Ok(cmd)
}

/// Whether this process was started as the hidden subcommand `name` (its first argument,
/// and [`CHILD_VAR`] naming it).
pub fn started_as(args: &[String], name: &str) -> bool {
    args.first().is_some_and(|a| a == name)
        && std::env::var_os(CHILD_VAR).is_some_and(|v| v == name)
}

/// The program a command runs, for messages.
pub fn program(cmd: &Command) -> String {
    Path::new(cmd.get_program()).display().to_string()
}

/// Starts `cmd` (made by [`command`]), writes `stdin` to it and collects what it writes,
/// within `limits`. An error only where it cannot be started or watched (no process, no
/// thread); every ending of a started child is an [`Ending`].
pub fn run(cmd: &mut Command, stdin: Vec<u8>, limits: Limits) -> std::io::Result<Finished> {
    run_started(cmd, stdin, limits, |_| {})
}

/// [`run`], telling `started` the child's pid (its process group's number) once it runs:
/// for a caller that may have to stop it from another thread (the daemon's background
/// builds, stopped with the daemon).
pub fn run_started(
    cmd: &mut Command,
    stdin: Vec<u8>,
    limits: Limits,
    started: impl FnOnce(u32),
) -> std::io::Result<Finished> {
    let start = Instant::now();
    let mut child = cmd.spawn()?;
    started(child.id());
    let pipes = match Pipes::serve(&mut child, stdin, limits.stdout) {
        Ok(p) => p,
        Err(e) => {
            stop(&mut child);
            return Err(e);
        }
    };
    let (ending, stdout) = match watch(&mut child, &pipes, limits, start) {
        Ok(x) => x,
        Err(e) => {
            stop(&mut child);
            return Err(e);
        }
    };
    // (the child's ends close as its group ends; a little grace for the last bytes)
    let until = Instant::now() + Duration::from_secs(2);
    let left = || until.saturating_duration_since(Instant::now());
    let stdout = stdout
        .ok_or(())
        .or_else(|_| pipes.out.recv_timeout(left()).map_err(|_| ()));
    let stderr = pipes.err.recv_timeout(left()).unwrap_or_default();
    let ending = match (ending, &stdout) {
        (_, _) if pipes.too_long.load(Ordering::SeqCst) => Ending::TooLong(limits.stdout),
        (Ending::Exited(_), Err(())) => Ending::OutputLeftOpen,
        (e, _) => e,
    };
    Ok(Finished {
        ending,
        stdout: stdout.unwrap_or_default(),
        stderr,
    })
}

/// A child that serves requests for a while rather than answer one (the finalizer's
/// worker, which takes its jobs on a socket): [`run`] on a thread of its own, which waits
/// for it (so the child lives as long as it needs, not as long as the thread that asked
/// for it), with the same limits (a child that waits for work between requests has no
/// stall limit: its clients watch each request) and the same endings.
pub struct Background {
    pub pid: u32,
    done: Arc<(Mutex<Done>, Condvar)>,
}

/// How a [`Background`] child ended, once it has (`Err`: it could no longer be watched,
/// and was stopped).
type Done = Option<Result<Finished, String>>;

/// Starts `cmd` (made by [`command`]) as a [`Background`] child; `stdin` is written to it
/// where its standard input is piped.
pub fn run_in_background(
    mut cmd: Command,
    stdin: Vec<u8>,
    limits: Limits,
) -> std::io::Result<Background> {
    let done: Arc<(Mutex<Done>, Condvar)> = Arc::default();
    let (slot, (tx, rx)) = (done.clone(), channel());
    let told = tx.clone();
    std::thread::Builder::new()
        .name("nvlinkrs-child".into())
        .spawn(move || {
            let r = run_started(&mut cmd, stdin, limits, |pid| {
                let _ = told.send(Ok(pid));
            });
            let r = match r {
                Ok(f) => Ok(f),
                Err(e) => {
                    let text = e.to_string();
                    let _ = tx.send(Err(e));
                    Err(text)
                }
            };
            *slot.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            slot.1.notify_all();
        })?;
    let pid = rx
        .recv()
        .map_err(|_| std::io::Error::other("the child's thread ended"))??;
    Ok(Background { pid, done })
}

impl Background {
    /// How it ended (`None` while it runs, or while it is not yet reaped), waiting at most
    /// `wait` for that.
    pub fn ending(&self, wait: Duration) -> Option<Result<Ending, String>> {
        let (slot, cv) = &*self.done;
        let guard = slot.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = cv
            .wait_timeout_while(guard, wait, |g| g.is_none())
            .unwrap_or_else(|e| e.into_inner());
        guard
            .as_ref()
            .map(|r| r.as_ref().map(|f| f.ending).map_err(Clone::clone))
    }

    /// What it wrote on its standard error (at most [`STDERR_KEPT`]), once it has ended.
    pub fn stderr(&self) -> Vec<u8> {
        let slot = self.done.0.lock().unwrap_or_else(|e| e.into_inner());
        match &*slot {
            Some(Ok(f)) => f.stderr.clone(),
            _ => Vec::new(),
        }
    }

    /// Stops it with its process group, and waits until it is reaped.
    pub fn stop(&self) {
        let (slot, cv) = &*self.done;
        let guard = slot.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            // (not reaped yet: the pid is still the child's)
            kill_group(self.pid);
            let _ = cv.wait_timeout_while(guard, Duration::from_secs(5), |g| g.is_none());
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The threads that serve a child's pipes. They own what they need, so that they can be
/// left behind where a process outside the child's group keeps a pipe open.
struct Pipes {
    out: Receiver<Vec<u8>>,
    err: Receiver<Vec<u8>>,
    too_long: Arc<AtomicBool>,
}

impl Pipes {
    fn serve(child: &mut Child, body: Vec<u8>, limit: u64) -> std::io::Result<Pipes> {
        let thread = || std::thread::Builder::new().name("nvlinkrs-child".into());
        let stdin = child.stdin.take();
        thread().spawn(move || {
            if let Some(mut p) = stdin {
                let _ = p.write_all(&body);
            }
        })?;
        let (out_tx, out) = channel();
        let too_long = Arc::new(AtomicBool::new(false));
        let flag = too_long.clone();
        let stdout = child.stdout.take();
        thread().spawn(move || {
            let mut v = Vec::new();
            if let Some(p) = stdout {
                let _ = p.take(limit.saturating_add(1)).read_to_end(&mut v);
            }
            if v.len() as u64 > limit {
                flag.store(true, Ordering::SeqCst);
                v = Vec::new();
            }
            let _ = out_tx.send(v);
        })?;
        let (err_tx, err) = channel();
        let stderr = child.stderr.take();
        thread().spawn(move || {
            let mut v = Vec::new();
            if let Some(mut p) = stderr {
                let _ = (&mut p).take(STDERR_KEPT).read_to_end(&mut v);
                let _ = err_tx.send(v);
                // the rest drained, so that the child is not blocked on it
                let _ = std::io::copy(&mut p, &mut std::io::sink());
            } else {
                let _ = err_tx.send(v);
            }
        })?;
        Ok(Pipes { out, err, too_long })
    }
}

/// Waits for the child to end or pass a limit; its stdout too where it came by then.
/// The child is reaped (and its group killed) before this returns.
fn watch(
    child: &mut Child,
    pipes: &Pipes,
    limits: Limits,
    start: Instant,
) -> std::io::Result<(Ending, Option<Vec<u8>>)> {
    let pid = child.id();
    let stall = limits.stall.filter(|_| cpu_ticks(pid).is_some());
    let mut last = (cpu_ticks(pid), Instant::now());
    let mut out = None;
    let ending = loop {
        if exited(pid)? {
            // whatever it left in its group goes with it (killed while the child is a
            // zombie, so that its group's number cannot have been reused)
            kill_group(pid);
            break Ending::Exited(child.wait()?);
        }
        if pipes.too_long.load(Ordering::SeqCst) {
            break Ending::TooLong(limits.stdout);
        }
        if start.elapsed() >= limits.wall {
            break Ending::TimedOut(limits.wall);
        }
        // (woken by the end of the answer, which comes as the child ends: no added wait)
        match out {
            None => match pipes.out.recv_timeout(Duration::from_millis(50)) {
                Ok(v) => out = Some(v),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => out = Some(Vec::new()),
            },
            Some(_) => std::thread::sleep(Duration::from_millis(2)),
        }
        let now = cpu_ticks(pid);
        if now != last.0 {
            last = (now, Instant::now());
        } else if let Some(d) = stall
            && last.1.elapsed() >= d
        {
            break Ending::Stalled(d);
        }
    };
    if !matches!(ending, Ending::Exited(_)) {
        stop(child);
    }
    Ok((ending, out))
}

/// Whether the child has ended, without reaping it (`waitid` with `WNOWAIT`).
fn exited(pid: u32) -> std::io::Result<bool> {
    // SAFETY: waitid writes only into `info`, a zeroed siginfo_t of ours.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
    // SAFETY: as above; P_PID names our own child.
    if unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: si_pid is set by waitid where a child was found, 0 otherwise.
    Ok(unsafe { info.si_pid() } != 0)
}

/// A way for another thread to stop a compile it no longer needs (the whole-program
/// compile started beside incremental LTO's decision, `lto::phase`): the child running
/// now is killed with its group, and its caller starts no other.
#[derive(Default)]
pub struct Cancel {
    stopped: AtomicBool,
    /// The child running for the caller, while it runs.
    running: Mutex<Option<u32>>,
}

impl Cancel {
    /// Stops the work: the child running now, and any the caller would start.
    pub fn stop(&self) {
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        self.stopped.store(true, Ordering::SeqCst);
        if let Some(pid) = *running {
            kill_group(pid);
        }
    }

    pub fn stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// The caller's child `pid` started (`Some`), or ended (`None`); one started after
    /// [`Cancel::stop`] is killed at once.
    pub fn running(&self, pid: Option<u32>) {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        *running = pid;
        if let (Some(pid), true) = (pid, self.stopped()) {
            kill_group(pid);
        }
    }
}

/// Kills the child's process group (the child, and what it started that stayed there).
pub fn kill_group(pid: u32) {
    // (0 and 1 are not a child's group: kill(0) is this process's own group, kill(-1)
    // every process this user may signal)
    if pid <= 1 {
        return;
    }
    // SAFETY: kill has no memory effects; a group that is gone gives ESRCH.
    unsafe {
        libc::kill(-(pid as i32), libc::SIGKILL);
    }
}

/// Kills the child with its group and reaps it.
fn stop(child: &mut Child) {
    kill_group(child.id());
    let _ = child.kill();
    let _ = child.wait();
}

/// The CPU time a process has used so far, in clock ticks (Linux `/proc`; `None` where
/// that cannot be read).
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // fields after the parenthesised command name; utime and stime are the 12th and 13th
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(wall: u64, stall: Option<u64>, stdout: u64) -> Limits {
        Limits {
            wall: Duration::from_secs(wall),
            stall: stall.map(Duration::from_secs),
            stdout,
        }
    }

    fn sh(script: &str) -> Command {
        let mut c = command("sh");
        c.arg("-c").arg(script);
        c
    }

    /// The request reaches the child and its answer comes back whole.
    #[test]
    fn answers() {
        let f = run(
            &mut sh("cat; echo err >&2"),
            b"request".to_vec(),
            limits(60, Some(10), 64),
        )
        .unwrap();
        assert!(matches!(f.ending, Ending::Exited(s) if s.success()));
        assert_eq!(
            (&f.stdout[..], &f.stderr[..]),
            (&b"request"[..], &b"err\n"[..])
        );
    }

    /// A child another thread no longer needs is stopped with its group: at once when
    /// it runs, before it runs when it starts after the stop.
    #[test]
    fn cancel_stops_the_running_child_and_any_later_one() {
        let cancel = Arc::new(Cancel::default());
        let t = Instant::now();
        let (f, _) = std::thread::scope(|s| {
            let c = &cancel;
            let running = s.spawn(move || {
                let pid = |p| c.running(Some(p));
                let f = run_started(&mut sh("sleep 30"), Vec::new(), limits(60, None, 64), pid);
                c.running(None);
                f
            });
            std::thread::sleep(Duration::from_millis(300));
            cancel.stop();
            (running.join().unwrap().unwrap(), ())
        });
        let killed = |e: &Ending| e.describe() == "crashed (SIGKILL)";
        assert!(killed(&f.ending), "{:?}", f.ending);
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        let later = run_started(&mut sh("sleep 30"), Vec::new(), limits(60, None, 64), |p| {
            cancel.running(Some(p))
        })
        .unwrap();
        assert!(killed(&later.ending), "{:?}", later.ending);
        assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    }

    /// A child that spins is stopped at the wall-clock limit (was: never, its CPU time
    /// counted as progress).
    #[test]
    fn spin_stopped_at_the_wall_limit() {
        let t = Instant::now();
        let f = run(
            &mut sh("while :; do :; done"),
            Vec::new(),
            limits(1, Some(10), 64),
        )
        .unwrap();
        assert_eq!(f.ending, Ending::TimedOut(Duration::from_secs(1)));
        assert_eq!(
            f.ending.describe(),
            "ran for 1 s, its limit, and was stopped"
        );
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }

    /// A child that sleeps is stopped at the stall limit; one allowed to wait is not.
    #[test]
    fn stall() {
        let f = run(&mut sh("sleep 30"), Vec::new(), limits(60, Some(1), 64)).unwrap();
        assert_eq!(f.ending, Ending::Stalled(Duration::from_secs(1)));
        let f = run(
            &mut sh("sleep 2; echo done"),
            Vec::new(),
            limits(60, None, 64),
        )
        .unwrap();
        assert!(matches!(f.ending, Ending::Exited(s) if s.success()));
        assert_eq!(f.stdout, b"done\n");
    }

    /// An answer past the cap stops the child, and what is kept is not the answer (was:
    /// 3 GB read into memory).
    #[test]
    fn answer_capped() {
        let f = run(
            &mut sh("head -c 3000000000 /dev/zero"),
            Vec::new(),
            limits(60, Some(10), 1 << 20),
        )
        .unwrap();
        assert_eq!(f.ending, Ending::TooLong(1 << 20));
        assert!(f.stdout.is_empty());
        // stderr beyond what is kept is drained, not an error
        let f = run(
            &mut sh("head -c 3000000 /dev/zero >&2; echo ok"),
            Vec::new(),
            limits(60, Some(10), 64),
        )
        .unwrap();
        assert!(matches!(f.ending, Ending::Exited(s) if s.success()));
        assert_eq!((f.stdout.len(), f.stderr.len() as u64), (3, STDERR_KEPT));
    }

    /// What the child leaves in its group holding the pipes is killed as it ends: the
    /// answer comes at once (was: the link waited for the grandchild, or left it running).
    #[test]
    fn grandchild_killed_with_the_group() {
        let t = Instant::now();
        let f = run(
            &mut sh("sleep 30 & echo $!"),
            Vec::new(),
            limits(60, Some(10), 64),
        )
        .unwrap();
        assert!(
            matches!(f.ending, Ending::Exited(s) if s.success()),
            "{:?}",
            f.ending
        );
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        let pid: i32 = String::from_utf8_lossy(&f.stdout).trim().parse().unwrap();
        // (killed and reaped by init: gone, or a zombie for a moment)
        std::thread::sleep(Duration::from_millis(200));
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        assert!(stat.is_empty() || stat.contains(") Z "), "{stat}");
    }

    /// A process that left the child's group and holds its stdout: the child's ending
    /// says so after a short grace, rather than the link waiting for it. (It sleeps well
    /// past the grace: under load a 3 s sleep ended within it, and the pipe closed; and
    /// the shell waits a moment before it ends, so that the process has left the group
    /// before the group is stopped: under load it was stopped with it.)
    #[test]
    fn output_left_open() {
        let f = run(
            &mut sh("setsid sleep 20 & sleep 1; echo hi"),
            Vec::new(),
            limits(60, Some(10), 64),
        )
        .unwrap();
        assert_eq!(f.ending, Ending::OutputLeftOpen);
    }

    /// A child run in the background: its pid at once, its ending and stderr once it
    /// ends by itself, its output cap kept, and `stop` ends it with its group.
    #[test]
    fn background() {
        let mut c = sh("echo oops >&2; exit 3");
        c.stdin(Stdio::null());
        let b = run_in_background(c, Vec::new(), limits(60, None, 64)).unwrap();
        let ending = b.ending(Duration::from_secs(10)).unwrap().unwrap();
        assert_eq!(ending.failure(), "failed (exit status: 3)");
        assert_eq!(b.stderr(), b"oops\n");
        let b = run_in_background(
            sh("head -c 1000000 /dev/zero; sleep 30"),
            Vec::new(),
            limits(60, None, 1000),
        )
        .unwrap();
        let ending = b.ending(Duration::from_secs(10)).unwrap().unwrap();
        assert_eq!(ending, Ending::TooLong(1000));
        let t = Instant::now();
        let b = run_in_background(sh("sleep 30"), Vec::new(), limits(60, None, 64)).unwrap();
        assert_eq!(b.ending(Duration::from_millis(100)), None);
        b.stop();
        let ending = b.ending(Duration::ZERO).unwrap().unwrap();
        assert_eq!(ending.describe(), "crashed (SIGKILL)");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }

    #[test]
    fn wall_limit_scales_with_the_request() {
        if std::env::var_os(TIMEOUT_VAR).is_some() {
            return;
        }
        let s = Duration::from_secs;
        assert_eq!(Limits::wall_for(0, s(60), s(10)), s(60));
        assert_eq!(Limits::wall_for(1, s(60), s(10)), s(70));
        assert_eq!(Limits::wall_for(3 << 20, s(60), s(10)), s(90));
    }
}
