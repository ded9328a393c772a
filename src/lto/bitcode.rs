//! LLVM bitcode read through LLVM itself (inkwell): target triple, data layout, and the
//! kernels and functions a module defines, for `inspect` and the LLVM engine
//! ([`super::llvm_engine`]). LLVM runs in the `nvlinkrs-llvm` helper process
//! ([`super::llvm_helper`]), so that links without bitcode never load libLLVM.

use crate::diag::{Error, Result};

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct BitcodeSummary {
    pub triple: String,
    pub data_layout: String,
    /// Defined kernels (`ptx_kernel` calling convention or `nvvm.annotations` "kernel").
    pub kernels: Vec<String>,
    /// Defined non-kernel functions.
    pub functions: Vec<String>,
    /// Functions only declared (resolved at link time or by libdevice).
    pub declarations: usize,
}

/// The summary of a module, read by the `nvlinkrs-llvm` helper.
pub fn summarize(data: &[u8], origin: &str) -> Result<BitcodeSummary> {
    let out = super::llvm_helper::run(&["summarize", origin], data.to_vec(), origin)?;
    serde_json::from_slice(&out).map_err(|e| {
        Error::fatal(format!(
            "'{origin}': the nvlinkrs-llvm helper answered with something that is not a summary: {e}"
        ))
    })
}

/// The summary of a module, read in this process (the helper's side).
#[cfg(feature = "llvm")]
pub fn summarize_in_process(data: &[u8], origin: &str) -> Result<BitcodeSummary> {
    use inkwell::context::Context;
    let ctx = Context::create();
    // (read lazily: the summary needs no function's body, and a 53 MB device library
    // read whole took 13 s)
    let module = super::link_ir::parse_lazily(&ctx, origin, data)
        .map_err(|_| Error::fatal(format!("'{origin}': LLVM cannot read this bitcode")))?;
    let annotated = super::link_ir::annotated_kernels(&module);
    let mut s = BitcodeSummary {
        triple: module.get_triple().as_str().to_string_lossy().into_owned(),
        data_layout: module
            .get_data_layout()
            .as_str()
            .to_string_lossy()
            .into_owned(),
        ..Default::default()
    };
    for f in module.get_functions() {
        let name = f.get_name().to_string_lossy().into_owned();
        if f.as_global_value().is_declaration() {
            s.declarations += 1;
        } else if f.get_call_conventions() == super::link_ir::CC_PTX_KERNEL
            || annotated.contains(&name)
        {
            s.kernels.push(name);
        } else {
            s.functions.push(name);
        }
    }
    Ok(s)
}
