//! libnvJitLink's finalizer out of the linker's process, as libNVVM's split compile is
//! run (`lto::isolated`): a [`worker`](super::worker) with the library loaded, which a
//! crash in the library (a damaged library the loader maps, SIGBUS; a damaged unit,
//! SIGSEGV or a heap abort) or a hang costs, never the link, which goes on without the
//! finalizer, with a warning. Under the daemon, the daemon's worker for the library
//! (loaded once for all links); else one the link starts when its first job misses the
//! cache (loaded once for the link, whatever its number of jobs).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};

use super::worker::{Owner, SUBCOMMAND, Worker};
use super::{Finalizer, Mode};
use crate::child;
use crate::diag::{Error, Result};

/// libnvJitLink at `lib`, in a worker started when first needed.
pub struct Isolated {
    pub lib: PathBuf,
    /// The most the worker this link starts may write on its standard output: four times
    /// the link's inputs plus 64 MiB (as a job's answer, `worker::limits`).
    cap: u64,
    worker: OnceLock<std::result::Result<Worker, Error>>,
}

impl Isolated {
    /// `lib` as the finalizer of a link whose inputs are `inputs` bytes in all.
    pub fn new(lib: PathBuf, inputs: usize) -> Isolated {
        Isolated {
            lib,
            cap: super::worker::limits(inputs).stdout,
            worker: OnceLock::new(),
        }
    }

    /// The worker started, if one was: `daemon` or `link`, and its pid.
    pub fn started(&self) -> Option<(&'static str, u32)> {
        let w = self.worker.get()?.as_ref().ok()?;
        let whose = match w.owner {
            Owner::Daemon { .. } => "daemon",
            Owner::Link { .. } => "link",
        };
        Some((whose, w.pid))
    }

    /// The worker: the daemon's when this link runs under it, else a child of the link.
    fn worker(&self) -> Result<&Worker> {
        let w = self
            .worker
            .get_or_init(|| match crate::daemon::finalizer::worker(&self.lib) {
                Some(k) => Ok(Worker {
                    lib: self.lib.clone(),
                    socket: k.socket,
                    pid: k.pid,
                    owner: Owner::Daemon { socket: k.daemon },
                    stopped: Default::default(),
                }),
                None => start(&self.lib, self.cap),
            });
        w.as_ref().map_err(Clone::clone)
    }
}

impl Finalizer for Isolated {
    fn prepare(&self) -> Result<()> {
        self.worker().map(|_| ())
    }

    fn link(&self, job: &[&[u8]], mode: &Mode) -> Result<Option<Vec<u8>>> {
        self.worker()?.link(job, mode)
    }
}

/// A worker for this link: nvlinkrs itself as a supervised child (`crate::child`: its
/// own process group, ended with the link), its standard input a socket listening in a
/// private temporary directory, its standard error a file there, its standard output
/// drained: more than `cap` bytes there (a library that floods it) stops it.
fn start(lib: &std::path::Path, cap: u64) -> Result<Worker> {
    let io = |what: &str, e: std::io::Error| {
        Error::fatal(format!("cannot start libnvJitLink's process: {what}: {e}"))
    };
    let mut cmd = child::self_command(SUBCOMMAND).map_err(|e| {
        Error::fatal(format!("cannot find this program to run libnvJitLink: {e}"))
    })?;
    let dir = tempfile::Builder::new()
        .prefix("nvlinkrs-finalizer")
        .tempdir()
        .map_err(|e| io("a private directory", e))?;
    let socket = dir.path().join("s");
    let listener =
        std::os::unix::net::UnixListener::bind(&socket).map_err(|e| io("its socket", e))?;
    let stderr = dir.path().join("stderr");
    let err_file = std::fs::File::create(&stderr).map_err(|e| io("its error file", e))?;
    cmd.arg(lib)
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(listener)))
        .stdout(Stdio::piped())
        .stderr(Stdio::from(err_file));
    let mut c = cmd
        .spawn()
        .map_err(|e| Error::fatal(format!("cannot start '{}': {e}", child::program(&cmd))))?;
    let pid = c.id();
    let stopped: Arc<Mutex<Option<String>>> = Arc::default();
    if let Some(out) = c.stdout.take() {
        let why = stopped.clone();
        let drain = move || {
            let mut out = std::io::Read::take(out, cap + 1);
            let n = std::io::copy(&mut out, &mut std::io::sink()).unwrap_or(0);
            if n > cap {
                let mut w = why.lock().unwrap_or_else(|e| e.into_inner());
                w.get_or_insert_with(|| child::Ending::TooLong(cap).describe());
                child::kill_group(pid);
            }
        };
        if std::thread::Builder::new().spawn(drain).is_err() {
            child::kill_group(pid);
            let _ = c.wait();
            return Err(Error::fatal(
                "cannot start a thread to watch libnvJitLink's process",
            ));
        }
    }
    Ok(Worker {
        lib: lib.to_path_buf(),
        pid,
        socket,
        stopped,
        owner: Owner::Link {
            child: Mutex::new(c),
            stderr,
            _dir: dir,
        },
    })
}
