//! What a link shows of itself (issue 39), on real links of programs compiled here with
//! the pinned nvcc: the time trace of a split LTO link (cold, then after one unit is
//! edited) checked against the link's own report, `nvlinkrs stats` under concurrent
//! links, and `--explain` after an edit, a tool swap and a flag change.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

mod common;
use common::{cuda, nvlinkrs};

/// `text` compiled by nvcc `-dc -dlto` for sm_90 at `dir/name.cu` (its own path, as a
/// rebuild compiles an edited file): the object's path.
fn compiled(dir: &Path, name: &str, text: &str) -> PathBuf {
    let src = dir.join(format!("{name}.cu"));
    std::fs::write(&src, text).unwrap();
    let obj = dir.join(format!("{name}.o"));
    let o = Command::new(cuda().join("bin/nvcc"))
        .args(["-dc", "-dlto", "-arch=sm_90"])
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    obj
}

const A: &str = "__device__ __noinline__ float twice(float x) { return 2.f * x; }
__global__ void ka(float *o) { o[threadIdx.x] = twice(o[threadIdx.x]); }
__global__ void ka2(float *o) { o[threadIdx.x] += twice(o[threadIdx.x + 1]); }
";
const B: &str = "__global__ void kb(float *o) { o[threadIdx.x] = o[threadIdx.x] * 3.f + 1.f; }
__global__ void kb2(int *o) { o[threadIdx.x] ^= 0x55; }
";

/// A folder with the two-unit program `A` and `B` compiled in it.
fn program() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    compiled(dir.path(), "a", A);
    compiled(dir.path(), "b", B);
    dir
}

/// nvlinkrs with `args` and libcudadevrt (the objects are host objects, as nvcc's
/// device link has them) in `dir`, its default cache in `dir/xdg` and the environment's
/// cache switch left out.
fn link(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(nvlinkrs());
    c.args(args)
        .arg(format!("-L{}", cuda().join("lib").display()))
        .arg("-lcudadevrt")
        .current_dir(dir)
        .env("XDG_CACHE_HOME", dir.join("xdg"))
        .env_remove("NVLINKRS_CACHE")
        .env_remove("NVLINKRS_TIME_TRACE")
        .env_remove("NVLINKRS_DAEMON");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The trace's events, checked for the Chrome trace format on the way: an array, or an
/// object with `traceEvents`; every event has `ph`, `pid` and `tid`, and every complete
/// event (`X`) `ts` and `dur`.
fn events(doc: &Value) -> Vec<Value> {
    let list = match doc {
        Value::Array(a) => a.clone(),
        Value::Object(o) => o["traceEvents"].as_array().expect("traceEvents").clone(),
        _ => panic!("a trace is an array or an object: {doc}"),
    };
    for e in &list {
        for field in ["ph", "pid", "tid"] {
            assert!(e.get(field).is_some(), "no {field}: {e}");
        }
        if e["ph"] == "X" {
            assert!(e["ts"].is_number() && e["dur"].is_number(), "{e}");
        }
    }
    list
}

fn named<'a>(events: &'a [Value], prefix: &str) -> Vec<&'a Value> {
    let complete = events.iter().filter(|e| e["ph"] == "X");
    complete
        .filter(|e| e["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
        .collect()
}

fn inside(child: &Value, parent: &Value) -> bool {
    let (c0, p0) = (
        child["ts"].as_f64().unwrap(),
        parent["ts"].as_f64().unwrap(),
    );
    let (c1, p1) = (
        c0 + child["dur"].as_f64().unwrap(),
        p0 + parent["dur"].as_f64().unwrap(),
    );
    c0 >= p0 && c1 <= p1
}

/// The ptxas stage's (hits, misses) in the link's report.
fn reported(report: &Value) -> (u64, u64) {
    let s = &report["cache"]["stages"]["ptxas"];
    (
        s["hits"].as_u64().unwrap_or(0),
        s["misses"].as_u64().unwrap_or(0),
    )
}

/// The split-compile fixture's sources (libNVVM cuts the program into several pieces).
fn split_source(unit: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/split/{unit}.cu"));
    std::fs::read_to_string(p).unwrap()
}

/// A split LTO link traced cold and after one unit's edit (one kernel of one piece): a
/// ptxas job span for every piece libNVVM wrote (found in the cache or run), each inside
/// the ptxas phase with its arguments, and the trace's ptxas cache lookups hit and missed as
/// the link's report counts them (after the edit, some of each).
#[test]
fn a_split_lto_links_trace_shows_its_jobs_and_lookups_as_the_link_did() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    compiled(d, "s0", &split_source("s0"));
    compiled(d, "s1", &split_source("s1"));
    for (trace, report) in [("cold.json", "cold.report"), ("edit.json", "edit.report")] {
        let (t, r) = (
            format!("--time-trace={trace}"),
            format!("-report-json={report}"),
        );
        let a = [
            "-arch=sm_90",
            "-dlto",
            "-split-compile-extended=2",
            "s0.o",
            "s1.o",
        ];
        let mut a = a.to_vec();
        a.extend(["-o", "app.cubin", &t, &r]);
        link(d, &a, &[]);
        let (doc, rep) = (json(&d.join(trace)), json(&d.join(report)));
        let ev = events(&doc);
        let pieces = (named(&ev, "libNVVM compile").iter())
            .map(|e| e["args"]["pieces"].as_u64().unwrap())
            .sum::<u64>();
        assert!(pieces >= 2, "{trace}: a split link, {pieces} pieces");
        let phase: Vec<_> = named(&ev, "ptxas")
            .into_iter()
            .filter(|e| e["cat"] == "phase")
            .collect();
        assert_eq!(phase.len(), 1, "{trace}: one ptxas phase");
        let (hits, misses) = reported(&rep);
        assert_eq!(hits + misses, pieces, "{trace}: a lookup per piece");
        // a job per piece, found in the cache or run
        let jobs = named(&ev, "ptxas <lto ptx piece ");
        assert_eq!(jobs.len() as u64, pieces, "{trace}: ptxas jobs");
        let ran = jobs.iter().filter(|j| j["args"]["cache"] == "miss").count();
        assert_eq!(ran as u64, misses, "{trace}: ptxas jobs run");
        for j in &jobs {
            assert!(inside(j, phase[0]), "{trace}: {j} outside {}", phase[0]);
            assert!(j["args"]["args"].as_str().unwrap().contains("-arch sm_90"));
        }
        let lookups = named(&ev, "cache lookup ptxas");
        let result = |r: &str| {
            let said = |e: &&&Value| {
                e["args"]["result"]
                    .as_str()
                    .is_some_and(|x| x.starts_with(r))
            };
            lookups.iter().filter(said).count()
        };
        assert_eq!(
            (result("hit") as u64, result("miss") as u64),
            (hits, misses),
            "{trace}"
        );
        if trace == "cold.json" {
            assert_eq!(hits, 0, "{trace}: a cold link");
            // one kernel's callee edited, at the unit's own path
            compiled(
                d,
                "s1",
                &split_source("s1").replace("ALONE(3, expf)", "ALONE(3, erff)"),
            );
        } else {
            assert!(
                hits >= 1 && misses >= 1,
                "{trace}: {hits} hits, {misses} misses"
            );
        }
    }
}

/// Links run at once each count in `nvlinkrs stats`: none is lost.
#[test]
fn concurrent_links_lose_no_count_in_the_stats() {
    let dir = program();
    let d = dir.path();
    let n = 8;
    let threads: Vec<_> = (0..n)
        .map(|i| {
            let d = d.to_path_buf();
            std::thread::spawn(move || {
                let out = format!("o{i}.cubin");
                let a = ["-arch=sm_90", "-dlto", "a.o", "b.o", "-o", &out];
                link(&d, &a, &[]);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let o = Command::new(nvlinkrs())
        .args(["stats", "--json"])
        .env("XDG_CACHE_HOME", d.join("xdg"))
        .output()
        .unwrap();
    assert!(o.status.success());
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    let c = &s["counters"];
    assert_eq!(c["links"], n, "{s:#}");
    let w = &c["whole_link"];
    assert_eq!(
        w["hits"].as_u64().unwrap() + w["misses"].as_u64().unwrap(),
        n as u64,
        "{s:#}"
    );
}

/// The `explain` lines of a link's messages.
fn explained(o: &Output) -> Vec<String> {
    (String::from_utf8_lossy(&o.stderr).lines())
        .filter(|l| l.contains("explain"))
        .map(String::from)
        .collect()
}

/// `--explain` names what changed since the last link to the same output: the input
/// after a one-unit edit, the tool after a swap of ptxas, the option after a flag change.
#[test]
fn explain_names_the_changed_input_tool_and_option() {
    let dir = program();
    let d = dir.path();
    // a toolkit of its own whose ptxas can be swapped: links to the real one's files
    let kit = d.join("kit");
    std::fs::create_dir_all(kit.join("bin")).unwrap();
    for entry in std::fs::read_dir(cuda()).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != "bin" {
            std::os::unix::fs::symlink(entry.path(), kit.join(entry.file_name())).unwrap();
        }
    }
    for tool in std::fs::read_dir(cuda().join("bin")).unwrap() {
        let tool = tool.unwrap();
        let to = kit.join("bin").join(tool.file_name());
        std::os::unix::fs::symlink(tool.path(), &to).unwrap();
    }
    let ptxas = kit.join("bin/ptxas");
    let real_ptxas = std::fs::canonicalize(&ptxas).unwrap();
    let kit_s = kit.display().to_string();
    let env = [("CUDA_HOME", kit_s.as_str())];
    let base = [
        "-arch=sm_90",
        "-dlto",
        "a.o",
        "b.o",
        "-o",
        "app.cubin",
        "--explain",
    ];
    link(d, &base, &env);
    // the same link again: a hit, nothing to explain
    let again = link(d, &base, &env);
    assert!(explained(&again).is_empty(), "{:?}", explained(&again));
    // one unit edited
    compiled(d, "b", &B.replace("0x55", "0x33"));
    let lines = explained(&link(d, &base, &env));
    assert!(
        lines.iter().any(|l| l.contains("input 2 'b.o' changed")),
        "{lines:?}"
    );
    // ptxas swapped for a copy of another content (the same program, a byte appended)
    std::fs::remove_file(&ptxas).unwrap();
    let mut bytes = std::fs::read(&real_ptxas).unwrap();
    bytes.push(0);
    std::fs::write(&ptxas, bytes).unwrap();
    std::fs::set_permissions(&ptxas, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let lines = explained(&link(d, &base, &env));
    assert!(
        lines.iter().any(|l| l.contains("tool ptxas changed")),
        "{lines:?}"
    );
    // a flag
    let mut flagged = base.to_vec();
    flagged.insert(0, "-maxrregcount=32");
    let lines = explained(&link(d, &flagged, &env));
    assert!(
        lines
            .iter()
            .any(|l| l.contains("option") && l.contains("maxrregcount")),
        "{lines:?}"
    );
    assert!(
        !lines.iter().any(|l| l.contains("input")),
        "only the option changed: {lines:?}"
    );
}

/// The trace named as the link's output or one of its inputs is not written (a warning;
/// the link's result stands): it replaced the image, or an input, with its JSON.
#[test]
fn the_trace_never_overwrites_the_output_or_an_input() {
    let dir = program();
    never_over_the_output_or_an_input(dir.path(), &["--time-trace=app.cubin", "--time-trace=a.o"]);
}

/// Links `a.o` and `b.o` in `d` with each of `side` (a file written beside the output
/// named as the output or an input): each says the file was not written, and the image
/// and `a.o` are whole.
fn never_over_the_output_or_an_input(d: &Path, side: &[&str]) {
    let a_before = std::fs::read(d.join("a.o")).unwrap();
    for &flag in side {
        let args = [
            "-arch=sm_90",
            "-dlto",
            "a.o",
            "b.o",
            "-o",
            "app.cubin",
            flag,
        ];
        let o = link(d, &args, &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("was not written"), "{flag}: {err}");
        let image = std::fs::read(d.join("app.cubin")).unwrap();
        assert!(image.starts_with(b"\x7fELF"), "{flag}: the image is gone");
        assert_eq!(std::fs::read(d.join("a.o")).unwrap(), a_before, "{flag}");
    }
}

/// nvlinkrs on `u.o` (`undefined_reference_object`) in `d`, writing `out` and the report
/// `report`: its exit code is nvlink's 255; what it printed.
fn failed_link(d: &Path, out: &str, report: &str) -> String {
    let o = Command::new(nvlinkrs())
        .args(["-arch=sm_90", "u.o", "-o", out])
        .arg(format!("--report-json={report}"))
        .current_dir(d)
        .env("XDG_CACHE_HOME", d.join("xdg"))
        .env_remove("NVLINKRS_DAEMON")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(255), "{err}");
    err
}

/// `u.o` in `d`: a kernel calling a device function no unit defines (`-dc`, sm_90), whose
/// link nvlink ends with 255.
fn undefined_reference_object(d: &Path) {
    std::fs::write(
        d.join("u.cu"),
        "extern __device__ int missing(int);\n\
         __global__ void k(int *o) { o[0] = missing(o[1]); }\n",
    )
    .unwrap();
    let o = Command::new(cuda().join("bin/nvcc"))
        .args(["-dc", "-arch=sm_90", "u.cu", "-o", "u.o"])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A cache's first link with its tools (a fresh cache) hashes them beside the link's
/// phases, on a lane of its own, and stores the image under the key made there: the next
/// link is a hit with the same bytes. A cache that knows the tools makes the key first,
/// on the link's own lane, before anything is read.
#[test]
fn a_fresh_caches_first_link_hashes_the_tools_beside_its_phases() {
    let dir = program();
    let d = dir.path();
    let traced = |trace: &str| {
        let args = ["-arch=sm_90", "-dlto", "a.o", "b.o", "-o", "app.cubin"];
        let o = link(d, &args, &[("NVLINKRS_TIME_TRACE", trace)]);
        let image = std::fs::read(d.join("app.cubin")).unwrap();
        (o, image, events(&json(&d.join(trace))))
    };
    let start = |e: &Value| e["ts"].as_f64().unwrap();
    let end = |e: &Value| start(e) + e["dur"].as_f64().unwrap();
    let (_, cold, first) = traced("first.json");
    let key = named(&first, "whole-link key (tools hashed)");
    let read = named(&first, "read");
    let inputs = named(&first, "whole-link key (inputs hashed)");
    assert!(
        end(inputs[0]) <= start(read[0]),
        "the inputs before the link reads them"
    );
    assert_eq!((key.len(), read.len()), (1, 1), "{first:?}");
    assert_ne!(
        key[0]["tid"], read[0]["tid"],
        "the key on a lane of its own"
    );
    let compile = named(&first, "cicc");
    assert!(
        end(key[0]) > start(read[0]) && start(key[0]) < end(compile[0]),
        "beside the phases: {key:?} {read:?} {compile:?}"
    );
    assert!(
        named(&first, "cache lookup link").is_empty(),
        "not looked up first"
    );
    let (o, hit, second) = traced("second.json");
    assert_eq!(hit, cold);
    let result = |e: &&Value| {
        e["args"]["result"]
            .as_str()
            .is_some_and(|r| r.starts_with("hit"))
    };
    assert!(named(&second, "cache lookup link").iter().any(result));
    let (key, read) = (named(&second, "whole-link key"), named(&second, "read"));
    assert_eq!(key[0]["tid"], 0, "{}", String::from_utf8_lossy(&o.stderr));
    assert!(read.is_empty(), "a hit reads nothing");
}

/// A link that fails still writes its `--report-json` file: nvlink's exit code and the
/// errors it printed (an undefined reference, which nvlink ends with 255), beside what
/// it was asked; and no output.
#[test]
fn a_failed_link_reports_its_exit_code_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    undefined_reference_object(d);
    let err = failed_link(d, "app.cubin", "r.json");
    assert!(!d.join("app.cubin").exists());
    let r = json(&d.join("r.json"));
    assert_eq!(r["failed"]["exit"], 255, "{r:#}");
    let errors = r["failed"]["errors"].as_array().unwrap();
    assert!(
        errors.iter().any(|e| e
            .as_str()
            .unwrap()
            .contains("Undefined reference to '_Z7missingi'")),
        "{r:#}\n{err}"
    );
    assert_eq!(r["output"], "app.cubin");
    assert_eq!(r["inputs"][0]["path"], "u.o");
}

/// `--report-json` never goes over the output or an input, followed through a symlink or
/// named as it is (a failed link had replaced `a.o` with its report: attacker review,
/// 2026-12-02); the link says so and keeps its exit code.
#[test]
fn the_report_never_overwrites_the_output_or_an_input() {
    let dir = program();
    let d = dir.path();
    std::os::unix::fs::symlink("a.o", d.join("to_a.json")).unwrap();
    let reports = [
        "--report-json=app.cubin",
        "--report-json=a.o",
        "--report-json=to_a.json",
    ];
    never_over_the_output_or_an_input(d, &reports);
    // a failed link (an undefined reference) whose report names its input
    undefined_reference_object(d);
    let u_before = std::fs::read(d.join("u.o")).unwrap();
    std::os::unix::fs::symlink("u.o", d.join("to_u.json")).unwrap();
    let err = failed_link(d, "x.cubin", "to_u.json");
    assert!(err.contains("was not written"), "{err}");
    assert_eq!(std::fs::read(d.join("u.o")).unwrap(), u_before);
    // nor, by another spelling, over the output a failed link did not make (it made
    // `x.cubin` a report, which make takes for an image: attacker review, 2026-12-02)
    let err = failed_link(d, "x.cubin", "./x.cubin");
    assert!(err.contains("it is the link's output"), "{err}");
    assert!(!d.join("x.cubin").exists());
}

/// The files beside the output (the report, the time trace) never go over an options
/// file or a library the link found (`-optf`, `-l`: each had been replaced by the
/// report or the trace: attacker review, 2026-12-02), and one that cannot be written
/// (its folder missing) is a warning, not a failed link.
#[test]
fn side_files_never_overwrite_an_options_file_or_a_library() {
    let dir = program();
    let d = dir.path();
    std::fs::write(d.join("opts"), "b.o\n").unwrap();
    let ar = Command::new("ar")
        .args(["rcs", "libb.a", "b.o"])
        .current_dir(d)
        .status();
    assert!(ar.unwrap().success());
    let (opts, lib) = (
        std::fs::read(d.join("opts")).unwrap(),
        std::fs::read(d.join("libb.a")).unwrap(),
    );
    let cases = [
        (
            ["-optf", "opts"],
            "--report-json=opts",
            "it is the input 'opts'",
        ),
        (
            ["-optf", "opts"],
            "--time-trace=opts",
            "it is the input 'opts'",
        ),
        (
            ["-L.", "-lb"],
            "--report-json=libb.a",
            "it is the input './libb.a'",
        ),
        (
            ["-L.", "-lb"],
            "--time-trace=libb.a",
            "it is the input './libb.a'",
        ),
        (
            ["-optf", "opts"],
            "--report-json=no/such/r.json",
            "No such file or directory",
        ),
    ];
    // an old report's mode is kept; the trace never replaces the report
    std::fs::write(d.join("r.json"), "old").unwrap();
    let private = std::os::unix::fs::PermissionsExt::from_mode(0o600);
    std::fs::set_permissions(d.join("r.json"), private).unwrap();
    let args = ["-arch=sm_90", "-dlto", "a.o", "b.o", "-o", "app.cubin"];
    let both = [&args[..], &["--report-json=r.json", "--time-trace=r.json"]].concat();
    let o = link(d, &both, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("'r.json' was not written: it is the report's file"),
        "{err}"
    );
    let report: serde_json::Value = json(&d.join("r.json"));
    assert!(report["inputs"].is_array(), "{report}");
    let mode = std::fs::metadata(d.join("r.json")).unwrap().permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );
    for (inputs, side, why) in cases {
        let mut args = vec!["-arch=sm_90", "-dlto", "a.o", "-o", "app.cubin", side];
        args.extend(inputs);
        let o = link(d, &args, &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{side}: {err}");
        assert!(
            err.contains("was not written: ") && err.contains(why),
            "{side}: {err}"
        );
        assert_eq!(std::fs::read(d.join("opts")).unwrap(), opts, "{side}");
        assert_eq!(std::fs::read(d.join("libb.a")).unwrap(), lib, "{side}");
    }
}
