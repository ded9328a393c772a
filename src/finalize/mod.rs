//! sm_100+ code taken from NVIDIA's finalizer (libnvJitLink, in a child process): on by
//! default at sm_100+ where the toolkit has libnvJitLink (`NVLINKRS_FINALIZER=off` turns
//! it off, `=nvjitlink` makes a missing library an error).
//!
//! nvlink 13.5 regenerates every sm_100+ function's SASS from its capsule Mercury, as an
//! executable, while ptxas `-c` wrote relocatable code; for some functions (kernels that
//! make no call, among others) the two differ in the scheduling control bits only, for
//! others in their instructions too (DESIGN.md, "sm_100+: the finalizer"). The code a
//! function gets does not depend on the other units, and libnvJitLink, given a unit that
//! links alone (or with libcudadevrt), or the whole program, produces nvlink's code. This
//! module asks a [`Finalizer`] for those images and takes from them, per function, the
//! control bits, the instructions where they were only reordered, or the whole function
//! with what names offsets in it ([`whole`]), each only where it stays consistent (so
//! relocations, `.nv.info` records and line tables match the code). `-G` code is left
//! alone.

pub mod debug;
pub mod isolated;
pub mod nvjitlink;
mod whole;

use rayon::prelude::*;
use std::collections::{HashMap, HashSet};

use crate::arch::Arch;
use crate::bytes::Bytes;
use crate::diag::{Diagnostics, Error, Result};
use crate::elf::cubin::{
    Cubin, SHT_CUDA_RESOLVED_RELA, SHT_PROGBITS, SHT_REL, SHT_RELA, STB_GLOBAL, STB_LOCAL, Section,
};
use crate::elf::{info, reloc};
use crate::merge::Input;
use crate::plan::Plan;

/// The environment variable that turns the prototype on (`nvjitlink`).
pub const VAR: &str = "NVLINKRS_FINALIZER";

/// A real finalizer of capsule Mercury.
pub trait Finalizer: Sync {
    /// Each job (a set of units: a unit, with libcudadevrt's members where it calls into
    /// them, or the whole program) linked into an executable image for `arch`; `None`
    /// for a job the finalizer refuses to link (it needs another unit's definitions).
    fn finalize(&self, jobs: &[Vec<&[u8]>], mode: &Mode) -> Result<Vec<Option<Vec<u8>>>>;
}

/// How the finalizer links: for which target, whether as nvlink's `-g` link (every
/// function's code regenerated for debugging), and the link's options that libnvJitLink
/// carries out as nvlink does (`-maxrregcount=N`, `-kernels-used=K`, `-variables-used=V`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mode {
    pub arch: Arch,
    pub debug: bool,
    pub extra: Vec<String>,
}

impl Mode {
    /// libnvJitLink's options for this mode.
    pub fn options(&self) -> Vec<String> {
        let mut o = vec![format!("-arch={}", self.arch)];
        if self.debug {
            o.push("-g".into());
        }
        o.extend(self.extra.iter().cloned());
        o
    }
}

/// What the finalizer changed in a link.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Units the finalizer linked (alone, or inside the whole program).
    pub units: usize,
    /// Functions whose code was taken from it.
    pub functions: usize,
    /// Of those, functions whose instructions were taken, not only their control bits.
    pub instructions: usize,
    /// The finalizer failed (crashed, stalled, answered wrongly): nothing was taken.
    pub fell_back: bool,
}

/// What [`VAR`] asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// Unset: the finalizer runs where libnvJitLink is found.
    Default,
    /// `off` (or `0`, `false`, `no`, `none`, empty; any case): never.
    Off,
    /// `nvjitlink`: always at sm_100+; a toolkit without libnvJitLink is an error.
    On,
}

/// The setting of [`VAR`]; an error for a value nvlinkrs does not know.
pub fn setting() -> Result<Setting> {
    match std::env::var(VAR) {
        Err(std::env::VarError::NotPresent) => Ok(Setting::Default),
        Err(std::env::VarError::NotUnicode(v)) => Err(unknown(&v.to_string_lossy())),
        Ok(v) if OFF.contains(&v.to_ascii_lowercase().as_str()) => Ok(Setting::Off),
        Ok(v) if v.eq_ignore_ascii_case("nvjitlink") => Ok(Setting::On),
        Ok(v) => Err(unknown(&v)),
    }
}

/// The values of [`VAR`] that turn the finalizer off (any case).
const OFF: &[&str] = &["", "0", "off", "false", "no", "none"];

fn unknown(v: &str) -> Error {
    Error::fatal(format!(
        "{VAR}='{v}': the values nvlinkrs knows are 'off' (or 0, false, no, none) and 'nvjitlink' (the only finalizer it knows)"
    ))
}

/// Whether this link runs the finalizer: an sm_100+ executable link (not `-r`), the
/// setting not `off`, libnvJitLink in the toolkit (or asked for by name), and this
/// process nvlinkrs' own executable, which the finalizer's child is started from (not
/// the drop-in libnvJitLink inside someone else's program).
pub fn wanted(plan: &Plan) -> Result<bool> {
    let req = plan.req;
    let s = setting()?;
    let here = crate::toolkit::own_image() == std::env::current_exe().ok();
    if s == Setting::Off || req.target.sm < 100 || req.relocatable || !here {
        return Ok(false);
    }
    Ok(s == Setting::On || plan.toolkit().ok().and_then(|k| k.libnvjitlink()).is_some())
}

/// The toolkit's libnvJitLink (an error naming the toolkit where it has none).
fn library(plan: &Plan) -> Result<std::path::PathBuf> {
    let kit = plan.toolkit()?;
    kit.libnvjitlink().ok_or_else(|| {
        Error::fatal(format!(
            "{VAR}: no libnvJitLink.so.13 in the toolkit at '{}'",
            kit.root.display()
        ))
    })
}

/// An error and its context chain on one line, for the fallback warning.
fn one_line(e: &Error) -> String {
    let mut line = e.message().to_string();
    for c in e.context_chain() {
        line += &format!("; {c}");
    }
    line
}

/// The phase: the toolkit's libnvJitLink, in a child process, as the finalizer of
/// `inputs`. A child that crashes or hangs leaves `inputs` as they are: the link goes
/// on without the finalizer, with a warning.
pub fn phase(plan: &Plan, diag: &Diagnostics, inputs: &mut [Input]) -> Result<Stats> {
    let lib = library(plan)?;
    match apply(&isolated::Isolated { lib }, plan.req.target, inputs) {
        Ok(stats) => Ok(stats),
        Err(e) => {
            let line = one_line(&e);
            diag.warning_never_error(&format!("{VAR}: {line}; linked without the finalizer"));
            Ok(Stats {
                fell_back: true,
                ..Stats::default()
            })
        }
    }
}

/// How a unit is offered to the finalizer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Offer {
    /// Not at all: no capsule Mercury, or `-G` code (its line tables follow ptxas's code).
    No,
    /// Alone, with libcudadevrt's members when it calls into them.
    Alone { devrt: bool },
    /// Inside the whole program: it refers to a global another input defines.
    Program,
}

/// Each sm_100+ unit without `-G` debug information offered to `fin`: a unit that links
/// alone (or with libcudadevrt's members, when it calls into them) alone, in parallel;
/// the units that refer to another unit's globals once together, inside the whole
/// program (every input of the link, as nvlink finalizes it; a function is taken from
/// that image by name, where the image has one function of that name). The units
/// finalized have their functions' code replaced where [`splice`] allows.
pub fn apply(fin: &dyn Finalizer, arch: Arch, inputs: &mut [Input]) -> Result<Stats> {
    let globals = |i: &Input| -> HashSet<String> {
        let c = &i.cubin;
        let defined = c
            .symbols
            .iter()
            .filter(|s| s.defined() && s.bind != STB_LOCAL);
        defined.map(|s| s.name.to_string()).collect()
    };
    let (mut ours, mut devrt) = (HashSet::new(), HashSet::new());
    for i in inputs.iter() {
        if i.system { &mut devrt } else { &mut ours }.extend(globals(i));
    }
    let offers: Vec<Offer> = inputs
        .iter()
        .map(|i| {
            let c = &i.cubin;
            if !c.has_mercury() || c.sections.iter().any(|s| s.name == ".debug_info") {
                return Offer::No;
            }
            let (mut needs_ours, mut calls_devrt) = (false, false);
            for s in c
                .symbols
                .iter()
                .filter(|s| !s.defined() && s.bind == STB_GLOBAL)
            {
                needs_ours |= ours.contains(s.name.as_str());
                calls_devrt |= !i.system && devrt.contains(s.name.as_str());
            }
            match needs_ours {
                true => Offer::Program,
                false => Offer::Alone { devrt: calls_devrt },
            }
        })
        .collect();
    let devrt_units: Vec<&[u8]> = inputs
        .iter()
        .filter(|i| i.system)
        .map(|i| &i.cubin.data[..])
        .collect();
    // the jobs: each unit offered alone, then the whole program when some unit needs it
    let mut jobs: Vec<Vec<&[u8]>> = Vec::new();
    let mut job_of: Vec<Option<usize>> = Vec::new();
    for (i, offer) in inputs.iter().zip(&offers) {
        job_of.push(match *offer {
            Offer::Alone { devrt } => {
                let mut units = vec![&i.cubin.data[..]];
                if devrt {
                    units.extend(&devrt_units);
                }
                jobs.push(units);
                Some(jobs.len() - 1)
            }
            _ => None,
        });
    }
    if offers.contains(&Offer::Program) {
        jobs.push(inputs.iter().map(|i| &i.cubin.data[..]).collect());
        for (j, offer) in job_of.iter_mut().zip(&offers) {
            if *offer == Offer::Program {
                *j = Some(jobs.len() - 1);
            }
        }
    }
    if jobs.is_empty() {
        return Ok(Stats::default());
    }
    let mode = Mode {
        arch,
        debug: false,
        extra: Vec::new(),
    };
    let images = {
        let _span = crate::trace::span("finalize", "libnvJitLink jobs (child process)");
        crate::trace::arg("units_per_job", || {
            jobs.iter().map(Vec::len).collect::<Vec<_>>().into()
        });
        let images = fin.finalize(&jobs, &mode);
        if let Ok(images) = &images {
            crate::trace::arg("image_bytes", || {
                let sizes = images.iter().map(|i| i.as_ref().map(Vec::len));
                sizes.collect::<Vec<_>>().into()
            });
        }
        images?
    };
    let images: Vec<Option<Cubin>> = images
        .into_par_iter()
        .enumerate()
        .map(|(k, image)| {
            let origin = format!("libnvJitLink's image {k} (finalized)");
            image
                .map(|d| Cubin::parse(Bytes::from_vec(d), &origin))
                .transpose()
        })
        .collect::<Result<_>>()?;
    let done: Vec<Result<Option<(Cubin, Count)>>> = (inputs.par_iter().zip(&job_of))
        .map(|(i, job)| match job.and_then(|k| images.get(k)?.as_ref()) {
            Some(image) => spliced(&i.cubin, image),
            None => Ok(None),
        })
        .collect();
    let mut stats = Stats::default();
    for (input, r) in inputs.iter_mut().zip(done) {
        if let Some((cubin, n)) = r? {
            stats.units += 1;
            stats.functions += n.functions;
            stats.instructions += n.instructions;
            input.cubin = cubin;
        }
    }
    Ok(stats)
}

/// `unit` with its functions' code taken from `fin` where [`splice`] allows.
fn spliced(unit: &Cubin, fin: &Cubin) -> Result<Option<(Cubin, Count)>> {
    let (data, n) = splice(unit, fin)?;
    let cubin = match data {
        Some(d) => Cubin::parse(Bytes::from_vec(d), &unit.origin)?,
        None => unit.clone(),
    };
    Ok(Some((cubin, n)))
}

/// Bits 41..63 of an instruction's second word: stall, yield, barriers, wait mask and
/// reuse flags (the scheduling control), the rest being the instruction.
pub(crate) const CONTROL: u64 = !((1u64 << 41) - 1);

/// The `.nv.info` attributes that list instruction offsets in their function (EXIT,
/// S2R CTAID, cache-modifier loads, system atomics, cooperative groups, emulated 16-bit
/// atomics, warp-wide integer, indirect-branch targets, mbarriers, coroutine resumes,
/// `MEMBAR.SYS` workarounds, and 0x65, unnamed, which the finalizer rewrites with the
/// code: increasing offsets in CUB's DeviceScan kernel at sm_100): a function whose
/// instructions move must keep them.
pub(crate) const OFFSET_LISTS: &[u8] = &[
    0x1C, 0x1D, 0x25, 0x27, 0x28, 0x2D, 0x31, 0x34, 0x39, 0x3A, 0x47, 0x65,
];

/// What [`splice`] took from the finalized image.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    /// Functions whose code changed.
    pub functions: usize,
    /// Of those, functions whose instructions changed, not only their control bits.
    pub instructions: usize,
}

/// `unit`'s bytes with each function's code taken from `fin`, where `fin` has one
/// function of that name with the same size and the same capsule (but for its first
/// word, the section index); `None` when nothing changed. Instruction by instruction:
/// at an instruction a relocation of `unit` patches, `fin` must have the same
/// instruction but for the relocated fields (applied there) and the control bits, and
/// only the control bits are taken; elsewhere the finalized instruction is taken. Where
/// that changes more than control bits (the finalizer reordered the code), the function
/// is taken only when the instructions are a permutation of ptxas's (so no link-time
/// value of `fin`'s layout comes in), its `.nv.info` instruction-offset lists are the
/// same in both, and the unit has no line table (whose addresses follow ptxas's code);
/// otherwise it is left as ptxas wrote it.
pub fn splice(unit: &Cubin, fin: &Cubin) -> Result<(Option<Vec<u8>>, Count)> {
    let mut out: Option<Vec<u8>> = None;
    let mut count = Count::default();
    let lines = unit
        .sections
        .iter()
        .any(|s| matches!(s.name.as_str(), ".debug_line" | ".nv_debug_line_sass"));
    for (index, s) in unit.sections.iter().enumerate() {
        if s.ty != SHT_PROGBITS || !s.name.starts_with(".text.") {
            continue;
        }
        let mut named = (fin.sections.iter().enumerate()).filter(|(_, x)| x.name == s.name);
        let (Some((fsec, f)), None) = (named.next(), named.next()) else {
            continue;
        };
        match in_place(unit, fin, index, f, lines)? {
            Some((code, moved)) => {
                if code != unit.bytes(s) {
                    let data = out.get_or_insert_with(|| unit.data.to_vec());
                    data[s.offset as usize..(s.offset + s.size) as usize].copy_from_slice(&code);
                    count.functions += 1;
                    count.instructions += moved as usize;
                }
            }
            // (a table of resolved relocations would name the old offsets)
            None if !lines
                && !unit
                    .sections
                    .iter()
                    .any(|r| r.ty == SHT_CUDA_RESOLVED_RELA && r.info as usize == index) =>
            {
                let data = out.get_or_insert_with(|| unit.data.to_vec());
                if whole::take(unit, fin, index, fsec, data)? {
                    count.functions += 1;
                    count.instructions += 1;
                }
            }
            None => {}
        }
    }
    Ok((out, count))
}

/// Function `index` of `unit` with `fin`'s code taken in place (the same size, the same
/// capsule, the relocation sites where they were): the code, and whether instructions
/// moved; `None` where that cannot be done.
fn in_place(
    unit: &Cubin,
    fin: &Cubin,
    index: usize,
    f: &Section,
    lines: bool,
) -> Result<Option<(Vec<u8>, bool)>> {
    let s = &unit.sections[index];
    let (ours, theirs) = (unit.bytes(s), fin.bytes(f));
    if ours.len() != theirs.len() || ours.len() % 16 != 0 {
        return Ok(None);
    }
    let capsule = format!(".nv.capmerc{}", s.name);
    let cap = |c: &Cubin| {
        c.sections
            .iter()
            .find(|x| x.name == capsule)
            .map(|x| c.bytes(x).get(4..).unwrap_or_default().to_vec())
    };
    if cap(unit) != cap(fin) {
        return Ok(None);
    }
    // the relocated fields of each patched instruction
    let mut sites: HashMap<u64, u128> = HashMap::new();
    for (k, r) in unit.sections.iter().enumerate() {
        if matches!(r.ty, SHT_RELA | SHT_REL) && r.info as usize == index {
            for r in unit.relocations(k)? {
                let Some(mask) = reloc::field_mask(r.ty, r.offset % 16) else {
                    return Ok(None);
                };
                *sites.entry(r.offset / 16 * 16).or_default() |= mask;
            }
        }
    }
    let ctl = (CONTROL as u128) << 64;
    let word =
        |d: &[u8], off: usize| u128::from_le_bytes(d[off..off + 16].try_into().expect("16 bytes"));
    let mut code = ours.to_vec();
    let (mut moved, mut left, mut right) = (false, Vec::new(), Vec::new());
    for off in (0..ours.len()).step_by(16) {
        let (o, t) = (word(ours, off), word(theirs, off));
        let new = match sites.get(&(off as u64)) {
            Some(&m) if (o ^ t) & !(m | ctl) != 0 => return Ok(None),
            Some(_) => (o & !ctl) | (t & ctl),
            None => {
                moved |= (o ^ t) & !ctl != 0;
                left.push(o & !ctl);
                right.push(t & !ctl);
                t
            }
        };
        code[off..off + 16].copy_from_slice(&new.to_le_bytes());
    }
    if moved {
        left.sort_unstable();
        right.sort_unstable();
        let fname = &s.name[".text.".len()..];
        if lines || left != right || offset_lists(unit, fname)? != offset_lists(fin, fname)? {
            return Ok(None);
        }
    }
    Ok(Some((code, moved)))
}

/// The instruction-offset records of function `name`'s `.nv.info` section, sorted.
fn offset_lists(c: &Cubin, name: &str) -> Result<Vec<(u8, Vec<u8>)>> {
    let section = format!(".nv.info.{name}");
    let Some(s) = c.sections.iter().find(|s| s.name == section) else {
        return Ok(Vec::new());
    };
    let mut v: Vec<(u8, Vec<u8>)> = info::parse(c.bytes(s), &c.origin, &section, s.offset)?
        .into_iter()
        .filter(|r| OFFSET_LISTS.contains(&r.attr))
        .map(|r| (r.attr, r.payload.to_vec()))
        .collect();
    v.sort();
    Ok(v)
}
