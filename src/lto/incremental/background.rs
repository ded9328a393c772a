//! The partitions of a program built in the background, so that the first link in
//! incremental mode is the whole-program link (nvlink's bytes, no slower than nvlink's)
//! and the next one, after an edit, is incremental. The link that found nothing cached
//! asks this user's daemon (starting it) to run the same link again at the lowest
//! priority as partitions (`daemon::background`); that link writes its image to a
//! private scratch folder of its own ([`adjust`]) and leaves the partitions in the cache.
//! `nvlinkrs daemon status` says `background idle` once nothing is queued.

use crate::cli::LinkRequest;
use crate::daemon::background::MARK;
use crate::diag::Diagnostics;

/// Whether this process is a background build.
pub fn is_background() -> bool {
    std::env::var_os(MARK).is_some()
}

/// Asks for the partitions of this link to be built in the background.
pub fn request(req: &LinkRequest, diag: &Diagnostics) {
    if is_background() || req.nvjitlink {
        return;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let queued = crate::daemon::queue_background(&args);
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

/// A background build's request: its image to a private scratch folder of its own, no
/// file beside it (registration, times, report), nothing printed but errors.
pub fn adjust(req: &mut LinkRequest) -> crate::diag::Result<Scratch> {
    if !is_background() {
        return Ok(Scratch { _dir: None });
    }
    let dir = crate::scratch::private_dir("background").map_err(|e| {
        crate::diag::Error::fatal(format!("background build: no scratch folder: {e}"))
    })?;
    req.output = dir.path().join("image.cubin");
    req.register_link_binaries = None;
    req.time = None;
    req.report_json = None;
    req.dump_callgraph = None;
    req.verbose = false;
    req.verbose2 = false;
    req.verbose_keep = false;
    Ok(Scratch { _dir: Some(dir) })
}
