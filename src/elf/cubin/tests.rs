//! Tests of the ELF reader: junk and damaged tables refused with the file named, extended
//! section numbering and any version byte read.

use super::*;

#[test]
fn junk_is_refused_with_the_file_named() {
    let e = Cubin::parse(Bytes::from_vec(b"not an elf".to_vec()), "x.cubin").unwrap_err();
    assert!(e.message().contains("'x.cubin'"), "{e}");
    let mut h = vec![0u8; 64];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4] = 2;
    h[5] = 1;
    h[0x12] = 190;
    h[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes());
    h[0x3C] = 3;
    let e = Cubin::parse(Bytes::from_vec(h), "y.cubin").unwrap_err();
    assert!(e.message().contains("section header table"), "{e}");
}

/// A device ELF: the null section, `sections` (name, type, link, bytes), then
/// `.shstrtab`; with `extended`, the section count and string-table index in
/// section 0 as the ELF standard has them past 0xFF00 sections.
fn elf(sections: &[(&str, u32, u32, Vec<u8>)], extended: bool) -> Vec<u8> {
    let mut all = sections.to_vec();
    let mut names = vec![0u8];
    for (name, ..) in sections.iter().chain([&(".shstrtab", 0, 0, Vec::new())]) {
        names.extend_from_slice(name.as_bytes());
        names.push(0);
    }
    all.push((".shstrtab", SHT_STRTAB, 0, names));
    let (mut body, mut headers, mut name_at) = (Vec::new(), vec![[0u8; 64]], 1u32);
    for (name, ty, link, data) in &all {
        let mut h = [0u8; 64];
        h[0..4].copy_from_slice(&name_at.to_le_bytes());
        name_at += name.len() as u32 + 1;
        h[4..8].copy_from_slice(&ty.to_le_bytes());
        h[0x18..0x20].copy_from_slice(&(64 + body.len() as u64).to_le_bytes());
        h[0x20..0x28].copy_from_slice(&(data.len() as u64).to_le_bytes());
        h[0x28..0x2C].copy_from_slice(&link.to_le_bytes());
        let entsize = if *ty == SHT_SYMTAB { 24u64 } else { 0 };
        h[0x38..0x40].copy_from_slice(&entsize.to_le_bytes());
        body.extend_from_slice(data);
        headers.push(h);
    }
    let shstrndx = headers.len() - 1;
    let mut d = vec![0u8; 64];
    d[..4].copy_from_slice(ELF_MAGIC);
    d[4] = 2;
    d[5] = 1;
    d[0x10] = 1;
    d[0x12] = 190;
    d[0x28..0x30].copy_from_slice(&(64 + body.len() as u64).to_le_bytes());
    d[0x3A] = 64;
    if extended {
        let n = headers.len() as u64;
        headers[0][0x20..0x28].copy_from_slice(&n.to_le_bytes());
        headers[0][0x28..0x2C].copy_from_slice(&(shstrndx as u32).to_le_bytes());
        d[0x3E..0x40].copy_from_slice(&0xFFFFu16.to_le_bytes());
    } else {
        d[0x3C..0x3E].copy_from_slice(&(headers.len() as u16).to_le_bytes());
        d[0x3E..0x40].copy_from_slice(&(shstrndx as u16).to_le_bytes());
    }
    d.extend_from_slice(&body);
    headers.iter().for_each(|h| d.extend_from_slice(h));
    d
}

fn symbol(name: u32, info: u8, shndx: u16) -> Vec<u8> {
    let mut e = vec![0u8; 24];
    e[0..4].copy_from_slice(&name.to_le_bytes());
    e[4] = info;
    e[6..8].copy_from_slice(&shndx.to_le_bytes());
    e
}

/// One reader for host objects, summaries and linked cubins: the same sections
/// from either face, with the section count and name-table index in section 0
/// (a host object past 0xFF00 sections) and an `e_ident` version byte other than 1
/// read as nvlink reads them.
#[test]
fn extended_numbering_and_any_version_byte_are_read() {
    let text = vec![0xAB; 16];
    let mut d = elf(&[(".text.k", SHT_PROGBITS, 0, text.clone())], true);
    d[6] = 0;
    let view = ElfView::parse(&d, "x.o").unwrap();
    let names: Vec<&str> = view.sections.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["", ".text.k", ".shstrtab"]);
    assert_eq!(
        view.section_data(view.section(".text.k").unwrap()),
        &text[..]
    );
    let c = Cubin::parse(Bytes::from_vec(d), "x.cubin").unwrap();
    assert_eq!(c.section_index(".text.k"), Some(1));
    assert_eq!(c.bytes(&c.sections[1]), &text[..]);
}

/// Lengths, offsets and indices from the file are checked by both faces: a symbol in
/// a section that does not exist, a section header size that is not ELF64's, a
/// section past the end.
#[test]
fn bad_tables_are_refused_by_both_faces() {
    let mut syms = symbol(0, 0, 0);
    syms.extend(symbol(1, 0x12, 40));
    let d = elf(
        &[
            (".symtab", SHT_SYMTAB, 2, syms),
            (".strtab", SHT_STRTAB, 0, b"\0_Z1fv\0".to_vec()),
        ],
        false,
    );
    let e = crate::elf::device_summary(&d, "s.cubin").unwrap_err();
    assert!(e.message().contains("'_Z1fv' names section 40"), "{e}");
    let e = Cubin::parse(Bytes::from_vec(d.clone()), "s.cubin").unwrap_err();
    assert!(e.message().contains("'_Z1fv' names section 40"), "{e}");
    let mut h = d.clone();
    h[0x3A] = 40;
    let e = ElfView::parse(&h, "h.o").unwrap_err();
    assert!(
        e.message()
            .contains("'h.o' at offset 0x3a: section header size 40"),
        "{e}"
    );
    let mut cut = d;
    let shoff = cut.u64_at(0x28).unwrap() as usize;
    cut[shoff + 64 + 0x20..shoff + 64 + 0x28].copy_from_slice(&0x1000u64.to_le_bytes());
    let e = ElfView::parse(&cut, "c.o").unwrap_err();
    assert!(e.message().contains("section [1] of 0x1000 bytes"), "{e}");
}
