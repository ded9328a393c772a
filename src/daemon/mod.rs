//! The per-user link daemon: `nvlinkrs daemon start|stop|status`, and the client side of
//! `NVLINKRS_DAEMON=1` / `--daemon` ([`status`]: what `daemon status` asks).
//!
//! The daemon listens on a Unix socket in the user's runtime directory
//! (`$XDG_RUNTIME_DIR/nvlinkrs/daemon.sock`, else `/tmp/nvlinkrs-<uid>/daemon.sock`; the
//! directory 0700, the socket 0600). Both ends check the other before anything is sent
//! ([`guard`]): the directory is this user's, 0700 and no link, the peer runs as this user,
//! and the client runs the daemon's binary (else the daemon stops and the client starts a
//! new one). A request is a link's arguments, working directory and the environment
//! variables the link reads; the daemon runs it as a child process of its own
//! (nvlinkrs itself, in that directory, with that environment), so the output bytes,
//! messages and exit code are exactly those of a link run by hand, and relays the child's
//! stderr, stdout and exit code. A link nobody waits for any more (its clients
//! interrupted) is killed, and the links die with the daemon ([`child`]). What the daemon
//! adds: one job budget for the links' extra worker threads (one per core, or
//! `NVLINKRS_JOBS`) handed to the links as a jobserver (a link's first thread is its
//! client's own job, so links stuck on their inputs hold up nobody), so that links and
//! their worker threads together stay within it (a client run by make passes make's
//! jobserver instead, see [`forward_jobserver`]); identical requests in flight done once;
//! (merged only when the client made the link's cache key, the same for both: the inputs'
//! and tools' contents, so a link asked for after an input changed is linked again);
//! incremental LTO's partitions built in the background, at the lowest priority
//! ([`background`]);
//! the shared cache; an idle timeout (`NVLINKRS_DAEMON_IDLE` seconds, default 600). A
//! client that cannot reach the daemon, does not trust it, or loses it mid-link, links in
//! process; so does a link naming the client's own descriptors ([`local`]).
//!
//! Wire format: a u64 little-endian length, then frames as in
//! [`crate::frames`]: request `arg`, `arg0` (the client's program name), `cwd`, `env`
//! (`K=V`), `exe` (the client's binary), `umask` (octal, applied to the link process),
//! `key` (the link's cache key, when it has one), `sent` (when, in microseconds since the
//! epoch: the link's time trace shows the wait), or `stop`, or `status` (answered `pid`,
//! `uptime_ms`, `served`, `running`, `bg_queued`, `bg_running`), or `background` before a
//! link's frames (queued, answered `exit` 0: [`background`]); answer `err`, `out` (text,
//! in order) and `exit` (the code), or `stale` (the daemon runs another binary than the
//! client's, and stops).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::diag::{Error, Result};
use crate::frames::{decode, encode};

/// Whether the request carries the variable `name`: every variable the link reads but
/// the daemon's own ([`crate::linkenv::forwarded`]), the `AWS_*` settings of an S3 shared
/// tier and the `SCCACHE_*` ones of an sccache ptxas launcher among them.
fn forwarded(name: &str) -> bool {
    crate::linkenv::forwarded(name) && name != finalizer::VAR
}

/// Set in the daemon's link processes, so that they never go back to the daemon.
const IN_DAEMON: &str = "NVLINKRS_IN_DAEMON";

/// Requests and answers larger than this are refused (a malformed length).
const MAX_MESSAGE: u64 = 1 << 30;

pub mod background;
mod child;
pub mod finalizer;
mod guard;
mod local;
pub mod status;
use guard::uid;

/// The daemon's directory (0700) and socket path.
pub fn socket_path() -> PathBuf {
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(|d| PathBuf::from(d).join("nvlinkrs"))
        .filter(|d| d.parent().is_some_and(Path::is_dir))
        .unwrap_or_else(|| std::env::temp_dir().join(format!("nvlinkrs-{}", uid())));
    base.join("daemon.sock")
}

fn pid_path(socket: &Path) -> PathBuf {
    socket.with_file_name("daemon.pid")
}

fn send(stream: &mut UnixStream, frames: &[(&str, &[u8])]) -> std::io::Result<()> {
    let body = encode(frames.iter().copied());
    stream.write_all(&(body.len() as u64).to_le_bytes())?;
    stream.write_all(&body)?;
    stream.flush()
}

fn receive(stream: &mut UnixStream) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let mut len = [0u8; 8];
    stream.read_exact(&mut len)?;
    let len = u64::from_le_bytes(len);
    if len > MAX_MESSAGE {
        return Err(std::io::Error::other("message too long"));
    }
    let mut body = Vec::new();
    stream.take(len).read_to_end(&mut body)?;
    if body.len() as u64 != len {
        return Err(std::io::Error::other("truncated message"));
    }
    let frames = decode(&body).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(frames.into_iter().map(|(k, v)| (k, v.to_vec())).collect())
}

/// A client's MAKEFLAGS with its jobserver made reachable from the daemon's link process.
/// Make passes its jobserver to a child either as a FIFO path (`fifo:PATH`, reachable as
/// it is) or as two inherited pipe descriptors (`R,W`), which exist only in the client: the
/// link process reaches that pipe through `/proc/PID/fd/R` of the client (same user), as a
/// FIFO. `None` when MAKEFLAGS names no jobserver.
pub fn forward_jobserver(makeflags: &str, client_pid: u32) -> Option<String> {
    let words: Vec<&str> = makeflags.split_whitespace().collect();
    let auth = words.iter().rev().find_map(|w| {
        w.strip_prefix("--jobserver-auth=")
            .or_else(|| w.strip_prefix("--jobserver-fds="))
    })?;
    if auth.starts_with("fifo:") {
        return Some(makeflags.to_string());
    }
    let (read, _write) = auth.split_once(',')?;
    let read: u32 = read.parse().ok()?;
    let mut out: Vec<String> = words
        .iter()
        .filter(|w| !w.starts_with("--jobserver-auth=") && !w.starts_with("--jobserver-fds="))
        .map(|w| w.to_string())
        .collect();
    out.push(format!(
        "--jobserver-auth=fifo:/proc/{client_pid}/fd/{read}"
    ));
    Some(out.join(" "))
}

// ---- client ---------------------------------------------------------------------------

/// Whether the link of `args` runs in this process whatever the daemon setting: it names
/// this process's own descriptors ([`local`]).
pub fn stays_in_process(args: &[String]) -> bool {
    std::env::current_dir().map_or(true, |cwd| local::must_link_in_process(args, &cwd))
}

/// The whole-link key of the link `args` asks for in an environment
/// (`linkcache::request_key`), which the client forwards. The binary hands it in: the
/// link cache's key depends on the finalizer, whose link processes ask the daemon for
/// its worker, so the daemon does not import the link cache.
pub type KeyOf = fn(&[String], &crate::linkenv::LinkEnv) -> Option<String>;

/// Links through the daemon (starting it if needed): `Some(exit code)` when the daemon
/// answered, `None` when the link should run in process instead (with a warning, under
/// `tool`'s name, when the daemon's directory or server is not to be trusted); `key`
/// makes the link's key.
pub fn client_link(args: &[String], tool: &str, key: KeyOf) -> Option<i32> {
    if std::env::var_os(IN_DAEMON).is_some() {
        return None;
    }
    let socket = socket_path();
    let cwd = std::env::current_dir().ok()?;
    if local::must_link_in_process(args, &cwd) {
        return None;
    }
    let mut frames: Vec<(&str, Vec<u8>)> = args
        .iter()
        .map(|a| ("arg", a.clone().into_bytes()))
        .collect();
    frames.push(("cwd", cwd.to_string_lossy().into_owned().into_bytes()));
    // one snapshot of what the link reads: forwarded, and the link's key made from it
    let env = crate::linkenv::LinkEnv::current();
    frames.extend(env.forwarded().map(|kv| ("env", kv.into_bytes())));
    if let Some(key) = key(args, &env) {
        frames.push(("key", key.into_bytes()));
    }
    frames.push(("exe", guard::exe_identity().into_bytes()));
    // the files the link creates get the client's permissions
    if let Some(mask) = umask() {
        frames.push(("umask", format!("{mask:o}").into_bytes()));
    }
    // the name the link's messages carry (nvlinkrs, or nvlink for a drop-in)
    if let Some(arg0) = std::env::args_os().next() {
        frames.push(("arg0", arg0.to_string_lossy().into_owned().into_bytes()));
    }
    // when the request leaves, for the link's time trace (the daemon's queueing)
    frames.push(("sent", unix_micros().to_string().into_bytes()));
    let refs: Vec<(&str, &[u8])> = frames.iter().map(|(k, v)| (*k, v.as_slice())).collect();
    // a second try after a daemon of another binary stopped
    for _ in 0..2 {
        let mut stream = match connect_trusted(&socket) {
            Ok(Some(s)) => s,
            Ok(None) => return None,
            Err(e) => {
                crate::diag::to_stderr(&format!(
                    "{tool} warning : {}; linking in process\n",
                    e.message()
                ));
                return None;
            }
        };
        send(&mut stream, &refs).ok()?;
        let answer = receive(&mut stream).ok()?;
        if answer.iter().any(|(k, _)| k == "stale") {
            drop(stream);
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline && UnixStream::connect(&socket).is_ok() {
                std::thread::sleep(Duration::from_millis(10));
            }
            continue;
        }
        let mut code = None;
        for (kind, data) in &answer {
            match kind.as_str() {
                "err" => {
                    let _ = std::io::stderr().write_all(data);
                }
                "out" => {
                    let _ = std::io::stdout().write_all(data);
                }
                "exit" => code = std::str::from_utf8(data).ok().and_then(|c| c.parse().ok()),
                _ => {}
            }
        }
        return code;
    }
    None
}

/// Now, in microseconds since the epoch.
fn unix_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// This process's umask, read without changing it (`/proc/self/status`).
fn umask() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("Umask:"))?;
    u32::from_str_radix(line.trim(), 8).ok()
}

/// A connection to this user's daemon, started when none answers: `Ok(None)` when it
/// cannot be reached, an error when its directory or its server is not this user's.
fn connect_trusted(socket: &Path) -> Result<Option<UnixStream>> {
    let dir = socket.parent().expect("socket in a directory");
    let stream = match std::fs::symlink_metadata(dir) {
        Ok(_) => {
            guard::check_dir(dir)?;
            UnixStream::connect(socket).ok()
        }
        Err(_) => None,
    };
    let stream = match stream {
        Some(s) => s,
        None => {
            start(socket)?;
            match UnixStream::connect(socket) {
                Ok(s) => s,
                Err(_) => return Ok(None),
            }
        }
    };
    guard::check_server(&stream, socket)?;
    Ok(Some(stream))
}

/// Starts the daemon in the background and waits until its socket answers.
pub fn start(socket: &Path) -> Result<u32> {
    guard::private_dir(socket.parent().expect("socket in a directory"))?;
    if let Some(pid) = running(socket) {
        return Ok(pid);
    }
    let exe = std::env::current_exe()
        .map_err(|e| Error::fatal(format!("daemon: cannot find this program: {e}")))?;
    use std::os::unix::process::CommandExt;
    let child = std::process::Command::new(exe)
        .args(["daemon", "serve"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| Error::fatal(format!("daemon: cannot start: {e}")))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if UnixStream::connect(socket).is_ok() {
            return Ok(child.id());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Err(Error::fatal(
        "daemon: started, but its socket does not answer",
    ))
}

/// The daemon's pid when one answers on `socket`.
pub fn running(socket: &Path) -> Option<u32> {
    UnixStream::connect(socket).ok()?;
    std::fs::read_to_string(pid_path(socket))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Asks the daemon to stop; true when one was running. Returns once it has let go of
/// its socket and ended (its links finished, its workers stopped), or after 10 s.
pub fn stop(socket: &Path) -> bool {
    match UnixStream::connect(socket) {
        Ok(mut s) => {
            // (its pid as the kernel gives it for the connection)
            let pid = guard::peer(&s).map(|(_, pid)| pid);
            let _ = send(&mut s, &[("stop", b"")]);
            let _ = receive(&mut s);
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline
                && (UnixStream::connect(socket).is_ok() || pid.is_some_and(guard::alive))
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            true
        }
        Err(_) => false,
    }
}

// ---- server ---------------------------------------------------------------------------

/// A link's answer, shared by identical requests, and how many clients still wait for it.
#[derive(Default)]
struct Shared {
    frames: Option<Vec<(String, Vec<u8>)>>,
    clients: usize,
}

type Answer = Arc<(Mutex<Shared>, Condvar)>;

struct Server {
    /// Links running now.
    running: Mutex<usize>,
    /// The daemon's job budget (one per core, or `NVLINKRS_JOBS`) as a jobserver: each
    /// link's extra worker threads take a token each (unless the client's make lends its
    /// own), its first thread being its client's job, so all links together run at most
    /// that many jobs besides one each, and a link stuck on its inputs holds none.
    tokens: jobserver::Client,
    /// Identical requests in flight: one runs, the others wait for its answer.
    in_flight: Mutex<HashMap<Vec<u8>, Answer>>,
    last_seen: Mutex<Instant>,
    stopping: std::sync::atomic::AtomicBool,
    /// The binary this daemon runs ([`guard::exe_identity`]).
    exe: String,
    started: Instant,
    /// Links answered to clients (`daemon status`).
    served: std::sync::atomic::AtomicU64,
    /// The finalizer workers kept for the links, one per libnvJitLink.
    workers: finalizer::Workers,
    /// The daemon's private directory (its socket's).
    dir: PathBuf,
    /// Partitions of incremental links built in the background.
    background: background::Queue,
}

/// `nvlinkrs daemon serve`: runs until stopped or idle.
pub fn serve() -> Result<()> {
    let socket = socket_path();
    let dir = socket
        .parent()
        .expect("socket in a directory")
        .to_path_buf();
    guard::private_dir(&dir)?;
    if running(&socket).is_some() {
        return Err(Error::fatal("daemon: already running"));
    }
    // (before the socket answers: `daemon start` returns then)
    finalizer::sweep_sockets(&dir);
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).map_err(|e| {
        Error::fatal(format!(
            "daemon: cannot listen on '{}': {e}",
            socket.display()
        ))
    })?;
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600));
    }
    std::fs::write(pid_path(&socket), std::process::id().to_string())
        .map_err(|e| Error::fatal(format!("daemon: cannot write its pid file: {e}")))?;
    let idle = std::env::var("NVLINKRS_DAEMON_IDLE")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(Duration::from_secs(600), Duration::from_secs);
    let budget = crate::jobs::workers(0, usize::MAX);
    let tokens = jobserver::Client::new(budget)
        .map_err(|e| Error::fatal(format!("daemon: cannot create its job budget: {e}")))?;
    let server = Arc::new(Server {
        running: Mutex::new(0),
        tokens,
        in_flight: Mutex::new(HashMap::new()),
        last_seen: Mutex::new(Instant::now()),
        stopping: Default::default(),
        exe: guard::exe_identity(),
        started: Instant::now(),
        served: Default::default(),
        workers: Default::default(),
        dir: dir.clone(),
        background: Default::default(),
    });
    {
        let server = Arc::clone(&server);
        std::thread::spawn(move || server.background.work(forwarded));
    }
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::fatal(format!("daemon: {e}")))?;
    loop {
        if server.stopping.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
        match listener.accept() {
            Ok((stream, _)) => {
                *server.last_seen.lock().unwrap() = Instant::now();
                let server = Arc::clone(&server);
                std::thread::spawn(move || {
                    // a request's failure is its own: it never takes the daemon down
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        handle(&server, stream)
                    }));
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let busy = *server.running.lock().unwrap() > 0 || server.background.busy();
                if !busy && server.last_seen.lock().unwrap().elapsed() >= idle {
                    break;
                }
                // back at once when a client connects (a sleep here delayed every link)
                guard::wait_readable(&listener, 100);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    server.background.stop();
    // the pid file first: a daemon started once the socket is gone writes its own
    let _ = std::fs::remove_file(pid_path(&socket));
    let _ = std::fs::remove_file(&socket);
    drop(listener);
    // links under way finish for their clients (those nobody waits for are killed)
    while *server.running.lock().unwrap() > 0 {
        std::thread::sleep(Duration::from_millis(20));
    }
    server.workers.stop_all();
    Ok(())
}

fn handle(server: &Server, mut stream: UnixStream) {
    let _ = stream.set_nonblocking(false);
    let Some((peer_uid, peer_pid)) = guard::peer(&stream) else {
        return;
    };
    if peer_uid != uid() {
        let _ = send(
            &mut stream,
            &[
                ("err", b"nvlinkrs daemon: not your daemon\n"),
                ("exit", b"1"),
            ],
        );
        return;
    }
    // (a client sends its request at once: a connection that sends nothing holds no
    // thread of the daemon's for long)
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let request = receive(&mut stream);
    let _ = stream.set_read_timeout(None);
    let request = match request {
        Ok(r) => r,
        Err(e) => {
            let msg = format!("nvlinkrs daemon: malformed request: {e}\n");
            let _ = send(&mut stream, &[("err", msg.as_bytes()), ("exit", b"1")]);
            return;
        }
    };
    if request.iter().any(|(k, _)| k == "stop") {
        server
            .stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = send(&mut stream, &[("exit", b"0")]);
        return;
    }
    if request.iter().any(|(k, _)| k == "status") {
        let (queued, building) = server.background.counts();
        let now = status::Status {
            pid: std::process::id(),
            uptime: server.started.elapsed(),
            served: server.served.load(std::sync::atomic::Ordering::SeqCst),
            running: *server.running.lock().unwrap() as u64,
            background_queued: queued,
            background_running: building,
        };
        let frames = status::frames(&now);
        let refs: Vec<(&str, &[u8])> = frames.iter().map(|(k, v)| (*k, v.as_slice())).collect();
        let _ = send(&mut stream, &refs);
        return;
    }
    // a link process asking for the finalizer's worker
    if let Some((_, lib)) = request.iter().find(|(k, _)| k == "finalizer") {
        let lib = PathBuf::from(String::from_utf8_lossy(lib).into_owned());
        let ended = (request.iter())
            .find(|(k, _)| k == "ended")
            .and_then(|(_, v)| String::from_utf8_lossy(v).parse().ok());
        let frames = server.workers.answer(&server.dir, &lib, ended);
        let refs: Vec<(&str, &[u8])> = frames.iter().map(|(k, v)| (k.as_str(), &v[..])).collect();
        let _ = send(&mut stream, &refs);
        return;
    }
    // a client of another binary (nvlinkrs was replaced): this daemon makes way
    if let Some((_, exe)) = request.iter().find(|(k, _)| k == "exe")
        && exe.as_slice() != server.exe.as_bytes()
    {
        server
            .stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = send(&mut stream, &[("stale", b"")]);
        return;
    }
    if request.iter().any(|(k, _)| k == "background") {
        server.background.push(request);
        *server.last_seen.lock().unwrap() = Instant::now();
        let _ = send(&mut stream, &[("exit", b"0")]);
        return;
    }
    serve_link(server, stream, &request, peer_pid);
}

/// Runs the link `request` asks for and answers with its frames: identical requests in
/// flight are done once (see below); a client that hung up stops waiting, and the link
/// is killed once no client waits.
fn serve_link(
    server: &Server,
    mut stream: UnixStream,
    request: &[(String, Vec<u8>)],
    peer_pid: u32,
) {
    // identical requests in flight are done once, when the client made the link's key
    // (the content of its inputs and tools: a request made after an input changed is
    // another link); a request without one is never merged; when each was sent is no
    // part of it
    let read = unix_micros();
    static UNMERGED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut key = encode(
        (request.iter())
            .filter(|(k, _)| k != "sent")
            .map(|(k, v)| (k.as_str(), v.as_slice())),
    );
    if !request.iter().any(|(k, _)| k == "key") {
        let n = UNMERGED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        key.extend_from_slice(format!("\0unmerged {n}").as_bytes());
    }
    let (answer, first) = {
        let mut in_flight = server.in_flight.lock().unwrap();
        let (a, first) = match in_flight.get(&key) {
            Some(a) => (Arc::clone(a), false),
            None => {
                let a: Answer = Default::default();
                in_flight.insert(key.clone(), Arc::clone(&a));
                (a, true)
            }
        };
        a.0.lock().unwrap().clients += 1;
        (a, first)
    };
    if first {
        // no client waits once this one has hung up and the others too
        let mut gone = false;
        let abandoned = || {
            if !gone && guard::hung_up(&stream) {
                gone = true;
                answer.0.lock().unwrap().clients -= 1;
            }
            let mut in_flight = server.in_flight.lock().unwrap();
            let nobody = answer.0.lock().unwrap().clients == 0;
            if nobody {
                in_flight.remove(&key);
            }
            nobody
        };
        let result = run_link(server, request, (peer_pid, read), abandoned);
        {
            let mut in_flight = server.in_flight.lock().unwrap();
            if in_flight.get(&key).is_some_and(|a| Arc::ptr_eq(a, &answer)) {
                in_flight.remove(&key);
            }
        }
        let Some(result) = result else {
            return;
        };
        answer.0.lock().unwrap().frames = Some(result);
        answer.1.notify_all();
    }
    let frames = {
        let mut shared = answer.0.lock().unwrap();
        loop {
            if let Some(f) = &shared.frames {
                break f.clone();
            }
            shared = answer
                .1
                .wait_timeout(shared, Duration::from_millis(50))
                .unwrap()
                .0;
            if shared.frames.is_none() && guard::hung_up(&stream) {
                shared.clients -= 1;
                return;
            }
        }
    };
    let refs: Vec<(&str, &[u8])> = frames
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_slice()))
        .collect();
    if send(&mut stream, &refs).is_ok() {
        server
            .served
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Runs one link as a child process, its extra threads within the daemon's budget; the
/// answer frames, or `None` when it was killed because no client waited any more.
fn run_link(
    server: &Server,
    request: &[(String, Vec<u8>)],
    (client_pid, read): (u32, u64),
    abandoned: impl FnMut() -> bool,
) -> Option<Vec<(String, Vec<u8>)>> {
    let text = |v: &[u8]| String::from_utf8_lossy(v).into_owned();
    let args: Vec<String> = request
        .iter()
        .filter(|(k, _)| k == "arg")
        .map(|(_, v)| text(v))
        .collect();
    let cwd = request
        .iter()
        .find(|(k, _)| k == "cwd")
        .map(|(_, v)| PathBuf::from(text(v)));
    let fail = |m: String| {
        Some(vec![
            ("err".to_string(), m.into_bytes()),
            ("exit".to_string(), b"1".to_vec()),
        ])
    };
    let Some(cwd) = cwd.filter(|c| c.is_absolute() && c.is_dir()) else {
        return fail("nvlinkrs daemon: the request has no usable working directory\n".into());
    };
    // the daemon's own binary, even when its file was replaced or removed since
    let mut cmd = std::process::Command::new("/proc/self/exe");
    let arg0 = request.iter().find(|(k, _)| k == "arg0");
    std::os::unix::process::CommandExt::arg0(
        &mut cmd,
        arg0.map_or_else(|| "nvlinkrs".into(), |(_, v)| text(v)),
    );
    cmd.args(&args)
        .current_dir(&cwd)
        .env_clear()
        .env(IN_DAEMON, "1")
        .env(finalizer::VAR, socket_path());
    let mut makeflags = None;
    for (_, v) in request.iter().filter(|(k, _)| k == "env") {
        if let Some((name, value)) = text(v).split_once('=')
            && forwarded(name)
        {
            if name == "MAKEFLAGS" {
                makeflags = Some(value.to_string());
            } else {
                cmd.env(name, value);
            }
        }
    }
    // the link's extra threads take tokens from the client's make when it has one, else
    // from the daemon's budget shared by every link
    match makeflags
        .as_deref()
        .and_then(|m| forward_jobserver(m, client_pid))
    {
        Some(m) => {
            cmd.env("MAKEFLAGS", m);
        }
        None => {
            if let Some(m) = makeflags {
                cmd.env("MAKEFLAGS", m);
            }
            server.tokens.configure_make(&mut cmd);
        }
    }
    // the client's umask, for the files the link creates
    if let Some(mask) = request
        .iter()
        .find(|(k, _)| k == "umask")
        .and_then(|(_, v)| u32::from_str_radix(&text(v), 8).ok())
        .filter(|m| *m <= 0o777)
    {
        // SAFETY: umask(2) is async-signal-safe.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                libc::umask(mask as libc::mode_t);
                Ok(())
            });
        }
    }
    // the request's times, for the link's trace: sent, read, the link process started
    if let Some(sent) = request
        .iter()
        .find(|(k, _)| k == "sent")
        .and_then(|(_, v)| text(v).parse::<u64>().ok())
    {
        let times = format!("{sent},{read},{}", unix_micros());
        cmd.env(crate::observe::DAEMON_TIMES_VAR, times);
    }
    *server.running.lock().unwrap() += 1;
    let ended = child::run(cmd, abandoned);
    *server.running.lock().unwrap() -= 1;
    match ended {
        Ok(child::Ended::Done {
            status,
            mut stderr,
            stdout,
        }) => {
            // (a link process killed by a signal says nothing itself)
            if let Some(sig) = std::os::unix::process::ExitStatusExt::signal(&status) {
                stderr.extend_from_slice(
                    format!("nvlinkrs daemon: the link process was killed by signal {sig}\n")
                        .as_bytes(),
                );
            }
            Some(vec![
                ("err".into(), stderr),
                ("out".into(), stdout),
                (
                    "exit".into(),
                    status.code().unwrap_or(1).to_string().into_bytes(),
                ),
            ])
        }
        Ok(child::Ended::Abandoned) => None,
        Err(e) => fail(format!("nvlinkrs daemon: cannot run the link: {e}\n")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clients_jobserver_is_forwarded_through_proc_or_as_a_fifo() {
        // make 4.3: inherited pipe descriptors, reachable through the client's /proc
        assert_eq!(
            forward_jobserver(" -j8 --jobserver-fds=3,4 --jobserver-auth=3,4", 77).as_deref(),
            Some("-j8 --jobserver-auth=fifo:/proc/77/fd/3")
        );
        // make 4.4: a named FIFO, reachable as it is
        let fifo = "-j4 --jobserver-auth=fifo:GMfifo1";
        assert_eq!(forward_jobserver(fifo, 77).as_deref(), Some(fifo));
        // no jobserver, or a malformed one: the daemon's own budget
        assert_eq!(forward_jobserver("-k", 77), None);
        assert_eq!(forward_jobserver("--jobserver-auth=x,4", 77), None);
        assert_eq!(forward_jobserver("", 77), None);
    }
}
