//! Dense `switch`es in `-rdc` device functions (issue 35, item 1): ptxas puts each
//! function's jump table in its own constant bank 2, which the driver does not load; nvlink
//! gives every such function one offset in the bank 2 of each kernel whose call tree holds
//! it, and patches the functions' `LDC c[0x2][…]` (and, at sm_100+, the capsule records
//! and the Mercury twin of each bank). nvlinkrs kept the functions' sections, wrote no bank
//! for the kernels and relocated each table as if at offset 0: wrong code, exit 0.
//! Fixtures `swfn.cu` (three switch functions, one with a 64-bit constant, one calling
//! another), `swk.cu` (kernels in another unit: two callees; an own switch and a callee
//! that calls another; one callee) and `swone.cu` (one unit, ptxas's per-caller clones).

use std::process::Command;

use super::{args, cuda, differential, nvlinkrs, run};

/// The links: two units at every target family, reversed, one unit, host objects, a
/// partial LTO link (the kernels' unit as IR), `-g` and `--preserve-relocs`.
fn links() -> Vec<(String, Vec<String>)> {
    let nvvm = format!("-nvvmpath={}", cuda().join("nvvm").display());
    let mut v = Vec::new();
    for sm in ["75", "80", "90", "100", "120"] {
        let arch = format!("-arch=sm_{sm}");
        v.push((
            format!("two units sm_{sm}"),
            args(&[
                &arch,
                &format!("swk_{sm}.cubin"),
                &format!("swfn_{sm}.cubin"),
            ]),
        ));
        v.push((
            format!("one unit sm_{sm}"),
            args(&[&arch, &format!("swone_{sm}.cubin")]),
        ));
    }
    for sm in ["90", "100"] {
        let arch = format!("-arch=sm_{sm}");
        let (k, f) = (format!("swk_{sm}.cubin"), format!("swfn_{sm}.cubin"));
        v.push((format!("reversed sm_{sm}"), args(&[&arch, &f, &k])));
        v.push((format!("-g sm_{sm}"), args(&["-g", &arch, &k, &f])));
        v.push((
            format!("--preserve-relocs sm_{sm}"),
            args(&["--preserve-relocs", &arch, &k, &f]),
        ));
        let (kd, fd) = (format!("swk_dc{sm}.o"), format!("swfn_dc{sm}.o"));
        v.push((format!("host objects sm_{sm}"), args(&[&arch, &kd, &fd])));
        let kl = format!("swk_lto{sm}.o");
        v.push((
            format!("partial LTO sm_{sm}"),
            args(&[&arch, "-dlto", &nvvm, &kl, &fd]),
        ));
    }
    v
}

/// Every link is nvlink's image byte for byte (`-g` links record the output's name, the
/// same here), with nvlink's messages and exit code.
#[test]
fn switch_tables_in_device_functions_are_nvlinks() {
    let mut failures = Vec::new();
    for (what, a) in links() {
        match differential(&a) {
            Ok(true) => {}
            Ok(false) => failures.push(format!("{what}: equivalent, not byte-identical")),
            Err(d) => failures.push(format!("{what}:\n    {d}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The bank-2 loads themselves, as the GPU runs them: each function's `LDC c[0x2][…]`
/// offsets in nvlinkrs' image are nvlink's (cuobjdump), and the kernels' banks hold the
/// tables (before: every callee read its table at offset 0 of a bank no kernel had).
#[test]
fn switch_table_loads_read_the_kernels_banks() {
    for sm in ["80", "90", "100"] {
        let a = args(&[
            &format!("-arch=sm_{sm}"),
            &format!("swk_{sm}.cubin"),
            &format!("swfn_{sm}.cubin"),
        ]);
        let dir = tempfile::tempdir().unwrap();
        let loads = |tool: &std::path::Path| {
            let out = run(tool, &a, dir.path()).output.expect("an image");
            let image = dir.path().join("image.cubin");
            std::fs::write(&image, out).unwrap();
            let sass = Command::new(cuda().join("bin/cuobjdump"))
                .arg("-sass")
                .arg(&image)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&sass.stdout).into_owned();
            let mut lines: Vec<String> = text
                .lines()
                .filter(|l| l.contains("Function :") || l.contains("c[0x2]"))
                .map(|l| l.split("/*").nth(1).unwrap_or(l).trim().to_string())
                .collect();
            lines.retain(|l| !l.is_empty());
            lines
        };
        let (want, got) = (loads(&cuda().join("bin/nvlink")), loads(&nvlinkrs()));
        assert!(
            want.iter().any(|l| l.contains("c[0x2]")),
            "sm_{sm}: no bank-2 load in nvlink's image"
        );
        assert_eq!(want, got, "sm_{sm}");
    }
}

/// `__constant__` variables read by `LDC` in a later unit's device functions and
/// kernels (the review's program: a kernel with constant tables and its own switch in the
/// first unit, switch-heavy callees reading a constant of their own in the second): at
/// sm_100+ the capsule records of those loads hold the variable's offset in the image's
/// `.nv.constant3` (0x120: after the first unit's 0x120 bytes), which nvlink writes and
/// ptxas leaves 0; nvlinkrs wrote the unit's own offsets (the finalizer's unit job's 0, 4,
/// 8), not equivalent. Compiled here with nvcc, at sm_100 and sm_120, both orders.
#[test]
fn constant_variable_loads_in_capsules_are_nvlinks() {
    const X: &str = "__constant__ int lut[64];
__constant__ float w[8] = {1, 2, 3, 4, 5, 6, 7, 8};
extern __device__ int decode(int op, int v);
__device__ __noinline__ int local_sw(int k) { switch (k) { case 0: return lut[1];
  case 1: return lut[3]; case 2: return lut[5]; case 3: return lut[7]; case 4: return 11;
  case 5: return 13; case 6: return lut[9]; case 7: return 17; case 8: return 19;
  case 9: return lut[2]; default: return 0; } }
__global__ void vm(const int *code, int n, float *out) {
  int acc = 0; float f = 0;
  for (int i = 0; i < n; ++i) { acc = decode(code[i], acc) + local_sw(code[i] & 15); f += w[i & 7] * acc; }
  out[threadIdx.x] = f + lut[threadIdx.x & 63];
}
";
    const Y: &str = "__constant__ int ybias[3] = {5, 6, 7};
__device__ __noinline__ int decode(int op, int v) { switch (op & 15) { case 0: return v + ybias[0];
  case 1: return v - 3; case 2: return v * ybias[1]; case 3: return v ^ 0x55; case 4: return v << 1;
  case 5: return v >> 2; case 6: return v + ybias[2]; case 7: return v - 9; case 8: return v | 7;
  case 9: return ~v; case 10: return v * 5; default: return v; } }
__global__ void yk(int *p) { p[threadIdx.x] = decode(p[threadIdx.x], ybias[threadIdx.x % 3]); }
";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("x.cu"), X).unwrap();
    std::fs::write(dir.path().join("y.cu"), Y).unwrap();
    let mut failures = Vec::new();
    for sm in ["sm_100", "sm_120"] {
        let mut objs = Vec::new();
        for u in ["x", "y"] {
            let o = dir.path().join(format!("{u}_{sm}.o"));
            let ok = Command::new(cuda().join("bin/nvcc"))
                .current_dir(dir.path())
                .args(["-dc", &format!("-arch={sm}"), &format!("{u}.cu"), "-o"])
                .arg(&o)
                .status()
                .unwrap()
                .success();
            assert!(ok, "nvcc {u}.cu at {sm}");
            objs.push(o.display().to_string());
        }
        for order in [[0, 1], [1, 0]] {
            let a = vec![
                format!("-arch={sm}"),
                objs[order[0]].clone(),
                objs[order[1]].clone(),
            ];
            match differential(&a) {
                Ok(true) => {}
                Ok(false) => failures.push(format!("{a:?}: equivalent, not byte-identical")),
                Err(d) => failures.push(format!("{a:?}:\n    {d}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
