//! Metadata: the module's nodes (and a function's, appended while it is read), the
//! attachment kinds by name, the `nvvm.annotations` entries (kernels, managed variables,
//! launch bounds) and a node's hash by content. Debug-info nodes count by their kind
//! alone unless the link emits line information; then the module's whole metadata is
//! part of every function's hash (see `module`), which is what keeps their raw numbers
//! sound.

use std::cell::RefCell;
use std::collections::HashMap;

use super::constants::{Meaning, Space};
use super::hash::{Hash, Hasher};
use super::tables::Why;
use crate::lto::incremental::bitstream::{Block, Record, text};

#[derive(Clone, Debug)]
enum Md {
    Str(Vec<u8>),
    Value { ty: u64, id: u64 },
    Node { distinct: bool, ops: Vec<u64> },
    Debug { code: u32, ops: Vec<u64> },
}

/// The metadata nodes in scope, their names and the attachment kinds.
#[derive(Default)]
pub struct Metadata {
    nodes: Vec<Md>,
    /// How many nodes the module itself defines (a function's come after).
    module_count: usize,
    named: Vec<(String, Vec<u64>)>,
    pub kinds: HashMap<u64, String>,
    /// The module's metadata records, hashed as they are (for links with line info).
    pub whole: Hash,
    memo: RefCell<HashMap<usize, Hash>>,
}

/// One `nvvm.annotations` entry: the global, then its (key, value) pairs.
pub struct Annotation {
    pub global: u64,
    pub pairs: Vec<(String, u64)>,
}

// METADATA_* record codes
const NAME: u32 = 4;
const KIND: u32 = 6;
const NAMED_NODE: u32 = 10;
const STRINGS: u32 = 35;

impl Metadata {
    /// Reads the module's metadata blocks and kind table.
    pub fn read_module(
        blocks: &[&Block],
        kinds: Option<&Block>,
        data: &[u8],
    ) -> Result<Metadata, Why> {
        let mut m = Metadata::default();
        let mut whole = Hasher::new("module metadata");
        for b in blocks {
            m.add(b, data, Some(&mut whole))?;
        }
        for r in kinds.into_iter().flat_map(|b| b.records()) {
            m.kind(r)?;
            hash_record(&mut whole, r, data);
        }
        m.module_count = m.nodes.len();
        m.whole = whole.done();
        Ok(m)
    }

    fn kind(&mut self, r: &Record) -> Result<(), Why> {
        let (&id, name) = r.ops.split_first().ok_or("an empty metadata kind")?;
        self.kinds.insert(id, text(name));
        Ok(())
    }

    /// Adds a block's nodes (a function's, after the module's).
    pub fn add(
        &mut self,
        b: &Block,
        data: &[u8],
        mut whole: Option<&mut Hasher>,
    ) -> Result<(), Why> {
        let mut name = None;
        for r in b.records() {
            if let Some(h) = whole.as_deref_mut() {
                hash_record(h, r, data);
            }
            let ops = r.ops.clone();
            match r.code {
                1 => self
                    .nodes
                    .push(Md::Str(ops.iter().map(|&c| c as u8).collect())),
                2 => {
                    let [ty, id] = ops[..] else {
                        return Err("a metadata value of the wrong size".into());
                    };
                    self.nodes.push(Md::Value { ty, id });
                }
                3 | 5 => self.nodes.push(Md::Node {
                    distinct: r.code == 5,
                    ops,
                }),
                NAME => name = Some(text(&ops)),
                KIND => self.kind(r)?,
                NAMED_NODE => {
                    let n = name.take().ok_or("a named node without a name")?;
                    self.named.push((n, ops));
                }
                STRINGS => self.strings(r, data)?,
                // index offsets, global declaration attachments: no node
                36 | 38 | 39 => {}
                7 | 12..=34 | 37 | 40 | 41 | 44..=47 => {
                    self.nodes.push(Md::Debug { code: r.code, ops })
                }
                c => return Err(format!("metadata record {c}")),
            }
        }
        Ok(())
    }

    /// METADATA_STRINGS: [count, offset to the characters] and a blob holding the
    /// lengths (6-bit variable-width, as a bitstream) and then the characters.
    fn strings(&mut self, r: &Record, data: &[u8]) -> Result<(), Why> {
        let (Some(&count), Some(&offset), Some(blob)) = (r.ops.first(), r.ops.get(1), &r.blob)
        else {
            return Err("a metadata strings record without its blob".into());
        };
        let blob = &data[blob.clone()];
        let (lengths, mut chars) = (
            blob.get(..offset as usize)
                .ok_or("metadata string lengths past their blob")?,
            blob.get(offset as usize..).unwrap_or_default(),
        );
        if count > lengths.len() as u64 * 8 {
            return Err(format!(
                "{count} metadata strings in {} bytes of lengths",
                lengths.len()
            ));
        }
        let mut bits = BitCursor {
            data: lengths,
            pos: 0,
        };
        for _ in 0..count {
            let n = bits.vbr6().ok_or("metadata string lengths cut short")? as usize;
            let s = chars.get(..n).ok_or("metadata strings past their blob")?;
            self.nodes.push(Md::Str(s.to_vec()));
            chars = &chars[n..];
        }
        Ok(())
    }

    /// Forgets the nodes of the function read last.
    pub fn end_function(&mut self) {
        self.nodes.truncate(self.module_count);
        self.memo.borrow_mut().retain(|&k, _| k < self.module_count);
    }

    /// The `nvvm.annotations` entries that name a global.
    pub fn annotations(&self, globals: u64) -> Vec<Annotation> {
        let mut out = Vec::new();
        let entries = self
            .named
            .iter()
            .filter(|(n, _)| n == "nvvm.annotations")
            .flat_map(|(_, ops)| ops.iter());
        for &id in entries {
            let Some(Md::Node { ops, .. }) = self.nodes.get(id as usize) else {
                continue;
            };
            let Some(Md::Value { id: g, .. }) = ops.first().and_then(|&o| self.get(o)) else {
                continue;
            };
            if *g >= globals {
                continue;
            }
            let mut pairs = Vec::new();
            for kv in ops[1..].chunks(2) {
                if let [k, v] = kv
                    && let Some(Md::Str(key)) = self.get(*k)
                    && let Some(Md::Value { id, .. }) = self.get(*v)
                {
                    pairs.push((String::from_utf8_lossy(key).into_owned(), *id));
                }
            }
            out.push(Annotation { global: *g, pairs });
        }
        out
    }

    /// Node `op - 1` (an operand naming a node; 0 is none).
    fn get(&self, op: u64) -> Option<&Md> {
        self.nodes.get(op.checked_sub(1)? as usize)
    }

    /// The hash of node `id` by content (`lines`: debug nodes by content too).
    pub fn node(&self, id: u64, space: &Space, lines: bool) -> Result<Meaning, Why> {
        let mut stack = Vec::new();
        let mut refs = Vec::new();
        let (hash, _) = self.node_in(id, space, lines, &mut stack, &mut refs)?;
        refs.sort_unstable();
        refs.dedup();
        Ok(Meaning { hash, refs })
    }

    fn node_in(
        &self,
        id: u64,
        space: &Space,
        lines: bool,
        stack: &mut Vec<u64>,
        refs: &mut Vec<u32>,
    ) -> Result<(Hash, bool), Why> {
        let i = id as usize;
        if let Some(h) = self.memo.borrow().get(&i) {
            return Ok((*h, false));
        }
        if let Some(at) = stack.iter().rposition(|&s| s == id) {
            let back = (stack.len() - at) as u64;
            return Ok((Hasher::new("md cycle").u64(back).done(), true));
        }
        if stack.len() > 256 {
            return Err("metadata nested more than 256 deep".into());
        }
        let md = self
            .nodes
            .get(i)
            .ok_or_else(|| format!("metadata #{id} is not defined"))?;
        let mut h = Hasher::new("md");
        let mut cyclic = false;
        match md {
            Md::Str(s) => {
                h.str("str").bytes(s);
            }
            Md::Value { ty, id } => {
                let m = space.value(*id)?;
                h.str("value").hash(&space.types.hash(*ty)?).hash(&m.hash);
                refs.extend(m.refs);
            }
            Md::Node { distinct, ops } => {
                h.str(if *distinct { "distinct" } else { "node" });
                stack.push(id);
                for &op in ops {
                    if op == 0 {
                        h.str("null");
                        continue;
                    }
                    let (sub, c) = self.node_in(op - 1, space, lines, stack, refs)?;
                    cyclic |= c;
                    h.hash(&sub);
                }
                stack.pop();
            }
            Md::Debug { code, ops } => {
                h.str("debug").u64(*code as u64);
                if lines {
                    for &op in ops {
                        h.u64(op);
                    }
                }
            }
        }
        let out = h.done();
        if !cyclic {
            self.memo.borrow_mut().insert(i, out);
        }
        Ok((out, cyclic))
    }
}

/// A record as it is, into a hasher.
pub fn hash_record(h: &mut Hasher, r: &Record, data: &[u8]) {
    h.u64(r.code as u64).u64(r.ops.len() as u64);
    for &op in &r.ops {
        h.u64(op);
    }
    if let Some(b) = &r.blob {
        h.bytes(&data[b.clone()]);
    }
}

/// 6-bit variable-width numbers read from bytes, low bit first.
struct BitCursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl BitCursor<'_> {
    fn bit(&mut self) -> Option<u64> {
        let b = *self.data.get(self.pos / 8)? >> (self.pos % 8) & 1;
        self.pos += 1;
        Some(b as u64)
    }

    fn vbr6(&mut self) -> Option<u64> {
        let (mut v, mut shift) = (0u64, 0u32);
        loop {
            let mut chunk = 0;
            for k in 0..6 {
                chunk |= self.bit()? << k;
            }
            if shift > 58 {
                return None;
            }
            v |= (chunk & 31) << shift;
            if chunk & 32 == 0 {
                return Some(v);
            }
            shift += 5;
        }
    }
}
