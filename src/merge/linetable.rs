//! nvlink's sm_100+ line tables (`.debug_line`, `.nv_debug_line_sass`): the sequences of
//! functions the link removed (or whose definition another input's replaced) leave the
//! line program. A sequence is a row list ending in `DW_LNE_end_sequence`; the function
//! it describes is the symbol its `DW_LNE_set_address` operand is relocated by. As
//! nvlink 13.5 writes it (read off its output for `-lineinfo` and `-G` units at sm_100):
//! the kept sequences stay whole and in order, a unit left without any keeps a lone
//! `end_sequence`, and the unit length shrinks to match. Below sm_100
//! nvlink keeps every sequence (the removed function's address stays 0). A section that
//! does not parse as DWARF 2-4 line programs is left whole.
//! Also the unit header's string base (`rebase_line_strings`): a `-lineinfo` unit whose
//! program names inlined functions ends its header, after the file table, with a 4-byte
//! offset into `.debug_str` (0 in ptxas's output); nvlink 13.5's sm_100+ links add the
//! offset of that input's `.debug_str` piece, also under `-r` (sm_90 leaves it 0).

use super::sections::PrunedFrame;
use super::*;

/// `DW_LNE_end_sequence` as the program writes it (extended opcode, length 1).
const END_SEQUENCE: [u8; 3] = [0, 1, 1];

impl Merger<'_> {
    /// Input `i`'s line-table section `sec` without the removed functions' sequences
    /// (`None`: nothing to remove, or not a line program).
    pub(super) fn pruned_lines(&self, i: usize, sec: usize) -> Option<PrunedFrame> {
        let c = &self.inputs()[i].cubin;
        let d = c.bytes(&c.sections[sec]);
        let ri = c
            .sections
            .iter()
            .position(|s| matches!(s.ty, SHT_RELA | SHT_REL) && s.info as usize == sec)?;
        let relocs = self.relocs(i, ri).ok()?;
        // (the symbol relocating each offset, looked up once per sequence)
        let sym_at: HashMap<u64, u32> = relocs.iter().map(|r| (r.offset, r.sym)).collect();
        let dead = |at: usize| {
            sym_at.get(&(at as u64)).is_some_and(|&sym| {
                let k = SymKey::new(i, sym as usize);
                self.symbol_is_dead(k) || self.is_replaced(k)
            })
        };
        let mut data = Vec::with_capacity(d.len());
        let mut map = Vec::new();
        let mut removed = false;
        let mut at = 0;
        while at < d.len() {
            let unit = line_unit(d, at)?;
            let start = data.len();
            // the header, its length fixed below
            map.push((at as u64, unit.program as u64, start as u64));
            data.extend_from_slice(&d[at..unit.program]);
            let mut kept = 0;
            for &(s, e, address) in &unit.sequences {
                if address.is_some_and(dead) {
                    removed = true;
                    continue;
                }
                kept += 1;
                map.push((s as u64, e as u64, data.len() as u64));
                data.extend_from_slice(&d[s..e]);
            }
            if kept == 0 && !unit.sequences.is_empty() {
                data.extend_from_slice(&END_SEQUENCE);
            }
            let length = u32::try_from(data.len() - start - 4).ok()?;
            data[start..start + 4].copy_from_slice(&length.to_le_bytes());
            at = unit.end;
        }
        removed.then_some(PrunedFrame { data, map })
    }

    /// Where input `i`'s `.debug_str` piece went, when it has one past the start.
    pub(super) fn debug_str_piece(&self, placement: &Placement, i: usize) -> Option<u32> {
        let c = &self.inputs()[i].cubin;
        let si = c.sections.iter().position(|s| s.name == ".debug_str")?;
        let &(_, at) = placement.of(&SecKey::new(i, si))?;
        u32::try_from(at).ok().filter(|&a| a != 0)
    }

    /// sm_100+: the string bases of input `i`'s line-table piece (`len` bytes at `at` of
    /// output section `id`) move with its `.debug_str` piece.
    pub(super) fn rebase_piece(
        &mut self,
        placement: &Placement,
        (i, id, at, len): (usize, usize, u64, u64),
    ) {
        let Some(by) = self.debug_str_piece(placement, i) else {
            return;
        };
        let range = usize::try_from(at).ok().zip(usize::try_from(at + len).ok());
        if let Some(piece) = range.and_then(|(s, e)| self.out[id].data.get_mut(s..e)) {
            rebase_line_strings(piece, by);
        }
    }

    /// sm_100+ (`-r` too): every input's `.debug_line` piece rebased (`rebase_piece`;
    /// `frames`: the pieces the sections step pruned, whose length changed).
    pub(super) fn rebase_line_tables(
        &mut self,
        frames: &super::sections::Frames,
        placement: &Placement,
    ) {
        for i in 0..self.inputs().len() {
            let c = &self.inputs()[i].cubin;
            let Some(si) = c.sections.iter().position(|s| s.name == ".debug_line") else {
                continue;
            };
            let key = SecKey::new(i, si);
            let len = frames
                .get(&key)
                .map_or(c.sections[si].size, |f| f.data.len() as u64);
            if let Some(&(id, at)) = placement.of(&key) {
                self.rebase_piece(placement, (i, id, at, len));
            }
        }
    }
}

/// Adds `by` to the string base of every unit of line-table piece `d` that has one
/// (4 bytes between the file table's end and the program); a unit that does not parse
/// ends the walk, the units before it rebased.
pub(super) fn rebase_line_strings(d: &mut [u8], by: u32) {
    let mut at = 0;
    while let Some(unit) = line_unit(d, at) {
        if let Some(field) = string_base(d, at, unit.program) {
            let v = d.u32_at(field).unwrap_or(0).wrapping_add(by);
            d[field..field + 4].copy_from_slice(&v.to_le_bytes());
        }
        at = unit.end;
    }
}

/// Where the header of the unit at `at` (program at `program`) keeps its string base:
/// the file table's end, when exactly 4 bytes are left before the program.
fn string_base(d: &[u8], at: usize, program: usize) -> Option<usize> {
    let version = d.u16_at(at + 4)?;
    let base_at = at + 10 + if version >= 4 { 5 } else { 4 };
    let opcode_base = *d.get(base_at)? as usize;
    let header = d.get(..program)?;
    // include_directories, then file_names: NUL-terminated lists
    let mut p = base_at + opcode_base.max(1);
    while *header.get(p)? != 0 {
        p += header.get(p..)?.iter().position(|&b| b == 0)? + 1;
    }
    p += 1;
    while *header.get(p)? != 0 {
        p += header.get(p..)?.iter().position(|&b| b == 0)? + 1;
        // directory index, modification time, length
        for _ in 0..3 {
            p += uleb(header.get(p..)?)?.1;
        }
    }
    p += 1;
    (program.checked_sub(p)? == 4).then_some(p)
}

/// One line-number unit: where its program starts and the unit ends, and its sequences
/// as `(start, end, offset of the DW_LNE_set_address operand)`.
struct LineUnit {
    program: usize,
    end: usize,
    sequences: Vec<(usize, usize, Option<usize>)>,
}

/// Parses the unit at `at` (DWARF 2-4, 32-bit); `None` when it does not parse.
fn line_unit(d: &[u8], at: usize) -> Option<LineUnit> {
    let length = d.u32_at(at)? as usize;
    if length >= 0xFFFF_FFF0 {
        return None;
    }
    let end = (at + 4).checked_add(length).filter(|&e| e <= d.len())?;
    let version = d.u16_at(at + 4)?;
    if !(2..=4).contains(&version) {
        return None;
    }
    let program = (at + 10).checked_add(d.u32_at(at + 6)? as usize)?;
    // (version 4 adds maximum_operations_per_instruction before default_is_stmt)
    let base_at = at + 10 + if version >= 4 { 5 } else { 4 };
    let opcode_base = *d.get(base_at)?;
    let lengths = d.get(base_at + 1..base_at + opcode_base.max(1) as usize)?;
    if program > end {
        return None;
    }
    let mut sequences = Vec::new();
    let (mut p, mut s, mut address) = (program, program, None);
    while p < end {
        let op = d[p];
        p += 1;
        if op == 0 {
            let (len, n) = uleb(d.get(p..end)?)?;
            p += n;
            let body = p;
            p = p
                .checked_add(usize::try_from(len).ok()?)
                .filter(|&e| e <= end)?;
            match d.get(body) {
                Some(1) => {
                    sequences.push((s, p, address.take()));
                    s = p;
                }
                Some(2) => address = Some(body + 1),
                _ => {}
            }
        } else if op == 9 {
            // DW_LNS_fixed_advance_pc: a 2-byte operand
            p += 2;
        } else if op < opcode_base {
            for _ in 0..*lengths.get(op as usize - 1)? {
                p += uleb(d.get(p..end)?)?.1;
            }
        }
    }
    // (rows after the last end_sequence: not a well-formed program)
    if s != end || p != end {
        return None;
    }
    Some(LineUnit {
        program,
        end,
        sequences,
    })
}

/// An unsigned LEB128 value and its length in bytes.
fn uleb(d: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (n, &b) in d.iter().enumerate().take(10) {
        v |= u64::from(b & 0x7f) << (7 * n);
        if b & 0x80 == 0 {
            return Some((v, n + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version-2 unit: opcode base 13, no directories or files, then `program`.
    fn unit(program: &[u8]) -> Vec<u8> {
        let mut header = vec![2, 0, 0, 0, 0, 1, 1, 0xfb, 14, 13];
        header.extend_from_slice(&[0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1]);
        header.extend_from_slice(&[0, 0]);
        let header_length = (header.len() - 6) as u32;
        header[2..6].copy_from_slice(&header_length.to_le_bytes());
        let mut d = ((header.len() + program.len()) as u32)
            .to_le_bytes()
            .to_vec();
        d.extend_from_slice(&header);
        d.extend_from_slice(program);
        d
    }

    #[test]
    fn sequences_and_their_addresses() {
        // set_address 0; copy; fixed_advance_pc 0x10; end_sequence; then a second one
        // with a special opcode and an unknown extended opcode
        let seq1 = [0, 9, 2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 9, 0x10, 0, 0, 1, 1];
        let seq2 = [
            0, 9, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0x20, 0, 3, 0x90, 2, 0, 0, 1, 1,
        ];
        let mut program = seq1.to_vec();
        program.extend_from_slice(&seq2);
        let d = unit(&program);
        let u = line_unit(&d, 0).unwrap();
        let p = u.program;
        assert_eq!(u.end, d.len());
        assert_eq!(
            u.sequences,
            vec![
                (p, p + seq1.len(), Some(p + 3)),
                (p + seq1.len(), d.len(), Some(p + seq1.len() + 3))
            ]
        );
    }

    #[test]
    fn string_base_after_the_file_table() {
        // one directory "d", one file "f.cu" (dir 1, mtime 0, length 0), then the base
        // (version 3, header length, minimum instruction length 1, default_is_stmt 1,
        // line base -5, line range 14, opcode base 13 and the 12 opcodes' lengths)
        let mut header = vec![3, 0, 0, 0, 0, 0, 1, 1, 0xfb, 14, 13];
        header.extend_from_slice(&[0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1]);
        header.extend_from_slice(b"d\0\0f.cu\0\x01\0\0\0");
        let field = 4 + header.len();
        header.extend_from_slice(&7u32.to_le_bytes());
        let header_length = (header.len() - 6) as u32;
        header[2..6].copy_from_slice(&header_length.to_le_bytes());
        let program = [0, 1, 1];
        let mut d = ((header.len() + program.len()) as u32)
            .to_le_bytes()
            .to_vec();
        d.extend_from_slice(&header);
        d.extend_from_slice(&program);
        let mut two = d.clone();
        two.extend_from_slice(&d);
        rebase_line_strings(&mut two, 0x695);
        assert_eq!(two.u32_at(field), Some(0x69c));
        assert_eq!(two.u32_at(d.len() + field), Some(0x69c));
        // a header without one (the -G form) is left as it is
        let mut plain = unit(&program);
        let before = plain.clone();
        rebase_line_strings(&mut plain, 0x695);
        assert_eq!(plain, before);
    }

    #[test]
    fn malformed_programs_are_left_whole() {
        // rows after the last end_sequence, a cut extended opcode, version 5
        assert!(line_unit(&unit(&[0, 1, 1, 1]), 0).is_none());
        assert!(line_unit(&unit(&[0, 9, 2, 0]), 0).is_none());
        let mut v5 = unit(&[0, 1, 1]);
        v5[4] = 5;
        assert!(line_unit(&v5, 0).is_none());
        assert_eq!(uleb(&[0xe5, 0x8e, 0x26]), Some((624_485, 3)));
        assert_eq!(uleb(&[0x80]), None);
    }
}
