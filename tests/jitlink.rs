//! The drop-in libnvJitLink (`nvjitlink/`) against NVIDIA's: the same links run through
//! each (`tests/jitlink/drive.py`, by ctypes and by cuda.bindings, the drop-in preloaded),
//! the answers compared call by call, the images byte for byte or by `nvlinkrs compare`;
//! what links where (the drop-in's `NVLINKRS_JITLINK_LOG`); the cache across processes;
//! the exported names; a C program built with the header.
//!
//! Needs the toolkit (CUDA_HOME), the fixtures (NVLINKRS_FIXTURES), cuda-bindings in the
//! toolkit's venv (scripts/setup.sh) and the drop-in built beside the test binaries
//! (`cargo build -p nvlinkrs-nvjitlink`; scripts/test.sh does all of it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn cuda() -> PathBuf {
    let c = std::env::var_os("CUDA_HOME").expect("CUDA_HOME: run scripts/test.sh");
    std::fs::canonicalize(c).expect("CUDA_HOME exists")
}

fn fixtures() -> PathBuf {
    PathBuf::from(
        std::env::var_os("NVLINKRS_FIXTURES").expect("NVLINKRS_FIXTURES: run scripts/test.sh"),
    )
}

fn real() -> PathBuf {
    cuda().join("lib").join("libnvJitLink.so.13")
}

/// The drop-in, built with this test's profile beside the nvlinkrs binary.
fn drop_in() -> PathBuf {
    let dir = Path::new(env!("CARGO_BIN_EXE_nvlinkrs")).parent().unwrap();
    let lib = dir.join("libnvJitLink.so");
    assert!(
        lib.is_file(),
        "{} is missing: `cargo build -p nvlinkrs-nvjitlink` first (scripts/test.sh does)",
        lib.display()
    );
    lib
}

/// The toolkit venv's python (cuda.bindings is installed there by scripts/setup.sh).
fn venv_python() -> PathBuf {
    let root = cuda();
    let venv = root
        .ancestors()
        .find(|a| a.join("pyvenv.cfg").is_file())
        .expect("the toolkit lives in scripts/setup.sh's venv");
    venv.join("bin").join("python")
}

fn driver() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/jitlink/drive.py")
}

struct Run {
    results: BTreeMap<String, Value>,
    dir: PathBuf,
    /// The drop-in's log lines, by link (`case NAME` lines start each).
    who: BTreeMap<String, Vec<String>>,
}

/// Runs the driver: `backend` is `ctypes:PATH` or `bindings`; `preload` the library to
/// preload; `cases` the links to run (all when empty).
fn drive(python: &Path, backend: &str, preload: Option<&Path>, out: &Path, cases: &[&str]) -> Run {
    drive_in(python, backend, preload, out, cases, |_| {})
}

/// [`drive`] in an environment `setup` makes first (e.g. cleared, as a runtime-only
/// Python environment has it); the driver's own variables are set after it.
fn drive_in(
    python: &Path,
    backend: &str,
    preload: Option<&Path>,
    out: &Path,
    cases: &[&str],
    setup: impl FnOnce(&mut Command),
) -> Run {
    std::fs::create_dir_all(out).unwrap();
    let log = out.join("who.log");
    let mut cmd = Command::new(python);
    setup(&mut cmd);
    cmd.arg(driver()).arg(backend).arg(fixtures()).arg(out);
    if !cases.is_empty() {
        cmd.arg(cases.join(","));
    }
    cmd.env("NVLINKRS_JITLINK_LOG", &log);
    cmd.env("DRIVE_CUDADEVRT", cuda().join("lib/libcudadevrt.a"));
    if let Some(p) = preload {
        cmd.env("LD_PRELOAD", p);
        if backend == "bindings" {
            // as a Python user runs it: the toolkit is the wheels of the process's own
            // environment, found by the drop-in (no CUDA_HOME)
            cmd.env_remove("CUDA_HOME").env_remove("CUDA_PATH");
        }
    }
    let o = cmd.output().expect("python runs");
    assert!(
        o.status.success(),
        "{backend}: {}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let text = std::fs::read_to_string(out.join("results.json")).unwrap();
    let results: BTreeMap<String, Value> = serde_json::from_str(&text).unwrap();
    let mut who: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut case = String::new();
    for line in std::fs::read_to_string(&log).unwrap_or_default().lines() {
        match line.strip_prefix("case ") {
            Some(c) => case = c.to_string(),
            None => who.entry(case.clone()).or_default().push(line.to_string()),
        }
    }
    Run {
        results,
        dir: out.to_path_buf(),
        who,
    }
}

/// An info log without the line nvJitLink's has for every `-lto` link and the drop-in's
/// has not (`INFO: NVVM70 LTOIR Container created (N bytes)`, `Solid` at sm_100+: the size
/// of nvJitLink's own container of the linked IR, which nvlinkrs does not make), and
/// without its NUL (a log of that line alone is empty then); ptxas's compile times (`-v`)
/// read as 0.
fn without_ir_container_line(log: &Value) -> Value {
    match log.as_str() {
        Some(s) => Value::from(
            s.trim_end_matches('\0')
                .lines()
                .filter(|l| !(l.starts_with("INFO: ") && l.contains(" LTOIR Container created (")))
                .map(|l| match l.split_once("Compile time = ") {
                    Some((head, _)) if l.ends_with(" ms") => format!("{head}Compile time = 0 ms\n"),
                    _ => format!("{l}\n"),
                })
                .collect::<String>(),
        ),
        None => log.clone(),
    }
}

/// Links whose image is not byte-identical to nvJitLink's, only equivalent: one PTX
/// kernel at sm_75 and sm_80, whose string table's order differs.
const EQUIVALENT_ONLY: [&str; 2] = ["ptx_sm_75", "ptx_sm_80"];

/// Links whose answer is not nvJitLink's bytes but links, by nvlink with the inputs
/// named (`cudadevrt`: the toolkit's), to the image nvJitLink's links to: `-r` cubins
/// (nvlinkrs keeps the relocations of `__constant__` reads that nvJitLink applies,
/// docs/rules/relocatable.md) and linked LTO IR whose code libNVVM's link changes (a
/// `switch`'s blocks merged, sm_90's IR linked at sm_100 given another data layout
/// string): `nvlinkrs::lto::linked_ir`.
const RELINKED_ONLY: [(&str, &str, &[&str]); 6] = [
    ("relocatable", "cubin", &[]),
    ("relocatable_sm_100", "cubin", &[]),
    ("relocatable_lto", "cubin", &[]),
    ("linked_ir_upgraded", "ltoir", &[]),
    ("switch_partial_lto", "ltoir", &["merge/swfn_dc90.o"]),
    ("lto_devrt_constants_sm_100", "ltoir", &["cudadevrt"]),
];

/// Whether nvlink links `a` and `b` (`-r` cubins, or LTO IR with `-dlto`), each with
/// `with`, for `arch` to the same bytes.
fn relink_to_the_same_image(arch: &str, a: &Path, b: &Path, with: &[&str]) -> Result<(), String> {
    let link = |input: &Path| {
        let out = input.with_extension("relinked");
        let mut c = Command::new(cuda().join("bin/nvlink"));
        c.arg(format!("-arch={arch}"))
            .arg(input)
            .arg("-o")
            .arg(&out);
        for w in with {
            match *w {
                "cudadevrt" => c.arg(cuda().join("lib/libcudadevrt.a")),
                w => c.arg(fixtures().join(w)),
            };
        }
        if input.extension().is_some_and(|e| e == "ltoir") {
            c.arg("-dlto")
                .arg(format!("-nvvmpath={}", cuda().join("nvvm").display()));
        }
        let r = c.output().unwrap();
        match r.status.success() {
            true => Ok(std::fs::read(&out).unwrap()),
            false => Err(format!(
                "nvlink {}: {}",
                input.display(),
                String::from_utf8_lossy(&r.stderr)
            )),
        }
    };
    match link(a)? == link(b)? {
        true => Ok(()),
        false => Err(format!(
            "{} and {} link to other images",
            a.display(),
            b.display()
        )),
    }
}

/// Links the drop-in hands to the real library, and at which call.
const HANDED_OVER: [(&str, &str); 38] = [
    ("relocatable_ptx", "nvJitLink: options"),
    ("object_for_other_archs", "nvJitLink: input"),
    ("xptxas_version", "nvJitLink: options"),
    ("math_without_lto", "nvJitLink: options"),
    ("xptxas_comma", "nvJitLink: options"),
    ("kernels_used_beside_devrt", "nvJitLink: link"),
    ("lto_device_launch_without_devrt", "nvJitLink: link"),
    ("lto_without_ir", "nvJitLink: link"),
    ("ltoir_newer_than_the_link", "nvJitLink: input"),
    ("library_without_code_for_the_arch", "nvJitLink: input"),
    ("kernels_used_dropping_a_launched_kernel", "nvJitLink: link"),
    ("bad_option", "nvJitLink: options"),
    ("bad_arch", "nvJitLink: options"),
    ("no_arch", "nvJitLink: options"),
    ("bad_opt_level", "nvJitLink: options"),
    ("ptx_without_lto", "nvJitLink: options"),
    ("ltoir_without_lto", "nvJitLink: input"),
    ("cubin_other_arch", "nvJitLink: input"),
    ("not_a_cubin", "nvJitLink: input"),
    ("unresolved", "nvJitLink: link"),
    ("ptx_with_a_cubin", "nvJitLink: input"),
    ("lto_ptx_beside_devrt", "nvJitLink: link"),
    ("lto_with_ptx_only", "nvJitLink: input"),
    ("explicit_O3", "nvJitLink: options"),
    ("maxrreg_plus", "nvJitLink: options"),
    ("maxrreg_zero", "nvJitLink: options"),
    ("unknown_arch", "nvJitLink: options"),
    ("family_arch_90f", "nvJitLink: options"),
    ("cubin_and_ltoir", "nvJitLink: input"),
    ("ptx_sm_100a_at_sm_100", "nvJitLink: input"),
    ("object_not_relocatable", "nvJitLink: input"),
    ("complete_twice_handed_over", "nvJitLink: options"),
    ("input_after_complete", "nvJitLink: input"),
    ("truncated_fatbin", "nvJitLink: input"),
    ("truncated_library", "nvJitLink: input"),
    ("truncated_ltoir", "nvJitLink: input"),
    ("file_rewritten_handed_over", "nvJitLink: options"),
    ("file_as_rewritten_handed_over", "nvJitLink: options"),
];

/// Compares two runs of every link: each call's result code, the error log, the info log
/// (but for nvJitLink's IR container line), and the images: the same bytes, or for
/// [`EQUIVALENT_ONLY`] equivalent by `nvlinkrs compare`. Returns the differences.
fn differences(real: &Run, ours: &Run) -> Vec<String> {
    let mut out = Vec::new();
    assert_eq!(
        real.results.keys().collect::<Vec<_>>(),
        ours.results.keys().collect::<Vec<_>>()
    );
    for (case, r) in real.results.iter().filter(|(c, _)| !c.starts_with('_')) {
        let o = &ours.results[case];
        for field in [
            "create", "add", "before", "complete", "after", "destroy", "ErrorLog",
        ] {
            if r.get(field) != o.get(field) {
                out.push(format!(
                    "{case}: {field}: {:?} vs {:?}",
                    r.get(field),
                    o.get(field)
                ));
            }
        }
        let info = |v: &Value| {
            v.get("InfoLog")
                .map(|l| (l[0].clone(), without_ir_container_line(&l[1])))
        };
        if info(r) != info(o) {
            out.push(format!("{case}: info log: {:?} vs {:?}", info(r), info(o)));
        }
        for (field, ext) in [
            ("LinkedCubin", "cubin"),
            ("LinkedPtx", "ptx"),
            ("LinkedLTOIR", "ltoir"),
        ] {
            let (x, y) = (&r[field], &o[field]);
            if x[0] != y[0] {
                out.push(format!("{case}: {field}: result {} vs {}", x[0], y[0]));
                continue;
            }
            if x.get(2) == y.get(2) {
                continue;
            }
            let (a, b) = (
                real.dir.join(format!("{case}.{ext}")),
                ours.dir.join(format!("{case}.{ext}")),
            );
            let relinked = RELINKED_ONLY
                .iter()
                .find(|(c, e, _)| c == case && *e == ext);
            if let Some((_, _, with)) = relinked {
                let arch = r["options"][0]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("-arch=");
                if let Err(e) = relink_to_the_same_image(arch, &a, &b, with) {
                    out.push(format!("{case}: {e}"));
                }
            } else if ext == "cubin" && EQUIVALENT_ONLY.contains(&case.as_str()) {
                let c = Command::new(env!("CARGO_BIN_EXE_nvlinkrs"))
                    .arg("compare")
                    .args([&a, &b])
                    .output()
                    .unwrap();
                if !c.status.success() {
                    out.push(format!(
                        "{case}: not equivalent: {}",
                        String::from_utf8_lossy(&c.stdout)
                    ));
                }
            } else {
                out.push(format!("{case}: {field}: other bytes"));
            }
        }
    }
    out
}

/// Which links the drop-in ran itself and which it handed over, as expected.
fn check_who(ours: &Run) {
    let handed: BTreeMap<&str, &str> = HANDED_OVER.into_iter().collect();
    let mut wrong = Vec::new();
    for (case, r) in ours.results.iter().filter(|(c, _)| !c.starts_with('_')) {
        // (no options at all: cuda.bindings passes a null array, which the drop-in
        // answers itself, NVJITLINK_ERROR_NULL_INPUT as nvJitLink does)
        if r["create"] == 10 {
            continue;
        }
        let lines = ours.who.get(case).cloned().unwrap_or_default();
        let first = lines.first().map(String::as_str).unwrap_or("(nothing)");
        match handed.get(case.as_str()) {
            Some(expected) if !lines.iter().any(|l| l == expected) => {
                wrong.push(format!("{case}: {lines:?}, expected {expected}"))
            }
            None if !first.starts_with("nvlinkrs: linked")
                && !first.starts_with("nvlinkrs: cache hit") =>
            {
                wrong.push(format!("{case}: {lines:?}, expected nvlinkrs to link it"))
            }
            // (the linked LTO IR too: no call goes to the real library)
            None if lines.iter().any(|l| l.starts_with("nvJitLink: ")) => wrong.push(format!(
                "{case}: {lines:?}, expected nvlinkrs to answer every call"
            )),
            _ => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every fixture link (cubin, PTX, LTO IR, fatbin, host object, archive inputs; `-lto`,
/// `-ptx`, bad options, unresolved symbols) through NVIDIA's library and through the
/// drop-in, each loaded by ctypes: the same answers and images.
#[test]
fn drop_in_answers_as_nvjitlink_does() {
    let dir = tempfile::tempdir().unwrap();
    let py = PathBuf::from("python3");
    let real_run = drive(
        &py,
        &format!("ctypes:{}", real().display()),
        None,
        &dir.path().join("real"),
        &[],
    );
    let ours = drive(
        &py,
        &format!("ctypes:{}", drop_in().display()),
        None,
        &dir.path().join("ours"),
        &[],
    );
    assert!(
        real_run.who.is_empty(),
        "the real library was given the drop-in's log"
    );
    let diffs = differences(&real_run, &ours);
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    check_who(&ours);
    // (the comparison can fail: a link's result and image are there to compare)
    let ltoir = &ours.results["ltoir"];
    assert_eq!(ltoir["complete"], 0);
    assert!(ltoir["LinkedCubin"][1].as_u64().unwrap() > 1000);
    assert_eq!(ours.results["bad_option"]["create"], 1);
    assert_eq!(
        ours.results["bad_option"]["ErrorLog"][1],
        "unrecognized option: -bogus\n\u{0}"
    );
}

/// cuda.bindings (as cuda.core and numba-cuda use it) with the drop-in preloaded, and no
/// CUDA_HOME (the toolkit is the wheels beside cuda.bindings): its calls resolve into
/// the drop-in, and every link answers as without it.
#[test]
fn cuda_bindings_links_through_the_preloaded_drop_in() {
    let py = venv_python();
    let probe = Command::new(&py)
        .args(["-c", "import cuda.bindings.nvjitlink"])
        .status()
        .unwrap();
    assert!(
        probe.success(),
        "cuda-bindings is not installed in {}: run scripts/setup.sh",
        py.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let plain = drive(&py, "bindings", None, &dir.path().join("real"), &[]);
    let ours = drive(
        &py,
        "bindings",
        Some(&drop_in()),
        &dir.path().join("ours"),
        &[],
    );
    // where the process's nvJitLinkCreate is: the wheel's library, then the drop-in
    let from = |r: &Run| r.results["_resolved_from"].as_str().map(PathBuf::from);
    assert_eq!(from(&ours), Some(std::fs::canonicalize(drop_in()).unwrap()));
    assert!(
        from(&plain).is_some_and(|p| p.ends_with("libnvJitLink.so.13")),
        "{:?}",
        from(&plain)
    );
    assert!(
        plain.who.is_empty(),
        "without the preload the drop-in took part"
    );
    let diffs = differences(&plain, &ours);
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    check_who(&ours);
}

/// A second process linking the same device code gets it from nvlinkrs' cache, the same
/// bytes, also a link the drop-in hands to nvJitLink (`-O3`); `-no-cache` links
/// every time.
#[test]
fn a_second_process_gets_the_link_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let run = |name: &str| {
        let out = dir.path().join(name);
        std::fs::create_dir_all(&out).unwrap();
        let log = out.join("who.log");
        let o = Command::new("python3")
            .arg(driver())
            .arg(format!("ctypes:{}", drop_in().display()))
            .arg(fixtures())
            .arg(&out)
            .arg("ltoir,ltoir_no_cache,ptx,explicit_O3")
            .env("XDG_CACHE_HOME", &cache)
            .env("NVLINKRS_JITLINK_LOG", &log)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        (out, std::fs::read_to_string(log).unwrap())
    };
    let (first, who1) = run("first");
    let (second, who2) = run("second");
    let expect = |text: &str, case: &str, line: &str| {
        let head = format!("{case}\n");
        let section = text.split("case ").find(|s| s.starts_with(&head));
        let lines: Vec<&str> = section.unwrap_or("").lines().skip(1).collect();
        assert!(lines.contains(&line), "{case}: {lines:?}, expected {line}");
    };
    for case in ["ltoir", "ltoir_no_cache", "ptx"] {
        expect(&who1, case, "nvlinkrs: linked");
    }
    expect(&who1, "explicit_O3", "nvJitLink: linked, cached");
    expect(&who2, "ltoir", "nvlinkrs: cache hit");
    expect(&who2, "ptx", "nvlinkrs: cache hit");
    expect(&who2, "ltoir_no_cache", "nvlinkrs: linked");
    expect(&who2, "explicit_O3", "nvJitLink: cache hit");
    for image in ["ltoir.cubin", "ptx.cubin", "explicit_O3.cubin"] {
        assert_eq!(
            std::fs::read(first.join(image)).unwrap(),
            std::fs::read(second.join(image)).unwrap()
        );
    }
}

/// The drop-in links as nvJitLink does whatever `NVLINKRS_INCREMENTAL` says in the host
/// program's environment: incremental LTO's partitions are not nvJitLink's image (and its
/// background build would take the host program's command line for a link's).
#[test]
fn the_drop_in_links_whole_program_under_nvlinkrs_incremental() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, mode: &str| {
        let out = dir.path().join(name);
        std::fs::create_dir_all(&out).unwrap();
        let o = Command::new("python3")
            .arg(driver())
            .arg(format!("ctypes:{}", drop_in().display()))
            .arg(fixtures())
            .arg(&out)
            .arg("ltoir,ltoir_maxrreg")
            .env("XDG_CACHE_HOME", dir.path().join(format!("cache-{name}")))
            .env("NVLINKRS_INCREMENTAL", mode)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        out
    };
    let whole = run("whole", "0");
    for mode in ["partitions", "1"] {
        let inc = run(mode, mode);
        for image in ["ltoir.cubin", "ltoir_maxrreg.cubin"] {
            assert!(
                std::fs::read(whole.join(image)).unwrap()
                    == std::fs::read(inc.join(image)).unwrap(),
                "{image} with NVLINKRS_INCREMENTAL={mode}"
            );
        }
    }
}

/// The dynamic symbols: every name NVIDIA's library exports, under the same version.
fn exports(lib: &Path) -> BTreeSet<String> {
    let o = Command::new("nm")
        .args(["-D", "--defined-only", "--with-symbol-versions"])
        .arg(lib)
        .output()
        .expect("nm (binutils)");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter(|s| s.contains("@@libnvJitLink.so.13"))
        .map(str::to_string)
        .collect()
}

#[test]
fn exports_every_name_of_nvjitlink_under_its_version_node() {
    let (theirs, ours) = (exports(&real()), exports(&drop_in()));
    assert!(theirs.len() > 100, "{theirs:?}");
    let missing: Vec<_> = theirs.difference(&ours).collect();
    assert!(missing.is_empty(), "missing: {missing:?}");
    let soname = Command::new("readelf")
        .arg("-d")
        .arg(drop_in())
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&soname.stdout).contains("Library soname: [libnvJitLink.so.13]")
    );
}

/// A C program built with nvJitLink.h (calls to `__nvJitLink*_13_5@libnvJitLink.so.13`)
/// and linked with NVIDIA's library: run plainly, then with the drop-in preloaded, and
/// with the drop-in first on the library path as `libnvJitLink.so.13`; the drop-in links
/// it (its log says so), to the same output and image.
#[test]
fn a_c_program_built_with_the_header_links_through_the_drop_in() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("link");
    let cc = Command::new("cc")
        .arg("-I")
        .arg(cuda().join("include"))
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/jitlink/link.c"))
        .arg("-o")
        .arg(&exe)
        .arg(real())
        .output()
        .expect("cc");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    // the drop-in first on the library path, under the soname
    let first = dir.path().join("first");
    std::fs::create_dir(&first).unwrap();
    std::os::unix::fs::symlink(drop_in(), first.join("libnvJitLink.so.13")).unwrap();
    let run = |image: &str, how: &str| {
        let log = dir.path().join(format!("{image}.log"));
        let mut cmd = Command::new(&exe);
        cmd.args(["sm_90", image])
            .arg(fixtures().join("saxpy.ltoir"))
            .arg(fixtures().join("scale.ltoir"))
            .current_dir(dir.path())
            .env("LD_LIBRARY_PATH", cuda().join("lib"))
            .env("NVLINKRS_JITLINK_LOG", &log);
        match how {
            "preload" => cmd.env("LD_PRELOAD", drop_in()),
            "library path" => cmd.env("LD_LIBRARY_PATH", &first),
            _ => &mut cmd,
        };
        let o = cmd.output().unwrap();
        assert!(
            o.status.success(),
            "{how}: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        let who = std::fs::read_to_string(&log).unwrap_or_default();
        (String::from_utf8_lossy(&o.stdout).into_owned(), who)
    };
    let (real_out, real_who) = run("real.cubin", "plain");
    assert!(
        real_out.contains("version 13.5") && real_out.contains("cubin "),
        "{real_out}"
    );
    assert!(real_who.is_empty());
    let read = |n: &str| std::fs::read(dir.path().join(n)).unwrap();
    for (image, how) in [("ours.cubin", "preload"), ("path.cubin", "library path")] {
        let (our_out, our_who) = run(image, how);
        assert_eq!(real_out, our_out, "{how}");
        assert!(our_who.starts_with("nvlinkrs: "), "{how}: {our_who:?}");
        assert_eq!(read("real.cubin"), read(image), "{how}");
    }
}

/// Without NVIDIA's library, a link whose options only it carries out still gets a
/// handle, whose error log says why (`NVJITLINK_ERROR_INTERNAL`); nvlinkrs' own links
/// go on.
#[test]
fn without_the_real_library_a_handed_over_link_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let o = Command::new("python3")
        .arg(driver())
        .arg(format!("ctypes:{}", drop_in().display()))
        .arg(fixtures())
        .arg(&out)
        .arg("bad_option,explicit_O3,cubins")
        .env("NVLINKRS_REAL_NVJITLINK", dir.path().join("missing.so"))
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(out.join("results.json")).unwrap();
    let results: BTreeMap<String, Value> = serde_json::from_str(&text).unwrap();
    for case in ["bad_option", "explicit_O3"] {
        let r = &results[case];
        assert_eq!(r["create"], 6, "{case}: {r}");
        assert_eq!(r["ErrorLog"][0], 0, "{case}: {r}");
        let log = r["ErrorLog"][1].as_str().unwrap_or("");
        assert!(log.contains("found no libnvJitLink"), "{case}: {log}");
        assert_eq!(r["destroy"], 0, "{case}: {r}");
    }
    assert_eq!(results["cubins"]["complete"], 0);
}

/// A runtime-only Python environment (issue 38: the nvidia-nvjitlink wheel, no nvcc or
/// nvvm wheels, no `CUDA_HOME`, no toolkit anywhere): nvlinkrs cannot link, and hands
/// every link to NVIDIA's library in the environment's `site-packages/nvidia/cu13/lib`,
/// found without running Python; the answers are that library's own, on every case of
/// the drop-in's suite (every link returned `NVJITLINK_ERROR_INTERNAL` before; then a
/// file rewritten after `AddFile` was replayed as rewritten, and an input after a cached
/// link's `Complete` was refused without nvJitLink's error log).
#[test]
fn a_runtime_only_environment_hands_links_to_the_wheels_library() {
    let dir = tempfile::tempdir().unwrap();
    let (venv, home, empty) = (
        dir.path().join("venv"),
        dir.path().join("home"),
        dir.path().join("empty"),
    );
    let lib = venv.join("lib/python3.12/site-packages/nvidia/cu13/lib");
    for d in [&lib, &home, &empty] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::os::unix::fs::symlink(real(), lib.join("libnvJitLink.so.13")).unwrap();
    // (every case of the drop-in's suite)
    let cases = [];
    let py = std::fs::canonicalize(venv_python()).unwrap();
    let real_run = drive(
        &py,
        &format!("ctypes:{}", real().display()),
        None,
        &dir.path().join("real"),
        &cases,
    );
    let ours = drive_in(
        &py,
        &format!("ctypes:{}", drop_in().display()),
        None,
        &dir.path().join("ours"),
        &cases,
        |cmd| {
            cmd.env_clear()
                .env("PATH", &empty)
                .env("HOME", &home)
                .env("VIRTUAL_ENV", &venv)
                .env("XDG_CACHE_HOME", dir.path().join("cache"));
        },
    );
    let diffs = differences(&real_run, &ours);
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    assert_eq!(ours.results["cubins"]["complete"], 0);
    assert_eq!(ours.results["ltoir"]["complete"], 0);
    let who: Vec<&String> = ours.who.values().flatten().collect();
    assert!(
        !who.iter().any(|l| l.starts_with("nvlinkrs: linked"))
            && who.iter().any(|l| l.starts_with("nvJitLink")),
        "every link handed over: {who:?}"
    );
}

/// A host that handles SIGSEGV itself (`tests/jitlink/sigtest.c`: a thread faults on a
/// PROT_NONE page about every millisecond and recovers in its own handler, as a JVM's null
/// checks do) while its main thread runs five `-lto` links: with NVIDIA's library and with
/// the drop-in preloaded (no cache, so that libNVVM runs in each), every link succeeds and
/// every fault reaches the host's handler (was: the drop-in's crash guard took the host's
/// first fault during a link for libNVVM's, "sigtest fatal   : libNVVM crashed compiling
/// ...", exit 1).
#[test]
fn a_host_that_handles_its_own_sigsegv_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("sigtest");
    let cc = Command::new("cc")
        .arg("-O1")
        .arg("-I")
        .arg(cuda().join("include"))
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/jitlink/sigtest.c"))
        .arg("-o")
        .arg(&exe)
        .arg(real())
        .arg("-lpthread")
        .output()
        .expect("cc");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    for preload in [None, Some(drop_in())] {
        let mut cmd = Command::new(&exe);
        cmd.args(["sm_90", "5"])
            .arg(fixtures().join("saxpy.ltoir"))
            .arg(fixtures().join("scale.ltoir"))
            .current_dir(dir.path())
            .env("LD_LIBRARY_PATH", cuda().join("lib"))
            .env("NVLINKRS_CACHE", "0")
            .env("XDG_CACHE_HOME", dir.path().join("cache"));
        if let Some(p) = &preload {
            cmd.env("LD_PRELOAD", p);
        }
        let o = cmd.output().unwrap();
        assert_eq!(
            (
                o.status.code(),
                String::from_utf8_lossy(&o.stdout).into_owned(),
                String::from_utf8_lossy(&o.stderr).into_owned()
            ),
            (
                Some(0),
                "links 5 ok\nfaults recovered\n".into(),
                String::new()
            ),
            "preloaded: {preload:?}"
        );
    }
}

/// The start of the scripts that link through the drop-in (argv 1) in a process of their
/// own: `added()` is a handle of an `-arch=sm_90 -lto` link of the fixtures' (argv 2)
/// `saxpy.ltoir` and `scale.ltoir`, its inputs added.
const PY_ADDED: &str = r#"
import ctypes, os, sys
lib = ctypes.CDLL(sys.argv[1])
vp, sz = ctypes.c_void_p, ctypes.c_size_t
lib.nvJitLinkAddData.argtypes = [vp, ctypes.c_int, ctypes.c_char_p, sz, ctypes.c_char_p]
def added():
    h = vp()
    opts = (ctypes.c_char_p * 2)(b"-arch=sm_90", b"-lto")
    assert lib.nvJitLinkCreate(ctypes.byref(h), 2, opts) == 0
    for name in ["saxpy.ltoir", "scale.ltoir"]:
        data = open(os.path.join(sys.argv[2], name), "rb").read()
        assert lib.nvJitLinkAddData(h, 3, data, len(data), name.encode()) == 0
    return h
"#;

/// Runs `body` after [`PY_ADDED`] in a Python process of its own (stopped after 120 s:
/// a link that waits for ever fails the run), `more` after the drop-in and the fixtures
/// on its command line, `env` set; its standard output, once it succeeded.
fn python_linking(body: &str, more: &[&Path], env: &[(&str, &std::ffi::OsStr)]) -> String {
    let o = Command::new("timeout")
        .args(["120", "python3", "-c", &format!("{PY_ADDED}{body}")])
        .arg(drop_in())
        .arg(fixtures())
        .args(more)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A program that links, then forks (Python's multiprocessing, a test runner's workers):
/// the child links too, on threads of its own. The drop-in keeps one pool of link threads
/// per process; the child's copy of the parent's has no threads, and a link run there would
/// wait for ever.
#[test]
fn a_forked_child_links_after_its_parent() {
    let dir = tempfile::tempdir().unwrap();
    let out = python_linking(
        r#"
def link():
    h = added()
    assert lib.nvJitLinkComplete(h) == 0
    n = sz()
    lib.nvJitLinkGetLinkedCubinSize(h, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value)
    assert lib.nvJitLinkGetLinkedCubin(h, buf) == 0
    # the linked LTO IR too (its reader's parallel work once ran on a pool of the
    # parent's threads, which the child has not: the child's link waited for ever)
    assert lib.nvJitLinkGetLinkedLTOIRSize(h, ctypes.byref(n)) == 0
    return buf.raw
parent = link()
pid = os.fork()
if pid == 0:
    os._exit(0 if link() == parent else 3)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
"#,
        &[],
        &[
            ("XDG_CACHE_HOME", dir.path().as_os_str()),
            ("NVLINKRS_CACHE", "0".as_ref()),
        ],
    );
    assert_eq!(out.trim(), "child 0");
}

/// Another process holding the cache counters' lock (a stopped one, or another user's
/// on a shared cache folder) does not hold up the drop-in's links: they leave their
/// counts out at once (each waited 2 s, a thread left blocked per link; the attacker's
/// review of 2026-12-01). The hang guard is loose: a hit takes milliseconds.
#[test]
fn a_held_counters_lock_holds_up_no_link_of_the_drop_in() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let out = python_linking(
        r#"
import fcntl, time
def link():
    h = added()
    t = time.monotonic()
    assert lib.nvJitLinkComplete(h) == 0
    return time.monotonic() - t
link()
held = open(os.path.join(sys.argv[3], "stats.json"), "a")
fcntl.flock(held, fcntl.LOCK_EX)
print(max(link() for _ in range(3)))
"#,
        &[&cache],
        &[("NVLINKRS_CACHE_DIR", cache.as_os_str())],
    );
    let slowest: f64 = out.trim().parse().unwrap();
    assert!(
        slowest < 1.0,
        "a hit took {slowest} s with the counters' lock held"
    );
}
