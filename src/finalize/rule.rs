//! Which functions the finalizer may change, so that the others are not offered to it.
//!
//! The rule, read off the finalizer's images and proved (`tests/finalize.rs`) on every
//! sm_100+ target (sm_100, 100a, 103, 110, 120, 121) over the merge fixtures, libcudadevrt,
//! Thrust and CUB units and the generated programs: the finalizer's code for a device
//! function (not a kernel), and for a kernel that makes a call (a direct call in its
//! `.nv.callgraph`, to a function or to the driver), is ptxas's, to the byte, with the
//! same capsule, `.nv.info` and frame; only kernels that make no call come out otherwise
//! (scheduling control bits, at times instructions and size). So a kernel that makes no
//! call is the one kind of function the rule does not decide: those are finalized, and
//! a unit without any is not offered at all.
//!
//! Every unit of that corpus was made by the toolkit's own ptxas, so the rule holds only
//! for such code: it applies to a link only when every unit with capsule Mercury names,
//! in its `.note.nv.tkinfo`, ptxas entries of the very version of the toolkit's ptxas
//! (the one whose libnvJitLink finalizes). Code an other ptxas made is not covered:
//! NVSHMEM's `libnvshmem_device.a` (ptxas 13.0) has device functions the 13.5 finalizer
//! rewrites, code and capsule (`tests/merge/nvshmem.rs`). So in a link with one such unit (or one with
//! no ptxas entry) nothing is decided: every function of every unit is finalized, in one
//! job of the whole program, as nvlink does.

use std::collections::{BTreeSet, HashSet};

use crate::diag::Result;
use crate::elf::cubin::Cubin;
use crate::elf::tkinfo;

/// Whether `unit` was made by the ptxas whose version line is `ptxas` ("Cuda compilation
/// tools, release 13.5, V13.5.37"): its `.note.nv.tkinfo` has ptxas entries, each of
/// that version.
pub fn made_by(unit: &Cubin, ptxas: &str) -> bool {
    let Some(note) = unit.sections.iter().find(|s| s.name == ".note.nv.tkinfo") else {
        return false;
    };
    let Some(entries) = tkinfo::entries(unit.bytes(note)) else {
        return false;
    };
    let mut ptxas_entries = entries.iter().filter(|e| e.tool == "ptxas").peekable();
    ptxas_entries.peek().is_some() && ptxas_entries.all(|e| e.version == ptxas)
}

/// Whether the rule applies to a link of `units`: every one with capsule Mercury made by
/// the toolkit's ptxas, whose version line is `ptxas` (`None`: unknown, so no unit is).
pub fn applies(units: &[&Cubin], ptxas: Option<&str>) -> bool {
    (units.iter())
        .filter(|u| u.has_mercury())
        .all(|u| ptxas.is_some_and(|p| made_by(u, p)))
}

/// The names of `unit`'s functions the rule does not decide (its kernels that make no
/// call), sorted; where the rule does not apply (`applies` false), all its functions.
pub fn undecided(unit: &Cubin, applies: bool) -> Result<BTreeSet<String>> {
    if !applies {
        return Ok(functions(unit));
    }
    let callers: HashSet<u32> = unit
        .callgraph_entries()?
        .into_iter()
        .filter(|&(_, callee, group)| group == 1 && callee > 0)
        .map(|(caller, _, _)| caller)
        .collect();
    Ok((unit.symbols.iter().enumerate())
        .filter(|(k, s)| s.is_kernel() && !callers.contains(&(*k as u32)))
        .map(|(_, s)| s.name.to_string())
        .collect())
}

/// Every function of `unit` (its `.text.` sections' names).
fn functions(unit: &Cubin) -> BTreeSet<String> {
    (unit.sections.iter())
        .filter_map(|s| s.name.strip_prefix(".text."))
        .map(str::to_string)
        .collect()
}
