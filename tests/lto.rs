//! Whole-program LTO against the real nvlink: the same command line is run through
//! nvlink 13.5 and nvlinkrs on the fixtures of `tests/fixtures/build.sh`, and the outputs
//! must be byte-identical (cubin, `-emit-ptx` PTX, `--register-link-binaries` file), the
//! exit codes equal, and nvlink's messages repeated (nvlinkrs may add indented context
//! lines below a message; those are not compared).

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{cuda, fixtures, nvlinkrs};

#[derive(Debug)]
struct Outcome {
    code: i32,
    /// nvlink-style message lines, with the tool name made `nvlink`.
    messages: Vec<String>,
    output: Option<Vec<u8>>,
    register: Option<Vec<u8>>,
    /// Files left in the output directory besides the expected ones.
    leftovers: Vec<String>,
}

/// `args` with `{OUT}` standing for `out`.
fn with_out(args: &[String], out: &Path) -> Vec<String> {
    args.iter()
        .map(|a| a.replace("{OUT}", out.to_str().unwrap()))
        .collect()
}

/// Runs `tool` with `args` (`{OUT}` and `{REG}` stand for files in a fresh directory),
/// nvlinkrs's default cache in a fresh directory too (never the user's; no earlier hit).
fn run(tool: &Path, args: &[String]) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let xdg = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.cubin");
    let reg = dir.path().join("out.reg.c");
    let args: Vec<String> = args
        .iter()
        .map(|a| {
            a.replace("{OUT}", out.to_str().unwrap())
                .replace("{REG}", reg.to_str().unwrap())
        })
        .collect();
    let r = Command::new(tool)
        .args(&args)
        .env("XDG_CACHE_HOME", xdg.path())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&r.stderr).into_owned() + &String::from_utf8_lossy(&r.stdout);
    let name = tool.file_name().unwrap().to_string_lossy().into_owned();
    let messages = text
        .lines()
        .filter(|l| !l.starts_with("  "))
        .map(|l| mask_attribute_kind(&l.replacen(&name, "nvlink", 1)))
        .filter(|l| !l.is_empty())
        .collect();
    let leftovers = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "out.cubin" && n != "out.reg.c")
        .collect();
    Outcome {
        code: r.status.code().unwrap_or(-1),
        messages,
        output: std::fs::read(&out).ok(),
        register: std::fs::read(&reg).ok(),
        leftovers,
    }
}

/// libNVVM's "Unknown attribute kind (N)" prints a value that changes from run to run
/// (seen: 0 and 5909552621114272512 for the same file), so the number is masked.
fn mask_attribute_kind(line: &str) -> String {
    const AT: &str = "Unknown attribute kind (";
    match line.find(AT) {
        Some(i) => {
            let rest = &line[i + AT.len()..];
            let end = rest.find(')').unwrap_or(0);
            format!("{}{AT}N{}", &line[..i], &rest[end..])
        }
        None => line.to_string(),
    }
}

fn nvlink() -> PathBuf {
    cuda().join("bin/nvlink")
}

/// The command line nvcc -dlink -dlto would pass, around `inputs`.
fn lto_args(arch: &str, extra: &[&str], inputs: &[&str]) -> Vec<String> {
    let cu = cuda();
    let fx = fixtures();
    let mut a = vec![
        "-m64".to_string(),
        format!("--arch={arch}"),
        format!("-L{}", cu.join("lib/stubs").display()),
        format!("-L{}", cu.join("lib").display()),
        "-cpu-arch=X86_64".into(),
        "-dlto".into(),
        format!("-nvvmpath={}", cu.join("nvvm").display()),
    ];
    a.extend(extra.iter().map(|s| s.to_string()));
    for i in inputs {
        let p = fx.join(i);
        a.push(if p.exists() {
            p.display().to_string()
        } else {
            i.to_string()
        });
    }
    a.extend(["-lcudadevrt".into(), "-o".into(), "{OUT}".into()]);
    a
}

/// Runs both linkers; returns a description of every difference (empty when equal).
fn compare(what: &str, args: &[String]) -> Vec<String> {
    let want = run(&nvlink(), args);
    let got = run(&nvlinkrs(), args);
    let mut diffs = Vec::new();
    if want.code != got.code {
        diffs.push(format!(
            "{what}: exit {} from nvlink, {} from nvlinkrs",
            want.code, got.code
        ));
    }
    if want.messages != got.messages {
        diffs.push(format!(
            "{what}: messages differ\n  nvlink:   {:?}\n  nvlinkrs: {:?}",
            want.messages, got.messages
        ));
    }
    match (&want.output, &got.output) {
        (Some(a), Some(b)) if a != b => diffs.push(format!(
            "{what}: output differs ({} bytes from nvlink, {} from nvlinkrs, first difference at {})",
            a.len(),
            b.len(),
            a.iter().zip(b.iter()).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()))
        )),
        // A failed link leaves nothing (nvlink itself leaves a file behind when it fails
        // with "expected libcudadevrt object"; nvlinkrs does not).
        (Some(_), None) if want.code == 0 => diffs.push(format!("{what}: nvlinkrs wrote no output")),
        (None, Some(_)) => diffs.push(format!("{what}: nvlinkrs wrote an output nvlink did not")),
        _ => {}
    }
    if want.register != got.register {
        diffs.push(format!(
            "{what}: register file differs\n  nvlink:   {:?}\n  nvlinkrs: {:?}",
            want.register.as_deref().map(String::from_utf8_lossy),
            got.register.as_deref().map(String::from_utf8_lossy)
        ));
    }
    if !got.leftovers.is_empty() {
        diffs.push(format!("{what}: nvlinkrs left {:?} behind", got.leftovers));
    }
    diffs
}

/// Runs `cases` two at a time and fails with every difference found.
fn check_all(cases: Vec<(String, Vec<String>)>) {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let diffs = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((what, args)) = cases.get(i) else {
                        break;
                    };
                    let d = compare(what, args);
                    diffs.lock().unwrap().extend(d);
                }
            });
        }
    });
    let diffs = diffs.into_inner().unwrap();
    assert!(
        diffs.is_empty(),
        "{} of {} cases differ:\n{}",
        diffs.len(),
        cases.len(),
        diffs.join("\n")
    );
}

const PROGRAM: [&str; 3] = ["main_dlto.o", "saxpy_dlto.o", "scale_dlto.o"];

#[test]
fn whole_program_links_are_byte_identical_to_nvlink() {
    let mut cases: Vec<(String, Vec<String>)> = vec![
        (
            "one TU".into(),
            lto_args("sm_90", &[], &["unrolled_dlto.o"]),
        ),
        (
            "cross-TU calls and shared globals".into(),
            lto_args("sm_90", &[], &["saxpy_dlto.o", "scale_dlto.o"]),
        ),
        (
            "host references drop unused kernels".into(),
            lto_args("sm_90", &["--register-link-binaries={REG}"], &PROGRAM),
        ),
        (
            "input order reversed".into(),
            lto_args(
                "sm_90",
                &["--register-link-binaries={REG}"],
                &["scale_dlto.o", "saxpy_dlto.o", "main_dlto.o"],
            ),
        ),
        (
            // its executable device code is passed over (not a partial link), and as a
            // host object without relocatable code it turns the host tables off
            "a whole-program object (nvcc -c) beside LTO objects".into(),
            lto_args(
                "sm_90",
                &["--register-link-binaries={REG}"],
                &[&PROGRAM[..], &["whole.o"]].concat(),
            ),
        ),
        (
            // CMake's device link line: libcudart_static's host objects carry no
            // host-reference table, so none applies (every kernel and variable kept)
            "host objects without device code (-lcudart_static)".into(),
            lto_args(
                "sm_90",
                &["--register-link-binaries={REG}"],
                &[&PROGRAM[..], &["-lcudart_static"]].concat(),
            ),
        ),
        (
            "-maxrregcount".into(),
            lto_args("sm_90", &["-maxrregcount=32"], &PROGRAM),
        ),
        (
            "modules with -maxrregcount".into(),
            lto_args("sm_90", &[], &["consensus/a_mr32.o", "consensus/b_mr32.o"]),
        ),
        (
            "modules with -lineinfo".into(),
            lto_args("sm_90", &[], &["consensus/a_line.o", "consensus/b_line.o"]),
        ),
        (
            ".ltoir files".into(),
            lto_args("sm_90", &[], &["saxpy.ltoir", "scale.ltoir"]),
        ),
        (
            ".ltoir beside a host object".into(),
            lto_args(
                "sm_90",
                &[],
                &["main_dlto.o", "saxpy.ltoir", "scale_dlto.o"],
            ),
        ),
        (
            "fatbins".into(),
            lto_args("sm_90", &[], &["saxpy_lto.fatbin", "scale_lto.fatbin"]),
        ),
        (
            "archive of LTO objects".into(),
            lto_args(
                "sm_90",
                &["--register-link-binaries={REG}"],
                &["main_dlto.o", "libsaxpy_lto.a"],
            ),
        ),
        (
            "-kernels-used".into(),
            lto_args("sm_90", &["-kernels-used=doubler"], &PROGRAM),
        ),
        (
            "-variables-used".into(),
            lto_args("sm_90", &["-variables-used=calls,bias"], &PROGRAM),
        ),
        (
            "-ignore-host-info".into(),
            lto_args("sm_90", &["-ignore-host-info"], &PROGRAM),
        ),
        (
            "-Xnvvm".into(),
            lto_args("sm_90", &["-Xnvvm", "-ftz=1"], &PROGRAM),
        ),
        (
            "-Xptxas".into(),
            lto_args("sm_90", &["-Xptxas", "-O1,-lineinfo"], &PROGRAM),
        ),
        (
            "-split-compile".into(),
            lto_args("sm_90", &["-split-compile=2"], &PROGRAM),
        ),
        // (nvlink hands its -Ofc level on to ptxas: other code, and ptxas' tool note)
        (
            "-Ofc max".into(),
            lto_args("sm_90", &["-Ofc=max"], &PROGRAM),
        ),
        (
            "-Ofc mid".into(),
            lto_args("sm_90", &["-Ofc=mid"], &PROGRAM),
        ),
        (
            "-inline-info".into(),
            lto_args(
                "sm_90",
                &["-Xnvvm", "-inline-info"],
                &["saxpy_dlto.o", "scale_dlto.o"],
            ),
        ),
        (
            "-emit-ptx".into(),
            lto_args("sm_90", &["-emit-ptx"], &PROGRAM),
        ),
        (
            "-emit-ptx of .ltoir files".into(),
            lto_args("sm_90", &["-emit-ptx"], &["saxpy.ltoir", "scale.ltoir"]),
        ),
        // nvlink writes the PTX of host objects without libcudadevrt (its check is the
        // cubin's: nvlinkrs refused, "expected libcudadevrt object")
        ("-emit-ptx of host objects without libcudadevrt".into(), {
            let mut a = lto_args("sm_90", &["-emit-ptx"], &["saxpy_dlto.o", "scale_dlto.o"]);
            a.retain(|x| x != "-lcudadevrt");
            a
        }),
    ];
    for arch in ["sm_75", "sm_80", "sm_90", "sm_90a", "sm_100", "sm_120"] {
        cases.push((
            format!("{arch} from an object with IR for every target"),
            lto_args(
                arch,
                &[],
                &["main_dlto.o", "saxpy_allarch_lto.o", "scale_allarch_lto.o"],
            ),
        ));
    }
    check_all(cases);
}

#[test]
fn option_consensus_decides_as_nvlink_does() {
    // every pair of flag sets: the same accept/refuse decision, message and exit code
    // (and, when the link goes through, the same bytes)
    let sets = [
        "def", "ftz", "fast", "pdiv", "psqrt", "fmad", "mr32", "mr64", "line",
    ];
    let mut cases = Vec::new();
    for (i, a) in sets.iter().enumerate() {
        for b in &sets[i..] {
            cases.push((
                format!("{a} + {b}"),
                lto_args(
                    "sm_90",
                    &[],
                    &[&format!("consensus/a_{a}.o"), &format!("consensus/b_{b}.o")],
                ),
            ));
        }
    }
    assert_eq!(cases.len(), 45);
    check_all(cases);
}

#[test]
fn bad_inputs_fail_as_nvlink_does_and_leave_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let fx = fixtures();
    // libNVVM missing, and a library that is not libNVVM
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(empty.join("lib64")).unwrap();
    let wrong = tmp.path().join("wrong");
    std::fs::create_dir_all(wrong.join("lib64")).unwrap();
    // (a directory where the library should be: was the cache's read error, not nvlink's)
    let folder = tmp.path().join("folder");
    std::fs::create_dir_all(folder.join("lib64/libnvvm.so")).unwrap();
    std::os::unix::fs::symlink(
        cuda().join("lib/libcudart.so.13"),
        wrong.join("lib64/libnvvm.so"),
    )
    .unwrap();
    // a module whose bitcode is damaged, and one cut short
    let ltoir = std::fs::read(fx.join("saxpy.ltoir")).unwrap();
    let mut damaged = ltoir.clone();
    damaged[200..260].fill(0x55);
    std::fs::write(tmp.path().join("damaged.ltoir"), &damaged).unwrap();
    std::fs::write(tmp.path().join("cut.ltoir"), &ltoir[..1000]).unwrap();
    let t = |n: &str| tmp.path().join(n).display().to_string();
    let with_nvvm = |dir: &Path, inputs: &[&str]| -> Vec<String> {
        let mut a = lto_args("sm_90", &[], inputs);
        for x in a.iter_mut() {
            if x.starts_with("-nvvmpath=") {
                *x = format!("-nvvmpath={}", dir.display());
            }
        }
        a
    };
    let cases = vec![
        (
            "libNVVM missing".to_string(),
            with_nvvm(&empty, &["saxpy.ltoir", "scale.ltoir"]),
        ),
        (
            "libNVVM a directory".to_string(),
            with_nvvm(&folder, &["saxpy.ltoir", "scale.ltoir"]),
        ),
        (
            "not libNVVM".to_string(),
            with_nvvm(&wrong, &["saxpy.ltoir", "scale.ltoir"]),
        ),
        (
            "damaged LTO IR".to_string(),
            lto_args("sm_90", &[], &[&t("damaged.ltoir"), "scale.ltoir"]),
        ),
        (
            "LTO IR cut short".to_string(),
            lto_args("sm_90", &[], &[&t("cut.ltoir"), "scale.ltoir"]),
        ),
        (
            "IR for a newer arch".to_string(),
            lto_args("sm_90", &[], &["saxpy_100.ltoir", "scale.ltoir"]),
        ),
        (
            "ptxas fails".to_string(),
            lto_args("sm_90", &["-Xptxas", "-no-such-option"], &PROGRAM),
        ),
        ("unwritable output".to_string(), {
            let mut a = lto_args("sm_90", &[], &PROGRAM);
            let last = a.len() - 1;
            a[last] = t("no/such/dir/out.cubin");
            a
        }),
        // nvlink opens the output before its compile: its message comes first
        ("unwritable output, no libcudadevrt".to_string(), {
            let mut a = lto_args("sm_90", &[], &PROGRAM);
            a.retain(|x| x != "-lcudadevrt");
            let last = a.len() - 1;
            a[last] = t("no/such/dir/out.cubin");
            a
        }),
        (
            "consensus conflict".to_string(),
            lto_args("sm_90", &[], &["consensus/a_def.o", "consensus/b_ftz.o"]),
        ),
        // an unresolved extern function is ptxas's error before nvlink's libcudadevrt
        // check (was "expected libcudadevrt object")
        ("unresolved extern function".to_string(), {
            let mut a = lto_args("sm_90", &[], &["saxpy_dlto.o"]);
            a.retain(|x| x != "-lcudadevrt");
            a
        }),
        ("host objects without libcudadevrt".to_string(), {
            let mut a = lto_args("sm_90", &[], &PROGRAM);
            a.retain(|x| x != "-lcudadevrt");
            a
        }),
    ];
    check_all(cases.clone());
    // and every one of them failed, with exit code 1 and no output
    for (what, args) in &cases {
        let o = run(&nvlinkrs(), args);
        assert_eq!(o.code, 1, "{what}: {:?}", o.messages);
        assert!(o.output.is_none(), "{what}: output written");
    }
    // nvlinkrs names the cause where nvlink only relays libNVVM
    let o = Command::new(nvlinkrs())
        .env("NVLINKRS_CACHE", "0")
        .args(
            lto_args("sm_90", &[], &["saxpy_100.ltoir", "scale.ltoir"])
                .iter()
                .map(|a| a.replace("{OUT}", &t("x.cubin"))),
        )
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("holds LTO IR for sm_100, which cannot be linked for -arch=sm_90"),
        "{err}"
    );
}

#[test]
fn fatbin_lto_members_unscramble_to_what_nvlink_hands_libnvvm() {
    // The member of a -dc -dlto object decodes to a container with a zero key and plain
    // LLVM bitcode; its IR equals the unscrambled IR of the `.ltoir` cicc kept for the
    // same source (the same module, only the scrambling differs).
    let fx = fixtures();
    let o = Command::new(nvlinkrs())
        .args(["inspect", "--json"])
        .arg(fx.join("saxpy_dlto.o"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let lto = j["device_code"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "ltoir")
        .expect("an LTO member");
    assert_eq!(lto["ltoir"]["payload"], "llvm bitcode");
    assert_eq!(lto["ltoir"]["key"], "0x00000000");
    let ltoir = std::fs::read(fx.join("saxpy.ltoir")).unwrap();
    assert_eq!(lto["size"].as_u64().unwrap(), ltoir.len() as u64);
}

#[test]
fn nvcc_drop_in_builds_the_same_executable() {
    // A toolkit whose bin/nvlink is nvlinkrs (nvcc and its profile copied, so that nvcc
    // finds its tools beside itself); `nvcc -dlto` through it must give the same host
    // executable, byte for byte, as through the real toolkit.
    let cu = cuda();
    let tmp = tempfile::tempdir().unwrap();
    let kit = tmp.path().join("kit");
    std::fs::create_dir_all(kit.join("bin")).unwrap();
    for e in std::fs::read_dir(&cu).unwrap() {
        let e = e.unwrap();
        if e.file_name() != "bin" {
            std::os::unix::fs::symlink(e.path(), kit.join(e.file_name())).unwrap();
        }
    }
    for e in std::fs::read_dir(cu.join("bin")).unwrap() {
        let e = e.unwrap();
        let to = kit.join("bin").join(e.file_name());
        match e.file_name().to_str().unwrap() {
            "nvlink" => std::os::unix::fs::symlink(nvlinkrs(), &to).unwrap(),
            "nvcc" | "nvcc.profile" => {
                std::fs::copy(e.path(), &to).unwrap();
            }
            _ => std::os::unix::fs::symlink(e.path(), &to).unwrap(),
        }
    }
    let fx = fixtures();
    let build = |nvcc: PathBuf, out: &Path| {
        let o = Command::new(nvcc)
            .env("NVLINKRS_CACHE", "0")
            .args(["-arch=sm_90", "-dlto"])
            .args(PROGRAM.iter().map(|p| fx.join(p)))
            .arg("-o")
            .arg(out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read(out).unwrap()
    };
    let theirs = build(cu.join("bin/nvcc"), &tmp.path().join("app_nvlink"));
    let ours = build(kit.join("bin/nvcc"), &tmp.path().join("app_nvlinkrs"));
    assert!(
        theirs == ours,
        "executables differ ({} and {} bytes)",
        theirs.len(),
        ours.len()
    );
    // and it really was nvlinkrs: its -v says which module set each option
    let o = Command::new(kit.join("bin/nvcc"))
        .env("NVLINKRS_CACHE", "0")
        .args(["-arch=sm_90", "-dlto", "-Xnvlink", "-v"])
        .args(PROGRAM.iter().map(|p| fx.join(p)))
        .arg("-o")
        .arg(tmp.path().join("app_v"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("consensus: -ftz=0 set by"), "{err}");
}

/// Runs `tool` with `args` (`{OUT}` a fresh file), with `env` set (else nvlinkrs's
/// default cache in that fresh directory), and requires success; the output's bytes and
/// the messages (tool name made `nvlink`).
fn link_with_env(tool: &Path, args: &[String], env: &[(&str, PathBuf)]) -> (Vec<u8>, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.cubin");
    let args = with_out(args, &out);
    let mut cmd = Command::new(tool);
    cmd.args(&args).env("XDG_CACHE_HOME", dir.path());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let r = cmd.output().unwrap();
    assert!(
        r.status.success(),
        "{} {}: {}",
        tool.display(),
        args.join(" "),
        String::from_utf8_lossy(&r.stderr)
    );
    let name = tool.file_name().unwrap().to_string_lossy().into_owned();
    let messages = String::from_utf8_lossy(&r.stderr).replace(&format!("{name} "), "nvlink ");
    (std::fs::read(&out).unwrap(), messages)
}

/// LTO IR containers whose header `inspect` refuses are refused before libNVVM reads
/// them: a header size or option-data offset past the end (nvlink dies of SIGSEGV on
/// both; nvlinkrs handed them to libNVVM) is nvlink's `elfLink nvvm error` with the file
/// and offset; an IR offset past the end, which libNVVM never reads, links as with nvlink.
/// A crash inside libNVVM (injected by the sortnvvm wrapper's abort: a real one cannot be
/// produced on demand) costs the child libNVVM runs in: the compile runs again, up to
/// three times; a crash in each ends the link with nvlink's `elfLink nvvm error`, the
/// modules named below it, exit 1, nothing written (it was SIGABRT, no message, when
/// libNVVM ran in the linker's process); one crash, then a compile, links the image a
/// clean link writes.
#[test]
fn damaged_lto_ir_and_libnvvm_crashes_end_with_a_message() {
    let tmp = tempfile::tempdir().unwrap();
    let ltoir = std::fs::read(fixtures().join("saxpy.ltoir")).unwrap();
    let patched = |name: &str, at: usize, v: &[u8]| {
        let mut d = ltoir.clone();
        d[at..at + v.len()].copy_from_slice(v);
        let p = tmp.path().join(name);
        std::fs::write(&p, d).unwrap();
        p.display().to_string()
    };
    for (name, at, v, offset) in [
        ("header.ltoir", 0x0C, &0xFFFFu16.to_le_bytes()[..], "0xc"),
        (
            "options.ltoir",
            0x10,
            &0xFF_FFFFu32.to_le_bytes()[..],
            "0x10",
        ),
    ] {
        let p = patched(name, at, v);
        let o = run(&nvlinkrs(), &lto_args("sm_90", &[], &[&p, "scale.ltoir"]));
        assert_eq!(o.code, 1, "{name}: {:?}", o.messages);
        assert_eq!(
            o.messages,
            ["nvlink fatal   : elfLink nvvm error"],
            "{name}"
        );
        assert!(o.output.is_none(), "{name}: output written");
        let r = Command::new(nvlinkrs())
            .args(with_out(
                &lto_args("sm_90", &[], &[&p, "scale.ltoir"]),
                &tmp.path().join("x"),
            ))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(
            err.contains(&format!("'{p}' at offset {offset}:")),
            "{name}: {err}"
        );
    }
    let p = patched("irofs.ltoir", 0x14, &u32::MAX.to_le_bytes());
    check_all(vec![(
        "IR offset past the end".into(),
        lto_args("sm_90", &[], &[&p, "scale.ltoir"]),
    )]);

    let counter = tmp.path().join("crashes");
    let mut args = lto_args("sm_90", &[], &["saxpy.ltoir", "scale.ltoir"]);
    for a in args.iter_mut() {
        if a.starts_with("-nvvmpath=") {
            *a = format!("-nvvmpath={}", fixtures().join("sortnvvm").display());
        }
    }
    let crashing = |crashes: &str, out: &Path| {
        std::fs::write(&counter, crashes).unwrap();
        let r = Command::new(nvlinkrs())
            .args(with_out(&args, out))
            .env("NVLINKRS_REAL_NVVM", cuda().join("nvvm/lib64/libnvvm.so"))
            .env("NVLINKRS_TEST_CRASHES", &counter)
            .env("NVLINKRS_CACHE", "0")
            .output()
            .unwrap();
        let left = std::fs::read_to_string(&counter)
            .unwrap()
            .trim()
            .to_string();
        (r, left)
    };
    // (libNVVM runs in a child: a crash costs that child, and the compile runs again)
    let out = tmp.path().join("crashed.cubin");
    let (r, left) = crashing("5", &out);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("nvlinkrs fatal   : elfLink nvvm error\n")
            && err.contains("libNVVM crashed in each of 3 attempts")
            && err.contains("saxpy.ltoir'")
            && err.contains("(SIGABRT)"),
        "{err}"
    );
    assert_eq!(left, "2");
    assert!(!out.exists());
    let once = tmp.path().join("crashed_once.cubin");
    let (r, left) = crashing("1", &once);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(left, "0");
    let clean = tmp.path().join("clean.cubin");
    let r = Command::new(nvlinkrs())
        .args(with_out(
            &lto_args("sm_90", &[], &["saxpy.ltoir", "scale.ltoir"]),
            &clean,
        ))
        .env("NVLINKRS_CACHE", "0")
        .output()
        .unwrap();
    assert!(r.status.success());
    assert_eq!(
        std::fs::read(&once).unwrap(),
        std::fs::read(&clean).unwrap()
    );
}

/// NVVM containers (seed 000's layout, under 0x1EE55A01, padded, and 0x7F4E5C7D; no 13.5
/// tool writes one, so they are written here around saxpy's bitcode): for each, whether
/// the real libNVVM takes it (added as nvlink adds modules, then compiled with scale's)
/// must be nvlinkrs's verdict, and nvlink's exit code too. libNVVM 13.5 refuses them
/// all; nvlinkrs refuses each with the file, the offset and the reason (the field a
/// damaged one breaks, else the container itself), nvlink's message and exit code, and
/// no output. nvlinkrs handed them to libNVVM unread before, which answered
/// NVVM_ERROR_INVALID_INPUT only. Two LTO IR containers are the control: all accept them.
/// LTO IR containers at the edges of libNVVM's version gate (a newer minor, LLVM 7.1,
/// 23.1: refused; LLVM 8.255, 23.0, older minors: linked) are held to the same rule (a
/// newer minor was a warning, and libNVVM's refusal came without the field).
#[test]
fn nvvm_containers_are_refused_as_libnvvm_refuses_them() {
    use nvlinkrs::ir::nvvm_container::{LEGACY_MAGIC, MAGIC, VERSIONS, write};
    let tmp = tempfile::tempdir().unwrap();
    let ltoir = std::fs::read(fixtures().join("saxpy.ltoir")).unwrap();
    // saxpy's bitcode, and the LTO IR container as nvlink hands it to libNVVM
    let word = |at: usize| u32::from_le_bytes(ltoir[at..at + 4].try_into().unwrap()) as usize;
    let (options_end, ir_at) = (word(0x10), word(0x14));
    let mut bc = ltoir[ir_at..].to_vec();
    nvlinkrs::ir::unscramble(&mut bc, word(options_end) as u32);
    let mut plain = ltoir[..ir_at].to_vec();
    plain[options_end..options_end + 4].fill(0);
    plain.extend_from_slice(&bc);
    let sm90 = [(1u16, 9u32), (2, 0)];
    let seed = |magic: u32| write(magic, VERSIONS, 1, &sm90, &[], &bc);
    let patched = |at: usize, v: &[u8]| {
        let mut d = seed(LEGACY_MAGIC);
        d[at..at + v.len()].copy_from_slice(v);
        d
    };
    let padded = [&[0u8; 4][..], &seed(LEGACY_MAGIC)].concat();
    let scrambled = &ltoir[ir_at..];
    // (name, bytes, what nvlinkrs's refusal says; None for the controls)
    let mut cases: Vec<(&str, Vec<u8>, Option<&str>)> = vec![
        ("control.ltoir", ltoir.clone(), None),
        ("control_plain.ltoir", plain, None),
        (
            "seed.nvvm",
            seed(LEGACY_MAGIC),
            Some("offset 0x0: NVVM container (0x1ee55a01) for sm_90: libNVVM 13.5 reads only"),
        ),
        (
            "padded.nvvm",
            padded,
            Some("offset 0x4: NVVM container (0x1ee55a01, 4 bytes in) for sm_90"),
        ),
        (
            "cicc.nvvm",
            seed(MAGIC),
            Some("offset 0x0: NVVM container (0x7f4e5c7d) for sm_90"),
        ),
        (
            "versions135.nvvm",
            write(
                LEGACY_MAGIC,
                [1, 0x43, 2, 0x83, 3, 2, 7, 0],
                1,
                &sm90,
                &[],
                &bc,
            ),
            Some("offset 0x0: NVVM container (0x1ee55a01)"),
        ),
        (
            "sm100a.ltoir",
            write(
                LEGACY_MAGIC,
                VERSIONS,
                1,
                &[(1, 10), (2, 0), (22, 1), (13, 1)],
                &[],
                &bc,
            ),
            Some("offset 0x0: NVVM container (0x1ee55a01) for sm_100a"),
        ),
        (
            "compressed.nvvm",
            write(
                LEGACY_MAGIC,
                VERSIONS,
                1,
                &[(1, 9), (99, 0x75D4_9913)],
                &[],
                scrambled,
            ),
            Some("offset 0x0: NVVM container"),
        ),
        (
            "llvm21.nvvm",
            patched(10, &[21, 0]),
            Some("offset 0xa: LLVM version 21.0 not compatible"),
        ),
        (
            "irmajor.nvvm",
            patched(6, &[3]),
            Some("offset 0x6: NVVM IR major version 3 not compatible"),
        ),
        (
            "header.nvvm",
            patched(0x0E, &[0xFF, 0xFF]),
            Some("offset 0xe: header size 65535"),
        ),
        (
            "pairs.nvvm",
            patched(0x10, &u32::MAX.to_le_bytes()),
            Some("offset 0x10: end of the option pairs 4294967295"),
        ),
        (
            "blobs.nvvm",
            patched(0x14, &0xFF_FFFFu32.to_le_bytes()),
            Some("offset 0x14: end of the blob region 16777215"),
        ),
        (
            "blobtag.nvvm",
            write(LEGACY_MAGIC, VERSIONS, 1, &[(209, 64)], b"k\0", &bc),
            Some("offset 0x18: tag 209 (TargetFuncName) points at blob offset 64"),
        ),
        (
            "scrambled.nvvm",
            write(LEGACY_MAGIC, VERSIONS, 1, &sm90, &[], scrambled),
            Some("offset 0x24: the IR is not LLVM bitcode"),
        ),
    ];
    // saxpy's LTO IR container at the edges of libNVVM's version gate
    let gate = |name: &'static str, at: usize, v: &[u8], refusal: Option<&'static str>| {
        let mut d = ltoir.clone();
        d[at..at + v.len()].copy_from_slice(v);
        (name, d, refusal)
    };
    cases.extend([
        gate(
            "minor.ltoir",
            5,
            &[0x44],
            Some("offset 0x5: container minor version 68 newer than libNVVM 13.5's (67)"),
        ),
        gate(
            "irminor.ltoir",
            7,
            &[0x84],
            Some("offset 0x7: NVVM IR minor version 132 newer"),
        ),
        gate(
            "dbgminor.ltoir",
            9,
            &[3],
            Some("offset 0x9: NVVM debug minor version 3 newer"),
        ),
        gate(
            "llvm7_1.ltoir",
            10,
            &[7, 1],
            Some("offset 0xa: LLVM version 7.1 not accepted by libNVVM 13.5"),
        ),
        gate(
            "llvm23_1.ltoir",
            10,
            &[23, 1],
            Some("offset 0xa: LLVM version 23.1 not accepted"),
        ),
        gate("llvm23_0.ltoir", 10, &[23, 0], None),
        gate("llvm8_255.ltoir", 10, &[8, 255], None),
        gate("older.ltoir", 5, &[0, 2, 0, 3, 0], None),
    ]);
    let nvvm =
        nvlinkrs::lto::libnvvm::LibNvvm::load(&cuda().join("nvvm/lib64/libnvvm.so")).unwrap();
    let scale = std::fs::read(fixtures().join("scale.ltoir")).unwrap();
    let opts = ["-arch=compute_90".to_string(), "-link-lto".to_string()];
    let mut failures = Vec::new();
    for (name, bytes, refusal) in cases {
        let p = tmp.path().join(name);
        std::fs::write(&p, &bytes).unwrap();
        let mut prog = nvvm.program().unwrap();
        let libnvvm_takes = prog.add_lto_ir(&bytes, name).is_ok()
            && prog.add_lto_ir(&scale, "scale.ltoir").is_ok()
            && matches!(prog.compile(&opts), Ok(Ok(_)));
        let args = lto_args("sm_90", &[], &[p.to_str().unwrap(), "scale.ltoir"]);
        let (ours, theirs) = (run(&nvlinkrs(), &args), run(&nvlink(), &args));
        let verdict = format!(
            "libNVVM {libnvvm_takes}, nvlink exit {}, nvlinkrs exit {}",
            theirs.code, ours.code
        );
        if libnvvm_takes != (ours.code == 0) || theirs.code != ours.code {
            failures.push(format!("{name}: {verdict}"));
            continue;
        }
        if libnvvm_takes != refusal.is_none() {
            failures.push(format!("{name}: expected otherwise: {verdict}"));
            continue;
        }
        let Some(want) = refusal else { continue };
        if ours.messages != theirs.messages || ours.output.is_some() || !ours.leftovers.is_empty() {
            failures.push(format!(
                "{name}: {:?} against nvlink's {:?}, output left: {}",
                ours.messages,
                theirs.messages,
                ours.output.is_some()
            ));
        }
        let r = Command::new(nvlinkrs())
            .args(with_out(&args, &tmp.path().join("x.cubin")))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        if !err.contains(&format!("'{}' at {want}", p.display())) {
            failures.push(format!("{name}: message lacks {want:?}: {err}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The names of the kernels of a linked cubin.
fn kernels(cubin: &[u8]) -> std::collections::BTreeSet<String> {
    let c =
        nvlinkrs::elf::cubin::Cubin::parse(nvlinkrs::bytes::Bytes::from_vec(cubin.to_vec()), "out")
            .unwrap();
    c.symbols
        .iter()
        .filter(|s| s.defined() && s.is_entry())
        .map(|s| s.name.to_string())
        .collect()
}

#[test]
fn split_compile_extended_is_equivalent_to_nvlink_and_deterministic() {
    // libNVVM cuts the fixture into several PTX pieces under -split-compile-extended;
    // each goes through ptxas -c and the pieces are merged. libNVVM returns the pieces in
    // the order its threads finish, so nvlink's output changes from run to run;
    // nvlinkrs sorts them by content. tests/fixtures/sortnvvm wraps the real libNVVM and
    // gives nvlink the pieces in that same order (nothing else changes), so the two
    // linkers can be held to the merge harness's equivalence.
    let fx = fixtures();
    let real = cuda().join("nvvm/lib64/libnvvm.so");
    let env = [("NVLINKRS_REAL_NVVM", real.clone()), ("CUDA_HOME", cuda())];
    let with_nvvm = |nvvm: &Path, extra: &[&str], inputs: &[&str]| -> Vec<String> {
        let mut a = lto_args("sm_90", extra, inputs);
        for x in a.iter_mut() {
            if x.starts_with("-nvvmpath=") {
                *x = format!("-nvvmpath={}", nvvm.display());
            }
        }
        a
    };
    let sorted = fx.join("sortnvvm");
    let program = ["split/s0.o", "split/s1.o"];
    let mut failures = Vec::new();
    for (what, extra, inputs) in [
        (
            "whole program, 2 threads",
            vec!["-split-compile-extended=2"],
            program.to_vec(),
        ),
        (
            "whole program, one per core",
            vec!["-split-compile-extended=0"],
            program.to_vec(),
        ),
        (
            "both split options",
            vec!["-split-compile=2", "-split-compile-extended=2"],
            program.to_vec(),
        ),
        (
            "partial LTO",
            vec!["-split-compile-extended=2"],
            vec!["split/s0.o", "split/s1.o", "saxpy_dc.o", "scale_dc.o"],
        ),
    ] {
        let args = with_nvvm(&sorted, &extra, &inputs);
        let (theirs, their_messages) = link_with_env(&nvlink(), &args, &env);
        let (ours, our_messages) = link_with_env(&nvlinkrs(), &args, &env);
        let report = nvlinkrs::elf::equiv::compare(&theirs, &ours).unwrap();
        if !report.equivalent() {
            failures.push(format!("{what}: {:#?}", report.differences));
        }
        if their_messages != our_messages {
            failures.push(format!(
                "{what}: messages differ\n  nvlink:   {their_messages:?}\n  nvlinkrs: {our_messages:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // libNVVM's split compile crashes now and then (see src/lto/isolated.rs); nvlinkrs
    // runs it in a child process and again after a crash. The crashes are injected by the
    // wrapper (NVLINKRS_TEST_CRASHES: a real one cannot be produced on demand): two are
    // survived with the same output, three fail the link cleanly.
    let counter = tempfile::NamedTempFile::new().unwrap();
    let args = with_nvvm(&sorted, &["-split-compile-extended=2"], &program);
    let (clean, _) = link_with_env(&nvlinkrs(), &args, &env);
    std::fs::write(counter.path(), "2").unwrap();
    let mut crashing = env.to_vec();
    crashing.push(("NVLINKRS_TEST_CRASHES", counter.path().to_path_buf()));
    let (survived, _) = link_with_env(&nvlinkrs(), &args, &crashing);
    assert!(
        survived == clean,
        "output changed after two libNVVM crashes"
    );
    assert_eq!(std::fs::read_to_string(counter.path()).unwrap().trim(), "0");
    std::fs::write(counter.path(), "3").unwrap();
    let mut cmd = Command::new(nvlinkrs());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.cubin");
    cmd.args(with_out(&args, &out)).env("NVLINKRS_CACHE", "0");
    for (k, v) in &crashing {
        cmd.env(k, v);
    }
    let r = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(
        err.contains("libNVVM crashed in each of 3 attempts"),
        "{err}"
    );
    // the child's message once, without its own "nvlinkrs fatal   :" (it was printed
    // three times, each with the child's prefix inside)
    assert_eq!(err.matches("libNVVM crashed compiling").count(), 1, "{err}");
    assert_eq!(err.matches("fatal   :").count(), 1, "{err}");
    assert!(
        err.contains("\n  each attempt ended by exit status: 1: libNVVM crashed compiling '"),
        "{err}"
    );
    assert!(!out.exists(), "a failed link left its output");

    // With the real libNVVM (pieces in a different order each run): the same bytes every
    // time, and whatever the number of threads (which the tool note records, as nvlink's
    // does: it is the only difference allowed).
    let real_dir = cuda().join("nvvm");
    let split = |n: &str| {
        let args = with_nvvm(
            &real_dir,
            &[&format!("-split-compile-extended={n}")],
            &program,
        );
        link_with_env(&nvlinkrs(), &args, &[]).0
    };
    let first = split("2");
    for _ in 0..2 {
        assert!(first == split("2"), "two runs gave different bytes");
    }
    for n in ["3", "0"] {
        let other = split(n);
        let report = nvlinkrs::elf::equiv::compare(&first, &other).unwrap();
        let unexpected: Vec<&String> = report
            .differences
            .iter()
            .filter(|d| !d.starts_with("section .note.nv.tkinfo:"))
            .collect();
        assert!(
            unexpected.is_empty(),
            "-split-compile-extended={n}: {unexpected:#?}"
        );
    }
    // No kernel is lost: the split link has the kernels of the link without split.
    let whole = link_with_env(&nvlinkrs(), &with_nvvm(&real_dir, &[], &program), &[]).0;
    let want = kernels(&whole);
    assert_eq!(want.len(), 12, "{want:?}");
    assert_eq!(kernels(&first), want);
}

/// The defined functions and variables of a linked cubin (name, symbol type), and the
/// sizes of its data sections (`.nv.global*`, `.nv.constantN` other than the kernels'
/// parameter banks).
#[allow(clippy::type_complexity)]
fn program_structure(
    cubin: &[u8],
) -> (
    std::collections::BTreeSet<(String, u8)>,
    std::collections::BTreeMap<String, u64>,
) {
    use nvlinkrs::elf::cubin::{STT_CUDA_OBJECT, STT_FUNC, STT_OBJECT};
    let c =
        nvlinkrs::elf::cubin::Cubin::parse(nvlinkrs::bytes::Bytes::from_vec(cubin.to_vec()), "out")
            .unwrap();
    let data = |name: &str| {
        name.starts_with(".nv.global")
            || (name.starts_with(".nv.constant") && !name.starts_with(".nv.constant0"))
    };
    let mut sizes = std::collections::BTreeMap::new();
    for s in c.sections.iter().filter(|s| data(&s.name)) {
        *sizes.entry(s.name.to_string()).or_insert(0) += s.size;
    }
    let symbols = c
        .symbols
        .iter()
        .filter(|s| s.defined() && matches!(s.ty, STT_OBJECT | STT_FUNC | STT_CUDA_OBJECT))
        .map(|s| (s.name.to_string(), s.ty))
        .collect();
    (symbols, sizes)
}

#[test]
fn split_compile_holds_each_static_variable_once() {
    // Six units with file-scope statics (tests/fixtures/split/statics.cu): libNVVM's
    // split pieces each carry a weak copy of the statics they use, and the piece with
    // the program's variables has them all. Merged as they came, every copy kept its
    // room: .nv.global 2,404 bytes against 964 without split (nvlink, pieces in the
    // wrapper's order: 2,084), .nv.global.init 432 against 144, .nv.constant3 2,055
    // against 776. nvlink's split output depends on libNVVM's piece order, so this is a
    // test of structure: the functions and variables of nvlink's split link, and data
    // sections no larger than nvlink's nor than the link without split.
    let fx = fixtures();
    let real = cuda().join("nvvm/lib64/libnvvm.so");
    let env = [("NVLINKRS_REAL_NVVM", real), ("CUDA_HOME", cuda())];
    let units: Vec<String> = (0..6).map(|u| format!("split/st{u}.o")).collect();
    let units: Vec<&str> = units.iter().map(String::as_str).collect();
    let with_nvvm = |nvvm: &Path, extra: &[&str]| -> Vec<String> {
        let mut a = lto_args("sm_90", extra, &units);
        for x in a.iter_mut() {
            if x.starts_with("-nvvmpath=") {
                *x = format!("-nvvmpath={}", nvvm.display());
            }
        }
        a
    };
    let split = with_nvvm(&fx.join("sortnvvm"), &["-split-compile-extended=2"]);
    let (theirs, _) = link_with_env(&nvlink(), &split, &env);
    let (ours, _) = link_with_env(&nvlinkrs(), &split, &env);
    let (whole, _) = link_with_env(&nvlinkrs(), &with_nvvm(&cuda().join("nvvm"), &[]), &[]);
    let (their_syms, their_sizes) = program_structure(&theirs);
    let (our_syms, our_sizes) = program_structure(&ours);
    let (_, whole_sizes) = program_structure(&whole);
    assert_eq!(our_syms, their_syms);
    let statics = our_syms
        .iter()
        .filter(|(n, _)| n.starts_with("__nv_static_"));
    assert_eq!(statics.count(), 18, "{our_syms:?}");
    for (name, &size) in &our_sizes {
        let (nvlink_split, without_split) = (their_sizes.get(name), whole_sizes.get(name));
        assert!(
            nvlink_split.is_some_and(|&n| size <= n) && without_split.is_some_and(|&n| size <= n),
            "{name}: {size} bytes; nvlink's split link {nvlink_split:?}, ours without split {without_split:?}"
        );
    }
    assert!(our_sizes.contains_key(".nv.global") && our_sizes.contains_key(".nv.constant3"));
}

/// The SASS of each function of a cubin, by name (cuobjdump -sass).
fn sass_by_function(cubin: &[u8]) -> std::collections::BTreeMap<String, String> {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("x.cubin");
    std::fs::write(&f, cubin).unwrap();
    let o = Command::new(cuda().join("bin/cuobjdump"))
        .arg("-sass")
        .arg(&f)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "cuobjdump: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut out = std::collections::BTreeMap::new();
    let mut current: Option<String> = None;
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        if let Some(name) = line.trim().strip_prefix("Function : ") {
            current = Some(name.to_string());
            out.insert(name.to_string(), String::new());
        } else if let Some(c) = &current {
            let text = out.get_mut(c).unwrap();
            text.push_str(line);
            text.push('\n');
        }
    }
    out
}

#[test]
fn llvm_bitcode_links_on_the_llvm_engine() {
    // clang-22 `-fgpu-rdc -emit-llvm` bitcode (tests/fixtures/clang), which nvlink
    // refuses ("should never see bc files"), links with -lto on LLVM 22: the cross-unit
    // callee is inlined, libdevice calls resolve, -kernels-used drops the other kernel.
    let fx = fixtures();
    let bc = |f: &str| fx.join("clang").join(f).display().to_string();
    let args = |extra: &[&str], inputs: &[String]| -> Vec<String> {
        let mut a = vec![
            "-arch=sm_90".to_string(),
            "-lto".into(),
            format!("-nvvmpath={}", cuda().join("nvvm").display()),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        a.extend(inputs.iter().cloned());
        a.extend(["-o".into(), "{OUT}".into()]);
        a
    };
    let program = [bc("a.bc"), bc("b.bc")];

    let (cubin, _) = link_with_env(&nvlinkrs(), &args(&[], &program), &[]);
    let sass = sass_by_function(&cubin);
    let names: Vec<&str> = sass.keys().map(String::as_str).collect();
    assert_eq!(names, ["_Z5saxpyfPfS_i", "_Z5wavesPf"]);
    for (name, code) in &sass {
        assert!(!code.contains("CALL"), "{name} still calls out:\n{code}");
        assert!(code.contains("EXIT"), "{name}:\n{code}");
    }
    // helper(x) = x * 2 + 1, inlined into saxpy as one FFMA with the constant 1
    assert!(
        sass["_Z5saxpyfPfS_i"].contains(", 1 ;"),
        "{}",
        sass["_Z5saxpyfPfS_i"]
    );
    assert_eq!(kernels(&cubin).len(), 2);

    // side by side with LLVM's own clang-nvlink-wrapper (LTO, then ptxas and nvlink) on
    // the same bitcode: the same kernels, each calling nothing
    let dir = tempfile::tempdir().unwrap();
    let theirs_path = dir.path().join("wrapper.cubin");
    let o = Command::new("/usr/lib/llvm-22/bin/clang-nvlink-wrapper")
        .args(["--arch", "sm_90"])
        .arg(format!("--cuda-path={}", cuda().display()))
        .args(&program)
        .arg(cuda().join("nvvm/libdevice/libdevice.10.bc"))
        .arg("-o")
        .arg(&theirs_path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let theirs = std::fs::read(&theirs_path).unwrap();
    assert_eq!(kernels(&theirs), kernels(&cubin));
    assert_eq!(
        sass_by_function(&theirs).keys().collect::<Vec<_>>(),
        sass.keys().collect::<Vec<_>>()
    );

    let (only, _) = link_with_env(&nvlinkrs(), &args(&["-kernels-used=saxpy"], &program), &[]);
    assert_eq!(
        kernels(&only).into_iter().collect::<Vec<_>>(),
        ["_Z5saxpyfPfS_i"]
    );

    // split compilation on LLVM (with unit c: kernels of their own, a recursive helper
    // both call, a function called through a pointer, a variable both write): the same
    // kernels as without split; the same bytes whatever the number of threads
    // (NVLINKRS_JOBS caps every pool, the helper's included)
    let three = [bc("a.bc"), bc("b.bc"), bc("c.bc")];
    let (whole, _) = link_with_env(&nvlinkrs(), &args(&[], &three), &[]);
    let split4 = args(&["-split-compile-extended=4"], &three);
    let (one_thread, _) = link_with_env(&nvlinkrs(), &split4, &[("NVLINKRS_JOBS", "1".into())]);
    let (four_threads, _) = link_with_env(&nvlinkrs(), &split4, &[("NVLINKRS_JOBS", "4".into())]);
    assert!(
        one_thread == four_threads,
        "split output depends on the thread count"
    );
    assert_eq!(kernels(&one_thread), kernels(&whole));
    assert_eq!(kernels(&whole).len(), 4);
    // the split link's functions: the kernels, with `tree` once per part that calls
    // it (local, so the merge keeps both; cuobjdump tells the second apart with `__1`)
    // and `twice` once (shared through the pointer)
    let functions = |cubin: &[u8]| -> Vec<String> {
        let mut f: Vec<String> = sass_by_function(cubin).into_keys().collect();
        f.sort();
        f
    };
    assert_eq!(
        functions(&one_thread),
        [
            "_Z4rampPf",
            "_Z4risePf",
            "_Z5saxpyfPfS_i",
            "_Z5wavesPf",
            "_ZL4treefi",
            "_ZL4treefi__1",
            "_ZL5twicef"
        ]
    );
    // (whole-program O3 sees every caller and inlines both helpers)
    assert_eq!(
        functions(&whole),
        ["_Z4rampPf", "_Z4risePf", "_Z5saxpyfPfS_i", "_Z5wavesPf"]
    );
    // content-stable parts: parts follow units, so when unit b changes (its helper is
    // inlined into saxpy) only the part holding saxpy changes; unit c's parts keep their
    // PTX byte for byte
    let parts = |b: &str| -> Vec<String> {
        let a = args(
            &["-split-compile-extended=4", "-emit-ptx"],
            &[bc("a.bc"), bc(b), bc("c.bc")],
        );
        let (ptx, _) = link_with_env(&nvlinkrs(), &a, &[]);
        let text = String::from_utf8(ptx).unwrap();
        text.split("//\n// Generated by LLVM NVPTX Back-End")
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect()
    };
    let (before, after) = (parts("b.bc"), parts("b2.bc"));
    assert_eq!(before.len(), 3, "{before:#?}");
    assert_eq!(after.len(), 3);
    for (x, y) in before.iter().zip(&after) {
        assert_eq!(
            x.contains(".entry _Z5saxpyfPfS_i("),
            y.contains(".entry _Z5saxpyfPfS_i(")
        );
        if x.contains(".entry _Z5saxpyfPfS_i(") {
            assert_ne!(x, y, "saxpy's part did not change with unit b");
        } else {
            assert_eq!(x, y, "a part without saxpy changed with unit b");
        }
    }

    // partial LTO: the bitcode's relocatable PTX merged with an nvcc cubin that defines
    // the helper; the call stays, relocated for the driver as nvlink does
    let (partial, messages) =
        link_with_env(&nvlinkrs(), &args(&[], &[bc("a.bc"), bc("nb.cubin")]), &[]);
    assert!(messages.contains("doing partial LTO"), "{messages}");
    assert_eq!(
        kernels(&partial).into_iter().collect::<Vec<_>>(),
        ["_Z5saxpyfPfS_i", "_Z5wavesPf", "_Z8fromnvccPf"]
    );

    // refusals: nvlink's without -lto; an undefined function; a module for another target
    for (what, a, want) in [
        (
            "no -lto",
            {
                let mut a = args(&[], &program);
                a.retain(|x| x != "-lto");
                a
            },
            "should never see bc files",
        ),
        (
            "undefined",
            args(&[], &[bc("a.bc")]),
            "Undefined reference to '_Z6helperf' in '",
        ),
        (
            "x86 bitcode",
            args(&[], &[bc("host.bc")]),
            "only nvptx64 device code can be linked",
        ),
        // what the LLVM engine cannot carry out is refused by name (it was dropped: a -g
        // build came out without debug information, -Xnvvm values went unread)
        (
            "-g",
            args(&["-g"], &program),
            "nvlink fatal   : -g is not supported with LLVM bitcode LTO: the LLVM engine emits no debug information",
        ),
        (
            "-Xnvvm pass knob",
            args(&["-Xnvvm", "-ftz=1,-Xopt,-do-licm=0"], &program),
            "nvlink fatal   : -Xnvvm '-Xopt' is not supported with LLVM bitcode LTO",
        ),
        (
            "-Xnvvm -opt",
            args(&["-Xnvvm", "-opt=0"], &program),
            "nvlink fatal   : -Xnvvm '-opt=0' is not supported with LLVM bitcode LTO",
        ),
    ] {
        let o = run(&nvlinkrs(), &a);
        assert_eq!(o.code, 1, "{what}: {o:?}");
        assert!(
            o.messages.iter().any(|m| m.contains(want)),
            "{what}: {:?}",
            o.messages
        );
        assert!(
            o.output.is_none() && o.leftovers.is_empty(),
            "{what}: output left"
        );
    }
    // the math options it maps go through (-ftz=1: flush-to-zero PTX)
    let o = run(
        &nvlinkrs(),
        &args(&["-emit-ptx", "-Xnvvm", "-ftz=1,-maxreg=32"], &program),
    );
    assert_eq!(o.code, 0, "{:?}", o.messages);
    let ptx = String::from_utf8(o.output.unwrap()).unwrap();
    assert!(ptx.contains(".ftz.f32"), "{ptx}");
    assert!(ptx.contains(".maxnreg 32"), "{ptx}");
}

/// Runs nvlinkrs with `args` plus `--report-json`; the output and the report.
fn link_reported(args: &[String], extra: &[&str]) -> (Vec<u8>, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let mut a: Vec<String> = args.to_vec();
    a.extend(extra.iter().map(|s| s.to_string()));
    a.push(format!("--report-json={}", report.display()));
    let (out, _) = link_with_env(&nvlinkrs(), &a, &[]);
    let r = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    (out, r)
}

#[test]
fn the_cache_gives_the_same_bytes_rebuilds_corrupt_entries_and_reuses_unchanged_parts() {
    let fx = fixtures();
    let cache = tempfile::tempdir().unwrap();
    let with_cache = format!("--cache-dir={}", cache.path().display());
    let args = lto_args(
        "sm_90",
        &[],
        &["saxpy_dlto.o", "scale_dlto.o", "main_dlto.o"],
    );

    // cold, without a cache; then a miss that fills it; then a hit: the same bytes
    let (cold, r) = link_reported(&args, &["--no-cache"]);
    assert_eq!(r["cache"]["whole_link"], "off");
    let (filled, r) = link_reported(&args, &[&with_cache]);
    assert_eq!(r["cache"]["whole_link"], "miss");
    assert_eq!(r["cache"]["stages"]["lto"]["misses"], 1);
    assert_eq!(
        r["consensus"][0],
        "consensus: -ftz=0 set by '{}'"
            .replace("{}", &fx.join("saxpy_dlto.o").display().to_string()),
        "{r:#}"
    );
    assert_eq!(r["partial_lto_because_of"], serde_json::json!([]));
    // the report names the inputs that made an LTO link partial
    let partial = lto_args("sm_90", &[], &["saxpy_dlto.o", "scale_dc.o", "main_dlto.o"]);
    let (_, r) = link_reported(&partial, &[]);
    assert_eq!(
        r["partial_lto_because_of"],
        serde_json::json!([fx.join("scale_dc.o").display().to_string()])
    );
    let (hit, r) = link_reported(&args, &[&with_cache]);
    assert_eq!(r["cache"]["whole_link"], "hit", "{r:#}");
    assert!(
        cold == filled && cold == hit,
        "cached output differs from the cold link"
    );

    // every entry corrupted on disk: detected, treated as misses, rebuilt
    let verify = |expect_ok: bool| {
        let o = Command::new(nvlinkrs())
            .args(["cache", "verify", &with_cache])
            .output()
            .unwrap();
        assert_eq!(
            o.status.success(),
            expect_ok,
            "{}",
            String::from_utf8_lossy(&o.stdout)
        );
    };
    verify(true);
    for f in walk(&cache.path().join("objects")) {
        let mut d = std::fs::read(&f).unwrap();
        let last = d.len() - 1;
        d[last] ^= 0x40;
        std::fs::write(&f, d).unwrap();
    }
    verify(false);
    let (rebuilt, r) = link_reported(&args, &[&with_cache]);
    assert_eq!(r["cache"]["whole_link"], "miss");
    assert!(rebuilt == cold, "output after corruption differs");
    verify(true);

    // a relink after one unit changed, split into parts on LLVM: only the changed part's
    // PTX goes through ptxas again
    let bc = |f: &str| fx.join("clang").join(f).display().to_string();
    let split = |b: &str| -> Vec<String> {
        vec![
            "-arch=sm_90".into(),
            "-lto".into(),
            format!("-nvvmpath={}", cuda().join("nvvm").display()),
            "-split-compile-extended=4".into(),
            bc("a.bc"),
            bc(b),
            bc("c.bc"),
            "-o".into(),
            "{OUT}".into(),
        ]
    };
    let (_, r) = link_reported(&split("b.bc"), &[&with_cache]);
    assert_eq!(r["cache"]["stages"]["ptxas"]["misses"], 3, "{r:#}");
    let (changed, r) = link_reported(&split("b2.bc"), &[&with_cache]);
    assert_eq!(r["cache"]["stages"]["ptxas"]["hits"], 2, "{r:#}");
    assert_eq!(r["cache"]["stages"]["ptxas"]["misses"], 1, "{r:#}");
    let (uncached, _) = link_reported(&split("b2.bc"), &[]);
    assert!(
        changed == uncached,
        "incremental relink differs from a cold one"
    );

    // a large compressed member (unrolled_dlto.o's 1.8 MB zstd PTX, JIT-compiled by a
    // link without -dlto) is extracted once: a link with other options takes it from the
    // cache, and gives what an uncached link gives
    let jit = |extra: &str| -> Vec<String> {
        vec![
            "-arch=sm_90".into(),
            format!("-L{}", cuda().join("lib").display()),
            extra.into(),
            fx.join("unrolled_dlto.o").display().to_string(),
            "-lcudadevrt".into(),
            "-o".into(),
            "{OUT}".into(),
        ]
    };
    let (_, r) = link_reported(&jit("-w"), &[&with_cache]);
    let member = |r: &serde_json::Value, what: &str| r["cache"]["stages"]["member"][what].clone();
    assert_eq!(member(&r, "hits"), 0, "{r:#}");
    assert!(member(&r, "misses").as_u64() >= Some(1), "{r:#}");
    let (second, r) = link_reported(&jit("-kernels-used=*"), &[&with_cache]);
    assert_eq!(r["cache"]["whole_link"], "miss");
    assert!(member(&r, "hits").as_u64() >= Some(1), "{r:#}");
    assert_eq!(member(&r, "misses"), 0, "{r:#}");
    let (uncached, _) = link_reported(&jit("-kernels-used=*"), &[]);
    assert!(second == uncached, "a link with a cached member differs");
}

#[test]
fn a_cached_link_repeats_ptxas_messages_survives_a_failed_store_and_clears_only_its_own() {
    let fx = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let out = dir.path().join("o.cubin");
    // PTX inputs: ptxas runs in the link and reports (-v) on stderr
    let link = || {
        let o = Command::new(nvlinkrs())
            .args(["-arch=sm_90", "-Xptxas", "-v"])
            .arg(fx.join("saxpy.ptx"))
            .arg(fx.join("scale.ptx"))
            .arg("-o")
            .arg(&out)
            .arg(format!("--cache-dir={}", cache.display()))
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let o = Command::new(nvlinkrs())
        .args(["-arch=sm_90", "-Xptxas", "-v", "--no-cache"])
        .arg(fx.join("saxpy.ptx"))
        .arg(fx.join("scale.ptx"))
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let uncached = std::fs::read(&out).unwrap();
    let cold_err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(cold_err.contains("ptxas info    : Used"), "{cold_err}");
    // (ptxas's compile times vary from run to run)
    let timeless = |s: &str| -> Vec<String> {
        s.lines()
            .map(|l| l.split(" = ").next().unwrap().to_string())
            .collect()
    };
    let (code, cold) = link();
    assert_eq!((code, timeless(&cold)), (Some(0), timeless(&cold_err)));
    // the warm hit prints what the cold link printed
    let (code, warm) = link();
    assert_eq!((code, warm.as_str()), (Some(0), cold.as_str()));
    assert!(
        std::fs::read(&out).unwrap() == uncached,
        "the cached output differs"
    );

    // every entry's place taken by a directory: the link warns and its output is right
    for f in walk(&cache.join("objects")) {
        std::fs::remove_file(&f).unwrap();
        std::fs::create_dir_all(f.join("in-the-way")).unwrap();
    }
    let (code, err) = link();
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("nvlinkrs warning : cache: cannot store") && err.contains("not cached"),
        "{err}"
    );
    assert!(
        std::fs::read(&out).unwrap() == uncached,
        "the output differs"
    );

    // `cache clear` on a directory that is no cache: refused, nothing deleted
    let project = dir.path().join("p");
    std::fs::create_dir_all(project.join("tools")).unwrap();
    std::fs::write(project.join("tools/build.sh"), "#!/bin/sh\n").unwrap();
    let o = Command::new(nvlinkrs())
        .args(["cache", "clear"])
        .env("NVLINKRS_CACHE_DIR", &project)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("'{}'", project.display())), "{err}");
    assert!(project.join("tools/build.sh").is_file());
}

/// The cache is on by default, in `$XDG_CACHE_HOME/nvlinkrs/links` (else under
/// `$HOME/.cache`): a link with no cache option is a hit the second time; `--no-cache` and
/// `NVLINKRS_CACHE=0` leave nothing behind; a default place that cannot be used, or is
/// missing, never changes the link (same bytes, exit 0, silent even with
/// `--warning-as-error`; said under `-v`).
#[test]
fn the_cache_is_on_by_default_and_never_fails_a_link() {
    let fx = fixtures();
    let top = tempfile::tempdir().unwrap();
    let t = top.path();
    let home = t.join("home");
    std::fs::create_dir(&home).unwrap();
    // (cache env): XDG_CACHE_HOME, HOME and NVLINKRS_CACHE to set, None: unset
    let link = |extra: &[&str], env: &[(&str, Option<&Path>)]| {
        let out = t.join("o.cubin");
        let report = t.join("r.json");
        let _ = std::fs::remove_file(&out);
        let mut cmd = Command::new(nvlinkrs());
        cmd.args(["-arch=sm_90", "--warning-as-error"])
            .arg(fx.join("saxpy.ptx"))
            .arg(fx.join("scale.ptx"))
            .args(extra)
            .arg("-o")
            .arg(&out)
            .arg(format!("--report-json={}", report.display()))
            .env("HOME", &home)
            .env_remove("XDG_CACHE_HOME")
            .env_remove("NVLINKRS_CACHE")
            .env_remove("NVLINKRS_CACHE_DIR");
        for (k, v) in env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        let o = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(0), "{err}");
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        (std::fs::read(&out).unwrap(), err, r["cache"].clone())
    };
    let (uncached, err, cache) = link(&["--no-cache"], &[]);
    assert_eq!(err, "");
    assert_eq!(cache["enabled"], false);
    assert!(!home.join(".cache").exists(), "--no-cache made a directory");

    // no option: the default place, a miss then a hit
    let xdg = t.join("xdg");
    let at_xdg = [("XDG_CACHE_HOME", Some(xdg.as_path()))];
    let place = xdg.join("nvlinkrs/links");
    for expected in ["miss", "hit"] {
        let (bytes, err, cache) = link(&[], &at_xdg);
        assert!(bytes == uncached, "{expected}: other bytes");
        assert_eq!(err, "");
        assert_eq!(cache["whole_link"], expected);
        assert_eq!(cache["enabled"], true);
        assert_eq!(cache["default"], true);
        assert_eq!(cache["dir"], place.display().to_string());
    }
    assert!(place.join(nvlinkrs::cache::MARKER).is_file());
    // `cache stats` without a directory shows the default one
    let o = Command::new(nvlinkrs())
        .args(["cache", "stats"])
        .env("XDG_CACHE_HOME", &xdg)
        .env_remove("NVLINKRS_CACHE_DIR")
        .output()
        .unwrap();
    let stats = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        stats.starts_with(&format!("cache {}\nentries ", place.display())),
        "{stats}"
    );
    assert!(!stats.contains("entries 0\n"), "{stats}");
    // links that must run still run: -time writes its file on every link
    let times = t.join("times.csv");
    for _ in 0..2 {
        let _ = std::fs::remove_file(&times);
        let time = format!("-time={}", times.display());
        let (_, _, cache) = link(&[&time], &at_xdg);
        assert_eq!(cache["whole_link"], "not cached");
        assert!(times.is_file(), "-time served from the cache");
    }
    // without XDG_CACHE_HOME: under $HOME/.cache
    let (bytes, _, cache) = link(&[], &[]);
    assert!(bytes == uncached);
    assert_eq!(
        cache["dir"],
        home.join(".cache/nvlinkrs/links").display().to_string()
    );
    assert!(
        home.join(".cache/nvlinkrs/links")
            .join(nvlinkrs::cache::MARKER)
            .is_file()
    );

    // off: --no-cache and NVLINKRS_CACHE=0 leave no cache behind; NVLINKRS_CACHE=0 yields to
    // a --cache-dir on the command line
    let fresh = t.join("fresh");
    let at_fresh = |off: Option<&'static Path>| {
        vec![
            ("XDG_CACHE_HOME", Some(fresh.as_path())),
            ("NVLINKRS_CACHE", off),
        ]
    };
    let (bytes, _, cache) = link(&["--no-cache"], &at_fresh(None));
    assert!(bytes == uncached);
    assert_eq!(cache["enabled"], false);
    let (bytes, _, cache) = link(&[], &at_fresh(Some(Path::new("0"))));
    assert!(bytes == uncached);
    assert_eq!(cache["enabled"], false);
    assert!(!fresh.exists(), "a cache turned off made its directory");
    let explicit = t.join("explicit");
    let dir_arg = format!("--cache-dir={}", explicit.display());
    let (_, _, cache) = link(&[&dir_arg], &at_fresh(Some(Path::new("0"))));
    assert_eq!(
        (&cache["enabled"], &cache["default"]),
        (&true.into(), &false.into())
    );
    assert!(explicit.join(nvlinkrs::cache::MARKER).is_file());

    // a default place that cannot be made (XDG_CACHE_HOME a file), no place at all (no
    // HOME), stores that fail: silent, same bytes; -v says why
    let file = t.join("a-file");
    std::fs::write(&file, "").unwrap();
    let (bytes, err, cache) = link(&[], &[("XDG_CACHE_HOME", Some(&file))]);
    assert!(bytes == uncached);
    assert_eq!(err, "");
    assert_eq!(cache["enabled"], false);
    let (_, err, _) = link(&["-v"], &[("XDG_CACHE_HOME", Some(&file))]);
    assert!(
        err.contains("info    : cache: cannot create") && err.contains("linking without the cache"),
        "{err}"
    );
    let (bytes, err, _) = link(&[], &[("HOME", None)]);
    assert!(bytes == uncached);
    assert_eq!(err, "");
    let (_, err, _) = link(&["-v"], &[("HOME", None)]);
    assert!(err.contains("no default cache directory"), "{err}");
    for f in walk(&place.join("objects")) {
        std::fs::remove_file(&f).unwrap();
        std::fs::create_dir_all(f.join("in-the-way")).unwrap();
    }
    let (bytes, err, cache) = link(&[], &at_xdg);
    assert!(bytes == uncached);
    assert_eq!(err, "", "a failed store of the default cache warned");
    assert_eq!(cache["whole_link"], "miss");

    // through the daemon: the link process gets the client's XDG_CACHE_HOME and HOME
    let runtime = tempfile::tempdir().unwrap();
    let served = t.join("served");
    let via_daemon = [
        ("XDG_CACHE_HOME", Some(served.as_path())),
        ("XDG_RUNTIME_DIR", Some(runtime.path())),
        ("NVLINKRS_DAEMON", Some(Path::new("only"))),
        // (gone soon even when this test fails before it stops it)
        ("NVLINKRS_DAEMON_IDLE", Some(Path::new("30"))),
    ];
    for expected in ["miss", "hit"] {
        let (bytes, err, cache) = link(&[], &via_daemon);
        assert!(bytes == uncached);
        assert_eq!((err.as_str(), &cache["whole_link"]), ("", &expected.into()));
        assert_eq!(
            cache["dir"],
            served.join("nvlinkrs/links").display().to_string()
        );
    }
    let o = Command::new(nvlinkrs())
        .args(["daemon", "stop"])
        .env("XDG_RUNTIME_DIR", runtime.path())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), "stopped\n");
}

/// Runs `cmd` (stdout captured) for at most `secs`: its exit code and stdout, or `None`
/// when it had to be killed (it hung).
fn within(mut cmd: Command, secs: u64) -> Option<(Option<i32>, Vec<u8>)> {
    use std::io::Read;
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stdout.read_to_end(&mut b);
        b
    });
    let mut status = None;
    eventually(secs, || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    match status {
        Some(s) => Some((s.code(), reader.join().unwrap())),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            None
        }
    }
}

#[test]
fn the_cache_stores_only_what_a_link_wrote_to_regular_files_and_fifo_inputs_are_read() {
    let fx = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let link = |inputs: &[&Path], out: &str, reg: &str, cache: Option<&str>| {
        let mut c = Command::new(nvlinkrs());
        c.current_dir(d).arg("-arch=sm_90").args(inputs);
        c.args(["-o", out, "--register-link-binaries", reg]);
        if let Some(cache) = cache {
            c.arg(format!("--cache-dir={cache}"));
        }
        c
    };
    let (saxpy, scale) = (fx.join("saxpy.cubin"), fx.join("scale.cubin"));
    let both: &[&Path] = &[&saxpy, &scale];
    let o = link(both, "plain.cubin", "plain.h", None).output().unwrap();
    assert!(o.status.success());
    let image = std::fs::read(d.join("plain.cubin")).unwrap();
    let reg = std::fs::read(d.join("plain.h")).unwrap();
    assert!(!image.is_empty() && !reg.is_empty());

    // a link to /dev/null stores nothing: the next link with these inputs writes the image
    // (it was served the 0-byte file read back from /dev/null)
    let o = link(both, "/dev/null", "/dev/null", Some("c1"))
        .output()
        .unwrap();
    assert!(o.status.success());
    let o = link(both, "real.cubin", "reg.h", Some("c1"))
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(std::fs::read(d.join("real.cubin")).unwrap() == image);
    assert_eq!(std::fs::read(d.join("reg.h")).unwrap(), reg);
    // and the hit repeats those bytes
    let o = link(both, "hit.cubin", "hit.h", Some("c1"))
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(std::fs::read(d.join("hit.cubin")).unwrap() == image);
    assert_eq!(std::fs::read(d.join("hit.h")).unwrap(), reg);

    // -o /dev/stdout into a pipe: the image reaches the pipe, and the link ends (it read
    // its own image back from the pipe, then waited for more)
    let (code, out) = within(link(both, "/dev/stdout", "r2.h", Some("c2")), 60)
        .expect("a link to /dev/stdout with the cache hung");
    assert_eq!(code, Some(0));
    assert!(out == image, "the pipe got {} bytes", out.len());

    // a FIFO output: its reader gets the image, and the link ends
    mkfifo(&d.join("ff"));
    let reader = {
        let p = d.join("ff");
        std::thread::spawn(move || std::fs::read(p).unwrap())
    };
    let (code, _) = within(link(both, "ff", "r3.h", Some("c3")), 60)
        .expect("a link to a FIFO with the cache hung");
    assert_eq!(code, Some(0));
    assert!(reader.join().unwrap() == image);
    // -v reports the image's resources from the bytes written (it read them back too)
    let mut verbose = link(both, "v.cubin", "v.h", None);
    verbose.arg("-v");
    assert_eq!(within(verbose, 60).unwrap().0, Some(0));
    let mut verbose = link(both, "/dev/stdout", "v.h", None);
    verbose.arg("-v");
    let (code, out) = within(verbose, 60).expect("a -v link to /dev/stdout hung");
    assert_eq!(code, Some(0));
    assert!(out == std::fs::read(d.join("v.cubin")).unwrap());

    // a FIFO input is read to its end (it was taken for an empty file: an image without
    // saxpy's kernels), with the cache too (the key read it first, then the link hung)
    for cache in [None, Some("c4")] {
        let fifo = d.join("x.cubin");
        let _ = std::fs::remove_file(&fifo);
        mkfifo(&fifo);
        let writer = {
            let (fifo, saxpy) = (fifo.clone(), saxpy.clone());
            std::thread::spawn(move || std::fs::write(fifo, std::fs::read(saxpy).unwrap()))
        };
        let (code, _) = within(link(&[&fifo, &scale], "fifo.cubin", "f.h", cache), 60)
            .expect("a link with a FIFO input hung");
        writer.join().unwrap().unwrap();
        assert_eq!(code, Some(0));
        assert!(std::fs::read(d.join("fifo.cubin")).unwrap() == image);
    }

    // `cache clear` of a directory that does not exist says so and makes none
    let o = Command::new(nvlinkrs())
        .current_dir(d)
        .args(["cache", "clear", "--cache-dir", "none/here"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "no cache at none/here\n"
    );
    assert!(!d.join("none").exists());
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn the_daemon_links_like_a_process_concurrently_and_survives_bad_clients() {
    use std::os::unix::fs::PermissionsExt;
    let runtime = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let daemon = |args: &[&str]| {
        Command::new(nvlinkrs())
            .args(args)
            .env("XDG_RUNTIME_DIR", runtime.path())
            .env("NVLINKRS_DAEMON_IDLE", "60")
            .output()
            .unwrap()
    };
    let dir = runtime.path().join("nvlinkrs");
    let socket = dir.join("daemon.sock");
    // `daemon status`: an answer (exit 0) whether one runs or not
    let status = || {
        let o = daemon(&["daemon", "status"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let not_running = format!(
        "not running\nsocket {}\nbackground idle\n",
        socket.display()
    );
    assert_eq!(status(), not_running);
    let o = daemon(&["daemon", "start"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let started = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert!(started.starts_with("pid "), "{started}");
    let running = |served: usize| {
        let s = status();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(
            lines[..3],
            ["running", &started, &format!("socket {}", socket.display())],
            "{s}"
        );
        assert!(
            lines[3].starts_with("uptime ") && lines[3].ends_with(" s"),
            "{s}"
        );
        assert_eq!(
            lines[4..],
            [
                format!("links served {served}"),
                "links running 0".into(),
                "background idle".into()
            ],
            "{s}"
        );
    };
    running(0);
    assert_eq!(
        std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert_eq!(
        std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777,
        0o600
    );

    // a link, in process and through the daemon: same bytes, messages and exit code
    // via_daemon: "only" (the daemon must answer), "1" (else in process), or not at all
    let link = |args: &[String], via_daemon: Option<&str>| {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.cubin");
        let args = with_out(args, &out);
        let mut cmd = Command::new(nvlinkrs());
        cmd.args(&args).env("XDG_RUNTIME_DIR", runtime.path());
        cmd.env("NVLINKRS_CACHE_DIR", cache.path());
        if let Some(how) = via_daemon {
            cmd.env("NVLINKRS_DAEMON", how);
        }
        let r = cmd.output().unwrap();
        (
            r.status.code(),
            String::from_utf8_lossy(&r.stderr).into_owned(),
            std::fs::read(&out).ok(),
        )
    };
    let programs: Vec<Vec<String>> = vec![
        lto_args(
            "sm_90",
            &[],
            &["saxpy_dlto.o", "scale_dlto.o", "main_dlto.o"],
        ),
        lto_args(
            "sm_90",
            &[],
            &["main_dlto.o", "scale_dlto.o", "saxpy_dlto.o"],
        ),
        lto_args(
            "sm_90",
            &["-kernels-used=saxpy"],
            &["saxpy_dlto.o", "scale_dlto.o", "main_dlto.o"],
        ),
        lto_args("sm_90", &[], &["saxpy_dc.o", "scale_dc.o"]),
        lto_args("sm_80", &[], &["multi.o"]),
        lto_args("sm_90", &[], &["libsaxpy.a"]),
        lto_args("sm_90", &[], &["missing.o"]),
        lto_args("sm_90", &[], &["saxpy_dlto.o"]),
    ];
    let expected: Vec<_> = programs.iter().map(|p| link(p, None)).collect();
    assert_eq!(expected[6].0, Some(1), "the missing-input link fails");
    // 32 links at once through the daemon, 4 of each program
    let got: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..32)
            .map(|i| {
                let p = &programs[i % programs.len()];
                let link = &link;
                s.spawn(move || link(p, Some("only")))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, g) in got.iter().enumerate() {
        assert_eq!(
            g,
            &expected[i % programs.len()],
            "link {i} through the daemon"
        );
    }

    // a malformed request gets an error, and the daemon lives on
    {
        let mut s = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        std::io::Write::write_all(&mut s, &u64::MAX.to_le_bytes()).unwrap();
        let mut answer = Vec::new();
        let _ = std::io::Read::read_to_end(&mut s, &mut answer);
        assert!(String::from_utf8_lossy(&answer).contains("malformed request"));
    }
    // the 32 links through the daemon, each answered (identical ones run once)
    running(32);

    // jobserver tokens: under a make with no free token (-j1) a split link runs one ptxas
    // at a time, in process and through the daemon (which reaches the client's pipe
    // through /proc); without make, the daemon's own budget applies
    let slow = lto_args(
        "sm_90",
        &["-split-compile-extended=2", "--no-cache"],
        &["split/s0.o", "split/s1.o"],
    );
    let peak_ptxas = |make: Option<&jobserver::Client>, via_daemon: Option<&str>| {
        let dir = tempfile::tempdir().unwrap();
        let report = dir.path().join("report.json");
        let mut args = with_out(&slow, &dir.path().join("o.cubin"));
        args.push(format!("--report-json={}", report.display()));
        let mut cmd = Command::new(nvlinkrs());
        cmd.args(&args).env("XDG_RUNTIME_DIR", runtime.path());
        if let Some(how) = via_daemon {
            cmd.env("NVLINKRS_DAEMON", how);
        }
        if let Some(make) = make {
            make.configure_make(&mut cmd);
        }
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        r["peak_jobs"]["ptxas"].as_u64().unwrap()
    };
    let make = jobserver::Client::new(0).unwrap();
    assert_eq!(peak_ptxas(Some(&make), None), 1);
    assert_eq!(peak_ptxas(Some(&make), Some("only")), 1);
    let free = peak_ptxas(None, Some("only"));
    assert!((1..=2).contains(&free), "{free}");

    // the daemon killed in the middle of a link: the client links in process, and the
    // cache stays intact
    let pid: i32 = started["pid ".len()..].parse().unwrap();
    let (code, _, out) = std::thread::scope(|s| {
        let h = s.spawn(|| link(&slow, Some("1")));
        std::thread::sleep(std::time::Duration::from_millis(150));
        // SAFETY: kill(2) on the daemon's pid; no memory is involved.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        h.join().unwrap()
    });
    assert_eq!(code, Some(0));
    assert_eq!(out, link(&slow, None).2);
    let v = Command::new(nvlinkrs())
        .args([
            "cache",
            "verify",
            &format!("--cache-dir={}", cache.path().display()),
        ])
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stdout));
    assert_eq!(status(), not_running);
}

/// A FIFO at `path` (an input that blocks whoever reads it).
fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// How many live processes have `arg` among their arguments (the stuck links' clients and
/// the daemon's link processes; found without opening the FIFO, which would unblock them).
fn processes_with_arg(arg: &Path) -> usize {
    let arg = arg.as_os_str().as_encoded_bytes();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).any(|a| a == arg))
        })
        .count()
}

/// The pid of the daemon's link process (marked by `NVLINKRS_IN_DAEMON`) whose command
/// line has `arg`.
fn daemon_link_process(arg: &Path) -> Option<i32> {
    let arg = arg.as_os_str().as_encoded_bytes();
    let procs = std::fs::read_dir("/proc").ok()?.flatten();
    procs
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).any(|a| a == arg))
                && std::fs::read(e.path().join("environ"))
                    .is_ok_and(|v| v.split(|&b| b == 0).any(|x| x == b"NVLINKRS_IN_DAEMON=1"))
        })
        .find_map(|e| e.file_name().to_str()?.parse().ok())
}

/// Waits up to `secs` for `f` to hold.
fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    f()
}

/// A second user for the daemon's trust tests: created (once) when running as root.
fn other_user() -> Option<u32> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped the second-user cases: not root, cannot create a user");
        return None;
    }
    let name = "nvlinkrs-squatter";
    let _ = Command::new("useradd")
        .args([
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            name,
        ])
        .output();
    let id = Command::new("id").args(["-u", name]).output().ok()?;
    let uid = String::from_utf8_lossy(&id.stdout).trim().parse().ok();
    if uid.is_none() {
        eprintln!("skipped the second-user cases: useradd failed");
    }
    uid
}

#[test]
fn the_daemon_trusts_only_a_private_directory_and_a_server_of_its_own_user() {
    use std::os::unix::fs::PermissionsExt;
    let top = tempfile::tempdir().unwrap();
    std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let out = top.path().join("o.cubin");
    let args = with_out(&lto_args("sm_90", &[], &["saxpy_dc.o", "scale_dc.o"]), &out);
    // XDG_RUNTIME_DIR unset: the socket lives in $TMPDIR/nvlinkrs-UID
    let tmp = top.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let sockdir = tmp.join(format!("nvlinkrs-{me}"));
    let link = |how: &str| {
        let _ = std::fs::remove_file(&out);
        let o = Command::new(nvlinkrs())
            .args(&args)
            .env_remove("XDG_RUNTIME_DIR")
            .env("TMPDIR", &tmp)
            .env("NVLINKRS_CACHE", "0")
            .env("NVLINKRS_DAEMON", how)
            .env("NVLINKRS_DAEMON_IDLE", "20")
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
            std::fs::read(&out).ok(),
        )
    };
    let expected = {
        let o = Command::new(nvlinkrs())
            .args(&args)
            .env("NVLINKRS_CACHE", "0")
            .output()
            .unwrap();
        assert!(o.status.success());
        std::fs::read(&out).unwrap()
    };
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let falls_back = |why: &str| {
        let (code, err, got) = link("1");
        assert_eq!(code, Some(0), "{err}");
        assert!(
            err.contains("warning : daemon: ")
                && err.contains(why)
                && err.contains("linking in process"),
            "{err}"
        );
        assert!(got.as_ref() == Some(&expected), "the output differs");
    };
    // a symbolic link planted at the directory's place: not followed, its target unchanged
    let target = top.path().join("target");
    std::fs::create_dir(&target).unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(&target, &sockdir).unwrap();
    falls_back("symbolic link");
    assert_eq!(mode(&target), 0o755);
    assert!(std::fs::read_dir(&target).unwrap().next().is_none());
    std::fs::remove_file(&sockdir).unwrap();
    // a directory others can enter: refused, not chmodded
    std::fs::create_dir(&sockdir).unwrap();
    std::fs::set_permissions(&sockdir, std::fs::Permissions::from_mode(0o755)).unwrap();
    falls_back("not 0700");
    assert_eq!(mode(&sockdir), 0o755);
    std::fs::remove_dir(&sockdir).unwrap();

    let Some(other) = other_user() else { return };
    // another user's directory, made before ours
    std::fs::create_dir(&sockdir).unwrap();
    std::fs::set_permissions(&sockdir, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&sockdir, Some(other), Some(other)).unwrap();
    falls_back("belongs to another user");
    std::fs::remove_dir(&sockdir).unwrap();
    // our directory, but the socket in it served by the other user: a real daemon of
    // theirs, its socket moved into our directory
    let theirs = top.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(other), Some(other)).unwrap();
    let mut squatter = {
        use std::os::unix::process::CommandExt;
        Command::new(nvlinkrs())
            .args(["daemon", "serve"])
            .env("XDG_RUNTIME_DIR", &theirs)
            .env("NVLINKRS_DAEMON_IDLE", "30")
            .uid(other)
            .gid(other)
            .spawn()
            .unwrap()
    };
    let their_socket = theirs.join("nvlinkrs/daemon.sock");
    assert!(
        eventually(10, || their_socket.exists()),
        "the other user's daemon did not start"
    );
    std::fs::create_dir(&sockdir).unwrap();
    std::fs::set_permissions(&sockdir, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::rename(&their_socket, sockdir.join("daemon.sock")).unwrap();
    falls_back("served by user");
    let _ = squatter.kill();
    let _ = squatter.wait();
}

#[test]
fn the_daemon_leaves_descriptor_paths_to_the_client_and_applies_its_umask() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let fx = fixtures();
    let runtime = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let daemon = |args: &[&str]| {
        Command::new(nvlinkrs())
            .args(args)
            .env("XDG_RUNTIME_DIR", runtime.path())
            .env("NVLINKRS_DAEMON_IDLE", "60")
            .output()
            .unwrap()
    };
    // started under the test's umask (a daemon started by the client would inherit its);
    // the clients link only through it (`only`), but for the links naming their own
    // descriptors, which run in process
    let o = daemon(&["daemon", "start"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let client = |extra: &[&str], mask: u32, fd5: Option<&Path>, stdin: Option<&Path>| {
        let mut c = Command::new(nvlinkrs());
        c.current_dir(w)
            .arg("-arch=sm_90")
            .arg(fx.join("saxpy.cubin"))
            .arg(fx.join("scale.cubin"))
            .args(extra)
            .env("XDG_RUNTIME_DIR", runtime.path())
            .env("NVLINKRS_DAEMON", "only")
            .env("NVLINKRS_DAEMON_IDLE", "60");
        if let Some(i) = stdin {
            c.stdin(std::fs::File::open(i).unwrap());
        }
        let fd = fd5.map(|p| std::fs::File::create(p).unwrap());
        let raw = fd.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
        // SAFETY: umask and dup2 are async-signal-safe.
        unsafe {
            c.pre_exec(move || {
                libc::umask(mask as libc::mode_t);
                if let Some(raw) = raw
                    && libc::dup2(raw, 5) < 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let o = c.output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, err) = client(&["-o", "ref.cubin"], 0o022, None, None);
    assert_eq!(code, Some(0), "{err}");
    let image = std::fs::read(w.join("ref.cubin")).unwrap();

    // the client's umask decides the output's mode (the daemon's link made it 0644)
    for (mask, mode) in [(0o077, 0o600), (0o022, 0o644)] {
        let out = format!("um{mask:o}.cubin");
        let (code, err) = client(&["-o", &out], mask, None, None);
        assert_eq!(code, Some(0), "{err}");
        let m = std::fs::metadata(w.join(&out))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(m & 0o777, mode, "umask {mask:o}");
        assert!(std::fs::read(w.join(&out)).unwrap() == image);
    }

    // the client's descriptor 5 (the daemon's link wrote nowhere, or into its own pipe)
    for out in ["/dev/fd/5", "/proc/self/fd/5"] {
        let fd5 = w.join("fd5.out");
        let (code, err) = client(&["-o", out], 0o022, Some(&fd5), None);
        assert_eq!(code, Some(0), "{out}: {err}");
        assert!(std::fs::read(&fd5).unwrap() == image, "{out}");
    }
    // the options on the client's stdin (the daemon's link read its own: no output file)
    std::fs::write(w.join("opts"), "-o from-stdin.cubin").unwrap();
    let (code, err) = client(&["-optf", "/dev/stdin"], 0o022, None, Some(&w.join("opts")));
    assert_eq!(code, Some(0), "{err}");
    assert!(std::fs::read(w.join("from-stdin.cubin")).unwrap() == image);
    // an -optf file naming descriptor 5
    std::fs::write(w.join("opts5"), "-o /dev/fd/5").unwrap();
    let fd5 = w.join("fd5b.out");
    let (code, err) = client(&["-optf", "opts5"], 0o022, Some(&fd5), None);
    assert_eq!(code, Some(0), "{err}");
    assert!(std::fs::read(&fd5).unwrap() == image);
    assert!(daemon(&["daemon", "stop"]).status.success());
}

#[test]
fn the_daemon_kills_links_nobody_waits_for_and_stuck_links_hold_up_no_one() {
    let runtime = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let daemon = |args: &[&str]| {
        Command::new(nvlinkrs())
            .args(args)
            .env("XDG_RUNTIME_DIR", runtime.path())
            .env("NVLINKRS_DAEMON_IDLE", "60")
            .env("NVLINKRS_JOBS", "2")
            .output()
            .unwrap()
    };
    let o = daemon(&["daemon", "start"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let pid: i32 = String::from_utf8_lossy(&o.stdout).trim()["pid ".len()..]
        .parse()
        .unwrap();
    let client = |inputs: &[&str], out: &Path| {
        let args = with_out(&lto_args("sm_90", &["--no-cache"], inputs), out);
        Command::new(nvlinkrs())
            .args(&args)
            .env("XDG_RUNTIME_DIR", runtime.path())
            .env("NVLINKRS_DAEMON", "only")
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    // two links stuck on their inputs (as many as the daemon's job budget)
    let fifos: Vec<PathBuf> = (0..3)
        .map(|i| work.path().join(format!("stuck{i}.cubin")))
        .collect();
    fifos.iter().for_each(|f| mkfifo(f));
    let mut stuck: Vec<_> = fifos[..2]
        .iter()
        .enumerate()
        .map(|(i, f)| {
            client(
                &[f.to_str().unwrap()],
                &work.path().join(format!("stuck{i}.out")),
            )
        })
        .collect();
    // each: its client and the daemon's link process
    assert!(
        eventually(10, || fifos[..2].iter().all(|f| processes_with_arg(f) == 2)),
        "the stuck links did not start"
    );
    // another client's link still runs
    let out = work.path().join("free.cubin");
    let mut free = client(&["saxpy_dc.o", "scale_dc.o"], &out);
    let done = eventually(60, || free.try_wait().unwrap().is_some());
    if !done {
        let _ = free.kill();
    }
    assert!(done, "a link waited behind two stuck ones");
    assert!(free.wait().unwrap().success());
    assert!(out.is_file());
    // the stuck links' clients interrupted: their links are stopped (nobody reads the
    // inputs any more, no output appears)
    for c in &mut stuck {
        c.kill().unwrap();
        c.wait().unwrap();
    }
    assert!(
        eventually(10, || fifos[..2].iter().all(|f| processes_with_arg(f) == 0)),
        "the daemon still runs the links of interrupted clients"
    );
    assert!(!work.path().join("stuck0.out").exists());
    // a link process killed by a signal: its client is told so (it said nothing, exit 1)
    let killed = work.path().join("killed.cubin");
    mkfifo(&killed);
    let fourth = client(&[killed.to_str().unwrap()], &work.path().join("k.out"));
    assert!(eventually(10, || processes_with_arg(&killed) == 2));
    let link_process = daemon_link_process(&killed).expect("the daemon's link process");
    // SAFETY: kill(2) on the daemon's link process; no memory is involved.
    unsafe { libc::kill(link_process, libc::SIGKILL) };
    let o = fourth.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("the link process was killed by signal 9"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // a link of a killed daemon dies with it
    let mut third = client(
        &[fifos[2].to_str().unwrap()],
        &work.path().join("stuck2.out"),
    );
    assert!(eventually(10, || processes_with_arg(&fifos[2]) == 2));
    // SAFETY: kill(2) on the daemon's pid; no memory is involved.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let _ = third.wait();
    assert!(
        eventually(10, || processes_with_arg(&fifos[2]) == 0),
        "the killed daemon's link runs on"
    );
}

#[test]
fn the_daemon_forwards_the_links_environment_and_follows_an_upgrade() {
    let runtime = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let bin = work.path().join("nvlinkrs");
    std::fs::copy(nvlinkrs(), &bin).unwrap();
    let out = work.path().join("o.cubin");
    // saxpy_dc.o's callee comes from -lscale, found through LIBRARY_PATH only
    let libs = work.path().join("libs");
    std::fs::create_dir(&libs).unwrap();
    let ar = Command::new("ar")
        .arg("rcs")
        .arg(libs.join("libscale.a"))
        .arg(fixtures().join("scale_dc.o"))
        .status()
        .unwrap();
    assert!(ar.success());
    let args: Vec<String> = vec![
        "-arch=sm_90".into(),
        fixtures().join("saxpy_dc.o").display().to_string(),
        "-lscale".into(),
        "-o".into(),
        out.display().to_string(),
    ];
    let link = |tool: &Path, how: Option<&str>| {
        let _ = std::fs::remove_file(&out);
        let mut cmd = Command::new(tool);
        cmd.args(&args)
            .env("XDG_RUNTIME_DIR", runtime.path())
            .env("NVLINKRS_DAEMON_IDLE", "30")
            .env("NVLINKRS_CACHE", "0")
            .env("LIBRARY_PATH", &libs);
        if let Some(how) = how {
            cmd.env("NVLINKRS_DAEMON", how);
        }
        let o = cmd.output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
            std::fs::read(&out).ok(),
        )
    };
    let expected = link(&bin, None);
    assert_eq!(expected.0, Some(0), "{}", expected.1);
    assert_eq!(link(&bin, Some("only")), expected, "through the daemon");
    // nvlinkrs replaced under the running daemon (an upgrade: a new file renamed into place)
    let new = work.path().join(".nvlinkrs.new");
    std::fs::copy(nvlinkrs(), &new).unwrap();
    std::fs::rename(&new, &bin).unwrap();
    assert_eq!(link(&bin, Some("only")), expected, "after the upgrade");
    let o = Command::new(&bin)
        .args(["daemon", "stop"])
        .env("XDG_RUNTIME_DIR", runtime.path())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "stopped");
}

/// The command the project presents itself with, as written: `nvlinkrs -lto a.ltoir
/// b.ltoir -o app.cubin`, no `-arch` (the inputs' one architecture, which `-v` names) and
/// no `-nvvmpath` (the toolkit's libNVVM): the same bytes as nvlink given both. Inputs for
/// two architectures: nvlink's error for a missing `-arch`, then what each input holds.
#[test]
fn headline_command_without_arch_or_nvvmpath() {
    let dir = tempfile::tempdir().unwrap();
    let fx = fixtures();
    let input = |n: &str| fx.join(n).display().to_string();
    let ours = dir.path().join("ours.cubin");
    let r = Command::new(nvlinkrs())
        .args([
            "-v",
            "-lto",
            &input("saxpy.ltoir"),
            &input("scale.ltoir"),
            "-o",
        ])
        .arg(&ours)
        .env("CUDA_HOME", cuda())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{err}");
    assert!(
        err.contains(
            "no -arch given: linking for sm_90, the architecture every input holds code for"
        ),
        "{err}"
    );
    // (nvlink 13.5's -v says neither "whole program compile" nor "relocatable compile":
    // its strings are there, behind a switch the release build does not take)
    assert!(!err.contains("program compile"), "{err}");
    let theirs = dir.path().join("theirs.cubin");
    let n = Command::new(nvlink())
        .args(["-lto", "-arch=sm_90"])
        .arg(format!("-nvvmpath={}", cuda().join("nvvm").display()))
        .args([&input("saxpy.ltoir"), &input("scale.ltoir"), "-o"])
        .arg(&theirs)
        .status()
        .unwrap();
    assert!(n.success());
    assert!(
        std::fs::read(&ours).unwrap() == std::fs::read(&theirs).unwrap(),
        "the headline link is byte-identical to nvlink's"
    );
    let r = Command::new(nvlinkrs())
        .args([
            "-lto",
            &input("saxpy_100.ltoir"),
            &input("scale.ltoir"),
            "-o",
        ])
        .arg(dir.path().join("mixed.cubin"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    let mut lines = err.lines();
    assert_eq!(
        lines.next(),
        Some("nvlinkrs fatal   : Unknown arch name '(null)'")
    );
    let detail = lines.next().unwrap_or_default();
    assert!(
        detail.contains("saxpy_100.ltoir' holds sm_100")
            && detail.contains("scale.ltoir' holds sm_90"),
        "{err}"
    );
    assert!(!dir.path().join("mixed.cubin").exists());
}

/// The functions a linked cubin defines.
fn functions(cubin: &Path) -> std::collections::BTreeSet<String> {
    let data = std::fs::read(cubin).unwrap();
    let c =
        nvlinkrs::elf::cubin::Cubin::parse(nvlinkrs::bytes::Bytes::from_vec(data), "out").unwrap();
    c.symbols
        .iter()
        .filter(|s| s.is_function())
        .map(|s| s.name.to_string())
        .collect()
}

/// `-lto -r` is a partial LTO link for nvlink 13.5: libNVVM gets `--device-c
/// --force-device-c` and no host information, so external functions nobody calls stay
/// (scale.cu's `never_called`) and host objects need no libcudadevrt (`-r
/// -force-whole-lto`: see `force_whole_lto_is_nvlinks_default`). nvlinkrs compiled a whole program,
/// dropping them, and stopped with "expected libcudadevrt object" beside host objects.
#[test]
fn relocatable_lto_keeps_external_functions_as_nvlink_does() {
    let no_devrt = |mut a: Vec<String>| {
        a.retain(|x| x != "-lcudadevrt");
        a
    };
    // the PTX libNVVM makes (the same options give the same bytes), messages, exit codes
    check_all(vec![
        (
            "-r -emit-ptx, host objects".into(),
            no_devrt(lto_args(
                "sm_90",
                &["-r", "-emit-ptx"],
                &["saxpy_dlto.o", "scale_dlto.o"],
            )),
        ),
        (
            "-r -emit-ptx, a program with -lcudadevrt".into(),
            lto_args("sm_90", &["-r", "-emit-ptx"], &PROGRAM),
        ),
    ]);
    // the linked -r outputs: the same functions, and equivalent to nvlink's
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, Vec<String>, bool); 4] = [
        (
            "host objects without libcudadevrt",
            no_devrt(lto_args(
                "sm_90",
                &["-r"],
                &["saxpy_dlto.o", "scale_dlto.o"],
            )),
            true,
        ),
        (
            ".ltoir files",
            no_devrt(lto_args("sm_90", &["-r"], &["saxpy.ltoir", "scale.ltoir"])),
            true,
        ),
        (
            "a program with -lcudadevrt",
            lto_args("sm_90", &["-r"], &PROGRAM),
            true,
        ),
        (
            "kernels the host never launches",
            no_devrt(lto_args(
                "sm_90",
                &["-r"],
                &["merge/launch1_lto.o", "merge/launch2_lto.o"],
            )),
            false,
        ),
    ];
    let mut failures = Vec::new();
    for (i, (what, args, saxpy)) in cases.iter().enumerate() {
        let mut outs = Vec::new();
        for (who, tool) in [("nvlink", nvlink()), ("nvlinkrs", nvlinkrs())] {
            let out = dir.path().join(format!("{who}_{i}.cubin"));
            let r = Command::new(&tool)
                .env("NVLINKRS_CACHE", "0")
                .args(with_out(args, &out))
                .output()
                .unwrap();
            assert!(
                r.status.success(),
                "{what}: {who} failed: {}",
                String::from_utf8_lossy(&r.stderr)
            );
            outs.push(out);
        }
        let (want, got) = (functions(&outs[0]), functions(&outs[1]));
        if want != got {
            failures.push(format!(
                "{what}: functions {want:?} from nvlink, {got:?} from nvlinkrs"
            ));
        }
        if *saxpy && !got.contains("_Z12never_calledf") {
            failures.push(format!("{what}: never_called dropped"));
        }
        // the staged build's next link: nvlink links nvlinkrs' -r output to what it
        // links from its own (but for the tool note, which carries the inputs' notes)
        let finals: Vec<PathBuf> = outs
            .iter()
            .map(|o| {
                let f = o.with_extension("final.cubin");
                let st = Command::new(nvlink())
                    .arg("-arch=sm_90")
                    .arg(o)
                    .arg("-o")
                    .arg(&f)
                    .status()
                    .unwrap();
                assert!(st.success(), "{what}: nvlink's relink of {}", o.display());
                f
            })
            .collect();
        let c = Command::new(nvlinkrs())
            .arg("compare")
            .args(&finals)
            .output()
            .unwrap();
        let report = String::from_utf8_lossy(&c.stdout).into_owned();
        if report.lines().any(|l| {
            !(l.starts_with("section .note.nv.tkinfo")
                || l.contains("equivalent")
                || l == "byte-identical")
        }) {
            failures.push(format!("{what}, relinked: {report}"));
        }
        // nvlinkrs' -r output is nvlink's byte for byte (issue 27: the tool note too), but
        // for the saxpy program's constant-bank relocations: nvlink applies them and
        // drops them, and a relink that places other constants first reads the wrong
        // ones; nvlinkrs keeps them (docs/rules/relocatable.md), so that program's output
        // is compared without them
        let c = Command::new(nvlinkrs())
            .arg("compare")
            .args(&outs)
            .output()
            .unwrap();
        let report = String::from_utf8_lossy(&c.stdout).into_owned();
        let identical = report.trim() == "byte-identical";
        if !identical && !*saxpy {
            failures.push(format!("{what}: {report}"));
        }
        if *saxpy && identical {
            failures.push(format!(
                "{what} (saxpy): byte-identical, so its constant-bank relocations were dropped"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `-Xnvvm` values reach libNVVM as nvlink passes them: repeats kept (`-Xopt` before each
/// pass knob; nvlinkrs de-duplicated every value, so the second `-Xopt` went and libNVVM
/// refused the list), only what nvlink adds itself left out; a repeat libNVVM refuses
/// fails as nvlink's link does.
#[test]
fn xnvvm_values_reach_libnvvm_as_nvlink_passes_them() {
    check_all(vec![
        (
            "-Xnvvm with two pass knobs".into(),
            lto_args(
                "sm_90",
                &["-Xnvvm", "-Xopt,-do-licm=0,-Xopt,-do-remat=0"],
                &PROGRAM,
            ),
        ),
        (
            "-Xnvvm knobs in two -Xnvvm options".into(),
            lto_args(
                "sm_90",
                &["-Xnvvm", "-Xopt,-do-licm=0", "-Xnvvm", "-Xopt,-do-remat=0"],
                &["saxpy.ltoir", "scale.ltoir"],
            ),
        ),
        (
            "-Xnvvm repeating what nvlink adds".into(),
            lto_args(
                "sm_90",
                &[
                    "-Xnvvm",
                    "-link-lto,-has-global-host-info,-compile-time,-link-lto",
                ],
                &PROGRAM,
            ),
        ),
        (
            "-r -emit-ptx, -Xnvvm repeating what nvlink adds".into(),
            lto_args(
                "sm_90",
                &[
                    "-r",
                    "-emit-ptx",
                    "-Xnvvm",
                    "--device-c,--force-device-c,-inline-info",
                ],
                &PROGRAM,
            ),
        ),
        (
            "-Xnvvm repeating -arch".into(),
            lto_args("sm_90", &["-Xnvvm", "-arch=compute_90"], &PROGRAM),
        ),
        // (nvlink splits a value at spaces too, not at tabs)
        (
            "-Xnvvm options apart by a space".into(),
            lto_args("sm_90", &["-Xnvvm", "-ftz=1 -prec-div=0"], &PROGRAM),
        ),
        (
            "-Xnvvm option after a space".into(),
            lto_args("sm_90", &["-Xnvvm", " -ftz=1"], &PROGRAM),
        ),
        (
            "-Xnvvm options apart by a tab".into(),
            lto_args("sm_90", &["-Xnvvm", "-ftz=1\t-fma=1"], &PROGRAM),
        ),
    ]);
}

/// `-force-whole-lto` changes nothing nvlink 13.5 does by default: the link is a whole
/// program when every input has IR (libcudadevrt aside), still partial beside an input
/// without IR (with nvlink's message), and it conflicts with `-force-partial-lto` and with
/// `-r`, which nvlink treats as `-force-partial-lto` (nvlinkrs linked `-r
/// -force-whole-lto`), and without `-dlto`.
#[test]
fn force_whole_lto_is_nvlinks_default() {
    let no_dlto = |mut a: Vec<String>| {
        a.retain(|x| x != "-dlto");
        a
    };
    check_all(vec![
        (
            "-force-whole-lto".into(),
            lto_args("sm_90", &["-force-whole-lto"], &PROGRAM),
        ),
        (
            // (libcudadevrt, without IR, does not make the link partial either way)
            "-force-whole-lto -keep-system-libraries".into(),
            lto_args(
                "sm_90",
                &["-force-whole-lto", "-keep-system-libraries"],
                &PROGRAM,
            ),
        ),
        (
            "-force-whole-lto beside an input without IR".into(),
            lto_args(
                "sm_90",
                &["-force-whole-lto", "-emit-ptx"],
                &["main_dlto.o", "saxpy_dlto.o", "scale_dc.o"],
            ),
        ),
        (
            "-r -force-whole-lto".into(),
            lto_args("sm_90", &["-r", "-force-whole-lto"], &PROGRAM),
        ),
        (
            "-force-whole-lto -r -emit-ptx".into(),
            lto_args("sm_90", &["-force-whole-lto", "-r", "-emit-ptx"], &PROGRAM),
        ),
        (
            "-force-partial-lto -force-whole-lto".into(),
            lto_args(
                "sm_90",
                &["-force-partial-lto", "-force-whole-lto"],
                &PROGRAM,
            ),
        ),
        (
            "-force-whole-lto without -dlto".into(),
            no_dlto(lto_args("sm_90", &["-r", "-force-whole-lto"], &PROGRAM)),
        ),
    ]);
    // the conflicts are nvlink's words, exit 1
    let o = run(
        &nvlinkrs(),
        &lto_args("sm_90", &["-r", "-force-whole-lto"], &PROGRAM),
    );
    assert_eq!(
        (o.code, o.messages.as_slice()),
        (
            1,
            &[
                "nvlink fatal   : Conflicting options '-force-partial-lto' and '-force-whole-lto'"
                    .to_string()
            ][..]
        )
    );
}

/// Two units with identical string constants (`"beta"`, `"hello from a"`): libNVVM orders
/// them by where its data lies in memory, so nvlink's image of this link differs from run
/// to run (3 images in 6 runs; `benches/results/sweep.md`), as nvlinkrs's did when it
/// called libNVVM in its own process. libNVVM now runs in a child without address-space
/// randomization: five cold links write one image.
#[test]
fn an_lto_image_is_the_same_on_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let units = [
        (
            "strs_a",
            "extern __device__ const char *names[3];\n__device__ const char *greeting = \"hello from a\";\n__global__ void walk(char *out, int i) { out[threadIdx.x] = names[i][threadIdx.x % 4] + greeting[threadIdx.x % 12]; }\n",
        ),
        (
            "strs_b",
            "__device__ const char *names[3] = {\"alpha\", \"beta\", \"hello from a\"};\n__global__ void pick(const char **o, int i) { o[0] = i ? \"beta\" : \"gamma ray\"; o[1] = names[i]; }\n",
        ),
    ];
    let mut objs = Vec::new();
    for (name, text) in units {
        let src = dir.path().join(format!("{name}.cu"));
        std::fs::write(&src, text).unwrap();
        let obj = dir.path().join(format!("{name}.o"));
        let st = Command::new(cuda().join("bin/nvcc"))
            .args(["-arch=sm_80", "-dc", "-dlto"])
            .arg(&src)
            .arg("-o")
            .arg(&obj)
            .status()
            .unwrap();
        assert!(st.success());
        objs.push(obj.display().to_string());
    }
    let refs: Vec<&str> = objs.iter().map(String::as_str).collect();
    let args = lto_args("sm_80", &[], &refs);
    let images: std::collections::BTreeSet<Vec<u8>> = (0..5)
        .map(|_| {
            let out = dir.path().join("out.cubin");
            let r = Command::new(nvlinkrs())
                .args(with_out(&args, &out))
                .env("NVLINKRS_CACHE", "0")
                .output()
                .unwrap();
            assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
            std::fs::read(&out).unwrap()
        })
        .collect();
    assert_eq!(images.len(), 1, "{} images in 5 runs", images.len());
}
