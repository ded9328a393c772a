//! The whole-link key's soundness, as a table: each row changes one thing a link reads
//! into its image (a tool, an input, an environment variable, an option) and the key must
//! change; the rows after them change what a link does not read into its image, and the
//! key must stay. Every variable `linkenv::VARS` says finds a tool or an input or changes
//! the image has a row (checked). The key is made as a link makes it (`key::key` on the
//! link's plan, cache and maps) in a world of files made here: a toolkit's layout whose
//! tools are small files (the key reads a tool's bytes and nothing else of it, so any bytes
//! stand for them) and inputs of arbitrary bytes (the key does not parse them). nvlinkrs
//! itself is keyed too (`toolkit::own_image`); a test cannot replace its own binary.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::key;
use crate::cache::{Cache, DEFAULT_CAP};
use crate::input::Opened;
use crate::linkenv::{Effect, LinkEnv, VARS};
use crate::plan::Plan;

struct World {
    dir: tempfile::TempDir,
    env: LinkEnv,
    /// The command line, `{D}` standing for the world's folder.
    args: String,
}

impl World {
    fn new() -> World {
        let w = World {
            dir: tempfile::tempdir().unwrap(),
            env: LinkEnv::default(),
            args: "-arch=sm_90 {D}/a.o {D}/b.o -lx -o {D}/out.cubin".into(),
        };
        for (kit, n) in [("kit1", 1), ("kit2", 2)] {
            w.write(&format!("{kit}/bin/ptxas"), &format!("ptxas {n}"));
            w.write(
                &format!("{kit}/nvvm/lib64/libnvvm.so"),
                &format!("libnvvm {n}"),
            );
            w.write(
                &format!("{kit}/nvvm/libdevice/libdevice.10.bc"),
                &format!("libdevice {n}"),
            );
            w.write(
                &format!("{kit}/lib/libnvJitLink.so.13"),
                &format!("nvjitlink {n}"),
            );
        }
        w.write("nvvm2/lib64/libnvvm.so", "libnvvm of -nvvmpath");
        w.write("a.o", "object a");
        w.write("b.o", "object b");
        w.write("lib/libx.a", "!<arch>\nx one");
        w.write("lib2/libx.a", "!<arch>\nx two");
        w.write("helper", "llvm helper 1");
        w.write("helper2", "llvm helper 2");
        w.write("launch.sh", "#!/bin/sh\nexec \"$@\"\n");
        std::fs::create_dir_all(w.p("empty")).unwrap();
        let mut w = w;
        w.set("CUDA_HOME", Some("{D}/kit1"));
        w.set("LIBRARY_PATH", Some("{D}/lib"));
        w.set("PATH", Some("{D}/empty"));
        w
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn expand(&self, s: &str) -> String {
        s.replace("{D}", self.dir.path().to_str().unwrap())
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.p(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// Rewrites `rel` in place with `text` (of the same length), its modification time
    /// restored: only the change time tells.
    fn rewrite_in_place(&self, rel: &str, text: &str) {
        let p = self.p(rel);
        let old = std::fs::metadata(&p).unwrap();
        assert_eq!(old.len(), text.len() as u64, "{rel}: same length");
        // (the change time's clock ticks coarsely)
        std::thread::sleep(Duration::from_millis(20));
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        std::io::Write::write_all(&mut &f, text.as_bytes()).unwrap();
        f.set_modified(old.modified().unwrap()).unwrap();
    }

    fn link(&self, target: &str, rel: &str) {
        let p = self.p(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let _ = std::fs::remove_file(&p);
        std::os::unix::fs::symlink(self.expand(target), p).unwrap();
    }

    fn set(&mut self, name: &str, value: Option<&str>) {
        let value = value.map(|v| self.expand(v));
        self.env.set(name, value.as_deref());
    }

    fn args(&mut self, from: &str, to: &str) {
        assert!(self.args.contains(from), "{from} in {}", self.args);
        self.args = self.args.replacen(from, to, 1);
    }

    /// The key a link of this world makes (its tool memos in `cache`).
    fn key(&self, cache: &Cache) -> String {
        self.key_given(cache, None)
    }

    /// The key where the process gave the link a finalizer of library `given`.
    fn key_given(&self, cache: &Cache, given: Option<&Path>) -> String {
        let args: Vec<String> = self
            .expand(&self.args)
            .split_whitespace()
            .map(String::from)
            .collect();
        let (parsed, _, _) = crate::cli::parse(&args).unwrap();
        let req = parsed.request().unwrap();
        let plan = Plan::with_env(&req, self.env.clone());
        let opened = Opened::default();
        let k =
            key::key(&plan, cache, &opened, given).unwrap_or_else(|| panic!("no key: {args:?}"));
        k.key.finish()
    }
}

type Step = fn(&mut World);

/// (what the row covers, how the world is before, the change).
const MUST_MISS: &[(&str, Step, Step)] = &[
    // the tools
    (
        "ptxas",
        |_| {},
        |w| w.rewrite_in_place("kit1/bin/ptxas", "ptxas 9"),
    ),
    (
        "libNVVM of the toolkit (no -nvvmpath)",
        |w| w.args("-arch", "-lto -arch"),
        |w| {
            w.write("new.so", "libnvvm 9");
            std::fs::rename(w.p("new.so"), w.p("kit1/nvvm/lib64/libnvvm.so")).unwrap();
        },
    ),
    (
        "libNVVM of -nvvmpath",
        |w| w.args("-arch", "-lto -nvvmpath={D}/nvvm2 -arch"),
        |w| w.write("nvvm2/lib64/libnvvm.so", "another libnvvm"),
    ),
    (
        "libdevice",
        |_| {},
        |w| w.rewrite_in_place("kit1/nvvm/libdevice/libdevice.10.bc", "libdevice 9"),
    ),
    (
        "libnvJitLink (the sm_100+ finalizer)",
        |w| w.args("sm_90", "sm_100"),
        |w| w.write("kit1/lib/libnvJitLink.so.13", "nvjitlink 9"),
    ),
    (
        "the LLVM helper",
        |w| w.set("NVLINKRS_LLVM_HELPER", Some("{D}/helper")),
        |w| w.rewrite_in_place("helper", "llvm helper 9"),
    ),
    (
        "the ptxas launcher's file",
        |w| w.set("NVLINKRS_PTXAS_LAUNCHER", Some("{D}/launch.sh")),
        |w| w.write("launch.sh", "#!/bin/sh\nexec \"$@\" -O0\n"),
    ),
    // the environment
    (
        "CUDA_HOME",
        |_| {},
        |w| w.set("CUDA_HOME", Some("{D}/kit2")),
    ),
    (
        "CUDA_PATH",
        |w| {
            w.set("CUDA_HOME", None);
            w.set("CUDA_PATH", Some("{D}/kit1"));
        },
        |w| w.set("CUDA_PATH", Some("{D}/kit2")),
    ),
    (
        "PATH",
        |w| {
            w.set("CUDA_HOME", None);
            w.set("PATH", Some("{D}/kit1/bin"));
        },
        |w| w.set("PATH", Some("{D}/kit2/bin")),
    ),
    (
        "NVLINKRS_TOOLCHAIN_DIR",
        |w| {
            w.set("CUDA_HOME", None);
            w.link("{D}/kit1", "tc1/cuda");
            w.link("{D}/kit2", "tc2/cuda");
            w.set("NVLINKRS_TOOLCHAIN_DIR", Some("{D}/tc1"));
        },
        |w| w.set("NVLINKRS_TOOLCHAIN_DIR", Some("{D}/tc2")),
    ),
    (
        "XDG_CACHE_HOME",
        |w| {
            w.set("CUDA_HOME", None);
            w.link("{D}/kit1", "x1/nvlinkrs/cuda-13.5/cuda");
            w.link("{D}/kit2", "x2/nvlinkrs/cuda-13.5/cuda");
            w.set("XDG_CACHE_HOME", Some("{D}/x1"));
        },
        |w| w.set("XDG_CACHE_HOME", Some("{D}/x2")),
    ),
    (
        "HOME",
        |w| {
            w.set("CUDA_HOME", None);
            w.link("{D}/kit1", "h1/.cache/nvlinkrs/cuda-13.5/cuda");
            w.link("{D}/kit2", "h2/.cache/nvlinkrs/cuda-13.5/cuda");
            w.set("HOME", Some("{D}/h1"));
        },
        |w| w.set("HOME", Some("{D}/h2")),
    ),
    // the CUDA wheels of a Python environment (no python3 run: `toolkit::pypi_root`)
    (
        "VIRTUAL_ENV",
        |w| {
            w.set("CUDA_HOME", None);
            w.link("{D}/kit1", "v1/lib/python3.12/site-packages/nvidia/cu13");
            w.link("{D}/kit2", "v2/lib/python3.12/site-packages/nvidia/cu13");
            w.set("VIRTUAL_ENV", Some("{D}/v1"));
        },
        |w| w.set("VIRTUAL_ENV", Some("{D}/v2")),
    ),
    (
        "CONDA_PREFIX",
        |w| {
            w.set("CUDA_HOME", None);
            w.link("{D}/kit1", "c1/lib/python3.11/site-packages/nvidia/cu13");
            w.link("{D}/kit2", "c2/lib/python3.11/site-packages/nvidia/cu13");
            w.set("CONDA_PREFIX", Some("{D}/c1"));
        },
        |w| w.set("CONDA_PREFIX", Some("{D}/c2")),
    ),
    (
        "PYENV_VERSION",
        |w| {
            w.set("CUDA_HOME", None);
            w.link(
                "{D}/kit1",
                "pe/versions/3.12.1/lib/python3.12/site-packages/nvidia/cu13",
            );
            w.link(
                "{D}/kit2",
                "pe/versions/3.13.0/lib/python3.13/site-packages/nvidia/cu13",
            );
            w.set("PYENV_ROOT", Some("{D}/pe"));
            w.set("PYENV_VERSION", Some("3.12.1"));
        },
        |w| w.set("PYENV_VERSION", Some("3.13.0")),
    ),
    (
        "PYENV_ROOT",
        |w| {
            w.set("CUDA_HOME", None);
            w.link(
                "{D}/kit1",
                "pe1/versions/3.12.1/lib/python3.12/site-packages/nvidia/cu13",
            );
            w.link(
                "{D}/kit2",
                "pe2/versions/3.12.1/lib/python3.12/site-packages/nvidia/cu13",
            );
            w.write("pe2/version", "3.12.1\n");
            w.write("pe1/version", "3.12.1\n");
            w.set("PYENV_ROOT", Some("{D}/pe1"));
        },
        |w| w.set("PYENV_ROOT", Some("{D}/pe2")),
    ),
    (
        "NVLINKRS_LLVM_HELPER",
        |w| w.set("NVLINKRS_LLVM_HELPER", Some("{D}/helper")),
        |w| w.set("NVLINKRS_LLVM_HELPER", Some("{D}/helper2")),
    ),
    (
        "LIBRARY_PATH",
        |_| {},
        |w| w.set("LIBRARY_PATH", Some("{D}/lib2")),
    ),
    (
        "NVLINKRS_FINALIZER",
        |w| w.args("sm_90", "sm_100"),
        |w| w.set("NVLINKRS_FINALIZER", Some("off")),
    ),
    (
        "NVLINKRS_PTXAS_LAUNCHER",
        |_| {},
        |w| w.set("NVLINKRS_PTXAS_LAUNCHER", Some("{D}/launch.sh")),
    ),
    (
        "NVLINKRS_PTXAS_LAUNCHER's words",
        |w| w.set("NVLINKRS_PTXAS_LAUNCHER", Some("{D}/launch.sh")),
        |w| w.set("NVLINKRS_PTXAS_LAUNCHER", Some("{D}/launch.sh --fast")),
    ),
    (
        "NVLINKRS_INCREMENTAL",
        |w| w.args("-arch", "-lto -arch"),
        |w| w.set("NVLINKRS_INCREMENTAL", Some("1")),
    ),
    (
        "NVLINKRS_INCREMENTAL's mode",
        |w| {
            w.args("-arch", "-lto -arch");
            w.set("NVLINKRS_INCREMENTAL", Some("1"));
        },
        |w| w.set("NVLINKRS_INCREMENTAL", Some("partitions")),
    ),
    // the inputs
    (
        "an input rewritten in place, its size and modification time kept",
        |_| {},
        |w| w.rewrite_in_place("a.o", "object c"),
    ),
    (
        "an archive member",
        |_| {},
        |w| w.write("lib/libx.a", "!<arch>\nx three"),
    ),
    (
        "an archive named twice: through a link, then a copy",
        |w| {
            w.link("{D}/lib/libx.a", "liby.a");
            w.args("-lx", "-lx {D}/lib/libx.a {D}/liby.a");
        },
        |w| {
            std::fs::remove_file(w.p("liby.a")).unwrap();
            std::fs::copy(w.p("lib/libx.a"), w.p("liby.a")).unwrap();
        },
    ),
    (
        "the input order",
        |_| {},
        |w| w.args("{D}/a.o {D}/b.o", "{D}/b.o {D}/a.o"),
    ),
    (
        "the -L order",
        |w| w.args("-lx", "-L{D}/lib -L{D}/lib2 -lx"),
        |w| w.args("-L{D}/lib -L{D}/lib2", "-L{D}/lib2 -L{D}/lib"),
    ),
    (
        "an -optf file",
        |w| {
            w.write("opts", "-maxrregcount=32");
            w.args("-lx", "-lx -optf {D}/opts");
        },
        |w| w.write("opts", "-maxrregcount=64"),
    ),
    // options
    ("-arch", |_| {}, |w| w.args("sm_90", "sm_80")),
    ("-g", |_| {}, |w| w.args("-lx", "-lx -g")),
    ("-Xptxas", |_| {}, |w| w.args("-lx", "-lx -Xptxas -O1")),
    (
        "-kernels-used",
        |_| {},
        |w| w.args("-lx", "-lx -kernels-used=k"),
    ),
    (
        "--incremental",
        |w| w.args("-arch", "-lto -arch"),
        |w| w.args("-lx", "-lx --incremental"),
    ),
];

/// (what the row changes, how the world is before, the change): no byte of the image.
const MUST_HIT: &[(&str, Step, Step)] = &[
    (
        "--time-trace and --explain (they show the link, a traced link is the same link)",
        |_| {},
        |w| {
            w.args(
                "-lx",
                "-lx --time-trace={D}/t.json --time-trace-granularity=5 --explain",
            )
        },
    ),
    (
        "the time trace's file",
        |w| w.args("-lx", "-lx --time-trace={D}/t.json"),
        |w| w.args("t.json", "u.json"),
    ),
    (
        "NVLINKRS_JOBS",
        |_| {},
        |w| w.set("NVLINKRS_JOBS", Some("1")),
    ),
    ("TMPDIR", |_| {}, |w| w.set("TMPDIR", Some("{D}/empty"))),
    ("MAKEFLAGS", |_| {}, |w| w.set("MAKEFLAGS", Some("-j8"))),
    (
        "NVLINKRS_REMOTE_CACHE",
        |_| {},
        |w| w.set("NVLINKRS_REMOTE_CACHE", Some("file://{D}/team")),
    ),
    (
        "the finalizer's setting below sm_100",
        |_| {},
        |w| w.set("NVLINKRS_FINALIZER", Some("off")),
    ),
    (
        "the output's name (which only a debug link records)",
        |_| {},
        |w| w.args("out.cubin", "other.cubin"),
    ),
    (
        "an input rewritten with the same bytes",
        |_| {},
        |w| w.write("a.o", "object a"),
    ),
    (
        "a variable no link reads",
        |_| {},
        |w| w.set("EDITOR", Some("vi")),
    ),
    (
        "--incremental and NVLINKRS_INCREMENTAL=1 (the same mode)",
        |w| {
            w.args("-arch", "-lto -arch");
            w.args("-lx", "-lx --incremental");
        },
        |w| {
            w.args(" --incremental", "");
            w.set("NVLINKRS_INCREMENTAL", Some("1"));
        },
    ),
    (
        "NVLINKRS_INCREMENTAL=0 (off, as unset)",
        |w| w.args("-arch", "-lto -arch"),
        |w| w.set("NVLINKRS_INCREMENTAL", Some("0")),
    ),
    (
        "NVLINKRS_INCREMENTAL in a link without LTO",
        |_| {},
        |w| w.set("NVLINKRS_INCREMENTAL", Some("partitions")),
    ),
    (
        "another folder for the cache",
        |_| {},
        |w| w.args("-lx", "-lx --cache-dir={D}/c2"),
    ),
];

/// The key before and after a row's change, each in a fresh world and cache.
/// (`cache`: one for every row, so that nvlinkrs' own 200 MB image is hashed once, not
/// once a row; a tool's memo is by its path and stamps, and each row's world has its own
/// paths)
fn keys(cache: &Cache, setup: Step, change: Step) -> (String, String) {
    let mut w = World::new();
    setup(&mut w);
    let before = w.key(cache);
    change(&mut w);
    (before, w.key(cache))
}

/// The finalizer a process gives its links (the drop-in's: NVIDIA's library, loaded in
/// the program) is keyed by its own file, in place of the toolkit's: another library, or
/// the same one rewritten, is a miss; below sm_100, where it does not run, it is not keyed.
#[test]
fn the_given_finalizers_library_is_keyed() {
    let mut w = World::new();
    let cache = Cache::open(&w.p("cache"), DEFAULT_CAP).unwrap();
    w.write("nvj/one.so", "nvjitlink 1");
    w.write("nvj/two.so", "nvjitlink 2");
    let (one, two) = (w.p("nvj/one.so"), w.p("nvj/two.so"));
    assert_eq!(
        w.key_given(&cache, Some(&one)),
        w.key_given(&cache, Some(&two))
    );
    w.args = w.args.replace("sm_90", "sm_100");
    let before = w.key_given(&cache, Some(&one));
    assert_ne!(before, w.key_given(&cache, Some(&two)));
    assert_ne!(before, w.key_given(&cache, None));
    w.write("nvj/one.so", "nvjitlink 1, rebuilt");
    assert_ne!(before, w.key_given(&cache, Some(&one)));
}

#[test]
fn every_tool_input_setting_and_option_the_image_depends_on_changes_the_key() {
    let mut failures = Vec::new();
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(&dir.path().join("cache"), DEFAULT_CAP).unwrap();
    for (what, setup, change) in MUST_MISS {
        let (before, after) = keys(&cache, *setup, *change);
        if before == after {
            failures.push(format!("{what}: the same key"));
        }
    }
    for (what, setup, change) in MUST_HIT {
        let (before, after) = keys(&cache, *setup, *change);
        if before != after {
            failures.push(format!("{what}: another key (a needless miss)"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // every variable that finds a tool or an input, or changes the image, has its row
    for (name, effect) in VARS {
        if matches!(
            effect,
            Effect::FindsTools | Effect::FindsInputs | Effect::Image
        ) {
            assert!(
                MUST_MISS.iter().any(|(what, _, _)| what == name),
                "{name}: no row"
            );
        }
    }
}

/// A file the key holds that changes after the key was made (a link that ran while it was
/// rewritten) is told: such a link is not stored.
#[test]
fn a_file_changed_after_the_key_was_made_is_told() {
    let mut w = World::new();
    w.set("NVLINKRS_LLVM_HELPER", Some("{D}/helper"));
    let cache = Cache::open(&w.p("cache"), DEFAULT_CAP).unwrap();
    let args: Vec<String> = w
        .expand(&w.args)
        .split_whitespace()
        .map(String::from)
        .collect();
    let req = crate::cli::parse(&args).unwrap().0.request().unwrap();
    let plan = Plan::with_env(&req, w.env.clone());
    for (file, text) in [
        ("a.o", "object z"),
        ("lib/libx.a", "!<arch>\nx four"),
        ("kit1/bin/ptxas", "ptxas 8"),
        ("helper", "llvm helper 8"),
    ] {
        let k = key::key(&plan, &cache, &Opened::default(), None).unwrap();
        assert!(k.unchanged(), "{file}");
        std::thread::sleep(Duration::from_millis(20));
        w.write(file, text);
        assert!(!k.unchanged(), "{file}");
    }
}
