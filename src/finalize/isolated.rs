//! libnvJitLink's finalizer out of the linker's process, as libNVVM's split compile is
//! run (`lto::isolated`): a [`worker`](super::worker) with the library loaded, which a
//! crash in the library (a damaged library the loader maps, SIGBUS; a damaged unit,
//! SIGSEGV or a heap abort) or a hang costs, never the link, which goes on without the
//! finalizer, with a warning. Under the daemon, the daemon's worker for the library
//! (loaded once for all links); else one the link starts when its first job misses the
//! cache (loaded once for the link, whatever its number of jobs).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use super::worker::{Owner, SUBCOMMAND, Worker};
use super::{Finalizer, Mode};
use crate::diag::{Error, Result};

/// libnvJitLink at `lib`, in a worker started when first needed.
pub struct Isolated {
    pub lib: PathBuf,
    worker: OnceLock<std::result::Result<Worker, Error>>,
}

impl Isolated {
    pub fn new(lib: PathBuf) -> Isolated {
        Isolated {
            lib,
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
                None => start(&self.lib),
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

/// A worker for this link: nvlinkrs itself, its standard input a socket listening in a
/// private temporary directory, its standard error a file there. It ends with the link.
fn start(lib: &std::path::Path) -> Result<Worker> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::fatal(format!("cannot find this program to run libnvJitLink: {e}")))?;
    let io = |what: &str, e: std::io::Error| {
        Error::fatal(format!("cannot start libnvJitLink's process: {what}: {e}"))
    };
    let dir = tempfile::Builder::new()
        .prefix("nvlinkrs-finalizer")
        .tempdir()
        .map_err(|e| io("a private directory", e))?;
    let socket = dir.path().join("s");
    let listener =
        std::os::unix::net::UnixListener::bind(&socket).map_err(|e| io("its socket", e))?;
    let stderr = dir.path().join("stderr");
    let err_file = std::fs::File::create(&stderr).map_err(|e| io("its error file", e))?;
    let mut cmd = Command::new(&exe);
    cmd.env(crate::lto::isolated::CHILD_VAR, SUBCOMMAND)
        .arg(SUBCOMMAND)
        .arg(lib)
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(listener)))
        .stdout(Stdio::null())
        .stderr(Stdio::from(err_file));
    crate::lto::isolated::dies_with_the_link(&mut cmd);
    let child = cmd
        .spawn()
        .map_err(|e| Error::fatal(format!("cannot start '{}': {e}", exe.display())))?;
    Ok(Worker {
        lib: lib.to_path_buf(),
        pid: child.id(),
        socket,
        stopped: Default::default(),
        owner: Owner::Link {
            child: std::sync::Mutex::new(child),
            stderr,
            _dir: dir,
        },
    })
}
