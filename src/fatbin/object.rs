//! Writing an LTO IR container as a host object, for build systems that want a `.o`
//! from a prelink: an x86-64 ELF relocatable object whose `__nv_relfatbin` section (the
//! section `nvcc -dc -dlto` objects carry their IR in) holds a fatbin with one
//! uncompressed kind-8 (NVVM) member, laid out as nvcc's members are (the option string
//! after the descriptor at 0x40, code version from the container header), beside the
//! fatbin wrapper and the host-reference tables. No host code and no registration with
//! the CUDA runtime: a device link input only.

use crate::arch::{Arch, Variant};

fn align8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// A fatbin container with `ltoir` (an LTO IR container for `arch`) as its one member,
/// `options` its option string (the NVVM options, as nvcc stores them).
pub fn ltoir_fatbin(arch: Arch, ltoir: &[u8], options: &str) -> Vec<u8> {
    let desc = 0x40usize;
    let text = desc + 8;
    let header = align8(text + options.len() + 1);
    let region = align8(ltoir.len());
    let mut flags = super::flags::BIT64 | super::flags::HOST_LINUX;
    match arch.variant {
        Variant::Accelerated => flags |= super::flags::ARCH_SPECIFIC,
        Variant::Family => flags |= super::flags::FAMILY,
        Variant::Plain => {}
    }
    // the member's code version is the container's version (major at 4, minor at 5)
    let (major, minor) = (
        ltoir.get(4).copied().unwrap_or(1) as u16,
        ltoir.get(5).copied().unwrap_or(0) as u16,
    );
    let mut f = Vec::with_capacity(16 + header + region);
    f.extend_from_slice(&super::MAGIC.to_le_bytes());
    f.extend_from_slice(&1u16.to_le_bytes());
    f.extend_from_slice(&16u16.to_le_bytes());
    f.extend_from_slice(&((header + region) as u64).to_le_bytes());
    let m = f.len();
    f.extend_from_slice(&8u16.to_le_bytes());
    f.extend_from_slice(&0x0101u16.to_le_bytes());
    f.extend_from_slice(&(header as u32).to_le_bytes());
    f.extend_from_slice(&(region as u64).to_le_bytes());
    f.extend_from_slice(&0u32.to_le_bytes()); // stored size: not compressed
    f.extend_from_slice(&(desc as u32).to_le_bytes());
    f.extend_from_slice(&minor.to_le_bytes());
    f.extend_from_slice(&major.to_le_bytes());
    f.extend_from_slice(&arch.sm.to_le_bytes());
    f.extend_from_slice(&[0; 8]); // no identifier
    f.extend_from_slice(&flags.to_le_bytes());
    f.extend_from_slice(&[0; 16]); // LTO key and uncompressed size: not compressed
    f.extend_from_slice(&(text as u32).to_le_bytes());
    f.extend_from_slice(&(options.len() as u32).to_le_bytes());
    f.extend_from_slice(options.as_bytes());
    f.resize(m + header, 0);
    f.extend_from_slice(ltoir);
    f.resize(m + header + region, 0);
    f
}

/// The x86-64 relocatable object holding `fatbin` in `__nv_relfatbin` (alignment 8), as
/// nvcc's objects: the `.nvFatBinSegment` wrapper (version 1) pointing at it, which nvlink
/// needs to take the object as device code, and the six host-reference tables (`tables`
/// by section, NUL-terminated entries; an empty table is one NUL, as nvcc writes it),
/// which nvlink applies as it does nvcc's.
pub fn host_object(fatbin: &[u8], tables: &[(&str, Vec<String>)]) -> Vec<u8> {
    let mut wrapper = Vec::with_capacity(24);
    wrapper.extend_from_slice(&super::host::WRAPPER_MAGIC.to_le_bytes());
    wrapper.extend_from_slice(&1u32.to_le_bytes());
    wrapper.extend_from_slice(&[0; 16]);
    // R_X86_64_64 at +8 against the section symbol of __nv_relfatbin (symbol 1)
    let mut rela = 8u64.to_le_bytes().to_vec();
    rela.extend_from_slice(&((1u64 << 32) | 1).to_le_bytes());
    rela.extend_from_slice(&0u64.to_le_bytes());
    let mut symtab = vec![0u8; 24]; // the null symbol
    symtab.extend_from_slice(&[0, 0, 0, 0, 3, 0, 1, 0]); // STT_SECTION, local, section 1
    symtab.extend_from_slice(&[0; 16]);
    let hr: Vec<(&str, Vec<u8>)> = super::host::HOST_REF_SECTIONS
        .iter()
        .map(|&n| {
            let mut d = Vec::new();
            for e in tables.iter().filter(|(s, _)| *s == n).flat_map(|(_, e)| e) {
                d.extend_from_slice(e.as_bytes());
                d.push(0);
            }
            if d.is_empty() {
                d.push(0);
            }
            (n, d)
        })
        .collect();
    // (name, type, flags, align, entsize, link, info, content)
    type Section<'a> = (&'a str, u32, u64, u64, u64, u32, u32, &'a [u8]);
    let symtab_index = 5 + hr.len() as u32;
    let mut sections: Vec<Section> = vec![
        ("__nv_relfatbin", 1, 2, 8, 0, 0, 0, fatbin),
        (super::host::WRAPPER_SECTION, 1, 3, 8, 0, 0, 0, &wrapper),
        (
            ".rela.nvFatBinSegment",
            4,
            0x40,
            8,
            24,
            symtab_index,
            2,
            &rela,
        ),
    ];
    for (n, d) in &hr {
        sections.push((n, 1, 2, 1, 0, 0, 0, d));
    }
    sections.push((".note.GNU-stack", 1, 0, 1, 0, 0, 0, &[]));
    sections.push((".symtab", 2, 0, 8, 24, symtab_index + 1, 2, &symtab));
    sections.push((".strtab", 3, 0, 1, 0, 0, 0, &[0]));
    let mut shstrtab = vec![0u8];
    let mut name_at = Vec::new();
    for n in sections.iter().map(|s| s.0).chain([".shstrtab"]) {
        name_at.push(shstrtab.len() as u32);
        shstrtab.extend_from_slice(n.as_bytes());
        shstrtab.push(0);
    }
    sections.push((".shstrtab", 3, 0, 1, 0, 0, 0, &shstrtab));
    let mut out = vec![0u8; 64];
    let mut headers = vec![0u8; 64]; // the null section
    for (i, (_, ty, fl, al, es, link, info, data)) in sections.iter().enumerate() {
        while !out.len().is_multiple_of(*al as usize) {
            out.push(0);
        }
        let off = out.len() as u64;
        out.extend_from_slice(data);
        let h = &mut headers;
        h.extend_from_slice(&name_at[i].to_le_bytes());
        h.extend_from_slice(&ty.to_le_bytes());
        h.extend_from_slice(&fl.to_le_bytes());
        h.extend_from_slice(&0u64.to_le_bytes()); // address
        h.extend_from_slice(&off.to_le_bytes());
        h.extend_from_slice(&(data.len() as u64).to_le_bytes());
        h.extend_from_slice(&link.to_le_bytes());
        h.extend_from_slice(&info.to_le_bytes());
        h.extend_from_slice(&al.to_le_bytes());
        h.extend_from_slice(&es.to_le_bytes());
    }
    while !out.len().is_multiple_of(8) {
        out.push(0);
    }
    let shoff = out.len() as u64;
    out.extend_from_slice(&headers);
    let shnum = (sections.len() + 1) as u16;
    let e = &mut out[..64];
    e[..8].copy_from_slice(&[0x7F, b'E', b'L', b'F', 2, 1, 1, 0]);
    e[16..18].copy_from_slice(&1u16.to_le_bytes()); // ET_REL
    e[18..20].copy_from_slice(&62u16.to_le_bytes()); // EM_X86_64
    e[20..24].copy_from_slice(&1u32.to_le_bytes());
    e[40..48].copy_from_slice(&shoff.to_le_bytes());
    e[52..54].copy_from_slice(&64u16.to_le_bytes()); // e_ehsize
    e[58..60].copy_from_slice(&64u16.to_le_bytes()); // e_shentsize
    e[60..62].copy_from_slice(&shnum.to_le_bytes());
    e[62..64].copy_from_slice(&(shnum - 1).to_le_bytes()); // .shstrtab, the last
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_object_reads_back_as_one_nvvm_member() {
        let arch = Arch::new(90, Variant::Accelerated);
        let ir = [0xED, 0x43, 0x4E, 0x7F, 1, 0x43, 7, 7, 9];
        let fb = ltoir_fatbin(arch, &ir, "-ftz=0 ");
        let host = super::super::host::read(
            &crate::bytes::Bytes::from_vec(host_object(
                &fb,
                &[(".nvHRKE", vec!["_Z1kv".into(), "_Z1g*".into()])],
            )),
            "x.o",
        )
        .unwrap();
        assert_eq!(host.fatbins.len(), 1);
        assert_eq!(host.wrapper_version, Some(1));
        let ke = vec!["_Z1kv".to_string(), "_Z1g*".to_string()];
        assert_eq!(host.host_refs, vec![(".nvHRKE", ke)]);
        assert_eq!(&host.fatbins[0].data[..], &fb[..]);
        let c = super::super::parse(&host.fatbins[0].data, "x.o", 0).unwrap();
        let m = &c[0].members[0];
        assert_eq!(
            (m.kind, m.arch(), m.code_version),
            (super::super::MemberKind::Nvvm, arch, (1, 0x43))
        );
        assert_eq!(m.option_text().as_deref(), Some("-ftz=0 "));
        assert_eq!(&m.payload[..ir.len()], &ir);
    }
}
