//! Sections: the inputs' sections placed in the output, a function's own sections one to
//! one (those of removed functions dropped), sections sharing a name concatenated as
//! pieces in input order, aligned as each asks; on sm_100+ the debug pieces without the
//! entries of removed or replaced functions (`Frames`: `.debug_frame`, `pruned_frame`;
//! the line tables, `pruned_lines` in linetable.rs; `.nv_debug_info_reg_sass`,
//! `cleared_reg_sass` in regsass.rs).

use super::bank2::Unbanked;
use super::*;

impl<'a> Merger<'a> {
    /// The function an input section belongs to (its code, info, parameter bank,
    /// relocations), if any.
    pub(super) fn owner(&self, i: usize, sec: usize) -> Option<FuncId> {
        let c = &self.inputs()[i].cubin;
        let s = c.sections.get(sec)?;
        if let Some(&f) = self.code.func_of_text().get(&SecKey::new(i, sec)) {
            return Some(f);
        }
        if s.flags & SHF_EXECINSTR != 0 && s.name.starts_with(".text.") {
            return None; // code of a discarded definition
        }
        if s.flags & SHF_INFO_LINK != 0 || matches!(s.ty, SHT_RELA | SHT_REL) {
            return self
                .code
                .func_of_text()
                .get(&SecKey::new(i, s.info as usize))
                .copied();
        }
        None
    }

    pub(super) fn is_dropped_function_section(&self, i: usize, sec: usize) -> bool {
        let c = &self.inputs()[i].cubin;
        let Some(s) = c.sections.get(sec) else {
            return false;
        };
        let code_of = |t: usize| {
            c.sections
                .get(t)
                .is_some_and(|t| t.flags & SHF_EXECINSTR != 0 && t.name.starts_with(".text"))
        };
        if s.flags & SHF_EXECINSTR != 0 && s.name.starts_with(".text") {
            return self
                .code
                .func_of_text()
                .get(&SecKey::new(i, sec))
                .is_none_or(|&f| !self.code.live()[f]);
        }
        if (s.flags & SHF_INFO_LINK != 0 || matches!(s.ty, SHT_RELA | SHT_REL))
            && code_of(s.info as usize)
        {
            return self
                .code
                .func_of_text()
                .get(&SecKey::new(i, s.info as usize))
                .is_none_or(|&f| !self.code.live()[f]);
        }
        false
    }

    /// Places every kept input section in the output; hands on the sm_100+ debug pieces it
    /// pruned (`Frames`: `.debug_frame` and the line tables without the removed
    /// functions' entries, `.nv_debug_info_reg_sass` cleared), whose relocations move with
    /// their entries, and the `Placement` (where each input section went), `Unbanked`
    /// until bank 2 adds its pieces. Reads `code` (what is live, which sections are a
    /// function's) and `res`; writes `out` (its sections, which get a section symbol,
    /// after the notes' sections: it takes `Notes` for that order alone); ends with
    /// nvlink's limit on constant data (`constant_data_fits`).
    pub(super) fn sections(&mut self, _notes: &super::notes::Notes) -> Result<(Frames, Unbanked)> {
        let exec = !self.opts().relocatable;
        let mut frames = Frames::default();
        let mut placement = Placement::default();
        // (the output section of each name and type that input sections share)
        let mut by_name: HashMap<(&str, u32), usize> = HashMap::default();
        for i in 0..self.inputs().len() {
            let c = &self.inputs()[i].cubin;
            let has_symbol: HashSet<usize> = c
                .symbols
                .iter()
                .filter(|s| s.ty == STT_SECTION)
                .map(|s| s.shndx as usize)
                .collect();
            for (si, s) in c.sections.iter().enumerate().skip(1) {
                let skip = matches!(
                    s.ty,
                    SHT_SYMTAB | SHT_STRTAB | SHT_RELA | SHT_REL | SHT_NOTE
                ) || matches!(
                    s.ty,
                    SHT_CUDA_CALLGRAPH | SHT_CUDA_PROTOTYPE | SHT_CUDA_COMPAT | SHT_CUDA_RELOCINFO
                ) || s.ty == SHT_CUDA_INFO
                    || (exec && s.ty == SHT_CUDA_SHARED)
                    // (Mercury relocations, whatever a damaged name says: `merc_relocations`)
                    || s.ty == SHT_MERC_RELA
                    || s.is_mercury();
                // (a device function's bank 2 goes into its kernels' banks: `bank2`)
                if skip || self.is_dropped_function_section(i, si) || self.is_function_bank2(i, si)
                {
                    continue;
                }
                let (ty, flags) = out_type(s, exec);
                if self.owner(i, si).is_some() {
                    let mut o = OutSection::new(&s.name, ty, flags);
                    o.align = s.align;
                    o.entsize = s.entsize;
                    o.link = if s.link != 0 {
                        Ref::Symtab
                    } else {
                        Ref::Raw(0)
                    };
                    // (written from the input's mapping, with the relocations' edits)
                    if s.has_bytes() {
                        o.source = Some(c.section_data(s));
                    }
                    o.mem_size = s.size;
                    let id = self.out.push_function(o, has_symbol.contains(&si), i);
                    placement.place(SecKey::new(i, si), id, 0);
                    continue;
                }
                let key = (s.name.as_str(), s.ty);
                let id = match by_name.get(&key) {
                    Some(&id) => id,
                    None => {
                        let mut o = OutSection::new(&s.name, ty, flags);
                        o.entsize = s.entsize;
                        let id = self.new_section(o, false);
                        by_name.insert(key, id);
                        id
                    }
                };
                if has_symbol.contains(&si) {
                    self.out.give_symbol(id);
                }
                let mercury_layout = self.mercury_layout();
                let o = &mut self.out[id];
                o.align = o.align.max(s.align.max(1));
                let a = s.align.max(1);
                // sm_100+: without the entries (line sequences) of removed functions
                let frame = match s.name.as_str() {
                    _ if !mercury_layout => None,
                    ".debug_frame" => {
                        let base = (o.data.len() as u64).next_multiple_of(a);
                        self.pruned_frame(i, si, base)
                    }
                    ".debug_line" | ".nv_debug_line_sass" => self.pruned_lines(i, si),
                    ".nv_debug_info_reg_sass" => self.cleared_reg_sass(i, si),
                    _ => None,
                };
                let o = &mut self.out[id];
                let at = if s.has_bytes() {
                    while !(o.data.len() as u64).is_multiple_of(a) {
                        o.data.push(0);
                    }
                    let at = o.data.len() as u64;
                    match frame {
                        Some(f) => {
                            o.data.extend_from_slice(&f.data);
                            frames.insert(SecKey::new(i, si), f);
                        }
                        None => o.data.extend_from_slice(c.bytes(s)),
                    }
                    o.mem_size = o.data.len() as u64;
                    at
                } else if s.ty == SHT_CUDA_SHARED_RESERVED {
                    reserved_piece(o, &c.symbols, (si, s), exec)
                } else {
                    let at = o.mem_size.next_multiple_of(a);
                    o.mem_size = at + s.size;
                    at
                };
                placement.place(SecKey::new(i, si), id, at);
            }
        }
        if self.opts().target.is_some_and(|t| t.sm >= 100) {
            self.rebase_line_tables(&frames, &placement);
        }
        // text and per-function sections point at their function's code
        for i in 0..self.inputs().len() {
            let c = &self.inputs()[i].cubin;
            for (si, s) in c.sections.iter().enumerate() {
                let Some(&(id, _)) = placement.of(&SecKey::new(i, si)) else {
                    continue;
                };
                if s.info != 0
                    && s.flags & SHF_INFO_LINK != 0
                    && let Some(&(t, _)) = placement.of(&SecKey::new(i, s.info as usize))
                {
                    self.out[id].info = Ref::Section(t);
                }
            }
        }
        self.constant_data_fits()?;
        Ok((frames, Unbanked::new(placement)))
    }

    /// nvlink's sm_100+ `.debug_frame`: each FDE whose function was removed or replaced
    /// (or whose location nothing relocates) goes, with its CIE when no kept FDE follows
    /// that CIE; the CIE pointers of the kept FDEs are
    /// the CIEs' new offsets in the output section (`base` is the piece's offset).
    fn pruned_frame(&self, i: usize, sec: usize, base: u64) -> Option<PrunedFrame> {
        let c = &self.inputs()[i].cubin;
        let d = c.bytes(&c.sections[sec]);
        let entries = frame_entries(d)?;
        let ri = c
            .sections
            .iter()
            .position(|s| matches!(s.ty, SHT_RELA | SHT_REL) && s.info as usize == sec)?;
        let relocs = self.relocs(i, ri).ok()?;
        // the function of each FDE: the symbol its initial-location field is relocated by
        let dead_fde = |start: usize, end: usize| {
            let loc = if d.u32_at(start) == Some(0xFFFF_FFFF) {
                start + 20
            } else {
                start + 8
            };
            // (an FDE whose location nothing relocates describes no function: a `-r`
            // output keeps those of replaced definitions without their relocation)
            match relocs.iter().find(|r| r.offset == loc as u64 && loc < end) {
                Some(r) => {
                    self.symbol_is_dead(SymKey::new(i, r.sym as usize))
                        || self.is_replaced(SymKey::new(i, r.sym as usize))
                }
                None => true,
            }
        };
        let mut keep = vec![true; entries.len()];
        let mut cie_of = vec![None; entries.len()];
        let mut last_cie = None;
        for (n, &(s, e, cie)) in entries.iter().enumerate() {
            if cie {
                last_cie = Some(n);
            } else {
                cie_of[n] = last_cie;
                keep[n] = !dead_fde(s, e);
            }
        }
        // a CIE stays when a kept FDE uses it (or when no FDE follows it at all)
        let mut used = vec![(false, false); entries.len()]; // (has FDEs, has kept FDEs)
        for (m, c) in cie_of.iter().enumerate() {
            if let Some(c) = *c {
                used[c].0 = true;
                used[c].1 |= keep[m];
            }
        }
        for (n, &(_, _, cie)) in entries.iter().enumerate() {
            if cie {
                keep[n] = !used[n].0 || used[n].1;
            }
        }
        if keep.iter().all(|&k| k) && cie_of.iter().all(|c| c.is_none()) {
            return None;
        }
        let mut data = Vec::with_capacity(d.len());
        let mut map = Vec::new();
        let mut new_at = vec![0u64; entries.len()];
        for (n, &(s, e, cie)) in entries.iter().enumerate() {
            if !keep[n] {
                continue;
            }
            new_at[n] = data.len() as u64;
            map.push((s as u64, e as u64, data.len() as u64));
            let start = data.len();
            data.extend_from_slice(&d[s..e]);
            if !cie && let Some(c) = cie_of[n] {
                let value = base + new_at[c];
                if d.u32_at(s) == Some(0xFFFF_FFFF) {
                    data[start + 12..start + 20].copy_from_slice(&value.to_le_bytes());
                } else {
                    data[start + 4..start + 8].copy_from_slice(&(value as u32).to_le_bytes());
                }
            }
        }
        Some(PrunedFrame { data, map })
    }
}

/// Whether `s` (of `c`'s SASS or Mercury table) is a variable of a reserved shared
/// section, whose value in the input is its alignment, as a common symbol's.
pub(super) fn reserved(c: &Cubin, s: &Symbol) -> bool {
    s.defined()
        && c.sections
            .get(s.shndx as usize)
            .is_some_and(|x| x.ty == SHT_CUDA_SHARED_RESERVED)
}

/// Where an input's piece of a reserved shared section goes (sm_110's
/// `.nv.shared.reserved.0`, which holds the weak `__nv_reservedSMEM_gb10b_war_var`; a
/// call to `cudaDeviceMemcpyAsync` from sm_90 on gives one with
/// `__nv_reservedSMEM_devtool_atexit_pc`, to `cudaResizeSharedMemory` at sm_100 one with
/// `__nv_reservedSMEM_resize_smem_partition`): every input holds the same variables, so
/// the pieces overlap, starting at the input's `.nv.reservedSmem.offset0` (0x40 in the
/// SASS table at sm_100+, else 0; 0 in the Mercury one) in an image, at 0 in a
/// relocatable file. In an image the section ends with its variables as
/// [`reserved_layout`] places them, whatever the input section's size; under `-r` with
/// the input section (read off nvlink 13.5: sm_110's is 0xc0, the variable at 0x40, its
/// Mercury copy 0x80 at 0, whatever the number of inputs, under `-r` 0x80; ptxas gives
/// the 8-byte devtool variable a 0x10 section, nvlink's image 8 at sm_90, 0x48 at sm_100).
pub(super) fn reserved_piece(
    o: &mut OutSection,
    symbols: &[Symbol],
    (si, s): (usize, &Section),
    exec: bool,
) -> u64 {
    let base = symbols
        .iter()
        .find(|x| exec && x.name == ".nv.reservedSmem.offset0" && !x.defined())
        .map_or(0, |x| x.value);
    let at = base.next_multiple_of(s.align.max(1));
    let size = match reserved_layout(symbols, si) {
        (vars, end) if exec && !vars.is_empty() => end,
        _ => s.size,
    };
    o.mem_size = o.mem_size.max(at + size);
    at
}

/// The variables of the reserved shared section `si` in an image, each with its offset
/// from the input's piece: one after another in symbol order, each aligned as its input
/// value says (a common symbol's alignment); and where the last ends (nvlink 13.5's
/// sm_100 image of the devtool and resize variables: 0x40 and 0x48, the section 0x70).
pub(super) fn reserved_layout(symbols: &[Symbol], si: usize) -> (Vec<(usize, u64)>, u64) {
    let align = |x: &Symbol| x.value.clamp(1, 1 << 12);
    // (the strictest aligned first, ties in symbol order: sm_110a's tcgen05 code lists
    // `__nv_reservedSMEM_tcgen05_partition`, aligned 1, before the 16-aligned
    // `__nv_reservedSMEM_gb10b_war_var`, and nvlink puts the latter at 0x40, the former
    // at 0xc0; a unit without tcgen05 lists them the other way)
    let mut order: Vec<usize> = (symbols.iter().enumerate())
        .filter(|(_, x)| x.defined() && x.shndx as usize == si && x.ty != STT_SECTION)
        .map(|(i, _)| i)
        .collect();
    order.sort_by_key(|&i| std::cmp::Reverse(align(&symbols[i])));
    let mut end = 0u64;
    let mut vars = Vec::new();
    for i in order {
        let at = end.next_multiple_of(align(&symbols[i]));
        vars.push((i, at));
        end = at.saturating_add(symbols[i].size);
    }
    (vars, end)
}

/// A reserved shared variable's offset from its input's piece in an image.
pub(super) fn reserved_offset(symbols: &[Symbol], sym: usize) -> u64 {
    let si = symbols[sym].shndx as usize;
    reserved_layout(symbols, si)
        .0
        .into_iter()
        .find_map(|(i, at)| (i == sym).then_some(at))
        .unwrap_or(0)
}

/// The section type and flags a merged section gets: executable output turns the
/// memory-space types into plain program data.
fn out_type(s: &Section, exec: bool) -> (u32, u64) {
    if !exec {
        return (s.ty, s.flags);
    }
    let ty = match s.ty {
        SHT_CUDA_GLOBAL | SHT_CUDA_SHARED | SHT_CUDA_SHARED_RESERVED => SHT_NOBITS,
        SHT_CUDA_GLOBAL_INIT => SHT_PROGBITS,
        t if constant_bank(t).is_some() => SHT_PROGBITS,
        t => t,
    };
    (ty, s.flags)
}

/// The sections step's pruned sm_100+ debug pieces (`.debug_frame`, the line tables,
/// `.nv_debug_info_reg_sass`), by (input, section).
pub(super) type Frames = HashMap<SecKey, PrunedFrame>;

/// A debug piece with the entries of removed functions left out (or cleared).
pub(super) struct PrunedFrame {
    pub data: Vec<u8>,
    /// Kept ranges of the input piece: `(old start, old end, new start)`.
    pub map: Vec<(u64, u64, u64)>,
}

impl PrunedFrame {
    /// Where an input offset went (`None`: its entry was dropped).
    pub fn moved(&self, off: u64) -> Option<u64> {
        // (the kept ranges are in input order)
        let k = self.map.partition_point(|&(_, e, _)| e <= off);
        self.map
            .get(k)
            .filter(|&&(s, _, _)| s <= off)
            .map(|&(s, _, n)| n + (off - s))
    }
}

/// One `.debug_frame` entry: `(start, end, is a CIE)`; `None` when the section does not
/// parse as a sequence of CIEs and FDEs (it is then left whole).
fn frame_entries(d: &[u8]) -> Option<Vec<(usize, usize, bool)>> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < d.len() {
        let len32 = d.u32_at(at)?;
        let (len, id_at, id_len) = if len32 == 0xFFFF_FFFF {
            (usize::try_from(d.u64_at(at + 4)?).ok()?, at + 12, 8)
        } else {
            (len32 as usize, at + 4, 4)
        };
        // (an entry too short for its CIE id is not one: the section is left whole)
        if len < id_len {
            return None;
        }
        let end = id_at.checked_add(len).filter(|&e| e <= d.len())?;
        let cie = match id_len {
            8 => d.u64_at(id_at)? == u64::MAX,
            _ => d.u32_at(id_at)? == u32::MAX,
        };
        out.push((at, end, cie));
        at = end;
    }
    Some(out)
}

/// The most `__constant__` data an image holds (bank 3, `.nv.constant3`): 64 KiB.
const CONSTANT_DATA_MAX: u64 = 0x10000;

impl Merger<'_> {
    /// nvlink refuses an image whose `__constant__` variables take more than 64 KiB
    /// (exit 255, no output), whatever the target and mode (sweep 45's three 24,000-byte
    /// tables: `File uses too much global constant data (0x11940 bytes, 0x10000 max)`).
    /// Where kernels were removed (`-kernels-used`) nvlink first drops the variables only
    /// they read, and links when the rest fits; nvlinkrs does not drop variables, so it
    /// links such a program with them all (docs/rules/differences.md), but refuses it when
    /// the variables the kept code reads alone take more (an attacker's two 32 KiB tables
    /// and a byte, each read by a kept kernel: 0x10001 bytes, nvlink's figure too).
    /// Reads `out` and `code`; writes nothing but its error (to `diag`); the last thing
    /// `sections` does.
    fn constant_data_fits(&self) -> Result<()> {
        let mut size = (self.out.iter())
            .filter(|o| o.name == ".nv.constant3")
            .map(|o| o.size())
            .sum::<u64>();
        let removed_kernels = FuncId::all(self.code.funcs().len())
            .any(|f| self.code.funcs()[f].entry && !self.code.live()[f]);
        if size > CONSTANT_DATA_MAX && removed_kernels {
            size = self.constant_data_read();
        }
        if size <= CONSTANT_DATA_MAX {
            return Ok(());
        }
        self.diag().error(&format!(
            "File uses too much global constant data ({size:#x} bytes, {CONSTANT_DATA_MAX:#x} max)"
        ));
        Err(Error::error(""))
    }

    /// The `__constant__` data the kept code reads: the sizes of the variables the live
    /// functions' relocations name, each once (those only other data names are not
    /// counted: a figure at most nvlink's).
    fn constant_data_read(&self) -> u64 {
        let mut seen: HashSet<SymKey> = HashSet::default();
        let mut size = 0;
        for f in FuncId::all(self.code.funcs().len()).filter(|&f| self.code.live()[f]) {
            let i = self.code.funcs()[f].key.input;
            for &ri in &self.code.funcs()[f].relocs {
                for r in self.relocs(i, ri).unwrap_or_default() {
                    let k = SymKey::new(i, r.sym as usize);
                    if k.sym >= self.inputs()[i].cubin.symbols.len() {
                        continue;
                    }
                    let def = self.target(k).unwrap_or(k);
                    let s = self.sym(def);
                    let sections = &self.inputs()[def.input].cubin.sections;
                    let bank3 = (sections.get(s.shndx as usize))
                        .is_some_and(|x| constant_bank(x.ty) == Some(3));
                    if bank3 && s.ty != STT_SECTION && seen.insert(def) {
                        size += s.size;
                    }
                }
            }
        }
        size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_entries_parse_and_refuse_bad_lengths() {
        // a 64-bit CIE (length 0x0c) then a 32-bit FDE (length 8)
        let mut d = vec![0xFF; 4];
        d.extend_from_slice(&0x0Cu64.to_le_bytes());
        d.extend_from_slice(&u64::MAX.to_le_bytes());
        d.extend_from_slice(&[0; 4]);
        d.extend_from_slice(&8u32.to_le_bytes());
        d.extend_from_slice(&0u32.to_le_bytes());
        d.extend_from_slice(&[0; 4]);
        assert_eq!(
            frame_entries(&d),
            Some(vec![(0, 24, true), (24, 36, false)])
        );
        let mut bad = d.clone();
        bad[4] = 0xF0; // a length past the end
        assert_eq!(frame_entries(&bad), None);
        assert_eq!(frame_entries(&d[..30]), None);
        // a 64-bit entry whose length does not cover its CIE id
        let mut short = vec![0xFF; 4];
        short.extend_from_slice(&4u64.to_le_bytes());
        short.extend_from_slice(&[0; 12]);
        assert_eq!(frame_entries(&short), None);
    }
}
