//! Host objects (`nvcc -dc`, `nvcc -c`, `nvcc -dlink` output): where their device code
//! lives (`__nv_relfatbin`, `.nv_fatbin`), the `.nvFatBinSegment` wrapper, the module id
//! and the host-reference tables (`.nvHR*`).

use crate::bytes::{Bytes, Le};
use crate::diag::Result;
use crate::elf::ElfView;

/// The sections that hold fatbin containers, in the order nvlink prefers them: relocatable
/// device code first (what a device link consumes), then executable device code.
pub const FATBIN_SECTIONS: [&str; 2] = ["__nv_relfatbin", ".nv_fatbin"];
pub const WRAPPER_SECTION: &str = ".nvFatBinSegment";
pub const WRAPPER_MAGIC: u32 = 0x4662_43B1;
pub const HOST_REF_SECTIONS: [&str; 6] = [
    ".nvHRKE", ".nvHRKI", ".nvHRDE", ".nvHRDI", ".nvHRCE", ".nvHRCI",
];

#[derive(Clone, Debug)]
pub struct FatbinSection {
    pub name: &'static str,
    /// File offset of the section.
    pub offset: u64,
    pub data: Bytes,
}

#[derive(Clone, Debug)]
pub struct HostObject {
    pub fatbins: Vec<FatbinSection>,
    /// `.nvFatBinSegment`: (magic ok, version) — 1 for compile objects, 2 for `-dlink` output.
    pub wrapper_version: Option<u32>,
    pub module_id: Option<String>,
    /// The module ids an `nvcc -dlink` object already linked: its `__nv_module_id` lists
    /// them as `def <id>` entries (empty for other objects).
    pub prelinked: Vec<String>,
    /// `(section, entries)` of the non-empty host-reference tables: symbol names or
    /// patterns (`_Z5saxpy*`), in section order.
    pub host_refs: Vec<(&'static str, Vec<String>)>,
}

impl HostObject {
    /// The container nvlink reads from this object: relocatable device code when present.
    pub fn link_fatbin(&self) -> Option<&FatbinSection> {
        self.fatbins.first()
    }
}

fn cstr(d: &[u8]) -> String {
    let end = d.iter().position(|&b| b == 0).unwrap_or(d.len());
    String::from_utf8_lossy(&d[..end]).into_owned()
}

/// The NUL-separated entries of a host-reference table.
fn entries(d: &[u8]) -> Vec<String> {
    d.split(|&b| b == 0)
        .filter(|e| !e.is_empty())
        .map(|e| String::from_utf8_lossy(e).into_owned())
        .collect()
}

/// Finds the device-code sections of a host ELF object.
pub fn read(file: &Bytes, origin: &str) -> Result<HostObject> {
    // (nvlink reads an object whose e_ident version byte is not 1 as any other: so does
    // the ELF reader)
    let view = ElfView::parse(file, origin)?;
    let mut fatbins = Vec::new();
    for name in FATBIN_SECTIONS {
        if let Some(s) = view.section(name) {
            // NOBITS sections have no bytes; the others were bounds-checked by the view.
            if !view.section_data(s).is_empty() {
                let data = file.slice(s.offset as usize..(s.offset + s.size) as usize);
                fatbins.push(FatbinSection {
                    name,
                    offset: s.offset,
                    data,
                });
            }
        }
    }
    let wrapper_version = view.section(WRAPPER_SECTION).and_then(|s| {
        let d = view.section_data(s);
        (d.u32_at(0) == Some(WRAPPER_MAGIC)).then(|| d.u32_at(4).unwrap_or(0))
    });
    let ids = view.section("__nv_module_id").map(|s| view.section_data(s));
    let module_id = ids.map(cstr).filter(|s| !s.is_empty());
    let prelinked = ids
        .map(entries)
        .unwrap_or_default()
        .iter()
        .filter_map(|e| e.strip_prefix("def ").map(str::to_string))
        .collect();
    let host_refs = HOST_REF_SECTIONS
        .iter()
        .filter_map(|&n| {
            let entries = entries(view.section_data(view.section(n)?));
            (!entries.is_empty()).then_some((n, entries))
        })
        .collect();
    Ok(HostObject {
        fatbins,
        wrapper_version,
        module_id,
        prelinked,
        host_refs,
    })
}
