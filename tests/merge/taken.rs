//! Functions whose address code takes, and links the kernel filter empties (issue 36):
//! nvlink keeps every function whose address is taken (`.nv.callgraph` group 2) even
//! where the code taking it goes (a kernel `-kernels-used` drops, a function nothing
//! calls), and a link whose every function the filter drops has no `.nv.info` at all.
//! nvlinkrs dropped those functions, and wrote an empty `.nv.info`
//! (`-kernels-used=nosuchkernel`). The sources are compiled here with the pinned nvcc.

use std::path::Path;

use super::{cuda, differential, fixtures};

const SOURCES: &[(&str, &str)] = &[
    // an address taken by a kernel, beside a kernel that takes none
    (
        "tk.cu",
        "typedef int (*fp_t)(int);\n__device__ fp_t fpv;\n\
         __device__ __noinline__ int f1(int x) { return x * 7 + 1; }\n\
         __device__ __noinline__ int f2(int x) { return x * 9 + 2; }\n\
         __global__ void k1(int *p) { fpv = f1; p[0] = fpv(p[1]); }\n\
         __global__ void k2(int *p) { p[0] = f2(p[1]); }\n",
    ),
    // an address taken by a function nothing calls
    (
        "tf.cu",
        "typedef int (*fp_t)(int);\n__device__ fp_t fpv2;\n\
         __device__ __noinline__ int f4(int x) { return x * 7 + 1; }\n\
         __device__ __noinline__ int f3(int x) { fpv2 = f4; return x + 5; }\n\
         __device__ __noinline__ int f5(int x) { return x * 11 + 3; }\n\
         __global__ void k3(int *p) { p[0] = f5(p[1]); }\n",
    ),
    // an address taken by a kernel that makes no call, beside the kernel calling through
    // it: the first keeps its own registers (nvlinkrs gave it the function's, 24 for 8)
    (
        "pk.cu",
        "typedef int (*op_t)(int);\n\
         __device__ __noinline__ int sq(int x) { return x * x; }\n\
         __device__ op_t chosen;\n\
         __global__ void pick() { chosen = sq; }\n\
         __global__ void use(int *o) { o[threadIdx.x] = chosen(threadIdx.x); }\n",
    ),
    // a kernel calling another unit's function (the research report's a.cu and b.cu)
    (
        "ka.cu",
        "extern __device__ int helper(int x);\n__constant__ int cc[4] = {1, 2, 3, 4};\n\
         __device__ int dv = 3;\n\
         extern \"C\" __global__ void kern(int *p) { __shared__ int s[32];\n\
         s[threadIdx.x] = helper(p[threadIdx.x]) + cc[threadIdx.x & 3] + dv;\n\
         __syncthreads(); p[threadIdx.x] = s[31 - threadIdx.x]; }\n",
    ),
    (
        "kb.cu",
        "__device__ int helper(int x) { return x * x + 1; }\n\
         extern \"C\" __global__ void kb(int *p) { p[0] = helper(p[1]); }\n",
    ),
];

fn compile(dir: &Path) {
    for (name, text) in SOURCES {
        std::fs::write(dir.join(name), text).unwrap();
        let o = std::process::Command::new(cuda().join("bin/nvcc"))
            .args(["-dc", "-arch=sm_90", name, "-o"])
            .arg(name.replace(".cu", ".o"))
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
}

#[test]
fn address_taken_functions_and_emptied_links_as_nvlink() {
    let dir = tempfile::tempdir().unwrap();
    compile(dir.path());
    let o = |n: &str| dir.path().join(n).display().to_string();
    let merge = fixtures();
    let m = |n: &str| merge.join(n).display().to_string();
    let links: Vec<(&str, Vec<String>, bool)> = vec![
        ("taken by a kept kernel", vec![o("tk.o")], true),
        (
            "taken by a dropped kernel",
            vec![o("tk.o"), "-kernels-used=_Z2k2Pi".into()],
            true,
        ),
        ("taken by a function nothing calls", vec![o("tf.o")], true),
        (
            "taken by a kernel that makes no call",
            vec![o("pk.o")],
            true,
        ),
        (
            "taken by a function nothing calls, every kernel dropped",
            vec![o("tf.o"), "-kernels-used=nosuchkernel".into()],
            true,
        ),
        (
            "the merge fixtures, every kernel dropped",
            vec![m("a.o"), m("b.o"), "-kernels-used=nosuchkernel".into()],
            true,
        ),
        // (equivalent: nvlink's string table keeps the dropped kernel's shared section's
        // name)
        (
            "nothing kept: no .nv.info",
            vec![o("ka.o"), o("kb.o"), "-kernels-used=nosuchkernel".into()],
            false,
        ),
    ];
    let mut failures = Vec::new();
    for (what, mut a, identical) in links {
        a.insert(0, "-arch=sm_90".into());
        match differential(&a) {
            Ok(same) if same || !identical => {}
            Ok(_) => failures.push(format!("{what}: equivalent, not byte-identical")),
            Err(d) => failures.push(format!("{what}:\n    {d}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
