//! The partitions made one program: each pinned variable's owner (the data partition
//! where its PTX defines it, else the first partition that does), the kernels launched
//! across partitions, each partition's PTX rewritten to link with the others ([`ptx`])
//! and assembled by ptxas as an extensible whole program. A partition's cubin is cached
//! under its PTX's key and its role (what it owns, declares and exports), so an
//! unchanged partition is neither read nor rewritten again; on a miss, ptxas's own cache
//! (by the rewritten PTX) is asked, through `NVLINKRS_PTXAS_LAUNCHER` when set.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::compile::{Entry, FORMAT};
use super::{plan, ptx};
use crate::cache::{Cache, Key};
use crate::consensus::{Consensus, Opt};
use crate::context::LinkContext;
use crate::diag::Result;
use crate::plan::Plan as LinkPlan;
use crate::ptxas_driver::{Assembled, Assembler};
use crate::report::Timings;

/// How ptxas compiles a partition: as a whole program that other objects may extend
/// (e_type 0xff00; its references to other partitions' variables and kernels and to
/// libcudadevrt stay relocations). ptxas `-c` gives other code: some of Thrust's
/// radix-sort kernels (CCCL 13.3, sm_90) got more than twice the whole-program compile's
/// registers; `-ewp` gives the whole-program link's registers and instructions.
pub const EWP_OPTION: &str = "--extensible-whole-program";

/// What the rewrite of one partition depends on beyond its PTX.
struct Role {
    data: bool,
    roots: BTreeSet<String>,
    owns: BTreeSet<String>,
    pinned: BTreeSet<String>,
    launched: BTreeSet<String>,
}

/// Each partition's role: owners of pinned variables and kernels launched across
/// partitions decided from what the entries say they define and hold.
fn roles(parts: &plan::Plan, jobs_roots: &[BTreeSet<String>], entries: &[Entry]) -> Vec<Role> {
    let data = entries.len() - 1;
    let launched: BTreeSet<String> = entries
        .iter()
        .flat_map(|e| e.foreign.iter().cloned())
        .collect();
    let mut owns: Vec<BTreeSet<String>> = vec![BTreeSet::new(); entries.len()];
    for v in &parts.pinned {
        let owner = std::iter::once(data)
            .chain(0..data)
            .find(|&i| entries[i].defined.contains(v));
        if let Some(o) = owner {
            owns[o].insert(v.clone());
        }
    }
    entries
        .iter()
        .enumerate()
        .map(|(i, e)| Role {
            data: i == data,
            roots: jobs_roots[i].clone(),
            owns: std::mem::take(&mut owns[i]),
            // (only what this PTX holds matters to its rewrite)
            pinned: parts.pinned.intersection(&e.defined).cloned().collect(),
            launched: launched.intersection(&jobs_roots[i]).cloned().collect(),
        })
        .collect()
}

fn role_key(ptx_key: &Key, role: &Role, ptxas: &[String], tool: &str) -> Key {
    let set = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join("\0");
    Key::new("inc-cubin")
        .text(FORMAT)
        .text(&ptx_key.finish())
        .text(if role.data { "data" } else { "code" })
        .text(&set(&role.owns))
        .text(&set(&role.pinned))
        .text(&set(&role.launched))
        .text(&ptxas.join("\0"))
        .text(tool)
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

/// The partitions' cubins (code partitions in order, then the data partition unless it is
/// empty) and each one's ptxas time in milliseconds (0 where the cubin came from the
/// cache or there was nothing to assemble).
#[allow(clippy::too_many_arguments)]
pub fn cubins(
    plan: &LinkPlan,
    ctx: &LinkContext,
    cache: &Cache,
    consensus: &Consensus,
    parts: &plan::Plan,
    keys: &[Key],
    roots: &[BTreeSet<String>],
    entries: &[Entry],
    timings: &mut Timings,
) -> Result<(Vec<Vec<u8>>, Vec<u64>)> {
    let req = plan.req;
    let mut options = plan.ptxas_options(false);
    options.maxrregcount = req
        .maxrregcount
        .or(consensus.value(Opt::MaxReg))
        .filter(|&n| n > 0);
    options.extra.push(EWP_OPTION.into());
    let kit = plan.toolkit()?;
    let tool = cache.tool_id(&kit.ptxas())?;
    let roles = roles(parts, roots, entries);
    let role_keys: Vec<Key> = roles
        .iter()
        .zip(keys)
        .map(|(r, k)| role_key(k, r, &options.args(), &tool))
        .collect();
    let found: Vec<Option<Vec<Vec<u8>>>> = role_keys
        .iter()
        .map(|k| {
            cache
                .get(k)
                .and_then(|e| crate::cache::unpack(&e))
                .filter(|p| p.len() == 2)
        })
        .collect();
    // (an empty partition, the data partition with nothing to define, is not assembled)
    let mut found = found;
    for (i, e) in entries.iter().enumerate() {
        if e.ptx.is_empty() {
            found[i] = Some(vec![Vec::new(), Vec::new()]);
        }
    }
    let misses: Vec<usize> = (0..entries.len()).filter(|&i| found[i].is_none()).collect();
    let rewritten: Vec<String> = timings.phase("rewrite", || {
        misses
            .iter()
            .map(|&i| {
                let r = &roles[i];
                ptx::rewrite(
                    &entries[i].ptx,
                    &ptx::Role {
                        data: r.data,
                        roots: &r.roots,
                        owns: &r.owns,
                        pinned: &r.pinned,
                        launched: &r.launched,
                    },
                )
            })
            .collect()
    })?;
    dump(&plan.env, &misses, entries, &rewritten);
    let jobs: Vec<crate::ptxas_driver::Job> = rewritten
        .into_iter()
        .map(|p| crate::ptxas_driver::Job {
            name: "<lto ptx>".into(),
            ptx: p.into_bytes(),
            options: options.clone(),
        })
        .collect();
    let assembler =
        crate::ptxas_driver::for_link(kit, Some(cache), &ctx.ptxas_launcher, &plan.env)?;
    let timed = Timed {
        inner: assembler.as_ref(),
        times: Mutex::default(),
    };
    let done = timings.phase("ptxas", || {
        crate::ptxas_driver::assemble_all(&ctx.jobs, &timed, &jobs, 0)
    })?;
    let times = timed.times.into_inner().unwrap();
    let mut ms = vec![0u64; entries.len()];
    for ((&i, job), a) in misses.iter().zip(&jobs).zip(done) {
        let a = a?;
        let at = job.ptx.as_ptr() as usize;
        ms[i] = times
            .iter()
            .find(|t| t.0 == at)
            .map_or(0, |t| t.1.as_millis() as u64);
        cache.put(
            &role_keys[i],
            &crate::cache::pack(&[&a.cubin, a.messages.as_bytes()]),
            std::time::Duration::from_millis(ms[i]),
        );
        found[i] = Some(vec![a.cubin, a.messages.into_bytes()]);
    }
    let mut cubins = Vec::with_capacity(entries.len());
    // (a line an earlier partition's ptxas printed, a warning about the options, once)
    let mut seen = BTreeSet::new();
    for parts in found {
        let [cubin, messages] =
            <[Vec<u8>; 2]>::try_from(parts.expect("every partition assembled")).expect("two parts");
        let messages = String::from_utf8_lossy(&messages).into_owned();
        let fresh: Vec<&str> = messages.lines().filter(|l| !seen.contains(*l)).collect();
        if !fresh.is_empty() {
            ctx.diag.tool_output(&(fresh.join("\n") + "\n"));
        }
        seen.extend(messages.lines().map(str::to_string));
        if !cubin.is_empty() {
            cubins.push(cubin);
        }
    }
    Ok((cubins, ms))
}

/// The variable naming [`dump`]'s folder.
pub const DUMP_VAR: &str = "NVLINKRS_INCREMENTAL_DUMP";

/// `NVLINKRS_INCREMENTAL_DUMP=DIR`: each partition's PTX as libNVVM gave it (in canonical
/// form, `pN.ptx`) and as ptxas got it in this link (`pN.linked.ptx`, for the partitions
/// assembled now), the data partition last; for looking into a partitioned link, as
/// `-keep` is for nvcc.
fn dump(
    env: &crate::linkenv::LinkEnv,
    assembled: &[usize],
    entries: &[Entry],
    rewritten: &[String],
) {
    let Some(dir) = env.get(DUMP_VAR) else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let _ = std::fs::create_dir_all(&dir);
    for (i, e) in entries.iter().enumerate() {
        let _ = std::fs::write(dir.join(format!("p{i}.ptx")), &e.ptx);
    }
    for (&i, text) in assembled.iter().zip(rewritten) {
        let _ = std::fs::write(dir.join(format!("p{i}.linked.ptx")), text);
    }
}
