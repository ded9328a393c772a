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
