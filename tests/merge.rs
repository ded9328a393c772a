//! The device ELF merge against the real nvlink (the differential harness): the same
//! command line goes through nvlink 13.5 and nvlinkrs, the exit codes and messages must
//! agree, and the two outputs must be equivalent in the sense of `nvlinkrs compare`
//! (`src/elf/equiv.rs`): header, sections, code per function after relocation, `.nv.info`
//! records, symbols, kept relocations and call graph. Byte-identical outputs are counted.
//! Random programs from `tests/differential/genprog.py` go through the same check
//! (`scripts/differential.sh` runs more of them).

use std::path::{Path, PathBuf};
use std::process::Command;

use nvlinkrs::elf::equiv;

mod common;
use common::{cuda, nvlinkrs};

#[path = "merge/bank2.rs"]
mod bank2;
#[path = "merge/buildsys.rs"]
mod buildsys;
#[path = "merge/bytes.rs"]
mod bytes;
#[path = "merge/cutlass.rs"]
mod cutlass;
#[path = "merge/driver.rs"]
mod driver;
#[path = "merge/finalized.rs"]
mod finalized;
#[path = "merge/fixture_links.rs"]
mod fixture_links;
#[path = "merge/generated.rs"]
mod generated;
#[path = "merge/hostrefs.rs"]
mod hostrefs;
#[path = "merge/launched.rs"]
mod launched;
#[path = "merge/nvshmem.rs"]
mod nvshmem;
#[path = "merge/preserve.rs"]
mod preserve;
#[path = "merge/ptxfile.rs"]
mod ptxfile;
#[path = "merge/relinked.rs"]
mod relinked;
#[path = "merge/review.rs"]
mod review;
#[path = "merge/sweep45.rs"]
mod sweep45;
#[path = "merge/taken.rs"]
mod taken;
#[path = "merge/tensor.rs"]
mod tensor;
#[path = "merge/toolchain.rs"]
mod toolchain;
#[path = "merge/wrappers.rs"]
mod wrappers;

fn fixtures() -> PathBuf {
    PathBuf::from(
        std::env::var_os("NVLINKRS_FIXTURES").expect("NVLINKRS_FIXTURES (set by scripts/test.sh)"),
    )
    .join("merge")
}

struct Outcome {
    code: i32,
    messages: Vec<String>,
    output: Option<Vec<u8>>,
}

fn run(tool: &Path, args: &[String], dir: &Path) -> Outcome {
    run_with(tool, args, dir, &[])
}

fn run_with(tool: &Path, args: &[String], dir: &Path, env: &[(&str, &str)]) -> Outcome {
    let out = dir.join("out.cubin");
    let _ = std::fs::remove_file(&out);
    let mut a: Vec<String> = args.to_vec();
    a.extend(["-o".into(), out.display().to_string()]);
    // nvlinkrs's default cache in a fresh directory (never the user's; no earlier hit)
    let xdg = tempfile::tempdir().unwrap();
    let r = Command::new(tool)
        .args(&a)
        .env("XDG_CACHE_HOME", xdg.path())
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let name = tool.file_name().unwrap().to_string_lossy().into_owned();
    let messages = String::from_utf8_lossy(&r.stderr)
        .lines()
        .filter(|l| !l.starts_with("  ") && !l.is_empty())
        .map(|l| l.replacen(&name, "nvlink", 1))
        .collect();
    Outcome {
        code: r.status.code().unwrap_or(-1),
        messages,
        output: std::fs::read(&out).ok(),
    }
}

/// Runs both linkers; `Ok(identical)` when they agree, else the differences.
fn differential(args: &[String]) -> Result<bool, String> {
    let dir = tempfile::tempdir().unwrap();
    let want = run(&cuda().join("bin/nvlink"), args, dir.path());
    let got = run(&nvlinkrs(), args, dir.path());
    let mut d = Vec::new();
    if want.code != got.code {
        d.push(format!("exit {} vs {}", want.code, got.code));
    }
    if want.messages != got.messages {
        d.push(format!(
            "messages {:?} vs {:?}",
            want.messages, got.messages
        ));
    }
    let mut identical = false;
    match (&want.output, &got.output) {
        (Some(e), Some(a)) => match equiv::compare(e, a) {
            // (the tool note's command line counts here: nvlinkrs records nvlink's)
            Ok(r) if r.equivalent() && r.notes.is_empty() => identical = r.identical,
            Ok(r) => d.extend(r.differences.into_iter().chain(r.notes)),
            Err(e) => d.push(e.to_string()),
        },
        (None, None) => {}
        (w, g) => d.push(format!(
            "output from nvlink: {}, from nvlinkrs: {}",
            w.is_some(),
            g.is_some()
        )),
    }
    if want.code != 0 && got.output.is_some() {
        d.push("nvlinkrs left an output file after failing".into());
    }
    if d.is_empty() {
        Ok(identical)
    } else {
        Err(d.join("\n    "))
    }
}

/// Each (label, arguments) through both linkers ([`differential`]): the failures, each
/// with its label (equivalent images that are not byte-identical among them).
fn identical_all(links: &[(String, Vec<String>)]) -> Vec<String> {
    let mut failures = Vec::new();
    for (what, args) in links {
        match differential(args) {
            Ok(true) => {}
            Ok(false) => failures.push(format!("{what}: equivalent, not identical")),
            Err(e) => failures.push(format!("{what}:\n    {e}")),
        }
    }
    failures
}

fn args(list: &[&str]) -> Vec<String> {
    let fx = fixtures();
    list.iter()
        .map(|a| {
            let p = fx.join(a);
            if !a.starts_with('-') && p.exists() {
                p.display().to_string()
            } else {
                a.to_string()
            }
        })
        .collect()
}

/// Both linkers link `args` without a message; the differences between their images.
fn known_differences(args: &[String]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let want = run(&cuda().join("bin/nvlink"), args, dir.path());
    let got = run(&nvlinkrs(), args, dir.path());
    assert_eq!((want.code, &want.messages), (0, &Vec::new()));
    assert_eq!((got.code, &got.messages), (0, &Vec::new()));
    let r = equiv::compare(&want.output.unwrap(), &got.output.unwrap()).unwrap();
    assert!(!r.differences.is_empty());
    r.differences
}

/// A kernel with its own shared array launched from device code at sm_100: the link
/// succeeds as nvlink's does, and the image is equivalent to nvlink's, libcudadevrt's
/// kernels included, whose code nvlink regenerates from their Mercury (other scheduling
/// control bits; they differed until the finalizer was on by default).
#[test]
fn launched_kernel_sm_100() {
    let lib = format!("-L{}", cuda().join("lib").display());
    let a = args(&["-arch=sm_100", "cdp_100.cubin", &lib, "-lcudadevrt"]);
    if let Err(d) = differential(&a) {
        panic!("{d}");
    }
}

/// Kernels that make no call, at sm_100 and sm_120: nvlink's finalizer gives them other
/// scheduling control bits than ptxas `-c` wrote (docs/rules/finalizer.md).
/// With `NVLINKRS_FINALIZER=nvjitlink` the units that link alone (or with libcudadevrt)
/// take libnvJitLink's control bits and those kernels are nvlink's; so does the unit with
/// an undefined reference to another unit (`ext.cu`), finalized inside the whole program
/// (its call-free kernel differed while such units were left as ptxas wrote them).
#[test]
fn finalizer_control_bits_sm_100() {
    let sources = [
        (
            "leaf",
            "__global__ void k(float* p, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] += 1.f; }\n\
             template<typename T> __global__ void tk(T* p, T v, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] = p[i] * v + T(1); }\n\
             template __global__ void tk<float>(float*, float, int);\n\
             template __global__ void tk<int>(int*, int, int);\n\
             __global__ void reduce(const float* in, float* out, int n) { __shared__ float s[256]; int t = threadIdx.x; int i = blockIdx.x * blockDim.x + t;\n\
               s[t] = i < n ? in[i] : 0.f; __syncthreads(); for (int k = blockDim.x / 2; k > 32; k >>= 1) { if (t < k) s[t] += s[t + k]; __syncthreads(); }\n\
               float v = s[t]; if (t < 32) { for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o); if (t == 0) atomicAdd(out, v); } }\n",
        ),
        (
            "ext",
            "extern __device__ float g(float);\n\
             __global__ void kext(float* p) { p[threadIdx.x] = g(p[threadIdx.x]); }\n\
             __global__ void kleaf(float* p, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] = p[i] * 2.f + 3.f; }\n",
        ),
        ("def", "__device__ float g(float x) { return x * x; }\n"),
    ];
    let dir = tempfile::tempdir().unwrap();
    for arch in ["sm_100", "sm_120"] {
        let mut a = vec![format!("-arch={arch}")];
        for (name, text) in sources {
            let (cu, cubin) = (
                dir.path().join(format!("{name}.cu")),
                dir.path().join(format!("{name}_{arch}.cubin")),
            );
            std::fs::write(&cu, text).unwrap();
            let ok = Command::new(cuda().join("bin/nvcc"))
                .args(["-cubin", "-rdc=true", &format!("-arch={arch}")])
                .arg(&cu)
                .arg("-o")
                .arg(&cubin)
                .status()
                .unwrap()
                .success();
            assert!(ok, "nvcc {name}.cu for {arch}");
            a.push(cubin.display().to_string());
        }
        let want = run(&cuda().join("bin/nvlink"), &a, dir.path());
        assert_eq!((want.code, &want.messages), (0, &Vec::new()), "{arch}");
        let differing = |env: &[(&str, &str)]| {
            let got = run_with(&nvlinkrs(), &a, dir.path(), env);
            assert_eq!(
                (got.code, &got.messages),
                (0, &Vec::new()),
                "{arch} {env:?}"
            );
            let r = equiv::compare(want.output.as_ref().unwrap(), &got.output.unwrap()).unwrap();
            let mut d: Vec<String> = r
                .differences
                .iter()
                .map(|d| d.split(':').next().unwrap().to_string())
                .collect();
            d.dedup();
            d
        };
        let text = |names: &[&str]| -> Vec<String> {
            names.iter().map(|n| format!("section .text.{n}")).collect()
        };
        assert_eq!(
            differing(&[("NVLINKRS_FINALIZER", "off")]),
            text(&[
                "_Z1kPfi",
                "_Z2tkIfEvPT_S0_i",
                "_Z2tkIiEvPT_S0_i",
                "_Z5kleafPfi",
                "_Z6reducePKfPfi"
            ]),
            "{arch}: without the finalizer"
        );
        // (the default: on where the toolkit has libnvJitLink)
        assert_eq!(
            differing(&[]),
            Vec::<String>::new(),
            "{arch}: with libnvJitLink's control bits"
        );
    }
    // dynamic parallelism (dp.cu): its child kernel and libcudadevrt's memcpy_3d and
    // memset_3d kernels, which differ without the finalizer (device_runtime_sm_100), are
    // nvlink's when the unit is finalized with libcudadevrt's member
    let lib = format!("-L{}", cuda().join("lib").display());
    for arch in ["100", "120"] {
        let cubin = format!("dp_{arch}.cubin");
        let a = args(&[&format!("-arch=sm_{arch}"), &cubin, &lib, "-lcudadevrt"]);
        let want = run(&cuda().join("bin/nvlink"), &a, dir.path());
        let env = [("NVLINKRS_FINALIZER", "nvjitlink")];
        let got = run_with(&nvlinkrs(), &a, dir.path(), &env);
        assert_eq!((got.code, &got.messages), (0, &want.messages), "{cubin}");
        let r = equiv::compare(&want.output.unwrap(), &got.output.unwrap()).unwrap();
        assert!(r.equivalent(), "{cubin}: {:?}", r.differences);
    }
    // a finalizer nvlinkrs does not know: refused by name, no output
    let leaf = dir.path().join("leaf_sm_120.cubin").display().to_string();
    let bad = run_with(
        &nvlinkrs(),
        &["-arch=sm_120".to_string(), leaf],
        dir.path(),
        &[("NVLINKRS_FINALIZER", "ptxas")],
    );
    assert_eq!(bad.code, 1);
    assert_eq!(
        bad.messages,
        [
            "nvlink fatal   : NVLINKRS_FINALIZER='ptxas': the values nvlinkrs knows are 'off' (or 0, false, no, none) and 'nvjitlink' (the only finalizer it knows)"
        ]
    );
    assert!(bad.output.is_none());
    // `off` in any case and its synonyms: the link without the finalizer (was: `OFF`
    // and `false` refused)
    let leaf = dir.path().join("leaf_sm_120.cubin").display().to_string();
    let link = |v: &str| {
        let a = ["-arch=sm_120".to_string(), leaf.clone()];
        let o = run_with(&nvlinkrs(), &a, dir.path(), &[("NVLINKRS_FINALIZER", v)]);
        (o.code, o.messages, o.output)
    };
    let off = link("off");
    assert!(off.2.is_some());
    for v in ["OFF", "false", "No", "0"] {
        assert_eq!(link(v), off, "NVLINKRS_FINALIZER={v}");
    }
}

/// Functions whose instructions or size nvlink's finalizer changes (`coop.cu`: k_cluster
/// loses a `MEMBAR` and its padding, 0x80 bytes; k_atomics keeps its size, its
/// instructions moved, its EXIT elsewhere), alone and beside units that call other units:
/// with `NVLINKRS_FINALIZER=nvjitlink` the whole finalized function is taken (code,
/// relocation sites found again, `.nv.info` offset lists, capsule, `.debug_frame` FDE,
/// sizes) and the image is equivalent to nvlink's (coop alone: byte-identical); without
/// it, 9 (sm_100) and 11 (sm_120) differences, as before whole functions were taken.
#[test]
fn finalizer_whole_functions_sm_100() {
    let dir = tempfile::tempdir().unwrap();
    for sm in ["100", "120"] {
        for (set, identical) in [
            (&["coop"][..], true),
            (&["virt", "coop", "managed"][..], false),
        ] {
            let mut a = vec![format!("-arch=sm_{sm}")];
            a.extend(args(
                &set.iter()
                    .map(|n| format!("{n}_{sm}.cubin"))
                    .collect::<Vec<_>>()
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
            ));
            let want = run(&cuda().join("bin/nvlink"), &a, dir.path());
            let env = [("NVLINKRS_FINALIZER", "nvjitlink")];
            let got = run_with(&nvlinkrs(), &a, dir.path(), &env);
            assert_eq!(
                (got.code, &got.messages),
                (0, &want.messages),
                "{set:?} sm_{sm}"
            );
            let (want, got) = (want.output.unwrap(), got.output.unwrap());
            let r = equiv::compare(&want, &got).unwrap();
            assert!(r.equivalent(), "{set:?} sm_{sm}: {:?}", r.differences);
            if identical {
                assert!(want == got, "{set:?} sm_{sm}: not byte-identical");
            }
            let plain = run_with(
                &nvlinkrs(),
                &a,
                dir.path(),
                &[("NVLINKRS_FINALIZER", "off")],
            );
            let r = equiv::compare(&want, &plain.output.unwrap()).unwrap();
            let n = if sm == "100" { 9 } else { 11 };
            assert_eq!(
                r.differences.len(),
                n,
                "{set:?} sm_{sm} without the finalizer"
            );
        }
    }
}

/// -G code at sm_100 whose `.nv.merc.debug_loc` refers to labels ptxas left undefined:
/// the link succeeds and is equivalent to nvlink's (it lacked the relocation of
/// `.nv.merc.debug_info` against `.nv.merc.debug_line` until issue 22's item b).
#[test]
fn unplaced_debug_labels_sm_100() {
    if let Err(d) = differential(&args(&["-arch=sm_100", "debugloc_100_G.cubin"])) {
        panic!("{d}");
    }
}

/// Dynamic parallelism (`dp.cu`: launches into a created stream, the tail-launch and
/// fire-and-forget streams, a recursive launch, cudaGetLastError/cudaPeekAtLastError,
/// cudaMemcpyAsync/cudaMemsetAsync from the device; its host side `dpmain.cu`) at sm_75
/// and sm_90: cubins, host objects, `-g` (with `-G` code and without), whole-program and
/// partial `-dlto` links; and static kernels and internal-linkage names under
/// `-dump-callgraph` (`dpstatic.cu`); sm_80 with and without `--preserve-relocs`.
/// libcudadevrt's cudaMemcpyAsync family refers to
/// `.nv.ptx.const0.size`, which nvlink fills in (each of these links failed before).
#[test]
fn device_runtime_links_equivalent_to_nvlink() {
    let cu = cuda();
    let lib = format!("-L{}", cu.join("lib").display());
    let nvvm = format!("-nvvmpath={}", cu.join("nvvm").display());
    let mut failures = Vec::new();
    let mut cases = 0;
    for sm in ["75", "90"] {
        let arch = format!("-arch=sm_{sm}");
        let f = |name: &str| format!("{name}{sm}");
        let (cubin, g_cubin) = (format!("dp_{sm}.cubin"), format!("dp_{sm}_G.cubin"));
        let (dc, main_dc) = (f("dp_dc") + ".o", f("dpmain_dc") + ".o");
        let (lto, main_lto) = (f("dp_lto") + ".o", f("dpmain_lto") + ".o");
        for (what, list) in [
            ("cubin", vec![cubin.as_str()]),
            ("host objects", vec![&dc, &main_dc]),
            ("-g, -G code", vec!["-g", &g_cubin]),
            ("-g", vec!["-g", &cubin]),
            (
                "-dlto, whole program",
                vec!["-dlto", &nvvm, &lto, &main_lto],
            ),
            ("-dlto, device code only", vec!["-dlto", &nvvm, &lto]),
            ("-dlto, host object", vec!["-dlto", &nvvm, &lto, &main_dc]),
            ("-dump-callgraph", vec!["-dump-callgraph", &cubin]),
        ] {
            let mut a = vec![arch.as_str()];
            a.extend(list);
            a.extend([lib.as_str(), "-lcudadevrt"]);
            cases += 1;
            if let Err(d) = differential(&args(&a)) {
                failures.push(format!("sm_{sm} {what}:\n    {d}"));
            }
        }
    }
    // (sm_80: the `_SREG` mark of a kernel without parameters is dropped, as `_param`)
    for a in [
        vec!["-arch=sm_80", "dp_80.cubin", &lib, "-lcudadevrt"],
        vec![
            "-arch=sm_80",
            "-preserve-relocs",
            "dp_80.cubin",
            &lib,
            "-lcudadevrt",
        ],
    ] {
        cases += 1;
        if let Err(d) = differential(&args(&a)) {
            failures.push(format!("{a:?}:\n    {d}"));
        }
    }
    // (`.nv.ptx.const0.size` is the size of the user's constant bank, `.nv.constant3`:
    // b.cu's 16 bytes, a.cu's and b.cu's 0x30; -1 without one)
    for sm in ["75", "90"] {
        let (arch, a, b, dp) = (
            format!("-arch=sm_{sm}"),
            format!("a_{sm}.cubin"),
            format!("b_{sm}.cubin"),
            format!("dp_{sm}.cubin"),
        );
        for list in [vec![&b, &dp], vec![&a, &dp, &b]] {
            let mut a = vec![arch.as_str()];
            a.extend(list.iter().map(|s| s.as_str()));
            a.extend([lib.as_str(), "-lcudadevrt"]);
            cases += 1;
            if let Err(d) = differential(&args(&a)) {
                failures.push(format!("{a:?}:\n    {d}"));
            }
        }
    }
    for extra in [&[][..], &["-dump-callgraph"]] {
        let mut a = vec!["-arch=sm_90", "dpstatic_90.cubin", &lib, "-lcudadevrt"];
        a.extend(extra);
        cases += 1;
        if let Err(d) = differential(&args(&a)) {
            failures.push(format!("static kernels {extra:?}:\n    {d}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {cases} links differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// PTX from a host object's fatbin is assembled with the ptxas options its member records
/// (nvcc's `-lineinfo`, `-maxrregcount`) first, as nvlink does: the command line's
/// `-maxrregcount` comes after the member's and wins, with ptxas's warning. nvlinkrs ran
/// ptxas without them (another tool note, no line tables, other registers).
#[test]
fn ptx_members_keep_their_ptxas_options() {
    let mut failures = Vec::new();
    for a in [
        &["-arch=sm_90", "heavy_ptx_li.o"][..],
        &["-arch=sm_90", "heavy_ptx_mr.o"],
        &["-arch=sm_90", "-maxrregcount=32", "heavy_ptx_mr.o"],
    ] {
        if let Err(d) = differential(&args(a)) {
            failures.push(format!("{a:?}:\n    {d}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `--register-link-binaries` with libcudadevrt: its module id comes last, once, where a
/// device launch pulled its code in (wherever `-lcudadevrt` stands, named twice
/// included), not where nothing calls it; a `compute_90` link lists it whenever it is
/// given; a whole-program `-dlto` link that merges it lists it too. The file must equal
/// nvlink's (the launching links and the compute_90 one lacked the id before).
#[test]
fn device_runtime_register_file() {
    let cu = cuda();
    let lib = format!("-L{}", cu.join("lib").display());
    let nvvm = format!("-nvvmpath={}", cu.join("nvvm").display());
    let root = fixtures().parent().unwrap().to_path_buf();
    let saxpy = root.join("saxpy_dc.o").display().to_string();
    let scale = root.join("scale_dc.o").display().to_string();
    let (dp, main) = ("dp_dc90.o", "dpmain_dc90.o");
    let devrt = [lib.as_str(), "-lcudadevrt"];
    for list in [
        [&["-arch=sm_90", dp, main][..], &devrt].concat(),
        [
            &["-arch=sm_90"][..],
            &devrt,
            &[&saxpy, &scale, dp, main],
            &devrt,
        ]
        .concat(),
        [&["-arch=sm_90", &saxpy, &scale][..], &devrt].concat(),
        [&["-arch=compute_90", &saxpy, &scale][..], &devrt].concat(),
        [
            &[
                "-arch=sm_90",
                "-dlto",
                &nvvm,
                "dp_lto90.o",
                "dpmain_lto90.o",
            ][..],
            &devrt,
        ]
        .concat(),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let reg = |tool: &Path, name: &str| {
            let path = dir.path().join(name);
            let mut a = args(&list);
            a.push(format!("--register-link-binaries={}", path.display()));
            let o = run(tool, &a, dir.path());
            assert_eq!(o.code, 0, "{list:?}: {:?}", o.messages);
            std::fs::read_to_string(&path).unwrap()
        };
        let theirs = reg(&cu.join("bin/nvlink"), "theirs.c");
        assert_eq!(reg(&nvlinkrs(), "ours.c"), theirs, "{list:?}");
    }
}

/// The same program at sm_100 (cubin, host objects, whole-program `-dlto`) and sm_120:
/// the images are equivalent to nvlink's, the code nvlink regenerates from the capsule
/// Mercury included (`child` and libcudadevrt's static kernels differed in their
/// scoreboard bits until the finalizer was on by default). (At sm_120 `.nv.compat` takes
/// libcudadevrt's larger attribute 0x02; it differed before.)
#[test]
fn device_runtime_sm_100() {
    let cu = cuda();
    let lib = format!("-L{}", cu.join("lib").display());
    let nvvm = format!("-nvvmpath={}", cu.join("nvvm").display());
    for list in [
        &["-arch=sm_100", "dp_100.cubin"][..],
        &["-arch=sm_100", "dp_dc100.o", "dpmain_dc100.o"],
        &[
            "-arch=sm_100",
            "-dlto",
            &nvvm,
            "dp_lto100.o",
            "dpmain_lto100.o",
        ],
        &["-arch=sm_120", "dp_120.cubin"],
        // (`.nv.ptx.const0.size` 0x30, the constant bank of a.cu and b.cu)
        &["-arch=sm_100", "a_100.cubin", "b_100.cubin", "dp_100.cubin"],
    ] {
        let mut a = Vec::new();
        a.extend(list);
        a.extend([lib.as_str(), "-lcudadevrt"]);
        if let Err(d) = differential(&args(&a)) {
            panic!("{list:?}: {d}");
        }
    }
}

/// `-r` of ptxas's internal bank-2 constants (`constopt.cu`, sm_80): nvlink applies the
/// kernels' relocations against the `.const_opt` symbols there too, leaving no
/// `.rel.text`; the output is nvlink's byte for byte (the code and relocation sections
/// differed before, then the tool note).
#[test]
fn internal_constants_relocatable() {
    let a = args(&["-arch=sm_80", "constopt_80.cubin"]);
    assert_eq!(relocatable_identical(&a), Ok(Some(true)));
}

/// `-r` with a dynamic shared array (`smem.cu`: an `extern` array a device function
/// uses): nvlink aligns every `.nv.shared.<kernel>` window and `.nv_debug.shared` as
/// the array asks (16), whichever kernels use it (ours kept the inputs' 8 and 4 before);
/// left: the tool note and nvlink's definition of the array in `.nv_debug.shared`.
#[test]
fn shared_windows_relocatable() {
    for sm in ["80", "90"] {
        let a = args(&[
            "-r",
            &format!("-arch=sm_{sm}"),
            &format!("smem_{sm}.cubin"),
            &format!("smem2_{sm}.cubin"),
        ]);
        for d in known_differences(&a) {
            assert!(
                d.starts_with("section .note.nv.tkinfo:")
                    || d.starts_with(
                        "symbol dyn: [\"type 13 bind 1 other 0x40 in .nv_debug.shared"
                    ),
                "sm_{sm}: {d}"
            );
        }
    }
}

/// `-r` with libcudadevrt: nvlink applies the relocations against `.nv.ptx.const0.size`
/// there too and keeps the symbol, undefined, with the value -1, where its creation order
/// meets it among libcudadevrt's data objects; the output is nvlink's byte for byte.
#[test]
fn device_runtime_relocatable() {
    let lib = format!("-L{}", cuda().join("lib").display());
    // (beside b.cu, `.nv.ptx.const0.size` keeps the value 16, its constant bank's size)
    for a in [
        args(&["-arch=sm_90", "dp_90.cubin", &lib, "-lcudadevrt"]),
        args(&[
            "-arch=sm_90",
            "b_90.cubin",
            "dp_90.cubin",
            &lib,
            "-lcudadevrt",
        ]),
    ] {
        assert_eq!(relocatable_identical(&a), Ok(Some(true)), "-r {a:?}");
    }
    // relinked: nvlinkrs' image of the `-r` output is nvlink's (a launching kernel's
    // `EXTERNS` list takes its callees' lists in the order of their code, which the `-r`
    // output's symbols do not follow: was the device runtime's system calls reordered)
    let dir = tempfile::tempdir().unwrap();
    let r = run(
        &cuda().join("bin/nvlink"),
        &args(&[
            "-r",
            "-arch=sm_90",
            "b_90.cubin",
            "dp_90.cubin",
            &lib,
            "-lcudadevrt",
        ]),
        dir.path(),
    );
    let relocatable = dir.path().join("r.cubin");
    std::fs::write(&relocatable, r.output.expect("nvlink's -r output")).unwrap();
    let again = ["-arch=sm_90".to_string(), relocatable.display().to_string()];
    let want = run(&cuda().join("bin/nvlink"), &again, dir.path()).output;
    let got = run(&nvlinkrs(), &again, dir.path()).output;
    assert!(want.is_some() && want == got, "relink of the -r output");
}

/// `args` linked with `-r` by both linkers: `Some(identical)` when nvlink links, `None`
/// when it refuses (nvlinkrs must then refuse too); an error when only one of them links.
fn relocatable_identical(args: &[String]) -> Result<Option<bool>, String> {
    let dir = tempfile::tempdir().unwrap();
    let mut r = vec!["-r".to_string()];
    r.extend(args.iter().cloned());
    let want = run(&cuda().join("bin/nvlink"), &r, dir.path());
    let got = run(&nvlinkrs(), &r, dir.path());
    match (&want.output, &got.output) {
        (Some(e), Some(a)) => Ok(Some(e == a)),
        (None, None) => Ok(None),
        (w, g) => Err(format!(
            "output from nvlink: {} {:?}, from nvlinkrs: {} {:?}",
            w.is_some(),
            want.messages,
            g.is_some(),
            got.messages
        )),
    }
}

/// The opt-in finalizer runs libnvJitLink in a child process: a damaged library (a real
/// libnvJitLink.so.13 cut to its first 200,000 bytes, which crashes the dynamic loader
/// with SIGBUS; no mock) costs the child, and the link goes on without the finalizer,
/// with a warning naming the library, exit 0, the image byte-identical to the link
/// without the finalizer (was: a fatal line and exit 1, no output, when libnvJitLink ran
/// in the linker's process).
#[test]
fn finalizer_crash_falls_back() {
    let kit = tempfile::tempdir().unwrap();
    for d in ["bin", "include", "nvvm"] {
        std::os::unix::fs::symlink(cuda().join(d), kit.path().join(d)).unwrap();
    }
    std::fs::create_dir(kit.path().join("lib")).unwrap();
    let lib = std::fs::read(cuda().join("lib/libnvJitLink.so.13")).unwrap();
    let cut = kit.path().join("lib/libnvJitLink.so.13");
    std::fs::write(&cut, &lib[..200_000]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let a = vec![
        "-arch=sm_100".to_string(),
        fixtures().join("a_100.cubin").display().to_string(),
        fixtures().join("b_100.cubin").display().to_string(),
        format!("--cuda-path={}", kit.path().display()),
    ];
    let got = run_with(
        &nvlinkrs(),
        &a,
        dir.path(),
        &[("NVLINKRS_FINALIZER", "nvjitlink")],
    );
    let plain = run_with(
        &nvlinkrs(),
        &a,
        dir.path(),
        &[("NVLINKRS_FINALIZER", "off")],
    );
    assert_eq!(
        (got.code, got.messages),
        (
            0,
            vec![format!(
                "nvlink warning : NVLINKRS_FINALIZER: libnvJitLink '{}' crashed (SIGBUS); linked without the finalizer",
                cut.display()
            )]
        )
    );
    assert_eq!((plain.code, &plain.messages), (0, &Vec::new()));
    assert!(got.output.is_some() && got.output == plain.output);
    // a debug link, whose image is the finalizer's (finalize::debug): the merge's image
    let mut g = a.clone();
    g.push("-g".into());
    let got = run_with(
        &nvlinkrs(),
        &g,
        dir.path(),
        &[("NVLINKRS_FINALIZER", "nvjitlink")],
    );
    let plain = run_with(
        &nvlinkrs(),
        &g,
        dir.path(),
        &[("NVLINKRS_FINALIZER", "off")],
    );
    assert_eq!(
        (got.code, got.messages),
        (
            0,
            vec![format!(
                "nvlink warning : NVLINKRS_FINALIZER: libnvJitLink '{}' crashed (SIGBUS); the debug image is the merge's, not finalized",
                cut.display()
            )]
        )
    );
    assert!(got.output.is_some() && got.output == plain.output);
    // a link that fell back is not kept by the whole-link cache: the next one runs the
    // finalizer again (was: the fallback image served from the cache)
    let cache = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let mut r = g.clone();
    r.push(format!("--report-json={}", report.display()));
    let env = [
        ("NVLINKRS_FINALIZER", "nvjitlink"),
        ("XDG_CACHE_HOME", cache.path().to_str().unwrap()),
    ];
    for _ in 0..2 {
        let again = run_with(&nvlinkrs(), &r, dir.path(), &env);
        assert_eq!(again.code, 0);
        let json = std::fs::read_to_string(&report).unwrap();
        assert!(json.contains("\"whole_link\": \"miss\""), "{json}");
    }
}

/// `-r` then relink: the relocatable output of nvlinkrs (and that of nvlink) linked again
/// by both linkers gives equivalent images, for sm_75, sm_80, sm_90 and, with their
/// capsule-Mercury sections, sm_100 and sm_120 (nvlink crashes on an sm_100 relocatable
/// file without them). The `-r` outputs themselves differ from nvlink's where
/// docs/rules/relocatable.md says (notes, prototype table, kept bank relocations, symbol
/// types).
#[test]
fn relocatable_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for sm in ["75", "80", "90", "100", "120"] {
        let arch = format!("-arch=sm_{sm}");
        let inputs = args(&[&format!("a_{sm}.cubin"), &format!("b_{sm}.cubin")]);
        for (who, tool) in [
            ("nvlinkrs", nvlinkrs()),
            ("nvlink", cuda().join("bin/nvlink")),
        ] {
            let r = dir.path().join(format!("{who}_{sm}_r.cubin"));
            let st = Command::new(&tool)
                .env("NVLINKRS_CACHE", "0")
                .args(["-r", &arch])
                .args(&inputs)
                .arg("-o")
                .arg(&r)
                .status()
                .unwrap();
            assert!(st.success(), "{who} -r for sm_{sm}");
            if let Err(d) = differential(&[arch.clone(), r.display().to_string()]) {
                failures.push(format!("relink of {who}'s -r output, sm_{sm}:\n    {d}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// An input file named as a hidden subcommand of nvlinkrs' child processes
/// (`__finalize`, `__nvvm-compile`) is an input, as for nvlink: the same image (was: the
/// link ran as a child, exit 2, no output).
#[test]
fn inputs_named_like_child_subcommands() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["__finalize", "__nvvm-compile"] {
        std::fs::copy(fixtures().join("b_90.cubin"), dir.path().join(name)).unwrap();
        let link = |tool: &Path, out: &str| {
            let r = Command::new(tool)
                .args([name, "-arch=sm_90", "-o", out])
                .current_dir(dir.path())
                .env("XDG_CACHE_HOME", dir.path())
                .output()
                .unwrap();
            let image = std::fs::read(dir.path().join(out)).ok();
            (
                r.status.code(),
                String::from_utf8_lossy(&r.stderr).into_owned(),
                image,
            )
        };
        let (want, got) = (
            link(&cuda().join("bin/nvlink"), "out.cubin"),
            link(&nvlinkrs(), "out.cubin"),
        );
        assert_eq!((want.0, want.1.as_str()), (Some(0), ""), "{name}");
        assert_eq!((got.0, got.1.as_str()), (Some(0), ""), "{name}");
        assert!(got.2.is_some() && got.2 == want.2, "{name}");
    }
}

#[test]
fn bad_cubins_fail_cleanly() {
    let fx = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(fx.join("a_90.cubin")).unwrap();
    // truncated: the section header table is cut off
    let truncated = dir.path().join("truncated.cubin");
    std::fs::write(&truncated, &good[..good.len() - 100]).unwrap();
    // a relocation naming a symbol past the symbol table
    let mut bad_sym = good.clone();
    let c = nvlinkrs::elf::cubin::Cubin::parse(nvlinkrs::bytes::Bytes::from_vec(good.clone()), "a")
        .unwrap();
    let rela = c
        .sections
        .iter()
        .find(|s| s.ty == nvlinkrs::elf::cubin::SHT_RELA)
        .unwrap();
    let at = rela.offset as usize + 8 + 4;
    bad_sym[at..at + 4].copy_from_slice(&0xFFFFu32.to_le_bytes());
    let bad_sym_path = dir.path().join("badsym.cubin");
    std::fs::write(&bad_sym_path, &bad_sym).unwrap();
    // a relocation whose offset passes the end of its section
    let mut bad_off = good.clone();
    let at = rela.offset as usize;
    bad_off[at..at + 8].copy_from_slice(&0xFFFF_FFF0u64.to_le_bytes());
    let bad_off_path = dir.path().join("badoff.cubin");
    std::fs::write(&bad_off_path, &bad_off).unwrap();
    // a shared variable whose value, its alignment, is 4 GiB (the merge fuzz target's
    // input: the windows laid out by it asked for 4 GiB of padding)
    let b_bytes = std::fs::read(fx.join("b_90.cubin")).unwrap();
    let bc =
        nvlinkrs::elf::cubin::Cubin::parse(nvlinkrs::bytes::Bytes::from_vec(b_bytes.clone()), "b")
            .unwrap();
    let k = (bc.symbols.iter())
        .position(|s| {
            s.other & nvlinkrs::elf::cubin::STO_SHARED != 0
                && s.ty != nvlinkrs::elf::cubin::STT_FUNC
        })
        .expect("b.cu's shared array");
    let tab = (bc.sections.iter())
        .find(|s| s.ty == nvlinkrs::elf::cubin::SHT_SYMTAB)
        .unwrap();
    let mut bad_align = b_bytes.clone();
    let at = tab.offset as usize + k * 24 + 8;
    bad_align[at..at + 8].copy_from_slice(&(1u64 << 32).to_le_bytes());
    let bad_align_path = dir.path().join("badalign.cubin");
    std::fs::write(&bad_align_path, &bad_align).unwrap();
    let b = fx.join("b_90.cubin").display().to_string();
    for (path, expect) in [
        (&truncated, "truncated.cubin"),
        (&bad_sym_path, "names symbol 65535"),
        (&bad_off_path, "past the end of the section"),
        (
            &bad_align_path,
            "has value 0x100000000 (its alignment or offset), more than shared memory holds",
        ),
    ] {
        let out = dir.path().join("out.cubin");
        let r = Command::new(nvlinkrs())
            .env("NVLINKRS_CACHE", "0")
            .args([
                "-arch=sm_90",
                &path.display().to_string(),
                &b,
                "-o",
                &out.display().to_string(),
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{err}");
        assert!(
            err.contains(expect) && err.contains(&*path.file_name().unwrap().to_string_lossy()),
            "{err}"
        );
        assert!(!out.exists(), "no output after a failed link");
        assert!(!err.contains("panicked"), "{err}");
    }
    // SASS for another SM
    let r = Command::new(nvlinkrs())
        .env("NVLINKRS_CACHE", "0")
        .args([
            "-arch=sm_90",
            &fx.join("a_80.cubin").display().to_string(),
            "-o",
            &dir.path().join("x").display().to_string(),
        ])
        .output()
        .unwrap();
    assert_ne!(r.status.code(), Some(0));
}

/// nvlink's dropped-callee defect (docs/rules/differences.md), read off its own
/// `-dump-callgraph`: a function it keeps lists as a callee a node whose function it
/// removed (a node printed without a function). The kept callers and removed callees.
fn dropped_callees(dump: &[String]) -> Vec<String> {
    let removed: Vec<&str> = dump
        .iter()
        .filter_map(|l| l.strip_suffix(": "))
        .filter(|n| n.chars().all(|c| c.is_ascii_digit()))
        .collect();
    let mut found = Vec::new();
    for line in dump {
        let Some((node, rest)) = line.split_once(": ") else {
            continue;
        };
        let Some((_, callees)) = rest.rsplit_once(" ->") else {
            continue;
        };
        for c in callees.split_whitespace().filter(|c| removed.contains(c)) {
            found.push(format!("{node} calls removed {c}"));
        }
    }
    found
}

/// A program with a deep call graph (`benches/gen/deepprog.py`: kernels whose call trees
/// run five deep across units and overlap, device functions with shared arrays,
/// barriers and frames), linked both ways: the same `-dump-callgraph` and an equivalent
/// image (the kernels' shared windows, register counts, stack sizes and barriers come
/// from their call trees).
#[test]
fn deep_call_graphs_link_as_nvlink() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/gen/deepprog.py");
    let dir = tempfile::tempdir().unwrap();
    let ok = Command::new("python3")
        .arg(&script)
        .args([
            "3",
            dir.path().to_str().unwrap(),
            "--tus",
            "6",
            "--kernels",
            "4",
        ])
        .status()
        .unwrap()
        .success();
    assert!(ok, "deepprog");
    let tus: Vec<String> = (0..6).map(|t| format!("t{t}.cu")).collect();
    let ok = Command::new(cuda().join("bin/nvcc"))
        .current_dir(dir.path())
        .args(["-cubin", "-rdc=true", "-arch=sm_90"])
        .args(&tus)
        .status()
        .unwrap()
        .success();
    assert!(ok, "nvcc");
    let mut a = vec!["-arch=sm_90".to_string()];
    a.extend((0..6).map(|t| dir.path().join(format!("t{t}.cubin")).display().to_string()));
    let dump = |tool: &Path| {
        let mut d = a.clone();
        d.push("-dump-callgraph".into());
        run(tool, &d, dir.path()).messages
    };
    let want = dump(&cuda().join("bin/nvlink"));
    assert!(want.len() > 60, "{want:?}");
    assert_eq!(dump(&nvlinkrs()), want);
    differential(&a).unwrap();
}
/// `nvlinkrs shim --cuda-path CUDA_HOME OVERLAY`: the overlay toolkit whose nvcc runs
/// nvlinkrs as its nvlink (its path, absolute).
fn shim(overlay: &Path) -> PathBuf {
    let r = Command::new(nvlinkrs())
        .arg("shim")
        .arg("--cuda-path")
        .arg(cuda())
        .arg(overlay)
        .output()
        .unwrap();
    assert!(
        r.status.success(),
        "shim: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    std::fs::canonicalize(overlay).unwrap()
}

/// A listing of a directory tree: each entry's path, kind and (for a link) target.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            if m.file_type().is_symlink() {
                out.push(format!(
                    "{rel} -> {}",
                    std::fs::read_link(&p).unwrap().display()
                ));
            } else if m.is_dir() {
                out.push(format!("{rel}/"));
                stack.push(p);
            } else {
                out.push(format!("{rel} {}", m.len()));
            }
        }
    }
    out.sort();
    out
}

/// `nvlinkrs shim` makes an overlay of links (the toolkit unchanged), prints the recipes,
/// makes it again over itself, refuses a directory it did not make, and `--remove`
/// removes exactly what it made.
/// `nvlinkrs shim OVERLAY` made again without `--cuda-path` (as the overlay's own message
/// says to do once its nvlinkrs has moved) keeps the toolkit the overlay was made from,
/// as given (was: the toolkit nvlinkrs finds, `CUDA_HOME` resolved); and its answer to a
/// reader that has gone (`| head -1`) ends nothing (was: a panic, exit 101). Found by the
/// new-user review of the toolchain file.
#[test]
fn shim_made_again_keeps_its_toolkit_and_a_closed_stdout_is_no_panic() {
    let dir = tempfile::tempdir().unwrap();
    let ov = dir.path().join("ov");
    let given = cuda();
    let marker_toolkit = || {
        let text = std::fs::read_to_string(ov.join(".nvlinkrs-shim")).unwrap();
        (text.lines())
            .find_map(|l| l.strip_prefix("toolkit\t"))
            .unwrap()
            .to_string()
    };
    let r = Command::new(nvlinkrs())
        .args(["shim", "--cuda-path"])
        .arg(&given)
        .arg(&ov)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(marker_toolkit(), given.display().to_string());
    // again, its standard output a pipe nobody reads
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let r = Command::new(nvlinkrs())
        .arg("shim")
        .arg(&ov)
        .env("CUDA_HOME", &given)
        .stdout(writer)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success() && !err.contains("panicked"), "{err}");
    assert_eq!(marker_toolkit(), given.display().to_string());
}

#[test]
fn shim_overlay() {
    let cu = std::fs::canonicalize(cuda()).unwrap();
    let before = tree(&cu);
    let dir = tempfile::tempdir().unwrap();
    let ov = dir.path().join("ov");
    let shim_cmd = |args: &[&str]| {
        let r = Command::new(nvlinkrs())
            .arg("shim")
            .args(args)
            .output()
            .unwrap();
        (
            r.status.code(),
            String::from_utf8_lossy(&r.stdout).into_owned(),
            String::from_utf8_lossy(&r.stderr).into_owned(),
        )
    };
    let cu_arg = cu.display().to_string();
    let ov_arg = ov.display().to_string();
    let (code, out, err) = shim_cmd(&["--cuda-path", &cu_arg, &ov_arg]);
    assert_eq!(code, Some(0), "{err}");
    let ova = std::fs::canonicalize(&ov).unwrap();
    let o = ova.display();
    assert!(
        out.contains(&format!(
            "CMake:  cmake -DCMAKE_TOOLCHAIN_FILE={o}/nvlinkrs.cmake "
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "Meson:  meson setup --native-file {o}/nvlinkrs-meson.ini BUILDDIR"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!("make:   make NVCC={o}/bin/nvcc\n")),
        "{out}"
    );
    assert!(
        out.contains(&format!("Bazel:  CUDA_PATH={o} bazel build")),
        "{out}"
    );
    // every entry of the toolkit's root and bin/ is a link to it, but bin/nvlink,
    // bin/ptxas and the profile
    let made = tree(&ova);
    for name in std::fs::read_dir(&cu).unwrap() {
        let name = name.unwrap().file_name().into_string().unwrap();
        if name != "bin" {
            assert!(
                made.contains(&format!("{name} -> {}/{name}", cu.display())),
                "{name}: {made:?}"
            );
        }
    }
    for name in std::fs::read_dir(cu.join("bin")).unwrap() {
        let name = name.unwrap().file_name().into_string().unwrap();
        let want = if name == "nvlink" {
            // a script running nvlinkrs under nvcc's name for it, which says when the
            // nvlinkrs it names has gone
            let script = std::fs::read_to_string(ova.join("bin/nvlink")).unwrap();
            let ours = std::fs::canonicalize(nvlinkrs()).unwrap();
            assert!(
                script.contains(&format!("exec -a \"$0\" '{}' \"$@\"", ours.display())),
                "{script}"
            );
            continue;
        } else if name == "ptxas" {
            // a file running the toolkit's (clang follows a link to its toolkit)
            let script = std::fs::read_to_string(ova.join("bin/ptxas")).unwrap();
            let theirs = cu.join("bin/ptxas");
            assert!(
                script.contains(&format!("exec '{}' \"$@\"", theirs.display())),
                "{script}"
            );
            continue;
        } else if name == "nvcc.profile" {
            // a copy whose TOP is where the toolkit's own nvcc puts it
            let profile = std::fs::read_to_string(ova.join("bin/nvcc.profile")).unwrap();
            let top = format!("{}/bin/..", cu.display());
            assert!(
                profile
                    .lines()
                    .any(|l| l.starts_with("TOP") && l.ends_with(&top)),
                "{profile}"
            );
            continue;
        } else {
            format!("bin/{name} -> {}/bin/{name}", cu.display())
        };
        assert!(made.contains(&want), "{want}: {made:?}");
    }
    // again, with the overlay as --cuda-path (it knows its toolkit): the same overlay
    let (code, _, err) = shim_cmd(&["--cuda-path", &ov_arg, &ov_arg]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(tree(&ova), made);
    // a directory it did not make is refused and left as it was
    let foreign = dir.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("keep"), "x").unwrap();
    let (code, _, err) = shim_cmd(&["--cuda-path", &cu_arg, &foreign.display().to_string()]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("is not empty and was not made by nvlinkrs shim"),
        "{err}"
    );
    let (code, _, err) = shim_cmd(&["--remove", &foreign.display().to_string()]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("was not made by nvlinkrs shim (no .nvlinkrs-shim)"),
        "{err}"
    );
    assert_eq!(tree(&foreign), ["keep 1"]);
    // --remove: nothing left; the toolkit never changed
    let (code, _, err) = shim_cmd(&["--remove", &ov_arg]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!ov.exists());
    assert_eq!(tree(&cu), before);
}

/// libcudadevrt named twice (CMake's device link line has `-lcudadevrt` and nvcc adds its
/// own): its members are taken once, as nvlink takes them (a dynamic-parallelism kernel
/// needs them; a second copy was a multiple definition). The link must succeed as
/// nvlink's does and give the image it gives with the library named once.
#[test]
fn libcudadevrt_twice() {
    let cu = cuda();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("cdp.cu");
    std::fs::write(
        &src,
        "__global__ void child(int *p) { p[threadIdx.x] = 1; }\n\
         __global__ void parent(int *p) { child<<<1, 32>>>(p); }\n",
    )
    .unwrap();
    let obj = dir.path().join("cdp.o");
    let r = Command::new(cu.join("bin/nvcc"))
        .args(["-arch=sm_90", "-rdc=true", "-c"])
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let lib = format!("-L{}", cu.join("lib").display());
    let obj = obj.display().to_string();
    let link = |tool: &Path, twice: bool, out: &str| {
        let mut a = vec!["-arch=sm_90", &lib];
        if twice {
            a.push("-lcudadevrt");
        }
        a.extend([obj.as_str(), "-lcudadevrt", "-o", out]);
        let r = Command::new(tool)
            .current_dir(dir.path())
            .args(&a)
            .output()
            .unwrap();
        assert!(
            r.status.success(),
            "{} {a:?}: {}",
            tool.display(),
            String::from_utf8_lossy(&r.stderr)
        );
        std::fs::read(dir.path().join(out)).unwrap()
    };
    link(&cu.join("bin/nvlink"), true, "theirs.cubin");
    let twice = link(&nvlinkrs(), true, "twice.cubin");
    let once = link(&nvlinkrs(), false, "once.cubin");
    // (the tool note records the command line)
    let d = equiv::compare(&once, &twice).unwrap().differences;
    assert!(
        d.iter().all(|d| d.starts_with("section .note.nv.tkinfo")),
        "{d:?}"
    );
}

/// The toolkit `nvlinkrs shim` makes in `dir`: its `bin/` (nvcc there runs nvlinkrs as
/// its nvlink), and the PATH that puts it first.
fn nvcc_overlay(dir: &Path) -> (PathBuf, String) {
    let bin = shim(&dir.join("overlay")).join("bin");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (bin, path)
}

/// nvcc with nvlinkrs standing in for nvlink: the overlay `nvlinkrs shim` makes builds
/// the `-rdc` example with and without `-dlto` into host executables. The device image
/// embedded in each executable must be the one nvlinkrs writes for nvcc's
/// command line, and equivalent to what the real nvlink writes for it (byte-identical
/// for the whole-program LTO link); the host link needs the module ids of nvlinkrs'
/// `--register-link-binaries` file, and the file must equal nvlink's.
#[test]
fn nvcc_drop_in() {
    let cu = cuda();
    let dir = tempfile::tempdir().unwrap();
    let (bin, _) = nvcc_overlay(dir.path());
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/saxpy");
    let sources = ["main.cu", "saxpy.cu", "scale.cu"];
    // -rdc at sm_90 and, with capsule Mercury, sm_100; -rdc -dlto at sm_90; a -G
    // (debug) build, whose device link is `nvlink -g`
    for (lto, arch, debug) in [
        (false, "sm_90", false),
        (true, "sm_90", false),
        (false, "sm_100", false),
        (false, "sm_90", true),
    ] {
        let work = dir.path().join(format!(
            "{}_{arch}{}",
            if lto { "lto" } else { "rdc" },
            if debug { "_G" } else { "" }
        ));
        std::fs::create_dir(&work).unwrap();
        let mode: &[&str] = match (lto, debug) {
            (true, _) => &["-rdc=true", "-dlto"],
            (false, true) => &["-rdc=true", "-G"],
            (false, false) => &["-rdc=true"],
        };
        let nvcc = |extra: &[&str]| {
            let r = Command::new(bin.join("nvcc"))
                .env("NVLINKRS_CACHE", "0")
                .current_dir(&work)
                .arg(format!("-arch={arch}"))
                .args(mode)
                .args(extra)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&r.stderr).into_owned();
            assert!(r.status.success(), "nvcc {extra:?} (lto {lto}): {err}");
            err
        };
        let srcs: Vec<String> = sources
            .iter()
            .map(|s| example.join(s).display().to_string())
            .collect();
        let srcs: Vec<&str> = srcs.iter().map(String::as_str).collect();
        nvcc(&[&["-c"][..], &srcs].concat());
        let verbose = nvcc(&["-v", "main.o", "saxpy.o", "scale.o", "-o", "app"]);
        assert!(work.join("app").is_file(), "no executable (lto {lto})");
        // the nvlink command nvcc ran, from its -v trace
        let line = verbose
            .lines()
            .find_map(|l| l.strip_prefix("#$ nvlink "))
            .unwrap_or_else(|| panic!("nvcc ran no nvlink:\n{verbose}"));
        let mut words = nvlinkrs::cli::split_words(line);
        let at = words
            .iter()
            .position(|w| w == "-o")
            .expect("-o in the nvlink line");
        words.drain(at..at + 2);
        words.retain(|w| !w.starts_with("--register-link-binaries"));
        // each linker in a folder of its own, with the same relative names (a debug
        // link's note records the output and --register-link-binaries as given)
        let link = |tool: &Path, sub: &str| {
            let here = work.join(sub);
            std::fs::create_dir(&here).unwrap();
            for o in ["main.o", "saxpy.o", "scale.o"] {
                std::os::unix::fs::symlink(work.join(o), here.join(o)).unwrap();
            }
            let r = Command::new(tool)
                .env("NVLINKRS_CACHE", "0")
                .current_dir(&here)
                .args(&words)
                .arg("--register-link-binaries=dlink.reg.c")
                .args(["-o", "dlink.cubin"])
                .output()
                .unwrap();
            assert!(
                r.status.success(),
                "{}: {}",
                tool.display(),
                String::from_utf8_lossy(&r.stderr)
            );
            (
                std::fs::read(here.join("dlink.cubin")).unwrap(),
                std::fs::read_to_string(here.join("dlink.reg.c")).unwrap(),
            )
        };
        let (ours, our_reg) = link(&nvlinkrs(), "ours");
        let (theirs, their_reg) = link(&cu.join("bin/nvlink"), "theirs");
        assert_eq!(our_reg, their_reg, "register-link-binaries (lto {lto})");
        let report = equiv::compare(&theirs, &ours).unwrap();
        assert!(
            report.differences.is_empty() && report.notes.is_empty(),
            "lto {lto}: {:?}",
            report.differences
        );
        if lto {
            assert!(
                ours == theirs,
                "the whole-program LTO output is byte-identical to nvlink's"
            );
        }
        // the device image inside the executable is nvlinkrs' output
        let out = work.join("extracted");
        std::fs::create_dir(&out).unwrap();
        let x = Command::new(cu.join("bin/cuobjdump"))
            .current_dir(&out)
            .args(["-xelf", "all", "../app"])
            .output()
            .unwrap();
        assert!(x.status.success(), "{}", String::from_utf8_lossy(&x.stderr));
        let images: Vec<PathBuf> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "cubin"))
            .collect();
        assert_eq!(
            images.len(),
            1,
            "one {arch} image in the executable: {images:?}"
        );
        let embedded = std::fs::read(&images[0]).unwrap();
        if debug {
            // (its note names nvcc's temporary files where ours names dlink.*)
            let d = equiv::compare(&embedded, &ours).unwrap().differences;
            assert!(
                d.iter().all(|d| d.starts_with("section .note.nv.tkinfo")),
                "the executable embeds nvlinkrs' image (-G): {d:?}"
            );
        } else {
            assert!(
                embedded == ours,
                "the executable embeds nvlinkrs' image (lto {lto})"
            );
        }
    }
}

/// Links run one after another in one process (a library caller's) each have their own
/// context: the second reports only its own job pools and cache, nothing the first left
/// behind (the pools' peaks were process-wide before, and the second link listed the
/// first's ptxas pool).
#[test]
fn links_in_one_process_each_report_their_own_pools_and_cache() {
    let fx = fixtures().parent().unwrap().to_path_buf();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let link = |inputs: &[&str], cache: Option<&Path>, name: &str| -> serde_json::Value {
        let report = dir.path().join(format!("{name}.json"));
        let mut a = vec!["-arch=sm_90".to_string()];
        a.extend(inputs.iter().map(|i| fx.join(i).display().to_string()));
        a.push("-o".into());
        a.push(
            dir.path()
                .join(format!("{name}.cubin"))
                .display()
                .to_string(),
        );
        a.push(format!("--report-json={}", report.display()));
        a.push(match cache {
            Some(c) => format!("--cache-dir={}", c.display()),
            None => "--no-cache".into(),
        });
        let (parsed, _, _) = nvlinkrs::cli::parse(&a).unwrap();
        let diag = nvlinkrs::diag::Diagnostics::collector();
        nvlinkrs::link(&parsed.request().unwrap(), &diag, &Default::default()).unwrap();
        serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap()
    };
    // PTX: ptxas runs on the link's pool, its cubins stored in the link's cache
    let first = link(&["saxpy.ptx", "scale.ptx"], Some(&cache), "first");
    assert!(first["peak_jobs"]["ptxas"].as_u64() >= Some(1), "{first:#}");
    assert_eq!(first["cache"]["stages"]["ptxas"]["misses"], 2, "{first:#}");
    assert_eq!(first["cache"]["whole_link"], "miss", "{first:#}");
    // the same link again: answered from that cache, no pool ran
    let again = link(&["saxpy.ptx", "scale.ptx"], Some(&cache), "again");
    assert_eq!(again["cache"]["whole_link"], "hit", "{again:#}");
    assert_eq!(again["peak_jobs"], serde_json::json!({}), "{again:#}");
    // SASS only, without a cache: no pool, no cache
    let sass = link(&["scale.cubin"], None, "sass");
    assert_eq!(sass["peak_jobs"], serde_json::json!({}), "{sass:#}");
    assert_eq!(sass["cache_used"], false, "{sass:#}");
    assert_eq!(sass["cache"]["stages"], serde_json::json!({}), "{sass:#}");
}

/// `--report-json` explains a merge: the wall time of each step, in order, within the
/// merge stage's.
#[test]
fn report_lists_merge_steps() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let st = Command::new(nvlinkrs())
        .env("NVLINKRS_CACHE", "0")
        .arg("-arch=sm_100")
        .args(args(&["a_100.cubin", "b_100.cubin"]))
        .arg("-o")
        .arg(dir.path().join("o.cubin"))
        .arg(format!("--report-json={}", report.display()))
        .status()
        .unwrap();
    assert!(st.success());
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let steps = doc["merge_steps"].as_array().unwrap();
    let names: Vec<&str> = steps.iter().map(|s| s["step"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "parse",
            "resolve",
            "functions",
            "undefined",
            "sections",
            "shared",
            "symbols",
            "relocations",
            "info",
            "callgraph",
            "mercury",
            "finish"
        ]
    );
    // what the link used: version, toolkit, inputs with their sizes, total time, and
    // neither daemon, cache nor jobserver here
    assert_eq!(doc["nvlinkrs"], env!("CARGO_PKG_VERSION"));
    let inputs = doc["inputs"].as_array().unwrap();
    assert_eq!(inputs.len(), 2);
    assert!(inputs[0]["path"].as_str().unwrap().ends_with("a_100.cubin"));
    assert!(inputs[0]["bytes"].as_u64().unwrap() > 0);
    assert!(doc["toolkit"]["root"].is_string());
    assert_eq!(
        (&doc["daemon"], &doc["cache_used"], &doc["jobserver"]),
        (&false.into(), &false.into(), &false.into())
    );
    let sum: f64 = steps.iter().map(|s| s["ms"].as_f64().unwrap()).sum();
    let merge = doc["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == "merge")
        .unwrap()["ms"]
        .as_f64()
        .unwrap();
    assert!(
        sum > 0.0 && sum <= merge,
        "steps {sum} ms, merge {merge} ms"
    );
    assert!(doc["total_ms"].as_f64().unwrap() >= merge);
}

/// `NVLINKRS_PROGRESS=1` (or `--progress`): plain progress lines with the elapsed time on
/// a stderr that is not a terminal, one when each stage starts and one when it ends;
/// nothing of the kind without it.
#[test]
fn progress_lines_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let run = |env: Option<&str>, extra: &[&str]| {
        let mut cmd = Command::new(nvlinkrs());
        cmd.arg("-arch=sm_90")
            .args(args(&["a_90.cubin", "b_90.cubin"]))
            .args(extra)
            .arg("-o")
            .arg(dir.path().join("o.cubin"))
            // (every run links: a cache hit has no stages)
            .env("NVLINKRS_CACHE", "0")
            .env_remove("NVLINKRS_PROGRESS");
        if let Some(v) = env {
            cmd.env("NVLINKRS_PROGRESS", v);
        }
        let r = cmd.output().unwrap();
        assert!(r.status.success());
        String::from_utf8_lossy(&r.stderr).into_owned()
    };
    for err in [run(Some("1"), &[]), run(None, &["--progress"])] {
        let lines: Vec<&str> = err.lines().collect();
        for stage in ["read", "gather", "merge", "write"] {
            let start = lines
                .iter()
                .position(|l| l.starts_with("nvlinkrs: [") && l.ends_with(&format!(" s] {stage}")));
            let end = lines
                .iter()
                .position(|l| l.contains(&format!(" s] {stage} done in ")));
            assert!(start.is_some() && end > start, "{stage}: {err}");
        }
        assert!(!err.contains('\r'), "{err:?}");
    }
    assert_eq!(run(None, &[]), "");
}

/// Small whole-program sources (each file's device code its own) for the nvcc modes table.
const WHOLE_MAIN: &str = "#include <cstdio>\n__global__ void k0(float *f) { f[threadIdx.x] *= 2.0f; }\nvoid launch1(int *p);\n__device__ int unused_var;\nint main() {\n  float *f; int *p;\n  if (cudaMalloc(&f, 128) != cudaSuccess || cudaMalloc(&p, 128) != cudaSuccess) return 2;\n  k0<<<1, 32>>>(f); launch1(p);\n  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;\n}\n";
const WHOLE_ONE: &str = "__global__ void k(int *p) { p[threadIdx.x] = threadIdx.x; }\n__device__ int unused_var;\nint main() { int *d; if (cudaMalloc(&d, 64) != cudaSuccess) return 2; k<<<1, 16>>>(d); return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1; }\n";
const WHOLE_K1: &str = "__shared__ int tile[64];\n__global__ void k1(int *p) { tile[threadIdx.x] = p[threadIdx.x]; __syncthreads(); p[threadIdx.x] = tile[63 - threadIdx.x]; }\nvoid launch1(int *p) { k1<<<1, 64>>>(p); }\n";

/// Every way nvcc runs nvlink, through a toolkit whose nvlink is nvlinkrs: whole-program
/// executables (one and several .cu, -gencode for two SMs, sm_90a, sm_100f, compute_90
/// PTX only, -G, -lineinfo, -Xnvlink -v, -cudart=shared), -rdc executables, -dlink,
/// -dlto, -shared, a static library on the line. Each build succeeds, and each nvlink
/// command nvcc ran (from its -v trace, the files kept with -keep) gives with nvlink and
/// nvlinkrs the same exit code, messages and --register-link-binaries file, and
/// equivalent images (byte-identical for LTO links).
#[test]
fn nvcc_modes_match_nvlink() {
    let dir = tempfile::tempdir().unwrap();
    let (bin, path) = nvcc_overlay(dir.path());
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/saxpy");
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("main.cu"), WHOLE_MAIN).unwrap();
    std::fs::write(src.join("k1.cu"), WHOLE_K1).unwrap();
    std::fs::write(src.join("one.cu"), WHOLE_ONE).unwrap();
    // (the PyPI toolkit has libcudart.so.13 but no libcudart.so for -cudart=shared)
    let shlib = dir.path().join("shlib");
    std::fs::create_dir(&shlib).unwrap();
    std::os::unix::fs::symlink(
        cuda().join("lib/libcudart.so.13"),
        shlib.join("libcudart.so"),
    )
    .unwrap();
    let shlib_flag = format!("-L{}", shlib.display());
    for f in ["main.cu", "saxpy.cu", "scale.cu"] {
        std::fs::copy(example.join(f), src.join(format!("x_{f}"))).unwrap();
    }
    let rdc = ["x_main.cu", "x_saxpy.cu", "x_scale.cu"];
    // (name, steps: each an nvcc command line run in the mode's folder)
    let whole = |extra: &[&str], files: &[&str]| -> Vec<Vec<String>> {
        let mut a: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        a.extend(files.iter().map(|f| src.join(f).display().to_string()));
        a.extend(["-o".into(), "app".into()]);
        vec![a]
    };
    let words = |s: &str| -> Vec<String> { s.split(' ').map(String::from).collect() };
    let srcs = |files: &[&str]| -> String {
        files
            .iter()
            .map(|f| src.join(f).display().to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let modes: Vec<(&str, Vec<Vec<String>>)> = vec![
        (
            "whole program, one .cu",
            whole(&["-arch=sm_90"], &["one.cu"]),
        ),
        (
            "whole program, two .cu",
            whole(&["-arch=sm_90"], &["main.cu", "k1.cu"]),
        ),
        (
            "whole program, -gencode sm_80 and sm_90",
            whole(
                &[
                    "-gencode",
                    "arch=compute_80,code=sm_80",
                    "-gencode",
                    "arch=compute_90,code=sm_90",
                ],
                &["main.cu", "k1.cu"],
            ),
        ),
        (
            "whole program, sm_90a",
            whole(&["-arch=sm_90a"], &["main.cu", "k1.cu"]),
        ),
        (
            "whole program, sm_100f",
            whole(&["-arch=sm_100f"], &["main.cu", "k1.cu"]),
        ),
        (
            "whole program, compute_90 PTX only",
            whole(&["-arch=compute_90"], &["main.cu", "k1.cu"]),
        ),
        (
            "whole program, -G",
            whole(&["-arch=sm_90", "-G"], &["main.cu", "k1.cu"]),
        ),
        (
            "whole program, -lineinfo",
            whole(&["-arch=sm_90", "-lineinfo"], &["main.cu", "k1.cu"]),
        ),
        (
            "whole program, -Xnvlink -v",
            whole(&["-arch=sm_90", "-Xnvlink", "-v"], &["main.cu", "k1.cu"]),
        ),
        (
            "whole program, -cudart=shared",
            whole(
                &["-arch=sm_90", "-cudart=shared", &shlib_flag],
                &["main.cu", "k1.cu"],
            ),
        ),
        // (--extensible-whole-program: refused by name, see nvcc_extensible_whole_program)
        (
            "whole program, -lcudart_static on the line",
            whole(&["-arch=sm_90", "-lcudart_static"], &["main.cu", "k1.cu"]),
        ),
        (
            "-rdc executable",
            whole(&["-arch=sm_90", "-rdc=true"], &rdc),
        ),
        (
            "-rdc -dlto executable",
            whole(&["-arch=sm_90", "-rdc=true", "-dlto"], &rdc),
        ),
        (
            "-rdc executable, sm_100",
            whole(&["-arch=sm_100", "-rdc=true"], &rdc),
        ),
        (
            "-dc then -dlink",
            vec![
                words(&format!("-arch=sm_90 -dc {}", srcs(&rdc))),
                words("-arch=sm_90 -dlink x_main.o x_saxpy.o x_scale.o -o dlink.o"),
            ],
        ),
        (
            "-shared -rdc library",
            vec![words(&format!(
                "-arch=sm_90 -shared -rdc=true -Xcompiler -fPIC {} -o libx.so",
                srcs(&["x_saxpy.cu", "x_scale.cu"])
            ))],
        ),
        (
            "static library on the line",
            vec![
                words(&format!(
                    "-arch=sm_90 -dc {}",
                    srcs(&["x_saxpy.cu", "x_scale.cu"])
                )),
                words("-lib x_saxpy.o x_scale.o -o libx.a"),
                words(&format!(
                    "-arch=sm_90 -rdc=true {} -L. -lx -o app",
                    srcs(&["x_main.cu"])
                )),
            ],
        ),
    ];
    let failures = std::sync::Mutex::new(Vec::new());
    let lines_checked = std::sync::atomic::AtomicUsize::new(0);
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((name, steps)) = modes.get(i) else {
                        break;
                    };
                    let work = dir.path().join(format!("mode{i}"));
                    std::fs::create_dir(&work).unwrap();
                    match nvcc_mode(&bin, &path, &work, steps) {
                        Ok(n) => {
                            lines_checked.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                        }
                        Err(e) => failures.lock().unwrap().push(format!("{name}: {e}")),
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    eprintln!(
        "{} modes, {} nvlink command lines compared",
        modes.len(),
        lines_checked.into_inner()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Runs one mode's nvcc steps through the overlay (`-v -keep`), then each nvlink line nvcc
/// ran with both linkers; `Ok(lines compared)` or what differs.
fn nvcc_mode(bin: &Path, path: &str, work: &Path, steps: &[Vec<String>]) -> Result<usize, String> {
    let keep = work.join("keep");
    std::fs::create_dir(&keep).unwrap();
    let mut lines = Vec::new();
    for step in steps {
        let r = Command::new(bin.join("nvcc"))
            .current_dir(work)
            .env("PATH", path)
            .args(["-v", "-keep", "-keep-dir"])
            .arg(&keep)
            .args(step)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&r.stderr).into_owned();
        if !r.status.success() {
            return Err(format!(
                "nvcc {step:?} failed with nvlinkrs as nvlink:\n{err}"
            ));
        }
        lines.extend(
            err.lines()
                .filter_map(|l| l.strip_prefix("#$ nvlink "))
                .map(String::from),
        );
    }
    for (n, line) in lines.iter().enumerate() {
        let mut words = nvlinkrs::cli::split_words(line);
        // outputs of each linker in a folder of its own, under the same names
        if let Some(at) = words.iter().position(|w| w == "-o") {
            words.drain(at..at + 2);
        }
        let register = words
            .iter()
            .any(|w| w.starts_with("--register-link-binaries"));
        words.retain(|w| !w.starts_with("--register-link-binaries"));
        let virtual_target = words.iter().any(|w| w.starts_with("--arch=compute_"));
        let abs = |w: &String| -> String {
            let p = Path::new(w.as_str());
            if w.starts_with("-L") && !Path::new(&w[2..]).is_absolute() {
                format!("-L{}", work.join(&w[2..]).display())
            } else if !w.starts_with('-') && p.is_relative() && work.join(p).exists() {
                work.join(p).display().to_string()
            } else {
                w.clone()
            }
        };
        let words: Vec<String> = words.iter().map(abs).collect();
        let link = |tool: &Path, sub: &str| {
            let here = work.join(format!("{sub}{n}"));
            std::fs::create_dir(&here).unwrap();
            let mut cmd = Command::new(tool);
            cmd.current_dir(&here).args(&words);
            if register {
                cmd.arg("--register-link-binaries=dlink.reg.c");
            }
            if !virtual_target {
                cmd.args(["-o", "dlink.cubin"]);
            }
            let r = cmd.output().unwrap();
            let name = tool.file_name().unwrap().to_string_lossy().into_owned();
            let messages: Vec<String> = String::from_utf8_lossy(&r.stderr)
                .lines()
                .filter(|l| !l.starts_with("  ") && !l.is_empty())
                .map(|l| l.replacen(&name, "nvlink", 1))
                .collect();
            (
                r.status.code(),
                messages,
                std::fs::read(here.join("dlink.cubin")).ok(),
                std::fs::read_to_string(here.join("dlink.reg.c")).ok(),
            )
        };
        let theirs = link(&cuda().join("bin/nvlink"), "theirs");
        let ours = link(&nvlinkrs(), "ours");
        let what = format!("nvlink {line}");
        if (theirs.0, &theirs.1) != (ours.0, &ours.1) {
            return Err(format!(
                "{what}\n    exit {:?} {:?}\n    vs   {:?} {:?}",
                theirs.0, theirs.1, ours.0, ours.1
            ));
        }
        if theirs.3 != ours.3 {
            return Err(format!(
                "{what}\n    register file {:?} vs {:?}",
                theirs.3, ours.3
            ));
        }
        match (&theirs.2, &ours.2) {
            (Some(t), Some(o)) if line.contains("-dlto") => {
                if t != o {
                    return Err(format!("{what}\n    LTO image not byte-identical"));
                }
            }
            (Some(t), Some(o)) => {
                let r = equiv::compare(t, o).map_err(|e| e.to_string())?;
                let d: Vec<String> = r.differences.into_iter().chain(r.notes).collect();
                if !d.is_empty() {
                    return Err(format!("{what}\n    {}", d.join("\n    ")));
                }
            }
            (None, None) => {}
            (t, o) => {
                return Err(format!(
                    "{what}\n    image from nvlink {}, from nvlinkrs {}",
                    t.is_some(),
                    o.is_some()
                ));
            }
        }
    }
    if lines.is_empty() {
        return Err("nvcc ran no nvlink".into());
    }
    Ok(lines.len())
}

/// An earlier `nvcc -dlink` output given to nvcc's final link (a Makefile pattern): nvlink
/// leaves out the objects that `dlink.o` already linked (its `__nv_module_id` names them),
/// so its register file lists none of them and nvcc's host link finds each
/// `__cudaRegisterLinkedBinary_*` once. Through the overlay, with a `-dlink` object
/// covering all the objects, some of them, given first, and in a static library; each
/// nvlink line nvcc ran gives with both linkers the same register file and equivalent
/// images.
#[test]
fn nvcc_prelinked_dlink_object() {
    let dir = tempfile::tempdir().unwrap();
    let (bin, path) = nvcc_overlay(dir.path());
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/saxpy");
    let words = |s: &str| -> Vec<String> { s.split(' ').map(String::from).collect() };
    let dc = |f: &str| {
        words(&format!(
            "-arch=sm_90 -dc {} -o {f}.o",
            example.join(format!("{f}.cu")).display()
        ))
    };
    let objects = "saxpy.o scale.o main.o";
    let modes: Vec<(&str, Vec<Vec<String>>)> = vec![
        (
            "all",
            vec![
                words(&format!("-arch=sm_90 -dlink {objects} -o dlink.o")),
                words(&format!("-arch=sm_90 {objects} dlink.o -o app")),
            ],
        ),
        (
            "some",
            vec![
                words("-arch=sm_90 -dlink saxpy.o scale.o -o dlink.o"),
                words(&format!("-arch=sm_90 {objects} dlink.o -o app")),
            ],
        ),
        (
            "first",
            vec![
                words(&format!("-arch=sm_90 -dlink {objects} -o dlink.o")),
                words(&format!("-arch=sm_90 dlink.o {objects} -o app")),
            ],
        ),
        (
            "static library",
            vec![
                words(&format!("-arch=sm_90 -dlink {objects} -o dlink.o")),
                words("-lib dlink.o -o libd.a"),
                words(&format!("-arch=sm_90 {objects} -L. -ld -o app")),
            ],
        ),
    ];
    let mut failures = Vec::new();
    for (i, (name, steps)) in modes.iter().enumerate() {
        let work = dir.path().join(format!("prelinked{i}"));
        std::fs::create_dir(&work).unwrap();
        let mut all = vec![dc("saxpy"), dc("scale"), dc("main")];
        all.extend(steps.iter().cloned());
        match nvcc_mode(&bin, &path, &work, &all) {
            Ok(_) => assert!(work.join("app").is_file(), "{name}: no executable"),
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `nvcc --extensible-whole-program`: its objects' code (e_type 0xff00) comes with shared
/// memory already laid out per kernel, which the merge does not take yet; nvlinkrs refuses
/// it by name (exit 1, no image) rather than write another image than nvlink's.
#[test]
fn nvcc_extensible_whole_program_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("k1.cu"), WHOLE_K1).unwrap();
    let r = Command::new(cuda().join("bin/nvcc"))
        .current_dir(d)
        .args([
            "-arch=sm_90",
            "--extensible-whole-program",
            "-c",
            "k1.cu",
            "-o",
            "k1.o",
        ])
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let r = Command::new(nvlinkrs())
        .current_dir(d)
        .args(["-arch=sm_90", "k1.o", "-o", "out.cubin"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(
        err.contains("'k1.o' holds --extensible-whole-program code"),
        "{err}"
    );
    assert!(!d.join("out.cubin").exists());
}

/// `nvlinkrs compare`: two images that differ only in the tool note's command line are
/// equivalent with a note (exit 0); a long list of differences is cut after `--limit`
/// and the rest counted by kind (exit 2).
#[test]
fn compare_notes_command_lines_and_summarises() {
    let dir = tempfile::tempdir().unwrap();
    let link = |out: &str, extra: &[&str]| {
        let sm = if extra.contains(&"-arch=sm_80") {
            80
        } else {
            90
        };
        let st = Command::new(nvlinkrs())
            .args(extra)
            .args(args(&[&format!("a_{sm}.cubin"), &format!("b_{sm}.cubin")]))
            .arg("-o")
            .arg(dir.path().join(out))
            .status()
            .unwrap();
        assert!(st.success());
        dir.path().join(out)
    };
    let plain = link("plain.cubin", &["-arch=sm_90"]);
    let verbose = link("v.cubin", &["-arch=sm_90", "-w"]);
    let other = link("other.cubin", &["-arch=sm_80"]);
    let compare = |a: &Path, b: &Path, extra: &[&str]| {
        let r = Command::new(nvlinkrs())
            .arg("compare")
            .args(extra)
            .arg(a)
            .arg(b)
            .output()
            .unwrap();
        (
            r.status.code(),
            String::from_utf8_lossy(&r.stdout).into_owned(),
        )
    };
    let (code, out) = compare(&plain, &verbose, &[]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        out,
        "note: tool note command line: \"-arch sm_90 \" vs \"-arch sm_90 -w  \"\n\
         equivalent but for the tool note's command line\n"
    );
    let (code, out) = compare(&plain, &plain, &[]);
    assert_eq!((code, out.as_str()), (Some(0), "byte-identical\n"));
    let (code, out) = compare(&plain, &other, &["--limit", "2"]);
    assert_eq!(code, Some(2), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[2].starts_with("... and ") && lines[2].contains(" more: "),
        "{out}"
    );
    assert!(
        lines.last().unwrap().starts_with("not equivalent: "),
        "{out}"
    );
}

/// `nvlinkrs compare` judges what it used to pass over (issue 22, item 6): each field
/// changed by hand in nvlink's own image of `dyn1_90.cubin` (a damaged image no linker
/// writes, so made here) is a difference of the kind named: `e_entry`, a section's
/// `sh_addr` and `sh_entsize`, the data segment's memory size, a section symbol's binding
/// and value, a relocation section renamed to the name of another (the two were one map
/// entry, the first one's entries never compared), a program header removed. An image
/// is equivalent to itself with its string tables' unused strings blanked.
#[test]
fn compare_judges_headers_segments_and_tables() {
    let dir = tempfile::tempdir().unwrap();
    let image = run(
        &cuda().join("bin/nvlink"),
        &args(&["-arch=sm_90", "dyn1_90.cubin"]),
        dir.path(),
    )
    .output
    .unwrap();
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes(b[o..o + 2].try_into().unwrap()) as usize;
    let u32_at = |b: &[u8], o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) as usize;
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap()) as usize;
    let (shoff, phoff) = (u64_at(&image, 0x28), u64_at(&image, 0x20));
    let shstr = shoff + u16_at(&image, 0x3E) * 64;
    // the header of the section named `name`
    let header = |name: &str| -> usize {
        (0..u16_at(&image, 0x3C))
            .map(|i| shoff + i * 64)
            .find(|&h| {
                let at = u64_at(&image, shstr + 0x18) + u32_at(&image, h);
                image[at..].starts_with(name.as_bytes()) && image[at + name.len()] == 0
            })
            .unwrap_or_else(|| panic!("no section {name}"))
    };
    let symtab = header(".symtab");
    let section_symbol = (1..u64_at(&image, symtab + 0x20) / 24)
        .map(|i| u64_at(&image, symtab + 0x18) + i * 24)
        .find(|&e| image[e + 4] & 0xF == 3)
        .unwrap();
    let judged = |what: &str, edit: &dyn Fn(&mut Vec<u8>), expected: &str| {
        let mut b = image.clone();
        edit(&mut b);
        let r = equiv::compare(&image, &b).unwrap();
        assert!(
            r.differences.iter().any(|d| d.starts_with(expected)),
            "{what}: {:?}",
            r.differences
        );
    };
    let put = |b: &mut Vec<u8>, at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
    judged(
        "e_entry",
        &|b| put(b, 0x18, &0x80u64.to_le_bytes()),
        "header: ",
    );
    let text = header(".text._Z1kPi");
    judged(
        "sh_addr",
        &|b| put(b, text + 0x10, &0x80u64.to_le_bytes()),
        "section .text._Z1kPi: addr/entsize",
    );
    let graph = header(".nv.callgraph");
    judged(
        "sh_entsize",
        &|b| put(b, graph + 0x38, &0u64.to_le_bytes()),
        "section .nv.callgraph: addr/entsize",
    );
    // the third program header is the data segment: PHDR, code, data, the table again
    let data = phoff + 2 * 56;
    assert_eq!(u32_at(&image, data + 4), 6, "a RW segment");
    let memsz = u64_at(&image, data + 0x28) as u64 + 0x40;
    judged(
        "p_memsz",
        &|b| put(b, data + 0x28, &memsz.to_le_bytes()),
        "program headers: ",
    );
    judged("phnum", &|b| put(b, 0x38, &3u16.to_le_bytes()), "header: ");
    // the code segment cut short: it cuts through the last code section
    let code = phoff + 56;
    let filesz = u64_at(&image, code + 0x20) as u64 - 0x10;
    judged(
        "p_filesz",
        &|b| {
            put(b, code + 0x20, &filesz.to_le_bytes());
            put(b, code + 0x28, &filesz.to_le_bytes());
        },
        "program headers: ",
    );
    judged(
        "section symbol binding",
        &|b| b[section_symbol + 4] |= 0x10,
        "section symbols: ",
    );
    judged(
        "section symbol value",
        &|b| put(b, section_symbol + 8, &4u64.to_le_bytes()),
        "section symbols: ",
    );
    // .rela.debug_frame named .rela.nv.global.init in both, the first one's addend changed
    let (first, second) = (header(".rela.nv.global.init"), header(".rela.debug_frame"));
    let renamed = |b: &mut Vec<u8>| {
        let name = b[first..first + 4].to_vec();
        put(b, second, &name);
    };
    let mut both = image.clone();
    renamed(&mut both);
    // the addend of the first entry of the first of them
    let addend = u64_at(&both, first + 0x18) + 0x10;
    let mut changed = both.clone();
    put(&mut changed, addend, &7u64.to_le_bytes());
    let r = equiv::compare(&both, &changed).unwrap();
    assert!(
        r.differences
            .iter()
            .any(|d| d.starts_with("relocations .rela.nv.global.init")),
        "{:?}",
        r.differences
    );
    // strings nobody refers to (nvlink's reserved names) are not a difference
    let strtab = header(".strtab");
    let (at, size) = (u64_at(&image, strtab + 0x18), u64_at(&image, strtab + 0x20));
    let unused = 1 + image[at..at + size]
        .windows(15)
        .position(|w| w == b"\0.nv.prototype\0")
        .expect("nvlink's .strtab holds .nv.prototype, a section it did not make");
    let mut blanked = image.clone();
    put(&mut blanked, at + unused, b"XXXXXXXXXXXXX");
    let r = equiv::compare(&image, &blanked).unwrap();
    assert!(r.equivalent(), "{:?}", r.differences);
}

/// A kernel whose call tree recurses: nvlink's warning that its stack size cannot be
/// determined, none with `-suppress-stack-size-warning` (recorded in the tool note), and
/// `-tool-name` naming the messages; the same exit codes, messages and images as nvlink.
#[test]
fn recursion_warning_and_its_suppression() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("rec.cu"),
        "__device__ __noinline__ int fib(int n) { return n <= 1 ? n : fib(n - 1) + fib(n - 2); }\n\
         __global__ void k(int *p) { p[0] = fib(p[1]); }\n",
    )
    .unwrap();
    for sm in [90, 100] {
        let r = Command::new(cuda().join("bin/nvcc"))
            .current_dir(d)
            .arg("-cubin")
            .arg("-rdc=true")
            .arg(format!("-arch=sm_{sm}"))
            .args(["rec.cu", "-o"])
            .arg(format!("rec{sm}.cubin"))
            .output()
            .unwrap();
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        let rec = d.join(format!("rec{sm}.cubin")).display().to_string();
        for extra in [
            None,
            Some("-suppress-stack-size-warning"),
            Some("-tool-name=mylink"),
        ] {
            let mut a = vec![format!("-arch=sm_{sm}"), rec.clone()];
            a.extend(extra.map(String::from));
            if let Err(e) = differential(&a) {
                panic!("sm_{sm} {extra:?}: {e}");
            }
        }
    }
    let rec = d.join("rec90.cubin").display().to_string();
    let out = Command::new(nvlinkrs())
        .args(["-arch=sm_90", &rec, "-o"])
        .arg(d.join("o.cubin"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Stack size for entry function '_Z1kPi' cannot be statically determined"),
        "{err}"
    );
}

/// The whole-link cache and the files a note records: a debug link (and one with
/// `-verbose-tkinfo=true`) names its output in the image's note, so the same link to
/// another file is not answered with the first image.
#[test]
fn cached_links_keep_the_output_name_their_note_records() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    for extra in ["-g", "-verbose-tkinfo=true"] {
        for out in ["first.cubin", "second.cubin"] {
            let st = Command::new(nvlinkrs())
                .args(["-arch=sm_90", extra])
                .args(args(&["a_90.cubin", "b_90.cubin"]))
                .arg("--cache-dir")
                .arg(&cache)
                .arg("-o")
                .arg(dir.path().join(out))
                .status()
                .unwrap();
            assert!(st.success());
            let image = std::fs::read(dir.path().join(out)).unwrap();
            let found = image
                .windows(out.len() + 4)
                .any(|w| w == format!("-o {out} ").as_bytes());
            assert!(found, "{extra}: the note of {out} names it");
        }
    }
}

/// Outputs where users point them. `-o` naming an input: the image borrows the inputs'
/// mapped bytes until it is written, so the old file is not written over in place (a
/// 1 MB initialised array gave a corrupt image with exit 0); a failed link leaves that
/// input as it was (it was removed). `-o /proc/self/fd/1` writes to standard output as
/// nvlink does (a rename beside it failed), and a symlinked output is written through
/// to its target, keeping the target's mode and the link.
#[test]
fn outputs_where_users_point_them() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut src = String::from("__device__ int table[262144] = {");
    for i in 0..262144u64 {
        src += &format!("{},", i * 2654435761 % 1000003);
    }
    src += "};\n__global__ void k(int *o, int i) { o[i] = table[i] * 3 + table[i ^ 5]; }\n";
    std::fs::write(d.join("big.cu"), src).unwrap();
    let nvcc = Command::new(cuda().join("bin/nvcc"))
        .args([
            "-cubin",
            "-rdc=true",
            "-arch=sm_90",
            "big.cu",
            "-o",
            "big.cubin",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(
        nvcc.status.success(),
        "{}",
        String::from_utf8_lossy(&nvcc.stderr)
    );
    let b = fixtures().join("b_90.cubin").display().to_string();
    let link = |tool: &Path, first: &str, out: &str| {
        let r = Command::new(tool)
            .args(["-arch=sm_90", first, &b, "-o", out])
            .current_dir(d)
            .output()
            .unwrap();
        (
            r.status.code().unwrap_or(-1),
            r.stdout,
            String::from_utf8_lossy(&r.stderr).into_owned(),
        )
    };
    std::fs::copy(d.join("big.cubin"), d.join("s.cubin")).unwrap();
    std::fs::copy(d.join("big.cubin"), d.join("n.cubin")).unwrap();
    assert_eq!(link(&cuda().join("bin/nvlink"), "n.cubin", "n.cubin").0, 0);
    let (rc, _, err) = link(&nvlinkrs(), "s.cubin", "ref.cubin");
    assert_eq!(rc, 0, "{err}");
    let (rc, _, err) = link(&nvlinkrs(), "s.cubin", "s.cubin");
    assert_eq!(rc, 0, "{err}");
    let ours = std::fs::read(d.join("s.cubin")).unwrap();
    assert!(
        ours == std::fs::read(d.join("ref.cubin")).unwrap(),
        "-o an input: another image"
    );
    let r = equiv::compare(&std::fs::read(d.join("n.cubin")).unwrap(), &ours).unwrap();
    assert!(r.equivalent(), "{:?}", r.differences);

    // a failed link keeps the input it was to write over (nvlink too)
    let undef = d.join("undef.cubin");
    std::fs::copy(fixtures().join("undef.cubin"), &undef).unwrap();
    let before = std::fs::read(&undef).unwrap();
    let (rc, _, err) = link(&nvlinkrs(), "undef.cubin", "undef.cubin");
    assert_eq!(rc, 255, "{err}");
    assert_eq!(std::fs::read(&undef).unwrap(), before);
    // and writes the `-time` file's header all the same (it wrote nothing)
    for (tool, csv) in [(cuda().join("bin/nvlink"), "n.csv"), (nvlinkrs(), "r.csv")] {
        let r = Command::new(tool)
            .args([
                "-arch=sm_90",
                "undef.cubin",
                &b,
                "-o",
                "u.cubin",
                "-time",
                csv,
            ])
            .current_dir(d)
            .output()
            .unwrap();
        assert_eq!(r.status.code(), Some(255));
    }
    let want = std::fs::read_to_string(d.join("n.csv")).unwrap();
    assert!(want.starts_with("source file name"), "{want}");
    assert_eq!(std::fs::read_to_string(d.join("r.csv")).unwrap(), want);

    // standard output through /proc
    let (rc, out, err) = link(&nvlinkrs(), "big.cubin", "/proc/self/fd/1");
    assert_eq!(rc, 0, "{err}");
    let (nrc, nout, _) = link(&cuda().join("bin/nvlink"), "big.cubin", "/proc/self/fd/1");
    assert_eq!(nrc, 0);
    let r = equiv::compare(&nout, &out).unwrap();
    assert!(r.equivalent(), "{:?}", r.differences);
    // standard output closed: no output file (it exited 0, the image on /dev/null)
    for tool in [cuda().join("bin/nvlink"), nvlinkrs()] {
        let r = Command::new("sh")
            .arg("-c")
            .arg(r#"exec "$0" -arch=sm_90 big.cubin "$1" -o /dev/stdout >&-"#)
            .arg(&tool)
            .arg(&b)
            .current_dir(d)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{}: {err}", tool.display());
        assert!(
            err.contains("Could not open output file '/dev/stdout'"),
            "{err}"
        );
    }

    // through a symlink, the target's mode kept
    std::fs::create_dir(d.join("real")).unwrap();
    std::fs::write(d.join("real/x.cubin"), b"old").unwrap();
    std::fs::set_permissions(
        d.join("real/x.cubin"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::os::unix::fs::symlink("real/x.cubin", d.join("x.cubin")).unwrap();
    let (rc, _, err) = link(&nvlinkrs(), "big.cubin", "x.cubin");
    assert_eq!(rc, 0, "{err}");
    assert!(
        std::fs::symlink_metadata(d.join("x.cubin"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(std::fs::read(d.join("real/x.cubin")).unwrap() == ours);
    let mode = std::fs::metadata(d.join("real/x.cubin"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
    assert_eq!(std::fs::read_dir(d.join("real")).unwrap().count(), 1);

    // killed at spread moments, the output's name holds the old image or the whole new
    // one (it was renamed aside for the write: ~5% of kills left no output)
    let k = d.join("k.cubin");
    for ms in [0u64, 2, 5, 10, 20, 40, 80] {
        std::fs::write(&k, b"old image").unwrap();
        let mut child = Command::new(nvlinkrs())
            .args(["-arch=sm_90", "big.cubin", &b, "-o", "k.cubin"])
            .current_dir(d)
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(ms));
        child.kill().ok();
        child.wait().unwrap();
        let now = std::fs::read(&k).unwrap_or_default();
        assert!(
            now == b"old image" || now == ours,
            "killed at {ms} ms: {} bytes",
            now.len()
        );
    }

    // another user's links: a file they can write in a directory they cannot (root's
    // 0755 directory, root's 0666 file in a sticky directory) is written into, as nvlink
    // does (it failed: "Permission denied", "Operation not permitted")
    let Some(user) = ThrowawayUser::make() else {
        eprintln!("skipped the other user's outputs: not root, or no useradd");
        return;
    };
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    let as_user = |out: &str| {
        let r = Command::new("runuser")
            .args(["-u", &user.0, "--"])
            .arg(nvlinkrs())
            .args(["-arch=sm_90", "big.cubin", &b, "-o", out])
            .current_dir(d)
            .output()
            .unwrap();
        (
            r.status.code(),
            String::from_utf8_lossy(&r.stderr).into_owned(),
        )
    };
    let chown = |p: &Path| {
        let st = Command::new("chown").arg(&user.0).arg(p).status().unwrap();
        assert!(st.success());
    };
    std::fs::create_dir(d.join("ro")).unwrap();
    std::fs::write(d.join("ro/out.cubin"), b"old").unwrap();
    chown(&d.join("ro/out.cubin"));
    std::fs::create_dir(d.join("st")).unwrap();
    std::fs::set_permissions(d.join("st"), std::fs::Permissions::from_mode(0o1777)).unwrap();
    std::fs::write(d.join("st/x.cubin"), b"old").unwrap();
    std::fs::set_permissions(d.join("st/x.cubin"), std::fs::Permissions::from_mode(0o666)).unwrap();
    for out in ["ro/out.cubin", "st/x.cubin"] {
        let (rc, err) = as_user(out);
        assert_eq!(rc, Some(0), "{out}: {err}");
        assert!(std::fs::read(d.join(out)).unwrap() == ours, "{out}");
    }
    assert_eq!(std::fs::read_dir(d.join("st")).unwrap().count(), 1);
    // a read-only old output of theirs in their own directory: the link fails without
    // losing it (it was removed), or replaces it whole
    std::fs::create_dir(d.join("mine")).unwrap();
    chown(&d.join("mine"));
    std::fs::write(d.join("mine/o.cubin"), b"old").unwrap();
    std::fs::set_permissions(
        d.join("mine/o.cubin"),
        std::fs::Permissions::from_mode(0o444),
    )
    .unwrap();
    chown(&d.join("mine/o.cubin"));
    let (rc, err) = as_user("mine/o.cubin");
    let now = std::fs::read(d.join("mine/o.cubin")).unwrap();
    assert!(
        now == b"old" || (rc == Some(0) && now == ours),
        "{rc:?} {err}"
    );
    assert_eq!(std::fs::read_dir(d.join("mine")).unwrap().count(), 1);
}

/// A user made for one test and deleted after it (root only).
struct ThrowawayUser(String);

impl ThrowawayUser {
    fn make() -> Option<ThrowawayUser> {
        if unsafe { libc::geteuid() } != 0 {
            return None;
        }
        let name = format!("nvlt{}", std::process::id());
        let made = Command::new("useradd").args(["-M", &name]).status();
        made.is_ok_and(|s| s.success())
            .then_some(ThrowawayUser(name))
    }
}

impl Drop for ThrowawayUser {
    fn drop(&mut self) {
        Command::new("userdel").arg(&self.0).status().ok();
    }
}

/// A link that warns with a standard error that cannot be written (`2>/dev/full`, a pipe
/// whose reader has gone): the warning is lost, the link is not (it panicked, exit 101,
/// no image). nvlink exits 0 with its image on /dev/full; on a closed pipe SIGPIPE ends
/// it, where nvlinkrs (SIGPIPE ignored, as Rust's runtime leaves it) writes the image.
#[test]
fn unwritable_stderr_does_not_stop_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let link = |out: &str, stderr: std::process::Stdio| {
        let mut a = args(&[
            "-arch=sm_90",
            "--preserve-relocs",
            "a_90.cubin",
            "b_90.cubin",
        ]);
        a.extend(["-o".into(), dir.path().join(out).display().to_string()]);
        let r = Command::new(nvlinkrs())
            .args(&a)
            .stderr(stderr)
            .output()
            .unwrap();
        (r.status.code(), std::fs::read(dir.path().join(out)).ok())
    };
    let (rc, want) = link("want.cubin", std::process::Stdio::null());
    assert_eq!(rc, Some(0));
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let (rc, out) = link("full.cubin", full.into());
    assert_eq!((rc, out == want), (Some(0), true));
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let (rc, out) = link("pipe.cubin", writer.into());
    assert_eq!((rc, out == want), (Some(0), true));
}

/// Relocation sections nvlink refuses, made by patching a fixture's bytes: `sh_info`
/// naming no section, the null section, or one that is not code, initialised data or a
/// constant bank ("unexpected reloc section"), and a type past the R_CUDA table ("sass
/// rtype out of range"), in a kept function's section and in `.rela.debug_frame`; exit
/// 1, no output (all were dropped or kept with exit 0). A size that is not a multiple of
/// the entry size is cut to whole entries by both.
#[test]
fn refused_relocation_sections_match_nvlink() {
    use nvlinkrs::elf::cubin::{Cubin, SHT_RELA};
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(fixtures().join("a_90.cubin")).unwrap();
    let c = Cubin::parse(nvlinkrs::bytes::Bytes::from_vec(good.clone()), "a").unwrap();
    let shoff = u64::from_le_bytes(good[0x28..0x30].try_into().unwrap()) as usize;
    let header = |name: &str| shoff + 64 * c.section_index(name).unwrap();
    let text_rela = c
        .sections
        .iter()
        .find(|s| s.ty == SHT_RELA)
        .unwrap()
        .name
        .clone();
    let patched = |name: &str, at: usize, v: &[u8]| {
        let mut d = good.clone();
        d[at..at + v.len()].copy_from_slice(v);
        let p = dir.path().join(name);
        std::fs::write(&p, d).unwrap();
        p.display().to_string()
    };
    let info = |target: u32| (target.to_le_bytes().to_vec(), header(&text_rela) + 0x2C);
    let index = |name: &str| c.section_index(name).unwrap() as u32;
    let first_type = |rela: &str| c.sections[c.section_index(rela).unwrap()].offset as usize + 8;
    let size = c.sections[c.section_index(&text_rela).unwrap()].size - 1;
    let cases: Vec<(&str, Vec<u8>, usize)> = vec![
        ("info0", info(0).0, info(0).1),
        ("info999", info(999).0, info(999).1),
        ("info_nvinfo", info(index(".nv.info")).0, info(0).1),
        ("info_global", info(index(".nv.global")).0, info(0).1),
        ("info_strtab", info(index(".strtab")).0, info(0).1),
        ("info_rela", info(index(".rela.debug_frame")).0, info(0).1),
        (
            "type",
            0x74u32.to_le_bytes().to_vec(),
            first_type(&text_rela),
        ),
        (
            "type_frame",
            0xFFu32.to_le_bytes().to_vec(),
            first_type(".rela.debug_frame"),
        ),
        (
            "size",
            size.to_le_bytes().to_vec(),
            header(&text_rela) + 0x20,
        ),
    ];
    let mut failures = Vec::new();
    for (name, bytes, at) in &cases {
        let p = patched(&format!("{name}.cubin"), *at, bytes);
        let a = args(&["-arch=sm_90", &p, "b_90.cubin"]);
        if let Err(d) = differential(&a) {
            failures.push(format!("{name}: {d}"));
        }
        let r = Command::new(nvlinkrs())
            .args(&a)
            .args(["-o", "/dev/null"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        if *name != "size" && !err.contains(&format!("{name}.cubin")) {
            failures.push(format!("{name}: the message does not name the file: {err}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Weak undefined symbols the linker provides (`__UDT_END`, `__UFT`,
/// `.nv.reservedSmem.offset0`) renamed in `.strtab` to names nobody defines: nvlink says
/// `Undefined reference`, exit 255 (they linked with exit 0 and the name left undefined
/// in the executable, as no relocation uses them).
#[test]
fn renamed_weak_undefined_symbols_match_nvlink() {
    use nvlinkrs::elf::cubin::Cubin;
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(fixtures().join("a_90.cubin")).unwrap();
    let c = Cubin::parse(nvlinkrs::bytes::Bytes::from_vec(good.clone()), "a").unwrap();
    let strtab = &c.sections[c.section_index(".strtab").unwrap()];
    let table = strtab.offset as usize..(strtab.offset + strtab.size) as usize;
    let mut failures = Vec::new();
    for (from, to) in [
        ("__UDT_END", "__UDX_END"),
        ("__UFT", "__UFX"),
        (".nv.reservedSmem.offset0", ".nv.reservedSmem.offsetX"),
    ] {
        let needle = format!("\0{from}\0");
        let at = good[table.clone()]
            .windows(needle.len())
            .position(|w| w == needle.as_bytes())
            .unwrap()
            + table.start
            + 1;
        let mut d = good.clone();
        d[at..at + to.len()].copy_from_slice(to.as_bytes());
        let p = dir.path().join(format!("{to}.cubin"));
        std::fs::write(&p, d).unwrap();
        let a = args(&["-arch=sm_90", &p.display().to_string(), "b_90.cubin"]);
        if let Err(d) = differential(&a) {
            failures.push(format!("{from} -> {to}: {d}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
