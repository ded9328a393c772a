//! nvlink's sm_100+ `.nv_debug_info_reg_sass` (`-G`: where each function keeps its
//! variables, register by register, over which code range): the entries of a function
//! the link removed, or whose definition another input's replaced, keep their bytes but
//! lose their ranges (start and end 0), as nvlink 13.5 writes them (read off `-G` links
//! of an inline function defined in two units and of an unused function at sm_100;
//! sm_90 keeps the ranges). nvlink finds the function by name, so a local function
//! whose name an earlier input defines too (each `-G` unit's own `__assert_fail`) is
//! cleared as well, though it stays. The section is a list of functions: name, NUL, a 32-bit
//! entry count, then per entry a 32-bit word, the register's name and NUL, 16, 8 and
//! 8 bits of location, and the range's 32-bit start and end. A section that does not
//! parse so is left whole.

use super::sections::PrunedFrame;
use super::*;

impl Merger<'_> {
    /// Input `i`'s `.nv_debug_info_reg_sass` (section `sec`) with the ranges of removed
    /// or replaced functions cleared (`None`: nothing to clear, or not that layout).
    pub(super) fn cleared_reg_sass(&self, i: usize, sec: usize) -> Option<PrunedFrame> {
        let c = &self.inputs()[i].cubin;
        let mut data = c.bytes(&c.sections[sec]).to_vec();
        let ranges = reg_sass_ranges(&data)?;
        // (nvlink finds the function by name: a local one whose name an earlier input
        // defines too, `-G`'s per-unit `__assert_fail`, counts as replaced)
        let earlier: HashSet<&str> = (self.inputs()[..i].iter())
            .flat_map(|u| &u.cubin.symbols)
            .filter(|s| s.ty == STT_FUNC && s.defined())
            .map(|s| s.name.as_str())
            .collect();
        // the names of the unit's functions that are gone, once (a lookup per entry: a
        // scan of the symbols per entry took 3.9 s on a Thrust -G unit)
        let dead: HashSet<&[u8]> = (c.symbols.iter().enumerate())
            .filter(|(k, s)| {
                s.ty == STT_FUNC && {
                    let key = SymKey::new(i, *k);
                    self.symbol_is_dead(key)
                        || self.is_replaced(key)
                        || (s.bind == STB_LOCAL && earlier.contains(s.name.as_str()))
                }
            })
            .map(|(_, s)| s.name.as_bytes())
            .collect();
        let mut cleared = false;
        for (name, at) in ranges {
            if dead.contains(&data[name.0..name.1]) {
                data[at..at + 8].fill(0);
                cleared = true;
            }
        }
        let len = data.len() as u64;
        cleared.then_some(PrunedFrame {
            data,
            map: vec![(0, len, 0)],
        })
    }
}

/// Each entry's range (the offset of its 8 bytes) with its function's name (start,
/// end); `None` when the section does not parse.
fn reg_sass_ranges(d: &[u8]) -> Option<Vec<((usize, usize), usize)>> {
    let mut out = Vec::new();
    let mut p = 0;
    while p < d.len() {
        let end = p + d.get(p..)?.iter().position(|&b| b == 0)?;
        let name = (p, end);
        let count = d.u32_at(end + 1)?;
        p = end + 5;
        for _ in 0..count {
            // the word, the register's name, its location (4 bytes), the range
            p += 4;
            p += d.get(p..)?.iter().position(|&b| b == 0)? + 1 + 4;
            d.get(p..p + 8)?;
            out.push((name, p));
            p += 8;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_of_each_entry() {
        // ptxas's -G output for `_Z2twi`: two registers, then `f` with none
        let mut d = b"_Z2twi\0".to_vec();
        d.extend_from_slice(&2u32.to_le_bytes());
        for (reg, s, e) in [(&b"%r1\0"[..], 0u32, 0x40u32), (b"%r2\0", 0x20, 0x40)] {
            d.extend_from_slice(&[0; 4]);
            d.extend_from_slice(reg);
            d.extend_from_slice(&[4, 0, 0, 5]);
            d.extend_from_slice(&s.to_le_bytes());
            d.extend_from_slice(&e.to_le_bytes());
        }
        d.extend_from_slice(b"f\0\0\0\0\0");
        let r = reg_sass_ranges(&d).unwrap();
        assert_eq!(r, vec![((0, 6), 0x17), ((0, 6), 0x2b)]);
        assert!(reg_sass_ranges(&d[..d.len() - 9]).is_none());
    }
}
