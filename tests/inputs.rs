//! Differential tests of the input phase against NVIDIA's own tools, on fixtures built by
//! `tests/fixtures/build.sh` from the repo's `.cu` sources with the pinned nvcc:
//! `inspect` lists the members `cuobjdump -all` lists, extracted cubins and PTX are
//! byte-identical to `cuobjdump -xelf/-xptx`, nvlink's accept/reject decisions and
//! messages are matched, and corrupted inputs fail cleanly. `scripts/test.sh` sets up
//! the toolkit (CUDA_HOME) and fixtures (NVLINKRS_FIXTURES) before `cargo test`.

use std::path::{Path, PathBuf};
use std::process::Command;

use nvlinkrs::input::{self, CodeKind, Mode};
use nvlinkrs::toolkit::Toolkit;

fn toolkit() -> Toolkit {
    Toolkit::discover(None, None).expect("CUDA toolkit: run scripts/test.sh (it sets CUDA_HOME)")
}

fn fixtures() -> PathBuf {
    let d = std::env::var_os("NVLINKRS_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fixtures"));
    assert!(
        d.join(".stamp").is_file(),
        "fixtures missing in {}: run scripts/test.sh",
        d.display()
    );
    d
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_nvlinkrs")
}

/// Files whose device code cuobjdump can list.
const CONTAINERS: &[&str] = &[
    "saxpy_dc.o",
    "scale_dc.o",
    "saxpy_dlto.o",
    "scale_dlto.o",
    "saxpy_lto90.o",
    "multi.o",
    "saxpy_fast_dlto.o",
    "saxpy.fatbin",
    "zstd.fatbin",
    "lz4.fatbin",
    "plain.fatbin",
    "libsaxpy.a",
    "libsaxpy_lto.a",
    "dlink.o",
    "whole.o",
];

#[derive(Debug, PartialEq, Eq, Clone)]
struct Listed {
    kind: String,
    arch: String,
    code_version: String,
    compressed: bool,
    options: Option<String>,
}

/// Runs the toolkit's cuobjdump in `dir`; it must succeed.
fn cuobjdump(cu: &Path, args: &[&std::ffi::OsStr], dir: &Path) -> std::process::Output {
    let out = Command::new(cu.join("bin/cuobjdump"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cuobjdump {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Parses `cuobjdump -all FILE`: one entry per "Fatbin X code:" block, in order.
fn cuobjdump_list(cu: &Path, file: &Path) -> Vec<Listed> {
    let out = cuobjdump(cu, &["-all".as_ref(), file.as_os_str()], Path::new("."));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut list: Vec<Listed> = Vec::new();
    for line in text.lines() {
        if let Some(k) = line
            .strip_prefix("Fatbin ")
            .and_then(|l| l.strip_suffix(" code:"))
        {
            list.push(Listed {
                kind: k.into(),
                arch: String::new(),
                code_version: String::new(),
                compressed: false,
                options: None,
            });
            continue;
        }
        let Some(cur) = list.last_mut() else { continue };
        if let Some(a) = line.strip_prefix("arch = ") {
            cur.arch = a.into();
        } else if let Some(v) = line.strip_prefix("code version = ") {
            cur.code_version = v.into();
        } else if line == "compressed" {
            cur.compressed = true;
        } else if let Some(o) = line
            .strip_prefix("ptxasOptions = ")
            .or_else(|| line.strip_prefix("nvvmOptions = "))
        {
            cur.options = Some(o.into());
        }
    }
    list
}

fn our_list(file: &Path) -> Vec<Listed> {
    let trees = input::load(&[file.to_path_buf()], Mode::Inspect).unwrap();
    let mut out = Vec::new();
    for (_, c) in trees.iter().flat_map(|t| t.codes()) {
        let m = c.member.as_ref().expect("fatbin member");
        out.push(Listed {
            kind: match c.kind {
                CodeKind::Cubin => "elf",
                CodeKind::Ptx => "ptx",
                CodeKind::Nvvm(_) => "nvvm",
                _ => "other",
            }
            .into(),
            arch: c.arch.unwrap().to_string(),
            code_version: format!("[{},{}]", m.code_version.0, m.code_version.1),
            compressed: m.compression() != nvlinkrs::fatbin::Compression::None,
            options: m.option_text(),
        });
    }
    out
}

#[test]
fn members_match_cuobjdump_listing() {
    let tk = toolkit();
    let fx = fixtures();
    for name in CONTAINERS {
        let f = fx.join(name);
        let theirs = cuobjdump_list(&tk.root, &f);
        let ours = our_list(&f);
        assert!(!ours.is_empty(), "{name}: no members");
        assert_eq!(ours, theirs, "{name}: members differ from cuobjdump -all");
    }
}

/// Extracted files of `cuobjdump -x<what> all`, sorted by their member number.
fn cuobjdump_extract(cu: &Path, file: &Path, what: &str, dir: &Path) -> Vec<Vec<u8>> {
    let x = format!("-x{what}");
    cuobjdump(
        cu,
        &[
            x.as_ref(),
            "all".as_ref(),
            "-all".as_ref(),
            file.as_os_str(),
        ],
        dir,
    );
    let ext = if what == "elf" { "cubin" } else { "ptx" };
    let mut files: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .map(|p| {
            let n: u32 = p
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .split('.')
                .rev()
                .nth(2)
                .and_then(|n| n.parse().ok())
                .unwrap_or(1); // a lone member has no number
            (n, p)
        })
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|(_, p)| std::fs::read(p).unwrap())
        .collect()
}

#[test]
fn extracted_cubins_and_ptx_are_byte_identical_to_cuobjdump() {
    let tk = toolkit();
    let fx = fixtures();
    let mut compared = 0;
    for name in CONTAINERS {
        let f = fx.join(name);
        let trees = input::load(&[f.clone()], Mode::Inspect).unwrap();
        for (what, kind) in [("elf", CodeKind::Cubin), ("ptx", CodeKind::Ptx)] {
            let dir = tempfile::tempdir().unwrap();
            let theirs = cuobjdump_extract(&tk.root, &f, what, dir.path());
            let ours: Vec<Vec<u8>> = trees
                .iter()
                .flat_map(|t| t.codes())
                .filter(|(_, c)| c.kind == kind)
                .map(|(o, c)| c.bytes(o).unwrap().to_vec())
                .collect();
            assert_eq!(ours.len(), theirs.len(), "{name}: number of {what} members");
            for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
                assert!(
                    a == b,
                    "{name}: {what} member {} differs ({} vs {} bytes)",
                    i + 1,
                    a.len(),
                    b.len()
                );
                compared += 1;
            }
        }
    }
    assert!(compared >= 30, "only {compared} members compared");
}

#[test]
fn raw_files_are_one_member_of_their_kind() {
    let fx = fixtures();
    let json = inspect_json(&[
        fx.join("saxpy.cubin"),
        fx.join("saxpy.ptx"),
        fx.join("saxpy.ltoir"),
        fx.join("libdevice.bc"),
    ]);
    let dc = json["device_code"].as_array().unwrap();
    let kinds: Vec<&str> = dc.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["cubin", "ptx", "ltoir", "bitcode"]);
    for (e, f) in dc
        .iter()
        .zip(["saxpy.cubin", "saxpy.ptx", "saxpy.ltoir", "libdevice.bc"])
    {
        assert_eq!(
            e["size"].as_u64().unwrap(),
            std::fs::metadata(fx.join(f)).unwrap().len(),
            "{f}"
        );
    }
    assert_eq!(dc[0]["arch"], "sm_90");
    assert_eq!(dc[1]["arch"], "sm_90");
    let lto = &dc[2]["ltoir"];
    assert_eq!(lto["version"], "1.67");
    assert_eq!(lto["arch"], "sm_90");
    assert_eq!(lto["payload"], "obfuscated");
    assert_eq!(dc[2]["arch"], "sm_90");
    let kernels: Vec<&str> = dc[0]["elf"]["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    assert_eq!(kernels, ["_Z7doublerPfi", "_Z5saxpyfPKfPfi"]);
    assert_eq!(dc[3]["bitcode"]["triple"], "nvptx64-nvidia-gpulibs");
    assert!(
        dc[3]["bitcode"]["functions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "__nv_sinf")
    );
}

fn inspect_json(files: &[PathBuf]) -> serde_json::Value {
    let out = Command::new(bin())
        .arg("inspect")
        .arg("--json")
        .args(files)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "inspect failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn json_lists_archive_members_with_their_origin() {
    let fx = fixtures();
    let lib = fx.join("libsaxpy.a");
    let j = inspect_json(std::slice::from_ref(&lib));
    let dc = j["device_code"].as_array().unwrap();
    let got: Vec<(String, String, String)> = dc
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap().into(),
                e["arch"].as_str().unwrap().into(),
                e["origin"].as_str().unwrap().into(),
            )
        })
        .collect();
    let l = lib.display();
    assert_eq!(
        got,
        [
            ("cubin".into(), "sm_90".into(), format!("{l}:saxpy_dc.o")),
            ("ptx".into(), "sm_90".into(), format!("{l}:saxpy_dc.o")),
            ("cubin".into(), "sm_90".into(), format!("{l}:scale_dc.o")),
            ("ptx".into(), "sm_90".into(), format!("{l}:scale_dc.o")),
        ]
    );
    assert!(dc.iter().all(|e| e["size"].as_u64().unwrap() > 0));
    // a thin archive lists the same members
    let thin = inspect_json(&[fx.join("libthin.a")]);
    assert_eq!(thin["device_code"].as_array().unwrap().len(), 4);
}

#[test]
fn multi_arch_object_lists_every_target() {
    let j = inspect_json(&[fixtures().join("multi.o")]);
    let archs: Vec<(String, String)> = j["device_code"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap().into(),
                e["arch"].as_str().unwrap().into(),
            )
        })
        .collect();
    for want in [
        ("cubin", "sm_75"),
        ("cubin", "sm_80"),
        ("cubin", "sm_90"),
        ("cubin", "sm_90a"),
        ("cubin", "sm_100"),
        ("cubin", "sm_120"),
        ("ptx", "sm_120"),
        ("ltoir", "sm_90a"),
    ] {
        assert!(
            archs.contains(&(want.0.into(), want.1.into())),
            "{want:?} missing from {archs:?}"
        );
    }
}

fn run(args: &[&str], dir: &Path) -> (i32, String) {
    // nvlinkrs's default cache in a fresh directory (never the user's; no earlier hit)
    let xdg = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .args(args)
        .env("XDG_CACHE_HOME", xdg.path())
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn nvlink(cu: &Path, args: &[&str], dir: &Path) -> (i32, String) {
    let out = Command::new(cu.join("bin/nvlink"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn link_input_decisions_match_nvlink() {
    let tk = toolkit();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let junk: Vec<u8> = (0..200u32).map(|i| (i * 7 + 3) as u8).collect();
    let fx = fixtures();
    std::fs::copy(fx.join("saxpy_dc.o"), d.join("host_as.cubin")).unwrap();
    std::fs::write(d.join("short.o"), b"tiny").unwrap();
    let mut cases: Vec<String> = Vec::new();
    for ext in ["cubin", "fatbin", "bc", "ltoir", "nvvm", "ptx"] {
        std::fs::write(d.join(format!("junk.{ext}")), &junk).unwrap();
        cases.push(format!("junk.{ext}"));
    }
    cases.push("host_as.cubin".into());
    cases.push("short.o".into());
    cases.push("missing.o".into());
    for input in &cases {
        let args = ["-arch=sm_90", input.as_str(), "-o", "out.cubin"];
        let (nrc, nerr) = nvlink(&tk.root, &args, d);
        let (rc, err) = run(&args, d);
        assert_eq!(
            rc, nrc,
            "{input}: exit code (nvlink said {nerr:?}, we said {err:?})"
        );
        let last = nerr.lines().last().unwrap().replace("nvlink ", "");
        assert!(
            err.contains(&last),
            "{input}: nvlink's message {last:?} not in ours {err:?}"
        );
        assert!(!d.join("out.cubin").exists(), "{input}: output left behind");
    }
}

#[test]
fn command_line_messages_match_nvlink() {
    let tk = toolkit();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::copy(fixtures().join("saxpy_dc.o"), d.join("a.o")).unwrap();
    for line in [
        "a.o -o x.cubin",
        "-arch=sm_70 a.o -o x.cubin",
        "-arch=sm_90f a.o -o x.cubin",
        "-m32 -arch=sm_90 a.o -o x.cubin",
        "-arch=sm_90 a.o",
        "-arch=sm_90 -o x.cubin",
        "-arch=sm_90 --bogus a.o -o x.cubin",
        "-arch sm_90 -ox.cubin a.o",
        "-arch=sm_90 -o x.cubin a.o -disable-smem-reservation=maybe",
        "-arch=sm_90 -o x.cubin a.o -maxrregcount=abc",
        "-arch=lto_90 -o x.cubin a.o",
        "-arch=sm_90 -lto -o x.cubin a.o",
        "-arch=sm_90 -o x.cubin -optf nonexistent a.o",
    ] {
        let args: Vec<&str> = line.split(' ').collect();
        let (nrc, nerr) = nvlink(&tk.root, &args, d);
        let (rc, err) = run(&args, d);
        assert_eq!(
            (rc, err.lines().next().unwrap().replace("nvlinkrs ", "")),
            (nrc, nerr.lines().next().unwrap().replace("nvlink ", "")),
            "{line}"
        );
    }
}

#[test]
fn version_names_the_toolkit_it_found() {
    let tk = toolkit();
    let out = Command::new(bin())
        .arg("--version")
        .env("CUDA_HOME", &tk.root)
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.starts_with(&format!("nvlinkrs {}", env!("CARGO_PKG_VERSION"))),
        "{s}"
    );
    assert!(s.contains("V13.5.37"), "ptxas version missing: {s}");
    assert!(s.contains("libNVVM 2.0"), "libNVVM version missing: {s}");
    assert!(s.contains("found via CUDA_HOME"), "{s}");
}

/// Truncations and corruptions of real fixtures: `inspect` fails with exit code 1, a
/// message naming the file and an offset, and never panics.
#[test]
fn corrupted_inputs_fail_cleanly() {
    let fx = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut cases: Vec<(String, Vec<u8>)> = Vec::new();
    let fat = std::fs::read(fx.join("zstd.fatbin")).unwrap();
    for cut in [3, 10, 16, 40, 0x48, 0x60, 200, fat.len() - 1] {
        cases.push((format!("cut{cut}.fatbin"), fat[..cut].to_vec()));
    }
    let set = |d: &[u8], off: usize, v: &[u8]| {
        let mut d = d.to_vec();
        d[off..off + v.len()].copy_from_slice(v);
        d
    };
    cases.push(("body.fatbin".into(), set(&fat, 8, &u64::MAX.to_le_bytes())));
    cases.push((
        "hdr.fatbin".into(),
        set(&fat, 16 + 4, &0xFFFF_FFF0u32.to_le_bytes()),
    ));
    cases.push((
        "payload.fatbin".into(),
        set(&fat, 16 + 8, &(1u64 << 40).to_le_bytes()),
    ));
    cases.push((
        "bomb.fatbin".into(),
        set(&fat, 16 + 0x38, &(1u64 << 33).to_le_bytes()),
    ));
    cases.push((
        "zsize.fatbin".into(),
        set(&fat, 16 + 0x38, &100u64.to_le_bytes()),
    ));
    cases.push(("zdata.fatbin".into(), set(&fat, 16 + 0x48, &[0xFF; 16])));
    cases.push((
        "optoff.fatbin".into(),
        set(&fat, 16 + 0x14, &0x3000u32.to_le_bytes()),
    ));
    let lz4 = std::fs::read(fx.join("lz4.fatbin")).unwrap();
    cases.push(("lz4data.fatbin".into(), set(&lz4, 16 + 0x48, &[0xFF; 32])));
    let ar = std::fs::read(fx.join("libsaxpy.a")).unwrap();
    cases.push(("size.a".into(), set(&ar, 8 + 48, b"99999999  ")));
    cases.push(("fmag.a".into(), set(&ar, 8 + 58, b"xx")));
    cases.push(("cut.a".into(), ar[..100].to_vec()));
    let cubin = std::fs::read(fx.join("saxpy.cubin")).unwrap();
    cases.push((
        "shoff.cubin".into(),
        set(&cubin, 0x28, &u64::MAX.to_le_bytes()),
    ));
    cases.push((
        "shnum.cubin".into(),
        set(&cubin, 0x3C, &0xFFFFu16.to_le_bytes()),
    ));
    cases.push(("cut.cubin".into(), cubin[..cubin.len() / 2].to_vec()));
    let host = std::fs::read(fx.join("saxpy_dc.o")).unwrap();
    cases.push(("cut.o".into(), host[..host.len() / 2].to_vec()));
    let lto = std::fs::read(fx.join("saxpy.ltoir")).unwrap();
    for cut in [10, 24, 30] {
        cases.push((format!("cut{cut}.ltoir"), lto[..cut].to_vec()));
    }
    cases.push(("major.ltoir".into(), set(&lto, 4, &[9])));
    cases.push((
        "irofs.ltoir".into(),
        set(&lto, 0x14, &u32::MAX.to_le_bytes()),
    ));
    cases.push(("fatbin_named.cubin".into(), fat.clone()));
    cases.push(("elf_named.fatbin".into(), cubin.clone()));
    for (name, bytes) in &cases {
        std::fs::write(d.join(name), bytes).unwrap();
        let (rc, err) = run(&["inspect", name], d);
        assert_eq!(rc, 1, "{name}: exit code {rc}, stderr {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
        assert!(
            err.contains(&format!("'{name}")),
            "{name}: message does not name the file: {err}"
        );
        let wrong_kind = name.contains("named");
        assert!(
            wrong_kind || err.contains("offset 0x"),
            "{name}: message has no offset: {err}"
        );
    }
}
