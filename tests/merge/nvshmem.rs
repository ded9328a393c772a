//! NVSHMEM's device library (the `nvidia-nvshmem-cu13` 3.8 wheel, which ptxas 13.0 built),
//! issue 35 item 4: a ring kernel through NVSHMEM's headers linked with
//! `libnvshmem_device.a` and libcudadevrt, `-rdc` at sm_90 and sm_100 and partial LTO at
//! sm_90, as nvlink links it. Before: its transfer functions' switch tables (constant bank
//! 2) read wrong offsets, `.nv.compat` kept the first input's records (13.0's code counts
//! as `CUDA_INTERNAL_TARGET` 2 and brings attribute 0x07), and at sm_100 the 13.0
//! functions' `.nv.info` lacked attribute 0x6D. The bitcode library is `tests/ltoir.rs`'s.

use super::{cuda, differential, fixtures};

fn nvshmem() -> std::path::PathBuf {
    fixtures().parent().unwrap().join("nvshmem")
}

/// The links, each with the device library and libcudadevrt.
fn links() -> Vec<(&'static str, Vec<String>, bool)> {
    let d = nvshmem();
    let libs = [
        format!("-L{}", d.join("lib").display()),
        format!("-L{}", cuda().join("lib").display()),
        "-lnvshmem_device".to_string(),
        "-lcudadevrt".to_string(),
    ];
    let nvvm = format!("-nvvmpath={}", cuda().join("nvvm").display());
    let link = |head: &[&str], unit: &str| -> Vec<String> {
        let mut a: Vec<String> = head.iter().map(|s| s.to_string()).collect();
        a.push(d.join(unit).display().to_string());
        a.extend(libs.iter().cloned());
        a
    };
    vec![
        // (what, arguments, byte-identical)
        ("-rdc sm_90", link(&["-arch=sm_90"], "ring_90.cubin"), true),
        // (equivalent: the libraries' local __cuda_sm20_* functions come first in
        // nvlink's sm_100 image, after its weak copies in ours)
        (
            "-rdc sm_100",
            link(&["-arch=sm_100"], "ring_100.cubin"),
            false,
        ),
        (
            "partial LTO sm_90",
            link(&["-arch=sm_90", "-dlto", &nvvm], "ring_lto90.o"),
            true,
        ),
    ]
}

#[test]
fn nvshmem_device_library_links_as_nvlink() {
    let mut failures = Vec::new();
    for (what, a, identical) in links() {
        match differential(&a) {
            Ok(same) if same == identical => {}
            Ok(same) => failures.push(format!(
                "{what}: byte-identical {same}, expected {identical}"
            )),
            Err(d) => failures.push(format!("{what}:\n    {d}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `source` compiled `-dc` at `sm` through the wheel's NVSHMEM headers (beside the
/// toolkit's `cu13` folder, as tests/fixtures/build.sh finds them) and linked by both
/// linkers with the device library and libcudadevrt: equivalent, or the differences.
fn linked_with_the_library(source: &str, sm: &str) -> Result<bool, String> {
    let d = nvshmem();
    let kit = std::fs::canonicalize(cuda()).unwrap();
    let headers = kit.parent().unwrap().join("nvshmem").join("include");
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("k.cu");
    std::fs::write(&src, source).unwrap();
    let obj = dir.path().join("k.o");
    let ok = std::process::Command::new(cuda().join("bin/nvcc"))
        .args(["-dc", &format!("-arch={sm}")])
        .arg(format!("-I{}", headers.display()))
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .status()
        .unwrap()
        .success();
    assert!(ok, "nvcc at {sm}");
    differential(&[
        format!("-arch={sm}"),
        obj.display().to_string(),
        format!("-L{}", d.join("lib").display()),
        format!("-L{}", cuda().join("lib").display()),
        "-lnvshmem_device".to_string(),
        "-lcudadevrt".to_string(),
    ])
}

/// A kernel calling NVSHMEM's team reduction (the new user's review program): the
/// library's reduction records `NUM_MBARRIERS` 0xffff, which nvlink copies into the
/// calling kernel's `.nv.info` (nvlinkrs did not: not equivalent). Compiled here with
/// nvcc through NVSHMEM's headers; `-rdc` at sm_90, equivalent to nvlink's image (the
/// library's functions come in another order).
#[test]
fn a_kernel_calling_a_reduction_gets_its_memory_barriers() {
    let src = "#include <nvshmem.h>\n#include <nvshmemx.h>\n\
         __global__ void reduce(int *src, int *dst, int cnt) {\n\
         nvshmem_int_sum_reduce(NVSHMEM_TEAM_WORLD, dst, src, cnt);\n  nvshmem_quiet();\n}\n";
    if let Err(e) = linked_with_the_library(src, "sm_90") {
        panic!("{e}");
    }
}

/// The new user's NVSHMEM program (a ring, a team reduction, a block put with a fence and
/// an atomic) at sm_100, `-rdc`: two instances of the library's
/// `nvshmemi_transfer_submit_active_region_slow`, whose code the finalizer changes, have
/// the same frame, and nvlinkrs took neither (it looked for one FDE): their control bits
/// were ptxas 13.0's, not equivalent to nvlink's image.
#[test]
fn template_twins_take_the_finalizers_code_sm_100() {
    let src = "#include <nvshmem.h>\n#include <nvshmemx.h>\n\
         __global__ void ring(int *dst, int iter) {\n\
           int me = nvshmem_my_pe(), n = nvshmem_n_pes();\n\
           for (int i = 0; i < iter; ++i) { nvshmem_int_p(dst, me * 100 + i, (me + 1) % n); nvshmem_barrier_all(); }\n}\n\
         __global__ void reduce(int *src, int *dst, int cnt) {\n\
           nvshmem_int_sum_reduce(NVSHMEM_TEAM_WORLD, dst, src, cnt);\n  nvshmem_quiet();\n}\n\
         __global__ void putblock(float *dst, const float *src, size_t n, int pe) {\n\
           nvshmemx_float_put_block(dst, src, n, pe);\n  nvshmem_fence();\n\
           if (threadIdx.x == 0) nvshmem_int_atomic_inc((int *)dst, pe);\n}\n";
    if let Err(e) = linked_with_the_library(src, "sm_100") {
        panic!("{e}");
    }
}
