//! A module read into its summary: the module block's tables first (types, attributes,
//! names, constants, metadata), then each global's record and each function's body.
//! What cannot be read function by function makes the module opaque: when at least
//! the globals could be listed, each then refers to every other and hashes as the whole
//! module (sound, only less precise); otherwise no global is listed.

use super::body::{self, Body};
use super::constants::{Consts, Space};
use super::hash::{Hash, Hasher};
use super::metadata::Metadata;
use super::tables::{Attrs, Types, Why, strtab_name};
use super::{Global, Kind, Linkage};
use crate::lto::incremental::bitstream::{self, Block, Record, text};

/// A global's record, its fields after the two string-table ones.
struct Head {
    name: String,
    kind: Kind,
    code: u32,
    fields: Vec<u64>,
}

/// The ptx_kernel calling convention.
const CC_PTX_KERNEL: u64 = 71;

type Failed = (Vec<Global>, String);

/// Reads a module; `Err` holds what could be listed and why it is opaque. Also gives
/// the module's inline assembly (`asm` outside functions), which every partition emits.
pub fn read(
    bitcode: &[u8],
    origin: &str,
    lines: bool,
    asm: &mut String,
) -> Result<Vec<Global>, Failed> {
    let top = bitstream::parse(bitcode, origin).map_err(|e| (Vec::new(), e.to_string()))?;
    let fail = |why: Why| (Vec::new(), format!("'{origin}': {why}"));
    let module = top
        .iter()
        .find(|b| b.id == 8)
        .ok_or_else(|| fail("no module block".into()))?;
    let strtab = top
        .iter()
        .filter(|b| b.id == 23)
        .flat_map(|b| b.records())
        .find_map(|r| r.blob.clone())
        .map(|b| &bitcode[b])
        .unwrap_or_default();
    for r in module.records().filter(|r| r.code == 4) {
        asm.push_str(&text(&r.ops));
        asm.push('\n');
    }
    let m = Module::read(module, strtab, bitcode, lines).map_err(fail)?;
    let mut globals = m.heads_as_globals().map_err(fail)?;
    match m.complete(&mut globals) {
        Ok(()) => Ok(globals),
        Err(why) => {
            // every global refers to every other and hashes as the module
            let whole = Hash::of(bitcode);
            let all: Vec<u32> = (0..globals.len() as u32).collect();
            for g in &mut globals {
                g.hash = whole;
                g.refs = all.clone();
                g.address_taken = g.kind == Kind::Function;
                g.written = g.kind == Kind::Variable;
            }
            Err((globals, format!("'{origin}': {why}")))
        }
    }
}

struct Module<'a> {
    data: &'a [u8],
    lines: bool,
    heads: Vec<Head>,
    names: Vec<String>,
    types: Types,
    attrs: Attrs,
    consts: Consts,
    md: Metadata,
    sections: Vec<String>,
    comdats: Vec<String>,
    gc_names: Vec<String>,
    bundle_tags: Vec<String>,
    sync_scopes: Vec<String>,
    bodies: Vec<&'a Block>,
    /// What every global's code depends on: target, layout, module asm, named types.
    context: Hash,
}

fn names_of(b: Option<&Block>) -> Vec<String> {
    b.into_iter()
        .flat_map(|b| b.records())
        .map(|r| text(&r.ops))
        .collect()
}

impl<'a> Module<'a> {
    fn read(
        block: &'a Block,
        strtab: &[u8],
        data: &'a [u8],
        lines: bool,
    ) -> Result<Module<'a>, Why> {
        let mut ctx = Hasher::new("module context");
        let (mut heads, mut sections, mut comdats, mut gc_names) = (vec![], vec![], vec![], vec![]);
        let sub = |id: u32| block.blocks().find(|b| b.id == id);
        for r in block.records() {
            match r.code {
                1 if r.ops.first() != Some(&2) => {
                    return Err(format!(
                        "bitcode version {:?} (names outside a string table)",
                        r.ops
                    ));
                }
                // triple, data layout, module asm
                2..=4 => {
                    ctx.u64(r.code as u64).str(&text(&r.ops));
                }
                5 => sections.push(text(&r.ops)),
                11 => gc_names.push(text(&r.ops)),
                12 => {
                    let [off, size, ..] = r.ops[..] else {
                        return Err("a comdat record cut short".into());
                    };
                    comdats.push(strtab_name(strtab, off, size)?);
                }
                7 | 8 | 14 | 18 => heads.push(head(r, strtab)?),
                9 => return Err("an alias in the old format".into()),
                _ => {}
            }
        }
        if block.blocks().any(|b| b.id == 18) {
            return Err("a use-list order block".into());
        }
        let types = Types::read(sub(17).ok_or("no type table")?)?;
        ctx.hash(&types.named_bodies()?);
        let attrs = Attrs::read(sub(10), sub(9), &types)?;
        let g = heads.len() as u64;
        let consts = match sub(11) {
            Some(b) => Consts::read(b, g)?,
            None => Consts::empty(g),
        };
        let md_blocks: Vec<&Block> = block.blocks().filter(|b| b.id == 15).collect();
        let md = Metadata::read_module(&md_blocks, sub(22), data)?;
        if lines {
            ctx.hash(&md.whole);
        }
        Ok(Module {
            data,
            lines,
            names: heads.iter().map(|h| h.name.clone()).collect(),
            heads,
            types,
            attrs,
            consts,
            md,
            sections,
            comdats,
            gc_names,
            bundle_tags: names_of(sub(21)),
            sync_scopes: names_of(sub(26)),
            bodies: block.blocks().filter(|b| b.id == 12).collect(),
            context: ctx.done(),
        })
    }

    fn space(&self) -> Space<'_> {
        Space {
            names: &self.names,
            types: &self.types,
            module: &self.consts,
            function: None,
            base: self.names.len() as u64 + self.consts.len(),
        }
    }

    /// The globals with what their records say (hashes and references come later).
    fn heads_as_globals(&self) -> Result<Vec<Global>, Why> {
        let mut out = Vec::with_capacity(self.heads.len());
        for h in &self.heads {
            let f = |i: usize| h.fields.get(i).copied().unwrap_or(0);
            let (defined, linkage, kernel, space, constant) = match h.kind {
                Kind::Variable => {
                    let space = match f(1) & 2 {
                        0 => self.types.pointer_space(f(0)).unwrap_or(0),
                        _ => f(1) >> 2,
                    };
                    (f(2) != 0, f(3), false, space, f(1) & 1 == 1)
                }
                Kind::Function => {
                    let kernel = f(1) == CC_PTX_KERNEL || self.attrs.list(f(4))?.1;
                    (f(2) == 0, f(3), kernel, f(16), false)
                }
                Kind::Alias => (true, f(3), false, f(1), false),
            };
            out.push(Global {
                name: h.name.clone(),
                kind: h.kind,
                linkage: Linkage::from_code(linkage),
                defined,
                kernel,
                managed: false,
                address_space: space as u32,
                constant,
                hash: Hash::default(),
                refs: Vec::new(),
                address_taken: false,
                written: false,
                insts: 0,
            });
        }
        let space = self.space();
        for a in self.md.annotations(out.len() as u64) {
            let g = &mut out[a.global as usize];
            for (key, value) in &a.pairs {
                let set = self.consts.integer(*value).is_some_and(|v| v != 0);
                match key.as_str() {
                    "kernel" => g.kernel |= set,
                    "managed" => g.managed |= set,
                    _ => {}
                }
                // (the value's meaning: a launch bound's number, by its constant)
                let _ = space.value(*value)?;
            }
        }
        Ok(out)
    }

    /// Hashes and references: each global's record, body and annotations.
    fn complete(mut self, globals: &mut [Global]) -> Result<(), Why> {
        let annotations = self.md.annotations(globals.len() as u64);
        let mut bodies = self.bodies.clone().into_iter();
        let mut taken: Vec<u32> = Vec::new();
        let mut written: Vec<u32> = Vec::new();
        let name_ids = body::NameIds::new();
        for (i, h) in self.heads.iter().enumerate() {
            let mut hasher = Hasher::new("global");
            hasher.hash(&self.context).u64(h.code as u64).str(&h.name);
            let mut refs = self.record(h, &mut hasher)?;
            if h.kind == Kind::Function && globals[i].defined {
                let block = bodies
                    .next()
                    .ok_or("fewer function bodies than definitions")?;
                let cx = body::Context {
                    data: self.data,
                    names: &self.names,
                    types: &self.types,
                    attrs: &self.attrs,
                    module_consts: &self.consts,
                    bundle_tags: &self.bundle_tags,
                    sync_scopes: &self.sync_scopes,
                    lines: self.lines,
                    name_ids: &name_ids,
                };
                let b: Body = body::read(&cx, &mut self.md, h.fields[0], block)?;
                hasher.hash(&b.hash);
                globals[i].insts = b.insts;
                refs.extend(b.refs);
                taken.extend(b.address_taken);
                written.extend(b.written);
            } else if !is_llvm_used(&h.name) {
                // (an initializer or aliasee holds the addresses it names)
                taken.extend(refs.iter().copied());
                written.extend(refs.iter().copied());
            }
            for a in annotations.iter().filter(|a| a.global == i as u64) {
                for (key, value) in &a.pairs {
                    hasher.str(key).hash(&self.space().value(*value)?.hash);
                }
            }
            refs.sort_unstable();
            refs.dedup();
            globals[i].hash = hasher.done();
            globals[i].refs = refs;
        }
        if bodies.next().is_some() {
            return Err("more function bodies than definitions".into());
        }
        for t in taken {
            if let Some(g) = globals.get_mut(t as usize) {
                g.address_taken = true;
            }
        }
        for w in written {
            if let Some(g) = globals.get_mut(w as usize) {
                g.written = true;
            }
        }
        Ok(())
    }

    /// A global's record canonically into `h`; the globals its fields name.
    fn record(&self, head: &Head, h: &mut Hasher) -> Result<Vec<u32>, Why> {
        let space = self.space();
        let mut refs = Vec::new();
        let name_in = |table: &[String], k: u64| -> Result<String, Why> {
            match k {
                0 => Ok(String::new()),
                k => table
                    .get(k as usize - 1)
                    .cloned()
                    .ok_or_else(|| format!("name #{k} is not in its table")),
            }
        };
        for (i, &v) in head.fields.iter().enumerate() {
            let field = match (head.kind, i) {
                (_, 0) => Field::Type,
                (Kind::Variable, 2) | (Kind::Function, 10 | 13 | 14) => Field::ValuePlusOne,
                (Kind::Alias, 2) => Field::Value,
                (Kind::Variable, 5) | (Kind::Function, 6) => Field::Section,
                (Kind::Variable, 11) | (Kind::Function, 12) => Field::Comdat,
                (Kind::Variable, 12) | (Kind::Function, 4) => Field::Attrs,
                (Kind::Function, 8) => Field::Gc,
                _ => Field::Raw,
            };
            match field {
                Field::Raw => {
                    h.u64(v);
                }
                Field::Type => {
                    h.hash(&self.types.hash(v)?);
                }
                Field::Attrs => {
                    h.hash(&self.attrs.list(v)?.0);
                }
                Field::Section => {
                    h.str(&name_in(&self.sections, v)?);
                }
                Field::Comdat => {
                    h.str(&name_in(&self.comdats, v)?);
                }
                Field::Gc => {
                    h.str(&name_in(&self.gc_names, v)?);
                }
                Field::Value | Field::ValuePlusOne => {
                    let id = match field {
                        Field::Value => Some(v),
                        _ => v.checked_sub(1),
                    };
                    match id {
                        None => {
                            h.str("none");
                        }
                        Some(id) => {
                            let m = space.value(id)?;
                            h.hash(&m.hash);
                            refs.extend(m.refs);
                        }
                    }
                }
            }
        }
        Ok(refs)
    }
}

enum Field {
    Raw,
    Type,
    Attrs,
    Section,
    Comdat,
    Gc,
    Value,
    ValuePlusOne,
}

/// `llvm.used` and `llvm.compiler.used` keep symbols alive; they take no address.
fn is_llvm_used(name: &str) -> bool {
    name == "llvm.used" || name == "llvm.compiler.used"
}

/// A global value's record: its name from the string table, its kind, its fields.
fn head(r: &Record, strtab: &[u8]) -> Result<Head, Why> {
    let (Some(&off), Some(&size)) = (r.ops.first(), r.ops.get(1)) else {
        return Err(format!("global record {} cut short", r.code));
    };
    let kind = match r.code {
        7 => Kind::Variable,
        8 => Kind::Function,
        _ => Kind::Alias,
    };
    let fields = r.ops[2..].to_vec();
    if fields.len() < 4 {
        return Err(format!(
            "global record {} of {} fields",
            r.code,
            fields.len()
        ));
    }
    Ok(Head {
        name: strtab_name(strtab, off, size)?,
        kind,
        code: r.code,
        fields,
    })
}
