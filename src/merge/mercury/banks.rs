//! The Mercury twins of the kernels' constant banks 2 (sm_100+): each kernel bank the
//! bank-2 step made or filled gets `.nv.merc.nv.constant.optimizer.<k>`, with the
//! Mercury bytes of the same pieces at the same offsets, and a device function's
//! Mercury bank-2 relocations are copied into every bank holding its piece, in nvlink's
//! order. Part of the Mercury step (mercury.rs), reading the `Bank2` product.

use super::*;
use crate::merge::bank2::Bank2;

impl Merger<'_> {
    /// sm_100+: each kernel bank's capsule-Mercury twin, `.nv.merc.nv.constant.optimizer.<k>`,
    /// with the Mercury bytes of the same pieces at the same offsets, its `sh_info` the
    /// kernel's capsule. A device function's piece is in every bank of a kernel that
    /// reaches it, so its Mercury relocations (the jump table's code offsets) are copied
    /// into each (`Capsules::copies`, read by `merc_relocations`).
    pub(super) fn merc_banks(&mut self, placement: &Placement, banks: &Bank2, st: &mut Capsules) {
        for (place, (sass, kernel, pieces)) in banks.banks().iter().enumerate() {
            let twins: Vec<(usize, usize, u64)> = (pieces.iter())
                .filter_map(|&(SecKey { input: i, sec }, base)| {
                    Some((i, *st.views[i].merc_of.get(&sec)?, base))
                })
                .collect();
            let Some(&(i0, m0, _)) = twins.first() else {
                continue;
            };
            let proto = &self.inputs()[i0].cubin.sections[m0];
            let name = creation::concat(
                ".nv.merc.nv.constant.optimizer.",
                &self.sym(self.code.funcs()[*kernel].key).name,
            );
            let mut o = OutSection::new(name, proto.ty, proto.flags);
            o.entsize = proto.entsize;
            let text = SecKey::new(
                self.code.funcs()[*kernel].key.input,
                self.code.funcs()[*kernel].text,
            );
            if let Some(&cap) = (placement.of(&text)).and_then(|t| st.view_of.get(&t.0)) {
                o.info = Ref::Section(cap);
            }
            o.data = vec![0; self.out[*sass].data.len()];
            for &(i, m, base) in &twins {
                let c = &self.inputs()[i].cubin;
                let s = &c.sections[m];
                o.align = o.align.max(s.align);
                let d = c.bytes(s);
                let end = base as usize + d.len();
                if o.data.len() < end {
                    o.data.resize(end, 0);
                }
                o.data[base as usize..end].copy_from_slice(d);
            }
            o.mem_size = o.data.len() as u64;
            let id = self.out.push(o, false);
            st.view_of.insert(*sass, id);
            let own = match self.bank2_of(*kernel) {
                Some(s) => self.section_size(*kernel, s),
                None => 0,
            };
            st.sass_bank.insert(id, (*sass, own, place));
            for (n, &(i, m, base)) in twins.iter().enumerate() {
                st.placed.entry((i, m)).or_insert((id, base));
                // (the kernel's own data, first, is in this bank only)
                let own = n == 0 && pieces[0].1 == 0 && self.bank2_of(*kernel).is_some();
                if !own {
                    st.copies.entry((i, m)).or_default().push((id, base));
                }
            }
        }
    }

    /// The order nvlink copies a device function's Mercury bank-2 relocations in: by
    /// the `.const_opt` object each falls in, lowest first, in their order within one.
    pub(super) fn bank2_relocation_order(&self, i: usize, merc: usize, entries: &mut [Reloc]) {
        let c = &self.inputs()[i].cubin;
        let objects: Vec<(u64, u64)> = (c.merc_symbols.iter())
            .filter(|s| s.shndx as usize == merc && s.ty != STT_SECTION && s.size > 0)
            .map(|s| (s.value, s.value + s.size))
            .collect();
        entries.sort_by_key(|r| {
            (objects.iter())
                .find(|&&(a, b)| (a..b).contains(&r.offset))
                .map_or(r.offset, |o| o.0)
        });
    }
}
