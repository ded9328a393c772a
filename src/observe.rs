//! What a link shows of itself around the spine: its time trace (made before the link,
//! installed on its thread, written after it whether it succeeded or not: what ran until
//! then), with the daemon's queueing when a daemon's link process runs it; and its counts
//! added to the cache's counters (`nvlinkrs stats`).

use std::sync::Arc;
use std::time::Instant;

use crate::cli::{LinkRequest, TraceTo};
use crate::context::LinkContext;
use crate::diag::{Diagnostics, Result};
use crate::report::Timings;
use crate::trace::{self, Trace};

/// The variable the daemon sets in its link processes: when the client sent the request,
/// when the daemon read it and when it started the link process, in microseconds since
/// the epoch (`sent,read,started`).
pub const DAEMON_TIMES_VAR: &str = "NVLINKRS_DAEMON_TIMES";

/// What the link did, as the trace and the counters tell it.
#[derive(Default)]
pub struct Outcome {
    /// The whole-link cache's answer (`off`, `hit`, `miss`, `not cached`).
    pub whole_link: &'static str,
    /// Each stage's hits and misses.
    pub counts: Vec<(String, u64, u64)>,
}

/// A link's trace, while it runs.
pub struct Tracing {
    trace: Arc<Trace>,
    installed: Option<trace::Installed>,
    link: Option<trace::Span>,
}

/// Starts the trace `req` asks for (none: nothing is recorded, at no cost), from the
/// daemon client's request when the daemon runs the link.
pub fn start(req: &LinkRequest) -> Option<Tracing> {
    req.observe.time_trace.as_ref()?;
    let g = req.observe.granularity;
    let times = daemon_times();
    let trace = match times {
        Some([sent, ..]) => Trace::starting_at(g, sent),
        None => Trace::new(g),
    };
    let installed = trace::install(Arc::clone(&trace));
    if let Some([sent, read, started]) = times {
        let at = |us| trace.instant_of(us);
        trace::event(
            "daemon",
            "request to the daemon",
            at(sent),
            at(read),
            Vec::new,
        );
        trace::event(
            "daemon",
            "daemon starting the link process",
            at(read),
            at(started),
            Vec::new,
        );
        let now = Instant::now();
        trace::event(
            "daemon",
            "link process start-up",
            at(started),
            now,
            Vec::new,
        );
    }
    let link = trace::span_with("link", || format!("link {}", req.output.display()));
    Some(Tracing {
        trace,
        installed: Some(installed),
        link: Some(link),
    })
}

/// The daemon's times, in a link process the daemon started.
fn daemon_times() -> Option<[u64; 3]> {
    std::env::var_os("NVLINKRS_IN_DAEMON")?;
    let v = std::env::var(DAEMON_TIMES_VAR).ok()?;
    let n: Vec<u64> = v.split(',').filter_map(|x| x.parse().ok()).collect();
    match n[..] {
        [a, b, c] if a <= b && b <= c => Some([a, b, c]),
        _ => None,
    }
}

/// Ends the trace and writes it (where `req` says, never over the output or a file of
/// `guarded`: `report::guarded`), the link's `result` and `outcome` in its `otherData`; a
/// trace that cannot be written is a warning (never an error: it does not change the
/// link).
pub fn finish(
    mut t: Tracing,
    req: &LinkRequest,
    guarded: &[std::path::PathBuf],
    diag: &Diagnostics,
    result: &Result<Timings>,
    outcome: &Outcome,
) {
    // (a link that printed its errors fails with an empty message: the first is said)
    let failure = result.as_ref().err().map(|e| match e.message() {
        "" => (diag.printed().into_iter())
            .find(|(l, _)| *l == crate::diag::Level::Error)
            .map_or_else(String::new, |(_, m)| m),
        m => m.to_string(),
    });
    if let Some(f) = &failure {
        trace::arg("error", || f.clone().into());
    }
    drop(t.link.take());
    drop(t.installed.take());
    let asked = match &req.observe.time_trace {
        Some(TraceTo::File(f)) => Some(f.as_path()),
        _ => None,
    };
    let (path, nvcc) = trace::file::place(&req.output, asked);
    let stages: serde_json::Map<String, serde_json::Value> = (outcome.counts.iter())
        .map(|(s, h, m)| (s.clone(), serde_json::json!({"hits": h, "misses": m})))
        .collect();
    let link = serde_json::json!({
        "output": req.output.display().to_string(),
        "arch": req.target.to_string(),
        "result": match &failure {
            None => "linked".to_string(),
            Some(f) => format!("failed: {f}"),
        },
        "cache": {"whole_link": outcome.whole_link, "stages": stages},
    });
    // (nor over the report: both asked for one file)
    let report = req.report_json.as_deref();
    let writable = match report.is_some_and(|r| crate::output::same_place(r, &path)) {
        true => Err("it is the report's file (--report-json)".to_string()),
        false => writable(req, asked.is_some()),
    };
    if let Err(why) = writable {
        diag.warning_never_error(&format!(
            "the time trace '{}' was not written: {why}",
            path.display()
        ));
        return;
    }
    let text = match trace::file::contents(&t.trace, &path, nvcc, link) {
        Ok(text) => text,
        Err(e) => {
            let why = e.message();
            diag.warning_never_error(&format!("the time trace was not written: {why}"));
            return;
        }
    };
    if let Err(why) = crate::output::write_side_file(&path, &req.output, guarded, &text) {
        diag.warning_never_error(&format!(
            "the time trace '{}' was not written: {why}",
            path.display()
        ));
    }
}

/// Whether the trace may be written, besides what any file beside the output may not go
/// over (`output::write_side_file`): when not named (`asked`), never beside an output
/// that is not a regular file (`/dev/null`).
fn writable(req: &LinkRequest, asked: bool) -> std::result::Result<(), String> {
    if !asked && !std::fs::metadata(&req.output).is_ok_and(|m| m.is_file()) {
        return Err("the output is not a regular file (name one with --time-trace=FILE)".into());
    }
    Ok(())
}

/// Adds the link to its cache's counters: what it was (`result`, its whole-link answer
/// in `outcome`, its time since `started`) and what its stages did.
pub fn count(ctx: &LinkContext, result: &Result<Timings>, outcome: &Outcome, started: Instant) {
    let Some(cache) = ctx.cache() else { return };
    let shared_tier_failed = cache.remote().is_some_and(|r| r.first_failure().is_some());
    cache.record_link(crate::cache::stats::LinkFacts {
        whole_link: outcome.whole_link.to_string(),
        failed: result.is_err(),
        took: started.elapsed(),
        daemon: std::env::var_os("NVLINKRS_IN_DAEMON").is_some(),
        finalizer_fell_back: result.as_ref().is_ok_and(|t| t.fell_back),
        shared_tier_failed,
    });
}
