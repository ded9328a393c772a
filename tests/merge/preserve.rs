//! `--preserve-relocs` at sm_100 and newer (issue 27, item 5b), against nvlink 13.5:
//! besides the `.nv.resolvedrela.*` lists of the SASS relocations the link applied,
//! nvlink writes their capsule-Mercury counterparts (`.nv.merc.nv.resolvedrela.*`), lists
//! none against a constant bank nor in a debug section, gives the kept shared variables'
//! Mercury symbols `STV_INTERNAL` and their offsets without the reservation, and lays
//! dynamic shared arrays out as a plain link does (docs/rules/preserve-relocs.md).
//! nvlinkrs refused the option there before; the fixture links are now nvlink's image,
//! byte for byte but for the links with libcudadevrt, which are equivalent as their plain
//! links are. Links below sm_100 that differed until the same work follow.

use nvlinkrs::elf::equiv;

use super::{args, cuda, differential, generated, nvlinkrs, run, run_with};

/// The links (each run with `--preserve-relocs`), and whether the image must be nvlink's
/// byte for byte (`cmp`); the others must be equivalent (`nvlinkrs compare`).
fn links() -> Vec<(&'static str, Vec<String>, bool)> {
    let lib = format!("-L{}", cuda().join("lib").display());
    let l = |a: &[&str]| args(&[a, &[lib.as_str(), "-lcudadevrt"][..]].concat());
    let p = |a: &[&str]| args(a);
    vec![
        (
            "cubins sm_100",
            p(&["-arch=sm_100", "a_100.cubin", "b_100.cubin"]),
            true,
        ),
        (
            "input order reversed sm_100",
            p(&["-arch=sm_100", "b_100.cubin", "a_100.cubin"]),
            true,
        ),
        (
            "cubins sm_120",
            p(&["-arch=sm_120", "a_120.cubin", "b_120.cubin"]),
            true,
        ),
        (
            "sm_100 code for sm_103",
            p(&["-arch=sm_103", "a_100.cubin", "b_100.cubin"]),
            true,
        ),
        (
            "sm_100a code",
            p(&["-arch=sm_100a", "a_100a.cubin", "b_100a.cubin"]),
            true,
        ),
        (
            "sm_110 code",
            p(&["-arch=sm_110", "a_110.cubin", "b_110.cubin"]),
            true,
        ),
        (
            "compute_100 code beside compute_120",
            p(&["-arch=sm_120", "b_120.cubin", "a_v100_120.cubin"]),
            true,
        ),
        (
            "register and stack propagation sm_100",
            p(&["-arch=sm_100", "heavy_100.cubin", "caller_100.cubin"]),
            true,
        ),
        (
            "register and stack propagation sm_120",
            p(&["-arch=sm_120", "heavy_120.cubin", "caller_120.cubin"]),
            true,
        ),
        (
            "cooperative groups sm_100",
            p(&["-arch=sm_100", "coop_100.cubin"]),
            true,
        ),
        (
            "cooperative groups sm_120",
            p(&["-arch=sm_120", "coop_120.cubin"]),
            true,
        ),
        // (the finalizer's code taken as whole functions, relocation sites moved)
        (
            "whole functions finalized sm_100",
            p(&[
                "-arch=sm_100",
                "virt_100.cubin",
                "coop_100.cubin",
                "managed_100.cubin",
            ]),
            true,
        ),
        (
            "whole functions finalized sm_120",
            p(&[
                "-arch=sm_120",
                "virt_120.cubin",
                "coop_120.cubin",
                "managed_120.cubin",
            ]),
            true,
        ),
        (
            "driver functions and managed variables sm_100",
            p(&["-arch=sm_100", "managed_100.cubin", "virt_100.cubin"]),
            true,
        ),
        (
            "driver functions and managed variables sm_120",
            p(&["-arch=sm_120", "virt_120.cubin", "managed_120.cubin"]),
            true,
        ),
        (
            "shared memory sm_100",
            p(&["-arch=sm_100", "smem_100.cubin", "smem2_100.cubin"]),
            true,
        ),
        (
            "shared memory sm_120",
            p(&["-arch=sm_120", "smem_120.cubin", "smem2_120.cubin"]),
            true,
        ),
        (
            "shared memory slots sm_100",
            p(&["-arch=sm_100", "smem3_100.cubin"]),
            true,
        ),
        (
            "shared memory slots sm_120",
            p(&["-arch=sm_120", "smem3_120.cubin"]),
            true,
        ),
        (
            "shared memory slot alignment sm_100",
            p(&["-arch=sm_100", "smem4_100.cubin"]),
            true,
        ),
        (
            "shared window alignment sm_100",
            p(&["-arch=sm_100", "smem5_100.cubin"]),
            true,
        ),
        (
            "dynamic shared, one kernel sm_100",
            p(&["-arch=sm_100", "dyn1_100.cubin"]),
            true,
        ),
        (
            "dynamic shared, windows grown sm_100",
            p(&["-arch=sm_100", "dyn2_100.cubin", "dyn3_100.cubin"]),
            true,
        ),
        (
            "dynamic shared, windows grown sm_120",
            p(&["-arch=sm_120", "dyn2_120.cubin", "dyn3_120.cubin"]),
            true,
        ),
        (
            "dynamic shared, only in a function no kernel reaches sm_100",
            p(&["-arch=sm_100", "dyn4_100.cubin"]),
            true,
        ),
        (
            "dynamic shared, only in a function no kernel reaches sm_120",
            p(&["-arch=sm_120", "dyn4_120.cubin"]),
            true,
        ),
        (
            "memory-only sections input by input sm_100",
            p(&["-arch=sm_100", "memord1_100.cubin", "memord2_100.cubin"]),
            true,
        ),
        (
            "EXTERNS grown sm_100",
            p(&["-arch=sm_100", "extgrow1_100.cubin", "extgrow2_100.cubin"]),
            true,
        ),
        (
            "-kernels-used sm_100",
            p(&[
                "-arch=sm_100",
                "-kernels-used=kern_a",
                "a_100.cubin",
                "b_100.cubin",
            ]),
            true,
        ),
        (
            "example objects sm_100, a kernel the host never launches",
            p(&["-arch=sm_100", "main_100.o", "saxpy_100.o", "scale_100.o"]),
            true,
        ),
        (
            "unlaunched kernels, a host object and a cubin sm_100",
            p(&["-arch=sm_100", "launch1_dc100.o", "launch2_100.cubin"]),
            true,
        ),
        (
            "-G inputs, two units sm_100",
            p(&[
                "-arch=sm_100",
                "dbgweak1_100_G.cubin",
                "dbgweak2_100_G.cubin",
            ]),
            true,
        ),
        (
            "-G inputs, unplaced .debug_loc labels sm_100",
            p(&["-arch=sm_100", "debugloc_100_G.cubin"]),
            true,
        ),
        (
            "-lineinfo, inlined functions in two units sm_100",
            p(&[
                "-arch=sm_100",
                "dbginl1_100_li.cubin",
                "dbginl2_100_li.cubin",
            ]),
            true,
        ),
        // libcudadevrt: equivalent, as the plain links are (docs/rules/byte-identity.md)
        (
            "device runtime sm_100",
            l(&["-arch=sm_100", "dp_100.cubin"]),
            false,
        ),
        (
            "device runtime sm_120",
            l(&["-arch=sm_120", "dp_120.cubin"]),
            false,
        ),
        (
            "device runtime, host objects sm_100",
            l(&["-arch=sm_100", "dp_dc100.o", "dpmain_dc100.o"]),
            false,
        ),
        (
            "device runtime beside cubins sm_100",
            l(&["-arch=sm_100", "a_100.cubin", "b_100.cubin", "dp_100.cubin"]),
            false,
        ),
        (
            "launched kernel with shared memory sm_100",
            l(&["-arch=sm_100", "cdp_100.cubin"]),
            false,
        ),
        (
            "kernel launched from another unit sm_100",
            l(&["-arch=sm_100", "cdp2_100.cubin", "cdp_100.cubin"]),
            false,
        ),
        (
            "kernels launched from the device only sm_100",
            l(&["-arch=sm_100", "devlaunch_dc100.o"]),
            false,
        ),
        // below sm_100, the rules found on the way (each differed before): dynamic
        // shared arrays as in a plain link, `.nv_debug.shared` as aligned as what it
        // holds, a kernel the filter leaves out laid out as a function
        (
            "shared memory sm_90",
            p(&["-arch=sm_90", "smem_90.cubin", "smem2_90.cubin"]),
            true,
        ),
        (
            "shared memory sm_75",
            p(&["-arch=sm_75", "smem_75.cubin", "smem2_75.cubin"]),
            true,
        ),
        (
            "shared memory slot alignment sm_90",
            p(&["-arch=sm_90", "smem4_90.cubin"]),
            true,
        ),
        (
            "shared window alignment sm_80",
            p(&["-arch=sm_80", "smem5_80.cubin"]),
            true,
        ),
        (
            "dynamic shared, one kernel sm_90",
            p(&["-arch=sm_90", "dyn1_90.cubin"]),
            true,
        ),
        (
            "dynamic shared, only in a function no kernel reaches sm_90",
            p(&["-arch=sm_90", "dyn4_90.cubin"]),
            true,
        ),
        (
            "memory-only sections input by input sm_90",
            p(&["-arch=sm_90", "memord1_90.cubin", "memord2_90.cubin"]),
            true,
        ),
        (
            "-kernels-used sm_90",
            p(&[
                "-arch=sm_90",
                "-kernels-used=kern_a",
                "a_90.cubin",
                "b_90.cubin",
            ]),
            true,
        ),
        (
            "kernels launched from the device only sm_90",
            l(&["-arch=sm_90", "devlaunch_dc90.o"]),
            true,
        ),
        (
            "unlaunched kernels, host objects sm_90",
            p(&["-arch=sm_90", "launch1_dc.o", "launch2_dc.o"]),
            true,
        ),
        (
            "unlaunched kernels with shared memory of their own (CUB) sm_80",
            p(&["-arch=sm_80", "prunl_80.o", "prhost_80.o"]),
            true,
        ),
        (
            "unlaunched kernels with shared memory of their own (CUB) sm_90",
            p(&["-arch=sm_90", "prunl_90.o", "prhost_90.o"]),
            true,
        ),
        (
            "unlaunched kernels with shared memory of their own (CUB) sm_100",
            p(&["-arch=sm_100", "prunl_100.o", "prhost_100.o"]),
            true,
        ),
        (
            "unlaunched kernels with shared memory of their own (CUB) sm_120",
            p(&["-arch=sm_120", "prunl_120.o", "prhost_120.o"]),
            true,
        ),
    ]
}

/// Each link with `--preserve-relocs` through nvlink and nvlinkrs: the same exit code and
/// messages (nvlink's "not fully implemented" warning), an equivalent image, and nvlink's
/// bytes where the list says so (nvlinkrs refused every one of them before).
#[test]
fn preserve_relocs_sm_100_links_match_nvlink() {
    let mut failures = Vec::new();
    let (mut identical, mut equivalent) = (0, 0);
    let cases = links();
    for (what, a, bytes) in &cases {
        let mut a = a.clone();
        a.insert(1, "--preserve-relocs".into());
        match differential(&a) {
            Ok(true) => identical += 1,
            Ok(false) if !bytes => equivalent += 1,
            Ok(false) => failures.push(format!("{what}: equivalent, not byte-identical")),
            Err(d) => failures.push(format!("{what}:\n    {d}")),
        }
    }
    eprintln!(
        "--preserve-relocs sm_100+: {} links, {identical} byte-identical, {equivalent} equivalent",
        cases.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The links nvlinkrs does not make nvlink's image of with `--preserve-relocs` at
/// sm_100+: `-g` (nvlink's sm_100 debug image has other code, which nvlinkrs takes from
/// libnvJitLink for a plain `-g` link, but libnvJitLink writes no resolved-relocation
/// tables: with the option the image keeps ptxas's code, as the `-g` link without the
/// finalizer does: docs/rules/finalizer.md, debug links) and `-r` (nvlinkrs keeps the
/// `__constant__` relocations nvlink applies and drops, and leaves shared memory to the
/// final link: `tests/merge/bytes.rs`). The option must add no difference of its own: the
/// images differ from nvlink's exactly as those links without it (`-g`: without the
/// finalizer).
#[test]
fn preserve_relocs_sm_100_adds_no_difference_to_g_and_r() {
    let links = [
        &["-g", "-arch=sm_100", "a_100.cubin", "b_100.cubin"][..],
        &["-g", "-arch=sm_100", "smem_100.cubin", "smem2_100.cubin"],
        &["-r", "-arch=sm_100", "a_100.cubin", "b_100.cubin"],
        &["-r", "-arch=sm_100", "smem_100.cubin", "smem2_100.cubin"],
        &["-r", "-arch=sm_120", "heavy_120.cubin", "caller_120.cubin"],
    ];
    let differences = |a: &[String], env: &[(&str, &str)]| -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let want = run(&cuda().join("bin/nvlink"), a, dir.path());
        let got = run_with(&nvlinkrs(), a, dir.path(), env);
        assert_eq!((want.code, got.code), (0, 0), "{a:?}: {:?}", got.messages);
        assert_eq!(want.messages, got.messages, "{a:?}");
        let r = equiv::compare(&want.output.unwrap(), &got.output.unwrap()).unwrap();
        r.differences
    };
    for list in links {
        let plain = args(list);
        let mut preserved = plain.clone();
        preserved.insert(1, "--preserve-relocs".into());
        let off: &[(&str, &str)] = match list[0] {
            "-g" => &[("NVLINKRS_FINALIZER", "off")],
            _ => &[],
        };
        assert_eq!(
            differences(&preserved, &[]),
            differences(&plain, off),
            "{list:?}"
        );
    }
}

/// A function no kernel reaches that uses a dynamic shared array, where
/// `.nv_debug.shared` holds a variable two kernels share: sm_90's `--preserve-relocs`
/// image keeps the array's symbol (0x3ff) and lists that relocation against it; at sm_80
/// and sm_100 nvlink keeps no symbol and fails ("Internal error: reference to deleted
/// symbol"), and so does nvlinkrs, with nvlink's words, no output left (it wrote an image
/// before). Compiled here (nvcc), each SM's link through both linkers.
#[test]
fn preserve_relocs_dynamic_array_of_an_unreached_function() {
    const SOURCE: &str = "extern __shared__ int dyn[];
__device__ __noinline__ int both(int x) {
    __shared__ int s[32];
    s[threadIdx.x % 32] = x;
    __syncthreads();
    return s[(threadIdx.x + 1) % 32];
}
__global__ void k1(int *o) { o[0] = both(o[1]); }
__global__ void k2(int *o) { o[0] = both(o[2]); }
__device__ __noinline__ int unreached(int x) {
    dyn[threadIdx.x] = x;
    return dyn[(threadIdx.x + 1) % 32];
}
";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("dd.cu"), SOURCE).unwrap();
    for (sm, identical) in [
        ("80", None),
        ("90", Some(true)),
        ("100", None),
        ("120", None),
    ] {
        let cubin = dir.path().join(format!("dd_{sm}.cubin"));
        let ok = std::process::Command::new(cuda().join("bin/nvcc"))
            .current_dir(dir.path())
            .args([
                "-cubin",
                "-rdc=true",
                &format!("-arch=sm_{sm}"),
                "dd.cu",
                "-o",
            ])
            .arg(&cubin)
            .status()
            .unwrap()
            .success();
        assert!(ok, "nvcc for sm_{sm}");
        let a = vec![
            format!("-arch=sm_{sm}"),
            "--preserve-relocs".to_string(),
            cubin.display().to_string(),
        ];
        let d = differential(&a);
        match identical {
            // (both fail alike: no image to compare)
            None => assert_eq!(d, Ok(false), "sm_{sm}"),
            Some(i) => assert_eq!(d, Ok(i), "sm_{sm}"),
        }
        // nvlink fails where the list says so (the harness checked nvlinkrs does too)
        let dir2 = tempfile::tempdir().unwrap();
        let want = run(&cuda().join("bin/nvlink"), &a, dir2.path());
        assert_eq!(
            want.code == 0,
            identical.is_some(),
            "sm_{sm}: {:?}",
            want.messages
        );
    }
}

/// Generated program 24 (`genprog.py`) at sm_100: a function no kernel reaches uses the
/// dynamic array; nvlink warns about the kernels' stack sizes (recursive call trees),
/// then fails as above; nvlinkrs gives the same lines in the same order (it failed
/// before the warnings while the failure was raised with the relocations).
#[test]
fn preserve_relocs_failure_comes_after_the_stack_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = generated::program("sm_100", 24, dir.path());
    a.insert(1, "--preserve-relocs".into());
    assert_eq!(differential(&a), Ok(false));
    let want = run(&cuda().join("bin/nvlink"), &a, dir.path());
    assert_eq!(want.code, 1);
    assert!(
        want.messages.iter().any(|m| m.contains("Stack size")),
        "{:?}",
        want.messages
    );
}

/// sm_100+ `--preserve-relocs` keeps device functions no kernel calls; a `switch` in one
/// reads its jump table in its own bank 2, and nvlink writes those reads' offsets into the
/// capsule as for a table placed in a kernel's bank (`0x8000 + offset`, the table at 0).
/// Was: left 0 (30 bytes of two capsules), at sm_100a and sm_120. Found by the new-user
/// review of 2026-11-30.
#[test]
fn preserve_relocs_unreached_switch_functions_get_their_capsule_offsets() {
    let cases: String = (0..12)
        .map(|k| format!("case {k}: return x * {} + c_coef[{k}];\n", k + 3))
        .collect();
    let src = format!(
        "__constant__ float c_coef[64];\n__constant__ int c_map[256];\n\
         __device__ __noinline__ float op_eval(int op, float x) {{ switch (op) {{\n{cases}default: return c_coef[op & 63]; }} }}\n\
         __device__ __noinline__ int classify(int v) {{ switch (v & 15) {{ case 0: return c_map[v & 255]; case 1: return 7; \
         case 2: return v * 3; case 3: return c_map[3]; case 4: return v ^ 5; case 5: return -v; case 6: return v << 2; \
         case 7: return c_map[9] + v; case 8: return v >> 1; case 9: return 11; default: return 0; }} }}\n\
         __global__ void k(int *o) {{ o[threadIdx.x] = classify(o[threadIdx.x]); }}\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for sm in ["sm_100a", "sm_120"] {
        let o = super::review::compiled(dir.path(), "unreached", &src, sm, &[]);
        let args = vec![
            format!("-arch={sm}"),
            "-preserve-relocs".into(),
            o.display().to_string(),
        ];
        match differential(&args) {
            Ok(true) => {}
            Ok(false) => failures.push(format!("{sm}: equivalent, not identical")),
            Err(e) => failures.push(format!("{sm}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
