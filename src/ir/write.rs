//! Writing NVIDIA's LTO IR container (magic 0x7F4E43ED) as CUDA 13.5's cicc writes it:
//! the 24-byte header, the (tag, value) option pairs (a value of 0xFFFF or more after the
//! 0xFFFF escape), the option data holding the 4-byte key that tag 99 points at, and the
//! IR. [`LtoIr::read`] takes apart every container [`super::container::parse`] accepts
//! into fields that [`LtoIr::write`] puts back byte for byte (a pair written long though
//! its value fits 16 bits, bytes after the terminator, a header longer than 24 bytes, a
//! key anywhere in the option data are all kept); [`LtoIr::new`] makes the form cicc
//! writes, with key 0 and plain bitcode (what libNVVM reads without unscrambling), and
//! [`LtoIr::scramble`] scrambles the payload with a key on request.

use crate::arch::{Arch, Variant};
use crate::diag::{Result, malformed};
use crate::ir::container::{self, IrFormat, KNOWN_CONTAINER, KNOWN_DEBUG, KNOWN_NVVM_IR};

/// One option pair as stored: `wide` when the value came after the 0xFFFF escape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pair {
    pub tag: u16,
    pub value: u32,
    pub wide: bool,
}

impl Pair {
    /// A pair in the form cicc writes: short when the value fits below 0xFFFF.
    pub fn new(tag: u16, value: u32) -> Pair {
        Pair {
            tag,
            value,
            wide: value >= 0xFFFF,
        }
    }
}

/// An LTO IR container taken apart into what its bytes say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LtoIr {
    pub version: (u8, u8),
    pub nvvm_ir_version: (u8, u8),
    pub debug_version: (u8, u8),
    pub llvm_version: (u8, u8),
    pub ir_level: u16,
    /// Header bytes past the first 24 (none in what cicc writes).
    pub header_extra: Vec<u8>,
    /// The pairs before the terminator, in order.
    pub pairs: Vec<Pair>,
    /// From the terminator's tag (0) to the option data: cicc writes the terminator as
    /// a (0, 0) pair, so `[0, 0, 0, 0]`.
    pub terminator: Vec<u8>,
    /// The option data (the key, where tag 99 points).
    pub option_data: Vec<u8>,
    /// The IR: plain or scrambled bitcode.
    pub payload: Vec<u8>,
}

/// The LLVM version cicc 13.5 records for a target: 7.0 up to sm_90 (NVVM 7), 23.0 from
/// sm_100 on (the newer NVVM).
pub fn llvm_version_for(arch: Arch) -> (u8, u8) {
    if arch.sm >= 100 { (23, 0) } else { (7, 0) }
}

impl LtoIr {
    /// The container cicc 13.5 writes for `arch` around `bitcode` (plain, key 0): tags 1
    /// (SM x 10), 2 (= 2, as in every cicc file), 0x20 for an `a` target, 99 (the key at
    /// option data offset 0), then the terminator; IR level 1 (LTO).
    pub fn new(arch: Arch, bitcode: Vec<u8>) -> LtoIr {
        let mut pairs = vec![Pair::new(1, arch.sm * 10), Pair::new(2, 2)];
        if arch.variant == Variant::Accelerated {
            pairs.push(Pair::new(0x20, 1));
        }
        pairs.push(Pair::new(99, 0));
        LtoIr {
            version: KNOWN_CONTAINER,
            nvvm_ir_version: KNOWN_NVVM_IR,
            debug_version: KNOWN_DEBUG,
            llvm_version: llvm_version_for(arch),
            ir_level: 1,
            header_extra: Vec::new(),
            pairs,
            terminator: vec![0; 4],
            option_data: vec![0; 4],
            payload: bitcode,
        }
    }

    /// Takes apart a container [`container::parse`] accepts (payload checked), naming
    /// `origin` in errors; NVVM containers (0x7F4E5C7D, 0x1EE55A01) are not written here.
    pub fn read(data: &[u8], origin: &str) -> Result<LtoIr> {
        let (h, _) = container::parse(data, origin)?;
        if h.format != IrFormat::LtoIr {
            return Err(malformed(
                origin,
                0,
                format!(
                    "{}: only LTO IR containers (0x7f4e43ed) are written back",
                    h.format.name()
                ),
            ));
        }
        let (hs, oe, ir) = (
            h.header_size as usize,
            h.options_end as usize,
            h.ir_offset as usize,
        );
        // the pairs again, with their stored width (the reader checked their bounds)
        let mut pairs = Vec::with_capacity(h.tags.len());
        let mut i = hs;
        for &(tag, value) in &h.tags {
            let wide = data[i + 2..i + 4] == [0xFF, 0xFF];
            pairs.push(Pair { tag, value, wide });
            i += if wide { 8 } else { 4 };
        }
        // the terminator is inside the pair region (the reader found it there)
        if i + 2 > oe {
            return Err(malformed(
                origin,
                i as u64,
                "option tags end without the 0 terminator",
            ));
        }
        Ok(LtoIr {
            version: h.version,
            nvvm_ir_version: h.nvvm_ir_version,
            debug_version: h.debug_version,
            llvm_version: h.llvm_version,
            ir_level: h.ir_level,
            header_extra: data[24..hs].to_vec(),
            pairs,
            terminator: data[i..oe].to_vec(),
            option_data: data[oe..ir].to_vec(),
            payload: data[ir..].to_vec(),
        })
    }

    /// The value of tag `t`, if present.
    pub fn tag(&self, t: u16) -> Option<u32> {
        self.pairs.iter().find(|p| p.tag == t).map(|p| p.value)
    }

    /// The key tag 99 points at, if both are there.
    pub fn key(&self) -> Option<u32> {
        let at = self.tag(99)? as usize;
        let b = self.option_data.get(at..at.checked_add(4)?)?;
        Some(u32::from_le_bytes(b.try_into().ok()?))
    }

    /// Sets the key (adding tag 99 and room for it in the option data where missing) and
    /// scrambles the payload with it, as cicc stores its IR.
    pub fn scramble(&mut self, key: u32) {
        if self.tag(99).is_none() {
            self.pairs
                .push(Pair::new(99, self.option_data.len() as u32));
        }
        let at = self.tag(99).unwrap_or(0) as usize;
        if self.option_data.len() < at + 4 {
            self.option_data.resize(at + 4, 0);
        }
        self.option_data[at..at + 4].copy_from_slice(&key.to_le_bytes());
        super::obfuscation::scramble(&mut self.payload, key);
    }

    /// The container's bytes.
    pub fn write(&self) -> Vec<u8> {
        let pair_bytes: usize = self.pairs.iter().map(|p| if p.wide { 8 } else { 4 }).sum();
        let header_size = 24 + self.header_extra.len();
        let options_end = header_size + pair_bytes + self.terminator.len();
        let ir_offset = options_end + self.option_data.len();
        let mut d = Vec::with_capacity(ir_offset + self.payload.len());
        d.extend_from_slice(&container::LTOIR_MAGIC.to_le_bytes());
        for (a, b) in [
            self.version,
            self.nvvm_ir_version,
            self.debug_version,
            self.llvm_version,
        ] {
            d.extend_from_slice(&[a, b]);
        }
        d.extend_from_slice(&(header_size as u16).to_le_bytes());
        d.extend_from_slice(&self.ir_level.to_le_bytes());
        d.extend_from_slice(&(options_end as u32).to_le_bytes());
        d.extend_from_slice(&(ir_offset as u32).to_le_bytes());
        d.extend_from_slice(&self.header_extra);
        for p in &self.pairs {
            d.extend_from_slice(&p.tag.to_le_bytes());
            if p.wide {
                d.extend_from_slice(&[0xFF, 0xFF]);
                d.extend_from_slice(&p.value.to_le_bytes());
            } else {
                d.extend_from_slice(&(p.value as u16).to_le_bytes());
            }
        }
        d.extend_from_slice(&self.terminator);
        d.extend_from_slice(&self.option_data);
        d.extend_from_slice(&self.payload);
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_is_what_cicc_writes_around_the_same_ir() {
        // cicc's sm_90a header, as `container::tests::build` lays it out
        let ir = super::super::payload::tests::bitcode(1);
        let theirs = container::tests::build(90, true, &ir);
        let mut ours = LtoIr::new(Arch::new(90, Variant::Accelerated), ir);
        ours.option_data = 0xAABBCCDDu32.to_le_bytes().to_vec();
        assert_eq!(ours.write(), theirs);
        assert_eq!(LtoIr::read(&theirs, "t.ltoir").unwrap(), ours);
    }

    #[test]
    fn wide_pairs_and_extra_bytes_come_back() {
        let ir = super::super::payload::tests::bitcode(1);
        let mut c = LtoIr::new(Arch::new(100, Variant::Plain), ir);
        c.pairs.push(Pair::new(19, 0x12345));
        c.pairs.push(Pair {
            tag: 3,
            value: 7,
            wide: true,
        });
        c.header_extra = vec![9; 8];
        c.terminator = vec![0, 0, 1, 2, 3, 4];
        let bytes = c.write();
        let back = LtoIr::read(&bytes, "t.ltoir").unwrap();
        assert_eq!(back, c);
        assert_eq!(back.write(), bytes);
        assert_eq!(back.key(), Some(0));
    }

    #[test]
    fn scrambled_on_request_reads_back_plain() {
        let ir = super::super::payload::tests::bitcode(2);
        let mut c = LtoIr::new(Arch::new(90, Variant::Plain), ir.clone());
        c.scramble(0x22c4_7289);
        let bytes = c.write();
        let (h, _) = container::parse(&bytes, "s.ltoir").unwrap();
        assert_eq!(h.key, Some(0x22c4_7289));
        assert!(!h.plain_bitcode);
        let mut back = LtoIr::read(&bytes, "s.ltoir").unwrap().payload;
        super::super::obfuscation::unscramble(&mut back, 0x22c4_7289);
        assert_eq!(back, ir);
    }

    #[test]
    fn every_accepted_mutation_is_written_back() {
        // what the fuzz target checks, over every byte of a container with a wide pair
        // and option data past the key, each set to a few values
        let mut c = LtoIr::new(Arch::new(90, Variant::Plain), payload_bitcode());
        c.pairs.push(Pair::new(19, 0x12345));
        c.option_data.extend_from_slice(b"-ftz=0\0\0");
        let base = c.write();
        let mut accepted = 0;
        for i in 0..base.len().min(96) {
            for v in [0x00, 0x01, 0x18, 0x2C, 0x63, 0xFF] {
                let mut d = base.clone();
                d[i] = v;
                if let Ok(c) = LtoIr::read(&d, "m.ltoir") {
                    accepted += 1;
                    assert_eq!(c.write(), d, "byte {i} = {v:#x}");
                }
            }
        }
        assert!(accepted > 100, "{accepted}");
    }

    fn payload_bitcode() -> Vec<u8> {
        super::super::payload::tests::bitcode(1)
    }

    #[test]
    fn nvvm_containers_are_refused_by_name() {
        let e = LtoIr::read(&0x7F4E5C7Du32.to_le_bytes(), "n.bin").unwrap_err();
        assert!(e.message().contains("'n.bin'"), "{}", e.message());
    }
}
