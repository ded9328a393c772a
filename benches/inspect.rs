//! Benchmark (not a test): `inspect` throughput in MB/s of input, on a large set of
//! inputs built from the test fixtures, and `cuobjdump -all -lelf -lptx` on the same
//! files for a ratio from the same run. Writes `benches/results/inspect.md`.
//!
//! Run with `cargo bench --bench inspect` after `scripts/test.sh` built the fixtures.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn fixtures() -> PathBuf {
    std::env::var_os("NVLINKRS_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fixtures"))
}

/// Writes `n` files, each `reps` copies of `src` back to back (fatbins may be
/// concatenated; each copy is a complete container).
fn make_set(dir: &Path, name: &str, src: &[u8], reps: usize, n: usize) -> Vec<PathBuf> {
    let mut one = Vec::with_capacity(src.len() * reps);
    for _ in 0..reps {
        one.extend_from_slice(src);
        one.resize(one.len().next_multiple_of(8), 0);
    }
    (0..n)
        .map(|i| {
            let p = dir.join(format!("{name}{i}.fatbin"));
            std::fs::write(&p, &one).unwrap();
            p
        })
        .collect()
}

fn best_of<F: FnMut()>(runs: usize, mut f: F) -> Duration {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap()
}

fn main() {
    let fx = fixtures();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-inputs");
    std::fs::create_dir_all(&dir).unwrap();
    let cu = nvlinkrs::toolkit::Toolkit::discover(None, None).ok();
    let plain =
        std::fs::read(fx.join("plain.fatbin")).expect("fixtures: run scripts/test.sh first");
    let zstd = std::fs::read(fx.join("zstd.fatbin")).unwrap();
    let large = std::fs::read(fx.join("unrolled.fatbin")).unwrap();
    let mut report = String::from("# inspect benchmark\n\n");
    report += &format!(
        "Machine: {} cores. Best of 5 runs; page cache warm.\n\n",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    report += "| input set | files | MB | nvlinkrs inspect --json | MB/s | cuobjdump -all -lelf -lptx | ratio (cuobjdump / nvlinkrs) |\n|---|---|---|---|---|---|---|\n";
    for (label, src, reps, n) in [
        ("large uncompressed members (1.1 MB cubin)", &large, 8, 64),
        (
            "small uncompressed members (7.7 KB cubin + PTX)",
            &plain,
            800,
            64,
        ),
        ("zstd-compressed members", &zstd, 300, 16),
    ] {
        let files = make_set(
            &dir,
            &label.split(' ').take(2).collect::<String>(),
            src,
            reps,
            n,
        );
        let bytes: u64 = files
            .iter()
            .map(|f| std::fs::metadata(f).unwrap().len())
            .sum();
        let mb = bytes as f64 / 1e6;
        let ours = best_of(5, || {
            let trees = nvlinkrs::input::load(&files, nvlinkrs::input::Mode::Inspect).unwrap();
            let j = nvlinkrs::inspect::render_json(&trees).unwrap();
            std::hint::black_box(j);
        });
        let theirs = cu.as_ref().map(|tk| {
            best_of(3, || {
                for f in &files {
                    let o = Command::new(tk.root.join("bin/cuobjdump"))
                        .args(["-all", "-lelf", "-lptx"])
                        .arg(f)
                        .output()
                        .unwrap();
                    assert!(o.status.success());
                }
            })
        });
        let line = format!(
            "| {label} | {n} | {mb:.0} | {:.3} s | {:.0} | {} | {} |\n",
            ours.as_secs_f64(),
            mb / ours.as_secs_f64(),
            theirs
                .map(|t| format!("{:.3} s", t.as_secs_f64()))
                .unwrap_or_else(|| "-".into()),
            theirs
                .map(|t| format!("{:.1}x", t.as_secs_f64() / ours.as_secs_f64()))
                .unwrap_or_else(|| "-".into()),
        );
        print!("{line}");
        report += &line;
        for f in files {
            let _ = std::fs::remove_file(f);
        }
    }
    report += "\nBoth tools read every container of these files (each file is many complete fatbin\ncontainers back to back). cuobjdump runs once per file, so its column includes process start-up.\n";
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/results/inspect.md");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    std::fs::write(&out, report).unwrap();
    println!("wrote {}", out.display());
}
