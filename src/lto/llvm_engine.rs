//! The open-IR LTO engine: LLVM bitcode for `nvptx64` (clang `-fgpu-rdc`, rustc, code
//! generators), which nvlink refuses, linked and optimized by LLVM 22 and emitted as PTX
//! for ptxas. The linker side ([`LlvmEngine`]) sends the modules and the option list (the
//! same list the libNVVM engine gets) to the `nvlinkrs-llvm` helper; the helper's side
//! ([`compile_in_process`]) does the work:
//!
//! 1. reads every module and checks its triple (`nvptx64-…`) and data layout;
//! 2. links them into one;
//! 3. links libdevice when a `__nv_*` function is still undefined;
//! 4. internalizes what the host cannot reach, with the libNVVM path's rules: every
//!    non-kernel function of a whole program; kernels not named in the host-reference
//!    lists (`-host-ref-ek/ik`, from `.nvHR*` tables or `-kernels-used`) when there are
//!    such lists; device variables likewise against `-host-ref-eg/ig/ec/ic`; with
//!    `--device-c` (partial LTO) external functions stay visible to the other objects;
//! 5. runs LLVM's module pipeline (`default<O3>`; `-Ofast-compile` picks `default<O1>`),
//!    which removes the dead kernels and functions;
//! 6. maps `-ftz`, `-prec-div`, `-prec-sqrt` and `-fma` to the NVPTX back end's settings
//!    (`nvvm-reflect-ftz` for libdevice, denormal mode, the `nvptx-*` options) and emits
//!    PTX for the `-arch` SM.
//!
//! With `-split-compile(-extended)=N` the program is cut into parts after step 4 (and a
//! whole-program `globalopt,globaldce`), by the content-stable rule of
//! [`super::llvm_split`]; each part is optimized and its PTX generated on N threads, and
//! cached by its bitcode; the parts go through ptxas `-c` and the merge like libNVVM's
//! split pieces.
//!
//! The request on the helper's stdin: for each module, its name and its bytes, framed by
//! [`crate::frames`]. The answer on stdout has the same framing: one PTX module, or the
//! split parts in part order.

use crate::diag::{Diagnostics, Error, Result};

use super::{Engine, IrModule, LtoOutput};
use crate::frames::{decode, encode};

/// The name of the helper's answer frame that carries its shared tier's first failure.
pub const HELPER_SHARED_FAILURE: &str = "shared-failure";

/// The LLVM engine as the linker sees it.
pub struct LlvmEngine {
    /// The toolkit's libdevice, linked when a module calls `__nv_*` functions.
    pub libdevice: Option<std::path::PathBuf>,
    /// The link's cache: split parts' optimization and code generation are cached by part
    /// (the helper opens it, and the shared tier behind it, itself).
    pub cache: Option<std::sync::Arc<crate::cache::Cache>>,
    /// make's jobserver, handed on to the helper's pool.
    pub jobserver: Option<jobserver::Client>,
}

impl Engine for LlvmEngine {
    fn compile(
        &self,
        modules: &[IrModule],
        options: &[String],
        _diag: &Diagnostics,
    ) -> Result<LtoOutput> {
        let mut args: Vec<String> = vec!["lto".into()];
        if let Some(l) = &self.libdevice {
            args.push(format!("--libdevice={}", l.display()));
        }
        if let Some(c) = &self.cache {
            args.push(format!("--cache-dir={}", c.dir().display()));
        }
        // (a shared tier named in the environment reaches the helper with it)
        let shared = self.cache.as_ref().and_then(|c| c.remote());
        match shared {
            // (failed already in this link: none for the helper either)
            Some(r) if r.first_failure().is_some() => args.push("--remote-cache=".into()),
            Some(r) if r.spec().from_flag => args.push(format!("--remote-cache={}", r.spec().url)),
            _ => {}
        }
        args.push("--".into());
        args.extend(options.iter().cloned());
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let request = encode(modules.iter().map(|m| (m.name.as_str(), &m.data[..])));
        let what = modules.first().map_or("<lto>", |m| m.name.as_str());
        let answer =
            super::llvm_helper::run_with_jobs(&argv, request, what, self.jobserver.as_ref())?;
        let mut ptx: Vec<Vec<u8>> = Vec::new();
        for (name, p) in decode(&answer)? {
            match name.as_str() {
                // the helper's shared tier failed: the link's warns (once) at its end
                HELPER_SHARED_FAILURE => {
                    if let Some(r) = shared {
                        r.failed_elsewhere(String::from_utf8_lossy(p).into_owned());
                    }
                }
                _ => ptx.push(p.to_vec()),
            }
        }
        // split parts are relocatable like libNVVM's split pieces
        let whole_program = ptx.len() == 1 && !options.iter().any(|o| o == "--device-c");
        Ok(LtoOutput { ptx, whole_program })
    }
}

/// The spread (see [`LlvmOptions::split`]) for `-split-compile-extended=0`.
pub const PARTS_FOR_ZERO: usize = 8;

/// What the engine takes from the libNVVM option list.
#[derive(Debug, Default, PartialEq)]
pub struct LlvmOptions {
    /// `sm_90`, `sm_90a`, … from `-arch=compute_…`.
    pub cpu: String,
    pub device_c: bool,
    pub fast_compile: bool,
    pub ftz: Option<bool>,
    pub prec_div: Option<bool>,
    pub prec_sqrt: Option<bool>,
    pub fma: Option<bool>,
    pub maxreg: Option<u32>,
    /// `-split-compile(-extended)=N`: the program is cut into parts (at least N when it
    /// has enough functions; see [`super::llvm_split`]), which are optimized and
    /// code-generated on `threads` threads (N; 0: one per core).
    pub split: usize,
    pub threads: usize,
    /// Host-reference patterns: kernels, and device variables/constants.
    pub kernels: Vec<String>,
    pub variables: Vec<String>,
}

/// Reads the libNVVM-style option list (`-arch=compute_90 -link-lto …`).
pub fn parse_options(options: &[String]) -> Result<LlvmOptions> {
    let mut o = LlvmOptions::default();
    let flag = |v: &str, name: &str| match v {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(Error::fatal(format!("'{name}={v}': expected 0 or 1"))),
    };
    for opt in options {
        let (key, value) = opt.split_once('=').unwrap_or((opt.as_str(), ""));
        match key {
            "-arch" => o.cpu = value.replacen("compute_", "sm_", 1),
            "--device-c" => o.device_c = true,
            "-Ofast-compile" => o.fast_compile = value != "0",
            "-ftz" => o.ftz = Some(flag(value, key)?),
            "-prec-div" => o.prec_div = Some(flag(value, key)?),
            "-prec-sqrt" => o.prec_sqrt = Some(flag(value, key)?),
            "-fma" => o.fma = Some(flag(value, key)?),
            "-maxreg" => o.maxreg = value.parse().ok(),
            "-split-compile" | "-split-compile-extended" => {
                let n: usize = value
                    .parse()
                    .map_err(|_| Error::fatal(format!("'{opt}': expected a number")))?;
                // 0: one thread per core, as nvlink sizes its pool; the spread stays
                // fixed so that the output does not depend on the machine
                o.threads = n;
                o.split = if n == 0 { PARTS_FOR_ZERO } else { n };
            }
            "-host-ref-ek" | "-host-ref-ik" => {
                o.kernels.extend(value.split(',').map(str::to_string))
            }
            "-host-ref-eg" | "-host-ref-ig" | "-host-ref-ec" | "-host-ref-ic" => {
                o.variables.extend(value.split(',').map(str::to_string))
            }
            _ => {} // -link-lto, -has-global-host-info: nothing to map
        }
    }
    if !o.cpu.starts_with("sm_") {
        return Err(Error::fatal(
            "nvlinkrs-llvm: no -arch=compute_NN in the LTO options",
        ));
    }
    Ok(o)
}

/// `-Xnvvm` values the engine carries out ([`parse_options`] maps them), or that mean
/// nothing more than what nvlinkrs already puts in the list (`-link-lto`,
/// `-has-global-host-info`, `-compile-time`); a trailing `=` takes any value.
const XNVVM_CARRIED: &[&str] = &[
    "-ftz=",
    "-prec-div=",
    "-prec-sqrt=",
    "-fma=",
    "-maxreg=",
    "-Ofast-compile=",
    "-split-compile=",
    "-split-compile-extended=",
    "-host-ref-",
    "--device-c",
    "--force-device-c",
    "-link-lto",
    "-has-global-host-info",
    "-compile-time",
];

/// Refuses by name what the LLVM engine would otherwise drop: `-g` (it emits no debug
/// information) and any `-Xnvvm` value it does not carry out. `bitcode` names an input
/// that chose the engine.
pub fn refuse_unsupported(debug: bool, xnvvm: &[String], bitcode: &str) -> Result<()> {
    let why = format!("'{bitcode}' is LLVM bitcode, linked by the LLVM engine");
    if debug {
        return Err(Error::fatal(
            "-g is not supported with LLVM bitcode LTO: the LLVM engine emits no debug information",
        )
        .context(why));
    }
    let carried = |v: &str| {
        XNVVM_CARRIED.iter().any(|c| {
            if c.ends_with('=') || c.ends_with('-') {
                v.starts_with(c)
            } else {
                v == *c
            }
        })
    };
    if let Some(v) = xnvvm.iter().find(|v| !carried(v)) {
        return Err(Error::fatal(format!(
            "-Xnvvm '{v}' is not supported with LLVM bitcode LTO"
        ))
        .context(why)
        .context(
            "the LLVM engine carries out -ftz=, -prec-div=, -prec-sqrt=, -fma=, -maxreg=, \
             -Ofast-compile=, -split-compile(-extended)=, -host-ref-* and --device-c",
        ));
    }
    Ok(())
}

/// The helper's side: links, optimizes and emits PTX (see the module comment).
#[cfg(feature = "llvm")]
pub fn compile_in_process(
    body: &[u8],
    options: &[String],
    libdevice: Option<&std::path::Path>,
    cache: Option<&crate::cache::Cache>,
    pool: &crate::jobs::Jobs,
) -> Result<Vec<Vec<u8>>> {
    use inkwell::OptimizationLevel;
    use inkwell::context::Context;
    use inkwell::passes::PassBuilderOptions;
    use inkwell::targets::{CodeModel, InitializationConfig, RelocMode, Target, TargetTriple};

    let opts = parse_options(options)?;
    let modules = decode(body)?;
    if modules.is_empty() {
        return Err(Error::fatal("nvlinkrs-llvm: no modules in the LTO request"));
    }
    Target::initialize_nvptx(&InitializationConfig::default());
    let triple = TargetTriple::create("nvptx64-nvidia-cuda");
    let target = Target::from_triple(&triple)
        .map_err(|e| Error::fatal(format!("LLVM has no NVPTX target: {e}")))?;
    let level = if opts.fast_compile {
        OptimizationLevel::Less
    } else {
        OptimizationLevel::Aggressive
    };
    let tm = target
        .create_target_machine(
            &triple,
            &opts.cpu,
            "",
            level,
            RelocMode::Default,
            CodeModel::Default,
        )
        .ok_or_else(|| Error::fatal(format!("LLVM cannot generate code for {}", opts.cpu)))?;
    let layout = tm.get_target_data().get_data_layout();
    let want_layout = layout.as_str().to_string_lossy().into_owned();

    let ctx = Context::create();
    let (module, wanted_by, origins) = link_all(&ctx, &modules, &opts, &want_layout)?;

    link_libdevice(&ctx, &module, libdevice)?;

    let kernels = kernel_names(&module);
    internalize(&module, &opts, &kernels);

    math_settings(&ctx, &module, &opts, &kernels);
    set_backend_options(&opts);

    module.set_triple(&triple);
    module.set_data_layout(&layout);
    // libdevice's ~500 functions, internal by now, go first: the pipeline would
    // otherwise simplify every one of them before it drops the unused
    let pipeline = if opts.fast_compile {
        "globaldce,default<O1>"
    } else {
        "globaldce,default<O3>"
    };
    // split: the whole program only loses what is dead and has its never-written
    // internals marked constant (so they can be copied into parts); each part is
    // optimized on its own
    let whole = if opts.split > 1 {
        "globalopt,globaldce"
    } else {
        pipeline
    };
    module
        .run_passes(whole, &tm, PassBuilderOptions::create())
        .map_err(|e| {
            Error::fatal(format!(
                "LLVM optimization failed: {}",
                e.to_string().trim()
            ))
        })?;
    check_defined(&module, &opts, &wanted_by)?;

    if let Err(e) = module.verify() {
        return Err(Error::fatal(format!(
            "the linked module does not verify: {}",
            e.to_string().trim()
        )));
    }
    if opts.split > 1 {
        let parts = super::llvm_split::partition(&module, &origins, opts.split)?;
        let cpu = opts.cpu.clone();
        // a part's PTX is decided by this helper (and the LLVM it runs), the SM, the
        // pipeline, the back-end options and the part's bitcode (before optimization)
        let helper = match cache {
            Some(c) => std::env::current_exe()
                .ok()
                .and_then(|e| c.tool_id(&e).ok())
                .unwrap_or_default(),
            None => String::new(),
        };
        let settings = format!(
            "{cpu} {pipeline} {:?} {:?} {:?}",
            opts.prec_div, opts.prec_sqrt, opts.fma
        );
        let key = |bitcode: &[u8]| {
            crate::cache::Key::new("llvm-part")
                .part("LLVM helper", helper.as_bytes())
                .part("settings", settings.as_bytes())
                .part("bitcode", bitcode)
        };
        let pieces = pool.run_all(
            "optimize+codegen",
            &parts,
            opts.threads,
            |p| p.len(),
            |bitcode| -> Result<Vec<u8>> {
                if let Some(c) = cache
                    && let Some(ptx) = c.get(&key(bitcode))
                {
                    return Ok(ptx);
                }
                // a context and target machine per thread: LLVM contexts are not shared
                let started = std::time::Instant::now();
                let ctx = Context::create();
                let part = read_in(&ctx, "<split part>", bitcode)?;
                let target = Target::from_triple(&triple)
                    .map_err(|e| Error::fatal(format!("LLVM has no NVPTX target: {e}")))?;
                let tm = target
                    .create_target_machine(
                        &triple,
                        &cpu,
                        "",
                        level,
                        RelocMode::Default,
                        CodeModel::Default,
                    )
                    .ok_or_else(|| Error::fatal(format!("LLVM cannot generate code for {cpu}")))?;
                part.run_passes(pipeline, &tm, PassBuilderOptions::create())
                    .map_err(|e| {
                        Error::fatal(format!(
                            "LLVM optimization failed: {}",
                            e.to_string().trim()
                        ))
                    })?;
                let ptx = emit_ptx(&tm, &part)?;
                if let Some(c) = cache {
                    c.put(&key(bitcode), &ptx, started.elapsed());
                }
                Ok(ptx)
            },
        );
        return pieces.into_iter().collect();
    }
    Ok(vec![emit_ptx(&tm, &module)?])
}

#[cfg(feature = "llvm")]
/// The modules linked into one, in order: each must be NVPTX64 code of `want_layout`.
/// Also returns, for messages, the first module that calls each function it does not
/// define, and (split compiles) the unit that defined each name.
#[allow(clippy::type_complexity)]
fn link_all<'c>(
    ctx: &'c inkwell::context::Context,
    modules: &[(String, &[u8])],
    opts: &LlvmOptions,
    want_layout: &str,
) -> Result<(
    inkwell::module::Module<'c>,
    std::collections::HashMap<String, String>,
    std::collections::HashMap<String, usize>,
)> {
    use inkwell::module::Module;
    let mut linked: Option<Module> = None;
    // the first module that calls each function it does not define, for messages
    let mut wanted_by: std::collections::HashMap<String, String> = Default::default();
    // which unit defined each name: split parts follow units
    let mut origins: std::collections::HashMap<String, usize> = Default::default();
    for (unit, (name, data)) in modules.iter().enumerate() {
        let m = read_in(ctx, name, data)?;
        if opts.split > 1 {
            super::llvm_split::record_origins(&mut origins, unit, &m);
        }
        for f in m.get_functions() {
            if f.as_global_value().is_declaration() {
                let fname = f.get_name().to_string_lossy().into_owned();
                wanted_by.entry(fname).or_insert_with(|| name.clone());
            }
        }
        let t = m.get_triple();
        let t = t.as_str().to_string_lossy();
        if !t.starts_with("nvptx64-") {
            return Err(Error::fatal(format!(
                "'{name}': LLVM bitcode for target '{t}'; only nvptx64 device code can be linked"
            )));
        }
        let dl = m.get_data_layout().as_str().to_string_lossy().into_owned();
        if !dl.is_empty() && dl != want_layout {
            return Err(Error::fatal(format!(
                "'{name}': data layout '{dl}' is not NVPTX64's '{want_layout}'"
            )));
        }
        link_into(&mut linked, m, name)?;
    }
    let module = linked.expect("at least one module");
    Ok((module, wanted_by, origins))
}

#[cfg(feature = "llvm")]
/// libdevice linked into `module`, only when something still calls into it.
fn link_libdevice<'c>(
    ctx: &'c inkwell::context::Context,
    module: &inkwell::module::Module<'c>,
    libdevice: Option<&std::path::Path>,
) -> Result<()> {
    // libdevice, only when something still calls into it
    let wants_libdevice = module.get_functions().any(|f| {
        f.as_global_value().is_declaration() && f.get_name().to_bytes().starts_with(b"__nv_")
    });
    if let (true, Some(path)) = (wants_libdevice, libdevice) {
        let data = std::fs::read(path).map_err(|e| {
            Error::fatal(format!("cannot read libdevice '{}': {e}", path.display()))
        })?;
        let lib = read_in(ctx, &path.display().to_string(), &data)?;
        lib.set_triple(&module.get_triple());
        lib.set_data_layout(&module.get_data_layout());
        module.link_in_module(lib).map_err(|e| {
            Error::fatal(format!("cannot link libdevice: {}", e.to_string().trim()))
        })?;
    }
    Ok(())
}

#[cfg(feature = "llvm")]
/// What the host (or, with --device-c, the other objects) can reach stays external;
/// the rest of `module` is made internal.
fn internalize(
    module: &inkwell::module::Module,
    opts: &LlvmOptions,
    kernels: &std::collections::BTreeSet<String>,
) {
    use inkwell::module::Linkage;
    for f in module.get_functions() {
        if f.as_global_value().is_declaration() {
            continue;
        }
        let name = f.get_name().to_string_lossy().into_owned();
        let keep = if kernels.contains(&name) {
            opts.kernels.is_empty() || opts.kernels.iter().any(|p| crate::input::glob(p, &name))
        } else {
            opts.device_c && !name.starts_with("__nv_") && f.get_linkage() == Linkage::External
        };
        if !keep {
            f.set_linkage(Linkage::Internal);
        }
    }
    if !opts.variables.is_empty() {
        for g in module.get_globals() {
            let name = g.get_name().to_string_lossy().into_owned();
            if !g.is_declaration()
                && g.get_linkage() == Linkage::External
                && !opts.variables.iter().any(|p| crate::input::glob(p, &name))
            {
                g.set_linkage(Linkage::Internal);
            }
        }
    }
}

#[cfg(feature = "llvm")]
/// The math settings (libdevice reads nvvm-reflect-ftz, the back end the denormal
/// mode) and `-maxreg` put on `module`.
fn math_settings<'c>(
    ctx: &'c inkwell::context::Context,
    module: &inkwell::module::Module<'c>,
    opts: &LlvmOptions,
    kernels: &std::collections::BTreeSet<String>,
) {
    use inkwell::attributes::AttributeLoc;
    use inkwell::module::FlagBehavior;
    // The modules' own settings (clang writes both) stand unless -ftz was given.
    if module.get_flag("nvvm-reflect-ftz").is_none() || opts.ftz.is_some() {
        let ftz = opts.ftz.unwrap_or(false);
        if module.get_flag("nvvm-reflect-ftz").is_none() {
            module.add_basic_value_flag(
                "nvvm-reflect-ftz",
                FlagBehavior::Override,
                ctx.i32_type().const_int(ftz as u64, false),
            );
        }
        let denormal = if ftz {
            "preserve-sign,preserve-sign"
        } else {
            "ieee,ieee"
        };
        for f in module.get_functions() {
            if !f.as_global_value().is_declaration() {
                f.add_attribute(
                    AttributeLoc::Function,
                    ctx.create_string_attribute("denormal-fp-math-f32", denormal),
                );
            }
        }
    }
    if let Some(n) = opts.maxreg {
        for f in module.get_functions() {
            if kernels.contains(&f.get_name().to_string_lossy().into_owned()) {
                f.add_attribute(
                    AttributeLoc::Function,
                    ctx.create_string_attribute("nvvm.maxnreg", &n.to_string()),
                );
            }
        }
    }
}

#[cfg(feature = "llvm")]
/// A whole program must define everything it still calls (LLVM intrinsics aside):
/// the first function it does not, and who wanted it, is the error.
fn check_defined(
    module: &inkwell::module::Module,
    opts: &LlvmOptions,
    wanted_by: &std::collections::HashMap<String, String>,
) -> Result<()> {
    use inkwell::values::BasicValue;
    if !opts.device_c {
        let missing: Vec<String> = module
            .get_functions()
            .filter(|f| {
                f.as_global_value().is_declaration()
                    && f.as_global_value()
                        .as_pointer_value()
                        .get_first_use()
                        .is_some()
            })
            .map(|f| f.get_name().to_string_lossy().into_owned())
            // __nvvm_reflect: answered by the NVVMReflect pass (a split part's pipeline)
            .filter(|n| !n.starts_with("llvm.") && n != "__nvvm_reflect")
            .collect();
        if let Some(first) = missing.first() {
            let mut e = Error::fatal(format!(
                "Undefined reference to '{first}' in '{}'",
                wanted_by.get(first).map_or("<lto>", String::as_str)
            ));
            for m in &missing[1..] {
                e = e.context(format!(
                    "also undefined: '{m}' (in '{}')",
                    wanted_by.get(m).map_or("<lto>", String::as_str)
                ));
            }
            return Err(e);
        }
    }
    Ok(())
}

#[cfg(feature = "llvm")]
/// Module `m` (from input `name`) linked into what the modules before it made (it is
/// the first when there is none yet).
pub(crate) fn link_into<'c>(
    linked: &mut Option<inkwell::module::Module<'c>>,
    m: inkwell::module::Module<'c>,
    name: &str,
) -> Result<()> {
    match linked {
        None => *linked = Some(m),
        Some(l) => l.link_in_module(m).map_err(|e| {
            Error::fatal(format!(
                "'{name}': cannot be linked with the modules before it: {}",
                e.to_string().trim()
            ))
        })?,
    }
    Ok(())
}

#[cfg(feature = "llvm")]
fn read_in<'c>(
    ctx: &'c inkwell::context::Context,
    name: &str,
    data: &[u8],
) -> Result<inkwell::module::Module<'c>> {
    let buf = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(data, name);
    inkwell::module::Module::parse_bitcode_from_buffer(&buf, ctx).map_err(|e| {
        Error::fatal(format!(
            "'{name}': LLVM cannot read this bitcode: {}",
            e.to_string().trim()
        ))
    })
}

#[cfg(feature = "llvm")]
fn emit_ptx(
    tm: &inkwell::targets::TargetMachine,
    module: &inkwell::module::Module,
) -> Result<Vec<u8>> {
    let ptx = tm
        .write_to_memory_buffer(module, inkwell::targets::FileType::Assembly)
        .map_err(|e| {
            Error::fatal(format!(
                "LLVM PTX emission failed: {}",
                e.to_string().trim()
            ))
        })?;
    Ok(ptx.as_slice().to_vec())
}

/// Kernels: `ptx_kernel` calling convention (71) or `nvvm.annotations` "kernel".
#[cfg(feature = "llvm")]
fn kernel_names(module: &inkwell::module::Module) -> std::collections::BTreeSet<String> {
    let mut k = super::link_ir::annotated_kernels(module);
    for f in module.get_functions() {
        if f.get_call_conventions() == super::link_ir::CC_PTX_KERNEL {
            k.insert(f.get_name().to_string_lossy().into_owned());
        }
    }
    k
}

/// `-prec-div`, `-prec-sqrt`, `-fma` are NVPTX back-end options (LLVM's command-line
/// options, process-wide: the helper runs one request per process).
#[cfg(feature = "llvm")]
fn set_backend_options(o: &LlvmOptions) {
    let mut args = vec!["nvlinkrs-llvm".to_string()];
    if let Some(p) = o.prec_div {
        args.push(format!("-nvptx-prec-divf32={}", if p { 2 } else { 0 }));
    }
    if let Some(p) = o.prec_sqrt {
        args.push(format!("-nvptx-prec-sqrtf32={}", p as u8));
    }
    if let Some(f) = o.fma {
        args.push(format!("-nvptx-fma-level={}", if f { 2 } else { 0 }));
    }
    if args.len() == 1 {
        return;
    }
    let owned: Vec<std::ffi::CString> = args
        .iter()
        .map(|a| std::ffi::CString::new(a.as_str()).expect("no NUL in option"))
        .collect();
    let ptrs: Vec<*const std::ffi::c_char> = owned.iter().map(|c| c.as_ptr()).collect();
    // SAFETY: `ptrs` holds valid NUL-terminated strings that outlive the call; LLVM
    // copies what it keeps.
    unsafe {
        llvm_sys::support::LLVMParseCommandLineOptions(
            ptrs.len() as i32,
            ptrs.as_ptr(),
            c"nvlinkrs-llvm".as_ptr(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_engine_cannot_carry_out_is_refused_by_name() {
        let x = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let ok = x(&[
            "-ftz=1",
            "-maxreg=32",
            "-host-ref-ek=k",
            "-link-lto",
            "--device-c",
        ]);
        assert!(refuse_unsupported(false, &ok, "a.bc").is_ok());
        let e = refuse_unsupported(true, &ok, "a.bc")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("-g is not supported with LLVM bitcode LTO"),
            "{e}"
        );
        assert!(e.contains("'a.bc' is LLVM bitcode"), "{e}");
        for bad in [
            "-opt=0",
            "-Xopt",
            "-generate-line-info",
            "-link-ltox",
            "-ftz",
        ] {
            let e = refuse_unsupported(false, &x(&["-fma=0", bad]), "a.bc")
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with(&format!("-Xnvvm '{bad}' is not supported")),
                "{e}"
            );
        }
    }

    #[test]
    fn libnvvm_options_map_to_llvm_settings() {
        let o: Vec<String> = [
            "-arch=compute_90a",
            "-link-lto",
            "-maxreg=64",
            "--device-c",
            "-ftz=1",
            "-prec-div=0",
            "-host-ref-ek=*saxpy*",
            "-host-ref-eg=*w*",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let p = parse_options(&o).unwrap();
        assert_eq!(p.cpu, "sm_90a");
        assert!(p.device_c && p.ftz == Some(true) && p.prec_div == Some(false));
        assert_eq!(p.maxreg, Some(64));
        assert_eq!(p.kernels, ["*saxpy*"]);
        assert_eq!(p.variables, ["*w*"]);
        assert!(parse_options(&["-link-lto".to_string()]).is_err());
        assert!(parse_options(&["-arch=compute_90".into(), "-ftz=2".into()]).is_err());
    }
}
