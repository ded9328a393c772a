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

/// What a job makes: its cache stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// A unit's image, or the whole program's (stage `finalize`; the report counts them).
    Image,
    /// A stand-ins' template (stage `finalize-standin`).
    Template,
}

impl Stage {
    fn name(self) -> &'static str {
        match self {
            Stage::Image => "finalize",
            Stage::Template => "finalize-standin",
        }
    }
}

/// Each input's undecided functions, the names to take from its image (`None`: none).
type Takes = Vec<Option<BTreeSet<String>>>;

/// One job: what it makes, its name (the trace's and `--explain`'s), the finalizer's
/// options, and its inputs in order.
struct Job<'a> {
    stage: Stage,
    what: String,
    mode: Mode,
    parts: Vec<Cow<'a, [u8]>>,
}

impl Job<'_> {
    fn refs(&self) -> Vec<&[u8]> {
        self.parts.iter().map(|p| &p[..]).collect()
    }

    /// The cache key of the job: the stage, the finalizer library's identity (`lib`),
    /// its options and every input's bytes.
    fn key(&self, lib: &str) -> Key {
        let stage = self.stage.name();
        let mut k = (Key::new(stage)
            .text(lib)
            .text(&self.mode.options().join("\0")))
        .about(format!("{stage} job: {}", self.what));
        for p in &self.parts {
            k = k.bytes(p);
        }
        k
    }
}

/// A stand-in's template, made once in a link: by the first job that needs it.
type Template = Arc<OnceLock<Result<Option<Vec<u8>>>>>;

/// What the cache alone says of a unit's job, asked before any job runs where the link
/// may leave the units' jobs to a background build ([`apply`]'s `defer`).
#[derive(Clone, Debug)]
enum Probed {
    /// Found: the image (`None`: refused, or no stand-in can be written).
    Hit(Option<Vec<u8>>),
    /// Not found: its key was looked up.
    Missed,
    /// Not looked up: a template it needs is not cached, so its key is not known yet.
    Unknown,
}

/// The finalizer and the cache a link's jobs go through.
struct Runner<'a> {
    fin: &'a dyn Finalizer,
    ctx: &'a LinkContext<'a>,
    /// The finalizer library's identity, where the link has a cache.
    cached: Option<(&'a Cache, String)>,
    /// The finalizer's options for the units' and the whole program's images.
    mode: Mode,
    /// Units' and whole-program jobs run, and answered from the cache.
    ran: AtomicUsize,
    hits: AtomicUsize,
    templates: Mutex<BTreeMap<Kind, Template>>,
    /// The templates the cache was asked for and did not have ([`Runner::probe`]).
    missed_templates: Mutex<BTreeSet<Kind>>,
    /// The first job's failure (the worker crashed, stalled, answered wrongly): the link
    /// goes on without the finalizer, so the jobs not yet started are not run.
    failed: OnceLock<crate::diag::Error>,
}

impl Runner<'_> {
    /// The units' jobs (each unit and its references: [`Runner::unit`]), their images in
    /// job order (`None`: a stand-in or the job refused); on the link's job pool, the
    /// largest first, so a unit that needs no stand-in waits for no template.
    /// (Each with `asked`: the cache was asked for its job already, [`Runner::probe`].)
    fn units(&self, units: &[(&Cubin, &[Reference], bool)]) -> Result<Vec<Option<Vec<u8>>>> {
        let done = self.ctx.jobs.run_all(
            "finalize",
            units,
            0,
            |(c, _, _)| c.data.len(),
            |&(c, refs, asked)| self.unit(c, refs, asked),
        );
        done.into_iter().collect()
    }

    /// A unit's job alone: the unit, then its references' stand-ins, each made from its
    /// template ([`Runner::template`]); `asked`: the cache was asked for it already.
    fn unit(&self, unit: &Cubin, refs: &[Reference], asked: bool) -> Result<Option<Vec<u8>>> {
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
        self.one(&unit_job(unit, refs, &templates, &self.mode)?, asked)
    }

    /// A unit's job from the cache alone, its templates too (none made, no job run).
    fn probe(&self, unit: &Cubin, refs: &[Reference]) -> Result<Probed> {
        let mut templates = BTreeMap::new();
        for r in refs {
            if templates.contains_key(&r.kind) {
                continue;
            }
            let cell = self.cell(&r.kind);
            let found = match cell.get() {
                Some(made) => Some(made.clone()?),
                None => match template_job(&r.kind, self.mode.arch) {
                    None => Some(None),
                    Some(job) => self.lookup(&job),
                },
            };
            match found {
                Some(Some(t)) => {
                    let _ = cell.set(Ok(Some(t.clone())));
                    templates.insert(r.kind.clone(), t);
                }
                Some(None) => return Ok(Probed::Hit(None)),
                None => {
                    self.missed_templates.lock().unwrap().insert(r.kind.clone());
                    return Ok(Probed::Unknown);
                }
            }
        }
        Ok(
            match self.lookup(&unit_job(unit, refs, &templates, &self.mode)?) {
                Some(image) => Probed::Hit(image),
                None => Probed::Missed,
            },
        )
    }

    /// The cell a template of `kind` is made in, once in the link.
    fn cell(&self, kind: &Kind) -> Template {
        (self.templates.lock().unwrap())
            .entry(kind.clone())
            .or_default()
            .clone()
    }

    /// The template of a kind of stand-in, compiled by the finalizer (`-r`, stage
    /// `finalize-standin`) once in the link, by the first job that needs it (the others
    /// wait for it); `None` where no template is written for the kind or the finalizer
    /// refuses it.
    fn template(&self, kind: &Kind) -> Result<Option<Vec<u8>>> {
        self.cell(kind)
            .get_or_init(|| {
                let Some(job) = template_job(kind, self.mode.arch) else {
                    return Ok(None);
                };
                let asked = self.missed_templates.lock().unwrap().contains(kind);
                self.one(&job, asked)
            })
            .clone()
    }

    /// One job's image (`None`: refused), from the cache (unless `asked`: it was asked
    /// already) or the finalizer.
    fn one(&self, job: &Job, asked: bool) -> Result<Option<Vec<u8>>> {
        if !asked && let Some(image) = self.lookup(job) {
            return Ok(image);
        }
        if job.stage == Stage::Image {
            self.ran.fetch_add(1, Relaxed);
        }
        let cached = (self.cached.as_ref()).map(|(c, id)| (c, job.key(id)));
        let failed = |e: crate::diag::Error| {
            let _ = self.failed.set(e.clone());
            e
        };
        self.fin.prepare().map_err(failed)?;
        let _span = crate::trace::span_with("finalize", || format!("libnvJitLink: {}", job.what));
        let started = std::time::Instant::now();
        let image = self.fin.link(&job.refs(), &job.mode).map_err(failed)?;
        if let Some((cache, key)) = &cached {
            cache.put(key, &entry(image.as_deref()), started.elapsed());
        }
        Ok(image)
    }

    /// A job's image from the cache, if it has it (a unit's or the whole program's job
    /// counted as a hit).
    fn lookup(&self, job: &Job) -> Option<Option<Vec<u8>>> {
        let (cache, id) = self.cached.as_ref()?;
        let image = read_entry(&cache.get(&job.key(id))?)?;
        if job.stage == Stage::Image {
            self.hits.fetch_add(1, Relaxed);
        }
        Some(image)
    }
}

/// A template's job (`-r`; `None`: no template is written for the kind).
fn template_job(kind: &Kind, arch: Arch) -> Option<Job<'static>> {
    let ptx = standin::template_ptx(kind, arch)?;
    Some(Job {
        stage: Stage::Template,
        what: format!("the stand-ins' template {kind:?}"),
        mode: relocatable(arch),
        parts: vec![Cow::Owned(ptx.into_bytes())],
    })
}

/// The finalizer's options for a relocatable image (the templates').
fn relocatable(arch: Arch) -> Mode {
    Mode {
        arch,
        debug: false,
        extra: vec!["-r".into()],
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
/// [`splice`] allows. `defer`: where the cache has none of the units' jobs, the whole
/// program is finalized in one job, as nvlink does (on two cores the units' jobs side by
/// side cost about their sum), and the units' jobs are left to a background build
/// (`Stats::deferred`), so that the next link, after an edit, runs the edited units' jobs
/// alone.
pub fn apply(
    fin: &dyn Finalizer,
    lib: &Path,
    ctx: &LinkContext,
    arch: Arch,
    ptxas: Option<&str>,
    inputs: &mut [Input],
    defer: bool,
) -> Result<Stats> {
    let mut stats = Stats::default();
    let (takes, mut offers) = offers(inputs, ptxas, &mut stats)?;
    if takes.iter().all(Option::is_none) {
        return Ok(stats);
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
        mode: Mode {
            arch,
            debug: false,
            extra: Vec::new(),
        },
        ran: Default::default(),
        hits: Default::default(),
        templates: Default::default(),
        missed_templates: Default::default(),
        failed: OnceLock::new(),
    };
    let images = runner.images(inputs, &mut offers, defer, &mut stats)?;
    (stats.jobs, stats.cached) = (runner.ran.load(Relaxed), runner.hits.load(Relaxed));
    take_from(inputs, images, &takes, &mut stats)?;
    Ok(stats)
}

/// What is taken from each input (its undecided functions; `None`: nothing, the rule
/// decides every function, or the input is not offered: no capsule Mercury, `-G` code),
/// and how each is offered.
fn offers(inputs: &[Input], ptxas: Option<&str>, stats: &mut Stats) -> Result<(Takes, Vec<Offer>)> {
    let cubins: Vec<&Cubin> = inputs.iter().map(|i| &i.cubin).collect();
    let applies = rule::applies(&cubins, ptxas);
    let mut takes: Takes = Vec::with_capacity(inputs.len());
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
    Ok((takes, offers))
}

impl Runner<'_> {
    /// Each input's finalized image (`None`: not offered): the units alone, then (for
    /// those that did not link so, now `Offer::Program`) the whole program; where the link
    /// may `defer` and the cache has none of the units' jobs, the whole program alone.
    fn images(
        &self,
        inputs: &[Input],
        offers: &mut [Offer],
        defer: bool,
        stats: &mut Stats,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        let mut images: Vec<Option<Vec<u8>>> = vec![None; inputs.len()];
        let (mut alone, mut units): (Vec<usize>, Vec<(&Cubin, &[Reference])>) = (inputs.iter())
            .zip(offers.iter())
            .enumerate()
            .filter_map(|(k, (i, offer))| match offer {
                Offer::Alone(refs) => Some((k, (&i.cubin, &refs[..]))),
                _ => None,
            })
            .unzip();
        let mut probed = vec![Probed::Unknown; units.len()];
        if defer && self.cached.is_some() && !units.is_empty() {
            probed = (units.iter())
                .map(|&(c, refs)| self.probe(c, refs))
                .collect::<Result<_>>()?;
            if !probed.iter().any(|p| matches!(p, Probed::Hit(_))) {
                stats.deferred = alone.len();
                (alone, units, probed) = (Vec::new(), Vec::new(), Vec::new());
            }
        }
        // (the jobs the cache had are done; the others run, those it was asked for not
        // asked again)
        let mut run = Vec::new();
        let found: Vec<Option<Option<Vec<u8>>>> = (units.into_iter().zip(probed))
            .map(|((c, refs), p)| match p {
                Probed::Hit(image) => Some(image),
                p => {
                    run.push((c, refs, matches!(p, Probed::Missed)));
                    None
                }
            })
            .collect();
        let mut ran = self.units(&run)?.into_iter();
        drop(run);
        let done = (found.into_iter())
            .map(|f| f.unwrap_or_else(|| ran.next().expect("an image per job run")));
        if stats.deferred > 0 {
            // (every offered unit into the whole program's job)
            for offer in offers.iter_mut().filter(|o| matches!(o, Offer::Alone(_))) {
                *offer = Offer::Program;
            }
        }
        for (k, image) in alone.into_iter().zip(done) {
            match image {
                Some(image) => images[k] = Some(image),
                None => offers[k] = Offer::Program,
            }
        }
        if offers.contains(&Offer::Program) {
            let whole = Job {
                stage: Stage::Image,
                what: format!(
                    "the whole program ({})",
                    crate::diag::counted(inputs.len(), "input")
                ),
                mode: self.mode.clone(),
                parts: (inputs.iter())
                    .map(|i| Cow::Borrowed(&i.cubin.data[..]))
                    .collect(),
            };
            let image = self.one(&whole, false)?;
            for (k, offer) in offers.iter().enumerate() {
                if *offer == Offer::Program {
                    images[k] = image.clone();
                }
            }
        }
        Ok(images)
    }
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
    mode: &Mode,
) -> Result<Job<'a>> {
    let mut parts = vec![Cow::Borrowed(&unit.data[..])];
    for r in refs {
        parts.push(Cow::Owned(standin::renamed(&templates[&r.kind], &r.name)?));
    }
    let what = match refs.len() {
        0 => format!("'{}' alone", unit.origin),
        n => format!(
            "'{}' with {}",
            unit.origin,
            crate::diag::counted(n, "stand-in")
        ),
    };
    Ok(Job {
        stage: Stage::Image,
        what,
        mode: mode.clone(),
        parts,
    })
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
    for r in &refs {
        if !templates.contains_key(&r.kind) {
            let Some(job) = template_job(&r.kind, arch) else {
                return Ok(None);
            };
            let Some(t) = fin.link(&job.refs(), &job.mode)? else {
                return Ok(None);
            };
            templates.insert(r.kind.clone(), t);
        }
    }
    let mode = Mode {
        arch,
        debug: false,
        extra: Vec::new(),
    };
    let job = unit_job(&inputs[k].cubin, &refs, templates, &mode)?;
    fin.link(&job.refs(), &job.mode)
}

/// Each unit's undecided functions (`takes`) taken from its job's image.
fn take_from(
    inputs: &mut [Input],
    images: Vec<Option<Vec<u8>>>,
    takes: &Takes,
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
