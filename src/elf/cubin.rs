//! The relocatable-cubin reader the merge phase works from: header, sections, symbols and
//! relocations as plain values, every offset, length and index checked against the file
//! before it is used (a bad one is an error naming the file, the section or symbol, and
//! the offset — never a panic).

use crate::bytes::{Bytes, Le};
use crate::diag::{Error, Result, malformed};

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
pub const SHT_CUDA_RELOCINFO: u32 = 0x7000_000B;
pub const SHT_CUDA_CONSTANT0: u32 = 0x7000_0064;
pub const SHT_CUDA_COMPAT: u32 = 0x7000_0086;
/// sm_100+ capsule Mercury: the code (`.nv.capmerc.text.<fn>`), its relocations
/// (`.nv.merc.rela.*`, RELA entries), its `.nv.info` copies, symbol table and call graph.
pub const SHT_CAPMERC_TEXT: u32 = 0x7000_0016;
pub const SHT_MERC_RELA: u32 = 0x7000_0082;
pub const SHT_MERC_INFO: u32 = 0x7000_0083;
pub const SHT_MERC_SYMTAB: u32 = 0x7000_0085;
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
    pub name: String,
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
    pub fn has_bytes(&self) -> bool {
        self.ty != SHT_NOBITS && self.ty != SHT_CUDA_GLOBAL && self.ty != SHT_CUDA_SHARED
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
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

impl Cubin {
    pub fn parse(data: Bytes, origin: &str) -> Result<Cubin> {
        let d: &[u8] = &data;
        let bad = |off: usize, what: String| malformed(origin, off as u64, what);
        if d.len() < EHDR || !d.starts_with(b"\x7fELF") {
            return Err(bad(0, "not an ELF file (cubin not an elf?)".into()));
        }
        if d[4] != 2 || d[5] != 1 {
            return Err(bad(4, "not a 64-bit little-endian ELF".into()));
        }
        let machine = d.u16_at(0x12).unwrap_or(0);
        if machine != super::EM_CUDA {
            return Err(bad(
                0x12,
                format!("e_machine is {machine}, not EM_CUDA (cubin not a device elf?)"),
            ));
        }
        let shoff = d.u64_at(0x28).unwrap_or(0);
        let shnum = d.u16_at(0x3C).unwrap_or(0) as usize;
        let shstrndx = d.u16_at(0x3E).unwrap_or(0) as usize;
        let table_end = (shnum as u64)
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
        let mut raw = Vec::with_capacity(shnum);
        for i in 0..shnum {
            let h = shoff as usize + i * SHDR;
            let f = |o: usize| d.u64_at(h + o).unwrap_or(0);
            let g = |o: usize| d.u32_at(h + o).unwrap_or(0);
            let s = Section {
                name: String::new(),
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
            if s.align > 1 && (!s.align.is_power_of_two() || s.align > 1 << 16) {
                return Err(bad(
                    h,
                    format!(
                        "section [{i}] alignment {:#x} is not a power of two up to 64 KiB",
                        s.align
                    ),
                ));
            }
            raw.push((g(0), s));
        }
        if shstrndx >= raw.len() && shnum > 0 {
            return Err(bad(0x3E, format!("e_shstrndx {shstrndx} is not a section")));
        }
        let shstr = match raw.get(shstrndx) {
            Some((_, s)) => slice(d, s),
            None => &[][..],
        };
        let mut sections = Vec::with_capacity(raw.len());
        for (i, (name_off, mut s)) in raw.into_iter().enumerate() {
            s.name = cstr(shstr, name_off as usize).ok_or_else(|| {
                bad(
                    shoff as usize + i * SHDR,
                    format!("section [{i}] name offset {name_off:#x} is outside .shstrtab"),
                )
            })?;
            sections.push(s);
        }
        let mut c = Cubin {
            origin: origin.to_string(),
            e_type: d.u16_at(0x10).unwrap_or(0),
            e_flags: d.u32_at(0x30).unwrap_or(0),
            osabi: d[7],
            abi_version: d[8],
            symbols: Vec::new(),
            merc_symbols: Vec::new(),
            sections,
            data: data.clone(),
        };
        c.symbols = c.read_symbols(SHT_SYMTAB)?;
        if c.sections.iter().any(|s| s.ty == SHT_MERC_SYMTAB) {
            c.merc_symbols = c.read_symbols(SHT_MERC_SYMTAB)?;
        }
        Ok(c)
    }

    /// The entries of the first symbol table of type `ty`.
    fn read_symbols(&self, ty: u32) -> Result<Vec<Symbol>> {
        let Some(st) = self.sections.iter().position(|s| s.ty == ty) else {
            return Ok(vec![null_symbol()]);
        };
        let sec = &self.sections[st];
        let strtab = self
            .sections
            .get(sec.link as usize)
            .filter(|s| s.ty == SHT_STRTAB)
            .ok_or_else(|| {
                malformed(
                    &self.origin,
                    sec.offset,
                    format!(
                        "{} links to section {}, which is not a string table",
                        sec.name, sec.link
                    ),
                )
            })?;
        let strings = self.bytes(strtab);
        let d = self.bytes(sec);
        let n = d.len() / SYM;
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let e = &d[i * SYM..(i + 1) * SYM];
            let name_off = e.u32_at(0).unwrap_or(0) as usize;
            let info = e[4];
            let shndx = e.u16_at(6).unwrap_or(0);
            let name = cstr(strings, name_off).ok_or_else(|| {
                malformed(
                    &self.origin,
                    sec.offset + (i * SYM) as u64,
                    format!(
                        "{} symbol {i}: name offset {name_off:#x} is outside .strtab",
                        sec.name
                    ),
                )
            })?;
            if shndx as usize >= self.sections.len() && shndx < 0xFF00 {
                return Err(malformed(
                    &self.origin,
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
        if s.ty == SHT_MERC_RELA {
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
            if sass && !crate::elf::reloc::known(r.ty) {
                return Err(
                    Error::fatal("Internal error: sass rtype out of range").context(format!(
                        "'{}' at offset {:#x}: relocation {k} of '{}' has type {:#x}, which no R_CUDA type has",
                        self.origin,
                        s.offset + (k * size) as u64,
                        s.name,
                        r.ty
                    )),
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

    pub fn section_index(&self, name: &str) -> Option<usize> {
        self.sections.iter().position(|s| s.name == name)
    }
}

fn null_symbol() -> Symbol {
    Symbol {
        name: String::new(),
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

fn cstr(table: &[u8], off: usize) -> Option<String> {
    let rest = table.get(off..)?;
    let end = rest.iter().position(|&b| b == 0)?;
    Some(String::from_utf8_lossy(&rest[..end]).into_owned())
}

#[cfg(test)]
mod tests {
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
}
