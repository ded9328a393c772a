//! Two images compared on everything but their code (`nvlinkrs compare --except-code`):
//! what the host and the driver see of them. The same ELF type and flags (the flags'
//! debug byte, which counts the inputs with line information the merge met, a note); the same
//! kernels, each with the same parameter layout (`.nv.info` parameter records), launch
//! bounds and cluster records, register limit, parameter bank and static shared memory;
//! the same variables, each with its size, section, `st_other` (managed and the like) and
//! initial bytes. Code bytes, the functions it calls, the layout of sections and segments,
//! call graphs, frames and relocations are not compared (`compare --code` reports the
//! code kernel by kernel). An incremental link is judged so against the whole-program
//! link of the same inputs: an internal symbol it made visible (a kernel launched across
//! partitions, a static variable two partitions share) is a note; a read-only internal
//! variable it holds more than once is a note.

use std::collections::BTreeMap;

use super::cubin::*;
use super::equiv::Report;
use super::info;
use crate::bytes::Bytes;
use crate::diag::Result;

/// `.nv.info.<kernel>` records that are the kernel's interface: parameter bank, the
/// parameter records, maximum threads, required threads, register limit, clusters.
const INTERFACE: [u8; 8] = [0x05, 0x0A, 0x10, 0x17, 0x18, 0x3D, 0x3E, 0x3F];

/// A kernel or variable as the comparison sees it.
#[derive(Debug, PartialEq, Eq)]
struct Thing {
    bind: u8,
    /// The rest of what must match.
    shape: Vec<String>,
}

/// As a difference line says it: the binding, then the rest, `; `-separated
/// (`weak; size 0x4 other 0x0 in .nv.global.init; bytes 10000000`).
impl std::fmt::Display for Thing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let bind = match self.bind {
            STB_LOCAL => "local".to_string(),
            STB_GLOBAL => "global".to_string(),
            STB_WEAK => "weak".to_string(),
            b => format!("binding {b}"),
        };
        write!(f, "{bind}")?;
        for s in &self.shape {
            write!(f, "; {s}")?;
        }
        Ok(())
    }
}

/// The definitions of a name in the other image: `absent`, or each as [`Thing`] says it,
/// ` | `-separated.
fn definitions(ys: &[Thing]) -> String {
    match ys {
        [] => "absent".into(),
        _ => ys
            .iter()
            .map(Thing::to_string)
            .collect::<Vec<_>>()
            .join(" | "),
    }
}

fn section_of(c: &Cubin, s: &Symbol) -> String {
    c.sections
        .get(s.shndx as usize)
        .map_or_else(|| "UND".into(), |x| x.name.to_string())
}

fn kernels(c: &Cubin) -> Result<BTreeMap<String, Thing>> {
    let mut out = BTreeMap::new();
    for s in c.symbols.iter().filter(|s| s.is_kernel()) {
        let name = s.name.to_string();
        let mut shape = vec![format!("type {} other {:#x}", s.ty, s.other)];
        if let Some(i) = c.section_index(&format!(".nv.info.{name}")) {
            let sec = &c.sections[i];
            let recs = info::parse(c.bytes(sec), &c.origin, &sec.name, sec.offset)?;
            let mut kept: Vec<String> = recs
                .iter()
                .filter(|r| INTERFACE.contains(&r.attr))
                .map(|r| match r.has_symbol() {
                    // (a symbol by its name: the parameter bank's section)
                    true => {
                        let i = u32::from_le_bytes(r.payload[..4].try_into().unwrap());
                        let sym =
                            c.symbols
                                .get(i as usize)
                                .map_or_else(String::new, |s| match s.ty {
                                    STT_SECTION => section_of(c, s),
                                    _ => s.name.to_string(),
                                });
                        format!("{:#x} {sym} {:02x?}", r.attr, &r.payload[4..])
                    }
                    false => format!("{:#x} {} {:02x?}", r.attr, r.value, &r.payload[..]),
                })
                .collect();
            kept.sort();
            shape.extend(kept);
        }
        for prefix in [".nv.constant0.", ".nv.shared."] {
            if let Some(i) = c.section_index(&format!("{prefix}{name}")) {
                shape.push(format!("{prefix} size {:#x}", c.sections[i].size));
            }
        }
        out.insert(
            name,
            Thing {
                bind: s.bind,
                shape,
            },
        );
    }
    Ok(out)
}

/// Variables by name: each definition (a name held more than once keeps all).
fn variables(c: &Cubin) -> BTreeMap<String, Vec<Thing>> {
    let mut out: BTreeMap<String, Vec<Thing>> = BTreeMap::new();
    for s in c.symbols.iter().filter(|s| s.is_variable()) {
        let sec = c.sections.get(s.shndx as usize);
        let mut shape = vec![format!(
            "size {:#x} other {:#x} in {}",
            s.size,
            s.other,
            section_of(c, s)
        )];
        if let Some(sec) = sec.filter(|x| x.has_bytes()) {
            let bytes = c.bytes(sec);
            let at = s.value as usize;
            if let Some(b) = at
                .checked_add(s.size as usize)
                .and_then(|end| bytes.get(at..end))
            {
                shape.push(format!(
                    "bytes {}",
                    b.iter().map(|x| format!("{x:02x}")).collect::<String>()
                ));
            }
        }
        out.entry(s.name.to_string()).or_default().push(Thing {
            bind: s.bind,
            shape,
        });
    }
    out
}

/// Whether `a` is `e` made visible (an internal symbol of the whole-program image that
/// the partitioned one exports).
fn made_visible(e: &Thing, a: &Thing) -> bool {
    e.bind == STB_LOCAL && a.bind == STB_GLOBAL && e.shape == a.shape
}

pub fn compare(expected: &[u8], actual: &[u8]) -> Result<Report> {
    let e = Cubin::parse(Bytes::from_vec(expected.to_vec()), "expected")?;
    let a = Cubin::parse(Bytes::from_vec(actual.to_vec()), "actual")?;
    let mut r = Report {
        identical: expected == actual,
        ..Default::default()
    };
    // (the flags' top byte counts the debug information the merge met: a note)
    let flags = |c: &Cubin| c.e_flags & 0x00FF_FFFF;
    if (e.e_type, flags(&e), e.osabi, e.abi_version)
        != (a.e_type, flags(&a), a.osabi, a.abi_version)
    {
        r.differences.push(format!(
            "header: type/flags/osabi/abi {:?} vs {:?}",
            (e.e_type, e.e_flags, e.osabi, e.abi_version),
            (a.e_type, a.e_flags, a.osabi, a.abi_version)
        ));
    } else if e.e_flags != a.e_flags {
        r.notes.push(format!(
            "header: debug byte of the flags {:#x} vs {:#x}",
            e.e_flags >> 24,
            a.e_flags >> 24
        ));
    }
    let (ek, ak) = (kernels(&e)?, kernels(&a)?);
    for (name, x) in &ek {
        match ak.get(name) {
            None => r.differences.push(format!("kernel {name}: missing")),
            Some(y) if x == y => {}
            Some(y) if made_visible(x, y) => r.notes.push(format!("kernel {name}: made visible")),
            Some(y) => r.differences.push(format!("kernel {name}: {x} vs {y}")),
        }
    }
    for name in ak.keys().filter(|n| !ek.contains_key(*n)) {
        r.differences.push(format!("kernel {name}: unexpected"));
    }
    let (ev, av) = (variables(&e), variables(&a));
    for (name, xs) in &ev {
        let ys = av.get(name).map(Vec::as_slice).unwrap_or_default();
        for x in xs {
            if ys.contains(x) {
                continue;
            }
            match ys.iter().find(|y| made_visible(x, y)) {
                Some(_) => r.notes.push(format!("variable {name}: made visible")),
                None => r
                    .differences
                    .push(format!("variable {name}: {x} vs {}", definitions(ys))),
            }
        }
        if ys.len() > xs.len() {
            r.notes.push(format!(
                "variable {name}: {} copies (expected {})",
                ys.len(),
                xs.len()
            ));
        }
    }
    for name in av.keys().filter(|n| !ev.contains_key(*n)) {
        let visible = av[name].iter().any(|t| t.bind != STB_LOCAL);
        match visible {
            true => r.differences.push(format!("variable {name}: unexpected")),
            false => r.notes.push(format!(
                "variable {name}: an internal copy the expected image lacks"
            )),
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_difference_names_the_binding_and_the_shape_and_an_absent_definition() {
        let weak = Thing {
            bind: STB_WEAK,
            shape: vec![
                "size 0x4 other 0x0 in .nv.global.init".into(),
                "bytes 10000000".into(),
            ],
        };
        let local = Thing {
            bind: STB_LOCAL,
            shape: vec!["size 0x1 other 0x0 in .nv.global".into()],
        };
        assert_eq!(
            weak.to_string(),
            "weak; size 0x4 other 0x0 in .nv.global.init; bytes 10000000"
        );
        assert_eq!(definitions(&[]), "absent");
        assert_eq!(
            definitions(&[local, weak]),
            "local; size 0x1 other 0x0 in .nv.global | weak; size 0x4 other 0x0 in .nv.global.init; bytes 10000000"
        );
    }
}
