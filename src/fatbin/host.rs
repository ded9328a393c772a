//! Host objects (`nvcc -dc`, `nvcc -c`, `nvcc -dlink` output): where their device code
//! lives (`__nv_relfatbin`, `.nv_fatbin`), the `.nvFatBinSegment` wrapper, the module id
//! and the host-reference tables (`.nvHR*`).

use crate::bytes::{Bytes, Le};
use crate::diag::Result;
use crate::elf::ElfView;
use crate::elf::cubin::SHT_NOBITS;

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
    /// `(section, entries)` of the host-reference tables with entries (see
    /// `table_entries`): symbol names or patterns (`_Z5saxpy*`), in section order.
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

/// The NUL-separated entries of a list (`__nv_module_id`'s).
fn entries(d: &[u8]) -> Vec<String> {
    d.split(|&b| b == 0)
        .filter(|e| !e.is_empty())
        .map(|e| String::from_utf8_lossy(e).into_owned())
        .collect()
}

/// The entries of a host-reference table of `size` bytes at `offset` in `file`, as
/// nvlink 13.5 reads them: a string at the table's start, then one after each string's
/// NUL, as long as it starts before the table's last byte, each read up to its NUL even
/// past the table's end (up to the end of the file). So a one-byte table has no entry
/// whatever its byte, a table of NULs has empty entries (which match no kernel: nvlink
/// then keeps none), and the last string of a damaged table runs on into the next
/// section's bytes (read off nvlink with tables rewritten byte by byte).
fn table_entries(file: &[u8], offset: u64, size: u64) -> Vec<String> {
    let Some(table) = usize::try_from(offset).ok().and_then(|o| file.get(o..)) else {
        return Vec::new();
    };
    let size = usize::try_from(size).unwrap_or(usize::MAX).min(table.len());
    let mut out = Vec::new();
    let mut at = 0usize;
    while at + 1 < size {
        let rest = &table[at..];
        let len = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        out.push(String::from_utf8_lossy(&rest[..len]).into_owned());
        at += len + 1;
    }
    out
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
            let s = view.section(n).filter(|s| s.ty != SHT_NOBITS)?;
            let entries = table_entries(file, s.offset, s.size);
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

#[cfg(test)]
mod tests {
    use super::table_entries;

    /// Tables of 10 bytes at offset 1 of a file, as nvlink reads them.
    #[test]
    fn tables_read_as_nvlink_reads_them() {
        let read = |t: &[u8]| {
            let mut f = vec![b'x'];
            f.extend_from_slice(t);
            table_entries(&f, 1, 10)
        };
        assert_eq!(read(b"klaunched\0"), ["klaunched"]);
        assert_eq!(read(b"\0\0\0\0\0\0\0\0\0\0"), vec![String::new(); 9]);
        assert_eq!(read(b"ab\0\0cd\0\0\0\0"), ["ab", "", "cd", "", ""]);
        // the last byte starts no entry; an entry runs past the table (to the file's end)
        assert_eq!(read(b"\0\0\0\0\0\0\0\0\0*"), vec![String::new(); 9]);
        assert_eq!(read(b"\0kern_unla*\0"), ["", "kern_unla*"]);
        assert_eq!(
            read(b"\0\0\0\0\0\0\0\0kl*"),
            [&[""; 8][..], &["kl*"]].concat()
        );
        // a one-byte table has none, whatever its byte; a table past the file's end none
        assert!(table_entries(b"A", 0, 1).is_empty());
        assert!(table_entries(b"ab\0", 7, 10).is_empty());
        assert_eq!(table_entries(b"ab", 0, 1 << 40), ["ab"]);
    }
}
