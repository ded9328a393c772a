//! What a kernel takes from the functions it calls (issue 35, the attacker reviews of the
//! CUTLASS fixes and of their own fixes): the records the driver reads on a kernel (to set
//! tensor memory up, and for launch control, multimem and `%ctaid.z`), which nvlink hands
//! from a `__noinline__` callee to each kernel calling it, their order, the refusal of a
//! kernel mixing CTA granularities, and `-G` code's `__tcgen05_tmem_max_col_size`, which
//! nvlink leaves to the driver. Each test failed before its fix; the sources are compiled
//! here with the pinned nvcc.

use super::review::compiled;
use super::{differential, identical_all as identical};

/// A `__noinline__` function allocating tensor memory for `cta_group::G`, `N` columns.
fn allocator(g: u32, n: u32) -> String {
    "#include <cstdint>\n".to_string() + &allocator_named("dev_alloc", g, n)
}

/// The same function named `name`, without the include.
fn allocator_named(name: &str, g: u32, n: u32) -> String {
    format!(
        r#"__device__ __noinline__ void {name}(uint32_t *out) {{
  __shared__ uint32_t addr;
  uint32_t sa = (uint32_t)__cvta_generic_to_shared(&addr);
  asm volatile("tcgen05.alloc.cta_group::{g}.sync.aligned.shared::cta.b32 [%0], {n};" :: "r"(sa));
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::{g}.sync.aligned;");
  __syncthreads();
  uint32_t t = addr;
  asm volatile("tcgen05.dealloc.cta_group::{g}.sync.aligned.b32 %0, {n};" :: "r"(t));
  out[threadIdx.x] = t;
}}
"#
    )
}

/// The kernel calling the allocator gets its `TCGEN05_*_USED`, `RESERVED_SMEM_USED` and
/// `AT_ENTRY_FRAGMENTS` (moved: the callee's goes), and, beside another kernel, its
/// `VRC_CTA_INIT_COUNT` and a `NUM_MBARRIERS` of 0, in the order nvlink writes them (one
/// kernel, two, `cta_group::2`, through another function, through a table, after the
/// kernel's own barrier, from another unit). Was: all of them left with the callee, so a
/// driver reading the kernel's attributes would not set tensor memory up for it.
#[test]
fn a_kernel_gets_the_tensor_memory_records_of_the_allocator_it_calls() {
    let other = "__global__ void other(uint32_t *out) { out[0] = 1; }\n";
    let kdev = "__global__ void kdev(uint32_t *out) { dev_alloc(out); }\n";
    let programs: Vec<(&str, String)> = vec![
        ("one_kernel", allocator(1, 32) + kdev),
        ("two_kernels", allocator(1, 32) + kdev + other),
        ("pair_one_kernel", allocator(2, 64) + kdev),
        ("pair_two_kernels", allocator(2, 64) + kdev + other),
        (
            "through_mid",
            allocator(1, 32)
                + "__device__ __noinline__ void mid(uint32_t *out) { dev_alloc(out + 1); out[5] = 3; }\n"
                + "__global__ void kdev(uint32_t *out) { mid(out); }\n"
                + other,
        ),
        (
            "own_barrier",
            allocator(1, 32)
                + "__global__ void kdev(uint32_t *out) { out[threadIdx.x + 64] = 2; __syncthreads(); dev_alloc(out); }\n",
        ),
        (
            "through_table",
            allocator(1, 32)
                + "typedef void (*fp)(uint32_t *);\n__device__ fp tab[1] = { dev_alloc };\n"
                + "__global__ void kdev(uint32_t *out) { tab[0](out); }\n"
                + other,
        ),
    ];
    let caller = "#include <cstdint>\n__device__ void dev_alloc(uint32_t *out);\n\
                  __global__ void kb2(uint32_t *out) { dev_alloc(out + 32); }\n";
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for (sm, virt) in [("sm_100a", "compute_100a"), ("sm_103a", "compute_103a")] {
        let gencode = format!("-gencode=arch={virt},code={sm}");
        for (name, src) in &programs {
            // (sm_103a: the two shapes whose records differ)
            if sm == "sm_103a" && !matches!(*name, "one_kernel" | "two_kernels") {
                continue;
            }
            let o = compiled(dir.path(), name, src, sm, &[&gencode]);
            links.push((
                format!("{name} {sm}"),
                vec![format!("-arch={sm}"), o.display().to_string()],
            ));
        }
    }
    // (two units: the allocator's unit and another kernel's, in both orders)
    let gencode = "-gencode=arch=compute_100a,code=sm_100a";
    let a = compiled(
        dir.path(),
        "unit_a",
        &(allocator(1, 32) + kdev),
        "sm_100a",
        &[gencode],
    );
    let b = compiled(dir.path(), "unit_b", caller, "sm_100a", &[gencode]);
    for (what, objs) in [("a b", [&a, &b]), ("b a", [&b, &a])] {
        let mut args = vec!["-arch=sm_100a".to_string()];
        args.extend(objs.iter().map(|o| o.display().to_string()));
        links.push((format!("two units {what}"), args));
    }
    let failures = identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `-G` tcgen05 code refers to `__tcgen05_tmem_max_col_size`, undefined, ptxas giving its
/// value (0x200), as `.nv.reservedSmem.cap`: nvlink keeps it for the driver (a CUDA
/// object, that value on the SASS side). Was: `Undefined reference`, exit 255, where
/// nvlink links; also after `-r`.
#[test]
fn debug_tensor_memory_code_links_with_its_column_size_left_to_the_driver() {
    let dir = tempfile::tempdir().unwrap();
    let gencode = "-gencode=arch=compute_100a,code=sm_100a";
    let src = allocator(1, 32) + "__global__ void kdev(uint32_t *out) { dev_alloc(out); }\n";
    let o = compiled(dir.path(), "dbg", &src, "sm_100a", &[gencode, "-G"]);
    let o = o.display().to_string();
    let relocatable = dir.path().join("r.o");
    let r = super::run(
        &super::nvlinkrs(),
        &["-arch=sm_100a".into(), "-r".into(), o.clone()],
        dir.path(),
    );
    assert_eq!(r.code, 0, "{:?}", r.messages);
    std::fs::write(&relocatable, r.output.unwrap()).unwrap();
    let links = vec![
        ("-G".to_string(), vec!["-arch=sm_100a".into(), o.clone()]),
        (
            "-G -r".to_string(),
            vec!["-arch=sm_100a".into(), "-r".into(), o],
        ),
        (
            "-G, our -r relinked".to_string(),
            vec!["-arch=sm_100a".into(), relocatable.display().to_string()],
        ),
    ];
    let failures = identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A kernel whose code and callees use both `cta_group::1` and `cta_group::2` is refused
/// by nvlink (`Function 'K' uses single CTA(.cta_group::1) and CTA pair
/// granularity(.cta_group::2) and that is not allowed.`, exit 255, no image): once per such
/// kernel, input by input, each input's kernels last first, and for the image's only
/// kernel once more when its callees alone use both; under `-r` nothing is checked. Was:
/// linked without a word, the kernel's records naming both (found by the attacker review
/// of the records above).
#[test]
fn a_kernel_mixing_cta_groups_is_refused_as_nvlink_refuses_it() {
    let both = "#include <cstdint>\n".to_string()
        + &allocator_named("alloc1", 1, 32)
        + &allocator_named("alloc2", 2, 64);
    let own = r#"
__global__ void k(uint32_t *out) {
  __shared__ uint32_t a;
  uint32_t sa = (uint32_t)__cvta_generic_to_shared(&a);
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" :: "r"(sa));
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
  __syncthreads();
  asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 32;" :: "r"(a));
  alloc2(out);
}
"#;
    let several = "__global__ void kx(uint32_t *o) { alloc1(o); alloc2(o); }
                   __global__ void ky(uint32_t *o) { alloc2(o); alloc1(o); }
                   __global__ void kz(uint32_t *o) { o[0] = 1; }
                   __global__ void kw(uint32_t *o) { alloc1(o); alloc2(o + 8); }
";
    let other = "#include <cstdint>\n".to_string()
        + &allocator_named("alloc1b", 1, 32)
        + &allocator_named("alloc2b", 2, 64)
        + "__global__ void kq(uint32_t *o) { alloc2b(o); alloc1b(o); }
";
    let dir = tempfile::tempdir().unwrap();
    let gencode = "-gencode=arch=compute_100a,code=sm_100a";
    let unit = |name: &str, text: String| {
        compiled(dir.path(), name, &text, "sm_100a", &[gencode])
            .display()
            .to_string()
    };
    let callees = unit(
        "callees",
        both.clone()
            + "__global__ void k(uint32_t *o) { alloc1(o); alloc2(o); }
",
    );
    let own = unit("own", both.clone() + own);
    let several = unit("several", both + several);
    let other = unit("other", other);
    let arch = "-arch=sm_100a".to_string();
    let links: Vec<(&str, Vec<String>)> = vec![
        (
            "the only kernel, through its callees",
            vec![arch.clone(), callees.clone()],
        ),
        (
            "the only kernel, its own and a callee's",
            vec![arch.clone(), own],
        ),
        ("three of four kernels", vec![arch.clone(), several.clone()]),
        (
            "two units",
            vec![arch.clone(), several.clone(), other.clone()],
        ),
        (
            "two units, the other order",
            vec![arch.clone(), other, several],
        ),
    ];
    for (what, args) in &links {
        // (refused by both: the same messages and exit code, no image)
        if let Err(e) = differential(args) {
            panic!("{what}: {e}");
        }
    }
    let r = vec![arch, "-r".into(), callees];
    let failures = identical(&[("-r".to_string(), r)]);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A kernel's new records come callee by callee, in nvlink's numbering of the functions,
/// each callee's in its input's order: the allocator's tensor-memory records and a
/// memory-barrier function's counts, the two in one unit and in another unit than the
/// kernel (where nvlink numbers them the other way round); and a `-r` output's kernel
/// calling a memory-barrier function, whose records the `-r` link reversed. Was: the
/// tensor-memory records first, the counts after, barriers before memory barriers
/// (found by the attacker review).
#[test]
fn a_kernels_new_records_come_callee_by_callee() {
    let mbar = r#"__device__ __noinline__ void mbar_fn(uint32_t *out) {
  __shared__ __align__(8) uint64_t bar[2];
  uint32_t sa = (uint32_t)__cvta_generic_to_shared(&bar[0]);
  if (threadIdx.x == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa), "r"(32));
  __syncthreads();
  out[threadIdx.x + 4] = 1;
}
"#;
    let lib = "#include <cstdint>\n".to_string() + &allocator_named("alloc1", 1, 32) + mbar;
    let kernels = "__global__ void ke(uint32_t *out) { alloc1(out); mbar_fn(out); }\n\
                   __global__ void kd(uint32_t *out) { out[0] = 5; }\n";
    let user = "#include <cstdint>\n__device__ void alloc1(uint32_t *out);\n\
                __device__ void mbar_fn(uint32_t *out);\n"
        .to_string()
        + kernels;
    let dir = tempfile::tempdir().unwrap();
    let gencode = "-gencode=arch=compute_100a,code=sm_100a";
    let unit = |name: &str, text: &str, sm: &str, extra: &[&str]| {
        compiled(dir.path(), name, text, sm, extra)
            .display()
            .to_string()
    };
    let a = unit("lib", &lib, "sm_100a", &[gencode]);
    let b = unit("user", &user, "sm_100a", &[gencode]);
    let single = unit("single", &(lib.clone() + kernels), "sm_100a", &[gencode]);
    let arch = "-arch=sm_100a".to_string();
    let mut links = vec![
        ("one unit".to_string(), vec![arch.clone(), single]),
        (
            "two units".to_string(),
            vec![arch.clone(), a.clone(), b.clone()],
        ),
        ("two units, the other order".to_string(), vec![arch, b, a]),
    ];
    // (a -r output: nvlink's and ours are the same bytes, linked here by both)
    let plain = "#include <cstdint>\n".to_string()
        + mbar
        + "__global__ void kc(uint32_t *out) { mbar_fn(out); }\n\
           __global__ void kd(uint32_t *out) { out[0] = 5; }\n";
    let x = unit("plain", &plain, "sm_80", &[]);
    let r = super::run(
        &super::cuda().join("bin/nvlink"),
        &["-arch=sm_80".into(), "-r".into(), x],
        dir.path(),
    );
    let relocatable = dir.path().join("r.o");
    std::fs::write(&relocatable, r.output.expect("nvlink's -r output")).unwrap();
    let relocatable = relocatable.display().to_string();
    links.push((
        "an -r output".into(),
        vec!["-arch=sm_80".into(), relocatable],
    ));
    let failures = identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The other records the driver reads on the kernel, which nvlink hands from a
/// `__noinline__` callee to its kernels (found by the second attacker review): a
/// programmatic launch completion's attribute 0x6D (1, raised in place, sm_100+; not at
/// sm_90a), the
/// `multimem` record 0x68 (its bits or-ed: 4 for `ld_reduce`, 0xc with `red`), the
/// cluster-launch-control flag 0x62 (`try_cancel`, sm_100+), and `CTAIDZ_USED` of grid-wide
/// cooperative groups (sm_75 to sm_89), for the only kernel and beside others (where its
/// place differs). Was: the kernel without them.
#[test]
fn a_kernel_gets_the_launch_records_of_its_callees() {
    let pdl = "#include <cuda_runtime.h>\n\
               __device__ __noinline__ void trig() { cudaTriggerProgrammaticLaunchCompletion(); }\n\
               __global__ void k(int *c) { c[0] = 1; trig(); }\n";
    let multimem = r#"__device__ __noinline__ void ldred(int *p) { int v; asm volatile("multimem.ld_reduce.relaxed.sys.global.add.u32 %0, [%1];" : "=r"(v) : "l"(p)); p[1] = v; }
__device__ __noinline__ void red(int *p) { asm volatile("multimem.red.relaxed.sys.global.add.u32 [%0], %1;" :: "l"(p), "r"(1)); }
__global__ void k(int *p) { ldred(p); }
__global__ void k2(int *p) { int v; asm volatile("multimem.ld_reduce.relaxed.sys.global.add.u32 %0, [%1];" : "=r"(v) : "l"(p)); p[2] = v; red(p); }
"#;
    let cancel = r#"#include <cstdint>
__device__ __noinline__ void try_cancel(void *resp, uint64_t *bar) {
  uint32_t r = (uint32_t)__cvta_generic_to_shared(resp), b = (uint32_t)__cvta_generic_to_shared(bar);
  asm volatile("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%0], [%1];" :: "r"(r), "r"(b) : "memory");
}
__global__ void k(int *o) { __shared__ alignas(16) char resp[16]; __shared__ uint64_t bar; if (threadIdx.x == 0) try_cancel(resp, &bar); __syncthreads(); o[0] = resp[0]; }
"#;
    let grid = "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n\
                __device__ __noinline__ void gsync() { cg::this_grid().sync(); }\n\
                __global__ void k(int *p) { p[0] = 1; gsync(); p[1] = 2; }\n";
    let grid_two = grid.to_string() + "__global__ void other(int *p) { p[3] = 4; }\n";
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for (name, text, sm, virt) in [
        ("pdl", pdl.to_string(), "sm_100a", "compute_100a"),
        ("pdl120", pdl.to_string(), "sm_120a", "compute_120a"),
        // (at sm_90a nvlink leaves the kernel's own 0)
        ("pdl90", pdl.to_string(), "sm_90a", "compute_90a"),
        ("multimem", multimem.to_string(), "sm_90a", "compute_90a"),
        (
            "multimem100",
            multimem.to_string(),
            "sm_100a",
            "compute_100a",
        ),
        ("cancel", cancel.to_string(), "sm_100a", "compute_100a"),
        ("grid", grid.to_string(), "sm_80", "compute_80"),
        ("grid_two", grid_two, "sm_86", "compute_86"),
    ] {
        let gencode = format!("-gencode=arch={virt},code={sm}");
        let o = compiled(dir.path(), name, &text, sm, &[&gencode]);
        links.push((
            format!("{name} {sm}"),
            vec![format!("-arch={sm}"), o.display().to_string()],
        ));
    }
    // (and `-dump-callgraph`, whose heading names sm_100 for sm_100a, as nvlink's)
    let mut dump = links[0].1.clone();
    dump.push("-dump-callgraph".into());
    links.push(("-dump-callgraph sm_100a".into(), dump));
    let failures = identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `-preserve-relocs` of tensor-memory code: nvlink's sm_100+ image does not list the
/// relocations it applies against `__nv_reservedSMEM_tcgen05_partition` (a reserved
/// shared variable), in the allocating kernel or in a `__noinline__` allocator. Was: one
/// more `R_CUDA_ABS32_32` listed (and a `.nv.resolvedrela` section nvlink does not write
/// for the allocator), at sm_100a, sm_103a and sm_110a (the second attacker review).
#[test]
fn preserved_relocations_leave_out_the_tensor_memory_partition() {
    let in_kernel = "#include <cstdint>\n__global__ void k(uint32_t *o) { __shared__ uint32_t t; \
        uint32_t s = (uint32_t)__cvta_generic_to_shared(&t);\n\
        asm volatile(\"tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;\" :: \"r\"(s));\n\
        __syncthreads(); o[0] = t; }\n";
    let kdev = "__global__ void kdev(uint32_t *out) { dev_alloc(out); }\n";
    let programs = [
        ("in_kernel", in_kernel.to_string()),
        ("callee", allocator(1, 32) + kdev),
        ("pair", allocator(2, 64) + kdev),
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for (sm, virt) in [
        ("sm_100a", "compute_100a"),
        ("sm_103a", "compute_103a"),
        ("sm_110a", "compute_110a"),
    ] {
        let gencode = format!("-gencode=arch={virt},code={sm}");
        for (name, src) in &programs {
            let o = compiled(dir.path(), name, src, sm, &[&gencode]);
            links.push((
                format!("{name} {sm}"),
                vec![
                    format!("-arch={sm}"),
                    "-preserve-relocs".into(),
                    o.display().to_string(),
                ],
            ));
        }
    }
    let failures = identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
