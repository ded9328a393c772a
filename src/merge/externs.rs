//! `EIATTR_EXTERNS` (0x0F) in the output, as nvlink 13.5 writes it. A function's record
//! lists the functions it calls that are undefined in its input; in the image only those
//! no input defines stay (the ones the driver provides: `malloc`, `free`, `vprintf`,
//! `__assertfail`, ...), by output symbol index, in the record's order. A kernel's list
//! then takes those of every function its call tree reaches that it does not list
//! itself, by output index (a kernel with none of its own gets a record at the end of its
//! section). A list left empty has no record.

use super::*;

impl Merger<'_> {
    /// The list of every live function, by function (empty for most).
    pub(super) fn extern_lists(&self) -> Result<Vec<Vec<u32>>> {
        let own: Vec<Vec<u32>> = (0..self.funcs.len())
            .into_par_iter()
            .map(|f| self.own_externs(f))
            .collect::<Result<_>>()?;
        if !self.opts.relocatable && own.iter().any(|l| !l.is_empty()) {
            let with_calls: Vec<Vec<u32>> = (0..self.funcs.len())
                .into_par_iter()
                .map(|f| {
                    let mut list = own[f].clone();
                    if self.live[f] && self.funcs[f].entry {
                        let mut more: Vec<u32> = (self.reachable_from(f).iter())
                            .flat_map(|&g| own[g].iter().copied())
                            .filter(|o| !own[f].contains(o))
                            .collect();
                        more.sort_unstable();
                        more.dedup();
                        list.extend(more);
                    }
                    list
                })
                .collect();
            return Ok(with_calls);
        }
        Ok(own)
    }

    /// Function `f`'s own record, its entries no input defines, as output symbol indices.
    fn own_externs(&self, f: usize) -> Result<Vec<u32>> {
        if !self.live[f] {
            return Ok(Vec::new());
        }
        let (i, _) = self.funcs[f].key;
        let c = &self.inputs[i].cubin;
        let Some(s) = self.info_section_of(f) else {
            return Ok(Vec::new());
        };
        let mut list = Vec::new();
        for r in info::parse(c.bytes(s), &c.origin, &s.name, s.offset)? {
            if r.attr != info::EXTERNS {
                continue;
            }
            for e in r.payload.chunks_exact(4) {
                let k = (i, e.u32_at(0).unwrap_or(0) as usize);
                if k.1 < c.symbols.len()
                    && self.target(k).is_none()
                    && let Some(o) = self.out_index(k)
                    && !list.contains(&(o as u32 + 1))
                {
                    list.push(o as u32 + 1);
                }
            }
        }
        Ok(list)
    }
}

/// Puts `list` into `recs` (records in output order): in place of the EXTERNS record,
/// else at the end; no record for an empty list. `index` maps an output index.
pub(super) fn place_externs(recs: &mut Vec<Record>, list: &[u32], index: impl Fn(u32) -> u32) {
    let at = recs.iter().position(|r| r.attr == info::EXTERNS);
    if let Some(at) = at {
        recs.remove(at);
    }
    if list.is_empty() {
        return;
    }
    let payload = list.iter().flat_map(|&o| index(o).to_le_bytes()).collect();
    let r = Record::sval(info::EXTERNS, payload);
    match at {
        Some(at) => recs.insert(at, r),
        None => recs.push(r),
    }
}
