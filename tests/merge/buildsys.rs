//! Real build systems through `nvlinkrs shim`: the project of `tests/fixtures/buildsys`
//! (a static library of device code with cross-file calls; separable compilation, device
//! LTO, two architectures, a whole-program target) built from scratch by CMake with Ninja,
//! by Meson and by `make -j`, once with the real toolkit and once through the overlay.
//! Every device image in every executable (`cuobjdump -xelf all`) must be the real build's:
//! byte-identical, or equivalent per `nvlinkrs compare` where the test says why. CMake,
//! Ninja and Meson are the ones `scripts/setup.sh` installs into the toolchain's venv.

use std::path::{Path, PathBuf};
use std::process::Command;

use nvlinkrs::elf::equiv;

use super::{cuda, nvlinkrs, shim};

pub(super) fn source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/buildsys")
}

/// `PATH` with the toolchain venv's `bin/` (cmake, ninja, meson; `CUDA_HOME` is its
/// `cuda` link, scripts/setup.sh) first, when there is one.
pub(super) fn tools_path() -> String {
    let path = std::env::var("PATH").unwrap_or_default();
    match cuda().parent().map(|tc| tc.join("venv/bin")) {
        Some(venv) if venv.join("cmake").is_file() => format!("{}:{path}", venv.display()),
        _ => path,
    }
}

/// Runs a build step (with `tools_path` as `PATH` unless the command has its own); panics
/// with its output when it fails. Returns stdout and stderr.
pub(super) fn step(cmd: &mut Command, what: &str) -> String {
    if !cmd.get_envs().any(|(k, _)| k == "PATH") {
        cmd.env("PATH", tools_path());
    }
    let r = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run it ({e}); scripts/setup.sh installs it"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&r.stdout),
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(r.status.success(), "{what}: {text}");
    text
}

#[derive(Clone, Copy, Debug)]
enum System {
    CMake,
    Meson,
    Make,
}

/// Builds the project with `system`, nvcc from the toolkit at `root`, in `dir` (with
/// `cache` as nvlinkrs' cache directory); the executables built, by name.
fn build(system: System, root: &Path, dir: &Path, cache: Option<&Path>) -> Vec<&'static str> {
    let nvcc = root.join("bin/nvcc");
    let tool = |name: &str| {
        let mut c = Command::new(name);
        if let Some(cache) = cache {
            c.env("NVLINKRS_CACHE_DIR", cache);
        }
        c
    };
    match system {
        System::CMake => {
            step(
                tool("cmake")
                    .arg("-S")
                    .arg(source())
                    .arg("-B")
                    .arg(dir)
                    .args(["-G", "Ninja"])
                    .arg(format!("-DCMAKE_CUDA_COMPILER={}", nvcc.display())),
                "cmake configure",
            );
            step(tool("cmake").arg("--build").arg(dir), "cmake --build");
            vec!["app", "app_lto", "app_multi", "whole"]
        }
        System::Meson => {
            // the overlay's own native file; for the toolkit, one written the same way
            let native = root.join(nvlinkrs::shim::MESON_NATIVE);
            let native = if native.is_file() {
                native
            } else {
                let n = dir.with_extension("ini");
                std::fs::write(&n, format!("[binaries]\ncuda = '{}'\n", nvcc.display())).unwrap();
                n
            };
            step(
                tool("meson")
                    .arg("setup")
                    .arg("--native-file")
                    .arg(&native)
                    .arg(dir)
                    .arg(source()),
                "meson setup",
            );
            step(tool("ninja").arg("-C").arg(dir), "ninja");
            vec!["app", "whole"]
        }
        System::Make => {
            std::fs::create_dir_all(dir).unwrap();
            let mut make = tool("make");
            make.current_dir(dir)
                .args(["-j4", "-f"])
                .arg(source().join("Makefile"))
                .arg(format!("NVCC={}", nvcc.display()));
            if cache.is_some() {
                // nvlinkrs' report says whether it took make's jobserver
                make.arg("DLINKFLAGS=-Xnvlink --report-json=dlink.json");
            }
            let out = step(&mut make, "make -j4");
            assert!(!out.contains("jobserver unavailable"), "{out}");
            if cache.is_some() {
                let report = std::fs::read_to_string(dir.join("dlink.json")).unwrap();
                let report: serde_json::Value = serde_json::from_str(&report).unwrap();
                assert_eq!(
                    report["jobserver"],
                    serde_json::Value::Bool(true),
                    "nvlinkrs under make -j4 (through nvcc) took make's jobserver"
                );
            }
            vec!["app"]
        }
    }
}

/// The device images of an executable, as `cuobjdump -xelf all` names them.
pub(super) fn images(exe: &Path, dir: &Path) -> Vec<(String, Vec<u8>)> {
    std::fs::create_dir_all(dir).unwrap();
    let r = Command::new(cuda().join("bin/cuobjdump"))
        .current_dir(dir)
        .args(["-xelf", "all"])
        .arg(exe)
        .output()
        .unwrap();
    assert!(
        r.status.success(),
        "cuobjdump {}: {}",
        exe.display(),
        String::from_utf8_lossy(&r.stderr)
    );
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

/// `bytes` with nvcc's temporary file names (`tmpxft_` and the process and counter in
/// 17 hex digits and `_`) masked.
pub(super) fn mask_temporary_names(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let mut at = 0;
    while let Some(i) = out[at..].windows(7).position(|w| w == b"tmpxft_") {
        let start = at + i + 7;
        let end = (start + 17).min(out.len());
        out[start..end].fill(b'X');
        at = end;
    }
    out
}

/// Builds with the real toolkit and through the overlay; compares every image. Returns
/// (images, byte-identical ones).
fn same_images(system: System) -> (usize, usize) {
    let tmp = tempfile::tempdir().unwrap();
    let overlay = shim(&tmp.path().join("overlay"));
    let real = cuda();
    let cache = tmp.path().join("cache");
    let ours_dir = tmp.path().join("ours");
    let theirs_dir = tmp.path().join("theirs");
    // both builds in the same directory (debug info and nvcc's names for embedded PTX
    // record it), moved aside after
    let build_dir = tmp.path().join("build");
    let exes = build(system, &real, &build_dir, None);
    std::fs::rename(&build_dir, &theirs_dir).unwrap();
    // nvlinkrs records each link it runs in the cache: proof that nvcc ran it
    build(system, &overlay, &build_dir, Some(&cache));
    std::fs::rename(&build_dir, &ours_dir).unwrap();
    let stats = step(
        Command::new(nvlinkrs())
            .args(["cache", "stats", "--cache-dir"])
            .arg(&cache),
        "cache stats",
    );
    assert!(
        !stats.contains("\nentries 0\n"),
        "{system:?}: nvcc through the overlay ran nvlinkrs: {stats}"
    );
    let (mut total, mut identical) = (0, 0);
    for exe in exes {
        let theirs = images(
            &theirs_dir.join(exe),
            &tmp.path().join(format!("x_theirs_{exe}")),
        );
        let ours = images(
            &ours_dir.join(exe),
            &tmp.path().join(format!("x_ours_{exe}")),
        );
        let names = |v: &[(String, Vec<u8>)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        assert_eq!(names(&ours), names(&theirs), "{system:?} {exe}: the images");
        for ((name, t), (_, o)) in theirs.iter().zip(&ours) {
            total += 1;
            if t == o {
                identical += 1;
                continue;
            }
            assert!(
                exe != "app_lto",
                "{system:?} {exe} {name}: an LTO link's image is byte-identical to nvlink's"
            );
            // (a debug build's notes name the temporary files of nvcc's ptxas runs, which
            // differ between two builds with nvlink as well)
            let d = equiv::compare(&mask_temporary_names(t), &mask_temporary_names(o))
                .unwrap()
                .differences;
            assert!(d.is_empty(), "{system:?} {exe} {name}: {d:?}");
        }
    }
    (total, identical)
}

#[test]
fn cmake_ninja_build() {
    let (total, identical) = same_images(System::CMake);
    eprintln!("cmake: {identical} of {total} images byte-identical");
}

#[test]
fn meson_build() {
    let (total, identical) = same_images(System::Meson);
    eprintln!("meson: {identical} of {total} images byte-identical");
}

#[test]
fn make_jobs_build() {
    let (total, identical) = same_images(System::Make);
    eprintln!("make: {identical} of {total} images byte-identical");
}
