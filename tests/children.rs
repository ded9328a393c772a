//! The link's child processes under the one supervisor (src/child.rs): a library that
//! spins or floods its answer costs its child, never the link's time or memory. The
//! finalizer's library is a stand-in that misbehaves as it is loaded
//! (tests/children/faulty_jitlink.c, built here), libNVVM the fixtures' pass-through
//! wrapper with its fault switch (tests/fixtures/sortnvvm: `NVLINKRS_TEST_FAULT`): a real
//! library that spins or floods cannot be had on demand. Each link runs under a time limit
//! of its own here, so that a hang fails the test instead of hanging it, and its peak
//! memory is read from the kernel (`wait4`).
//!
//! Needs the toolkit (CUDA_HOME) and the fixtures (NVLINKRS_FIXTURES); scripts/test.sh
//! sets both.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{cuda, fixtures, nvlinkrs};

struct Ran {
    /// `None`: still running at the limit, killed.
    code: Option<i32>,
    /// stderr's lines, the program's name written `nvlink`.
    lines: Vec<String>,
    out: Option<Vec<u8>>,
    /// Peak resident memory, KiB.
    max_rss_kib: i64,
    took: Duration,
}

/// Runs nvlinkrs on `args` (`-o` a fresh file) with `env`, killed after `limit`.
// (reaped by wait4, which also gives its peak memory, not by Child::wait)
#[allow(clippy::zombie_processes)]
fn run(args: &[String], env: &[(&str, &str)], limit: Duration) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.cubin");
    let err = std::fs::File::create(dir.path().join("stderr")).unwrap();
    let start = Instant::now();
    let child = Command::new(nvlinkrs())
        .args(args)
        .arg("-o")
        .arg(&out)
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let (mut status, mut killed) = (0, false);
    // SAFETY: a zeroed rusage for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: our own child; status and usage are ours to fill.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        if start.elapsed() > limit && !killed {
            // SAFETY: our own child, not yet reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let name = "nvlinkrs ";
    let lines = std::fs::read_to_string(dir.path().join("stderr"))
        .unwrap()
        .lines()
        .map(|l| l.replacen(name, "nvlink ", 1))
        .collect();
    Ran {
        code: (!killed && libc::WIFEXITED(status)).then(|| libc::WEXITSTATUS(status)),
        lines,
        out: std::fs::read(&out).ok(),
        max_rss_kib: usage.ru_maxrss,
        took: start.elapsed(),
    }
}

/// A toolkit whose libnvJitLink is the misbehaving stand-in (the rest the real one's).
fn faulty_kit() -> (tempfile::TempDir, PathBuf) {
    let kit = tempfile::tempdir().unwrap();
    for d in ["bin", "include", "nvvm"] {
        std::os::unix::fs::symlink(cuda().join(d), kit.path().join(d)).unwrap();
    }
    std::fs::create_dir(kit.path().join("lib")).unwrap();
    let lib = kit.path().join("lib/libnvJitLink.so.13");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/children/faulty_jitlink.c");
    let cc = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&lib)
        .arg(&src)
        .output()
        .expect("cc");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    (kit, lib)
}

/// An sm_100 link, which the opt-in finalizer finalizes.
fn sm100_link(kit: &Path) -> Vec<String> {
    let m = fixtures().join("merge");
    vec![
        "-arch=sm_100".into(),
        m.join("a_100.cubin").display().to_string(),
        m.join("b_100.cubin").display().to_string(),
        format!("--cuda-path={}", kit.display()),
    ]
}

/// The finalizer's worker, started as an sm_100 LTO link of a device-launching program
/// begins (so that libnvJitLink loads while libNVVM compiles), is not held to a child's
/// wall-clock limit while libNVVM and ptxas run: here ptxas, through a launcher, takes
/// longer than the limit (`NVLINKRS_CHILD_TIMEOUT`, 3 s; libNVVM's child and each
/// finalizer job stay under it), and the image is still the finalizer's, nvlink's (was:
/// the worker stopped at 3 s before its first job, a warning, the link without the
/// finalizer; an attacker's review).
#[test]
fn an_early_finalizer_worker_outlasts_a_long_compile() {
    let cu = cuda();
    let tmp = tempfile::tempdir().unwrap();
    let launcher = tmp.path().join("slow-ptxas");
    std::fs::write(&launcher, "#!/bin/sh\nsleep 5\nexec \"$@\"\n").unwrap();
    Command::new("chmod")
        .arg("755")
        .arg(&launcher)
        .status()
        .unwrap();
    let args: Vec<String> = vec![
        "-arch=sm_100".into(),
        "-dlto".into(),
        format!("-nvvmpath={}", cu.join("nvvm").display()),
        format!("-L{}", cu.join("lib").display()),
        fixtures()
            .join("merge/devlaunch_lto100.o")
            .display()
            .to_string(),
        "-lcudadevrt".into(),
        "--no-cache".into(),
    ];
    let limit = Duration::from_secs(240);
    let plain = run(&args, &[], limit);
    assert_eq!((plain.code, &plain.lines), (Some(0), &vec![]));
    let launcher = launcher.display().to_string();
    let env = [
        ("NVLINKRS_CHILD_TIMEOUT", "3"),
        ("NVLINKRS_PTXAS_LAUNCHER", launcher.as_str()),
    ];
    let slow = run(&args, &env, limit);
    assert_eq!((slow.code, &slow.lines), (Some(0), &vec![]));
    assert!(slow.took > Duration::from_secs(5), "{:?}", slow.took);
    assert!(slow.out.is_some() && slow.out == plain.out);
}

/// A finalizer whose library spins is stopped at the wall-clock limit
/// (`NVLINKRS_CHILD_TIMEOUT`, 2 s here) and the link goes on without it, with one warning,
/// exit 0 and the image of the link without the finalizer (was: the link ran for ever; it
/// was still running after 90 s).
#[test]
fn a_spinning_finalizer_is_stopped_at_the_time_limit() {
    let (kit, lib) = faulty_kit();
    let args = sm100_link(kit.path());
    let limit = Duration::from_secs(120);
    let plain = run(&args, &[("NVLINKRS_FINALIZER", "off")], limit);
    assert_eq!(
        (plain.code, plain.lines.len()),
        (Some(0), 0),
        "{:?}",
        plain.lines
    );
    let env = [
        ("NVLINKRS_FINALIZER", "nvjitlink"),
        ("NVLINKRS_TEST_FAULT", "spin"),
        ("NVLINKRS_CHILD_TIMEOUT", "2"),
    ];
    let got = run(&args, &env, limit);
    assert_eq!(
        (got.code, got.lines),
        (
            Some(0),
            vec![format!(
                "nvlink warning : NVLINKRS_FINALIZER: libnvJitLink '{}' ran for 2 s, its limit, and was stopped; linked without the finalizer",
                lib.display()
            )]
        )
    );
    assert!(got.out.is_some() && got.out == plain.out);
    assert!(got.took < Duration::from_secs(60), "{:?}", got.took);
}

/// A finalizer whose library writes 1 GiB to the answer pipe is stopped at the answer's
/// cap (four times the request plus 64 MiB), and the link goes on without it; the link's
/// peak memory stays under 512 MiB (was: the whole flood read into memory, 5.9 GiB for 3 GB,
/// then "truncated or malformed frames").
#[test]
fn a_flooding_finalizer_is_stopped_at_the_answer_cap() {
    let (kit, lib) = faulty_kit();
    let args = sm100_link(kit.path());
    let limit = Duration::from_secs(120);
    let plain = run(&args, &[("NVLINKRS_FINALIZER", "off")], limit);
    let env = [
        ("NVLINKRS_FINALIZER", "nvjitlink"),
        ("NVLINKRS_TEST_FAULT", "flood"),
    ];
    let got = run(&args, &env, limit);
    assert_eq!(got.code, Some(0), "{:?}", got.lines);
    let [line] = &got.lines[..] else {
        panic!("{:?}", got.lines)
    };
    let head = format!(
        "nvlink warning : NVLINKRS_FINALIZER: libnvJitLink '{}' wrote more than ",
        lib.display()
    );
    let n = line
        .strip_prefix(&head)
        .and_then(|l| l.strip_suffix(" bytes and was stopped; linked without the finalizer"))
        .and_then(|n| n.parse::<u64>().ok());
    assert!(
        n.is_some_and(|n| (64 << 20..65 << 20).contains(&n)),
        "{line}"
    );
    assert!(got.out.is_some() && got.out == plain.out);
    assert!(got.max_rss_kib < 512 << 10, "peak {} KiB", got.max_rss_kib);
}

/// A `-dlto` link of the split fixtures at sm_90 through the fixtures' pass-through
/// libNVVM (`tests/fixtures/sortnvvm`), with `extra` options.
fn through_sortnvvm(extra: &[&str]) -> Vec<String> {
    let fx = fixtures();
    let mut args: Vec<String> = vec![
        "-m64".into(),
        "--arch=sm_90".into(),
        format!("-L{}", cuda().join("lib").display()),
        "-dlto".into(),
        format!("-nvvmpath={}", fx.join("sortnvvm").display()),
    ];
    args.extend(extra.iter().map(|e| e.to_string()));
    args.extend(["split/s0.o", "split/s1.o"].map(|o| fx.join(o).display().to_string()));
    args.push("-lcudadevrt".into());
    args
}

/// libNVVM's split compile (`-split-compile-extended`, in a child) that spins is stopped at
/// the wall-clock limit in each of its three attempts, and the link fails cleanly: exit 1,
/// the attempts' end named once, no output (was: the link ran for ever; CPU time counted as progress).
/// One that floods its stdout floods the child's stderr (the answer goes out on a copy of
/// stdout taken before libNVVM is loaded), of which the link keeps the start: the link's
/// memory stays under 1 GiB and the spin after the flood is stopped at the limit.
#[test]
fn a_spinning_or_flooding_split_compile_fails_the_link_cleanly() {
    let cu = cuda();
    let args = through_sortnvvm(&["-split-compile-extended=2"]);
    let real = cu.join("nvvm/lib64/libnvvm.so");
    let real = real.to_str().unwrap();
    let limit = Duration::from_secs(120);
    let base = [("NVLINKRS_REAL_NVVM", real), ("NVLINKRS_CACHE", "0")];
    let clean = run(&args, &base, limit);
    assert_eq!(clean.code, Some(0), "{:?}", clean.lines);
    // (a library that floods its stdout floods the child's stderr, of which the link keeps
    // the start: the flood costs neither the answer nor memory, and the spin after it
    // is stopped at the time limit)
    for (fault, why) in [
        ("spin", "attempt ran for 2 s, its limit, and was stopped"),
        ("flood", "attempt ran for 2 s, its limit, and was stopped"),
    ] {
        let mut env = base.to_vec();
        env.push(("NVLINKRS_TEST_FAULT", fault));
        env.push(("NVLINKRS_CHILD_TIMEOUT", "2"));
        let got = run(&args, &env, limit);
        assert_eq!(got.code, Some(1), "{fault}: {:?}", got.lines);
        assert!(got.out.is_none(), "{fault}: a failed link left its output");
        let text = got.lines.join("\n");
        assert!(
            text.contains("libNVVM crashed in each of 3 attempts at the compile"),
            "{fault}: {text}"
        );
        // (the same end in every attempt is said once: "each attempt ...")
        assert!(text.contains(&format!("each {why}")), "{fault}: {text}");
        assert_eq!(text.matches(why).count(), 1, "{fault}: {text}");
        assert!(
            got.max_rss_kib < 1 << 20,
            "{fault}: peak {} KiB",
            got.max_rss_kib
        );
        assert!(
            got.took < Duration::from_secs(60),
            "{fault}: {:?}",
            got.took
        );
    }
}

/// libNVVM (here the fixtures' pass-through wrapper) prints to its stdout while it
/// compiles: the child answers on a copy of stdout taken before libNVVM is loaded, and
/// stdout is its stderr by then, so the link writes the image a quiet library gives (was:
/// the line corrupted the answer, `libNVVM's process answered no PTX` or a frame error).
#[test]
fn a_libnvvm_that_prints_to_stdout_does_not_corrupt_the_answer() {
    let cu = cuda();
    let args = through_sortnvvm(&[]);
    let real = cu.join("nvvm/lib64/libnvvm.so");
    let base = [
        ("NVLINKRS_REAL_NVVM", real.to_str().unwrap()),
        ("NVLINKRS_CACHE", "0"),
    ];
    let limit = Duration::from_secs(120);
    let quiet = run(&args, &base, limit);
    assert_eq!(quiet.code, Some(0), "{:?}", quiet.lines);
    let mut env = base.to_vec();
    env.push(("NVLINKRS_TEST_FAULT", "chatter"));
    let chatty = run(&args, &env, limit);
    assert_eq!(chatty.code, Some(0), "{:?}", chatty.lines);
    assert!(quiet.out.is_some() && chatty.out == quiet.out);
}

/// The program is deleted while a `-dlto` link runs (as a package upgrade replaces it
/// during a build): libNVVM's child is this program itself, started as `/proc/self/exe`,
/// so the link goes on and writes the image a link from an untouched file writes (was:
/// `cannot start '<path> (deleted)'`, exit 1). The link waits on a named pipe for its
/// second input while the file goes.
#[test]
fn a_link_outlives_its_deleted_program() {
    let fx = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("nvlinkrs-copy");
    std::fs::copy(nvlinkrs(), &copy).unwrap();
    let fifo = dir.path().join("second.o");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let args = |second: &Path, out: &Path| -> Vec<String> {
        vec![
            "-arch=sm_90".into(),
            "-dlto".into(),
            format!("-nvvmpath={}", cuda().join("nvvm").display()),
            fx.join("saxpy_dlto.o").display().to_string(),
            second.display().to_string(),
            format!("-L{}", cuda().join("lib").display()),
            "-lcudadevrt".into(),
            "-o".into(),
            out.display().to_string(),
        ]
    };
    let out = dir.path().join("deleted.cubin");
    let child = Command::new(&copy)
        .args(args(&fifo, &out))
        .env("NVLINKRS_CACHE", "0")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::fs::remove_file(&copy).unwrap();
    std::fs::write(&fifo, std::fs::read(fx.join("scale_dlto.o")).unwrap()).unwrap();
    let done = child.wait_with_output().unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let clean = dir.path().join("clean.cubin");
    let r = Command::new(nvlinkrs())
        .args(args(&fx.join("scale_dlto.o"), &clean))
        .env("NVLINKRS_CACHE", "0")
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&clean).unwrap());
}
