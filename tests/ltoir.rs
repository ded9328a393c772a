//! Staged LTO: the LTO IR container writer against cicc's own containers (every
//! fixture's `.ltoir` and every `-dlto` fatbin member, written back byte for byte, and
//! cicc's form remade from the plain IR), `inspect` of a written container, and
//! `-lto -r --emit-ltoir` against the real nvlink 13.5 (the later link of the prelinked
//! library with the application, by nvlink and by nvlinkrs, against the one-step link).
//! `scripts/test.sh` sets up the toolkit (CUDA_HOME) and fixtures (NVLINKRS_FIXTURES).

use std::path::{Path, PathBuf};
use std::process::Command;

use nvlinkrs::input::{self, CodeKind, Mode};
use nvlinkrs::ir::container::{self, IrFormat};
use nvlinkrs::ir::write::LtoIr;

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

fn files_under(d: &Path, out: &mut Vec<PathBuf>) {
    let mut es: Vec<_> = std::fs::read_dir(d).unwrap().flatten().collect();
    es.sort_by_key(|e| e.path());
    for e in es {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// Every LTO IR container in the fixtures: raw `.ltoir` files and fatbin members (host
/// objects, fatbins, archives), decompressed and unscrambled as a link reads them.
fn fixture_containers() -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    files_under(&fixtures(), &mut files);
    let mut out = Vec::new();
    for f in files {
        let Ok(trees) = input::load(std::slice::from_ref(&f), Mode::Inspect) else {
            continue;
        };
        for t in &trees {
            for (origin, code) in t.codes() {
                // (a fatbin member's format is known once it is read)
                if let CodeKind::Nvvm(_) = code.kind {
                    let b = code.bytes(origin).expect("member readable");
                    if container::sniff(&b) == Some(IrFormat::LtoIr) {
                        out.push((origin.to_string(), b.to_vec()));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn every_fixture_container_is_written_back_byte_identical() {
    let all = fixture_containers();
    let raw = all.iter().filter(|(o, _)| o.ends_with(".ltoir")).count();
    assert!(
        all.len() >= 40 && raw >= 3,
        "only {} containers ({raw} .ltoir)",
        all.len()
    );
    let mut remade = 0;
    for (origin, bytes) in &all {
        let c = LtoIr::read(bytes, origin).unwrap_or_else(|e| panic!("{origin}: {e}"));
        assert!(c.write() == *bytes, "{origin}: written back differently");
        // cicc's form from the plain IR: the container `LtoIr::new` makes for the target,
        // scrambled with the same key, is the same bytes
        let (h, _) = container::parse(bytes, origin).unwrap();
        let key = h.key.expect("cicc's containers have a key");
        let mut plain = c.payload.clone();
        nvlinkrs::ir::unscramble(&mut plain, key);
        let mut ours = LtoIr::new(h.arch().unwrap(), plain);
        ours.scramble(key);
        assert!(
            ours.write() == *bytes,
            "{origin}: not remade from its plain IR ({:?} against {:?})",
            ours.pairs,
            c.pairs
        );
        remade += 1;
    }
    eprintln!("{} containers written back, {remade} remade", all.len());
}

fn cuda() -> PathBuf {
    nvlinkrs::toolkit::Toolkit::discover(None, None)
        .expect("CUDA toolkit: run scripts/test.sh (it sets CUDA_HOME)")
        .root
}

/// A fresh scratch folder for one test.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("ltoir")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `prog` in `dir`: exit code and stderr.
fn tool(prog: &Path, args: &[&str], dir: &Path) -> (i32, String) {
    let out = Command::new(prog)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", prog.display()));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout),
    )
}

fn nvlinkrs(args: &[&str], dir: &Path) -> (i32, String) {
    tool(Path::new(env!("CARGO_BIN_EXE_nvlinkrs")), args, dir)
}

fn nvlink(args: &[&str], dir: &Path) -> (i32, String) {
    tool(&cuda().join("bin/nvlink"), args, dir)
}

/// The final link's command line (nvcc -dlink -dlto's), at sm_90 with libNVVM's newer
/// NVVM, which reads the bitcode LLVM 22 writes.
fn final_link(inputs: &[&str], out: &str) -> Vec<String> {
    let cu = cuda();
    let mut a: Vec<String> = [
        "-m64",
        "-arch=sm_90",
        "-lto",
        "-nvvm-latest",
        &format!("-nvvmpath={}", cu.join("nvvm").display()),
        &format!("-L{}", cu.join("lib").display()),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(inputs.iter().map(|s| s.to_string()));
    a.extend(["-lcudadevrt", "-o", out].map(String::from));
    a
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The one-step link by nvlink, and the final link against the prelinked library by
/// nvlink and by nvlinkrs, the library as a `.ltoir`, as a host object (`-o lib.o`) and
/// as that object after `ld -r`: all seven images the same bytes. Returns the image.
fn staged_matches_one_step(d: &Path, lib: &[&str], app: &[&str]) -> Vec<u8> {
    let emit = [
        &["-lto", "-r", "--emit-ltoir", "-arch=sm_90"],
        lib,
        &["-o", "lib.ltoir"],
    ]
    .concat();
    let (rc, err) = nvlinkrs(&emit, d);
    assert_eq!(rc, 0, "--emit-ltoir: {err}");
    let one = final_link(&[app, lib].concat(), "one.cubin");
    let (rc, err) = nvlink(&strs(&one), d);
    assert_eq!(rc, 0, "one-step nvlink: {err}");
    let staged = [app, &["lib.ltoir"]].concat();
    let (rc, err) = nvlink(&strs(&final_link(&staged, "nv.cubin")), d);
    assert_eq!(rc, 0, "nvlink against lib.ltoir: {err}");
    let (rc, err) = nvlinkrs(&strs(&final_link(&staged, "rs.cubin")), d);
    assert_eq!(rc, 0, "nvlinkrs against lib.ltoir: {err}");
    // the same library as a host object (`-o lib.o`), and that object after `ld -r`
    let emit_o = [&emit[..emit.len() - 1], &["lib.o"]].concat();
    let (rc, err) = nvlinkrs(&emit_o, d);
    assert_eq!(rc, 0, "--emit-ltoir -o lib.o: {err}");
    let (rc, err) = tool(Path::new("ld"), &["-r", "lib.o", "-o", "lib_r.o"], d);
    assert_eq!(rc, 0, "ld -r lib.o: {err}");
    for (lib_o, nv, rs) in [
        ("lib.o", "nv_o.cubin", "rs_o.cubin"),
        ("lib_r.o", "nv_r.cubin", "rs_r.cubin"),
    ] {
        let staged = [app, &[lib_o]].concat();
        let (rc, err) = nvlink(&strs(&final_link(&staged, nv)), d);
        assert_eq!(rc, 0, "nvlink against {lib_o}: {err}");
        let (rc, err) = nvlinkrs(&strs(&final_link(&staged, rs)), d);
        assert_eq!(rc, 0, "nvlinkrs against {lib_o}: {err}");
    }
    let one = std::fs::read(d.join("one.cubin")).unwrap();
    for f in [
        "nv.cubin",
        "rs.cubin",
        "nv_o.cubin",
        "rs_o.cubin",
        "nv_r.cubin",
        "rs_r.cubin",
    ] {
        let img = std::fs::read(d.join(f)).unwrap();
        if img != one {
            let r = nvlinkrs::elf::equiv::compare(&one, &img).unwrap();
            panic!("{f} is not the one-step image: {:?}", r.differences);
        }
    }
    one
}

/// The bundled example: saxpy.cu and scale.cu prelinked into one `.ltoir`, linked with
/// main.cu by nvlink and by nvlinkrs: nvlink's one-step image byte for byte. Without
/// `-nvvm-latest`, nvlink's libNVVM (NVVM 7) refuses LLVM 22's bitcode (its message);
/// nvlinkrs adds the option for IR it wrote and makes the same image.
#[test]
fn prelinked_example_links_as_the_one_step_link() {
    let d = scratch("example");
    let fx = fixtures();
    for f in ["main_dlto.o", "saxpy_dlto.o", "scale_dlto.o"] {
        std::fs::copy(fx.join(f), d.join(f)).unwrap();
    }
    staged_matches_one_step(&d, &["saxpy_dlto.o", "scale_dlto.o"], &["main_dlto.o"]);
    let mut plain = final_link(&["main_dlto.o", "lib.ltoir"], "x.cubin");
    plain.retain(|a| a != "-nvvm-latest");
    let want = "lib.ltoir: parse Invalid value (Producer: 'LLVM22.1.8' Reader: 'LLVM 7.0.1')NVVM_ERROR_COMPILATION";
    let (nrc, nerr) = nvlink(&strs(&plain), &d);
    assert_eq!(nrc, 1);
    assert!(
        nerr.starts_with(&format!("nvlink info    : {want}\n")),
        "{nerr}"
    );
    // nvlinkrs adds -nvvm-latest for IR it wrote, and says so under -v: the image is
    // nvlink's one-step link's (with -nvvm-latest) all the same
    plain.insert(0, "-v".into());
    let (rc, err) = nvlinkrs(&strs(&plain), &d);
    assert_eq!(rc, 0, "{err}");
    assert!(
        err.contains("nvlinkrs info    : 'lib.ltoir' holds IR written by nvlinkrs (LLVM 22): linking with -nvvm-latest, which libNVVM needs to read it for sm_90 (nvlink needs it given)\n"),
        "{err}"
    );
    assert!(
        std::fs::read(d.join("x.cubin")).unwrap() == std::fs::read(d.join("one.cubin")).unwrap()
    );
    // -v of --emit-ltoir: what was linked, what is stored, what nvlink needs later
    let (rc, err) = nvlinkrs(
        &[
            "-v",
            "-lto",
            "-r",
            "--emit-ltoir",
            "-arch=sm_90",
            "saxpy_dlto.o",
            "scale_dlto.o",
            "-o",
            "v.ltoir",
        ],
        &d,
    );
    assert_eq!(rc, 0, "{err}");
    for line in [
        "nvlinkrs info    : --emit-ltoir: linked 'saxpy_dlto.o', 'scale_dlto.o' into 'v.ltoir' (LLVM 22 bitcode for sm_90; stored: the option consensus '-ftz=0 -prec_div=1 -prec_sqrt=1 -fmad=1', 0 host-reference table(s))\n",
        "nvlinkrs info    : a later link of 'v.ltoir' by nvlink needs -nvvm-latest: libNVVM reads LLVM 22's bitcode for sm_90 only with its newer NVVM (nvlinkrs adds it)\n",
    ] {
        assert!(err.contains(line), "{err}");
    }
}

/// The SASS of `kernel` in `image` (cuobjdump -sass), up to the next function.
fn sass_of(d: &Path, image: &str, kernel: &str) -> String {
    let out = Command::new(cuda().join("bin/cuobjdump"))
        .args(["-sass", image])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let start = text
        .find(&format!("Function : {kernel}"))
        .unwrap_or_else(|| panic!("{kernel} not in {image}:\n{text}"));
    let rest = &text[start + 1..];
    rest[..rest.find("Function :").unwrap_or(rest.len())].to_string()
}

/// A library of two units (a small helper and a kernel using it) prelinked, and an
/// application whose kernel calls the helper: the staged link is the one-step link's
/// image byte for byte, by nvlink and by nvlinkrs, the helper inlined into the
/// application's kernel (no CALL in its SASS, which the non-LTO link of the same code
/// has), and nvdisasm reads the image.
#[test]
fn prelinked_library_is_inlined_across_the_boundary() {
    let d = scratch("inline");
    let cu = cuda();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/prelink");
    let nvcc = |args: &[&str]| {
        let (rc, err) = tool(&cu.join("bin/nvcc"), args, &d);
        assert_eq!(rc, 0, "nvcc {args:?}: {err}");
    };
    for f in ["vecmath", "libkern", "app"] {
        let cu_file = src.join(format!("{f}.cu"));
        let cu_file = cu_file.to_str().unwrap();
        nvcc(&[
            "-dc",
            "-dlto",
            "-arch=sm_90",
            cu_file,
            "-o",
            &format!("{f}.o"),
        ]);
        nvcc(&["-dc", "-arch=sm_90", cu_file, "-o", &format!("{f}_dc.o")]);
    }
    staged_matches_one_step(&d, &["vecmath.o", "libkern.o"], &["app.o"]);
    for image in ["nv.cubin", "rs.cubin"] {
        let k = sass_of(&d, image, "_Z10app_kernelPKfPfi");
        assert!(!k.contains("CALL"), "{image}: the helper is called:\n{k}");
        let (rc, err) = tool(&cu.join("bin/nvdisasm"), &[image], &d);
        assert_eq!(rc, 0, "nvdisasm {image}: {err}");
    }
    // the check can fail: without LTO the kernel calls the helper
    let lib = format!("-L{}", cu.join("lib").display());
    let (rc, err) = nvlink(
        &[
            "-m64",
            "-arch=sm_90",
            &lib,
            "app_dc.o",
            "vecmath_dc.o",
            "libkern_dc.o",
            "-lcudadevrt",
            "-o",
            "dc.cubin",
        ],
        &d,
    );
    assert_eq!(rc, 0, "{err}");
    assert!(sass_of(&d, "dc.cubin", "_Z10app_kernelPKfPfi").contains("CALL"));
}

/// `inspect` (text and JSON) shows a container the writer made exactly as it shows
/// cicc's: cicc's `.ltoir` remade from its plain IR and key reads the same, and the
/// plain key-0 form differs only in its key and payload line.
#[test]
fn inspect_shows_a_written_container_as_ciccs() {
    let d = scratch("inspect");
    let theirs = std::fs::read(fixtures().join("saxpy.ltoir")).unwrap();
    let (h, _) = container::parse(&theirs, "saxpy.ltoir").unwrap();
    let key = h.key.unwrap();
    let mut plain = LtoIr::read(&theirs, "saxpy.ltoir").unwrap().payload;
    nvlinkrs::ir::unscramble(&mut plain, key);
    let mut remade = LtoIr::new(h.arch().unwrap(), plain.clone());
    remade.scramble(key);
    std::fs::write(d.join("theirs.ltoir"), &theirs).unwrap();
    std::fs::write(d.join("ours.ltoir"), remade.write()).unwrap();
    std::fs::write(
        d.join("plain.ltoir"),
        LtoIr::new(h.arch().unwrap(), plain).write(),
    )
    .unwrap();
    let show = |args: &[&str], f: &str| {
        let (rc, out) = nvlinkrs(&[&["inspect"], args, &[f]].concat(), &d);
        assert_eq!(rc, 0, "{out}");
        out.replace(f, "FILE")
    };
    for args in [&[][..], &["--json"][..]] {
        let want = show(args, "theirs.ltoir");
        assert_eq!(show(args, "ours.ltoir"), want, "inspect {args:?}");
        let plain = show(args, "plain.ltoir");
        let differ: Vec<_> = want
            .lines()
            .zip(plain.lines())
            .filter(|(a, b)| a != b)
            .collect();
        assert_eq!(want.lines().count(), plain.lines().count(), "{plain}");
        assert!(differ.len() <= 2, "inspect {args:?}: {differ:?}");
        assert!(
            plain.contains("plain LLVM bitcode")
                || plain.contains("0x00000000")
                || plain.contains("\"key\": 0"),
            "{plain}"
        );
    }
}

/// Bad input to `--emit-ltoir`: each refused with exit 1, a message naming the file or
/// option, and no output written (an output already there left as it was); the output
/// may be one of the inputs.
#[test]
fn emit_ltoir_refuses_bad_input_cleanly() {
    let d = scratch("bad");
    let fx = fixtures();
    for f in [
        "saxpy_dlto.o",
        "scale_dlto.o",
        "saxpy_dc.o",
        "saxpy_allarch_lto.o",
        "saxpy.ltoir",
    ] {
        std::fs::copy(fx.join(f), d.join(f)).unwrap();
    }
    let mut cut = std::fs::read(fx.join("saxpy.ltoir")).unwrap();
    cut.truncate(30);
    std::fs::write(d.join("cut.ltoir"), &cut).unwrap();
    let mut flipped = std::fs::read(fx.join("saxpy.ltoir")).unwrap();
    let n = flipped.len();
    for b in &mut flipped[60..n - 8] {
        *b ^= 0x5A;
    }
    std::fs::write(d.join("flipped.ltoir"), &flipped).unwrap();
    std::fs::write(d.join("old.ltoir"), b"old").unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["-lto", "--emit-ltoir", "-arch=sm_90", "saxpy_dlto.o"],
            "option '--emit-ltoir' needs -lto (or -dlto) and -r",
        ),
        (
            &["-r", "--emit-ltoir", "-arch=sm_90", "saxpy_dlto.o"],
            "option '--emit-ltoir' needs -lto (or -dlto) and -r",
        ),
        (
            &[
                "-lto",
                "-r",
                "--emit-ltoir",
                "-arch=sm_90",
                "saxpy_dlto.o",
                "saxpy_dc.o",
            ],
            "'saxpy_dc.o' holds no LTO IR for sm_90",
        ),
        (
            &["-lto", "-r", "--emit-ltoir", "-arch=sm_90", "cut.ltoir"],
            "'cut.ltoir'",
        ),
        (
            &[
                "-lto",
                "-r",
                "--emit-ltoir",
                "-arch=sm_90",
                "saxpy_dlto.o",
                "flipped.ltoir",
            ],
            "'flipped.ltoir'",
        ),
        // cicc's sm_100 IR comes from its newer LLVM, whose bitcode LLVM 22 cannot read
        (
            &[
                "-lto",
                "-r",
                "--emit-ltoir",
                "-arch=sm_100",
                "saxpy_allarch_lto.o",
            ],
            "'saxpy_allarch_lto.o': LLVM 22 cannot read this IR",
        ),
    ];
    for (args, want) in cases {
        let args = [*args, &["-o", "old.ltoir"]].concat();
        let (rc, err) = nvlinkrs(&args, &d);
        assert_eq!(rc, 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: want {want:?} in {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert_eq!(
            std::fs::read(d.join("old.ltoir")).unwrap(),
            b"old",
            "{args:?}"
        );
    }
    // a host-object output that cannot be written: exit 1 naming it, nothing left
    let (rc, err) = nvlinkrs(
        &[
            "-lto",
            "-r",
            "--emit-ltoir",
            "-arch=sm_90",
            "saxpy_dlto.o",
            "-o",
            "nodir/lib.o",
        ],
        &d,
    );
    assert_eq!(rc, 1, "{err}");
    assert!(
        err.contains("nodir/lib.o") && !err.contains("panicked"),
        "{err}"
    );
    assert!(!d.join("nodir").exists());
    // the output one of the inputs: read before it is replaced
    let (rc, err) = nvlinkrs(
        &[
            "-lto",
            "-r",
            "--emit-ltoir",
            "-arch=sm_90",
            "saxpy_dlto.o",
            "-o",
            "lib.ltoir",
        ],
        &d,
    );
    assert_eq!(rc, 0, "{err}");
    let (rc, err) = nvlinkrs(
        &[
            "-lto",
            "-r",
            "--emit-ltoir",
            "-arch=sm_90",
            "lib.ltoir",
            "scale_dlto.o",
            "-o",
            "lib.ltoir",
        ],
        &d,
    );
    assert_eq!(rc, 0, "{err}");
    let (rc, err) = nvlinkrs(
        &[
            "-lto",
            "-r",
            "--emit-ltoir",
            "-arch=sm_90",
            "saxpy_dlto.o",
            "scale_dlto.o",
            "-o",
            "both.ltoir",
        ],
        &d,
    );
    assert_eq!(rc, 0, "{err}");
    assert!(
        std::fs::read(d.join("lib.ltoir")).unwrap() == std::fs::read(d.join("both.ltoir")).unwrap()
    );
}

/// The fatbin of a host-object `--emit-ltoir` output is laid out as fatbinary 13.5 lays
/// out an uncompressed NVVM member of the same container (which stores no option string
/// for it: byte for byte with ours given none), and the object holds it with the
/// option string nvcc's `-dc -dlto` members carry.
#[test]
fn host_object_fatbin_is_fatbinarys_layout() {
    let d = scratch("fatbinary");
    let fx = fixtures();
    for f in ["saxpy_dlto.o", "scale_dlto.o"] {
        std::fs::copy(fx.join(f), d.join(f)).unwrap();
    }
    let emit = |out: &str| {
        let args = [
            "-lto",
            "-r",
            "--emit-ltoir",
            "-arch=sm_90",
            "saxpy_dlto.o",
            "scale_dlto.o",
            "-o",
            out,
        ];
        let (rc, err) = nvlinkrs(&args, &d);
        assert_eq!(rc, 0, "{err}");
    };
    emit("lib.ltoir");
    emit("lib.o");
    let (rc, err) = tool(
        &cuda().join("bin/fatbinary"),
        &[
            "-64",
            "--compress=false",
            "--image3=kind=nvvm,sm=90,file=lib.ltoir",
            "--create=fb.fatbin",
        ],
        &d,
    );
    assert_eq!(rc, 0, "{err}");
    let ltoir = std::fs::read(d.join("lib.ltoir")).unwrap();
    let arch = nvlinkrs::arch::Arch::new(90, nvlinkrs::arch::Variant::Plain);
    let theirs = std::fs::read(d.join("fb.fatbin")).unwrap();
    assert!(nvlinkrs::fatbin::object::ltoir_fatbin(arch, &ltoir, "") == theirs);
    let ours = nvlinkrs::fatbin::object::ltoir_fatbin(
        arch,
        &ltoir,
        "-ftz=0 -prec_div=1 -prec_sqrt=1 -fmad=1 ",
    );
    let obj = std::fs::read(d.join("lib.o")).unwrap();
    assert!(obj.windows(ours.len()).any(|w| w == ours));
}

/// A library kernel that only the library's own host code launches: its host object's
/// table names it, and the prelinked `.ltoir` carries that table (tag 0x4E48), so the
/// staged link by nvlinkrs keeps it and is nvlink's one-step image byte for byte.
/// nvlink reads no such table from a `.ltoir` and drops the kernel (the limit docs/features.md
/// states; pinned here so that a change shows).
#[test]
fn prelinked_library_keeps_what_its_host_code_launches() {
    let d = scratch("hostrefs");
    let cu = cuda();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/prelink");
    for f in ["vecmath", "libkern", "libhost", "app"] {
        let cu_file = src.join(format!("{f}.cu"));
        let (rc, err) = tool(
            &cu.join("bin/nvcc"),
            &[
                "-dc",
                "-dlto",
                "-arch=sm_90",
                cu_file.to_str().unwrap(),
                "-o",
                &format!("{f}.o"),
            ],
            &d,
        );
        assert_eq!(rc, 0, "{err}");
    }
    let lib = ["vecmath.o", "libkern.o", "libhost.o"];
    let emit = [
        &["-lto", "-r", "--emit-ltoir", "-arch=sm_90"],
        &lib[..],
        &["-o", "lib.ltoir"],
    ]
    .concat();
    let (rc, err) = nvlinkrs(&emit, &d);
    assert_eq!(rc, 0, "{err}");
    // inspect shows what the container carries for a later link
    let (rc, shown) = nvlinkrs(&["inspect", "lib.ltoir"], &d);
    assert_eq!(rc, 0);
    assert!(
        shown.contains("host references .nvHRKE (nvlinkrs tag 0x4e48): _Z9lib_scale*")
            && shown.contains(
                "option consensus (nvlinkrs tag 0x4e4c): -ftz=0 -prec_div=1 -prec_sqrt=1 -fmad=1\n"
            ),
        "{shown}"
    );
    let one = final_link(
        &["app.o", "vecmath.o", "libkern.o", "libhost.o"],
        "one.cubin",
    );
    assert_eq!(nvlink(&strs(&one), &d).0, 0);
    let staged = ["app.o", "lib.ltoir"];
    let (rc, err) = nvlinkrs(&strs(&final_link(&staged, "rs.cubin")), &d);
    assert_eq!(rc, 0, "{err}");
    assert!(
        std::fs::read(d.join("rs.cubin")).unwrap() == std::fs::read(d.join("one.cubin")).unwrap(),
        "nvlinkrs' staged image is not the one-step image"
    );
    assert_eq!(nvlink(&strs(&final_link(&staged, "nv.cubin")), &d).0, 0);
    let has = |f: &str| {
        let out = Command::new(cu.join("bin/cuobjdump"))
            .args(["-symbols", f])
            .current_dir(&d)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).contains("_Z9lib_scalePfi")
    };
    assert!(has("one.cubin") && has("rs.cubin"));
    assert!(
        !has("nv.cubin"),
        "nvlink now keeps the kernel: update the limit in docs/features.md"
    );
    // as a host object (`-o lib.o`) the tables are its `.nvHR*` sections, which nvlink
    // reads: its staged link keeps the kernel too, the one-step image byte for byte, and
    // inspect shows the object's one member and table
    let emit_o = [&emit[..emit.len() - 1], &["lib.o"]].concat();
    let (rc, err) = nvlinkrs(&emit_o, &d);
    assert_eq!(rc, 0, "{err}");
    let (rc, shown) = nvlinkrs(&["inspect", "lib.o"], &d);
    assert_eq!(rc, 0);
    for line in [
        "lib.o: host object, fatbin wrapper v1, .nvHRKE \"_Z9lib_scale*\"\n",
        "  fatbin container in __nv_relfatbin at 0x40, version 1, ",
        " bytes, 1 members\n    ltoir sm_90 code version [1,67], flags 0x11, ",
        " bytes stored (none), options \"-ftz=0 -prec_div=1 -prec_sqrt=1 -fmad=1 \" -> ",
        "host references .nvHRKE (nvlinkrs tag 0x4e48): _Z9lib_scale*\n",
    ] {
        assert!(shown.contains(line), "want {line:?} in {shown}");
    }
    let staged = ["app.o", "lib.o"];
    for f in ["nv_o.cubin", "rs_o.cubin"] {
        let link = final_link(&staged, f);
        let (rc, err) = match f.starts_with("nv") {
            true => nvlink(&strs(&link), &d),
            false => nvlinkrs(&strs(&link), &d),
        };
        assert_eq!(rc, 0, "{f}: {err}");
        assert!(
            std::fs::read(d.join(f)).unwrap() == std::fs::read(d.join("one.cubin")).unwrap(),
            "{f} is not the one-step image"
        );
    }
}

/// A mixed program: a CUDA C++ kernel (nvcc -dc -dlto) calling a device function that
/// clang-22 compiled to LLVM bitcode (-fgpu-rdc, device side), in one -lto link, which
/// nvlinkrs refused by name before. The image has the kernel and clang's variable, the
/// call resolved (inlined: no CALL left), cuobjdump and nvdisasm read it, and it is
/// byte for byte what nvlink makes of the same IR prelinked (`--emit-ltoir`, then
/// `nvlink -lto -nvvm-latest`); -split-compile-extended and -kernels-used work on it.
#[test]
fn mixed_nvcc_and_clang_ir_link() {
    let d = scratch("mixed");
    let cu = cuda();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mixed");
    let (rc, err) = tool(
        &cu.join("bin/nvcc"),
        &[
            "-dc",
            "-dlto",
            "-arch=sm_90",
            src.join("kernel.cu").to_str().unwrap(),
            "-o",
            "kernel.o",
        ],
        &d,
    );
    assert_eq!(rc, 0, "{err}");
    clang_bitcode(&d, "clangfn");
    let mut link = final_link(&["kernel.o", "clangfn.bc"], "mixed.cubin");
    link.retain(|a| a != "-nvvm-latest");
    let (rc, err) = nvlinkrs(&strs(&link), &d);
    assert_eq!(rc, 0, "{err}");
    let k = sass_of(&d, "mixed.cubin", "_Z10mix_kernelPKfPfi");
    assert!(!k.contains("CALL"), "{k}");
    let (rc, syms) = tool(&cu.join("bin/cuobjdump"), &["-symbols", "mixed.cubin"], &d);
    assert_eq!(rc, 0);
    assert!(
        syms.contains("clang_calls") && syms.contains("_Z10mix_kernelPKfPfi"),
        "{syms}"
    );
    let (rc, err) = tool(&cu.join("bin/nvdisasm"), &["mixed.cubin"], &d);
    assert_eq!(rc, 0, "{err}");
    // nvlink on the same IR, prelinked
    let (rc, err) = nvlinkrs(
        &[
            "-lto",
            "-r",
            "--emit-ltoir",
            "-arch=sm_90",
            "kernel.o",
            "clangfn.bc",
            "-o",
            "mixed.ltoir",
        ],
        &d,
    );
    assert_eq!(rc, 0, "{err}");
    let (rc, err) = nvlink(&strs(&final_link(&["mixed.ltoir"], "nv.cubin")), &d);
    assert_eq!(rc, 0, "{err}");
    assert!(
        std::fs::read(d.join("nv.cubin")).unwrap() == std::fs::read(d.join("mixed.cubin")).unwrap()
    );
    for extra in [
        "-split-compile-extended=2",
        "-kernels-used=_Z10mix_kernelPKfPfi",
    ] {
        let mut l = link.clone();
        l.insert(0, extra.to_string());
        *l.last_mut().unwrap() = "x.cubin".into();
        let (rc, err) = nvlinkrs(&strs(&l), &d);
        assert_eq!(rc, 0, "{extra}: {err}");
        let r = nvlinkrs::elf::equiv::compare(
            &std::fs::read(d.join("mixed.cubin")).unwrap(),
            &std::fs::read(d.join("x.cubin")).unwrap(),
        )
        .unwrap();
        assert!(r.equivalent(), "{extra}: {:?}", r.differences);
    }
}

/// Options `--emit-ltoir` cannot carry out (it compiles nothing, keeps no kernel list
/// and stores no link option nvlink would read) are refused by name, exit 1, no output;
/// before, each exited 0 with the same library as without it.
#[test]
fn emit_ltoir_refuses_options_it_cannot_carry_out() {
    let d = scratch("options");
    std::fs::copy(fixtures().join("saxpy_dlto.o"), d.join("saxpy_dlto.o")).unwrap();
    for (given, name) in [
        ("-kernels-used=saxpy", "-kernels-used"),
        ("-variables-used=v", "-variables-used"),
        ("-ignore-host-info", "-ignore-host-info"),
        ("-Xnvvm=-opt=0", "-Xnvvm"),
        ("-Xptxas=-v", "-Xptxas"),
        ("-maxrregcount=32", "-maxrregcount"),
        ("-Ofc=max", "-Ofast-compile"),
        ("-split-compile=2", "-split-compile"),
        ("-split-compile-extended=2", "-split-compile-extended"),
        ("-dump-callgraph", "-dump-callgraph"),
        ("-force-partial-lto", "-force-partial-lto"),
    ] {
        let args = [
            given,
            "-lto",
            "-r",
            "--emit-ltoir",
            "-arch=sm_90",
            "saxpy_dlto.o",
            "-o",
            "lib.ltoir",
        ];
        let (rc, err) = nvlinkrs(&args, &d);
        assert_eq!(rc, 1, "{given}: {err}");
        let want = format!(
            "nvlinkrs fatal   : option '{name}' is not carried out by '--emit-ltoir', which links IR and compiles nothing (give it to the link that compiles the library); refusing rather than ignoring it\n"
        );
        assert_eq!(err, want, "{given}");
        assert!(!d.join("lib.ltoir").exists(), "{given}");
    }
    // what it carries out still links
    let (rc, err) = nvlinkrs(
        &[
            "-lto",
            "-r",
            "--emit-ltoir",
            "-nvvm-latest",
            "-arch=sm_90",
            "saxpy_dlto.o",
            "-o",
            "lib.ltoir",
        ],
        &d,
    );
    assert_eq!(rc, 0, "{err}");
}

/// `--help` says what `-nvvm-latest` and `--emit-ltoir` do (it said `-nvvm-latest` was
/// refused, and that nvlinkrs took a library without it).
#[test]
fn help_says_what_nvvm_latest_and_emit_ltoir_do() {
    let (rc, out) = nvlinkrs(&["--help"], Path::new(env!("CARGO_TARGET_TMPDIR")));
    assert_eq!(rc, 0);
    let line = |o: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(o))
            .unwrap_or_else(|| panic!("{o}: {out}"))
            .to_string()
    };
    assert!(
        line("-nvvm-latest").ends_with(
            "With LTO: libNVVM's newer NVVM for every target (added for IR nvlinkrs wrote)"
        ),
        "{out}"
    );
    assert!(
        line("-emit-ltoir").contains("(as a host object holding it when the output is named *.o)")
            && line("-emit-ltoir").ends_with("a later -lto link takes with -nvvm-latest up to sm_90 (nvlinkrs adds it; nvlink needs it given)"),
        "{out}"
    );
}

/// clang-22's device bitcode of `tests/fixtures/mixed/NAME.cu` (CUDA, -fgpu-rdc), as
/// `NAME.bc` in `d`.
fn clang_bitcode(d: &Path, name: &str) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mixed");
    let (rc, err) = tool(
        Path::new("/usr/lib/llvm-22/bin/clang"),
        &[
            "-x",
            "cuda",
            "--cuda-device-only",
            "-fgpu-rdc",
            "-emit-llvm",
            "-c",
            "-O2",
            "--cuda-gpu-arch=sm_90",
            "--cuda-feature=+ptx80",
            "-nocudainc",
            "-nocudalib",
            "-Wno-unknown-cuda-version",
            src.join(format!("{name}.cu")).to_str().unwrap(),
            "-o",
            &format!("{name}.bc"),
        ],
        d,
    );
    assert_eq!(rc, 0, "clang-22 (scripts/setup.sh installs it): {err}");
}

/// The kernels cuobjdump lists in an image.
fn kernels_of(d: &Path, image: &str) -> Vec<String> {
    let (rc, syms) = tool(&cuda().join("bin/cuobjdump"), &["-symbols", image], d);
    assert_eq!(rc, 0, "{syms}");
    let mut k: Vec<String> = syms
        .lines()
        .filter(|l| l.contains(" ENTRY "))
        .filter_map(|l| l.split_whitespace().last().map(String::from))
        .collect();
    k.sort();
    k
}

/// A mixed link whichever side comes first: the linked module carries cicc's data layout
/// and triple (libNVVM refused clang's, "Target-incompatible DataLayout", when clang's
/// bitcode came first), and clang's kernel is kept as cicc's are: with the host objects'
/// tables (clang writes none), with -ignore-host-info, in a prelinked library that
/// nvlink links, and named by -kernels-used (libNVVM broke the module before: "wrong
/// initializer for intrinsic global variable"). A module whose layout disagrees on a
/// type is refused by name.
#[test]
fn mixed_link_in_any_order_keeps_clangs_kernels() {
    let d = scratch("mixed-order");
    let cu = cuda();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mixed");
    let (rc, err) = tool(
        &cu.join("bin/nvcc"),
        &[
            "-dc",
            "-dlto",
            "-arch=sm_90",
            src.join("kernel.cu").to_str().unwrap(),
            "-o",
            "kernel.o",
        ],
        &d,
    );
    assert_eq!(rc, 0, "{err}");
    clang_bitcode(&d, "clangfn");
    clang_bitcode(&d, "clangkernel");
    let both = ["_Z10mix_kernelPKfPfi", "clang_kernel"];
    for (i, inputs) in [
        ["clangkernel.bc", "clangfn.bc", "kernel.o"],
        ["kernel.o", "clangfn.bc", "clangkernel.bc"],
    ]
    .iter()
    .enumerate()
    {
        for extra in ["", "-ignore-host-info"] {
            let mut link = final_link(inputs, "x.cubin");
            link.retain(|a| a != "-nvvm-latest");
            if !extra.is_empty() {
                link.insert(0, extra.to_string());
            }
            let (rc, err) = nvlinkrs(&strs(&link), &d);
            assert_eq!(rc, 0, "{inputs:?} {extra}: {err}");
            assert_eq!(kernels_of(&d, "x.cubin"), both, "{inputs:?} {extra}");
        }
        let mut link = final_link(inputs, "used.cubin");
        link.insert(0, "-kernels-used=clang_kernel".into());
        let (rc, err) = nvlinkrs(&strs(&link), &d);
        assert_eq!(rc, 0, "{inputs:?} -kernels-used: {err}");
        assert_eq!(kernels_of(&d, "used.cubin"), ["clang_kernel"]);
        // prelinked, then linked by nvlink
        let lib = format!("lib{i}.ltoir");
        let emit = [
            &["-lto", "-r", "--emit-ltoir", "-arch=sm_90"],
            &inputs[..],
            &["-o", &lib],
        ]
        .concat();
        let (rc, err) = nvlinkrs(&emit, &d);
        assert_eq!(rc, 0, "{inputs:?} --emit-ltoir: {err}");
        let (rc, err) = nvlink(&strs(&final_link(&[&lib], "nv.cubin")), &d);
        assert_eq!(
            rc, 0,
            "{inputs:?}: nvlink against the prelinked library: {err}"
        );
        assert_eq!(kernels_of(&d, "nv.cubin"), both, "{inputs:?}");
    }
    // a library of clang's bitcode alone (cicc's NVVM IR version given it): the final
    // link by nvlinkrs keeps clang's kernel, stored as launched (clang writes no table)
    let emit = [
        "-lto",
        "-r",
        "--emit-ltoir",
        "-arch=sm_90",
        "clangkernel.bc",
        "clangfn.bc",
        "-o",
        "clang.ltoir",
    ];
    let (rc, err) = nvlinkrs(&emit, &d);
    assert_eq!(rc, 0, "{err}");
    let (rc, err) = nvlinkrs(
        &strs(&final_link(&["kernel.o", "clang.ltoir"], "s.cubin")),
        &d,
    );
    assert_eq!(rc, 0, "{err}");
    assert_eq!(kernels_of(&d, "s.cubin"), both);
    // a failed mixed link says what is true: the module was linked by LLVM 22 and
    // compiled with -nvvm-latest (before: "holds IR written by ... (nvlinkrs
    // --emit-ltoir), which libNVVM 13.5 reads for sm_90 only with -nvvm-latest")
    let mut link = final_link(&["kernel.o", "clangfn.bc"], "f.cubin");
    link.retain(|a| a != "-nvvm-latest");
    link.insert(0, "-Xnvvm=-bogus".into());
    let (rc, err) = nvlinkrs(&strs(&link), &d);
    assert_eq!(rc, 1, "{err}");
    assert!(
        err.contains("  'kernel.o+clangfn.bc' is the one module LLVM 22 linked from the mixed link's inputs, compiled by libNVVM's newer NVVM (-nvvm-version=nvvm-latest)\n")
            && !err.contains("--emit-ltoir"),
        "{err}"
    );
    // a layout that cannot be made cicc's: 64-bit integers aligned to 4
    let (rc, ll) = tool(
        Path::new("/usr/lib/llvm-22/bin/llvm-dis"),
        &["clangkernel.bc", "-o", "-"],
        &d,
    );
    assert_eq!(rc, 0);
    let ll: String = ll
        .lines()
        .map(|l| {
            if l.starts_with("target datalayout") {
                "target datalayout = \"e-i64:32-n16:32:64\"".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(d.join("bad.ll"), ll).unwrap();
    let (rc, err) = tool(
        Path::new("/usr/lib/llvm-22/bin/llvm-as"),
        &["bad.ll", "-o", "bad.bc"],
        &d,
    );
    assert_eq!(rc, 0, "{err}");
    for args in [
        &[
            "-lto",
            "-arch=sm_90",
            "bad.bc",
            "kernel.o",
            "clangfn.bc",
            "-o",
            "bad.cubin",
        ][..],
        &[
            "-lto",
            "-r",
            "--emit-ltoir",
            "-arch=sm_90",
            "kernel.o",
            "bad.bc",
            "clangfn.bc",
            "-o",
            "bad.ltoir",
        ],
    ] {
        let (rc, err) = nvlinkrs(args, &d);
        assert_eq!(rc, 1, "{err}");
        assert!(
            err.contains("'bad.bc': its data layout 'e-i64:32-n16:32:64' cannot be made libNVVM's")
                && err.contains("i64 is 8 bytes aligned to 4 there, 8 aligned to 8 in libNVVM's"),
            "{err}"
        );
        assert!(!d.join("bad.cubin").exists() && !d.join("bad.ltoir").exists());
    }
}

/// Runs nvlinkrs in `dir` with `NVLINKRS_LLVM_HELPER` set to `helper`: exit code and
/// stderr.
fn nvlinkrs_with_helper(args: &[&str], dir: &Path, helper: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nvlinkrs"))
        .args(args)
        .current_dir(dir)
        .env("NVLINKRS_LLVM_HELPER", helper)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The helper that links the IR misbehaves: it answers something that is not bitcode
/// and exits 0 (a wrong `NVLINKRS_LLVM_HELPER`, a cut answer), it is killed, it answers
/// without end, it does nothing, or it leaves a process holding its output (killed with
/// the helper's process group, or, outside it, not waited for). Each fails
/// the `--emit-ltoir` link with exit 1 and a message naming the input, and the output
/// is left as it was (nvlinkrs wrote the helper's garbage as a `.ltoir` before, and
/// waited for ever on the last three).
#[test]
fn emit_ltoir_refuses_a_misbehaving_helper() {
    use std::os::unix::fs::PermissionsExt;
    let d = scratch("helper");
    std::fs::copy(fixtures().join("saxpy_dlto.o"), d.join("saxpy_dlto.o")).unwrap();
    let cases = [
        (
            "garbage",
            "cat >/dev/null; echo not bitcode",
            "no valid LLVM bitcode",
        ),
        ("empty", "cat >/dev/null; exit 0", "no valid LLVM bitcode"),
        (
            "cut",
            r"cat >/dev/null; printf 'BC\300\336\065\024\000\000\005\000\000\000'",
            "no valid LLVM bitcode",
        ),
        ("killed", "cat >/dev/null; kill -9 $$", "SIGKILL"),
        // (these three hung the link, or filled memory, before)
        (
            "endless",
            "cat >/dev/null; exec cat /dev/zero",
            "nvlinkrs-llvm answered more than 67",
        ),
        (
            "stuck",
            "exec sleep 1000",
            "nvlinkrs-llvm used no CPU time for 10 s and was stopped",
        ),
        // (a process it leaves in its group goes with it: its answer is what it wrote)
        (
            "left-behind",
            "cat >/dev/null; sleep 1000 &\nexit 0",
            "no valid LLVM bitcode",
        ),
        // (one that left the group holds the output: not waited for)
        (
            "left-open",
            "cat >/dev/null; setsid sleep 5 &\nexit 0",
            "nvlinkrs-llvm ended but its output stayed open",
        ),
    ];
    for (name, body, want) in cases {
        let helper = d.join(format!("{name}.sh"));
        std::fs::write(&helper, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(d.join("out.ltoir"), b"old").unwrap();
        let (rc, err) = nvlinkrs_with_helper(
            &[
                "-lto",
                "-r",
                "--emit-ltoir",
                "-arch=sm_90",
                "saxpy_dlto.o",
                "-o",
                "out.ltoir",
            ],
            &d,
            &helper,
        );
        assert_eq!(rc, 1, "{name}: {err}");
        assert!(
            err.contains("'saxpy_dlto.o'") && err.contains(want),
            "{name}: want {want:?} in {err}"
        );
        assert!(!err.contains("panicked"), "{name}: {err}");
        assert_eq!(
            std::fs::read(d.join("out.ltoir")).unwrap(),
            b"old",
            "{name}"
        );
    }
}

/// A prelinked `.ltoir` whose nvlinkrs tags were altered (a library vendor's file, or a
/// damaged one): the consensus may carry only the options nvlink agrees on across
/// objects (so a `.ltoir` passes libNVVM nothing its objects could not: no `-g`, no other
/// option, no path), and a tag outside the option data, a string without its NUL, one
/// not UTF-8, or a host-reference line that is not a table is refused with the file and
/// offset. Before, each was linked (exit 0): the unknown words ignored, the damaged
/// tables dropped or read lossily, which silently changes which kernels are kept.
#[test]
fn altered_stored_tags_are_refused_with_the_offset() {
    use nvlinkrs::arch::{Arch, Variant};
    use nvlinkrs::ir::write::Pair;
    use nvlinkrs::lto::staged::{CONSENSUS_TAG, HOST_REFS_TAG};
    let d = scratch("tags");
    let fx = fixtures();
    for f in ["main_dlto.o", "saxpy_dlto.o", "scale_dlto.o"] {
        std::fs::copy(fx.join(f), d.join(f)).unwrap();
    }
    let (rc, err) = nvlinkrs(
        &[
            "-lto",
            "-r",
            "--emit-ltoir",
            "-arch=sm_90",
            "saxpy_dlto.o",
            "scale_dlto.o",
            "-o",
            "lib.ltoir",
        ],
        &d,
    );
    assert_eq!(rc, 0, "{err}");
    let lib = LtoIr::read(&std::fs::read(d.join("lib.ltoir")).unwrap(), "lib.ltoir").unwrap();
    let math = "-ftz=0 -prec_div=1 -prec_sqrt=1 -fmad=1 ";
    // (tag, its value past the key, the option data after the key; what the error says)
    let cases: Vec<(u16, u32, Vec<u8>, &str)> = vec![
        (
            CONSENSUS_TAG,
            4,
            format!("-g {math}\0").into_bytes(),
            "at offset 0x30: the option consensus (nvlinkrs tag 0x4e4c) holds '-g'",
        ),
        (
            CONSENSUS_TAG,
            4,
            format!("{math}-maxreg 32 -Xnvvm -opt=0\0").into_bytes(),
            "holds '-Xnvvm'",
        ),
        (
            CONSENSUS_TAG,
            4,
            format!("{math}-maxreg lib/x\0").into_bytes(),
            "gives '-maxreg' the value 'lib/x', which is not a number",
        ),
        (
            CONSENSUS_TAG,
            0xFFFF_FFFF,
            format!("{math}\0").into_bytes(),
            "the tag's value 4294967295 is past the option data",
        ),
        (
            CONSENSUS_TAG,
            4,
            math.as_bytes().to_vec(),
            "has no NUL before the IR",
        ),
        (
            HOST_REFS_TAG,
            4,
            b".nvHRKE _Z5saxpy\xff\n\0".to_vec(),
            "at offset 0x40: the host-reference tables (nvlinkrs tag 0x4e48) is not UTF-8",
        ),
        (
            HOST_REFS_TAG,
            4,
            b".nvHRKE a  b\n\0".to_vec(),
            "'.nvHRKE a  b' is not a table",
        ),
        (
            HOST_REFS_TAG,
            4,
            b".nvHRKE a\n.nvXX b\n\0".to_vec(),
            "at offset 0x3a: the host-reference tables (nvlinkrs tag 0x4e48): '.nvXX b' is not a table",
        ),
        (HOST_REFS_TAG, 4, b".nvHRKE a\0".to_vec(), "no newline"),
    ];
    let link = final_link(&["main_dlto.o", "bad.ltoir"], "bad.cubin");
    for (tag, value, text, want) in cases {
        let mut c = LtoIr::new(Arch::new(90, Variant::Plain), lib.payload.clone());
        c.llvm_version = lib.llvm_version;
        c.pairs.push(Pair::new(tag, value));
        c.option_data.extend_from_slice(&text);
        while !c.option_data.len().is_multiple_of(4) {
            c.option_data.push(0);
        }
        std::fs::write(d.join("bad.ltoir"), c.write()).unwrap();
        let _ = std::fs::remove_file(d.join("bad.cubin"));
        let (rc, err) = nvlinkrs(&strs(&link), &d);
        assert_eq!(rc, 1, "{want}: {err}");
        assert!(
            err.contains("'bad.ltoir' at offset 0x") && err.contains(want),
            "want {want:?} in {err}"
        );
        assert!(!d.join("bad.cubin").exists(), "{want}");
        // inspect shows it as a warning
        let (rc, shown) = nvlinkrs(&["inspect", "bad.ltoir"], &d);
        assert_eq!(rc, 0, "{shown}");
        assert!(
            shown.contains("warning: ") && shown.contains(want),
            "{shown}"
        );
    }
    // what --emit-ltoir writes is read back: the final link goes through
    let ok = final_link(&["main_dlto.o", "lib.ltoir"], "ok.cubin");
    let (rc, err) = nvlinkrs(&strs(&ok), &d);
    assert_eq!(rc, 0, "{err}");
}

/// A host object whose host-reference table names something with a line break (or a
/// space) in it: `--emit-ltoir` refuses it by the object's name, where it wrote the name
/// as it was and a later link read it back as other names, or as a table of its own.
#[test]
fn emit_ltoir_refuses_a_host_reference_it_cannot_store() {
    let d = scratch("hostref-name");
    let mut obj = std::fs::read(fixtures().join("main_dlto.o")).unwrap();
    let name = b"_Z5saxpy*";
    let at: Vec<_> = obj
        .windows(name.len())
        .enumerate()
        .filter(|(_, w)| w == name)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(at.len(), 1, "the .nvHRKE entry only");
    obj[at[0]..at[0] + name.len()].copy_from_slice(b"_Z5sa\npy*");
    std::fs::write(d.join("main.o"), obj).unwrap();
    let (rc, err) = nvlinkrs(
        &[
            "-lto",
            "-r",
            "--emit-ltoir",
            "-arch=sm_90",
            "main.o",
            "-o",
            "lib.ltoir",
        ],
        &d,
    );
    assert_eq!(rc, 1, "{err}");
    assert!(
        err.contains(r#"'main.o': its .nvHRKE table names "_Z5sa\npy*""#),
        "{err}"
    );
    assert!(!d.join("lib.ltoir").exists());
}

/// NVSHMEM's bitcode library (`libnvshmem_device_sm_90.bc`, 53 MB, the 3.8 wheel's) in a
/// mixed link (issue 35 item 4): a device library that defines no kernel is linked
/// lazily, only what the program names and what that reaches. Linked whole, libNVVM ran
/// for half an hour on it and the link was killed. The ring kernel calls the library's
/// device API as externs; the image has the kernel with what libNVVM inlined, the
/// library functions it left as calls compiled as functions of their own (relocatable,
/// as the library's archive has them: ptxas' whole-program mode inlined them all into the
/// kernel, at 2.3 times its time), and leaves undefined only what the driver provides.
/// nvlink refuses bitcode, as before.
#[test]
fn nvshmem_bitcode_library_links_lazily() {
    let d = scratch("nvshmem-bc");
    let fx = fixtures().join("nvshmem");
    let (ring, bc) = (
        fx.join("ringext_lto90.o"),
        fx.join("lib/libnvshmem_device_sm_90.bc"),
    );
    let lib = format!("-L{}", cuda().join("lib").display());
    let args = [
        "-arch=sm_90",
        "-dlto",
        &lib,
        ring.to_str().unwrap(),
        bc.to_str().unwrap(),
        "-lcudadevrt",
        "-o",
        "ring.cubin",
    ];
    let (rc, err) = nvlinkrs(&args, &d);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(kernels_of(&d, "ring.cubin"), vec!["_Z4ringPi".to_string()]);
    let c = nvlinkrs::elf::cubin::Cubin::parse(
        nvlinkrs::bytes::Bytes::from_vec(std::fs::read(d.join("ring.cubin")).unwrap()),
        "ring.cubin",
    )
    .unwrap();
    let mut undefined: Vec<&str> = (c.symbols.iter())
        .filter(|s| !s.defined() && s.ty == nvlinkrs::elf::cubin::STT_FUNC)
        .map(|s| s.name.as_str())
        .collect();
    undefined.sort_unstable();
    assert_eq!(undefined, ["__assertfail", "vprintf"]);
    let defined: std::collections::BTreeSet<&str> = (c.symbols.iter())
        .filter(|s| s.defined() && s.ty == nvlinkrs::elf::cubin::STT_FUNC)
        .map(|s| s.name.as_str())
        .collect();
    for called in [
        "_Z23nvshmemi_transfer_rma_pIiEvPvT_ii",
        "_Z23nvshmemi_transfer_quietIL13threadgroup_t0EEvbiPii",
        "_Z47nvshmemi_transfer_enforce_consistency_at_targetb",
    ] {
        assert!(defined.contains(called), "{called} inlined: {defined:?}");
    }
    // ptxas compiles the program and the library's functions with threads of its own (a
    // fixed count, which its note records), and the image is the same on one CPU
    let image = std::fs::read(d.join("ring.cubin")).unwrap();
    assert!(
        image.windows(17).any(|w| w == b"-split-compile 4 "),
        "ptxas was not given its threads"
    );
    let one_cpu = Command::new("taskset")
        .args(["-c", "0"])
        .arg(env!("CARGO_BIN_EXE_nvlinkrs"))
        .args(&args[..args.len() - 1])
        .arg("one.cubin")
        .current_dir(&d)
        .env("XDG_CACHE_HOME", d.join("cache-one-cpu"))
        .output()
        .unwrap();
    assert!(
        one_cpu.status.success(),
        "{}",
        String::from_utf8_lossy(&one_cpu.stderr)
    );
    assert!(
        std::fs::read(d.join("one.cubin")).unwrap() == image,
        "another image on one CPU"
    );
    // nvlink: no bitcode
    let nvvm = format!("-nvvmpath={}", cuda().join("nvvm").display());
    let mut nv_args = args.to_vec();
    nv_args.insert(0, &nvvm);
    *nv_args.last_mut().unwrap() = "nv.cubin";
    let (rc, err) = nvlink(&nv_args, &d);
    assert_ne!(rc, 0);
    assert!(err.contains("should never see bc files"), "{err}");
}
