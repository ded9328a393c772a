//! The code of two images, kernel by kernel (`nvlinkrs compare --code`): registers (its
//! `EIATTR_REGCOUNT`, else the count its text section records), instructions (its text,
//! callees cloned into it included, 16 bytes each), stack (its maximum, else minimum
//! stack size, else its frame size)
//! and calls (CALL instructions in its text: relative or absolute). What the judgement of
//! an incremental link against the whole-program link reads: the same kernels, registers
//! within a couple, no call where the whole-program code has none, instructions close.

use std::collections::BTreeMap;

use super::cubin::*;
use super::info;
use crate::bytes::Bytes;
use crate::diag::Result;

/// One kernel's code.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub registers: u32,
    pub instructions: u64,
    pub stack: u32,
    pub calls: u32,
}

/// The low 12 bits of a Volta-and-later instruction: CALL.ABS and CALL.REL.
const CALL_OPCODES: [u64; 2] = [0x943, 0x944];

/// Each kernel's code in an image.
pub fn kernels(image: &[u8], origin: &str) -> Result<BTreeMap<String, Stats>> {
    let c = Cubin::parse(Bytes::from_vec(image.to_vec()), origin)?;
    // per symbol: max stack, min stack, frame size, registers
    let mut recs: BTreeMap<u32, [Option<u32>; 4]> = BTreeMap::new();
    if let Some(i) = c.section_index(".nv.info") {
        let s = &c.sections[i];
        for r in info::parse(c.bytes(s), &c.origin, &s.name, s.offset)? {
            if let Some((sym, v)) = r.sym_value() {
                let slot = match r.attr {
                    info::MAX_STACK_SIZE => 0,
                    info::MIN_STACK_SIZE => 1,
                    info::FRAME_SIZE => 2,
                    info::REGCOUNT => 3,
                    _ => continue,
                };
                recs.entry(sym).or_default()[slot] = Some(v);
            }
        }
    }
    let mut out = BTreeMap::new();
    for (k, s) in c.symbols.iter().enumerate().filter(|(_, s)| s.is_kernel()) {
        let Some(text) = c.sections.get(s.shndx as usize) else {
            continue;
        };
        let code = c.bytes(text);
        let calls = code
            .chunks_exact(16)
            .filter(|i| {
                CALL_OPCODES.contains(&(u64::from_le_bytes(i[..8].try_into().unwrap()) & 0xfff))
            })
            .count() as u32;
        let [max, min, frame, regs] = recs.get(&(k as u32)).copied().unwrap_or_default();
        out.insert(
            s.name.to_string(),
            Stats {
                registers: regs.unwrap_or(text.info >> 24),
                instructions: text.size / 16,
                stack: max.or(min).or(frame).unwrap_or(0),
                calls,
            },
        );
    }
    Ok(out)
}

/// The table `compare --code` prints, and its summary lines.
pub fn report(expected: &BTreeMap<String, Stats>, actual: &BTreeMap<String, Stats>) -> Vec<String> {
    let mut lines = vec![format!(
        "{:<40} {:>9} {:>15} {:>11} {:>9}",
        "kernel", "registers", "instructions", "stack", "calls"
    )];
    let (mut regs, mut more_calls, mut stacks) = ([0usize; 3], 0, 0);
    let (mut lo, mut hi) = (0i64, 0i64);
    let (mut ie, mut ia) = (0u64, 0u64);
    for (name, e) in expected {
        let Some(a) = actual.get(name) else {
            lines.push(format!("{name:<40} missing"));
            continue;
        };
        lines.push(format!(
            "{:<40} {:>4} {:>4} {:>7} {:>7} {:>5} {:>5} {:>4} {:>4}",
            name,
            e.registers,
            a.registers,
            e.instructions,
            a.instructions,
            e.stack,
            a.stack,
            e.calls,
            a.calls
        ));
        let d = a.registers as i64 - e.registers as i64;
        match d.cmp(&0) {
            std::cmp::Ordering::Equal => regs[0] += 1,
            std::cmp::Ordering::Greater => regs[1] += 1,
            std::cmp::Ordering::Less => regs[2] += 1,
        }
        (lo, hi) = (lo.min(d), hi.max(d));
        more_calls += (a.calls > e.calls) as usize;
        stacks += (a.stack != e.stack) as usize;
        (ie, ia) = (ie + e.instructions, ia + a.instructions);
    }
    let extra: Vec<&String> = actual
        .keys()
        .filter(|k| !expected.contains_key(*k))
        .collect();
    let pct = if ie == 0 {
        0.0
    } else {
        (ia as f64 - ie as f64) * 100.0 / ie as f64
    };
    lines.push(format!(
        "kernels: {} expected, {} actual, {} missing, {} unexpected",
        expected.len(),
        actual.len(),
        expected.keys().filter(|k| !actual.contains_key(*k)).count(),
        extra.len()
    ));
    lines.push(format!(
        "registers: {} equal, {} higher, {} lower (from {lo:+} to {hi:+})",
        regs[0], regs[1], regs[2]
    ));
    lines.push(format!("instructions: {ie} -> {ia} ({pct:+.1}%)"));
    lines.push(format!(
        "calls: kernels with more calls than expected: {more_calls}"
    ));
    lines.push(format!("stack: kernels with another stack size: {stacks}"));
    lines
}
