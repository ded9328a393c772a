//! The final link of an `-r` output nvlink wrote (what a build that links device code in
//! two steps gives the second step): each test failed before its fix, found by the second
//! sweep on programs nobody here wrote (issue 35). The sources are compiled here with the
//! pinned nvcc; nvlink's `-r` output is linked by both linkers, which must agree byte for
//! byte.

use std::path::{Path, PathBuf};

use super::review::compiled;
use super::{cuda, identical_all, run};

/// nvlink's `-r` output of `objs` at `sm`, written in `dir`.
fn nvlinks_relocatable(dir: &Path, sm: &str, objs: &[PathBuf]) -> PathBuf {
    let mut a = vec![format!("-arch={sm}"), "-r".to_string()];
    a.extend(objs.iter().map(|o| o.display().to_string()));
    let out = run(&cuda().join("bin/nvlink"), &a, dir);
    assert_eq!(out.code, 0, "nvlink -r at {sm}: {:?}", out.messages);
    let r = dir.join(format!("r_{sm}.o"));
    std::fs::write(&r, out.output.expect("nvlink's -r output")).unwrap();
    r
}

/// Each (label, sm, nvlink's `-r` output) linked by both linkers: the failures.
fn relinks_identical(links: &[(String, String, PathBuf)]) -> Vec<String> {
    let all: Vec<(String, Vec<String>)> = (links.iter())
        .map(|(what, sm, r)| {
            let args = vec![format!("-arch={sm}"), r.display().to_string()];
            (format!("{what} {sm}"), args)
        })
        .collect();
    identical_all(&all)
}

/// Two units' `printf` strings, each unit's a local `$str`: an `-r` output holds both
/// under one name, and at sm_100+ the Mercury symbol table gives each the CUDA object
/// type and `st_other` of its own Mercury symbol (was: the second `$str` matched the
/// first's, so it kept a plain object's type, 1, and `st_other` 0).
#[test]
fn each_units_local_strings_keep_their_mercury_types() {
    let a = "#include <cstdio>\n__global__ void hello(int v) { printf(\"hello %d\\n\", v); }\n";
    let b = "#include <cstdio>\n__global__ void bye(int v) { printf(\"goodbye, %d\\n\", v); }\n";
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for sm in ["sm_90", "sm_100", "sm_120"] {
        let objs = [
            compiled(dir.path(), "hello", a, sm, &[]),
            compiled(dir.path(), "bye", b, sm, &[]),
        ];
        let r = nvlinks_relocatable(dir.path(), sm, &objs);
        links.push(("printf in two units".to_string(), sm.to_string(), r));
    }
    let failures = relinks_identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A kernel whose call tree recurses and, through a callee, allocates: its `-r` record
/// list has neither `CRS_STACK_SIZE` nor `EXTERNS`, and nvlink's final link adds the
/// unknown stack size first, then the list (was: the list, then the stack size).
#[test]
fn a_recursing_kernels_stack_record_comes_before_its_new_externs() {
    let src = "__device__ int depth(int n) { return n < 2 ? n : depth(n - 1) + depth(n - 2); }
__device__ __noinline__ int *make(int n) { return new int[n]; }
__global__ void grow(int *o, int n) { int *p = make(4); p[0] = depth(n); o[0] = p[0]; }
__global__ void walk(int *o) { o[1] = depth(o[2]); }
";
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for sm in ["sm_80", "sm_90", "sm_100", "sm_120"] {
        let objs = [compiled(dir.path(), "grow", src, sm, &[])];
        let r = nvlinks_relocatable(dir.path(), sm, &objs);
        links.push(("recursion and new".to_string(), sm.to_string(), r));
    }
    let failures = relinks_identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `extern __shared__` arrays through nvlink's `-r`: it gives each kernel an
/// `externsharedinstance` whose value is an offset of its own layout and grows the
/// kernels' `.nv.shared.<kernel>` sections, one with no variable left by 0x10 or 0x20;
/// its final link takes such a section's size into the kernel's window (the array then
/// at 0x20 in a kernel with nothing else), the instance's value as an alignment for the
/// window (0x30: aligned to 48, as nvlink writes it) but not for `.nv_debug.shared`, and
/// at sm_90 adds the reservation to the null symbol's value once per such section. Was:
/// windows without those bytes, a dynamic base 0x20 lower, `.nv_debug.shared` aligned
/// to 32.
#[test]
fn extern_shared_arrays_relink_as_nvlink() {
    let src = |n: usize| {
        format!(
            "__global__ void own(int *o) {{ __shared__ char s[{n}]; s[o[0] % {n}] = 1; __syncthreads(); o[1] = s[o[2] % {n}]; }}
__global__ void dyn_only(int *o) {{ extern __shared__ int d[]; d[threadIdx.x] = o[0]; __syncthreads(); o[1] = d[3]; }}
__global__ void both(int *o) {{ __shared__ char s[{n}]; extern __shared__ int d[]; s[o[0] % {n}] = 1; d[threadIdx.x] = o[0]; __syncthreads(); o[1] = s[o[2] % {n}] + d[3]; }}
"
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for sm in ["sm_80", "sm_90", "sm_100", "sm_120"] {
        for n in [1, 4, 17, 40] {
            let objs = [compiled(dir.path(), &format!("ext{n}"), &src(n), sm, &[])];
            let r = nvlinks_relocatable(dir.path(), sm, &objs);
            let kept = dir.path().join(format!("r_{sm}_{n}.o"));
            std::fs::rename(&r, &kept).unwrap();
            links.push((format!("extern arrays, char[{n}]"), sm.to_string(), kept));
        }
    }
    let failures = relinks_identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// nvlinkrs's own `-r` keeps `extern __shared__` arrays undefined, as the objects have
/// them (nvlink's lays them out and grows the windows: docs/rules/differences.md), so its
/// two-step link gives each kernel the window and code of nvlink's direct link of the same
/// objects. Fails the day the `-r` output takes nvlink's layout.
#[test]
fn our_relocatable_extern_arrays_link_as_the_direct_link() {
    use nvlinkrs::bytes::Bytes;
    use nvlinkrs::elf::cubin::Cubin;
    let src = "__global__ void dyn_only(int *o) { extern __shared__ int d[]; d[threadIdx.x] = o[0]; __syncthreads(); o[1] = d[3]; }
__global__ void both(int *o) { __shared__ char s[17]; extern __shared__ int d[]; s[o[0] % 17] = 1; d[threadIdx.x] = o[0]; __syncthreads(); o[1] = s[o[2] % 17] + d[3]; }
";
    let windows_and_code = |image: Vec<u8>| {
        let c = Cubin::parse(Bytes::from_vec(image), "image").unwrap();
        let mut v: Vec<(String, u64, Vec<u8>)> = (c.sections.iter())
            .filter(|s| s.name.starts_with(".nv.shared.") || s.name.starts_with(".text."))
            .map(|s| (s.name.to_string(), s.size, c.bytes(s).to_vec()))
            .collect();
        v.sort();
        v
    };
    let dir = tempfile::tempdir().unwrap();
    for sm in ["sm_80", "sm_90", "sm_100"] {
        let obj = compiled(dir.path(), "extdirect", src, sm, &[]);
        let arch = format!("-arch={sm}");
        let direct = run(
            &cuda().join("bin/nvlink"),
            &[arch.clone(), obj.display().to_string()],
            dir.path(),
        );
        let r = run(
            &super::nvlinkrs(),
            &[arch.clone(), "-r".into(), obj.display().to_string()],
            dir.path(),
        );
        let ro = dir.path().join(format!("ours_{sm}.o"));
        std::fs::write(&ro, r.output.expect("nvlinkrs's -r output")).unwrap();
        let two_step = run(
            &super::nvlinkrs(),
            &[arch, ro.display().to_string()],
            dir.path(),
        );
        assert_eq!(
            windows_and_code(direct.output.expect("nvlink's image")),
            windows_and_code(two_step.output.expect("nvlinkrs's image")),
            "{sm}"
        );
    }
}

/// Two `__noinline__` functions with a dense `switch` each (a jump table in the function's
/// own bank 2, read at ptxas's internal `.const_opt` symbols), in one unit and one a
/// unit, linked in two steps: nvlinkrs's `-r` keeps the relocations of those reads, so its
/// final link (and nvlink's of the same `-r` output) places each table where the direct
/// link does and the reads follow it. Was (as nvlink's own two steps still are): the reads
/// applied at the function's own offset 0 under `-r`, so after the final link `g` read
/// `f`'s table in a kernel calling both (and zeros in one calling `g` alone), exit 0; and
/// at sm_100+ the `-r` output's `.nv.merc.nv.constant.optimizer.<f>` named no capsule, on
/// which nvlink crashed (SIGSEGV) and libnvJitLink too (the link went on without the
/// finalizer). Found by the attacker review of 2026-11-30.
#[test]
fn our_relocatable_switch_tables_link_as_the_direct_link() {
    use nvlinkrs::bytes::Bytes;
    use nvlinkrs::elf::cubin::Cubin;
    let sw = |name: &str, k: u32| {
        format!(
            "__device__ __noinline__ int {name}(int x, int y) {{ switch (x) {{ case 0: return y + {k}; \
             case 1: return y * 9; case 2: return y ^ 0x77; case 3: return y - {k}; case 4: return y << 5; \
             case 5: return y >> 4; case 6: return y * y * {k}; case 7: return ~y + 1; default: return -{k}; }} }}\n"
        )
    };
    let kernels = "__global__ void kf(int *o, const int *i) { int t = threadIdx.x; o[t] = f(i[t], t); }\n\
                   __global__ void kg(int *o, const int *i) { int t = threadIdx.x; o[t] = g(i[t], t); }\n\
                   __global__ void kfg(int *o, const int *i) { int t = threadIdx.x; o[t] = f(i[t], t) + g(i[t] ^ 1, t); }\n";
    let declared = "extern __device__ int f(int, int);\nextern __device__ int g(int, int);\n";
    // the code, the kernels' banks 2 and the capsules (but for their section index)
    let code_and_tables = |image: &[u8]| {
        let c = Cubin::parse(Bytes::from_vec(image.to_vec()), "image").unwrap();
        let mut v: Vec<(String, Vec<u8>)> = (c.sections.iter())
            .filter(|s| {
                [".text.", ".nv.constant2.", ".nv.capmerc.text."]
                    .iter()
                    .any(|p| s.name.starts_with(p))
            })
            .map(|s| {
                let skip = if s.name.starts_with(".nv.capmerc") {
                    4
                } else {
                    0
                };
                (
                    s.name.to_string(),
                    c.bytes(s).get(skip..).unwrap_or_default().to_vec(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for sm in ["sm_80", "sm_100a"] {
        let arch = format!("-arch={sm}");
        let one = compiled(d, "sw_one", &(sw("f", 3) + &sw("g", 5) + kernels), sm, &[]);
        let units = [
            compiled(d, "sw_f", &sw("f", 3), sm, &[]),
            compiled(d, "sw_g", &sw("g", 5), sm, &[]),
            compiled(d, "sw_k", &(declared.to_string() + kernels), sm, &[]),
        ];
        for (what, objs) in [("one unit", vec![one]), ("a unit each", units.to_vec())] {
            let mut direct_args = vec![arch.clone()];
            direct_args.extend(objs.iter().map(|o| o.display().to_string()));
            let direct = run(&cuda().join("bin/nvlink"), &direct_args, d);
            let direct = code_and_tables(&direct.output.expect("nvlink's direct image"));
            // each object -r'd alone by nvlinkrs, then the final link by each linker
            let mut parts = vec![arch.clone()];
            for (n, o) in objs.iter().enumerate() {
                let r = run(
                    &super::nvlinkrs(),
                    &[arch.clone(), "-r".into(), o.display().to_string()],
                    d,
                );
                assert_eq!(r.code, 0, "{what} {sm}: -r {:?}", r.messages);
                let p = d.join(format!("part_{sm}_{n}.o"));
                std::fs::write(&p, r.output.unwrap()).unwrap();
                parts.push(p.display().to_string());
            }
            for linker in [super::nvlinkrs(), cuda().join("bin/nvlink")] {
                let two = run(&linker, &parts, d);
                assert_eq!(two.code, 0, "{what} {sm} {linker:?}: {:?}", two.messages);
                assert!(
                    two.messages.is_empty(),
                    "{what} {sm} {linker:?}: {:?}",
                    two.messages
                );
                let two = code_and_tables(&two.output.expect("the two-step image"));
                assert!(
                    direct == two,
                    "{what} {sm}: {linker:?}'s final link of nvlinkrs's -r output differs from the direct link"
                );
            }
        }
    }
}

/// A kernel with a `switch` of its own (its jump table in its own bank 2, read at ptxas's
/// internal `.const_opt` symbols) reading a `__constant__` table at fixed indices and at
/// `tab[i & 15]`, linked with `-r` and then finally: nvlinkrs's `-r` capsule is nvlink's
/// (the table's reads written at 0x8000 and up, the variable's at their offsets), and its
/// final link of that output writes no warning and the direct link's capsule. Was: under
/// `-r` the capsule's five records against three relocations (the table's symbols were
/// not counted as bank 2), all left 0 with a warning; then the final link warned that the
/// Mercury relocations (the table's kept) were not the SASS ones (applied). Found by the
/// attacker review of 2026-12-01.
#[test]
fn a_kernels_own_switch_table_keeps_its_capsule_through_r() {
    use nvlinkrs::bytes::Bytes;
    use nvlinkrs::elf::cubin::Cubin;
    let src = "__constant__ int tab[16];\n\
        __global__ void k(int *o) {\n\
          int i = threadIdx.x, r;\n\
          switch (i & 7) { case 0: r = 5; break; case 1: r = tab[1]; break; case 2: r = 9; break;\n\
            case 3: r = tab[i & 15]; break; case 4: r = 44; break; case 5: r = tab[7] * 3; break; default: r = 1; }\n\
          o[i] = r + tab[2];\n}\n";
    let capsule = |image: &[u8]| {
        let c = Cubin::parse(Bytes::from_vec(image.to_vec()), "image").unwrap();
        let s = (c.sections.iter())
            .find(|s| s.name == ".nv.capmerc.text._Z1kPi")
            .expect("the kernel's capsule");
        c.bytes(s)[4..].to_vec()
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for sm in ["sm_100a", "sm_120a"] {
        let arch = format!("-arch={sm}");
        let o = compiled(d, "own_switch", src, sm, &[])
            .display()
            .to_string();
        let r_args = [arch.clone(), "-r".to_string(), o.clone()];
        let theirs = run(&cuda().join("bin/nvlink"), &r_args, d);
        let ours = run(&super::nvlinkrs(), &r_args, d);
        assert_eq!((ours.code, &ours.messages), (0, &Vec::new()), "{sm} -r");
        let ours = ours.output.expect("nvlinkrs's -r output");
        assert!(
            capsule(&ours) == capsule(&theirs.output.expect("nvlink's -r output")),
            "{sm}: -r capsule"
        );
        let part = d.join(format!("own_switch_r_{sm}.o"));
        std::fs::write(&part, &ours).unwrap();
        let direct = run(&cuda().join("bin/nvlink"), &[arch.clone(), o], d);
        let two = run(&super::nvlinkrs(), &[arch, part.display().to_string()], d);
        assert_eq!(
            (two.code, &two.messages),
            (0, &Vec::new()),
            "{sm} final link"
        );
        assert!(
            capsule(&two.output.unwrap()) == capsule(&direct.output.unwrap()),
            "{sm}: the final link's capsule is not the direct link's"
        );
    }
}
