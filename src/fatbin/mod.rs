//! Fatbin containers (magic 0xBA55ED50): the outer header, the variable-length member
//! headers (kind, arch, flags, option string, identifier), several containers back to
//! back, and the members' payloads, decompressed (zstd, LZ4) when asked for. Uncompressed
//! payloads are windows into the input mapping. Every size and offset read from the file
//! is checked against the bytes that are really there.

pub mod host;
pub mod object;

use crate::arch::{Arch, Variant};
use crate::bytes::{Bytes, Le};
use crate::diag::{Error, Result, malformed};

pub const MAGIC: u32 = 0xBA55_ED50;
const CONTAINER_HEADER: usize = 16;
const MEMBER_HEADER_MIN: usize = 0x40;

/// The largest decompressed member accepted. Real cubins and PTX are far smaller; the
/// cap stops a forged header (or a compression bomb) from exhausting memory.
pub const MAX_MEMBER_SIZE: u64 = 1 << 30;

/// Compressed members this large (uncompressed) or larger are cached once extracted (the
/// "member" stage), keyed by their stored bytes; smaller ones decompress faster than a
/// cache entry is read and checked.
pub const MEMBER_CACHE_MIN: u64 = 64 << 10;

pub mod flags {
    pub const BIT64: u64 = 0x1;
    pub const DEBUG: u64 = 0x2;
    pub const HOST_LINUX: u64 = 0x10;
    pub const HOST_MAC: u64 = 0x20;
    pub const HOST_WINDOWS: u64 = 0x40;
    pub const LZ4: u64 = 0x2000;
    pub const ZSTD: u64 = 0x8000;
    pub const OBFUSCATED: u64 = 0x10000;
    pub const ARCH_SPECIFIC: u64 = 0x100000;
    pub const FAMILY: u64 = 0x200000;
    pub const COMPAT_RECORDS: u64 = 0x1000000;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberKind {
    Ptx,
    Elf,
    Nvvm,
    /// A kind this reader does not know, reported by number.
    Other(u16),
}

impl MemberKind {
    fn from_raw(k: u16) -> MemberKind {
        match k {
            1 => MemberKind::Ptx,
            2 => MemberKind::Elf,
            8 => MemberKind::Nvvm,
            n => MemberKind::Other(n),
        }
    }

    pub fn name(self) -> String {
        match self {
            MemberKind::Ptx => "ptx".into(),
            MemberKind::Elf => "elf".into(),
            MemberKind::Nvvm => "nvvm".into(),
            MemberKind::Other(n) => format!("kind {n}"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Zstd,
    Lz4,
    /// NVVM members that NVIDIA's tools compress with zstd and then scramble (flag
    /// 0x10000) with the container's content key (`ir::obfuscation`).
    Obfuscated,
}

impl Compression {
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Zstd => "zstd",
            Compression::Lz4 => "lz4",
            Compression::Obfuscated => "obfuscated",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Member {
    /// Offset of the member header from the start of the bytes given to `parse`.
    pub offset: u64,
    pub kind: MemberKind,
    pub header_size: u32,
    pub payload_size: u64,
    pub stored_size: u32,
    pub code_version: (u16, u16),
    pub sm: u32,
    pub flags: u64,
    pub lto_key: u64,
    pub uncompressed_size: u64,
    pub identifier: Option<String>,
    /// The option string (ptxas options for PTX, NVVM options for kind 8), or for sm_100+
    /// ELF members the binary `.nv.compat` copy.
    pub options: Option<Bytes>,
    /// The stored payload: compressed bytes, or the raw (padded) image.
    pub payload: Bytes,
}

impl Member {
    pub fn arch(&self) -> Arch {
        let variant = if self.flags & flags::ARCH_SPECIFIC != 0 {
            Variant::Accelerated
        } else if self.flags & flags::FAMILY != 0 {
            Variant::Family
        } else {
            Variant::Plain
        };
        Arch::new(self.sm, variant)
    }

    pub fn compression(&self) -> Compression {
        if self.flags & flags::OBFUSCATED != 0 {
            Compression::Obfuscated
        } else if self.flags & flags::ZSTD != 0 {
            Compression::Zstd
        } else if self.flags & flags::LZ4 != 0 {
            Compression::Lz4
        } else {
            Compression::None
        }
    }

    /// The option string as text, when it is text (not for sm_100+ ELF compat records).
    pub fn option_text(&self) -> Option<String> {
        if self.kind == MemberKind::Elf && self.flags & flags::COMPAT_RECORDS != 0 {
            return None;
        }
        let o = self.options.as_ref()?;
        let end = o.iter().position(|&b| b == 0).unwrap_or(o.len());
        Some(String::from_utf8_lossy(&o[..end]).into_owned())
    }

    /// The member's content, uncompressed: a window into the input when it is stored
    /// plainly, a new buffer otherwise. PTX stops at its terminating NUL; an ELF image is
    /// cut to the extent its own headers describe (the payload region is padded).
    /// `origin` and `base` (the file offset of the parsed bytes) name errors. A large
    /// compressed member is kept in `cache` (the link's) once extracted.
    pub fn data(
        &self,
        origin: &str,
        base: u64,
        cache: Option<&crate::cache::Cache>,
    ) -> Result<Bytes> {
        let at = base + self.offset + self.header_size as u64;
        let raw = match self.compression() {
            Compression::None => self.payload.clone(),
            c => {
                let want = self.uncompressed_size;
                if self.stored_size as u64 > self.payload_size {
                    return Err(malformed(
                        origin,
                        base + self.offset + 0x10,
                        format!(
                            "compressed size {} is larger than the payload region {}",
                            self.stored_size, self.payload_size
                        ),
                    ));
                }
                if want > MAX_MEMBER_SIZE {
                    return Err(malformed(
                        origin,
                        base + self.offset + 0x38,
                        format!(
                            "declared uncompressed size {want} exceeds the {MAX_MEMBER_SIZE}-byte limit"
                        ),
                    ));
                }
                // a large member comes from the link's cache when it was extracted before
                let cache = cache.filter(|_| want >= MEMBER_CACHE_MIN);
                let key = || {
                    crate::cache::Key::new("member")
                        .text(c.name())
                        .bytes(&self.lto_key.to_le_bytes())
                        .bytes(&want.to_le_bytes())
                        .part("compressed member", &self.payload)
                        .about(format!("member of '{origin}'"))
                };
                let hit = cache
                    .as_ref()
                    .and_then(|cache| cache.get(&key()))
                    .filter(|d| d.len() as u64 == want);
                let from_cache = hit.is_some();
                let decompressing = std::time::Instant::now();
                let out = match hit {
                    Some(d) => Ok(d),
                    None if c == Compression::Obfuscated => {
                        let mut frame = self.payload.to_vec();
                        crate::ir::unscramble(&mut frame, self.lto_key as u32);
                        zstd_exact(&frame, want as usize)
                    }
                    None if c == Compression::Zstd => zstd_exact(&self.payload, want as usize),
                    None => lz4_exact(&self.payload, want as usize),
                };
                let out = out.map_err(|e| {
                    malformed(
                        origin,
                        at,
                        format!("{} member does not decompress: {e}", c.name()),
                    )
                })?;
                if let (Some(cache), false) = (&cache, from_cache) {
                    // (a cache that cannot store: no loss)
                    cache.put(&key(), &out, decompressing.elapsed());
                }
                Bytes::from_vec(out)
            }
        };
        Ok(match self.kind {
            MemberKind::Ptx => {
                let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
                raw.slice(0..end)
            }
            MemberKind::Elf => {
                let n = crate::elf::image_extent(&raw)
                    .unwrap_or(raw.len())
                    .min(raw.len());
                raw.slice(0..n)
            }
            _ => raw,
        })
    }
}

/// Decompresses one LZ4 block (no frame: `--compress-mode=speed` members) into exactly
/// `want` bytes with `lz4_flex`, which checks every length and match offset and writes no
/// further than the buffer. A sequence yields at most 255 bytes per input byte, so a
/// declared size beyond that is refused before its buffer is allocated.
fn lz4_exact(src: &[u8], want: usize) -> std::result::Result<Vec<u8>, String> {
    if want > src.len().saturating_mul(255).saturating_add(16) {
        return Err(format!(
            "a {}-byte block cannot decode to the {want} bytes the header says",
            src.len()
        ));
    }
    let mut out = vec![0u8; want];
    let n = lz4_flex::block::decompress_into(src, &mut out).map_err(|e| match e {
        lz4_flex::block::DecompressError::OutputTooSmall { .. } => {
            format!("block decodes to more than the {want} bytes the header says")
        }
        e => e.to_string(),
    })?;
    if n != want {
        return Err(format!("block decodes to {n} bytes, header says {want}"));
    }
    Ok(out)
}

/// Decompresses one zstd frame into exactly `want` bytes, reading no further than
/// `want + 1` output bytes whatever the frame claims (so a bomb cannot run away).
fn zstd_exact(src: &[u8], want: usize) -> std::result::Result<Vec<u8>, String> {
    use std::io::Read;
    let mut dec = zstd::stream::read::Decoder::with_buffer(src).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(want.min(src.len().saturating_mul(64)).max(64));
    (&mut dec)
        .take(want as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    if out.len() != want {
        return Err(format!(
            "frame decodes to {}{} bytes, header says {want}",
            if out.len() > want { "more than " } else { "" },
            out.len().min(want)
        ));
    }
    Ok(out)
}

#[derive(Clone, Debug)]
pub struct Container {
    /// Offset of the container header from the start of the bytes given to `parse`.
    pub offset: u64,
    pub version: u16,
    pub header_size: u16,
    pub body_size: u64,
    pub members: Vec<Member>,
}

/// True when `data` begins with a fatbin container header.
pub fn is_fatbin(data: &[u8]) -> bool {
    data.u32_at(0) == Some(MAGIC)
}

/// Parses every container in `data` (containers may follow one another at 8-byte aligned
/// offsets, as when a host linker concatenated sections). Zero padding after the last
/// container is allowed. `origin` and `base` (the file offset of `data`) name errors.
pub fn parse(data: &Bytes, origin: &str, base: u64) -> Result<Vec<Container>> {
    let mut out = Vec::new();
    let mut off = 0usize;
    loop {
        let rest = &data[off.min(data.len())..];
        if rest.is_empty() || (!out.is_empty() && rest.iter().all(|&b| b == 0)) {
            break;
        }
        let at = base + off as u64;
        if rest.len() < CONTAINER_HEADER {
            return Err(malformed(
                origin,
                at,
                format!("fatbin header needs 16 bytes, {} left", rest.len()),
            ));
        }
        let magic = rest.u32_at(0).unwrap_or(0);
        if magic != MAGIC {
            return Err(malformed(
                origin,
                at,
                format!("expected fatbin magic 0xba55ed50, found {magic:#010x}"),
            ));
        }
        let version = rest.u16_at(4).unwrap_or(0);
        // (the only container version there is; nvlink refuses any other)
        if version != 1 {
            return Err(Error::fatal("Can't load this binary kind, as it's not recognized").context(format!(
                "'{origin}' at offset {:#x}: fatbin container version {version}, where 1 is the one known (elfLink fatbinary error)",
                at + 4
            )));
        }
        let header_size = rest.u16_at(6).unwrap_or(0);
        let body_size = rest.u64_at(8).unwrap_or(0);
        if (header_size as usize) < CONTAINER_HEADER || header_size as usize > rest.len() {
            return Err(malformed(
                origin,
                at + 6,
                format!(
                    "fatbin header size {header_size} is not between 16 and the {} bytes left",
                    rest.len()
                ),
            ));
        }
        let body_start = off + header_size as usize;
        let body_end = (body_start as u64)
            .checked_add(body_size)
            .filter(|&e| e <= data.len() as u64);
        let Some(body_end) = body_end else {
            return Err(malformed(
                origin,
                at + 8,
                format!(
                    "fatbin body size {body_size} passes the end of the data ({} bytes after the header)",
                    data.len() - body_start
                ),
            ));
        };
        let members = parse_members(data, body_start, body_end as usize, origin, base)?;
        out.push(Container {
            offset: off as u64,
            version,
            header_size,
            body_size,
            members,
        });
        off = (body_end as usize).next_multiple_of(8);
    }
    Ok(out)
}

fn parse_members(
    data: &Bytes,
    start: usize,
    end: usize,
    origin: &str,
    base: u64,
) -> Result<Vec<Member>> {
    let mut members = Vec::new();
    let mut m = start;
    while m < end {
        let h = &data[m..end];
        let at = base + m as u64;
        let bad = |field_off: u64, what: String| malformed(origin, at + field_off, what);
        if h.len() < MEMBER_HEADER_MIN {
            return Err(bad(
                0,
                format!(
                    "member header needs 64 bytes, {} left in the container",
                    h.len()
                ),
            ));
        }
        let rd32 = |o: usize| h.u32_at(o).unwrap_or(0);
        let rd64 = |o: usize| h.u64_at(o).unwrap_or(0);
        let kind = MemberKind::from_raw(h.u16_at(0).unwrap_or(0));
        let header_size = rd32(4);
        let payload_size = rd64(8);
        if (header_size as usize) < MEMBER_HEADER_MIN || header_size as usize > h.len() {
            return Err(bad(
                4,
                format!(
                    "member header size {header_size} is not between 64 and the {} bytes left",
                    h.len()
                ),
            ));
        }
        let hs = header_size as usize;
        if payload_size > (h.len() - hs) as u64 {
            return Err(bad(
                8,
                format!(
                    "member payload size {payload_size} passes the container end ({} bytes left)",
                    h.len() - hs
                ),
            ));
        }
        // (nvlink names targets by up to three digits: a member of any larger one, or
        // of none, stops it, checked against nvlink 13.5: 999 is a target not found,
        // 0 and 1000 are refused)
        let sm = rd32(0x1C);
        if sm == 0 || sm >= 1000 {
            return Err(Error::fatal("Unknown arch name ''").context(format!(
                "'{origin}' at offset {:#x}: a fatbin member for target {sm}, which nvlink cannot name (elfLink fatbinary error)",
                at + 0x1C
            )));
        }
        let flags = rd64(0x28);
        let stored_size = rd32(0x10);
        let compressed = flags & (flags::ZSTD | flags::LZ4 | flags::OBFUSCATED) != 0;
        // (a compressed size past the payload region is refused when the member is
        // read, `Member::data`: nvlink reads only the member it links)
        let stored = if compressed {
            (stored_size as u64).min(payload_size)
        } else {
            payload_size
        };
        // The identifier and the option string: where their offsets point outside the
        // member's header, nvlink links as if the member had none (checked against nvlink
        // 13.5: the image is the undamaged fatbin's), so they are taken as absent.
        let string_in_header = |off: u32, len: u32| -> Option<Bytes> {
            let end = off as u64 + len as u64;
            ((off as usize) >= MEMBER_HEADER_MIN.min(hs) && end <= hs as u64)
                .then(|| data.slice(m + off as usize..m + end as usize))
        };
        let identifier = match rd32(0x20) {
            0 => None,
            off => {
                string_in_header(off, rd32(0x24)).map(|b| String::from_utf8_lossy(&b).into_owned())
            }
        };
        let opt_desc = rd32(0x14) as usize;
        let options = if opt_desc != 0 && opt_desc >= MEMBER_HEADER_MIN && opt_desc + 8 <= hs {
            let so = h.u32_at(opt_desc).unwrap_or(0);
            let sl = h.u32_at(opt_desc + 4).unwrap_or(0);
            string_in_header(so, sl)
        } else {
            None
        };
        let payload = data.slice(m + hs..m + hs + stored as usize);
        members.push(Member {
            offset: m as u64,
            kind,
            header_size,
            payload_size,
            stored_size,
            code_version: (h.u16_at(0x1A).unwrap_or(0), h.u16_at(0x18).unwrap_or(0)),
            sm,
            flags,
            lto_key: rd64(0x30),
            uncompressed_size: rd64(0x38),
            identifier,
            options,
            payload,
        });
        m += hs + payload_size as usize;
    }
    Ok(members)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds a container with the given (kind, sm, flags, options, payload) members,
    /// uncompressed, in the layout NVIDIA's fatbinary writes.
    pub fn build(members: &[(u16, u32, u64, &str, &[u8])]) -> Vec<u8> {
        let mut body = Vec::new();
        for &(kind, sm, fl, opts, payload) in members {
            let mut h = vec![0u8; 0x40];
            let mut hs = 0x40usize;
            if !opts.is_empty() {
                let so = 0x48u32;
                h.extend_from_slice(&so.to_le_bytes());
                h.extend_from_slice(&(opts.len() as u32).to_le_bytes());
                h.extend_from_slice(opts.as_bytes());
                h.push(0);
                while h.len() % 8 != 0 {
                    h.push(0);
                }
                hs = h.len();
                h[0x14..0x18].copy_from_slice(&0x40u32.to_le_bytes());
            }
            let padded = payload.len().next_multiple_of(8);
            h[0..2].copy_from_slice(&kind.to_le_bytes());
            h[2..4].copy_from_slice(&0x0101u16.to_le_bytes());
            h[4..8].copy_from_slice(&(hs as u32).to_le_bytes());
            h[8..16].copy_from_slice(&(padded as u64).to_le_bytes());
            h[0x1C..0x20].copy_from_slice(&sm.to_le_bytes());
            h[0x28..0x30].copy_from_slice(&fl.to_le_bytes());
            body.extend_from_slice(&h);
            body.extend_from_slice(payload);
            body.resize(body.len() + padded - payload.len(), 0);
        }
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&16u16.to_le_bytes());
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    #[test]
    fn reads_members_options_and_back_to_back_containers() {
        let one = build(&[
            (1, 90, 0x11, "--compile-only  ", b".version 9.5\0"),
            (8, 90, 0x100011, "-ftz=0 ", b"IRIR"),
        ]);
        let mut two = one.clone();
        two.extend(build(&[(2, 75, 0x11, "", b"\x7fELF")]));
        let cs = parse(&Bytes::from_vec(two), "t", 0).unwrap();
        assert_eq!(cs.len(), 2);
        let m = &cs[0].members;
        assert_eq!(m[0].kind, MemberKind::Ptx);
        assert_eq!(m[0].option_text().as_deref(), Some("--compile-only  "));
        assert_eq!(&*m[0].data("t", 0, None).unwrap(), b".version 9.5");
        assert_eq!(m[1].arch().to_string(), "sm_90a");
        assert_eq!(cs[1].members[0].arch().to_string(), "sm_75");
        assert_eq!(cs[1].offset as usize, one.len());
    }

    #[test]
    fn every_truncation_is_an_error_naming_an_offset() {
        let full = build(&[(1, 90, 0x11, "--compile-only", b".version 9.5\0")]);
        for n in 1..full.len() {
            let r = parse(&Bytes::from_vec(full[..n].to_vec()), "cut.fatbin", 0);
            let e = r.expect_err(&format!("cut at {n} must fail"));
            assert!(
                e.message().starts_with("'cut.fatbin' at offset 0x"),
                "{}",
                e.message()
            );
        }
    }

    #[test]
    fn forged_sizes_are_rejected() {
        let mut f = build(&[(2, 90, 0x8011, "", b"abcd")]);
        // stored size bigger than the payload region: refused when the member is read
        // (nvlink reads only the member it links)
        f[16 + 0x10..16 + 0x14].copy_from_slice(&100u32.to_le_bytes());
        let c = parse(&Bytes::from_vec(f.clone()), "x", 0).unwrap();
        let e = c[0].members[0].data("x", 0, None).unwrap_err();
        assert!(
            e.message().contains("compressed size 100"),
            "{}",
            e.message()
        );
        // a declared uncompressed size past the cap
        f[16 + 0x10..16 + 0x14].copy_from_slice(&4u32.to_le_bytes());
        f[16 + 0x38..16 + 0x40].copy_from_slice(&(MAX_MEMBER_SIZE + 1).to_le_bytes());
        let c = parse(&Bytes::from_vec(f), "x", 0).unwrap();
        assert!(
            c[0].members[0]
                .data("x", 0, None)
                .unwrap_err()
                .message()
                .contains("limit")
        );
    }

    #[test]
    fn zstd_bomb_is_cut_at_the_declared_size() {
        let big = vec![0u8; 8 << 20];
        let z = zstd::bulk::compress(&big, 19).unwrap();
        let err = zstd_exact(&z, 1000).unwrap_err();
        assert!(err.contains("more than 1000"), "{err}");
        assert_eq!(zstd_exact(&z, big.len()).unwrap().len(), big.len());
    }

    #[test]
    fn lz4_literals_and_overlapping_match() {
        // "abc", a match of offset 3 and length 9, then the literal-only last sequence
        let block = [0x35, b'a', b'b', b'c', 3, 0, 0x10, b'!'];
        assert_eq!(lz4_exact(&block, 13).unwrap(), b"abcabcabcabc!");
        let short = lz4_exact(&block, 14).unwrap_err();
        assert!(
            short.contains("decodes to 13 bytes, header says 14"),
            "{short}"
        );
        let long = lz4_exact(&block, 12).unwrap_err();
        assert!(long.contains("more than the 12 bytes"), "{long}");
    }

    #[test]
    fn lz4_rejects_bad_offsets_overruns_and_bombs() {
        // a block may not end with a match
        assert!(lz4_exact(&[0x35, b'a', b'b', b'c', 3, 0], 12).is_err());
        assert!(lz4_exact(&[0x35, b'a', b'b', b'c', 9, 0], 12).is_err());
        assert!(lz4_exact(&[0x35, b'a', b'b', b'c', 0, 0], 12).is_err());
        assert!(lz4_exact(&[0x35, b'a', b'b', b'c', 3, 0], 5).is_err());
        assert!(lz4_exact(&[0xF0, 255, 255], 10).is_err());
        assert!(lz4_exact(&[], 0).is_err());
        assert!(lz4_exact(&[0x30, b'a'], 3).is_err());
        let bomb = lz4_exact(&[0x1F, 0, 1, 0, 255, 255], 1 << 30).unwrap_err();
        assert!(bomb.contains("cannot decode"), "{bomb}");
    }
}
