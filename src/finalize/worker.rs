//! The finalizer's worker: a process (nvlinkrs itself, the hidden subcommand
//! `__finalize LIB`) that loads libnvJitLink once and links jobs for whoever connects to
//! its socket, which it is handed as its standard input: one connection per job, each
//! on a thread of its own, so that a link's job pool runs several at once. A one-shot
//! link starts one for itself ([`super::isolated`]); the daemon keeps one per library for
//! all its links (`daemon::finalizer`). The worker ends when the process that started it
//! does.
//!
//! Request: a u64 little-endian length, then [`crate::frames`]: `opt` (a libnvJitLink
//! option) and `in` (an input: a cubin, or PTX). Answer: the same framing, `image` (the
//! linked cubin), `refused`, or `error` (a message).
//!
//! The client side ([`Worker::link`]) holds each job to `crate::child`'s limits: a worker
//! that ends (a crash: a damaged library the loader maps, SIGBUS; a damaged unit, SIGSEGV
//! or a heap abort), uses no CPU time for `child::STALL`, runs past the job's wall-clock
//! limit (two minutes plus ten seconds per MiB of inputs; `NVLINKRS_CHILD_TIMEOUT`) or
//! answers more than four times the inputs plus 64 MiB is stopped with its process group
//! and fails the job (the worker a link started fails the same way when it writes that
//! much on its standard output), and the link goes on without the finalizer.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::Mode;
use super::nvjitlink::NvJitLink;
use crate::diag::{Error, Result};
use crate::frames::{decode, encode};

/// The hidden subcommand the worker runs.
pub const SUBCOMMAND: &str = crate::child::FINALIZER;

/// Requests larger than this are refused by the worker.
const MAX_MESSAGE: u64 = 1 << 30;

/// What one job may take (`crate::child`): no CPU time for `child::STALL`; two minutes
/// plus ten seconds per MiB of its inputs on the wall clock; an answer of at most four
/// times the inputs plus 64 MiB.
pub fn limits(request: usize) -> crate::child::Limits {
    use crate::child::{Limits, STALL};
    let s = Duration::from_secs;
    Limits {
        wall: Limits::wall_for(request, s(120), s(10)),
        stall: Some(STALL),
        stdout: 4 * request as u64 + (64 << 20),
    }
}

// ---- the worker ------------------------------------------------------------------------

/// The worker's side: `args` is the library; standard input the listening socket.
pub fn serve(args: &[String]) -> i32 {
    use std::os::fd::FromRawFd;
    let [lib] = args else {
        return 2;
    };
    // (the process that started the worker: when it ends, so does the worker)
    let parent = std::os::unix::process::parent_id();
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(200));
            if std::os::unix::process::parent_id() != parent {
                std::process::exit(0);
            }
        }
    });
    // SAFETY: descriptor 0 is the listening socket the parent handed over; nothing else
    // in this process owns it.
    let listener = unsafe { UnixListener::from_raw_fd(0) };
    let nv: &'static NvJitLink = match NvJitLink::load(Path::new(lib)) {
        Ok(nv) => Box::leak(Box::new(nv)),
        Err(e) => {
            crate::diag::to_stderr(&(super::one_line(&e) + "\n"));
            return 3;
        }
    };
    loop {
        let Ok((stream, _)) = listener.accept() else {
            return 2;
        };
        if std::thread::Builder::new()
            .spawn(move || answer(nv, stream))
            .is_err()
        {
            // (no thread to be had: this connection is dropped, its job fails)
            continue;
        }
    }
}

/// Reads one job from `stream`, links it, answers.
fn answer(nv: &NvJitLink, mut stream: UnixStream) {
    let Ok(request) = receive(&mut stream) else {
        return;
    };
    let reply = match decode(&request) {
        Ok(frames) => {
            let options: Vec<String> = (frames.iter())
                .filter(|(k, _)| k == "opt")
                .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
                .collect();
            let inputs: Vec<&[u8]> = (frames.iter())
                .filter(|(k, _)| k == "in")
                .map(|(_, v)| *v)
                .collect();
            match nv.run(&inputs, &options) {
                Ok(Some(image)) => encode([("image", &image[..])].into_iter()),
                Ok(None) => encode([("refused", &[][..])].into_iter()),
                Err(e) => encode([("error", super::one_line(&e).as_bytes())].into_iter()),
            }
        }
        Err(e) => encode([("error", e.message().as_bytes())].into_iter()),
    };
    let _ = stream.write_all(&(reply.len() as u64).to_le_bytes());
    let _ = stream.write_all(&reply);
}

fn receive(stream: &mut UnixStream) -> std::io::Result<Vec<u8>> {
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
    Ok(body)
}

// ---- the client ------------------------------------------------------------------------

/// Who owns a worker, which says how its end is learnt.
pub enum Owner {
    /// This link started it (`crate::child` runs it, and says how it ended).
    Link {
        child: crate::child::Background,
        /// The private directory of its socket, removed after it.
        _dir: tempfile::TempDir,
    },
    /// The daemon keeps it: the daemon (its `socket`, and its pid, the worker's
    /// `parent`) says how it ended.
    Daemon { socket: PathBuf, parent: u32 },
}

/// A running worker.
pub struct Worker {
    pub lib: PathBuf,
    pub socket: PathBuf,
    pub pid: u32,
    pub owner: Owner,
    /// Why the worker was stopped (every job then fails for that reason).
    pub stopped: std::sync::Arc<Mutex<Option<String>>>,
}

/// How a job's wait ended early.
enum Cut {
    /// The worker ended (or closed the connection).
    Ended,
    /// It made no progress for [`STALL`], or ran past [`LIMIT`]: stopped.
    Stopped(String),
    /// Another failure.
    Io(std::io::Error),
}

impl Worker {
    /// One job: its inputs (cubins, PTX) linked as `mode` says, by the worker.
    pub fn link(&self, job: &[&[u8]], mode: &Mode) -> Result<Option<Vec<u8>>> {
        let options = mode.options();
        let frames =
            (options.iter().map(|o| ("opt", o.as_bytes()))).chain(job.iter().map(|i| ("in", *i)));
        let body = encode(frames);
        let limits = limits(job.iter().map(|i| i.len()).sum());
        let reply = match self.exchange(&body, limits) {
            Ok(reply) => reply,
            Err(Cut::Ended) => return Err(self.ended()),
            Err(Cut::Stopped(why)) => return Err(self.error(&why)),
            Err(Cut::Io(e)) => match self.gone() {
                true => return Err(self.ended()),
                false => return Err(self.error(&format!("could not be reached ({e})"))),
            },
        };
        let frames =
            decode(&reply).map_err(|e| self.error(&format!("answered {}", e.message())))?;
        match frames.first() {
            Some((k, image)) if k == "image" => Ok(Some(image.to_vec())),
            Some((k, _)) if k == "refused" => Ok(None),
            Some((k, m)) if k == "error" => {
                Err(Error::fatal(String::from_utf8_lossy(m).into_owned()))
            }
            _ => Err(self.error("answered nothing")),
        }
    }

    /// Sends a request and reads its answer, watching the worker.
    fn exchange(
        &self,
        body: &[u8],
        limits: crate::child::Limits,
    ) -> std::result::Result<Vec<u8>, Cut> {
        let mut stream = UnixStream::connect(&self.socket).map_err(Cut::Io)?;
        let tick = Some(Duration::from_millis(50));
        let _ = (
            stream.set_read_timeout(tick),
            stream.set_write_timeout(tick),
        );
        let mut watch = Watch::new(self.pid, limits);
        let mut out = (body.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(body);
        let mut sent = 0;
        while sent < out.len() {
            match stream.write(&out[sent..]) {
                Ok(0) => return Err(Cut::Ended),
                Ok(n) => sent += n,
                Err(e) if waiting(&e) => self.check(&mut watch)?,
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Err(Cut::Ended),
                Err(e) => return Err(Cut::Io(e)),
            }
        }
        let mut reply = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            if let Some(len) = reply.get(..8) {
                let len = u64::from_le_bytes(len.try_into().expect("8 bytes"));
                if len > limits.stdout {
                    let why = format!("wrote more than {} bytes and was stopped", limits.stdout);
                    self.stop(&why);
                    return Err(Cut::Stopped(why));
                }
                if reply.len() as u64 >= len + 8 {
                    reply.drain(..8);
                    reply.truncate(len as usize);
                    return Ok(reply);
                }
            }
            match stream.read(&mut buf) {
                Ok(0) => return Err(Cut::Ended),
                Ok(n) => reply.extend_from_slice(&buf[..n]),
                Err(e) if waiting(&e) => self.check(&mut watch)?,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    return Err(Cut::Ended);
                }
                Err(e) => return Err(Cut::Io(e)),
            }
        }
    }

    /// Between reads: whether the worker still runs and makes progress.
    fn check(&self, watch: &mut Watch) -> std::result::Result<(), Cut> {
        if self.gone() {
            return Err(Cut::Ended);
        }
        if let Some(why) = watch.stuck() {
            self.stop(&why);
            return Err(Cut::Stopped(why));
        }
        Ok(())
    }

    /// Whether the worker has ended.
    fn gone(&self) -> bool {
        match &self.owner {
            Owner::Link { child, .. } => child.ending(Duration::ZERO).is_some(),
            Owner::Daemon { parent, .. } => !crate::daemon::finalizer::is_worker(self.pid, *parent),
        }
    }

    /// Stops the worker (`why`), with its process group.
    fn stop(&self, why: &str) {
        let mut stopped = self.stopped.lock().unwrap_or_else(|e| e.into_inner());
        stopped.get_or_insert_with(|| why.to_string());
        match &self.owner {
            Owner::Link { child, .. } => child.stop(),
            Owner::Daemon { parent, .. } => crate::daemon::finalizer::stop(self.pid, *parent),
        }
    }

    fn error(&self, what: &str) -> Error {
        Error::fatal(format!("libnvJitLink '{}' {what}", self.lib.display()))
    }

    /// The error for a worker that ended: how (`crashed (SIGBUS)`, `failed (exit status
    /// 3)`) and the first line it wrote on its standard error.
    fn ended(&self) -> Error {
        if let Some(why) = &*self.stopped.lock().unwrap_or_else(|e| e.into_inner()) {
            return self.error(why);
        }
        match &self.owner {
            Owner::Link { child, .. } => {
                let mut e = self.error(&match child.ending(Duration::from_secs(2)) {
                    Some(Ok(ending)) => ending.failure(),
                    Some(Err(e)) => format!("could not be watched ({e})"),
                    None => "closed the connection".into(),
                });
                let text = child.stderr();
                let text = String::from_utf8_lossy(&text);
                if let Some(line) = text.lines().find(|l| !l.is_empty()) {
                    e = e.context(line.to_string());
                }
                e
            }
            Owner::Daemon { socket, .. } => {
                let how = crate::daemon::finalizer::ended(socket, &self.lib, self.pid);
                self.error(&how.unwrap_or_else(|| "ended".into()))
            }
        }
    }
}

fn waiting(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock
            | std::io::ErrorKind::TimedOut
            | std::io::ErrorKind::Interrupted
    )
}

/// A job's wait: when it began, the worker's CPU time when it last moved, its limits.
struct Watch {
    pid: u32,
    began: Instant,
    last: (Option<u64>, Instant),
    limits: crate::child::Limits,
}

impl Watch {
    fn new(pid: u32, limits: crate::child::Limits) -> Watch {
        let now = Instant::now();
        Watch {
            pid,
            began: now,
            last: (crate::child::cpu_ticks(pid), now),
            limits,
        }
    }

    /// Why the job is to be given up, if it is.
    fn stuck(&mut self) -> Option<String> {
        use crate::child::Ending;
        if self.began.elapsed() >= self.limits.wall {
            return Some(Ending::TimedOut(self.limits.wall).describe());
        }
        let now = crate::child::cpu_ticks(self.pid);
        if now != self.last.0 {
            self.last = (now, Instant::now());
        } else if let Some(stall) = self.limits.stall
            && now.is_some()
            && self.last.1.elapsed() >= stall
        {
            return Some(Ending::Stalled(stall).describe());
        }
        None
    }
}
