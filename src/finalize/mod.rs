//! sm_100+ scheduling taken from NVIDIA's finalizer, one input unit at a time: an opt-in
//! prototype (`NVLINKRS_FINALIZER=nvjitlink`, off by default).
//!
//! nvlink 13.5 regenerates every sm_100+ function's SASS from its capsule Mercury, as an
//! executable, while ptxas `-c` wrote relocatable code; for some functions (kernels that
//! make no call, among others) the two differ in the scheduling control bits only, for
//! others in their instructions too (DESIGN.md, "sm_100+: the finalizer"). The code a
//! function gets does not depend on the other units, and libnvJitLink, given a unit that
//! links alone (or with libcudadevrt), produces nvlink's code for it. This module asks a
//! [`Finalizer`] for each unit's image and takes from it, per function, the control bits
//! only, and only where every instruction is otherwise the one ptxas wrote (so offsets,
//! relocations, `.nv.info` records and line tables stay as they are). Everything else is
//! left alone: a unit that calls or refers to another unit, `-G` code, and functions
//! whose instructions or sizes the finalizer changed.

pub mod nvjitlink;

use rayon::prelude::*;
use std::collections::HashSet;

use crate::arch::Arch;
use crate::bytes::{Bytes, Le};
use crate::diag::{Error, Result};
use crate::elf::cubin::{Cubin, SHT_PROGBITS, SHT_REL, SHT_RELA, STB_GLOBAL, STB_LOCAL};
use crate::merge::Input;
use crate::plan::Plan;

/// The environment variable that turns the prototype on (`nvjitlink`).
pub const VAR: &str = "NVLINKRS_FINALIZER";

/// A real finalizer of capsule Mercury.
pub trait Finalizer: Sync {
    /// `units` (a unit, and libcudadevrt's members where it calls into them) linked into
    /// an executable image for `arch`; `None` when the finalizer refuses to link them
    /// (they need another unit's definitions).
    fn finalize(&self, units: &[&[u8]], arch: Arch) -> Result<Option<Vec<u8>>>;
}

/// What the finalizer changed in a link.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Units the finalizer linked alone.
    pub units: usize,
    /// Functions whose control bits were taken from it.
    pub functions: usize,
}

/// The value of [`VAR`] when the prototype is asked for, `None` when it is not set;
/// an error for a value other than `nvjitlink`.
pub fn requested() -> Result<Option<String>> {
    match std::env::var(VAR) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => Err(Error::fatal(format!(
            "{VAR}='{}': the only finalizer nvlinkrs knows is 'nvjitlink'",
            v.to_string_lossy()
        ))),
        Ok(v) if v.is_empty() || v == "0" || v == "off" => Ok(None),
        Ok(v) if v == "nvjitlink" => Ok(Some(v)),
        Ok(v) => Err(Error::fatal(format!(
            "{VAR}='{v}': the only finalizer nvlinkrs knows is 'nvjitlink'"
        ))),
    }
}

/// Whether this link runs the finalizer: asked for, an sm_100+ target, not `-r`.
pub fn wanted(plan: &Plan) -> Result<bool> {
    let req = plan.req;
    Ok(requested()?.is_some() && req.target.sm >= 100 && !req.relocatable)
}

/// The phase: the toolkit's libnvJitLink as the finalizer of `inputs`.
pub fn phase(plan: &Plan, inputs: &mut [Input]) -> Result<Stats> {
    let kit = plan.toolkit()?;
    let path = kit.libnvjitlink().ok_or_else(|| {
        Error::fatal(format!(
            "{VAR}: no libnvJitLink.so.13 in the toolkit at '{}'",
            kit.root.display()
        ))
    })?;
    // (libnvJitLink runs in this process: a crash in it, loading a damaged library or
    // finalizing a damaged unit, ends the link with a fatal line and exit 1, as nvlink
    // ends on its own internal errors, not with the signal)
    let _guard =
        crate::lto::crash::Guard::new(&format!("{VAR}: libnvJitLink '{}' crashed", path.display()));
    apply(&nvjitlink::OnDemand::new(path), plan.req.target, inputs)
}

/// Each sm_100+ unit without `-G` debug information offered to `fin`, in parallel: alone,
/// or with libcudadevrt's members when it calls into them; not a unit with an undefined
/// global that another input of the link defines (it would not link alone). The units
/// finalized have their functions' control bits replaced where [`splice`] allows.
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
    let devrt_units: Vec<&[u8]> = inputs
        .iter()
        .filter(|i| i.system)
        .map(|i| &i.cubin.data[..])
        .collect();
    let done: Vec<Result<Option<(Cubin, usize)>>> = inputs
        .par_iter()
        .map(|i| {
            let c = &i.cubin;
            if !c.has_mercury() || c.sections.iter().any(|s| s.name == ".debug_info") {
                return Ok(None);
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
            if needs_ours {
                return Ok(None);
            }
            let mut units = vec![&c.data[..]];
            if calls_devrt {
                units.extend(&devrt_units);
            }
            let Some(image) = fin.finalize(&units, arch)? else {
                return Ok(None);
            };
            let origin = format!("{} (finalized)", c.origin);
            let fin = Cubin::parse(Bytes::from_vec(image), &origin)?;
            let (data, n) = splice(c, &fin)?;
            let cubin = match data {
                Some(d) => Cubin::parse(Bytes::from_vec(d), &c.origin)?,
                None => c.clone(),
            };
            Ok(Some((cubin, n)))
        })
        .collect();
    let mut stats = Stats::default();
    for (input, r) in inputs.iter_mut().zip(done) {
        if let Some((cubin, n)) = r? {
            stats.units += 1;
            stats.functions += n;
            input.cubin = cubin;
        }
    }
    Ok(stats)
}

/// Bits 41..63 of an instruction's second word: stall, yield, barriers, wait mask and
/// reuse flags (the scheduling control), the rest being the instruction.
const CONTROL: u64 = !((1u64 << 41) - 1);

/// `unit`'s bytes with each function's control bits taken from `fin` where `fin` has the
/// function with the same size, the same capsule (but for its first word, the section
/// index) and the same instructions but for control bits (an instruction a relocation
/// of `unit` touches is not compared: the finalized image has it applied); `None` when
/// nothing changed. Also how many functions changed.
pub fn splice(unit: &Cubin, fin: &Cubin) -> Result<(Option<Vec<u8>>, usize)> {
    let mut out: Option<Vec<u8>> = None;
    let mut changed = 0;
    for (index, s) in unit.sections.iter().enumerate() {
        if s.ty != SHT_PROGBITS || !s.name.starts_with(".text.") {
            continue;
        }
        let Some(f) = fin.sections.iter().find(|x| x.name == s.name) else {
            continue;
        };
        let (ours, theirs) = (unit.bytes(s), fin.bytes(f));
        if ours.len() != theirs.len() || ours.len() % 16 != 0 {
            continue;
        }
        let capsule = format!(".nv.capmerc{}", s.name);
        let cap = |c: &Cubin| {
            c.sections
                .iter()
                .find(|x| x.name == capsule)
                .map(|x| c.bytes(x).get(4..).unwrap_or_default().to_vec())
        };
        if cap(unit) != cap(fin) {
            continue;
        }
        let mut sites = Vec::new();
        for (k, r) in unit.sections.iter().enumerate() {
            if matches!(r.ty, SHT_RELA | SHT_REL) && r.info as usize == index {
                sites.extend(unit.relocations(k)?.iter().map(|r| r.offset / 16 * 16));
            }
        }
        let mut code = ours.to_vec();
        let mut same = true;
        for off in (0..ours.len()).step_by(16) {
            let word = |d: &[u8], at| d.u64_at(off + at).unwrap_or(0);
            let (lo, hi, flo, fhi) = (
                word(ours, 0),
                word(ours, 8),
                word(theirs, 0),
                word(theirs, 8),
            );
            if !sites.contains(&(off as u64)) && (lo != flo || (hi ^ fhi) & !CONTROL != 0) {
                same = false;
                break;
            }
            code[off + 8..off + 16]
                .copy_from_slice(&((hi & !CONTROL) | (fhi & CONTROL)).to_le_bytes());
        }
        if same && code != ours {
            let data = out.get_or_insert_with(|| unit.data.to_vec());
            data[s.offset as usize..(s.offset + s.size) as usize].copy_from_slice(&code);
            changed += 1;
        }
    }
    Ok((out, changed))
}
