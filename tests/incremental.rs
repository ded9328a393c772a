//! Incremental LTO (`--incremental`, `NVLINKRS_INCREMENTAL`): each rule a partitioned link
//! keeps, checked on a program made for it (`tests/fixtures/incremental`, built by this
//! test with the pinned nvcc) or on the shared fixtures: the partitioned image against
//! the whole-program image of the same inputs by `nvlinkrs compare --except-code` (all
//! but the code), and what the rule is about read off the image. Then what makes it
//! incremental: after an edit only the partitions whose code changed are compiled again,
//! and the image is the one a cold partitioned link of the edited inputs writes, whatever
//! the thread count.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use nvlinkrs::bytes::Bytes;
use nvlinkrs::elf::cubin::Cubin;

mod common;
use common::{cuda, fixtures, nvlinkrs};

/// The programs of `tests/fixtures/incremental`, built once (a lock keeps two test
/// processes from building them at once).
fn programs() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("incremental-fixtures");
            std::fs::create_dir_all(&out).unwrap();
            let script =
                Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/incremental/build.sh");
            let status = Command::new("flock")
                .arg(out.join(".lock"))
                .arg("bash")
                .arg(script)
                .arg(cuda())
                .arg(&out)
                .status()
                .unwrap();
            assert!(status.success(), "building the incremental fixtures");
            out
        })
        .clone()
}

struct Linked {
    image: Vec<u8>,
    messages: String,
}

/// One link: `mode` is `NVLINKRS_INCREMENTAL` (none: whole-program), `cache` the cache
/// folder (none: the cache off), `env` more settings.
fn link(args: &[String], mode: Option<&str>, cache: Option<&Path>, env: &[(&str, &str)]) -> Linked {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.cubin");
    let mut cmd = Command::new(nvlinkrs());
    cmd.args(args)
        .arg("-o")
        .arg(&out)
        .env_remove("NVLINKRS_INCREMENTAL");
    match cache {
        Some(c) => cmd.arg("--cache-dir").arg(c),
        None => cmd.arg("--no-cache"),
    };
    if let Some(m) = mode {
        cmd.env("NVLINKRS_INCREMENTAL", m);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let r = cmd.output().unwrap();
    let messages =
        String::from_utf8_lossy(&r.stderr).into_owned() + &String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success(), "{args:?}: {messages}");
    Linked {
        image: std::fs::read(&out).unwrap(),
        messages,
    }
}

/// `-arch=sm_N -dlto` with libcudadevrt and `objects`, then `extra`.
fn args(sm: u32, objects: &[PathBuf], extra: &[&str]) -> Vec<String> {
    let mut a = vec![
        format!("-arch=sm_{sm}"),
        "-dlto".into(),
        format!("-L{}", cuda().join("lib").display()),
        "-lcudadevrt".into(),
    ];
    a.extend(objects.iter().map(|o| o.display().to_string()));
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn program(names: &[&str]) -> Vec<PathBuf> {
    names.iter().map(|n| programs().join(n)).collect()
}

/// `compare --except-code`'s lines (it must find the images equivalent).
fn except_code(whole: &[u8], partitioned: &[u8]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("whole.cubin"), dir.path().join("inc.cubin"));
    std::fs::write(&a, whole).unwrap();
    std::fs::write(&b, partitioned).unwrap();
    let r = Command::new(nvlinkrs())
        .args(["compare", "--except-code"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&r.stdout).into_owned();
    assert_eq!(r.status.code(), Some(0), "{text}");
    text.lines().map(str::to_string).collect()
}

/// The whole-program image and the partitioned one (a cold cache) of one link, found
/// equivalent but for the code; `compare`'s notes are returned.
fn both(args: &[String]) -> (Linked, Linked, Vec<String>) {
    let cache = tempfile::tempdir().unwrap();
    let whole = link(args, None, None, &[]);
    let verbose: Vec<String> = args.iter().cloned().chain(["-v".to_string()]).collect();
    let inc = link(&verbose, Some("partitions"), Some(cache.path()), &[]);
    let lines = except_code(&whole.image, &inc.image);
    assert_eq!(
        lines.last().map(String::as_str),
        Some("equivalent but for the code")
    );
    // (an image against itself: the same bytes, said so; was "equivalent but for the code")
    assert_eq!(except_code(&whole.image, &whole.image), ["byte-identical"]);
    (whole, inc, lines)
}

/// Each defined symbol's name, and how many times the image defines it.
fn definitions(image: &[u8]) -> BTreeMap<String, usize> {
    let c = Cubin::parse(Bytes::from_vec(image.to_vec()), "image").unwrap();
    let mut out = BTreeMap::new();
    for s in c
        .symbols
        .iter()
        .filter(|s| s.defined() && !s.name.is_empty() && s.ty != 3)
    {
        *out.entry(s.name.to_string()).or_default() += 1;
    }
    out
}

fn kernels(image: &[u8]) -> std::collections::BTreeSet<String> {
    let c = Cubin::parse(Bytes::from_vec(image.to_vec()), "image").unwrap();
    c.symbols
        .iter()
        .filter(|s| s.is_kernel())
        .map(|s| s.name.to_string())
        .collect()
}

/// The one defined symbol whose name ends with `suffix`, and how often it is defined.
fn defined_once(defs: &BTreeMap<String, usize>, suffix: &str) {
    let found: Vec<(&String, &usize)> = defs.iter().filter(|(n, _)| n.ends_with(suffix)).collect();
    assert_eq!(found.len(), 1, "{suffix}: {found:?}");
    assert_eq!(*found[0].1, 1, "{suffix} defined {} times", found[0].1);
}

#[test]
fn a_static_two_partitions_reach_is_defined_once_and_the_host_sees_its_variables_once() {
    // st_a.cu's static `hits` and bump()'s function-local static `calls` are written by
    // code both kernels inline (two partitions); `total` and `scale_c` are the host's
    let (whole, inc, notes) = both(&args(
        90,
        &program(&["st_a_90.o", "st_b_90.o", "st_main_90.o"]),
        &[],
    ));
    let defs = definitions(&inc.image);
    for v in [
        "_st_a_cu_scale_c_hits",
        "_ZZ4bumpiE5calls",
        "total",
        "scale_c",
    ] {
        defined_once(&defs, v);
    }
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("note: variable __nv_static_")
                && n.ends_with("_st_a_cu_scale_c_hits: made visible"))
    );
    assert!(notes.contains(&"note: variable _ZZ4bumpiE5calls: made visible".to_string()));
    // the kernel the host never launches is dropped in both
    assert_eq!(kernels(&whole.image), kernels(&inc.image));
    assert!(!kernels(&inc.image).iter().any(|k| k.contains("kunused")));
    assert!(
        inc.messages
            .contains("incremental LTO: 2 partitions and the data partition, 3 to compile"),
        "{}",
        inc.messages
    );
}

#[test]
fn a_weak_template_two_units_instantiate_is_one_kernel() {
    // tk<int> and twice<int> are instantiated (weak) in both units; tk<float> in one.
    // The program has no variable, so its data partition has nothing to define: at
    // sm_100 libNVVM's newer NVVM refused the empty module ("wrong initializer for
    // intrinsic global variable") until that partition was left out.
    for sm in [90, 100] {
        let objs = program(&[&format!("tp_a_{sm}.o"), &format!("tp_b_{sm}.o")]);
        let (whole, inc, _) = both(&args(sm, &objs, &[]));
        assert_eq!(kernels(&inc.image), kernels(&whole.image), "sm_{sm}");
        assert_eq!(
            kernels(&inc.image),
            ["_Z2tkIfEvPT_".to_string(), "_Z2tkIiEvPT_".to_string()].into(),
            "sm_{sm}"
        );
        defined_once(&definitions(&inc.image), "_Z2tkIiEvPT_");
    }
}

#[test]
fn a_kernel_launched_from_another_units_kernel_is_kept_with_libcudadevrt() {
    // dl_a.cu's parent launches dl_b.cu's child from the device; the host only parent
    for sm in [90, 100] {
        let objs = program(&[&format!("dl_a_{sm}.o"), &format!("dl_b_{sm}.o")]);
        let (whole, inc, _) = both(&args(sm, &objs, &[]));
        let k = kernels(&inc.image);
        assert_eq!(k, kernels(&whole.image), "sm_{sm}");
        assert!(
            k.contains("_Z5childPii") && k.contains("_Z6parentPii"),
            "sm_{sm}: {k:?}"
        );
        let defs = definitions(&inc.image);
        defined_once(&defs, "launches");
        // libcudadevrt's code is linked where the launch needs it
        assert!(
            defs.keys().any(|n| n.contains("cuda_device_runtime")),
            "sm_{sm}"
        );
    }
    // nvlink links a program that launches from the device as relocatable code, which
    // the first link's estimate weighs: this small one is whole-program (nvlink's image)
    let runtime = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let env = [("XDG_RUNTIME_DIR", runtime.path().to_str().unwrap())];
    let objs = program(&["dl_a_90.o", "dl_b_90.o"]);
    let mut a = args(90, &objs, &["-v"]);
    a.push("--incremental".into());
    let first = link(&a, None, Some(cache.path()), &env);
    assert!(
        first.messages.contains(
            "incremental LTO: linking whole-program: none of this program's code partitions is cached, and building them all on "
        ) && first.messages.contains(
            "weighed as a program that calls the device runtime ('__cudaCDP2GetParameterBufferV2'), which nvlink links as relocatable code"
        ),
        "{}",
        first.messages
    );
    assert!(first.image == link(&args(90, &objs, &["-v"]), None, None, &[]).image);
    Command::new(nvlinkrs())
        .args(["daemon", "stop"])
        .envs(env)
        .output()
        .unwrap();
}

#[test]
fn a_device_launching_programs_partitions_run_the_code_of_its_relocatable_whole_link() {
    // nvlink links a program that launches from the device as relocatable code: the
    // __noinline__ helper both units' kernels call is a function of its own, which each
    // kernel calls; each partition's whole-program code clones it into each kernel. Kernel
    // by kernel the code it can run is the same size and makes the same calls (the
    // helper's own calls included); only the image's code size grows, by the clones.
    use nvlinkrs::elf::codestats::kernels as code;
    for sm in [90, 100] {
        let objs = program(&[&format!("dn_a_{sm}.o"), &format!("dn_b_{sm}.o")]);
        let (whole, inc, _) = both(&args(sm, &objs, &[]));
        let (w, p) = (
            code(&whole.image, "whole").unwrap(),
            code(&inc.image, "inc").unwrap(),
        );
        let own = |image: &[u8]| {
            let c = Cubin::parse(Bytes::from_vec(image.to_vec()), "image").unwrap();
            c.sections
                .iter()
                .any(|s| s.name.as_str() == ".text._Z5shadeif")
        };
        assert!(own(&whole.image) && !own(&inc.image), "sm_{sm}");
        assert_eq!(
            w.kernels.keys().collect::<Vec<_>>(),
            p.kernels.keys().collect::<Vec<_>>()
        );
        let (mut total_w, mut total_p) = (0, 0);
        for (name, e) in &w.kernels {
            let a = &p.kernels[name];
            assert_eq!(a.calls, e.calls, "sm_{sm} {name}");
            assert!(
                a.registers <= e.registers + 2,
                "sm_{sm} {name}: {e:?} {a:?}"
            );
            (total_w, total_p) = (total_w + e.instructions, total_p + a.instructions);
        }
        assert!(
            total_p * 100 <= total_w * 105,
            "sm_{sm}: {total_w} -> {total_p}"
        );
        for k in ["_Z5childPfii", "_Z5sweepPfii"] {
            assert!(
                p.kernels[k].calls >= 2,
                "sm_{sm} {k}: the helper is called, not inlined"
            );
        }
        assert!(p.size > w.size, "sm_{sm}: {} -> {}", w.size, p.size);
    }
}

#[test]
fn a_program_that_takes_a_device_functions_address_links_whole_program() {
    // fp_a.cu's kernel stores a pointer to a device function, fp_b.cu's calls through it:
    // a pointer is a value of the whole program ptxas compiled (an index into the calling
    // kernel's table of clones), so partitions would call garbage (a new user's program:
    // the partitioned image's use_op had no clone to call)
    // (xf_b.cu takes the address of xf_a.cu's function through its own declaration: a
    // reviewer's program, which partitioned while the flag was read off definitions alone)
    for (sm, units) in [
        (90, ["fp_a", "fp_b"]),
        (100, ["fp_a", "fp_b"]),
        (90, ["xf_a", "xf_b"]),
    ] {
        let objs = program(
            &units
                .map(|u| format!("{u}_{sm}.o"))
                .each_ref()
                .map(String::as_str),
        );
        let whole = link(&args(sm, &objs, &[]), None, None, &[]);
        let cache = tempfile::tempdir().unwrap();
        let inc = link(
            &args(sm, &objs, &["-v"]),
            Some("partitions"),
            Some(cache.path()),
            &[],
        );
        assert!(
            ["_Z6op_addff", "_Z6op_mulff", "_Z2sqi"].iter().any(|f| inc.messages.contains(&format!(
                "incremental LTO: linking whole-program: the address of the device function '{f}' is taken"
            ))),
            "sm_{sm}: {}",
            inc.messages
        );
        let verbose = link(&args(sm, &objs, &["-v"]), None, None, &[]);
        assert!(
            inc.image == verbose.image,
            "sm_{sm}: the whole-program image"
        );
        assert!(!whole.image.is_empty());
    }
}

#[test]
fn a_recursive_kernels_stack_is_the_one_record_ptxas_gave() {
    // rc_a.cu's kernel recurses: its partition's ptxas gives its MIN_STACK_SIZE (cannot
    // be determined, 0xffffffff), which the image keeps alone, as the whole-program image
    // has it (a new user's review: the merge added a second record, 0)
    for sm in [90, 100] {
        let objs = program(&[&format!("rc_a_{sm}.o"), &format!("rc_b_{sm}.o")]);
        let (whole, inc, _) = both(&args(sm, &objs, &[]));
        let stacks = |image: &[u8]| {
            let c = Cubin::parse(Bytes::from_vec(image.to_vec()), "image").unwrap();
            let s = c
                .sections
                .iter()
                .find(|s| s.name.as_str() == ".nv.info")
                .unwrap();
            let mut out: Vec<(String, u32)> =
                nvlinkrs::elf::info::parse(c.bytes(s), "image", ".nv.info", 0)
                    .unwrap()
                    .into_iter()
                    .filter(|r| r.attr == nvlinkrs::elf::info::MIN_STACK_SIZE)
                    .filter_map(|r| r.sym_value())
                    .map(|(sym, v)| (c.symbols[sym as usize].name.to_string(), v))
                    .filter(|(n, _)| !n.contains("cuda_device_runtime"))
                    .collect();
            out.sort();
            out
        };
        let expected = vec![
            ("_Z3recPii".to_string(), u32::MAX),
            ("_Z4flatPi".to_string(), 0),
        ];
        assert_eq!(stacks(&whole.image), expected, "sm_{sm}");
        assert_eq!(stacks(&inc.image), expected, "sm_{sm}");
    }
}

#[test]
fn a_managed_variable_two_units_update_is_defined_once() {
    let (_, inc, _) = both(&args(90, &program(&["mg_a_90.o", "mg_b_90.o"]), &[]));
    defined_once(&definitions(&inc.image), "mcount");
}

#[test]
fn variables_only_inline_assembly_writes_are_defined_once() {
    // readg()'s static and asm_flag are stored to by inline PTX naming them, which the
    // summaries' reading of the IR does not see (it sees loads only): each partition had
    // its own copy of the static (an attacker's program; 1241ad3: two `_ZZ5readgiE1c`,
    // `.nv.global.init` 7 7), so kb never saw what ka wrote
    for sm in [90, 100] {
        let o = |u: &str| format!("{u}_{sm}.o");
        let (whole, inc, _) = both(&args(sm, &program(&[&o("as_a"), &o("as_b")]), &[]));
        for image in [&whole.image, &inc.image] {
            let defs = definitions(image);
            defined_once(&defs, "_ZZ5readgiE1c");
            defined_once(&defs, "asm_flag");
        }
        assert!(
            inc.messages.contains("2 partitions"),
            "sm_{sm}: {}",
            inc.messages
        );
    }
}

#[test]
fn host_reference_lists_decide_the_kernels_of_each_partition() {
    // examples/saxpy: the host launches saxpy, not doubler; it reads `calls`
    let f = fixtures();
    let objs = [
        f.join("main_dlto.o"),
        f.join("saxpy_dlto.o"),
        f.join("scale_dlto.o"),
    ];
    let (whole, inc, _) = both(&args(90, &objs, &[]));
    assert_eq!(kernels(&inc.image), kernels(&whole.image));
    assert_eq!(kernels(&inc.image), ["_Z5saxpyfPKfPfi".to_string()].into());
    let defs = definitions(&inc.image);
    for v in ["calls", "bias", "weights", "offsets"] {
        assert_eq!(defs.get(v), definitions(&whole.image).get(v), "{v}");
    }
    // -kernels-used replaces the lists: kb alone
    let st = program(&["st_a_90.o", "st_b_90.o", "st_main_90.o"]);
    let (whole, inc, _) = both(&args(90, &st, &["-kernels-used=kb"]));
    assert_eq!(kernels(&inc.image), ["_Z2kbPi".to_string()].into());
    assert_eq!(kernels(&whole.image), kernels(&inc.image));
}

#[test]
fn maxrregcount_and_the_option_consensus_apply_to_every_partition() {
    let st = program(&["st_a_90.o", "st_b_90.o", "st_main_90.o"]);
    let (_, inc, _) = both(&args(90, &st, &["-maxrregcount=12"]));
    // ptxas's warning about the limit once, not once per partition
    let warning = "ptxas warning : For profile sm_90 adjusting per thread register count of 12 to lower bound of 24";
    assert_eq!(inc.messages.matches(warning).count(), 1, "{}", inc.messages);
    // units compiled with -ftz=true, with -maxrregcount=32 (libNVVM's -maxreg from the
    // modules), with -lineinfo
    let c = fixtures().join("consensus");
    for (a, b) in [
        ("a_ftz.o", "b_ftz.o"),
        ("a_mr32.o", "b_mr32.o"),
        ("a_line.o", "b_line.o"),
    ] {
        both(&args(90, &[c.join(a), c.join(b)], &[]));
    }
}

#[test]
fn line_information_is_kept_and_numbered_by_what_a_partition_holds() {
    let st = program(&["st_a_li_90.o", "st_b_li_90.o", "st_main_li_90.o"]);
    let (_, inc, notes) = both(&args(90, &st, &[]));
    assert!(
        notes.contains(&"note: header: debug byte of the flags 0xa vs 0xb".to_string()),
        "{notes:?}"
    );
    let c = Cubin::parse(Bytes::from_vec(inc.image.clone()), "inc").unwrap();
    assert!(
        c.sections
            .iter()
            .any(|s| &*s.name == ".debug_line" && s.size > 0)
    );
}

#[test]
fn debug_links_and_other_refused_links_are_whole_program() {
    let st = program(&["st_a_90.o", "st_b_90.o", "st_main_90.o"]);
    let cache = tempfile::tempdir().unwrap();
    for extra in [&["-g"][..], &["-split-compile-extended=2"]] {
        let a = args(90, &st, extra);
        let whole = link(&a, None, None, &[]);
        let verbose: Vec<String> = a.iter().cloned().chain(["-v".into()]).collect();
        let inc = link(&verbose, Some("partitions"), Some(cache.path()), &[]);
        assert_eq!(inc.image, whole.image, "{extra:?}");
        assert!(
            inc.messages
                .contains("incremental LTO: linking whole-program: "),
            "{}",
            inc.messages
        );
    }
    // a bad setting is an error naming it
    let r = Command::new(nvlinkrs())
        .args(args(90, &st, &["-o", "/dev/null"]))
        .env("NVLINKRS_INCREMENTAL", "maybe")
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&r.stderr)
            .contains("NVLINKRS_INCREMENTAL='maybe': expected 1 or 0 (or 'partitions')")
    );
}

#[test]
fn every_target_links_as_partitions() {
    // examples/saxpy's units with LTO IR for every target (no host table: every kernel)
    let f = fixtures();
    let objs = [f.join("saxpy_allarch_lto.o"), f.join("scale_allarch_lto.o")];
    for sm in [75, 80, 90, 100, 120] {
        let (whole, inc, _) = both(&args(sm, &objs, &[]));
        assert_eq!(kernels(&inc.image), kernels(&whole.image), "sm_{sm}");
        assert_eq!(kernels(&inc.image).len(), 2, "sm_{sm}");
    }
}

/// The line `-v` gives on what an incremental link compiled.
fn compiled(l: &Linked) -> &str {
    l.messages
        .lines()
        .find(|l| l.contains("incremental LTO: ") && l.contains(" to compile"))
        .unwrap_or_else(|| panic!("{}", l.messages))
}

#[test]
fn an_edit_compiles_only_the_partitions_whose_code_changed_and_gives_the_cold_image() {
    let base = program(&["st_a_90.o", "st_b_90.o", "st_main_90.o"]);
    let edited = |a: &str| program(&[a, "st_b_90.o", "st_main_90.o"]);
    let cache = tempfile::tempdir().unwrap();
    let v = |objs: &[PathBuf]| args(90, objs, &["-v"]);
    let first = link(&v(&base), Some("partitions"), Some(cache.path()), &[]);
    assert!(compiled(&first).ends_with("2 partitions and the data partition, 3 to compile"));
    let again = link(&v(&base), Some("partitions"), Some(cache.path()), &[]);
    assert!(compiled(&again).ends_with(", 0 to compile"));
    // st_a.cu's kernel edited: its partition alone; bump() edited: both kernels inline it
    for (object, count) in [("st_a_k_90.o", 1), ("st_a_f_90.o", 2)] {
        let report = cache.path().join("report.json");
        let mut with_report = v(&edited(object));
        with_report.extend(["--report-json".into(), report.display().to_string()]);
        let inc = link(&with_report, Some("partitions"), Some(cache.path()), &[]);
        // `--report-json` names them too
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        let units: Vec<String> = edited(object)[..count]
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        assert_eq!(
            r["incremental"],
            serde_json::json!({"partitions": 2, "compiled": units})
        );
        // (and which: the partitions by their units; the data partition where the
        // variables' code changed)
        let which = match count {
            1 => format!(
                "incremental LTO: compiling the partition of '{}'",
                edited(object)[0].display()
            ),
            _ => format!(
                "incremental LTO: compiling the partitions of '{}', '{}'",
                edited(object)[0].display(),
                edited(object)[1].display()
            ),
        };
        assert!(
            inc.messages.lines().any(|l| l.ends_with(&which)),
            "{}",
            inc.messages
        );
        assert!(
            compiled(&inc).ends_with(&format!(", {count} to compile")),
            "{object}: {}",
            compiled(&inc)
        );
        // the same bytes as a cold partitioned link of the edited program, on one thread
        // or two
        for jobs in ["1", "2"] {
            let cold = tempfile::tempdir().unwrap();
            let fresh = link(
                &v(&edited(object)),
                Some("partitions"),
                Some(cold.path()),
                &[("NVLINKRS_JOBS", jobs)],
            );
            assert!(fresh.image == inc.image, "{object}, {jobs} jobs");
        }
    }
}

/// The complete events of a link's trace (`--time-trace`) of category `cat` named `name`:
/// each one's start and end in microseconds, and its arguments.
fn spans(trace: &str, cat: &str, name: &str) -> Vec<(f64, f64, serde_json::Value)> {
    let json: serde_json::Value = serde_json::from_str(trace).unwrap();
    let events = json["traceEvents"].as_array().unwrap();
    (events.iter())
        .filter(|e| e["ph"] == "X" && e["cat"] == cat && e["name"] == name)
        .map(|e| {
            let ts = e["ts"].as_f64().unwrap();
            (ts, ts + e["dur"].as_f64().unwrap(), e["args"].clone())
        })
        .collect()
}

#[test]
fn the_first_link_is_whole_program_while_the_daemon_builds_the_partitions() {
    let runtime = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let env = [
        ("XDG_RUNTIME_DIR", runtime.path().to_str().unwrap()),
        ("NVLINKRS_DAEMON_IDLE", "120"),
    ];
    let daemon = |what: &str| {
        let o = Command::new(nvlinkrs())
            .args(["daemon", what])
            .envs(env)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert!(daemon("status").ends_with("background idle\n"));
    let st = program(&["st_a_90.o", "st_b_90.o", "st_main_90.o"]);
    let mut a = args(90, &st, &["-v"]);
    a.push("--incremental".into());
    // (traced: the background build, which runs the same command line, writes no trace
    // over the one this link wrote)
    let trace = runtime.path().join("first.json");
    a.push(format!("--time-trace={}", trace.display()));
    let first = link(&a, None, Some(cache.path()), &env);
    let traced = std::fs::read_to_string(&trace).unwrap();
    assert_eq!(
        first.image,
        link(&args(90, &st, &[]), None, None, &[]).image,
        "nvlink's bytes first"
    );
    assert!(first.messages.contains(
        "incremental LTO: linking whole-program: none of this program's code partitions is cached"
    ));
    assert!(
        first
            .messages
            .contains("incremental LTO: the partitions are being built in the background")
    );
    // (the compile started before the decision: its messages held, said after it)
    let at = |m: &str| first.messages.find(m).unwrap_or(usize::MAX);
    assert!(
        at("incremental LTO: linking whole-program") < at("libNVVM options: "),
        "{}",
        first.messages
    );
    common::wait_background_idle(runtime.path());
    assert_eq!(
        std::fs::read_to_string(&trace).unwrap(),
        traced,
        "the background build wrote over the first link's trace"
    );
    assert!(!traced.contains("nvlinkrs-background"), "{traced}");
    // libNVVM's whole-program compile started beside the summaries its decision was made
    // from, not after them (was: after; the first link waited for the summaries)
    let (summaries, cicc) = (
        spans(&traced, "phase", "summaries"),
        spans(&traced, "phase", "cicc"),
    );
    assert_eq!((summaries.len(), cicc.len()), (1, 1), "{traced}");
    assert!(cicc[0].0 < summaries[0].1, "{summaries:?} {cicc:?}");
    // the next link, after an edit of st_a.cu's kernel, compiles that partition alone
    let edited = program(&["st_a_k_90.o", "st_b_90.o", "st_main_90.o"]);
    let mut a = args(90, &edited, &["-v"]);
    a.push("--incremental".into());
    let next = link(&a, None, Some(cache.path()), &env);
    assert!(
        compiled(&next).ends_with("2 partitions and the data partition, 1 to compile"),
        "{}",
        compiled(&next)
    );
    // (the same options: the image's tool note records -v)
    let cold = tempfile::tempdir().unwrap();
    let again = link(
        &args(90, &edited, &["-v"]),
        Some("partitions"),
        Some(cold.path()),
        &[],
    );
    assert!(next.image == again.image);
    daemon("stop");
}

#[test]
fn a_first_link_whose_partitions_are_expected_to_be_faster_builds_them() {
    // bg_a/bg_b: two units of long kernels that share nothing: on two workers the
    // partitions are expected to take well under the whole-program link's time (a small
    // program, st_*, links whole-program first: the test above)
    let bg = program(&["bg_a_90.o", "bg_b_90.o"]);
    let runtime = tempfile::tempdir().unwrap();
    let rt = runtime.path().to_str().unwrap();
    let mut a = args(90, &bg, &["-v"]);
    a.push("--incremental".into());
    let stop = || {
        Command::new(nvlinkrs())
            .args(["daemon", "stop"])
            .env("XDG_RUNTIME_DIR", rt)
            .output()
            .unwrap()
    };
    let two = tempfile::tempdir().unwrap();
    let env = [("XDG_RUNTIME_DIR", rt), ("NVLINKRS_JOBS", "2")];
    let trace = runtime.path().join("first.json");
    let mut traced = a.clone();
    traced.push(format!("--time-trace={}", trace.display()));
    let first = link(&traced, None, Some(two.path()), &env);
    // the whole-program compile started beside the summaries (a program never
    // partitioned here is likely linked whole) was stopped once the partitions were chosen
    let trace = std::fs::read_to_string(&trace).unwrap();
    let cicc = spans(&trace, "phase", "cicc");
    let stopped: Vec<_> = (cicc.iter())
        .filter(|(_, _, args)| args["stopped"] == "the partitions were built")
        .collect();
    assert_eq!(stopped.len(), 1, "{cicc:?}");
    // (as the partitions were chosen, not once they were built: was after, the whole
    // compile taking a core from the partitions' all along)
    let partitions: Vec<_> = (cicc.iter())
        .filter(|(_, _, args)| args.get("stopped").is_none())
        .collect();
    assert_eq!(partitions.len(), 1, "{cicc:?}");
    let (start, end) = (partitions[0].0, partitions[0].1);
    assert!(stopped[0].1 < start + (end - start) / 2.0, "{cicc:?}");
    assert!(
        first.messages.contains(
            "incremental LTO: none of this program's code partitions is cached: building them, on "
        ),
        "{}",
        first.messages
    );
    assert!(compiled(&first).ends_with("2 partitions and the data partition, 3 to compile"));
    assert!(
        !first.messages.contains("in the background"),
        "{}",
        first.messages
    );
    let cold = tempfile::tempdir().unwrap();
    let partitioned = link(
        &args(90, &bg, &["-v"]),
        Some("partitions"),
        Some(cold.path()),
        &[],
    );
    assert!(
        first.image == partitioned.image,
        "the first image is a cold partitioned link's"
    );
    // the same program again: every partition from the cache
    let again = link(&a, None, Some(two.path()), &env);
    assert!(compiled(&again).ends_with("2 partitions and the data partition, 0 to compile"));
    assert!(again.image == first.image);
    stop();
}

/// What the whole-link cache did for a link (`--report-json`'s `cache.whole_link`).
fn whole_link(
    args: &[String],
    mode: Option<&str>,
    cache: &Path,
    env: &[(&str, &str)],
) -> (Linked, String) {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let mut a = args.to_vec();
    a.push(format!("--report-json={}", report.display()));
    let l = link(&a, mode, Some(cache), env);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let said = json["cache"]["whole_link"].as_str().unwrap().to_string();
    (l, said)
}

#[test]
fn an_incremental_link_is_cached_as_the_image_of_the_kind_it_wrote() {
    // `--incremental` writes the whole-program link's image or the partitioned one: each
    // is stored and found under the key of the mode that writes it cold, so a hit is
    // always one of those two cold images, whichever link or machine stored it
    let runtime = tempfile::tempdir().unwrap();
    let env = [("XDG_RUNTIME_DIR", runtime.path().to_str().unwrap())];
    let cache = tempfile::tempdir().unwrap();
    let st = args(
        90,
        &program(&["st_a_90.o", "st_b_90.o", "st_main_90.o"]),
        &[],
    );
    let (plain, said) = whole_link(&st, None, cache.path(), &env);
    assert_eq!(said, "miss");
    let mut inc = st.clone();
    inc.push("--incremental".into());
    let (hit, said) = whole_link(&inc, None, cache.path(), &env);
    assert_eq!(
        said, "hit",
        "nvlink's image, stored by a link without --incremental"
    );
    assert!(hit.image == plain.image);

    let bg = args(90, &program(&["bg_a_90.o", "bg_b_90.o"]), &[]);
    let cache = tempfile::tempdir().unwrap();
    let (partitioned, said) = whole_link(&bg, Some("partitions"), cache.path(), &env);
    assert_eq!(said, "miss");
    let mut inc = bg.clone();
    inc.push("--incremental".into());
    let (hit, said) = whole_link(&inc, None, cache.path(), &env);
    assert_eq!(
        said, "hit",
        "the partitioned image, stored in partitions mode"
    );
    assert!(hit.image == partitioned.image);
    // ... which is never the image of a link without --incremental
    let (whole, said) = whole_link(&bg, None, cache.path(), &env);
    assert_eq!(said, "miss");
    assert!(whole.image != partitioned.image);
    // and a link in --incremental that wrote the whole-program image stored it as a link
    // without --incremental would (a first link of the small program: whole-program)
    let cache = tempfile::tempdir().unwrap();
    let (first, said) = whole_link(
        &{
            let mut a = st.clone();
            a.push("--incremental".into());
            a
        },
        None,
        cache.path(),
        &env,
    );
    assert_eq!(said, "miss");
    assert!(first.image == plain.image);
    let (again, said) = whole_link(&st, None, cache.path(), &env);
    assert_eq!(said, "hit");
    assert!(again.image == plain.image);
    Command::new(nvlinkrs())
        .args(["daemon", "stop"])
        .envs(env)
        .output()
        .unwrap();
}

#[test]
fn a_crash_inside_libnvvm_costs_one_attempt_of_one_partition() {
    // each partition is compiled in a child (lto::isolated): the fixtures' pass-through
    // libNVVM aborts in its first compile here (NVLINKRS_TEST_CRASHES holds the count),
    // the child is run again, and the link writes the image of a link whose libNVVM
    // never crashed (was: the abort took the linker with it)
    let scratch = tempfile::tempdir().unwrap();
    let count = scratch.path().join("crashes");
    std::fs::write(&count, "1\n").unwrap();
    let nvvm = format!("-nvvmpath={}", fixtures().join("sortnvvm").display());
    let st = args(
        90,
        &program(&["st_a_90.o", "st_b_90.o", "st_main_90.o"]),
        &["-v", &nvvm],
    );
    let real = cuda().join("nvvm/lib64/libnvvm.so");
    let real = ("NVLINKRS_REAL_NVVM", real.to_str().unwrap());
    let cache = tempfile::tempdir().unwrap();
    let crashed = link(
        &st,
        Some("partitions"),
        Some(cache.path()),
        &[real, ("NVLINKRS_TEST_CRASHES", count.to_str().unwrap())],
    );
    assert!(compiled(&crashed).ends_with(", 3 to compile"));
    assert_eq!(std::fs::read_to_string(&count).unwrap().trim(), "0");
    let cache = tempfile::tempdir().unwrap();
    let quiet = link(&st, Some("partitions"), Some(cache.path()), &[real]);
    assert!(crashed.image == quiet.image);
}

/// A link run by the daemon asks that daemon, not another, for the background build:
/// the daemon hands its link processes its socket, whatever the client's `TMPDIR` (a
/// link process asking through its own environment, where the daemon clears
/// `XDG_RUNTIME_DIR`, started a second daemon under `$TMPDIR`: attacker review,
/// 2026-12-02).
#[test]
fn a_link_in_the_daemon_asks_that_daemon_for_the_background_build() {
    let runtime = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let (rt, td) = (
        runtime.path().to_str().unwrap(),
        tmp.path().to_str().unwrap(),
    );
    let env = [
        ("XDG_RUNTIME_DIR", rt),
        ("TMPDIR", td),
        ("NVLINKRS_DAEMON", "1"),
        ("NVLINKRS_DAEMON_IDLE", "60"),
    ];
    let st = program(&["st_a_90.o", "st_b_90.o", "st_main_90.o"]);
    let mut a = args(90, &st, &["-v"]);
    a.push("--incremental".into());
    let first = link(&a, None, Some(cache.path()), &env);
    assert!(
        first
            .messages
            .contains("incremental LTO: the partitions are being built in the background"),
        "{}",
        first.messages
    );
    common::wait_background_idle(runtime.path());
    // (the socket a daemon started from the link process's own environment would have)
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata(tmp.path()).unwrap().uid();
    let stray = tmp.path().join(format!("nvlinkrs-{uid}/daemon.sock"));
    let strays: Vec<_> = stray.exists().then_some(stray).into_iter().collect();
    assert!(strays.is_empty(), "a second daemon: {strays:?}");
}

/// A link with an input or an options file that is not a regular file (a FIFO its writer
/// fed once) asks the daemon for no background build, and says why under `-v` (the build,
/// which reads them again, blocked on the FIFO and held the daemon's one worker for its
/// hour's limit: attacker review, 2026-12-02); and a background build given one (a FIFO
/// put there after the link asked) ends at once.
#[test]
fn an_input_that_is_no_regular_file_is_never_built_in_the_background() {
    let runtime = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let env = [
        ("XDG_RUNTIME_DIR", runtime.path().to_str().unwrap()),
        ("NVLINKRS_DAEMON", "1"),
        ("NVLINKRS_DAEMON_IDLE", "60"),
    ];
    let st = program(&["st_a_90.o", "st_b_90.o", "st_main_90.o"]);
    let fifo = |name: &str| {
        let path = runtime.path().join(name);
        assert!(
            Command::new("mkfifo")
                .arg(&path)
                .status()
                .unwrap()
                .success()
        );
        path
    };
    let (main, opts) = (fifo("main.fifo"), fifo("opts.fifo"));
    let as_input = vec![main.display().to_string()];
    let as_options = vec!["-optf".to_string(), opts.display().to_string()];
    let fed = [
        (&main, std::fs::read(&st[2]).unwrap(), &as_input),
        (&opts, st[2].display().to_string().into_bytes(), &as_options),
    ];
    for (path, bytes, given) in fed {
        let to = path.clone();
        let writer = std::thread::spawn(move || std::fs::write(to, bytes));
        let mut a = args(90, &st[..2], &["-v", "--incremental"]);
        a.extend(given.iter().cloned());
        let first = link(&a, None, Some(cache.path()), &env);
        writer.join().unwrap().unwrap();
        let said = format!(
            "incremental LTO: the partitions are not built in the background: '{}' is not a regular file",
            path.display()
        );
        assert!(first.messages.contains(&said), "{}", first.messages);
        common::wait_background_idle(runtime.path());
    }
    // a background build (its mark set) given a FIFO no one writes: it fails, not waits
    for given in [&as_input, &as_options] {
        let mut a = args(90, &st[..2], &[]);
        a.extend(given.iter().cloned());
        let r = Command::new("timeout")
            .arg("60")
            .arg(nvlinkrs())
            .args(&a)
            .arg("-o")
            .arg(runtime.path().join("bg.cubin"))
            .arg("--no-cache")
            .env("NVLINKRS_INCREMENTAL_BACKGROUND", "1")
            .env("NVLINKRS_INCREMENTAL", "partitions")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{a:?}: {err}");
    }
}
