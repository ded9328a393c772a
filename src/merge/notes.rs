//! Notes and finish: the `.note.nv.tkinfo` (the linker's own entry first) and
//! `.note.nv.cuinfo` notes and `.nv.compat` for the target; then the kept relocation
//! sections, the sections in their final order and the image handed to the writer.

use super::*;

/// The toolkit version nvlink writes in its notes (13.5).
const TOOLKIT_VERSION: u32 = 135;

/// The notes step's product: whether it made `.nv.compat` (the creation order lists it
/// only then). Taken by `sections`, whose sections come after the notes in `out`, and
/// by `creation_order`.
pub(super) struct Notes {
    compat: bool,
}

impl Notes {
    /// Whether the image has `.nv.compat`.
    pub(super) fn has_compat(&self) -> bool {
        self.compat
    }
}

impl<'a> Merger<'a> {
    /// The notes (`.note.nv.tkinfo`, `.note.nv.cuinfo`) and `.nv.compat`. Reads the
    /// inputs' notes, `opts` and `code` (what is live); writes `out` (the first sections
    /// made: their place in the image is their rank and creation rank, `finish`'s
    /// `final_order`); hands on `Notes` (whether `.nv.compat` was made).
    pub(super) fn notes(&mut self) -> Notes {
        let mut made = Notes { compat: false };
        let mut tk = match self.opts().jit_note {
            // (libnvJitLink's words: an image made in memory, by its API)
            true => tool_note(
                "in-memory-ELF-image",
                "nvJIT API",
                crate::elf::tkinfo::JIT_BRANCH,
                "JIT API Command Line Options",
            ),
            false => tool_note(
                self.opts().note_output.as_deref().unwrap_or(""),
                self.opts().tool_name.as_deref().unwrap_or("nvlink"),
                "Build cuda_13.5.r13.5/compiler.39125733_0",
                &self.opts().note_command_line,
            ),
        };
        let mut cuinfo: Option<(Vec<u8>, u64, u32)> = None;
        for inp in self.inputs() {
            let c = &inp.cubin;
            for s in &c.sections {
                // (a relocatable output's note holds the linker's entry alone)
                if s.name == ".note.nv.tkinfo" && !self.opts().relocatable {
                    tk.extend_from_slice(c.bytes(s));
                } else if s.name == ".note.nv.cuinfo" {
                    // the note with the lowest virtual architecture (a PTX input for
                    // compute_90 linked for sm_120 gives 90), the first of equals
                    let vsm = |d: &[u8]| d.u16_at(26).unwrap_or(u16::MAX);
                    let d = c.bytes(s);
                    if cuinfo
                        .as_ref()
                        .is_none_or(|(best, _, _)| vsm(d) < vsm(best))
                    {
                        cuinfo = Some((d.to_vec(), s.flags, s.info));
                    }
                }
            }
        }
        let mut t = OutSection::new(".note.nv.tkinfo", SHT_NOTE, 0x200_0000);
        t.align = 4;
        t.data = tk;
        let tid = self.new_section(t, true);
        if let (None, true, Some(target)) = (&cuinfo, self.inputs().is_empty(), self.opts().target)
        {
            // no input (none had code for the target): nvlink's own note, version 2,
            // the target SM and the toolkit version (13.5)
            let mut d = Vec::new();
            for v in [12u32, 8, 1000] {
                d.extend_from_slice(&v.to_le_bytes());
            }
            d.extend_from_slice(b"NVIDIA Corp\0");
            d.extend_from_slice(&2u16.to_le_bytes());
            d.extend_from_slice(&(target.sm as u16).to_le_bytes());
            d.extend_from_slice(&TOOLKIT_VERSION.to_le_bytes());
            cuinfo = Some((d, 0x100_0000, 0));
        }
        let cuinfo_id = cuinfo.map(|(d, flags, info)| {
            let mut c = OutSection::new(".note.nv.cuinfo", SHT_NOTE, flags);
            c.align = 4;
            c.link = Ref::Section(tid);
            c.info = Ref::Raw(info);
            c.data = d;
            self.new_section(c, true)
        });
        if let (None, Some(target)) = (self.inputs().first(), self.opts().target)
            && let Some(data) = compat::empty(target)
        {
            // no input: nvlink's own `.nv.compat` for the target, named by the note
            let mut o = OutSection::new(".nv.compat", SHT_CUDA_COMPAT, 0);
            o.align = 4;
            o.data = data;
            let compat = self.new_section(o, false);
            made.compat = true;
            if let Some(n) = cuinfo_id {
                self.out[n].flags = 0x100_0040;
                self.out[n].info = Ref::Section(compat);
            }
        }
        if let Some(inp) = self.inputs().first() {
            let c = &inp.cubin;
            if let Some(s) = c.sections.iter().find(|s| s.ty == SHT_CUDA_COMPAT) {
                let mut o = OutSection::new(".nv.compat", SHT_CUDA_COMPAT, 0);
                o.align = 4;
                o.data = c.bytes(s).to_vec();
                if let Some(target) = self.opts().target
                    && info::parse(&o.data, &c.origin, &s.name, s.offset).is_ok()
                {
                    // every merged input's records
                    let all: Vec<Vec<Record>> = self
                        .inputs()
                        .iter()
                        .map(|inp| {
                            let c = &inp.cubin;
                            c.sections
                                .iter()
                                .find(|s| s.ty == SHT_CUDA_COMPAT)
                                .and_then(|s| {
                                    info::parse(c.bytes(s), &c.origin, &s.name, s.offset).ok()
                                })
                                .unwrap_or_default()
                        })
                        .collect();
                    // (whether each input has code the image keeps)
                    let mut code = vec![false; self.inputs().len()];
                    for (f, func) in self.code.funcs().iter().enumerate() {
                        code[func.key.input] |= self.code.live()[f];
                    }
                    let recs = compat::merged(&all, &code, (c.e_flags >> 8) & 0xFF, target);
                    o.data = info::encode_all(&recs);
                }
                let compat = self.new_section(o, false);
                made.compat = true;
                // the note's sh_info names `.nv.compat`
                if let Some(n) = cuinfo_id {
                    self.out[n].info = Ref::Section(compat);
                }
            }
        }
        made
    }

    /// The output sections in the image's order: by rank, then in nvlink's creation order
    /// within a rank (each rank worked out once; within a rank the memory-only sections
    /// in the order nvlink makes them, `memorder.rs`, the others in its creation order,
    /// `creation.rs`).
    fn final_order(&self, placement: &Placement, creation: &creation::Order) -> Vec<usize> {
        let memory = self.memory_order(placement);
        let mut keys: Vec<Key> = (0..self.out.len())
            .map(|i| {
                let r = crate::elf::write::rank(&self.out[i], self.mercury_layout());
                (r, self.creation_rank_of(creation, i), memory[i])
            })
            .collect();
        self.loaded_mercury_as_their_twins(&mut keys);
        let mut order: Vec<usize> = (0..self.out.len()).collect();
        order.sort_by_key(|&i| keys[i]);
        order
    }

    /// The places in the final order of the Mercury copies of loaded data (initialised
    /// data, `.nv.global`, reserved shared memory: writable, allocated) go to them in
    /// their SASS twins' order, as nvlink lays them out: at sm_110a with the device
    /// runtime, libcudadevrt's `.nv.merc.nv.global.init` before the first unit's
    /// `.nv.merc.nv.shared.reserved.0` (made first), as on the SASS side (new-user review
    /// of 2026-12-01). The others keep their keys.
    fn loaded_mercury_as_their_twins(&self, keys: &mut [Key]) {
        let loaded: Vec<(usize, &str)> = (self.out.iter().enumerate())
            .filter(|(_, s)| s.flags & SHF_ALLOC != 0 && s.flags & SHF_WRITE != 0)
            .filter_map(|(i, s)| Some((i, mercury::stripped(&s.name)?)))
            .collect();
        if loaded.len() < 2 {
            return;
        }
        // (each name's first section: a Mercury name never is a SASS one)
        let mut by_name: HashMap<&str, usize> = HashMap::default();
        for (i, s) in self.out.iter().enumerate().rev() {
            by_name.insert(s.name.as_str(), i);
        }
        let group: Vec<(usize, usize)> = (loaded.into_iter())
            .filter_map(|(i, name)| Some((i, *by_name.get(name)?)))
            .collect();
        let mut slots: Vec<Key> = group.iter().map(|&(i, _)| keys[i]).collect();
        slots.sort_unstable();
        let mut by_twin = group.clone();
        by_twin.sort_by_key(|&(_, t)| keys[t]);
        for ((i, _), slot) in by_twin.into_iter().zip(slots) {
            keys[i] = slot;
        }
    }

    /// The kept relocation lists (the relocations and Mercury steps') made sections,
    /// named as nvlink names them (`order`: the names the inputs' relocation sections
    /// had).
    fn kept_sections(&mut self, kept: Vec<relocations::KeptList>, order: &creation::Order) {
        for (out_id, list, data) in kept {
            let (prefix, ty, entsize) = match list {
                RelocList::Rel => (".rel", SHT_REL, 16),
                RelocList::Rela => (".rela", SHT_RELA, 24),
                RelocList::Resolved => (".nv.resolvedrela", SHT_CUDA_RESOLVED_RELA, 24),
            };
            // (the name an input's relocation section has, shared, when one has it)
            let name = creation::joined(prefix, &self.out[out_id].name, |n| order.name(n))
                .unwrap_or_else(|| creation::concat(prefix, &self.out[out_id].name));
            let mut o = OutSection::new(name, ty, SHF_INFO_LINK);
            o.align = 8;
            o.entsize = entsize;
            o.link = Ref::Symtab;
            o.info = Ref::Section(out_id);
            o.data = data;
            self.new_section(o, false);
        }
    }

    /// The image handed to the writer: the kept relocation lists (`kept`, the
    /// relocations and Mercury steps') made sections, every section in nvlink's final
    /// order, the symbol table and the Mercury one (`merc_symbols`) renumbered to it; the
    /// prototypes' strings (`tables`) placed. Reads `placement` (where each function's
    /// code and the memory-only sections' pieces went), `layout` and `banks` (the null
    /// symbol's value), `order` (the creation order), `code` (each function's code
    /// section, whose `sh_info` names its symbol) and `res` (the globals nvlink creates);
    /// takes `out`, `symtab`, `tables` and `order`'s list of names; the last step.
    #[allow(clippy::too_many_arguments)] // (the spine hands each product by name)
    pub(super) fn finish(
        &mut self,
        placement: &Placement,
        layout: &SharedLayout,
        mut symtab: SymbolTable,
        kept: Vec<relocations::KeptList>,
        merc_symbols: Option<mercury::MercSymbols>,
        mut tables: callgraph::Tables,
        order: &mut creation::Order,
        banks: &bank2::Bank2,
    ) -> Image {
        let exec = !self.opts().relocatable;
        if self.mercury_layout() {
            self.strings_last(&symtab, &mut tables, merc_symbols.as_ref()); // (callgraph.rs)
        }
        self.kept_sections(kept, order);
        // final order
        // (by rank, then in nvlink's creation order within a rank)
        let mut created = order.take_created();
        created.retain(|c| !creation::is_copy_name(&c.0));
        let placed = self.final_order(placement, order);
        let mut new_index = vec![0usize; self.out.len()];
        for (n, &i) in placed.iter().enumerate() {
            new_index[i] = n;
        }
        let fix = |r: Ref| match r {
            Ref::Section(i) => Ref::Section(new_index[i]),
            r => r,
        };
        let merc_symbols = merc_symbols.map(|(at, syms)| {
            let syms = syms
                .into_iter()
                .map(|mut s| {
                    s.section = s.section.map(|i| new_index[i]);
                    s
                })
                .collect::<Vec<_>>();
            (new_index[at], syms)
        });
        // moved, not copied: the sections hold the whole image
        let mut unplaced: Vec<Option<OutSection>> =
            self.out.take_sections().into_iter().map(Some).collect();
        let sections: Vec<OutSection> = placed
            .iter()
            .map(|&i| {
                let mut s = unplaced[i].take().expect("each section placed once");
                s.link = fix(s.link);
                s.info = fix(s.info);
                s.alias = s.alias.map(|a| new_index[a]);
                for p in &mut s.patches {
                    p.1 = fix(p.1);
                }
                s
            })
            .collect();
        let listed: HashSet<&str> = (symtab.symbols().iter()).map(|s| s.name.as_str()).collect();
        let created_globals = match self.mercury_layout() {
            true => Vec::new(),
            false => self.created_globals(&listed),
        };
        let created_strtab = match self.mercury_layout() {
            true => Vec::new(),
            false => creation::created_strtab(&created, &listed),
        };
        drop(listed);
        let symbols: Vec<OutSymbol> = (symtab.take_symbols().into_iter())
            .map(|mut s| {
                s.section = s.section.map(|i| new_index[i]);
                s
            })
            .collect();
        // the text section's sh_info names its function symbol
        let mut sections = sections;
        for (k, f_idx) in symtab.mapped() {
            if let Some(f) = self.func_defined_by(k) {
                let i = self.code.funcs()[f].key.input;
                if let Some(&(t, _)) = placement.of(&SecKey::new(i, self.code.funcs()[f].text)) {
                    let s = &mut sections[new_index[t]];
                    let regs_top = s_info_top(&self.inputs()[i].cubin, self.code.funcs()[f].text);
                    s.info = Ref::Raw((f_idx as u32 + 1) | regs_top);
                }
            }
        }
        // without inputs (none had code for the target), nvlink's defaults: the CUDA
        // OS/ABI, ABI version 8, flags 0x05000004 around the SM (0x05000002 from sm_100)
        let no_input_flags = match self.mercury_layout() {
            true => 0x0500_0002,
            false => 0x0500_0004,
        };
        let (first_flags, osabi, abi_version) = self
            .inputs()
            .first()
            .map_or((no_input_flags, 0x41, 8), |i| {
                (i.cubin.e_flags, i.cubin.osabi, i.cubin.abi_version)
            });
        // the debug byte: the highest among the inputs, plus one for each input with
        // debug information (above 0x06: -lineinfo 0x09, -G 0x0E, ...) past the first
        // (one more where -G code, 0x0E, meets -lineinfo code that names inlined
        // functions, 0x0A: 16 sm_90 links of 0x09, 0x0A and 0x0E units, nvlink 13.5)
        let levels = self.inputs().iter().map(|i| i.cubin.e_flags >> 24);
        let with_debug = levels.clone().filter(|&l| l > 6).count() as u32;
        let highest = levels.clone().max().unwrap_or(first_flags >> 24);
        let inlined_beside_g = highest >= 0x0E && levels.clone().any(|l| l == 0x0A);
        let debug = highest + with_debug.saturating_sub(1) + inlined_beside_g as u32;
        Image {
            e_type: if exec { 2 } else { 1 },
            e_flags: (first_flags & 0x00FF_00FF)
                | (debug << 24)
                | (self
                    .opts()
                    .target
                    .map_or((first_flags >> 8) & 0xFF, |t| t.sm)
                    << 8),
            osabi,
            abi_version,
            sections,
            symbols,
            leading_strings: tables.take_strings(),
            created_sections: match self.mercury_layout() {
                true => Vec::new(),
                false => created
                    .into_iter()
                    .filter(|c| c.1.is_none())
                    .map(|c| c.0)
                    .collect(),
            },
            created_strtab,
            created_globals,
            symbol_names_only: self.mercury_layout(),
            program_headers: exec,
            mercury_layout: self.mercury_layout(),
            merc_symbols,
            null_symbol_value: (banks.null_symbol_value()).unwrap_or(layout.null_symbol_value()),
        }
    }
}

/// The register count ptxas keeps in the top byte of a code section's `sh_info` (sm_75
/// to sm_89).
fn s_info_top(c: &Cubin, text: usize) -> u32 {
    c.sections.get(text).map_or(0, |s| s.info & 0xFF00_0000)
}

fn tool_note(output: &str, tool_name: &str, branch: &str, command_line: &str) -> Vec<u8> {
    crate::elf::tkinfo::build(output, tool_name, VERSION, branch, command_line)
}

/// The release every 13.5 tool's note names.
const VERSION: &str = "Cuda compilation tools, release 13.5, V13.5.37";

/// A section's key in the final order: its kind's rank, its place in nvlink's creation
/// order, its place in nvlink's memory order (`memorder.rs`).
type Key = (u8, usize, Option<super::memorder::MemoryKey>);
