//! The linked program's LTO IR, as nvJitLink hands it out (`nvJitLinkGetLinkedLTOIR`):
//! the link's IR modules, in the order the link gives them to libNVVM, linked by
//! libNVVM's `-gen-lto` into one NVIDIA LTO IR container, which a later LTO link takes
//! as an input. nvJitLink 13.5 makes its container with the same NVVM (read off its
//! output: the target's plain architecture, the module named by the caller's name for
//! its first input; its IR level 0 where libNVVM writes 1): byte for byte where libNVVM's
//! link changes no code; elsewhere libNVVM's link folds branches into selects, merges a
//! `switch`'s blocks, hoists repeated address arithmetic and extends the data layout
//! string of NVVM 7's IR (sm_90's) linked at sm_100+, where nvJitLink's keeps the code as
//! compiled: IR that links to the same image (no option of libNVVM's tried kept it).

use std::path::Path;

use crate::arch::Arch;
use crate::diag::{Diagnostics, Error, Result};
use crate::lto::{IrForm, libnvvm, pool};

/// Where the container header keeps the IR level (a 16-bit field, `ir::header`).
const IR_LEVEL_AT: usize = 0x0E;

/// The linked LTO IR of the IR modules of the input `trees` for `target`, libNVVM at
/// `libnvvm`;
/// the linked module is named as its first module's input, by `name_of` (nvJitLink names
/// it by the caller's name for that input: a file's path as given, `AddData`'s name;
/// `None`, a name libNVVM cannot be given, refuses the link).
pub fn make(
    trees: &[crate::input::Node],
    target: Arch,
    libnvvm: &Path,
    name_of: &dyn Fn(&str) -> Option<String>,
    diag: &Diagnostics,
) -> Result<Vec<u8>> {
    let pool = pool::collect(trees, target, diag)?;
    if pool.modules.is_empty() {
        return Err(Error::fatal("no LTO IR among the inputs"));
    }
    let lib = libnvvm::LibNvvm::load(libnvvm)?;
    let mut program = lib.program()?;
    for m in &pool.modules {
        if m.module.form != IrForm::Container {
            return Err(Error::fatal(format!(
                "'{}' is LLVM bitcode, which NVVM's linked IR does not take",
                m.module.name
            )));
        }
        let name = name_of(&m.module.name).ok_or_else(|| {
            Error::fatal(format!(
                "'{}': its input's name is not UTF-8",
                m.module.name
            ))
        })?;
        program.add_lto_ir(&m.module.data, &name)?;
    }
    // (the target's plain architecture, as nvJitLink's container names it)
    let options = [format!("-arch=compute_{}", target.sm), "-gen-lto".into()];
    if let Err((log, why)) = program.compile(&options)? {
        return Err(Error::fatal("elfLink nvvm error")
            .context(format!("libNVVM -gen-lto: {why}"))
            .context(log));
    }
    let mut ir = program.result_bytes()?;
    crate::ir::container::check_for_link(&ir, "libNVVM's linked IR")?;
    ir[IR_LEVEL_AT..IR_LEVEL_AT + 2].copy_from_slice(&0u16.to_le_bytes());
    Ok(ir)
}
