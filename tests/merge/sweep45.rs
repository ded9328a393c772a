//! What a second sweep on programs nobody here wrote (issue 35: 16 programs, 704 links
//! against nvlink) found, each test failing before its fix: a scalar `__constant__`
//! read's bank offset in the capsule Mercury, a constant bank over 64 KiB, the module
//! bank's Mercury relocation section's name, same-named local helpers of two units (the
//! sections of each where nvlink makes them, each `-r` copy with its own capsule), an
//! `-r` output of an `-r` output (a window aligned to 48), new memory-barrier records
//! in the order nvlink meets them and added up over the call tree, a `-lineinfo` link at sm_100 whose kernels the host
//! tables all drop, a removed kernel's window named in `.strtab`, and `.debug_frame`
//! before its relocations there. The sources are compiled here with the pinned nvcc.

use std::path::PathBuf;

use super::review::compiled;
use super::{cuda, differential, identical_all as identical, nvlinkrs, run};

fn paths(p: &[PathBuf]) -> Vec<String> {
    p.iter().map(|p| p.display().to_string()).collect()
}

/// At sm_100+, a kernel reading a scalar `__constant__` whose offset in the image's bank
/// is not the one in its unit: nvlink writes the new offset into the kernel's capsule
/// (a driver that finalizes the capsule for another GPU reads it there). Was: left as
/// ptxas wrote it (0), the record's form not among those the link patched (a `double`'s
/// and a `char`'s read have other forms again: an attacker's review); and for a field of
/// another unit's `__constant__` struct, the variable looked for in the reading unit,
/// where it is undefined.
#[test]
fn scalar_constant_offsets_are_written_into_capsules() {
    let a = "__constant__ int x = 1; __global__ void ka(int *o) { o[threadIdx.x] = x; }\n";
    let b = "__constant__ int y = 2; __global__ void kb(int *o) { o[threadIdx.x] = y; }\n";
    let c = "struct P { int w; float s; };\n__constant__ int pad[3] = {1, 2, 3};\n__constant__ P params = {5, 1.5f};\n__global__ void kc(float *o) { o[threadIdx.x] = params.s + pad[threadIdx.x % 3]; }\n";
    let d = "struct P { int w; float s; };\nextern __constant__ P params;\n__constant__ int mine[2] = {7, 8};\n__global__ void kd(int *o) { o[threadIdx.x] = params.w + mine[threadIdx.x & 1]; }\n";
    let pad =
        "__constant__ int pad0[3] = {1};\n__global__ void kp(int *o, int j) { o[0] = pad0[j]; }\n";
    let kinds = "struct S { int a; float b; double c; int arr[5]; };\n__constant__ double cd = 2.5;\n__constant__ char cc = 1;\n__constant__ S cs = {1, 2.f, 3.0, {4}};\n__global__ void k_dbl(double *o) { o[0] = cd; }\n__global__ void k_chr(double *o) { o[0] = cc; }\n__global__ void k_fld(double *o) { o[0] = cs.b + cs.c; }\n";
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for sm in ["sm_100", "sm_120"] {
        let oa = compiled(dir.path(), "scalar_a", a, sm, &[]);
        let ob = compiled(dir.path(), "scalar_b", b, sm, &[]);
        let oc = compiled(dir.path(), "field_c", c, sm, &[]);
        let od = compiled(dir.path(), "field_d", d, sm, &[]);
        let op = compiled(dir.path(), "pad", pad, sm, &[]);
        let ok = compiled(dir.path(), "kinds", kinds, sm, &[]);
        let orders = [
            ("a b", [&oa, &ob]),
            ("b a", [&ob, &oa]),
            ("c d", [&oc, &od]),
            ("d c", [&od, &oc]),
            ("pad, double/char/field", [&op, &ok]),
        ];
        for (order, objs) in orders {
            let mut args = vec![format!("-arch={sm}")];
            args.extend(objs.iter().map(|o| o.display().to_string()));
            links.push((format!("{order} {sm}"), args));
        }
    }
    let failures = identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Three units of 24,000-byte `__constant__` tables: nvlink refuses the image (`File uses
/// too much global constant data (0x11940 bytes, 0x10000 max)`, exit 255, no output),
/// plain and `-r`; under `-dlto` ptxas says it and nvlink fails with `elfLink JIT compile
/// failed`. Was: an image the driver cannot load, exit 0; under `-dlto` `elfLink
/// fatbinary error`. With `-kernels-used` nvlink drops the tables only removed kernels
/// read and links; nvlinkrs links too, with every table (docs/rules/differences.md).
#[test]
fn too_much_constant_data_is_refused_as_nvlink_refuses_it() {
    let src = |u: char| {
        format!(
            "__constant__ float big_{u}[6000] = {{1.0f}};\n__global__ void k_{u}(float *o) {{ o[threadIdx.x] = big_{u}[threadIdx.x * 7 % 6000]; }}\n"
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for sm in ["sm_80", "sm_100"] {
        let objs: Vec<PathBuf> = (['a', 'b', 'c'].iter())
            .map(|&u| compiled(dir.path(), &format!("big_{u}"), &src(u), sm, &[]))
            .collect();
        let lto: Vec<PathBuf> = (['a', 'b', 'c'].iter())
            .map(|&u| compiled(dir.path(), &format!("big_lto_{u}"), &src(u), sm, &["-dlto"]))
            .collect();
        let arch = format!("-arch={sm}");
        let nvvm = format!("-nvvmpath={}", cuda().join("nvvm").display());
        let cases = [
            ("plain", vec![arch.clone()], &objs),
            ("-r", vec![arch.clone(), "-r".into()], &objs),
            ("-dlto", vec![arch.clone(), "-dlto".into(), nvvm], &lto),
        ];
        for (what, mut args, objs) in cases {
            args.extend(paths(objs));
            let nv = run(&cuda().join("bin/nvlink"), &args, dir.path());
            assert_ne!(nv.code, 0, "{what} {sm}: nvlink links it");
            if let Err(e) = differential(&args) {
                failures.push(format!("{what} {sm}:\n    {e}"));
            }
        }
        let mut ku = vec![arch, "-kernels-used=k_a".to_string()];
        ku.extend(paths(&objs));
        let (nv, ours) = (
            run(&cuda().join("bin/nvlink"), &ku, dir.path()),
            run(&nvlinkrs(), &ku, dir.path()),
        );
        assert_eq!(
            (nv.code, ours.code),
            (0, 0),
            "-kernels-used {sm}: {:?}",
            ours.messages
        );
        // (the kept kernels' own tables over 64 KiB: refused under -kernels-used too, an
        // attacker's two 32 KiB tables and a byte; was: linked, exit 0)
        let table = |name: &str, n: usize| {
            format!(
                "__constant__ unsigned char {name}_c[{n}] = {{1}};\n__global__ void k_{name}(unsigned char *o, int i) {{ o[i] = {name}_c[i]; }}\n"
            )
        };
        let mut kept = vec![
            format!("-arch={sm}"),
            "-kernels-used=k_half,k_half2,k_one".into(),
        ];
        for (name, n) in [("half", 32768), ("half2", 32768), ("one", 1)] {
            kept.push(
                compiled(dir.path(), name, &table(name, n), sm, &[])
                    .display()
                    .to_string(),
            );
        }
        let extra = "__global__ void k_extra(int *p) { p[0] = 1; }\n";
        kept.push(
            compiled(dir.path(), "extra", extra, sm, &[])
                .display()
                .to_string(),
        );
        let nv = run(&cuda().join("bin/nvlink"), &kept, dir.path());
        assert_eq!(nv.code, 255, "nvlink links the kept tables {sm}");
        if let Err(e) = differential(&kept) {
            failures.push(format!("kept tables over 64 KiB {sm}:\n    {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// At sm_100+, a `__constant__` holding a device address: the module bank's Mercury
/// relocations keep ptxas's name, `.nv.merc.rela.nv.constant.user` (was:
/// `.nv.merc.rela.nv.constant3`, after the SASS twin).
#[test]
fn the_module_banks_mercury_relocations_keep_their_name() {
    let src = "__device__ int x[4];\n__constant__ int *p = &x[1];\n__global__ void k(int *o) { o[0] = *p; }\n";
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for sm in ["sm_100", "sm_120"] {
        let o = compiled(dir.path(), "cptr", src, sm, &[]);
        links.push((
            sm.to_string(),
            vec![format!("-arch={sm}"), o.display().to_string()],
        ));
    }
    let failures = identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Two units that divide doubles each have ptxas's local `__cuda_sm20_div_rn_f64_full`:
/// nvlink makes each copy's sections (code, `.nv.info`, capsule, Mercury `.nv.info`)
/// among its unit's, in a plain link at every target (was: the second copy's beside the
/// first's, the sections ordered by name); relinking nvlink's `-r` output of them keeps
/// each copy's capsule and Mercury `.nv.info` (was: the first copy's twice, the second's
/// lost: not equivalent).
#[test]
fn same_named_local_helpers_keep_each_units_place() {
    let a = "__global__ void ka(double *o, const double *a) { o[threadIdx.x] = a[threadIdx.x] / a[threadIdx.x + 1]; }\n";
    let b = "__global__ void kb(double *o, const double *a) { o[threadIdx.x] = a[threadIdx.x + 2] / a[threadIdx.x]; }\n";
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    let mut relinks = Vec::new();
    for sm in ["sm_80", "sm_90", "sm_100", "sm_120"] {
        let objs = [
            compiled(dir.path(), "div_a", a, sm, &[]),
            compiled(dir.path(), "div_b", b, sm, &[]),
        ];
        let mut args = vec![format!("-arch={sm}")];
        args.extend(paths(&objs));
        links.push((format!("plain {sm}"), args.clone()));
        args.push("-r".into());
        let r = run(&cuda().join("bin/nvlink"), &args, dir.path());
        let ro = dir.path().join(format!("div_r_{sm}.o"));
        std::fs::write(&ro, r.output.expect("nvlink's -r output")).unwrap();
        relinks.push((sm, vec![format!("-arch={sm}"), ro.display().to_string()]));
    }
    let mut failures = identical(&links);
    for (sm, args) in relinks {
        if let Err(e) = differential(&args) {
            failures.push(format!("relink {sm}:\n    {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// nvlink's `-r` of its own `-r` output of a kernel with static and `extern __shared__`
/// memory aligns the kernel's window to 48 (the `externsharedinstance` offset it takes as
/// an alignment): nvlinkrs links such a file, and relinks it under `-r`, where nvlink
/// does, the final image's window and code nvlink's (was: refused, `alignment 0x30 is
/// not a power of two`). Not byte-identical: nvlink's second `-r` defines the instance
/// in `.nv_debug.shared` and keeps an undefined copy, and its final link keeps an empty
/// `.nv_debug.shared`; a `-r` of a `-r` output, left as is.
#[test]
fn a_window_aligned_to_48_links() {
    use nvlinkrs::bytes::Bytes;
    use nvlinkrs::elf::cubin::Cubin;
    let src = "__global__ void k(int *out) {
  __shared__ unsigned long long st[5];
  extern __shared__ int dyn[];
  if (threadIdx.x < 5) st[threadIdx.x] = out[threadIdx.x];
  dyn[threadIdx.x] = out[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = dyn[blockDim.x - 1 - threadIdx.x] + (int)st[threadIdx.x % 5];
}
";
    let dir = tempfile::tempdir().unwrap();
    let obj = compiled(dir.path(), "win48", src, "sm_80", &[]);
    let nvlink = cuda().join("bin/nvlink");
    let mut input = obj.display().to_string();
    for step in 1..=2 {
        let r = run(
            &nvlink,
            &["-arch=sm_80".into(), "-r".into(), input.clone()],
            dir.path(),
        );
        let ro = dir.path().join(format!("win48_r{step}.o"));
        std::fs::write(&ro, r.output.expect("nvlink's -r output")).unwrap();
        input = ro.display().to_string();
    }
    let windows_and_code = |image: Vec<u8>| {
        let c = Cubin::parse(Bytes::from_vec(image), "image").unwrap();
        let mut v: Vec<(String, u64, u64, Vec<u8>)> = (c.sections.iter())
            .filter(|s| s.name.starts_with(".nv.shared.") || s.name.starts_with(".text."))
            .map(|s| (s.name.to_string(), s.size, s.align, c.bytes(s).to_vec()))
            .collect();
        v.sort();
        v
    };
    let args = vec!["-arch=sm_80".to_string(), input.clone()];
    let (theirs, ours) = (
        run(&nvlink, &args, dir.path()),
        run(&nvlinkrs(), &args, dir.path()),
    );
    assert_eq!((theirs.code, ours.code), (0, 0), "{:?}", ours.messages);
    let (theirs, ours) = (theirs.output.unwrap(), ours.output.unwrap());
    assert!(windows_and_code(theirs.clone()).iter().any(|s| s.2 == 48));
    assert_eq!(windows_and_code(theirs), windows_and_code(ours));
    let r = vec!["-arch=sm_80".to_string(), "-r".into(), input];
    assert_eq!(run(&nvlinkrs(), &r, dir.path()).code, 0);
}

/// `-G` kernels that call two weak helpers, one initialising a memory barrier and one
/// with `__syncthreads`: their own records have neither count, and nvlink adds
/// `NUM_MBARRIERS` and `NUM_BARRIERS` in the order it meets the helpers (was: the
/// barrier count first, whatever the order).
#[test]
fn memory_barrier_counts_come_in_the_order_of_their_callees() {
    let helpers = [
        "inline __device__ __noinline__ void mb_init(unsigned a) { if (threadIdx.x == 0) asm volatile(\"mbarrier.init.shared.b64 [%0], %1;\" :: \"r\"(a), \"r\"(blockDim.x)); }\n",
        "inline __device__ __noinline__ void sync_all() { __syncthreads(); }\n",
    ];
    let kernels = "__global__ void k_x(int *o) { mb_init(o[1]); sync_all(); o[threadIdx.x] = 1; }
__global__ void k_y(int *o) { mb_init(o[2]); sync_all(); o[threadIdx.x] = 2; }
";
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for sm in ["sm_80", "sm_90"] {
        for (order, text) in [
            (
                "mbarrier first",
                format!("{}{}{kernels}", helpers[0], helpers[1]),
            ),
            (
                "barrier first",
                format!("{}{}{kernels}", helpers[1], helpers[0]),
            ),
        ] {
            let name = format!("mbar_{}", order.len());
            let o = compiled(dir.path(), &name, &text, sm, &["-G"]);
            links.push((
                format!("{order} {sm}"),
                vec![format!("-arch={sm}"), o.display().to_string()],
            ));
        }
    }
    let failures = identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A kernel's `NUM_MBARRIERS` is the memory barriers of every function of its call tree
/// added up, each function once: its own and a callee's, two callees, a chain; a callee
/// reached twice counts once (found by the attacker review of the tensor-memory records,
/// cooperative-groups cluster code at sm_90a to sm_120a). Was: the largest, 1 where
/// nvlink writes 2.
#[test]
fn memory_barriers_of_a_call_tree_add_up() {
    let mb = "#include <cstdint>\n\
        __device__ __noinline__ void mb(int *o) { __shared__ __align__(8) uint64_t bar[3];\n\
          uint32_t sa = (uint32_t)__cvta_generic_to_shared(&bar[0]);\n\
          if (threadIdx.x == 0) asm volatile(\"mbarrier.init.shared::cta.b64 [%0], %1;\" :: \"r\"(sa), \"r\"(32));\n\
          __syncthreads(); o[2] = 3; }\n\
        __device__ __noinline__ void mb2(int *o) { __shared__ __align__(8) uint64_t b2;\n\
          uint32_t sa = (uint32_t)__cvta_generic_to_shared(&b2);\n\
          if (threadIdx.x == 0) asm volatile(\"mbarrier.init.shared::cta.b64 [%0], %1;\" :: \"r\"(sa), \"r\"(32));\n\
          o[4] = 5; }\n";
    let own = "__shared__ __align__(8) uint64_t b; uint32_t sa = (uint32_t)__cvta_generic_to_shared(&b); \
               if (threadIdx.x == 0) asm volatile(\"mbarrier.init.shared::cta.b64 [%0], %1;\" :: \"r\"(sa), \"r\"(32));";
    let programs = [
        ("own_and_callee", format!("__global__ void k(int *o) {{ {own} mb(o); }}\n")),
        ("two_callees", "__global__ void k(int *o) { mb(o); mb2(o); }\n".to_string()),
        (
            "chain",
            format!("__device__ __noinline__ void mid(int *o) {{ {own} mb(o); }}\n__global__ void k(int *o) {{ mid(o); }}\n"),
        ),
        (
            "diamond",
            "__device__ __noinline__ void mid(int *o) { mb(o); }\n__global__ void k(int *o) { mid(o); mb(o); }\n".to_string(),
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for sm in ["sm_80", "sm_100a"] {
        for (name, text) in &programs {
            let o = compiled(dir.path(), name, &format!("{mb}{text}"), sm, &[]);
            links.push((
                format!("{name} {sm}"),
                vec![format!("-arch={sm}"), o.display().to_string()],
            ));
        }
    }
    let failures = identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A `-lineinfo` unit at sm_100 that includes Thrust's headers and launches nothing: the
/// host tables drop its kernel, nvlink's image is the merge's, without code, and the
/// link says nothing (was: a warning that libnvJitLink's image, which keeps every kernel,
/// has other symbols).
#[test]
fn a_lineinfo_link_whose_kernels_the_tables_drop_is_silent() {
    let src = "#include <thrust/execution_policy.h>\n__global__ void k(int *o) { o[0] = 1; }\n";
    let dir = tempfile::tempdir().unwrap();
    let o = compiled(dir.path(), "thrustli", src, "sm_100", &["-lineinfo"]);
    let failures = identical(&[(
        "sm_100".to_string(),
        vec!["-arch=sm_100".into(), o.display().to_string()],
    )]);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `-kernels-used` removes a kernel with a `__shared__` local: nvlink still names its
/// window, `.nv.shared.<kernel>`, in `.strtab`, where that unit's data objects come
/// (was: not named, the string table 24 bytes shorter).
#[test]
fn a_removed_kernels_shared_array_names_its_window() {
    let a = "__global__ void keep(float *o) { o[threadIdx.x] = 1.0f; }\n";
    let b = "__global__ void histo(const unsigned char *in, int *out) {
  __shared__ int local[64];
  local[threadIdx.x % 64] = 0; __syncthreads();
  atomicAdd(&local[in[threadIdx.x] % 64], 1); __syncthreads();
  out[threadIdx.x] = local[threadIdx.x % 64];
}
";
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for sm in ["sm_80", "sm_90", "sm_100"] {
        let objs = [
            compiled(dir.path(), "keep", a, sm, &[]),
            compiled(dir.path(), "histo", b, sm, &[]),
        ];
        let mut args = vec![format!("-arch={sm}"), "-kernels-used=keep".into()];
        args.extend(paths(&objs));
        links.push((sm.to_string(), args));
    }
    let failures = identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Two units of `thrust::seq` and `cuda::std` code at sm_80: `.strtab` lists
/// `.debug_frame` before `.rel.debug_frame` where nvlink made them in that order (was:
/// the other way round, the order nvlink gives a parameter bank and its `.rel` twin).
#[test]
fn a_debug_frame_comes_before_its_relocations_in_strtab() {
    let a = "#include <thrust/sort.h>
#include <thrust/execution_policy.h>
#include <thrust/binary_search.h>
__device__ int median_of(int *v, int n);
__global__ void per_thread_sort(int *d, int w, int *med) {
  int *row = d + (blockIdx.x * blockDim.x + threadIdx.x) * w;
  thrust::sort(thrust::seq, row, row + w);
  int pos = thrust::lower_bound(thrust::seq, row, row + w, 42) - row;
  med[blockIdx.x * blockDim.x + threadIdx.x] = median_of(row, w) + pos;
}
";
    let b = "#include <cuda/std/array>
#include <cuda/std/optional>
#include <cuda/std/span>
#include <cuda/std/bit>
#include <thrust/reduce.h>
#include <thrust/execution_policy.h>
__device__ __noinline__ int median_of(int *v, int n) { return v[n / 2]; }
__device__ cuda::std::optional<int> find_first(cuda::std::span<const int> s, int x) {
  for (size_t i = 0; i < s.size(); ++i) if (s[i] == x) return (int)i;
  return cuda::std::nullopt;
}
__global__ void lib_kernel(const int *d, int *o, int n) {
  cuda::std::array<int, 8> a{};
  for (int i = 0; i < 8; ++i) a[i] = d[(threadIdx.x + i) % n];
  auto f = find_first(cuda::std::span<const int>(a.data(), a.size()), 3);
  int s = thrust::reduce(thrust::seq, a.begin(), a.end());
  o[threadIdx.x] = f.value_or(-1) + s + cuda::std::popcount((unsigned)s) + cuda::std::bit_width((unsigned)n);
}
";
    let dir = tempfile::tempdir().unwrap();
    let objs = [
        compiled(dir.path(), "seq_a", a, "sm_80", &[]),
        compiled(dir.path(), "seq_b", b, "sm_80", &[]),
    ];
    let mut args = vec!["-arch=sm_80".to_string()];
    args.extend(paths(&objs));
    let failures = identical(&[("sm_80".to_string(), args)]);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
