//! The partitions of a program built in the background, so that the first link in
//! incremental mode is the whole-program link (nvlink's bytes, no slower than nvlink's)
//! and the next one, after an edit, is incremental. The link that found nothing cached
//! asks this user's daemon (starting it) to run the same link again at the lowest
//! priority as partitions (`daemon::background`); that link writes its image to a
//! private scratch folder of its own ([`adjust`]) and leaves the partitions in the cache.
//! `nvlinkrs daemon status` says `background idle` once nothing is queued.

use std::path::PathBuf;

use crate::cli::LinkRequest;
use crate::daemon::background::MARK;
use crate::diag::Diagnostics;
use crate::linkenv::LinkEnv;

/// Whether a link in the environment `env` is a background build.
pub fn is_background(env: &LinkEnv) -> bool {
    env.get(MARK).is_some()
}

/// Asks for the partitions of this link (`req`, in the environment `env`: its snapshot)
/// to be built in the background. The request carries the snapshot and the cache key of
/// the link the background build runs ([`key`]), as a link's request to the daemon does.
pub fn request(req: &LinkRequest, env: &LinkEnv, diag: &Diagnostics) {
    if is_background(env) || req.nvjitlink {
        return;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let queued = crate::daemon::queue_background(&args, env, key(req, env).as_deref());
    if req.verbose {
        diag.info(match queued {
            true => "incremental LTO: the partitions are being built in the background (nvlinkrs daemon status)",
            false => "incremental LTO: no daemon could take the background build; NVLINKRS_INCREMENTAL=partitions builds the partitions in a link",
        });
    }
}

/// The private scratch folder (`scratch::private_dir`) holding a background build's
/// image, removed when dropped.
pub struct Scratch {
    _dir: Option<tempfile::TempDir>,
}

/// The whole-link cache key of the background build of `req` (in partitions mode, its
/// request adjusted as [`adjust`] does), from the link's snapshot `env`: what the daemon
/// merges queued builds by (`None`: the link is not cached, and its build is never merged).
fn key(req: &LinkRequest, env: &LinkEnv) -> Option<String> {
    let mut req = req.clone();
    as_background(&mut req, PathBuf::from(IMAGE));
    let mut env = env.clone();
    env.set(crate::cli::incremental::VAR, Some("partitions"));
    env.set(MARK, Some("1"));
    crate::linkcache::key_of(&req, &env)
}

/// The name of a background build's image in its scratch folder.
const IMAGE: &str = "image.cubin";

/// A background build's request: its image to a private scratch folder of its own, no
/// file beside it (registration, times, report), nothing printed but errors.
pub fn adjust(req: &mut LinkRequest) -> crate::diag::Result<Scratch> {
    if !is_background(&LinkEnv::current()) {
        return Ok(Scratch { _dir: None });
    }
    let dir = crate::scratch::private_dir("background").map_err(|e| {
        crate::diag::Error::fatal(format!("background build: no scratch folder: {e}"))
    })?;
    as_background(req, dir.path().join(IMAGE));
    Ok(Scratch { _dir: Some(dir) })
}

/// `req` as a background build runs it: its image to `output`, no file beside it, quiet.
fn as_background(req: &mut LinkRequest, output: PathBuf) {
    req.output = output;
    req.register_link_binaries = None;
    req.time = None;
    req.report_json = None;
    req.dump_callgraph = None;
    req.verbose = false;
    req.verbose2 = false;
    req.verbose_keep = false;
}
