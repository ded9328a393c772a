//! The partitions of a program built in the background, so that a first link in
//! incremental mode whose partitions are not expected to be faster is the whole-program
//! link (nvlink's bytes, no slower than nvlink's) and the next one, after an edit, is
//! incremental. The link that found nothing cached
//! says so (`Timings::background`), and once it is done asks this user's daemon (starting
//! it) to run the same link again at the lowest priority as partitions
//! (`daemon::background::request`: the daemon imports this module, not the reverse);
//! that link, marked ([`MARK`]), writes its image to a private scratch folder of its own
//! ([`adjust`]) and leaves the partitions in the cache. `nvlinkrs daemon status` says
//! `background idle` once nothing is queued.

use std::path::PathBuf;

use crate::cli::LinkRequest;
use crate::linkenv::LinkEnv;

pub use crate::cli::incremental::{MARK, is_background};

/// The name of a background build's image in its scratch folder.
pub const IMAGE: &str = "image.cubin";

/// The private scratch folder (`scratch::private_dir`) holding a background build's
/// image, removed when dropped.
pub struct Scratch {
    _dir: Option<tempfile::TempDir>,
}

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

/// `req` as a background build runs it: its image to `output`, no file beside it (no
/// trace either), quiet.
pub fn as_background(req: &mut LinkRequest, output: PathBuf) {
    req.output = output;
    req.register_link_binaries = None;
    req.time = None;
    req.report_json = None;
    req.dump_callgraph = None;
    req.verbose = false;
    req.verbose2 = false;
    req.verbose_keep = false;
    // (the link that asked keeps its trace: the build writes none over it)
    req.observe.time_trace = None;
    req.observe.explain = false;
}
