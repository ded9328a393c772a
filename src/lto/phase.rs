//! The LTO phase of a link: gather the IR module pool, agree on the modules' options,
//! choose the engine (libNVVM for NVIDIA's IR, LLVM for LLVM bitcode; cached when the link
//! has a cache), compile to PTX, and assemble it with ptxas: the output itself for a
//! whole-program link, relocatable cubins for the merge in a partial-LTO link or a split
//! compile.

use crate::context::LinkContext;
use crate::diag::{self, Error, Result};
use crate::lto::pool::Pool;
use crate::lto::{self, Engine};
use crate::plan::Plan;
use crate::report::Timings;
use crate::{arch, bytes, consensus, elf, input, jobs, merge, output, ptxas_driver};

/// nvlink's words for a failed ptxas on a fatbinary's PTX, and on libNVVM's.
const FATBINARY_ERROR: &str = "elfLink fatbinary error";
const JIT_FAILED: &str = "elfLink JIT compile failed";

pub enum LtoOutcome {
    /// Whole-program LTO wrote the output.
    Written,
    /// Partial LTO or a split compile: the relocatable cubins of the IR (one per split
    /// piece), to merge with the rest, and the inputs whose IR they hold.
    Relocatable(Vec<merge::Input>, Vec<String>),
    /// No IR in the inputs: an ordinary link.
    NoIr,
}

/// nvlink's warning for an LTO link with no IR among its inputs (the drop-in reads it:
/// nvJitLink refuses such a link).
pub const NO_IR: &str = "Ignoring -dlto option because no LTO objects found";

/// ptxas' threads (`-split-compile`) for a link's one job that holds a bitcode library's
/// functions (NVSHMEM's), fixed whatever the machine.
const LIBRARY_PTXAS_THREADS: u32 = 4;

/// What the LTO phase gathered before compiling: the module pool, what the modules agree
/// on, and libNVVM's settings for them.
struct Gathered {
    pool: Pool,
    consensus: consensus::Consensus,
    settings: lto::LtoSettings,
    /// Partial LTO: an input without IR (or `-force-partial-lto`), relocatable output.
    partial: bool,
    /// Some module came from a host object (`-dc`), whose kernel tables count.
    from_host: bool,
    /// nvcc's IR beside LLVM bitcode, joined into one module by LLVM.
    mixed: bool,
    bitcode: lto::prelink::BitcodeCode,
}

/// Runs the LTO phase over the input trees: the pool gathered, then linked as
/// partitions (`--incremental`) or compiled whole by libNVVM and assembled by ptxas.
/// `finalizer` starts the finalizer's worker (given the IR's bytes, which size its
/// limits), for an output that is merged and finalized after this phase.
pub fn run(
    plan: &Plan,
    ctx: &LinkContext,
    trees: &[input::Node],
    finalizer: &dyn Fn(usize),
    timings: &mut Timings,
) -> Result<LtoOutcome> {
    if plan.req.emit_ltoir {
        lto::prelink::emit(plan, ctx, trees, timings)?;
        return Ok(LtoOutcome::Written);
    }
    let Some(g) = gather(plan, ctx, trees, timings)? else {
        return Ok(LtoOutcome::NoIr);
    };
    output::folder_is_there(&plan.req.output)?;
    if merged_after(plan, &g) {
        // (its output merged, an sm_100+ link's finalizer runs after it: its worker
        // loads while libNVVM compiles, on the other core)
        finalizer(g.pool.modules.iter().map(|m| m.module.data.len()).sum());
    }
    let (mut whole_timer, mut compiled) = (None, None);
    if plan.incremental()? != crate::cli::incremental::Mode::Off {
        use lto::incremental::Outcome;
        match incremental(plan, ctx, &g, finalizer, timings)? {
            (Outcome::Partitioned(cubins), _) => {
                timings.partitioned = true;
                if g.from_host && !g.pool.cudadevrt {
                    return Err(Error::fatal("expected libcudadevrt object"));
                }
                return relocatable_outcome(cubins, &g.pool);
            }
            (Outcome::Whole(timer), beside) => (whole_timer, compiled) = (timer, beside),
        }
    }
    let compiled = match compiled {
        Some(c) => c,
        None => timings.phase("cicc", || whole_ir(plan, ctx, &g, ctx.diag, None, true)),
    };
    let Some(lto_out) = emitted(plan, compiled?, timings)? else {
        return Ok(LtoOutcome::Written);
    };
    assemble(plan, ctx, &g, lto_out, whole_timer, timings)
}

/// Whether the LTO output is expected to be merged with other code (so that an sm_100+
/// link runs the finalizer after it): partial LTO, a split compile, or a program that
/// calls the device runtime, which libNVVM compiles as relocatable code (its IR names
/// libcudadevrt's launch functions). A guess, made before the compile: one wrong costs
/// a worker started for nothing, or started when first needed. Below sm_100, where no
/// finalizer runs, not asked (the IR not searched).
fn merged_after(plan: &Plan, g: &Gathered) -> bool {
    let req = plan.req;
    if req.target.sm < 100 {
        return false;
    }
    let calls_runtime = || {
        let finds = |m: &lto::pool::PoolModule, name: &[u8]| {
            memchr::memmem::find(&m.module.data, name).is_some()
        };
        (g.pool.modules.iter()).any(|m| finds(m, b"__cudaCDP") || finds(m, b"cudaLaunchDevice"))
    };
    g.partial
        || req.split_compile.is_some()
        || req.split_compile_extended.is_some()
        || (g.from_host && g.pool.cudadevrt && calls_runtime())
}

/// Incremental LTO's link or its decision to link whole-program. The first link of a
/// program never partitioned here (in `Auto`, its history holds no partition) is
/// likely whole-program: its libNVVM compile starts at once, beside the summaries the
/// decision is made from (which it no longer waits for: the time outside libNVVM and
/// ptxas, benches/results/first-link.md), its messages held until it is known
/// to be wanted; when the partitions are chosen instead, it is stopped then, before they
/// are built. With it, what it compiled.
#[allow(clippy::type_complexity)]
fn incremental(
    plan: &Plan,
    ctx: &LinkContext,
    g: &Gathered,
    finalizer: &dyn Fn(usize),
    timings: &mut Timings,
) -> Result<(lto::incremental::Outcome, Option<Result<lto::LtoOutput>>)> {
    let req = plan.req;
    let program = lto::incremental::Program {
        pool: &g.pool,
        settings: &g.settings,
        consensus: &g.consensus,
        partial: g.partial,
    };
    let decide = |beside: Option<&crate::child::Cancel>, timings: &mut Timings| {
        lto::incremental::link(plan, ctx, &program, beside, finalizer, timings)
    };
    // (-emit-ptx is refused by incremental LTO; the modes that print straight to the
    // terminal keep their order)
    let quiet = !(req.emit_ptx || req.verbose_keep || req.verbose2);
    if !(quiet && lto::incremental::likely_whole(plan, ctx)) {
        return Ok((decide(None, timings)?, None));
    }
    let cancel = std::sync::Arc::new(crate::child::Cancel::default());
    let held = diag::Diagnostics::collector();
    let trace = crate::trace::current();
    let (decided, (compiled, took)) = std::thread::scope(|s| {
        let beside = s.spawn(|| {
            let _lane = crate::trace::lane(&trace);
            let _span = crate::trace::span("phase", "cicc");
            jobs::progress_line("cicc", None);
            let t = std::time::Instant::now();
            let r = whole_ir(plan, ctx, g, &held, Some(cancel.clone()), false);
            if r.is_err() && cancel.stopped() {
                crate::trace::arg("stopped", || "the partitions were built".into());
            }
            (r, t.elapsed())
        });
        // (stopped by the link as it chooses the partitions, or here when it failed)
        let decided = decide(Some(&cancel), timings);
        let whole = matches!(decided, Ok(lto::incremental::Outcome::Whole(_)));
        if !whole {
            cancel.stop();
        }
        // (waiting for the compile it chose: on the status line as the compile's own)
        let wait = || beside.join().expect("the whole-program compile's thread");
        let compiled = match whole {
            true => jobs::phase(engine_name(&g.pool), wait),
            false => wait(),
        };
        (decided, compiled)
    });
    let decided = decided?;
    if let lto::incremental::Outcome::Whole(_) = decided {
        ctx.diag.replay(&held);
        timings.phases.push(("cicc", took));
        jobs::progress_line("cicc", Some(took));
        return Ok((decided, Some(compiled)));
    }
    Ok((decided, None))
}

/// The module pool and its settings (`None`: no IR among the inputs, nvlink's warning).
fn gather(
    plan: &Plan,
    ctx: &LinkContext,
    trees: &[input::Node],
    timings: &mut Timings,
) -> Result<Option<Gathered>> {
    let (req, diag) = (plan.req, ctx.diag);
    let mut pool = timings.phase("pool", || lto::pool::collect(trees, req.target, diag))?;
    if pool.modules.is_empty() {
        diag.warning(NO_IR);
        return Ok(None);
    }
    let partial = !pool.non_ir.is_empty() || req.force_partial_lto;
    // one line for every input without IR, as nvlink does
    for o in &pool.non_ir {
        diag.info(&format!(
            "requested LTO but '{o}' not built for LTO so doing partial LTO"
        ));
    }
    if req.split_compile.is_some() && req.split_compile_extended.is_some() {
        diag.info("Incompatible options '-split-compile' and '-split-compile-extended', using '-split-compile-extended'");
    }
    let mut consensus = consensus::Consensus::default();
    for m in &pool.modules {
        consensus.add(&m.module.name, m.options.as_deref());
    }
    consensus.check(&mut |n| diag.info(&n.0))?;
    timings.partial_lto = pool.non_ir.clone();
    timings.consensus = consensus.explain();
    if req.verbose {
        for line in &timings.consensus {
            diag.info(line);
        }
    }
    let from_host = pool.modules.iter().any(|m| m.from_host_object);
    // nvcc's IR beside LLVM bitcode: one module, linked by LLVM, for libNVVM's newer NVVM
    let mixed = lto::prelink::is_mixed(&pool);
    // clang's kernels: no host object of the link says whether its host code launches
    // them (clang writes no host-reference table), so they are kept as launched
    let mut bitcode = lto::prelink::BitcodeCode::default();
    if mixed {
        bitcode = lto::prelink::bitcode_code(&pool)?;
        timings.phase("link-ir", || {
            lto::prelink::join_mixed(&mut pool, req.target)
        })?;
    }
    let settings = settings_for(plan, ctx, &pool, from_host, mixed, partial, &bitcode);
    Ok(Some(Gathered {
        pool,
        consensus,
        settings,
        partial,
        from_host,
        mixed,
        bitcode,
    }))
}

/// libNVVM's settings for the pool, as nvlink gives them (`lto_settings`), with what
/// nvlinkrs' own IR, clang's kernels and partial LTO change.
fn settings_for(
    plan: &Plan,
    ctx: &LinkContext,
    pool: &Pool,
    from_host: bool,
    mixed: bool,
    partial: bool,
    bitcode: &lto::prelink::BitcodeCode,
) -> lto::LtoSettings {
    let (req, diag) = (plan.req, ctx.diag);
    let mut settings = lto_settings(plan, pool, from_host);
    settings.nvvm_latest |= mixed;
    // IR nvlinkrs wrote (LLVM 22) is read by libNVVM's newer NVVM only: up to sm_90 that
    // takes -nvvm-latest, which nvlink needs given (it fails without); sm_100 and later
    // always use the newer NVVM, and their options are left as nvlink's
    let ours = (!mixed && req.target.sm < 100)
        .then(|| pool.modules.iter().find(|m| written_by_nvlinkrs(&m.module)))
        .flatten();
    if let (Some(m), false) = (ours, settings.nvvm_latest) {
        settings.nvvm_latest = true;
        if req.verbose {
            diag.info(&format!(
                "'{}' holds IR written by nvlinkrs (LLVM 22): linking with -nvvm-latest, which libNVVM needs to read it for {} (nvlink needs it given)",
                m.module.name, req.target
            ));
        }
    }
    let used = !req.kernels_used.is_empty() || !req.variables_used.is_empty();
    if settings.host_info && !used {
        settings
            .host_refs
            .ek
            .extend(bitcode.kernels.iter().cloned());
    }
    if partial {
        // nvlink's partial LTO: relocatable output, without host information (read
        // off nvlink 13.5 through a logging libNVVM)
        settings.device_c = true;
        settings.force_device_c = true;
        settings.host_info = false;
        settings.host_refs = Default::default();
    }
    settings
}

/// The whole program through the LTO engine (libNVVM, or LLVM for bitcode), its
/// messages to `diag`; `cancel`: a compile another thread may stop; `status`: shown on
/// the status line when long.
fn whole_ir(
    plan: &Plan,
    ctx: &LinkContext,
    g: &Gathered,
    diag: &diag::Diagnostics,
    cancel: Option<std::sync::Arc<crate::child::Cancel>>,
    status: bool,
) -> Result<lto::LtoOutput> {
    let req = plan.req;
    let options = lto::nvvm_options(&g.settings, &g.consensus);
    let engine = engine_for(plan, ctx, &g.pool, cancel)?;
    if req.verbose_keep {
        for m in &g.pool.modules {
            diag::to_stdout(&format!("nvlink -lto-add-module {}.nvvm\n", m.module.name));
        }
    }
    if req.verbose {
        diag.info(&format!("libNVVM options: {}", options.join(" ")));
    }
    if req.verbose2 {
        diag::to_stderr(" Running nvlink cicc-lto\n");
    }
    let modules: Vec<lto::IrModule> = g.pool.modules.iter().map(|m| m.module.clone()).collect();
    let compile = || engine.0.compile(&modules, &options, diag);
    match status {
        true => jobs::phase(engine.1, compile),
        false => compile(),
    }
    .map_err(|e| explain_newer_ir(e, &modules, req.target))
    .map_err(|e| explain_ours(e, &modules, g.mixed))
}

/// libNVVM's output, or `None` when its PTX was the output (`-emit-ptx`, written here).
fn emitted(
    plan: &Plan,
    lto_out: lto::LtoOutput,
    timings: &mut Timings,
) -> Result<Option<lto::LtoOutput>> {
    // (nvlink writes the PTX without libcudadevrt: its check is the cubin's, `assemble`)
    if plan.req.emit_ptx {
        let ptx = lto_out.ptx.concat();
        output::write_atomic(&plan.req.output, &ptx)?;
        timings.written.out = timings.written.keep.then_some(ptx);
        return Ok(None);
    }
    Ok(Some(lto_out))
}

/// A `-dc` program without libcudadevrt: nvlink's fatal error (checked after ptxas, as
/// nvlink does: an unresolved extern function is ptxas's error).
fn missing_cudadevrt(g: &Gathered) -> bool {
    g.from_host && !g.pool.cudadevrt && !g.partial
}

/// The PTX assembled by ptxas: the output of a whole-program link, or relocatable cubins
/// for the merge (partial LTO, a split compile, a bitcode library's calls).
fn assemble(
    plan: &Plan,
    ctx: &LinkContext,
    g: &Gathered,
    lto_out: lto::LtoOutput,
    whole_timer: Option<Box<lto::incremental::WholeTimer>>,
    timings: &mut Timings,
) -> Result<LtoOutcome> {
    let (req, diag) = (plan.req, ctx.diag);
    let split = lto_out.ptx.len() > 1;
    // (libnvJitLink links the kernels of a libcudadevrt its caller gave beside a whole
    // program too: its output is merged with them, see `assemble::drop_unused_cudadevrt`)
    // (a function of a bitcode library that libNVVM left a call is compiled as the
    // library's own archive has it, called: ptxas's whole-program mode inlined NVSHMEM's
    // transfer functions into the kernel, at 2.3 times ptxas' time; nvlink links no
    // bitcode library, so no image of its is to match)
    let library_calls = lto::prelink::defines_any(&lto_out.ptx, &g.bitcode.library_functions);
    let relocatable = g.partial
        || !lto_out.whole_program
        || split
        || library_calls
        || (req.nvjitlink_cudadevrt && g.pool.cudadevrt);
    if req.verbose2 {
        diag::to_stderr(" Running nvlink ptxas-lto\n");
    }
    let mut options = plan.ptxas_options(relocatable);
    if library_calls && !split {
        // (one relocatable ptxas job for the program and a bitcode library's functions:
        // ptxas' own threads; a fixed count, which its tool note records, so that the
        // image does not depend on the machine; no nvlink image to match)
        options.split_compile = options.split_compile.or(Some(LIBRARY_PTXAS_THREADS));
    }
    options.maxrregcount = req
        .maxrregcount
        .or(g.consensus.value(consensus::Opt::MaxReg))
        .filter(|&n| n > 0);
    // (a split compile's copies of each static variable: one definition, docs/rules/lto.md)
    let pieces = if split {
        lto::split_data::single_home(lto_out.ptx)
    } else {
        lto_out.ptx
    };
    let n = pieces.len();
    let jobs: Vec<ptxas_driver::Job> = pieces
        .into_iter()
        .enumerate()
        .map(|(i, ptx)| ptxas_driver::Job {
            name: match n {
                1 => "<lto ptx>".into(),
                _ => format!("<lto ptx piece {} of {n}>", i + 1),
            },
            ptx,
            options: options.clone(),
        })
        .collect();
    let assembler =
        ptxas_driver::for_link(plan.toolkit()?, ctx.cache(), &ctx.ptxas_launcher, &plan.env)?;
    // The pool nvlink sizes from -split-compile-extended (0: one thread per core).
    let threads = req.split_compile_extended.unwrap_or(0) as usize;
    let assembled = timings.phase("ptxas", || {
        ptxas_driver::assemble_all(&ctx.jobs, assembler.as_ref(), &jobs, threads)
    })?;
    // (an incremental link's whole-program link: its time, for later links to weigh)
    if let (Some(t), Some(cache)) = (whole_timer, ctx.cache()) {
        let ms: u128 = timings
            .phases
            .iter()
            .filter(|(p, _)| matches!(*p, "cicc" | "ptxas"))
            .map(|(_, d)| d.as_millis())
            .sum();
        t.record(cache, ms as u64, timings);
    }
    let mut cubins = Vec::with_capacity(assembled.len());
    for a in assembled {
        // (ptxas refusing libNVVM's PTX with an error, not a fatal message, is nvlink's
        // JIT compile failing: a constant bank over 64 KiB; its fatal messages, an
        // unknown option or an unresolved function, stay `elfLink fatbinary error`)
        let mut a = a.map_err(|e| {
            let ptxas = e.tool_output();
            let error_only = ptxas.contains(" error ") && !ptxas.contains(" fatal ");
            match e.message() {
                FATBINARY_ERROR if error_only => e.reworded(JIT_FAILED),
                _ => e,
            }
        })?;
        diag.tool_output(&a.messages);
        if req.nvjitlink {
            // (as libnvJitLink's own ptxas notes itself; the notes of the other inputs,
            // libcudadevrt's, stay as they are)
            elf::tkinfo::jit_ptxas_in_place(&mut a.cubin);
        }
        cubins.push(a.cubin);
    }
    if missing_cudadevrt(g) {
        return Err(Error::fatal("expected libcudadevrt object"));
    }
    if relocatable {
        return relocatable_outcome(cubins, &g.pool);
    }
    timings.phase("write", || output::write_atomic(&req.output, &cubins[0]))?;
    if timings.written.keep {
        timings.written.out = cubins.into_iter().next();
    }
    Ok(LtoOutcome::Written)
}

/// LTO's relocatable cubins, for the merge, and the modules whose IR they hold.
fn relocatable_outcome(cubins: Vec<Vec<u8>>, pool: &Pool) -> Result<LtoOutcome> {
    let inputs = cubins
        .into_iter()
        .map(|c| {
            let cubin = elf::cubin::Cubin::parse(bytes::Bytes::from_vec(c), "lto.cubin")?;
            Ok(merge::Input {
                cubin,
                cudadevrt: false,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let from = pool.modules.iter().map(|m| m.module.name.clone()).collect();
    Ok(LtoOutcome::Relocatable(inputs, from))
}

/// The name of the engine [`engine_for`] chooses for the pool (the status line's).
fn engine_name(pool: &lto::pool::Pool) -> &'static str {
    match pool
        .modules
        .iter()
        .any(|m| m.module.form == lto::IrForm::Bitcode)
    {
        true => "LLVM",
        false => "libNVVM",
    }
}

/// The LTO engine for the module set: LLVM for LLVM bitcode (which nvlink refuses),
/// libNVVM for NVIDIA's IR; with its name for the status line.
fn engine_for<'a>(
    plan: &Plan,
    ctx: &'a LinkContext,
    pool: &lto::pool::Pool,
    cancel: Option<std::sync::Arc<crate::child::Cancel>>,
) -> Result<(Box<dyn Engine + 'a>, &'static str)> {
    let cache = ctx.cache();
    let _span = crate::trace::span("lto", "LTO engine loaded");
    let (engine, name, files) = engine_uncached(plan, ctx, pool, cancel)?;
    let engine: Box<dyn Engine + 'a> = Box::new(lto::Traced {
        inner: engine,
        name,
    });
    let Some(cache) = cache else {
        return Ok((engine, name));
    };
    let mut identity = String::from(name);
    for f in files {
        identity.push(' ');
        identity.push_str(&cache.tool_id(&f)?);
    }
    Ok((
        Box::new(lto::CachedEngine {
            inner: engine,
            cache,
            identity,
        }),
        name,
    ))
}

/// The engine, its name, and the files whose content decides its output.
#[allow(clippy::type_complexity)]
fn engine_uncached(
    plan: &Plan,
    ctx: &LinkContext,
    pool: &lto::pool::Pool,
    cancel: Option<std::sync::Arc<crate::child::Cancel>>,
) -> Result<(Box<dyn Engine>, &'static str, Vec<std::path::PathBuf>)> {
    let req = plan.req;
    use lto::IrForm;
    let of = |form| pool.modules.iter().find(|m| m.module.form == form);
    match (of(IrForm::Bitcode), of(IrForm::Container)) {
        (Some(b), Some(c)) => Err(Error::fatal(format!(
            "LLVM bitcode ('{}') and NVIDIA LTO IR ('{}') cannot be linked in one LTO link yet",
            b.module.name, c.module.name
        ))),
        (Some(b), None) => {
            lto::llvm_engine::refuse_unsupported(req.debug, &req.xnvvm, &b.module.name)?;
            let kit = plan.toolkit()?;
            let libdevice = Some(kit.libdevice()).filter(|p| p.is_file());
            let mut files: Vec<std::path::PathBuf> = libdevice.iter().cloned().collect();
            files.extend(lto::llvm_helper::locate_in(&plan.env));
            Ok((
                Box::new(lto::llvm_engine::LlvmEngine {
                    libdevice,
                    cache: ctx.cache.clone(),
                    jobserver: ctx.jobs.jobserver().cloned(),
                }),
                "LLVM",
                files,
            ))
        }
        _ => {
            let path = plan.libnvvm_to_load()?;
            // (compiled in a child: libNVVM's own threads are not reliable, and its
            // output depends on where its data lies, which a child fixes: lto::isolated;
            // but in the drop-in libnvJitLink, whose process is its host's (Python),
            // there is no nvlinkrs to start: in process, as NVIDIA's library does)
            if req.nvjitlink {
                let lib = lto::libnvvm::LibNvvm::load(&path)?;
                return Ok((Box::new(lto::NvvmEngine { lib }), "libNVVM", vec![path]));
            }
            // (not loaded here: the child loads it, and a library that cannot be loaded
            // is the child's answer, the same error; loading it here too delayed the
            // compile by the library's load. A path that is not a file fails here, with
            // the loader's error, before the cache reads it for its identity)
            lto::libnvvm::check_file(&path)?;
            let engine = lto::isolated::IsolatedNvvm {
                lib: path.clone(),
                cancel,
            };
            Ok((Box::new(engine), "libNVVM", vec![path]))
        }
    }
}

/// Adds to a failed compile the modules whose IR targets a newer SM than `-arch` (libNVVM
/// reports them only as a bitcode parse error).
fn explain_newer_ir(mut e: Error, modules: &[lto::IrModule], target: arch::Arch) -> Error {
    for m in modules {
        let arch = crate::ir::container::parse_header(&m.data, &m.name)
            .ok()
            .and_then(|(h, _)| h.arch());
        if let Some(a) = arch.filter(|&a| !crate::arch::ir_compatible(a, target)) {
            e = e.context(format!(
                "'{}' holds LTO IR for {a}, which cannot be linked for -arch={target}",
                m.name
            ));
        }
    }
    e
}

/// Whether `m` is a container nvlinkrs wrote (`--emit-ltoir`, or a mixed link's one
/// module): LLVM 22's version in its header, which cicc never writes.
fn written_by_nvlinkrs(m: &lto::IrModule) -> bool {
    crate::ir::container::parse_header(&m.data, &m.name)
        .is_ok_and(|(h, _)| h.llvm_version == lto::staged::LLVM_VERSION)
}

/// A failed compile of IR nvlinkrs wrote: which module that is and what compiled it
/// (libNVVM's newer NVVM, `-nvvm-version=nvvm-latest`, always given for it).
fn explain_ours(e: Error, modules: &[lto::IrModule], mixed: bool) -> Error {
    match modules.iter().find(|m| written_by_nvlinkrs(m)) {
        Some(m) if mixed => e.context(format!(
            "'{}' is the one module LLVM 22 linked from the mixed link's inputs, compiled by libNVVM's newer NVVM (-nvvm-version=nvvm-latest)",
            m.name
        )),
        Some(m) => e.context(format!(
            "'{}' holds IR written by LLVM 22 (nvlinkrs --emit-ltoir), compiled by libNVVM's newer NVVM, the one that reads it",
            m.name
        )),
        None => e,
    }
}

/// libNVVM's settings for the module pool (before partial LTO changes them).
fn lto_settings(plan: &Plan, pool: &Pool, from_host: bool) -> lto::LtoSettings {
    let req = plan.req;
    let used = !req.kernels_used.is_empty() || !req.variables_used.is_empty();
    // A host object without relocatable device code (CMake puts libcudart_static and
    // the target's host-only objects on its device link line) has no table of what it
    // refers to: nvlink then links as with --ignore-host-info, every kernel and device
    // variable kept (byte for byte the same output, read off nvlink 13.5).
    let ignore_host_info = req.ignore_host_info || pool.hosts.iter().any(|h| !h.relocatable);
    let host_refs = if used {
        crate::input::HostRefs::from_used(&req.kernels_used, &req.variables_used)
    } else if ignore_host_info || !crate::plan::host_tables_apply(req, &pool.hosts) {
        crate::input::HostRefs::default()
    } else {
        // (a prelinked library's tables after the host objects', as if its host objects
        // came last; they apply where the link's own host objects' tables do)
        crate::input::HostRefs::from_tables(
            pool.hosts
                .iter()
                .flat_map(|h| h.host_refs.iter())
                .chain(pool.stored_host_refs.iter())
                .map(|(s, e)| (*s, e.as_slice())),
        )
    };
    lto::LtoSettings {
        target: Some(req.target),
        // With both split options, libNVVM gets only the extended one (nvlink says so).
        split_compile: req
            .split_compile
            .filter(|_| req.split_compile_extended.is_none()),
        split_compile_extended: req.split_compile_extended,
        ofast_compile: req.ofast_compile.clone(),
        maxrregcount: req.maxrregcount,
        device_c: from_host && pool.cudadevrt,
        force_device_c: false,
        debug: req.debug,
        host_info: !ignore_host_info,
        xnvvm: req.xnvvm.clone(),
        nvvm_latest: req.nvvm_latest,
        host_refs,
    }
}
