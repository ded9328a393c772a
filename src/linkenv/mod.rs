//! One snapshot of the environment a link reads, taken once per link ([`LinkEnv`]), and
//! the one list of those variables ([`VARS`]), each with what it does to the link. The
//! link reads its settings from the snapshot (the toolkit it finds, the libraries `-l`
//! finds, the finalizer's setting, the ptxas launcher), the whole-link cache key is made
//! from the same snapshot (`linkcache::key`: the value of what changes the image, and the
//! identity of what a variable finds), and the daemon's client forwards the same snapshot
//! to the link process it asks for. A variable the list does not name is no part of a
//! link (a test reads every variable the sources name and fails on one missing here).

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

/// What a variable does to a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Finds a tool (the toolkit, the LLVM helper): the key holds the identity of the
    /// file found, not the variable's value.
    FindsTools,
    /// Finds an input (an `-l` library): the key holds the file found and its content.
    FindsInputs,
    /// Changes the image by its value: the key holds the value (or what it means).
    Image,
    /// Changes where or how fast the link runs, or where it keeps things, never its
    /// bytes (the cache's place, the job count, temporary files, the shared tier).
    Runs,
    /// Read by the daemon or the drop-in around a link, never by the link: not
    /// forwarded to the daemon's link process.
    Around,
}

/// The environment mark of a background build (incremental LTO's partitions, the
/// finalizer's per-unit jobs), set by the daemon in its child (`cli::incremental::MARK`).
pub const BACKGROUND_MARK: &str = "NVLINKRS_INCREMENTAL_BACKGROUND";

/// Every variable a link reads (`*` ends a prefix), with its effect and why.
pub const VARS: &[(&str, Effect)] = &[
    // the toolkit (`toolkit::Toolkit::discover`): the key holds ptxas', libNVVM's,
    // libdevice's and libnvJitLink's identities
    ("CUDA_HOME", Effect::FindsTools),
    ("CUDA_PATH", Effect::FindsTools),
    ("PATH", Effect::FindsTools),
    ("NVLINKRS_TOOLCHAIN_DIR", Effect::FindsTools),
    ("XDG_CACHE_HOME", Effect::FindsTools),
    ("HOME", Effect::FindsTools),
    // the Python environments whose CUDA wheels are a toolkit (`toolkit::pypi_root`; the
    // drop-in's choice is handed to the link as `--cuda-path`)
    ("VIRTUAL_ENV", Effect::FindsTools),
    ("CONDA_PREFIX", Effect::FindsTools),
    ("PYENV_ROOT", Effect::FindsTools),
    ("PYENV_VERSION", Effect::FindsTools),
    ("NVLINKRS_LLVM_HELPER", Effect::FindsTools),
    // `-l` libraries (`input::find_library`)
    ("LIBRARY_PATH", Effect::FindsInputs),
    // the sm_100+ finalizer (`finalize::setting`) and the command that runs each ptxas
    // job (whose words and file are in the key, as the launcher may change the cubin)
    ("NVLINKRS_FINALIZER", Effect::Image),
    ("NVLINKRS_PTXAS_LAUNCHER", Effect::Image),
    // incremental LTO (`cli::incremental`): partitions are another image than the whole
    // program's; its dump of each partition's PTX (`lto::incremental`: a link with it is
    // not cached, as `-keep`'s is not)
    ("NVLINKRS_INCREMENTAL", Effect::Image),
    ("NVLINKRS_INCREMENTAL_DUMP", Effect::Runs),
    // the cache and the shared tier (where results are kept, never which)
    ("NVLINKRS_CACHE", Effect::Runs),
    ("NVLINKRS_CACHE_DIR", Effect::Runs),
    ("NVLINKRS_REMOTE_CACHE", Effect::Runs),
    ("NVLINKRS_REMOTE_CACHE_MODE", Effect::Runs),
    ("NVLINKRS_REMOTE_CACHE_KEY", Effect::Runs),
    ("AWS_*", Effect::Runs),
    // threads, make's jobserver, progress lines, temporary files, the libraries a tool
    // loads besides the ones found by path, a launcher's own settings (sccache)
    ("NVLINKRS_JOBS", Effect::Runs),
    ("MAKEFLAGS", Effect::Runs),
    ("NVLINKRS_PROGRESS", Effect::Runs),
    // the time trace (`cli::observe`): a file beside the output, never the image's bytes
    ("NVLINKRS_TIME_TRACE", Effect::Runs),
    ("TMPDIR", Effect::Runs),
    // the wall-clock limit of a child process (`child::limits`; tests make it short)
    ("NVLINKRS_CHILD_TIMEOUT", Effect::Runs),
    ("LD_LIBRARY_PATH", Effect::Runs),
    ("SCCACHE_*", Effect::Runs),
    // the daemon's switch, its idle time and its socket's place; the mark of its link
    // processes, the socket where they ask it for its finalizer worker
    // (`daemon::finalizer`), the mark of its background builds of incremental LTO's
    // partitions (set by the daemon, never forwarded) and of nvlinkrs' own children; the
    // drop-in's log and real library
    ("NVLINKRS_DAEMON", Effect::Around),
    ("NVLINKRS_DAEMON_IDLE", Effect::Around),
    ("NVLINKRS_IN_DAEMON", Effect::Around),
    ("NVLINKRS_DAEMON_FINALIZER", Effect::Around),
    ("NVLINKRS_INCREMENTAL_BACKGROUND", Effect::Around),
    // when the daemon got a request and started its link process (`observe`: the
    // trace's queueing span), set by the daemon, never forwarded
    ("NVLINKRS_DAEMON_TIMES", Effect::Around),
    ("XDG_RUNTIME_DIR", Effect::Around),
    ("NVLINKRS_CHILD", Effect::Around),
    ("NVLINKRS_JITLINK_LOG", Effect::Around),
    ("NVLINKRS_REAL_NVJITLINK", Effect::Around),
];

/// The effect of variable `name`, if a link reads it.
pub fn effect(name: &str) -> Option<Effect> {
    VARS.iter().find_map(|&(v, e)| {
        let hit = match v.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == v,
        };
        hit.then_some(e)
    })
}

/// Whether the daemon's client hands `name` to the link process: every variable the
/// link reads, and every other `NVLINKRS_*` (a setting of a newer nvlinkrs reaches it).
pub fn forwarded(name: &str) -> bool {
    match effect(name) {
        Some(Effect::Around) => false,
        Some(_) => true,
        None => name.starts_with("NVLINKRS_"),
    }
}

/// The values of the variables a link reads, taken at once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkEnv {
    vars: BTreeMap<String, OsString>,
}

impl LinkEnv {
    /// This process's environment, now.
    pub fn current() -> LinkEnv {
        LinkEnv::from_pairs(std::env::vars_os())
    }

    /// The variables of `pairs` a link reads (the others are left out).
    pub fn from_pairs<K: Into<OsString>, V: Into<OsString>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> LinkEnv {
        let vars = pairs
            .into_iter()
            .filter_map(|(k, v)| {
                let k = k.into().into_string().ok()?;
                (effect(&k).is_some() || k.starts_with("NVLINKRS_")).then(|| (k, v.into()))
            })
            .collect();
        LinkEnv { vars }
    }

    /// The value of `name`, as `std::env::var_os` gives it.
    pub fn get(&self, name: &str) -> Option<&OsStr> {
        self.vars.get(name).map(OsString::as_os_str)
    }

    /// The value of `name` when set and not empty.
    pub fn non_empty(&self, name: &str) -> Option<&OsStr> {
        self.get(name).filter(|v| !v.is_empty())
    }

    /// The value of `name` as text, as `std::env::var` gives it (`Err(Some)`: not
    /// Unicode).
    pub fn text(&self, name: &str) -> Result<&str, Option<String>> {
        match self.get(name) {
            None => Err(None),
            Some(v) => v.to_str().ok_or_else(|| Some(v.to_string_lossy().into())),
        }
    }

    /// The folders of a `PATH`-like variable.
    pub fn paths(&self, name: &str) -> Vec<PathBuf> {
        self.get(name)
            .map(|v| std::env::split_paths(v).collect())
            .unwrap_or_default()
    }

    /// The program `name` as `PATH` finds it (a name with a `/` is taken as it is).
    pub fn on_path(&self, name: &str) -> Option<PathBuf> {
        if name.contains('/') {
            return Some(PathBuf::from(name));
        }
        self.paths("PATH")
            .into_iter()
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    }

    /// The variables the daemon's client forwards, as `NAME=value` text (a value that is
    /// not Unicode stays behind: the request is text).
    pub fn forwarded(&self) -> impl Iterator<Item = String> + '_ {
        self.vars
            .iter()
            .filter(|(k, _)| forwarded(k))
            .filter_map(|(k, v)| Some(format!("{k}={}", v.to_str()?)))
    }

    /// Sets or removes one variable (tests make the snapshots they compare so).
    pub fn set(&mut self, name: &str, value: Option<&str>) {
        match value {
            Some(v) => self.vars.insert(name.into(), v.into()),
            None => self.vars.remove(name),
        };
    }
}

#[cfg(test)]
mod tests;
