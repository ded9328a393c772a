//! A hostile machine, as the attacker review of 2026-12-01 found it: each test replays one
//! of its reproducers with the real tools and compares with nvlink. An endless device as an
//! input or an options file (read to the end of memory), a `TMPDIR` that cannot be written
//! (every uncached `-dlto` or PTX link failed where nvlink needs no temporary file), and a
//! link run as root with a user's `HOME` (the user's `~/.cache` became root's). (An input
//! cut short while the link reads it, which was a SIGBUS without a word: `input::sigbus`'s
//! and `input::opened`'s unit tests.)

use std::path::Path;
use std::process::{Command, Output};

mod common;
use common::{cuda, fixtures, nvlinkrs};

/// `tool args...` in `dir` with `env` (an empty value: the variable unset), stopped after
/// 60 s (an endless read, a wait).
fn run(tool: &Path, args: &[&str], dir: &Path, env: &[(&str, &str)]) -> Output {
    let mut c = Command::new("timeout");
    c.arg("60").arg(tool).args(args).current_dir(dir);
    for (k, v) in env {
        match v.is_empty() {
            true => c.env_remove(k),
            false => c.env(k, v),
        };
    }
    c.output().unwrap()
}

/// `ours` exited 0, and its image (`r.cubin` in `d`) is nvlink's (`n.cubin`).
fn linked_as_nvlink(ours: &Output, d: &Path) {
    let err = String::from_utf8_lossy(&ours.stderr);
    assert_eq!(ours.status.code(), Some(0), "{err}");
    let image = |n: &str| std::fs::read(d.join(n)).unwrap();
    assert_eq!(image("n.cubin"), image("r.cubin"));
}

fn nvlink() -> std::path::PathBuf {
    cuda().join("bin/nvlink")
}

/// `/dev/zero` as an input is empty, as nvlink reads it (nvlinkrs read it until memory
/// ran out); as an options file it is refused, where nvlink reads it for ever.
#[test]
fn an_endless_device_is_no_endless_input() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (saxpy, scale) = (fixtures().join("saxpy_dc.o"), fixtures().join("scale_dc.o"));
    let (obj, other) = (saxpy.to_str().unwrap(), scale.to_str().unwrap());
    let args = |out: &'static str| ["-arch=sm_90", obj, other, "/dev/zero", "-o", out];
    let theirs = run(&nvlink(), &args("n.cubin"), d, &[]);
    let ours = run(&nvlinkrs(), &args("r.cubin"), d, &[("NVLINKRS_CACHE", "0")]);
    assert_eq!(theirs.status.code(), Some(0));
    linked_as_nvlink(&ours, d);
    let optf = [
        "-arch=sm_90",
        "-optf",
        "/dev/zero",
        obj,
        other,
        "-o",
        "o.cubin",
    ];
    let ours = run(&nvlinkrs(), &optf, d, &[]);
    let err = String::from_utf8_lossy(&ours.stderr);
    assert_eq!(ours.status.code(), Some(1), "{err}");
    assert!(
        err.contains("Could not open options file '/dev/zero'") && err.contains("more than"),
        "{err}"
    );
}

/// `TMPDIR` missing, a file, or a folder this user cannot write: a link that runs ptxas
/// (a PTX input) or libNVVM (`-dlto`) makes its private folder in `/tmp` instead, and
/// writes nvlink's image.
#[test]
fn a_temporary_folder_that_cannot_be_used_is_passed_over() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = d.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let fx = fixtures();
    let (ptx, cubin) = (fx.join("saxpy.ptx"), fx.join("scale.cubin"));
    let nvvm = format!("-nvvmpath={}", cuda().join("nvvm").display());
    let lto = [fx.join("saxpy_dlto.o"), fx.join("scale_dlto.o")];
    let devrt = format!("-L{}", cuda().join("lib").display());
    let links: Vec<(&str, Vec<String>)> = vec![
        (
            "ptx",
            vec![
                "-arch=sm_90".into(),
                ptx.display().to_string(),
                cubin.display().to_string(),
            ],
        ),
        (
            "dlto",
            vec![
                "-arch=sm_90".into(),
                "-dlto".into(),
                nvvm,
                lto[0].display().to_string(),
                lto[1].display().to_string(),
                devrt,
                "-lcudadevrt".into(),
            ],
        ),
    ];
    for (name, args) in &links {
        let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
        let theirs = run(&nvlink(), &[&a[..], &["-o", "n.cubin"]].concat(), d, &[]);
        assert_eq!(theirs.status.code(), Some(0), "{name}");
        let expected = std::fs::read(d.join("n.cubin")).unwrap();
        a.extend(["-o", "r.cubin"]);
        for tmpdir in ["/nonexistent/tmp", file.to_str().unwrap()] {
            std::fs::remove_file(d.join("r.cubin")).ok();
            let env = [("TMPDIR", tmpdir), ("NVLINKRS_CACHE", "0")];
            let ours = run(&nvlinkrs(), &a, d, &env);
            let err = String::from_utf8_lossy(&ours.stderr);
            assert_eq!(
                ours.status.code(),
                Some(0),
                "{name}, TMPDIR={tmpdir}: {err}"
            );
            assert_eq!(
                std::fs::read(d.join("r.cubin")).unwrap(),
                expected,
                "{name}, TMPDIR={tmpdir}"
            );
        }
    }
}

/// Run as root with another user's `HOME` (`sudo -E`, a container with the home mounted):
/// the cache is not made there (the user's `~/.cache` was made root's, and the user's
/// tools could no longer write in it); the link goes on uncached and writes nvlink's
/// image. Root only (it hands a folder to another user); CI runs as root.
#[test]
fn root_makes_no_cache_in_another_users_home() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: not root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let home = d.join("home");
    std::fs::create_dir(&home).unwrap();
    let c = std::ffi::CString::new(home.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a path this test made
    assert_eq!(unsafe { libc::chown(c.as_ptr(), 4242, 4242) }, 0);
    let (saxpy, scale) = (
        fixtures().join("saxpy.cubin"),
        fixtures().join("scale.cubin"),
    );
    let args = [
        "-arch=sm_90",
        saxpy.to_str().unwrap(),
        scale.to_str().unwrap(),
        "-o",
    ];
    run(&nvlink(), &[&args[..], &["n.cubin"]].concat(), d, &[]);
    let home_s = home.to_str().unwrap();
    let env = [
        ("HOME", home_s),
        ("XDG_CACHE_HOME", ""),
        ("NVLINKRS_CACHE_DIR", ""),
    ];
    let ours = run(&nvlinkrs(), &[&args[..], &["r.cubin"]].concat(), d, &env);
    linked_as_nvlink(&ours, d);
    let made: Vec<_> = std::fs::read_dir(&home).unwrap().flatten().collect();
    assert!(made.is_empty(), "made in the user's home: {made:?}");
}
