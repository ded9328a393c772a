//! `.nv.info` records (and `.nv.compat`, which uses the same encoding): 4-byte aligned
//! TLVs `u8 format, u8 attribute, u16 value-or-length`, parsed into values the merge can
//! rewrite, and encoded back. Records the linker does not interpret are carried as bytes.

use crate::bytes::Le;
use crate::diag::{Result, malformed};

pub const FMT_NVAL: u8 = 1;
pub const FMT_BVAL: u8 = 2;
pub const FMT_HVAL: u8 = 3;
pub const FMT_SVAL: u8 = 4;

pub const PARAM_CBANK: u8 = 0x0A;
pub const EXTERNS: u8 = 0x0F;
pub const FRAME_SIZE: u8 = 0x11;
pub const MIN_STACK_SIZE: u8 = 0x12;
pub const CRS_STACK_SIZE: u8 = 0x1E;
pub const MAX_STACK_SIZE: u8 = 0x23;
pub const REGCOUNT: u8 = 0x2F;
pub const NUM_BARRIERS: u8 = 0x4C;
/// `EIATTR_NUM_MBARRIERS` (a function's memory barriers; 0xffff: not known statically).
pub const NUM_MBARRIERS: u8 = 0x38;

/// A record's bytes: eight inline (the common symbol-and-value records allocate
/// nothing; a link parses and rewrites a record per function several times).
pub type Payload = smallvec::SmallVec<[u8; 8]>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub format: u8,
    pub attr: u8,
    /// The 16-bit head value (BVAL/HVAL value; SVAL length is implied by `payload`).
    pub value: u16,
    pub payload: Payload,
}

impl Record {
    pub fn sval(attr: u8, payload: impl Into<Payload>) -> Record {
        let payload = payload.into();
        Record {
            format: FMT_SVAL,
            attr,
            value: payload.len() as u16,
            payload,
        }
    }

    /// `(symbol, value)` of the per-function global records (FRAME_SIZE, REGCOUNT, ...).
    pub fn sym_value(&self) -> Option<(u32, u32)> {
        if self.format != FMT_SVAL || self.payload.len() != 8 {
            return None;
        }
        Some((self.payload.u32_at(0)?, self.payload.u32_at(4)?))
    }

    /// A record without payload: its value in the head (`FMT_NVAL`, `FMT_BVAL`, `FMT_HVAL`).
    pub fn head(format: u8, attr: u8, value: u16) -> Record {
        Record {
            format,
            attr,
            value,
            payload: Payload::new(),
        }
    }

    pub fn sym_pair(attr: u8, sym: u32, value: u32) -> Record {
        let mut p = Payload::from_slice(&sym.to_le_bytes());
        p.extend_from_slice(&value.to_le_bytes());
        Record::sval(attr, p)
    }

    /// Whether the record's payload starts with a symbol index the merge must remap.
    pub fn has_symbol(&self) -> bool {
        self.format == FMT_SVAL
            && matches!(
                self.attr,
                FRAME_SIZE | MIN_STACK_SIZE | MAX_STACK_SIZE | REGCOUNT | PARAM_CBANK
            )
            && self.payload.len() >= 4
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.format);
        out.push(self.attr);
        if self.format == FMT_SVAL {
            out.extend_from_slice(&(self.payload.len() as u16).to_le_bytes());
            out.extend_from_slice(&self.payload);
            while !out.len().is_multiple_of(4) {
                out.push(0);
            }
        } else {
            out.extend_from_slice(&self.value.to_le_bytes());
        }
    }
}

pub fn encode_all(records: &[Record]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        r.encode(&mut out);
    }
    out
}

/// Parses a whole record section. `origin`, `section` and `base` (the section's file
/// offset) name the place of a bad record.
pub fn parse(d: &[u8], origin: &str, section: &str, base: u64) -> Result<Vec<Record>> {
    // (most records are 4 or 12 bytes: one allocation for a section's list)
    let mut out = Vec::with_capacity(d.len() / 8 + 1);
    let mut i = 0usize;
    while i < d.len() {
        let at = i;
        let bad = |what: &str| malformed(origin, base + at as u64, format!("{section}: {what}"));
        let (Some(format), Some(attr), Some(value)) = (d.u8_at(i), d.u8_at(i + 1), d.u16_at(i + 2))
        else {
            return Err(bad("record cut short"));
        };
        let mut r = Record {
            format,
            attr,
            value,
            payload: Payload::new(),
        };
        i += 4;
        match format {
            FMT_NVAL | FMT_BVAL | FMT_HVAL => {}
            FMT_SVAL => {
                let end = i + value as usize;
                r.payload = Payload::from_slice(
                    d.get(i..end)
                        .ok_or_else(|| bad("record payload passes the end of the section"))?,
                );
                i = end.next_multiple_of(4);
            }
            f => return Err(bad(&format!("record format {f} is not 1..4"))),
        }
        out.push(r);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_truncation() {
        let d = [
            4u8, 0x2F, 8, 0, 1, 0, 0, 0, 24, 0, 0, 0, 3, 0x5F, 1, 1, 2, 0x4C, 1, 0,
        ];
        let r = parse(&d, "a.cubin", ".nv.info", 0).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].sym_value(), Some((1, 24)));
        assert_eq!(encode_all(&r), d);
        let e = parse(&d[..6], "a.cubin", ".nv.info", 0x100).unwrap_err();
        assert!(e.message().contains("0x100"), "{e}");
    }
}
