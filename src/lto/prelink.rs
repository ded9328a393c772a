//! Staged LTO: `-lto -r --emit-ltoir` links the inputs' IR into one LTO IR module and
//! writes it as a `.ltoir` that a later `-lto` link takes as it takes cicc's. libNVVM
//! cannot hand IR back, so the link is LLVM 22's, in the `nvlinkrs-llvm` helper
//! (request `link-ir`: [`link_in_process`]); nothing is internalized or optimized, so
//! every externally visible function and variable stays for the later link, which then
//! optimizes (and inlines) across the library's boundary. The container is
//! [`crate::ir::write::LtoIr`]'s (key 0, plain bitcode), with LLVM 22's version in its
//! header and the modules' option consensus in the option data (tag `staged::CONSENSUS_TAG`),
//! read back by the module pool as the option string a fatbin member carries.
//!
//! What a later link takes from the two tags is no more than the library's objects
//! would have given it: nvlink passes libNVVM nothing from cicc's own tags (libNVVM reads
//! them itself) and, of a fatbin member's option string, only the options it agrees on
//! across modules (`-maxreg`, `-generate-line-info`, `-inline-info`, the math options);
//! so the consensus read back may hold only those, each with a number, and anything else
//! (`-g`, an unknown option, a path) is refused with its offset rather than ignored, as is
//! a damaged host-reference table (which decides which kernels are kept).
//!
//! libNVVM 13.5 reads this bitcode only with its newer NVVM: for sm_100 and later always,
//! up to sm_90 with `-nvvm-latest` (nvlink's option, which nvlinkrs passes on); its NVVM 7
//! refuses it with `parse Invalid value (Producer: 'LLVM22.1.8' Reader: 'LLVM 7.0.1')`.

use crate::consensus::Consensus;
use crate::context::LinkContext;
use crate::diag::{Error, Result};
use crate::ir::{container, obfuscation};
use crate::lto::pool::{Pool, PoolModule};
use crate::lto::staged::{
    CONSENSUS_TAG, HOST_REFS_TAG, LLVM_VERSION, consensus_string, container, host_refs_string,
};
use crate::lto::{IrForm, IrModule};
use crate::plan::Plan;
use crate::report::Timings;

/// The plain bitcode of a pool module: a container's IR unscrambled where cicc
/// scrambled it, bitcode as it is.
pub fn plain_bitcode(m: &IrModule) -> Result<Vec<u8>> {
    if m.form == IrForm::Bitcode {
        return Ok(m.data.to_vec());
    }
    let (h, _) = container::parse(&m.data, &m.name)?;
    if h.format != container::IrFormat::LtoIr {
        return Err(Error::fatal(format!(
            "'{}': {} cannot be linked into LTO IR",
            m.name,
            h.format.name()
        )));
    }
    // cicc 13.5's IR for sm_100 and later is its newer NVVM's, LLVM 23 bitcode
    if h.llvm_version.0 > LLVM_VERSION.0 {
        return Err(Error::fatal(format!(
            "'{}': LLVM 22 cannot read this IR: it is LLVM {}.{} bitcode (cicc's IR for {}); LLVM 22 links cicc's IR up to sm_90 only (--emit-ltoir, mixed links)",
            m.name,
            h.llvm_version.0,
            h.llvm_version.1,
            h.arch().map(|a| a.to_string()).unwrap_or_default()
        )));
    }
    let mut ir = m.data[h.ir_offset as usize..].to_vec();
    if let (false, Some(key)) = (h.plain_bitcode, h.key) {
        obfuscation::unscramble(&mut ir, key);
    }
    Ok(ir)
}

/// `--emit-ltoir`: the pool's modules (IR only: an input without IR for the target is
/// refused by name), their consensus checked as for a link, linked by the helper and
/// written as one `.ltoir` to the output, or as a host object holding it when the output
/// is named `*.o` (atomically: nothing on failure).
pub fn emit(
    plan: &Plan,
    ctx: &LinkContext,
    trees: &[crate::input::Node],
    timings: &mut Timings,
) -> Result<()> {
    let (req, diag) = (plan.req, ctx.diag);
    let pool = timings.phase("pool", || super::pool::collect(trees, req.target, diag))?;
    if let Some(o) = pool.non_ir.first() {
        return Err(Error::fatal(format!(
            "'{o}' holds no LTO IR for {}: --emit-ltoir links IR only (compile it with -dlto or -dc -dlto)",
            req.target
        )));
    }
    if pool.modules.is_empty() {
        return Err(Error::fatal(format!(
            "--emit-ltoir: no LTO IR for {} in the inputs",
            req.target
        )));
    }
    let mut consensus = Consensus::default();
    for m in &pool.modules {
        consensus.add(&m.module.name, m.options.as_deref());
    }
    consensus.check(&mut |n| diag.info(&n.0))?;
    let (modules, nvidia) = plain_modules(&pool)?;
    let linked = timings.phase("link-ir", || link(&modules, &nvidia))?;
    // (a name with a space or a line break would be read back as other names or tables)
    for h in pool.hosts.iter().filter(|h| !h.cudadevrt) {
        for (section, entries) in &h.host_refs {
            if let Some(e) = entries
                .iter()
                .find(|e| e.chars().any(|c| c.is_whitespace() || c.is_control()))
            {
                return Err(Error::fatal(format!(
                    "'{}': its {section} table names {e:?}, which a .ltoir cannot store (a space or control character in a name)",
                    h.origin
                )));
            }
        }
    }
    // (clang's kernels as if its host code launched them: it writes no table)
    let clang = clang_kernels(&pool)?;
    if let Some(k) = clang
        .iter()
        .find(|k| k.chars().any(|c| c.is_whitespace() || c.is_control()))
    {
        return Err(Error::fatal(format!(
            "kernel {k:?} of the LLVM bitcode: a .ltoir cannot store its name (a space or control character)"
        )));
    }
    // (a damaged table's empty entries match nothing and cannot be stored: left out)
    let tables: Vec<_> = pool
        .hosts
        .iter()
        .filter(|h| !h.cudadevrt)
        .flat_map(|h| h.host_refs.iter())
        .map(|(s, e)| (*s, e.iter().filter(|e| !e.is_empty()).cloned().collect()))
        .chain(pool.stored_host_refs.iter().cloned())
        .chain((!clang.is_empty()).then_some((".nvHRKE", clang)))
        .collect();
    let stored = [
        (CONSENSUS_TAG, consensus_string(&consensus)),
        (HOST_REFS_TAG, host_refs_string(&tables)),
    ];
    let mut bytes = container(req.target, linked, &stored);
    if as_host_object(&req.output) {
        let fatbin = crate::fatbin::object::ltoir_fatbin(req.target, &bytes, &stored[0].1);
        bytes = crate::fatbin::object::host_object(&fatbin, &tables);
    }
    crate::output::write_atomic(&req.output, &bytes)?;
    timings.written.out = timings.written.keep.then_some(bytes);
    if req.verbose {
        verbose_emit(plan, &pool, &consensus, &tables, diag);
    }
    Ok(())
}

/// An `--emit-ltoir` output named `*.o` is written as a host object (the container as
/// the one member of its `__nv_relfatbin` fatbin), for build systems that want a `.o`.
pub fn as_host_object(output: &std::path::Path) -> bool {
    output.extension().is_some_and(|e| e == "o")
}

/// `-v` of `--emit-ltoir`: what was linked, what the library stores, and what a later
/// link by nvlink needs.
fn verbose_emit(
    plan: &Plan,
    pool: &Pool,
    consensus: &Consensus,
    tables: &[(&'static str, Vec<String>)],
    diag: &crate::diag::Diagnostics,
) {
    let req = plan.req;
    for line in consensus.explain() {
        diag.info(&line);
    }
    let names: Vec<&str> = pool
        .modules
        .iter()
        .map(|m| m.module.name.as_str())
        .collect();
    diag.info(&format!(
        "--emit-ltoir: linked '{}' into '{}' (LLVM 22 bitcode for {}; stored: the option consensus '{}', {} host-reference table(s))",
        names.join("', '"),
        req.output.display(),
        req.target,
        consensus_string(consensus).trim_end(),
        tables.iter().filter(|(_, e)| !e.is_empty()).count()
    ));
    if req.target.sm < 100 {
        diag.info(&format!(
            "a later link of '{}' by nvlink needs -nvvm-latest: libNVVM reads LLVM 22's bitcode for {} only with its newer NVVM (nvlinkrs adds it)",
            req.output.display(),
            req.target
        ));
    }
}

/// The pool's modules as plain bitcode, named, and the indices of those from NVIDIA's
/// containers.
#[allow(clippy::type_complexity)]
fn plain_modules(pool: &Pool) -> Result<(Vec<(String, Vec<u8>)>, Vec<usize>)> {
    let mut modules = Vec::with_capacity(pool.modules.len());
    for m in &pool.modules {
        modules.push((m.module.name.clone(), plain_bitcode(&m.module)?));
    }
    let nvidia = (pool.modules.iter().enumerate())
        .filter(|(_, m)| m.module.form == IrForm::Container)
        .map(|(i, _)| i)
        .collect();
    Ok((modules, nvidia))
}

/// The kernels the pool's LLVM bitcode modules define (clang's), read by the helper:
/// clang writes no host-reference table, so no host object says whether its host code
/// launches them, and they are kept as launched.
pub fn clang_kernels(pool: &Pool) -> Result<Vec<String>> {
    Ok(bitcode_code(pool)?.kernels)
}

/// What the pool's LLVM bitcode modules define, as the helper reads them.
#[derive(Debug, Default)]
pub struct BitcodeCode {
    /// The kernels (clang's).
    pub kernels: Vec<String>,
    /// The functions of the modules that define no kernel: device-code libraries (a
    /// `.bc` such as NVSHMEM's, linked lazily).
    pub library_functions: std::collections::HashSet<String>,
}

/// The kernels and the library functions of the pool's LLVM bitcode modules.
pub fn bitcode_code(pool: &Pool) -> Result<BitcodeCode> {
    let mut code = BitcodeCode::default();
    for m in (pool.modules.iter()).filter(|m| m.module.form == IrForm::Bitcode) {
        let s = super::bitcode::summarize(&m.module.data, &m.module.name)?;
        if s.kernels.is_empty() {
            code.library_functions.extend(s.functions);
        }
        code.kernels.extend(s.kernels);
    }
    Ok(code)
}

/// Whether the PTX texts define (not only declare) a function of `names`: `.func` lines
/// that are not `.extern`, their name the word before the parameter list.
pub fn defines_any(ptx: &[Vec<u8>], names: &std::collections::HashSet<String>) -> bool {
    if names.is_empty() {
        return false;
    }
    ptx.iter().any(|text| {
        String::from_utf8_lossy(text).lines().any(|l| {
            let l = l.trim_start();
            if l.starts_with(".extern") || !l.contains(".func") {
                return false;
            }
            // `.func NAME(`, `.visible .func (.param .b32 r) NAME(`, `.weak .func NAME(`
            let after = &l[l.find(".func").expect("checked") + 5..];
            let after = match after.trim_start().strip_prefix('(') {
                Some(ret) => ret.split_once(')').map_or("", |(_, rest)| rest),
                None => after,
            };
            let name = after
                .trim_start()
                .split(['(', ' ', ';'])
                .next()
                .unwrap_or("");
            names.contains(name)
        })
    })
}

/// Whether the pool holds both NVIDIA's LTO IR and LLVM bitcode (a mixed link).
pub fn is_mixed(pool: &Pool) -> bool {
    let has = |f| pool.modules.iter().any(|m| m.module.form == f);
    has(IrForm::Bitcode) && has(IrForm::Container)
}

/// A mixed link's modules replaced by one: their plain bitcode linked by the helper, in
/// a container (named after the modules) that libNVVM compiles with its newer NVVM, the
/// one that reads LLVM 22's bitcode. Option strings were agreed on before.
pub fn join_mixed(pool: &mut Pool, target: crate::arch::Arch) -> Result<()> {
    let (modules, nvidia) = plain_modules(pool)?;
    let linked = link(&modules, &nvidia)?;
    let name = pool
        .modules
        .iter()
        .map(|m| m.module.name.as_str())
        .collect::<Vec<_>>()
        .join("+");
    let from_host_object = pool.modules.iter().any(|m| m.from_host_object);
    pool.modules = vec![PoolModule {
        module: IrModule {
            name,
            data: crate::bytes::Bytes::from_vec(container(target, linked, &[])),
            form: IrForm::Container,
        },
        options: None,
        from_host_object,
    }];
    Ok(())
}

/// The linker's side: the modules' plain bitcode to the helper, one module back;
/// `nvidia`: the indices of those from NVIDIA's containers (whose data layout and triple
/// the linked module carries, whatever the order). The
/// answer is checked as a container's payload is before it is written or compiled: a
/// helper that exits 0 with something else (a wrong `NVLINKRS_LLVM_HELPER`, a helper
/// killed after writing part of its answer) fails the link instead of leaving a
/// `.ltoir` no link can read.
pub fn link(modules: &[(String, Vec<u8>)], nvidia: &[usize]) -> Result<Vec<u8>> {
    let body = crate::frames::encode(modules.iter().map(|(n, b)| (n.as_str(), b.as_slice())));
    let what = modules.first().map(|m| m.0.as_str()).unwrap_or("LTO IR");
    let nvidia = format!(
        "--nvidia={}",
        nvidia
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",")
    );
    let linked = super::llvm_helper::run(&["link-ir", &nvidia], body, what)?;
    let helper = super::llvm_helper::NAME;
    crate::ir::payload::check(&linked, None, 0, helper).map_err(|e| {
        Error::fatal(format!(
            "'{what}': {helper} answered the link of {} module(s) with no valid LLVM bitcode ({} bytes)",
            modules.len(),
            linked.len()
        ))
        .context(e.message().to_string())
    })?;
    Ok(linked)
}

/// The helper's side: reads each module, links them in order into a module that
/// carries libNVVM's data layout and triple (those of the first of the `nvidia` modules,
/// else cicc's, [`super::link_ir::NVVM_DATA_LAYOUT`]), whatever the order (no
/// internalizing, no optimization); the kernels of the other modules (clang's) kept in
/// `@llvm.used` as cicc's are (and, with no module of NVIDIA's, cicc's NVVM IR version);
/// checks the result and writes its bitcode. `args`:
/// `--nvidia=I,J`, the indices of the modules from NVIDIA's containers.
#[cfg(feature = "llvm")]
pub fn link_in_process(body: &[u8], args: &[String]) -> Result<Vec<u8>> {
    use super::link_ir;
    use inkwell::context::Context;
    use inkwell::memory_buffer::MemoryBuffer;
    use inkwell::module::Module;

    let nvidia: Vec<usize> = args
        .iter()
        .filter_map(|a| a.strip_prefix("--nvidia="))
        .flat_map(|l| l.split(',').filter_map(|i| i.parse().ok()))
        .collect();
    let modules = crate::frames::decode(body)?;
    let ctx = Context::create();
    // (a library of device code, bitcode from elsewhere that defines no kernel, is read
    // lazily and linked last, only what the program needs of it)
    let mut parsed = Vec::with_capacity(modules.len());
    let mut libraries = Vec::new();
    for (i, (name, data)) in modules.iter().enumerate() {
        if !nvidia.contains(&i) {
            let m = link_ir::parse_lazily(&ctx, name, data)?;
            if !link_ir::defines_kernel(&m) {
                check_triple(name, &m)?;
                libraries.push((name, m));
                continue;
            }
        }
        let buf = MemoryBuffer::create_from_memory_range_copy(data, name);
        let m = Module::parse_bitcode_from_buffer(&buf, &ctx).map_err(|e| {
            Error::fatal(format!(
                "'{name}': LLVM 22 cannot read this IR: {}",
                e.to_string().trim()
            ))
        })?;
        check_triple(name, &m)?;
        parsed.push((i, name, m));
    }
    let layout_of = |m: &Module| m.get_data_layout().as_str().to_string_lossy().into_owned();
    let first_nvidia = parsed.iter().find(|(i, _, _)| nvidia.contains(i));
    let (layout, triple) = match first_nvidia {
        Some((_, _, m)) => (layout_of(m), m.get_triple()),
        None => (
            link_ir::NVVM_DATA_LAYOUT.to_string(),
            inkwell::targets::TargetTriple::create(link_ir::NVVM_TRIPLE),
        ),
    };
    let target_layout = inkwell::targets::TargetData::create(&layout).get_data_layout();
    let mut linked: Option<Module> = None;
    let mut kernels = Vec::new();
    let give_layout = |name: &str, m: &Module| -> Result<()> {
        if let Some(why) = link_ir::layout_difference(&ctx, &layout_of(m), &layout) {
            return Err(Error::fatal(format!(
                "'{name}': its data layout '{}' cannot be made libNVVM's ('{layout}'): {why}",
                layout_of(m)
            )));
        }
        // (the linked module keeps the first's layout and triple: libNVVM's, always)
        m.set_triple(&triple);
        m.set_data_layout(&target_layout);
        Ok(())
    };
    for (i, name, m) in parsed {
        if !nvidia.contains(&i) {
            give_layout(name, &m)?;
            kernels.extend(link_ir::defined_kernels(&m));
        }
        super::llvm_engine::link_into(&mut linked, m, name)?;
    }
    let linked = linked.ok_or_else(|| Error::fatal("nvlinkrs-llvm: no modules to link"))?;
    for (name, lib) in libraries {
        give_layout(name, &lib)?;
        link_ir::link_only_needed(&linked, lib, name)?;
    }
    link_ir::keep_kernels(&linked, &kernels)?;
    if nvidia.is_empty() {
        link_ir::add_nvvm_ir_version(&linked)?;
    }
    linked.verify().map_err(|e| {
        Error::fatal(format!(
            "the linked module is not valid IR: {}",
            e.to_string().trim()
        ))
    })?;
    Ok(linked.write_bitcode_to_memory().as_slice().to_vec())
}

/// Refuses LLVM bitcode for another target than NVPTX64, naming the module.
#[cfg(feature = "llvm")]
fn check_triple(name: &str, m: &inkwell::module::Module) -> Result<()> {
    let t = m.get_triple();
    let t = t.as_str().to_string_lossy();
    if !t.starts_with("nvptx64-") {
        return Err(Error::fatal(format!(
            "'{name}': LLVM bitcode for target '{t}'; only nvptx64 device code can be linked"
        )));
    }
    Ok(())
}
