//! What a differential sweep on CUTLASS found (issue 35: examples 00, 08, 14, 48 and 70,
//! CUTLASS main, at sm_75 to sm_100a, plain, `-r`, `-lineinfo`, `-g` and `-dlto`, 68 link
//! pairs), each test failing before its fix, on small programs of the same constructs:
//! tcgen05's reserved shared variable, whose address the code reads; a `__noinline__`
//! function's `switch` over a `__constant__` table, whose capsule records nvlink writes;
//! a debug link's tool note, which names nvcc's registration file by its name alone. The
//! sources are compiled here with the pinned nvcc.

use std::path::Path;

use super::review::compiled;
use super::{identical_all as identical, run};

/// tcgen05's allocator writes the tensor-memory address into shared memory that ptxas
/// reserves, `__nv_reservedSMEM_tcgen05_partition` (defined in `.nv.shared.reserved.0`,
/// its value there its alignment): nvlink applies the code's references to it
/// (`UMOV UR4, 0x40`) and keeps the capsule's for the driver. Was: both kept, the SASS
/// reading address 0, in every CUTLASS Blackwell GEMM (example 70) without `-lineinfo`.
#[test]
fn tcgen05_reserved_shared_memory_is_at_its_place_in_the_code() {
    let tc = r#"#include <cstdint>
__global__ void tc_kernel(uint32_t *out) {
  __shared__ uint32_t slot;
  if (threadIdx.x < 32) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(&slot);
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" :: "r"(a));
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
    __syncwarp();
    uint32_t t = slot;
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 32;" :: "r"(t));
    out[threadIdx.x] = t;
  }
}
void launch(uint32_t *o) { tc_kernel<<<1, 32>>>(o); }
"#;
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    // (`-arch=sm_100a` also compiles PTX for the plain target, which has no tcgen05: the
    // `a` target's code alone, as CUTLASS builds it)
    for (sm, virt) in [("sm_100a", "compute_100a"), ("sm_110a", "compute_110a")] {
        for extra in [&[][..], &["-lineinfo"][..]] {
            let gencode = format!("-gencode=arch={virt},code={sm}");
            let mut flags = vec![gencode.as_str()];
            flags.extend(extra);
            let o = compiled(dir.path(), "tc", tc, sm, &flags);
            let what = format!("tcgen05 {sm} {extra:?}");
            links.push((what, vec![format!("-arch={sm}"), o.display().to_string()]));
        }
    }
    let failures = identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A `__noinline__` device function whose `switch` reads a `__constant__` table at fixed
/// indices and at a computed one: its capsule has a record per read, the indexed read's
/// of another form, which takes a relocation but keeps its operand. nvlink writes the
/// table's offsets in the image into the others (0x74, 0x68, 0x7c with another unit's
/// table first). Was: four relocations and two records recognised, the capsule left as
/// ptxas wrote it with a warning (and the warning where the offsets happened to be right).
#[test]
fn a_switch_over_a_constant_table_gets_its_offsets_in_the_capsule() {
    let helper = r#"__constant__ float g_scale_table[16] = {1.f,2.f,3.f,4.f,5.f,6.f,7.f,8.f,9.f,10.f,11.f,12.f,13.f,14.f,15.f,16.f};
__device__ int g_counter;
extern "C" __device__ __noinline__ float helper_switch(int k, float x) {
  switch (k & 7) {
    case 0: return x * g_scale_table[0];
    case 1: return x + g_scale_table[3];
    case 2: return x - g_scale_table[5];
    case 3: return x * x;
    case 4: return -x;
    case 5: return x * 0.5f + g_scale_table[k & 15];
    case 6: atomicAdd(&g_counter, 1); return x;
    default: return x + 1.f;
  }
}
"#;
    let user = r#"extern "C" __device__ float helper_switch(int k, float x);
extern __constant__ float g_scale_table[16];
__global__ void extra_kernel(float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = helper_switch(i, out[i]) + g_scale_table[i & 15];
}
void launch_extra(float *out, int n) { extra_kernel<<<(n + 127) / 128, 128>>>(out, n); }
"#;
    let first = "__constant__ int c_first[26] = {1, 2, 3};\n__global__ void first_kernel(int *o) { o[threadIdx.x] = c_first[threadIdx.x % 26]; }\nvoid launch_first(int *o) { first_kernel<<<1, 32>>>(o); }\n";
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for sm in ["sm_100a", "sm_120"] {
        for extra in [&[][..], &["-lineinfo"][..]] {
            let h = compiled(dir.path(), "helper", helper, sm, extra);
            let u = compiled(dir.path(), "user", user, sm, extra);
            let f = compiled(dir.path(), "first", first, sm, extra);
            for (order, objs) in [
                ("table at 0", vec![&u, &h]),
                ("table after", vec![&f, &u, &h]),
            ] {
                let mut args = vec![format!("-arch={sm}")];
                args.extend(objs.iter().map(|o| o.display().to_string()));
                links.push((format!("switch {sm} {extra:?} {order}"), args));
            }
        }
    }
    let failures = identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// nvcc's device link of `-G` code passes `--register-link-binaries` (and a user `-time`)
/// as absolute paths in `/tmp`; a debug link's tool note records both by their names
/// alone, as it records the inputs and the output. Was: the path as given, so every
/// nvcc-driven debug link's note differed from nvlink's.
#[test]
fn a_debug_links_note_names_its_registration_and_time_files_alone() {
    let src = "__global__ void k(int *o) { o[0] = 1; }\nvoid launch(int *o) { k<<<1, 1>>>(o); }\n";
    let dir = tempfile::tempdir().unwrap();
    let o = compiled(dir.path(), "dbg", src, "sm_80", &["-G"]);
    let files = |tag: &str| -> Vec<String> {
        let sub = dir.path().join(tag);
        std::fs::create_dir_all(&sub).unwrap();
        let at = |name: &str| sub.join(name).display().to_string();
        vec![
            "-arch=sm_80".into(),
            "-g".into(),
            format!("--register-link-binaries={}", at("dlink.reg.c")),
            "-time".into(),
            at("times.csv"),
            o.display().to_string(),
        ]
    };
    // (the same names, in a folder of each linker's: `run` writes both outputs to one
    // `out.cubin`)
    let nv = run(
        &super::cuda().join("bin/nvlink"),
        &files("theirs"),
        dir.path(),
    );
    let ours = run(&super::nvlinkrs(), &files("ours"), dir.path());
    assert_eq!(
        (nv.code, ours.code),
        (0, 0),
        "{:?} {:?}",
        nv.messages,
        ours.messages
    );
    let (nv, ours) = (nv.output.unwrap(), ours.output.unwrap());
    let r = nvlinkrs::elf::equiv::compare(&nv, &ours).unwrap();
    assert!(r.identical, "{:?} {:?}", r.differences, r.notes);
    assert!(Path::new(&dir.path().join("ours/dlink.reg.c")).is_file());
}

/// sm_110a's tcgen05 code has two reserved shared variables, the tensor-memory slot
/// (aligned 1) and `__nv_reservedSMEM_gb10b_war_var` (aligned 16), and lists the slot first
/// where a `__noinline__` function allocates: nvlink puts the 16-aligned variable first
/// (0x40) and the slot after it (0xc0), whatever the symbol order. Was: in symbol order, the
/// code reading the slot at 0x40, where the other variable lies. (The code and the
/// variables are checked on their own, then the whole image: the kernel's `.nv.info`
/// takes the callee's tensor-memory records, tensor.rs.)
#[test]
fn reserved_shared_variables_are_laid_out_as_nvlink_lays_them_out() {
    use nvlinkrs::bytes::Bytes;
    use nvlinkrs::elf::cubin::Cubin;
    let src = r#"#include <cstdint>
__device__ __noinline__ void dev_alloc(uint32_t *out) {
  __shared__ uint32_t addr;
  uint32_t sa = (uint32_t)__cvta_generic_to_shared(&addr);
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" :: "r"(sa));
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
  __syncthreads();
  uint32_t t = addr;
  asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 32;" :: "r"(t));
  out[threadIdx.x] = t;
}
__global__ void kdev(uint32_t *out) { dev_alloc(out); }
void launch(uint32_t *o) { kdev<<<1, 32>>>(o); }
"#;
    let dir = tempfile::tempdir().unwrap();
    let o = compiled(
        dir.path(),
        "alloc",
        src,
        "sm_110a",
        &["-gencode=arch=compute_110a,code=sm_110a"],
    );
    let args = vec!["-arch=sm_110a".to_string(), o.display().to_string()];
    let nv = run(&super::cuda().join("bin/nvlink"), &args, dir.path());
    let ours = run(&super::nvlinkrs(), &args, dir.path());
    assert_eq!(
        (nv.code, ours.code),
        (0, 0),
        "{:?} {:?}",
        nv.messages,
        ours.messages
    );
    let (nv, ours) = (nv.output.unwrap(), ours.output.unwrap());
    let whole = nvlinkrs::elf::equiv::compare(&nv, &ours).unwrap();
    let parse = |d: Vec<u8>| Cubin::parse(Bytes::from_vec(d), "image").unwrap();
    let (nv, ours) = (parse(nv), parse(ours));
    let code = |c: &Cubin| -> Vec<(String, Vec<u8>)> {
        (c.sections.iter())
            .filter(|s| s.name.starts_with(".text."))
            .map(|s| (s.name.to_string(), c.bytes(s).to_vec()))
            .collect()
    };
    assert!(code(&nv) == code(&ours), "the code differs");
    let reserved = |c: &Cubin| -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = (c.symbols.iter())
            .filter(|s| s.name.starts_with("__nv_reservedSMEM"))
            .map(|s| (s.name.to_string(), s.value))
            .collect();
        v.sort();
        v
    };
    assert_eq!(reserved(&nv), reserved(&ours));
    assert_eq!(reserved(&ours).len(), 2);
    assert!(whole.identical, "{:?}", whole.differences);
}

/// A `__noinline__` function reading one `__constant__` table at the indices another gives,
/// in a loop: its capsule has a record per direct read of the index table, which nvlink
/// writes, and one per indexed read of the other, which it leaves; more records than
/// relocations (16 and 16 against 17 in the unrolled loop). nvlink writes the direct
/// reads' offsets in order (found by the second attacker review, sm_100+). Was: the capsule
/// left as ptxas wrote it, with a warning.
#[test]
fn a_table_read_at_another_tables_indices_gets_its_capsule_offsets() {
    let two =
        "__constant__ float coef[256];\n__constant__ int idx[64] = {3, 1, 4, 1, 5, 9, 2, 6};\n";
    let loop2 = "__device__ __noinline__ float filt(const float *x, int i) { float s = 0; for (int j = 0; j < 2; j++) s += coef[(i + j) & 255] * x[idx[j]]; return s; }\n\
                 __global__ void k(float *o, const float *x) { o[threadIdx.x] = filt(x, threadIdx.x); }\n";
    let loop16 = "__device__ __noinline__ float filt(const float *x, int i) { float s = 0; for (int j = 0; j < 16; j++) s += coef[(i + j) & 255] * x[idx[j]]; return s; }\n\
                  __global__ void k(float *o, const float *x) { o[threadIdx.x] = filt(x, threadIdx.x); }\n\
                  __global__ void k2(float *o, const float *x) { o[threadIdx.x] = filt(x + 1, threadIdx.x * 3) + coef[threadIdx.x]; }\n";
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for (name, body) in [("two_reads", loop2), ("sixteen_reads", loop16)] {
        for sm in ["sm_100a", "sm_120a"] {
            let virt = sm.replace("sm_", "compute_");
            let gencode = format!("-gencode=arch={virt},code={sm}");
            let o = compiled(dir.path(), name, &format!("{two}{body}"), sm, &[&gencode]);
            links.push((
                format!("{name} {sm}"),
                vec![format!("-arch={sm}"), o.display().to_string()],
            ));
        }
    }
    let failures = identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// sm_100+ capsule records of `__constant__` reads of every width: an `unsigned char`, a
/// `short`, an `unsigned short`, a `__half` table (byte 6 of the record 0x02, 0x32, 0x22),
/// in a `__noinline__` function, a kernel that makes a call, another unit's variables, and
/// beside 32- and 64-bit reads; and a function reading another unit's table directly and at
/// an index (the direct read's record in the indexed form); a `switch` reading `c[k]` in
/// each case and `c[op & 63]` in its default (`c[0]` read directly and at an index: the
/// relocations' kinds taken in the code's order). nvlink writes each offset.
/// Was: left 0 as ptxas wrote them, silently (or, beside other widths, with a warning and
/// every record of the function left), so a driver finalizing the capsule for another GPU
/// would read `c[0x3][0]`. Found by the attacker review of 2026-11-30.
#[test]
fn constant_reads_of_every_width_get_their_capsule_offsets() {
    let pad = "__constant__ int pad0[3] = {7, 8, 9};\n";
    let kernel = "__global__ void ka(int *o) { o[threadIdx.x] = fa(threadIdx.x); }\n";
    let one_unit: Vec<(&str, String)> = vec![
        ("uchar", format!("{pad}__constant__ unsigned char u1 = 5;\n__device__ __noinline__ int fa(int t) {{ return u1 + t; }}\n{kernel}")),
        ("short", format!("{pad}__constant__ short s1 = 5;\n__device__ __noinline__ int fa(int t) {{ return s1 + t; }}\n{kernel}")),
        (
            "short_in_caller",
            format!("{pad}__constant__ short s1 = 5;\n__device__ __noinline__ int g(int t) {{ return t * 3; }}\n\
                     __global__ void kk(int *o) {{ o[threadIdx.x] = s1 + g(threadIdx.x); }}\n"),
        ),
        (
            "half_table",
            "#include <cuda_fp16.h>\n__constant__ float pad0[3] = {7, 8, 9};\n__constant__ __half htab[8];\n\
             __device__ __noinline__ float hf(int t) { return __half2float(htab[t & 7]) + __half2float(htab[2]); }\n\
             __global__ void kh(float *o) { o[threadIdx.x] = hf(threadIdx.x) + pad0[1]; }\n"
                .to_string(),
        ),
        (
            "switch_with_an_indexed_default",
            format!("__constant__ float c_coef[64];\n__device__ __noinline__ float op_eval(int op, float x) {{ switch (op) {{\n{}\
                     default: return c_coef[op & 63]; }} }}\n\
                     __global__ void k(float *o) {{ o[threadIdx.x] = op_eval(threadIdx.x, o[1]); }}\n",
                (0..12).map(|k| format!("case {k}: return x * {} + c_coef[{k}];\n", k + 3)).collect::<String>()),
        ),
        (
            "mixed_widths",
            format!("{pad}__constant__ float ca = 2.0f, cb = 3.0f;\n__constant__ double da = 1.5, db = 2.5;\n\
                     __constant__ int ia = 5, ib = 7;\n__constant__ unsigned short us = 9;\n\
                     __device__ __noinline__ float fa(float x, double y, int z) {{ return x * ca + cb + (float)(y * da + db) + z * ia + ib + us; }}\n\
                     __global__ void ka(float *o) {{ o[threadIdx.x] = fa(o[threadIdx.x], o[1], threadIdx.x); }}\n"),
        ),
    ];
    let two_units: [(&str, &str, &str); 2] = [
        (
            "another_units_narrow",
            "extern __constant__ short sv[8];\nextern __constant__ unsigned char uv[8];\n\
             __device__ __noinline__ int fx(int t) { return sv[3] + uv[5] + t; }\n\
             __global__ void k(int *o) { o[threadIdx.x] = fx(threadIdx.x); }\n",
            "__constant__ int padb[5] = {1, 2, 3, 4, 5};\n__constant__ short sv[8] = {1, 2, 3, 4, 5, 6, 7, 8};\n\
             __constant__ unsigned char uv[8] = {1, 2, 3, 4, 5, 6, 7, 8};\n\
             __global__ void kb(int *o) { o[threadIdx.x] = padb[threadIdx.x % 5]; }\n",
        ),
        (
            "another_units_table_direct_and_indexed",
            "extern __constant__ int tab[16];\n__constant__ int own_b[3] = {9, 9, 9};\n\
             __device__ __noinline__ int rb(int t) { return tab[t & 15] + tab[4] + own_b[1]; }\n\
             __global__ void kb(int *o) { o[threadIdx.x] = rb(threadIdx.x); }\n",
            "__constant__ float pad_a[5] = {1, 2, 3, 4, 5};\n__constant__ int tab[16] = {1, 2, 3, 4, 5, 6, 7, 8};\n\
             __global__ void ka(int *o) { o[threadIdx.x] = tab[threadIdx.x & 15] + (int)pad_a[2]; }\n",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for sm in ["sm_100a", "sm_120a"] {
        let arch = format!("-arch={sm}");
        for (name, src) in &one_unit {
            let o = compiled(dir.path(), name, src, sm, &[]);
            links.push((
                format!("{name} {sm}"),
                vec![arch.clone(), o.display().to_string()],
            ));
        }
        for (name, reader, definer) in &two_units {
            let r = compiled(dir.path(), &format!("{name}_r"), reader, sm, &[]);
            let d = compiled(dir.path(), &format!("{name}_d"), definer, sm, &[]);
            links.push((
                format!("{name} {sm}"),
                vec![
                    arch.clone(),
                    r.display().to_string(),
                    d.display().to_string(),
                ],
            ));
        }
    }
    let failures = identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A function reading another unit's `__constant__` struct (members of every width), a
/// third unit's table and its own tables, directly, at an index and in a `switch`'s cases
/// (attacker review of 2026-11-30): its 16-bit capsule records are as many as the
/// function's own variables' relocations, by chance, but they are the direct reads' records
/// (four were written with other reads' offsets or left 0), sm_100a and sm_120a.
#[test]
fn a_function_reading_three_units_constants_gets_each_capsule_offset() {
    let a = "struct P { char c; short s; int i; double d; float f[5]; long long q; unsigned char u8[3]; };\n\
             __constant__ char pad_a[3] = {1, 2, 3};\nextern __constant__ P params;\nextern __constant__ double dtab[16];\n\
             __constant__ short stab[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};\n\
             __device__ __noinline__ double fa(int t) {\n\
               double r = params.d + params.c + params.s + params.i + params.f[t % 5] + params.q + params.u8[t % 3];\n\
               r += dtab[t & 15] + dtab[3] + stab[t % 9] + stab[2] + pad_a[t % 3] + pad_a[1];\n\
               switch (t & 7) { case 0: r += params.f[0]; break; case 1: r *= params.f[1]; break; case 2: r -= dtab[7]; break;\n\
               case 3: r += stab[8]; break; case 4: r /= params.d; break; case 5: r += params.q; break; case 6: r -= params.c; break; default: r = 0; }\n\
               return r;\n}\n\
             __global__ void ka(double *o) { o[threadIdx.x] = fa(threadIdx.x); }\n\
             __global__ void ka2(double *o) { o[threadIdx.x] = params.f[threadIdx.x % 5] + dtab[threadIdx.x & 15] + stab[threadIdx.x % 9]; }\n";
    let b = "struct P { char c; short s; int i; double d; float f[5]; long long q; unsigned char u8[3]; };\n\
             __constant__ char pad_b[5] = {1, 2, 3, 4, 5};\n__constant__ P params = {1, 2, 3, 4.0, {5, 6, 7, 8, 9}, 10, {11, 12, 13}};\n\
             extern __device__ double fa(int t);\n\
             __device__ __noinline__ double fb(int t) { return fa(t) + params.u8[t % 3] + pad_b[t % 5] + params.f[2]; }\n\
             __global__ void kb(double *o) { o[threadIdx.x] = fb(threadIdx.x); }\n";
    let c = "__constant__ float pad_c[7] = {1};\n__constant__ double dtab[16] = {1, 2, 3, 4, 5, 6, 7, 8};\n\
             __device__ __noinline__ double fc(int t) { return dtab[t & 15] * pad_c[t % 7] + dtab[5]; }\n\
             __global__ void kc(double *o) { o[threadIdx.x] = fc(threadIdx.x); }\n";
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for sm in ["sm_100a", "sm_120a"] {
        let mut args = vec![format!("-arch={sm}")];
        for (name, src) in [("a", a), ("b", b), ("c", c)] {
            let o = compiled(dir.path(), &format!("{name}_{sm}"), src, sm, &[]);
            args.push(o.display().to_string());
        }
        links.push((format!("three units {sm}"), args));
    }
    let failures = identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Reads of `__constant__` variables under one predicate in a `__noinline__` function
/// (`if (t > 5) r += gd + gc;`: `@P0 LDC.S8`, `@P0 LDC.64`, and `__half`, `unsigned short`
/// and `signed char` reads under two), sm_100a and sm_120a: nvlink writes their 16-bit
/// capsule records, whose byte 4 is 0 or 8, as it writes the others; nvlinkrs left them 0
/// (attacker review of 2026-11-30).
#[test]
fn predicated_constant_reads_get_their_capsule_offsets() {
    let programs = [
        (
            "two_under_one",
            "__constant__ double gd; __constant__ char gc; __constant__ float ff[16];\n\
             __device__ __noinline__ double fb(int t) { double r = t; if (t > 5) r += gd + gc; return r; }\n\
             __global__ void ka(double *o) { int t = threadIdx.x; o[t] = fb(t) + ff[t & 15]; }\n",
        ),
        (
            "narrow_under_two",
            "#include <cuda_fp16.h>\n__constant__ __half h1, h2; __constant__ unsigned short us; __constant__ signed char sc;\n\
             __device__ __noinline__ float fb(int t) { float r = t; if (t > 5) r += __half2float(h1) + __half2float(h2);\n\
             if (t > 9) r += us + sc; return r; }\n\
             __global__ void ka(float *o) { int t = threadIdx.x; o[t] = fb(t); }\n",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let links = one_unit_each(dir.path(), &programs, &["sm_100a", "sm_120a"]);
    let failures = identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A link of each (name, source) alone, compiled (`-dc`) for each of `sms`.
fn one_unit_each(
    dir: &Path,
    programs: &[(&str, &str)],
    sms: &[&str],
) -> Vec<(String, Vec<String>)> {
    let mut links = Vec::new();
    for sm in sms {
        for (name, src) in programs {
            let o = compiled(dir, name, src, sm, &[]);
            let args = vec![format!("-arch={sm}"), o.display().to_string()];
            links.push((format!("{name} {sm}"), args));
        }
    }
    links
}

/// From a new user's programs (review of 2026-11-30), sm_100a and sm_120a: a kernel reading
/// another unit's `__constant__` struct under a predicate and handing `&g_p[1]` to a
/// function (its relocation of the indexed form has no capsule record: nvlinkrs left the
/// two predicated reads' records 0); and a unit of `__constant__` data alone linked first
/// (its `.nv.compat` says `CAN_FASTPATH_FINALIZE` 0x50 at sm_120a, the kernel's unit 0x10;
/// nvlink writes the unit with code's, nvlinkrs wrote the first input's). And (review of
/// 2026-12-01) a unit whose one function no kernel calls: the image keeps no code, and
/// nvlink writes an image without code's 0x50 at sm_120a where the unit says 0x10.
#[test]
fn a_new_users_constant_struct_programs_are_nvlinks() {
    let data = "#include <cuda_fp16.h>\nstruct P { double c[4]; __half h[4]; };\n\
                __constant__ P g_p[2] = {{{1, 2, 3, 4}}, {{0.5, 0.25, 0, 0}}};\n";
    let reader = "#include <cuda_fp16.h>\nstruct P { double c[4]; __half h[4]; };\nextern __constant__ P g_p[2];\n\
                  __device__ __noinline__ float helper(const P &p, float x) { return x * (float)p.c[2]; }\n\
                  __global__ void gk(const float *in, float *out) {\n\
                    int i = blockIdx.x * blockDim.x + threadIdx.x; float acc = in[i];\n\
                    if (acc > 0.5f) acc += (float)g_p[1].c[1] * __half2float(g_p[0].h[2]);\n\
                    out[i] = helper(g_p[1], acc); }\n";
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for sm in ["sm_100a", "sm_120a"] {
        let d = compiled(dir.path(), "data", data, sm, &[])
            .display()
            .to_string();
        let r = compiled(dir.path(), "reader", reader, sm, &[])
            .display()
            .to_string();
        let arch = format!("-arch={sm}");
        links.push((
            format!("reader first {sm}"),
            vec![arch.clone(), r.clone(), d.clone()],
        ));
        links.push((format!("data first {sm}"), vec![arch.clone(), d, r]));
        let unused = "__device__ __noinline__ int get() { return 3; }\n";
        let u = compiled(dir.path(), "unused", unused, sm, &[]);
        links.push((
            format!("no code kept {sm}"),
            vec![arch, u.display().to_string()],
        ));
    }
    let failures = identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A new user's FIR filter (review of 2026-11-30), sm_100a: the kernel reads another unit's
/// `__constant__` struct in a loop (four reads at an index of the struct's base) and its
/// members and two tables under two predicates (16-bit records whose byte 4 is 8 and 9):
/// nvlinkrs wrote other reads' offsets into those records (0xa0 where nvlink writes 0x20).
/// With a forced-inline `switch` reading a table at an index, the kernel's code is the
/// finalizer's (its control words: the first `LDC R1` without a scoreboard): nvlinkrs kept
/// ptxas's, since the finalizer's capsule had those predicated records written, the unit's
/// 0, and the capsules were compared with them. sm_100a and sm_120a.
#[test]
fn a_new_users_fir_filter_gets_its_capsule_offsets() {
    let header = "struct FilterParams { float coef[8]; double scale; int taps; short bias[4]; };\n\
                  extern __constant__ float g_coef[16];\nextern __constant__ double g_dcoef[8];\n\
                  extern __constant__ FilterParams g_fp;\n";
    let defs = format!(
        "{header}__constant__ float g_coef[16] = {{0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f}};\n\
         __constant__ double g_dcoef[8] = {{1.0, 0.5, 0.25, 0.125}};\n\
         __constant__ FilterParams g_fp = {{{{0.5f, 0.25f, 0.125f, 0.0625f, 0.03f, 0.02f, 0.01f, 0.005f}}, 2.5, 5, {{1, -1, 2, -2}}}};\n"
    );
    let fir = format!(
        "{header}__global__ void fir_kernel(const float *in, float *out, int n, float k) {{\n\
           __shared__ float tile[256 + 8];\n\
           int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
           tile[threadIdx.x] = i < n ? in[i] : 0.f;\n\
           if (threadIdx.x < 8) tile[blockDim.x + threadIdx.x] = (i + blockDim.x < n) ? in[i + blockDim.x] : 0.f;\n\
           __syncthreads();\n\
           float acc = 0.f;\n\
           for (int t = 0; t < g_fp.taps; ++t) acc += tile[threadIdx.x + t] * g_fp.coef[t];\n\
           if (acc > k) acc += g_coef[3] * (float)g_fp.scale;\n\
           else if (acc < -k) acc -= g_coef[5] * (float)g_dcoef[2];\n\
           if (i < n) out[i] = acc;\n}}\n"
    );
    let op = "template <typename T> __device__ __forceinline__ T apply_op(int op, T a, T b) {\n\
                switch (op) { case 0: return a + b; case 1: return a - b; case 2: return a * b;\n\
                case 3: return a > b ? a : b; case 4: return a < b ? a : b; case 5: return a * (T)2 + b;\n\
                case 6: return a - b * (T)3; case 7: return (T)g_coef[7] * a; default: return a; } }\n";
    let switched = format!("{header}{op}")
        + &fir[header.len()..]
            .replace(
                "else if (acc < -k) acc -= g_coef[5] * (float)g_dcoef[2];\n",
                "",
            )
            .replace(
                "if (i < n) out[i] = acc;",
                "acc = apply_op<float>(i & 7, acc, g_coef[i & 15]);\nif (i < n) out[i] = acc;",
            );
    assert!(switched.contains("acc = apply_op") && !switched.contains("else if"));
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for (name, src, sm) in [
        ("fir", &fir, "sm_100a"),
        ("fir_switch", &switched, "sm_100a"),
        ("fir_switch", &switched, "sm_120a"),
    ] {
        let d = compiled(dir.path(), "fir_defs", &defs, sm, &[]);
        let f = compiled(dir.path(), name, src, sm, &[]);
        links.push((
            format!("{name} {sm}"),
            vec![
                format!("-arch={sm}"),
                f.display().to_string(),
                d.display().to_string(),
            ],
        ));
    }
    let failures = identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A new user's particle program (review of 2026-12-01): a device function clamping a
/// point to a box, six conditional reads of another unit's `__constant__` struct, whose
/// 16-bit capsule records are predicated by registers P2 to P4 (byte 4 0x10 to 0x21):
/// nvlinkrs left their twelve offsets 0 (silently at sm_100, with a warning from sm_110),
/// where nvlink writes them (a driver finalizing the capsule for another GPU reads them).
#[test]
fn a_new_users_box_clamp_gets_its_capsule_offsets() {
    let params = "struct Box { float damping; float3 lo, hi; };\n__constant__ Box c_box;\n\
        __device__ float3 clamp_to_box(float3 p, float3 &v) {\n\
          if (p.x < c_box.lo.x) { p.x = c_box.lo.x; v.x = -v.x * c_box.damping; }\n\
          if (p.y < c_box.lo.y) { p.y = c_box.lo.y; v.y = -v.y * c_box.damping; }\n\
          if (p.z < c_box.lo.z) { p.z = c_box.lo.z; v.z = -v.z * c_box.damping; }\n\
          if (p.x > c_box.hi.x) { p.x = c_box.hi.x; v.x = -v.x * c_box.damping; }\n\
          if (p.y > c_box.hi.y) { p.y = c_box.hi.y; v.y = -v.y * c_box.damping; }\n\
          if (p.z > c_box.hi.z) { p.z = c_box.hi.z; v.z = -v.z * c_box.damping; }\n\
          return p;\n}\n";
    let kernels = "__device__ float3 clamp_to_box(float3 p, float3 &v);\n\
        __global__ void integrate(float3 *pos, float3 *vel) {\n\
          int i = threadIdx.x; float3 v = vel[i];\n\
          pos[i] = clamp_to_box(pos[i], v); vel[i] = v;\n}\n";
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for sm in ["sm_100", "sm_110a", "sm_120a"] {
        let p = compiled(dir.path(), "box_params", params, sm, &[]);
        let k = compiled(dir.path(), "box_kernels", kernels, sm, &[]);
        links.push((
            format!("box clamp {sm}"),
            vec![
                format!("-arch={sm}"),
                k.display().to_string(),
                p.display().to_string(),
            ],
        ));
    }
    let failures = identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
