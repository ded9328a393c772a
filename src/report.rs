//! What a link reports and the files it writes beside its output: the phase times it
//! keeps ([`Timings`], what `-time` and `--progress` show), `--register-link-binaries`,
//! the `-time` rows, `-v`'s resource lines, and `--report-json FILE`, what a link did for
//! people and tools: the nvlinkrs version, the toolkit and tools it used, its inputs, the
//! total time and each stage's, the merge's steps, what made LTO partial, the option
//! consensus, the jobs each pool ran at once, and whether the daemon, the cache and
//! make's jobserver took part.

use std::time::Instant;

use crate::cli::LinkRequest;
use crate::context::LinkContext;
use crate::diag::{Diagnostics, Result};
use crate::input::HostInfo;
use crate::plan::Plan;
use crate::{bytes, elf, input, jobs, merge, output};

/// What a link reports: per-phase wall times in phase order (what `-time` writes), and
/// the decisions `--report-json` lists.
#[derive(Debug, Default)]
pub struct Timings {
    pub phases: Vec<(&'static str, std::time::Duration)>,
    /// The inputs without IR that made an LTO link partial.
    pub partial_lto: Vec<String>,
    /// The option consensus across LTO modules, one line per agreed option.
    pub consensus: Vec<String>,
    /// The merge's steps (`merge::link_with_steps`).
    pub merge_steps: Vec<merge::Step>,
    /// The bytes written, kept for the whole-link cache.
    pub(crate) written: output::Written,
    /// A phase fell back (the finalizer crashed or stalled): the image is not what the
    /// same link gives when nothing fails, so the whole-link cache does not keep it.
    pub(crate) fell_back: bool,
    /// What the sm_100+ finalizer did, where it ran (`--report-json`'s `finalize`, as
    /// the phase describes it).
    pub(crate) finalize: Option<serde_json::Value>,
    /// An incremental link linked whole-program whose partitions, or finalized its whole
    /// program in one job whose units' jobs, are to be built in the background once it
    /// is done (`daemon::background::request`).
    /// What is asked for (`-v` says it: "incremental LTO: the partitions").
    pub(crate) background: Option<&'static str>,
    /// An incremental link wrote the partitioned image (not the whole-program link's).
    pub(crate) partitioned: bool,
    /// What an incremental LTO link that wrote the partitioned image compiled
    /// (`--report-json`'s `incremental`: its partitions, and those compiled by unit).
    pub(crate) incremental: Option<serde_json::Value>,
}

impl Timings {
    /// The image written, where the link kept it (`LinkRequest::image_in_memory`; not
    /// every output is kept: the caller reads the others from the output file).
    pub fn take_image(&mut self) -> Option<Vec<u8>> {
        self.written.out.take()
    }

    /// Runs one phase, timed (and on the `--progress` lines).
    pub(crate) fn phase<T>(
        &mut self,
        name: &'static str,
        f: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let t = Instant::now();
        jobs::progress_line(name, None);
        let span = crate::trace::span("phase", name);
        let r = f();
        if let Err(e) = &r {
            crate::trace::arg("error", || e.message().into());
        }
        drop(span);
        self.phases.push((name, t.elapsed()));
        jobs::progress_line(name, Some(t.elapsed()));
        r
    }
}

/// With `--register-link-binaries`: device code given as a file of its own has no host
/// object to register it, which nvlink says for each such input.
pub(crate) fn unregistered(req: &LinkRequest, diag: &Diagnostics, trees: &[input::Node]) {
    if req.register_link_binaries.is_none() {
        return;
    }
    for t in trees
        .iter()
        .filter(|t| matches!(t.item, input::Item::Code(_) | input::Item::Container { .. }))
    {
        diag.info_always(&format!(
            "Input '{}' has no host code, which could cause later host link error if there is a reference to it",
            t.origin
        ));
    }
}

/// `-v` after a merge: each kernel's resources, read from the bytes written (reading
/// the output back would take them from a pipe).
pub(crate) fn resources(req: &LinkRequest, diag: &Diagnostics, written: &[u8]) -> Result<()> {
    let written = bytes::Bytes::from_vec(written.to_vec());
    let image = elf::cubin::Cubin::parse(written, &req.output.display().to_string())?;
    for line in elf::resources::report(&image) {
        diag.info_always(&line);
    }
    Ok(())
}

/// `--report-json FILE` of a link that failed: what it was asked (version, toolkit,
/// inputs, output), how long it ran, and its failure: nvlink's exit code and the errors
/// the link printed, the last one's context with it (a build tool reads why without
/// parsing the messages). Written as the report of a link that succeeds is (a whole file
/// or none); a report that cannot be written is not a second failure.
pub(crate) fn write_failed(
    plan: &Plan,
    diag: &Diagnostics,
    err: &crate::diag::Error,
    started: Instant,
) {
    if plan.req.report_json.is_none() {
        return;
    }
    use crate::diag::Level;
    let mut errors: Vec<String> = (diag.printed().into_iter())
        .filter(|(l, _)| matches!(l, Level::Error | Level::Fatal))
        .map(|(_, m)| m)
        .collect();
    if !err.message().is_empty() {
        errors.push(err.to_string());
    }
    let mut doc = asked(plan, started);
    doc["failed"] = serde_json::json!({
        "exit": err.severity().exit_code(),
        "errors": errors,
    });
    put(plan, diag, &format!("{doc:#}\n"));
}

/// Writes the report `text` to `--report-json`'s file, unless it may not go there
/// (`output::write_side_file`: never over the output or a file the link read): a
/// warning says why not, and the link goes on.
fn put(plan: &Plan, diag: &Diagnostics, text: &str) {
    let Some(path) = plan.req.report_json.as_deref() else {
        return;
    };
    let written = output::write_side_file(path, &plan.req.output, &guarded(plan), text.as_bytes());
    if let Err(why) = written {
        let shown = path.display();
        diag.warning_never_error(&format!("the report '{shown}' was not written: {why}"));
    }
}

/// The files a file written beside the output never goes over: the inputs as given, the
/// libraries found and the options files read.
pub(crate) fn guarded(plan: &Plan) -> Vec<std::path::PathBuf> {
    let mut files = plan.req.inputs.clone();
    files.extend(plan.inputs());
    files.extend(plan.req.options_files.iter().cloned());
    files
}

/// What every report starts with: the version, the toolkit, the inputs, the output and
/// the link's time so far.
fn asked(plan: &Plan, started: Instant) -> serde_json::Value {
    let kit = plan.toolkit().ok();
    let inputs: Vec<serde_json::Value> = plan
        .inputs()
        .iter()
        .map(|p| {
            let bytes = std::fs::metadata(p).map(|m| m.len()).ok();
            serde_json::json!({"path": p.display().to_string(), "bytes": bytes})
        })
        .collect();
    serde_json::json!({
        "nvlinkrs": env!("CARGO_PKG_VERSION"),
        "toolkit": kit.map(|k| serde_json::json!({
            "root": k.root.display().to_string(),
            "found_via": k.found_via,
        })),
        "inputs": inputs,
        "output": plan.req.output.display().to_string(),
        "total_ms": started.elapsed().as_secs_f64() * 1000.0,
    })
}

/// `--report-json FILE`: the stages with their times, and the cache's hits and misses.
pub(crate) fn write(
    plan: &Plan,
    ctx: &LinkContext,
    timings: &Timings,
    whole_link: &str,
    started: Instant,
) -> Result<()> {
    let (req, cache) = (plan.req, ctx.cache());
    if req.report_json.is_none() {
        return Ok(());
    }
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
    let kit = plan.toolkit().ok();
    let mut tools = serde_json::Map::new();
    if let Some(k) = kit {
        if ran("ptxas") || ran("assemble") {
            tools.insert("ptxas".into(), k.ptxas().display().to_string().into());
        }
        if ran("cicc") {
            let nvvm = plan.libnvvm();
            tools.insert(
                "libnvvm".into(),
                nvvm.map(|p| p.display().to_string()).into(),
            );
        }
    }
    let mut doc = asked(plan, started);
    let rest = serde_json::json!({
        "tools": tools,
        // whether the link ran in the daemon, used a cache, took make's jobserver tokens
        "daemon": std::env::var_os("NVLINKRS_IN_DAEMON").is_some(),
        "cache_used": cache.is_some(),
        "jobserver": ctx.jobs.has_jobserver(),
        "stages": stages,
        "merge_steps": timings
            .merge_steps
            .iter()
            .map(|(name, d)| serde_json::json!({"step": name, "ms": d.as_secs_f64() * 1000.0}))
            .collect::<Vec<_>>(),
        "partial_lto_because_of": timings.partial_lto,
        // the sm_100+ finalizer: units finalized, units the rule left out, jobs run and
        // jobs answered from the cache, functions whose code it changed, its worker
        "finalize": timings.finalize,
        // incremental LTO's partitions: how many, and which it compiled (by unit)
        "incremental": timings.incremental,
        "consensus": timings.consensus,
        // the most jobs each pool ran at once (threads of this process, within make's
        // jobserver tokens or the daemon's budget)
        "peak_jobs": ctx.jobs.peaks()
            .into_iter()
            .map(|(phase, n)| (phase, serde_json::json!(n)))
            .collect::<serde_json::Map<_, _>>(),
        "cache": {
            "enabled": cache.is_some(),
            "dir": cache.map(|c| c.dir()).or(req.cache.dir.as_deref()).map(|d| d.display().to_string()),
            "default": req.cache.default,
            "whole_link": whole_link,
            "stages": counts,
            // the shared tier's counts for this link (hits are also in the stages' counts)
            "shared": cache.and_then(|c| c.remote()).map(|r| serde_json::json!({
                "url": r.shown(),
                "counts": r.counters(),
                "failure": r.failure(),
            })),
        },
    });
    if let (Some(doc), serde_json::Value::Object(rest)) = (doc.as_object_mut(), rest) {
        doc.extend(rest);
    }
    put(plan, ctx.diag, &format!("{doc:#}\n"));
    Ok(())
}

/// The files written beside the output: `--register-link-binaries` and `-time`. The
/// module ids follow the input order, reversed after a whole-program LTO (as nvlink);
/// libcudadevrt's come last, once, where its code was linked (`devrt_linked`: a
/// device launch pulled a member in; a `compute_XX` link, which links no code, counts
/// every one given beside a program object), wherever `-lcudadevrt` stood.
pub(crate) fn side_files(
    req: &LinkRequest,
    hosts: &[HostInfo],
    whole_lto: bool,
    devrt_linked: bool,
    mut timings: Timings,
) -> Result<Timings> {
    if let Some(path) = &req.register_link_binaries {
        let mut ordered: Vec<&HostInfo> = hosts.iter().filter(|h| !h.cudadevrt).collect();
        if whole_lto {
            ordered.reverse();
        }
        let mut ids: Vec<String> = ordered
            .into_iter()
            .filter_map(|h| h.module_id.clone())
            .collect();
        // (a library named twice gives its members once)
        let devrt = hosts.iter().filter(|h| devrt_linked && h.cudadevrt);
        for id in devrt.filter_map(|h| h.module_id.as_ref()) {
            if !ids.contains(id) {
                ids.push(id.clone());
            }
        }
        let text = output::register_link_binaries(&ids);
        output::write_atomic(path, text.as_bytes())?;
        if timings.written.keep {
            timings.written.register = Some(text.into_bytes());
        }
    }
    if let Some(path) = &req.time {
        let arch = req.target.to_string();
        let row = |phase, source: &str, out: &str, d| output::TimeRow {
            source: source.into(),
            phase,
            output: out.into(),
            arch: arch.clone(),
            time: d,
        };
        let rows: Vec<output::TimeRow> = timings
            .phases
            .iter()
            .filter_map(|(name, d)| match *name {
                "cicc" => Some(row("cicc", "lto.nvvm", "lto.ptx", *d)),
                "ptxas" => Some(row("ptxas", "lto.ptx", "lto.cubin", *d)),
                _ => None,
            })
            .collect();
        output::append_times(path, &rows)?;
    }
    Ok(timings)
}
