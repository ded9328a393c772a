//! One section of a laid-out device ELF given other bytes, the file laid out again as
//! nvlink's writer lays it: each piece of the file (a loaded segment's file part, a
//! section's bytes outside them, the section header table, the program header table)
//! in its order, at the next offset its
//! alignment allows after the one before (the two tables unaligned: nvlink's sm_100
//! images put them right after the bytes before them); a section whose bytes lie inside another's (a
//! capsule-Mercury view of SASS data) moves with it. Used to put nvlink's tool note into
//! an image the finalizer wrote (`finalize::debug`).

use crate::diag::{Error, Result};
use crate::elf::cubin::ElfView;

/// A piece of the file: its old offset and size, its alignment, and what it is.
#[derive(Clone, Copy)]
struct Piece {
    offset: u64,
    size: u64,
    align: u64,
    what: What,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum What {
    Section(usize),
    /// A loaded segment's file part.
    Segment,
    SectionHeaders,
    ProgramHeaders,
}

fn field(d: &[u8], at: usize, n: usize) -> u64 {
    let mut v = [0u8; 8];
    v[..n].copy_from_slice(&d[at..at + n]);
    u64::from_le_bytes(v)
}

fn put(d: &mut [u8], at: usize, n: usize, v: u64) {
    d[at..at + n].copy_from_slice(&v.to_le_bytes()[..n]);
}

/// `image` with section `name`'s bytes replaced by `bytes`, the pieces after it moved as
/// nvlink's writer would place them. The section must not be loaded (no program header
/// covers it) and must be the only one of its name.
pub fn replace_section(image: &[u8], origin: &str, name: &str, bytes: &[u8]) -> Result<Vec<u8>> {
    let bad =
        |what: String| Error::fatal(format!("{origin}: cannot lay the image out again: {what}"));
    let view = ElfView::parse(image, origin)?;
    let mut named = view
        .sections
        .iter()
        .enumerate()
        .filter(|(_, s)| s.name == name);
    let (Some((target, old)), None) = (named.next(), named.next()) else {
        return Err(bad(format!("not one section named '{name}'")));
    };
    if !old.has_bytes() {
        return Err(bad(format!("section '{name}' has no bytes")));
    }
    let pieces = pieces(image, &view, target).map_err(bad)?;
    let growth = bytes.len() as i128 - old.size as i128;
    let (moved, end) = place(&pieces, target, growth).map_err(bad)?;
    let out = write_moved(image, &view, target, bytes, &moved, end).map_err(bad)?;
    // (what the file's own offsets made of it is checked as any input is: a section
    // laid over the header made an image that was no ELF, found by the relayout fuzz
    // target)
    if let Err(e) = ElfView::parse(&out, origin) {
        return Err(bad(format!(
            "the image laid out again does not read back: {e}"
        )));
    }
    Ok(out)
}

/// The pieces of `image`, sorted by offset: its sections with bytes (and memory-only
/// ones placed in the file), its loaded segments' file parts and its two header tables;
/// section `target` must not be loaded. A piece a length or offset read from the file
/// puts outside it is refused.
fn pieces(image: &[u8], view: &ElfView, target: usize) -> std::result::Result<Vec<Piece>, String> {
    let old = &view.sections[target];
    let name = &old.name;
    // (the header was checked by the parse: a 64-bit little-endian ELF whose tables lie
    // inside the file)
    let (phoff, shoff) = (field(image, 0x20, 8), field(image, 0x28, 8));
    let (phentsize, phnum) = (field(image, 0x36, 2), field(image, 0x38, 2));
    let (shentsize, shnum) = (field(image, 0x3A, 2), field(image, 0x3C, 2));
    if phnum > 0
        && (phentsize != 56
            || phoff
                .checked_add(phnum * 56)
                .is_none_or(|e| e > image.len() as u64))
    {
        return Err("program headers outside the file".into());
    }
    for k in 0..phnum {
        let at = (phoff + k * 56) as usize;
        let (off, filesz) = (field(image, at + 8, 8), field(image, at + 32, 8));
        if filesz > 0 && off < old.offset + old.size && old.offset < off + filesz {
            return Err(format!("section '{name}' is loaded"));
        }
    }
    // (a memory-only section is a piece of no bytes: nvlink's writer still moves to its
    // alignment, so what follows starts there: the section header table after sm_110's
    // `.nv.merc.nv.shared.reserved.0`)
    let mut pieces: Vec<Piece> = (view.sections.iter().enumerate())
        .filter(|(k, s)| *k > 0 && (s.has_bytes() || s.offset >= 64))
        .map(|(k, s)| Piece {
            offset: s.offset,
            size: if s.has_bytes() { s.size } else { 0 },
            align: s.align.max(1),
            what: What::Section(k),
        })
        .collect();
    // a loaded segment's file part is one piece, as aligned as its strictest section
    // (nvlink pads a data segment's file part: the next piece starts after the padding)
    for k in 0..phnum {
        let at = (phoff + k * 56) as usize;
        let (off, filesz) = (field(image, at + 8, 8), field(image, at + 32, 8));
        if field(image, at, 4) != 1 || filesz == 0 || off == phoff {
            continue;
        }
        let inside = |s: &&crate::elf::cubin::Section| {
            s.has_bytes() && s.offset >= off && s.offset < off + filesz
        };
        let align = view
            .sections
            .iter()
            .filter(inside)
            .map(|s| s.align)
            .max()
            .unwrap_or(1);
        pieces.push(Piece {
            offset: off,
            size: filesz,
            align: align.max(1),
            what: What::Segment,
        });
    }
    pieces.push(Piece {
        offset: shoff,
        size: shnum * shentsize,
        align: 1,
        what: What::SectionHeaders,
    });
    if phnum > 0 {
        pieces.push(Piece {
            offset: phoff,
            size: phnum * 56,
            align: 1,
            what: What::ProgramHeaders,
        });
    }
    // (a length or offset read from the file is not trusted)
    if let Some(p) = pieces.iter().find(|p| {
        p.offset
            .checked_add(p.size)
            .is_none_or(|e| e > image.len() as u64)
            || (p.offset < 64 && p.size > 0)
    }) {
        return Err(format!(
            "a piece at {:#x} of {:#x} bytes reaches past the file or into its header",
            p.offset, p.size
        ));
    }
    if !old.align.max(1).is_power_of_two()
        || pieces
            .iter()
            .any(|p| !p.align.is_power_of_two() || p.align > 1 << 20)
    {
        return Err("an alignment that is not a power of two up to 1 MiB".into());
    }
    // at one offset: pieces of no bytes first (placed before what follows them), then
    // larger ones (a view starting where its section starts comes after it)
    pieces.sort_by_key(|p| (p.offset, p.size != 0, std::cmp::Reverse(p.size)));
    Ok(pieces)
}

/// Each piece with its new offset, in order, and where the last ends: each at the next
/// offset its alignment allows after the one before, section `target` `growth` bytes
/// longer; a piece inside the one before moves with it.
fn place(
    pieces: &[Piece],
    target: usize,
    growth: i128,
) -> std::result::Result<(Vec<(Piece, u64)>, u64), String> {
    // each piece's new offset; a piece inside the one before moves with it
    let (mut old_end, mut new_end, mut shift) = (0u64, 0u64, 0i128);
    let mut moved: Vec<(Piece, u64)> = Vec::with_capacity(pieces.len());
    for p in pieces {
        if p.offset < old_end && p.offset + p.size <= old_end && p.what != What::Section(target) {
            // (inside the piece before: a segment's section, a view)
            moved.push((*p, (p.offset as i128 + shift) as u64));
            continue;
        }
        if p.offset < old_end {
            return Err(format!("pieces at {:#x} and before overlap", p.offset));
        }
        let at = if old_end == 0 {
            p.offset
        } else {
            new_end.div_ceil(p.align) * p.align
        };
        shift = at as i128 - p.offset as i128;
        let size = match p.what == What::Section(target) {
            true => (p.size as i128 + growth) as u64,
            false => p.size,
        };
        old_end = p.offset + p.size;
        new_end = at + size;
        moved.push((*p, at));
    }
    Ok((moved, new_end))
}

/// The file the placed pieces make: each piece's bytes (section `target`'s replaced by
/// `bytes`) at its new offset, the headers' offsets and the section's size mended.
fn write_moved(
    image: &[u8],
    view: &ElfView,
    target: usize,
    bytes: &[u8],
    moved: &[(Piece, u64)],
    new_end: u64,
) -> std::result::Result<Vec<u8>, String> {
    let phnum = field(image, 0x38, 2);
    let shentsize = field(image, 0x3A, 2);
    // (the ELF header; every piece starts after it)
    let mut out = vec![0u8; (new_end as usize).max(64)];
    out[..64].copy_from_slice(&image[..64]);
    for (p, at) in moved {
        let at = *at as usize;
        let (from, len): (&[u8], usize) = match p.what {
            What::Section(k) if k == target => (bytes, bytes.len()),
            _ => (
                &image[p.offset as usize..(p.offset + p.size) as usize],
                p.size as usize,
            ),
        };
        // (a piece inside the section replaced, which grew or shrank, has no place)
        let Some(to) = out.get_mut(at..at + len) else {
            return Err(format!(
                "a piece at {:#x} lies inside the section replaced",
                p.offset
            ));
        };
        to.copy_from_slice(from);
    }
    let new_of = |what: What| moved.iter().find(|m| m.0.what == what).map(|m| m.1);
    let (new_sh, new_ph) = (new_of(What::SectionHeaders), new_of(What::ProgramHeaders));
    let new_sh = new_sh.expect("the section headers are a piece");
    put(&mut out, 0x28, 8, new_sh);
    if let Some(ph) = new_ph {
        put(&mut out, 0x20, 8, ph);
    }
    // section headers: offsets and the replaced section's size
    for (k, s) in view.sections.iter().enumerate().skip(1) {
        let at = (new_sh + k as u64 * shentsize) as usize;
        if let Some(off) = new_of(What::Section(k)) {
            put(&mut out, at + 0x18, 8, off);
        } else {
            put(&mut out, at + 0x18, 8, moved_offset(moved, s.offset));
        }
        if k == target {
            put(&mut out, at + 0x20, 8, bytes.len() as u64);
        }
    }
    // program headers: each segment's offset moves with the piece it starts at
    if let Some(ph) = new_ph {
        for k in 0..phnum {
            let at = (ph + k * 56) as usize;
            let off = field(&out, at + 8, 8);
            put(&mut out, at + 8, 8, moved_offset(moved, off));
        }
    }
    Ok(out)
}

/// Where old file offset `off` went: moved as the last piece starting at or before it.
fn moved_offset(moved: &[(Piece, u64)], off: u64) -> u64 {
    let before = moved.iter().filter(|(p, _)| p.offset <= off).last();
    match before {
        Some((p, at)) => (off as i128 - p.offset as i128 + *at as i128) as u64,
        None => off,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::Bytes;
    use crate::elf::cubin::Cubin;

    /// An image of the writer's, its tool note made longer and shorter: every other
    /// section's bytes are the same, each at an offset its alignment allows, the note
    /// the new bytes; the same bytes back give the same file.
    #[test]
    fn a_section_replaced_moves_the_rest() {
        let mut img = crate::elf::write::Image {
            e_type: 2,
            e_flags: 0,
            osabi: 0x41,
            abi_version: 8,
            sections: Vec::new(),
            symbols: Vec::new(),
            leading_strings: Vec::new(),
            symbol_names_only: false,
            created_sections: Vec::new(),
            created_strtab: Vec::new(),
            created_globals: Vec::new(),
            program_headers: true,
            mercury_layout: false,
            merc_symbols: None,
            null_symbol_value: 0,
        };
        let mut note = crate::elf::write::OutSection::new(".note.nv.tkinfo", 7, 0);
        note.data = vec![1; 20];
        note.align = 4;
        img.sections.push(note);
        let mut text = crate::elf::write::OutSection::new(".text.k", 1, 6);
        text.data = vec![7; 64];
        text.align = 128;
        img.sections.push(text);
        let d = crate::elf::write::write(img);
        let before = Cubin::parse(Bytes::from_vec(d.clone()), "t").unwrap();
        for n in [4usize, 24, 200] {
            let out = replace_section(&d, "t", ".note.nv.tkinfo", &vec![9; n]).unwrap();
            let after = Cubin::parse(Bytes::from_vec(out.clone()), "t").unwrap();
            for (a, b) in before.sections.iter().zip(&after.sections) {
                assert_eq!(a.name, b.name);
                assert_eq!(b.offset % b.align.max(1), 0, "{}", b.name);
                if a.name == ".note.nv.tkinfo" {
                    assert_eq!(after.bytes(b), &vec![9u8; n][..]);
                } else {
                    assert_eq!(before.bytes(a), after.bytes(b), "{}", a.name);
                }
            }
            let back = replace_section(&out, "t", ".note.nv.tkinfo", &[1; 20]).unwrap();
            assert_eq!(back, d);
        }
        let e = replace_section(&d, "t", ".nv.nothing", &[]).unwrap_err();
        assert!(
            e.message().contains("not one section named '.nv.nothing'"),
            "{}",
            e.message()
        );
        // damaged copies (the fuzz target's property, run here: cargo-fuzz is not
        // installed everywhere): an error or an image that parses, never a panic
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..3000 {
            let mut bad = d.clone();
            for _ in 0..4 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let at = (seed % bad.len() as u64) as usize;
                bad[at] = (seed >> 32) as u8;
            }
            if let Ok(out) = replace_section(&bad, "t", ".note.nv.tkinfo", &[5; 40]) {
                crate::elf::ElfView::parse(&out, "t").expect("a re-laid image parses");
            }
        }
    }
}
