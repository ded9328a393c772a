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

use super::review::compiled;
use super::{args, cuda, differential, identical_all, nvlinkrs, run};

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
/// 8), not equivalent. `cvx.cu` and `cvy.cu` compiled here with nvcc, at sm_100 and
/// sm_120, both orders. (The same as LTO IR beside libcudadevrt through the drop-in:
/// tests/jitlink.rs' `lto_devrt_constants_sm_100`.)
#[test]
fn constant_variable_loads_in_capsules_are_nvlinks() {
    let dir = tempfile::tempdir().unwrap();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/merge");
    for (u, f) in [("x", "cvx.cu"), ("y", "cvy.cu")] {
        std::fs::copy(src.join(f), dir.path().join(format!("{u}.cu"))).unwrap();
    }
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

/// A `switch` function defined in two units (a template and an `inline` function from one
/// header, `__noinline__`): nvlink's kernel banks hold the replaced copy's table right after
/// the kept one's, unread, and its null symbols' values say where the last went; at sm_100+
/// the replaced copy's Mercury relocations follow the kept copy's in the input's order
/// (attacker review of 2026-11-30: 0x9c-byte banks where nvlinkrs wrote 0x5c, so another
/// function's reads had other offsets). Two units and three, sm_75 to sm_120a.
#[test]
fn weak_switch_functions_defined_twice_keep_both_tables_as_nvlink() {
    let header = "template <typename T> __device__ __noinline__ T tsw(T x, int k) { switch (k) {\n\
                  case 0: return x + 1; case 1: return x * 3; case 2: return x - 7; case 3: return x * x;\n\
                  case 4: return x + 11; case 5: return x * 5; case 6: return -x; case 7: return x / 3; default: return x; } }\n\
                  inline __device__ __noinline__ int inl(int x, int k) { switch (k) { case 0: return x ^ 1; case 1: return x ^ 2;\n\
                  case 2: return x ^ 4; case 3: return x ^ 8; case 4: return x ^ 16; case 5: return x ^ 32; case 6: return x ^ 64; default: return 0; } }\n";
    let a = format!(
        "{header}__global__ void ka(int *o, int k) {{ o[threadIdx.x] = tsw<int>(o[threadIdx.x], k) + inl(k, k + 1); }}\n\
         __global__ void ka2(float *o, int k) {{ o[threadIdx.x] = tsw<float>(o[threadIdx.x], k); }}\n"
    );
    let b = format!(
        "{header}__device__ __noinline__ int bsw(int x, int k) {{ switch (k) {{ case 0: return x + 100; case 1: return x + 200;\n\
         case 2: return x + 300; case 3: return x + 400; case 4: return x + 500; case 5: return x + 600; default: return 7; }} }}\n\
         __global__ void kb(int *o, int k) {{ o[threadIdx.x] = bsw(o[threadIdx.x], k) + tsw<int>(o[threadIdx.x], k) + inl(k, k); }}\n\
         __global__ void kb2(long long *o, int k) {{ o[threadIdx.x] = tsw<long long>(o[threadIdx.x], k); }}\n"
    );
    let c = format!(
        "{header}__global__ void kc(double *o, int k) {{ o[threadIdx.x] = tsw<double>(o[threadIdx.x], k) + inl(k, 3) + tsw<int>(k, k); }}\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for sm in ["sm_75", "sm_80", "sm_90a", "sm_100a", "sm_120a"] {
        let [a, b, c] = [("wa", &a), ("wb", &b), ("wc", &c)]
            .map(|(n, t)| compiled(dir.path(), n, t, sm, &[]).display().to_string());
        let arch = format!("-arch={sm}");
        links.push((
            format!("two units {sm}"),
            vec![arch.clone(), a.clone(), b.clone()],
        ));
        links.push((format!("three units {sm}"), vec![arch, a, b, c]));
    }
    let failures = identical_all(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
