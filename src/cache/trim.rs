//! When the cache is brought back within its cap. Counting the cache means a `stat` of
//! every entry (tens of thousands in a default cache that has filled up: seconds on a cold
//! disk), so it is not done after each store but once when a link that stored something is
//! done with the cache, and at most once every [`INTERVAL`] per directory, the time of the
//! last count being the modification time of the file [`STAMP`] in the cache's root.

use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// The name of the file whose modification time is the last count's.
pub const STAMP: &str = super::guard::TRIMMED;

/// The least time between two counts of one cache directory.
pub const INTERVAL: Duration = Duration::from_secs(600);

/// True when the cache in `dir` was not counted within [`INTERVAL`] (or never), and
/// marks it counted now: of links ending at once, one counts.
pub fn due(dir: &Path) -> bool {
    let stamp = dir.join(STAMP);
    let now = SystemTime::now();
    if let Ok(m) = fs::symlink_metadata(&stamp)
        && let Ok(t) = m.modified()
        && now.duration_since(t).is_ok_and(|age| age < INTERVAL)
    {
        return false;
    }
    use std::os::unix::fs::OpenOptionsExt;
    // (not followed when a link; a regular file of the cache's own, never truncated)
    match fs::OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&stamp)
    {
        Ok(f) => f.metadata().is_ok_and(|m| m.is_file()) && f.set_modified(now).is_ok(),
        Err(_) => false,
    }
}
