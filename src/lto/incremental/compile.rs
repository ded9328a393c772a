//! The stages of a partitioned link: each partition's option list and cache key, its
//! compile by libNVVM (PTX in canonical form, stored with its log and its time), the
//! rewrite of every partition's PTX to link with the others, and ptxas `-ewp` (cached
//! by the rewritten PTX, through `NVLINKRS_PTXAS_LAUNCHER` when set, each job timed).

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::summary::{self, Hash, Hasher};
use super::{plan, ptx};
use crate::consensus::{Consensus, Opt};
use crate::context::LinkContext;
use crate::diag::{Error, Result};
use crate::lto::{self, IrModule, LtoSettings};
use crate::plan::Plan as LinkPlan;
use crate::ptxas_driver::{Assembled, Assembler};
use crate::report::Timings;

/// The version of what partition entries hold (bumped when the PTX's canonical form or
/// the rewrite changes).
const FORMAT: &str = "incremental-1";

/// How ptxas compiles a partition: as a whole program that other objects may extend
/// (e_type 0xff00; its references to other partitions' variables and kernels and to
/// libcudadevrt stay relocations). ptxas `-c` gives other code: some of Thrust's
/// radix-sort kernels (CCCL 13.3, sm_90) got more than twice the whole-program compile's
/// registers; `-ewp` gives the whole-program link's registers and instructions.
pub const EWP_OPTION: &str = "--extensible-whole-program";

/// One partition's libNVVM compile.
pub struct Job {
    pub options: Vec<String>,
    pub key: crate::cache::Key,
    pub reach: usize,
}

/// The jobs of a plan: nvlink's options with each partition's lists, and the key of its
/// PTX: the options, the manifest, the program's renaming context, libNVVM's identity.
pub fn jobs(
    parts: &plan::Plan,
    settings: &LtoSettings,
    consensus: &Consensus,
    sums: &[summary::Summary],
    tool: &str,
) -> Vec<Job> {
    let base = base_options(settings, consensus);
    let context = program_context(sums);
    parts
        .partitions
        .iter()
        .map(|p| {
            let mut options = base.clone();
            options.extend(p.lists.options());
            let key = crate::cache::Key::new("inc-ptx")
                .text(FORMAT)
                .text(tool)
                .text(&options.join("\0"))
                .bytes(&p.manifest.0)
                .bytes(&context.0);
            Job {
                options,
                key,
                reach: p.reach,
            }
        })
        .collect()
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

/// A partition's cache entry: its PTX in canonical form, libNVVM's log, and how long
/// libNVVM took (milliseconds, as text).
pub type Entry = Vec<Vec<u8>>;

/// One partition through libNVVM, its PTX in canonical form, stored.
pub fn compile(
    engine: &lto::NvvmEngine,
    modules: &[IrModule],
    job: &Job,
    cache: &crate::cache::Cache,
) -> Result<Entry> {
    let started = Instant::now();
    let collected = crate::diag::Diagnostics::collector();
    let out = lto::Engine::compile(engine, modules, &job.options, &collected)?;
    let text = String::from_utf8(out.ptx.concat()).map_err(|_| {
        Error::fatal("elfLink nvvm error").context("incremental LTO: libNVVM's PTX is not text")
    })?;
    let normal = ptx::normalize(&text)?;
    let log = collected.infos().join("\n");
    let ms = started.elapsed().as_millis().to_string();
    let entry = vec![normal.into_bytes(), log.into_bytes(), ms.into_bytes()];
    let parts: Vec<&[u8]> = entry.iter().map(Vec::as_slice).collect();
    cache.put(&job.key, &crate::cache::pack(&parts));
    Ok(entry)
}

/// An entry's PTX, log and time.
pub fn entry_parts(e: &Entry) -> Result<(String, String, u64)> {
    let [text, log, ms] = &e[..] else {
        return Err(Error::fatal("elfLink nvvm error")
            .context("incremental LTO: a partition entry of the wrong form"));
    };
    let ms = String::from_utf8_lossy(ms).parse().unwrap_or(0);
    Ok((
        String::from_utf8_lossy(text).into_owned(),
        String::from_utf8_lossy(log).into_owned(),
        ms,
    ))
}

/// `NVLINKRS_INCREMENTAL_DUMP=DIR`: each partition's PTX as libNVVM gave it (in canonical
/// form, `pN.ptx`) and as ptxas gets it (`pN.linked.ptx`), the data partition last; for
/// looking into a partitioned link, as `-keep` is for nvcc.
pub fn dump(ptx: &[String], rewritten: &[String]) {
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

/// Every partition's PTX rewritten to link with the others: each pinned variable's
/// owner is the data partition when it defines it, else the first partition that does.
pub fn link_partitions(parts: &plan::Plan, ptx: &[String]) -> Result<Vec<String>> {
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

/// ptxas timed job by job (by the PTX each job holds).
struct Timed<'a> {
    inner: &'a dyn Assembler,
    times: Mutex<Vec<(usize, Duration)>>,
}

impl Assembler for Timed<'_> {
    fn assemble(&self, job: &crate::ptxas_driver::Job) -> Result<Assembled> {
        let started = Instant::now();
        let r = self.inner.assemble(job);
        self.times
            .lock()
            .unwrap()
            .push((job.ptx.as_ptr() as usize, started.elapsed()));
        r
    }

    fn launched(&self) -> bool {
        self.inner.launched()
    }
}

/// The rewritten PTX through ptxas `-c` (cached by content), on the link's job pool and
/// through `NVLINKRS_PTXAS_LAUNCHER` when one is set: the cubins, and each job's time in
/// milliseconds.
pub fn assemble(
    plan: &LinkPlan,
    ctx: &LinkContext,
    consensus: &Consensus,
    ptx: Vec<String>,
    timings: &mut Timings,
) -> Result<(Vec<Vec<u8>>, Vec<u64>)> {
    let req = plan.req;
    let mut options = plan.ptxas_options(false);
    options.maxrregcount = req
        .maxrregcount
        .or(consensus.value(Opt::MaxReg))
        .filter(|&n| n > 0);
    options.extra.push(EWP_OPTION.into());
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
    let timed = Timed {
        inner: assembler.as_ref(),
        times: Mutex::default(),
    };
    let done = timings.phase("ptxas", || {
        crate::ptxas_driver::assemble_all(&ctx.jobs, &timed, &jobs, 0)
    })?;
    let times = timed.times.into_inner().unwrap();
    let ms: Vec<u64> = jobs
        .iter()
        .map(|j| {
            let at = j.ptx.as_ptr() as usize;
            times
                .iter()
                .find(|t| t.0 == at)
                .map_or(0, |t| t.1.as_millis() as u64)
        })
        .collect();
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
    Ok((cubins, ms))
}
