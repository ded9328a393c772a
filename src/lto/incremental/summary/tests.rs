use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::*;
use crate::bytes::Bytes;
use crate::lto::IrForm;

fn fixture(name: &str) -> Vec<u8> {
    let dir =
        std::env::var_os("NVLINKRS_FIXTURES").expect("NVLINKRS_FIXTURES (set by scripts/test.sh)");
    std::fs::read(PathBuf::from(dir).join(name)).unwrap()
}

fn module(name: &str) -> IrModule {
    IrModule {
        name: name.into(),
        data: Bytes::from_vec(fixture(name)),
        form: IrForm::Container,
    }
}

/// Each defined function's and variable's references, intrinsics (`llvm.*`) left out
/// (LLVM renames some when it upgrades old IR).
fn references(s: &Summary) -> BTreeMap<String, BTreeSet<String>> {
    s.globals
        .iter()
        .filter(|g| g.defined && !g.name.starts_with("llvm."))
        .map(|g| {
            let refs = g
                .refs
                .iter()
                .map(|&r| s.globals[r as usize].name.clone())
                .filter(|n| !n.starts_with("llvm."))
                .collect();
            (g.name.clone(), refs)
        })
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn saxpy_reads_alike_in_llvm_7_and_llvm_23_bitcode() {
    // examples/saxpy/saxpy.cu compiled for sm_90 (LLVM 7 bitcode) and sm_100 (LLVM 23)
    for name in ["saxpy.ltoir", "saxpy_100.ltoir"] {
        let s = summarize(&module(name), false);
        assert_eq!(s.opaque, None, "{name}");
        let kernels: BTreeSet<&str> = s
            .globals
            .iter()
            .filter(|g| g.kernel)
            .map(|g| g.name.as_str())
            .collect();
        assert_eq!(
            kernels,
            ["_Z5saxpyfPKfPfi", "_Z7doublerPfi"].into(),
            "{name}"
        );
        let refs = references(&s);
        assert_eq!(refs["_Z7doublerPfi"], set(&["_Z5twicef"]), "{name}");
        assert_eq!(refs["_Z5twicef"], set(&["bias"]), "{name}");
        // (and the header's atomicAdd wrapper, internal, its name made unique to the unit)
        let (wrapper, rest): (BTreeSet<String>, BTreeSet<String>) =
            refs["_Z5saxpyfPKfPfi"].iter().cloned().partition(|n| {
                n.starts_with("_ZN35_INTERNAL_") && n.ends_with("_saxpy_cu_calls9atomicAddEPii")
            });
        assert_eq!(
            rest,
            set(&["_Z5scalef", "calls", "offsets", "weights"]),
            "{name}"
        );
        assert_eq!(wrapper.len(), 1, "{name}");
        let g = |n: &str| &s.globals[s.find(n).unwrap() as usize];
        assert_eq!(
            (g("weights").defined, g("offsets").address_space),
            (false, 4),
            "{name}"
        );
        assert_eq!(
            (g("calls").linkage, g("calls").address_space),
            (Linkage::External, 1),
            "{name}"
        );
        assert!(
            !g("_Z5twicef").address_taken && !g("_Z5twicef").kernel,
            "{name}"
        );
    }
}

#[test]
fn a_damaged_module_is_opaque_never_a_panic() {
    let good = bitcode_of(&module("saxpy.ltoir")).unwrap();
    let mut seen_opaque = 0;
    for i in (4..good.len()).step_by(good.len() / 97 + 1) {
        let mut bad = good.clone();
        bad[i] ^= 0x5a;
        let s = summarize_bitcode(&bad, "bad.bc", false);
        seen_opaque += s.opaque.is_some() as usize;
        // an opaque module's globals (when it could list them) each refer to all
        if s.opaque.is_some() {
            assert!(s.globals.iter().all(|g| g.refs.len() == s.globals.len()));
        }
        let cut = summarize_bitcode(&good[..i], "cut.bc", false);
        assert!(cut.opaque.is_some() && cut.globals.is_empty(), "{i}");
    }
    assert!(seen_opaque > 0);
}

/// The references LLVM 22 itself reads off the same bitcode (operands of every
/// instruction and initializer, through constant expressions).
#[cfg(feature = "llvm")]
fn llvm_references(bitcode: &[u8]) -> BTreeMap<String, BTreeSet<String>> {
    use llvm_sys::bit_reader::LLVMParseBitcodeInContext2;
    use llvm_sys::core::*;
    use llvm_sys::prelude::LLVMValueRef;

    unsafe fn name(v: LLVMValueRef) -> String {
        let mut n = 0;
        let p = unsafe { LLVMGetValueName2(v, &mut n) };
        let b = unsafe { std::slice::from_raw_parts(p as *const u8, n) };
        String::from_utf8_lossy(b).into_owned()
    }
    unsafe fn walk(v: LLVMValueRef, out: &mut BTreeSet<String>, depth: usize) {
        unsafe {
            if !LLVMIsAGlobalValue(v).is_null() {
                out.insert(name(v));
            } else if !LLVMIsAConstant(v).is_null() && depth < 64 {
                for i in 0..LLVMGetNumOperands(v) {
                    walk(LLVMGetOperand(v, i as u32), out, depth + 1);
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    // SAFETY: LLVM's C API on a module this function owns and disposes of.
    unsafe {
        let ctx = LLVMContextCreate();
        let buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(
            bitcode.as_ptr().cast(),
            bitcode.len(),
            c"m".as_ptr(),
        );
        let mut m = std::ptr::null_mut();
        assert_eq!(LLVMParseBitcodeInContext2(ctx, buf, &mut m), 0);
        let mut f = LLVMGetFirstFunction(m);
        while !f.is_null() {
            if LLVMIsDeclaration(f) == 0 {
                let mut refs = BTreeSet::new();
                let mut bb = LLVMGetFirstBasicBlock(f);
                while !bb.is_null() {
                    let mut i = LLVMGetFirstInstruction(bb);
                    while !i.is_null() {
                        for k in 0..LLVMGetNumOperands(i) {
                            walk(LLVMGetOperand(i, k as u32), &mut refs, 0);
                        }
                        i = LLVMGetNextInstruction(i);
                    }
                    bb = LLVMGetNextBasicBlock(bb);
                }
                out.insert(name(f), refs);
            }
            f = LLVMGetNextFunction(f);
        }
        let mut g = LLVMGetFirstGlobal(m);
        while !g.is_null() {
            let init = LLVMGetInitializer(g);
            if !init.is_null() {
                let mut refs = BTreeSet::new();
                walk(init, &mut refs, 0);
                out.insert(name(g), refs);
            }
            g = LLVMGetNextGlobal(g);
        }
        LLVMDisposeModule(m);
        LLVMContextDispose(ctx);
    }
    out.retain(|n, _| !n.starts_with("llvm."));
    for refs in out.values_mut() {
        refs.retain(|n| !n.starts_with("llvm."));
    }
    out
}

/// The IR module of a `-dc -dlto` host object among the fixtures.
fn host_object_ir(name: &str) -> Vec<IrModule> {
    let dir = PathBuf::from(std::env::var_os("NVLINKRS_FIXTURES").unwrap());
    let trees =
        crate::input::load(&[dir.join(name)], crate::input::Mode::Link { lto: true }).unwrap();
    let diag = crate::diag::Diagnostics::collector();
    let pool = crate::lto::pool::collect(&trees, crate::arch::Arch::plain(90), &diag).unwrap();
    pool.modules.into_iter().map(|m| m.module).collect()
}

#[cfg(feature = "llvm")]
#[test]
fn references_are_those_llvm_reads() {
    // cicc's LLVM 7 bitcode (LLVM 22 reads it): the examples, a large unrolled kernel,
    // device launches, file-scope statics
    let mut modules = vec![module("saxpy.ltoir"), module("scale.ltoir")];
    for o in [
        "unrolled_dlto.o",
        "merge/dp_lto90.o",
        "merge/dpmain_lto90.o",
        "split/st0.o",
        "main_dlto.o",
    ] {
        modules.extend(host_object_ir(o));
    }
    assert_eq!(modules.len(), 7);
    for m in modules {
        let name = m.name.clone();
        let bitcode = bitcode_of(&m).unwrap();
        let s = summarize_bitcode(&bitcode, &name, false);
        assert_eq!(s.opaque, None, "{name}");
        let ours = references(&s);
        let llvm = llvm_references(&bitcode);
        assert_eq!(ours.len(), llvm.len(), "{name}");
        for (f, refs) in &llvm {
            assert_eq!(&ours[f], refs, "{name}: {f}");
        }
    }
}
