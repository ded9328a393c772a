//! The code of two images, kernel by kernel (`nvlinkrs compare --code`): registers (its
//! `EIATTR_REGCOUNT`, else the count its text section records), instructions (16 bytes
//! each) and calls (CALL instructions: relative or absolute) of the code the kernel can
//! run: its text, callees cloned into it included, and the text of every function (not
//! a kernel it launches) its code refers to through a relocation, each once, followed from there (a relocatable
//! image keeps callees as functions of their own where a whole-program one clones them),
//! and its stack (its maximum, else minimum stack size, else its frame size). What the
//! judgement of an incremental link against the whole-program link reads: the same
//! kernels, registers within a couple, no call where the whole-program code has none,
//! instructions close. The image's code size (every text section once) is reported too.

use std::collections::{BTreeMap, BTreeSet};

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

/// An image's code: each kernel's, and its size (instructions of every text section).
#[derive(Clone, Debug, Default)]
pub struct ImageCode {
    pub kernels: BTreeMap<String, Stats>,
    pub size: u64,
}

/// Each kernel's code in an image, and the image's code size.
pub fn kernels(image: &[u8], origin: &str) -> Result<ImageCode> {
    let c = Cubin::parse(Bytes::from_vec(image.to_vec()), origin)?;
    let refs = text_references(&c)?;
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
    // each text section's own instructions and calls, and each start's sums, once
    let own: Vec<(u64, u32)> = (c.sections.iter())
        .map(|t| {
            let code = if t.has_bytes() { c.bytes(t) } else { &[] };
            ((code.len() / 16) as u64, call_count(code))
        })
        .collect();
    let mut sums: BTreeMap<usize, (u64, u32)> = BTreeMap::new();
    let mut visits = 0usize;
    for (k, s) in c.symbols.iter().enumerate().filter(|(_, s)| s.is_kernel()) {
        let start = s.shndx as usize;
        let Some(text) = c.sections.get(start) else {
            continue;
        };
        let (instructions, calls) = match sums.get(&start) {
            Some(&sum) => sum,
            None => {
                let sum = reached(start, &refs, &mut visits, &c.origin)?
                    .into_iter()
                    .fold((0, 0), |(i, n), t| (i + own[t].0, n + own[t].1));
                *sums.entry(start).or_insert(sum)
            }
        };
        let [max, min, frame, regs] = recs.get(&(k as u32)).copied().unwrap_or_default();
        out.insert(
            s.name.to_string(),
            Stats {
                registers: regs.unwrap_or(text.info >> 24),
                instructions,
                stack: max.or(min).or(frame).unwrap_or(0),
                calls,
            },
        );
    }
    let size = (c.sections.iter().zip(&own))
        .filter(|(s, _)| s.name.starts_with(".text."))
        .map(|(_, o)| o.0)
        .sum();
    Ok(ImageCode { kernels: out, size })
}

fn call_count(code: &[u8]) -> u32 {
    code.chunks_exact(16)
        .filter(|i| {
            CALL_OPCODES.contains(&(u64::from_le_bytes(i[..8].try_into().unwrap()) & 0xfff))
        })
        .count() as u32
}

/// The most references between text sections followed, and the most sections visited
/// over all kernels: an image whose relocation sections overlap can name far more than
/// its size (refused, naming the file, rather than read for minutes).
const MAX_REFERENCES: usize = 1 << 20;
const MAX_VISITS: usize = 1 << 26;

fn too_many(origin: &str, what: &str) -> crate::diag::Error {
    crate::diag::Error::fatal(format!(
        "'{origin}': too many {what} between functions to follow"
    ))
}

/// Each text section's index → the other text sections its relocations name a function
/// of (not a kernel: a kernel named is one launched).
fn text_references(c: &Cubin) -> Result<BTreeMap<usize, BTreeSet<usize>>> {
    let mut refs: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    let mut count = 0usize;
    for (i, s) in c.sections.iter().enumerate() {
        let applies_to = s.info as usize;
        let is_text = |k: usize| {
            c.sections
                .get(k)
                .is_some_and(|t| t.name.starts_with(".text."))
        };
        if !matches!(s.ty, SHT_RELA | SHT_REL) || !is_text(applies_to) {
            continue;
        }
        let symbols = c.symbols_of(s);
        for r in c.relocations(i)? {
            let Some(target) = symbols.get(r.sym as usize) else {
                continue;
            };
            let callee = target.shndx as usize;
            // (a kernel's address is a launch from the device, not a call)
            if target.is_function()
                && !target.is_kernel()
                && callee != applies_to
                && is_text(callee)
                && refs.entry(applies_to).or_default().insert(callee)
            {
                count += 1;
                if count > MAX_REFERENCES {
                    return Err(too_many(&c.origin, "references"));
                }
            }
        }
    }
    Ok(refs)
}

/// The text sections reachable from `start` (itself included), each once; `visits`
/// counts the references followed over all calls.
fn reached(
    start: usize,
    refs: &BTreeMap<usize, BTreeSet<usize>>,
    visits: &mut usize,
    origin: &str,
) -> Result<BTreeSet<usize>> {
    let mut seen = BTreeSet::from([start]);
    let mut todo = vec![start];
    while let Some(t) = todo.pop() {
        for &n in refs.get(&t).into_iter().flatten() {
            *visits += 1;
            if *visits > MAX_VISITS {
                return Err(too_many(origin, "calls"));
            }
            if seen.insert(n) {
                todo.push(n);
            }
        }
    }
    Ok(seen)
}

/// The table `compare --code` prints, and its summary lines.
pub fn report(expected_image: &ImageCode, actual_image: &ImageCode) -> Vec<String> {
    let (expected, actual) = (&expected_image.kernels, &actual_image.kernels);
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
    let (se, sa) = (expected_image.size, actual_image.size);
    let growth = if se == 0 {
        0.0
    } else {
        (sa as f64 - se as f64) * 100.0 / se as f64
    };
    lines.push(format!(
        "code size: every text section's instructions: {se} -> {sa} ({growth:+.1}%)"
    ));
    lines
}
