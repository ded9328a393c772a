//! `.nv.compat`: the records nvlink 13.5 writes in the image, from every merged input's
//! (and its own, for an image without inputs). Read off nvlink 13.5 with the merge
//! fixtures and with NVSHMEM 3.8's device library, which ptxas 13.0 built
//! (docs/rules/targets.md):
//! * an input's records are taken as 13.5 writes them: one without
//!   `CUDA_INTERNAL_TARGET` (0x0C) or 0x0D (ptxas 13.0's) counts as 0x0C = 2 and
//!   0x0D = 0x100, and `ENABLE_OPPORTUNISTIC_FINALIZATION` (0x06) is never kept;
//! * the first input's records come first, in its order, an attribute only a later
//!   input has after them, in the order met; an attribute several have takes the
//!   largest value (`ISA_CLASS`, 0x02: libcudadevrt's sm_120 code has 2 where ptxas 13.5
//!   writes 1); `CAN_FASTPATH_FINALIZE` (0x0B) is the first unit with code's;
//! * `INST_TCGEN05_MMA` (0x05) stays only where every input has it, `FINALIZER_VERSION`
//!   (0x0E) too below sm_100; from sm_100 the image always has it (0x0440);
//! * then the target's own rules (`for_target`).

use super::*;
use crate::arch::Variant;

const ACCELERATOR_TARGET: u8 = 0x09;
const TCGEN05_MMA: u8 = 0x05;
const OPPORTUNISTIC_FINALIZATION: u8 = 0x06;
const CAN_FASTPATH_FINALIZE: u8 = 0x0B;
const INTERNAL_TARGET: u8 = 0x0C;
const ATTR_0D: u8 = 0x0D;
const FINALIZER_VERSION: u8 = 0x0E;
/// The `FINALIZER_VERSION` nvlink 13.5 writes.
const FINALIZER_13_5: u16 = 0x0440;

fn value_record(format: u8, attr: u8, value: u16) -> Record {
    Record {
        format,
        attr,
        value,
        payload: info::Payload::from_slice(&[]),
    }
}

/// An input's records as nvlink 13.5 takes them (see the module comment).
fn normalized(recs: &[Record]) -> Vec<Record> {
    let mut n: Vec<Record> = recs
        .iter()
        .filter(|r| r.attr != OPPORTUNISTIC_FINALIZATION)
        .cloned()
        .collect();
    if !n.iter().any(|r| r.attr == INTERNAL_TARGET) {
        n.push(value_record(info::FMT_BVAL, INTERNAL_TARGET, 2));
    }
    if !n.iter().any(|r| r.attr == ATTR_0D) {
        n.push(value_record(info::FMT_HVAL, ATTR_0D, 0x100));
    }
    n
}

/// The image's records from `all`, each merged input's (in input order; empty for an
/// input without `.nv.compat`, which then has none of the attributes that must be in
/// every input; `code`: whether each has code the image keeps); `code_sm` the first
/// input's SM.
pub(super) fn merged(
    all: &[Vec<Record>],
    code: &[bool],
    code_sm: u32,
    target: Arch,
) -> Vec<Record> {
    let inputs: Vec<Vec<Record>> = all
        .iter()
        .filter(|rs| !rs.is_empty())
        .map(|rs| normalized(rs))
        .collect();
    let mut out: Vec<Record> = inputs.first().cloned().unwrap_or_default();
    for rs in inputs.iter().skip(1) {
        for r in rs {
            match out.iter_mut().find(|o| o.attr == r.attr) {
                Some(o) if matches!(o.format, info::FMT_BVAL | info::FMT_HVAL) => {
                    o.value = o.value.max(r.value)
                }
                Some(_) => {}
                None => out.push(r.clone()),
            }
        }
    }
    // (`CAN_FASTPATH_FINALIZE` is the first unit with code's where one has it: a unit of
    // `__constant__` data alone says 0x50 at sm_120a where the kernels' unit says 0x10,
    // and nvlink writes 0x10 in either order; new-user review of 2026-11-30)
    let coded = (all.iter().zip(code))
        .filter(|(_, c)| **c)
        .find_map(|(rs, _)| rs.iter().find(|r| r.attr == CAN_FASTPATH_FINALIZE));
    // (and where the image keeps no code, what nvlink writes for an image without
    // inputs: an sm_120a unit whose one function no kernel calls says 0x10, nvlink 0x50;
    // new-user review of 2026-12-01)
    if let Some(o) = out.iter_mut().find(|o| o.attr == CAN_FASTPATH_FINALIZE) {
        match coded {
            Some(first) => o.payload = first.payload.clone(),
            None if !code.contains(&true) && o.payload.len() == 8 => {
                o.payload = info::Payload::from_slice(&fastpath_without_code(target).to_le_bytes())
            }
            None => {}
        }
    }
    let every = |attr: u8| all.iter().all(|rs| rs.iter().any(|r| r.attr == attr));
    out.retain(|r| match r.attr {
        TCGEN05_MMA => every(TCGEN05_MMA),
        FINALIZER_VERSION => target.sm >= 100 || every(FINALIZER_VERSION),
        _ => true,
    });
    if target.sm >= 100 && !out.iter().any(|r| r.attr == FINALIZER_VERSION) {
        out.push(value_record(
            info::FMT_HVAL,
            FINALIZER_VERSION,
            FINALIZER_13_5,
        ));
    }
    for_target(&mut out, all, code_sm, target);
    out
}

/// The `.nv.compat` records nvlink 13.5 writes when no input has code for the target
/// (read off its output for every `-arch` it takes): none below sm_90; whether the
/// target is an `a` one; from sm_100 also `CAN_FASTPATH_FINALIZE` (9 for sm_100, 0x50
/// for sm_120, else 0) and `FINALIZER_VERSION` 0x0440.
pub(super) fn empty(target: Arch) -> Option<Vec<u8>> {
    if target.sm < 90 {
        return None;
    }
    let accelerated = (target.variant == Variant::Accelerated) as u8;
    let mut d = vec![info::FMT_BVAL, ACCELERATOR_TARGET, accelerated, 0];
    if target.sm >= 100 {
        let fastpath = fastpath_without_code(target);
        d.extend_from_slice(&[info::FMT_SVAL, CAN_FASTPATH_FINALIZE, 8, 0]);
        d.extend_from_slice(&fastpath.to_le_bytes());
        d.extend_from_slice(&[info::FMT_HVAL, FINALIZER_VERSION]);
        d.extend_from_slice(&FINALIZER_13_5.to_le_bytes());
    }
    Some(d)
}

/// The `CAN_FASTPATH_FINALIZE` value of an image without code: 9 for sm_100, 0x50 for
/// sm_120, else 0.
fn fastpath_without_code(target: Arch) -> u64 {
    match target.sm {
        100 => 9,
        120 => 0x50,
        _ => 0,
    }
}

/// The target's rules (read off nvlink 13.5 with sm_100, sm_103, sm_110, sm_120 and
/// sm_121 code, plain, `a` and `f`, linked for every target of its family that takes
/// it): `ACCELERATOR_TARGET` says whether the target is an `a` one;
/// `CAN_FASTPATH_FINALIZE` becomes 0 for another SM of the family (sm_100 code for
/// sm_103, sm_120 for sm_121), and for an `a` target keeps only its lowest bit (9 → 1,
/// 0x50 → 0x10) unless every input is `a` code already (ptxas writes 9 for sm_100a).
/// (`INST_TCGEN05_MMA`, which ptxas writes for sm_100a code, stays only where every
/// input has it: sm_100a code beside sm_100 or sm_100f code, or beside libcudadevrt's,
/// loses it; `merged`.)
fn for_target(recs: &mut [Record], all: &[Vec<Record>], code_sm: u32, target: Arch) {
    let accelerated_code = all.iter().all(|rs| {
        rs.iter()
            .any(|r| r.attr == ACCELERATOR_TARGET && r.value == 1)
    });
    for r in recs.iter_mut() {
        match r.attr {
            ACCELERATOR_TARGET if r.format == info::FMT_BVAL => {
                r.value = (target.variant == Variant::Accelerated) as u16;
            }
            CAN_FASTPATH_FINALIZE if r.payload.len() == 8 => {
                let v = r.payload.u64_at(0).unwrap_or(0);
                let v = if target.sm != code_sm {
                    0
                } else if target.variant == Variant::Accelerated && !accelerated_code {
                    v & v.wrapping_neg()
                } else {
                    v
                };
                r.payload = info::Payload::from_slice(&v.to_le_bytes());
            }
            _ => {}
        }
    }
}
