//! What the steps read from each input more than once (`Parsed`), parsed once per input
//! before the merge, in parallel, by the spine: the global `.nv.info` records, every
//! relocation section's entries and the per-symbol values of the records.

use super::*;

/// What the steps read from each input more than once, parsed once (in parallel).
pub(super) struct Parsed {
    /// Global `.nv.info` records (`info` reports an unreadable section; the steps before
    /// it read it as empty).
    pub(super) records: Result<Vec<Record>>,
    /// Entries of every relocation section, by section index (empty for the others).
    pub(super) relocs: Vec<Result<Vec<Reloc>>>,
    /// The (attribute, symbol, value) records (`REGCOUNT`, `FRAME_SIZE`, ...), by
    /// attribute and symbol, the first of each.
    pub(super) sym_values: Vec<(u8, u32, u32)>,
}

impl Parsed {
    /// The value of symbol `s`'s global `.nv.info` record `attr` (0 without one).
    pub(super) fn sym_value(&self, s: usize, attr: u8) -> u32 {
        let v = &self.sym_values;
        v.binary_search_by_key(&(attr, s), |&(a, x, _)| (a, x as usize))
            .map_or(0, |at| v[at].2)
    }

    pub(super) fn of(c: &Cubin) -> Parsed {
        let records = match c
            .sections
            .iter()
            .find(|s| s.name == ".nv.info" && s.ty == SHT_CUDA_INFO)
        {
            Some(s) => info::parse(c.bytes(s), &c.origin, &s.name, s.offset),
            None => Ok(Vec::new()),
        };
        let relocs = c
            .sections
            .iter()
            .enumerate()
            .map(|(i, s)| match s.ty {
                SHT_RELA | SHT_REL => c.relocations(i),
                _ => Ok(Vec::new()),
            })
            .collect();
        let mut sym_values: Vec<(u8, u32, u32)> = records
            .as_deref()
            .unwrap_or(&[])
            .iter()
            .filter_map(|r| r.sym_value().map(|(s, v)| (r.attr, s, v)))
            .collect();
        // (stable: the first record of a symbol stays first)
        sym_values.sort_by_key(|&(a, s, _)| (a, s));
        sym_values.dedup_by_key(|&mut (a, s, _)| (a, s));
        Parsed {
            records,
            relocs,
            sym_values,
        }
    }
}
