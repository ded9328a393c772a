//! libnvJitLink's finalizer out of the linker's process, as libNVVM's split compile is
//! run (`lto::isolated`): a [`worker`](super::worker) with the library loaded, which a
//! crash in the library (a damaged library the loader maps, SIGBUS; a damaged unit,
//! SIGSEGV or a heap abort) or a hang costs, never the link, which goes on without the
//! finalizer, with a warning. Under the daemon, the daemon's worker for the library
//! (loaded once for all links), and so in an incremental link where this user's daemon
//! runs; else one the link starts when its first job misses the cache (loaded once for
//! the link, whatever its number of jobs).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, OnceLock};

use super::worker::{Owner, SUBCOMMAND, Worker};
use super::{Finalizer, Mode};
use crate::child;
use crate::diag::{Error, Result};

/// libnvJitLink at `lib`, in a worker started when first needed.
pub struct Isolated {
    pub lib: PathBuf,
    /// The link's inputs, in bytes: the worker this link starts may write four times
    /// that plus 64 MiB on its standard output (as a job's answer, `worker::limits`), and
    /// run for ten minutes plus one per MiB of them.
    inputs: usize,
    /// Started as the link begins ([`super::start_early`]), not when its first job needs
    /// it: libNVVM's and ptxas' time, which may be long, is not counted against it.
    early: bool,
    /// The link may take this user's daemon's worker though it does not run under the
    /// daemon (an incremental link: `finalize::uses_daemon`).
    outside: bool,
    worker: OnceLock<std::result::Result<Worker, Error>>,
}

/// A worker started as the link begins has no wall-clock limit of its own but this: it
/// ends with the link, and each of its jobs is held to the job's limits by its client
/// (was: the ten minutes plus one per MiB of a worker started for its first job, counted
/// from the link's start, so that a link whose libNVVM and ptxas took longer lost the
/// finalizer and nvlink's bytes, an attacker's review).
const EARLY_WALL: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

impl Isolated {
    /// `lib` as the finalizer of a link whose inputs are `inputs` bytes in all.
    pub fn new(lib: PathBuf, inputs: usize) -> Isolated {
        Isolated {
            lib,
            inputs,
            early: false,
            outside: false,
            worker: OnceLock::new(),
        }
    }

    /// The worker of this user's daemon where one runs, though the link does not run
    /// under it (`outside`).
    pub fn outside(self, outside: bool) -> Isolated {
        Isolated { outside, ..self }
    }

    /// [`Isolated::new`], for a worker started as the link begins.
    pub fn early(lib: PathBuf, inputs: usize) -> Isolated {
        Isolated {
            early: true,
            ..Isolated::new(lib, inputs)
        }
    }

    /// The worker: the daemon's when this link runs under it, else a child of the link.
    fn worker(&self) -> Result<&Worker> {
        let w = self.worker.get_or_init(|| {
            match crate::daemon::finalizer::worker(&self.lib, self.outside) {
                Some(k) => Ok(Worker {
                    lib: self.lib.clone(),
                    socket: k.socket,
                    pid: k.pid,
                    owner: Owner::Daemon {
                        socket: k.daemon,
                        parent: k.parent,
                    },
                    stopped: Default::default(),
                }),
                None => start(
                    &self.lib,
                    super::worker::limits(self.inputs).stdout,
                    self.inputs,
                    self.early,
                ),
            }
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

    fn started(&self) -> Option<(&'static str, u32)> {
        let w = self.worker.get()?.as_ref().ok()?;
        let whose = match w.owner {
            Owner::Daemon { .. } => "daemon",
            Owner::Link { .. } => "link",
        };
        Some((whose, w.pid))
    }
}

/// A worker for this link: nvlinkrs itself as a supervised child, run by `crate::child`
/// (its own process group, ended with the link; the link's whole wall-clock limit, no
/// stall limit, as it waits for jobs between them: each job is watched by its client),
/// its standard input a socket listening in a private temporary directory; more than
/// `cap` bytes on its standard output (a library that floods it) stops it.
fn start(lib: &std::path::Path, cap: u64, inputs: usize, early: bool) -> Result<Worker> {
    let io = |what: &str, e: std::io::Error| {
        Error::fatal(format!("cannot start libnvJitLink's process: {what}: {e}"))
    };
    let mut cmd = child::self_command(SUBCOMMAND)
        .map_err(|e| Error::fatal(format!("cannot find this program to run libnvJitLink: {e}")))?;
    // (0700, named with this process's id: a killed link's is reclaimed by a later one;
    // was made with the umask's mode and never reclaimed)
    let dir = crate::scratch::private_dir("finalizer").map_err(|e| io("a private directory", e))?;
    let socket = dir.path().join("s");
    let listener =
        std::os::unix::net::UnixListener::bind(&socket).map_err(|e| io("its socket", e))?;
    cmd.arg(lib)
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(listener)));
    let s = std::time::Duration::from_secs;
    let limits = child::Limits {
        wall: match early {
            true => EARLY_WALL,
            false => child::Limits::wall_for(inputs, s(600), s(60)),
        },
        stall: None,
        stdout: cap,
    };
    let program = child::program(&cmd);
    let bg = child::run_in_background(cmd, Vec::new(), limits)
        .map_err(|e| Error::fatal(format!("cannot start '{program}': {e}")))?;
    Ok(Worker {
        lib: lib.to_path_buf(),
        pid: bg.pid,
        socket,
        stopped: Arc::default(),
        owner: Owner::Link {
            child: bg,
            _dir: dir,
        },
    })
}
