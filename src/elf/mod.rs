//! ELF for the linker: the one reader ([`cubin`]: any ELF64 file's sections, the
//! linkable cubin), what a device ELF says about itself (architecture, kernels, notes),
//! and the image writer (and its re-layout of an image, [`relayout`]), `.nv.info`
//! records, relocation types, capsule-Mercury records ([`capsule`]), image comparison
//! (whole, [`equiv`]; all but the code, [`interface`]; the code kernel by kernel,
//! [`codestats`]) and the resources `-v` reports read back from a written image
//! ([`resources`]).

pub mod capsule;
pub mod codestats;
pub mod cubin;
pub mod equiv;
pub mod info;
pub mod interface;
pub mod relayout;
pub mod reloc;
pub mod resources;
pub mod segments;
pub mod tkinfo;
pub mod write;

pub use cubin::ElfView;
use cubin::{SHT_NOBITS, Section, Symbol};

use crate::arch::{Arch, Variant};
use crate::bytes::Le;
use crate::diag::{Result, malformed};

pub const EM_CUDA: u16 = 190;
/// `EI_OSABI` of the device ELFs ptxas and nvlink write (0x41).
pub const ELFOSABI_CUDA: u8 = 0x41;
/// `e_type` of a relocatable object.
pub const ET_REL: u16 = 1;
pub const ELF_MAGIC: &[u8; 4] = b"\x7fELF";

/// `st_other` bit of kernels (entry functions) in relocatable cubins.
pub const STO_CUDA_ENTRY: u8 = 0x10;
/// `STT_LOPROC`: CUDA data objects in relocatable cubins.
pub const STT_CUDA_OBJECT: u8 = 13;

pub fn is_elf(data: &[u8]) -> bool {
    data.starts_with(ELF_MAGIC)
}

/// `e_machine` of an ELF64 little-endian image, without validating anything else.
pub fn machine(data: &[u8]) -> Option<u16> {
    if !is_elf(data) {
        return None;
    }
    data.u16_at(0x12)
}

/// `e_type` of an ELF image, without validating anything else.
pub fn elf_type(data: &[u8]) -> Option<u16> {
    if !is_elf(data) {
        return None;
    }
    data.u16_at(0x10)
}

/// The number of bytes an ELF64 image occupies according to its own headers (the end of
/// the section header table, program headers, or last section, whichever is furthest).
/// `None` when the header is not ELF64 little-endian or the numbers overflow.
pub fn image_extent(data: &[u8]) -> Option<usize> {
    if !is_elf(data) || data.u8_at(4)? != 2 || data.u8_at(5)? != 1 {
        return None;
    }
    let shoff = data.u64_at(0x28)?;
    let shentsize = data.u16_at(0x3A)? as u64;
    let shnum = data.u16_at(0x3C)? as u64;
    let phoff = data.u64_at(0x20)?;
    let phentsize = data.u16_at(0x36)? as u64;
    let phnum = data.u16_at(0x38)? as u64;
    let mut end = 64u64;
    end = end.max(shoff.checked_add(shentsize.checked_mul(shnum)?)?);
    if phnum > 0 {
        end = end.max(phoff.checked_add(phentsize.checked_mul(phnum)?)?);
    }
    for i in 0..shnum {
        let sh = usize::try_from(shoff + i * shentsize).ok()?;
        let ty = data.u32_at(sh + 4)?;
        if ty != SHT_NOBITS {
            end = end.max(
                data.u64_at(sh + 0x18)?
                    .checked_add(data.u64_at(sh + 0x20)?)?,
            );
        }
    }
    usize::try_from(end).ok()
}

/// What a device ELF (cubin) says about itself.
#[derive(Clone, Debug)]
pub struct DeviceSummary {
    pub e_type: u16,
    pub e_flags: u32,
    pub osabi: u8,
    pub abi_version: u8,
    pub arch: Arch,
    /// The virtual architecture the code was compiled from (`.note.nv.cuinfo`).
    pub virtual_sm: Option<u16>,
    /// CUDA version that built it, e.g. 135 = 13.5 (`.note.nv.cuinfo`).
    pub cuda_version: Option<u32>,
    pub debug_level: u8,
    pub sections: Vec<Section>,
    /// `.symtab` without its null symbol 0.
    pub symbols: Vec<Symbol>,
}

impl DeviceSummary {
    pub fn type_name(&self) -> String {
        match self.e_type {
            1 => "ET_REL (relocatable)".into(),
            2 => "ET_EXEC (executable)".into(),
            0xFF00 => "0xff00 (extensible whole program)".into(),
            t => format!("{t:#x}"),
        }
    }
    pub fn kernels(&self) -> impl Iterator<Item = &Symbol> {
        self.symbols.iter().filter(|s| s.is_kernel())
    }
}

/// Reads a cubin: validates that it is a device ELF and summarises it.
pub fn device_summary(data: &[u8], origin: &str) -> Result<DeviceSummary> {
    let view = ElfView::parse(data, origin)?;
    if view.e_machine != EM_CUDA {
        return Err(malformed(
            origin,
            0x12,
            format!(
                "e_machine is {}, a device ELF has {EM_CUDA} (EM_CUDA)",
                view.e_machine
            ),
        ));
    }
    let (mut virtual_sm, mut cuda_version) = (None, None);
    if let Some(n) = view.section(".note.nv.cuinfo") {
        let d = view.section_data(n);
        // namesz, descsz, type, "NVIDIA Corp\0", desc { u16 version, u16 vsm, u32 cuda }
        if let (Some(namesz), Some(1000)) = (d.u32_at(0), d.u32_at(8)) {
            let desc = 12 + (namesz as usize).next_multiple_of(4);
            virtual_sm = d.u16_at(desc + 2);
            cuda_version = d.u32_at(desc + 4);
        }
    }
    Ok(DeviceSummary {
        e_type: view.e_type,
        e_flags: view.e_flags,
        osabi: view.osabi,
        abi_version: view.abi_version,
        arch: view_arch(&view),
        virtual_sm,
        cuda_version,
        debug_level: (view.e_flags >> 24) as u8,
        symbols: view.symbols(origin)?.split_off(1),
        sections: view.sections,
    })
}

/// The architecture a cubin names: `e_flags` bits 15..8, `a` when `.nv.compat` attribute
/// 0x09 (accelerator target) is 1.
fn view_arch(view: &ElfView) -> Arch {
    let compat = view.section(".nv.compat").map(|c| view.section_data(c));
    arch_of(view.e_flags, compat.unwrap_or_default())
}

/// The architecture named by `e_flags` and the `.nv.compat` bytes (empty without one).
fn arch_of(e_flags: u32, compat: &[u8]) -> Arch {
    let accelerated = compat_records(compat).contains(&(0x09, 1));
    let variant = if accelerated {
        Variant::Accelerated
    } else {
        Variant::Plain
    };
    Arch::new((e_flags >> 8) & 0xFF, variant)
}

/// The architecture of a device ELF, reading only its header and sections.
pub fn arch(data: &[u8]) -> Option<Arch> {
    let (machine, flags, compat) = cubin::flags_and_section(data, ".nv.compat")?;
    (machine == EM_CUDA).then(|| arch_of(flags, compat))
}

/// `(attribute, value)` of the BVAL/HVAL records of a `.nv.compat` (or `.nv.info`)
/// section; SVAL payloads are skipped. Stops quietly at a cut-short record.
pub fn compat_records(d: &[u8]) -> Vec<(u8, u16)> {
    let mut out = Vec::new();
    let mut i = 0usize;
    while let (Some(fmt), Some(attr), Some(x)) = (d.u8_at(i), d.u8_at(i + 1), d.u16_at(i + 2)) {
        match fmt {
            2 => out.push((attr, x & 0xFF)),
            3 => out.push((attr, x)),
            _ => {}
        }
        i += 4 + if fmt == 4 { x as usize } else { 0 };
        i = i.next_multiple_of(4);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compat_records_skip_svals() {
        let d = [2u8, 9, 1, 0, 4, 0x0B, 4, 0, 9, 9, 9, 9, 3, 0x0E, 0x40, 0x04];
        assert_eq!(compat_records(&d), vec![(9, 1), (0x0E, 0x0440)]);
        assert_eq!(compat_records(&d[..6]), vec![(9, 1)]);
    }

    #[test]
    fn extent_of_non_elf_is_none() {
        assert_eq!(image_extent(b"junk"), None);
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(ELF_MAGIC);
        h[4] = 2;
        h[5] = 1;
        h[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes());
        h[0x3A] = 64;
        h[0x3C] = 2;
        assert_eq!(image_extent(&h), None, "overflowing shoff must not panic");
    }
}
