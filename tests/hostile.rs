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

/// A cubin of `v` text sections whose relocation sections all read one table naming every
/// function (`v`² references from a file of `v` entries), and one kernel: the attacker
/// review's image that kept `compare --code` busy for minutes and gigabytes.
fn dense_references(v: usize) -> Vec<u8> {
    let shstr = b"\0.shstrtab\0.strtab\0.symtab\0.text.x\0.rela.text.x\0";
    let strtab = b"\0f\0k\0";
    let first_text = 4u16;
    let mut symtab = vec![0u8; 24];
    let mut sym = |name: u32, info: u8, other: u8, shndx: u16| {
        symtab.extend(name.to_le_bytes());
        symtab.extend([info, other]);
        symtab.extend(shndx.to_le_bytes());
        symtab.extend([0u8; 8].iter().chain(&16u64.to_le_bytes()));
    };
    for i in 0..v {
        sym(1, 0x12, 0, first_text + i as u16);
    }
    sym(3, 0x12, 0x10, first_text); // the kernel (STO_CUDA_ENTRY)
    let relas: Vec<u8> = (0..v)
        .flat_map(|i| {
            let info = ((i as u64 + 1) << 32) | 1;
            [0u64.to_le_bytes(), info.to_le_bytes(), 0u64.to_le_bytes()].concat()
        })
        .collect();
    let mut body = vec![0u8; 64];
    let mut add = |b: &[u8]| {
        while !body.len().is_multiple_of(8) {
            body.push(0);
        }
        body.extend(b);
        body.len() - b.len()
    };
    let o_shstr = add(shstr);
    let o_str = add(strtab);
    let o_sym = add(&symtab);
    let o_code = add(&[0x44, 0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    let o_rela = add(&relas);
    while !body.len().is_multiple_of(8) {
        body.push(0);
    }
    let shoff = body.len();
    let mut sh = |name: u32,
                  ty: u32,
                  flags: u64,
                  off: usize,
                  size: usize,
                  link: u32,
                  info: u32,
                  ent: u64| {
        for f in [name, ty] {
            body.extend(f.to_le_bytes());
        }
        for f in [flags, 0, off as u64, size as u64] {
            body.extend(f.to_le_bytes());
        }
        for f in [link, info] {
            body.extend(f.to_le_bytes());
        }
        body.extend(8u64.to_le_bytes().iter().chain(&ent.to_le_bytes()));
    };
    sh(0, 0, 0, 0, 0, 0, 0, 0);
    sh(1, 3, 0, o_shstr, shstr.len(), 0, 0, 0);
    sh(11, 3, 0, o_str, strtab.len(), 0, 0, 0);
    sh(19, 2, 0, o_sym, symtab.len(), 2, 1, 24);
    for _ in 0..v {
        sh(27, 1, 6, o_code, 16, 0, 0, 0);
    }
    for i in 0..v {
        sh(
            35,
            4,
            0x40,
            o_rela,
            relas.len(),
            3,
            first_text as u32 + i as u32,
            24,
        );
    }
    let count = 4 + 2 * v;
    let mut head = vec![0x7f, b'E', b'L', b'F', 2, 1, 1, 0x41, 8];
    head.resize(16, 0);
    head.extend(2u16.to_le_bytes()); // executable
    head.extend(190u16.to_le_bytes()); // EM_CUDA
    head.extend(128u32.to_le_bytes()); // version (CUDA's)
    head.extend([0u8; 16]); // entry, program headers
    head.extend((shoff as u64).to_le_bytes());
    head.extend(0x5a5au32.to_le_bytes()); // flags (sm_90 in the low byte)
    for h in [64u16, 56, 0, 64, count as u16, 1] {
        head.extend(h.to_le_bytes());
    }
    body[..64].copy_from_slice(&head);
    body
}

#[test]
fn compare_code_refuses_an_image_whose_references_outgrow_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("dense.cubin");
    std::fs::write(&p, dense_references(3000)).unwrap();
    let started = std::time::Instant::now();
    let path = p.to_str().unwrap();
    let o = run(
        &nvlinkrs(),
        &["compare", "--code", path, path],
        dir.path(),
        &[],
    );
    let said =
        String::from_utf8_lossy(&o.stderr).into_owned() + &String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!(
            "'{path}': too many references between functions to follow"
        )),
        "{said}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}
