//! What `nvlink -v` reports about a linked image: its global and bank-3 constant memory,
//! then per kernel its registers, barriers, stack, shared memory, parameter bank and
//! local memory, read back from the written cubin the way nvlink 13.5 prints them:
//! kernels in the reverse order of their code sections, at least one barrier; from sm_100
//! no constant banks and the shared memory without the 1 KiB reservation.

use crate::elf::cubin::Cubin;
use crate::elf::info::{self, Record};

/// The info lines, without the tool's prefix.
pub fn report(c: &Cubin) -> Vec<String> {
    let size = |name: &str| {
        c.sections
            .iter()
            .filter(|s| s.name == name)
            .map(|s| s.size)
            .sum::<u64>()
    };
    let mut out = Vec::new();
    let sm = (c.e_flags >> 8) & 0xFF;
    let gmem = size(".nv.global") + size(".nv.global.init");
    let mut line = format!("{gmem} bytes gmem");
    if sm < 100 && c.section_index(".nv.constant3").is_some() {
        line += &format!(", {} bytes cmem[3]", size(".nv.constant3"));
    }
    out.push(line);
    let records = |name: &str| -> Vec<Record> {
        c.section_index(name)
            .and_then(|i| {
                let s = &c.sections[i];
                info::parse(c.bytes(s), &c.origin, &s.name, s.offset).ok()
            })
            .unwrap_or_default()
    };
    let global = records(".nv.info");
    let per_symbol = |attr: u8, sym: usize| {
        global
            .iter()
            .filter(|r| r.attr == attr)
            .filter_map(Record::sym_value)
            .find(|&(s, _)| s as usize == sym)
            .map_or(0, |(_, v)| v)
    };
    let kernels: Vec<(usize, &str)> = c
        .sections
        .iter()
        .filter_map(|s| s.name.strip_prefix(".text."))
        .filter_map(|f| {
            let k = c.symbols.iter().position(|y| y.name == f && y.is_entry())?;
            Some((k, f))
        })
        .collect();
    for &(k, name) in kernels.iter().rev() {
        let barriers = records(&format!(".nv.info.{name}"))
            .iter()
            .find(|r| r.attr == info::NUM_BARRIERS)
            .map_or(1, |r| r.value.max(1));
        out.push(format!("Function properties for '{name}':"));
        let mut line = format!(
            "used {} registers, used {barriers} barriers, {} stack, {} bytes smem",
            per_symbol(info::REGCOUNT, k),
            per_symbol(info::MIN_STACK_SIZE, k),
            match size(&format!(".nv.shared.{name}")) {
                n if sm >= 100 => n.saturating_sub(1024),
                n => n,
            },
        );
        if sm < 100 {
            line += &format!(", {} bytes cmem[0]", size(&format!(".nv.constant0.{name}")));
        }
        line += &format!(", {} bytes lmem", per_symbol(info::FRAME_SIZE, k));
        out.push(line);
    }
    out
}
