//! One function body: its records hashed with every operand that names something outside
//! the function replaced by what it names (see `constants::Space`), the value numbering
//! kept exactly (an instruction defines a value unless it is void; a call's result type
//! comes from its function type), and the globals it refers to, telling a direct
//! callee from an address taken. A record this reader does not know makes the module
//! opaque: guessing at a layout could number the values wrong and miss a reference.

use super::constants::{Consts, Meaning, Space};
use super::hash::{Hash, Hasher};
use super::metadata::{Metadata, hash_record};
use super::tables::{Attrs, Types, Why};
use crate::lto::incremental::bitstream::{Block, Entry, Record};

/// What a body gives its summary.
#[derive(Default)]
pub struct Body {
    pub hash: Hash,
    /// Globals referred to (sorted, once each).
    pub refs: Vec<u32>,
    /// Globals referred to other than as a direct callee.
    pub address_taken: Vec<u32>,
    /// Globals whose address (or an address within them) is used other than to load
    /// from: stored to, stored, passed on, merged: they may be written.
    pub written: Vec<u32>,
    /// Its instructions (debug records aside): what compiling it costs, roughly.
    pub insts: u64,
}

impl Body {
    /// The globals the function's inline assembly names (the PTX text, which LLVM does
    /// not read: `st.global.u32 [_ZZ5readgiE1c], %0;` writes a static that the IR only
    /// loads from): referred to, their address taken, and possibly written, so that a
    /// variable written so is never copied into each partition that reads it (each
    /// copy's writes would be lost to the others).
    fn with_asm_names(mut self, consts: &Consts, cx: &Context) -> Body {
        let named = asm_names(consts.asm_texts(), cx.names, cx.name_ids);
        if named.is_empty() {
            return self;
        }
        for v in [&mut self.refs, &mut self.address_taken, &mut self.written] {
            v.extend(named.iter().copied());
            v.sort_unstable();
            v.dedup();
        }
        self
    }
}

/// The module's globals by name, and by the name as the PTX writer spells it (a `.`
/// becomes `_$_`): made once per module, by the first function with inline assembly.
pub type NameIds = std::cell::OnceCell<std::collections::HashMap<String, u32>>;

/// The globals (by id: their position in `names`) that the inline-assembly `texts` name:
/// an identifier of the text that is a global's name (`ids`, made from `names`).
fn asm_names(texts: impl Iterator<Item = String>, names: &[String], ids: &NameIds) -> Vec<u32> {
    // (a PTX identifier: letters, digits, `_` and `$`)
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
    let mut named = Vec::new();
    for text in texts {
        for word in text.split(|c: char| !ident(c)).filter(|w| !w.is_empty()) {
            let ids = ids.get_or_init(|| {
                let mut m = std::collections::HashMap::new();
                for (i, n) in names.iter().enumerate().filter(|(_, n)| !n.is_empty()) {
                    if n.contains('.') {
                        m.insert(n.replace('.', "_$_"), i as u32);
                    }
                    m.insert(n.clone(), i as u32);
                }
                m
            });
            named.extend(ids.get(word).copied());
        }
    }
    named.sort_unstable();
    named.dedup();
    named
}

/// How an instruction uses an operand.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Use {
    /// The function called.
    Callee,
    /// The address loaded from.
    Load,
    /// An address computed from (`getelementptr`, a cast): its result stands for it.
    Derive,
    /// Anything else.
    Escape,
}

/// The module-level context a body is read in.
pub struct Context<'a> {
    pub data: &'a [u8],
    pub names: &'a [String],
    pub types: &'a Types,
    pub attrs: &'a Attrs,
    pub module_consts: &'a Consts,
    pub bundle_tags: &'a [String],
    pub sync_scopes: &'a [String],
    pub lines: bool,
    /// The globals by name, for inline assembly that names them.
    pub name_ids: &'a NameIds,
}

const CALL_EXPLICIT_TYPE: u64 = 1 << 15;
const CALL_FMF: u64 = 1 << 17;
const INVOKE_EXPLICIT_TYPE: u64 = 1 << 13;

struct Reader<'a, 'b> {
    cx: &'b Context<'a>,
    space: Space<'b>,
    md: &'b Metadata,
    h: Hasher,
    /// The next value id an instruction would define.
    inst: u64,
    /// The instructions read so far.
    count: u64,
    refs: Vec<u32>,
    taken: Vec<u32>,
    /// How the current instruction uses its value operands.
    role: Use,
    /// The operands the current instruction derives its result from.
    derive: Vec<u64>,
    /// Each derived value and what it was derived from.
    edges: std::collections::HashMap<u64, Vec<u64>>,
    /// Values used as [`Use::Escape`].
    escapes: Vec<u64>,
}

/// Reads the body of a function of type `fn_type` (`block`), `md` holding the module's
/// metadata (the function's own is added while it is read, then dropped).
pub fn read(cx: &Context, md: &mut Metadata, fn_type: u64, block: &Block) -> Result<Body, Why> {
    let nargs = cx.types.function(fn_type)?.1.len() as u64;
    let base = cx.names.len() as u64 + cx.module_consts.len();
    let first_const = base + nargs;
    let mut consts = Consts::empty(first_const);
    let mut h = Hasher::new("body");
    for b in block.blocks() {
        match b.id {
            11 => consts = Consts::read(b, first_const)?,
            15 => {
                if cx.lines {
                    for r in b.records() {
                        hash_record(&mut h, r, cx.data);
                    }
                }
                md.add(b, cx.data, None)?;
            }
            // attachments (read below), local names
            16 | 14 => {}
            id => return Err(format!("block {id} inside a function")),
        }
    }
    let result = {
        let mut r = Reader {
            cx,
            space: Space {
                names: cx.names,
                types: cx.types,
                module: cx.module_consts,
                function: Some(&consts),
                base,
            },
            md,
            h,
            inst: first_const + consts.len(),
            count: 0,
            refs: Vec::new(),
            taken: Vec::new(),
            role: Use::Escape,
            derive: Vec::new(),
            edges: Default::default(),
            escapes: Vec::new(),
        };
        r.h.u64(nargs).u64(consts.len());
        r.walk(block)
            .and_then(|()| r.finish())
            .map(|b| b.with_asm_names(&consts, cx))
    };
    md.end_function();
    result
}

impl Reader<'_, '_> {
    fn walk(&mut self, block: &Block) -> Result<(), Why> {
        for e in &block.entries {
            match e {
                Entry::Record(r) => self.instruction(r)?,
                Entry::Block(b) if b.id == 16 => self.attachments(b)?,
                Entry::Block(_) => {}
            }
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Body, Why> {
        let mut written = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut stack = std::mem::take(&mut self.escapes);
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            match self.edges.get(&id) {
                Some(from) => stack.extend(from.iter().copied()),
                None => written.extend(self.space.value(id)?.refs),
            }
        }
        for v in [&mut self.refs, &mut self.taken, &mut written] {
            v.sort_unstable();
            v.dedup();
        }
        Ok(Body {
            hash: self.h.done(),
            refs: self.refs,
            address_taken: self.taken,
            written,
            insts: self.count,
        })
    }

    fn meaning(&mut self, id: u64, callee: bool) -> Result<(), Why> {
        let role = if callee { Use::Callee } else { self.role };
        let m: Meaning = self.space.value(id)?;
        self.h.hash(&m.hash);
        if role != Use::Callee {
            self.taken.extend(m.refs.iter().copied());
        }
        self.refs.extend(m.refs);
        match role {
            Use::Callee | Use::Load => {}
            Use::Derive => self.derive.push(id),
            Use::Escape => self.escapes.push(id),
        }
        Ok(())
    }

    fn instruction(&mut self, r: &Record) -> Result<(), Why> {
        let ops = &r.ops[..];
        let mut c = Cur { ops, i: 0 };
        // debug locations and records count only with line information
        if matches!(r.code, 33 | 35 | 61..=65) {
            if self.cx.lines {
                self.h.str("debug").u64(r.code as u64);
                for &op in ops {
                    self.h.u64(op);
                }
                if r.code == 64 && ops.len() > 3 {
                    self.meaning(ops[3], false)?;
                }
            }
            return Ok(());
        }
        self.h.str("inst").u64(r.code as u64).u64(ops.len() as u64);
        self.count += 1;
        self.role = match r.code {
            3 | 4 | 43 => Use::Derive,
            20 | 41 => Use::Load,
            _ => Use::Escape,
        };
        self.derive.clear();
        if matches!(r.code, 13 | 34) {
            return self.call(r.code, &mut c);
        }
        self.operands(r.code, ops, &mut c)?;
        if defines_value(r.code) {
            if !self.derive.is_empty() {
                self.edges
                    .insert(self.inst, std::mem::take(&mut self.derive));
            }
            self.inst += 1;
        }
        Ok(())
    }

    /// The operands of instruction record `code` (calls aside) hashed by what they name.
    fn operands(&mut self, code: u32, ops: &[u64], c: &mut Cur) -> Result<(), Why> {
        match code {
            1 => {
                self.raw_rest(c);
            }
            2 | 9 | 28 => {
                self.vt(c)?.rel(c)?.raw_rest(c);
            }
            3 => {
                self.vt(c)?.ty(c)?.raw_rest(c);
            }
            4 => {
                self.vt_rest(c)?;
            }
            43 => {
                self.raw(c)?.ty(c)?.vt_rest(c)?;
            }
            5 => {
                self.vt(c)?.rel(c)?.rel(c)?.raw_rest(c);
            }
            29 => {
                self.vt(c)?.rel(c)?.vt(c)?.raw_rest(c);
            }
            6 => {
                self.vt(c)?.vt(c)?.raw_rest(c);
            }
            7 => {
                self.vt(c)?.rel(c)?.vt(c)?.raw_rest(c);
            }
            8 => {
                self.vt(c)?.rel(c)?.rel(c)?.raw_rest(c);
            }
            10 => {
                self.vt_rest(c)?;
            }
            11 => {
                if ops.len() == 3 {
                    self.raw(c)?.raw(c)?.rel(c)?;
                }
                self.raw_rest(c);
            }
            12 => {
                self.switch(c)?;
            }
            31 => {
                self.ty(c)?.rel(c)?.raw_rest(c);
            }
            15 => {
                self.raw_rest(c);
            }
            16 => {
                self.phi(c)?;
            }
            19 => {
                self.ty(c)?.ty(c)?.abs(c)?.raw_rest(c);
            }
            23 => {
                self.ty(c)?.rel(c)?.ty(c)?.raw_rest(c);
            }
            24 => {
                self.vt(c)?.rel(c)?.raw_rest(c);
            }
            26 => {
                self.vt(c)?.raw_rest(c);
            }
            27 => {
                self.vt(c)?.vt(c)?.raw_rest(c);
            }
            55 => {
                let tag = c.next()?;
                let name = self
                    .cx
                    .bundle_tags
                    .get(tag as usize)
                    .ok_or("an unknown bundle tag")?;
                self.h.str(name);
                self.vt_rest(c)?;
            }
            56 => {
                self.vt(c)?.raw_rest(c);
            }
            58 => {
                self.vt(c)?.raw_rest(c);
            }
            60 => {
                while c.i < ops.len() {
                    self.abs(c)?;
                }
            }
            20 | 41 | 44 | 45 | 42 | 46 | 37 | 59 | 38 | 36 => {
                self.memory_operands(code, ops, c)?
            }
            code => return Err(format!("instruction record {code}")),
        }
        Ok(())
    }

    /// The operands of a load, store, atomic or fence record.
    fn memory_operands(&mut self, code: u32, ops: &[u64], c: &mut Cur) -> Result<(), Why> {
        match code {
            20 => {
                self.vt(c)?;
                self.role = Use::Escape;
                if ops.len() - c.i == 3 {
                    self.ty(c)?;
                }
                self.raw_rest(c);
            }
            41 => {
                self.vt(c)?;
                self.role = Use::Escape;
                if ops.len() - c.i == 5 {
                    self.ty(c)?;
                }
                self.raw(c)?.raw(c)?.raw(c)?.scope(c)?.raw_rest(c);
            }
            44 => {
                self.vt(c)?.vt(c)?.raw_rest(c);
            }
            45 => {
                self.vt(c)?.vt(c)?.atomic_tail(c, 3)?;
            }
            42 => {
                self.vt(c)?.rel(c)?.atomic_tail(c, 3)?;
            }
            36 => {
                self.raw(c)?.scope(c)?.raw_rest(c);
            }
            46 => {
                self.vt(c)?.vt(c)?.rel(c)?.atomic_tail(c, 2)?;
            }
            37 => {
                self.vt(c)?.rel(c)?.rel(c)?.atomic_tail(c, 2)?;
            }
            59 => {
                self.vt(c)?.vt(c)?.atomic_tail(c, 3)?;
            }
            38 => {
                self.vt(c)?.rel(c)?.atomic_tail(c, 3)?;
            }
            code => return Err(format!("instruction record {code}")),
        }
        Ok(())
    }

    /// A call or invoke: [attributes, calling convention (+ flags), (fast-math flags),
    /// function type, callee, arguments...]; it defines a value unless it returns void.
    fn call(&mut self, code: u32, c: &mut Cur) -> Result<(), Why> {
        let attrs = c.next()?;
        self.h.hash(&self.cx.attrs.list(attrs)?.0);
        let cc = c.next()?;
        self.h.u64(cc);
        let explicit = if code == 34 {
            if cc & CALL_FMF != 0 {
                self.h.u64(c.next()?);
            }
            cc & CALL_EXPLICIT_TYPE != 0
        } else {
            self.h.u64(c.next()?).u64(c.next()?); // normal and unwind blocks
            cc & INVOKE_EXPLICIT_TYPE != 0
        };
        if !explicit {
            return Err("a call without its function type (old bitcode)".into());
        }
        let fnty = c.next()?;
        self.h.hash(&self.cx.types.hash(fnty)?);
        let (ret, params) = self.cx.types.function(fnty)?;
        self.vt_callee(c)?;
        for p in params {
            let rel = c.next()?;
            if self.cx.types.is_label(p)? {
                return Err("a label argument".into());
            }
            let id = (self.inst as u32).wrapping_sub(rel as u32) as u64;
            if self.cx.types.is_metadata(p)? {
                let m = self.md.node(id, &self.space, self.cx.lines)?;
                self.h.hash(&m.hash);
                self.refs.extend(m.refs);
            } else {
                self.meaning(id, false)?;
            }
        }
        self.vt_rest(c)?; // variadic arguments
        if !self.cx.types.is_void(ret)? {
            self.inst += 1;
        }
        Ok(())
    }

    fn vt_callee(&mut self, c: &mut Cur) -> Result<(), Why> {
        let rel = c.next()?;
        let id = (self.inst as u32).wrapping_sub(rel as u32) as u64;
        if id >= self.inst {
            let ty = c.next()?;
            self.h.hash(&self.cx.types.hash(ty)?);
        }
        self.meaning(id, true)
    }

    /// A value relative to the instruction, with its type after it when it is a
    /// forward reference.
    fn vt(&mut self, c: &mut Cur) -> Result<&mut Self, Why> {
        let rel = c.next()?;
        let id = (self.inst as u32).wrapping_sub(rel as u32) as u64;
        if id >= self.inst {
            let ty = c.next()?;
            self.h.hash(&self.cx.types.hash(ty)?);
        }
        self.meaning(id, false)?;
        Ok(self)
    }

    fn vt_rest(&mut self, c: &mut Cur) -> Result<(), Why> {
        while c.i < c.ops.len() {
            self.vt(c)?;
        }
        Ok(())
    }

    /// A value relative to the instruction (its type known from the context).
    fn rel(&mut self, c: &mut Cur) -> Result<&mut Self, Why> {
        let rel = c.next()?;
        let id = (self.inst as u32).wrapping_sub(rel as u32) as u64;
        self.meaning(id, false)?;
        Ok(self)
    }

    fn abs(&mut self, c: &mut Cur) -> Result<&mut Self, Why> {
        let id = c.next()?;
        self.meaning(id, false)?;
        Ok(self)
    }

    fn ty(&mut self, c: &mut Cur) -> Result<&mut Self, Why> {
        let t = c.next()?;
        self.h.hash(&self.cx.types.hash(t)?);
        Ok(self)
    }

    fn raw(&mut self, c: &mut Cur) -> Result<&mut Self, Why> {
        self.h.u64(c.next()?);
        Ok(self)
    }

    fn raw_rest(&mut self, c: &mut Cur) {
        while let Ok(v) = c.next() {
            self.h.u64(v);
        }
    }

    /// A synchronization scope, by its name when the module has a table of them.
    fn scope(&mut self, c: &mut Cur) -> Result<&mut Self, Why> {
        let id = c.next()?;
        match self.cx.sync_scopes.get(id as usize) {
            Some(name) => self.h.str(name),
            None if self.cx.sync_scopes.is_empty() => self.h.u64(id),
            None => return Err(format!("synchronization scope {id} is not in the table")),
        };
        Ok(self)
    }

    /// `n` plain fields (volatile, ordering...), the scope, then the rest as it is.
    fn atomic_tail(&mut self, c: &mut Cur, n: usize) -> Result<(), Why> {
        for _ in 0..n {
            self.raw(c)?;
        }
        self.scope(c)?;
        self.raw_rest(c);
        Ok(())
    }

    /// [type, condition, default block, (case value, block)*]
    fn switch(&mut self, c: &mut Cur) -> Result<(), Why> {
        if c.ops.first().is_some_and(|&v| v >> 16 == 0x4B5) {
            return Err("a switch in the old case-range format".into());
        }
        self.ty(c)?.rel(c)?.raw(c)?;
        while c.i < c.ops.len() {
            self.abs(c)?.raw(c)?;
        }
        Ok(())
    }

    /// [type, (signed relative value, block)*, (flags)]
    fn phi(&mut self, c: &mut Cur) -> Result<(), Why> {
        self.ty(c)?;
        let pairs = (c.ops.len() - 1) / 2;
        for _ in 0..pairs {
            let v = c.next()?;
            let delta = if v & 1 == 0 {
                (v >> 1) as i64
            } else {
                -((v >> 1) as i64)
            };
            let id = (self.inst as i64).wrapping_sub(delta) as u64;
            self.meaning(id, false)?;
            self.raw(c)?;
        }
        self.raw_rest(c);
        Ok(())
    }

    /// The function's METADATA_ATTACHMENT block: each attachment by kind name and node
    /// content (`dbg` only with line information).
    fn attachments(&mut self, b: &Block) -> Result<(), Why> {
        for r in b.records() {
            let (inst, pairs) = match r.ops.len() % 2 {
                1 => (Some(r.ops[0]), &r.ops[1..]),
                _ => (None, &r.ops[..]),
            };
            for kv in pairs.chunks(2) {
                let kind = self
                    .md
                    .kinds
                    .get(&kv[0])
                    .ok_or("an attachment of an unknown kind")?;
                if kind == "dbg" && !self.cx.lines {
                    continue;
                }
                let m = self.md.node(kv[1], &self.space, self.cx.lines)?;
                self.h
                    .str("attach")
                    .u64(inst.map_or(u64::MAX, |i| i))
                    .str(kind)
                    .hash(&m.hash);
                self.refs.extend(m.refs);
            }
        }
        Ok(())
    }
}

/// Whether instruction record `code` defines a value (calls decide by their type).
fn defines_value(code: u32) -> bool {
    matches!(
        code,
        2 | 3
            | 4
            | 43
            | 5
            | 29
            | 6
            | 7
            | 8
            | 9
            | 28
            | 16
            | 19
            | 20
            | 41
            | 23
            | 26
            | 27
            | 37
            | 46
            | 38
            | 59
            | 56
            | 58
    )
}

/// The operands of one record, taken in order.
struct Cur<'a> {
    ops: &'a [u64],
    i: usize,
}

impl Cur<'_> {
    fn next(&mut self) -> Result<u64, Why> {
        let v = *self
            .ops
            .get(self.i)
            .ok_or("an instruction record cut short")?;
        self.i += 1;
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::asm_names;

    #[test]
    fn inline_assembly_names_globals_by_whole_identifiers() {
        let names: Vec<String> = ["c", "_ZZ5readgiE1c", "flag", "__const.f.t", "u32", ""]
            .map(String::from)
            .to_vec();
        let texts = [
            "st.global.u32 [_ZZ5readgiE1c], %0;".to_string(),
            "ld.global.u32 %0, [__const_$_f_$_t+4];".to_string(),
        ];
        // `c` is inside other words only; `u32` is a whole word of the text (a global of
        // that name would be taken as named: over-cautious, never wrong)
        let ids = Default::default();
        assert_eq!(asm_names(texts.into_iter(), &names, &ids), [1, 3, 4]);
        assert!(asm_names(std::iter::empty(), &names, &Default::default()).is_empty());
    }
}
