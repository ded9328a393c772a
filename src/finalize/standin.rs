//! Stand-in definitions, so that a unit that refers to other units' functions and
//! variables links alone in libnvJitLink (which refuses an undefined reference, and has no
//! `-r`-like mode that keeps the executable form of the code). Each reference the unit
//! makes to a global another input defines gets a definition of its own kind: a device
//! function of the same encoded prototype (`.nv.prototype`'s `#ii`: int(int); libnvJitLink
//! refuses another), a kernel, or a variable in the same space and of the same size. Their
//! bodies are empty: the code the finalizer makes for a function does not depend on what
//! it calls (docs/rules/finalizer.md), and only the unit's own functions are
//! taken from the result.
//!
//! A stand-in is made from a template, a PTX definition named [`PLACEHOLDER`] that the
//! finalizer itself compiles (`-r`: a relocatable cubin, once per kind and target, and
//! cached), renamed: every symbol and section name that holds the placeholder gets the
//! reference's name (the new names appended to the string tables, which move to the
//! end of the file). A reference of a kind no template is written for (a prototype of
//! another form, a variable of another space) leaves the unit to the whole-program job.

use std::collections::HashMap;

use crate::arch::Arch;
use crate::bytes::Le;
use crate::diag::{Error, Result};
use crate::elf::cubin::{
    Cubin, SHT_CUDA_PROTOTYPE, SHT_MERC_SYMTAB, SHT_SYMTAB, STB_LOCAL, STO_MANAGED,
    STT_CUDA_OBJECT, STT_FUNC, STT_OBJECT,
};

/// The name a template defines, replaced by the reference's.
pub const PLACEHOLDER: &str = "__nvlinkrs_standin";

/// What a reference needs of its stand-in.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A device function of this encoded prototype (`#ii`, `#vb12l`: `#`, the return
    /// type, then the parameters; `i` 32 bits, `l` 64 bits, `bN` N bytes, `v` none).
    Function(String),
    /// A kernel (a launch from device code names it).
    Kernel,
    /// A variable: its space (`st_other`: 0x20 global, 0x24 managed, 0x80 constant) and
    /// size.
    Variable { other: u8, size: u64 },
}

/// A reference of the unit and what its stand-in must be.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Reference {
    pub name: String,
    pub kind: Kind,
}

/// The unit's undefined global references that another input defines (`elsewhere`),
/// sorted by name, each with what its stand-in must be; `None` when one of them is of a
/// kind no stand-in is written for.
pub fn references(
    unit: &Cubin,
    elsewhere: &dyn Fn(&str) -> bool,
) -> Result<Option<Vec<Reference>>> {
    let protos = prototypes(unit)?;
    let mut out = Vec::new();
    for (k, s) in unit.symbols.iter().enumerate() {
        if s.defined() || s.bind == STB_LOCAL || !elsewhere(s.name.as_str()) {
            continue;
        }
        let kind = match s.ty {
            STT_FUNC if s.is_entry() => Kind::Kernel,
            STT_FUNC => match protos.get(&(k as u32)) {
                Some(p) => Kind::Function(p.clone()),
                None => return Ok(None),
            },
            STT_OBJECT | STT_CUDA_OBJECT if matches!(s.other, 0x20 | 0x24 | 0x80) => {
                Kind::Variable {
                    other: s.other,
                    size: s.size,
                }
            }
            _ => return Ok(None),
        };
        if let Kind::Function(p) = &kind
            && prototype_types(p).is_none()
        {
            return Ok(None);
        }
        out.push(Reference {
            name: s.name.to_string(),
            kind,
        });
    }
    out.sort();
    out.dedup_by(|a, b| a.name == b.name);
    Ok(Some(out))
}

/// The encoded prototype of each function symbol the unit lists: `.nv.prototype`'s
/// entries (symbol, `.strtab` offset), else the call graph's functions that may be called
/// indirectly (its group 2: symbol, prototype offset).
fn prototypes(unit: &Cubin) -> Result<HashMap<u32, String>> {
    let mut out = HashMap::new();
    for s in unit.sections.iter().filter(|s| s.ty == SHT_CUDA_PROTOTYPE) {
        for e in unit.bytes(s).chunks_exact(8) {
            let (sym, at) = (e.u32_at(0).unwrap_or(0), e.u32_at(4).unwrap_or(0));
            if let Some(p) = unit.strtab_string(at as i64) {
                out.insert(sym, p);
            }
        }
    }
    for (a, b, group) in unit.callgraph_entries()? {
        if group == 2
            && b > 0
            && let Some(p) = unit.strtab_string(b)
        {
            out.entry(a).or_insert(p);
        }
    }
    Ok(out)
}

/// The PTX of the template for `kind` at `arch` (a definition named [`PLACEHOLDER`]),
/// or `None` for a prototype it cannot write.
pub fn template_ptx(kind: &Kind, arch: Arch) -> Option<String> {
    let body = match kind {
        Kind::Kernel => format!(".visible .entry {PLACEHOLDER}()\n{{\n\tret;\n}}\n"),
        Kind::Variable { other, size } => {
            let space = match other {
                0x80 => ".const",
                o if o & STO_MANAGED != 0 => ".global .attribute(.managed)",
                _ => ".global",
            };
            format!(
                ".visible {space} .align 16 .b8 {PLACEHOLDER}[{}];\n",
                (*size).max(1)
            )
        }
        Kind::Function(p) => {
            let mut types = prototype_types(p)?.into_iter();
            let ret = match types.next()? {
                None => String::new(),
                Some(t) => format!("({}) ", param(t, "r")),
            };
            let mut params = Vec::new();
            for (k, t) in types.enumerate() {
                params.push(param(t?, &format!("p{k}")));
            }
            format!(
                ".visible .func {ret}{PLACEHOLDER}({})\n{{\n\tret;\n}}\n",
                params.join(", ")
            )
        }
    };
    Some(format!(
        ".version 9.0\n.target {arch}\n.address_size 64\n\n{body}"
    ))
}

/// A prototype's types, the return type first: `Some(n)` for `n` bytes (`i` 4, `l` 8,
/// `bN` N), `None` for `v` (nothing; the return type only); `None` for another form.
fn prototype_types(p: &str) -> Option<Vec<Option<u64>>> {
    let mut rest = p.strip_prefix('#')?.as_bytes();
    let mut out = Vec::new();
    while let Some((&c, tail)) = rest.split_first() {
        rest = tail;
        out.push(match c {
            b'i' => Some(4),
            b'l' => Some(8),
            b'v' if out.is_empty() => None,
            b'b' => {
                let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
                let n: u64 = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
                rest = &rest[digits..];
                if n == 0 || n > 1 << 16 {
                    return None;
                }
                Some(n)
            }
            _ => return None,
        });
    }
    (!out.is_empty()).then_some(out)
}

/// A parameter (or return value) declaration of `n` bytes.
fn param(n: u64, name: &str) -> String {
    match n {
        4 => format!(".param .b32 {name}"),
        8 => format!(".param .b64 {name}"),
        _ => format!(".param .align 1 .b8 {name}[{n}]"),
    }
}

/// `template` (a relocatable cubin defining [`PLACEHOLDER`]) with that name replaced by
/// `name` in every symbol name and section name that holds it.
pub fn renamed(template: &[u8], name: &str) -> Result<Vec<u8>> {
    let bad = |what: &str| Error::fatal(format!("the stand-in template {what}"));
    let mut data = template.to_vec();
    let c = Cubin::parse(crate::bytes::Bytes::from_vec(template.to_vec()), "stand-in")?;
    let shstrndx = match data.u16_at(0x3E) {
        Some(i) if (i as usize) < c.sections.len() => i as usize,
        _ => return Err(bad("has no section names")),
    };
    let shoff = data.u64_at(0x28).unwrap_or(0) as usize;
    // the section names
    let names: Vec<usize> = (0..c.sections.len()).map(|i| shoff + i * 64).collect();
    retable(&mut data, &c, shstrndx, &names, name)?;
    // the symbol names of both symbol tables (which share `.strtab`)
    let Some(symtab) = c.sections.iter().position(|s| s.ty == SHT_SYMTAB) else {
        return Err(bad("has no symbol table"));
    };
    let strtab = c.sections[symtab].link as usize;
    let mut at = Vec::new();
    for (i, s) in c.sections.iter().enumerate() {
        if matches!(s.ty, SHT_SYMTAB | SHT_MERC_SYMTAB) {
            if s.link as usize != strtab {
                return Err(bad(&format!(
                    "'{}' names another string table",
                    c.sections[i].name
                )));
            }
            at.extend((0..s.size as usize / 24).map(|k| s.offset as usize + k * 24));
        }
    }
    retable(&mut data, &c, strtab, &at, name)?;
    Ok(data)
}

/// String table `t` of `c` with every string that holds [`PLACEHOLDER`] and is named
/// by a 32-bit offset at one of `refs` (file offsets) copied with `name` in its place,
/// the copies appended to the table, the offsets pointed at them and the table moved to
/// the end of `data`.
fn retable(data: &mut Vec<u8>, c: &Cubin, t: usize, refs: &[usize], name: &str) -> Result<()> {
    let old = c.bytes(&c.sections[t]).to_vec();
    let mut table = old.clone();
    let mut moved: HashMap<u32, u32> = HashMap::new();
    for &r in refs {
        let off = data.u32_at(r).unwrap_or(0);
        let Some(s) = crate::elf::cubin::string_at(&old, off as i64) else {
            continue;
        };
        if !s.contains(PLACEHOLDER) {
            continue;
        }
        let new = *moved.entry(off).or_insert_with(|| {
            let at = table.len() as u32;
            table.extend_from_slice(s.replace(PLACEHOLDER, name).as_bytes());
            table.push(0);
            at
        });
        data[r..r + 4].copy_from_slice(&new.to_le_bytes());
    }
    let at = data.len() as u64;
    data.extend_from_slice(&table);
    let header = data.u64_at(0x28).unwrap_or(0) as usize + t * 64;
    if header + 64 > data.len() {
        return Err(Error::fatal("the stand-in template's section table is cut"));
    }
    data[header + 0x18..header + 0x20].copy_from_slice(&at.to_le_bytes());
    data[header + 0x20..header + 0x28].copy_from_slice(&(table.len() as u64).to_le_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prototypes_become_ptx_or_nothing() {
        let arch = Arch::plain(100);
        let f = |p: &str| template_ptx(&Kind::Function(p.into()), arch);
        let ii = f("#ii").unwrap();
        assert!(
            ii.contains(&format!(
                ".visible .func (.param .b32 r) {PLACEHOLDER}(.param .b32 p0)"
            )),
            "{ii}"
        );
        assert!(f("#v").unwrap().contains(&format!(".func {PLACEHOLDER}()")));
        assert!(f("#vb12l").unwrap().contains(&format!(
            ".func {PLACEHOLDER}(.param .align 1 .b8 p0[12], .param .b64 p1)"
        )));
        // (vprintf's form, a `v` parameter, an unknown letter, no `#`, an empty array)
        for p in ["#ill|12p4r20sRx", "#iv", "#iq", "ii", "#", "#ib0", "#ib"] {
            assert_eq!(f(p), None, "{p}");
        }
        let v = template_ptx(
            &Kind::Variable {
                other: 0x24,
                size: 4,
            },
            Arch::plain(120),
        );
        assert!(v.unwrap().contains(".target sm_120"));
    }
}
