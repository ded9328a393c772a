//! What the merge knows of the device runtime's own code (libcudadevrt) beyond ordinary
//! linking: symbols ptxas leaves for the linker to fill in there.

use crate::elf::cubin::{STB_LOCAL, STT_CUDA_OBJECT, Symbol};
use crate::elf::write::OutSymbol;

/// `.nv.ptx.const0.size`: the size of the calling kernel's parameter bank, which
/// libcudadevrt's `cudaMemcpyAsync` family compares source addresses against (an address
/// in the parameter space is copied differently). ptxas leaves it as an undefined local
/// object; nvlink 13.5 gives it the value -1 (no bound: the functions are not kernels)
/// and applies the relocations against it, also under `-r`.
pub(super) const PTX_CONST0_SIZE: &str = ".nv.ptx.const0.size";

/// The link-time value of an undefined symbol only the linker defines, if `s` is one.
pub(super) fn linker_value(s: &Symbol) -> Option<u64> {
    (s.bind == STB_LOCAL && !s.defined() && s.name == PTX_CONST0_SIZE).then_some(u64::MAX)
}

/// Under `-r` nvlink keeps such a symbol, undefined, with the value it applied.
pub(super) fn relocatable_symbol(s: &Symbol) -> Option<OutSymbol> {
    linker_value(s).map(|value| OutSymbol {
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
