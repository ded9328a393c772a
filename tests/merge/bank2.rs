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

/// A function reading `__constant__` data in every form at once (new-user and attacker
/// reviews of 2026-12-01): predicated reads at a fixed offset, reads at a register (whose
/// variable's address another instruction's relocation gives, with no record of its own),
/// uniform loads of 8 to 128 bits (`LDCU.128` of a `uint4` key), in one unit and across
/// two. A capsule's records pair with the relocations whose SASS twins read the bank;
/// nvlinkrs paired them by order and form and left 12 of 76 generated programs' offsets
/// other than nvlink's (most silently). The AES-like kernel's `LDCU.128` has a record of a
/// width the first reading by SASS twins did not list (it warned, 4 reads, 3 records).
#[test]
fn capsule_records_of_mixed_constant_reads_are_nvlinks() {
    let mixed = "#include <cuda_bf16.h>\n\
        __constant__ char c4[4];\n__constant__ long long t64[64];\n\
        __constant__ __nv_bfloat16 hb;\n__constant__ short s0, s4;\n\
        __device__ __noinline__ float f(int a, int b, int c) {\n\
          float r = 0.f;\n\
          switch (c & 7) {\n\
            case 0: if (b < 0) r *= a > -1 ? c4[0] : c4[c & 3]; else if (b & 4) { if (c4[a & 3] > r) r = __bfloat162float(hb); } else r += t64[42]; break;\n\
            case 2: r += s4; break;\n\
          }\n\
          if (b > 2) r += c4[0];\n\
          else if (c & 3) { for (int k = 0; k < 7; ++k) { if (r > c4[k & 3]) break; r += s0; } }\n\
          return r;\n}\n\
        __global__ void k(float *o, const int *in) { int t = threadIdx.x; o[t] = f(in[t], in[t + 1], in[t + 2]); }\n";
    let header = "struct S { unsigned short us0; double d1[2]; short s2[5]; unsigned char uc3[5]; };\n\
        extern __constant__ S g_s;\nextern __constant__ char g_c0[16];\n\
        extern __constant__ double g_d1[4];\nextern __constant__ float g_f2[64];\n\
        extern __constant__ float2 g_f23;\n";
    let defs = format!(
        "{header}__constant__ S g_s;\n__constant__ char g_c0[16];\n__constant__ double g_d1[4];\n\
         __constant__ float g_f2[64];\n__constant__ float2 g_f23;\n"
    );
    let kernel = format!(
        "{header}__global__ void k0(float *o, const int *in) {{\n\
           int t = blockIdx.x * blockDim.x + threadIdx.x;\n\
           int a = in[t], b = in[t + 1], c = in[t + 2];\n\
           float r = in[t + 3];\n\
           switch (b & 7) {{\n\
             case 2: switch (a & 7) {{\n\
               case 0: r *= a > 0 ? g_f2[(a >> 1) & 63] : (float)g_s.d1[a % 2]; break;\n\
               case 2: if (g_d1[0] > r) r = g_s.us0; break;\n\
               default: r -= g_f23.x; }} break;\n\
             case 4: if (a > 2) r += g_s.us0; else r -= g_c0[0]; break;\n\
             case 5: if (c > 1) r += (float)g_d1[3]; else r -= g_c0[c & 15]; break;\n\
           }}\n\
           o[t] = r;\n}}\n"
    );
    let aes = "#include <stdint.h>\n\
        __constant__ uint8_t c_sbox[256];\n__constant__ uint4 c_round_keys[11];\n\
        __constant__ struct Cfg { uint32_t seed; uint16_t rounds; uint8_t variant; } c_cfg;\n\
        __device__ __noinline__ uint32_t sub_word(uint32_t w) {\n\
          return c_sbox[w & 0xff] | ((uint32_t)c_sbox[(w >> 8) & 0xff] << 8) | ((uint32_t)c_sbox[w >> 24] << 24);\n}\n\
        __global__ void aes_like(uint4 *state, int n) {\n\
          int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
          if (i >= n) return;\n\
          uint4 s = state[i];\n\
          s.x ^= c_round_keys[0].x; s.y ^= c_round_keys[0].y; s.z ^= c_round_keys[0].z; s.w ^= c_round_keys[0].w;\n\
          int rounds = c_cfg.rounds < 10 ? c_cfg.rounds : 10;\n\
          for (int r = 1; r <= rounds; ++r) {\n\
            s.x = sub_word(s.x) ^ c_round_keys[r].x; s.y = sub_word(s.y) ^ c_round_keys[r].y;\n\
            if (c_cfg.variant == 3 && r == 5) break;\n\
          }\n\
          state[i] = s;\n}\n";
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for sm in ["sm_100a", "sm_120a"] {
        let arch = format!("-arch={sm}");
        let path = |p: std::path::PathBuf| p.display().to_string();
        let m = path(compiled(dir.path(), "mixed", mixed, sm, &[]));
        let d = path(compiled(dir.path(), "mixed_defs", &defs, sm, &[]));
        let k = path(compiled(dir.path(), "mixed_kernel", &kernel, sm, &[]));
        let a = path(compiled(dir.path(), "aes_like", aes, sm, &[]));
        links.push((format!("one unit {sm}"), vec![arch.clone(), m]));
        links.push((format!("two units {sm}"), vec![arch.clone(), d, k]));
        links.push((format!("128-bit loads {sm}"), vec![arch, a]));
    }
    let failures = identical_all(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
