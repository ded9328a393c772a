//! Incremental device LTO (`--incremental`, `NVLINKRS_INCREMENTAL=1`): a `-dlto` link as
//! partitions, each one libNVVM program over every module with nvlink's options and the
//! kernels of one unit as its roots, assembled by ptxas as an extensible whole program
//! (`-ewp`) and merged with the rest.
//! After an edit only the partitions whose reachable code changed are compiled again:
//! a partition's PTX is cached under its manifest (the hashes of exactly the functions
//! and variables it reaches, [`plan`]), its option list, the names the IR linker may
//! rename, and libNVVM's identity; its cubin under its rewritten PTX ([`ptx`]) and
//! ptxas's identity. `bitstream` and `summary` read each module without LLVM, at every
//! target. What cannot be partitioned is linked whole-program, as without the option
//! (with `-v`, the reason). The first link of a program in [`Mode::Auto`] builds the
//! partitions when side by side they are expected to take well under the whole-program
//! link's time (`plan::Plan::first_share`); else it is the whole-program link while the
//! partitions are built in the background ([`background`]).

pub mod background;
pub mod bitstream;
mod compile;
pub mod history;
mod link;
pub mod plan;
pub mod ptx;
pub mod summary;

use std::time::Instant;

use crate::cli::incremental::Mode;
use crate::consensus::{Consensus, Opt};
use crate::context::LinkContext;
use crate::diag::Result;
use crate::lto::{self, IrForm, IrModule, LtoSettings, pool::Pool};
use crate::plan::Plan as LinkPlan;
use crate::report::Timings;
pub use link::{DUMP_VAR, EWP_OPTION};

/// Why this link is not partitioned, if it is not (said under `-v`).
fn refusal(plan: &LinkPlan, pool: &Pool, settings: &LtoSettings, partial: bool) -> Option<String> {
    let req = plan.req;
    let why = if req.nvjitlink {
        // (the drop-in answers with nvJitLink's image; a background build would take the
        // host program's command line for a link's)
        "the drop-in libnvJitLink links as nvJitLink does"
    } else if partial {
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

/// The first link of a program is partitioned when that is expected to take at most
/// this share of the whole-program link's time (`plan::Plan::first_share`).
const FIRST_LINK_SHARE: f64 = 0.9;

/// How an incremental link in [`Mode::Auto`] goes: `Err` why it is to be the
/// whole-program link, else `Ok` with what `-v` says of a first link (`first`: none of
/// the program's code partitions cached: its first link, or one after an edit that
/// changed them all). A first link is the whole-program link unless
/// side by side on the link's workers its partitions are expected to be done well before
/// it; then, as any link, unless the history (`hist`) says compiling the partitions that
/// miss (`misses`) took longer than the whole-program link (or its estimate, where the
/// first link built the partitions). What decided is said when the partitions are built.
/// Why a first link whose partitions the summaries cannot weigh (`why`) is whole-program.
fn unestimated_first(why: &str) -> String {
    format!(
        "none of this program's code partitions is cached, and {why}: building them cannot be weighed against a whole-program link"
    )
}

fn auto_choice(
    parts: &plan::Plan,
    first: bool,
    hist: &history::History,
    misses: &[String],
) -> std::result::Result<Option<String>, String> {
    let mut said = None;
    if let (true, Some(why)) = (first, &parts.unestimated) {
        return Err(unestimated_first(why));
    }
    if first {
        let workers = crate::jobs::workers(0, parts.partitions.len());
        let share = parts.first_share(workers);
        // (a program nvlink links as relocatable code: its estimate weighed)
        let relocatable = parts.relocatable.as_ref().map_or(String::new(), |call| {
            format!(", weighed as a program that calls the device runtime ('{call}'), which nvlink links as relocatable code")
        });
        if share > FIRST_LINK_SHARE {
            return Err(format!(
                "none of this program's code partitions is cached, and building them all on {workers} worker(s) would take about {:.0}% of a whole-program link's time{relocatable} (partitions when at most {:.0}%)",
                share * 100.0,
                FIRST_LINK_SHARE * 100.0
            ));
        }
        said = Some(format!(
            "incremental LTO: none of this program's code partitions is cached: building them, on {workers} worker(s) about {:.0}% of a whole-program link's time{relocatable}",
            share * 100.0
        ));
    }
    let workers = crate::jobs::workers(0, misses.len());
    match history::measured(hist, misses, workers) {
        Some((wall, whole)) if wall > whole => Err(format!(
            "compiling its {} took {wall} ms on {workers} worker(s) when last compiled, longer than the whole-program link's {whole} ms",
            changed(misses.len())
        )),
        Some((wall, whole)) if !misses.is_empty() => Ok(said.or_else(|| {
            Some(format!(
                "incremental LTO: its {} took {wall} ms on {workers} worker(s) when last compiled, the whole-program link {whole} ms",
                changed(misses.len())
            ))
        })),
        _ => Ok(said),
    }
}

/// The partitions of `todo` (indices in `parts`), each by the unit whose kernels it holds
/// (`None`: the data partition).
fn todo_units<'n>(parts: &plan::Plan, names: &'n [String], todo: &[usize]) -> Vec<Option<&'n str>> {
    (todo.iter())
        .map(|&i| Some(names[parts.partitions.get(i)?.module?].as_str()))
        .collect()
}

/// [`todo_units`] for `--report-json` (`data` for the data partition).
fn compiled_units(units: &[Option<&str>]) -> Vec<String> {
    (units.iter())
        .map(|u| u.unwrap_or("data").to_string())
        .collect()
}

/// [`todo_units`] for `-v`: "the partition of 'b.o'", "the partitions of 'a.o', 'b.o' and
/// the data partition".
fn to_compile(units: &[Option<&str>]) -> String {
    let named: Vec<String> = units.iter().flatten().map(|u| format!("'{u}'")).collect();
    let of = match named.len() {
        0 => return "the data partition".into(),
        1 => format!("the partition of {}", named[0]),
        _ => format!("the partitions of {}", named.join(", ")),
    };
    match named.len() < units.len() {
        true => format!("{of} and the data partition"),
        false => of,
    }
}

/// "1 changed partition", "2 changed partitions".
fn changed(n: usize) -> String {
    crate::diag::counted(n, "changed partition")
}

/// What an incremental link did.
pub enum Outcome {
    /// The cubins to merge: code partitions in input order, then the data partition.
    Partitioned(Vec<Vec<u8>>),
    /// The link is to be whole-program; with a recorder when its time is worth keeping
    /// (the program could be partitioned: later links weigh partitions against it).
    Whole(Option<Box<WholeTimer>>),
}

/// What the whole-program link of an incremental link does once its libNVVM and ptxas
/// are done: its time recorded in the program's history, and the partitions asked for in
/// the background (not sooner: the background build would take CPU from this link).
pub struct WholeTimer {
    req: crate::cli::LinkRequest,
}

impl WholeTimer {
    /// The whole link's libNVVM and ptxas took `ms` milliseconds: recorded, and the
    /// background build asked for once the link is done (`timings.background`).
    pub fn record(self, cache: &crate::cache::Cache, ms: u64, timings: &mut Timings) {
        let mut h = history::load(cache, &self.req);
        h.whole_ms = Some(ms);
        history::store(cache, &self.req, &h);
        timings.background = Some("incremental LTO: the partitions");
    }
}

/// Whether this link is likely the whole-program link: incremental LTO in `Auto`, with
/// the cache, for a program no partition of which was compiled here yet (its history
/// holds none: its first link, or every link so far whole-program), which [`link`]
/// partitions only when that is expected to be well under the whole link's time.
pub fn likely_whole(plan: &LinkPlan, ctx: &LinkContext) -> bool {
    let Some(cache) = ctx.cache() else {
        return false;
    };
    plan.incremental().is_ok_and(|m| m == Mode::Auto)
        && history::load(cache, plan.req).partitions.is_empty()
}

/// What the LTO phase gathered that an incremental link reads: the module pool,
/// libNVVM's settings, what the modules agree on, and whether the link is partial LTO.
pub struct Program<'a> {
    pub pool: &'a Pool,
    pub settings: &'a LtoSettings,
    pub consensus: &'a Consensus,
    pub partial: bool,
}

/// Links the pool as partitions, or says to link it whole-program (under `-v`, why).
/// `whole_beside`: the whole-program compile started beside this link's decision, stopped
/// as soon as the partitions are chosen (before they are built); `finalizer` starts the
/// finalizer's worker as the partitions (which are merged) start.
pub fn link(
    plan: &LinkPlan,
    ctx: &LinkContext,
    program: &Program,
    whole_beside: Option<&crate::child::Cancel>,
    finalizer: &dyn Fn(usize),
    timings: &mut Timings,
) -> Result<Outcome> {
    let (req, diag) = (plan.req, ctx.diag);
    let Program {
        pool,
        settings,
        consensus,
        partial,
    } = *program;
    let say = |why: &str| {
        if req.verbose {
            diag.info(&format!("incremental LTO: linking whole-program: {why}"));
        }
    };
    if let Some(why) = refusal(plan, pool, settings, partial) {
        say(&why);
        return Ok(Outcome::Whole(None));
    }
    let Some(cache) = ctx.cache() else {
        say("it needs the cache, which is off");
        return Ok(Outcome::Whole(None));
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
            return Ok(Outcome::Whole(None));
        }
    };
    let libnvvm = plan.libnvvm_to_load()?;
    lto::libnvvm::check_file(&libnvvm)?;
    let jobs = compile::jobs(
        &parts,
        settings,
        consensus,
        &sums,
        &cache.tool_id(&libnvvm)?,
    );
    let cached: Vec<Option<compile::Entry>> = jobs
        .iter()
        .map(|j| cache.get(&j.key).and_then(|e| compile::Entry::unpack(&e)))
        .collect();
    let identities: Vec<String> = parts
        .partitions
        .iter()
        .map(|p| {
            let kernels: Vec<String> = p.lists.ek.iter().chain(&p.lists.ik).cloned().collect();
            history::identity(p.module.map(|m| names[m].as_str()), &kernels)
        })
        .collect();
    let todo: Vec<usize> = (0..jobs.len()).filter(|&i| cached[i].is_none()).collect();
    let mode = plan.incremental()?;
    let mut hist = history::load(cache, req);
    // (a first link that builds the partitions: the whole link's time it was weighed
    // against, for later links to weigh their changed partitions against)
    let mut weighed = None;
    if mode == Mode::Auto {
        let code_misses = todo.iter().filter(|&&i| i + 1 < jobs.len()).count();
        let misses: Vec<String> = todo.iter().map(|&i| identities[i].clone()).collect();
        let first = code_misses == jobs.len() - 1;
        if first && hist.whole_ms.is_none() {
            weighed = Some(parts.first_share(crate::jobs::workers(0, parts.partitions.len())));
        }
        match auto_choice(&parts, first, &hist, &misses) {
            Ok(said) => {
                if let Some(said) = said.filter(|_| req.verbose) {
                    diag.info(&said);
                }
            }
            Err(why) => {
                say(&why);
                return Ok(Outcome::Whole(Some(Box::new(WholeTimer {
                    req: req.clone(),
                }))));
            }
        }
    }
    let units = todo_units(&parts, &names, &todo);
    if req.verbose {
        diag.info(&format!(
            "incremental LTO: {} partitions and the data partition, {} to compile",
            jobs.len() - 1,
            todo.len()
        ));
        if !todo.is_empty() {
            diag.info(&format!(
                "incremental LTO: compiling {}",
                to_compile(&units)
            ));
        }
    }
    if let Some(c) = whole_beside {
        c.stop();
    }
    if !todo.is_empty() {
        // (partitions are merged: an sm_100+ link's finalizer loads while they compile)
        finalizer(modules.iter().map(|m| m.data.len()).sum());
    }
    let started = Instant::now();
    let entries = compile_missing(ctx, &libnvvm, &modules, &jobs, cached, cache, timings)?;
    let keys: Vec<crate::cache::Key> = jobs.iter().map(|j| j.key.clone()).collect();
    let roots: Vec<_> = jobs.iter().map(|j| j.roots.clone()).collect();
    let (cubins, ptxas_ms) = link::cubins(
        plan, ctx, cache, consensus, &parts, &keys, &roots, &entries, timings,
    )?;
    // what the partitions compiled now cost, for later links to weigh
    for &i in &todo {
        hist.partitions
            .insert(identities[i].clone(), entries[i].ms + ptxas_ms[i]);
    }
    if let Some(share) = weighed.filter(|&s| s > 0.0) {
        // (an estimate, from this link's time and the share it was expected to take:
        // no link measured the whole program)
        let ms = started.elapsed().as_millis() as f64 / share;
        hist.whole_ms = Some(ms as u64);
    }
    if !todo.is_empty() {
        history::store(cache, req, &hist);
    }
    timings.incremental = Some(serde_json::json!({
        "partitions": jobs.len() - 1,
        "compiled": compiled_units(&units),
    }));
    Ok(Outcome::Partitioned(cubins))
}

/// The partitions `cached` lacks compiled by libNVVM on the link's workers: every
/// partition's entry, in order, its libNVVM messages said.
fn compile_missing(
    ctx: &LinkContext,
    libnvvm: &std::path::Path,
    modules: &[IrModule],
    jobs: &[compile::Job],
    cached: Vec<Option<compile::Entry>>,
    cache: &crate::cache::Cache,
    timings: &mut Timings,
) -> Result<Vec<compile::Entry>> {
    let todo: Vec<usize> = (0..jobs.len()).filter(|&i| cached[i].is_none()).collect();
    // (loaded here, so that a library that cannot be loaded fails the link with its
    // reason before any child starts; each partition is compiled in a child, as the
    // whole-program compile is: libNVVM's output depends on where its data lies in
    // memory, which a child fixes, and a crash costs only the child: lto::isolated)
    lto::libnvvm::LibNvvm::load(libnvvm)?;
    let engine = lto::isolated::IsolatedNvvm {
        lib: libnvvm.to_path_buf(),
        cancel: None,
    };
    let compiled = timings.phase("cicc", || {
        Ok(ctx.jobs.run_all(
            "partitions",
            &todo,
            0,
            |&i| jobs[i].reach,
            |&i| compile::compile(&engine, modules, &jobs[i], cache),
        ))
    })?;
    let mut compiled = todo.iter().copied().zip(compiled);
    let mut entries: Vec<compile::Entry> = Vec::with_capacity(jobs.len());
    for (i, c) in cached.into_iter().enumerate() {
        let entry = match c {
            Some(e) => e,
            None => {
                let (k, r) = compiled.next().expect("one result per compiled partition");
                debug_assert_eq!(k, i);
                r?
            }
        };
        for line in entry.log.lines() {
            ctx.diag.info(line);
        }
        entries.push(entry);
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_link_expected_faster_as_partitions_says_so_only_when_it_builds_them() {
        // eight units of long code that share nothing: partitions expected faster on any
        // number of workers
        let part = |module| plan::Partition {
            module,
            lists: plan::Lists::default(),
            manifest: summary::Hash::default(),
            reach: 1,
            work: 200_000,
        };
        let parts = plan::Plan {
            partitions: (0..8).map(|m| part(Some(m))).chain([part(None)]).collect(),
            pinned: Default::default(),
            kernels: Default::default(),
            whole_work: 1_600_000,
            read_work: 1_600_000,
            unestimated: None,
            relocatable: None,
        };
        let mut hist = history::History::default();
        let misses: Vec<String> = ["a.o:k", "b.o:k"].map(String::from).to_vec();
        let said = auto_choice(&parts, true, &hist, &misses).unwrap().unwrap();
        assert!(
            said.starts_with(
                "incremental LTO: none of this program's code partitions is cached: building them, on "
            ),
            "{said}"
        );
        // a later link with nothing measured: nothing to weigh
        assert_eq!(auto_choice(&parts, false, &hist, &misses), Ok(None));
        // a module the summaries could not read: its work is unknown, no first estimate
        let unread = plan::Plan {
            unestimated: Some("'c.o' could not be read function by function".into()),
            ..parts.clone()
        };
        assert_eq!(
            auto_choice(&unread, true, &hist, &misses),
            Err("none of this program's code partitions is cached, and 'c.o' could not be read function by function: building them cannot be weighed against a whole-program link".into())
        );
        // a program nvlink links as relocatable code: its estimate weighed
        let relocatable = plan::Plan {
            relocatable: Some("__cudaCDP2LaunchDeviceV2".into()),
            ..parts.clone()
        };
        let w = crate::jobs::workers(0, parts.partitions.len());
        assert_eq!(relocatable.first_share(w), parts.cold_share(w) * 1.75);
        let said = auto_choice(&relocatable, true, &hist, &misses)
            .unwrap()
            .unwrap();
        assert!(
            said.ends_with(
                "weighed as a program that calls the device runtime ('__cudaCDP2LaunchDeviceV2'), which nvlink links as relocatable code"
            ),
            "{said}"
        );
        // measured times decide, and are said
        hist.whole_ms = Some(100);
        for m in &misses {
            hist.partitions.insert(m.clone(), 30);
        }
        let w = crate::jobs::workers(0, 2);
        assert_eq!(
            auto_choice(&parts, false, &hist, &misses),
            Ok(Some(format!(
                "incremental LTO: its 2 changed partitions took {} ms on {w} worker(s) when last compiled, the whole-program link 100 ms",
                60 / w as u64
            )))
        );
        // the partitions that miss took longer than the whole link: nothing said of building them
        for m in &misses {
            hist.partitions.insert(m.clone(), 150);
        }
        let why = format!(
            "compiling its 2 changed partitions took {} ms on {w} worker(s) when last compiled, longer than the whole-program link's 100 ms",
            300 / w as u64
        );
        assert_eq!(auto_choice(&parts, true, &hist, &misses), Err(why.clone()));
        assert_eq!(auto_choice(&parts, false, &hist, &misses), Err(why));
    }
}
