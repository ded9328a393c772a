//! The helper's side of a `link-ir` request ([`super::prelink`]) beyond the link itself:
//! the target the linked module carries and what LLVM bitcode from elsewhere (clang) must
//! become to be compiled as cicc's IR is. libNVVM compiles a module only with its own
//! data layout (cicc's); LLVM's linker keeps the destination's, so the module is given
//! cicc's layout and triple before anything is linked into it, whatever the order, and
//! a module whose layout disagrees with it on a type's size or alignment is refused by
//! name. cicc lists its kernels in `@llvm.used`, which keeps them whatever the host
//! references say; clang does not, so its kernels (`ptx_kernel`, or `nvvm.annotations`
//! "kernel") are added there, and an `@llvm.used` with no entries is never written.

use crate::diag::{Error, Result};
use inkwell::module::Module;

/// cicc 13.5's data layout for 64-bit device code, as LLVM 22 reads it: the linked
/// module's where no module from NVIDIA is linked.
pub const NVVM_DATA_LAYOUT: &str = "e-p:64:64:64-p3:32:32:32-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-f32:32:32-f64:64:64-f128:128:128-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64-p7:32:32";

/// The triple libNVVM's modules carry.
pub const NVVM_TRIPLE: &str = "nvptx64-nvidia-cuda";

/// What, of `layout`, differs from `target`'s for the types every device module uses
/// (the integer and floating types, generic and global pointers); `None` when nothing.
/// Shared, constant and local pointers (64-bit in clang's layout, 32-bit shared ones in
/// cicc's) are not compared: they differ for every clang module and matter only where
/// such a pointer is stored in memory.
pub fn layout_difference(
    ctx: &inkwell::context::Context,
    layout: &str,
    target: &str,
) -> Option<String> {
    use inkwell::AddressSpace;
    use inkwell::targets::TargetData;
    use inkwell::types::AnyType;
    let (a, b) = (TargetData::create(layout), TargetData::create(target));
    let types = [
        ("i1", ctx.bool_type().as_any_type_enum()),
        ("i8", ctx.i8_type().as_any_type_enum()),
        ("i16", ctx.i16_type().as_any_type_enum()),
        ("i32", ctx.i32_type().as_any_type_enum()),
        ("i64", ctx.i64_type().as_any_type_enum()),
        ("i128", ctx.i128_type().as_any_type_enum()),
        ("half", ctx.f16_type().as_any_type_enum()),
        ("float", ctx.f32_type().as_any_type_enum()),
        ("double", ctx.f64_type().as_any_type_enum()),
    ];
    for (name, t) in &types {
        let (sa, sb) = (a.get_store_size(t), b.get_store_size(t));
        let (aa, ab) = (a.get_abi_alignment(t), b.get_abi_alignment(t));
        if (sa, aa) != (sb, ab) {
            return Some(format!(
                "{name} is {sa} bytes aligned to {aa} there, {sb} aligned to {ab} in libNVVM's"
            ));
        }
    }
    for (space, name) in [(0u16, "a generic pointer"), (1, "a global pointer")] {
        let s = Some(AddressSpace::from(space));
        let (pa, pb) = (a.get_pointer_byte_size(s), b.get_pointer_byte_size(s));
        if pa != pb {
            return Some(format!("{name} is {pa} bytes there, {pb} in libNVVM's"));
        }
    }
    None
}

/// The kernels `module` defines: `ptx_kernel` functions and those `nvvm.annotations`
/// marks (LLVM 22 turns the annotations of the bitcode it reads into the calling
/// convention; both are read in case it does not).
pub fn defined_kernels(module: &Module) -> Vec<String> {
    let annotated = annotated_kernels(module);
    module
        .get_functions()
        .filter(|f| f.count_basic_blocks() > 0)
        .map(|f| {
            (
                f.get_call_conventions(),
                f.get_name().to_string_lossy().into_owned(),
            )
        })
        .filter(|(cc, n)| *cc == CC_PTX_KERNEL || annotated.contains(n))
        .map(|(_, n)| n)
        .collect()
}

/// Adds the functions named `kernels` (those of them `module` defines and `@llvm.used`
/// does not list yet, in order) to `@llvm.used`, made anew as `[N x ptr]` (appending,
/// section "llvm.metadata", as cicc writes it). An `@llvm.used` or `@llvm.compiler.used`
/// without entries is removed: the verifier refuses its `zeroinitializer`.
pub fn keep_kernels(module: &Module, kernels: &[String]) -> Result<()> {
    use inkwell::values::AsValueRef;
    use llvm_sys::core::*;
    // SAFETY: the values are the module's, alive while `module` is; the old global is
    // deleted only after its entries were read and nothing else holds it.
    unsafe {
        for name in ["llvm.used", "llvm.compiler.used"] {
            let Some(g) = module.get_global(name) else {
                continue;
            };
            let mut entries = Vec::new();
            if let Some(init) = g.get_initializer() {
                let v = init.as_value_ref();
                for i in 0..LLVMGetNumOperands(v).max(0) as u32 {
                    entries.push(LLVMGetOperand(v, i));
                }
            }
            let mut added = false;
            if name == "llvm.used" {
                for k in kernels {
                    let Some(f) = module.get_function(k) else {
                        continue;
                    };
                    let f = f.as_global_value().as_pointer_value().as_value_ref();
                    if !entries.contains(&f) {
                        entries.push(f);
                        added = true;
                    }
                }
            }
            if !added && !entries.is_empty() {
                continue;
            }
            LLVMDeleteGlobal(g.as_value_ref());
            if !entries.is_empty() {
                add_used(module, name, &mut entries);
            }
        }
        if module.get_global("llvm.used").is_none() {
            let mut entries: Vec<_> = kernels
                .iter()
                .filter_map(|k| module.get_function(k))
                .map(|f| f.as_global_value().as_pointer_value().as_value_ref())
                .collect();
            if !entries.is_empty() {
                add_used(module, "llvm.used", &mut entries);
            }
        }
    }
    if module
        .get_global("llvm.used")
        .is_some_and(|g| g.get_initializer().is_none())
    {
        return Err(Error::fatal(
            "nvlinkrs-llvm: @llvm.used written without entries",
        ));
    }
    Ok(())
}

/// A new `@name = appending global [N x ptr] [...], section "llvm.metadata"`.
///
/// # Safety
/// `entries` are constants of `module`'s context, of pointer type.
unsafe fn add_used(module: &Module, name: &str, entries: &mut [llvm_sys::prelude::LLVMValueRef]) {
    use inkwell::module::Linkage;
    use inkwell::types::AsTypeRef;
    use inkwell::values::AsValueRef;
    use llvm_sys::core::*;
    let ctx = module.get_context();
    let ptr = ctx.ptr_type(inkwell::AddressSpace::default());
    let ty = ptr.array_type(entries.len() as u32);
    let g = module.add_global(ty, None, name);
    g.set_linkage(Linkage::Appending);
    g.set_section(Some("llvm.metadata"));
    // SAFETY: the caller's
    unsafe {
        let init = LLVMConstArray2(
            ptr.as_type_ref(),
            entries.as_mut_ptr(),
            entries.len() as u64,
        );
        LLVMSetInitializer(g.as_value_ref(), init);
    }
}

/// The NVVM IR version cicc 13.5 writes first in `!nvvmir.version` (2.0, debug 3.2),
/// which libNVVM requires of a module ("IR version 1.0 incompatible"): given to a linked
/// module none of whose modules is NVIDIA's (clang's bitcode alone).
pub const NVVM_IR_VERSION: [u64; 4] = [2, 0, 3, 2];

/// Adds `!nvvmir.version = !{!{i32 2, i32 0, i32 3, i32 2}}` to `module`.
pub fn add_nvvm_ir_version(module: &Module) -> Result<()> {
    let ctx = module.get_context();
    let i32t = ctx.i32_type();
    let values: Vec<_> = NVVM_IR_VERSION
        .iter()
        .map(|&v| i32t.const_int(v, false).into())
        .collect();
    let node = ctx.metadata_node(&values);
    module
        .add_global_metadata("nvvmir.version", &node)
        .map_err(|e| Error::fatal(format!("nvlinkrs-llvm: !nvvmir.version: {e}")))
}

/// Reads `data` as a module lazily: the functions' bodies stay in the bitcode until a
/// link needs them (LLVM's lazy bitcode loading), so a 53 MB device library costs what the
/// program takes from it.
pub fn parse_lazily<'c>(
    ctx: &'c inkwell::context::Context,
    name: &str,
    data: &[u8],
) -> Result<Module<'c>> {
    use inkwell::memory_buffer::MemoryBuffer;
    let buf = MemoryBuffer::create_from_memory_range_copy(data, name);
    let mut module = std::ptr::null_mut();
    // SAFETY: the context outlives the module (its lifetime); the buffer is handed to
    // the module, which owns it from then on (hence `forget`), whether or not the read
    // succeeds (LLVM disposes of it on failure too).
    let failed = unsafe {
        llvm_sys::bit_reader::LLVMGetBitcodeModuleInContext2(
            ctx.raw(),
            buf.as_mut_ptr(),
            &mut module,
        )
    };
    std::mem::forget(buf);
    if failed != 0 || module.is_null() {
        return Err(Error::fatal(format!(
            "'{name}': LLVM 22 cannot read this IR"
        )));
    }
    // SAFETY: a module LLVM just made in `ctx`, owned by nobody else
    Ok(unsafe { Module::new(module) })
}

/// Whether `module` (read lazily or not) defines a kernel: a definition with the
/// `ptx_kernel` convention or one `nvvm.annotations` marks. A module that defines none,
/// from elsewhere than NVIDIA's containers, is a library of device code (NVSHMEM's
/// `libnvshmem_device_sm_XX.bc`), linked only as far as the program needs it.
pub fn defines_kernel(module: &Module) -> bool {
    let annotated = annotated_kernels(module);
    module.get_functions().any(|f| {
        !f.as_global_value().is_declaration()
            && (f.get_call_conventions() == CC_PTX_KERNEL
                || annotated.contains(f.get_name().to_string_lossy().as_ref()))
    })
}

unsafe extern "C" {
    /// `src/lto/only_needed.cpp`: LLVM's linker in "only needed" mode.
    fn nvlinkrs_link_only_needed(
        dst: llvm_sys::prelude::LLVMModuleRef,
        src: llvm_sys::prelude::LLVMModuleRef,
    ) -> std::ffi::c_int;
}

/// Links library `lib` into `dst`, only what `dst` names and what that reaches (LLVM's
/// `-only-needed`; libNVVM's lazy modules do the same). Linked whole, NVSHMEM's 53 MB
/// bitcode library kept libNVVM busy for half an hour: a ring kernel needs a few
/// functions of it.
pub fn link_only_needed(dst: &Module, lib: Module, name: &str) -> Result<()> {
    // SAFETY: both modules are alive and of one context; the callee takes ownership of
    // `lib` (hence `forget`).
    let failed = unsafe { nvlinkrs_link_only_needed(dst.as_mut_ptr(), lib.as_mut_ptr()) };
    std::mem::forget(lib);
    match failed {
        0 => Ok(()),
        _ => Err(Error::fatal(format!(
            "'{name}': cannot be linked with the modules before it"
        ))),
    }
}

/// LLVM's calling-convention number for `ptx_kernel`.
#[cfg(feature = "llvm")]
pub(crate) const CC_PTX_KERNEL: u32 = 71;

/// The functions `nvvm.annotations` marks as kernels (the older spelling of a kernel).
#[cfg(feature = "llvm")]
pub(crate) fn annotated_kernels(
    module: &inkwell::module::Module,
) -> std::collections::BTreeSet<String> {
    use inkwell::values::BasicMetadataValueEnum;
    let mut annotated = std::collections::BTreeSet::new();
    for node in module.get_global_metadata("nvvm.annotations") {
        let ops = node.get_node_values().unwrap_or_default();
        let is_kernel = ops.iter().any(|v| {
            matches!(v, BasicMetadataValueEnum::MetadataValue(m)
            if m.get_string_value().is_some_and(|s| s == b"kernel"))
        });
        if let (true, Some(BasicMetadataValueEnum::PointerValue(p))) = (is_kernel, ops.first()) {
            annotated.insert(p.get_name().to_string_lossy().into_owned());
        }
    }
    annotated
}
