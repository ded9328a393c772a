//! Incremental device LTO (`--incremental`, `NVLINKRS_INCREMENTAL=1`): a `-dlto` link as
//! partitions, each one libNVVM program over every module with nvlink's options and the
//! kernels of one unit as its roots, assembled by ptxas `-c` and merged with the rest.
//! After an edit only the partitions whose reachable code changed are compiled again:
//! a partition's PTX is cached under its manifest (the hashes of exactly the functions
//! and variables it reaches, [`plan`]), its option list, the names the IR linker may
//! rename, and libNVVM's identity; its cubin under its rewritten PTX ([`ptx`]) and
//! ptxas's identity. `bitstream` and `summary` read each module without LLVM, at every
//! target. What cannot be partitioned is linked whole-program, as without the option
//! (with `-v`, the reason). The first link of a program in [`mode::Mode::Auto`] is the
//! whole-program link while the partitions are built in the background
//! ([`background`]).

pub mod background;
pub mod bitstream;
pub mod mode;
pub mod plan;
pub mod ptx;
pub mod summary;

use std::collections::BTreeSet;

use crate::consensus::{Consensus, Opt};
use crate::context::LinkContext;
use crate::diag::{Error, Result};
use crate::lto::{self, IrForm, IrModule, LtoSettings, pool::Pool};
use crate::plan::Plan as LinkPlan;
use crate::report::Timings;
use mode::Mode;
use summary::{Hash, Hasher};

/// The version of what partition entries hold (bumped when the PTX's canonical form or
/// the rewrite changes).
const FORMAT: &str = "incremental-1";

/// The ptxas option that lets ptxas clone a called function for each kernel even in a
/// relocatable compile (what a whole-program compile does), so partitions get the
/// whole-program code.
pub const CLONE_OPTION: &str = "-enable-func-clone-sc=true";

/// Why this link is not partitioned, if it is not (said under `-v`).
fn refusal(plan: &LinkPlan, pool: &Pool, settings: &LtoSettings, partial: bool) -> Option<String> {
    let req = plan.req;
    let why = if partial {
        "partial LTO (an input without IR, -force-partial-lto or -r)"
    } else if req.emit_ptx {
        "-emit-ptx"
    } else if req.debug {
        "-g (debug links are linked whole-program)"
    } else if req.split_compile.is_some() || req.split_compile_extended.is_some() {
        "-split-compile"
    } else if pool
        .modules
        .iter()
        .any(|m| m.module.form == IrForm::Bitcode)
    {
        "LLVM bitcode inputs"
    } else if settings.force_device_c {
        "relocatable LTO output"
    } else {
        return None;
    };
    Some(why.into())
}

/// What a partitioned link gives back: the cubins to merge (code partitions in input
/// order, then the data partition).
pub struct Partitioned {
    pub cubins: Vec<Vec<u8>>,
}

/// Links the pool as partitions, or says `None` (under `-v`, why) when the link is to
/// be whole-program.
pub fn link(
    plan: &LinkPlan,
    ctx: &LinkContext,
    pool: &Pool,
    settings: &LtoSettings,
    consensus: &Consensus,
    partial: bool,
    timings: &mut Timings,
) -> Result<Option<Partitioned>> {
    let (req, diag) = (plan.req, ctx.diag);
    let say = |why: &str| {
        if req.verbose {
            diag.info(&format!("incremental LTO: linking whole-program: {why}"));
        }
    };
    if let Some(why) = refusal(plan, pool, settings, partial) {
        say(&why);
        return Ok(None);
    }
    let Some(cache) = ctx.cache() else {
        say("it needs the cache, which is off");
        return Ok(None);
    };
    let modules: Vec<IrModule> = pool.modules.iter().map(|m| m.module.clone()).collect();
    let lines = consensus.value(Opt::LineInfo).is_some();
    let sums = timings.phase("summaries", || {
        Ok(ctx.jobs.run_all(
            "summaries",
            &modules,
            0,
            |m| m.data.len(),
            |m| summary::summarize(m, lines),
        ))
    })?;
    let names: Vec<String> = modules.iter().map(|m| m.name.clone()).collect();
    let refs = settings.host_info.then_some(&settings.host_refs);
    let parts = match plan::make(&sums, &names, refs) {
        Ok(p) => p,
        Err(why) => {
            say(&why);
            return Ok(None);
        }
    };
    let libnvvm = lto::phase::libnvvm_path(plan)?;
    let tool = cache.tool_id(&libnvvm)?;
    let base = base_options(settings, consensus);
    let context = program_context(&sums);
    let jobs: Vec<Job> = parts
        .partitions
        .iter()
        .map(|p| {
            let mut options = base.clone();
            options.extend(p.lists.options());
            let key = crate::cache::Key::new("inc-ptx")
                .text(FORMAT)
                .text(&tool)
                .text(&options.join("\0"))
                .bytes(&p.manifest.0)
                .bytes(&context.0);
            Job {
                options,
                key,
                reach: p.reach,
            }
        })
        .collect();
    let cached: Vec<Option<Vec<Vec<u8>>>> = jobs
        .iter()
        .map(|j| cache.get(&j.key).and_then(|e| crate::cache::unpack(&e)))
        .collect();
    let code_misses = cached[..cached.len() - 1]
        .iter()
        .filter(|c| c.is_none())
        .count();
    if req.incremental == Mode::Auto && code_misses == jobs.len() - 1 {
        say("no partition of this program is built yet");
        background::request(req, diag);
        return Ok(None);
    }
    if req.verbose {
        diag.info(&format!(
            "incremental LTO: {} partitions and the data partition, {} to compile",
            jobs.len() - 1,
            cached.iter().filter(|c| c.is_none()).count()
        ));
    }
    let lib = lto::libnvvm::LibNvvm::load(&libnvvm)?;
    let engine = lto::NvvmEngine { lib };
    let todo: Vec<usize> = (0..jobs.len()).filter(|&i| cached[i].is_none()).collect();
    let compiled = timings.phase("cicc", || {
        Ok(ctx.jobs.run_all(
            "partitions",
            &todo,
            0,
            |&i| jobs[i].reach,
            |&i| compile(&engine, &modules, &jobs[i], cache),
        ))
    })?;
    let mut ptx: Vec<String> = Vec::with_capacity(jobs.len());
    let mut compiled = todo.iter().zip(compiled).collect::<Vec<_>>().into_iter();
    for (i, c) in cached.into_iter().enumerate() {
        let entry = match c {
            Some(e) => e,
            None => {
                let (k, r) = compiled.next().expect("one result per compiled partition");
                debug_assert_eq!(*k, i);
                r?
            }
        };
        let [text, log] = &entry[..] else {
            return Err(Error::fatal("elfLink nvvm error")
                .context("incremental LTO: a partition entry of the wrong form"));
        };
        for line in String::from_utf8_lossy(log).lines() {
            diag.info(line);
        }
        ptx.push(String::from_utf8_lossy(text).into_owned());
    }
    let rewritten = timings.phase("rewrite", || link_partitions(&parts, &ptx))?;
    dump(&ptx, &rewritten);
    Ok(Some(Partitioned {
        cubins: assemble(plan, ctx, consensus, rewritten, timings)?,
    }))
}

/// `NVLINKRS_INCREMENTAL_DUMP=DIR`: each partition's PTX as libNVVM gave it (in canonical
/// form, `pN.ptx`) and as ptxas gets it (`pN.linked.ptx`), the data partition last; for
/// looking into a partitioned link, as `-keep` is for nvcc.
fn dump(ptx: &[String], rewritten: &[String]) {
    let Some(dir) = std::env::var_os("NVLINKRS_INCREMENTAL_DUMP") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let _ = std::fs::create_dir_all(&dir);
    for (i, (a, b)) in ptx.iter().zip(rewritten).enumerate() {
        let _ = std::fs::write(dir.join(format!("p{i}.ptx")), a);
        let _ = std::fs::write(dir.join(format!("p{i}.linked.ptx")), b);
    }
}

struct Job {
    options: Vec<String>,
    key: crate::cache::Key,
    reach: usize,
}

/// nvlink's option list for the link, less what partitions replace: `--device-c` (with
/// it libNVVM keeps every kernel once a function is left unresolved, as libcudadevrt's
/// are) and the host-reference lists (each partition has its own).
fn base_options(settings: &LtoSettings, consensus: &Consensus) -> Vec<String> {
    let s = LtoSettings {
        device_c: false,
        force_device_c: false,
        host_info: true,
        host_refs: Default::default(),
        ..settings.clone()
    };
    lto::nvvm_options(&s, consensus)
}

/// What every partition's PTX depends on beyond what it reaches: the names the IR
/// linker may rename (its renaming follows them) and the modules' inline assembly.
fn program_context(sums: &[summary::Summary]) -> Hash {
    let mut h = Hasher::new("program");
    h.hash(&plan::collisions(sums));
    for s in sums {
        h.str(&s.asm);
    }
    h.done()
}

/// One partition through libNVVM, its PTX in canonical form, stored.
fn compile(
    engine: &lto::NvvmEngine,
    modules: &[IrModule],
    job: &Job,
    cache: &crate::cache::Cache,
) -> Result<Vec<Vec<u8>>> {
    let collected = crate::diag::Diagnostics::collector();
    let out = lto::Engine::compile(engine, modules, &job.options, &collected)?;
    let text = out.ptx.concat();
    let text = String::from_utf8(text).map_err(|_| {
        Error::fatal("elfLink nvvm error").context("incremental LTO: libNVVM's PTX is not text")
    })?;
    let normal = ptx::normalize(&text)?;
    let log = collected.infos().join("\n");
    let entry = vec![normal.into_bytes(), log.into_bytes()];
    let parts: Vec<&[u8]> = entry.iter().map(Vec::as_slice).collect();
    cache.put(&job.key, &crate::cache::pack(&parts));
    Ok(entry)
}

/// Every partition's PTX rewritten to link with the others: each pinned variable's
/// owner is the data partition when it defines it, else the first partition that does.
fn link_partitions(parts: &plan::Plan, ptx: &[String]) -> Result<Vec<String>> {
    let data = parts.partitions.len() - 1;
    let roots: Vec<BTreeSet<String>> = parts
        .partitions
        .iter()
        .map(|p| p.lists.ek.iter().chain(&p.lists.ik).cloned().collect())
        .collect();
    let defined: Vec<BTreeSet<String>> = ptx
        .iter()
        .map(|p| ptx::defined_variables(p))
        .collect::<Result<_>>()?;
    let mut launched = BTreeSet::new();
    for (p, r) in ptx.iter().zip(&roots) {
        launched.extend(ptx::foreign_kernels(p, r)?);
    }
    let mut owns: Vec<BTreeSet<String>> = vec![BTreeSet::new(); ptx.len()];
    for v in &parts.pinned {
        let owner = std::iter::once(data)
            .chain(0..data)
            .find(|&i| defined[i].contains(v));
        if let Some(o) = owner {
            owns[o].insert(v.clone());
        }
    }
    ptx.iter()
        .enumerate()
        .map(|(i, p)| {
            ptx::rewrite(
                p,
                &ptx::Role {
                    data: i == data,
                    roots: &roots[i],
                    owns: &owns[i],
                    pinned: &parts.pinned,
                    launched: &launched,
                },
            )
        })
        .collect()
}

/// The rewritten PTX through ptxas `-c` (cached by content), on the link's job pool and
/// through `NVLINKRS_PTXAS_LAUNCHER` when one is set.
fn assemble(
    plan: &LinkPlan,
    ctx: &LinkContext,
    consensus: &Consensus,
    ptx: Vec<String>,
    timings: &mut Timings,
) -> Result<Vec<Vec<u8>>> {
    let req = plan.req;
    let mut options = plan.ptxas_options(true);
    options.maxrregcount = req
        .maxrregcount
        .or(consensus.value(Opt::MaxReg))
        .filter(|&n| n > 0);
    options.extra.push(CLONE_OPTION.into());
    let jobs: Vec<crate::ptxas_driver::Job> = ptx
        .into_iter()
        .map(|p| crate::ptxas_driver::Job {
            name: "<lto ptx>".into(),
            ptx: p.into_bytes(),
            options: options.clone(),
        })
        .collect();
    let assembler =
        crate::ptxas_driver::for_link(plan.toolkit()?, ctx.cache(), &ctx.ptxas_launcher)?;
    let done = timings.phase("ptxas", || {
        crate::ptxas_driver::assemble_all(&ctx.jobs, assembler.as_ref(), &jobs, 0)
    })?;
    let mut cubins = Vec::with_capacity(done.len());
    // (a line an earlier partition's ptxas printed, a warning about the options, once)
    let mut seen = BTreeSet::new();
    for a in done {
        let a = a?;
        let fresh: Vec<&str> = a.messages.lines().filter(|l| !seen.contains(*l)).collect();
        if !fresh.is_empty() {
            ctx.diag.tool_output(&(fresh.join("\n") + "\n"));
        }
        seen.extend(a.messages.lines().map(str::to_string));
        cubins.push(a.cubin);
    }
    Ok(cubins)
}
