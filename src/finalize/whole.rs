//! A whole finalized function taken into a unit, where the finalizer changed its
//! instructions or its size (not only control bits): the code, and with it everything of
//! the unit that names offsets in it, so the unit stays consistent. The relocation sites
//! are found again in the finalized code (the same instruction but for the relocated
//! fields and control bits, matched in order) and the relocations moved there; the
//! function's `.nv.info` instruction-offset lists, its capsule (but for the first word)
//! and its `.debug_frame` FDE (range and advance offsets) come from the finalized image;
//! a changed size moves the code to the end of the unit's file and sets the section's and
//! the symbol's sizes. Anything that cannot be matched one to one leaves the function as
//! ptxas wrote it.

use std::collections::{HashMap, HashSet};

use crate::bytes::Le;
use crate::diag::Result;
use crate::elf::cubin::{Cubin, SHT_MERC_RELA, SHT_REL, SHT_RELA, SHT_SYMTAB, Symbol};
use crate::elf::{info, reloc};

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

/// Takes `fin`'s function `name` (section `fsec` there) into `data`, the bytes of `unit`
/// (its section `index`); false, with `data` untouched, where it cannot be done. Each
/// step below gives its edits, or `None` where it cannot be done; nothing is written
/// until every step has given its own.
pub fn take(
    unit: &Cubin,
    fin: &Cubin,
    index: usize,
    fsec: usize,
    data: &mut Vec<u8>,
) -> Result<bool> {
    let s = &unit.sections[index];
    let f = Function {
        unit,
        fin,
        index,
        name: &s.name[".text.".len()..],
        ours: unit.bytes(s),
        theirs: fin.bytes(&fin.sections[fsec]),
    };
    if !f.ours.len().is_multiple_of(16) || !f.theirs.len().is_multiple_of(16) || f.theirs.is_empty()
    {
        return Ok(false);
    }
    let steps = [
        capsule_edit(&f)?,
        code_edits(&f)?,
        offset_lists_edit(&f)?,
        frame_edit(&f)?,
        size_edit(&f),
    ];
    let mut edits = Vec::new();
    for step in steps {
        let Some(e) = step else { return Ok(false) };
        edits.extend(e);
    }
    for e in edits {
        match e {
            Edit::Bytes(at, b) => data[at..at + b.len()].copy_from_slice(&b),
            Edit::Section(i, b) => put(unit, i, &b, data),
        }
    }
    Ok(true)
}

/// The function being taken: its section in the unit, its code there and in the
/// finalized image.
struct Function<'a> {
    unit: &'a Cubin,
    fin: &'a Cubin,
    index: usize,
    name: &'a str,
    ours: &'a [u8],
    theirs: &'a [u8],
}

/// A step's edits, or `None` where the function cannot be taken.
type Step = Option<Vec<Edit>>;

fn word(d: &[u8], off: usize) -> u128 {
    u128::from_le_bytes(d[off..off + 16].try_into().unwrap())
}

/// The capsule (`.nv.capmerc.text.<name>`), the finalized one's where it changed.
fn capsule_edit(f: &Function) -> Result<Step> {
    let (unit, fin) = (f.unit, f.fin);
    let capsule = format!(".nv.capmerc{}", unit.sections[f.index].name);
    let (Some(c0), Some(c1)) = (section(unit, &capsule), section(fin, &capsule)) else {
        return Ok(None);
    };
    let (b0, b1) = (unit.bytes(&unit.sections[c0]), fin.bytes(&fin.sections[c1]));
    if b0.len() < 4 || b1.len() < 4 {
        return Ok(None);
    }
    if b0[4..] == b1[4..] {
        return Ok(Some(Vec::new()));
    }
    // (the Mercury relocations address the expanded Mercury code, not the capsule's
    // bytes: a changed capsule is taken where every Mercury relocation the finalized
    // image kept is at an offset of one of ours; the link drops those it resolves)
    let ours = mercury_relocations(unit, c0)?;
    if !mercury_relocations(fin, c1)?
        .iter()
        .all(|o| ours.binary_search(o).is_ok())
    {
        return Ok(None);
    }
    let mut cap = b0[..4].to_vec();
    cap.extend_from_slice(&b1[4..]);
    Ok(Some(vec![Edit::Section(c0, cap)]))
}

/// The finalized code with our relocated fields, its relocation sites found again among
/// the finalized instructions alike, and the relocations' offsets moved to them.
fn code_edits(f: &Function) -> Result<Step> {
    let (unit, ours, theirs) = (f.unit, f.ours, f.theirs);
    let mut relocs = Vec::new();
    let mut masks: HashMap<usize, u128> = HashMap::new();
    for (k, r) in unit.sections.iter().enumerate() {
        if !matches!(r.ty, SHT_RELA | SHT_REL) || r.info as usize != f.index {
            continue;
        }
        let entry = if r.ty == SHT_RELA { 24 } else { 16 };
        for (j, rel) in unit.relocations(k)?.iter().enumerate() {
            let Some(m) = reloc::field_mask(rel.ty, rel.offset % 16) else {
                return Ok(None);
            };
            let at = (rel.offset / 16 * 16) as usize;
            if at + 16 > ours.len() {
                return Ok(None);
            }
            *masks.entry(at).or_default() |= m;
            relocs.push((r.offset as usize + j * entry, rel.offset, at));
        }
    }
    let Some(to) = moved_sites(ours, theirs, &masks) else {
        return Ok(None);
    };
    let mut code = theirs.to_vec();
    for (&at, &p) in &to {
        let m = masks[&at];
        let new = (word(theirs, p) & !m) | (word(ours, at) & m);
        code[p..p + 16].copy_from_slice(&new.to_le_bytes());
    }
    let mut edits = vec![Edit::Section(f.index, code)];
    for &(entry_at, offset, at) in &relocs {
        let moved = to[&at] as u64 + offset % 16;
        edits.push(Edit::Bytes(entry_at, moved.to_le_bytes().to_vec()));
    }
    Ok(Some(edits))
}

/// The function's instruction-offset lists (`.nv.info.<name>`), the finalized ones.
fn offset_lists_edit(f: &Function) -> Result<Step> {
    let (unit, fin) = (f.unit, f.fin);
    let info_name = format!(".nv.info.{}", f.name);
    let Some(i0) = section(unit, &info_name) else {
        return Ok(Some(Vec::new()));
    };
    let Some(i1) = section(fin, &info_name) else {
        return Ok(None);
    };
    let parse = |c: &Cubin, i: usize| {
        let x = &c.sections[i];
        info::parse(c.bytes(x), &c.origin, &info_name, x.offset)
    };
    let (mut r0, r1) = (parse(unit, i0)?, parse(fin, i1)?);
    let lists = |r: &[info::Record]| {
        let mut v: Vec<u8> = r
            .iter()
            .filter(|x| OFFSET_LISTS.contains(&x.attr))
            .map(|x| x.attr)
            .collect();
        v.sort();
        v
    };
    if lists(&r0) != lists(&r1) {
        return Ok(None);
    }
    for rec in r0.iter_mut().filter(|x| OFFSET_LISTS.contains(&x.attr)) {
        let theirs = r1.iter().find(|x| x.attr == rec.attr).expect("listed");
        if theirs.payload.len() != rec.payload.len() {
            return Ok(None);
        }
        rec.payload = theirs.payload.clone();
    }
    let bytes = info::encode_all(&r0);
    if bytes.len() as u64 != unit.sections[i0].size {
        return Ok(None);
    }
    Ok(Some(vec![Edit::Section(i0, bytes)]))
}

/// The function's FDE in `.debug_frame`: ours found by its relocation, the finalized
/// one by its range and length.
fn frame_edit(f: &Function) -> Result<Step> {
    let (unit, fin) = (f.unit, f.fin);
    let Some(d0) = section(unit, ".debug_frame") else {
        return Ok(Some(Vec::new()));
    };
    let Some(at) = fde_of(unit, d0, |y| y.shndx as usize == f.index)? else {
        return Ok(None);
    };
    let f0 = unit.bytes(&unit.sections[d0]);
    let len = f0.u64_at(at + 4).unwrap_or(0) as usize;
    let Some(d1) = section(fin, ".debug_frame") else {
        return Ok(None);
    };
    let f1 = fin.bytes(&fin.sections[d1]);
    // (the finalized image's FDE of the function, where its relocation names it: two
    // functions' FDEs can be alike but for their advances, a `__cluster_dims__` kernel's
    // and a plain one's of a unit)
    let named = fde_of(fin, d1, |y| y.name.as_str() == f.name)?;
    let mut candidates: Vec<usize> = fdes(f1)
        .into_iter()
        .filter(|&q| named.is_none_or(|n| n == q))
        .filter(|&q| {
            f1.u64_at(q + 4) == Some(len as u64)
                && f1.u64_at(q + 28) == Some(f.theirs.len() as u64)
                && (f0.get(at + 36..at + 12 + len))
                    .zip(f1.get(q + 36..q + 12 + len))
                    .is_some_and(|(a, b)| alike(a, b))
        })
        .collect();
    // (FDEs that give the same bytes are one candidate: two instances of a template,
    // NVSHMEM's `nvshmemi_transfer_submit_active_region_slow<t0>` and `<t3>`, have
    // the same code and the same frame)
    let mut seen = Vec::new();
    candidates.retain(|&q| {
        let bytes = f1.get(q + 28..q + 12 + len);
        let new = !seen.contains(&bytes);
        seen.push(bytes);
        new
    });
    let ([q], Some(end)) = (&candidates[..], (at + 12).checked_add(len)) else {
        return Ok(None);
    };
    if end > f0.len() || q + 12 + len > f1.len() || len < 32 {
        return Ok(None);
    }
    let mut fde = f0[at..end].to_vec();
    fde[28..].copy_from_slice(&f1[q + 28..q + 12 + len]);
    let base = unit.sections[d0].offset as usize;
    Ok(Some(vec![Edit::Bytes(base + at, fde)]))
}

/// The function symbol's size, where the finalized code's differs.
fn size_edit(f: &Function) -> Step {
    if f.theirs.len() == f.ours.len() {
        return Some(Vec::new());
    }
    let unit = f.unit;
    let sym = unit
        .symbols
        .iter()
        .position(|y| y.shndx as usize == f.index && y.name.as_str() == f.name)?;
    let tab = unit.sections.iter().find(|x| x.ty == SHT_SYMTAB)?;
    let size_at = tab.offset as usize + sym * 24 + 16;
    Some(vec![Edit::Bytes(
        size_at,
        (f.theirs.len() as u64).to_le_bytes().to_vec(),
    )])
}

/// Where each relocated instruction of `ours` (at the offsets of `masks`, its relocated
/// fields) is in `theirs`: among the instructions alike but for those fields and the
/// control bits, those that are also alike in the fields are the unrelocated ones of
/// `ours` (matched by value), the others its relocated ones, in order; `None` where the
/// counts do not agree or a relocated value equals an unrelocated one.
fn moved_sites(
    ours: &[u8],
    theirs: &[u8],
    masks: &HashMap<usize, u128>,
) -> Option<HashMap<usize, usize>> {
    let ctl = (CONTROL as u128) << 64;
    let word = |d: &[u8], off: usize| u128::from_le_bytes(d[off..off + 16].try_into().unwrap());
    let mut groups: HashMap<(u128, u128), Vec<usize>> = HashMap::new();
    for (&at, &m) in masks {
        groups
            .entry((word(ours, at) & !(m | ctl), m))
            .or_default()
            .push(at);
    }
    let mut to = HashMap::new();
    let (mut claimed, mut unrelocated) = (HashSet::new(), HashSet::new());
    for ((key, m), mut sites) in groups {
        sites.sort_unstable();
        let alike = |d: &[u8], q: usize| word(d, q) & !(m | ctl) == key;
        let mut plain: Vec<u128> = (0..ours.len())
            .step_by(16)
            .filter(|q| !masks.contains_key(q) && alike(ours, *q))
            .map(|q| word(ours, q) & !ctl)
            .collect();
        let all = plain.clone();
        let mut found = Vec::new();
        for p in (0..theirs.len()).step_by(16).filter(|&p| alike(theirs, p)) {
            let e = word(theirs, p) & !ctl;
            match plain.iter().position(|&x| x == e) {
                Some(i) => {
                    plain.swap_remove(i);
                    unrelocated.insert(p);
                }
                None if all.contains(&e) => return None,
                None => found.push(p),
            }
        }
        if !plain.is_empty() || found.len() != sites.len() {
            return None;
        }
        for (at, p) in sites.into_iter().zip(found) {
            if !claimed.insert(p) {
                return None;
            }
            to.insert(at, p);
        }
    }
    // (an instruction taken as relocated under one mask and unrelocated under another)
    claimed.is_disjoint(&unrelocated).then_some(to)
}

enum Edit {
    /// Bytes at a file offset.
    Bytes(usize, Vec<u8>),
    /// A section's new contents.
    Section(usize, Vec<u8>),
}

fn section(c: &Cubin, name: &str) -> Option<usize> {
    let mut found = c
        .sections
        .iter()
        .enumerate()
        .filter(|(_, s)| s.name == name);
    match (found.next(), found.next()) {
        (Some((i, _)), None) => Some(i),
        _ => None,
    }
}

/// Section `i`'s contents replaced: in place at the same size, else appended to the file
/// (at the section's alignment) with its header's offset and size set.
fn put(unit: &Cubin, i: usize, bytes: &[u8], data: &mut Vec<u8>) {
    let s = &unit.sections[i];
    if bytes.len() as u64 == s.size {
        data[s.offset as usize..(s.offset + s.size) as usize].copy_from_slice(bytes);
        return;
    }
    let align = s.align.max(1) as usize;
    data.resize(data.len().div_ceil(align) * align, 0);
    let at = data.len() as u64;
    data.extend_from_slice(bytes);
    let shoff = data.u64_at(0x28).unwrap_or(0) as usize;
    let header = shoff + i * 64;
    data[header + 0x18..header + 0x20].copy_from_slice(&at.to_le_bytes());
    data[header + 0x20..header + 0x28].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
}

/// The offsets of the Mercury relocations against capsule `cap`, sorted.
fn mercury_relocations(c: &Cubin, cap: usize) -> Result<Vec<u64>> {
    let mut v = Vec::new();
    for (k, r) in c.sections.iter().enumerate() {
        if r.ty == SHT_MERC_RELA && r.info as usize == cap {
            v.extend(c.relocations(k)?.iter().map(|r| r.offset));
        }
    }
    v.sort();
    Ok(v)
}

/// Whether two FDEs' call-frame instructions are the same but for the offsets of their
/// `DW_CFA_advance_loc4` (0x04 and a 4-byte delta).
fn alike(a: &[u8], b: &[u8]) -> bool {
    let mut i = 0;
    while i < a.len() {
        if a[i] == 0x04 && b.get(i) == Some(&0x04) {
            i += 5;
        } else if b.get(i) != Some(&a[i]) {
            return false;
        } else {
            i += 1;
        }
    }
    a.len() == b.len()
}

/// The offsets of the FDEs of a 64-bit `.debug_frame` (CIE id 0xffffffffffffffff).
fn fdes(d: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while let (Some(0xffff_ffff), Some(len)) = (d.u32_at(at), d.u64_at(at + 4)) {
        if d.u64_at(at + 12) != Some(u64::MAX) {
            out.push(at);
        }
        match (at + 12).checked_add(len as usize) {
            Some(next) if next > at && next <= d.len() => at = next,
            _ => break,
        }
    }
    out
}

/// The offset in `.debug_frame` (section `d`) of the FDE whose initial location is
/// relocated against a symbol `of` accepts (one FDE, else `None`).
fn fde_of(unit: &Cubin, d: usize, of: impl Fn(&Symbol) -> bool) -> Result<Option<usize>> {
    let mut found = None;
    for (k, r) in unit.sections.iter().enumerate() {
        if !matches!(r.ty, SHT_RELA | SHT_REL) || r.info as usize != d {
            continue;
        }
        for rel in unit.relocations(k)? {
            let ours = unit.symbols.get(rel.sym as usize).is_some_and(&of);
            if ours
                && rel.offset >= 20
                && fdes(unit.bytes(&unit.sections[d])).contains(&(rel.offset as usize - 20))
            {
                if found.is_some() {
                    return Ok(None);
                }
                found = Some(rel.offset as usize - 20);
            }
        }
    }
    Ok(found)
}
