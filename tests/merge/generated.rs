//! The generated-program harness: random programs from `tests/differential/genprog.py`
//! compiled with nvcc and linked by nvlink and nvlinkrs (plainly, with `-g`, `-r`, as
//! `-dump-callgraph`, and as partial LTO with the first unit's IR and host code that
//! leaves some kernels unlaunched), each program's outcome checked against what it is known to show
//! (`KNOWN`): equivalent in every link, or nvlink's own dropped-callee defect, with what
//! nvlinkrs must still keep; an equivalent program's links must also be byte-identical
//! to nvlink's (but those in `BYTES_DIFFER`). The tally goes to the test's standard error unbuffered by
//! the harness, so that it shows in `scripts/test.sh` output whether the test passes or
//! fails.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::process::Command;

use nvlinkrs::bytes::Bytes;
use nvlinkrs::elf::cubin::{Cubin, STT_FUNC};
use nvlinkrs::elf::equiv;

use super::{cuda, differential, dropped_callees, nvlinkrs, run};

/// What a program is known to show: nvlink's defect (docs/rules/differences.md, not
/// copied: it removes a function that a function it keeps still calls, so neither its
/// image nor its `-dump-callgraph` can be matched), else equivalence in every link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Known {
    Equivalent,
    NvlinkDefect,
    /// A difference of nvlinkrs' own, known and not yet fixed (the reason).
    Differs(&'static str),
}

/// Seeds whose programs nvlinkrs links differently from nvlink, with the reason, among
/// those measured (sm_90 1 to 40, sm_100 1 to 32): none since the `EXTERNS` placement
/// of sm_90 29 and the `-g` list of 26 were fixed (issue 22). Such a program must still
/// differ (else it comes off this list).
const DIFFERENT: &[(&str, u64, &str)] = &[];

/// Seeds the default run links beside its first ones: programs that once differed
/// (sm_90 29: a kernel's `EXTERNS` record beside a new barrier count; 26: the only
/// kernel's `-g` list, which takes the entries of functions it does not reach; sm_100
/// 21: a new record before a new barrier count).
const REGRESSIONS: &[(&str, &[u64])] = &[("sm_90", &[26, 29]), ("sm_100", &[21])];

/// Equivalent programs whose links are not byte-identical to nvlink's, with the reason
/// (docs/rules/byte-identity.md); every other equivalent program's plain, partial-LTO and
/// `-g` links must be (measured: sm_90 1 to 12, sm_100 1 to 6).
const BYTES_DIFFER: &[(&str, u64)] = &[];

/// The seeds whose programs show nvlink's defect, per architecture, among the first 60
/// at sm_90 and the first 30 at sm_100 (found from nvlink's `-dump-callgraph`); every
/// other program must be equivalent in every link. The default run links them too.
const DEFECTS: &[(&str, &[u64])] = &[("sm_90", &[30, 50]), ("sm_100", &[30])];

fn defects(arch: &str) -> &'static [u64] {
    DEFECTS.iter().find(|d| d.0 == arch).map_or(&[], |d| d.1)
}

fn known(arch: &str, seed: u64) -> Known {
    if let Some(d) = DIFFERENT.iter().find(|d| (d.0, d.1) == (arch, seed)) {
        return Known::Differs(d.2);
    }
    match defects(arch).contains(&seed) {
        true => Known::NvlinkDefect,
        false => Known::Equivalent,
    }
}

/// The image's kernels (entry functions) by name.
fn kernels(image: &[u8]) -> BTreeSet<String> {
    symbols(image, true)
}

/// The image's defined functions (only kernels with `entries_only`) and, without it,
/// its defined variables too, each as `kind name`.
fn symbols(image: &[u8], entries_only: bool) -> BTreeSet<String> {
    let c = Cubin::parse(Bytes::from_vec(image.to_vec()), "image").unwrap();
    c.symbols
        .iter()
        .filter(|s| s.defined() && !s.name.is_empty() && matches!(s.ty, 1 | 2))
        .filter(|s| !entries_only || s.is_entry())
        .map(|s| match (entries_only, s.ty == STT_FUNC) {
            (true, _) => s.name.to_string(),
            (false, true) => format!("function {}", s.name),
            (false, false) => format!("variable {}", s.name),
        })
        .collect()
}

/// `NVLINKRS_GENERATED` programs (12 unless set) for sm_90, from seed
/// `NVLINKRS_GENERATED_FIRST` (1).
#[test]
fn generated_programs() {
    generated("sm_90", 12);
}

/// The same for sm_100 (capsule Mercury beside the SASS), half as many.
#[test]
fn generated_programs_sm100() {
    generated("sm_100", 6);
}

/// Programs with dense `switch`es in device functions and kernels (`genprog.py
/// --switches 1`; issue 35: the jump tables in constant bank 2 were wrong code): nvlink's
/// image byte for byte at sm_80, sm_90, sm_100 and sm_120.
#[test]
fn generated_programs_with_switches() {
    let mut failures = Vec::new();
    for arch in ["sm_80", "sm_90", "sm_100", "sm_120"] {
        for seed in 1..=3 {
            let dir = tempfile::tempdir().unwrap();
            let a = program_with(arch, seed, dir.path(), &["--switches", "1"]);
            match super::differential(&a) {
                Ok(true) => {}
                Ok(false) => failures.push(format!("{arch} program {seed}: not byte-identical")),
                Err(d) => failures.push(format!("{arch} program {seed}:\n    {d}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A few at sm_80 and sm_120 (issue 35: the generator's device-graph calls, dynamic
/// parallelism and variable-only host objects at every target the issue names).
#[test]
fn generated_programs_sm80_sm120() {
    generated("sm_80", 3);
    generated("sm_120", 3);
}

/// Compiles program `seed` for `arch` into `dir`; the link's arguments (`-arch` and the
/// cubins).
pub(super) fn program(arch: &str, seed: u64, dir: &Path) -> Vec<String> {
    program_with(arch, seed, dir, &[])
}

/// `program`, with `genprog.py` options.
fn program_with(arch: &str, seed: u64, dir: &Path, options: &[&str]) -> Vec<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/differential/genprog.py");
    let ok = Command::new("python3")
        .args([
            script.to_str().unwrap(),
            &seed.to_string(),
            dir.to_str().unwrap(),
        ])
        .args(options)
        .status()
        .unwrap()
        .success();
    assert!(ok, "genprog {seed}");
    let mut tus: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".cu"))
        .collect();
    tus.sort();
    let ok = Command::new(cuda().join("bin/nvcc"))
        .current_dir(dir)
        .args(["-cubin", "-rdc=true", &format!("-arch={arch}")])
        .args(&tus)
        .status()
        .unwrap()
        .success();
    assert!(ok, "nvcc on program {seed}");
    let mut a = vec![format!("-arch={arch}")];
    a.extend(
        tus.iter()
            .map(|t| dir.join(t.replace(".cu", ".cubin")).display().to_string()),
    );
    // (kernels launching kernels: the device runtime)
    if dir.join("needs_cudadevrt").exists() {
        a.extend(devrt());
    }
    a
}

/// The link arguments for libcudadevrt.
fn devrt() -> [String; 2] {
    [
        format!("-L{}", cuda().join("lib").display()),
        "-lcudadevrt".into(),
    ]
}

/// Issue 35's links of a program: its units as host objects (`-dc`, whose host code's
/// reference tables narrow the link: a unit that only sets a device variable narrows
/// nothing) and as whole-program LTO (`-dc -dlto`, where a kernel only device code
/// launches is made as a plain function), both beside libcudadevrt: the same messages,
/// an equivalent image with the same kernels. `host objects` and `whole LTO` join
/// `identical` when the bytes are nvlink's, `defect_in` when nvlink's defect shows there.
fn host_object_links(
    seed: u64,
    a: &[String],
    dir: &Path,
    nvlink: &Path,
    identical: &mut Vec<&'static str>,
    defect_in: &mut Vec<&'static str>,
) -> Vec<String> {
    let arch = a[0].trim_start_matches("-arch=");
    let units: Vec<String> = (0..)
        .map(|t| format!("t{t}"))
        .take_while(|t| dir.join(format!("{t}.cu")).exists())
        .collect();
    let mut problems = Vec::new();
    for (kind, flags, suffix) in [
        ("host objects", &["-dc"][..], "_dc.o"),
        ("whole LTO", &["-dc", "-dlto"][..], "_wl.o"),
    ] {
        let mut l = vec![a[0].clone()];
        if kind == "whole LTO" {
            l.push("-dlto".into());
            l.push(format!("-nvvmpath={}", cuda().join("nvvm").display()));
        }
        for u in &units {
            let out = format!("{u}{suffix}");
            let ok = Command::new(cuda().join("bin/nvcc"))
                .current_dir(dir)
                .args(flags)
                .arg(format!("-arch={arch}"))
                .arg(format!("{u}.cu"))
                .args(["-o", &out])
                .status()
                .unwrap()
                .success();
            assert!(ok, "nvcc {flags:?} on {u} of program {seed}");
            l.push(dir.join(out).display().to_string());
        }
        l.extend(devrt());
        let theirs = run(nvlink, &l, dir).output.unwrap_or_default();
        let ours = run(&nvlinkrs(), &l, dir).output.unwrap_or_default();
        if kernels(&theirs) != kernels(&ours) {
            problems.push(format!(
                "{kind} kernels {:?} vs {:?}",
                kernels(&theirs),
                kernels(&ours)
            ));
        }
        // nvlink's defect can show in this link alone (the host tables drop kernels, so
        // a function kept for its address loses a callee): ours keeps what it keeps
        let mut d = l.clone();
        d.push("-dump-callgraph".into());
        let dropped = dropped_callees(&run(nvlink, &d, dir).messages);
        if !dropped.is_empty() {
            problems.extend(defect_kept(&theirs, &ours, &dropped, kind));
            defect_in.push(kind);
            continue;
        }
        match differential(&l) {
            Ok(true) => identical.push(kind),
            Ok(false) => {}
            Err(d) => problems.push(format!("{kind} link: {d}")),
        }
    }
    problems
}

/// Where nvlink's defect shows (`dropped`: its kept callers of removed callees), what
/// nvlinkrs must still do: keep every function and variable nvlink keeps, and only
/// functions more (the callees nvlink drops).
fn defect_kept(theirs: &[u8], ours: &[u8], dropped: &[String], link: &str) -> Option<String> {
    let (t, o) = (symbols(theirs, false), symbols(ours, false));
    let lost: Vec<&String> = t.difference(&o).collect();
    let more: Vec<&String> = o.difference(&t).collect();
    (!lost.is_empty() || more.is_empty() || more.iter().any(|m| !m.starts_with("function "))).then(
        || {
            format!(
                "{link}: nvlink's defect ({}): nvlinkrs lacks {lost:?} and has more {more:?}",
                dropped.join(", ")
            )
        },
    )
}

/// Random programs compiled with nvcc for `arch` and linked both ways, each against what
/// it is known to show; a seed beyond those measured must be equivalent.
fn generated(arch: &str, default_count: u64) {
    let env = |name: &str| -> Option<u64> { std::env::var(name).ok()?.parse().ok() };
    let count = env("NVLINKRS_GENERATED").map_or(default_count, |n| match default_count {
        12 => n,
        6 => n.div_ceil(2),
        _ => n.div_ceil(4),
    });
    let first = env("NVLINKRS_GENERATED_FIRST").unwrap_or(1);
    let mut seeds: Vec<u64> = (first..first + count).collect();
    if env("NVLINKRS_GENERATED").is_none() {
        let range = first..first + count;
        seeds.extend(defects(arch).iter().filter(|s| !range.contains(s)));
        let again = REGRESSIONS.iter().filter(|r| r.0 == arch);
        seeds.extend(again.flat_map(|r| r.1).filter(|s| !range.contains(s)));
    }
    let nvlink = cuda().join("bin/nvlink");
    // one line per program, and the programs whose outcome is not the known one
    let (mut tally, mut unexpected) = (Vec::new(), Vec::new());
    // byte-identical links (`cmp`), by kind
    let mut bytes: std::collections::BTreeMap<&str, usize> = Default::default();
    for &seed in &seeds {
        let dir = tempfile::tempdir().unwrap();
        let a = program(arch, seed, dir.path());
        let expected = known(arch, seed);
        let (mut outcome, mut problems, identical, defect_in) =
            judge(seed, &a, dir.path(), &nvlink);
        // an equivalent program's links are nvlink's byte for byte (but those listed)
        if outcome == Known::Equivalent
            && problems.is_empty()
            && !BYTES_DIFFER.contains(&(arch, seed))
        {
            let mut kinds = vec!["plain", "partial LTO", "-g", "host objects", "whole LTO"];
            kinds.retain(|k| !identical.contains(k) && !defect_in.contains(k));
            if !kinds.is_empty() {
                problems.push(format!(
                    "not byte-identical to nvlink's: {}",
                    kinds.join(", ")
                ));
            }
        }
        for kind in identical {
            *bytes.entry(kind).or_insert(0usize) += 1;
        }
        if let (Known::Differs(why), Known::Equivalent, false) =
            (expected, outcome, problems.is_empty())
        {
            outcome = Known::Differs(why);
        }
        let as_known = match outcome {
            Known::Differs(_) => outcome == expected,
            _ => outcome == expected && problems.is_empty(),
        };
        if !as_known {
            unexpected.push(format!(
                "program {seed}: {outcome:?} (known: {expected:?}){}",
                problems
                    .iter()
                    .map(|p| format!("\n    {p}"))
                    .collect::<String>()
            ));
        }
        tally.push(format!(
            "program {seed}: {outcome:?}{}",
            match problems.first() {
                Some(p) => format!(", {}", p.lines().next().unwrap_or("")),
                None => String::new(),
            }
        ));
    }
    let equivalent = tally.iter().filter(|t| t.ends_with(": Equivalent")).count();
    let defective = tally
        .iter()
        .filter(|t| t.contains(": NvlinkDefect"))
        .count();
    let different = tally.iter().filter(|t| t.contains(": Differs(")).count();
    let summary = format!(
        "{arch} generated programs {first}..{} and {:?}: {equivalent} of {} equivalent in every link (plain, -dump-callgraph, -r against nvlink's -r and relinked, partial LTO, -g, host objects, whole LTO), {defective} with nvlink's defect, {different} with a known difference of ours, {} not as known; byte-identical: {}\n{}\n",
        first + count - 1,
        &seeds[count as usize..],
        seeds.len(),
        unexpected.len(),
        [
            "plain",
            "-g",
            "partial LTO",
            "-r",
            "host objects",
            "whole LTO"
        ]
        .iter()
        .map(|k| format!("{} {k}", bytes.get(k).copied().unwrap_or(0)))
        .collect::<Vec<_>>()
        .join(", "),
        tally.join("\n")
    );
    // straight to standard error: the harness captures only print! and eprint!
    let _ = std::io::stderr().lock().write_all(summary.as_bytes());
    assert!(unexpected.is_empty(), "{}", unexpected.join("\n"));
}

/// One program's links: its outcome and what went wrong beside it (every difference
/// from nvlink for a program that shows no defect; for one that does, what nvlinkrs
/// lost of what nvlink keeps).
/// Also the links whose image is nvlink's byte for byte (`plain`, `-g`, `partial LTO`,
/// `host objects`, `whole LTO`), and those where nvlink's defect shows alone.
fn judge(
    seed: u64,
    a: &[String],
    dir: &Path,
    nvlink: &Path,
) -> (Known, Vec<String>, Vec<&'static str>, Vec<&'static str>) {
    let mut problems = Vec::new();
    // -dump-callgraph: the same graph and register propagation lines as nvlink
    // (both print demangled names; warnings are compared by `differential`)
    let dump = |tool: &Path| -> Vec<String> {
        let mut d = a.to_vec();
        d.push("-dump-callgraph".into());
        run(tool, &d, dir)
            .messages
            .into_iter()
            .filter(|l| !l.contains(" warning : "))
            .collect()
    };
    let want = dump(nvlink);
    assert!(want.len() > 5, "{want:?}");
    let theirs = run(nvlink, a, dir).output.unwrap_or_default();
    let ours = run(&nvlinkrs(), a, dir).output.unwrap_or_default();
    // the kernels, whatever else happens
    if kernels(&theirs) != kernels(&ours) {
        problems.push(format!(
            "kernels {:?} vs {:?}",
            kernels(&theirs),
            kernels(&ours)
        ));
    }
    let dropped = dropped_callees(&want);
    if !dropped.is_empty() {
        // nvlink's defect: nvlinkrs keeps the callees it drops, so neither the dump nor
        // the image can match; ours keeps all nvlink keeps and only functions more
        problems.extend(defect_kept(&theirs, &ours, &dropped, "plain link"));
        return (Known::NvlinkDefect, problems, Vec::new(), Vec::new());
    }
    let got = dump(&nvlinkrs());
    if got != want {
        problems.push(format!("-dump-callgraph {want:?} vs {got:?}"));
    }
    let mut identical = Vec::new();
    match differential(a) {
        Ok(true) => identical.push("plain"),
        Ok(false) => {}
        Err(d) => problems.push(format!("plain link: {d}")),
    }
    // the same program as a debug link (nothing removed, shared variables' symbols kept
    // with their offsets; at sm_100+ every function's code regenerated at the debug
    // level, which nvlinkrs takes from the finalizer: docs/rules/finalizer.md, debug links)
    let mut g = a.to_vec();
    g.push("-g".into());
    match differential(&g) {
        Ok(true) => identical.push("-g"),
        Ok(false) => {}
        Err(d) => problems.push(format!("-g link: {d}")),
    }
    problems.extend(relocatable(seed, a, dir, nvlink, &mut identical));
    problems.extend(partial_lto(seed, a, dir, nvlink, &mut identical));
    let mut defect_in = Vec::new();
    problems.extend(host_object_links(
        seed,
        a,
        dir,
        nvlink,
        &mut identical,
        &mut defect_in,
    ));
    (Known::Equivalent, problems, identical, defect_in)
}

/// Partial LTO: the first unit compiled with `-dc -dlto` (a host object holding its IR
/// and host code that launches only some of its kernels), the others as their cubins,
/// linked with `-dlto`: the same messages and an equivalent image with the same kernels.
fn partial_lto(
    seed: u64,
    a: &[String],
    dir: &Path,
    nvlink: &Path,
    identical: &mut Vec<&'static str>,
) -> Vec<String> {
    let arch = a[0].trim_start_matches("-arch=");
    let ok = Command::new(cuda().join("bin/nvcc"))
        .current_dir(dir)
        .args([
            "-dc",
            "-dlto",
            &format!("-arch={arch}"),
            "t0.cu",
            "-o",
            "t0_lto.o",
        ])
        .status()
        .unwrap()
        .success();
    assert!(ok, "nvcc -dc -dlto on unit 0 of program {seed}");
    let mut l = vec![
        a[0].clone(),
        "-dlto".into(),
        format!("-nvvmpath={}", cuda().join("nvvm").display()),
        dir.join("t0_lto.o").display().to_string(),
    ];
    l.extend(a[2..].iter().cloned());
    let mut problems = Vec::new();
    match differential(&l) {
        Ok(true) => identical.push("partial LTO"),
        Ok(false) => {}
        Err(d) => problems.push(format!("partial LTO link: {d}")),
    }
    let theirs = run(nvlink, &l, dir).output.unwrap_or_default();
    let ours = run(&nvlinkrs(), &l, dir).output.unwrap_or_default();
    if kernels(&theirs) != kernels(&ours) {
        problems.push(format!(
            "partial LTO kernels {:?} vs {:?}",
            kernels(&theirs),
            kernels(&ours)
        ));
    }
    problems
}

/// `-r`: nvlinkrs' relocatable output against nvlink's (`-r` joins `identical` when the
/// bytes are nvlink's), and both relinked by nvlink
/// (nvlink is the judge of the relink, so the shared-memory layout does not enter). The
/// differences found.
fn relocatable(
    seed: u64,
    a: &[String],
    dir: &Path,
    nvlink: &Path,
    identical: &mut Vec<&'static str>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let r = |tool: &Path, name: &str| {
        let out = dir.join(name);
        let mut ra = vec!["-r".to_string()];
        ra.extend(a.iter().cloned());
        ra.extend(["-o".into(), out.display().to_string()]);
        let st = Command::new(tool)
            .args(&ra)
            .env("NVLINKRS_CACHE", "0")
            .output()
            .unwrap();
        assert!(
            st.status.success(),
            "-r of program {seed} by {}",
            tool.display()
        );
        out
    };
    // (each output in its own directory under one name: the -r note names nothing, but
    // the same name keeps the comparison to the bytes)
    for d in ["ours_r", "theirs_r"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    let (ours, theirs) = (
        r(&nvlinkrs(), "ours_r/r.cubin"),
        r(nvlink, "theirs_r/r.cubin"),
    );
    let read = |p: &Path| std::fs::read(p).unwrap();
    if read(&ours) == read(&theirs) {
        identical.push("-r");
    }
    match equiv::compare(&read(&theirs), &read(&ours)) {
        Ok(rep) => {
            let d: Vec<String> = rep
                .differences
                .into_iter()
                .filter(|d| relocatable_kind(d, a[0].starts_with("-arch=sm_1")).is_none())
                .collect();
            if !d.is_empty() {
                problems.push(format!("-r output: {}", d.join("; ")));
            }
        }
        Err(e) => problems.push(format!("-r output: {e}")),
    }
    let relink = |p: &Path| {
        run(nvlink, &[a[0].clone(), p.display().to_string()], dir)
            .output
            .unwrap_or_default()
    };
    let (ours, theirs) = (relink(&ours), relink(&theirs));
    let d = match equiv::compare(&theirs, &ours) {
        Ok(rep) => rep
            .differences
            .into_iter()
            .filter(|d| !outside_relink_comparison(d))
            .collect(),
        Err(e) => vec![e.to_string()],
    };
    if d.is_empty() {
        return problems;
    }
    // nvlink's own round trip can lose shared memory: kernels' own arrays and dynamic
    // arrays come back in other places than its direct link puts them (or in windows
    // aligned to 0x30 or 0x4b0, which no reader accepts). Then the judge is nvlink's
    // direct link of the program: relinking nvlinkrs' -r output must give its layout,
    // but for what any relink changes (the order of `.nv.info` records, the notes, the
    // debug frames)
    let direct = run(nvlink, a, dir).output.unwrap_or_default();
    let from_direct = |relinked: &[u8]| {
        equiv::compare(&direct, relinked).is_ok_and(|r| {
            r.differences.iter().all(|d| {
                outside_relink_comparison(d)
                    || d.starts_with("section .nv.merc.debug_frame: bytes differ")
                    || d.contains("entries in another order")
            })
        })
    };
    if from_direct(&theirs) || !from_direct(&ours) {
        problems.push(format!("-r then relinked: {}", d.join("; ")));
    }
    problems
}

/// The two lists of a `delta` ("expected only [..]; actual only [..]"), their entries
/// unquoted.
fn delta_lists(d: &str) -> Option<(Vec<String>, Vec<String>)> {
    let rest = d.split_once("expected only [")?.1;
    let (e, a) = rest.split_once("]; actual only [")?;
    let a = a.strip_suffix(']')?;
    let items = |l: &str| -> Vec<String> {
        l.split("\", \"")
            .map(|x| x.trim_matches('"').to_string())
            .filter(|x| !x.is_empty())
            .collect()
    };
    Some((items(e), items(a)))
}

/// Why nvlinkrs' `-r` output may differ from nvlink's (docs/rules/relocatable.md), or
/// `None` for a difference that is a finding:
/// - `note`: nvlink's tool note holds its own entry only, ours the inputs' ptxas ones too;
/// - `registers`: nvlink writes each kernel's own register count (`.nv.info` 0x2f), ours
///   the count propagated from its callees (the final link propagates again);
/// - `kept relocations`: nvlink applies relocations against `__constant__` variables and
///   `__UFT_OFFSET` to the code and drops them (whole sections when none is left), ours
///   keeps them for the final link: our code differs, our relocation sections are larger
///   and more, never lacking an entry of nvlink's;
/// - `shared memory`: nvlink lays out kernels' shared windows already (`.nv.shared.*`
///   sections and their symbols) and points dynamic shared arrays at a weak
///   `externsharedinstance` of its own, ours leaves both to the final link;
/// - `symbol table`: the table's size and first global follow from the two above, and at
///   sm_100 nvlink gives undefined data symbols type 13 (ours 1);
/// - `debug frames` (sm_100): nvlink's `.debug_frame` drops replaced functions' entries;
/// - `device runtime size` (sm_100): nvlink gives the Mercury copy of libcudadevrt's
///   undefined `.nv.ptx.const0.size` the value -1, ours keeps the input's 0.
fn relocatable_kind(d: &str, mercury: bool) -> Option<&'static str> {
    if mercury && d.starts_with("symbol (mercury) .nv.ptx.const0.size: ") {
        return Some("device runtime size");
    }
    let shared = |x: &String| x.starts_with(".nv.shared.") || x.contains("externsharedinstance");
    let relocation_section = |x: &String| {
        [".rela.", ".rel.", ".nv.merc.rela."]
            .iter()
            .any(|p| x.starts_with(p))
    };
    let lists = delta_lists(d);
    let (e, a) = lists.clone().unwrap_or_default();
    if d.starts_with("section .note.nv.tkinfo") {
        return Some("note");
    }
    if (d.starts_with("section .nv.info: records ")
        || d.starts_with("section .nv.merc.nv.info: records "))
        && lists.is_some()
        && e.iter().chain(&a).all(|x| x.starts_with("0x2f "))
    {
        return Some("registers");
    }
    let section = d.strip_prefix("section ").unwrap_or("");
    if section.starts_with(".text.") && section.contains(": bytes differ")
        || relocation_section(&section.to_string())
            && !section.contains("debug_frame")
            && (section.contains(": size ") || section.ends_with(": unexpected"))
    {
        return Some("kept relocations");
    }
    if d.starts_with("relocations ") && !d.contains("debug_frame") {
        if d.ends_with(": unexpected") {
            return Some("kept relocations");
        }
        if lists.is_some() && e.iter().all(|x| x.contains(" externsharedinstance ")) {
            return Some(if e.is_empty() {
                "kept relocations"
            } else {
                "shared memory"
            });
        }
    }
    if section.starts_with(".nv.shared.") || section.starts_with(".nv_debug.shared") {
        return Some("shared memory");
    }
    if (d.starts_with("section .shstrtab: strings") || d.starts_with("section .strtab: strings"))
        && lists.is_some()
        && e.iter().all(shared)
        && a.iter().all(relocation_section)
    {
        return Some("shared memory");
    }
    if (d.starts_with("section symbols: ")
        && lists.is_some()
        && e.iter().chain(&a).all(|x| {
            x.trim_start_matches("(mercury) ")
                .starts_with(".nv.shared.")
        }))
        || (d.starts_with("symbol ")
            && (d.contains("externsharedinstance") || d.contains("in .nv_debug.shared")))
    {
        return Some("shared memory");
    }
    if d.starts_with("section .symtab: ")
        || d.starts_with("section .nv.merc.symtab: ")
        || mercury
            && d.starts_with("symbol ")
            && d.contains("[\"type 13 bind 1 other 0x0 in UND")
            && d.contains("Some([\"type 1 bind 1 other 0x0 in UND")
    {
        return Some("symbol table");
    }
    if mercury && d.contains("debug_frame") {
        return Some("debug frames");
    }
    None
}

/// What two relinks of `-r` outputs may differ in (docs/rules/relocatable.md): the tool
/// notes, and the `.debug_frame` CIE pointers nvlink relocates from ptxas's addends.
fn outside_relink_comparison(difference: &str) -> bool {
    difference.starts_with("section .note.nv.tkinfo")
        || difference.starts_with("section .debug_frame: bytes differ")
}
