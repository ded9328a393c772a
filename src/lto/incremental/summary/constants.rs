//! Constants (a module's, a function's) and the value numbering that records refer to:
//! a value id names a global, a module constant, or something of the function being
//! read. [`Space::value`] turns an id into what it means: a global by its name, a
//! constant by a hash of its content (the globals in it recorded as references), a
//! value of the function by its place after the module's values (which no edit outside
//! the function moves).

use std::cell::RefCell;

use super::hash::{Hash, Hasher};
use super::tables::{Types, Why};
use crate::lto::incremental::bitstream::Block;

/// One constant record and the type it has (the last SETTYPE before it).
struct Const {
    code: u32,
    ops: Vec<u64>,
    ty: u64,
}

/// A block of constants, numbered from `first`.
pub struct Consts {
    pub first: u64,
    recs: Vec<Const>,
    memo: RefCell<Vec<Option<Meaning>>>,
}

/// What a value id means: its hash, and the globals it refers to.
#[derive(Clone, Debug, Default)]
pub struct Meaning {
    pub hash: Hash,
    pub refs: Vec<u32>,
}

const SETTYPE: u32 = 1;

impl Consts {
    pub fn empty(first: u64) -> Consts {
        Consts {
            first,
            recs: Vec::new(),
            memo: RefCell::new(Vec::new()),
        }
    }

    /// The constants of `block`, the first numbered `first`.
    pub fn read(block: &Block, first: u64) -> Result<Consts, Why> {
        let mut ty = None;
        let mut recs = Vec::new();
        for r in block.records() {
            if r.code == SETTYPE {
                ty = Some(*r.ops.first().ok_or("an empty SETTYPE")?);
                continue;
            }
            recs.push(Const {
                code: r.code,
                ops: r.ops.clone(),
                ty: ty.ok_or("a constant before any SETTYPE")?,
            });
        }
        let n = recs.len();
        Ok(Consts {
            first,
            recs,
            memo: RefCell::new(vec![None; n]),
        })
    }

    pub fn len(&self) -> u64 {
        self.recs.len() as u64
    }

    fn holds(&self, id: u64) -> bool {
        id >= self.first && id - self.first < self.len()
    }

    /// The text of each inline-assembly constant (`asm` in a function: INLINEASM records
    /// of every form LLVM has written), its length checked against the record.
    pub fn asm_texts(&self) -> impl Iterator<Item = String> + '_ {
        self.recs.iter().filter_map(|c| {
            // (the older forms start with the flags, the newer with the function type)
            let at = match c.code {
                18 | 23 => 1,
                28 | 30 => 2,
                _ => return None,
            };
            let n = usize::try_from(*c.ops.get(at)?).ok()?;
            let chars = c.ops.get(at + 1..)?.get(..n)?;
            Some(chars.iter().map(|&ch| (ch as u8) as char).collect())
        })
    }

    /// A constant's integer value (an INTEGER record), for annotations.
    pub fn integer(&self, id: u64) -> Option<i64> {
        let c = self.recs.get(id.checked_sub(self.first)? as usize)?;
        let v = *c.ops.first()?;
        (c.code == 4).then(|| {
            if v & 1 == 0 {
                (v >> 1) as i64
            } else {
                -((v >> 1) as i64)
            }
        })
    }
}

/// How the operands of a record are read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    /// A type id.
    T,
    /// An absolute value id.
    A,
    /// Anything else, hashed as it is.
    O,
}

/// The fields of constant record `code` with `n` operands.
fn fields(code: u32, ops: &[u64]) -> Result<Vec<Field>, Why> {
    use Field::*;
    let n = ops.len();
    let pairs = |head: Vec<Field>| -> Vec<Field> {
        let rest = n.saturating_sub(head.len());
        head.into_iter()
            .chain((0..rest).map(|i| if i % 2 == 0 { T } else { A }))
            .collect()
    };
    Ok(match code {
        // null, undef, poison, integer, wide integer, float, string, cstring, data
        2 | 3 | 26 | 4 | 5 | 6 | 8 | 9 | 22 | 18 | 23 => vec![O; n],
        7 => vec![A; n],
        10 => [O, A, A].into_iter().chain((3..n).map(|_| O)).collect(),
        11 => vec![O, T, A],
        12 | 20 if n % 2 == 1 => pairs(vec![T]),
        12 | 20 => pairs(vec![]),
        24 | 32 => pairs(vec![T, O]),
        31 => {
            let width = ops.get(2).copied().unwrap_or(0);
            if width > 64 {
                return Err(format!("an inrange GEP constant {width} bits wide"));
            }
            pairs(vec![T, O, O, O, O])
        }
        13 | 16 => vec![A, A, A],
        14 if n == 3 => vec![T, A, A],
        14 => vec![T, A, T, A],
        15 if n == 3 => vec![A, A, A],
        15 => vec![A, A, T, A],
        19 => vec![T, A, A, A],
        17 => vec![T, A, A, O],
        21 => vec![T, A, O],
        25 => vec![O, A],
        27 | 29 => vec![T, A],
        28 | 30 => std::iter::once(T).chain((1..n).map(|_| O)).collect(),
        33 | 34 => vec![A; n],
        c => return Err(format!("constant record {c}")),
    })
}

/// The values a record can name: the module's globals and constants, and while a
/// function is read, its own constants and values.
pub struct Space<'a> {
    pub names: &'a [String],
    pub types: &'a Types,
    pub module: &'a Consts,
    pub function: Option<&'a Consts>,
    /// The first value id of the function (its arguments come first).
    pub base: u64,
}

impl Space<'_> {
    /// What value id `id` means.
    pub fn value(&self, id: u64) -> Result<Meaning, Why> {
        self.value_in(id, 0)
    }

    fn value_in(&self, id: u64, depth: usize) -> Result<Meaning, Why> {
        if let Some(name) = self.names.get(id as usize) {
            return Ok(Meaning {
                hash: Hasher::new("global").str(name).done(),
                refs: vec![id as u32],
            });
        }
        for c in std::iter::once(self.module).chain(self.function) {
            if c.holds(id) {
                return self.constant(c, id - c.first, depth);
            }
        }
        if id < self.base {
            return Err(format!("value #{id} is in no table"));
        }
        Ok(Meaning {
            hash: Hasher::new("local").u64(id - self.base).done(),
            refs: Vec::new(),
        })
    }

    fn constant(&self, c: &Consts, i: u64, depth: usize) -> Result<Meaning, Why> {
        if let Some(m) = c.memo.borrow()[i as usize].clone() {
            return Ok(m);
        }
        if depth > 256 {
            return Err("constants nested more than 256 deep".into());
        }
        let rec = &c.recs[i as usize];
        let mut h = Hasher::new("constant");
        h.u64(rec.code as u64).hash(&self.types.hash(rec.ty)?);
        let mut refs = Vec::new();
        for (f, &op) in fields(rec.code, &rec.ops)?.iter().zip(&rec.ops) {
            match f {
                Field::O => {
                    h.u64(op);
                }
                Field::T => {
                    h.hash(&self.types.hash(op)?);
                }
                Field::A => {
                    let m = self.value_in(op, depth + 1)?;
                    h.hash(&m.hash);
                    refs.extend(m.refs);
                }
            }
        }
        refs.sort_unstable();
        refs.dedup();
        let m = Meaning {
            hash: h.done(),
            refs,
        };
        c.memo.borrow_mut()[i as usize] = Some(m.clone());
        Ok(m)
    }
}
