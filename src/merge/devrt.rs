//! What the merge knows of the device runtime's own code (libcudadevrt) beyond ordinary
//! linking: symbols ptxas leaves for the linker to fill in there, and the compatibility
//! record its newer code raises in the image.

use super::Input;
use crate::elf::cubin::{SHT_CUDA_COMPAT, STB_LOCAL, STT_CUDA_OBJECT, Symbol};
use crate::elf::info::{self, Record};
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

/// `.nv.compat` attribute 0x02 of nvlink's image is the largest any merged input has,
/// not the first input's: libcudadevrt's sm_120 code has 2 where ptxas 13.5 writes 1
/// (read off nvlink 13.5 with `dp.cu` and cuda-samples' cdpAdvancedQuicksort at
/// sm_120; at sm_100 both have 1).
pub(super) fn compat_max(recs: &mut [Record], inputs: &[Input]) {
    let others = inputs.iter().filter_map(|inp| {
        let c = &inp.cubin;
        let s = c.sections.iter().find(|s| s.ty == SHT_CUDA_COMPAT)?;
        info::parse(c.bytes(s), &c.origin, &s.name, s.offset).ok()
    });
    let mut largest = None;
    for r in others
        .flatten()
        .filter(|r| r.attr == 0x02 && r.format == info::FMT_BVAL)
    {
        largest = largest.max(Some(r.value));
    }
    for r in recs
        .iter_mut()
        .filter(|r| r.attr == 0x02 && r.format == info::FMT_BVAL)
    {
        r.value = r.value.max(largest.unwrap_or(0));
    }
}
