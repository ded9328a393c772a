//! The order of an image's memory-only sections (the kernels' `.nv.shared.` windows,
//! `.nv.global`, `.nv_debug.shared`), as nvlink 13.5 makes them: input by input, the
//! windows of that input's kernels, then its own memory-only sections in its order,
//! then `.nv_debug.shared` when its dynamic shared arrays call for one (a section made
//! once stays where it was made). The data segment's memory size lays them out in
//! this order, so it decides the padding between them (issue 22's CUB program at
//! sm_100: `.nv.global` before `.nv_debug.shared`, 0x13c00 bytes, not 0x13bea).

use super::*;

/// Where a memory-only section comes: (input, step, section index in that input);
/// steps 0 (windows), 1 (the input's own sections), 2 (made for dynamic arrays).
pub(super) type MemoryKey = (usize, u8, usize);

impl Merger<'_> {
    /// Each output section's place among the memory-only ones (`None`: not one, or a
    /// relocatable link, whose sections follow the inputs as they are merged).
    pub(super) fn memory_order(&self, placement: &Placement) -> Vec<Option<MemoryKey>> {
        let mut key: Vec<Option<MemoryKey>> = vec![None; self.out.len()];
        if self.opts().relocatable {
            return key;
        }
        let mut first = |id: usize, k: MemoryKey| {
            key[id] = Some(key[id].map_or(k, |o| o.min(k)));
        };
        // the windows, by the input of their kernel's code
        let mut input_of_text: HashMap<usize, usize> = HashMap::default();
        // (every live kernel's: one only `--preserve-relocs` keeps may have a window)
        let live_kernels = FuncId::all(self.code.funcs().len())
            .filter(|&f| self.code.live()[f] && self.code.funcs()[f].entry);
        for f in live_kernels {
            let i = self.code.funcs()[f].key.input;
            if let Some(&(t, _)) = placement.of(&SecKey::new(i, self.code.funcs()[f].text)) {
                input_of_text.insert(t, i);
            }
        }
        for (id, o) in self.out.iter().enumerate() {
            if let Ref::Section(t) = o.info
                && o.name.starts_with(".nv.shared.")
                && let Some(&i) = input_of_text.get(&t)
            {
                first(id, (i, 0, 0));
            }
        }
        // the inputs' own (`.nv.global`), and `.nv_debug.shared` where an input has one
        // or a dynamic array
        for (&SecKey { input, sec }, &(id, _)) in placement.iter() {
            first(id, (input, 1, sec));
        }
        if let Some(debug) = self.out.iter().position(|o| o.name == ".nv_debug.shared") {
            for (i, u) in self.inputs().iter().enumerate() {
                if let Some(si) = u.cubin.section_index(".nv_debug.shared") {
                    first(debug, (i, 1, si));
                }
                if u.cubin.symbols.iter().any(is_dynamic_shared) {
                    first(debug, (i, 2, 0));
                }
            }
        }
        for (k, o) in key.iter_mut().zip(self.out.iter()) {
            if !(o.memory_only() && o.flags & SHF_ALLOC != 0) {
                *k = None;
            } else if k.is_none() {
                *k = Some((usize::MAX, 0, 0));
            }
        }
        key
    }
}
