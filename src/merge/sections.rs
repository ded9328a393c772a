//! Sections: the inputs' sections placed in the output, a function's own sections one to
//! one (those of removed functions dropped), sections sharing a name concatenated as
//! pieces in input order, aligned as each asks.

use super::*;

impl<'a> Merger<'a> {
    /// The function an input section belongs to (its code, info, parameter bank,
    /// relocations), if any.
    fn owner(&self, i: usize, sec: usize) -> Option<usize> {
        let c = &self.inputs[i].cubin;
        let s = c.sections.get(sec)?;
        if let Some(&f) = self.func_of_text.get(&(i, sec)) {
            return Some(f);
        }
        if s.flags & SHF_EXECINSTR != 0 && s.name.starts_with(".text.") {
            return None; // code of a discarded definition
        }
        if s.flags & SHF_INFO_LINK != 0 || matches!(s.ty, SHT_RELA | SHT_REL) {
            return self.func_of_text.get(&(i, s.info as usize)).copied();
        }
        None
    }

    pub(super) fn is_dropped_function_section(&self, i: usize, sec: usize) -> bool {
        let c = &self.inputs[i].cubin;
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
                .func_of_text
                .get(&(i, sec))
                .is_none_or(|&f| !self.live[f]);
        }
        if (s.flags & SHF_INFO_LINK != 0 || matches!(s.ty, SHT_RELA | SHT_REL))
            && code_of(s.info as usize)
        {
            return self
                .func_of_text
                .get(&(i, s.info as usize))
                .is_none_or(|&f| !self.live[f]);
        }
        false
    }

    pub(super) fn sections(&mut self) -> Result<()> {
        let exec = !self.opts.relocatable;
        for i in 0..self.inputs.len() {
            let c = &self.inputs[i].cubin;
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
                    || s.name.starts_with(".nv.merc.")
                    || s.name.starts_with(".nv.capmerc.");
                if skip || self.is_dropped_function_section(i, si) {
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
                    let id = self.new_section(o, has_symbol.contains(&si));
                    self.placed.insert((i, si), (id, 0));
                    continue;
                }
                let key = (s.name.as_str(), s.ty);
                let id = match self.by_name.get(&key) {
                    Some(&id) => id,
                    None => {
                        let mut o = OutSection::new(&s.name, ty, flags);
                        o.entsize = s.entsize;
                        let id = self.new_section(o, false);
                        self.by_name.insert(key, id);
                        id
                    }
                };
                if has_symbol.contains(&si) {
                    self.section_symbol[id] = true;
                }
                let o = &mut self.out[id];
                o.align = o.align.max(s.align.max(1));
                let a = s.align.max(1);
                // sm_100+: without the entries (line sequences) of removed functions
                let frame = match s.name.as_str() {
                    _ if !self.mercury_layout => None,
                    ".debug_frame" => {
                        let base = (o.data.len() as u64).next_multiple_of(a);
                        self.pruned_frame(i, si, base)
                    }
                    ".debug_line" | ".nv_debug_line_sass" => self.pruned_lines(i, si),
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
                            self.frames.insert((i, si), f);
                        }
                        None => o.data.extend_from_slice(c.bytes(s)),
                    }
                    o.mem_size = o.data.len() as u64;
                    at
                } else {
                    let at = o.mem_size.next_multiple_of(a);
                    o.mem_size = at + s.size;
                    at
                };
                self.placed.insert((i, si), (id, at));
            }
        }
        // text and per-function sections point at their function's code
        for i in 0..self.inputs.len() {
            let c = &self.inputs[i].cubin;
            for (si, s) in c.sections.iter().enumerate() {
                let Some(&(id, _)) = self.placed.get(&(i, si)) else {
                    continue;
                };
                if s.info != 0
                    && s.flags & SHF_INFO_LINK != 0
                    && let Some(&(t, _)) = self.placed.get(&(i, s.info as usize))
                {
                    self.out[id].info = Ref::Section(t);
                }
            }
        }
        Ok(())
    }
}

/// The section type and flags a merged section gets: executable output turns the
/// memory-space types into plain program data.
fn out_type(s: &Section, exec: bool) -> (u32, u64) {
    if !exec {
        return (s.ty, s.flags);
    }
    let ty = match s.ty {
        SHT_CUDA_GLOBAL | SHT_CUDA_SHARED => SHT_NOBITS,
        SHT_CUDA_GLOBAL_INIT => SHT_PROGBITS,
        t if constant_bank(t).is_some() => SHT_PROGBITS,
        t => t,
    };
    (ty, s.flags)
}
