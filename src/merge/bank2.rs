//! Constant bank 2 of device functions merged into the banks of the kernels that call
//! them. ptxas puts a function's compiler constants (a dense `switch`'s jump table, a
//! 64-bit immediate moved out of the code: its `<fn>.const_opt.N.M` objects) in
//! `.nv.constant2.<fn>`, and the driver loads only a kernel's own `.nv.constant2.<k>`.
//! So, as nvlink 13.5 does (read off its images, `tests/fixtures/merge/sw*.cu`): every
//! function with bank-2 data gets one offset, the same in the bank of every kernel whose
//! call tree holds it, and each kernel's bank holds the data of its whole tree:
//! 1. a kernel's own data at 0;
//! 2. the other functions in reverse order of their code's section symbols (inputs last
//!    to first, each input's last to first), each at the end of the furthest bank among those of the
//!    kernels that reach it, aligned as the piece and those banks so far ask (which
//!    they all are from then on); nothing goes into a gap;
//! 3. a kernel without data of its own gets its `.nv.constant2.<k>` section when the first
//!    function it reaches is placed, after `.nv.prototype` in nvlink's creation order
//!    (the kernels of one function last to first).
//!
//! The gaps a kernel's bank spans but does not use are zeros, and it ends aligned as its
//! strictest piece. A function no live kernel
//! reaches keeps no bank-2 data. Relocations against a function's bank (its `.const_opt`
//! objects) resolve to the function's offset plus theirs (`Merger::link_value` through
//! the `Placement`). `-r` links keep each function's section as it is.

use super::*;

/// The step's product: where each function's bank-2 data went (fields written by this
/// step alone; the later steps, handed it, read them through the accessors below).
#[derive(Default)]
pub(super) struct Bank2 {
    /// The kernels' banks this step made (kernels without data of their own), in
    /// nvlink's creation order: their output section ids.
    made: Vec<usize>,
    /// Every kernel bank, in nvlink's order of them.
    banks: Vec<KernelBank>,
    /// Where the last replaced copy's data placed went: nvlink writes it into the null
    /// symbol's value (the copy's section has no symbol of its own in the image).
    null_symbol_value: Option<u64>,
    /// Each kept function's bank-2 section with those of the copies replaced that went
    /// after it (`replaced_copies_bank2`).
    replaced_copies: Vec<(SecKey, Vec<SecKey>)>,
}

impl Bank2 {
    /// The kernels' banks this step made, in nvlink's creation order (`creation.rs`).
    pub(super) fn made(&self) -> &[usize] {
        &self.made
    }

    /// The null symbol's value, when a replaced copy's bank-2 data was placed.
    pub(super) fn null_symbol_value(&self) -> Option<u64> {
        self.null_symbol_value
    }

    /// Each kept function's bank-2 section with the replaced copies' after it (the
    /// Mercury relocations' order).
    pub(super) fn replaced_copies(&self) -> &[(SecKey, Vec<SecKey>)] {
        &self.replaced_copies
    }

    /// Every kernel bank, in nvlink's order of them (the Mercury step's twins follow it).
    pub(super) fn banks(&self) -> &[KernelBank] {
        &self.banks
    }
}

/// The `Placement` as the sections step leaves it, without the device functions' bank-2
/// pieces: only `bank2` opens it (the field is private to this file), so no step can be
/// handed a placement that lacks them.
pub(super) struct Unbanked(Placement);

impl Unbanked {
    pub(super) fn new(placement: Placement) -> Unbanked {
        Unbanked(placement)
    }
}

/// A kernel's bank 2: (output section, kernel, its pieces: input section and offset, the
/// kernel's own first).
pub(super) type KernelBank = (usize, FuncId, Vec<(SecKey, u64)>);

impl<'a> Merger<'a> {
    /// Function `f`'s bank-2 input section, if it has one with bytes.
    pub(super) fn bank2_of(&self, f: FuncId) -> Option<usize> {
        let (i, text) = (self.code.funcs()[f].key.input, self.code.funcs()[f].text);
        bank2_of_text(&self.inputs()[i].cubin, text)
    }

    /// Whether input section `sec` of input `i` is a device function's bank 2 that an
    /// executable link merges into kernel banks (`bank2`), or a relocation section of one.
    pub(super) fn is_function_bank2(&self, i: usize, sec: usize) -> bool {
        let c = &self.inputs()[i].cubin;
        let Some(s) = c.sections.get(sec) else {
            return false;
        };
        let bank = match s.ty {
            SHT_RELA | SHT_REL => s.info as usize,
            _ => sec,
        };
        !self.opts().relocatable && self.function_bank2_section(i, bank)
    }

    /// Whether symbol `k` lies in a device function's bank 2, whose place in the kernels'
    /// banks only an executable link decides: under `-r` the references to it stay
    /// relocations.
    pub(super) fn in_function_bank2(&self, k: SymKey) -> bool {
        self.function_bank2_section(k.input, self.sym(k).shndx as usize)
    }

    /// Whether input section `sec` of input `i` is `.nv.constant2.<f>` of a function `f`
    /// that is not a kernel.
    fn function_bank2_section(&self, i: usize, sec: usize) -> bool {
        (self.inputs()[i].cubin.sections.get(sec)).is_some_and(|s| {
            constant_bank(s.ty) == Some(2)
                && s.flags & SHF_INFO_LINK != 0
                && (self
                    .code
                    .func_of_text()
                    .get(&SecKey::new(i, s.info as usize)))
                .is_some_and(|&f| !self.code.funcs()[f].entry)
        })
    }

    /// Lays out bank 2 (`placement`, `Unbanked` from `sections`, has each kernel's own
    /// bank placed one to one and the device functions' left out): see the module's
    /// comment. Writes the kernels' banks into the output (making those of kernels
    /// without data of their own) and places the device functions' pieces. Reads
    /// `trees`, `code` (liveness), `res` (replaced copies), `opts` (`-r` keeps each
    /// function's bank) and `placement` (where the kernels' own banks and code went: a
    /// bank made here names its kernel's code); writes `out` (the banks it makes get
    /// section symbols); hands on the `Bank2` and the `Placement` with the device
    /// functions' pieces added (read-only from then on).
    pub(super) fn bank2(&mut self, trees: &CallTrees, placement: Unbanked) -> (Bank2, Placement) {
        let mut placement = placement.0;
        let mut b2 = Bank2::default();
        if self.opts().relocatable {
            return (b2, placement);
        }
        // the kernels (positions in `kernels`) that reach each function
        let mut kernels_of: Vec<Vec<usize>> = vec![Vec::new(); self.code.funcs().len()];
        for (k, tree) in trees.all().iter().enumerate() {
            for &f in tree {
                kernels_of[f].push(k);
            }
        }
        // 1. each kernel's own data at 0: its bank's end
        let mut end: Vec<u64> = (self.code.kernels().iter())
            .map(|&k| self.bank2_of(k).map_or(0, |s| self.section_size(k, s)))
            .collect();
        // each kernel's bank's alignment so far
        let mut aligned: Vec<u64> = (self.code.kernels().iter())
            .map(|&k| self.bank2_of(k).map_or(1, |s| self.section_align(k, s)))
            .collect();
        // the output bank of each kernel, once it has one
        let mut bank: Vec<Option<usize>> = (self.code.kernels().iter())
            .map(|&k| {
                let s = self.bank2_of(k)?;
                Some(
                    placement
                        .of(&SecKey::new(self.code.funcs()[k].key.input, s))?
                        .0,
                )
            })
            .collect();
        // 2. the device functions, last to first
        let mut writes: Vec<(usize, SecKey, u64)> = Vec::new();
        let mut copies = self.replaced_copies_bank2();
        for f in self.section_symbol_order().into_iter().rev() {
            if self.code.funcs()[f].entry || !self.code.live()[f] || kernels_of[f].is_empty() {
                continue;
            }
            let Some(si) = self.bank2_of(f) else {
                continue;
            };
            let i = self.code.funcs()[f].key.input;
            // (the function's data, then that of the copies of it other inputs' definitions
            // replaced, each aligned as it asks: their reads are gone, not their tables)
            let mut pieces = vec![SecKey::new(i, si)];
            pieces.extend(copies.remove(&f).unwrap_or_default());
            let section = |p: &SecKey| &self.inputs()[p.input].cubin.sections[p.sec];
            // (aligned as the piece and every bank it goes into ask, and those banks
            // aligned so from then on: an sm_80 kernel's own 8-aligned constants put a
            // 4-aligned piece after them at 8, and the other kernels that hold the
            // piece get 8-aligned banks)
            let align = (kernels_of[f].iter())
                .fold(section(&pieces[0]).align.max(1), |a, &k| a.max(aligned[k]));
            let base = (kernels_of[f].iter())
                .map(|&k| end[k].next_multiple_of(align))
                .max()
                .unwrap_or(0);
            let mut at = Vec::with_capacity(pieces.len());
            let mut next = base;
            for p in &pieces {
                let s = section(p);
                let o = next.next_multiple_of(s.align.max(1));
                at.push((*p, o));
                next = o + s.size;
            }
            for &k in kernels_of[f].iter().rev() {
                end[k] = next;
                aligned[k] = align;
                let id = match bank[k] {
                    Some(id) => id,
                    None => {
                        let id =
                            self.new_kernel_bank(&placement, self.code.kernels()[k], &mut b2.made);
                        bank[k] = Some(id);
                        id
                    }
                };
                let o = &mut self.out[id];
                o.align = o.align.max(align);
                writes.extend(at.iter().map(|&(p, o)| (id, p, o)));
            }
            // (a relocation against the piece resolves through its place: any bank
            // holding it gives the same offset)
            let first = bank[kernels_of[f][0]].expect("made above");
            if at.len() > 1 {
                b2.null_symbol_value = at.last().map(|a| a.1);
                let replaced = at[1..].iter().map(|a| a.0).collect();
                b2.replaced_copies.push((at[0].0, replaced));
            }
            for (p, o) in at {
                placement.place(p, first, o);
            }
        }
        // the banks' bytes: each kernel's own data, zeros, the pieces; the banks in the
        // order nvlink makes them (the kernels' own, then those made here), which its
        // sm_100+ relocation sections for them follow
        let made = |id: usize| b2.made.iter().position(|&m| m == id);
        let mut order: Vec<usize> = (0..bank.len()).filter(|&k| bank[k].is_some()).collect();
        order.sort_by_key(|&k| bank[k].and_then(made));
        for k in order {
            let Some(id) = bank[k] else { continue };
            let kernel = self.code.kernels()[k];
            let own = (self.bank2_of(kernel))
                .map(|s| (SecKey::new(self.code.funcs()[kernel].key.input, s), 0));
            let pieces: Vec<(SecKey, u64)> = (own.into_iter())
                .chain(writes.iter().filter(|w| w.0 == id).map(|w| (w.1, w.2)))
                .collect();
            b2.banks.push((id, kernel, pieces));
            let o = &mut self.out[id];
            if let Some(own) = o.source.take() {
                o.data = own.to_vec();
            }
            // (the bank ends aligned as its strictest piece: an sm_80 kernel's 8-aligned
            // 64-bit constants before a 4-aligned jump table)
            let size = end[k].next_multiple_of(o.align.max(1));
            o.data.resize(size as usize, 0);
            o.mem_size = size;
        }
        for (id, SecKey { input: i, sec: si }, base) in writes {
            let c = &self.inputs()[i].cubin;
            let d = c.bytes(&c.sections[si]);
            self.out[id].data[base as usize..base as usize + d.len()].copy_from_slice(d);
        }
        (b2, placement)
    }

    /// The bank-2 sections of the copies of each function that another input's definition
    /// replaced (a weak `inline` or template function defined in two units), in input
    /// order: nvlink puts them in the kernels' banks right after the kept copy's data
    /// (attacker review of 2026-11-30: 0x9c bytes where nvlinkrs wrote 0x5c).
    fn replaced_copies_bank2(&self) -> HashMap<FuncId, Vec<SecKey>> {
        let mut out: HashMap<FuncId, Vec<SecKey>> = HashMap::default();
        for (i, inp) in self.inputs().iter().enumerate() {
            let c = &inp.cubin;
            for (s, sym) in c.symbols.iter().enumerate().skip(1) {
                let k = SymKey::new(i, s);
                if sym.ty != STT_FUNC || !self.is_replaced(k) {
                    continue;
                }
                let Some(f) = self.func_of(k) else { continue };
                if let Some(b) = bank2_of_text(c, sym.shndx as usize) {
                    out.entry(f).or_default().push(SecKey::new(i, b));
                }
            }
        }
        out
    }

    /// The functions in the order their code's section symbols come, input by input
    /// (the order nvlink makes their `.nv.info.<fn>` in, `creation.rs`; a local clone
    /// `f$1` comes there after the globals whose code comes first).
    fn section_symbol_order(&self) -> Vec<FuncId> {
        let mut order = Vec::with_capacity(self.code.funcs().len());
        for (i, inp) in self.inputs().iter().enumerate() {
            for s in inp.cubin.symbols.iter().filter(|s| s.ty == STT_SECTION) {
                if let Some(&f) = self
                    .code
                    .func_of_text()
                    .get(&SecKey::new(i, s.shndx as usize))
                {
                    order.push(f);
                }
            }
        }
        order
    }

    /// The alignment of function `f`'s section `s` (at least 1).
    fn section_align(&self, f: FuncId, s: usize) -> u64 {
        self.inputs()[self.code.funcs()[f].key.input].cubin.sections[s]
            .align
            .max(1)
    }

    /// The size of function `f`'s section `s`.
    pub(super) fn section_size(&self, f: FuncId, s: usize) -> u64 {
        self.inputs()[self.code.funcs()[f].key.input].cubin.sections[s].size
    }

    /// A bank for kernel `k`, which has no bank-2 data of its own (its id added to
    /// `made`).
    fn new_kernel_bank(
        &mut self,
        placement: &Placement,
        k: FuncId,
        made: &mut Vec<usize>,
    ) -> usize {
        let name = creation::concat(".nv.constant2.", &self.sym(self.code.funcs()[k].key).name);
        let mut o = OutSection::new(name, SHT_PROGBITS, SHF_ALLOC | SHF_INFO_LINK);
        o.align = 4;
        let text = SecKey::new(self.code.funcs()[k].key.input, self.code.funcs()[k].text);
        if let Some(&(t, _)) = placement.of(&text) {
            o.info = Ref::Section(t);
        }
        let id = self.new_section(o, true);
        made.push(id);
        id
    }
}

/// The bank-2 section with bytes (`.nv.constant2.<f>`) of code section `text` of `c`.
fn bank2_of_text(c: &Cubin, text: usize) -> Option<usize> {
    c.sections.iter().position(|s| {
        constant_bank(s.ty) == Some(2)
            && s.flags & SHF_INFO_LINK != 0
            && s.info as usize == text
            && s.size > 0
    })
}
