//! The finalizer's work in a link, per unit: which units are offered (those with a
//! function [`rule`](super::rule) does not decide, capsule Mercury and no `-G` code),
//! each one's job (the unit, and stand-ins for the globals it refers to in other inputs,
//! [`standin`](super::standin)), run in parallel on the link's job pool and cached per
//! job (stage `finalize`: the finalizer library's identity, its options, which name the
//! target and mode, and the bytes of every input of the job), and the undecided
//! functions taken from each image ([`splice`](super::splice)). A unit a stand-in cannot
//! be written for, or whose job the finalizer refuses, goes into one job of the whole
//! program (every input of the link, as nvlink finalizes it). The templates the
//! stand-ins are made from are compiled by the finalizer (`-r`) and cached too
//! (`finalize-standin`), each by the first job that needs it, so a unit that needs none
//! (at sm_100 often the largest) waits for none. Once a job fails the jobs not yet
//! started are not run (the link goes on without the finalizer). The images, and so the
//! output, are the same whatever the number of threads.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};

use rayon::prelude::*;

use super::standin::{self, Kind, Reference};
use super::{Finalizer, Mode, Stats, rule, splice};
use crate::arch::Arch;
use crate::bytes::Bytes;
use crate::cache::{Cache, Key, pack, unpack};
use crate::context::LinkContext;
use crate::diag::Result;
use crate::elf::cubin::{Cubin, STB_LOCAL};
use crate::merge::Input;

/// How a unit is offered to the finalizer.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Offer {
    /// Not at all: no capsule Mercury, `-G` code, or nothing the rule leaves undecided.
    No,
    /// Alone, with stand-ins for these references.
    Alone(Vec<Reference>),
    /// Inside the whole program.
    Program,
}

/// One job: its inputs, in order.
struct Job<'a> {
    parts: Vec<Cow<'a, [u8]>>,
}

impl Job<'_> {
    fn refs(&self) -> Vec<&[u8]> {
        self.parts.iter().map(|p| &p[..]).collect()
    }
}

/// A stand-in's template, made once in a link: by the first job that needs it.
type Template = Arc<OnceLock<Result<Option<Vec<u8>>>>>;

/// The finalizer and the cache a link's jobs go through.
struct Runner<'a> {
    fin: &'a dyn Finalizer,
    ctx: &'a LinkContext<'a>,
    /// The finalizer library's identity, where the link has a cache.
    cached: Option<(&'a Cache, String)>,
    arch: Arch,
    /// Units' and whole-program jobs run, and answered from the cache.
    ran: AtomicUsize,
    hits: AtomicUsize,
    templates: Mutex<BTreeMap<Kind, Template>>,
    /// The first job's failure (the worker crashed, stalled, answered wrongly): the link
    /// goes on without the finalizer, so the jobs not yet started are not run.
    failed: OnceLock<crate::diag::Error>,
}

impl Runner<'_> {
    /// The units' jobs (each unit and its references: [`Runner::unit`]), their images in
    /// job order (`None`: a stand-in or the job refused); on the link's job pool, the
    /// largest first, so a unit that needs no stand-in waits for no template.
    fn units(&self, units: &[(&Cubin, &[Reference])], mode: &Mode) -> Result<Vec<Option<Vec<u8>>>> {
        let done = self.ctx.jobs.run_all(
            "finalize",
            units,
            0,
            |(c, _)| c.data.len(),
            |&(c, refs)| self.unit(c, refs, mode),
        );
        done.into_iter().collect()
    }

    /// A unit's job alone: the unit, then its references' stand-ins, each made from its
    /// template ([`Runner::template`]).
    fn unit(&self, unit: &Cubin, refs: &[Reference], mode: &Mode) -> Result<Option<Vec<u8>>> {
        if let Some(e) = self.failed.get() {
            return Err(e.clone());
        }
        let mut templates = BTreeMap::new();
        for r in refs {
            if !templates.contains_key(&r.kind) {
                let Some(t) = self.template(&r.kind)? else {
                    return Ok(None);
                };
                templates.insert(r.kind.clone(), t);
            }
        }
        let job = unit_job(unit, refs, &templates)?;
        let what = match refs.len() {
            0 => format!("'{}' alone", unit.origin),
            n => format!("'{}' with {}", unit.origin, count(n, "stand-in")),
        };
        self.one("finalize", &what, &job, mode)
    }

    /// The template of a kind of stand-in, compiled by the finalizer (`-r`, stage
    /// `finalize-standin`) once in the link, by the first job that needs it (the others
    /// wait for it); `None` where no template is written for the kind or the finalizer
    /// refuses it.
    fn template(&self, kind: &Kind) -> Result<Option<Vec<u8>>> {
        let cell = self
            .templates
            .lock()
            .unwrap()
            .entry(kind.clone())
            .or_default()
            .clone();
        cell.get_or_init(|| {
            let Some(ptx) = standin::template_ptx(kind, self.arch) else {
                return Ok(None);
            };
            let relocatable = Mode {
                arch: self.arch,
                debug: false,
                extra: vec!["-r".into()],
            };
            let job = Job {
                parts: vec![Cow::Borrowed(ptx.as_bytes())],
            };
            self.one(
                "finalize-standin",
                &format!("the stand-ins' template {kind:?}"),
                &job,
                &relocatable,
            )
        })
        .clone()
    }

    /// One job's image (`None`: refused), from the cache (`stage`) or the finalizer;
    /// `what` names it in the trace and in `--explain`.
    fn one(&self, stage: &str, what: &str, job: &Job, mode: &Mode) -> Result<Option<Vec<u8>>> {
        let counted = |n: &AtomicUsize| {
            if stage == "finalize" {
                n.fetch_add(1, Relaxed);
            }
        };
        let cached =
            (self.cached.as_ref()).map(|(c, id)| (c, key(stage, what, id, mode, &job.refs())));
        let found = cached.as_ref().and_then(|(c, k)| read_entry(&c.get(k)?));
        if let Some(image) = found {
            counted(&self.hits);
            return Ok(image);
        }
        counted(&self.ran);
        let failed = |e: crate::diag::Error| {
            let _ = self.failed.set(e.clone());
            e
        };
        self.fin.prepare().map_err(failed)?;
        let _span = crate::trace::span_with("finalize", || format!("libnvJitLink: {what}"));
        let started = std::time::Instant::now();
        let image = self.fin.link(&job.refs(), mode).map_err(failed)?;
        if let Some((cache, key)) = &cached {
            cache.put(key, &entry(image.as_deref()), started.elapsed());
        }
        Ok(image)
    }
}

/// The cache key of a job: the stage, the finalizer library's identity, its options and
/// every input's bytes (`what`: the job, as `--explain` names it).
fn key(stage: &str, what: &str, lib: &str, mode: &Mode, parts: &[&[u8]]) -> Key {
    let mut k = (Key::new(stage).text(lib).text(&mode.options().join("\0")))
        .about(format!("{stage} job: {what}"));
    for p in parts {
        k = k.bytes(p);
    }
    k
}

/// "1 stand-in", "2 stand-ins".
fn count(n: usize, what: &str) -> String {
    match n {
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    }
}

/// A job's entry: the image, or the refusal.
fn entry(image: Option<&[u8]>) -> Vec<u8> {
    match image {
        Some(i) => pack(&[b"image", i]),
        None => pack(&[b"refused"]),
    }
}

fn read_entry(e: &[u8]) -> Option<Option<Vec<u8>>> {
    match &unpack(e)?[..] {
        [kind, image] if kind == b"image" => Some(Some(image.clone())),
        [kind] if kind == b"refused" => Some(None),
        _ => None,
    }
}

/// Each offered unit's undecided functions finalized by `fin` (libnvJitLink at `lib`):
/// alone with stand-ins where it can be, else inside the whole program (every unit,
/// where the rule does not apply to the link: a unit the toolkit's ptxas, whose version
/// line is `ptxas`, did not make); the units have those functions' code replaced where
/// [`splice`] allows.
pub fn apply(
    fin: &dyn Finalizer,
    lib: &Path,
    ctx: &LinkContext,
    arch: Arch,
    ptxas: Option<&str>,
    inputs: &mut [Input],
) -> Result<Stats> {
    let mut stats = Stats::default();
    let cubins: Vec<&Cubin> = inputs.iter().map(|i| &i.cubin).collect();
    let applies = rule::applies(&cubins, ptxas);
    let mut takes: Vec<Option<BTreeSet<String>>> = Vec::with_capacity(inputs.len());
    for c in cubins {
        let offered = c.has_mercury() && !c.sections.iter().any(|s| s.name == ".debug_info");
        let undecided = if offered {
            rule::undecided(c, applies)?
        } else {
            BTreeSet::new()
        };
        stats.skipped += (offered && undecided.is_empty()) as usize;
        takes.push((!undecided.is_empty()).then_some(undecided));
    }
    if takes.iter().all(Option::is_none) {
        return Ok(stats);
    }
    let defined = defined(inputs);
    let mut offers: Vec<Offer> = Vec::with_capacity(inputs.len());
    for (i, take) in inputs.iter().zip(&takes) {
        offers.push(match take {
            None => Offer::No,
            Some(_) if !applies => Offer::Program,
            Some(_) => match standin::references(&i.cubin, &|n| defined.contains(n))? {
                Some(refs) => Offer::Alone(refs),
                None => Offer::Program,
            },
        });
    }
    let runner = Runner {
        fin,
        ctx,
        cached: match ctx.cache() {
            Some(c) => {
                // (hashed once per cache and library: in a fresh cache, a long step)
                let _span = crate::trace::span("cache", "libnvJitLink's identity");
                Some((c, c.tool_id(lib)?))
            }
            None => None,
        },
        arch,
        ran: Default::default(),
        hits: Default::default(),
        templates: Default::default(),
        failed: OnceLock::new(),
    };
    let mode = Mode {
        arch,
        debug: false,
        extra: Vec::new(),
    };
    let mut images: Vec<Option<Vec<u8>>> = vec![None; inputs.len()];
    // the units alone, then (for those that did not link so) the whole program
    let (alone, units): (Vec<usize>, Vec<(&Cubin, &[Reference])>) = (inputs.iter())
        .zip(&offers)
        .enumerate()
        .filter_map(|(k, (i, offer))| match offer {
            Offer::Alone(refs) => Some((k, (&i.cubin, &refs[..]))),
            _ => None,
        })
        .unzip();
    let done = runner.units(&units, &mode)?;
    drop(units);
    for (k, image) in alone.into_iter().zip(done) {
        match image {
            Some(image) => images[k] = Some(image),
            None => offers[k] = Offer::Program,
        }
    }
    if offers.contains(&Offer::Program) {
        let whole = Job {
            parts: (inputs.iter())
                .map(|i| Cow::Borrowed(&i.cubin.data[..]))
                .collect(),
        };
        let what = format!("the whole program ({})", count(inputs.len(), "input"));
        let image = runner.one("finalize", &what, &whole, &mode)?;
        for (k, offer) in offers.iter().enumerate() {
            if *offer == Offer::Program {
                images[k] = image.clone();
            }
        }
    }
    (stats.jobs, stats.cached) = (runner.ran.load(Relaxed), runner.hits.load(Relaxed));
    take_from(inputs, images, &takes, &mut stats)?;
    Ok(stats)
}

/// The names the inputs define (global or weak): a unit's references to them get
/// stand-ins.
fn defined(inputs: &[Input]) -> HashSet<&str> {
    (inputs.iter())
        .flat_map(|i| i.cubin.symbols.iter())
        .filter(|s| s.defined() && s.bind != STB_LOCAL)
        .map(|s| s.name.as_str())
        .collect()
}

/// A unit's job alone: the unit, then its references' stand-ins (by name).
fn unit_job<'a>(
    unit: &'a Cubin,
    refs: &[Reference],
    templates: &BTreeMap<Kind, Vec<u8>>,
) -> Result<Job<'a>> {
    let mut parts = vec![Cow::Borrowed(&unit.data[..])];
    for r in refs {
        parts.push(Cow::Owned(standin::renamed(&templates[&r.kind], &r.name)?));
    }
    Ok(Job { parts })
}

/// Unit `k`'s job alone, as [`apply`] makes it, linked by `fin`: its image, or `None`
/// where a stand-in cannot be written or the finalizer refuses the job. The templates
/// are made by `fin` and kept in `templates`. (For the proof of the per-unit jobs
/// against whole-program jobs, `tests/finalize/proof.rs`.)
pub fn alone(
    fin: &dyn Finalizer,
    arch: Arch,
    inputs: &[Input],
    k: usize,
    templates: &mut BTreeMap<Kind, Vec<u8>>,
) -> Result<Option<Vec<u8>>> {
    let defined = defined(inputs);
    let Some(refs) = standin::references(&inputs[k].cubin, &|n| defined.contains(n))? else {
        return Ok(None);
    };
    let relocatable = Mode {
        arch,
        debug: false,
        extra: vec!["-r".into()],
    };
    for r in &refs {
        if !templates.contains_key(&r.kind) {
            let Some(ptx) = standin::template_ptx(&r.kind, arch) else {
                return Ok(None);
            };
            let Some(t) = fin.link(&[ptx.as_bytes()], &relocatable)? else {
                return Ok(None);
            };
            templates.insert(r.kind.clone(), t);
        }
    }
    let job = unit_job(&inputs[k].cubin, &refs, templates)?;
    let mode = Mode {
        arch,
        debug: false,
        extra: Vec::new(),
    };
    fin.link(&job.refs(), &mode)
}

/// Each unit's undecided functions (`takes`) taken from its job's image.
fn take_from(
    inputs: &mut [Input],
    images: Vec<Option<Vec<u8>>>,
    takes: &[Option<BTreeSet<String>>],
    stats: &mut Stats,
) -> Result<()> {
    let parsed: Vec<Option<Cubin>> = (images.into_par_iter().enumerate())
        .map(|(k, image)| {
            let origin = format!("libnvJitLink's image of input {k} (finalized)");
            image
                .map(|d| Cubin::parse(Bytes::from_vec(d), &origin))
                .transpose()
        })
        .collect::<Result<_>>()?;
    let done: Vec<Result<Option<(Cubin, splice::Count)>>> = (inputs.par_iter())
        .zip(parsed.par_iter().zip(takes))
        .map(|(i, (image, take))| match (image, take) {
            (Some(image), Some(take)) => splice::spliced(&i.cubin, image, Some(take)),
            _ => Ok(None),
        })
        .collect();
    for (input, r) in inputs.iter_mut().zip(done) {
        if let Some((cubin, n)) = r? {
            stats.units += 1;
            stats.functions += n.functions;
            stats.instructions += n.instructions;
            input.cubin = cubin;
        }
    }
    Ok(())
}
