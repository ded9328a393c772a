//! The `.nv.merc.rela.*` sections of an sm_100+ image (the Mercury relocations, rules in
//! the parent's module comment): which input relocations stay, in which order, against
//! which output symbols, and the unified-address types made plain.

use super::*;

/// A Mercury relocation: (offset, symbol, type, addend).
type Entry = (u64, u32, u32, i64);

/// A Mercury section of an input: (input, section).
type MercSection = (usize, usize);

/// The Mercury relocations that stay, per target section in the order first met, and
/// (`--preserve-relocs`) the applied ones, per capsule in the order met.
#[derive(Default)]
struct MercLists {
    lists: Vec<(usize, Vec<Entry>)>,
    list_of: HashMap<usize, usize>,
    resolved: Vec<(usize, Vec<Entry>)>,
}

impl MercLists {
    fn keep(&mut self, out: usize, e: Entry) {
        let lists = &mut self.lists;
        let li = *self.list_of.entry(out).or_insert_with(|| {
            lists.push((out, Vec::new()));
            lists.len() - 1
        });
        lists[li].1.push(e);
    }

    fn resolve(&mut self, out: usize, e: Entry) {
        match self.resolved.iter_mut().find(|l| l.0 == out) {
            Some(l) => l.1.push(e),
            None => self.resolved.push((out, vec![e])),
        }
    }
}

impl Merger<'_> {
    /// The `.nv.merc.rela.*` sections (see the module comment).
    pub(super) fn merc_relocations(
        &mut self,
        placement: &Placement,
        layout: &SharedLayout,
        symtab: &SymbolTable,
        st: &Capsules,
        banks: &super::bank2::Bank2,
        kept: &mut Vec<KeptList>,
    ) -> Result<()> {
        let mut lists = MercLists::default();
        // (the inputs outlive this borrow of the merger, which each relocation takes)
        let inputs = self.inputs();
        // (a replaced copy's bank-2 relocations come right after its kept copy's, as
        // the input has them: Mercury sections (input, section))
        let merc = |k: &SecKey| Some((k.input, *st.views[k.input].merc_of.get(&k.sec)?));
        let copies: Vec<(MercSection, Vec<MercSection>)> = (banks.replaced_copies())
            .iter()
            .filter_map(|(kept, gone)| Some((merc(kept)?, gone.iter().filter_map(merc).collect())))
            .collect();
        let deferred: HashSet<MercSection> =
            copies.iter().flat_map(|c| c.1.iter().copied()).collect();
        for (i, c) in inputs.iter().enumerate().take(st.views.len()) {
            for (ri, rs) in c.cubin.sections.iter().enumerate() {
                let m = (i, rs.info as usize);
                if rs.ty != SHT_MERC_RELA || deferred.contains(&m) {
                    continue;
                }
                self.merc_relocation_section(
                    placement, layout, symtab, st, i, ri, false, &mut lists,
                )?;
                for &(j, gone) in copies.iter().filter(|c| c.0 == m).flat_map(|c| &c.1) {
                    let cj = &inputs[j].cubin;
                    if let Some(rj) = (cj.sections.iter())
                        .position(|s| s.ty == SHT_MERC_RELA && s.info as usize == gone)
                    {
                        self.merc_relocation_section(
                            placement, layout, symtab, st, j, rj, true, &mut lists,
                        )?;
                    }
                }
            }
        }
        let MercLists {
            mut lists,
            resolved,
            ..
        } = lists;
        // (the kernels' banks' lists last, in the order the banks were made)
        lists.sort_by_key(|l| st.sass_bank.get(&l.0).map(|b| b.2));
        for (out, mut list) in lists {
            // (a kernel's bank: its own data's relocations after the device functions',
            // which nvlink copied in first; as the list is written last made first)
            if let Some(&(_, own, _)) = st.sass_bank.get(&out) {
                list.sort_by_key(|e| e.0 < own);
            }
            // a function whose SASS relocations were all applied keeps an empty SASS
            // relocation section when its capsule has some (and a kernel's bank 2 when
            // its Mercury twin has some)
            if let Some(&t) =
                (st.text_of_capsule.get(&out)).or_else(|| st.sass_bank.get(&out).map(|b| &b.0))
                && !kept.iter().any(|k| k.0 == t && k.1 != RelocList::Resolved)
            {
                kept.push((t, RelocList::Rela, Vec::new()));
            }
            let o = rela_section(st, &self.out, out, list, ".nv.merc.rela", SHT_MERC_RELA);
            self.new_section(o, false);
        }
        for (out, list) in resolved {
            let (name, ty) = (".nv.merc.nv.resolvedrela", SHT_MERC_RESOLVED_RELA);
            let o = rela_section(st, &self.out, out, list, name, ty);
            self.new_section(o, false);
        }
        Ok(())
    }

    /// What becomes of the relocations of input `i`'s Mercury relocation section `ri`
    /// (`replaced_copy`: a replaced copy's bank 2, whose relocations nvlink takes in the
    /// input's order, not by object).
    #[allow(clippy::too_many_arguments)] // (the products it reads, each by name)
    fn merc_relocation_section(
        &mut self,
        placement: &Placement,
        layout: &SharedLayout,
        symtab: &SymbolTable,
        st: &Capsules,
        i: usize,
        ri: usize,
        replaced_copy: bool,
        lists: &mut MercLists,
    ) -> Result<()> {
        let inputs = self.inputs();
        let c = &inputs[i].cubin;
        let rs = &c.sections[ri];
        let places = match st.copies.get(&(i, rs.info as usize)) {
            Some(p) => p.clone(),
            None => match st.placed.get(&(i, rs.info as usize)) {
                Some(&p) => vec![p],
                None => return Ok(()),
            },
        };
        let target = &c.sections[rs.info as usize];
        // (the replaced data objects of the SASS twin's: their relocations go)
        let replaced = (target.name.strip_prefix(".nv.merc"))
            .and_then(|twin| c.section_index(twin))
            .map(|si| self.replaced_objects(i, si))
            .unwrap_or_default();
        let mut entries = c.relocations(ri)?;
        entries.retain(|r| !replaced.iter().any(|&(a, b)| (a..b).contains(&r.offset)));
        if st.copies.contains_key(&(i, rs.info as usize)) && !replaced_copy {
            self.bank2_relocation_order(i, rs.info as usize, &mut entries);
        }
        let view = &st.views[i];
        for (place, r) in (places.into_iter()).flat_map(|p| entries.iter().map(move |r| (p, *r))) {
            self.merc_relocation(
                placement,
                layout,
                symtab,
                st,
                view,
                i,
                rs.info as usize,
                place,
                r,
                lists,
            )?;
        }
        Ok(())
    }

    /// What becomes of Mercury relocation `r` of input `i`, which patches its section
    /// `target` placed at `(out, piece)`: written into the image now, kept in `lists`,
    /// listed as resolved, or dropped.
    #[allow(clippy::too_many_arguments)]
    fn merc_relocation(
        &mut self,
        placement: &Placement,
        layout: &SharedLayout,
        symtab: &SymbolTable,
        st: &Capsules,
        view: &View,
        i: usize,
        target: usize,
        (out, piece): (usize, u64),
        r: Reloc,
        lists: &mut MercLists,
    ) -> Result<()> {
        let c = &self.inputs()[i].cubin;
        let rs_info = target;
        let target = &c.sections[target];
        let ms = &c.merc_symbols[r.sym as usize];
        let at = piece + r.offset;
        let Some(n) = view.normal_of[r.sym as usize] else {
            if is_table_symbol(&ms.name) {
                return Ok(());
            }
            return Err(Error::fatal(format!(
                "'{}': Mercury relocation {:#x} at offset {:#x} of '{}' refers to symbol '{}', which the SASS symbol table does not have",
                c.origin, r.ty, r.offset, target.name, ms.name
            )));
        };
        let k = SymKey::new(i, n);
        let in_bytes = target.has_bytes() && target.ty != SHT_CAPMERC_TEXT;
        // an 8-byte field of the merged section (`.nv.merc.debug_frame`)
        let put = |data: &mut Vec<u8>, v: u64| {
            if let Some(b) = usize::try_from(at)
                .ok()
                .and_then(|a| data.get_mut(a..a.checked_add(8)?))
            {
                b.copy_from_slice(&v.to_le_bytes());
            }
        };
        let dead = self.symbol_is_dead(k);
        // (in debug sections, entries about a replaced definition go with it,
        // but for `.debug_info`'s and `.debug_loc`'s, as on the SASS side)
        let loser = in_bytes
            && target.flags & SHF_ALLOC == 0
            && self.is_replaced(k)
            && !matches!(
                target.name.as_str(),
                ".nv.merc.debug_info" | ".nv.merc.debug_loc"
            );
        // (never kept: nvlink's -r output drops them too; not for a
        // replaced definition, as on the SASS side)
        if r.ty == R_MERCURY_UNUSED_CLEAR64 {
            if dead && !loser && in_bytes {
                put(&mut self.out[out].data, 0);
            }
            return Ok(());
        }
        let unplaced = target.flags & SHF_ALLOC == 0 && is_unplaced_label(self.sym(k));
        if dead || loser || unplaced {
            return Ok(());
        }
        let (mut value, _, mut resolvable) = self.link_value(placement, layout, k);
        // (initialised data holding a `__constant__` variable's generic address: for the
        // driver, as on the SASS side, `plan_value`)
        if r.ty == R_MERCURY_G64 && self.constant_address_for_driver(target.flags, k) {
            resolvable = false;
        }
        // (a dynamic shared array has an offset per function, on the SASS
        // side: -1 in a function no kernel reaches, which nvlink's image
        // leaves without the array's symbol)
        if is_dynamic_shared(self.sym(k))
            && let Some(f) = view
                .sass_of
                .get(&rs_info)
                .and_then(|&t| self.code.func_of_text().get(&SecKey::new(i, t)))
        {
            resolvable |= layout.dynamic_offset(*f, self.representative(k)).is_some();
        }
        if ms.ty == STT_SECTION
            && let Some(&(_, p)) = st.placed.get(&(i, ms.shndx as usize))
        {
            value = p;
        }
        // (a relocatable output keeps what the final link resolves, but for
        // the debug sections' references to themselves)
        let self_ref = ms.ty == STT_SECTION
            && !st.exec
            && in_bytes
            && !line_reference(&target.name, c.sections.get(ms.shndx as usize));
        // (in a view, an offset into a Mercury section with bytes of its own,
        // `.debug_info`'s into `.nv.merc.debug_line`, is not the SASS one the
        // view holds: it stays for the driver, as nvlink keeps it)
        let own_bytes = |k: usize| {
            st.placed
                .get(&(i, k))
                .is_some_and(|&(o, _)| self.out[o].alias.is_none())
        };
        let kept =
            st.exec && ms.ty == STT_SECTION && !own_bytes(rs_info) && own_bytes(ms.shndx as usize);
        // (under -r, what nvlink applies on the SASS side goes here too)
        let under_r =
            !st.exec && (applied_under_r(self.sym(k)) || self.internal_applied_under_r(k));
        if resolvable && (st.exec || self_ref || under_r) && !kept {
            if r.ty == R_MERCURY_ABS64 && in_bytes {
                let v = (value as i64).wrapping_add(r.addend) as u64;
                put(&mut self.out[out].data, v);
            }
            // (--preserve-relocs lists a capsule's, but for those against a
            // constant bank, as the SASS side does at sm_100+)
            if self.opts().preserve_relocs
                && target.ty == SHT_CAPMERC_TEXT
                && (st.exec || !is_table_symbol(&ms.name))
                && !self.in_constant_bank(k)
                && let Some(sym) = st.merc_out(self, symtab, i, r.sym as usize)
            {
                let mut addend = r.addend;
                if ms.ty == STT_SECTION
                    && let Some(&(_, p)) = st.placed.get(&(i, ms.shndx as usize))
                {
                    addend += p as i64;
                }
                lists.resolve(out, (at, sym, r.ty, addend));
            }
            return Ok(());
        }
        let Some(sym) = st.merc_out(self, symtab, i, r.sym as usize) else {
            return Err(Error::fatal(format!(
                "'{}': Mercury relocation {:#x} at offset {:#x} of '{}' refers to symbol '{}', which is not in the output",
                c.origin, r.ty, r.offset, target.name, ms.name
            )));
        };
        let mut addend = r.addend;
        if ms.ty == STT_SECTION
            && let Some(&(_, p)) = st.placed.get(&(i, ms.shndx as usize))
        {
            addend += p as i64;
        }
        let ty = if st.exec { rewritten(r.ty) } else { r.ty };
        lists.keep(out, (at, sym, ty, addend));
        Ok(())
    }
}

/// A Mercury relocation section (`prefix` + the SASS section's name) for image section
/// `out` of `image`: `list` (offset, symbol, type, addend), last made first.
fn rela_section(
    st: &Capsules,
    image: &[OutSection],
    out: usize,
    mut list: Vec<Entry>,
    prefix: &str,
    ty: u32,
) -> OutSection {
    list.reverse();
    // (named after the SASS twin, but the module bank's after its own name, as ptxas
    // and nvlink name it: `.nv.merc.rela.nv.constant.user`)
    let target = match stripped(&image[out].name) {
        Some(user @ ".nv.constant.user") => user,
        _ => sass_name(&image[out].name).unwrap_or(""),
    };
    let mut o = st.section(&format!("{prefix}{target}"), ".nv.merc.rela", ty);
    o.link = Ref::Section(st.symtab);
    o.info = Ref::Section(out);
    o.align = 8;
    o.entsize = 24;
    for (off, sym, ty, addend) in list {
        o.data.extend_from_slice(&off.to_le_bytes());
        o.data
            .extend_from_slice(&((sym as u64) << 32 | ty as u64).to_le_bytes());
        o.data.extend_from_slice(&addend.to_le_bytes());
    }
    o
}

/// Unified addresses become plain ones (as R_CUDA_UNIFIED* on the SASS side).
fn rewritten(ty: u32) -> u32 {
    match ty {
        R_MERCURY_UNIFIED32_LO => R_MERCURY_ABS32_LO,
        R_MERCURY_UNIFIED32_HI => R_MERCURY_ABS32_HI,
        R_MERCURY_UNIFIED => R_MERCURY_ABS64,
        t => t,
    }
}

/// A 64-bit generic (load) address, as R_CUDA_G64.
const R_MERCURY_G64: u32 = 0x1_0001;
const R_MERCURY_ABS64: u32 = 0x1_0002;
const R_MERCURY_ABS32_LO: u32 = 0x1_0005;
const R_MERCURY_ABS32_HI: u32 = 0x1_0006;
/// Clears a removed function's `.debug_frame` range.
const R_MERCURY_UNUSED_CLEAR64: u32 = 0x1_000E;
const R_MERCURY_UNIFIED: u32 = 0x1_0032;
const R_MERCURY_UNIFIED32_LO: u32 = 0x1_003E;
const R_MERCURY_UNIFIED32_HI: u32 = 0x1_003F;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unified_addresses_become_plain_ones() {
        assert_eq!(rewritten(R_MERCURY_UNIFIED32_HI), R_MERCURY_ABS32_HI);
        assert_eq!(rewritten(R_MERCURY_UNIFIED32_LO), R_MERCURY_ABS32_LO);
        assert_eq!(rewritten(R_MERCURY_UNIFIED), R_MERCURY_ABS64);
        assert_eq!(rewritten(R_MERCURY_ABS64), R_MERCURY_ABS64);
    }
}
