//! The module's tables that records refer to by number: types (hashed by structure, so
//! that a type added to the table renumbers nothing a hash sees) and attribute sets
//! (hashed by content; whether one marks a kernel).

use std::cell::RefCell;
use std::collections::HashMap;

use super::hash::{Hash, Hasher};
use crate::lto::incremental::bitstream::{Block, text};

/// Why a module is read whole: the message, built where the reader gave up.
pub type Why = String;

// TYPE_CODE_* numbers
const NUMENTRY: u32 = 1;
const VOID: u32 = 2;
const LABEL: u32 = 5;
const OPAQUE: u32 = 6;
const POINTER: u32 = 8;
const FUNCTION_OLD: u32 = 9;
const ARRAY: u32 = 11;
const VECTOR: u32 = 12;
const METADATA: u32 = 16;
const STRUCT_ANON: u32 = 18;
const STRUCT_NAME: u32 = 19;
const STRUCT_NAMED: u32 = 20;
const FUNCTION: u32 = 21;
const TARGET_TYPE: u32 = 26;

struct TypeRec {
    code: u32,
    ops: Vec<u64>,
    name: Option<String>,
}

/// The type table.
#[derive(Default)]
pub struct Types {
    recs: Vec<TypeRec>,
    memo: RefCell<Vec<Option<Hash>>>,
}

impl Types {
    pub fn read(block: &Block) -> Result<Types, Why> {
        let mut recs = Vec::new();
        let mut name = None;
        for r in block.records() {
            match r.code {
                NUMENTRY => {}
                STRUCT_NAME => name = Some(text(&r.ops)),
                code => recs.push(TypeRec {
                    code,
                    ops: r.ops.clone(),
                    name: if matches!(code, OPAQUE | STRUCT_NAMED | TARGET_TYPE) {
                        name.take()
                    } else {
                        None
                    },
                }),
            }
        }
        let n = recs.len();
        Ok(Types {
            recs,
            memo: RefCell::new(vec![None; n]),
        })
    }

    fn rec(&self, t: u64) -> Result<&TypeRec, Why> {
        self.recs
            .get(t as usize)
            .ok_or_else(|| format!("type #{t} is not in the type table"))
    }

    pub fn is_void(&self, t: u64) -> Result<bool, Why> {
        Ok(self.rec(t)?.code == VOID)
    }

    pub fn is_metadata(&self, t: u64) -> Result<bool, Why> {
        Ok(self.rec(t)?.code == METADATA)
    }

    pub fn is_label(&self, t: u64) -> Result<bool, Why> {
        Ok(self.rec(t)?.code == LABEL)
    }

    /// A pointer type's address space (typed pointers carry it second, opaque ones
    /// first).
    pub fn pointer_space(&self, t: u64) -> Option<u64> {
        let r = self.recs.get(t as usize)?;
        match r.code {
            POINTER => r.ops.get(1).copied().or(Some(0)),
            25 => r.ops.first().copied(),
            _ => None,
        }
    }

    /// A function type (or a typed pointer to one): its return type and parameters.
    pub fn function(&self, t: u64) -> Result<(u64, Vec<u64>), Why> {
        let mut r = self.rec(t)?;
        if r.code == POINTER {
            r = self.rec(*r.ops.first().ok_or("an empty pointer type")?)?;
        }
        match r.code {
            FUNCTION if r.ops.len() >= 2 => Ok((r.ops[1], r.ops[2..].to_vec())),
            // [vararg, attrid, retty, params...]
            FUNCTION_OLD if r.ops.len() >= 3 => Ok((r.ops[2], r.ops[3..].to_vec())),
            _ => Err(format!("type #{t} is not a function type")),
        }
    }

    /// The hash of type `t`: by structure, a named struct by its name (its body is in
    /// [`Types::named_bodies`], which every global's hash includes, so no walk ever
    /// loops through a recursive type).
    pub fn hash(&self, t: u64) -> Result<Hash, Why> {
        self.hash_in(t, 0)
    }

    fn hash_in(&self, t: u64, depth: usize) -> Result<Hash, Why> {
        if let Some(h) = self.memo.borrow().get(t as usize).copied().flatten() {
            return Ok(h);
        }
        if depth > 512 {
            return Err("types nested more than 512 deep".into());
        }
        let r = self.rec(t)?;
        let mut h = Hasher::new("type");
        h.u64(r.code as u64);
        match &r.name {
            Some(n) => {
                h.str(n);
            }
            None => self.body(r, &mut h, depth)?,
        }
        let out = h.done();
        self.memo.borrow_mut()[t as usize] = Some(out);
        Ok(out)
    }

    /// A type's operands, its element types by their hashes.
    fn body(&self, r: &TypeRec, h: &mut Hasher, depth: usize) -> Result<(), Why> {
        let is_type = |i: usize| match r.code {
            POINTER => i == 0,
            ARRAY | VECTOR => i == 1,
            STRUCT_ANON | STRUCT_NAMED | FUNCTION => i >= 1,
            FUNCTION_OLD => i >= 2,
            TARGET_TYPE => i >= 1 && i <= *r.ops.first().unwrap_or(&0) as usize,
            _ => false,
        };
        for (i, &op) in r.ops.iter().enumerate() {
            if is_type(i) {
                h.hash(&self.hash_in(op, depth + 1)?);
            } else {
                h.u64(op);
            }
        }
        Ok(())
    }

    /// The bodies of the named types, by name.
    pub fn named_bodies(&self) -> Result<Hash, Why> {
        let mut named: Vec<(&str, &TypeRec)> = self
            .recs
            .iter()
            .filter_map(|r| r.name.as_deref().map(|n| (n, r)))
            .collect();
        named.sort_by(|a, b| a.0.cmp(b.0));
        let mut h = Hasher::new("named types");
        for (n, r) in named {
            h.str(n).u64(r.code as u64);
            self.body(r, &mut h, 0)?;
        }
        Ok(h.done())
    }
}

/// One attribute group: the index it applies to and its content.
struct Group {
    index: u64,
    hash: Hash,
    kernel: bool,
}

/// The attribute sets functions, calls and variables name by number.
#[derive(Default)]
pub struct Attrs {
    groups: HashMap<u64, Group>,
    /// The lists (PARAMATTR_BLOCK entries) by number - 1: the groups they hold.
    lists: Vec<Vec<u64>>,
}

/// The function index attribute groups use for the function itself.
const FUNCTION_INDEX: u64 = 0xFFFF_FFFF;

impl Attrs {
    /// Reads the group table (hashed once the types are known: a type attribute names
    /// one) and the list table.
    pub fn read(
        groups: Option<&Block>,
        lists: Option<&Block>,
        types: &Types,
    ) -> Result<Attrs, Why> {
        let mut a = Attrs::default();
        for r in groups.into_iter().flat_map(|b| b.records()) {
            // ENTRY: [grpid, paramidx, attr...]
            if r.code != 3 || r.ops.len() < 2 {
                return Err(format!(
                    "attribute group record {} of {} operands",
                    r.code,
                    r.ops.len()
                ));
            }
            let (hash, kernel) = group_content(&r.ops[2..], types)?;
            a.groups.insert(
                r.ops[0],
                Group {
                    index: r.ops[1],
                    hash,
                    kernel,
                },
            );
        }
        for r in lists.into_iter().flat_map(|b| b.records()) {
            if r.code != 2 {
                return Err(format!("attribute list record {} (old format)", r.code));
            }
            a.lists.push(r.ops.clone());
        }
        Ok(a)
    }

    /// The content hash of attribute list `id` (1-based; 0 is none), and whether it
    /// marks a kernel (`"nvvm.kernel"` on the function).
    pub fn list(&self, id: u64) -> Result<(Hash, bool), Why> {
        let mut h = Hasher::new("attrs");
        if id == 0 {
            return Ok((h.done(), false));
        }
        let groups = self
            .lists
            .get(id as usize - 1)
            .ok_or_else(|| format!("attribute list {id} is not in the table"))?;
        let mut kernel = false;
        for g in groups {
            let g = self
                .groups
                .get(g)
                .ok_or_else(|| format!("attribute group {g} is not in the table"))?;
            h.u64(g.index).hash(&g.hash);
            kernel |= g.kernel && g.index == FUNCTION_INDEX;
        }
        Ok((h.done(), kernel))
    }
}

/// A group's attributes hashed (a type attribute's type by structure) and whether it
/// holds the string attribute `nvvm.kernel`.
fn group_content(ops: &[u64], types: &Types) -> Result<(Hash, bool), Why> {
    let mut h = Hasher::new("group");
    let mut kernel = false;
    let mut i = 0;
    let at = |i: usize| {
        ops.get(i)
            .copied()
            .ok_or_else(|| "an attribute group cut short".to_string())
    };
    let string = |i: &mut usize| -> Result<String, Why> {
        let start = *i;
        while at(*i)? != 0 {
            *i += 1;
        }
        let s = text(&ops[start..*i]);
        *i += 1;
        Ok(s)
    };
    while i < ops.len() {
        let kind = ops[i];
        h.u64(kind);
        i += 1;
        match kind {
            0 | 5 => {
                h.u64(at(i)?);
                i += 1;
            }
            1 => {
                h.u64(at(i)?).u64(at(i + 1)?);
                i += 2;
            }
            3 => {
                let s = string(&mut i)?;
                kernel |= s == "nvvm.kernel";
                h.str(&s);
            }
            4 => {
                let k = string(&mut i)?;
                let v = string(&mut i)?;
                h.str(&k).str(&v);
            }
            6 => {
                h.u64(at(i)?).hash(&types.hash(at(i + 1)?)?);
                i += 2;
            }
            7 => {
                // [kind, bitwidth, lower, upper] (wider ranges are written in words)
                let width = at(i + 1)?;
                if width > 64 {
                    return Err(format!("a range attribute {width} bits wide"));
                }
                h.u64(at(i)?).u64(width).u64(at(i + 2)?).u64(at(i + 3)?);
                i += 4;
            }
            8 => {
                // [kind, n, bitwidth, (lower, upper) * n]
                let (n, width) = (at(i + 1)?, at(i + 2)?);
                if width > 64 || n > ops.len() as u64 {
                    return Err("a range-list attribute out of bounds".into());
                }
                for k in 0..3 + 2 * n as usize {
                    h.u64(at(i + k)?);
                }
                i += 3 + 2 * n as usize;
            }
            k => return Err(format!("attribute kind {k}")),
        }
    }
    Ok((h.done(), kernel))
}

/// The names a string table blob gives `(offset, size)` pairs.
pub fn strtab_name(strtab: &[u8], offset: u64, size: u64) -> Result<String, Why> {
    let end = offset
        .checked_add(size)
        .filter(|&e| e <= strtab.len() as u64)
        .ok_or_else(|| format!("a name at {offset}+{size} past the string table"))?;
    Ok(String::from_utf8_lossy(&strtab[offset as usize..end as usize]).into_owned())
}
