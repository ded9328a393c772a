//! NVIDIA's IR containers: the LTO IR container of CUDA 13.x (`.ltoir`, magic
//! 0x7F4E43ED), read here, and cicc's NVVM container (0x7F4E5C7D, or the older NVVM IR
//! magic 0x1EE55A01, also 4 bytes in), read by [`super::nvvm_container`]. Both have a
//! 24-byte header with version pairs, then (tag, value) option pairs, an option-data
//! region and the IR; this module tells them apart and gives both one summary.

use crate::arch::{Arch, Variant};
use crate::bytes::Le;
use crate::diag::{Result, malformed};
use crate::ir::nvvm_container::NvvmContainer;

pub const LTOIR_MAGIC: u32 = 0x7F4E_43ED;
pub const NVVM_CONTAINER_MAGIC: u32 = 0x7F4E_5C7D;
pub const NVVM_IR_MAGIC: u32 = 0x1EE5_5A01;
use super::header::{HEADER, RawHeader};

/// The newest versions this build knows (CUDA 13.5): a container with the same major
/// and a newer minor is read with a warning; another major is refused.
pub const KNOWN_CONTAINER: (u8, u8) = (1, 0x43);
pub const KNOWN_NVVM_IR: (u8, u8) = (2, 0x83);
pub const KNOWN_DEBUG: (u8, u8) = (3, 2);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IrFormat {
    /// `0x7F4E43ED`, what cicc 13.x writes for `-dlto` / `lto_NN`.
    LtoIr,
    /// `0x7F4E5C7D`, cicc's NVVM container.
    NvvmContainer,
    /// `0x1EE55A01` at offset 0 or 4: the NVVM container under the older magic.
    LegacyNvvm,
}

impl IrFormat {
    pub fn name(self) -> &'static str {
        match self {
            IrFormat::LtoIr => "LTO IR container (0x7f4e43ed)",
            IrFormat::NvvmContainer => "NVVM container (0x7f4e5c7d)",
            IrFormat::LegacyNvvm => "NVVM IR (0x1ee55a01)",
        }
    }
}

/// Which IR format, if any, `data` starts with.
pub fn sniff(data: &[u8]) -> Option<IrFormat> {
    match data.u32_at(0)? {
        LTOIR_MAGIC => Some(IrFormat::LtoIr),
        NVVM_CONTAINER_MAGIC => Some(IrFormat::NvvmContainer),
        NVVM_IR_MAGIC => Some(IrFormat::LegacyNvvm),
        0 if data.u32_at(4) == Some(NVVM_IR_MAGIC) => Some(IrFormat::LegacyNvvm),
        _ => None,
    }
}

/// libNVVM 13.5's gate on an LTO IR container's LLVM version (bytes 0x0A, 0x0B), read
/// off its answers: major * 100 + minor at most 700 for a major up to 7 (13.5 writes
/// 7.0), at most 2300 for a larger one.
pub fn llvm_accepted((major, minor): (u8, u8)) -> bool {
    let v = major as u32 * 100 + minor as u32;
    v <= if major <= 7 { 700 } else { 2300 }
}

#[derive(Clone, Debug)]
pub struct IrHeader {
    pub format: IrFormat,
    pub version: (u8, u8),
    pub nvvm_ir_version: (u8, u8),
    pub debug_version: (u8, u8),
    pub llvm_version: (u8, u8),
    pub ir_level: u16,
    pub header_size: u16,
    /// End of the (tag, value) pairs = start of the option data.
    pub options_end: u32,
    /// Start of the IR payload.
    pub ir_offset: u32,
    pub tags: Vec<(u16, u32)>,
    /// The 4-byte content key (tag 99 points at it in the option data).
    pub key: Option<u32>,
    pub ir_size: u64,
    /// True when the payload is plain LLVM bitcode (`BC C0 DE`); cicc's files carry an
    /// obfuscated payload that only libNVVM reads.
    pub plain_bitcode: bool,
    /// The whole reading of an NVVM container (0x7F4E5C7D, 0x1EE55A01).
    pub nvvm: Option<Box<NvvmContainer>>,
}

impl IrHeader {
    pub fn tag(&self, t: u16) -> Option<u32> {
        self.tags.iter().find(|(k, _)| *k == t).map(|&(_, v)| v)
    }

    /// The target of an LTO IR container: tag 1 holds the SM number times ten, tag 0x20
    /// marks an `a` (architecture-specific) target. An NVVM container's is its own.
    pub fn arch(&self) -> Option<Arch> {
        if let Some(c) = &self.nvvm {
            return c.target();
        }
        if self.format != IrFormat::LtoIr {
            return None;
        }
        let sm = self.tag(1)? / 10;
        let variant = if self.tag(0x20).unwrap_or(0) != 0 {
            Variant::Accelerated
        } else {
            Variant::Plain
        };
        Some(Arch::new(sm, variant))
    }
}

/// Parses the container header and checks its IR payload ([`super::payload`]); returns
/// the header and the warnings of the version gate (what `inspect` reads).
pub fn parse(data: &[u8], origin: &str) -> Result<(IrHeader, Vec<String>)> {
    let (hdr, warnings) = parse_header(data, origin)?;
    // the payload: plain bitcode, or cicc's scrambled with the key
    let key = match (hdr.plain_bitcode, hdr.format, hdr.key) {
        (true, _, _) => Some(None),
        (false, IrFormat::LtoIr, Some(k)) => Some(Some(k)),
        _ => None,
    };
    // (an NVVM container's payload was checked as it was read)
    if let Some(key) = key.filter(|_| hdr.nvvm.is_none()) {
        let at = hdr.ir_offset;
        super::payload::check(&data[at as usize..], key, at as u64, origin)?;
    }
    Ok((hdr, warnings))
}

/// As [`parse`], without the payload (what a link checks before libNVVM reads the
/// module: a payload libNVVM cannot read it reports itself, as to nvlink).
pub fn parse_header(data: &[u8], origin: &str) -> Result<(IrHeader, Vec<String>)> {
    header(data, origin, true)
}

/// What a link checks before libNVVM reads a module: the header as [`parse_header`]
/// reads it (a header size or option-data offset past the end crashed libNVVM, and
/// nvlink with it), but an IR offset outside the file is let through: libNVVM does not
/// read it, and nvlink 13.5 links such a module. An NVVM container is refused whole
/// after it is read: libNVVM 13.5 refuses both its magics (NVVM_ERROR_INVALID_INPUT
/// from the entry nvlink adds modules with), so the reason is given here instead.
pub fn check_for_link(data: &[u8], origin: &str) -> Result<()> {
    let (h, _) = header(data, origin, false)?;
    match h.nvvm {
        Some(c) => Err(malformed(
            origin,
            c.base,
            format!(
                "{} for {}: libNVVM 13.5 reads only LTO IR containers (0x7f4e43ed) and refuses this one",
                c.format_name(),
                c.target()
                    .map(|a| a.to_string())
                    .unwrap_or_else(|| "no recorded target".into())
            ),
        )),
        None => Ok(()),
    }
}

/// An NVVM container's reading as the summary the LTO IR container has.
fn nvvm_summary(format: IrFormat, c: NvvmContainer, data: &[u8]) -> IrHeader {
    let ir = c.ir_offset as usize;
    IrHeader {
        format,
        version: c.version,
        nvvm_ir_version: c.nvvm_ir_version,
        debug_version: c.debug_version,
        llvm_version: c.llvm_version,
        ir_level: c.ir_level,
        header_size: c.header_size,
        options_end: c.scalar_end,
        ir_offset: u32::try_from(ir).unwrap_or(u32::MAX),
        tags: c.tags.iter().map(|t| (t.tag, t.value)).collect(),
        key: None,
        ir_size: c.ir_size,
        plain_bitcode: data[ir..].starts_with(b"BC\xc0\xde"),
        nvvm: Some(Box::new(c)),
    }
}

fn header(data: &[u8], origin: &str, strict_ir: bool) -> Result<(IrHeader, Vec<String>)> {
    let Some(format) = sniff(data) else {
        let found = data
            .u32_at(0)
            .map(|m| format!("{m:#010x}"))
            .unwrap_or_else(|| format!("{} bytes", data.len()));
        return Err(malformed(
            origin,
            0,
            format!(
                "expected an NVVM/LTO IR magic (0x7f4e43ed, 0x7f4e5c7d or 0x1ee55a01), found {found}"
            ),
        ));
    };
    if format != IrFormat::LtoIr {
        let c = super::nvvm_container::parse(data, origin)?;
        let warnings = c.warnings.clone();
        return Ok((nvvm_summary(format, c, data), warnings));
    }
    let Some(raw) = RawHeader::read(data) else {
        return Err(malformed(
            origin,
            0,
            format!(
                "IR container header needs 24 bytes, file has {}",
                data.len()
            ),
        ));
    };
    let [version, nvvm_ir_version, debug_version, llvm_version] = raw.versions;
    // The 13.5 LTO IR container stores the header size at 0x0C and the IR level at 0x0E
    // (verified); cicc's NVVM container, as documented, the other way round.
    let [header_size, ir_level] = raw.halves;
    let [options_end, ir_offset] = raw.words;
    let len = data.len() as u64;
    if (header_size as usize) < HEADER || header_size as u64 > len {
        return Err(malformed(
            origin,
            0x0C,
            format!("header size {header_size} is not between 24 and the file size {len}"),
        ));
    }
    if (options_end as u64) < header_size as u64 || options_end as u64 > len {
        return Err(malformed(
            origin,
            0x10,
            format!(
                "option-data offset {options_end} is not between the header end {header_size} and the file size {len}"
            ),
        ));
    }
    let ir_inside = (options_end as u64..=len).contains(&(ir_offset as u64));
    if !ir_inside && strict_ir {
        return Err(malformed(
            origin,
            0x14,
            format!(
                "IR offset {ir_offset} is not between the option-data offset {options_end} and the file size {len}"
            ),
        ));
    }
    let ir_offset = if ir_inside {
        ir_offset
    } else {
        len.min(u32::MAX as u64) as u32
    };

    let versions = [
        ("container", 4, version, KNOWN_CONTAINER),
        ("NVVM IR", 6, nvvm_ir_version, KNOWN_NVVM_IR),
        ("NVVM debug", 8, debug_version, KNOWN_DEBUG),
    ];
    let warnings = version_gate(origin, &versions, llvm_version, strict_ir)?;

    let err = |at: u64, what: String| malformed(origin, at, what);
    let tags =
        super::nvvm_container::read_pairs(data, header_size as usize, options_end as usize, &err)?
            .into_iter()
            .map(|t| (t.tag, t.value))
            .collect();
    let mut hdr = IrHeader {
        format,
        version,
        nvvm_ir_version,
        debug_version,
        llvm_version,
        ir_level,
        header_size,
        options_end,
        ir_offset,
        tags,
        key: None,
        ir_size: len - ir_offset as u64,
        plain_bitcode: data[ir_offset as usize..].starts_with(b"BC\xc0\xde"),
        nvvm: None,
    };
    if let Some(k) = hdr.tag(99) {
        let at = options_end as u64 + k as u64;
        let key = (at + 4 <= ir_offset as u64)
            .then(|| data.u32_at(at as usize))
            .flatten();
        hdr.key =
            Some(key.ok_or_else(|| malformed(origin, at, "tag 99 points past the option data"))?);
    }
    Ok((hdr, warnings))
}

/// libNVVM 13.5's gate on a container's versions (`versions`: what, offset, found,
/// known): a major version it does not read is refused; a newer minor or an LLVM version
/// it does not pass is refused by a link (`strict_ir` false) and a warning for `inspect`.
fn version_gate(
    origin: &str,
    versions: &[(&str, u64, (u8, u8), (u8, u8))],
    llvm_version: (u8, u8),
    strict_ir: bool,
) -> Result<Vec<String>> {
    let mut gate_errors = Vec::new();
    let mut warnings = Vec::new();
    // libNVVM 13.5 refuses a newer minor and an LLVM version its gate does not pass
    // (measured through the entry nvlink adds modules with): `inspect` reads such a
    // container with a warning, a link refuses it here with the field
    let mut refused = Vec::new();
    for &(what, at, have, known) in versions {
        if have.0 != known.0 {
            gate_errors.push(format!(
                "{what} major version {} not compatible (this nvlinkrs reads {})",
                have.0, known.0
            ));
        } else if have.1 > known.1 {
            refused.push((
                at + 1,
                format!(
                    "{what} minor version {} newer than libNVVM 13.5's ({})",
                    have.1, known.1
                ),
            ));
        }
    }
    if !gate_errors.is_empty() {
        return Err(malformed(origin, 4, gate_errors.join("; ")));
    }
    if !llvm_accepted(llvm_version) {
        refused.push((
            0x0A,
            format!(
                "LLVM version {}.{} not accepted by libNVVM 13.5",
                llvm_version.0, llvm_version.1
            ),
        ));
    }
    if let Some((at, what)) = refused.first().filter(|_| !strict_ir) {
        return Err(malformed(
            origin,
            *at,
            format!("{what}, which refuses the module"),
        ));
    }
    warnings.extend(
        refused
            .into_iter()
            .map(|(_, what)| format!("'{origin}': {what}; a link refuses it")),
    );
    Ok(warnings)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A 13.5-style LTO IR container for sm_`sm`.
    pub fn build(sm: u32, accelerated: bool, ir: &[u8]) -> Vec<u8> {
        let mut d = Vec::new();
        d.extend_from_slice(&LTOIR_MAGIC.to_le_bytes());
        d.extend_from_slice(&[1, 0x43, 2, 0x83, 3, 2, 7, 0]);
        d.extend_from_slice(&24u16.to_le_bytes());
        d.extend_from_slice(&1u16.to_le_bytes());
        let mut tags: Vec<(u16, u16)> = vec![(1, (sm * 10) as u16), (2, 2)];
        if accelerated {
            tags.push((0x20, 1));
        }
        tags.push((99, 0));
        tags.push((0, 0));
        let opt_end = 24 + 4 * tags.len() as u32;
        d.extend_from_slice(&opt_end.to_le_bytes());
        d.extend_from_slice(&(opt_end + 4).to_le_bytes());
        for (t, v) in tags {
            d.extend_from_slice(&t.to_le_bytes());
            d.extend_from_slice(&v.to_le_bytes());
        }
        d.extend_from_slice(&0xAABBCCDDu32.to_le_bytes());
        d.extend_from_slice(ir);
        d
    }

    /// A payload as cicc stores it: bitcode scrambled with `build`'s key.
    pub fn scrambled_ir() -> Vec<u8> {
        let mut ir = super::super::payload::tests::bitcode(2);
        super::super::obfuscation::scramble(&mut ir, 0xAABBCCDD);
        ir
    }

    #[test]
    fn reads_arch_key_and_payload() {
        let ir = super::super::payload::tests::bitcode(1);
        let d = build(90, true, &ir);
        let (h, w) = parse(&d, "c.ltoir").unwrap();
        assert!(w.is_empty());
        assert_eq!(h.arch().unwrap().to_string(), "sm_90a");
        assert_eq!(h.key, Some(0xAABBCCDD));
        assert!(h.plain_bitcode);
        assert_eq!(h.ir_size, ir.len() as u64);
        let d = build(90, true, &scrambled_ir());
        assert!(!parse(&d, "c.ltoir").unwrap().0.plain_bitcode);
        // a payload cut short, or not bitcode, is refused with its offset
        for bad in [&d[..d.len() - 3], &build(90, true, b"x")[..]] {
            let e = parse(bad, "c.ltoir").unwrap_err();
            assert!(
                e.message().contains("'c.ltoir' at offset 0x"),
                "{}",
                e.message()
            );
        }
    }

    #[test]
    fn version_gate() {
        let mut d = build(90, false, &scrambled_ir());
        d[5] = 0x50; // newer container minor: a warning, refused by a link
        let (_, w) = parse(&d, "c.ltoir").unwrap();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("newer than libNVVM 13.5's (67); a link refuses it"));
        let e = check_for_link(&d, "c.ltoir").unwrap_err();
        assert!(
            e.message().starts_with(
                "'c.ltoir' at offset 0x5: container minor version 80 newer than libNVVM 13.5's (67), which refuses"
            ),
            "{}",
            e.message()
        );
        d[5] = 0x43;
        d[10] = 8; // LLVM 8.0: accepted
        check_for_link(&d, "c.ltoir").unwrap();
        d[11] = 1; // LLVM 7.1: refused
        d[10] = 7;
        let e = check_for_link(&d, "c.ltoir").unwrap_err();
        assert!(
            e.message()
                .contains("offset 0xa: LLVM version 7.1 not accepted")
        );
        d[5] = 0x50;
        d[6] = 3; // NVVM IR major 3: refused
        let e = parse(&d, "c.ltoir").unwrap_err();
        assert!(
            e.message()
                .contains("NVVM IR major version 3 not compatible"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn llvm_gate_as_libnvvm_answered() {
        // (major, minor, libNVVM 13.5 took it), from its answers on saxpy's container
        for (major, minor, took) in [
            (0, 0, true),
            (1, 99, true),
            (6, 99, true),
            (7, 0, true),
            (7, 1, false),
            (5, 255, false),
            (6, 255, false),
            (8, 0, true),
            (8, 255, true),
            (20, 255, true),
            (21, 200, true),
            (21, 201, false),
            (23, 0, true),
            (23, 1, false),
            (24, 0, false),
            (99, 0, false),
            (255, 0, false),
        ] {
            assert_eq!(llvm_accepted((major, minor)), took, "{major}.{minor}");
        }
    }

    #[test]
    fn every_cut_fails_cleanly() {
        let d = build(100, false, b"");
        for n in 0..d.len() {
            assert!(parse(&d[..n], "cut.ltoir").is_err(), "cut at {n}");
        }
    }

    #[test]
    fn legacy_magics_are_sniffed() {
        assert_eq!(sniff(&[1, 0x5a, 0xe5, 0x1e]), Some(IrFormat::LegacyNvvm));
        assert_eq!(
            sniff(&[0, 0, 0, 0, 1, 0x5a, 0xe5, 0x1e]),
            Some(IrFormat::LegacyNvvm)
        );
        assert_eq!(
            sniff(&0x7F4E5C7Du32.to_le_bytes()),
            Some(IrFormat::NvvmContainer)
        );
        assert_eq!(sniff(b"BC\xc0\xde"), None);
    }
}
