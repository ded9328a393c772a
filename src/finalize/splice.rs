//! Taking a function's finalized code into its unit: per function, the control bits,
//! the instructions where they were only reordered, or the whole function with what names
//! offsets in it ([`super::whole`]), each only where it stays consistent (relocations,
//! `.nv.info` records and line tables match the code).

use std::collections::{BTreeSet, HashMap};

use crate::bytes::Bytes;
use crate::diag::Result;
use crate::elf::capsule::without_bank_operands;
use crate::elf::cubin::{Cubin, SHT_CUDA_RESOLVED_RELA, SHT_PROGBITS, SHT_REL, SHT_RELA, Section};
use crate::elf::{info, reloc};

use super::whole::{CONTROL, OFFSET_LISTS};

/// `unit` with its functions' code taken from `fin` where [`splice`] allows.
pub fn spliced(
    unit: &Cubin,
    fin: &Cubin,
    take: Option<&BTreeSet<String>>,
) -> Result<Option<(Cubin, Count)>> {
    let (data, n) = splice(unit, fin, take)?;
    let cubin = match data {
        Some(d) => Cubin::parse(Bytes::from_vec(d), &unit.origin)?,
        None => unit.clone(),
    };
    Ok(Some((cubin, n)))
}

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
/// otherwise it is left as ptxas wrote it. With `take`, only the functions it names.
pub fn splice(
    unit: &Cubin,
    fin: &Cubin,
    take: Option<&BTreeSet<String>>,
) -> Result<(Option<Vec<u8>>, Count)> {
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
        if take.is_some_and(|t| !t.contains(&s.name[".text.".len()..])) {
            continue;
        }
        let mut named = (fin.sections.iter().enumerate()).filter(|(_, x)| x.name == s.name);
        let (Some((fsec, f)), None) = (named.next(), named.next()) else {
            continue;
        };
        match in_place(unit, fin, index, f, lines)? {
            Some((code, moved)) if code != unit.bytes(s) => {
                let data = out.get_or_insert_with(|| unit.data.to_vec());
                data[s.offset as usize..(s.offset + s.size) as usize].copy_from_slice(&code);
                count.functions += 1;
                count.instructions += moved as usize;
            }
            Some(_) => {}
            // (a table of resolved relocations would name the old offsets)
            None if !lines
                && !unit
                    .sections
                    .iter()
                    .any(|r| r.ty == SHT_CUDA_RESOLVED_RELA && r.info as usize == index) =>
            {
                let data = out.get_or_insert_with(|| unit.data.to_vec());
                if super::whole::take(unit, fin, index, fsec, data)? {
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
            .map(|x| without_bank_operands(c.bytes(x).get(4..).unwrap_or_default()))
    };
    // (but for the constant banks' offsets (2 and 3), which the merge writes: the finalizer's image has its
    // own link's there)
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
