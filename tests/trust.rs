//! A cache hit is the image a cold link would write, or a miss (issue 36): the whole-link
//! key holds the libNVVM a link loads, the bytes it reads (one read: an input replaced
//! while the link waits is not what it links, an input rewritten in place is not stored),
//! the identity of an archive named twice, and the ptxas launcher; the daemon merges
//! identical requests only for the same inputs. Each test replays one reproducer of
//! `research-reliability-s3.md` (D6 to D11) with real tools and the real daemon; the
//! shared tier that answers slowly (the window between the key and the link) is a small
//! HTTP server here, a fault no real store produces on demand.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

mod common;
use common::{cuda, fixtures};

fn nvlinkrs() -> PathBuf {
    // (scripts/same_bytes.sh, and a check of these tests against an older build)
    std::env::var_os("NVLINKRS_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_nvlinkrs")))
}

/// A link: its exit code, stderr, output and report (`whole_link` and the stages).
struct Linked {
    code: i32,
    stderr: String,
    out: Option<Vec<u8>>,
    report: serde_json::Value,
}

impl Linked {
    fn whole(&self) -> &str {
        self.report["cache"]["whole_link"]
            .as_str()
            .unwrap_or("none")
    }
}

/// Runs nvlinkrs with `args` (`{OUT}` the output) in `dir`, with `env` and without the
/// variables of the test's own environment that would change the link.
fn command(dir: &Path, args: &[String], env: &[(&str, String)]) -> (Command, PathBuf, PathBuf) {
    let out = dir.join("out.cubin");
    let report = dir.join("report.json");
    let _ = std::fs::remove_file(&report);
    let mut cmd = Command::new(nvlinkrs());
    for a in args {
        cmd.arg(a.replace("{OUT}", out.to_str().unwrap()));
    }
    cmd.arg(format!("--report-json={}", report.display()))
        .current_dir(dir)
        .env("XDG_CACHE_HOME", dir.join("xdg"))
        .env_remove("NVLINKRS_REMOTE_CACHE")
        .env_remove("NVLINKRS_PTXAS_LAUNCHER")
        .env_remove("NVLINKRS_DAEMON");
    for (k, v) in env {
        cmd.env(k, v);
    }
    (cmd, out, report)
}

fn finish(o: Output, out: &Path, report: &Path) -> Linked {
    Linked {
        code: o.status.code().unwrap_or(-1),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        out: std::fs::read(out).ok(),
        report: std::fs::read(report)
            .ok()
            .and_then(|d| serde_json::from_slice(&d).ok())
            .unwrap_or_default(),
    }
}

fn link(dir: &Path, args: &[String], env: &[(&str, String)]) -> Linked {
    let (mut cmd, out, report) = command(dir, args, env);
    let _ = std::fs::remove_file(&out);
    finish(cmd.output().unwrap(), &out, &report)
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

/// scale.ptx links alone; `v2` is the same with another `bias` (as long, another image).
fn scale_ptx(v2: bool) -> Vec<u8> {
    let text = std::fs::read_to_string(fixtures().join("scale.ptx")).unwrap();
    assert!(text.contains("bias = 0f3F800000"));
    match v2 {
        true => text.replace("bias = 0f3F800000", "bias = 0f40000000"),
        false => text,
    }
    .into_bytes()
}

/// Puts `bytes` at `path` the way a build does: written beside it, renamed over it.
fn replace(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A toolkit at `to` of links to the one at `from`, but for the file `own` (relative),
/// copied, and the folders on its way, made.
fn toolkit_of_links(from: &Path, to: &Path, own: &Path) {
    let mut parts = own.components();
    let first = parts.next().unwrap().as_os_str();
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_name() != first {
            std::os::unix::fs::symlink(e.path(), to.join(e.file_name())).unwrap();
        }
    }
    let rest = parts.as_path();
    match rest.as_os_str().is_empty() {
        true => drop(std::fs::copy(from.join(first), to.join(first)).unwrap()),
        false => toolkit_of_links(&from.join(first), &to.join(first), rest),
    }
}

/// D6: a toolkit's libNVVM changed (no `-nvvmpath`: the link loads the toolkit's) is a
/// miss. It was in no key: the old image came from the cache.
#[test]
fn a_changed_libnvvm_of_the_toolkit_is_a_miss() {
    let dir = tempfile::tempdir().unwrap();
    // a toolkit of links to the real one, with a libNVVM of its own (a copy)
    let tk = dir.path().join("tk");
    toolkit_of_links(&cuda(), &tk, Path::new("nvvm/lib64/libnvvm.so"));
    let lib = tk.join("nvvm/lib64/libnvvm.so");
    let fx = fixtures();
    let args = words(&format!(
        "-arch=sm_90 -lto {} {} -o {{OUT}} --cache-dir={}",
        fx.join("saxpy.ltoir").display(),
        fx.join("scale.ltoir").display(),
        dir.path().join("c").display()
    ));
    let env = [("CUDA_HOME", tk.display().to_string())];
    let first = link(dir.path(), &args, &env);
    assert_eq!((first.code, first.whole()), (0, "miss"), "{}", first.stderr);
    assert_eq!(link(dir.path(), &args, &env).whole(), "hit");
    // another libNVVM (the same code and a byte more: a file the loader takes as well)
    std::fs::OpenOptions::new()
        .append(true)
        .open(&lib)
        .unwrap()
        .write_all(b"\0")
        .unwrap();
    let after = link(dir.path(), &args, &env);
    assert_eq!((after.code, after.whole()), (0, "miss"), "{}", after.stderr);
    assert!(after.out == first.out, "the same code: the same image");
}

/// The toolkit's libcudadevrt (named by nvcc's device links and the drop-in's) is keyed
/// by a digest remembered per file version, as the tools are: changed in place (a member
/// added), the link is a miss; copied over with the same bytes (another inode), a hit.
#[test]
fn a_changed_libcudadevrt_of_the_toolkit_is_a_miss() {
    let dir = tempfile::tempdir().unwrap();
    // a toolkit of links to the real one, with a libcudadevrt of its own (a copy)
    let tk = dir.path().join("tk");
    toolkit_of_links(&cuda(), &tk, Path::new("lib/libcudadevrt.a"));
    let devrt = tk.join("lib/libcudadevrt.a");
    let original = std::fs::read(&devrt).unwrap();
    let fx = fixtures();
    let args = words(&format!(
        "-arch=sm_90 {} {} -L{} -lcudadevrt -o {{OUT}} --cache-dir={}",
        fx.join("saxpy_dc.o").display(),
        fx.join("scale_dc.o").display(),
        tk.join("lib").display(),
        dir.path().join("c").display()
    ));
    let env = [("CUDA_HOME", tk.display().to_string())];
    let first = link(dir.path(), &args, &env);
    assert_eq!((first.code, first.whole()), (0, "miss"), "{}", first.stderr);
    assert_eq!(link(dir.path(), &args, &env).whole(), "hit");
    // the same bytes in a new file: its digest again, the same key
    replace(&devrt, &original);
    assert_eq!(link(dir.path(), &args, &env).whole(), "hit");
    // a member more (text nvlink passes over): another archive, another key
    let note = dir.path().join("note.txt");
    std::fs::write(&note, "x".repeat(200)).unwrap();
    let added = Command::new("ar")
        .arg("q")
        .arg(&devrt)
        .arg(&note)
        .status()
        .unwrap();
    assert!(added.success());
    let after = link(dir.path(), &args, &env);
    assert_eq!((after.code, after.whole()), (0, "miss"), "{}", after.stderr);
    assert!(after.out == first.out, "the same code: the same image");
    // a thin archive (its member another file, in no digest of the archive's): never
    // cached whole (the attacker's review of 2026-12-01: a member rewritten was a hit)
    let member = Command::new("ar")
        .arg("x")
        .arg(cuda().join("lib/libcudadevrt.a"))
        .current_dir(tk.join("lib"))
        .status()
        .unwrap();
    assert!(member.success());
    std::fs::remove_file(&devrt).unwrap();
    let thin = Command::new("ar")
        .args(["rcT", "libcudadevrt.a", "cuda_device_runtime.o"])
        .current_dir(tk.join("lib"))
        .status()
        .unwrap();
    assert!(thin.success());
    for _ in 0..2 {
        let t = link(dir.path(), &args, &env);
        assert_eq!((t.code, t.whole()), (0, "not cached"), "{}", t.stderr);
    }
}

/// A shared tier on loopback whose GETs answer 404 after `delay` (the first one
/// signalled on `first_get`), and whose other requests succeed at once.
fn slow_tier(delay: Duration) -> (u16, std::sync::mpsc::Receiver<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut conn = conn;
                loop {
                    let mut head = Vec::new();
                    let mut line = String::new();
                    while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                        if line == "\r\n" {
                            break;
                        }
                        head.push(std::mem::take(&mut line));
                    }
                    let Some(first) = head.first() else { return };
                    let length: usize = head
                        .iter()
                        .find_map(|h| {
                            let (k, v) = h.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse().ok())?
                        })
                        .unwrap_or(0);
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let answer = if first.starts_with("GET") {
                        let _ = tx.send(());
                        std::thread::sleep(delay);
                        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
                    } else if first.starts_with("PUT") || first.starts_with("MKCOL") {
                        "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"
                    } else {
                        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
                    };
                    if conn.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, rx)
}

/// Starts a link of `x.ptx` through the slow tier; runs `meanwhile` once the link waits
/// for the tier (after its key was made, before it links), and returns the link.
fn link_while(dir: &Path, cache: &Path, meanwhile: impl FnOnce()) -> Linked {
    let args = words(&format!(
        "-arch=sm_90 x.ptx -o {{OUT}} --cache-dir={}",
        cache.display()
    ));
    link_args_while(dir, &args, meanwhile)
}

/// [`link_while`] with the link's arguments.
fn link_args_while(dir: &Path, args: &[String], meanwhile: impl FnOnce()) -> Linked {
    let (port, first_get) = slow_tier(Duration::from_millis(1500));
    let env = [(
        "NVLINKRS_REMOTE_CACHE",
        format!("webdav+http://127.0.0.1:{port}/cache"),
    )];
    let (mut cmd, out, report) = command(dir, args, &env);
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    first_get
        .recv_timeout(Duration::from_secs(60))
        .expect("the link asks the tier");
    meanwhile();
    finish(child.wait_with_output().unwrap(), &out, &report)
}

/// D7: the key and the link read the same bytes. An input replaced (renamed over) after
/// the key was made: the link links what the key holds (and, its input's name now naming
/// another file, is not stored), and a later link of that content gets its cold image.
/// The key used to come from one read and the link from another: the new content's image
/// was stored under the old content's key, and the later link was a hit on it.
#[test]
fn an_input_replaced_while_the_link_waits_is_not_what_it_links() {
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("x.ptx");
    std::fs::write(&x, scale_ptx(false)).unwrap();
    let cold = |v2| {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("x.ptx"), scale_ptx(v2)).unwrap();
        let l = link(
            d.path(),
            &words("-arch=sm_90 x.ptx -o {OUT} --no-cache"),
            &[],
        );
        assert_eq!(l.code, 0, "{}", l.stderr);
        l.out.unwrap()
    };
    let (v1, v2) = (cold(false), cold(true));
    assert!(v1 != v2);
    let cache = dir.path().join("c");
    let first = link_while(dir.path(), &cache, || replace(&x, &scale_ptx(true)));
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(
        first.out.as_ref() == Some(&v1),
        "the link read the file after its key"
    );
    assert_eq!(first.whole(), "changed");
    replace(&x, &scale_ptx(false));
    let again = link(
        dir.path(),
        &words(&format!(
            "-arch=sm_90 x.ptx -o {{OUT}} --cache-dir={}",
            cache.display()
        )),
        &[],
    );
    assert_eq!((again.code, again.whole()), (0, "miss"), "{}", again.stderr);
    assert!(
        again.out.as_ref() == Some(&v1),
        "a hit that is not the cold image"
    );
}

/// A fresh cache's first link through a launcher named by a symbolic link that is
/// switched to another launcher while the link runs, and back: the tools hashed beside
/// the link are the files stamped before it (it was: the other launcher's hash over this
/// launcher's image, and a link through the other a hit with it, exit 0).
#[test]
fn a_launcher_switched_while_a_fresh_caches_first_link_runs_gives_no_stale_hit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("x.ptx"), scale_ptx(false)).unwrap();
    let l = d.join("L.sh");
    launcher(d, "B.sh", "exec \"$@\" -O0");
    launcher(
        d,
        "A.sh",
        &format!(
            "D={}\nif [ -f $D/once ]; then rm -f $D/once\nln -sfn B.sh $D/L.tmp && mv -T $D/L.tmp $D/L.sh\n\"$@\"; rc=$?; sleep 1\nln -sfn A.sh $D/L.tmp && mv -T $D/L.tmp $D/L.sh; exit $rc; fi\nexec \"$@\"",
            d.display()
        ),
    );
    let through = |target: &str, cache: &str| {
        std::os::unix::fs::symlink(target, d.join("L.tmp")).unwrap();
        std::fs::rename(d.join("L.tmp"), &l).unwrap();
        let args = words(&format!("-arch=sm_90 x.ptx -o {{OUT}} {cache}"));
        link(
            d,
            &args,
            &[("NVLINKRS_PTXAS_LAUNCHER", l.display().to_string())],
        )
    };
    let (a, b) = (through("A.sh", "--no-cache"), through("B.sh", "--no-cache"));
    assert!(a.out.is_some() && a.out != b.out, "-O0 gives other code");
    std::fs::write(d.join("once"), b"").unwrap();
    let first = through("A.sh", "--cache-dir=c");
    assert!(first.out == a.out, "{}", first.stderr);
    let second = through("B.sh", "--cache-dir=c");
    assert!(second.out == b.out, "{}: {}", second.whole(), second.stderr);
}

/// A `-l` library is looked for once: one that appears in an earlier `-L` folder after
/// the key was made is not what the link reads (it was: the link linked the new folder's
/// library under the key of the one found first, and a later link, the new one gone, was
/// answered with its image, exit 0).
#[test]
fn a_library_found_for_the_key_is_the_library_linked() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let nvcc = |name: &str, text: &str| {
        std::fs::write(d.join(format!("{name}.cu")), text).unwrap();
        let o = Command::new(cuda().join("bin/nvcc"))
            .args([
                "-dc",
                "-arch=sm_90",
                &format!("{name}.cu"),
                "-o",
                &format!("{name}.o"),
            ])
            .current_dir(d)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    nvcc(
        "main",
        "__device__ float f();\n__global__ void k(float *o) { o[0] = f(); }\n",
    );
    for (lib, value) in [("one", "1111.f"), ("two", "2222.f")] {
        nvcc(
            lib,
            &format!("__device__ float f() {{ return {value}; }}\n"),
        );
        std::fs::create_dir_all(d.join(lib)).unwrap();
        let ar = Command::new("ar")
            .args(["rcs", &format!("{lib}/libfoo.a"), &format!("{lib}.o")])
            .current_dir(d)
            .status()
            .unwrap();
        assert!(ar.success());
    }
    // d1 (`first`) is looked in first, and holds no library until the key was made
    std::fs::create_dir_all(d.join("first")).unwrap();
    let args = |cache: &str| {
        words(&format!(
            "-arch=sm_90 main.o -Lfirst -Ltwo -lfoo -o {{OUT}} {cache}"
        ))
    };
    let two = link(d, &args("--no-cache"), &[]);
    assert_eq!(two.code, 0, "{}", two.stderr);
    let first = link_args_while(d, &args("--cache-dir=c"), || {
        std::fs::copy(d.join("one/libfoo.a"), d.join("first/libfoo.a")).unwrap();
    });
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(first.out == two.out, "the library the key read");
    std::fs::remove_file(d.join("first/libfoo.a")).unwrap();
    let again = link(d, &args("--cache-dir=c"), &[]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(again.out == two.out, "{}", again.whole());
}

/// D7, in place: an input rewritten (even with the same bytes) while the link runs may be
/// read half old, half new; such a link is not stored (`changed`), and the next is a miss.
#[test]
fn a_link_whose_input_was_rewritten_while_it_ran_is_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("x.ptx");
    std::fs::write(&x, scale_ptx(false)).unwrap();
    let cache = dir.path().join("c");
    let first = link_while(dir.path(), &cache, || {
        std::fs::write(&x, scale_ptx(false)).unwrap()
    });
    assert_eq!(
        (first.code, first.whole()),
        (0, "changed"),
        "{}",
        first.stderr
    );
    let again = link(
        dir.path(),
        &words(&format!(
            "-arch=sm_90 x.ptx -o {{OUT}} --cache-dir={}",
            cache.display()
        )),
        &[],
    );
    assert_eq!((again.code, again.whole()), (0, "miss"), "{}", again.stderr);
    assert!(again.out == first.out);
}

/// The same in a fresh cache, whose first link hashes the tools beside its phases and is
/// stored without a lookup first: the inputs are read and stamped before the link starts.
/// The launcher rewrites the input in place (other bytes, once) while the link runs: that link
/// is not stored, and the next link, of the new bytes, is a miss with their own image
/// (read only when the key came to the inputs, after the tools, the new bytes' key held
/// the old bytes' image: a hit, exit 0, the wrong code).
#[test]
fn a_fresh_caches_first_link_whose_input_was_rewritten_while_it_ran_is_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("x.ptx");
    std::fs::write(&x, scale_ptx(false)).unwrap();
    std::fs::write(dir.path().join("v2.ptx"), scale_ptx(true)).unwrap();
    std::fs::write(dir.path().join("once"), b"").unwrap();
    // (the launcher runs in the job's folder)
    let rewrite = launcher(
        dir.path(),
        "rewrite.sh",
        &format!(
            "cd {}\n[ -f once ] && cat v2.ptx > x.ptx && rm once\ncd - >/dev/null\nexec \"$@\"",
            dir.path().display()
        ),
    );
    let args = words("-arch=sm_90 x.ptx -o {OUT} --cache-dir=c");
    let env = [("NVLINKRS_PTXAS_LAUNCHER", rewrite.display().to_string())];
    let first = link(dir.path(), &args, &env);
    assert_eq!(
        (first.code, first.whole()),
        (0, "changed"),
        "{}",
        first.stderr
    );
    let again = link(dir.path(), &args, &env);
    assert_eq!((again.code, again.whole()), (0, "miss"), "{}", again.stderr);
    assert!(again.out != first.out, "the new bytes' own image");
    let cold = link(
        dir.path(),
        &words("-arch=sm_90 x.ptx -o {OUT} --no-cache"),
        &[],
    );
    assert!(again.out == cold.out);
}

/// D9: nvlink reads an archive once per file, so an archive named again through a link
/// is not linked twice, and a copy is (nvlink: multiple definitions). The link through
/// the link was stored; the link with the copy came from the cache, exit 0.
#[test]
fn an_archive_named_twice_through_a_link_then_a_copy_is_another_link() {
    let dir = tempfile::tempdir().unwrap();
    let merge = fixtures().join("merge");
    let ar = Command::new("ar")
        .arg("rcs")
        .arg(dir.path().join("libb.a"))
        .arg(merge.join("b.o"))
        .status()
        .unwrap();
    assert!(ar.success());
    std::os::unix::fs::symlink("libb.a", dir.path().join("libc.a")).unwrap();
    let args = words(&format!(
        "-arch=sm_90 {} libb.a libc.a -o {{OUT}} --cache-dir=c",
        merge.join("a.o").display()
    ));
    let nvlink = |dir: &Path| {
        let args: Vec<String> = args
            .iter()
            .filter(|a| !a.starts_with("--cache-dir"))
            .map(|a| a.replace("{OUT}", "n.cubin"))
            .collect();
        let o = Command::new(cuda().join("bin/nvlink"))
            .args(&args)
            .current_dir(dir)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, _) = nvlink(dir.path());
    let first = link(dir.path(), &args, &[]);
    assert_eq!((code, first.code), (Some(0), 0), "{}", first.stderr);
    std::fs::remove_file(dir.path().join("libc.a")).unwrap();
    std::fs::copy(dir.path().join("libb.a"), dir.path().join("libc.a")).unwrap();
    let (code, theirs) = nvlink(dir.path());
    let copy = link(dir.path(), &args, &[]);
    assert_eq!(
        (code, copy.code),
        (Some(1), 1),
        "nvlink: {theirs}\nnvlinkrs: {}",
        copy.stderr
    );
    for line in [
        "error   : Multiple definition of '_Z3bari' in 'libc.a:b.o', first defined in 'libb.a:b.o'",
        "fatal   : merge_elf failed",
    ] {
        assert!(
            theirs.contains(line) && copy.stderr.contains(line),
            "{line}: {}",
            copy.stderr
        );
    }
    assert!(copy.out.is_none());
}

/// A launcher script in `dir` running `body` (a shell fragment; `$@` is the ptxas job).
fn launcher(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// D11: a launcher's cubin for another architecture than the job's is refused (it was
/// taken: sm_80 code in an sm_90 image, exit 0); one compiled otherwise (`-O0`) is the
/// image of links through that launcher only (it was served from the cache to links
/// without it).
#[test]
fn a_launchers_cubin_is_checked_against_the_job_and_kept_to_links_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let fx = fixtures();
    let args = words(&format!(
        "-arch=sm_90 {} {} -o {{OUT}} --cache-dir=c",
        fx.join("saxpy.ptx").display(),
        fx.join("scale.ptx").display()
    ));
    let other_arch = launcher(
        dir.path(),
        "arch.sh",
        "sed -i 's/\\.target sm_90/.target sm_80/' lto.ptx\np=\"$1\"; shift\nexec \"$p\" $(echo \"$@\" | sed 's/sm_90/sm_80/g')",
    );
    let l = link(
        dir.path(),
        &args,
        &[("NVLINKRS_PTXAS_LAUNCHER", other_arch.display().to_string())],
    );
    assert_eq!(l.code, 1, "{}", l.stderr);
    assert!(
        l.stderr.contains("code for sm_80, not sm_90"),
        "{}",
        l.stderr
    );
    assert!(l.out.is_none());
    let plain = link(dir.path(), &args, &[]);
    assert_eq!((plain.code, plain.whole()), (0, "miss"), "{}", plain.stderr);
    let o0 = launcher(dir.path(), "o0.sh", "exec \"$@\" -O0");
    let env = [("NVLINKRS_PTXAS_LAUNCHER", o0.display().to_string())];
    let c = dir.path().join("c");
    std::fs::remove_dir_all(&c).unwrap();
    let launched = link(dir.path(), &args, &env);
    assert_eq!(
        (launched.code, launched.whole()),
        (0, "miss"),
        "{}",
        launched.stderr
    );
    assert!(launched.out != plain.out, "-O0 gives other code");
    let without = link(dir.path(), &args, &[]);
    assert_eq!(without.whole(), "miss");
    assert_eq!(without.report["cache"]["stages"]["ptxas"]["hits"], 0);
    assert!(
        without.out == plain.out,
        "the launcher's image without the launcher"
    );
    let with = link(dir.path(), &args, &env);
    assert_eq!(with.whole(), "hit");
    assert!(with.out == launched.out);
}

/// Waits until `dir` holds `n` files starting with `prefix` (false after `limit`).
fn wait_for(dir: &Path, prefix: &str, n: usize, limit: Duration) -> Vec<String> {
    let started = Instant::now();
    loop {
        let found: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|f| f.starts_with(prefix))
            .collect();
        if found.len() >= n || started.elapsed() > limit {
            return found;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// D8: the daemon merged identical requests in flight whatever the input files held by
/// then: a link asked for after an input changed got the image of the old content. The
/// launcher holds each ptxas job until the test lets it go.
#[test]
fn the_daemon_merges_requests_only_for_the_same_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let hold = dir.path().join("hold");
    std::fs::create_dir(&hold).unwrap();
    let held = launcher(
        dir.path(),
        "hold.sh",
        &format!(
            "touch {h}/started.$$\nwhile [ ! -e {h}/go.$$ ]; do sleep 0.05; done\nexec \"$@\"",
            h = hold.display()
        ),
    );
    let x = dir.path().join("x.ptx");
    std::fs::write(&x, scale_ptx(false)).unwrap();
    let args = words("-arch=sm_90 x.ptx -o {OUT} --cache-dir=c");
    let env = [
        ("NVLINKRS_PTXAS_LAUNCHER", held.display().to_string()),
        ("NVLINKRS_DAEMON", "only".into()),
        ("NVLINKRS_DAEMON_IDLE", "60".into()),
        ("XDG_RUNTIME_DIR", runtime.path().display().to_string()),
    ];
    let client = || {
        let (mut cmd, _, _) = command(dir.path(), &args, &env);
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let first = client();
    let one = wait_for(&hold, "started.", 1, Duration::from_secs(60));
    assert_eq!(one.len(), 1, "the first link's ptxas job never started");
    // the user edits the input, and asks for the link again
    replace(&x, &scale_ptx(true));
    let second = client();
    let both = wait_for(&hold, "started.", 2, Duration::from_secs(30));
    // (let every job go, merged or not)
    let release = |name: &str| {
        std::fs::write(hold.join(name.replace("started", "go")), b"").unwrap();
    };
    release(&one[0]);
    let first = first.wait_with_output().unwrap();
    for s in both.iter().filter(|s| **s != one[0]) {
        release(s);
    }
    let second = second.wait_with_output().unwrap();
    let _ = Command::new(nvlinkrs())
        .args(["daemon", "stop"])
        .env("XDG_RUNTIME_DIR", runtime.path())
        .output();
    assert_eq!(
        both.len(),
        2,
        "the second request was merged into the first"
    );
    assert!(first.status.success() && second.status.success());
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("x.ptx"), scale_ptx(true)).unwrap();
    let cold = link(
        d.path(),
        &words("-arch=sm_90 x.ptx -o {OUT} --no-cache"),
        &[],
    );
    assert!(
        std::fs::read(dir.path().join("out.cubin")).ok() == cold.out,
        "the link asked for after the edit wrote the old content's image"
    );
}
