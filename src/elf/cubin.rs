//! The one ELF reader: the header and section table of any ELF64 little-endian file
//! ([`ElfView`]: host objects, summaries, images read back) and, on the same code, the
//! relocatable cubin the merge phase works from ([`Cubin`]: sections, symbols and
//! relocations as plain values). Every offset, length and index read from the file is
//! checked against it before it is used (a bad one is an error naming the file, the
//! section or symbol, and the offset — never a panic).

use crate::bytes::{Bytes, Le, Name};
use crate::diag::{Error, Result, malformed};

use super::ELF_MAGIC;

pub const SHT_PROGBITS: u32 = 1;
pub const SHT_SYMTAB: u32 = 2;
pub const SHT_STRTAB: u32 = 3;
pub const SHT_RELA: u32 = 4;
pub const SHT_NOBITS: u32 = 8;
pub const SHT_REL: u32 = 9;
pub const SHT_NOTE: u32 = 7;
pub const SHT_CUDA_INFO: u32 = 0x7000_0000;
pub const SHT_CUDA_CALLGRAPH: u32 = 0x7000_0001;
pub const SHT_CUDA_PROTOTYPE: u32 = 0x7000_0002;
pub const SHT_CUDA_RESOLVED_RELA: u32 = 0x7000_0003;
pub const SHT_CUDA_GLOBAL: u32 = 0x7000_0007;
pub const SHT_CUDA_GLOBAL_INIT: u32 = 0x7000_0008;
pub const SHT_CUDA_SHARED: u32 = 0x7000_000A;
/// sm_110's reserved shared memory (`.nv.shared.reserved.N` and its Mercury copy): no
/// file bytes, though its type is not NOBITS (nvlink writes no bytes for it either).
pub const SHT_CUDA_SHARED_RESERVED: u32 = 0x7000_0015;
pub const SHT_CUDA_RELOCINFO: u32 = 0x7000_000B;
pub const SHT_CUDA_CONSTANT0: u32 = 0x7000_0064;
pub const SHT_CUDA_COMPAT: u32 = 0x7000_0086;
/// sm_100+ capsule Mercury: the code (`.nv.capmerc.text.<fn>`), its relocations
/// (`.nv.merc.rela.*`, RELA entries), its `.nv.info` copies, symbol table and call graph.
pub const SHT_CAPMERC_TEXT: u32 = 0x7000_0016;
pub const SHT_MERC_RELA: u32 = 0x7000_0082;
pub const SHT_MERC_INFO: u32 = 0x7000_0083;
pub const SHT_MERC_SYMTAB: u32 = 0x7000_0085;
/// `--preserve-relocs` at sm_100+: the Mercury relocations the link applied
/// (`.nv.merc.nv.resolvedrela.*`, RELA entries over `.nv.merc.symtab`).
pub const SHT_MERC_RESOLVED_RELA: u32 = 0x7000_0088;
pub const SHT_MERC_CALLGRAPH: u32 = 0x7000_008A;
pub const SHT_MERC_PROTOTYPE: u32 = 0x7000_008B;

pub const SHF_WRITE: u64 = 1;
pub const SHF_ALLOC: u64 = 2;
pub const SHF_EXECINSTR: u64 = 4;
pub const SHF_INFO_LINK: u64 = 0x40;

pub const STB_LOCAL: u8 = 0;
pub const STB_GLOBAL: u8 = 1;
pub const STB_WEAK: u8 = 2;
pub const STT_NOTYPE: u8 = 0;
pub const STT_OBJECT: u8 = 1;
pub const STT_FUNC: u8 = 2;
pub const STT_SECTION: u8 = 3;
pub use super::{STO_CUDA_ENTRY as STO_ENTRY, STT_CUDA_OBJECT};
pub const STO_SHARED: u8 = 0x40;
/// The most a shared variable's value (its alignment, or in an `-r` output an offset)
/// can be: 1 MiB, more shared memory than any GPU has.
const MAX_SHARED: u64 = 1 << 20;
/// `st_other` bit of `__managed__` variables (kept in executables, where the memory-space
/// bits above it are dropped; the driver maps such a variable as managed memory).
pub const STO_MANAGED: u8 = 0x04;
pub const SHN_UNDEF: u16 = 0;

/// The constant bank a section type stands for (`.nv.constantN` has type 0x70000064 + N).
pub fn constant_bank(ty: u32) -> Option<u32> {
    (SHT_CUDA_CONSTANT0..SHT_CUDA_CONSTANT0 + 18)
        .contains(&ty)
        .then(|| ty - SHT_CUDA_CONSTANT0)
}

#[derive(Clone, Debug)]
pub struct Section {
    pub name: Name,
    pub ty: u32,
    pub flags: u64,
    pub offset: u64,
    pub size: u64,
    pub link: u32,
    pub info: u32,
    pub align: u64,
    pub entsize: u64,
}

impl Section {
    /// Whether this is a capsule-Mercury section (sm_100+), by its name.
    pub fn is_mercury(&self) -> bool {
        self.name.starts_with(".nv.merc.") || self.name.starts_with(".nv.capmerc.")
    }

    pub fn has_bytes(&self) -> bool {
        !matches!(
            self.ty,
            SHT_NOBITS | SHT_CUDA_GLOBAL | SHT_CUDA_SHARED | SHT_CUDA_SHARED_RESERVED
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub name: Name,
    pub value: u64,
    pub size: u64,
    pub bind: u8,
    pub ty: u8,
    pub other: u8,
    pub shndx: u16,
}

impl Symbol {
    pub fn defined(&self) -> bool {
        self.shndx != SHN_UNDEF
    }
    pub fn is_entry(&self) -> bool {
        self.ty == STT_FUNC && self.other & STO_ENTRY != 0
    }
    /// A kernel defined here.
    pub fn is_kernel(&self) -> bool {
        self.is_entry() && self.defined()
    }
    pub fn is_function(&self) -> bool {
        self.ty == STT_FUNC && self.defined()
    }
    pub fn is_variable(&self) -> bool {
        matches!(self.ty, STT_OBJECT | STT_CUDA_OBJECT) && self.defined()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reloc {
    pub offset: u64,
    pub sym: u32,
    pub ty: u32,
    pub addend: i64,
}

/// A device ELF as read: section 0 and symbol 0 are the null entries, so indices match
/// the file's.
#[derive(Clone, Debug)]
pub struct Cubin {
    pub origin: String,
    pub data: Bytes,
    pub e_type: u16,
    pub e_flags: u32,
    pub osabi: u8,
    pub abi_version: u8,
    pub sections: Vec<Section>,
    pub symbols: Vec<Symbol>,
    /// `.nv.merc.symtab` (sm_100+ capsule Mercury), empty when the file has none.
    pub merc_symbols: Vec<Symbol>,
}

const EHDR: usize = 64;
const SHDR: usize = 64;
const SYM: usize = 24;
/// `e_shstrndx` when the index is in section 0's `sh_link` (extended numbering).
const SHN_XINDEX: u16 = 0xFFFF;

/// The ELF header fields the linker reads.
#[derive(Clone, Copy, Debug)]
struct Header {
    e_type: u16,
    e_machine: u16,
    e_flags: u32,
    osabi: u8,
    abi_version: u8,
}

/// Checks that `d` is an ELF64 little-endian file and reads its header (`hint` ends the
/// message for a file that is not ELF at all). The `e_ident` version byte is not read:
/// nvlink reads a file whose version byte is not 1 as any other.
fn read_header(d: &[u8], origin: &str, hint: &str) -> Result<Header> {
    if d.len() < EHDR || !d.starts_with(ELF_MAGIC) {
        return Err(malformed(origin, 0, format!("not an ELF file{hint}")));
    }
    if d[4] != 2 || d[5] != 1 {
        return Err(malformed(origin, 4, "not a 64-bit little-endian ELF"));
    }
    Ok(Header {
        e_type: d.u16_at(0x10).unwrap_or(0),
        e_machine: d.u16_at(0x12).unwrap_or(0),
        e_flags: d.u32_at(0x30).unwrap_or(0),
        osabi: d[7],
        abi_version: d[8],
    })
}

/// The section table of an ELF64 file whose header [`read_header`] accepted, names included:
/// the table, each section with file bytes and `.shstrtab`'s name offsets checked against
/// the file. More than 0xFF00 sections (`e_shnum` 0, the count in section 0) are read
/// as the ELF standard has them.
/// The section headers, each checked against the file; with `shared` (the bytes `d`
/// borrows from) the names are windows into them, else copies.
fn read_sections(d: &[u8], shared: Option<&Bytes>, origin: &str) -> Result<Vec<Section>> {
    let Some(headers) = read_headers(d, origin)? else {
        return Ok(Vec::new());
    };
    let (shstr, shstr_at) = (headers.shstr, headers.shstr_at);
    let mut sections = Vec::with_capacity(headers.raw.len());
    for (i, (name_off, mut s)) in headers.raw.into_iter().enumerate() {
        s.name =
            name_in(shstr, name_off as usize, shared.map(|b| (b, shstr_at))).ok_or_else(|| {
                malformed(
                    origin,
                    (headers.shoff + i * SHDR) as u64,
                    format!("section [{i}] name offset {name_off:#x} is outside .shstrtab"),
                )
            })?;
        sections.push(s);
    }
    Ok(sections)
}

/// The section headers of a file, before their names are read: each with its
/// `.shstrtab` offset, and the table (with its place in the file) those offsets index.
struct Headers<'d> {
    raw: Vec<(u32, Section)>,
    shoff: usize,
    shstr: &'d [u8],
    shstr_at: usize,
}

/// The section header table checked against the file ([`read_sections`] without the
/// names); `None` for a file without one.
fn read_headers<'d>(d: &'d [u8], origin: &str) -> Result<Option<Headers<'d>>> {
    let bad = |off: usize, what: String| malformed(origin, off as u64, what);
    let shoff = d.u64_at(0x28).unwrap_or(0);
    if shoff == 0 {
        return Ok(None);
    }
    let mut shnum = d.u16_at(0x3C).unwrap_or(0) as u64;
    let mut shstrndx = d.u16_at(0x3E).unwrap_or(0) as u64;
    if shnum == 0 || shstrndx == SHN_XINDEX as u64 {
        // extended numbering: the real count and string-table index are in section 0
        let zero = usize::try_from(shoff)
            .ok()
            .filter(|&o| o.checked_add(SHDR).is_some_and(|e| e <= d.len()));
        let Some(zero) = zero else {
            return Err(bad(
                0x28,
                format!("section header table at {shoff:#x} passes the end of the file"),
            ));
        };
        if shnum == 0 {
            shnum = d.u64_at(zero + 0x20).unwrap_or(0);
        }
        if shstrndx == SHN_XINDEX as u64 {
            shstrndx = d.u32_at(zero + 0x28).unwrap_or(0) as u64;
        }
    }
    let table_end = shnum
        .checked_mul(SHDR as u64)
        .and_then(|n| n.checked_add(shoff));
    if table_end.is_none_or(|e| e > d.len() as u64) {
        return Err(bad(
            0x28,
            format!(
                "section header table ({shnum} entries at {shoff:#x}) passes the end of the file"
            ),
        ));
    }
    let entsize = d.u16_at(0x3A).unwrap_or(0);
    if shnum > 0 && entsize as usize != SHDR {
        return Err(bad(
            0x3A,
            format!("section header size {entsize} is not the ELF64 {SHDR}"),
        ));
    }
    // (in bounds: the table ends inside the file)
    let (shoff, shnum) = (shoff as usize, shnum as usize);
    let mut raw = Vec::with_capacity(shnum);
    for i in 0..shnum {
        let h = shoff + i * SHDR;
        let f = |o: usize| d.u64_at(h + o).unwrap_or(0);
        let g = |o: usize| d.u32_at(h + o).unwrap_or(0);
        let s = Section {
            name: Name::default(),
            ty: g(4),
            flags: f(8),
            offset: f(0x18),
            size: f(0x20),
            link: g(0x28),
            info: g(0x2C),
            align: f(0x30),
            entsize: f(0x38),
        };
        if s.has_bytes()
            && s.offset
                .checked_add(s.size)
                .is_none_or(|e| e > d.len() as u64)
        {
            return Err(bad(
                h,
                format!(
                    "section [{i}] of {:#x} bytes at {:#x} passes the end of the {:#x}-byte file (truncated section)",
                    s.size,
                    s.offset,
                    d.len()
                ),
            ));
        }
        raw.push((g(0), s));
    }
    if shstrndx >= raw.len() as u64 && shnum > 0 {
        return Err(bad(0x3E, format!("e_shstrndx {shstrndx} is not a section")));
    }
    let (shstr, shstr_at) = match raw.get(shstrndx as usize) {
        Some((_, s)) if s.has_bytes() => (slice(d, s), s.offset as usize),
        _ => (&[][..], 0),
    };
    Ok(Some(Headers {
        raw,
        shoff,
        shstr,
        shstr_at,
    }))
}

/// `e_flags` and the file bytes of the section named `name` (empty when none has the
/// name) of an ELF64 file, read as [`ElfView::parse`] reads it (`None` where it fails)
/// but without making the section names: the input walk asks this of every cubin.
pub fn flags_and_section<'d>(d: &'d [u8], name: &str) -> Option<(u16, u32, &'d [u8])> {
    let h = read_header(d, "", "").ok()?;
    let mut found = None;
    if let Some(headers) = read_headers(d, "").ok()? {
        for (name_off, s) in &headers.raw {
            let rest = headers.shstr.get(*name_off as usize..)?;
            let end = rest.iter().position(|&b| b == 0)?;
            if found.is_none() && &rest[..end] == name.as_bytes() {
                found = Some(slice(d, s));
            }
        }
    }
    Some((h.e_machine, h.e_flags, found.unwrap_or_default()))
}

/// The entries of the first symbol table of type `ty` (section 0's null entry when the
/// file has none), each name offset and section index checked.
/// The symbol table of type `ty`; with `shared` (the bytes `d` borrows from) the names
/// are windows into them, else copies.
fn read_symbols(
    d: &[u8],
    shared: Option<&Bytes>,
    sections: &[Section],
    ty: u32,
    origin: &str,
) -> Result<Vec<Symbol>> {
    let Some(sec) = sections.iter().find(|s| s.ty == ty) else {
        return Ok(vec![null_symbol()]);
    };
    let strtab = sections
        .get(sec.link as usize)
        .filter(|s| s.ty == SHT_STRTAB)
        .ok_or_else(|| {
            malformed(
                origin,
                sec.offset,
                format!(
                    "{} links to section {}, which is not a string table",
                    sec.name, sec.link
                ),
            )
        })?;
    let strings = slice(d, strtab);
    let table = slice(d, sec);
    let mut out = Vec::with_capacity(table.len() / SYM);
    for (i, e) in table.chunks_exact(SYM).enumerate() {
        let name_off = e.u32_at(0).unwrap_or(0) as usize;
        let info = e[4];
        let shndx = e.u16_at(6).unwrap_or(0);
        let name = name_in(
            strings,
            name_off,
            shared.map(|b| (b, strtab.offset as usize)),
        )
        .ok_or_else(|| {
            malformed(
                origin,
                sec.offset + (i * SYM) as u64,
                format!(
                    "{} symbol {i}: name offset {name_off:#x} is outside .strtab",
                    sec.name
                ),
            )
        })?;
        if shndx as usize >= sections.len() && shndx < 0xFF00 {
            return Err(malformed(
                origin,
                sec.offset + (i * SYM) as u64,
                format!(
                    "{} symbol {i} '{name}' names section {shndx}, which does not exist",
                    sec.name
                ),
            ));
        }
        out.push(Symbol {
            name,
            value: e.u64_at(8).unwrap_or(0),
            size: e.u64_at(16).unwrap_or(0),
            bind: info >> 4,
            ty: info & 0xF,
            other: e[5],
            shndx,
        });
    }
    if out.is_empty() {
        out.push(null_symbol());
    }
    Ok(out)
}

/// The header and sections of any ELF64 little-endian file, host or device, borrowed
/// from its bytes (no symbols unless asked for; no rule on what a linkable cubin holds).
#[derive(Debug)]
pub struct ElfView<'d> {
    pub data: &'d [u8],
    pub e_type: u16,
    pub e_machine: u16,
    pub e_flags: u32,
    pub osabi: u8,
    pub abi_version: u8,
    pub sections: Vec<Section>,
}

impl<'d> ElfView<'d> {
    pub fn parse(data: &'d [u8], origin: &str) -> Result<ElfView<'d>> {
        let h = read_header(data, origin, "")?;
        Ok(ElfView {
            data,
            e_type: h.e_type,
            e_machine: h.e_machine,
            e_flags: h.e_flags,
            osabi: h.osabi,
            abi_version: h.abi_version,
            sections: read_sections(data, None, origin)?,
        })
    }

    pub fn section(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.name == name)
    }

    /// The file bytes of a section (empty for the memory-only kinds). Bounds were checked.
    pub fn section_data(&self, s: &Section) -> &'d [u8] {
        slice(self.data, s)
    }

    /// `.symtab`'s entries, the null symbol 0 included.
    pub fn symbols(&self, origin: &str) -> Result<Vec<Symbol>> {
        read_symbols(self.data, None, &self.sections, SHT_SYMTAB, origin)
    }
}

impl Cubin {
    /// Reads a device ELF for linking: [`ElfView`]'s checks, then `EM_CUDA`, section
    /// alignments a link can honour, and the symbol tables.
    pub fn parse(data: Bytes, origin: &str) -> Result<Cubin> {
        let d: &[u8] = &data;
        let h = read_header(d, origin, " (cubin not an elf?)")?;
        if h.e_machine != super::EM_CUDA {
            return Err(malformed(
                origin,
                0x12,
                format!(
                    "e_machine is {}, not EM_CUDA (cubin not a device elf?)",
                    h.e_machine
                ),
            ));
        }
        let sections = read_sections(d, Some(&data), origin)?;
        let shoff = d.u64_at(0x28).unwrap_or(0);
        // (a section without bytes may be aligned to a multiple of 16 that is not a
        // power of two: nvlink takes the value of an `-r` output's
        // `externsharedinstance`, 0x30, as a kernel window's alignment, in its image and
        // in its `-r` output of such an `-r` output)
        for (i, s) in sections.iter().enumerate() {
            let memory = matches!(s.ty, SHT_NOBITS | SHT_CUDA_SHARED);
            let odd = !(s.align.is_power_of_two() || memory && s.align.is_multiple_of(16));
            if s.align > 1 && (odd || s.align > 1 << 16) {
                return Err(malformed(
                    origin,
                    shoff + (i * SHDR) as u64,
                    format!(
                        "section [{i}] alignment {:#x} is not a power of two up to 64 KiB",
                        s.align
                    ),
                ));
            }
        }
        let symbols = read_symbols(d, Some(&data), &sections, SHT_SYMTAB, origin)?;
        // (a relocatable cubin's shared variable holds its alignment in its value (an
        // `-r` output's `externsharedinstance` an offset), which the link lays the
        // kernels' windows out by: a damaged one asked for 4 GiB of padding, found by
        // the merge fuzz target; no GPU has 1 MiB of shared memory)
        if h.e_type == super::ET_REL {
            let at = |k: usize| {
                let tab = sections.iter().find(|s| s.ty == SHT_SYMTAB);
                tab.map_or(0, |t| t.offset + (k * 24) as u64 + 8)
            };
            for (k, s) in symbols.iter().enumerate() {
                let shared = s.other & STO_SHARED != 0 && s.ty != STT_FUNC;
                if shared && s.value > MAX_SHARED {
                    return Err(malformed(
                        origin,
                        at(k),
                        format!(
                            "shared variable '{}' has value {:#x} (its alignment or offset), more than shared memory holds",
                            s.name, s.value
                        ),
                    ));
                }
            }
        }
        let merc_symbols = if sections.iter().any(|s| s.ty == SHT_MERC_SYMTAB) {
            read_symbols(d, Some(&data), &sections, SHT_MERC_SYMTAB, origin)?
        } else {
            Vec::new()
        };
        Ok(Cubin {
            origin: origin.to_string(),
            e_type: h.e_type,
            e_flags: h.e_flags,
            osabi: h.osabi,
            abi_version: h.abi_version,
            sections,
            symbols,
            merc_symbols,
            data,
        })
    }

    /// The file bytes of a section (empty for the memory-only kinds). Bounds were checked.
    pub fn bytes(&self, s: &Section) -> &[u8] {
        slice(&self.data, s)
    }

    pub fn section_data(&self, s: &Section) -> Bytes {
        if !s.has_bytes() {
            return Bytes::from_vec(Vec::new());
        }
        self.data
            .slice(s.offset as usize..(s.offset + s.size) as usize)
    }

    /// Whether the file carries sm_100+ capsule-Mercury sections.
    pub fn has_mercury(&self) -> bool {
        self.merc_symbols.len() > 1
    }

    /// The symbols a relocation section's entries name: `.nv.merc.symtab` for the
    /// capsule-Mercury ones, else `.symtab`.
    pub fn symbols_of(&self, s: &Section) -> &[Symbol] {
        if matches!(s.ty, SHT_MERC_RELA | SHT_MERC_RESOLVED_RELA) {
            &self.merc_symbols
        } else {
            &self.symbols
        }
    }

    /// The entries of a `.rela`/`.rel` (or `.nv.merc.rela`) section, each symbol index
    /// checked; of a `.rela`/`.rel` section, the section it applies to and each type too,
    /// refused in nvlink's words.
    pub fn relocations(&self, index: usize) -> Result<Vec<Reloc>> {
        let s = &self.sections[index];
        let sass = matches!(s.ty, SHT_RELA | SHT_REL);
        if sass {
            self.check_reloc_target(s)?;
        }
        let merc_end = if s.ty == SHT_MERC_RELA {
            Some(self.merc_reloc_end(s)?)
        } else {
            None
        };
        let d = self.bytes(s);
        let nsyms = self.symbols_of(s).len();
        let rela = s.ty != SHT_REL;
        let size = if rela { 24 } else { 16 };
        let mut out = Vec::with_capacity(d.len() / size);
        for (k, e) in d.chunks_exact(size).enumerate() {
            let info = e.u64_at(8).unwrap_or(0);
            let r = Reloc {
                offset: e.u64_at(0).unwrap_or(0),
                sym: (info >> 32) as u32,
                ty: info as u32,
                addend: if rela {
                    e.u64_at(16).unwrap_or(0) as i64
                } else {
                    0
                },
            };
            // (a type its table has no entry for: nvlink's words for each table)
            let unknown = match (sass, merc_end.is_some()) {
                (true, _) if !crate::elf::reloc::known(r.ty) => Some((
                    "Internal error: sass rtype out of range",
                    "",
                    "R_CUDA type has",
                )),
                (_, true) if !crate::elf::reloc::mercury_known(r.ty) => Some((
                    "Internal error: internal error",
                    "Mercury ",
                    "R_MERCURY type has (nvlink 13.5 takes 0 and 0x10000 to 0x10040)",
                )),
                _ => None,
            };
            if let Some((words, kind, table)) = unknown {
                return Err(Error::fatal(words).context(format!(
                    "'{}' at offset {:#x}: {kind}relocation {k} of '{}' has type {:#x}, which no {table}",
                    self.origin,
                    s.offset + (k * size) as u64,
                    s.name,
                    r.ty
                )));
            }
            if let Some(Some(end)) = merc_end
                && r.offset >= end
            {
                return Err(
                    Error::fatal("Internal error: relocation is past end of offset").context(
                        format!(
                            "'{}' at offset {:#x}: Mercury relocation {k} of '{}' is at offset {:#x}, past the end ({end:#x}) of what it patches",
                            self.origin,
                            s.offset + (k * size) as u64,
                            s.name,
                            r.offset
                        ),
                    ),
                );
            }
            if r.sym as usize >= nsyms {
                return Err(malformed(
                    &self.origin,
                    s.offset + (k * size) as u64,
                    format!(
                        "relocation {k} of '{}' names symbol {}, but the file has {} symbols",
                        s.name, r.sym, nsyms
                    ),
                ));
            }
            out.push(r);
        }
        Ok(out)
    }

    /// nvlink relocates code and initialised data only: a `.rela`/`.rel` section's
    /// `sh_info` must name a section of program bits, initialised globals or a constant
    /// bank (read off nvlink 13.5, which refuses a null, symbol, string, note, `.nv.info`,
    /// call-graph, `.nv.compat`, uninitialised or relocation section).
    fn check_reloc_target(&self, s: &Section) -> Result<()> {
        let target = (s.info != 0)
            .then(|| self.sections.get(s.info as usize))
            .flatten();
        let applies = target.is_some_and(|t| {
            matches!(t.ty, SHT_PROGBITS | SHT_CUDA_GLOBAL_INIT)
                || (SHT_CUDA_CONSTANT0..SHT_CUDA_CONSTANT0 + 18).contains(&t.ty)
        });
        if applies {
            return Ok(());
        }
        let what = match target {
            Some(t) => format!("'{}' (type {:#x})", t.name, t.ty),
            None => "no section".into(),
        };
        Err(
            Error::fatal("Internal error: unexpected reloc section").context(format!(
                "'{}': relocation section '{}' applies (sh_info {}) to {what}",
                self.origin, s.name, s.info
            )),
        )
    }

    /// Where the section Mercury relocation section `s` patches ends, refused in nvlink's
    /// words where its `sh_info` names no Mercury section (a damaged input: nvlink stops;
    /// the relocation section's own name does not matter to it). A capsule's code is as
    /// long as its function's Mercury symbol says (not its compressed bytes: a 0xa6-byte
    /// capsule of 0xe0 bytes of code, its `sh_info` naming the symbol); `None` where no
    /// symbol says, and for another section.
    fn merc_reloc_end(&self, s: &Section) -> Result<Option<u64>> {
        let target = (s.info != 0)
            .then(|| self.sections.get(s.info as usize))
            .flatten()
            .filter(|t| t.is_mercury());
        let Some(t) = target else {
            return Err(
                Error::fatal("Internal error: internal error").context(format!(
                    "'{}': Mercury relocation section '{}' applies (sh_info {}) to no Mercury section",
                    self.origin, s.name, s.info
                )),
            );
        };
        // (nvlink takes any offset into another Mercury section: a debug frame's, a
        // bank's; attacker review)
        if t.ty != SHT_CAPMERC_TEXT {
            return Ok(None);
        }
        // (a capsule's sh_info is its function's Mercury symbol; else, damaged, any
        // function symbol in it)
        let of_capsule = |m: &&Symbol| m.ty == STT_FUNC && m.shndx == s.info as u16 && m.size > 0;
        let named = self.merc_symbols.get(t.info as usize).filter(of_capsule);
        Ok(named
            .or_else(|| {
                self.merc_symbols
                    .iter()
                    .filter(of_capsule)
                    .max_by_key(|m| m.size)
            })
            .map(|m| m.size))
    }

    pub fn section_index(&self, name: &str) -> Option<usize> {
        self.sections.iter().position(|s| s.name == name)
    }

    /// `(a, b, group)` of every `.nv.callgraph` entry; group n follows the marker (0, -n).
    pub fn callgraph_entries(&self) -> Result<Vec<(u32, i64, usize)>> {
        let mut out = Vec::new();
        for s in self.sections.iter().filter(|s| s.ty == SHT_CUDA_CALLGRAPH) {
            let mut group = 0usize;
            for e in self.bytes(s).chunks_exact(8) {
                let a = e.u32_at(0).unwrap_or(0);
                let b = e.u32_at(4).unwrap_or(0) as i32;
                if a == 0 && (-4..=-1).contains(&b) {
                    group = (-b) as usize;
                    continue;
                }
                if a as usize >= self.symbols.len() {
                    return Err(malformed(
                        &self.origin,
                        s.offset,
                        format!(".nv.callgraph names symbol {a}, which does not exist"),
                    ));
                }
                out.push((a, b as i64, group));
            }
        }
        Ok(out)
    }

    /// The NUL-terminated string at `off` in a cubin's `.strtab`.
    pub fn strtab_string(&self, off: i64) -> Option<String> {
        string_at(self.strtab(), off).map(|s| s.into_owned())
    }

    /// The bytes of the cubin's `.strtab` (empty without one).
    pub fn strtab(&self) -> &[u8] {
        (self.sections.iter())
            .find(|s| s.ty == SHT_STRTAB && s.name == ".strtab")
            .map_or(&[], |s| self.bytes(s))
    }
}

/// The NUL-terminated string at `off` of string table `t`, borrowed unless it is not
/// UTF-8 (then with the bad bytes replaced).
pub fn string_at(t: &[u8], off: i64) -> Option<std::borrow::Cow<'_, str>> {
    let rest = t.get(usize::try_from(off).ok()?..)?;
    let end = rest.iter().position(|&b| b == 0)?;
    Some(String::from_utf8_lossy(&rest[..end]))
}

fn null_symbol() -> Symbol {
    Symbol {
        name: Name::default(),
        value: 0,
        size: 0,
        bind: 0,
        ty: 0,
        other: 0,
        shndx: 0,
    }
}

fn slice<'a>(d: &'a [u8], s: &Section) -> &'a [u8] {
    if !s.has_bytes() {
        return &[];
    }
    &d[s.offset as usize..(s.offset + s.size) as usize]
}

/// The NUL-terminated name at `off` of a string table; with `shared` (the bytes the
/// table lies in and its offset there) a window into them.
fn name_in(table: &[u8], off: usize, shared: Option<(&Bytes, usize)>) -> Option<Name> {
    let rest = table.get(off..)?;
    let end = rest.iter().position(|&b| b == 0)?;
    Some(match shared {
        Some((b, at)) => Name::from_bytes(b.slice(at + off..at + off + end)),
        None => Name::from(String::from_utf8_lossy(&rest[..end]).into_owned()),
    })
}

#[cfg(test)]
mod tests;
