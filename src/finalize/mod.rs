//! sm_100+ code taken from NVIDIA's finalizer (libnvJitLink, in a worker process): on by
//! default at sm_100+ where the toolkit has libnvJitLink (`NVLINKRS_FINALIZER=off` turns
//! it off, `=nvjitlink` makes a missing library an error).
//!
//! nvlink 13.5 regenerates every sm_100+ function's SASS from its capsule Mercury, as an
//! executable, while ptxas `-c` wrote relocatable code; for kernels that make no call the
//! two differ (scheduling control bits, at times instructions), for every other function
//! they are the same ([`rule`]; docs/rules/finalizer.md, "The rule"). The code a function
//! gets does not depend on the other units, so each unit that has such kernels is
//! finalized alone ([`units`]: a job of the unit and stand-ins for what it refers to in
//! other inputs, [`standin`]), the jobs in parallel on the link's job pool and cached per
//! unit, and its kernels' code taken from the image where it stays consistent
//! ([`splice`], [`whole`]). The library is loaded once per link in a child process
//! ([`isolated`], [`worker`]), or once for all links by the daemon. `-G` code and line
//! tables are left to [`debug`].

pub mod debug;
pub mod isolated;
pub mod nvjitlink;
pub mod rule;
pub mod splice;
pub mod standin;
pub mod units;
mod whole;
pub mod worker;

use std::sync::Arc;

use crate::context::LinkContext;
pub use crate::context::{Finalizer, Given, Mode};
use crate::diag::{Error, Result};
use crate::merge::Input;
use crate::plan::Plan;
pub use splice::{Count, splice};

/// The environment variable that turns the prototype on (`nvjitlink`).
pub const VAR: &str = "NVLINKRS_FINALIZER";

/// The finalizer a link runs: the one its process gave, else the toolkit's library in
/// a worker process started from this executable (started early, [`start_early`], or
/// when its first job needs it).
enum Chosen<'c> {
    Given(&'c Given),
    Worker(Arc<dyn Finalizer + Send>),
}

impl Chosen<'_> {
    fn get<'c>(
        plan: &Plan,
        ctx: &'c LinkContext<'_>,
        inputs: &[Input],
    ) -> Result<(Chosen<'c>, std::path::PathBuf)> {
        if let Some(g) = &ctx.finalizer {
            return Ok((Chosen::Given(g), g.library.clone()));
        }
        let lib = library(plan)?;
        if let Some(early) = ctx.early_finalizer.get() {
            return Ok((Chosen::Worker(early.clone()), lib));
        }
        let size = inputs.iter().map(|i| i.cubin.data.len()).sum();
        let worker = isolated::Isolated::new(lib.clone(), size).outside(uses_daemon(plan));
        Ok((Chosen::Worker(Arc::new(worker)), lib))
    }

    fn finalizer(&self) -> &dyn Finalizer {
        match self {
            Chosen::Given(g) => &*g.finalizer,
            Chosen::Worker(w) => &**w,
        }
    }

    fn worker(&self) -> Option<(&'static str, u32)> {
        match self {
            Chosen::Given(_) => None,
            Chosen::Worker(w) => w.started(),
        }
    }
}

/// Starts the finalizer's worker now, in a link that will run it after a long step
/// (an LTO link: libNVVM's compile, on one core): the worker's start and its library's
/// load are done on the other core meanwhile, not when the first job needs them (the
/// time outside libNVVM and ptxas, benches/results/first-link.md). `bytes`: the link's
/// IR, which sizes the worker's limits as its inputs do ([`isolated::Isolated::new`]). A worker that then has no job (every job cached) ends
/// with the link; one that cannot start is the first job's error, as without this.
pub fn start_early(plan: &Plan, ctx: &LinkContext, bytes: usize) {
    if ctx.finalizer.is_some() || !matches!(wanted(plan, ctx), Ok(true)) {
        return;
    }
    let Ok(lib) = library(plan) else {
        return;
    };
    let worker = Arc::new(isolated::Isolated::early(lib, bytes).outside(uses_daemon(plan)));
    if ctx.early_finalizer.set(worker.clone()).is_ok() {
        // (on a thread: under the daemon, asking for its worker waits for the answer)
        std::thread::spawn(move || worker.prepare());
    }
}

/// What the finalizer did in a link.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Units whose functions were taken from a finalized image.
    pub units: usize,
    /// Units not offered: the rule decides every function of theirs ([`rule`]).
    pub skipped: usize,
    /// Jobs the finalizer ran in this link, and those answered from the cache.
    pub jobs: usize,
    pub cached: usize,
    /// Units whose jobs were left to a background build: the cache had none of them,
    /// and the link finalized the whole program in one job ([`units::apply`]).
    pub deferred: usize,
    /// Functions whose code was taken from it.
    pub functions: usize,
    /// Of those, functions whose instructions were taken, not only their control bits.
    pub instructions: usize,
    /// The finalizer failed (crashed, stalled, answered wrongly): nothing was taken.
    pub fell_back: bool,
    /// The worker that ran the jobs, where one was needed: whose (`daemon`: kept by the
    /// daemon for all its links; `link`: started by this link) and its pid.
    pub worker: Option<(&'static str, u32)>,
}

impl Stats {
    /// The report's `finalize` section (`--report-json`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "units": self.units,
            "skipped_units": self.skipped,
            "jobs_run": self.jobs,
            "jobs_cached": self.cached,
            "units_deferred": self.deferred,
            "functions": self.functions,
            "fell_back": self.fell_back,
            "worker": self.worker.map(|w| w.0),
            "worker_pid": self.worker.map(|w| w.1),
        })
    }
}

/// What [`VAR`] asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// Unset: the finalizer runs where libnvJitLink is found.
    Default,
    /// `off` (or `0`, `false`, `no`, `none`, empty; any case): never.
    Off,
    /// `nvjitlink`: always at sm_100+; a toolkit without libnvJitLink is an error.
    On,
}

/// The setting of [`VAR`] in `env`; an error for a value nvlinkrs does not know.
pub fn setting(env: &crate::linkenv::LinkEnv) -> Result<Setting> {
    match env.text(VAR) {
        Err(None) => Ok(Setting::Default),
        Err(Some(v)) => Err(unknown(&v)),
        Ok(v) if OFF.contains(&v.to_ascii_lowercase().as_str()) => Ok(Setting::Off),
        Ok(v) if v.eq_ignore_ascii_case("nvjitlink") => Ok(Setting::On),
        Ok(v) => Err(unknown(v)),
    }
}

/// The values of [`VAR`] that turn the finalizer off (any case).
const OFF: &[&str] = &["", "0", "off", "false", "no", "none"];

fn unknown(v: &str) -> Error {
    Error::fatal(format!(
        "{VAR}='{v}': the values nvlinkrs knows are 'off' (or 0, false, no, none) and 'nvjitlink' (the only finalizer it knows)"
    ))
}

/// Whether this link runs the finalizer: an sm_100+ executable link (not `-r`), the
/// setting not `off`, and a finalizer to run: the one the process gave (the drop-in
/// libnvJitLink inside someone else's program hands over NVIDIA's library), or, in
/// nvlinkrs' own executable, which the worker is started from, libnvJitLink in the
/// toolkit (or asked for by name).
pub fn wanted(plan: &Plan, ctx: &LinkContext<'_>) -> Result<bool> {
    let req = plan.req;
    let s = setting(&plan.env)?;
    if s == Setting::Off || req.target.sm < 100 || req.relocatable {
        return Ok(false);
    }
    if ctx.finalizer.is_some() {
        return Ok(true);
    }
    let here = crate::toolkit::own_image() == std::env::current_exe().ok();
    Ok(here && (s == Setting::On || plan.toolkit().ok().and_then(|k| k.libnvjitlink()).is_some()))
}

/// The toolkit's libnvJitLink (an error naming the toolkit where it has none).
fn library(plan: &Plan) -> Result<std::path::PathBuf> {
    let kit = plan.toolkit()?;
    kit.libnvjitlink().ok_or_else(|| {
        Error::fatal(format!(
            "{VAR}: no libnvJitLink.so.13 in the toolkit at '{}'",
            kit.root.display()
        ))
    })
}

/// Whether a link may leave the units' jobs to a background build ([`units::apply`]): an
/// incremental link (`--incremental`, `NVLINKRS_INCREMENTAL=1`: a development build,
/// whose next link after an edit is what counts) with a cache, which is not a background
/// build itself, in nvlinkrs' own executable (which the daemon's build runs).
fn may_defer(plan: &Plan, ctx: &LinkContext) -> bool {
    ctx.cache().is_some() && ctx.finalizer.is_none() && uses_daemon(plan)
}

/// Whether a link that does not run under the daemon takes the finalizer worker of this
/// user's daemon where one runs (it is not started for it): an incremental link, which
/// is not a background build (which the daemon runs), so that after the first link of
/// the edit-relink loop (which starts the daemon for its background build) the library
/// is loaded once, not once per link.
fn uses_daemon(plan: &Plan) -> bool {
    use crate::cli::incremental::{Mode, is_background};
    plan.incremental().is_ok_and(|m| m == Mode::Auto) && !is_background(&plan.env)
}

/// An error and its context chain on one line, for the fallback warning.
fn one_line(e: &Error) -> String {
    let mut line = e.message().to_string();
    for c in e.context_chain() {
        line += &format!("; {c}");
    }
    line
}

/// The phase: the toolkit's libnvJitLink, in a worker process, as the finalizer of
/// `inputs`. A worker that crashes or hangs leaves `inputs` as they are: the link goes
/// on without the finalizer, with a warning.
pub fn phase(plan: &Plan, ctx: &LinkContext, inputs: &mut [Input]) -> Result<Stats> {
    let (fin, lib) = Chosen::get(plan, ctx, inputs)?;
    let ptxas = plan.toolkit()?.ptxas();
    let version = match ctx.cache() {
        Some(c) => c.ptxas_version(&ptxas),
        None => crate::toolkit::ptxas_version_of(&ptxas),
    };
    match units::apply(
        fin.finalizer(),
        &lib,
        ctx,
        plan.req.target,
        version.as_deref(),
        inputs,
        may_defer(plan, ctx),
    ) {
        // (the worker that ran jobs: one started early for a link whose every job was
        // cached ran none)
        Ok(stats) => Ok(Stats {
            worker: fin.worker().filter(|_| stats.jobs > 0),
            ..stats
        }),
        Err(e) => {
            let line = one_line(&e);
            ctx.diag
                .warning_never_error(&format!("{VAR}: {line}; linked without the finalizer"));
            Ok(Stats {
                fell_back: true,
                ..Stats::default()
            })
        }
    }
}
