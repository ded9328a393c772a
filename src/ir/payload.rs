//! The IR payload of an LTO IR container checked before libNVVM reads it: LLVM bitcode
//! (read through the container's scrambling one byte at a time where it has a key) whose
//! top-level blocks, each of which states its length, fit in the payload. A file cut
//! short, or a payload that is not bitcode, is refused with the offset instead of being
//! handed to libNVVM (which reports a parse error, or crashes).

use crate::diag::{Result, malformed};

/// LLVM bitcode's magic, `BC C0 DE`.
const MAGIC: [u8; 4] = [0x42, 0x43, 0xC0, 0xDE];
/// The bitcode wrapper's magic (0x0B17C0DE), with its offset and size of the bitcode.
const WRAPPER: [u8; 4] = [0xDE, 0xC0, 0x17, 0x0B];

/// Checks the payload `ir` found at `base` in `origin`; `key` unscrambles it.
pub fn check(ir: &[u8], key: Option<u32>, base: u64, origin: &str) -> Result<()> {
    let byte = |i: usize| match key {
        Some(k) => super::obfuscation::unscrambled_at(ir, k, i),
        None => ir.get(i).copied(),
    };
    let word = |i: usize| -> Option<u32> {
        Some(u32::from_le_bytes([
            byte(i)?,
            byte(i + 1)?,
            byte(i + 2)?,
            byte(i + 3)?,
        ]))
    };
    let bad = |at: usize, what: String| Err(malformed(origin, base + at as u64, what));
    let head = word(0).map(u32::to_le_bytes);
    if head == Some(WRAPPER) {
        let (offset, size) = (word(8).unwrap_or(0) as u64, word(12).unwrap_or(0) as u64);
        if offset + size > ir.len() as u64 {
            return bad(
                8,
                format!(
                    "bitcode wrapper names {size} bytes at {offset}, the payload has {}",
                    ir.len()
                ),
            );
        }
        return Ok(());
    }
    if head != Some(MAGIC) {
        return bad(0, "IR payload is not LLVM bitcode (no BC C0 DE)".into());
    }
    // top-level: abbreviation ids of 2 bits, every entry a block (ENTER_SUBBLOCK, 1):
    // block id (vbr8), its abbreviation width (vbr4), aligned to 32 bits, its length in
    // 32-bit words
    let mut at = 4;
    let mut blocks = 0;
    while at < ir.len() {
        let mut r = Bits {
            word: &word,
            bit: at * 8,
        };
        let entry = r.read(2);
        if entry == Some(0) && blocks > 0 && (at..ir.len()).all(|i| byte(i) == Some(0)) {
            break; // padding
        }
        if entry != Some(1) {
            return bad(
                at,
                format!("top-level bitcode entry {entry:?} is not a block"),
            );
        }
        let (Some(id), Some(_)) = (r.vbr(8), r.vbr(4)) else {
            return bad(at, "bitcode block header cut short".into());
        };
        let words = r.align().and_then(|_| r.read(32));
        let body = r.bit / 8;
        let end = words.map(|w| body as u64 + 4 * w);
        match end {
            Some(end) if end <= ir.len() as u64 => at = end as usize,
            _ => {
                return bad(
                    at,
                    format!(
                        "IR payload cut short: bitcode block {id} needs {} bytes, {} are left",
                        words.map_or("its length's".to_string(), |w| (4 * w).to_string()),
                        ir.len().saturating_sub(body)
                    ),
                );
            }
        }
        blocks += 1;
    }
    if blocks == 0 {
        return bad(4, "IR payload has no bitcode block".into());
    }
    Ok(())
}

/// A little-endian bit reader over 32-bit words.
struct Bits<'a, W: Fn(usize) -> Option<u32>> {
    word: &'a W,
    bit: usize,
}

impl<W: Fn(usize) -> Option<u32>> Bits<'_, W> {
    fn read(&mut self, n: usize) -> Option<u64> {
        let mut v = 0u64;
        for k in 0..n {
            let b = self.bit + k;
            let w = (self.word)(b / 32 * 4)?;
            v |= (((w >> (b % 32)) & 1) as u64) << k;
        }
        self.bit += n;
        Some(v)
    }

    fn vbr(&mut self, n: usize) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(n - 1) {
            let piece = self.read(n)?;
            v |= (piece & ((1 << (n - 1)) - 1)) << shift;
            if piece >> (n - 1) == 0 {
                return Some(v);
            }
        }
        None
    }

    fn align(&mut self) -> Option<()> {
        self.bit = self.bit.div_ceil(32) * 32;
        Some(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A payload of two top-level blocks (ids 13 and 8), `words` 32-bit words each.
    pub fn bitcode(words: u32) -> Vec<u8> {
        let mut d = MAGIC.to_vec();
        for id in [13u32, 8] {
            // entry 1 (2 bits), id (vbr8), width 3 (vbr4), then aligned
            let head = 1 | (id << 2) | (3 << 10);
            d.extend_from_slice(&head.to_le_bytes());
            d.extend_from_slice(&words.to_le_bytes());
            d.extend(std::iter::repeat_n(0xA5, 4 * words as usize));
        }
        d
    }

    #[test]
    fn whole_payloads_pass_and_cut_ones_do_not() {
        let d = bitcode(5);
        check(&d, None, 0, "x.ltoir").unwrap();
        let mut padded = d.clone();
        padded.extend_from_slice(&[0; 8]);
        check(&padded, None, 0, "x.ltoir").unwrap();
        for cut in [d.len() - 1, d.len() - 20, 30, 9, 5] {
            let e = check(&d[..cut], None, 0x40, "x.ltoir").unwrap_err();
            assert!(
                e.message().contains("'x.ltoir' at offset 0x"),
                "{cut}: {}",
                e.message()
            );
        }
        assert!(check(b"not bitcode at all", None, 0, "x").is_err());
        assert!(check(&MAGIC, None, 0, "x").is_err());
        // scrambled as cicc stores it
        let mut s = d.clone();
        super::super::obfuscation::scramble(&mut s, 0x22c4_7289);
        check(&s, Some(0x22c4_7289), 0, "x.ltoir").unwrap();
        let e = check(&s[..s.len() - 4], Some(0x22c4_7289), 0, "x.ltoir").unwrap_err();
        assert!(e.message().contains("cut short"), "{}", e.message());
    }
}
