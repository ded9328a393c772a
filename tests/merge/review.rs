//! What a review on programs nobody here wrote found after issue 35's first round (each
//! test failed before its fix): shared-memory windows aligned as nvlink aligns them once
//! a variable is shared or a removed kernel's array takes room, the only kernel's
//! `EXTERNS` list in the image's order of code, virtual functions (a kernel's list
//! without what only a function's taken addresses reach, one `.nv.callgraph` entry per
//! indirect call site, `[deleting]` destructors in `-dump-callgraph`), and the one
//! difference kept on purpose: nvlink's image of a function-pointer table whose only
//! kernel the host code does not launch calls a function nvlink dropped. The sources
//! are compiled here with the pinned nvcc.

use std::path::{Path, PathBuf};

use super::{cuda, differential, identical_all, nvlinkrs, run};

/// `name` with `text` compiled by nvcc (`-dc`, `extra`) at `sm`: the object's path.
pub(super) fn compiled(dir: &Path, name: &str, text: &str, sm: &str, extra: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.cu"));
    std::fs::write(&src, text).unwrap();
    let obj = dir.join(format!("{name}_{sm}{}.o", extra.concat()));
    // (a `-gencode` in `extra` names the targets alone)
    let arch = format!("-arch={sm}");
    let arch = (!extra.iter().any(|e| e.starts_with("-gencode"))).then_some(arch.as_str());
    let o = std::process::Command::new(cuda().join("bin/nvcc"))
        .arg("-dc")
        .args(arch)
        .args(extra)
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    obj
}

/// The symbols of the image `tool` links from `args` (in `dir`), and whether a relocation
/// of function `caller`'s code names `callee`.
fn symbols_and_call(
    tool: &Path,
    args: &[String],
    dir: &Path,
    caller: &str,
    callee: &str,
) -> (Vec<String>, bool) {
    let image = run(tool, args, dir).output.expect("an image");
    let c =
        nvlinkrs::elf::cubin::Cubin::parse(nvlinkrs::bytes::Bytes::from_vec(image), "x").unwrap();
    let names: Vec<String> = c.symbols.iter().map(|s| s.name.to_string()).collect();
    let code = format!(".text.{caller}");
    let relocated = (c.sections.iter().enumerate())
        .filter(|(_, s)| s.name.starts_with(".rel") && s.name.ends_with(&code))
        .flat_map(|(i, _)| c.relocations(i).unwrap())
        .any(|r| c.symbols[r.sym as usize].name == callee);
    (names, relocated)
}

/// Links each (label, arch, objects) with both linkers: the failures, each with its label.
fn identical_links(links: &[(String, &str, Vec<PathBuf>)]) -> Vec<String> {
    let with: Vec<_> = (links.iter())
        .map(|(what, sm, objs)| (what.clone(), *sm, Vec::new(), objs.clone()))
        .collect();
    identical_links_with(&with)
}

/// As [`identical_links`], each link with its options after `-arch`.
fn identical_links_with(links: &[(String, &str, Vec<String>, Vec<PathBuf>)]) -> Vec<String> {
    let all: Vec<(String, Vec<String>)> = (links.iter())
        .map(|(what, sm, options, objs)| {
            let mut a = vec![format!("-arch={sm}")];
            a.extend(options.iter().cloned());
            a.extend(objs.iter().map(|o| o.display().to_string()));
            (format!("{what} {sm}"), a)
        })
        .collect();
    identical_all(&all)
}

const SHARED: &str = "template <int N> __global__ void vec(const float4 *in, float4 *out) {
  __shared__ __align__(32) float4 buf[N];
  buf[threadIdx.x % N] = in[threadIdx.x]; __syncthreads();
  out[threadIdx.x] = buf[(threadIdx.x + 1) % N];
}
template <int N> __global__ void hist(const int *in, int *out) {
  __shared__ int bins[N];
  bins[threadIdx.x % N] = 0; __syncthreads();
  atomicAdd(&bins[in[threadIdx.x] % N], 1); __syncthreads();
  out[threadIdx.x] = bins[threadIdx.x % N];
}
__device__ __noinline__ int both(int x) { __shared__ double d[8]; d[x % 8] = x; __syncthreads(); return d[(x + 1) % 8]; }
__global__ void ka(int *o) { o[0] = both(o[1]); }
__global__ void kb(int *o) { o[0] = both(o[2]); }
__global__ void kc(int *o) { __shared__ char c[5]; c[o[0] % 5] = 1; __syncthreads(); o[1] = c[o[2] % 5]; }
template __global__ void vec<64>(const float4 *, float4 *);
template __global__ void hist<256>(const int *, int *);
template __global__ void hist<128>(const int *, int *);
#ifdef MAIN
int main() { hist<256><<<1, 256>>>(nullptr, nullptr); hist<128><<<1, 1>>>(0, 0); ka<<<1, 1>>>(0); kb<<<1, 1>>>(0); kc<<<1, 1>>>(0); return 0; }
#endif
";

/// Once two kernels share a variable (or a kernel the host code does not launch leaves
/// its array behind), nvlink aligns every kernel's window as the link's strictest shared
/// variable asks: 32 here, where nvlinkrs wrote each window's own (1, 4, 8). The CUB
/// kernels of a plain CUB/Thrust link differed in the same way (16 and 4).
#[test]
fn shared_windows_aligned_as_the_strictest_variable() {
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for sm in ["sm_80", "sm_90", "sm_100", "sm_120"] {
        for (what, extra) in [
            ("every kernel", &[][..]),
            ("launched ones", &["-DMAIN"][..]),
        ] {
            let o = compiled(dir.path(), "smem", SHARED, sm, extra);
            links.push((what.to_string(), sm, vec![o]));
        }
    }
    let failures = identical_links(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The image's only kernel lists every kept function's references in the image's order
/// of code (its callee's `malloc` first, its own `vprintf free` after), not its own first.
#[test]
fn the_only_kernels_externs_in_the_order_of_code() {
    const ONE: &str = "#include <cstdio>
__device__ __noinline__ float *scratch(int n) { return (float *)malloc(n * sizeof(float)); }
__global__ void kern(float *x) { float *s = scratch(4); s[0] = x[0]; printf(\"%f\\n\", s[0]); free(s); }
__global__ void other() { printf(\"other\\n\"); }
int main() { kern<<<1, 1>>>(nullptr); return 0; }
";
    let dir = tempfile::tempdir().unwrap();
    let links: Vec<_> = ["sm_80", "sm_90", "sm_100"]
        .into_iter()
        .map(|sm| {
            (
                "one kernel".to_string(),
                sm,
                vec![compiled(dir.path(), "one", ONE, sm, &[])],
            )
        })
        .collect();
    let failures = identical_links(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A source of `tests/fixtures/merge`.
fn fixture_source(name: &str) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/merge");
    std::fs::read_to_string(dir.join(name)).unwrap()
}

/// Virtual functions across two units (`vshapes.cu`, `vmain.cu`): `build` (which makes
/// the objects) gets only `malloc`, not the `free` of the destructors whose addresses
/// its callees store; `measure`'s two virtual calls of one prototype are two
/// `.nv.callgraph` entries; `-dump-callgraph` names the deleting destructors as nvlink
/// does.
#[test]
fn virtual_functions_link_as_nvlink() {
    let dir = tempfile::tempdir().unwrap();
    let h = "vshape.h";
    std::fs::write(dir.path().join(h), fixture_source(h)).unwrap();
    let (shapes, main) = (fixture_source("vshapes.cu"), fixture_source("vmain.cu"));
    let mut links = Vec::new();
    for sm in ["sm_80", "sm_90", "sm_100", "sm_120"] {
        let objs = vec![
            compiled(dir.path(), "vshapes", &shapes, sm, &[]),
            compiled(dir.path(), "vmain", &main, sm, &[]),
        ];
        links.push(("virtual functions".to_string(), sm, objs));
    }
    let mut failures = identical_links(&links);
    let a: Vec<String> = std::iter::once("-arch=sm_90".to_string())
        .chain(links[1].2.iter().map(|o| o.display().to_string()))
        .chain(std::iter::once("-dump-callgraph".to_string()))
        .collect();
    let want = run(&cuda().join("bin/nvlink"), &a, dir.path()).messages;
    let got = run(&nvlinkrs(), &a, dir.path()).messages;
    assert!(
        want.iter().any(|l| l.contains("&Rect::~Rect() [deleting]")),
        "{want:?}"
    );
    if want != got {
        failures.push(format!("-dump-callgraph: {want:?}\n  vs {got:?}"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A kernel with five indirect calls of three prototypes (`cgsites.cu`): `-dump-callgraph`
/// lists each call's targets last call first, as nvlink adds them (nvlinkrs listed them
/// first call first: a helper's differential run on virtual functions and function-pointer
/// tables, sm_80 to sm_120), and the image is nvlink's.
#[test]
fn indirect_calls_are_listed_last_first_as_nvlink() {
    let dir = tempfile::tempdir().unwrap();
    let src = fixture_source("cgsites.cu");
    let mut links = Vec::new();
    for sm in ["sm_90", "sm_120"] {
        links.push((
            "indirect calls".to_string(),
            sm,
            vec![compiled(dir.path(), "cgsites", &src, sm, &[])],
        ));
    }
    let mut failures = identical_links(&links);
    for (_, sm, objs) in &links {
        let a: Vec<String> = [format!("-arch={sm}"), objs[0].display().to_string()]
            .into_iter()
            .chain(std::iter::once("-dump-callgraph".to_string()))
            .collect();
        let want = run(&cuda().join("bin/nvlink"), &a, dir.path()).messages;
        let got = run(&nvlinkrs(), &a, dir.path()).messages;
        assert!(want.iter().any(|l| l.contains("^k_sites")), "{want:?}");
        if want != got {
            failures.push(format!("-dump-callgraph {sm}: {want:?}\n  vs {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The difference kept on purpose (docs/rules/differences.md, beside the PTX-file one): a
/// function only a `__device__` table of function pointers names, whose code calls
/// ptxas's local `__cuda_sm20_rcp_rn_f32_slowpath`, beside a kernel the host code does not
/// launch. nvlink 13.5 keeps the function but drops the callee it calls, and leaves the call
/// unrelocated (a call to address 0 if the pointer is ever used); nvlinkrs keeps the
/// callee and relocates the call. This test fails the day nvlink writes it otherwise.
#[test]
fn nvlinks_dropped_callee_of_a_pointer_table_is_kept() {
    const FP: &str = "typedef float (*unop_t)(float);
__device__ float f_inv(float x) { return 1.f / x; }
__device__ float f_id(float x) { return x; }
__device__ unop_t table[2] = { f_inv, f_id };
__global__ void k0(float *o) { o[threadIdx.x] = threadIdx.x; }
__global__ void k1(float *o, int i) { o[threadIdx.x] = table[i & 1](o[threadIdx.x]); }
int main() { k0<<<1, 1>>>(nullptr); return 0; }
";
    let dir = tempfile::tempdir().unwrap();
    let o = compiled(dir.path(), "fp", FP, "sm_90", &[]);
    let a = vec!["-arch=sm_90".to_string(), o.display().to_string()];
    let slowpath = "__cuda_sm20_rcp_rn_f32_slowpath";
    let symbols = |tool: &Path| symbols_and_call(tool, &a, dir.path(), "_Z5f_invf", slowpath);
    let (theirs, their_call) = symbols(&cuda().join("bin/nvlink"));
    let (ours, our_call) = symbols(&nvlinkrs());
    assert!(theirs.iter().any(|n| n == "_Z5f_invf"), "{theirs:?}");
    assert!(
        !theirs.iter().any(|n| n == slowpath) && !their_call,
        "{theirs:?}"
    );
    assert!(ours.iter().any(|n| n == slowpath) && our_call, "{ours:?}");
}

/// A `__device__` variable that another unit names `extern __constant__` (or defines as
/// `__constant__`): nvlink's error, `Memory space doesn't match for 'gv' in 'c.o', first
/// specified in 'a.o'`, exit 1, no image. nvlinkrs linked it with exit 0, and the kernel
/// read constant bank 3 at the global variable's address.
#[test]
fn a_variables_memory_space_must_agree() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let a = compiled(
        d,
        "gva",
        "__device__ int gv = 1;\n__global__ void k1(int *o) { o[0] = gv; }\n",
        "sm_90",
        &[],
    );
    let b = compiled(
        d,
        "gvb",
        "__constant__ int gv;\n__global__ void k2(int *o) { o[0] = gv; }\n",
        "sm_90",
        &[],
    );
    let c = compiled(
        d,
        "gvc",
        "extern __constant__ int gv;\n__global__ void k3(int *o) { o[0] = gv; }\n",
        "sm_90",
        &[],
    );
    let mut failures = Vec::new();
    for objs in [[&a, &c], [&c, &a], [&a, &b]] {
        let mut args = vec!["-arch=sm_90".to_string()];
        args.extend(objs.iter().map(|o| o.display().to_string()));
        let nvlink = run(&cuda().join("bin/nvlink"), &args, d);
        assert_eq!(nvlink.code, 1, "nvlink links {args:?}");
        if let Err(e) = differential(&args) {
            failures.push(format!("{args:?}:\n    {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A pointer initialised with a `__constant__` array's address (`__constant__ const char
/// *p = ctab;`, in the array's unit and in another, and a `__device__` one): only the
/// driver knows the array's generic address, so nvlink keeps the relocations (R_CUDA_G64,
/// and at sm_100+ their Mercury twins) with the bytes 0; nvlinkrs wrote the array's offset
/// in the bank as the pointer, exit 0 (attacker review of 2026-12-01).
#[test]
fn a_pointer_to_a_constant_array_is_left_for_the_driver() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let units = [
        (
            "cptr1",
            "__constant__ char ctab[64];\n__constant__ const char *cself = ctab;\n\
             __global__ void k(char *o) { o[threadIdx.x] = cself[threadIdx.x]; }\n",
        ),
        (
            "cptr2",
            "extern __constant__ char ctab[64];\n__constant__ const char *cstr = ctab;\n\
             __device__ const char *dstr = ctab;\n\
             __global__ void k2(char *o) { o[threadIdx.x] = cstr[threadIdx.x] + dstr[threadIdx.x]; }\n",
        ),
    ];
    let mut links = Vec::new();
    for sm in ["sm_90", "sm_100a", "sm_120a"] {
        let mut args = vec![format!("-arch={sm}")];
        for (name, src) in units {
            args.push(compiled(d, name, src, sm, &[]).display().to_string());
        }
        links.push((format!("constant pointers {sm}"), args));
    }
    let failures = super::identical_all(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The same object named twice after one that only refers to its variable (a Makefile's
/// mistake): nvlink's `Multiple definition of 'g_count' in 'def.o', first defined in
/// 'use.o'` names the input that named the variable first (for a function, called in
/// `use.o` too, the first definition's); nvlinkrs named the definition's (new-user review
/// of 2026-12-01). The differential compares the messages.
#[test]
fn a_multiple_definition_names_the_input_that_named_it_first() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let def = compiled(
        d,
        "mdef",
        "__device__ int g_count;\n__device__ int twice(int x) { return 2 * x; }\n\
         __global__ void bump() { atomicAdd(&g_count, 1); }\n",
        "sm_90",
        &[],
    );
    let used = compiled(
        d,
        "muse",
        "extern __device__ int g_count;\n__device__ int twice(int);\n\
         __global__ void get(int *o) { *o = twice(g_count); }\n",
        "sm_90",
        &[],
    );
    let mut failures = Vec::new();
    for objs in [[&used, &def, &def], [&def, &used, &def]] {
        let mut args = vec!["-arch=sm_90".to_string()];
        args.extend(objs.iter().map(|o| o.display().to_string()));
        if let Err(e) = differential(&args) {
            failures.push(format!("{args:?}:\n    {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// An `extern` variable no unit defines, read only by code the link drops (an unused
/// `__noinline__` function, a weak one, a kernel no host object launches): nvlink stops
/// (`Undefined reference`, exit 255); nvlinkrs linked (new-user review of 2026-12-01). An
/// undefined function called only from a kernel no host object launches links under both;
/// under `-kernels-used` both refuse it, and a kernel no unit defines that a dropped kernel
/// launches from the device.
#[test]
fn a_variable_no_unit_defines_is_undefined_even_in_dropped_code() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let k = "__global__ void k(int *o) { o[0] = 1; }\n";
    let cases = [
        (
            "unused_fn",
            "extern __constant__ int c_val;\n__device__ __noinline__ int get() { return c_val; }\n"
                .to_string(),
            "",
        ),
        (
            "weak_fn",
            format!(
                "extern __device__ int g_val;\n__device__ __noinline__ __attribute__((weak)) int get() {{ return g_val; }}\n{k}"
            ),
            "",
        ),
        (
            "unlaunched_kernel",
            format!(
                "extern __device__ int g_val;\n__global__ void k2(int *o) {{ o[0] = g_val; }}\n{k}int main() {{ k<<<1, 1>>>(0); return 0; }}\n"
            ),
            "",
        ),
        (
            "unlaunched_call",
            format!(
                "extern __device__ int ext_fn(int);\n__global__ void k2(int *o) {{ o[0] = ext_fn(o[1]); }}\n{k}int main() {{ k<<<1, 1>>>(0); return 0; }}\n"
            ),
            "",
        ),
        (
            "kernels_used_call",
            format!(
                "extern __device__ int ext_fn(int);\n__global__ void k2(int *o) {{ o[0] = ext_fn(o[1]); }}\n{k}"
            ),
            "-kernels-used=k",
        ),
        // a kernel no unit defines, launched from the device by a kernel -kernels-used
        // drops: nvlink refuses it (the attacker's review of the drop-in, 2026-12-01:
        // nvlinkrs linked)
        (
            "kernels_used_launch",
            format!(
                "extern __global__ void kern(int *o);\n__global__ void launcher(int *o) {{ kern<<<1, 1>>>(o); }}\n{k}"
            ),
            "-kernels-used=k",
        ),
    ];
    let mut failures = Vec::new();
    for sm in ["sm_80", "sm_120a"] {
        for (name, src, option) in &cases {
            let o = compiled(d, name, src, sm, &[]);
            let mut args = vec![format!("-arch={sm}")];
            args.extend((!option.is_empty()).then(|| option.to_string()));
            args.push(o.display().to_string());
            if let Err(e) = differential(&args) {
                failures.push(format!("{name} {sm}:\n    {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Family-specific SASS (`-gencode arch=compute_100f,code=sm_100f`, no PTX) for a target
/// of its family: nvlink links `sm_100f` code for sm_100, sm_103 and sm_103f, `sm_120f`
/// for sm_121. nvlinkrs took it only for the very target, and wrote an image without
/// the kernel (exit 0, a warning), or refused an archive of it (`Undefined reference`).
#[test]
fn family_sass_links_across_its_family() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("fam.cu"),
        "__device__ int twice(int x) { return 2 * x; }\n__global__ void k(int *o) { o[0] = twice(o[1]); }\n",
    )
    .unwrap();
    let nvcc = |fam: &str, out: &str| {
        let o = std::process::Command::new(cuda().join("bin/nvcc"))
            .args([
                "-dc",
                "-gencode",
                &format!("arch=compute_{fam},code=sm_{fam}"),
            ])
            .args(["fam.cu", "-o", out])
            .current_dir(d)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        d.join(out)
    };
    let (f100, f120) = (nvcc("100f", "f100.o"), nvcc("120f", "f120.o"));
    let lib = d.join("libfam.a");
    let ar = std::process::Command::new(cuda().join("bin/nvcc"))
        .args(["-lib", "-o"])
        .arg(&lib)
        .arg(&f100)
        .status()
        .unwrap();
    assert!(ar.success());
    let mut links: Vec<(String, &str, Vec<PathBuf>)> = ["sm_100", "sm_103", "sm_103f"]
        .into_iter()
        .map(|sm| ("sm_100f code".to_string(), sm, vec![f100.clone()]))
        .collect();
    links.push(("sm_120f code".into(), "sm_121", vec![f120.clone()]));
    links.push((
        "an archive of sm_100f code".into(),
        "sm_103",
        vec![lib.clone()],
    ));
    let failures = identical_links(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `-extrawarn` (nvlinkrs refused it, nvlink takes it): nvlink's warning for each
/// function whose address is taken and that no kept function calls, directly or
/// through a pointer of its prototype: a table's functions when the host code launches
/// only the kernel that does not call through it, none when every kernel is kept.
#[test]
fn extra_warnings_name_functions_only_a_pointer_reaches() {
    const SRC: &str = "typedef float (*unop_t)(float);
__device__ float f_id(float x) { return x; }
__device__ float f_neg(float x) { return -x; }
__device__ unop_t table[2] = { f_id, f_neg };
__global__ void k0(float *o) { o[threadIdx.x] = threadIdx.x; }
__global__ void k1(float *o, int i) { o[threadIdx.x] = table[i & 1](o[threadIdx.x]); }
#ifdef MAIN
int main() { k0<<<1, 1>>>(nullptr); return 0; }
#endif
";
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (extra, warnings) in [(&["-DMAIN"][..], 2), (&[][..], 0)] {
        let o = compiled(dir.path(), "tab", SRC, "sm_90", extra);
        let a = vec![
            "-arch=sm_90".to_string(),
            "-extrawarn".to_string(),
            o.display().to_string(),
        ];
        let said = run(&cuda().join("bin/nvlink"), &a, dir.path()).messages;
        let n = said
            .iter()
            .filter(|l| l.contains("has address taken but no calls"))
            .count();
        assert_eq!(n, warnings, "{extra:?}: {said:?}");
        match differential(&a) {
            Ok(true) => {}
            other => failures.push(format!("{extra:?}: {other:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `-keep-system-libraries`: nvlink keeps every member of libcudadevrt, its memcpy and
/// memset kernels among them, though nothing launches from the device; nvlinkrs took the
/// option and dropped them (1 function in the image where nvlink's has 33).
#[test]
fn keep_system_libraries_keeps_libcudadevrt() {
    let dir = tempfile::tempdir().unwrap();
    let src = "__global__ void k(int *o) { o[threadIdx.x] = threadIdx.x; }\n";
    let lib = format!("-L{}", cuda().join("lib").display());
    let mut failures = Vec::new();
    for sm in ["sm_90", "sm_100"] {
        let o = compiled(dir.path(), "ksl", src, sm, &[]);
        let a: Vec<String> = [&format!("-arch={sm}"), "-keep-system-libraries"]
            .into_iter()
            .map(String::from)
            .chain([o.display().to_string(), lib.clone(), "-lcudadevrt".into()])
            .collect();
        let image = run(&cuda().join("bin/nvlink"), &a, dir.path())
            .output
            .unwrap();
        let c = nvlinkrs::elf::cubin::Cubin::parse(nvlinkrs::bytes::Bytes::from_vec(image), "x")
            .unwrap();
        let functions = (c.symbols.iter())
            .filter(|s| s.defined() && s.ty == nvlinkrs::elf::cubin::STT_FUNC)
            .count();
        assert!(
            functions > 30,
            "{sm}: nvlink's image has {functions} functions"
        );
        match differential(&a) {
            Ok(true) => {}
            other => failures.push(format!("{sm}: {other:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A `-G` link at sm_100+ whose host code launches one kernel of two: the image is
/// libnvJitLink's debug link, which keeps every kernel unless told; it was given every
/// kernel, its image had one more than the merge's, and the link fell back to the
/// unfinalized image with a warning. It is told the kernels the merge kept.
#[test]
fn a_debug_link_is_finalized_with_the_kernels_the_host_launches() {
    let dir = tempfile::tempdir().unwrap();
    let src = "static __global__ void kst(int *o) { o[0] = 1; }
void launch(int *o) { kst<<<1, 1>>>(o); }
__global__ void kpub(int *o) { o[0] = 2; }
";
    let mut links = Vec::new();
    for sm in ["sm_100", "sm_120"] {
        links.push((
            "-G".to_string(),
            sm,
            vec![compiled(dir.path(), "dbg", src, sm, &["-G"])],
        ));
    }
    let failures = identical_links(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A kernel whose callee recurses and another whose callee breaks its register limit:
/// nvlink warns that the first kernel's stack size cannot be determined, then reports the
/// limit errors (exit 1, no image); nvlinkrs reported the errors alone (its limit check
/// came before the step that warns).
#[test]
fn stack_size_warnings_come_before_register_limit_errors() {
    let dir = tempfile::tempdir().unwrap();
    let sources = [
        (
            "rfib",
            "__device__ __noinline__ long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
__global__ void k(long *o) { o[threadIdx.x] = fib(threadIdx.x); }
",
        ),
        (
            "rbig",
            "__device__ __noinline__ int big(int x) { double d[8]; for (int i = 0; i < 8; i++) d[i] = sin((double)x + i);
  double s = 0; for (int i = 0; i < 8; i++) s += d[(i * 3) & 7] * d[i]; return (int)s; }
",
        ),
        (
            "rkr",
            "extern __device__ int big(int);
__global__ void __maxnreg__(40) kr(int *o) { o[0] = big(o[0]); }
",
        ),
    ];
    let mut a = vec!["-arch=sm_90".to_string()];
    for (name, text) in sources {
        a.push(
            compiled(dir.path(), name, text, "sm_90", &[])
                .display()
                .to_string(),
        );
    }
    if let Err(e) = differential(&a) {
        panic!("{e}");
    }
}

/// A template function's static `__shared__` array instantiated in two units is a weak
/// symbol: a debug (or `--preserve-relocs`) link keeps it weak in `.nv_debug.shared`
/// (nvlinkrs made it global), and that section is aligned as the strictest variable the
/// link lays out, here the `double` array of one kernel's window (nvlinkrs: 4, its own).
#[test]
fn debug_links_keep_weak_shared_arrays_weak() {
    const TMPL: &str = "template <typename T, int N> __device__ __noinline__ T block_sum(T v) {
  __shared__ T buf[N]; buf[threadIdx.x % N] = v; __syncthreads();
  T s = 0; for (int i = 0; i < N; ++i) s += buf[i]; return s;
}
";
    let a = format!(
        "{TMPL}__global__ void ka(float *p) {{ p[threadIdx.x] = block_sum<float, 32>(p[threadIdx.x]); }}\n"
    );
    let b = format!(
        "{TMPL}__global__ void kb(float *p, double *q) {{ p[threadIdx.x] = block_sum<float, 32>(p[threadIdx.x]); q[0] = block_sum<double, 16>(q[0]); }}\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for sm in ["sm_80", "sm_90", "sm_100"] {
        let objs = vec![
            compiled(dir.path(), "wa", &a, sm, &[]),
            compiled(dir.path(), "wb", &b, sm, &[]),
        ];
        for option in ["-g", "--preserve-relocs"] {
            links.push((
                option.to_string(),
                sm,
                vec![option.to_string()],
                objs.clone(),
            ));
        }
    }
    let failures = identical_links_with(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A class with a virtual function defined in a header, used in two units: each unit's
/// vtable is a weak data object whose slot a relocation fills. nvlink keeps the bytes of
/// the copy it does not choose but drops its relocations; nvlinkrs kept them (an extra
/// relocation into the dead copy, `.rel.nv.global.init` and, at sm_100+, its Mercury twin).
#[test]
fn a_replaced_weak_vtable_keeps_no_relocations() {
    const S: &str = "struct S { __device__ virtual int f() const { return 1; } };\n";
    let a = format!(
        "{S}__device__ __noinline__ int call_a(const S *p) {{ return p->f(); }}\n__global__ void ka(int *o) {{ S *p = new S; o[0] = call_a(p); delete p; }}\n"
    );
    let b = format!(
        "{S}__device__ __noinline__ int call_b(const S *p) {{ return p->f(); }}\n__global__ void kb(int *o) {{ S *p = new S; o[1] = call_b(p); delete p; }}\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for sm in ["sm_80", "sm_90", "sm_100", "sm_120"] {
        let objs = vec![
            compiled(dir.path(), "va", &a, sm, &[]),
            compiled(dir.path(), "vb", &b, sm, &[]),
        ];
        links.push(("plain".to_string(), sm, Vec::new(), objs.clone()));
        links.push(("-r".to_string(), sm, vec!["-r".to_string()], objs));
    }
    let failures = identical_links_with(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `-kernels-used=parent` where `parent` launches `child` from the device and `child` calls
/// the device runtime (`cudaStreamCreateWithFlags`, `cudaStreamDestroy`): nvlink 13.5
/// keeps `child` (a launched kernel) but drops libcudadevrt's `__cudaCDP2StreamCreateWithFlags`
/// and `__cudaCDP2StreamDestroy` with the relocations of `child`'s calls to them, which
/// then jump to address 0; nvlinkrs keeps them (docs/rules/differences.md). Fails the day
/// nvlink changes.
#[test]
fn a_launched_kernels_device_runtime_calls_are_kept_under_kernels_used() {
    const CDP: &str = "__global__ void child(int *d) {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  d[threadIdx.x] = 1;
  cudaStreamDestroy(s);
}
__global__ void parent(int *d) { if (threadIdx.x == 0) child<<<1, 32>>>(d); }
";
    let dir = tempfile::tempdir().unwrap();
    let o = compiled(dir.path(), "kucdp", CDP, "sm_90", &[]);
    let a = vec![
        "-arch=sm_90".to_string(),
        "-kernels-used=parent".to_string(),
        o.display().to_string(),
        format!("-L{}", cuda().join("lib").display()),
        "-lcudadevrt".to_string(),
    ];
    let create = "__cudaCDP2StreamCreateWithFlags";
    let symbols = |tool: &Path| symbols_and_call(tool, &a, dir.path(), "_Z5childPi", create);
    let (theirs, their_call) = symbols(&cuda().join("bin/nvlink"));
    let (ours, our_call) = symbols(&nvlinkrs());
    assert!(theirs.iter().any(|n| n == "_Z5childPi"), "{theirs:?}");
    assert!(
        !theirs.iter().any(|n| n == create) && !their_call,
        "{theirs:?}"
    );
    assert!(ours.iter().any(|n| n == create) && our_call, "{ours:?}");
}

/// A `-dlto` link libNVVM refuses (its verifier: any unit including a CUB header at
/// sm_100a, NVIDIA's own defect): nvlinkrs prints what libNVVM printed, the reason,
/// before nvlink's info and fatal lines, as nvlink does. Was: libNVVM's child process's
/// output dropped, so the link said only `NVVM_ERROR_COMPILATION`. Found by the new-user
/// review of 2026-11-30.
#[test]
fn a_refused_module_is_explained_in_libnvvms_words() {
    let dir = tempfile::tempdir().unwrap();
    let src =
        "#include <cub/util_device.cuh>\n__global__ void k(int *p) { p[threadIdx.x] += 1; }\n";
    let o = compiled(
        dir.path(),
        "cubinc",
        src,
        "sm_100a",
        &["-gencode=arch=compute_100a,code=lto_100a"],
    );
    let nvvm = cuda().join("nvvm").display().to_string();
    let args: Vec<String> = vec![
        "-arch=sm_100a".into(),
        "-dlto".into(),
        format!("-nvvmpath={nvvm}"),
        o.display().to_string(),
    ];
    let want = run(&cuda().join("bin/nvlink"), &args, dir.path());
    let got = run(&nvlinkrs(), &args, dir.path());
    assert_eq!((want.code, got.code), (1, 1));
    assert!(
        want.messages
            .iter()
            .any(|m| m.contains("input module is broken")),
        "nvlink no longer refuses it: {:?}",
        want.messages
    );
    assert_eq!(want.messages, got.messages);
}

/// A kernel launching another (the device runtime linked) at sm_110a: ptxas gives the
/// unit a reserved shared section, libcudadevrt has initialised data, and nvlink lays the
/// Mercury copies out in their SASS twins' order (`.nv.merc.nv.global.init` first);
/// nvlinkrs made them in input order (equivalent, not byte-identical; new-user review of
/// 2026-12-01). sm_100a and sm_121a alongside.
#[test]
fn a_device_launch_at_sm_110a_lays_out_its_mercury_data_as_nvlink() {
    let dir = tempfile::tempdir().unwrap();
    let src = "__global__ void child(int *d) { d[threadIdx.x] = 1; }\n\
               __global__ void parent(int *d) { if (threadIdx.x == 0) child<<<1, 32>>>(d); }\n";
    let lib = format!("-L{}", cuda().join("lib").display());
    let links: Vec<(String, &str, Vec<String>, Vec<PathBuf>)> = ["sm_110a", "sm_100a", "sm_121a"]
        .into_iter()
        .map(|sm| {
            let o = compiled(dir.path(), "cdp_parent", src, sm, &[]);
            let options = vec![lib.clone(), "-lcudadevrt".to_string()];
            ("device launch".to_string(), sm, options, vec![o])
        })
        .collect();
    let failures = identical_links_with(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
