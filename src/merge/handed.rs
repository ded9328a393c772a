//! What a kernel takes from the functions it calls: the records the driver reads on the
//! kernel only, which nvlink 13.5 hands from a `__noinline__` callee to every kernel that
//! calls it in an executable.
//!
//! - Tensor memory (sm_100+): ptxas marks a function that allocates it (`tcgen05.alloc`)
//!   with `RESERVED_SMEM_USED`, `TCGEN05_1CTA_USED` or `TCGEN05_2CTA_USED` and
//!   `AT_ENTRY_FRAGMENTS` (the code the driver runs at the kernel's entry to set tensor
//!   memory up), and gives it a `VRC_CTA_INIT_COUNT`: the flags copied, the fragments
//!   moved (no other function keeps them), and, where the image has more than one kernel,
//!   the largest `VRC_CTA_INIT_COUNT` of the call tree.
//! - `CTAIDZ_USED` (grid-wide cooperative groups at sm_75 to sm_89 read `%ctaid.z`); the
//!   cluster-launch-control flag (0x62, `try_cancel`); the
//!   multimem record (0x68, its bits or-ed); attribute 0x6D (1 where the code triggers a
//!   programmatic launch completion, raised in place).
//! - The barrier counts (`externs.rs`), which take their places among the new records.
//!
//! The new records go callee by callee, in the order each callee's input lists them; the
//! image's only kernel gets its flags first (in that order), then its barrier counts,
//! then its fragments, and keeps its own `VRC_CTA_INIT_COUNT`
//! (read off nvlink's output for `tests/merge/tensor.rs`'s programs: one and two kernels,
//! one and two units, `cta_group` 1 and 2, a call through a function, a call through a
//! table, a kernel with barriers; and the attacker reviews' programs for the others).
//! A kernel whose code and callees use both `cta_group::1` and `cta_group::2` is refused,
//! with nvlink's error: once per such kernel, and for the image's only kernel once more
//! when its callees alone use both (so nvlink 13.5 prints it).

use crate::elf::info::{self, Record};

/// `EIATTR_RESERVED_SMEM_USED`: the code uses the reserved shared-memory slots.
pub(super) const RESERVED_SMEM_USED: u8 = 0x41;
/// `EIATTR_TCGEN05_1CTA_USED`: the code allocates tensor memory for one CTA.
pub(super) const TCGEN05_1CTA_USED: u8 = 0x51;
/// `EIATTR_TCGEN05_2CTA_USED`: for a pair of CTAs (`cta_group::2`).
pub(super) const TCGEN05_2CTA_USED: u8 = 0x52;
/// `EIATTR_AT_ENTRY_FRAGMENTS`: the entry fragments the driver runs (a word).
pub(super) const AT_ENTRY_FRAGMENTS: u8 = 0x4F;
/// `EIATTR_VRC_CTA_INIT_COUNT`.
pub(super) const VRC_CTA_INIT_COUNT: u8 = 0x4A;
/// `EIATTR_CTAIDZ_USED`: the code reads `%ctaid.z`.
pub(super) const CTAIDZ_USED: u8 = 0x04;
/// A flag of code that cancels cluster launches (`clusterlaunchcontrol.try_cancel`).
pub(super) const LAUNCH_CONTROL: u8 = 0x62;
/// A half-word of bits of code using `multimem` instructions (4 `ld_reduce`, 8 `st`/`red`).
pub(super) const MULTIMEM: u8 = 0x68;
/// Attribute 0x6D: 1 where the code triggers a programmatic launch completion (raised in
/// a kernel at sm_100+ only; at sm_90 nvlink leaves the kernel's own).
pub(super) const LAUNCH_TRIGGER: u8 = 0x6D;

/// A function's records a calling kernel takes (or, for a kernel, those its call tree
/// hands it): the attributes in input order (0 ends the list), with the places of its
/// barrier counts
/// (`NUM_BARRIERS`, `NUM_MBARRIERS`: nvlink adds a kernel's new records callee by callee,
/// each callee's in its input's order), the fragments word, the `VRC_CTA_INIT_COUNT`, the
/// multimem bits and the launch trigger.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Handed {
    order: [u8; 10],
    fragments: u32,
    vrc: u16,
    multimem: u16,
    trigger: u16,
}

impl Handed {
    /// Read off a function's own records (input order).
    pub(super) fn of(records: &[Record]) -> Handed {
        let mut t = Handed::default();
        for r in records {
            match r.attr {
                TCGEN05_1CTA_USED | TCGEN05_2CTA_USED | RESERVED_SMEM_USED | CTAIDZ_USED
                | LAUNCH_CONTROL
                    if r.format == info::FMT_NVAL =>
                {
                    t.add(r.attr)
                }
                MULTIMEM if r.format == info::FMT_HVAL => {
                    t.multimem |= r.value;
                    t.add(r.attr)
                }
                LAUNCH_TRIGGER if r.format == info::FMT_BVAL => t.trigger = t.trigger.max(r.value),
                AT_ENTRY_FRAGMENTS if r.format == info::FMT_SVAL && r.payload.len() == 4 => {
                    t.fragments = u32::from_le_bytes(r.payload[..4].try_into().unwrap());
                    t.add(r.attr)
                }
                VRC_CTA_INIT_COUNT if r.format == info::FMT_BVAL => t.vrc = t.vrc.max(r.value),
                info::NUM_BARRIERS if r.value & 0xFF > 0 => t.add(r.attr),
                info::NUM_MBARRIERS if r.format == info::FMT_HVAL => t.add(r.attr),
                _ => {}
            }
        }
        t
    }

    fn add(&mut self, attr: u8) {
        if let Some(slot) = (self.order.iter_mut()).find(|a| **a == 0 || **a == attr) {
            *slot = attr;
        }
    }

    /// The attributes, in the order met.
    pub(super) fn attrs(&self) -> impl Iterator<Item = u8> + '_ {
        self.order.iter().copied().take_while(|&a| a != 0)
    }

    /// What a kernel's callees hand it, the callees in the order given.
    pub(super) fn gathered(callees: impl Iterator<Item = Handed>) -> Handed {
        let mut t = Handed::default();
        for c in callees {
            for a in c.attrs() {
                if a == AT_ENTRY_FRAGMENTS && !t.attrs().any(|x| x == a) {
                    t.fragments = c.fragments;
                }
                t.add(a);
            }
            t.vrc = t.vrc.max(c.vrc);
            t.multimem |= c.multimem;
            t.trigger = t.trigger.max(c.trigger);
        }
        t
    }

    /// Whether both CTA granularities are among these records and `other`'s (a kernel's
    /// own and what its callees hand it), which nvlink refuses.
    pub(super) fn mixes_groups(&self, other: &Handed) -> bool {
        let has = |a: u8| self.attrs().chain(other.attrs()).any(|x| x == a);
        has(TCGEN05_1CTA_USED) && has(TCGEN05_2CTA_USED)
    }

    /// A kernel's records, `counts` adding or raising a barrier count where its place
    /// comes (and once more after, for counts no callee placed): the tensor-memory records
    /// it lacks in the order met (the only kernel's fragments last), its
    /// `VRC_CTA_INIT_COUNT` raised where the image has several kernels.
    pub(super) fn place(
        &self,
        recs: &mut Vec<Record>,
        only_kernel: bool,
        mut counts: impl FnMut(&mut Vec<Record>, u8),
    ) {
        if !only_kernel && let Some(r) = (recs.iter_mut()).find(|r| r.attr == VRC_CTA_INIT_COUNT) {
            r.value = r.value.max(self.vrc);
        }
        if let Some(r) = (recs.iter_mut()).find(|r| r.attr == MULTIMEM) {
            r.value |= self.multimem;
        }
        let is_count = |a: u8| a == info::NUM_BARRIERS || a == info::NUM_MBARRIERS;
        match only_kernel {
            // (the only kernel: the flags, then the counts, then the fragments)
            true => {
                for a in self
                    .attrs()
                    .filter(|&a| !is_count(a) && a != AT_ENTRY_FRAGMENTS)
                {
                    self.add_missing(recs, a);
                }
                for a in self.attrs().filter(|&a| is_count(a)) {
                    counts(recs, a);
                }
            }
            false => {
                for a in self.attrs() {
                    match is_count(a) {
                        true => counts(recs, a),
                        false => self.add_missing(recs, a),
                    }
                }
            }
        }
        counts(recs, info::NUM_BARRIERS);
        counts(recs, info::NUM_MBARRIERS);
        if only_kernel && self.attrs().any(|a| a == AT_ENTRY_FRAGMENTS) {
            self.add_missing(recs, AT_ENTRY_FRAGMENTS);
        }
    }

    /// Attribute 0x6D raised to the call tree's (a SASS-only record, placed after the
    /// others: `nvinfo.rs`).
    pub(super) fn raise_trigger(&self, recs: &mut [Record]) {
        if let Some(r) = (recs.iter_mut()).find(|r| r.attr == LAUNCH_TRIGGER) {
            r.value = r.value.max(self.trigger);
        }
    }

    fn add_missing(&self, recs: &mut Vec<Record>, attr: u8) {
        if recs.iter().any(|r| r.attr == attr) {
            return;
        }
        recs.push(match attr {
            AT_ENTRY_FRAGMENTS => Record::sval(attr, self.fragments.to_le_bytes().to_vec()),
            MULTIMEM => Record::head(info::FMT_HVAL, attr, self.multimem),
            _ => Record::head(info::FMT_NVAL, attr, 0),
        });
    }
}

/// nvlink's error for a kernel whose code and callees use both CTA granularities.
pub(super) fn mixed_groups_error(kernel: &str) -> String {
    format!(
        "Function '{kernel}' uses single CTA(.cta_group::1) and CTA pair granularity(.cta_group::2) and that is not allowed."
    )
}

/// A called function's records in an executable: its fragments go to its kernels.
pub(super) fn drop_fragments(recs: &mut Vec<Record>) {
    recs.retain(|r| r.attr != AT_ENTRY_FRAGMENTS);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flag(attr: u8) -> Record {
        Record::head(info::FMT_NVAL, attr, 0)
    }

    fn vrc(v: u16) -> Record {
        Record::head(info::FMT_BVAL, VRC_CTA_INIT_COUNT, v)
    }

    /// ptxas's order in a `cta_group::1` allocator's input: fragments, reserved, 1-CTA.
    fn allocator() -> Handed {
        Handed::of(&[
            Record::sval(AT_ENTRY_FRAGMENTS, 6u32.to_le_bytes().to_vec()),
            flag(RESERVED_SMEM_USED),
            flag(TCGEN05_1CTA_USED),
            vrc(0x80),
        ])
    }

    #[test]
    fn a_kernel_of_several_takes_the_records_in_input_order_and_the_largest_count() {
        let t = Handed::gathered([Handed::default(), allocator()].into_iter());
        let mut recs = vec![vrc(0)];
        t.place(&mut recs, false, |_, _| {});
        let attrs: Vec<u8> = recs.iter().map(|r| r.attr).collect();
        assert_eq!(
            attrs,
            [
                VRC_CTA_INIT_COUNT,
                AT_ENTRY_FRAGMENTS,
                RESERVED_SMEM_USED,
                TCGEN05_1CTA_USED
            ]
        );
        assert_eq!(recs[0].value, 0x80);
        assert_eq!(&recs[1].payload[..], &6u32.to_le_bytes());
    }

    #[test]
    fn the_only_kernel_takes_the_fragments_last_and_keeps_its_count() {
        let t = Handed::gathered([allocator()].into_iter());
        let mut recs = vec![vrc(0), flag(RESERVED_SMEM_USED)];
        t.place(&mut recs, true, |recs, a| {
            if a == info::NUM_BARRIERS && !recs.iter().any(|r| r.attr == a) {
                recs.push(flag(a))
            }
        });
        let attrs: Vec<u8> = recs.iter().map(|r| r.attr).collect();
        assert_eq!(
            attrs,
            [
                VRC_CTA_INIT_COUNT,
                RESERVED_SMEM_USED,
                TCGEN05_1CTA_USED,
                info::NUM_BARRIERS,
                AT_ENTRY_FRAGMENTS
            ]
        );
        assert_eq!(recs[0].value, 0);
    }
}
