//! LLVM's bitstream container read without LLVM: blocks, abbreviations (the block-info
//! block's and each block's own), records, arrays, blobs. The format has not changed
//! since LLVM 3 (the record codes inside it only grow), so this reads cicc's LLVM 7
//! bitcode (up to sm_90) and its LLVM 23 bitcode (sm_100 and later) alike, which LLVM 22
//! refuses. The reader knows nothing of what the records mean: that is `summary`'s.
//!
//! Every length read from the file is checked against the bits that are there: a block
//! may not claim more words than remain, an array more elements than remaining bits, and
//! the records of a file together may not hold more than [`OPS_PER_BYTE`] operands per
//! input byte (an abbreviation of many literals costs its definition once and then two
//! bits a record, so operands are budgeted, not trusted).

use crate::diag::{Error, Result};

/// The most operands a file of N bytes may decode to: N times this, plus a little.
pub const OPS_PER_BYTE: usize = 16;

/// How deeply blocks may nest (LLVM's bitcode nests four deep).
const MAX_DEPTH: usize = 32;

/// One record: its code, its operands, and its blob (a byte range of the input).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub code: u32,
    pub ops: Vec<u64>,
    pub blob: Option<std::ops::Range<usize>>,
}

/// What a block holds, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    Record(Record),
    Block(Block),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    pub id: u32,
    pub entries: Vec<Entry>,
}

impl Block {
    /// The records directly in this block.
    pub fn records(&self) -> impl Iterator<Item = &Record> {
        self.entries.iter().filter_map(|e| match e {
            Entry::Record(r) => Some(r),
            Entry::Block(_) => None,
        })
    }

    /// The blocks directly in this block.
    pub fn blocks(&self) -> impl Iterator<Item = &Block> {
        self.entries.iter().filter_map(|e| match e {
            Entry::Block(b) => Some(b),
            Entry::Record(_) => None,
        })
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Literal(u64),
    Fixed(u32),
    Vbr(u32),
    Array,
    Char6,
    Blob,
}

type Abbrev = Vec<Op>;

struct Reader<'a> {
    data: &'a [u8],
    /// Position in bits.
    pos: u64,
    end: u64,
    origin: &'a str,
    /// The block-info block's abbreviations, by block id.
    info: Vec<(u32, Vec<Abbrev>)>,
    budget: usize,
}

/// Reads the bitcode in `data` (raw `BC C0 DE`, or behind the wrapper header) into its
/// top-level blocks; `origin` names the input in errors.
pub fn parse(data: &[u8], origin: &str) -> Result<Vec<Block>> {
    let body = unwrap(data, origin)?;
    if !body.starts_with(b"BC\xc0\xde") {
        return Err(bad(origin, 0, "not LLVM bitcode (no BC C0 DE magic)"));
    }
    let mut r = Reader {
        data: body,
        pos: 32,
        end: body.len() as u64 * 8,
        origin,
        info: Vec::new(),
        budget: body.len().saturating_mul(OPS_PER_BYTE).saturating_add(4096),
    };
    let mut top = Vec::new();
    // top level: abbreviation ids are 2 bits wide and only blocks may appear
    while r.end - r.pos >= 32 {
        let id = r.fixed(2)?;
        if id != 1 {
            // trailing zero padding of a wrapper is allowed; anything else is not
            if id == 0 && r.rest_is_zero() {
                break;
            }
            return Err(r.err(format!("abbreviation id {id} at the top level")));
        }
        top.push(r.block(0)?);
    }
    if top.is_empty() {
        return Err(bad(origin, 32, "no block after the magic"));
    }
    Ok(top)
}

fn bad(origin: &str, bit: u64, what: impl std::fmt::Display) -> Error {
    Error::fatal(format!(
        "'{origin}': LLVM bitcode at bit {bit} (byte {:#x}): {what}",
        bit / 8
    ))
}

/// The bitcode inside the wrapper header (magic 0x0B17C0DE, then version, offset, size).
fn unwrap<'a>(data: &'a [u8], origin: &str) -> Result<&'a [u8]> {
    if !data.starts_with(&[0xDE, 0xC0, 0x17, 0x0B]) {
        return Ok(data);
    }
    let word = |i: usize| {
        data.get(i..i + 4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()) as usize)
    };
    let (Some(off), Some(size)) = (word(8), word(12)) else {
        return Err(bad(origin, 0, "bitcode wrapper header cut short"));
    };
    off.checked_add(size)
        .and_then(|end| data.get(off..end))
        .ok_or_else(|| {
            bad(
                origin,
                0,
                format!(
                    "bitcode wrapper says {size} bytes at {off:#x}, the file has {}",
                    data.len()
                ),
            )
        })
}

impl Reader<'_> {
    fn err(&self, what: impl std::fmt::Display) -> Error {
        bad(self.origin, self.pos, what)
    }

    fn rest_is_zero(&self) -> bool {
        self.data[(self.pos / 8) as usize..].iter().all(|&b| b == 0)
    }

    fn fixed(&mut self, width: u32) -> Result<u64> {
        if width > 64 {
            return Err(self.err(format!("a {width}-bit field")));
        }
        if self.end - self.pos < width as u64 {
            return Err(self.err("cut short"));
        }
        let mut v = 0u64;
        let mut got = 0u32;
        while got < width {
            let byte = self.data[(self.pos / 8) as usize] as u64;
            let bit = (self.pos % 8) as u32;
            let take = (8 - bit).min(width - got);
            let bits = (byte >> bit) & ((1u64 << take) - 1);
            v |= bits << got;
            got += take;
            self.pos += take as u64;
        }
        Ok(v)
    }

    fn vbr(&mut self, width: u32) -> Result<u64> {
        if !(2..=32).contains(&width) {
            return Err(self.err(format!("a variable-width field of {width}-bit chunks")));
        }
        let high = 1u64 << (width - 1);
        let (mut v, mut shift) = (0u64, 0u32);
        loop {
            let chunk = self.fixed(width)?;
            let payload = chunk & (high - 1);
            if shift >= 64 || (shift > 0 && payload >> (64 - shift) != 0) {
                return Err(self.err("a variable-width value past 64 bits"));
            }
            v |= payload << shift;
            if chunk & high == 0 {
                return Ok(v);
            }
            shift += width - 1;
        }
    }

    fn align32(&mut self) -> Result<()> {
        let to = self.pos.div_ceil(32) * 32;
        if to > self.end {
            return Err(self.err("cut short at a 32-bit boundary"));
        }
        self.pos = to;
        Ok(())
    }

    fn spend(&mut self, n: usize) -> Result<()> {
        self.budget = self.budget.checked_sub(n).ok_or_else(|| {
            self.err("more record operands than the file's size allows (a forged abbreviation)")
        })?;
        Ok(())
    }

    /// A block whose ENTER_SUBBLOCK abbreviation id was just read.
    fn block(&mut self, depth: usize) -> Result<Block> {
        if depth >= MAX_DEPTH {
            return Err(self.err("blocks nested too deeply"));
        }
        let id = self.vbr(8)? as u32;
        let width = self.vbr(4)? as u32;
        if !(2..=32).contains(&width) {
            return Err(self.err(format!("block {id}: abbreviation ids {width} bits wide")));
        }
        self.align32()?;
        let words = self.fixed(32)?;
        if words * 32 > self.end - self.pos {
            return Err(self.err(format!(
                "block {id} claims {words} words, {} remain",
                (self.end - self.pos) / 32
            )));
        }
        let end = self.pos + words * 32;
        let mut abbrevs: Vec<Abbrev> = self
            .info
            .iter()
            .find(|(b, _)| *b == id)
            .map(|(_, a)| a.clone())
            .unwrap_or_default();
        let mut entries = Vec::new();
        let mut info_target: Option<u32> = None;
        loop {
            if self.pos >= end {
                return Err(self.err(format!("block {id} runs past its length")));
            }
            match self.fixed(width)? {
                0 => {
                    self.align32()?;
                    if self.pos != end {
                        return Err(self.err(format!("block {id} ends before its length")));
                    }
                    return Ok(Block { id, entries });
                }
                1 => entries.push(Entry::Block(self.block(depth + 1)?)),
                2 => {
                    let a = self.define_abbrev()?;
                    if id == 0 {
                        // the block-info block: abbreviations for the block SETBID named
                        let Some(target) = info_target else {
                            return Err(self.err("block-info abbreviation before SETBID"));
                        };
                        self.info_for(target).push(a);
                    } else {
                        abbrevs.push(a);
                    }
                }
                n => {
                    let rec = if n == 3 {
                        self.unabbreviated()?
                    } else {
                        let a = abbrevs.get(n as usize - 4).cloned().ok_or_else(|| {
                            self.err(format!("block {id}: undefined abbreviation {n}"))
                        })?;
                        self.abbreviated(&a)?
                    };
                    if id == 0 && rec.code == 1 {
                        let bid = *rec.ops.first().ok_or_else(|| self.err("empty SETBID"))?;
                        info_target = Some(bid as u32);
                    }
                    entries.push(Entry::Record(rec));
                }
            }
        }
    }

    fn info_for(&mut self, block: u32) -> &mut Vec<Abbrev> {
        let i = match self.info.iter().position(|(b, _)| *b == block) {
            Some(i) => i,
            None => {
                self.info.push((block, Vec::new()));
                self.info.len() - 1
            }
        };
        &mut self.info[i].1
    }

    fn define_abbrev(&mut self) -> Result<Abbrev> {
        let n = self.vbr(5)? as usize;
        if n == 0 || n > (self.end - self.pos) as usize {
            return Err(self.err(format!("an abbreviation of {n} operands")));
        }
        let mut ops = Vec::with_capacity(n);
        let mut i = 0;
        while i < n {
            if self.fixed(1)? == 1 {
                ops.push(Op::Literal(self.vbr(8)?));
            } else {
                let op = match self.fixed(3)? {
                    1 => Op::Fixed(self.width(64)?),
                    2 => match self.width(32)? {
                        0 => Op::Fixed(0),
                        w if w < 2 => return Err(self.err("a 1-bit variable-width operand")),
                        w => Op::Vbr(w),
                    },
                    3 => Op::Array,
                    4 => Op::Char6,
                    5 => Op::Blob,
                    e => return Err(self.err(format!("abbreviation operand encoding {e}"))),
                };
                ops.push(op);
            }
            i += 1;
        }
        // an array is followed by its element, and both end the abbreviation; a blob ends it
        for (k, op) in ops.iter().enumerate() {
            let last = k + 1 == ops.len();
            match op {
                Op::Array if k + 2 != ops.len() => {
                    return Err(self.err("an array operand not second to last"));
                }
                Op::Array if matches!(ops[k + 1], Op::Array | Op::Blob | Op::Fixed(0)) => {
                    return Err(self.err("an array of arrays, blobs or empty fields"));
                }
                Op::Blob if !last => return Err(self.err("a blob operand not last")),
                _ => {}
            }
        }
        if matches!(ops[0], Op::Array | Op::Blob) {
            return Err(self.err("an abbreviation whose code is an array or a blob"));
        }
        Ok(ops)
    }

    fn width(&mut self, max: u32) -> Result<u32> {
        let w = self.vbr(5)?;
        if w > max as u64 {
            return Err(self.err(format!("a {w}-bit operand")));
        }
        Ok(w as u32)
    }

    fn unabbreviated(&mut self) -> Result<Record> {
        let code = self.vbr(6)?;
        let n = self.vbr(6)? as usize;
        // each operand takes at least 6 bits
        if n > ((self.end - self.pos) / 6) as usize {
            return Err(self.err(format!("a record of {n} operands")));
        }
        self.spend(n + 1)?;
        let mut ops = Vec::with_capacity(n);
        for _ in 0..n {
            ops.push(self.vbr(6)?);
        }
        Ok(Record {
            code: u32::try_from(code).map_err(|_| self.err("record code past 32 bits"))?,
            ops,
            blob: None,
        })
    }

    fn scalar(&mut self, op: Op) -> Result<u64> {
        match op {
            Op::Literal(v) => Ok(v),
            Op::Fixed(w) => self.fixed(w),
            Op::Vbr(w) => self.vbr(w),
            Op::Char6 => {
                let c = self.fixed(6)? as u8;
                Ok(match c {
                    0..=25 => b'a' + c,
                    26..=51 => b'A' + c - 26,
                    52..=61 => b'0' + c - 52,
                    62 => b'.',
                    _ => b'_',
                } as u64)
            }
            Op::Array | Op::Blob => Err(self.err("an array or blob where a value belongs")),
        }
    }

    fn abbreviated(&mut self, a: &Abbrev) -> Result<Record> {
        self.spend(a.len())?;
        let mut vals = Vec::with_capacity(a.len());
        let mut blob = None;
        let mut k = 0;
        while k < a.len() {
            match a[k] {
                Op::Array => {
                    let n = self.vbr(6)? as usize;
                    if n > (self.end - self.pos) as usize {
                        return Err(self.err(format!("an array of {n} elements")));
                    }
                    self.spend(n)?;
                    let elem = a[k + 1];
                    for _ in 0..n {
                        vals.push(self.scalar(elem)?);
                    }
                    k += 2;
                }
                Op::Blob => {
                    let n = self.vbr(6)? as usize;
                    self.align32()?;
                    let start = (self.pos / 8) as usize;
                    if n as u64 * 8 > self.end - self.pos {
                        return Err(self.err(format!("a blob of {n} bytes")));
                    }
                    self.pos += n as u64 * 8;
                    self.align32()?;
                    blob = Some(start..start + n);
                    k += 1;
                }
                op => {
                    vals.push(self.scalar(op)?);
                    k += 1;
                }
            }
        }
        let code = vals.remove(0);
        Ok(Record {
            code: u32::try_from(code).map_err(|_| self.err("record code past 32 bits"))?,
            ops: vals,
            blob,
        })
    }
}

/// The text of a record whose operands are characters (names, strings).
pub fn text(ops: &[u64]) -> String {
    ops.iter().map(|&c| (c as u8) as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bits written low bit first, as LLVM's writer does.
    #[derive(Default)]
    struct W {
        bits: Vec<bool>,
    }

    impl W {
        fn fixed(&mut self, v: u64, w: u32) -> &mut Self {
            for i in 0..w {
                self.bits.push(v >> i & 1 == 1);
            }
            self
        }
        fn vbr(&mut self, mut v: u64, w: u32) -> &mut Self {
            let high = 1u64 << (w - 1);
            loop {
                if v < high {
                    return self.fixed(v, w);
                }
                self.fixed(v & (high - 1) | high, w);
                v >>= w - 1;
            }
        }
        fn align(&mut self) -> &mut Self {
            while !self.bits.len().is_multiple_of(32) {
                self.bits.push(false);
            }
            self
        }
        fn bytes(&self) -> Vec<u8> {
            let mut out = b"BC\xc0\xde".to_vec();
            for chunk in self.bits.chunks(8) {
                out.push(chunk.iter().enumerate().map(|(i, &b)| (b as u8) << i).sum());
            }
            out
        }
    }

    /// A module-like block (id 8, 3-bit ids) holding: an unabbreviated record, an
    /// abbreviation [literal 7, array of char6] used once, and a blob record.
    fn sample(adjust: i64) -> Vec<u8> {
        let mut w = W::default();
        w.fixed(1, 2).vbr(8, 8).vbr(3, 4).align();
        let len_at = w.bits.len();
        w.fixed(0, 32);
        let start = w.bits.len();
        // unabbreviated: code 1, ops [2, 300]
        w.fixed(3, 3).vbr(1, 6).vbr(2, 6).vbr(2, 6).vbr(300, 6);
        // define abbreviation 4: [literal 7][array][char6]
        w.fixed(2, 3).vbr(3, 5);
        w.fixed(1, 1).vbr(7, 8);
        w.fixed(0, 1).fixed(3, 3);
        w.fixed(0, 1).fixed(4, 3);
        // use it: "aZ_"
        w.fixed(4, 3)
            .vbr(3, 6)
            .fixed(0, 6)
            .fixed(51, 6)
            .fixed(63, 6);
        // define abbreviation 5: [fixed 4][blob], use it with code 9 and 3 bytes
        w.fixed(2, 3).vbr(2, 5);
        w.fixed(0, 1).fixed(1, 3).vbr(4, 5);
        w.fixed(0, 1).fixed(5, 3);
        w.fixed(5, 3).fixed(9, 4).vbr(3, 6).align();
        for b in b"xyz\0" {
            w.fixed(*b as u64, 8);
        }
        w.fixed(0, 3).align();
        let n = (((w.bits.len() - start) / 32) as i64 + adjust) as u64;
        for i in 0..32 {
            w.bits[len_at + i] = n >> i & 1 == 1;
        }
        w.bytes()
    }

    #[test]
    fn records_abbreviations_arrays_and_blobs_are_read() {
        let data = sample(0);
        let top = parse(&data, "t.bc").unwrap();
        assert_eq!(top.len(), 1);
        let recs: Vec<&Record> = top[0].records().collect();
        assert_eq!(top[0].id, 8);
        assert_eq!((recs[0].code, &recs[0].ops[..]), (1, &[2, 300][..]));
        assert_eq!((recs[1].code, text(&recs[1].ops)), (7, "aZ_".to_string()));
        assert_eq!(recs[2].code, 9);
        assert_eq!(&data[recs[2].blob.clone().unwrap()], b"xyz");
    }

    #[test]
    fn lengths_that_do_not_fit_are_refused() {
        // a block claiming more words than the file has
        let e = parse(&sample(1000), "t.bc").unwrap_err().to_string();
        assert!(e.contains("words,") && e.contains("remain"), "{e}");
        // a block whose END_BLOCK comes before its length
        let e = parse(&sample(-1), "t.bc").unwrap_err().to_string();
        assert!(e.contains("runs past its length"), "{e}");
        // every cut of the file is an error, never a panic
        let data = sample(0);
        for n in 4..data.len() {
            assert!(parse(&data[..n], "t.bc").is_err(), "{n}");
        }
        assert!(parse(b"BC\xc0", "t.bc").is_err());
        assert!(parse(b"\xde\xc0\x17\x0b\0\0\0\0\xff\0\0\0\x10\0\0\0", "t.bc").is_err());
    }
}
