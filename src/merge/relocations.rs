//! Relocations: per input (in parallel), each relocation applied now (patched into the
//! output section, or as edits of a section written from the input's mapping) or kept for
//! the driver or the next link; then the patches made and the kept lists encoded.

use super::*;

/// A relocation resolved at link time: patched into its output section.
#[derive(Clone, Copy)]
struct Patch {
    at: u64,
    ty: u32,
    value: u64,
    bank: u32,
    clear: bool,
}

/// Replaced runs of a section, (offset, length), and their new bytes in order.
type Edits = (Vec<(usize, usize)>, Vec<u8>);

/// A relocation kept in the output: (offset, symbol, type, addend).
type RelocEntry = (u64, u32, u32, i64);

/// The relocation sections of the output: kept for the driver (or the next link) with
/// or without addends, and with `--preserve-relocs` those applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum RelocList {
    Rel,
    Rela,
    Resolved,
}

/// What becomes of one input's relocations (`Merger::plan_relocations`), per relocation
/// section and in order: the patches to make in an output section, and the entries to
/// keep in the relocation list (`RelocList`) of an output section.
#[derive(Default)]
struct RelocPlan {
    patches: Vec<(usize, Vec<Patch>)>,
    /// The edits of the output sections written from this input's mapping (all their
    /// relocations are this input's).
    edits: Vec<(usize, Edits)>,
    kept: Vec<((usize, RelocList), Vec<RelocEntry>)>,
    /// nvlink's failure this input's relocations cause, reported after the `.nv.info`
    /// step's warnings, as nvlink's comes (`Relocated::failure`).
    failure: Option<Error>,
}

/// A relocation section of the output, encoded: the output section it relocates, which
/// list it is, its entries' bytes.
pub(super) type KeptList = (usize, RelocList, Vec<u8>);

/// What the relocations step hands on: the relocation lists the output keeps (to which
/// the Mercury step adds, and which `finish` makes sections of), and the first failure
/// of nvlink's the relocations cause, which the spine reports after the `.nv.info`
/// step's warnings, where nvlink reports it.
pub(super) struct Relocated {
    pub(super) kept: Vec<KeptList>,
    pub(super) failure: Option<Error>,
}

/// What the relocations against one input symbol need to know of it.
#[derive(Clone, Copy)]
struct SymFacts {
    /// Its function (or function's section) was removed.
    dead: bool,
    /// A global definition another input's replaced.
    replaced: bool,
    /// Its value at link time (`Merger::sass_value`: `link_value`, but for a reserved
    /// shared variable).
    value: (u64, u32, bool),
    out_index: Option<usize>,
    /// A section symbol of a non-alloc section.
    in_nonalloc_section: bool,
    /// For a section symbol: where its piece went in the output section.
    section_piece: Option<u64>,
}

/// The input section a relocation section patches, as its relocations need it.
struct SectionAt<'c> {
    input: usize,
    origin: &'c str,
    sections: &'c [Section],
    target: &'c Section,
    /// Not loaded (debug information).
    nonalloc: bool,
    /// Where its piece starts in its output section.
    piece: u64,
    /// Its entries moved or gone (a pruned debug piece: `Frames`).
    frame: Option<&'c sections::PrunedFrame>,
    /// The function whose code it is.
    func: Option<FuncId>,
    /// The byte ranges holding data objects another input's definition replaced.
    replaced: Vec<(u64, u64)>,
}

/// What becomes of one section's relocations.
#[derive(Default)]
struct SectionPlan {
    patches: Vec<Patch>,
    kept: Vec<RelocEntry>,
    /// Applied, and listed as the next link sees them (`--preserve-relocs`).
    resolved: Vec<RelocEntry>,
    failure: Option<Error>,
}

/// The relocations step's decisions, per input in input order, to be made in the output
/// (`apply`).
pub(super) struct RelocWork(Vec<Result<RelocPlan>>);

impl RelocWork {
    /// Makes the decisions in the output `out`: its sections patched (each in parallel,
    /// the inputs' patches in input order) or given their edits; the kept lists encoded,
    /// last made first but for the line tables' in nvlink's sm_100+ layout
    /// (`mercury_layout`). The first error of an input's plan ends it.
    pub(super) fn apply(self, out: &mut output::Output, mercury_layout: bool) -> Result<Relocated> {
        let mut failure = None;
        // (output section, list) → entries in merge order
        let mut lists: Vec<((usize, RelocList), Vec<RelocEntry>)> = Vec::new();
        let mut index: HashMap<(usize, RelocList), usize> = HashMap::default();
        let mut patches: Vec<Vec<Vec<Patch>>> = vec![Vec::new(); out.len()];
        for plan in self.0 {
            let plan = plan?;
            if failure.is_none() {
                failure = plan.failure;
            }
            for (id, group) in plan.patches {
                patches[id].push(group);
            }
            for (id, e) in plan.edits {
                (out[id].edits, out[id].edit_bytes) = e;
            }
            for (key, entries) in plan.kept {
                match index.get(&key) {
                    Some(&li) => lists[li].1.extend(entries),
                    None => {
                        index.insert(key, lists.len());
                        lists.push((key, entries));
                    }
                }
            }
        }
        // each output section patched on its own (in parallel), in input order
        out.par_iter_mut()
            .zip(patches.into_par_iter())
            .try_for_each(|(o, groups)| {
                groups.iter().flatten().try_for_each(|p| {
                    reloc::apply(&mut o.data, p.at, p.ty, p.value, p.bank, p.clear)
                })
            })?;
        // (encoded in parallel, one section each)
        let forward: Vec<bool> = (lists.iter())
            .map(|((id, _), _)| mercury_layout && line_table(&out[*id].name))
            .collect();
        let encoded: Vec<KeptList> = lists
            .into_par_iter()
            .zip(forward)
            .map(|(((id, list_kind), list), forward)| {
                let mut data = Vec::with_capacity(list.len() * 24);
                let mut put = |&(off, sym, ty, addend): &(u64, u32, u32, i64)| {
                    data.extend_from_slice(&off.to_le_bytes());
                    data.extend_from_slice(&((sym as u64) << 32 | ty as u64).to_le_bytes());
                    if list_kind != RelocList::Rel {
                        data.extend_from_slice(&addend.to_le_bytes());
                    }
                };
                match forward {
                    true => list.iter().for_each(&mut put),
                    false => list.iter().rev().for_each(&mut put),
                }
                (id, list_kind, data)
            })
            .collect();
        Ok(Relocated {
            kept: encoded,
            failure,
        })
    }
}

impl<'a> Merger<'a> {
    /// What becomes of every relocation of the live code and data, decided per input in
    /// parallel, reading only (`RelocWork::apply` makes it in the output). Reads the
    /// inputs' relocation entries (`parsed`), the symbols' definitions (`res`), the live
    /// code (`code`), where each input section went (`placement`, directly and through
    /// `link_value`), the sections written from an input's mapping and the size of
    /// `.nv.constant3` (`out`, the last through `linker_value`), the output symbol table
    /// (`symtab`, through `out_index`),
    /// shared-memory offsets (`layout`, directly and through `link_value`) and `frames`,
    /// the debug pieces the sections step pruned, whose entries moved.
    pub(super) fn relocations(
        &self,
        placement: &Placement,
        layout: &SharedLayout,
        symtab: &SymbolTable,
        frames: &sections::Frames,
    ) -> RelocWork {
        RelocWork(
            (0..self.inputs().len())
                .into_par_iter()
                .map(|i| self.plan_relocations(placement, layout, symtab, i, frames))
                .collect(),
        )
    }

    /// The byte ranges of input `i`'s section `si` that hold data objects another
    /// input's definition replaced.
    pub(super) fn replaced_objects(&self, i: usize, si: usize) -> Vec<(u64, u64)> {
        let c = &self.inputs()[i].cubin;
        (c.symbols.iter().enumerate())
            .filter(|(_, s)| matches!(s.ty, STT_OBJECT | crate::elf::STT_CUDA_OBJECT))
            .filter(|(_, s)| s.shndx as usize == si && s.size > 0)
            .filter(|&(k, _)| self.is_replaced(SymKey::new(i, k)))
            .map(|(_, s)| (s.value, s.value.saturating_add(s.size)))
            .collect()
    }

    /// What becomes of input `i`'s relocations: patched into the image now, or kept for
    /// the driver (or the next link), in order. What a relocation needs of its symbol is
    /// worked out once per symbol.
    fn plan_relocations(
        &self,
        placement: &Placement,
        layout: &SharedLayout,
        symtab: &SymbolTable,
        i: usize,
        frames: &sections::Frames,
    ) -> Result<RelocPlan> {
        let exec = !self.opts().relocatable;
        let c = &self.inputs()[i].cubin;
        let mut facts: Vec<Option<SymFacts>> = vec![None; c.symbols.len()];
        let mut plan = RelocPlan::default();
        // patches of the sections written from the mapping, by output section
        let mut own: Vec<(usize, Vec<Patch>)> = Vec::new();
        for (ri, rs) in c.sections.iter().enumerate() {
            if !matches!(rs.ty, SHT_RELA | SHT_REL) {
                continue;
            }
            let Some(&(out_id, piece)) = placement.of(&SecKey::new(i, rs.info as usize)) else {
                continue;
            };
            let relocs = self.relocs(i, ri)?;
            let target = &c.sections[rs.info as usize];
            let sec = SectionAt {
                input: i,
                origin: &c.origin,
                sections: &c.sections,
                target,
                nonalloc: target.flags & SHF_ALLOC == 0,
                piece,
                frame: frames.get(&SecKey::new(i, rs.info as usize)),
                // (the function whose code this is: dynamic shared arrays' offsets
                // depend on it)
                func: (self.code.func_of_text())
                    .get(&SecKey::new(i, rs.info as usize))
                    .copied(),
                replaced: self.replaced_objects(i, rs.info as usize),
            };
            let mut out = SectionPlan {
                kept: Vec::with_capacity(if exec { 0 } else { relocs.len() }),
                failure: plan.failure.take(),
                ..SectionPlan::default()
            };
            for r in relocs {
                self.plan_reloc(placement, layout, symtab, &sec, r, &mut facts, &mut out)?;
            }
            plan.failure = out.failure;
            let SectionPlan {
                patches,
                kept,
                resolved,
                ..
            } = out;
            if !patches.is_empty() {
                match self.out[out_id].source {
                    Some(_) => match own.iter_mut().find(|(o, _)| *o == out_id) {
                        Some((_, list)) => list.extend(patches),
                        None => own.push((out_id, patches)),
                    },
                    None => plan.patches.push((out_id, patches)),
                }
            }
            if !kept.is_empty() {
                let list = match rs.ty {
                    SHT_RELA => RelocList::Rela,
                    _ => RelocList::Rel,
                };
                plan.kept.push(((out_id, list), kept));
            }
            if !resolved.is_empty() {
                plan.kept.push(((out_id, RelocList::Resolved), resolved));
            }
        }
        for (out_id, patches) in own {
            let src = self.out[out_id].source.as_deref().unwrap_or_default();
            plan.edits.push((out_id, edits(src, patches.iter())?));
        }
        Ok(plan)
    }

    /// What becomes of relocation `r` of the section `sec` describes: a patch now, kept
    /// for the driver (or the next link), listed as resolved, or dropped; `facts`
    /// caches what it needs of each symbol.
    #[allow(clippy::too_many_arguments)] // (the products it reads, each by name)
    fn plan_reloc(
        &self,
        placement: &Placement,
        layout: &SharedLayout,
        symtab: &SymbolTable,
        sec: &SectionAt,
        r: &Reloc,
        facts: &mut [Option<SymFacts>],
        out: &mut SectionPlan,
    ) -> Result<()> {
        // (a data object another input's copy replaced keeps its bytes, as nvlink
        // keeps them, but not its relocations: a weak vtable in two units)
        if sec
            .replaced
            .iter()
            .any(|&(a, b)| (a..b).contains(&r.offset))
        {
            return Ok(());
        }
        let k = SymKey::new(sec.input, r.sym as usize);
        let sym = self.sym(k);
        let f = *facts[k.sym].get_or_insert_with(|| self.sym_facts(placement, layout, symtab, k));
        let mut at = sec.piece + r.offset;
        if let Some(f) = sec.frame {
            // a pruned debug piece (`Frames`): entries moved or gone; a relocation
            // against a section symbol is not applied here (a `.debug_frame`'s CIE
            // pointers, which the pruning wrote; the line tables' string bases, which
            // `rebase_line_tables` moves)
            match f.moved(r.offset) {
                Some(o) if sym.ty != STT_SECTION => at = sec.piece + o,
                _ => return Ok(()),
            }
        }
        if r.offset
            .checked_add(reloc::extent(r.ty))
            .is_none_or(|e| e > sec.target.size)
        {
            return Err(Error::fatal(format!(
                "'{}': relocation {} against '{}' at offset {:#x} of '{}' is past the end of the section",
                sec.origin,
                reloc::name(r.ty),
                sym.name,
                r.offset,
                sec.target.name
            )));
        }
        // (dropped, unapplied, under -r too)
        if r.ty == reloc::R_CUDA_YIELD_OPCODE9_0 || r.ty == reloc::R_CUDA_YIELD_CLEAR_PRED4_87 {
            return Ok(());
        }
        // In debug sections, entries about a definition another input's
        // replaced go with it, but for `.debug_info`'s (a replaced inline
        // function's address range) and `.debug_loc`'s (its variables'
        // location lists): nvlink keeps them, against the kept copy.
        let loser = sec.nonalloc
            && f.replaced
            && !matches!(sec.target.name.as_str(), ".debug_info" | ".debug_loc");
        // (never kept: nvlink's -r output drops them too; a replaced weak
        // definition's FDE keeps its range even where the kept copy was
        // removed: its relocations went with it first)
        if r.ty == reloc::R_CUDA_UNUSED_CLEAR32 || r.ty == reloc::R_CUDA_UNUSED_CLEAR64 {
            if f.dead && !loser {
                out.patches.push(Patch {
                    at,
                    ty: r.ty,
                    value: 0,
                    bank: 0,
                    clear: true,
                });
            }
            return Ok(());
        }
        if loser || f.dead || sec.nonalloc && is_unplaced_label(sym) {
            return Ok(());
        }
        self.plan_value(layout, sec, r, k, f, at, out)
    }

    /// Relocation `r` of input symbol `k` (`f`: what it needs of it), at `at` in its
    /// output section, once it is known to stay: applied now (and listed as resolved
    /// under `--preserve-relocs`), or kept for the driver or the next link.
    #[allow(clippy::too_many_arguments)] // (the products it reads, each by name)
    fn plan_value(
        &self,
        layout: &SharedLayout,
        sec: &SectionAt,
        r: &Reloc,
        k: SymKey,
        f: SymFacts,
        at: u64,
        out: &mut SectionPlan,
    ) -> Result<()> {
        let exec = !self.opts().relocatable;
        let sym = self.sym(k);
        // link-time value: section offset of the target (a dynamic shared
        // array's as the function holding the relocation sees it)
        let (mut value, bank, mut resolvable_here) = f.value;
        // (a dynamic shared array a function no kernel reaches sees at -1)
        let mut unseen = false;
        if is_dynamic_shared(sym)
            && let Some(func) = sec.func
            && let Some(o) = layout.dynamic_offset(func, self.representative(k))
        {
            (value, resolvable_here) = (o, true);
            unseen = o == u64::MAX;
        } else if is_dynamic_shared(sym) && sec.nonalloc && exec && !self.opts().debug {
            // (debug information's address of a dynamic shared array outside a
            // -g link: nvlink gives the array the value -1, its addend added,
            // as the SASS side of a function that does not see it)
            (value, resolvable_here) = (u64::MAX, true);
        }
        // (debug information keeps the load addresses of variables, constant
        // ones included, for the driver: nvlink keeps those relocations; so does
        // initialised data holding a `__constant__` variable's address, whose generic
        // address only the driver knows: nvlinkrs wrote its offset in the bank, attacker
        // review of 2026-12-01)
        let load_address = reloc::is_global_address(r.ty)
            && (sec.nonalloc || self.constant_address_for_driver(sec.target.flags, k));
        let internal = exec || self.internal_applied_under_r(k);
        // (sm_100+ -r keeps `.debug_info`'s references to `.debug_line`)
        let line_reference = !exec
            && self.mercury_layout()
            && sym.ty == STT_SECTION
            && line_reference(&sec.target.name, sec.sections.get(sym.shndx as usize));
        let apply_now = resolvable_here
            && !line_reference
            && (exec
                || f.in_nonalloc_section
                || internal
                || cudadevrt::is_linker_symbol(sym)
                || applied_under_r(sym))
            && reloc::resolvable(r.ty)
            && !load_address;
        // (the addend as the next link sees it: a section symbol's piece added)
        let addend = r.addend + f.section_piece.unwrap_or(0) as i64;
        // (nvlink's --preserve-relocs link fails where sm_90 lists such a
        // relocation against the array's symbol, which the others do not keep)
        if apply_now
            && unseen
            && exec
            && self.preserving_only()
            && layout.debug_holds_variables()
            && f.out_index.is_none()
            && out.failure.is_none()
        {
            out.failure = Some(Error::fatal("Internal error: reference to deleted symbol").context(format!(
                "(nvlink's words; nvlinkrs fails with it) --preserve-relocs: '{}' of '{}', which no kernel reaches, refers to the dynamic shared array '{}', whose symbol nvlink keeps only at sm_90",
                sec.target.name, sec.origin, sym.name
            )));
        }
        if apply_now {
            out.patches.push(Patch {
                at,
                ty: r.ty,
                value: (value as i64).wrapping_add(r.addend) as u64,
                bank,
                clear: false,
            });
            // (--preserve-relocs lists it as the next link would see it; under
            // -r not the unified table's offset; without -g one against a
            // dynamic shared array only where a function no kernel reaches
            // sees it, at -1, and the array has a symbol (sm_90); nvlink's
            // sm_100+ image only the code's, and none against a constant bank or a
            // reserved shared variable, tcgen05's partition)
            if self.opts().preserve_relocs
                && (exec || !is_table_symbol(&sym.name))
                && (self.dynamic_shared_symbols() || !is_dynamic_shared(sym) || unseen)
                && !(self.mercury_layout()
                    && (sec.target.flags & SHF_EXECINSTR == 0
                        || self.in_constant_bank(k)
                        || self.reserved_target(k).is_some()))
                && let Some(sym_index) = f.out_index
            {
                out.resolved.push((at, sym_index as u32 + 1, r.ty, addend));
            }
            return Ok(());
        }
        let Some(sym_index) = f.out_index else {
            if is_table_symbol(&sym.name) {
                return Ok(());
            }
            return Err(Error::fatal(format!(
                "'{}': relocation {} at offset {:#x} of '{}' refers to symbol '{}', which is not in the output",
                sec.origin,
                reloc::name(r.ty),
                r.offset,
                sec.target.name,
                sym.name
            )));
        };
        let ty = if exec { reloc::rewritten(r.ty) } else { r.ty };
        out.kept.push((at, sym_index as u32 + 1, ty, addend));
        Ok(())
    }

    /// `link_value` of a SASS relocation's target; a reserved shared variable in an
    /// image is at its place in the reserved window (its value in the input is its
    /// alignment), and nvlink applies the code's references to it: tcgen05's
    /// `__nv_reservedSMEM_tcgen05_partition`, the address the tensor-memory allocator is
    /// given (was: kept for the driver, the code reading 0). The capsule's references to
    /// it stay for the driver, as nvlink keeps them.
    fn sass_value(
        &self,
        placement: &Placement,
        layout: &SharedLayout,
        k: SymKey,
    ) -> (u64, u32, bool) {
        if let Some(t) = self.reserved_target(k)
            && let Some(&(_, at)) = placement.of(&SecKey::new(t.input, self.sym(t).shndx as usize))
        {
            let c = &self.inputs()[t.input].cubin;
            return (at + sections::reserved_offset(&c.symbols, t.sym), 0, true);
        }
        self.link_value(placement, layout, k)
    }

    /// The reserved shared variable a relocation's symbol stands for, in an image.
    fn reserved_target(&self, k: SymKey) -> Option<SymKey> {
        (self.target(k))
            .filter(|_| !self.opts().relocatable && self.sym(k).ty != STT_SECTION)
            .filter(|&t| sections::reserved(&self.inputs()[t.input].cubin, self.sym(t)))
    }

    /// What relocations need to know of a symbol.
    fn sym_facts(
        &self,
        placement: &Placement,
        layout: &SharedLayout,
        symtab: &SymbolTable,
        k: SymKey,
    ) -> SymFacts {
        let sym = self.sym(k);
        let c = &self.inputs()[k.input].cubin;
        let section = (sym.ty == STT_SECTION).then_some(sym.shndx as usize);
        SymFacts {
            dead: self.symbol_is_dead(k),
            replaced: self.is_replaced(k),
            value: self.sass_value(placement, layout, k),
            out_index: self.out_index(symtab, k),
            in_nonalloc_section: section
                .and_then(|s| c.sections.get(s))
                .is_some_and(|s| s.flags & SHF_ALLOC == 0),
            section_piece: section
                .and_then(|s| placement.of(&SecKey::new(k.input, s)).map(|p| p.1)),
        }
    }
}

/// A label ptxas could not place (`$L__tmp…` in a `-G` unit's `.debug_loc`): an
/// undefined local symbol. nvlink drops the debug sections' relocations against one and
/// keeps their bytes.
pub(super) fn is_unplaced_label(s: &Symbol) -> bool {
    s.bind == STB_LOCAL && !s.defined() && s.ty != STT_SECTION
}

/// The relocations of a section written from an input's mapping, as the bytes that
/// replace the input's: each run of overlapping or touching fields copied once from
/// `src`, the patches made in it in their order.
fn edits<'p>(src: &[u8], patches: impl Iterator<Item = &'p Patch> + Clone) -> Result<Edits> {
    let mut spans: Vec<(u64, u64)> = patches
        .clone()
        .map(|p| (p.at, p.at.saturating_add(reloc::extent(p.ty))))
        .collect();
    // (patches come in offset order but for a few: the check is cheaper than the sort)
    if !spans.is_sorted() {
        spans.sort_unstable();
    }
    // runs: (offset in the section, length, offset in the bytes)
    let mut runs: Vec<(usize, usize, usize)> = Vec::new();
    let mut bytes = Vec::new();
    for (s, e) in spans {
        // (an offset past the end is left to `reloc::apply`'s message, on the whole
        // section)
        let (s, e) = (
            s.min(src.len() as u64) as usize,
            e.min(src.len() as u64) as usize,
        );
        match runs.last_mut() {
            Some(last) if s <= last.0 + last.1 => {
                let end = e.max(last.0 + last.1);
                bytes.extend_from_slice(&src[last.0 + last.1..end]);
                last.1 = end - last.0;
            }
            _ => {
                runs.push((s, e - s, bytes.len()));
                bytes.extend_from_slice(&src[s..e]);
            }
        }
    }
    for p in patches {
        let i = runs
            .partition_point(|r| r.0 as u64 <= p.at)
            .saturating_sub(1);
        match runs.get(i) {
            Some(&(s, n, b))
                if p.at >= s as u64
                    && p.at.saturating_add(reloc::extent(p.ty)) <= (s + n) as u64 =>
            {
                reloc::apply(
                    &mut bytes[b..b + n],
                    p.at - s as u64,
                    p.ty,
                    p.value,
                    p.bank,
                    p.clear,
                )?
            }
            _ => reloc::apply(&mut src.to_vec(), p.at, p.ty, p.value, p.bank, p.clear)?,
        }
    }
    Ok((runs.into_iter().map(|(s, n, _)| (s, n)).collect(), bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes `edits` describes, spliced into `src` as the writer does.
    fn spliced(src: &[u8], runs: &[(usize, usize)], bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let (mut from, mut b) = (0, 0);
        for &(at, n) in runs {
            assert!(at >= from, "runs sorted and apart");
            out.extend_from_slice(&src[from..at]);
            out.extend_from_slice(&bytes[b..b + n]);
            (from, b) = (at + n, b + n);
        }
        out.extend_from_slice(&src[from..]);
        out
    }

    #[test]
    fn edits_give_the_bytes_of_patching_a_copy() {
        // overlapping, touching and repeated fields, in an order that is not sorted:
        // the result must be the same as patching the whole section in order
        let src: Vec<u8> = (0..256u32).map(|i| (i * 7 + 3) as u8).collect();
        let types = [
            reloc::R_CUDA_64,
            reloc::R_CUDA_ABS32_LO_32,
            reloc::R_CUDA_ABS32_HI_32,
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for round in 0..200 {
            let mut patches = Vec::new();
            for _ in 0..1 + round % 12 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let ty = types[(seed % 3) as usize];
                let at = (seed >> 8) % (256 - reloc::extent(ty));
                patches.push(Patch {
                    at,
                    ty,
                    value: seed.rotate_left(17),
                    bank: 0,
                    clear: false,
                });
            }
            let mut want = src.clone();
            for p in &patches {
                reloc::apply(&mut want, p.at, p.ty, p.value, p.bank, p.clear).unwrap();
            }
            let (runs, bytes) = edits(&src, patches.iter()).unwrap();
            assert_eq!(spliced(&src, &runs, &bytes), want, "round {round}");
            let patched: usize = runs.iter().map(|r| r.1).sum();
            assert_eq!(patched, bytes.len());
        }
    }

    #[test]
    fn an_edit_past_the_section_is_the_relocation_error() {
        let src = vec![0u8; 16];
        let p = Patch {
            at: 12,
            ty: reloc::R_CUDA_64,
            value: 1,
            bank: 0,
            clear: false,
        };
        let e = edits(&src, [p].iter()).unwrap_err();
        assert!(
            e.to_string()
                .contains("at offset 0xc passes the end of its 0x10-byte section"),
            "{e}"
        );
    }
}

/// Under `-r`, what is applied to the code and dropped, as nvlink does: relocations against
/// the unified function table's offset. nvlink applies and drops those against
/// `__constant__` variables too, and a later link that places another input's constants
/// first then reads the wrong ones (docs/rules/relocatable.md): they are kept, so the bytes
/// differ from nvlink's `-r` output there.
pub(super) fn applied_under_r(sym: &Symbol) -> bool {
    !sym.defined() && sym.name == "__UFT_OFFSET"
}

impl Merger<'_> {
    /// Whether `-r` applies and drops a relocation against symbol `k`, one of ptxas's
    /// internal constants (`.const_opt`, local with visibility STV_INTERNAL), as nvlink
    /// does; but not in a device function's bank 2, a `switch` table: where it lies in
    /// the kernels' banks only the final link knows, and nvlink's `-r`, applying it, makes
    /// a two-step link read another function's table (docs/rules/differences.md). The
    /// Mercury twin goes with it (its capsule record written: `mercury::records`).
    pub(super) fn internal_applied_under_r(&self, k: SymKey) -> bool {
        let sym = self.sym(k);
        sym.bind == STB_LOCAL && sym.other & 0x3 == 1 && !self.in_function_bank2(k)
    }
}

/// The line tables whose relocations nvlink's sm_100+ layout keeps in input order.
fn line_table(name: &str) -> bool {
    name == ".debug_line" || name == ".nv_debug_line_sass"
}

/// A reference from the debug information (`.debug_info`, or its Mercury copy) to the
/// line table (`.debug_line`, its Mercury copy), which nvlink's sm_100+ `-r` output keeps.
pub(super) fn line_reference(target: &str, symbol_section: Option<&Section>) -> bool {
    let of = |n: &str| n.strip_prefix(".nv.merc").unwrap_or(n).to_string();
    of(target) == ".debug_info" && symbol_section.is_some_and(|s| of(&s.name) == ".debug_line")
}
