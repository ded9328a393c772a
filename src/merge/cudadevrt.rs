//! What the merge knows of the device runtime's own code (libcudadevrt) beyond ordinary
//! linking: symbols ptxas leaves for the linker to fill in there (its `.nv.compat`
//! record is merged as every input's, `compat.rs`).

use super::Merger;
use crate::elf::cubin::{STB_LOCAL, STT_CUDA_OBJECT, Symbol};
use crate::elf::write::OutSymbol;

/// `.nv.ptx.const0.size`: the size of PTX's constant bank 0, the user's `__constant__`
/// data (SASS bank 3, `.nv.constant3`), which libcudadevrt's `cudaMemcpyAsync` family
/// compares source addresses against (an address in constant space is copied
/// differently). ptxas leaves it as an undefined local object; nvlink 13.5 gives it the
/// size of the image's `.nv.constant3`, -1 when there is none, and applies the
/// relocations against it, also under `-r` (where it keeps the symbol, undefined, with
/// that value). Read off nvlink with `dp.cu` beside `b.cu` (16 bytes of constants: 0x10)
/// and `a.cu`/`b.cu` (0x30), at sm_90 and sm_100.
pub(super) const PTX_CONST0_SIZE: &str = ".nv.ptx.const0.size";

/// Whether `s` is an undefined symbol only the linker defines.
pub(super) fn is_linker_symbol(s: &Symbol) -> bool {
    s.bind == STB_LOCAL && !s.defined() && s.name == PTX_CONST0_SIZE
}

impl Merger<'_> {
    /// The link-time value of an undefined symbol only the linker defines, if `s` is one
    /// (the placed sections give it).
    pub(super) fn linker_value(&self, s: &Symbol) -> Option<u64> {
        is_linker_symbol(s).then(|| {
            self.out
                .iter()
                .find(|o| o.name == ".nv.constant3")
                .map_or(u64::MAX, |o| o.data.len() as u64)
        })
    }

    /// Under `-r` nvlink keeps such a symbol, undefined, with the value it applied.
    pub(super) fn relocatable_symbol(&self, s: &Symbol) -> Option<OutSymbol> {
        self.linker_value(s).map(|value| OutSymbol {
            name: s.name.clone(),
            value,
            size: s.size,
            bind: s.bind,
            // (a CUDA object, as nvlink writes it)
            ty: STT_CUDA_OBJECT,
            other: s.other,
            section: None,
        })
    }
}
