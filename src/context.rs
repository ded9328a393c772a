//! The context of one link: its diagnostics, its cache (and the shared tier behind it),
//! its ptxas launcher, its job pool (make's jobserver and
//! the most jobs each pool ran) and whether the process ends after it. Made once per link
//! (the command line's, and each link process the daemon starts makes its own) and
//! handed to the phases that need it, instead of process-wide state. The phase times are
//! not in it: the spine threads them separately (`report::Timings`, returned by the link,
//! which the phases fill as they run). What must stay process-wide stays where it is,
//! with its reason: the crash handler's state (`lto::crash`, read from a signal handler),
//! the descriptors closed at start (`output`, noted before `main` runs) and where plain
//! progress lines count from (`jobs`, a display setting of the process's stderr).
//! Also what a process may give its links: the sm_100+ finalizer back end (the
//! [`Finalizer`] trait, which `finalize` runs and re-exports; the drop-in gives NVIDIA's
//! library, [`Given`]).

use std::sync::Arc;

use crate::cache::{self, Cache};
use crate::cli::LinkRequest;
use crate::diag::Diagnostics;
use crate::jobs::Jobs;

/// What the process lends each link it runs.
#[derive(Clone, Default)]
pub struct Process {
    /// make's jobserver, taken first thing in `main` ([`crate::jobs::connect_jobserver`]).
    pub jobserver: Option<jobserver::Client>,
    /// The process ends after this link (the command line; a library caller or a test
    /// runs more than one): the link's large structures (symbol tables, maps, parsed
    /// inputs) are then left to the process exit instead of being freed piece by piece,
    /// as mold and wild do; freeing them took a tenth of a 128-unit link.
    pub one_shot: bool,
    /// The sm_100+ finalizer this process gives its links, where it cannot start a
    /// worker from its own executable: the drop-in libnvJitLink's, NVIDIA's library
    /// loaded in the program ([`Given`]). `None`: the worker.
    pub finalizer: Option<std::sync::Arc<Given>>,
}

/// One link's context.
pub struct LinkContext<'a> {
    pub diag: &'a Diagnostics,
    /// The link's cache, when it has a usable one.
    pub cache: Option<Arc<Cache>>,
    pub jobs: Jobs,
    /// `NVLINKRS_PTXAS_LAUNCHER`'s words: what runs each ptxas job (empty: ptxas itself).
    /// What it hands back may differ from ptxas' cubin (a wrapper adding options, another
    /// ptxas): the cache keys hold its words and its file (`ptxas_driver::launcher_id`).
    pub ptxas_launcher: Vec<String>,
    one_shot: bool,
    /// The process's finalizer, where it gave one ([`Process::finalizer`]).
    pub finalizer: Option<std::sync::Arc<Given>>,
    /// The finalizer's worker, where this link started it early
    /// (`crate::finalize::start_early`: its library loads while libNVVM compiles).
    pub early_finalizer: std::sync::OnceLock<Arc<dyn Finalizer + Send>>,
}

impl<'a> LinkContext<'a> {
    /// A context without a cache, its ptxas jobs run through `launcher` (empty: none).
    pub fn new(diag: &'a Diagnostics, process: &Process, launcher: Vec<String>) -> LinkContext<'a> {
        LinkContext {
            diag,
            cache: None,
            jobs: Jobs::new(process.jobserver.clone()),
            ptxas_launcher: launcher,
            one_shot: process.one_shot,
            finalizer: process.finalizer.clone(),
            early_finalizer: std::sync::OnceLock::new(),
        }
    }

    /// Opens the cache `req` names, when it can be used (one that cannot, an unsafe
    /// directory, only costs time: [`LinkContext::cache_problem`]).
    pub fn open_cache(&mut self, req: &LinkRequest) {
        let ctx = &*self;
        let cache = match &req.cache.dir {
            Some(dir) => match Cache::open(dir, cache::DEFAULT_CAP) {
                Ok(c) => Some(Arc::new(c.with_remote(req.cache.remote.as_ref()))),
                Err(e) => {
                    ctx.cache_problem(req, &format!("{}; linking without the cache", e.message()));
                    None
                }
            },
            None => {
                if req.cache.default {
                    ctx.cache_problem(
                        req,
                        "no default cache directory (neither XDG_CACHE_HOME nor HOME is an absolute path); linking without the cache",
                    );
                }
                None
            }
        };
        self.cache = cache;
    }

    /// The cache, borrowed.
    pub fn cache(&self) -> Option<&Cache> {
        self.cache.as_deref()
    }

    /// Says that the cache could not be used or could not store: a warning for a cache
    /// asked for; the default one, not asked for, says so only under -v (a warning would
    /// fail a link made with -Werror).
    pub fn cache_problem(&self, req: &LinkRequest, message: &str) {
        if !req.cache.default {
            self.diag.warning(message);
        } else if req.verbose {
            self.diag.info(message);
        }
    }

    /// Frees `x`, or leaves it to the process exit ([`Process::one_shot`]).
    pub fn dispose<T>(&self, x: T) {
        if self.one_shot {
            std::mem::forget(x);
        }
    }
}

/// A real finalizer of capsule Mercury.
pub trait Finalizer: Sync {
    /// One job's inputs (cubins, and PTX: a text that is not ELF) linked as `mode` says:
    /// the image, or `None` where the finalizer refuses to link them (an undefined
    /// reference, a prototype that does not match). Called from several threads at once.
    fn link(&self, job: &[&[u8]], mode: &Mode) -> crate::diag::Result<Option<Vec<u8>>>;

    /// Gets ready to link (starts what runs the jobs), on the link's own thread, before
    /// the jobs go to the job pool.
    fn prepare(&self) -> crate::diag::Result<()> {
        Ok(())
    }

    /// The worker process it started, if it started one: whose (`daemon`, `link`) and
    /// its pid (the report's `finalize` section).
    fn started(&self) -> Option<(&'static str, u32)> {
        None
    }
}

/// How the finalizer links: for which target, whether as nvlink's `-g` link (every
/// function's code regenerated for debugging), and the link's options that libnvJitLink
/// carries out as nvlink does (`-maxrregcount=N`, `-kernels-used=K`, `-variables-used=V`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mode {
    pub arch: crate::arch::Arch,
    pub debug: bool,
    pub extra: Vec<String>,
}

impl Mode {
    /// libnvJitLink's options for this mode.
    pub fn options(&self) -> Vec<String> {
        let mut o = vec![format!("-arch={}", self.arch)];
        if self.debug {
            o.push("-g".into());
        }
        o.extend(self.extra.iter().cloned());
        o
    }
}

/// A finalizer a process hands its links (the drop-in's: NVIDIA's library, loaded
/// where the program loaded the drop-in), and the library it is, for the per-unit
/// cache's key.
pub struct Given {
    pub finalizer: Box<dyn Finalizer + Send>,
    pub library: std::path::PathBuf,
}
