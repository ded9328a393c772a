//! The sm_100+ finalizer per unit (issue 37): a one-unit edit refinalizes that unit only
//! (the report's cache counters), a finalizer that crashes or hangs inside a per-unit job
//! leaves the link as it is without the finalizer, the daemon keeps one worker for its
//! links, a unit that needs no stand-in waits for no template, the worker's socket is in
//! a private folder, a first incremental link finalizes the whole program and leaves the
//! units to the daemon, and the rule and the per-unit jobs are proved against
//! whole-program jobs (`proof`).

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{cuda, nvlinkrs};

#[path = "finalize/proof.rs"]
mod proof;

/// Three units at `arch` that call into each other and read each other's variables,
/// each with a kernel that makes no call (which the finalizer changes) beside one that
/// does; `k1`'s body holds `step` (the edit).
fn sources(step: i32) -> [(&'static str, String); 3] {
    [
        (
            "u0",
            "extern __device__ int g1(int);\n__device__ int v0 = 5;\n\
             __device__ __noinline__ int g0(int x) { return x * 3 + v0; }\n\
             __global__ void k0(float* p, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] = p[i] * 2.f + 1.f; }\n\
             __global__ void c0(int* p) { p[threadIdx.x] = g1(p[threadIdx.x]); }\n"
                .to_string(),
        ),
        (
            "u1",
            format!(
                "extern __device__ int g2(int);\n\
                 __device__ __noinline__ int g1(int x) {{ return g2(x) + 7; }}\n\
                 __global__ void k1(int* p, int n) {{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] += {step}; }}\n"
            ),
        ),
        (
            "u2",
            "extern __device__ int v0;\nextern __device__ int g0(int);\n\
             __device__ __noinline__ int g2(int x) { return x ^ v0; }\n\
             __global__ void k2(const float* a, float* b, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) b[i] = a[i] * a[i]; }\n\
             __global__ void c2(int* p) { p[0] = g0(p[1]); }\n"
                .to_string(),
        ),
    ]
}

/// Writes and compiles the units (nvcc, `-rdc`) in `dir`; the cubins.
fn compile(dir: &Path, arch: &str, step: i32) -> Vec<String> {
    let mut out = Vec::new();
    for (name, text) in sources(step) {
        let cu = dir.join(format!("{name}.cu"));
        let cubin = dir.join(format!("{name}.cubin"));
        if std::fs::read_to_string(&cu).ok().as_deref() != Some(&text) || !cubin.exists() {
            std::fs::write(&cu, &text).unwrap();
            nvcc(&cu, &cubin, arch);
        }
        out.push(cubin.display().to_string());
    }
    out
}

/// `cu` compiled by nvcc (`-rdc`) to the cubin `cubin` at `arch`.
fn nvcc(cu: &Path, cubin: &Path, arch: &str) {
    let ok = Command::new(cuda().join("bin/nvcc"))
        .args(["-cubin", "-rdc=true", &format!("-arch={arch}")])
        .arg(cu)
        .arg("-o")
        .arg(cubin)
        .status()
        .unwrap()
        .success();
    assert!(ok, "nvcc {}", cu.display());
}

struct Linked {
    code: i32,
    stderr: String,
    output: Option<Vec<u8>>,
    report: serde_json::Value,
}

fn link(args: &[String], out: &Path, env: &[(&str, &Path)], extra_env: &[(&str, &str)]) -> Linked {
    let report = out.with_extension("json");
    let _ = std::fs::remove_file(out);
    let r = Command::new(nvlinkrs())
        .args(args)
        .arg("-o")
        .arg(out)
        .arg(format!("--report-json={}", report.display()))
        .envs(env.iter().map(|(k, v)| (*k, v.as_os_str())))
        .envs(extra_env.iter().copied())
        .output()
        .unwrap();
    Linked {
        code: r.status.code().unwrap_or(-1),
        stderr: String::from_utf8_lossy(&r.stderr).into_owned(),
        output: std::fs::read(out).ok(),
        report: std::fs::read_to_string(&report)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default(),
    }
}

fn nvlink(args: &[String], out: &Path) -> Vec<u8> {
    let ok = Command::new(cuda().join("bin/nvlink"))
        .args(args)
        .arg("-o")
        .arg(out)
        .status()
        .unwrap()
        .success();
    assert!(ok, "nvlink {args:?}");
    std::fs::read(out).unwrap()
}

/// (hits, misses) of a cache stage in a report.
fn stage(r: &serde_json::Value, name: &str) -> (u64, u64) {
    let s = &r["cache"]["stages"][name];
    (
        s["hits"].as_u64().unwrap_or(0),
        s["misses"].as_u64().unwrap_or(0),
    )
}

/// A one-unit edit, recompiled at the same path: the relink finalizes that unit alone
/// (the `finalize` stage: 2 hits, 1 miss; one job run), the others from the cache, and
/// both images are nvlink's, byte for byte, at sm_100 and sm_120 (was: the whole program
/// finalized again in one job, no per-unit cache). The shared tier carries the entries:
/// another edit linked with an empty local cache takes the two unchanged units' jobs
/// from it. One job at a time (`NVLINKRS_JOBS=1`) gives the same bytes.
#[test]
fn a_one_unit_edit_refinalizes_that_unit_only() {
    for arch in ["sm_100", "sm_120"] {
        let dir = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let tier = tempfile::tempdir().unwrap();
        let url = PathBuf::from(format!("file://{}", tier.path().display()));
        let env = [
            ("XDG_CACHE_HOME", cache.path()),
            ("NVLINKRS_REMOTE_CACHE", url.as_path()),
        ];
        let mut args = vec![format!("-arch={arch}")];
        args.extend(compile(dir.path(), arch, 1));
        let out = dir.path().join("out.cubin");
        let want = nvlink(&args, &dir.path().join("ref.cubin"));
        let cold = link(&args, &out, &env, &[]);
        assert_eq!((cold.code, cold.stderr.as_str()), (0, ""), "{arch}");
        assert!(
            cold.output.as_ref() == Some(&want),
            "{arch}: cold link not nvlink's image"
        );
        let f = &cold.report["finalize"];
        assert_eq!(
            (
                f["units"].as_u64(),
                f["jobs_run"].as_u64(),
                f["jobs_cached"].as_u64()
            ),
            (Some(3), Some(3), Some(0)),
            "{arch}: {f}"
        );
        assert_eq!(stage(&cold.report, "finalize"), (0, 3), "{arch}");
        assert_eq!(cold.report["cache"]["whole_link"], "miss");
        // u1 edited and recompiled where it was
        args.truncate(1);
        args.extend(compile(dir.path(), arch, 2));
        let want = nvlink(&args, &dir.path().join("ref.cubin"));
        let edit = link(&args, &out, &env, &[]);
        assert_eq!((edit.code, edit.stderr.as_str()), (0, ""), "{arch}");
        assert!(
            edit.output.as_ref() == Some(&want),
            "{arch}: relink not nvlink's image"
        );
        assert_eq!(edit.report["cache"]["whole_link"], "miss");
        assert_eq!(stage(&edit.report, "finalize"), (2, 1), "{arch}");
        let f = &edit.report["finalize"];
        assert_eq!(
            (
                f["units"].as_u64(),
                f["jobs_run"].as_u64(),
                f["jobs_cached"].as_u64()
            ),
            (Some(3), Some(1), Some(2)),
            "{arch}: {f}"
        );
        // (the stand-ins' templates came from the cache too)
        assert_eq!(stage(&edit.report, "finalize-standin").1, 0, "{arch}");
        // another edit, an empty local cache, the same shared tier
        args.truncate(1);
        args.extend(compile(dir.path(), arch, 3));
        let want = nvlink(&args, &dir.path().join("ref.cubin"));
        let fresh = tempfile::tempdir().unwrap();
        let env = [
            ("XDG_CACHE_HOME", fresh.path()),
            ("NVLINKRS_REMOTE_CACHE", url.as_path()),
        ];
        let shared = link(&args, &out, &env, &[]);
        assert_eq!((shared.code, shared.stderr.as_str()), (0, ""), "{arch}");
        assert!(
            shared.output.as_ref() == Some(&want),
            "{arch}: not nvlink's image"
        );
        assert_eq!(stage(&shared.report, "finalize"), (2, 1), "{arch}");
        let counts = &shared.report["cache"]["shared"]["counts"];
        assert!(counts["hits"].as_u64() >= Some(2), "{arch}: {counts}");
        // one job at a time, no cache: the same bytes
        let one = link(
            &[args.clone(), vec!["--no-cache".into()]].concat(),
            &out,
            &[],
            &[("NVLINKRS_JOBS", "1")],
        );
        assert!(
            one.output == shared.output,
            "{arch}: another image with one job at a time"
        );
    }
}

/// A unit that refers to nothing another input defines (many kernels of long math: the
/// largest job, started first) beside the three units that need stand-ins: its job starts
/// at once, beside the stand-ins' templates, not after them (was: every template made
/// first, each unit's job after; at sm_100 a Thrust/CUB program's cold link 0.75 times the
/// time, benches/results/finalize-cold.md); the image is nvlink's.
#[test]
fn a_unit_that_needs_no_stand_in_waits_for_no_template() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("skipped: one core, the jobs run one at a time");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["-arch=sm_100".to_string()];
    args.extend(compile(dir.path(), "sm_100", 1));
    let solo = dir.path().join("solo.cu");
    let kernels: String = (0..12)
        .map(|k| {
            format!(
                "__global__ void s{k}(float* p, int n) {{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i >= n) return; float x = p[i], a = 0.f;\n\
                 #pragma unroll\nfor (int j = 0; j < 24; ++j) {{ a += sinf(x * (j + {k})) * cosf(a + j); x = x * 0.99f + 0.01f * j; }} p[i] = a; }}\n"
            )
        })
        .collect();
    std::fs::write(&solo, kernels).unwrap();
    let cubin = dir.path().join("solo.cubin");
    nvcc(&solo, &cubin, "sm_100");
    args.push(cubin.display().to_string());
    let want = nvlink(&args, &dir.path().join("ref.cubin"));
    let trace = dir.path().join("trace.json");
    let out = dir.path().join("out.cubin");
    let cache = dir.path().join("cache");
    let linked = link(
        &[args, vec![format!("--time-trace={}", trace.display())]].concat(),
        &out,
        &[("XDG_CACHE_HOME", &cache)],
        &[],
    );
    assert_eq!((linked.code, linked.stderr.as_str()), (0, ""));
    assert!(linked.output == Some(want), "not nvlink's image");
    let f = &linked.report["finalize"];
    assert_eq!(
        (f["units"].as_u64(), f["jobs_run"].as_u64()),
        (Some(4), Some(4)),
        "{f}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let spans: Vec<(String, f64, f64)> = (json["traceEvents"].as_array().unwrap().iter())
        .filter(|e| e["ph"] == "X" && e["cat"] == "finalize")
        .map(|e| {
            let (ts, dur) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
            (e["name"].as_str().unwrap().to_string(), ts, ts + dur)
        })
        .collect();
    let templates_done = (spans.iter())
        .filter(|s| s.0.starts_with("libnvJitLink: the stand-ins' template"))
        .map(|s| s.2)
        .fold(0.0, f64::max);
    let solo_start = (spans.iter())
        .filter(|s| s.0.ends_with("solo.cubin' alone"))
        .map(|s| s.1)
        .fold(f64::MAX, f64::min);
    assert!(templates_done > 0.0, "no template made: {spans:?}");
    assert!(
        solo_start < templates_done,
        "the unit that needs no stand-in waited for the templates: {spans:?}"
    );
}

/// The worker's socket is in a private folder (0700) of its own in `TMPDIR`, named with
/// the link's process id (so that a later link reclaims one a killed link left), and gone
/// after the link (was made with the umask's mode, `nvlinkrs-finalizerXXXXXX`, never
/// reclaimed: an attacker's review).
#[test]
fn the_workers_socket_is_in_a_private_folder() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let mut args = vec!["-arch=sm_100".to_string()];
    args.extend(compile(dir.path(), "sm_100", 1));
    let mut child = Command::new(nvlinkrs())
        .args(&args)
        .args(["--no-cache", "-o"])
        .arg(dir.path().join("out.cubin"))
        .env("TMPDIR", &tmp)
        .spawn()
        .unwrap();
    let mut seen = std::collections::BTreeMap::new();
    while child.try_wait().unwrap().is_none() {
        for e in std::fs::read_dir(&tmp).unwrap().flatten() {
            if let Ok(m) = e.metadata() {
                seen.insert(e.file_name(), m.permissions().mode() & 0o777);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    assert!(child.wait().unwrap().success());
    let prefix = format!("nvlinkrs-finalizer-{}-", child.id());
    let folders: Vec<_> = (seen.iter())
        .filter(|(n, _)| n.to_string_lossy().starts_with(&prefix))
        .collect();
    assert_eq!(folders.len(), 1, "{seen:?}");
    assert_eq!(*folders[0].1, 0o700, "{seen:?}");
    // (but the stamp saying when this user's leftovers were last reclaimed)
    let left: Vec<_> = (std::fs::read_dir(&tmp).unwrap().flatten())
        .map(|e| e.file_name())
        .filter(|n| !n.to_string_lossy().starts_with("nvlinkrs-reclaimed-"))
        .collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
}

/// A toolkit whose libnvJitLink forwards to the real one but, in `nvJitLinkComplete` of
/// a job that is not `-r` (a unit's job, not a stand-in's template), aborts or waits for
/// ever as `NVLINKRS_TEST_FINALIZER_FAULT` says: a crash and a hang inside a per-unit job,
/// which no real input produces (a stand-in library, for that fault only).
fn faulty_toolkit(dir: &Path) {
    for d in ["bin", "include", "nvvm"] {
        std::os::unix::fs::symlink(cuda().join(d), dir.join(d)).unwrap();
    }
    std::fs::create_dir(dir.join("lib")).unwrap();
    let c = dir.join("wrap.c");
    std::fs::write(&c, WRAPPER).unwrap();
    let ok = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(dir.join("lib/libnvJitLink.so.13"))
        .arg(&c)
        .arg("-ldl")
        .status()
        .unwrap()
        .success();
    assert!(ok, "cc wrap.c");
}

const WRAPPER: &str = r#"#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static void *real(const char *name) {
  static void *h;
  if (!h) h = dlopen(getenv("NVLINKRS_TEST_REAL_NVJITLINK"), RTLD_NOW);
  return h ? dlsym(h, name) : 0;
}
static __thread int relocatable;
int __nvJitLinkCreate_13_0(void **h, unsigned n, const char **o) {
  relocatable = 0;
  for (unsigned i = 0; i < n; i++) if (!strcmp(o[i], "-r")) relocatable = 1;
  return ((int (*)(void **, unsigned, const char **))real("__nvJitLinkCreate_13_0"))(h, n, o);
}
int __nvJitLinkDestroy_13_0(void **h) { return ((int (*)(void **))real("__nvJitLinkDestroy_13_0"))(h); }
int __nvJitLinkAddData_13_0(void *h, int k, const void *d, size_t n, const char *name) {
  return ((int (*)(void *, int, const void *, size_t, const char *))real("__nvJitLinkAddData_13_0"))(h, k, d, n, name);
}
int __nvJitLinkComplete_13_0(void *h) {
  const char *m = getenv("NVLINKRS_TEST_FINALIZER_FAULT");
  if (!relocatable && m && !strcmp(m, "abort")) abort();
  if (!relocatable && m && !strcmp(m, "hang")) for (;;) pause();
  return ((int (*)(void *))real("__nvJitLinkComplete_13_0"))(h);
}
int __nvJitLinkGetLinkedCubinSize_13_0(void *h, size_t *n) {
  return ((int (*)(void *, size_t *))real("__nvJitLinkGetLinkedCubinSize_13_0"))(h, n);
}
int __nvJitLinkGetLinkedCubin_13_0(void *h, void *b) {
  return ((int (*)(void *, void *))real("__nvJitLinkGetLinkedCubin_13_0"))(h, b);
}
"#;

/// A finalizer that aborts, or hangs (no CPU time for 10 s), in a unit's job (the
/// stand-ins' templates made): the link goes on without the finalizer, with the warning
/// of every child of a link (`crashed (SIGABRT)`, `used no CPU time for 10 s and was
/// stopped`: `crate::child`'s words), exit 0, the image of the link without the
/// finalizer, and the whole link is not kept by the cache (the next link runs the
/// finalizer again).
#[test]
fn a_crash_or_hang_in_a_unit_job_falls_back() {
    let kit = tempfile::tempdir().unwrap();
    faulty_toolkit(kit.path());
    let lib = kit.path().join("lib/libnvJitLink.so.13");
    let real = cuda().join("lib/libnvJitLink.so.13");
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["-arch=sm_100".to_string()];
    args.extend(compile(dir.path(), "sm_100", 1));
    args.push(format!("--cuda-path={}", kit.path().display()));
    let out = dir.path().join("out.cubin");
    let cache = tempfile::tempdir().unwrap();
    let env = [
        ("XDG_CACHE_HOME", cache.path()),
        ("NVLINKRS_TEST_REAL_NVJITLINK", real.as_path()),
    ];
    let plain = link(&args, &out, &env, &[("NVLINKRS_FINALIZER", "off")]);
    assert_eq!((plain.code, plain.stderr.as_str()), (0, ""));
    let fine = link(&args, &out, &env, &[]);
    assert_eq!((fine.code, fine.stderr.as_str()), (0, ""));
    assert!(
        fine.output != plain.output,
        "the finalizer changes these units"
    );
    for (fault, how) in [
        ("abort", "crashed (SIGABRT)"),
        ("hang", "used no CPU time for 10 s and was stopped"),
    ] {
        // (a cache of its own: the good link's jobs are in the other)
        let cache = tempfile::tempdir().unwrap();
        let env = [
            ("XDG_CACHE_HOME", cache.path()),
            ("NVLINKRS_TEST_REAL_NVJITLINK", real.as_path()),
        ];
        for _ in 0..2 {
            let got = link(
                &args,
                &out,
                &env,
                &[("NVLINKRS_TEST_FINALIZER_FAULT", fault)],
            );
            assert_eq!(
                (got.code, got.stderr.as_str()),
                (
                    0,
                    format!(
                        "nvlinkrs warning : NVLINKRS_FINALIZER: libnvJitLink '{}' {how}; linked without the finalizer\n",
                        lib.display()
                    )
                    .as_str()
                ),
                "{fault}"
            );
            assert!(
                got.output == plain.output,
                "{fault}: not the image without the finalizer"
            );
            assert_eq!(got.report["cache"]["whole_link"], "miss", "{fault}");
            assert_eq!(got.report["finalize"]["fell_back"], true, "{fault}");
        }
    }
}

/// Through the daemon, the finalizer's worker is the daemon's, the same process for
/// every link (the library loaded once): two links of the program without the cache,
/// both with the worker `daemon` of one pid, both nvlink's image.
#[test]
fn the_daemon_keeps_one_finalizer_worker() {
    let runtime = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["-arch=sm_100".to_string()];
    args.extend(compile(dir.path(), "sm_100", 1));
    let want = nvlink(&args, &dir.path().join("ref.cubin"));
    args.push("--no-cache".into());
    let env = [("XDG_RUNTIME_DIR", runtime.path())];
    let daemon = [("NVLINKRS_DAEMON", "only"), ("NVLINKRS_DAEMON_IDLE", "60")];
    let mut pids = Vec::new();
    for n in 0..2 {
        let out = dir.path().join(format!("out{n}.cubin"));
        let got = link(&args, &out, &env, &daemon);
        assert_eq!((got.code, got.stderr.as_str()), (0, ""));
        assert!(
            got.output.as_ref() == Some(&want),
            "link {n}: not nvlink's image"
        );
        assert_eq!(got.report["daemon"], true);
        let f = &got.report["finalize"];
        assert_eq!(
            (f["worker"].as_str(), f["jobs_run"].as_u64()),
            (Some("daemon"), Some(3))
        );
        pids.push(f["worker_pid"].as_u64().unwrap());
    }
    assert_eq!(pids[0], pids[1], "one worker for both links");
    let daemon_pid = daemon_pid(runtime.path());
    let stop = Command::new(nvlinkrs())
        .args(["daemon", "stop"])
        .env("XDG_RUNTIME_DIR", runtime.path())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&stop.stdout), "stopped\n");
    // `stopped` once it has ended, and its worker with it (`stop` waits for the pid the
    // kernel gave for its connection; a new user saw it said while the daemon lived on)
    assert!(!runs(daemon_pid), "the daemon runs after 'stopped'");
    let gone = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        !runs(pids[0] as u32)
    });
    assert!(gone, "the worker outlived the daemon");
}

/// The pid `daemon status` gives for the daemon of runtime folder `runtime`.
fn daemon_pid(runtime: &Path) -> u32 {
    let status = Command::new(nvlinkrs())
        .args(["daemon", "status"])
        .env("XDG_RUNTIME_DIR", runtime)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout).into_owned();
    (text.lines().find_map(|l| l.strip_prefix("pid ")))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in: {text}"))
}

/// Whether process `pid` runs (a zombie nobody reaped yet has ended).
fn runs(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
    })
}

/// The finalizer workers' sockets in a daemon folder.
fn worker_sockets(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.retain(|n| n.starts_with("finalizer-") && n.ends_with(".sock"));
    names
}

/// A daemon killed with its worker running leaves the worker's socket in its folder
/// (1241ad3 kept it for good); the next daemon removes it as it starts.
#[test]
fn a_killed_daemons_worker_socket_is_removed_by_the_next_daemon() {
    let runtime = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["-arch=sm_100".to_string(), "--no-cache".to_string()];
    args.extend(compile(dir.path(), "sm_100", 1));
    let env = [("XDG_RUNTIME_DIR", runtime.path())];
    let daemon = [("NVLINKRS_DAEMON", "only"), ("NVLINKRS_DAEMON_IDLE", "60")];
    let got = link(&args, &dir.path().join("out.cubin"), &env, &daemon);
    assert_eq!(
        (got.code, got.report["finalize"]["worker"].as_str()),
        (0, Some("daemon"))
    );
    let folder = runtime.path().join("nvlinkrs");
    let left = worker_sockets(&folder);
    assert_eq!(left.len(), 1, "{left:?}");
    let pid = daemon_pid(runtime.path());
    // SAFETY: a signal to the daemon this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    assert!((0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(20));
        !runs(pid)
    }));
    assert_eq!(
        worker_sockets(&folder),
        left,
        "the killed daemon's socket stays"
    );
    let start = Command::new(nvlinkrs())
        .args(["daemon", "start"])
        .env("XDG_RUNTIME_DIR", runtime.path())
        .env("NVLINKRS_DAEMON_IDLE", "60")
        .output()
        .unwrap();
    assert!(start.status.success());
    assert_eq!(worker_sockets(&folder), Vec::<String>::new());
    let stop = Command::new(nvlinkrs())
        .args(["daemon", "stop"])
        .env("XDG_RUNTIME_DIR", runtime.path())
        .output()
        .unwrap();
    assert!(stop.status.success());
}

/// An incremental link (`--incremental`) whose cache has none of the units' jobs (its
/// first) finalizes the whole program in one job, as nvlink does (was: a job per unit,
/// which on two cores cost the cold link 1.39 times nvlink's time at sm_100,
/// benches/results/finalize-cold.md), and the daemon builds the units' jobs in the
/// background; the next link, after a one-unit edit, runs that unit's job alone (2 hits,
/// 1 miss) in the daemon's worker (the library loaded once for the loop). Every image is
/// nvlink's.
#[test]
fn a_first_incremental_link_finalizes_the_whole_program_and_the_daemon_the_units() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let env = [
        ("XDG_CACHE_HOME", cache.path()),
        ("XDG_RUNTIME_DIR", runtime.path()),
    ];
    let daemon = |what: &str| {
        let o = Command::new(nvlinkrs())
            .args(["daemon", what])
            .env("XDG_RUNTIME_DIR", runtime.path())
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let mut args = vec!["-arch=sm_100".to_string()];
    args.extend(compile(dir.path(), "sm_100", 1));
    let want = nvlink(&args, &dir.path().join("ref.cubin"));
    args.push("--incremental".into());
    let out = dir.path().join("out.cubin");
    let first = link(&args, &out, &env, &[("NVLINKRS_DAEMON_IDLE", "120")]);
    assert_eq!((first.code, first.stderr.as_str()), (0, ""));
    assert!(first.output.as_ref() == Some(&want), "not nvlink's image");
    let f = &first.report["finalize"];
    assert_eq!(
        (
            f["units"].as_u64(),
            f["jobs_run"].as_u64(),
            f["units_deferred"].as_u64()
        ),
        (Some(3), Some(1), Some(3)),
        "{f}"
    );
    assert_eq!(stage(&first.report, "finalize"), (0, 1));
    common::wait_background_idle(runtime.path());
    // u1 edited and recompiled where it was: its job alone
    args.truncate(1);
    args.extend(compile(dir.path(), "sm_100", 2));
    let want = nvlink(&args, &dir.path().join("ref.cubin"));
    args.extend(["--incremental".into(), "-v".into()]);
    let edit = link(&args, &out, &env, &[]);
    assert_eq!(edit.code, 0, "{}", edit.stderr);
    assert!(!edit.stderr.contains("background"), "{}", edit.stderr);
    assert_eq!(stage(&edit.report, "finalize"), (2, 1));
    // (its job run by the daemon's worker, which the background build started)
    let f = &edit.report["finalize"];
    assert_eq!(
        (
            f["jobs_run"].as_u64(),
            f["units_deferred"].as_u64(),
            f["worker"].as_str()
        ),
        (Some(1), Some(0), Some("daemon")),
        "{f}"
    );
    args.pop();
    let again = link(&args, &out, &env, &[]);
    assert!(again.output.as_ref() == Some(&want), "not nvlink's image");
    daemon("stop");
}

/// A daemon that is stopped (SIGSTOP) holds an incremental link for seconds, not for
/// ever: the link asks it for its worker and for the background build, each answer
/// awaited 5 s, then starts its own worker; the image is nvlink's (was: the link hung in
/// the background build's request, an attacker's review).
#[test]
fn a_stopped_daemon_does_not_hold_an_incremental_link() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let daemon = |what: &str| {
        Command::new(nvlinkrs())
            .args(["daemon", what])
            .env("XDG_RUNTIME_DIR", runtime.path())
            .output()
            .unwrap()
    };
    assert!(daemon("start").status.success());
    let pid_file = runtime.path().join("nvlinkrs/daemon.pid");
    let pid: i32 = (std::fs::read_to_string(pid_file).unwrap().trim().parse()).unwrap();
    let mut args = vec!["-arch=sm_100".to_string()];
    args.extend(compile(dir.path(), "sm_100", 1));
    let want = nvlink(&args, &dir.path().join("ref.cubin"));
    args.push("--incremental".into());
    // SAFETY: kill(2) on the daemon this test started
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let started = std::time::Instant::now();
    let mut child = Command::new(nvlinkrs())
        .args(&args)
        .arg("-o")
        .arg(dir.path().join("out.cubin"))
        .env("XDG_CACHE_HOME", cache.path())
        .env("XDG_RUNTIME_DIR", runtime.path())
        .spawn()
        .unwrap();
    let ended = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > std::time::Duration::from_secs(90) {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    if ended.is_none() {
        let _ = child.kill();
    }
    // SAFETY: as above
    unsafe { libc::kill(pid, libc::SIGCONT) };
    daemon("stop");
    assert!(ended.is_some_and(|s| s.success()), "the link did not end");
    let out = std::fs::read(dir.path().join("out.cubin")).unwrap();
    assert!(out == want, "not nvlink's image");
}
