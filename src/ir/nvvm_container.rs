//! cicc's NVVM container as seed 000 lays it out, under its own magic 0x7F4E5C7D and
//! under the older NVVM IR magic 0x1EE55A01 (which nvlink also finds 4 bytes in, after
//! four zero bytes): a 24-byte header (format, NVVM IR, debug and LLVM versions, IR
//! level, header size, end of the option pairs, end of the blob region), the (tag, value)
//! option pairs, the blob region that blob tags point into, then the IR. Every offset,
//! count and length read from the file is checked against the file before it is used.
//! No 13.5 tool writes either magic, and libNVVM 13.5 refuses both (measured): a link
//! refuses them here with the reason, `inspect` prints them.

use super::nvvm_tags::{self, Blob};
use crate::arch::{Arch, Variant};
use crate::bytes::Le;
use crate::diag::{Result, malformed};

pub const MAGIC: u32 = 0x7F4E_5C7D;
pub const LEGACY_MAGIC: u32 = 0x1EE5_5A01;
use super::header::{HEADER, RawHeader};

/// The versions cicc 13.0 writes (seed 000): another major is refused, a newer minor
/// read with a warning.
pub const KNOWN_CONTAINER: (u8, u8) = (1, 0x41);
pub const KNOWN_NVVM_IR: (u8, u8) = (2, 0x62);
pub const KNOWN_DEBUG: (u8, u8) = (3, 2);
/// The newest LLVM version the gate lets through, as major * 100 + minor (LLVM 20.0).
pub const MAX_LLVM: u32 = 2000;
/// The four version pairs as cicc 13.0 writes them, in header order.
pub const VERSIONS: [u8; 8] = [1, 0x41, 2, 0x62, 3, 2, 20, 0];

/// One option pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tag {
    pub tag: u16,
    pub value: u32,
    /// File offset of the pair.
    pub at: u64,
    /// For a blob tag: the file offset and length of its data.
    pub blob: Option<(u64, u64)>,
}

impl Tag {
    pub fn name(&self) -> Option<&'static str> {
        nvvm_tags::name(self.tag)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload {
    /// LLVM bitcode (or its wrapper), checked block by block.
    Bitcode,
    /// Compressed with the codec tag 99 names (its value also guards the payload).
    Compressed(u32),
}

#[derive(Clone, Debug)]
pub struct NvvmContainer {
    pub magic: u32,
    /// File offset of the magic: 0, or 4 in the padded form.
    pub base: u64,
    pub version: (u8, u8),
    pub nvvm_ir_version: (u8, u8),
    pub debug_version: (u8, u8),
    pub llvm_version: (u8, u8),
    pub ir_level: u16,
    pub header_size: u16,
    /// End of the option pairs = start of the blob region (from the magic).
    pub scalar_end: u32,
    /// End of the blob region = start of the IR (from the magic).
    pub blob_end: u32,
    pub tags: Vec<Tag>,
    /// File offset and length of the IR payload.
    pub ir_offset: u64,
    pub ir_size: u64,
    pub payload: Payload,
    /// The version gate's warnings (newer minors).
    pub warnings: Vec<String>,
}

/// True when `data` starts with an NVVM container's magic, plain or padded.
pub fn sniff(data: &[u8]) -> bool {
    matches!(data.u32_at(0), Some(MAGIC | LEGACY_MAGIC))
        || data.u32_at(0) == Some(0) && data.u32_at(4) == Some(LEGACY_MAGIC)
}

impl NvvmContainer {
    pub fn tag(&self, t: u16) -> Option<u32> {
        self.tags.iter().find(|x| x.tag == t).map(|x| x.value)
    }

    /// The target: SmMajor and SmMinor (tags 1, 2), `a` when AcceleratedArch (22 or
    /// 32) is set; `None` when the container does not record it.
    pub fn target(&self) -> Option<Arch> {
        let sm = self.tag(1)?.checked_mul(10)?.checked_add(self.tag(2)?)?;
        let accelerated = [22, 32].iter().any(|&t| self.tag(t).unwrap_or(0) != 0);
        let variant = if accelerated {
            Variant::Accelerated
        } else {
            Variant::Plain
        };
        Some(Arch::new(sm, variant))
    }

    /// "NVVM container (0x1ee55a01)", with the padding when there is one.
    pub fn format_name(&self) -> String {
        let pad = if self.base != 0 { ", 4 bytes in" } else { "" };
        format!("NVVM container ({:#010x}{pad})", self.magic)
    }

    pub fn ir_level_name(&self) -> String {
        nvvm_tags::ir_level(self.ir_level)
            .map(str::to_string)
            .unwrap_or_else(|| format!("unknown IR level {}", self.ir_level))
    }

    /// What `inspect` prints: the header, the option pairs by name, the payload.
    pub fn lines(&self) -> Vec<String> {
        let pair = |(a, b): (u8, u8)| format!("{a}.{b}");
        let mut l = vec![format!(
            "{} {}, NVVM IR {}, debug {}, LLVM {}, IR level {} ({}), target {}",
            self.format_name(),
            pair(self.version),
            pair(self.nvvm_ir_version),
            pair(self.debug_version),
            pair(self.llvm_version),
            self.ir_level_name(),
            self.ir_level,
            self.target()
                .map(|a| a.to_string())
                .unwrap_or_else(|| "not recorded".into())
        )];
        let tags: Vec<String> = self
            .tags
            .iter()
            .map(|t| {
                let name = t
                    .name()
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("tag {}", t.tag));
                match t.blob {
                    Some((at, n)) => format!("{name}=[{n} bytes at {at:#x}]"),
                    None => format!("{name}={}", t.value),
                }
            })
            .collect();
        l.push(format!("options: {}", tags.join(" ")));
        l.push(match self.payload {
            Payload::Bitcode => format!(
                "IR: {} bytes of LLVM bitcode at {:#x}",
                self.ir_size, self.ir_offset
            ),
            Payload::Compressed(a) => format!(
                "IR: {} bytes at {:#x}, compressed (CompressAlgoId {a:#010x})",
                self.ir_size, self.ir_offset
            ),
        });
        l.push("libNVVM 13.5 does not read NVVM containers: a link refuses this file".into());
        l.extend(self.warnings.iter().map(|w| format!("warning: {w}")));
        l
    }
}

/// Reads an NVVM container (`data` is the whole file; `origin` names it in errors).
pub fn parse(data: &[u8], origin: &str) -> Result<NvvmContainer> {
    let base: usize = if data.u32_at(0) == Some(0) { 4 } else { 0 };
    let magic = data.u32_at(base).unwrap_or(0);
    if !sniff(data) {
        let found = data
            .u32_at(0)
            .map(|m| format!("{m:#010x}"))
            .unwrap_or_else(|| format!("{} bytes", data.len()));
        return Err(malformed(
            origin,
            0,
            format!("expected an NVVM container magic (0x7f4e5c7d or 0x1ee55a01), found {found}"),
        ));
    }
    let h = &data[base..];
    // a file offset from an offset in the container
    let at = |rel: u64| base as u64 + rel;
    let err = |rel: u64, what: String| malformed(origin, at(rel), what);
    let Some(raw) = RawHeader::read(h) else {
        return Err(err(
            0,
            format!(
                "NVVM container header needs 24 bytes, {} follow the magic's start",
                h.len()
            ),
        ));
    };
    let [version, nvvm_ir_version, debug_version, llvm_version] = raw.versions;
    let mut warnings = Vec::new();
    for (what, off, have, known) in [
        ("container", 4, version, KNOWN_CONTAINER),
        ("NVVM IR", 6, nvvm_ir_version, KNOWN_NVVM_IR),
        ("NVVM debug", 8, debug_version, KNOWN_DEBUG),
    ] {
        if have.0 != known.0 {
            return Err(err(
                off,
                format!(
                    "{what} major version {} not compatible (NVVM containers have {})",
                    have.0, known.0
                ),
            ));
        }
        if have.1 > known.1 {
            warnings.push(format!(
                "'{origin}': {what} minor version {} newer than cicc 13.0's ({}); reading it anyway",
                have.1, known.1
            ));
        }
    }
    let llvm = llvm_version.0 as u32 * 100 + llvm_version.1 as u32;
    if llvm > MAX_LLVM {
        return Err(err(
            10,
            format!(
                "LLVM version {}.{} not compatible (the newest an NVVM container may carry is 20.0)",
                llvm_version.0, llvm_version.1
            ),
        ));
    }
    let [ir_level, header_size] = raw.halves;
    let [scalar_end, blob_end] = raw.words;
    let len = h.len() as u64;
    if (header_size as usize) < HEADER || header_size as u64 > len {
        return Err(err(
            0x0E,
            format!("header size {header_size} is not between 24 and the container's {len} bytes"),
        ));
    }
    if (scalar_end as u64) < header_size as u64 || scalar_end as u64 > len {
        return Err(err(
            0x10,
            format!(
                "end of the option pairs {scalar_end} is not between the header size {header_size} and the container's {len} bytes"
            ),
        ));
    }
    if (blob_end as u64) < scalar_end as u64 || blob_end as u64 > len {
        return Err(err(
            0x14,
            format!(
                "end of the blob region {blob_end} is not between the end of the option pairs {scalar_end} and the container's {len} bytes"
            ),
        ));
    }
    if blob_end as u64 == len {
        return Err(err(
            0x14,
            format!("no IR follows the blob region (it ends at the container's end, {len})"),
        ));
    }
    let mut tags = read_pairs(h, header_size as usize, scalar_end as usize, &err)?;
    let selected = tags.iter().find(|t| t.tag == 301).map(|t| t.value);
    for t in tags.iter_mut() {
        // tags 401 and 402 point at data only when tag 301 selects them
        let shape = match (t.tag, selected) {
            (401, s) if s != Some(1) => None,
            (402, s) if s != Some(4) => None,
            _ => nvvm_tags::blob(t.tag),
        };
        if let Some(shape) = shape {
            let (start, n) = blob(h, scalar_end, blob_end, t, shape).map_err(|what| {
                let name = t.name().unwrap_or("?");
                err(t.at, format!("tag {} ({name}) {what}", t.tag))
            })?;
            t.blob = Some((at(start), n));
        }
        t.at = at(t.at);
    }
    let ir = &h[blob_end as usize..];
    let payload = match tags.iter().find(|t| t.tag == 99) {
        Some(t) => Payload::Compressed(t.value),
        None if super::is_bitcode(ir) => {
            super::payload::check(ir, None, at(blob_end as u64), origin)?;
            Payload::Bitcode
        }
        None => {
            return Err(err(
                blob_end as u64,
                "the IR is not LLVM bitcode, and no CompressAlgoId (tag 99) marks it compressed"
                    .into(),
            ));
        }
    };
    Ok(NvvmContainer {
        magic,
        base: base as u64,
        version,
        nvvm_ir_version,
        debug_version,
        llvm_version,
        ir_level,
        header_size,
        scalar_end,
        blob_end,
        tags,
        ir_offset: at(blob_end as u64),
        ir_size: ir.len() as u64,
        payload,
        warnings,
    })
}

/// Writes a container as cicc's serializer lays it out: the header (`versions` are the
/// four version pairs, header size 24), the pairs (a value over 0xFFFE in the 8-byte
/// form), the 0 terminator, zeros to a 4-byte boundary, `blobs` (which blob tags' values
/// index), then `ir`. For tests and fuzz corpora; prepend four zero bytes for the padded
/// form.
pub fn write(
    magic: u32,
    versions: [u8; 8],
    ir_level: u16,
    tags: &[(u16, u32)],
    blobs: &[u8],
    ir: &[u8],
) -> Vec<u8> {
    let mut pairs = Vec::new();
    for &(t, v) in tags {
        pairs.extend_from_slice(&t.to_le_bytes());
        if v < 0xFFFF {
            pairs.extend_from_slice(&(v as u16).to_le_bytes());
        } else {
            pairs.extend_from_slice(&0xFFFFu16.to_le_bytes());
            pairs.extend_from_slice(&v.to_le_bytes());
        }
    }
    pairs.extend_from_slice(&[0, 0]);
    while !pairs.len().is_multiple_of(4) {
        pairs.push(0);
    }
    let scalar_end = (HEADER + pairs.len()) as u32;
    let mut d = magic.to_le_bytes().to_vec();
    d.extend_from_slice(&versions);
    d.extend_from_slice(&ir_level.to_le_bytes());
    d.extend_from_slice(&(HEADER as u16).to_le_bytes());
    d.extend_from_slice(&scalar_end.to_le_bytes());
    d.extend_from_slice(&(scalar_end + blobs.len() as u32).to_le_bytes());
    d.extend_from_slice(&pairs);
    d.extend_from_slice(blobs);
    d.extend_from_slice(ir);
    d
}

/// The (tag, value) pairs in `h[from..end]` up to the 0 terminator, offsets from the
/// start of `h` (the LTO IR container's pairs are read the same way).
pub(crate) fn read_pairs(
    h: &[u8],
    from: usize,
    end: usize,
    err: &dyn Fn(u64, String) -> crate::diag::Error,
) -> Result<Vec<Tag>> {
    let mut tags = Vec::new();
    let mut i = from;
    while i + 2 <= end {
        let tag = h.u16_at(i).unwrap_or(0);
        if tag == 0 {
            return Ok(tags);
        }
        let short = h
            .u16_at(i + 2)
            .filter(|_| i + 4 <= end)
            .ok_or_else(|| err(i as u64, format!("value of tag {tag} cut short")))?;
        let (value, step) = if short == 0xFFFF {
            let v = h
                .u32_at(i + 4)
                .filter(|_| i + 8 <= end)
                .ok_or_else(|| err(i as u64, format!("32-bit value of tag {tag} cut short")))?;
            (v, 8)
        } else {
            (short as u32, 4)
        };
        tags.push(Tag {
            tag,
            value,
            at: i as u64,
            blob: None,
        });
        i += step;
    }
    Err(err(
        i as u64,
        "option tags end without the 0 terminator".into(),
    ))
}

/// Where the data of blob tag `t` lies (offset from the magic, length), checked to lie
/// inside the blob region `[scalar_end, blob_end)`.
fn blob(
    h: &[u8],
    scalar_end: u32,
    blob_end: u32,
    t: &Tag,
    shape: Blob,
) -> std::result::Result<(u64, u64), String> {
    let (region, end) = (scalar_end as u64, blob_end as u64);
    let start = region + t.value as u64;
    let room = end.saturating_sub(start);
    let past = |n: u64| {
        format!(
            "points at blob offset {}, {n} bytes there would pass the blob region's {} bytes",
            t.value,
            end - region
        )
    };
    if start >= end {
        return Err(format!(
            "points at blob offset {}, past the blob region's {} bytes",
            t.value,
            end - region
        ));
    }
    let data = &h[start as usize..end as usize];
    let word = |n: u8| -> Option<u64> {
        match n {
            8 => data.u64_at(0),
            _ => data.u32_at(0).map(u64::from),
        }
    };
    let n: Option<u64> = match shape {
        Blob::Fixed(n) => Some(n as u64),
        Blob::Str => match data.iter().position(|&b| b == 0) {
            Some(p) => Some(p as u64 + 1),
            None => {
                return Err(format!(
                    "points at blob offset {}, a string with no NUL before the blob region's end",
                    t.value
                ));
            }
        },
        Blob::Counted { count_bytes, per } => word(count_bytes)
            .and_then(|c| c.checked_mul(per as u64))
            .and_then(|x| x.checked_add(count_bytes as u64)),
        Blob::Headed { head, per } => word(4)
            .and_then(|c| c.checked_mul(per as u64))
            .and_then(|x| x.checked_add(head as u64)),
        Blob::Prefixed => word(4).map(|x| x + 4),
    };
    match n {
        Some(n) if n <= room => Ok((start, n)),
        Some(n) => Err(past(n)),
        // the count itself is cut off, or the size overflows
        None => Err(format!(
            "points at blob offset {}, whose size does not fit in the blob region's {} bytes",
            t.value,
            end - region
        )),
    }
}

#[cfg(test)]
pub(crate) mod tests;
