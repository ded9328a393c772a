//! The constant-bank offsets a link writes into sm_100+ capsules (`elf::capsule`): where
//! each bank-2 read and each fixed-offset read of a `__constant__` variable went in the
//! image, as nvlink 13.5 writes them (ptxas leaves them unset; a driver that finalizes
//! the capsule for another GPU reads them there).
//!
//! A capsule's records are in the code's order, one per constant read, but its Mercury
//! relocations are not one per record: a read at a register (`LDC R0, c[0x3][R3]`) has a
//! record and no relocation of its own (its variable's address is another instruction's
//! relocation, which has no record), and a read at a register plus ptxas's own offset
//! has a record and no relocation at all. The Mercury relocations do not say which
//! instruction reads: their SASS twins do. The function's SASS relocations to the same
//! constant-bank symbols come in the same order with the same symbols and addends, and
//! the type of each says whether its instruction reads the bank itself (`CONST_FIELD*`,
//! `reloc::reads_constant_bank`). Those relocations, bank by bank and in order, pair one
//! to one with the records of that bank the link writes (`benches/results/capsules.md`:
//! 256 links of 86 programs nobody here wrote, sm_100 to sm_121, all nvlink's bytes).

use super::View;
use crate::elf::cubin::{Cubin, SHT_MERC_RELA};
use crate::elf::{capsule, reloc};
use crate::merge::*;

/// R_MERCURY_ABS16 and R_MERCURY_ABS32: the 16- and 32-bit offset fields of a Mercury
/// instruction.
const R_MERCURY_ABS16: u32 = 0x1_0004;
const R_MERCURY_ABS32: u32 = 0x1_0003;

/// A relocation to constant bank 2 or 3: (offset, symbol of the SASS table, addend, type,
/// the bank).
type BankReloc = (u64, usize, i64, u32, u32);

impl Merger<'_> {
    /// Writes into capsule `data` (input `i`'s Mercury section `capsule`) the bank offsets
    /// nvlink writes (the module's comment). Where the relocations do not pair with the
    /// records, the capsule stays as ptxas wrote it and the link says so.
    #[allow(clippy::too_many_arguments)] // (the products it reads, each by name)
    pub(super) fn patch_bank_fields(
        &self,
        placement: &Placement,
        layout: &SharedLayout,
        i: usize,
        capsule: usize,
        data: &mut [u8],
        view: &View,
    ) {
        let c = &self.inputs()[i].cubin;
        let Some(merc) = self.capsule_bank_relocs(i, capsule, view) else {
            return;
        };
        if merc.is_empty() {
            return;
        }
        let sass = self.text_bank_relocs(i, view.sass_text(capsule));
        let twins = merc.len() == sass.len()
            && (merc.iter().zip(&sass)).all(|(m, s)| (m.1, m.2) == (s.1, s.2));
        if !twins {
            self.mismatch_warning(c, capsule, "its Mercury relocations are not its SASS ones");
            return;
        }
        let records = capsule::linked_operands(data);
        let reads: Vec<&BankReloc> = (merc.iter().zip(&sass))
            .filter(|(_, s)| reloc::reads_constant_bank(s.3))
            .map(|(m, _)| m)
            .collect();
        // (bank by bank: a bank whose reads have no relocation left, an `-r` output's
        // kernel reading its own table, which that link wrote, keeps its records)
        let mut writes = Vec::new();
        for bank in [2, 3] {
            let of_bank: Vec<&BankReloc> =
                (reads.iter().copied()).filter(|r| r.4 == bank).collect();
            let at: Vec<usize> = (records.iter())
                .filter(|r| r.1 == bank)
                .map(|r| r.0)
                .collect();
            if of_bank.is_empty() {
                continue;
            }
            if of_bank.len() != at.len() {
                let why = format!(
                    "bank {bank}: {} reads relocated, {} records",
                    of_bank.len(),
                    at.len()
                );
                self.mismatch_warning(c, capsule, &why);
                return;
            }
            writes.extend(at.into_iter().zip(of_bank));
        }
        for (at, &(_, n, addend, ty, _)) in writes {
            let (value, _, _) = self.link_value(placement, layout, SymKey::new(i, n));
            let field = (value as i64).wrapping_add(addend) as u32;
            // (the field's own bytes: a 16-bit one leaves the record's last two as they
            // are, zeros from ptxas; nvlink keeps another value there)
            let width = if ty == R_MERCURY_ABS16 { 2 } else { 4 };
            data[at..at + width].copy_from_slice(&field.to_le_bytes()[..width]);
        }
    }

    /// Capsule `capsule`'s Mercury relocations of an offset field to constant bank 2 or 3,
    /// by offset, their symbols the SASS ones; `None` where it has no relocation section
    /// or it cannot be read.
    fn capsule_bank_relocs(&self, i: usize, capsule: usize, view: &View) -> Option<Vec<BankReloc>> {
        let c = &self.inputs()[i].cubin;
        let ri = (c.sections.iter())
            .position(|s| s.ty == SHT_MERC_RELA && s.info as usize == capsule)?;
        let relocs = c.relocations(ri).ok()?;
        let mut out: Vec<BankReloc> = (relocs.iter())
            .filter(|r| r.ty == R_MERCURY_ABS16 || r.ty == R_MERCURY_ABS32)
            .filter_map(|r| {
                let n = view.normal_of.get(r.sym as usize).copied().flatten()?;
                let bank = self.bank_of(i, n)?;
                Some((r.offset, n, r.addend, r.ty, bank))
            })
            .collect();
        out.sort_unstable();
        Some(out)
    }

    /// The SASS relocations of code section `text` of input `i` (its function's, as the
    /// merge parsed them) to constant bank 2 or 3, by offset.
    fn text_bank_relocs(&self, i: usize, text: Option<usize>) -> Vec<BankReloc> {
        let Some(&f) = text.and_then(|t| self.code.func_of_text().get(&SecKey::new(i, t))) else {
            return Vec::new();
        };
        let mut out: Vec<BankReloc> = (self.code.funcs()[f].relocs.iter())
            .filter_map(|&ri| self.parsed()[i].relocs.get(ri)?.as_ref().ok())
            .flatten()
            .filter_map(|r| {
                let bank = self.bank_of(i, r.sym as usize)?;
                Some((r.offset, r.sym as usize, r.addend, r.ty, bank))
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// The constant bank, 2 or 3, where symbol `n` of input `i`, or the definition it
    /// resolves to, lies: bank 2 a function's or a kernel's own (its place the kernels'
    /// banks', or under `-r` its own section's, the kernel's table at 0x8000).
    fn bank_of(&self, i: usize, n: usize) -> Option<u32> {
        let k = SymKey::new(i, n);
        let def = self.target(k).unwrap_or(k);
        let sec = self.sym(def).shndx as usize;
        let sections = &self.inputs()[def.input].cubin.sections;
        (sections.get(sec))
            .and_then(|s| constant_bank(s.ty))
            .filter(|b| matches!(b, 2 | 3))
    }

    /// The link's word that capsule `capsule`'s bank offsets are left as ptxas wrote
    /// them, and `why`.
    fn mismatch_warning(&self, c: &Cubin, capsule: usize, why: &str) {
        let name = &c.sections[capsule].name;
        self.diag().warning_never_error(&format!(
            "'{}': the constant bank offsets of capsule '{name}' are left as ptxas wrote them ({why}): a driver that finalizes it for another GPU may read the wrong constants",
            c.origin,
        ));
    }
}
