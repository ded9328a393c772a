//! `nvlinkrs stats [--json] [--zero] [--cache-dir DIR]` (and `nvlinkrs cache stats`, the
//! same text): a cache's size, its counters across links (`cache::stats`) and the shared
//! tiers' counters its links kept, as text or JSON; `--zero` starts the counters again
//! after printing them.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use crate::cache::Cache;
use crate::cache::stats::{self, Totals};
use crate::diag::{Error, Result};

/// `nvlinkrs stats`.
pub fn main(dir: Option<PathBuf>, json: bool, zero: bool) -> Result<()> {
    let dir = crate::cache::place::command_dir(dir)?;
    // (opening makes the directory: a command about a cache never does)
    if std::fs::symlink_metadata(&dir).is_err() {
        crate::diag::to_stdout(&match json {
            true => format!("{}\n", serde_json::json!({"cache": dir, "exists": false})),
            false => format!("no cache at {}\n", dir.display()),
        });
        return Ok(());
    }
    let cache = Cache::open(&dir, crate::cache::DEFAULT_CAP)?;
    // (with --zero, the counters printed are those read as they are zeroed, under one
    // lock: a link that ends meanwhile is in one or the other)
    let counted = match zero {
        true => stats::zero(&dir).map_err(|e| {
            Error::fatal(format!(
                "cache: cannot zero the counters of '{}': {e}",
                dir.display()
            ))
        })?,
        false => stats::read(&dir),
    };
    crate::diag::to_stdout(&match json {
        true => format!("{:#}\n", as_json(&dir, &cache, &counted)),
        false => text_of(&dir, &cache, &counted),
    });
    Ok(())
}

/// The counters as JSON: the cache, its entries and bytes, the counters as kept, the
/// time saved, the shared tiers' counters by URL.
fn as_json(dir: &Path, cache: &Cache, t: &Totals) -> serde_json::Value {
    let size = cache.stats();
    serde_json::json!({
        "cache": dir,
        "entries": size.entries,
        "bytes": size.bytes,
        "time_saved_us": t.time_saved_us(),
        "counters": t,
        "shared": crate::cache::remote::saved_counters(dir),
    })
}

fn secs(us: u64) -> String {
    format!("{:.3} s", us as f64 / 1e6)
}

/// The counters as text: the cache's size first (`cache`, `entries`, `bytes`), then the
/// links, the whole-link cache, a line per stage, the times and fallbacks, then each
/// shared tier.
pub fn text(dir: &Path, cache: &Cache) -> String {
    text_of(dir, cache, &stats::read(dir))
}

/// [`text`] of the counters `t`.
fn text_of(dir: &Path, cache: &Cache, t: &Totals) -> String {
    let size = cache.stats();
    let mut s = format!(
        "cache {}\nentries {}\nbytes {}\n",
        dir.display(),
        size.entries,
        size.bytes
    );
    s += &counters(t);
    // the shared tiers this cache's links used, summed since the last clear
    for (url, c) in crate::cache::remote::saved_counters(dir) {
        let _ = writeln!(
            s,
            "shared {url}\n  hits {}\n  misses {}\n  errors {}\n  rejected {}\n  skipped {}\n  writes {}\n  bytes read {}\n  bytes written {}",
            c.hits,
            c.misses,
            c.errors,
            c.rejected,
            c.skipped,
            c.writes,
            c.bytes_read,
            c.bytes_written
        );
    }
    s
}

/// The links' counters as text.
fn counters(t: &Totals) -> String {
    let mut s = String::new();
    let w = &t.whole_link;
    let _ = writeln!(
        s,
        "links {} ({} failed, {} through the daemon)",
        t.links, t.failed_links, t.daemon_requests
    );
    let _ = writeln!(
        s,
        "whole-link hits {}\nwhole-link misses {}\nwhole-link not cached {}",
        w.hits, w.misses, w.not_cached
    );
    if !t.stages.is_empty() {
        let _ = writeln!(
            s,
            "{:<10} {:>10} {:>11} {:>8} {:>8} {:>12} {:>12} {:>10}",
            "stage",
            "local hits",
            "shared hits",
            "misses",
            "stores",
            "bytes read",
            "written",
            "saved"
        );
    }
    for (stage, c) in &t.stages {
        let _ = writeln!(
            s,
            "{stage:<10} {:>10} {:>11} {:>8} {:>8} {:>12} {:>12} {:>10}",
            c.local_hits,
            c.shared_hits,
            c.misses,
            c.stores,
            c.bytes_read,
            c.bytes_written,
            secs(c.saved_us)
        );
    }
    let _ = writeln!(
        s,
        "time spent {}\ntime saved {}\nfallbacks: finalizer {}, shared tier {}",
        secs(t.time_spent_us),
        secs(t.time_saved_us()),
        t.fallbacks.finalizer,
        t.fallbacks.shared_tier
    );
    if t.since_unix > 0 {
        let _ = writeln!(s, "since {} UTC", utc(t.since_unix));
    }
    s
}

/// `secs` since the epoch as `YYYY-MM-DD HH:MM` (UTC; the civil calendar from the day
/// count, after Howard Hinnant's `civil_from_days`).
fn utc(secs: u64) -> String {
    let (days, rest) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        rest / 3600,
        rest % 3600 / 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_dates() {
        assert_eq!(super::utc(0), "1970-01-01 00:00");
        assert_eq!(super::utc(951_782_400 + 3_660), "2000-02-29 01:01");
        assert_eq!(super::utc(1_767_225_600), "2026-01-01 00:00");
    }
}
