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
