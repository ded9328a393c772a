//! `--report-json FILE`: what a link did, for people and tools: the nvlinkrs version, the
//! toolkit and tools it used, its inputs, the total time and each stage's, the merge's
//! steps, what made LTO partial, the option consensus, the jobs each pool ran at once,
//! and whether the daemon, the cache and make's jobserver took part.

use std::time::Instant;

use crate::cli::LinkRequest;
use crate::diag::Result;
use crate::{Timings, cache, input, jobs, output, toolkit};

/// `--report-json FILE`: the stages with their times, and the cache's hits and misses.
pub(crate) fn write(
    req: &LinkRequest,
    timings: &Timings,
    cache: Option<&cache::Cache>,
    whole_link: &str,
    started: Instant,
) -> Result<()> {
    let Some(path) = &req.report_json else {
        return Ok(());
    };
    let stages: Vec<serde_json::Value> = timings
        .phases
        .iter()
        .map(|(name, d)| serde_json::json!({"stage": name, "ms": d.as_secs_f64() * 1000.0}))
        .collect();
    let counts: serde_json::Map<String, serde_json::Value> = cache
        .map(|c| c.counts())
        .unwrap_or_default()
        .into_iter()
        .map(|(stage, hits, misses)| (stage, serde_json::json!({"hits": hits, "misses": misses})))
        .collect();
    let ran = |stage: &str| timings.phases.iter().any(|(s, _)| *s == stage);
    let kit = toolkit::Toolkit::discover(req.cuda_path.as_deref(), req.nvvmpath.as_deref()).ok();
    let mut tools = serde_json::Map::new();
    if let Some(k) = &kit {
        if ran("ptxas") || ran("assemble") {
            tools.insert("ptxas".into(), k.ptxas().display().to_string().into());
        }
        if ran("cicc") {
            let nvvm = k.libnvvm(req.nvvmpath.as_deref());
            tools.insert(
                "libnvvm".into(),
                nvvm.map(|p| p.display().to_string()).into(),
            );
        }
    }
    let inputs: Vec<serde_json::Value> =
        input::input_list(&req.inputs, &req.libraries, &req.library_paths)
            .iter()
            .map(|p| {
                let bytes = std::fs::metadata(p).map(|m| m.len()).ok();
                serde_json::json!({"path": p.display().to_string(), "bytes": bytes})
            })
            .collect();
    let doc = serde_json::json!({
        "nvlinkrs": env!("CARGO_PKG_VERSION"),
        "toolkit": kit.as_ref().map(|k| serde_json::json!({
            "root": k.root.display().to_string(),
            "found_via": k.found_via,
        })),
        "tools": tools,
        "inputs": inputs,
        "output": req.output.display().to_string(),
        "total_ms": started.elapsed().as_secs_f64() * 1000.0,
        // whether the link ran in the daemon, used a cache, took make's jobserver tokens
        "daemon": std::env::var_os("NVLINKRS_IN_DAEMON").is_some(),
        "cache_used": cache.is_some(),
        "jobserver": jobs::has_jobserver(),
        "stages": stages,
        "merge_steps": timings
            .merge_steps
            .iter()
            .map(|(name, d)| serde_json::json!({"step": name, "ms": d.as_secs_f64() * 1000.0}))
            .collect::<Vec<_>>(),
        "partial_lto_because_of": timings.partial_lto,
        "consensus": timings.consensus,
        // the most jobs each pool ran at once (threads of this process, within make's
        // jobserver tokens or the daemon's budget)
        "peak_jobs": jobs::peaks()
            .into_iter()
            .map(|(phase, n)| (phase, serde_json::json!(n)))
            .collect::<serde_json::Map<_, _>>(),
        "cache": {
            "enabled": cache.is_some(),
            "dir": cache.map(|c| c.dir()).or(req.cache.dir.as_deref()).map(|d| d.display().to_string()),
            "default": req.cache.default,
            "whole_link": whole_link,
            "stages": counts,
        },
    });
    output::write_atomic(path, format!("{doc:#}\n").as_bytes())
}
