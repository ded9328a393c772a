//! nvlinkrs: an open device linker for CUDA, a drop-in for NVIDIA's `nvlink`.
//!
//! `link` is the one place the phases are called, in order; each phase reads what the
//! earlier ones produced and returns a new value: read the inputs, gather the LTO module
//! pool, agree on options, compile the IR with an engine, assemble the PTX with ptxas,
//! write the output; links that are not whole-program LTO gather every input's SASS (PTX
//! through ptxas `-c`), merge the cubins and write the merged image.

pub mod arch;
pub mod bytes;
pub mod cache;
pub mod cli;
pub mod commands;
pub mod consensus;
pub mod daemon;
pub mod demangle;
pub mod diag;
pub mod elf;
pub mod fasthash;
pub mod fatbin;
pub mod frames;
pub mod input;
pub mod inspect;
pub mod jobs;
mod linkcache;
pub mod lto;
pub mod merge;
pub mod optcheck;
pub mod output;
pub mod ptxas_driver;
mod report;
pub mod shim;
pub mod target;
pub mod toolkit;
mod toolnote;

use std::time::Instant;

use cli::LinkRequest;
use diag::{Diagnostics, Error, Result};
use lto::Engine;

static ONE_SHOT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Says that the process ends after this link (the command line; not the daemon): the
/// link's large structures (symbol tables, maps, parsed inputs) are then left to the
/// process exit instead of being freed piece by piece, as mold and wild do; freeing them
/// took a tenth of a 128-unit link.
pub fn one_shot_process() {
    ONE_SHOT.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Frees `x`, or leaves it to the process exit (`one_shot_process`).
pub(crate) fn dispose<T>(x: T) {
    if ONE_SHOT.load(std::sync::atomic::Ordering::Relaxed) {
        std::mem::forget(x);
    }
}

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
    written: linkcache::Written,
}

impl Timings {
    fn phase<T>(&mut self, name: &'static str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let t = Instant::now();
        jobs::progress_line(name, None);
        let r = f();
        self.phases.push((name, t.elapsed()));
        jobs::progress_line(name, Some(t.elapsed()));
        r
    }
}

/// Runs a device link: from the cache when the same link (tools, options, input
/// contents) was done before, else phase by phase, caching what it can.
pub fn link(req: &LinkRequest, diag: &Diagnostics) -> Result<Timings> {
    let linked = link_unchecked(req, diag);
    if let (Err(_), Some(path)) = (&linked, &req.time) {
        // nvlink writes the `-time` file's header even when the link fails
        output::append_times(path, &[]).ok();
    }
    linked
}

fn link_unchecked(req: &LinkRequest, diag: &Diagnostics) -> Result<Timings> {
    let started = Instant::now();
    if req.preserve_relocs && req.target.sm >= 100 {
        // (nvlink lists the capsule-Mercury relocations too there; not done yet)
        return Err(Error::fatal(format!(
            "option '--preserve-relocs' is not implemented by nvlinkrs for '{}' (sm_100 and newer) yet; refusing rather than writing another image than nvlink's",
            req.target
        )));
    }
    if req.preserve_relocs && req.target.sm >= 90 {
        // (nvlink 13.5's words, its spelling kept)
        diag.warning(&format!(
            "Option '--preserve-relocs' is not fully implemented for gpu archtecture '{}' and may not work as expected",
            req.target
        ));
    }
    if req.target_kind == arch::TargetKind::Virtual {
        // -arch=compute_XX (nvcc -arch=compute_XX, PTX only): nvlink reads the inputs and
        // writes the --register-link-binaries file, and no image
        let paths = input::input_list(&req.inputs, &req.libraries, &req.library_paths);
        let trees = input::load(&paths, input::Mode::Link { lto: req.lto })?;
        diag.check()?;
        let kept = input::prelinked::without_linked(&trees, req.lto);
        let hosts = lto::pool::hosts(kept.as_deref().unwrap_or(&trees));
        return finish(req, &hosts, false, Timings::default());
    }
    // a cache that cannot be used (an unsafe directory) or cannot store only costs time;
    // the default one, not asked for, says so only under -v (a warning would fail a link
    // made with -Werror)
    let cache_problem = |message: &str| {
        if !req.cache.default {
            diag.warning(message);
        } else if req.verbose {
            diag.info(message);
        }
    };
    let cache = match &req.cache.dir {
        Some(dir) => match cache::Cache::open(dir, cache::DEFAULT_CAP) {
            Ok(c) => Some(std::sync::Arc::new(c)),
            Err(e) => {
                cache_problem(&format!("{}; linking without the cache", e.message()));
                None
            }
        },
        None => {
            if req.cache.default {
                cache_problem(
                    "no default cache directory (neither XDG_CACHE_HOME nor HOME is an absolute path); linking without the cache",
                );
            }
            None
        }
    };
    let Some(cache) = cache else {
        let t = link_phases(req, diag, None, false)?;
        report::write(req, &t, None, "off", started)?;
        return Ok(t);
    };
    let key = linkcache::key(req, &cache);
    let earlier = diag.printed().len(); // messages from before the link are not its own
    if let Some(key) = &key
        && let Some(entry) = cache.get(key)
        && linkcache::replay(req, diag, &entry)?
    {
        let t = Timings {
            phases: vec![("cache", std::time::Duration::ZERO)],
            ..Default::default()
        };
        report::write(req, &t, Some(&cache), "hit", started)?;
        return Ok(t);
    }
    let timings = {
        let _current = cache::set_current(&cache);
        link_phases(req, diag, Some(&cache), key.is_some())?
    };
    if let Some(key) = &key
        && diag.error_count() == 0
    {
        linkcache::store(req, diag, earlier, &cache, key, &timings.written);
    }
    if let Some(failure) = cache.store_failure() {
        cache_problem(&format!("{failure}; the output is not cached"));
    }
    let whole = if key.is_some() { "miss" } else { "not cached" };
    report::write(req, &timings, Some(&cache), whole, started)?;
    Ok(timings)
}

/// The phases of a link, in order.
fn link_phases(
    req: &LinkRequest,
    diag: &Diagnostics,
    cache: Option<&cache::Cache>,
    keep: bool,
) -> Result<Timings> {
    let mut timings = Timings {
        written: linkcache::Written::new(keep || req.verbose),
        ..Default::default()
    };
    let paths = input::input_list(&req.inputs, &req.libraries, &req.library_paths);
    let opened = input::Opened::default();
    let trees = timings.phase("read", || {
        input::load_with(&paths, input::Mode::Link { lto: req.lto }, &opened)
            .map(|t| input::once_per_archive(t, &paths, &opened))
    })?;
    diag.check()?;
    if req.register_link_binaries.is_some() {
        // device code given as a file of its own has no host object to register it
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
    // what an earlier -dlink object among the inputs covers is linked no more (the LTO
    // pool still sees all of it, as nvlink's partial-LTO decision does)
    let kept = input::prelinked::without_linked(&trees, req.lto);
    let linked = kept.as_deref().unwrap_or(&trees);
    let hosts = lto::pool::hosts(linked);
    let mut lto_cubins = Vec::new();
    let mut lto_from = Vec::new();
    if req.lto {
        match lto_phase(req, &trees, diag, &mut timings, cache)? {
            LtoOutcome::Written => return finish(req, &hosts, true, timings),
            LtoOutcome::Relocatable(c, from) => {
                lto_cubins = c;
                lto_from = from;
            }
            LtoOutcome::NoIr => {}
        }
    }
    // (from here on only the merge writes the output)
    let target = output::prepare(&req.output);
    let units = timings.phase("gather", || {
        merge::gather::collect(linked, req.target, req.lto, diag)
    })?;
    // no input with code for the target (each reported by a warning): nvlink writes an
    // image without code, and so does the merge
    let described = lto_cubins.is_empty() && units.iter().all(|u| u.system || u.host);
    let inputs = timings.phase("assemble", || objects(req, diag, units, lto_cubins, cache))?;
    let mut options = merge_options(req);
    options.kernels = kernel_filter(req, &hosts, described);
    options.lto_from = lto_from;
    let (image, steps) =
        timings.phase("merge", || merge::link_with_steps(&inputs, &options, diag))?;
    timings.merge_steps = steps;
    diag.check()?;
    let found = target.take();
    let keep = timings.written.keep;
    let wrote = timings.phase("write", || match keep {
        // (the cache stores these bytes, not what the output reads back)
        true => {
            let mut bytes = Vec::new();
            elf::write::write_to(image, &mut bytes).map_err(|e| Error::fatal(e.to_string()))?;
            output::write_output(found, |w| w.write_all(&bytes))?;
            Ok(Some(bytes))
        }
        false => output::write_output(found, |w| elf::write::write_to(image, w)).map(|_| None),
    })?;
    timings.written.out = wrote;
    if req.verbose {
        // (the bytes written: reading the output back would take them from a pipe)
        let written = bytes::Bytes::from_vec(timings.written.out.clone().unwrap_or_default());
        let image = elf::cubin::Cubin::parse(written, &req.output.display().to_string())?;
        for line in merge::resources::report(&image) {
            diag.info_always(&line);
        }
    }
    dispose(inputs);
    dispose(kept);
    dispose(trees);
    finish(req, &hosts, false, timings)
}

enum LtoOutcome {
    /// Whole-program LTO wrote the output.
    Written,
    /// Partial LTO or a split compile: the relocatable cubins of the IR (one per split
    /// piece), to merge with the rest.
    Relocatable(Vec<merge::Input>, Vec<String>),
    /// No IR in the inputs: an ordinary link.
    NoIr,
}

fn merge_options(req: &LinkRequest) -> merge::MergeOptions {
    merge::MergeOptions {
        target: Some(req.target),
        relocatable: req.relocatable,
        debug: req.debug,
        preserve_relocs: req.preserve_relocs,
        disable_smem_reservation: req.disable_smem_reservation,
        allow_undefined_globals: req.allow_undefined_globals,
        note_command_line: toolnote::command_line(req),
        note_output: req.debug.then(|| toolnote::file_name(&req.output)),
        dump_callgraph: req.dump_callgraph.is_some(),
        kernels: None,
        lto_from: Vec::new(),
        suppress_stack_size_warning: req.recorded.suppress_stack_size_warning,
        tool_name: req.tool_name.clone(),
    }
}

/// The kernels a link keeps: `-kernels-used` when given; else the kernels named in the
/// host-reference tables when they apply (nvlink then drops every other kernel) and
/// speak for all the code merged (`described`: every unit but libcudadevrt's comes from
/// a host object). A cubin, PTX or fatbin file, or libNVVM's output in a partial-LTO
/// link, has no tables, and nvlink then keeps every kernel, in every unit.
fn kernel_filter(
    req: &LinkRequest,
    hosts: &[lto::pool::HostInfo],
    described: bool,
) -> Option<lto::HostRefs> {
    if !req.kernels_used.is_empty() {
        return Some(lto::HostRefs::from_used(&req.kernels_used, &[]));
    }
    (described && host_tables_apply(req, hosts)).then(|| {
        lto::HostRefs::from_tables(
            hosts
                .iter()
                .filter(|h| !h.cudadevrt)
                .flat_map(|h| h.host_refs.iter().map(|(s, e)| (*s, e.as_slice()))),
        )
    })
}

/// Whether the host objects' reference tables narrow the link: unless
/// `--ignore-host-info`, when a program object (not libcudadevrt) has one that is not
/// empty. libcudadevrt's own tables count only beside a program's (observed: with no
/// program table, nvlink passes no lists and every kernel stays).
fn host_tables_apply(req: &LinkRequest, hosts: &[lto::pool::HostInfo]) -> bool {
    !req.ignore_host_info
        && hosts
            .iter()
            .any(|h| !h.cudadevrt && !h.host_refs.is_empty())
}

/// The cubins of the merge, in input order: SASS as found, PTX through ptxas `-c` (in
/// parallel), the LTO result first.
fn objects(
    req: &LinkRequest,
    diag: &Diagnostics,
    units: Vec<merge::gather::Unit>,
    lto_cubins: Vec<merge::Input>,
    cache: Option<&cache::Cache>,
) -> Result<Vec<merge::Input>> {
    use merge::gather::Source;
    let jobs: Vec<ptxas_driver::Job> = units
        .iter()
        .filter_map(|u| match &u.source {
            Source::Ptx(p, member) => Some(ptxas_driver::Job {
                name: u.origin.clone(),
                ptx: p.to_vec(),
                options: ptxas_driver::PtxasOptions {
                    member: member.clone(),
                    ..ptxas_options(req, true)
                },
            }),
            Source::Cubin(_) => None,
        })
        .collect();
    let mut assembled = if jobs.is_empty() {
        Vec::new()
    } else {
        let kit = toolkit::Toolkit::discover(req.cuda_path.as_deref(), req.nvvmpath.as_deref())?;
        let ptxas = assembler(&kit, cache)?;
        ptxas_driver::assemble_all(ptxas.as_ref(), &jobs, 0)?
    }
    .into_iter();
    let mut raw: Vec<(String, bytes::Bytes, bool)> = Vec::new();
    for u in units {
        let data = match u.source {
            Source::Cubin(b) => b,
            Source::Ptx(..) => {
                let a = assembled.next().expect("one result per job")?;
                diag.tool_output(&a.messages);
                bytes::Bytes::from_vec(a.cubin)
            }
        };
        raw.push((u.origin, data, u.system));
    }
    use rayon::prelude::*;
    let parsed: Vec<Result<merge::Input>> = raw
        .into_par_iter()
        .map(|(origin, data, system)| {
            let cubin = elf::cubin::Cubin::parse(data, &origin)?;
            check_object(&cubin, req)?;
            Ok(merge::Input { cubin, system })
        })
        .collect();
    let mut out = lto_cubins;
    for p in parsed {
        out.push(p?);
    }
    Ok(drop_unused_system(out))
}

/// libcudadevrt objects nothing refers to are left out (nvlink drops them, debug
/// frames and notes included), and so is a second copy of one already kept: a library
/// named twice (CMake's device link line has `-lcudadevrt` and nvcc adds its own) gives
/// its members once, as an archive member is only taken for a symbol still undefined.
fn drop_unused_system(inputs: Vec<merge::Input>) -> Vec<merge::Input> {
    use std::collections::HashSet;
    let global = |s: &&elf::cubin::Symbol| s.bind != elf::cubin::STB_LOCAL;
    let wanted: HashSet<&str> = inputs
        .iter()
        .filter(|i| !i.system)
        .flat_map(|i| i.cubin.symbols.iter())
        .filter(|s| !s.defined() && global(s))
        .map(|s| s.name.as_str())
        .collect();
    let mut defined: HashSet<&str> = inputs
        .iter()
        .filter(|i| !i.system)
        .flat_map(|i| i.cubin.symbols.iter())
        .filter(|s| s.defined() && global(s))
        .map(|s| s.name.as_str())
        .collect();
    let mut keep = Vec::with_capacity(inputs.len());
    for i in &inputs {
        let k = !i.system
            || i.cubin.symbols.iter().any(|s| {
                s.defined()
                    && global(&s)
                    && wanted.contains(s.name.as_str())
                    && !defined.contains(s.name.as_str())
            });
        if k && i.system {
            defined.extend(
                i.cubin
                    .symbols
                    .iter()
                    .filter(|s| s.defined() && global(s))
                    .map(|s| s.name.as_str()),
            );
        }
        keep.push(k);
    }
    inputs
        .into_iter()
        .zip(keep)
        .filter_map(|(i, k)| k.then_some(i))
        .collect()
}

/// A cubin the merge can take: relocatable, for the target's SM.
fn check_object(c: &elf::cubin::Cubin, req: &LinkRequest) -> Result<()> {
    if c.e_type == 0xFF00 {
        // nvlink links it; its shared memory comes already laid out per kernel
        return Err(Error::fatal(format!(
            "'{}' holds --extensible-whole-program code (e_type 0xff00), which nvlinkrs does not link yet; refusing rather than writing another image than nvlink's",
            c.origin
        )));
    }
    if c.e_type != 1 {
        return Err(Error::fatal(format!(
            "'{}' is not a relocatable device object (e_type {}); only objects built with -rdc=true / -dc / ptxas -c can be linked",
            c.origin, c.e_type
        )));
    }
    let sm = (c.e_flags >> 8) & 0xFF;
    if !lto::pool::sass_compatible(arch::Arch::plain(sm), req.target) {
        return Err(Error::fatal(format!(
            "Arch mismatch: '{}' is sm_{sm}, the link is for {}",
            c.origin, req.target
        )));
    }
    Ok(())
}

fn ptxas_options(req: &LinkRequest, relocatable: bool) -> ptxas_driver::PtxasOptions {
    ptxas_driver::PtxasOptions {
        target: req.target,
        relocatable,
        maxrregcount: req.maxrregcount.filter(|&n| n > 0),
        debug: req.debug,
        extra: req.xptxas.clone(),
        split_compile: req.split_compile.filter(|&n| n != 1),
        member: Vec::new(),
    }
}

fn lto_phase(
    req: &LinkRequest,
    trees: &[input::Node],
    diag: &Diagnostics,
    timings: &mut Timings,
    cache: Option<&cache::Cache>,
) -> Result<LtoOutcome> {
    let pool = timings.phase("pool", || lto::pool::collect(trees, req.target, diag))?;
    if pool.modules.is_empty() {
        diag.warning("Ignoring -dlto option because no LTO objects found");
        return Ok(LtoOutcome::NoIr);
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
    let mut settings = lto_settings(req, &pool, from_host);
    if partial {
        // nvlink's partial LTO: relocatable output, without host information (read
        // off nvlink 13.5 through a logging libNVVM)
        settings.device_c = true;
        settings.force_device_c = true;
        settings.host_info = false;
        settings.host_refs = Default::default();
    }
    let options = lto::nvvm_options(&settings, &consensus);
    let engine = engine_for(req, &pool, cache)?;
    if req.verbose_keep {
        for m in &pool.modules {
            diag::to_stdout(&format!("nvlink -lto-add-module {}.nvvm\n", m.module.name));
        }
    }
    if req.verbose {
        diag.info(&format!("libNVVM options: {}", options.join(" ")));
    }
    if req.verbose2 {
        diag::to_stderr(" Running nvlink cicc-lto\n");
    }
    let modules: Vec<lto::IrModule> = pool.modules.iter().map(|m| m.module.clone()).collect();
    let lto_out = timings
        .phase("cicc", || {
            jobs::phase(engine.1, || engine.0.compile(&modules, &options, diag))
        })
        .map_err(|e| explain_newer_ir(e, &modules, req.target))?;
    // (checked after ptxas, as nvlink does: an unresolved extern function is ptxas's error)
    let no_cudadevrt = from_host && !pool.cudadevrt && !partial;
    if req.emit_ptx {
        if no_cudadevrt {
            return Err(Error::fatal("expected libcudadevrt object"));
        }
        let ptx = lto_out.ptx.concat();
        output::write_atomic(&req.output, &ptx)?;
        timings.written.out = timings.written.keep.then_some(ptx);
        return Ok(LtoOutcome::Written);
    }
    let split = lto_out.ptx.len() > 1;
    let relocatable = partial || !lto_out.whole_program || req.relocatable || split;
    if req.verbose && !relocatable {
        diag::to_stderr("whole program compile\n");
    }
    if req.verbose2 {
        diag::to_stderr(" Running nvlink ptxas-lto\n");
    }
    let mut options = ptxas_options(req, relocatable);
    options.maxrregcount = req
        .maxrregcount
        .or(consensus.value(consensus::Opt::MaxReg))
        .filter(|&n| n > 0);
    // (a split compile's copies of each static variable: one definition, DESIGN.md)
    let pieces = if split {
        lto::split_data::single_home(lto_out.ptx)
    } else {
        lto_out.ptx
    };
    let jobs: Vec<ptxas_driver::Job> = pieces
        .into_iter()
        .map(|ptx| ptxas_driver::Job {
            name: "<lto ptx>".into(),
            ptx,
            options: options.clone(),
        })
        .collect();
    let kit = toolkit::Toolkit::discover(req.cuda_path.as_deref(), req.nvvmpath.as_deref())?;
    let assembler = assembler(&kit, cache)?;
    // The pool nvlink sizes from -split-compile-extended (0: one thread per core).
    let threads = req.split_compile_extended.unwrap_or(0) as usize;
    let assembled = timings.phase("ptxas", || {
        ptxas_driver::assemble_all(assembler.as_ref(), &jobs, threads)
    })?;
    let mut cubins = Vec::with_capacity(assembled.len());
    for a in assembled {
        let a = a?;
        diag.tool_output(&a.messages);
        cubins.push(a.cubin);
    }
    if no_cudadevrt {
        return Err(Error::fatal("expected libcudadevrt object"));
    }
    if relocatable {
        let inputs = cubins
            .into_iter()
            .map(|c| {
                let cubin = elf::cubin::Cubin::parse(bytes::Bytes::from_vec(c), "lto.cubin")?;
                Ok(merge::Input {
                    cubin,
                    system: false,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let from = pool.modules.iter().map(|m| m.module.name.clone()).collect();
        return Ok(LtoOutcome::Relocatable(inputs, from));
    }
    timings.phase("write", || output::write_atomic(&req.output, &cubins[0]))?;
    if timings.written.keep {
        timings.written.out = cubins.into_iter().next();
    }
    Ok(LtoOutcome::Written)
}

/// The LTO engine for the module set: LLVM for LLVM bitcode (which nvlink refuses),
/// libNVVM for NVIDIA's IR; with its name for the status line.
fn engine_for<'a>(
    req: &LinkRequest,
    pool: &lto::pool::Pool,
    cache: Option<&'a cache::Cache>,
) -> Result<(Box<dyn Engine + 'a>, &'static str)> {
    let (engine, name, files) = engine_uncached(req, pool, cache.map(|c| c.dir()))?;
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

/// The toolkit's ptxas, its results cached when there is a cache.
fn assembler<'a>(
    kit: &toolkit::Toolkit,
    cache: Option<&'a cache::Cache>,
) -> Result<Box<dyn ptxas_driver::Assembler + 'a>> {
    let ptxas = ptxas_driver::Ptxas::new(kit.ptxas());
    Ok(match cache {
        Some(cache) => Box::new(ptxas_driver::Cached {
            tool: cache.tool_id(&ptxas.path)?,
            inner: Box::new(ptxas),
            cache,
        }),
        None => Box::new(ptxas),
    })
}

/// The engine, its name, and the files whose content decides its output.
#[allow(clippy::type_complexity)]
fn engine_uncached(
    req: &LinkRequest,
    pool: &lto::pool::Pool,
    cache_dir: Option<&std::path::Path>,
) -> Result<(Box<dyn Engine>, &'static str, Vec<std::path::PathBuf>)> {
    use lto::IrForm;
    let of = |form| pool.modules.iter().find(|m| m.module.form == form);
    match (of(IrForm::Bitcode), of(IrForm::Container)) {
        (Some(b), Some(c)) => Err(Error::fatal(format!(
            "LLVM bitcode ('{}') and NVIDIA LTO IR ('{}') cannot be linked in one LTO link yet",
            b.module.name, c.module.name
        ))),
        (Some(_), None) => {
            let kit =
                toolkit::Toolkit::discover(req.cuda_path.as_deref(), req.nvvmpath.as_deref())?;
            let libdevice = Some(kit.libdevice()).filter(|p| p.is_file());
            let mut files: Vec<std::path::PathBuf> = libdevice.iter().cloned().collect();
            files.extend(lto::llvm_helper::locate());
            Ok((
                Box::new(lto::llvm_engine::LlvmEngine {
                    libdevice,
                    cache_dir: cache_dir.map(std::path::Path::to_path_buf),
                }),
                "LLVM",
                files,
            ))
        }
        _ => {
            // nvlink loads `<nvvmpath>/lib64/libnvvm.so` and nothing else; without
            // `-nvvmpath` (which nvlink requires) the toolkit's libNVVM
            let path = match req.nvvmpath.as_deref() {
                Some(nvvmpath) => nvvmpath.join("lib64").join("libnvvm.so"),
                None => toolkit::Toolkit::discover(req.cuda_path.as_deref(), None)?
                    .libnvvm(None)
                    .ok_or_else(|| {
                        Error::fatal("-nvvmpath should be specified with -lto").context(
                            "no libNVVM in the CUDA toolkit found either (nvvm/lib64/libnvvm.so)",
                        )
                    })?,
            };
            let lib = lto::libnvvm::LibNvvm::load(&path)?;
            if req.split_compile_extended.is_some_and(|n| n != 1) {
                // libNVVM's own threads are not reliable: see lto::isolated
                let engine = lto::isolated::IsolatedNvvm { lib: path.clone() };
                return Ok((Box::new(engine), "libNVVM", vec![path]));
            }
            Ok((Box::new(lto::NvvmEngine { lib }), "libNVVM", vec![path]))
        }
    }
}

/// The files written beside the output: `--register-link-binaries` and `-time`. The
/// module ids follow the input order, reversed after a whole-program LTO (as nvlink).
fn finish(
    req: &LinkRequest,
    hosts: &[lto::pool::HostInfo],
    whole_lto: bool,
    mut timings: Timings,
) -> Result<Timings> {
    if let Some(path) = &req.register_link_binaries {
        let mut ordered: Vec<&lto::pool::HostInfo> = hosts.iter().collect();
        if whole_lto {
            ordered.reverse();
        }
        let ids: Vec<String> = ordered
            .into_iter()
            .filter(|h| !h.cudadevrt)
            .filter_map(|h| h.module_id.clone())
            .collect();
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

fn lto_settings(req: &LinkRequest, pool: &lto::pool::Pool, from_host: bool) -> lto::LtoSettings {
    let used = !req.kernels_used.is_empty() || !req.variables_used.is_empty();
    // A host object without relocatable device code (CMake puts libcudart_static and the
    // target's host-only objects on its device link line) has no table of what it
    // refers to: nvlink then links as with --ignore-host-info, every kernel and device
    // variable kept (byte for byte the same output, read off nvlink 13.5).
    let ignore_host_info = req.ignore_host_info || pool.hosts.iter().any(|h| !h.relocatable);
    let host_refs = if used {
        lto::HostRefs::from_used(&req.kernels_used, &req.variables_used)
    } else if ignore_host_info || !host_tables_apply(req, &pool.hosts) {
        lto::HostRefs::default()
    } else {
        lto::HostRefs::from_tables(
            pool.hosts
                .iter()
                .flat_map(|h| h.host_refs.iter().map(|(s, e)| (*s, e.as_slice()))),
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
        host_refs,
    }
}

/// Adds to a failed compile the modules whose IR targets a newer SM than `-arch` (libNVVM
/// reports them only as a bitcode parse error).
fn explain_newer_ir(mut e: Error, modules: &[lto::IrModule], target: arch::Arch) -> Error {
    for m in modules {
        let arch = lto::container::parse_header(&m.data, &m.name)
            .ok()
            .and_then(|(h, _)| h.arch());
        if let Some(a) = arch.filter(|&a| !lto::pool::ir_compatible(a, target)) {
            e = e.context(format!(
                "'{}' holds LTO IR for {a}, which cannot be linked for -arch={target}",
                m.name
            ));
        }
    }
    e
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
