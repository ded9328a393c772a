//! Input classification, in one place: what a file is by its content (magic numbers),
//! what its name's extension says, and nvlink's decision for the pair — which inputs are
//! read as what, which are fatal, and which are silently ignored.

use std::path::Path;

use crate::bytes::Le;
use crate::diag::{Error, Result, malformed};
use crate::ir::container::{self, IrFormat};
use crate::{elf, fatbin, input::archive, ir};

/// What the bytes are, judged by content alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Content {
    DeviceElf,
    HostElf,
    Fatbin,
    Ir(IrFormat),
    Bitcode,
    Ptx,
    Archive,
    ThinArchive,
    Unknown,
}

impl Content {
    pub fn name(self) -> &'static str {
        match self {
            Content::DeviceElf => "device ELF (cubin)",
            Content::HostElf => "host ELF object",
            Content::Fatbin => "fatbin",
            Content::Ir(f) => f.name(),
            Content::Bitcode => "LLVM bitcode",
            Content::Ptx => "PTX",
            Content::Archive => "archive",
            Content::ThinArchive => "thin archive",
            Content::Unknown => "unknown",
        }
    }
}

/// True when the text, after whitespace and comments, starts with `.version`.
pub fn is_ptx(data: &[u8]) -> bool {
    let mut i = 0;
    while i < data.len() {
        match data[i] {
            b' ' | b'\t' | b'\r' | b'\n' | 0x0B | 0x0C => i += 1,
            b'/' if data.get(i + 1) == Some(&b'/') => {
                i = data[i..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(data.len(), |p| i + p + 1);
            }
            b'/' if data.get(i + 1) == Some(&b'*') => {
                i = data[i + 2..]
                    .windows(2)
                    .position(|w| w == b"*/")
                    .map_or(data.len(), |p| i + 2 + p + 2);
            }
            _ => return data[i..].starts_with(b".version"),
        }
    }
    false
}

pub fn sniff(data: &[u8]) -> Content {
    if data.starts_with(archive::MAGIC) {
        Content::Archive
    } else if data.starts_with(archive::THIN_MAGIC) {
        Content::ThinArchive
    } else if let Some(m) = elf::machine(data) {
        if m == elf::EM_CUDA {
            Content::DeviceElf
        } else {
            Content::HostElf
        }
    } else if fatbin::is_fatbin(data) {
        Content::Fatbin
    } else if let Some(f) = container::sniff(data) {
        Content::Ir(f)
    } else if ir::is_bitcode(data) {
        Content::Bitcode
    } else if is_ptx(data) {
        Content::Ptx
    } else {
        Content::Unknown
    }
}

/// The extensions nvlink dispatches on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ext {
    Cubin,
    Ptx,
    Fatbin,
    Nvvm,
    Ltoir,
    Bc,
    /// `.o`, `.a` or anything else: judged by content.
    Other,
    /// A command-line file with no extension: nvlink skips whatever it holds.
    Bare,
    /// A command-line `.so`: nvlink reads an archive there and skips anything else.
    So,
}

impl Ext {
    pub fn of(path: &Path) -> Ext {
        match path.extension().and_then(|e| e.to_str()) {
            Some("cubin") => Ext::Cubin,
            Some("ptx") => Ext::Ptx,
            Some("fatbin") => Ext::Fatbin,
            Some("nvvm") => Ext::Nvvm,
            Some("ltoir") => Ext::Ltoir,
            Some("bc") => Ext::Bc,
            Some("so") => Ext::So,
            None => Ext::Bare,
            _ => Ext::Other,
        }
    }

    /// An archive member's: content decides where a command-line file would be skipped.
    pub fn of_member(name: &str) -> Ext {
        match Ext::of(Path::new(name)) {
            Ext::Bare | Ext::So => Ext::Other,
            e => e,
        }
    }
}

/// How an input takes part in a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Cubin,
    Ptx,
    Fatbin,
    /// NVIDIA IR for the LTO pool (content checked when the LTO engine reads it).
    Ir,
    HostObject,
    Archive,
    /// Not device code; nvlink skips it without a word (`.so`, junk `.o`, unknown).
    Ignored,
}

/// nvlink's length of the header probe: a shorter file (not an archive) cannot be opened.
pub const PROBE: usize = 56;

/// nvlink's decision for one command-line input (or archive member). `lto` is whether
/// `-lto`/`-dlto` was given.
pub fn decide(name: &str, ext: Ext, data: &[u8], lto: bool) -> Result<Role> {
    let content = sniff(data);
    // an empty file of any name nvlink skips without a word (a short one it cannot open)
    if data.is_empty() {
        return Ok(Role::Ignored);
    }
    if data.len() < PROBE && !matches!(content, Content::Archive | Content::ThinArchive) {
        return Err(
            Error::fatal(format!("Could not open input file '{name}'")).context(format!(
                "'{name}' has {} bytes, fewer than nvlink's {PROBE}-byte header probe",
                data.len()
            )),
        );
    }
    let found = || format!("'{name}' is {}", content.name());
    Ok(match ext {
        Ext::Cubin => match content {
            Content::DeviceElf => Role::Cubin,
            Content::HostElf => {
                return Err(Error::fatal("cubin not a device elf?").context(format!(
                    "{}: e_machine {} is not EM_CUDA (190)",
                    found(),
                    elf::machine(data).unwrap_or(0)
                )));
            }
            _ => {
                return Err(Error::fatal("cubin not an elf?").context(
                    malformed(
                        name,
                        0,
                        format!(
                            "expected ELF magic 7f 45 4c 46, found {}",
                            super::hex(data, 4)
                        ),
                    )
                    .message()
                    .to_string(),
                ));
            }
        },
        Ext::Ptx => match content {
            Content::Ptx => Role::Ptx,
            _ => {
                return Err(Error::fatal("elfLink fatbinary error").context(format!(
                    "Can't load this binary kind, as it's not recognized: '{name}' has no .version directive after its leading comments"
                )));
            }
        },
        Ext::Fatbin => match content {
            Content::Fatbin => Role::Fatbin,
            _ => {
                return Err(Error::fatal("fatbin wrong format?").context(
                    malformed(
                        name,
                        0,
                        format!(
                            "expected fatbin magic 50 ed 55 ba, found {}",
                            super::hex(data, 4)
                        ),
                    )
                    .message()
                    .to_string(),
                ));
            }
        },
        Ext::Nvvm | Ext::Ltoir => {
            if !lto {
                return Err(
                    Error::fatal("should only see nvvm files when -lto").context(format!(
                        "'{name}' is NVVM/LTO IR; link with -lto (or -dlto)"
                    )),
                );
            }
            Role::Ir
        }
        // nvlink refuses bitcode outright; with -lto nvlinkrs links it on LLVM
        Ext::Bc if lto && content == Content::Bitcode => Role::Ir,
        Ext::Bc => {
            return Err(Error::fatal("should never see bc files").context(format!(
                "'{name}': nvlink does not link LLVM bitcode; nvlinkrs does with -lto"
            )));
        }
        Ext::Bare => Role::Ignored,
        Ext::So => match content {
            Content::Archive | Content::ThinArchive => Role::Archive,
            _ => Role::Ignored,
        },
        Ext::Other => match content {
            Content::Archive | Content::ThinArchive => Role::Archive,
            Content::DeviceElf => Role::Cubin,
            // nvlink goes by e_type alone: a relocatable object with its ELF magic,
            // class or byte order damaged is a host object it cannot read ("Could not
            // find fatbin"), not something to skip
            Content::HostElf | Content::Unknown if data.u16_at(0x10) == Some(elf::ET_REL) => {
                Role::HostObject
            }
            _ => Role::Ignored,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pad(b: &[u8]) -> Vec<u8> {
        let mut v = b.to_vec();
        v.resize(200, b' ');
        v
    }

    #[test]
    fn nvlink_decisions_for_junk() {
        let junk = vec![0x5Au8; 200];
        let msg = |n: &str, d: &[u8], lto| {
            decide(n, Ext::of(Path::new(n)), d, lto).map_err(|e| e.message().to_string())
        };
        assert_eq!(
            msg("j.cubin", &junk, false),
            Err("cubin not an elf?".into())
        );
        assert_eq!(
            msg("j.fatbin", &junk, false),
            Err("fatbin wrong format?".into())
        );
        assert_eq!(
            msg("j.bc", &junk, false),
            Err("should never see bc files".into())
        );
        assert_eq!(
            msg("j.ltoir", &junk, false),
            Err("should only see nvvm files when -lto".into())
        );
        assert_eq!(
            msg("j.nvvm", &junk, false),
            Err("should only see nvvm files when -lto".into())
        );
        assert_eq!(msg("j.ltoir", &junk, true), Ok(Role::Ir));
        assert_eq!(
            msg("j.ptx", &junk, false),
            Err("elfLink fatbinary error".into())
        );
        for silent in ["j.o", "j.a", "j.so", "j", "j.xyz"] {
            assert_eq!(msg(silent, &junk, false), Ok(Role::Ignored), "{silent}");
        }
        // e_type 1 makes a host object of anything but a file with no extension or
        // `.so` (read off nvlink 13.5: a damaged magic is "Could not find fatbin")
        let mut rel = junk.clone();
        rel[0x10..0x12].copy_from_slice(&1u16.to_le_bytes());
        for (name, role) in [
            ("r.o", Role::HostObject),
            ("r.a", Role::HostObject),
            ("r.txt", Role::HostObject),
            ("r.so", Role::Ignored),
            ("r", Role::Ignored),
        ] {
            assert_eq!(msg(name, &rel, false), Ok(role), "{name}");
        }
        let ar = b"!<arch>\n".to_vec();
        assert_eq!(msg("lib.so", &ar, false), Ok(Role::Archive));
        assert_eq!(msg("lib", &ar, false), Ok(Role::Ignored));
        assert_eq!(
            decide("a:m", Ext::of_member("m"), &rel, false).ok(),
            Some(Role::HostObject)
        );
        assert_eq!(
            msg("short.o", b"junk", false),
            Err("Could not open input file 'short.o'".into())
        );
        assert_eq!(msg("empty.a", b"!<arch>\n", false), Ok(Role::Archive));
        for empty in [
            "e.o", "e.cubin", "e.fatbin", "e.a", "e.ptx", "e.ltoir", "e.bc", "e",
        ] {
            assert_eq!(msg(empty, b"", false), Ok(Role::Ignored), "{empty}");
        }
    }

    #[test]
    fn content_sniffing() {
        assert_eq!(
            sniff(&pad(b"//\n// Generated\n\n/* x */ .version 9.5\n")),
            Content::Ptx
        );
        assert_eq!(
            sniff(&pad(b"// only a comment\n.target sm_90")),
            Content::Unknown
        );
        assert_eq!(sniff(b"BC\xc0\xde"), Content::Bitcode);
        assert_eq!(sniff(&[0xDE, 0xC0, 0x17, 0x0B]), Content::Bitcode);
        assert_eq!(sniff(&0xBA55ED50u32.to_le_bytes()), Content::Fatbin);
        assert_eq!(
            sniff(&0x7F4E43EDu32.to_le_bytes()),
            Content::Ir(IrFormat::LtoIr)
        );
        assert_eq!(sniff(b"!<thin>\n"), Content::ThinArchive);
        let mut e = pad(b"\x7fELF\x02\x01\x01");
        e[0x12] = 190;
        e[0x13] = 0;
        assert_eq!(sniff(&e), Content::DeviceElf);
        e[0x12] = 62;
        assert_eq!(sniff(&e), Content::HostElf);
        assert_eq!(
            decide("host.cubin", Ext::Cubin, &e, false)
                .unwrap_err()
                .message(),
            "cubin not a device elf?"
        );
    }
}
