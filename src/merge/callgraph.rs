//! Call graph: the `.nv.callgraph`, `.nv.prototype` and `.nv.rel.action` sections
//! (made before the symbols, which give them section symbols; filled once the symbols
//! are numbered) and `-dump-callgraph`.

use super::*;
use std::borrow::Cow;

/// The call-graph tables' output sections as `tables` makes them, empty; `callgraph`
/// takes them and fills them.
pub(super) struct TableSections {
    callgraph: usize,
    prototype: Option<usize>,
}

/// The call-graph step's product: its two tables' output sections, filled, and the
/// strings they refer to (the prototypes' leading strings), made by `callgraph` (so a
/// step that takes them runs after the tables are filled), placed by `strings_last`; the
/// Mercury step copies the references for its copies of the tables, the last step takes
/// the strings for the image.
pub(super) struct Tables {
    callgraph: usize,
    prototype: Option<usize>,
    /// Where the tables (and their Mercury copies) refer to a leading string: (section,
    /// byte offset, the string's position).
    patches: Vec<(usize, usize, usize)>,
    strings: Vec<String>,
}

impl Tables {
    /// The references of output section `from` again in its copy `to`, at the same
    /// offsets.
    pub(super) fn copy_references(&mut self, from: usize, to: usize) {
        let copies: Vec<_> = (self.patches.iter())
            .filter(|p| p.0 == from)
            .map(|p| (to, p.1, p.2))
            .collect();
        self.patches.extend(copies);
    }

    /// The leading strings, in the order `strings_last` placed them, for the image.
    pub(super) fn take_strings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.strings)
    }
}

impl<'a> Merger<'a> {
    /// The sections nvlink creates that carry a section symbol: `.nv.callgraph`,
    /// `.nv.prototype` (filled in later) and `.nv.rel.action`. Reads `code`, `res` and
    /// `externs` (whether a prototype entry stays); writes `out`; hands on the
    /// `TableSections`, which `callgraph` fills and `creation_order` takes (so it runs
    /// after, giving them their place; the symbols, which take its `Order`, give them
    /// section symbols).
    pub(super) fn tables(&mut self, externs: &super::externs::ExternRefs) -> TableSections {
        let mut t = TableSections {
            callgraph: 0,
            prototype: None,
        };
        let mut o = OutSection::new(".nv.callgraph", SHT_CUDA_CALLGRAPH, 0);
        o.align = 4;
        o.entsize = 8;
        o.link = Ref::Symtab;
        t.callgraph = self.new_section(o, true);
        if self.prototypes_needed(externs) {
            let mut o = OutSection::new(".nv.prototype", SHT_CUDA_PROTOTYPE, 0);
            o.align = 4;
            o.entsize = 8;
            o.link = Ref::Symtab;
            t.prototype = Some(self.new_section(o, true));
        }
        let sm = self.opts().target.map_or(0, |a| a.sm);
        if !self.opts().relocatable && sm < 100 {
            let mut o = OutSection::new(".nv.rel.action", SHT_CUDA_RELOCINFO, 0);
            o.align = 8;
            o.entsize = 8;
            o.data = vec![
                0x73, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x11, 0x25, 0, 0x05, 0x36,
            ];
            self.new_section(o, true);
        }
        t
    }

    /// Whether a `.nv.prototype` entry stays: its function is live and its address is
    /// not taken (those have their prototype in `.nv.callgraph`).
    /// A function no input defines (one the driver provides: malloc, vprintf, ...)
    /// keeps its entry while a live function's `EXTERNS` list names it.
    fn prototype_kept(&self, externs: &super::externs::ExternRefs, k: SymKey) -> bool {
        match self.func_of(k) {
            Some(f) => self.code.live()[f] && !self.code.address_taken().contains(&f),
            None => self.is_driver_function(externs, k),
        }
    }

    /// Whether some input's prototype table has an entry that stays (a libNVVM partial
    /// link's output has entries only for functions it defines, and nvlink keeps them;
    /// an entry for a function another input defines stays as that function would).
    fn prototypes_needed(&self, externs: &super::externs::ExternRefs) -> bool {
        (0..self.inputs().len()).any(|i| {
            let c = &self.inputs()[i].cubin;
            c.sections
                .iter()
                .filter(|s| s.ty == SHT_CUDA_PROTOTYPE)
                .any(|ps| {
                    c.bytes(ps).chunks_exact(8).any(|e| {
                        let sym = e.u32_at(0).unwrap_or(0) as usize;
                        sym < c.symbols.len() && self.prototype_kept(externs, SymKey::new(i, sym))
                    })
                })
        })
    }

    /// Fills the call-graph tables (`sections`, made by `tables`); hands them on with
    /// where they refer to the prototypes' strings (`Tables`). Reads `code`, `res`,
    /// `externs` and `symtab` (the entries' symbol indices); writes the tables' sections'
    /// bytes in `out`.
    pub(super) fn callgraph(
        &mut self,
        symtab: &SymbolTable,
        externs: &super::externs::ExternRefs,
        sections: TableSections,
    ) -> Result<Tables> {
        let mut t = Tables {
            callgraph: sections.callgraph,
            prototype: sections.prototype,
            patches: Vec::new(),
            strings: Vec::new(),
        };
        // (each group's entries in the order first seen, a string's offset filled in
        // once all are known)
        let mut groups: [Vec<(u32, i64)>; 5] = Default::default();
        // (strings by their position in `strings`)
        let mut seen: HashSet<(usize, usize, u32, i64)> = HashSet::default();
        // (a string entry's first input: one input's table may list a caller's prototype
        // once per call site, and nvlink keeps each; a later input's copy of a weak
        // caller adds none)
        let mut seen_string: HashMap<(usize, u32, usize), usize> = HashMap::default();
        let mut protos: BTreeSet<(u32, u32)> = BTreeSet::new();
        let mut strings: Vec<String> = Vec::new();
        let mut string_at: HashMap<Cow<'a, str>, usize> = HashMap::default();
        let mut intern = |s: Cow<'a, str>, strings: &mut Vec<String>| -> usize {
            if let Some(&n) = string_at.get(s.as_ref()) {
                return n;
            }
            strings.push(s.to_string());
            string_at.insert(s, strings.len() - 1);
            strings.len() - 1
        };
        let mut pending: Vec<(usize, usize, usize)> = Vec::new();
        // (the kernels of a system library, libcudadevrt: their entries come last in
        // their group; its callers of the call group keep their place)
        let mut system_callers: HashSet<u32> = HashSet::default();
        // (the input where each caller's name first comes, a reference included: nvlink
        // lists them by input)
        let mut first_input: HashMap<u32, usize> = HashMap::default();
        let mut pending_proto: Vec<(u32, usize)> = Vec::new();
        let inputs: &'a [Input] = self.inputs();
        for (i, inp) in inputs.iter().enumerate() {
            let c = &inp.cubin;
            let strtab = c.strtab();
            let string = |off: i64| crate::elf::cubin::string_at(strtab, off);
            let scope = if self.opts().relocatable { 0 } else { i };
            for (a, b, group) in c.callgraph_entries()? {
                let ka = SymKey::new(i, a as usize);
                // (below sm_100 nvlink's .strtab keeps every prototype string of the
                // inputs, those of removed functions included, in the order it reads
                // them; the sm_100+ one only those the tables refer to)
                if let (2 | 3, Some(s), false) = (group, string(b), self.mercury_layout()) {
                    intern(s, &mut strings);
                }
                // (a weak function a later input's copy replaced keeps its calls
                // beside the kept copy's, one a copy before it replaced none: read off
                // nvlink 13.5 with an inline function two `-G` units define, each
                // calling its own local `__popcll`; see `calls_kept`)
                if self.symbol_is_dead(ka) || !self.calls_kept(ka) {
                    continue;
                }
                let Some(oa) = self.out_index(symtab, ka) else {
                    continue;
                };
                // (libnvJitLink lists them by input, libNVVM's output after the other
                // inputs: libcudadevrt's kernels before an LTO program's)
                if group == 2 && self.inputs()[i].cudadevrt && !self.opts().jit_note {
                    system_callers.insert(oa as u32 + 1);
                }
                first_input.entry(oa as u32 + 1).or_insert_with(|| {
                    (self.global_id(ka)).map_or(i, |g| self.res().globals()[g].first.input)
                });
                match group {
                    1 | 4 => {
                        let Some(kb) = usize::try_from(b).ok().map(|b| SymKey::new(i, b)) else {
                            continue;
                        };
                        if kb.sym >= c.symbols.len() || self.symbol_is_dead(kb) {
                            continue;
                        }
                        // (each input's entries once: in an image two copies of a
                        // function that both call `malloc` list it twice, not under -r)
                        if let Some(ob) = self.out_index(symtab, kb)
                            && seen.insert((group, scope, oa as u32 + 1, ob as i64 + 1))
                        {
                            groups[group].push((oa as u32 + 1, ob as i64 + 1));
                        }
                    }
                    2 | 3 => {
                        if let Some(s) = string(b) {
                            let s = intern(s, &mut strings);
                            if *seen_string.entry((group, oa as u32 + 1, s)).or_insert(i) == i {
                                pending.push((group, groups[group].len(), s));
                                groups[group].push((oa as u32 + 1, 0));
                            }
                        } else if seen.insert((group, scope, oa as u32 + 1, b)) {
                            groups[group].push((oa as u32 + 1, b));
                        }
                    }
                    _ => {}
                }
            }
            if let Some(ps) = c.sections.iter().find(|s| s.ty == SHT_CUDA_PROTOTYPE) {
                for e in c.bytes(ps).chunks_exact(8) {
                    let sym = e.u32_at(0).unwrap_or(0) as usize;
                    let off = e.u32_at(4).unwrap_or(0) as i64;
                    if let (Some(s), false) = (string(off), self.mercury_layout()) {
                        intern(s, &mut strings);
                    }
                    if sym >= c.symbols.len() || !self.prototype_kept(externs, SymKey::new(i, sym))
                    {
                        continue;
                    }
                    if let (Some(o), Some(s)) =
                        (self.out_index(symtab, SymKey::new(i, sym)), string(off))
                    {
                        let s = intern(s, &mut strings);
                        pending_proto.push((o as u32 + 1, s));
                    }
                }
            }
        }
        let offset_of = crate::elf::write::leading_offsets(&strings);
        let offsets: Vec<u32> = strings.iter().map(|s| offset_of[s]).collect();
        // (where each string's offset is written, for the sm_100+ layout, whose .strtab
        // puts the strings last: `finish` writes their final offsets there)
        let index: HashMap<u32, usize> = strings
            .iter()
            .enumerate()
            .map(|(n, s)| (offset_of[s], n))
            .collect();
        let mut is_string: HashSet<(usize, u32, i64)> = HashSet::default();
        for (g, at, s) in pending {
            groups[g][at].1 = offsets[s] as i64;
            is_string.insert((g, groups[g][at].0, offsets[s] as i64));
        }
        for (a, s) in pending_proto {
            protos.insert((a, offsets[s]));
        }
        t.strings = strings;
        let order = Order {
            system_callers: &system_callers,
            first_input: &first_input,
            is_string: &is_string,
            index: &index,
        };
        self.write_callgraph(&mut t, &groups, &protos, &order);
        Ok(t)
    }

    /// The call graph's groups and the prototypes as the image holds them: each group
    /// behind its marker in nvlink's entry order, strings' offsets noted for `strings_last`.
    fn write_callgraph(
        &mut self,
        t: &mut Tables,
        groups: &[Vec<(u32, i64)>; 5],
        protos: &BTreeSet<(u32, u32)>,
        order: &Order<'_>,
    ) {
        let mut data = Vec::new();
        for (g, group) in groups.iter().enumerate().skip(1) {
            data.extend_from_slice(&0u32.to_le_bytes());
            data.extend_from_slice(&(-(g as i32)).to_le_bytes());
            let first = |a: u32| order.first_input.get(&a).copied().unwrap_or(0);
            for (a, b) in nvlink_entry_order(group, order.system_callers, first) {
                data.extend_from_slice(&a.to_le_bytes());
                if order.is_string.contains(&(g, a, b)) {
                    let n = order.index[&(b as u32)];
                    t.patches.push((t.callgraph, data.len(), n));
                }
                data.extend_from_slice(&(b as i32).to_le_bytes());
            }
        }
        self.out[t.callgraph].data = data;
        if let Some(p) = t.prototype {
            for &(a, b) in protos {
                self.out[p].data.extend_from_slice(&a.to_le_bytes());
                let at = self.out[p].data.len();
                t.patches.push((p, at, order.index[&b]));
                self.out[p].data.extend_from_slice(&b.to_le_bytes());
            }
        }
    }

    /// nvlink's sm_100+ `.strtab` lists the symbols' names, then the Mercury symbols'
    /// new ones, then the prototype strings in the order the tables refer to them: their
    /// offsets there, written where the
    /// call graph and prototype tables (and their Mercury copies) refer to them.
    pub(super) fn strings_last(
        &mut self,
        symtab: &SymbolTable,
        t: &mut Tables,
        merc_symbols: Option<&mercury::MercSymbols>,
    ) {
        let mut at: HashMap<&str, u32> = HashMap::default();
        let mut len = 1u32;
        let merc = merc_symbols.iter().flat_map(|(_, m)| m);
        for name in (symtab.symbols().iter().chain(merc)).map(|s| s.name.as_str()) {
            if !name.is_empty() && !at.contains_key(name) {
                at.insert(name, len);
                len += name.len() as u32 + 1;
            }
        }
        // (in the order the tables refer to them, callers by symbol index)
        let mut order: Vec<usize> = Vec::new();
        let mut placed = vec![false; t.strings.len()];
        let firsts = t.patches.iter().map(|p| p.2);
        for n in firsts.chain(0..t.strings.len()) {
            if !std::mem::replace(&mut placed[n], true) {
                order.push(n);
            }
        }
        let mut offset = vec![0u32; t.strings.len()];
        for &n in order.iter().filter(|&&n| !t.strings[n].is_empty()) {
            let s = t.strings[n].as_str();
            offset[n] = *at.entry(s).or_insert_with(|| {
                let o = len;
                len += s.len() as u32 + 1;
                o
            });
        }
        for &(sec, pos, n) in &t.patches {
            if let Some(b) = self.out[sec].data.get_mut(pos..pos + 4) {
                b.copy_from_slice(&offset[n].to_le_bytes());
            }
        }
        let mut strings: Vec<Option<String>> = std::mem::take(&mut t.strings)
            .into_iter()
            .map(Some)
            .collect();
        t.strings = order.iter().filter_map(|&n| strings[n].take()).collect();
    }

    /// `-dump-callgraph` as nvlink prints it (both spellings print demangled names): the
    /// nodes of [`Self::call_lists`], a removed or undefined function's as its number
    /// alone (a function no input defines that a live `EXTERNS` list names as `N: name ->`),
    /// a function's calls last added first; `^` marks kernels and `&` functions whose
    /// address is taken. Then the register propagation lines. Reads `code`, `res` and
    /// `externs` (the driver's functions a live list names); writes nothing (it prints).
    pub(super) fn dump_callgraph(&self, externs: &super::externs::ExternRefs) -> Result<()> {
        use crate::demangle::demangle;
        let cl = self.call_lists()?;
        let mut lines = vec![String::new(); cl.nodes];
        for (f, func) in FuncId::all(self.code.funcs().len()).zip(self.code.funcs()) {
            if !self.code.live()[f] {
                continue;
            }
            // (a kernel whose address is taken, one launched from the device, is `^&`)
            let marks = format!(
                "{}{}",
                if func.entry { "^" } else { "" },
                if self.code.address_taken().contains(&f) {
                    "&"
                } else {
                    ""
                }
            );
            let text: String = cl.calls[f].iter().rev().map(|n| format!(" {n}")).collect();
            lines[cl.node[f] - 1] = format!(
                "{marks}{} [{}] ->{text}",
                demangle(&self.sym(func.key).name),
                func.regs
            );
        }
        // (a function no input defines shows its name while a live function's EXTERNS
        // list names it: the driver's)
        for (g, global) in self.res().globals().iter().enumerate() {
            if global.def.is_none()
                && cl.of_global[g] > 0
                && self.is_driver_function(externs, global.first)
            {
                lines[cl.of_global[g] - 1] = format!("{} ->", demangle(global.name));
            }
        }
        // (nvlink names the architecture without its `a`/`f` variant: `sm_100` for sm_100a)
        let target = (self.opts().target)
            .map(|a| crate::arch::Arch::plain(a.sm).to_string())
            .unwrap_or_default();
        let mut text = format!(
            "callgraph for {target}:\n# A: s -> B // s (number A) potentially calls B\n# s [N]     // s uses N registers\n# ^s        // s is entry point\n# &s        // s has address taken\n"
        );
        for (n, line) in lines.iter().enumerate() {
            text += &format!("{}: {line}\n", n + 1);
        }
        for (e, f, regs) in self.register_propagation(&cl) {
            text += &format!(
                "regcount {regs} for {} propagated to entry {}\n",
                demangle(&self.sym(self.code.funcs()[f].key).name),
                demangle(&self.sym(self.code.funcs()[e].key).name)
            );
        }
        crate::diag::to_stderr(&text);
        Ok(())
    }
}

/// What orders the call graph's entries and marks its strings (`callgraph`).
struct Order<'o> {
    /// libcudadevrt's callers: last in their group.
    system_callers: &'o HashSet<u32>,
    /// The input where each caller's name first comes.
    first_input: &'o HashMap<u32, usize>,
    /// (group, caller, value) entries whose value is a string's offset.
    is_string: &'o HashSet<(usize, u32, i64)>,
    /// A string's offset to its position among the leading strings.
    index: &'o HashMap<u32, usize>,
}

/// A call-graph group's entries as nvlink writes them: callers by the input where their
/// name first comes (`first`: a definition or a reference), then by symbol index (a
/// second unit's static function after the first unit's global ones and the functions
/// it calls, a weak function after its first copy's unit's; those in `system` after the others:
/// libcudadevrt's static kernels, whose indices are low, after the program's kernels),
/// each caller's entries last seen first (inputs in order, each input's table in
/// order) (read off nvlink 13.5: a kernel calling `d1`, `d2`, `d3`, `u1` in its input's
/// table lists `u1`, `d3`, `d2`, `d1`).
fn nvlink_entry_order(
    entries: &[(u32, i64)],
    system: &HashSet<u32>,
    first: impl Fn(u32) -> usize,
) -> Vec<(u32, i64)> {
    let mut callers: Vec<u32> = Vec::new();
    let mut of: HashMap<u32, Vec<i64>> = HashMap::default();
    for &(a, b) in entries {
        of.entry(a)
            .or_insert_with(|| {
                callers.push(a);
                Vec::new()
            })
            .push(b);
    }
    callers.sort_by_cached_key(|a| (system.contains(a), first(*a), *a));
    callers
        .iter()
        .flat_map(|a| of[a].iter().rev().map(move |&b| (*a, b)))
        .collect()
}
