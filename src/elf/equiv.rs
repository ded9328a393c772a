//! Equivalence of two linked cubins, the judgement the differential tests make against
//! nvlink's output: the same ELF header fields (`e_entry` and the table entry sizes
//! included), the same program headers by meaning (`segments`: the sections each one
//! covers, not its offsets), the same sections by name (type, flags, alignment, address,
//! entry size, size; string tables by the names taken from them), the same code bytes per
//! function, the same `.nv.info` records per function and globally (symbol indices
//! compared by name, the `EXTERNS` lists too), the same symbols (name, type, binding,
//! st_other, section name, value, size; section symbols too) and the same relocations
//! per section name and target (offset, type, symbol name, addend). Orders and offsets
//! may differ; a byte-for-byte comparison is reported separately. A tool note that
//! differs only in its recorded command line is a note, not a difference.

use std::collections::BTreeMap;

use super::cubin::*;
use super::{info, segments};
use crate::bytes::{Bytes, Le};
use crate::diag::Result;

#[derive(Debug, Default)]
pub struct Report {
    pub differences: Vec<String>,
    /// What differs but does not count: the tool note's command line.
    pub notes: Vec<String>,
    pub identical: bool,
}

impl Report {
    pub fn equivalent(&self) -> bool {
        self.differences.is_empty()
    }

    /// The first `limit` differences, then how many more of each kind (the words
    /// before the first `:`, a section's name left out).
    pub fn summary(&self, limit: usize) -> Vec<String> {
        let mut out: Vec<String> = self.differences.iter().take(limit).cloned().collect();
        let rest = self.differences.get(limit..).unwrap_or(&[]);
        if !rest.is_empty() {
            let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
            for d in rest {
                let kind = d.split([':', ' ']).next().unwrap_or(d);
                *kinds.entry(kind).or_default() += 1;
            }
            let counts: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
            out.push(format!(
                "... and {} more: {}",
                rest.len(),
                counts.join(", ")
            ));
        }
        out
    }
}

/// Symbol `i` of `c.symbols` (or, with `merc`, of the capsule-Mercury table) by name.
fn sym_name_in(c: &Cubin, merc: bool, i: u32) -> String {
    let table = if merc { &c.merc_symbols } else { &c.symbols };
    match table.get(i as usize) {
        Some(s) if s.ty == STT_SECTION => {
            format!(
                "[section {}]",
                c.sections.get(s.shndx as usize).map_or("?", |x| &x.name)
            )
        }
        Some(s) => s.name.to_string(),
        None => format!("#{i}"),
    }
}

fn sym_name(c: &Cubin, i: u32) -> String {
    sym_name_in(c, false, i)
}

/// Whether a section's symbol indices are into `.nv.merc.symtab`.
fn is_merc(s: &Section) -> bool {
    matches!(
        s.ty,
        SHT_MERC_RELA
            | SHT_MERC_RESOLVED_RELA
            | SHT_MERC_INFO
            | SHT_MERC_CALLGRAPH
            | SHT_MERC_PROTOTYPE
            | SHT_CAPMERC_TEXT
    )
}

fn section_name(c: &Cubin, i: u16) -> String {
    if i == 0 {
        return "UND".into();
    }
    c.sections
        .get(i as usize)
        .map_or(format!("#{i}"), |s| s.name.to_string())
}

/// Records with their symbol fields replaced by names, for comparison.
fn info_view(c: &Cubin, s: &Section) -> Result<Vec<String>> {
    let recs = info::parse(c.bytes(s), &c.origin, &s.name, s.offset)?;
    Ok(recs
        .iter()
        .map(|r| {
            if r.attr == info::EXTERNS {
                let names: Vec<String> = (r.payload.chunks_exact(4))
                    .map(|e| sym_name_in(c, is_merc(s), u32::from_le_bytes(e.try_into().unwrap())))
                    .collect();
                format!("{:#x} externs {}", r.attr, names.join(" "))
            } else if r.has_symbol() {
                let sym = u32::from_le_bytes(r.payload[..4].try_into().unwrap());
                format!(
                    "{:#x} {} {}",
                    r.attr,
                    sym_name_in(c, is_merc(s), sym),
                    hex(&r.payload[4..])
                )
            } else {
                format!(
                    "{:#x} f{} {:#x} {}",
                    r.attr,
                    r.format,
                    r.value,
                    hex(&r.payload)
                )
            }
        })
        .collect())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn link_name(c: &Cubin, s: &Section, v: u32, is_info: bool) -> String {
    if s.ty == SHT_CAPMERC_TEXT && is_info {
        return format!("sym {}", sym_name_in(c, true, v));
    }
    if s.ty == SHT_PROGBITS && s.flags & SHF_EXECINSTR != 0 && is_info {
        return format!("sym {} regs {}", sym_name(c, v & 0xFFFFFF), v >> 24);
    }
    if is_info && s.flags & SHF_INFO_LINK == 0 && !matches!(s.ty, SHT_RELA | SHT_REL) {
        return format!("{v:#x}");
    }
    if s.ty == SHT_PROGBITS && s.flags & SHF_EXECINSTR != 0 && is_info {
        return format!("sym {}", sym_name(c, v & 0xFFFFFF));
    }
    match c.sections.get(v as usize) {
        Some(t) if v != 0 => t.name.to_string(),
        _ => format!("{v:#x}"),
    }
}

pub fn compare(expected: &[u8], actual: &[u8]) -> Result<Report> {
    let e = Cubin::parse(Bytes::from_vec(expected.to_vec()), "expected")?;
    let a = Cubin::parse(Bytes::from_vec(actual.to_vec()), "actual")?;
    let mut d = Vec::new();
    let mut diff = |what: String| d.push(what);
    header_differences(&e, &a, &mut diff)?;
    section_differences(&e, &a, &mut diff)?;
    symbol_differences(&e, &a, &mut diff);
    relocation_differences(&e, &a, &mut diff)?;
    if call_graph(&e) != call_graph(&a) {
        diff(format!(
            "callgraph: {}",
            delta(&call_graph(&e), &call_graph(&a))
        ));
    }
    // a tool note whose command line alone differs is a note
    let mut notes = Vec::new();
    let note = |c: &Cubin| {
        c.section_index(".note.nv.tkinfo")
            .map(|i| c.bytes(&c.sections[i]).to_vec())
    };
    if let (Some(x), Some(y)) = (note(&e), note(&a))
        && x != y
        && let Some(lines) = super::tkinfo::command_lines_only(&x, &y)
    {
        d.retain(|m| !m.starts_with("section .note.nv.tkinfo:"));
        for (x, y) in lines {
            notes.push(format!("tool note command line: {x:?} vs {y:?}"));
        }
    }
    Ok(Report {
        identical: d.is_empty() && expected == actual,
        differences: d,
        notes,
    })
}

/// Where a difference is said.
type Diff<'d> = dyn FnMut(String) + 'd;

/// The ELF header and the program headers.
fn header_differences(e: &Cubin, a: &Cubin, diff: &mut Diff) -> Result<()> {
    if (e.e_type, e.e_flags, e.osabi, e.abi_version)
        != (a.e_type, a.e_flags, a.osabi, a.abi_version)
    {
        diff(format!(
            "header: type/flags/osabi/abi {:?} vs {:?}",
            (e.e_type, e.e_flags, e.osabi, e.abi_version),
            (a.e_type, a.e_flags, a.osabi, a.abi_version)
        ));
    }
    let (eh, ah) = (header_view(e), header_view(a));
    if eh != ah {
        diff(format!("header: {}", delta(&eh, &ah)));
    }
    let (ep, ap) = (segments_view(e)?, segments_view(a)?);
    if ep != ap {
        diff(format!("program headers: {}", delta(&ep, &ap)));
    }
    Ok(())
}

/// The sections by name: each pair's header and contents ([`section_pair`]), those
/// missing and those unexpected.
fn section_differences(e: &Cubin, a: &Cubin, diff: &mut Diff) -> Result<()> {
    let by_name = |c: &Cubin| -> BTreeMap<String, Vec<usize>> {
        let mut m: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, s) in c.sections.iter().enumerate().skip(1) {
            m.entry(s.name.to_string()).or_default().push(i);
        }
        m
    };
    let (es, as_) = (by_name(e), by_name(a));
    for (name, ei) in &es {
        let Some(ai) = as_.get(name) else {
            diff(format!("section {name}: missing"));
            continue;
        };
        if ei.len() != ai.len() {
            diff(format!(
                "section {name}: {} vs {} copies",
                ei.len(),
                ai.len()
            ));
            continue;
        }
        for (&x, &y) in ei.iter().zip(ai) {
            section_pair(e, a, name, x, y, diff)?;
        }
    }
    for name in as_.keys().filter(|n| !es.contains_key(*n)) {
        diff(format!("section {name}: unexpected"));
    }
    Ok(())
}

/// One section `name` of each image (`x` in `e`, `y` in `a`): its header, and its
/// contents by meaning (string tables by the names used, capsules by their function,
/// `.nv.info` by records; tables compared elsewhere skipped; the rest byte for byte).
fn section_pair(
    e: &Cubin,
    a: &Cubin,
    name: &str,
    x: usize,
    y: usize,
    diff: &mut Diff,
) -> Result<()> {
    let (sx, sy) = (&e.sections[x], &a.sections[y]);
    if (sx.ty, sx.flags, sx.align) != (sy.ty, sy.flags, sy.align) {
        diff(format!(
            "section {name}: type/flags/align {:#x}/{:#x}/{} vs {:#x}/{:#x}/{}",
            sx.ty, sx.flags, sx.align, sy.ty, sy.flags, sy.align
        ));
    }
    let (ax, ay) = (section_addr(e, x), section_addr(a, y));
    if (ax, sx.entsize) != (ay, sy.entsize) {
        diff(format!(
            "section {name}: addr/entsize {ax:#x}/{:#x} vs {ay:#x}/{:#x}",
            sx.entsize, sy.entsize
        ));
    }
    let strings = sx.ty == SHT_STRTAB;
    if sx.size != sy.size && !strings {
        diff(format!(
            "section {name}: size {:#x} vs {:#x}",
            sx.size, sy.size
        ));
    }
    if link_name(e, sx, sx.link, false) != link_name(a, sy, sy.link, false)
        || link_name(e, sx, sx.info, true) != link_name(a, sy, sy.info, true)
    {
        diff(format!(
            "section {name}: link/info {}/{} vs {}/{}",
            link_name(e, sx, sx.link, false),
            link_name(e, sx, sx.info, true),
            link_name(a, sy, sy.link, false),
            link_name(a, sy, sy.info, true)
        ));
    }
    match sx.ty {
        // a string table by the names taken from it, whatever their order
        SHT_STRTAB => {
            let (vx, vy) = (names_used(e, x), names_used(a, y));
            if vx != vy {
                diff(format!("section {name}: strings {}", delta(&vx, &vy)));
            }
        }
        SHT_SYMTAB
        | SHT_RELA
        | SHT_REL
        | SHT_CUDA_RESOLVED_RELA
        | SHT_CUDA_CALLGRAPH
        | SHT_CUDA_PROTOTYPE
        | SHT_MERC_SYMTAB
        | SHT_MERC_RELA
        | SHT_MERC_RESOLVED_RELA
        | SHT_MERC_CALLGRAPH
        | SHT_MERC_PROTOTYPE => {}
        // a capsule starts with the section index of its function's SASS
        SHT_CAPMERC_TEXT => {
            let head = |c: &Cubin, s: &Section| {
                let b = c.bytes(s);
                let at = b
                    .get(..4)
                    .map_or(0, |h| u32::from_le_bytes(h.try_into().unwrap()));
                (
                    section_name(c, at as u16),
                    b.get(4..).unwrap_or(&[]).to_vec(),
                )
            };
            let (hx, hy) = (head(e, sx), head(a, sy));
            if hx.0 != hy.0 {
                diff(format!(
                    "section {name}: for code section {} vs {}",
                    hx.0, hy.0
                ));
            }
            if hx.1 != hy.1 {
                diff(format!("section {name}: capsule bytes differ"));
            }
        }
        SHT_CUDA_INFO | SHT_MERC_INFO => {
            let (vx, vy) = (info_view(e, sx)?, info_view(a, sy)?);
            if vx != vy {
                diff(format!("section {name}: records {}", delta(&vx, &vy)));
            }
        }
        _ => {
            if e.bytes(sx) != a.bytes(sy) {
                let at = e
                    .bytes(sx)
                    .iter()
                    .zip(a.bytes(sy))
                    .position(|(p, q)| p != q);
                diff(format!("section {name}: bytes differ (first at {at:?})"));
            }
        }
    }
    Ok(())
}

/// The symbols by name (both tables, SASS and Mercury), and the section symbols.
fn symbol_differences(e: &Cubin, a: &Cubin, diff: &mut Diff) {
    let syms = |c: &Cubin| -> BTreeMap<String, Vec<String>> {
        let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let all = c.symbols.iter().skip(1).map(|s| (s, ""));
        let merc = c.merc_symbols.iter().skip(1).map(|s| (s, "(mercury) "));
        for (s, table) in all.chain(merc).filter(|(s, _)| s.ty != STT_SECTION) {
            m.entry(format!("{table}{}", s.name))
                .or_default()
                .push(format!(
                    "type {} bind {} other {:#x} in {} value {:#x} size {:#x}",
                    s.ty,
                    s.bind,
                    s.other,
                    section_name(c, s.shndx),
                    s.value,
                    s.size
                ));
        }
        m
    };
    let sections_with_symbol = |c: &Cubin| -> Vec<String> {
        let merc = c.merc_symbols.iter().skip(1);
        let mut v: Vec<String> = c
            .symbols
            .iter()
            .map(|s| (s, ""))
            .chain(merc.map(|s| (s, "(mercury) ")))
            .filter(|(s, _)| s.ty == STT_SECTION)
            .map(|(s, table)| {
                format!(
                    "{table}{} {} bind {} other {:#x} value {:#x} size {:#x}",
                    s.name,
                    section_name(c, s.shndx),
                    s.bind,
                    s.other,
                    s.value,
                    s.size
                )
            })
            .collect();
        v.sort();
        v
    };
    let (ey, ay) = (syms(e), syms(a));
    if ey != ay {
        for (k, v) in &ey {
            if ay.get(k) != Some(v) {
                diff(format!("symbol {k}: {v:?} vs {:?}", ay.get(k)));
            }
        }
        for k in ay.keys().filter(|k| !ey.contains_key(*k)) {
            diff(format!("symbol {k}: unexpected"));
        }
    }
    if sections_with_symbol(e) != sections_with_symbol(a) {
        diff(format!(
            "section symbols: {}",
            delta(&sections_with_symbol(e), &sections_with_symbol(a))
        ));
    }
}

/// The relocations, keyed by their section's name and the section they apply to;
/// several of one key kept apart.
fn relocation_differences(e: &Cubin, a: &Cubin, diff: &mut Diff) -> Result<()> {
    let relocs = |c: &Cubin| -> Result<BTreeMap<String, Vec<Vec<String>>>> {
        let mut m: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
        for (i, s) in c.sections.iter().enumerate() {
            if !matches!(
                s.ty,
                SHT_RELA
                    | SHT_REL
                    | SHT_CUDA_RESOLVED_RELA
                    | SHT_MERC_RELA
                    | SHT_MERC_RESOLVED_RELA
            ) {
                continue;
            }
            let merc = matches!(s.ty, SHT_MERC_RELA | SHT_MERC_RESOLVED_RELA);
            let mut v: Vec<String> = c
                .relocations(i)?
                .iter()
                .map(|r| {
                    format!(
                        "{:#x} {} {} {:+#x}",
                        r.offset,
                        match merc {
                            true => format!("{:#x}", r.ty),
                            false => super::reloc::name(r.ty).to_string(),
                        },
                        sym_name_in(c, merc, r.sym),
                        r.addend
                    )
                })
                .collect();
            v.sort();
            let target = link_name(c, s, s.info, true);
            m.entry(format!("{} (for {target})", s.name))
                .or_default()
                .push(v);
        }
        for lists in m.values_mut() {
            lists.sort();
        }
        Ok(m)
    };
    let (er, ar) = (relocs(e)?, relocs(a)?);
    for (k, v) in &er {
        match ar.get(k) {
            Some(w) if w == v => {}
            Some(w) if w.len() == v.len() => {
                for (x, y) in v.iter().zip(w).filter(|(x, y)| x != y) {
                    diff(format!("relocations {k}: {}", delta(x, y)));
                }
            }
            Some(w) => diff(format!(
                "relocations {k}: {} vs {} sections",
                v.len(),
                w.len()
            )),
            None => diff(format!("relocations {k}: {}", delta(&v.concat(), &[]))),
        }
    }
    for k in ar.keys().filter(|k| !er.contains_key(*k)) {
        diff(format!("relocations {k}: unexpected"));
    }
    Ok(())
}

/// The call graph's edges and the prototypes, by name.
fn call_graph(c: &Cubin) -> Vec<String> {
    let strtab = c
        .sections
        .iter()
        .find(|s| s.name == ".strtab")
        .map(|s| c.bytes(s))
        .unwrap_or(&[]);
    let string = |o: i32| -> String {
        let Some(rest) = usize::try_from(o).ok().and_then(|o| strtab.get(o..)) else {
            return o.to_string();
        };
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        String::from_utf8_lossy(&rest[..end]).into_owned()
    };
    let mut v = Vec::new();
    for s in c.sections.iter().filter(|s| {
        matches!(
            s.ty,
            SHT_CUDA_CALLGRAPH | SHT_CUDA_PROTOTYPE | SHT_MERC_CALLGRAPH | SHT_MERC_PROTOTYPE
        )
    }) {
        let merc = is_merc(s);
        let graph = matches!(s.ty, SHT_CUDA_CALLGRAPH | SHT_MERC_CALLGRAPH);
        let mut group = 0;
        for e in c.bytes(s).chunks_exact(8) {
            let x = u32::from_le_bytes(e[..4].try_into().unwrap());
            let y = i32::from_le_bytes(e[4..].try_into().unwrap());
            if graph && x == 0 && (-4..=-1).contains(&y) {
                group = -y;
                continue;
            }
            let yn = if graph && (group == 1 || group == 4) {
                sym_name_in(c, merc, y as u32)
            } else {
                string(y)
            };
            v.push(format!(
                "{} {group} {} {}",
                s.name,
                sym_name_in(c, merc, x),
                yn
            ));
        }
    }
    v.sort();
    v
}

/// The ELF header fields the section and symbol comparisons leave out: the identity
/// bytes, sizes of the header and its tables, `e_entry`, `e_version`, the string table
/// of section names (by name) and whether there are program headers.
fn header_view(c: &Cubin) -> Vec<String> {
    let d: &[u8] = &c.data;
    let shstrndx = d.u16_at(0x3E).unwrap_or(0);
    vec![
        format!("ident {}", hex(&d[..16])),
        format!("version {:#x}", d.u32_at(0x14).unwrap_or(0)),
        format!("entry {:#x}", d.u64_at(0x18).unwrap_or(0)),
        format!(
            "sizes ehdr {} phdr {} shdr {}",
            d.u16_at(0x34).unwrap_or(0),
            d.u16_at(0x36).unwrap_or(0),
            d.u16_at(0x3A).unwrap_or(0)
        ),
        format!("program headers {}", d.u16_at(0x38).unwrap_or(0)),
        format!("section names in {}", section_name(c, shstrndx)),
    ]
}

/// The program headers by meaning, in their order (`segments::describe`).
fn segments_view(c: &Cubin) -> Result<Vec<String>> {
    Ok(segments::read(c)?
        .iter()
        .map(|s| segments::describe(c, s))
        .collect())
}

/// `sh_addr` of section `i` (the reader keeps no field for it: always 0 in a cubin).
fn section_addr(c: &Cubin, i: usize) -> u64 {
    let d: &[u8] = &c.data;
    let shoff = d.u64_at(0x28).unwrap_or(0) as usize;
    d.u64_at(shoff + i * 64 + 0x10).unwrap_or(0)
}

/// The names taken from string table `t`: section names (from `.shstrtab`), the names
/// of the symbols of a table that links to it, and (from `.strtab`) the prototype and
/// call-graph strings; sorted, each once. Strings nobody refers to are left out: nvlink's
/// tables hold names of sections it did not make (`.nv.prototype`, `.symtab_shndx`,
/// `.rel.nv.constant0.*`, `__UDT*`...), and below sm_100 its `.strtab` repeats every
/// section name.
fn names_used(c: &Cubin, t: usize) -> Vec<String> {
    let d: &[u8] = &c.data;
    let mut v = Vec::new();
    if d.u16_at(0x3E).is_some_and(|i| i as usize == t) {
        v.extend(c.sections.iter().skip(1).map(|s| s.name.to_string()));
    }
    for s in c.sections.iter().filter(|s| s.link as usize == t) {
        let table = match s.ty {
            SHT_SYMTAB => &c.symbols,
            SHT_MERC_SYMTAB => &c.merc_symbols,
            _ => continue,
        };
        v.extend(table.iter().skip(1).map(|s| s.name.to_string()));
    }
    if c.sections[t].name == ".strtab" {
        let strtab = c.bytes(&c.sections[t]);
        for s in c
            .sections
            .iter()
            .filter(|s| matches!(s.ty, SHT_CUDA_PROTOTYPE | SHT_MERC_PROTOTYPE))
        {
            for e in c.bytes(s).chunks_exact(8) {
                let o = u32::from_le_bytes(e[4..].try_into().unwrap()) as usize;
                if let Some(rest) = strtab.get(o..) {
                    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
                    v.push(String::from_utf8_lossy(&rest[..end]).into_owned());
                }
            }
        }
    }
    v.retain(|n| !n.is_empty());
    v.sort();
    v.dedup();
    v
}

/// What only the expected list has, and what only the actual list has (or, when both
/// hold the same elements, that the order differs).
fn delta(e: &[String], a: &[String]) -> String {
    let mut only_e: Vec<&String> = Vec::new();
    let mut rest: Vec<&String> = a.iter().collect();
    for x in e {
        match rest.iter().position(|y| *y == x) {
            Some(p) => {
                rest.remove(p);
            }
            None => only_e.push(x),
        }
    }
    if only_e.is_empty() && rest.is_empty() {
        return format!("same {} entries in another order", e.len());
    }
    format!("expected only {only_e:?}; actual only {rest:?}")
}
