//! nvlinkrs: an open device linker for CUDA, a drop-in for NVIDIA's `nvlink`.
//!
//! [`link`] is the spine: the one place the phases are called, in order, each timed:
//! read the inputs → LTO (when asked: the IR through an engine and ptxas; a whole-program
//! link ends there) → gather every input's code for the target → [`assemble`] its PTX with
//! ptxas `-c` → merge the cubins → write the image. What the request means for each phase
//! is in [`plan`], what the phases run with (diagnostics, cache, job pool) in [`context`],
//! the report and the files beside the output in `report`.

pub mod arch;
pub(crate) mod assemble;
pub mod bytes;
pub mod cache;
pub mod child;
pub mod cli;
pub mod commands;
pub mod consensus;
pub(crate) mod context;
pub mod daemon;
pub mod demangle;
pub mod diag;
pub mod elf;
pub(crate) mod explain;
pub mod fatbin;
pub mod finalize;
pub mod frames;
pub mod gather;
pub mod input;
pub mod inspect;
pub mod ir;
pub mod jobs;
#[cfg(test)]
mod layering;
mod linkcache;
pub(crate) mod linkenv;
pub mod lto;
pub mod merge;
mod observe;
pub mod output;
pub(crate) mod plan;
pub(crate) mod ptxas_driver;
mod report;
pub mod scratch;
pub mod shim;
pub mod target;
pub mod toolkit;
mod toolnote;
pub(crate) mod trace;

use std::time::Instant;

use cli::LinkRequest;
pub use context::{LinkContext, Process};
use diag::{Diagnostics, Result};
/// (the key the daemon's client forwards, handed to `daemon::client_link` by the binary)
pub use linkcache::request_key;
use lto::phase::LtoOutcome;
use plan::Plan;
pub use report::Timings;

/// Runs a device link: from the cache when the same link (tools, options, input
/// contents) was done before, else phase by phase, caching what it can; traced when
/// asked (`--time-trace`), the trace written whatever the link's result.
pub fn link(req: &LinkRequest, diag: &Diagnostics, process: &Process) -> Result<Timings> {
    let plan = Plan::new(req);
    let launcher = ptxas_driver::launcher(&plan.env);
    let tracing = observe::start(req);
    let mut outcome = observe::Outcome::default();
    let linked = link_unchecked(
        &plan,
        LinkContext::new(diag, process, launcher),
        &mut outcome,
    );
    if let (Err(_), Some(path)) = (&linked, &req.time) {
        // nvlink writes the `-time` file's header even when the link fails
        output::append_times(path, &[]).ok();
    }
    if let Some(t) = tracing {
        observe::finish(t, req, &report::guarded(&plan), diag, &linked, &outcome);
    }
    linked
}

fn link_unchecked(
    plan: &Plan,
    mut ctx: LinkContext,
    outcome: &mut observe::Outcome,
) -> Result<Timings> {
    let (started, req) = (Instant::now(), plan.req);
    plan.check(ctx.diag)?;
    if req.target_kind == arch::TargetKind::Virtual {
        // no image, so no cache and no report (the phases end after the read)
        return link_phases(plan, &ctx, &input::Opened::default(), false);
    }
    ctx.open_cache(req);
    // each input mapped once, for the cache key and the link alike
    let opened = input::Opened::with_cache(ctx.cache.clone());
    let linked = linkcache::around(plan, &ctx, &opened, |keep| {
        link_phases(plan, &ctx, &opened, keep)
    });
    outcome.whole_link = linked.as_ref().map_or("failed", |(_, whole)| *whole);
    outcome.counts = ctx.cache().map(|c| c.counts()).unwrap_or_default();
    // (dropped, not left to the exit: it holds the cache, whose drop keeps its counters
    // and trims it)
    {
        let _span = crate::trace::span("cache", "cache closed");
        drop(opened);
    }
    if let Ok((timings, _)) = &linked
        && let Some(what) = timings.background
    {
        // (incremental LTO's partitions, asked for once this link no longer needs the CPU)
        let _span = crate::trace::span("daemon", "background build asked for");
        daemon::background::request(req, &plan.env, ctx.diag, linkcache::key_of, what);
    }
    let result = match linked {
        Ok((timings, whole)) => {
            report::write(plan, &ctx, &timings, whole, started).map(|_| timings)
        }
        Err(e) => {
            report::write_failed(plan, ctx.diag, &e, started);
            Err(e)
        }
    };
    observe::count(&ctx, &result, outcome, started);
    result
}

/// The phases of a link, in order, reading the inputs through `opened`; `keep`: the
/// bytes written are kept for the cache.
fn link_phases(
    plan: &Plan,
    ctx: &LinkContext,
    opened: &input::Opened,
    keep: bool,
) -> Result<Timings> {
    let (req, diag) = (plan.req, ctx.diag);
    let mut timings = Timings {
        written: output::Written::new(keep || req.verbose || req.image_in_memory),
        ..Default::default()
    };
    let paths = plan.inputs();
    let trees = timings.phase("read", || {
        input::load_with(&paths, input::Mode::Link { lto: req.lto }, opened)
            .map(|t| input::once_per_archive(t, &paths, opened))
    })?;
    diag.check()?;
    // what an earlier -dlink object among the inputs covers is linked no more (the LTO
    // pool still sees all of it, as nvlink's partial-LTO decision does)
    let kept = input::prelinked::without_linked(&trees, req.lto);
    let linked = kept.as_deref().unwrap_or(&trees);
    let hosts = input::hosts(linked);
    if req.target_kind == arch::TargetKind::Virtual {
        // -arch=compute_XX (nvcc -arch=compute_XX, PTX only): nvlink reads the inputs and
        // writes the --register-link-binaries file, and no image
        // (libcudadevrt's module id is listed beside any program object's, never alone)
        let devrt = hosts.iter().any(|h| !h.cudadevrt);
        return report::side_files(req, &hosts, false, devrt, timings);
    }
    report::unregistered(req, diag, &trees);
    let (mut lto_cubins, mut lto_from) = (Vec::new(), Vec::new());
    if req.lto {
        // (the LTO phase starts an sm_100+ link's finalizer while libNVVM compiles, where
        // its output is merged)
        let finalizer = |bytes| finalize::start_early(plan, ctx, bytes);
        match lto::phase::run(plan, ctx, &trees, &finalizer, &mut timings)? {
            LtoOutcome::Written => return report::side_files(req, &hosts, true, false, timings),
            LtoOutcome::Relocatable(c, from) => (lto_cubins, lto_from) = (c, from),
            LtoOutcome::NoIr => {}
        }
    }
    // (from here on only the merge writes the output)
    let target = output::prepare(&req.output);
    let units = timings.phase("gather", || {
        gather::collect(linked, req.target, req.lto, diag)
    })?;
    // no input with code for the target (each reported by a warning): nvlink writes an
    // image without code, and so does the merge
    // (libNVVM's output in a whole-program LTO beside libcudadevrt counts as described:
    // every module came from a host object, and nvlink narrows that merge too)
    let whole_lto = req.lto && timings.partial_lto.is_empty() && !req.force_partial_lto;
    let described =
        (lto_cubins.is_empty() || whole_lto) && units.iter().all(|u| u.cudadevrt || u.host);
    let mut inputs = timings.phase("assemble", || {
        assemble::objects(plan, ctx, units, lto_cubins)
    })?;
    // an sm_100+ debug link's image is the finalizer's; another link's functions are
    // finalized one by one before the merge
    let debug_image = finalize::debug::wanted(plan, ctx, &inputs)?;
    if !debug_image && finalize::wanted(plan, ctx)? {
        let stats = timings.phase("finalize", || finalize::phase(plan, ctx, &mut inputs))?;
        timings.fell_back |= stats.fell_back;
        if stats.deferred > 0 {
            timings.background = Some("incremental: the finalizer's jobs of each unit");
        }
        timings.finalize = Some(stats.to_json());
    }
    let mut options = plan.merge_options();
    options.kernels = plan.kernel_filter(&hosts, described);
    options.lto_from = lto_from;
    let (mut image, steps) =
        timings.phase("merge", || merge::link_with_steps(&inputs, &options, ctx))?;
    timings.merge_steps = steps;
    diag.check()?;
    // (the merge's bytes, written once: the writer takes the Mercury symbols)
    let finalized = match debug_image {
        true => {
            let (bytes, fell_back) = timings.phase("finalize", || {
                let merged = output::image_bytes(&mut image)?;
                let image = finalize::debug::phase(plan, ctx, &inputs, &merged)?;
                Ok(match image {
                    Some(image) => (image, false),
                    None => (merged, true),
                })
            })?;
            timings.fell_back |= fell_back;
            Some(bytes)
        }
        false => None,
    };
    let (found, keep) = (target.take(), timings.written.keep);
    timings.written.out = timings.phase("write", || match finalized {
        Some(bytes) => output::write_bytes(found, bytes, keep),
        None => output::write_image(found, &mut image, keep),
    })?;
    ctx.dispose(image);
    if req.verbose {
        report::resources(
            req,
            diag,
            timings.written.out.as_deref().unwrap_or_default(),
        )?;
    }
    // (libcudadevrt's objects nothing calls were left out of the inputs)
    let cudadevrt_linked = inputs.iter().any(|i| i.cudadevrt);
    ctx.dispose(inputs);
    ctx.dispose(kept);
    ctx.dispose(trees);
    report::side_files(req, &hosts, false, cudadevrt_linked, timings)
}

/// `nvlinkrs inspect`: the input trees, as text or JSON.
pub fn inspect(paths: &[std::path::PathBuf], json: bool) -> Result<String> {
    let trees = input::load(paths, input::Mode::Inspect)?;
    if json {
        Ok(inspect::render_json(&trees)?.to_string() + "\n")
    } else {
        inspect::render_text(&trees)
    }
}
