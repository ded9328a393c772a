//! Program headers of a device ELF read by meaning, for `nvlinkrs compare`: each segment
//! as its type, flags, addresses and alignment and the sections it covers (by name), since
//! two equivalent images may lay the same sections out in another order, so that their
//! segments' offsets and sizes differ while they hold the same things. A segment whose
//! bounds cut through a section, or that reaches past its first and last section, says so.

use super::cubin::{Cubin, SHT_NOBITS};
use crate::bytes::Le;
use crate::diag::{Result, malformed};

const PHDR_SIZE: u64 = 56;
const PT_PHDR: u32 = 6;

/// One program header as read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub ty: u32,
    pub flags: u32,
    pub offset: u64,
    pub vaddr: u64,
    pub paddr: u64,
    pub filesz: u64,
    pub memsz: u64,
    pub align: u64,
}

/// The program headers of `c` (none in a relocatable object), each checked against the
/// file.
pub fn read(c: &Cubin) -> Result<Vec<Segment>> {
    let d: &[u8] = &c.data;
    let phoff = d.u64_at(0x20).unwrap_or(0);
    let entsize = d.u16_at(0x36).unwrap_or(0) as u64;
    let phnum = d.u16_at(0x38).unwrap_or(0) as u64;
    if phnum == 0 {
        return Ok(Vec::new());
    }
    if entsize != PHDR_SIZE {
        return Err(malformed(
            &c.origin,
            0x36,
            format!("e_phentsize is {entsize}, not {PHDR_SIZE}"),
        ));
    }
    let end = phnum
        .checked_mul(PHDR_SIZE)
        .and_then(|n| n.checked_add(phoff));
    if end.is_none_or(|e| e > d.len() as u64) {
        return Err(malformed(
            &c.origin,
            0x20,
            format!(
                "program header table ({phnum} entries at {phoff:#x}) passes the end of the file"
            ),
        ));
    }
    Ok((0..phnum)
        .map(|i| {
            let h = (phoff + i * PHDR_SIZE) as usize;
            let f = |o: usize| d.u64_at(h + o).unwrap_or(0);
            Segment {
                ty: d.u32_at(h).unwrap_or(0),
                flags: d.u32_at(h + 4).unwrap_or(0),
                offset: f(8),
                vaddr: f(0x10),
                paddr: f(0x18),
                filesz: f(0x20),
                memsz: f(0x28),
                align: f(0x30),
            }
        })
        .collect())
}

/// A segment by meaning: its type, flags, addresses, alignment, what it covers in the
/// file and in memory only (sections by name, sorted; `the program headers` for the
/// table itself), and the ways its bounds disagree with what it covers.
pub fn describe(c: &Cubin, s: &Segment) -> String {
    let d: &[u8] = &c.data;
    let phoff = d.u64_at(0x20).unwrap_or(0);
    let phsize = d.u16_at(0x38).unwrap_or(0) as u64 * PHDR_SIZE;
    let (file_end, mem_end) = (s.offset + s.filesz, s.offset + s.memsz);
    let (mut file, mut memory, mut cut) = (Vec::new(), Vec::new(), Vec::new());
    // the extent of what the file part covers, to tell a segment that reaches past it
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    let mut in_file = |name: &str, at: u64, size: u64| {
        let end = at + size;
        if size == 0 || end <= s.offset || at >= file_end {
            return;
        }
        if at < s.offset || end > file_end {
            cut.push(name.to_string());
        }
        (lo, hi) = (lo.min(at), hi.max(end));
        file.push(name.to_string());
    };
    in_file("the program headers", phoff, phsize);
    // what has no bytes in the file is the memory after the file part: its offset (any
    // in the segment, nvlink leaves it unaligned) says which segment; laid out in the
    // image's order, each aligned, after the file part's contents, they end where the
    // segment's memory does
    let mut memory_only = Vec::new();
    for x in c.sections.iter().skip(1) {
        if x.has_bytes() && x.ty != SHT_NOBITS {
            in_file(&x.name, x.offset, x.size);
        } else if s.memsz > s.filesz && (s.offset..mem_end).contains(&x.offset) {
            memory_only.push(x);
        }
    }
    let mut memory_end = if file.is_empty() { 0 } else { hi - s.offset };
    for x in memory_only {
        memory_end = memory_end.next_multiple_of(x.align.max(1)) + x.size;
        if x.size > 0 {
            memory.push(x.name.clone());
        }
    }
    file.sort();
    memory.sort();
    let mut loose = Vec::new();
    if !file.is_empty() {
        if lo > s.offset {
            loose.push(format!("starts {:#x} before what it covers", lo - s.offset));
        }
        if hi < file_end {
            loose.push(format!("file part ends {:#x} after it", file_end - hi));
        }
    } else if s.filesz != 0 {
        loose.push(format!("covers nothing in its {:#x} file bytes", s.filesz));
    }
    if s.memsz > s.filesz && s.memsz != memory_end.max(s.filesz) {
        loose.push(format!(
            "memory size {:#x} where its sections end at {memory_end:#x}",
            s.memsz
        ));
    }
    let mut out = format!(
        "type {:#x} flags {:#x} vaddr {:#x} paddr {:#x} align {:#x}",
        s.ty, s.flags, s.vaddr, s.paddr, s.align
    );
    if s.ty == PT_PHDR && (s.offset, s.filesz) != (phoff, phsize) {
        out.push_str(" (not the program header table)");
    }
    out.push_str(&format!(
        " file [{}] memory [{}]",
        file.join(" "),
        memory.join(" ")
    ));
    if !cut.is_empty() {
        out.push_str(&format!(" cuts through [{}]", cut.join(" ")));
    }
    if !loose.is_empty() {
        out.push_str(&format!(" ({})", loose.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::Bytes;

    /// A cubin with `.text.k` (0x100 bytes at 0x100), `.nv.global` (0x20 bytes of memory,
    /// aligned 8, at 0x200) and two segments: code, and data of memory size `memsz`.
    fn image(memsz: u64) -> Cubin {
        let names = b"\0.shstrtab\0.text.k\0.nv.global\0";
        let mut d = vec![0u8; 0x200];
        d[..4].copy_from_slice(b"\x7fELF");
        (d[4], d[5], d[6]) = (2, 1, 1);
        d[0x10..0x12].copy_from_slice(&2u16.to_le_bytes());
        d[0x12..0x14].copy_from_slice(&190u16.to_le_bytes());
        d[0x40..0x40 + names.len()].copy_from_slice(names);
        let shoff = d.len() as u64;
        let header = |d: &mut Vec<u8>, name: u32, ty: u32, off: u64, size: u64, align: u64| {
            let mut h = [0u8; 64];
            h[..4].copy_from_slice(&name.to_le_bytes());
            h[4..8].copy_from_slice(&ty.to_le_bytes());
            h[0x18..0x20].copy_from_slice(&off.to_le_bytes());
            h[0x20..0x28].copy_from_slice(&size.to_le_bytes());
            h[0x30..0x38].copy_from_slice(&align.to_le_bytes());
            d.extend_from_slice(&h);
        };
        header(&mut d, 0, 0, 0, 0, 0);
        header(&mut d, 1, 3, 0x40, names.len() as u64, 1);
        header(&mut d, 11, 1, 0x100, 0x100, 128);
        header(&mut d, 19, SHT_NOBITS, 0x200, 0x20, 8);
        let phoff = d.len() as u64;
        for (ty, flags, off, file, mem) in [
            (1u32, 5u32, 0x100u64, 0x100u64, 0x100u64),
            (1, 6, 0x200, 0, memsz),
        ] {
            d.extend_from_slice(&ty.to_le_bytes());
            d.extend_from_slice(&flags.to_le_bytes());
            for v in [off, 0, 0, file, mem, 8] {
                d.extend_from_slice(&v.to_le_bytes());
            }
        }
        d[0x20..0x28].copy_from_slice(&phoff.to_le_bytes());
        d[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
        d[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        d[0x38..0x3A].copy_from_slice(&2u16.to_le_bytes());
        d[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        d[0x3C..0x3E].copy_from_slice(&4u16.to_le_bytes());
        d[0x3E..0x40].copy_from_slice(&1u16.to_le_bytes());
        Cubin::parse(Bytes::from_vec(d), "t.cubin").unwrap()
    }

    #[test]
    fn segments_are_told_by_what_they_cover() {
        let c = image(0x20);
        let s = read(&c).unwrap();
        let v: Vec<String> = s.iter().map(|s| describe(&c, s)).collect();
        assert_eq!(
            v,
            [
                "type 0x1 flags 0x5 vaddr 0x0 paddr 0x0 align 0x8 file [.text.k] memory []",
                "type 0x1 flags 0x6 vaddr 0x0 paddr 0x0 align 0x8 file [] memory [.nv.global]"
            ]
        );
        // a memory size past where its sections end is told
        let c = image(0x28);
        let d = describe(&c, &read(&c).unwrap()[1]);
        assert!(
            d.ends_with("(memory size 0x28 where its sections end at 0x20)"),
            "{d}"
        );
    }
}
