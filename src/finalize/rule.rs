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

use std::collections::{BTreeSet, HashSet};

use crate::diag::Result;
use crate::elf::cubin::Cubin;

/// The names of `unit`'s functions the rule does not decide (its kernels that make no
/// call), sorted.
pub fn undecided(unit: &Cubin) -> Result<BTreeSet<String>> {
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
