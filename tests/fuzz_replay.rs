//! The fuzz targets' inputs that found defects, replayed: each file under
//! `fuzz/regressions/TARGET/` goes through that target's body (fuzz/src/lib.rs, included
//! here as it is), as libFuzzer ran it when it crashed, so that a fixed defect stays fixed
//! in a plain `cargo test` (no nightly toolchain, no libFuzzer). The seeds scripts/fuzz.sh
//! writes itself (no fixture needed) go through too. A target with no function here, or
//! a folder named after no target, fails the test.

#[allow(dead_code)]
#[path = "../fuzz/src/lib.rs"]
mod targets;

use std::path::Path;

type Body = fn(&[u8]);

const TARGETS: [(&str, Body); 14] = [
    ("archive", targets::archive),
    ("bitcode_summary", targets::bitcode_summary),
    ("cache_entry", targets::cache_entry),
    ("consensus", targets::consensus),
    ("demangle", targets::demangle),
    ("elf_view", targets::elf_view),
    ("fatbin", targets::fatbin),
    ("link", targets::link),
    ("lto_requests", targets::lto_requests),
    ("ltoir", targets::ltoir),
    ("ltoir_write", targets::ltoir_write),
    ("merge", targets::merge),
    ("nvvm_container", targets::nvvm_container),
    ("relayout", targets::relayout),
];

/// The seeds scripts/fuzz.sh writes without a fixture (each target's first inputs).
fn seeds(target: &str) -> Vec<Vec<u8>> {
    let s = |b: &[u8]| b.to_vec();
    match target {
        "consensus" => vec![s(
            b"-ftz=0 -prec_div=1 -prec_sqrt=1 -fmad=1 \n-maxreg 32 -generate-line-info -ftz=1",
        )],
        "nvvm_container" => vec![s(
            b"\x7d\x5c\x4e\x7f\x01\x41\x02\x62\x03\x02\x14\x00\x00\x00\x18\x00\x2c\x00\x00\x00\x2c\x00\x00\x00\x01\x00\x08\x00\x02\x00\x09\x00\x0d\x00\x01\x00\x0f\x00\x01\x00\x00\x00\x00\x00BC\xc0\xde",
        )],
        "cache_entry" => vec![s(b"\x00NVLRSC\x00\x03"), s(b"\x01out\x00\x01")],
        "demangle" => ["_Z5saxpyfPKfPfi", "_Z2twILi1EEii", "_ZNK2ns1S1gEv"]
            .iter()
            .map(|n| s(n.as_bytes()))
            .collect(),
        _ => vec![s(b""), s(b"\x00\x02")],
    }
}

#[test]
fn inputs_that_found_defects_are_replayed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions");
    let mut replayed = 0;
    for entry in std::fs::read_dir(&root).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let Some((_, body)) = TARGETS.iter().find(|(t, _)| *t == name) else {
            panic!("fuzz/regressions/{name}: no such fuzz target");
        };
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            if f.file_name().is_some_and(|n| n == "README.md") {
                continue;
            }
            eprintln!("replaying {}", f.display());
            body(&std::fs::read(&f).unwrap());
            replayed += 1;
        }
    }
    eprintln!("{replayed} inputs replayed");
    for (name, body) in TARGETS {
        for seed in seeds(name) {
            body(&seed);
        }
    }
}

/// Every target the fuzz package builds has its function here, and the other way round.
#[test]
fn every_fuzz_target_is_replayed() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/Cargo.toml"))
            .unwrap();
    let mut built: Vec<&str> = manifest
        .lines()
        .filter_map(|l| l.strip_prefix("name = \""))
        .filter_map(|l| l.strip_suffix('"'))
        .filter(|n| *n != "nvlinkrs-fuzz" && *n != "nvlinkrs_fuzz")
        .collect();
    built.sort();
    let mut here: Vec<&str> = TARGETS.iter().map(|(n, _)| *n).collect();
    here.sort();
    assert_eq!(built, here);
}
