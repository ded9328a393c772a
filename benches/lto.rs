//! Benchmark (not a test): whole-program LTO links, nvlinkrs against the real nvlink on
//! the same command lines in the same run, from the smallest fixture to the largest.
//! Reports wall time (best of N) and peak RSS (the child's maximum resident set, from
//! `wait4`) and their ratios; checks the outputs are byte-identical on the way. Writes
//! `benches/results/lto.md`.
//!
//! Run with `scripts/bench.sh` (or `cargo bench --bench lto` after `scripts/test.sh`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn fixtures() -> PathBuf {
    std::env::var_os("NVLINKRS_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fixtures"))
}

/// Runs the command; returns wall time and the child's peak RSS in KiB.
fn measure(cmd: &mut Command) -> (Duration, u64) {
    use std::os::unix::process::ExitStatusExt;
    let t = Instant::now();
    let child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value to be filled in; `pid` is our child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = t.elapsed();
    assert_eq!(r, pid, "wait4");
    let st = std::process::ExitStatus::from_raw(status);
    assert!(st.success(), "{cmd:?} failed: {st}");
    std::mem::forget(child);
    (wall, usage.ru_maxrss as u64)
}

fn main() {
    let fx = fixtures();
    let cu = nvlinkrs::toolkit::Toolkit::discover(None, None)
        .expect("a CUDA toolkit (scripts/setup.sh; CUDA_HOME)")
        .root;
    let nvlinkrs = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/nvlinkrs");
    assert!(
        nvlinkrs.exists(),
        "build the release binary first (scripts/bench.sh does): {}",
        nvlinkrs.display()
    );
    // The same linker built without the `llvm` feature (scripts/bench.sh builds it): shows
    // what loading libLLVM at start-up costs.
    let lean = std::env::var_os("NVLINKRS_LEAN_BIN")
        .map(PathBuf::from)
        .filter(|p| p.exists());
    let out = tempfile::tempdir().unwrap();
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let sets: &[(&str, &[&str])] = &[
        ("2 small TUs (.ltoir)", &["saxpy.ltoir", "scale.ltoir"]),
        (
            "3 TUs, host objects",
            &["main_dlto.o", "saxpy_dlto.o", "scale_dlto.o"],
        ),
        ("archive + host object", &["main_dlto.o", "libsaxpy_lto.a"]),
        ("1 large TU (8 unrolled kernels)", &["unrolled_dlto.o"]),
    ];
    let mut report = String::from("# LTO link benchmark\n\n");
    report += &format!(
        "Whole-program `-dlto` links for sm_90, nvlinkrs (release build) and nvlink 13.5 on the same \
         command line, alternating, best of {runs} runs each; peak RSS is the largest of the runs. \
         Machine: {} cores. Outputs are checked byte-identical.\n\n",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    report += "| link | input bytes | nvlink wall | nvlinkrs wall | wall ratio | nvlink peak RSS | nvlinkrs peak RSS | RSS ratio | without LLVM: wall ratio | RSS ratio |\n";
    report += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    for (name, inputs) in sets {
        let size: u64 = inputs
            .iter()
            .map(|i| {
                std::fs::metadata(fx.join(i))
                    .map(|m| m.len())
                    .expect("fixtures: run scripts/test.sh first")
            })
            .sum();
        let args = |o: &Path| -> Vec<String> {
            let mut a = vec![
                "-m64".into(),
                "--arch=sm_90".into(),
                format!("-L{}", cu.join("lib").display()),
                "-dlto".into(),
                format!("-nvvmpath={}", cu.join("nvvm").display()),
            ];
            a.extend(inputs.iter().map(|i| fx.join(i).display().to_string()));
            a.extend(["-lcudadevrt".into(), "-o".into(), o.display().to_string()]);
            a
        };
        let (a_out, b_out) = (
            out.path().join("nvlink.cubin"),
            out.path().join("nvlinkrs.cubin"),
        );
        let (mut wa, mut wb, mut wc) = (Duration::MAX, Duration::MAX, Duration::MAX);
        let (mut ra, mut rb, mut rc) = (0, 0, 0);
        for _ in 0..runs {
            let (w, r) = measure(Command::new(cu.join("bin/nvlink")).args(args(&a_out)));
            wa = wa.min(w);
            ra = ra.max(r);
            let (w, r) = measure(
                Command::new(&nvlinkrs)
                    .env("CUDA_HOME", &cu)
                    .env("NVLINKRS_CACHE", "0")
                    .args(args(&b_out)),
            );
            wb = wb.min(w);
            rb = rb.max(r);
            if let Some(lean) = &lean {
                let (w, r) = measure(
                    Command::new(lean)
                        .env("CUDA_HOME", &cu)
                        .env("NVLINKRS_CACHE", "0")
                        .args(args(&b_out)),
                );
                wc = wc.min(w);
                rc = rc.max(r);
            }
        }
        assert_eq!(
            std::fs::read(&a_out).unwrap(),
            std::fs::read(&b_out).unwrap(),
            "{name}: outputs differ"
        );
        let lean_cols = if lean.is_some() {
            format!(
                "{:.2}× | {:.2}×",
                wc.as_secs_f64() / wa.as_secs_f64(),
                rc as f64 / ra as f64
            )
        } else {
            "- | -".into()
        };
        let line = format!(
            "| {name} | {size} | {:.1} ms | {:.1} ms | {:.2}× | {:.1} MiB | {:.1} MiB | {:.2}× | {lean_cols} |\n",
            wa.as_secs_f64() * 1e3,
            wb.as_secs_f64() * 1e3,
            wb.as_secs_f64() / wa.as_secs_f64(),
            ra as f64 / 1024.0,
            rb as f64 / 1024.0,
            rb as f64 / ra as f64
        );
        print!("{line}");
        report += &line;
    }
    report += "\nRatios are nvlinkrs / nvlink: below 1.00× nvlinkrs is faster or smaller.\n";
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/results");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("lto.md"), report).unwrap();
}
