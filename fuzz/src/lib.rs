//! The fuzz targets' bodies, one function per target (`fuzz_targets/NAME.rs` hands each
//! libFuzzer's input to its function here), so that the inputs that found defects, kept
//! under `fuzz/regressions/NAME/`, are replayed by a plain `cargo test` of the main crate
//! (tests/fuzz_replay.rs includes this file): a fixed defect stays fixed in CI without a
//! nightly toolchain or libFuzzer.

use nvlinkrs::bytes::Bytes;
use nvlinkrs::cache::{Cache, DEFAULT_CAP, Key, check_entry, unpack};
use nvlinkrs::elf::ElfView;
use nvlinkrs::elf::relayout::replace_section;
use nvlinkrs::input::{Mode, kind::Ext, walk};
use nvlinkrs::ir::nvvm_container::{LEGACY_MAGIC, MAGIC, VERSIONS, parse};
use nvlinkrs::ir::write::LtoIr;
use std::path::PathBuf;
use std::sync::OnceLock;

// (cache_entry)
fn cache() -> &'static (tempfile::TempDir, Cache) {
    static CACHE: OnceLock<(tempfile::TempDir, Cache)> = OnceLock::new();
    CACHE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path(), DEFAULT_CAP).unwrap();
        (dir, cache)
    })
}

fn entry_path(dir: &std::path::Path, key: &Key) -> PathBuf {
    let hex = key.finish();
    dir.join("objects").join(&hex[..2]).join(&hex[2..])
}

// (link)
const EXTENSIONS: [&str; 4] = ["cubin", "o", "fatbin", "a"];
const SMS: [u32; 5] = [75, 80, 90, 100, 120];

// (nvvm_container)
fn nvvm_check(d: &[u8]) {
    let Ok(c) = parse(d, "fuzz.nvvm") else {
        return;
    };
    let len = d.len() as u64;
    assert_eq!(c.ir_offset + c.ir_size, len);
    for t in &c.tags {
        if let Some((at, n)) = t.blob {
            assert!(at + n <= c.ir_offset);
        }
    }
    let _ = (c.lines(), c.target());
    // the summary every IR container gets
    let _ = nvlinkrs::ir::container::parse(d, "fuzz.nvvm").map(|(h, _)| h.arch());
    let _ = nvlinkrs::ir::container::check_for_link(d, "fuzz.nvvm");
}

/// Fuzzes the `ar` archive reader, and the input walk over what it returns.
pub fn archive(data: &[u8]) {
    let b = Bytes::from_vec(data.to_vec());
    let _ = nvlinkrs::input::archive::parse(&b, "fuzz.a");
    // The whole walk, as a link would do it; thin-archive members are not opened (no dir).
    if !data.starts_with(b"!<thin>") {
        let _ = walk("fuzz.a", Ext::Other, b, Mode::Link { lto: true }, None, 0);
    }
}

/// Fuzzes the cache reader with hostile entries: arbitrary bytes at an entry's place
/// (never a hit unless they pass the header check, and `verify` agrees with `get`), and
/// stored entries with bytes changed on disk (a hit gives back exactly what was stored,
/// or nothing). Hits are unpacked as the whole-link stage unpacks them.
pub fn cache_entry(data: &[u8]) {
    let Some((&mode, payload)) = data.split_first() else {
        return;
    };
    let (dir, cache) = cache();
    let key = Key::new("fuzz").text("entry");
    let path = entry_path(dir.path(), &key);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    if mode % 2 == 0 {
        // arbitrary bytes where the entry goes
        std::fs::write(&path, payload).unwrap();
        let intact = cache.verify().is_empty();
        let got = cache.get(&key);
        assert_eq!(intact, got.is_some());
        assert_eq!(got, check_entry(payload, &key));
        if let Some(g) = got {
            let _ = unpack(&g);
        }
    } else {
        // a stored entry, one byte changed (or none, when the position is past the end)
        cache.put(&key, payload, std::time::Duration::ZERO);
        let mut on_disk = std::fs::read(&path).unwrap();
        let at = usize::from(mode) * 7 % (on_disk.len() + 1);
        if let Some(b) = on_disk.get_mut(at) {
            *b ^= payload.first().copied().unwrap_or(1) | 1;
        }
        std::fs::write(&path, &on_disk).unwrap();
        match cache.get(&key) {
            Some(g) => {
                assert_eq!(g, payload);
                let _ = unpack(&g);
            }
            None => assert!(at < on_disk.len(), "an untouched entry was a miss"),
        }
    }
    let _ = std::fs::remove_file(&path);
}

/// Fuzzes the per-module NVVM option-string reader and the consensus check, and the
/// LTO IR unscrambling round trip.
pub fn consensus(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut c = nvlinkrs::consensus::Consensus::default();
    for (i, part) in text.split('\n').enumerate() {
        c.add(&format!("m{i}.o"), Some(part));
    }
    let _ = c.check(&mut |_| {});
    let _ = c.explain();
    if data.len() >= 4 {
        let key = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
        let mut d = data[4..].to_vec();
        nvlinkrs::ir::obfuscation::scramble(&mut d, key);
        nvlinkrs::ir::obfuscation::unscramble(&mut d, key);
        assert_eq!(&d[..], &data[4..]);
    }
}

/// The demangler reads symbol names from inputs: any bytes must give a string back
/// (never a panic, never unbounded work), and a name it cannot read comes back as given.
pub fn demangle(data: &[u8]) {
    let Ok(name) = std::str::from_utf8(data) else {
        return;
    };
    let out = nvlinkrs::demangle::demangle(name);
    // (a file-scope static's name, `__nv_static_<n>__<tag>_Z...`, comes back as its own
    // name's demangling, `std::basic_string` for one ending `_ZSb`, or as given)
    if name.starts_with("__nv_static_") {
        assert!(out == name || !out.is_empty(), "{name:?}");
    } else if !name.starts_with("_Z") {
        assert_eq!(out, name);
    }
}

/// Fuzzes the device ELF view (cubin summary) and the host-object section reader.
pub fn elf_view(data: &[u8]) {
    let _ = nvlinkrs::elf::image_extent(data);
    let _ = nvlinkrs::elf::device_summary(data, "fuzz.cubin");
    let b = Bytes::from_vec(data.to_vec());
    let _ = nvlinkrs::fatbin::host::read(&b, "fuzz.o");
}

/// Fuzzes the fatbin container reader and member decompression (zstd, LZ4).
pub fn fatbin(data: &[u8]) {
    let b = Bytes::from_vec(data.to_vec());
    if let Ok(containers) = nvlinkrs::fatbin::parse(&b, "fuzz.fatbin", 0) {
        for c in containers {
            for m in c.members {
                let _ = m.option_text();
                let _ = m.data("fuzz.fatbin", 0, None);
            }
        }
    }
}

/// Fuzzes the link path end to end, as the command line runs it: the bytes are written
/// to a file (a cubin, a host object, a fatbin or an archive, by the first byte), linked
/// for an SM the second byte picks through `nvlinkrs::link` (classification, the input
/// walk, gathering, the merge, the output writer), and the outcome is checked: a link
/// that succeeds leaves an image that reads back as an executable device ELF, one that
/// fails leaves no output file and no temporary beside it. No toolkit is reachable
/// (`--cuda-path` names an empty directory), so PTX members fail instead of running
/// ptxas, and no cache is used.
pub fn link(data: &[u8]) {
    let [ext, sm, body @ ..] = data else {
        return;
    };
    let dir = tempfile::tempdir().expect("temporary directory");
    let ext = EXTENSIONS[*ext as usize % EXTENSIONS.len()];
    let sm = SMS[*sm as usize % SMS.len()];
    let input = dir.path().join(format!("in.{ext}"));
    let output = dir.path().join("out.cubin");
    let empty = dir.path().join("no-toolkit");
    std::fs::create_dir(&empty).expect("directory");
    std::fs::write(&input, body).expect("input");
    let args: Vec<String> = vec![
        format!("-arch=sm_{sm}"),
        input.display().to_string(),
        "-o".into(),
        output.display().to_string(),
        "--no-cache".into(),
        "--cuda-path".into(),
        empty.display().to_string(),
    ];
    let Ok((parsed, _, _)) = nvlinkrs::cli::parse(&args) else {
        panic!("the fuzz target's own command line is refused");
    };
    let req = parsed.request().expect("request");
    let diag = nvlinkrs::diag::Diagnostics::collector();
    let linked = nvlinkrs::link(&req, &diag, &nvlinkrs::Process::default());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("listing")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "no-toolkit" && !n.starts_with("in."))
        .collect();
    match linked {
        Ok(_) => {
            assert_eq!(left, ["out.cubin"], "a link that succeeded left {left:?}");
            // (read back as an ELF, not as a linkable cubin: a section alignment that is no
            // power of two, from a shared variable's alignment in a damaged input, is
            // copied into the image as nvlink copies it, and the cubin reader refuses it)
            let image = std::fs::read(&output).expect("the image");
            let elf = nvlinkrs::elf::ElfView::parse(&image, "out.cubin");
            assert!(
                elf.is_ok_and(|e| e.e_type == 2),
                "the image does not read back as an executable ELF"
            );
        }
        Err(_) => assert!(left.is_empty(), "a failed link left {left:?}"),
    }
}

/// Fuzzes the two readers of lengths the LTO engines hand back and forth: the LLVM
/// helper's request framing, and the cutting of a split compile's result at libNVVM's
/// reported piece sizes.
pub fn lto_requests(data: &[u8]) {
    let _ = nvlinkrs::frames::decode(data);
    // the first bytes as piece sizes (u16 each, count in the first byte), the rest as PTX
    if let Some((&n, rest)) = data.split_first() {
        let n = (n as usize % 8).min(rest.len() / 2);
        let (sizes, ptx) = rest.split_at(n * 2);
        let sizes: Vec<usize> = sizes
            .chunks(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]) as usize)
            .collect();
        if let Ok(pieces) = nvlinkrs::lto::split_result(ptx.to_vec(), &sizes) {
            assert_eq!(pieces.len(), sizes.len());
            assert!(pieces.windows(2).all(|w| w[0] <= w[1]));
        }
    }
}

/// Fuzzes the NVVM / LTO IR container header reader, and the reading of the strings
/// `--emit-ltoir` stores in the option data (the consensus, the host-reference tables).
pub fn ltoir(data: &[u8]) {
    if let Ok((h, _)) = nvlinkrs::ir::container::parse(data, "fuzz.ltoir") {
        let _ = h.arch();
    }
    let _ = nvlinkrs::lto::staged::stored_consensus(data, "fuzz.ltoir");
    let _ = nvlinkrs::lto::staged::stored_host_refs(data, "fuzz.ltoir");
}

/// Fuzzes the LTO IR container writer: every container the reader accepts is taken
/// apart and written back byte for byte, and reads back as the same fields.
pub fn ltoir_write(data: &[u8]) {
    if let Ok(c) = LtoIr::read(data, "fuzz.ltoir") {
        let out = c.write();
        assert_eq!(out, data, "written back differently");
        assert_eq!(LtoIr::read(&out, "fuzz.ltoir").ok(), Some(c));
    }
}

/// Fuzzes the relocatable-cubin reader and the merge behind it: any bytes must give a
/// cubin or an error, and a cubin (mutated or not) linked with itself must give an image
/// or an error, never a panic.
pub fn merge(data: &[u8]) {
    let Ok(c) = nvlinkrs::elf::cubin::Cubin::parse(Bytes::from_vec(data.to_vec()), "fuzz.cubin")
    else {
        return;
    };
    for i in 0..c.sections.len() {
        let _ = c.relocations(i);
    }
    let diag = nvlinkrs::diag::Diagnostics::new("nvlinkrs");
    // for the SM the header names (sm_100+ takes the capsule-Mercury paths), then -r,
    // then --preserve-relocs
    let sm = (c.e_flags >> 8) & 0xFF;
    let inputs = vec![nvlinkrs::merge::Input {
        cubin: c,
        cudadevrt: false,
    }];
    for (relocatable, preserve_relocs) in [(false, false), (true, false), (false, true)] {
        let opts = nvlinkrs::merge::MergeOptions {
            target: Some(nvlinkrs::arch::Arch::plain(sm)),
            relocatable,
            preserve_relocs,
            ..Default::default()
        };
        if let Ok(img) = nvlinkrs::merge::link(&inputs, &opts, &diag) {
            let _ = nvlinkrs::elf::write::write(img);
        }
    }
}

/// Fuzzes the NVVM container reader (magics 0x7F4E5C7D, 0x1EE55A01 and its padded
/// form): the input raw, behind each magic, and as the pairs, blobs and IR of a
/// well-formed header (which reaches the pair and blob readers). Whatever it accepts
/// must describe data inside the input.
pub fn nvvm_container(data: &[u8]) {
    nvvm_check(data);
    for prefix in [
        &MAGIC.to_le_bytes()[..],
        &LEGACY_MAGIC.to_le_bytes(),
        &[0, 0, 0, 0, 1, 0x5a, 0xe5, 0x1e],
    ] {
        nvvm_check(&[prefix, data].concat());
    }
    // a header whose regions split the rest of the input by its first two bytes
    if let [p, b, rest @ ..] = data {
        let pairs = (*p as usize).min(rest.len());
        let blobs = (*b as usize).min(rest.len() - pairs);
        let mut d = LEGACY_MAGIC.to_le_bytes().to_vec();
        d.extend_from_slice(&VERSIONS);
        d.extend_from_slice(&1u16.to_le_bytes());
        d.extend_from_slice(&24u16.to_le_bytes());
        d.extend_from_slice(&(24 + pairs as u32).to_le_bytes());
        d.extend_from_slice(&(24 + (pairs + blobs) as u32).to_le_bytes());
        d.extend_from_slice(rest);
        nvvm_check(&d);
    }
}

/// Fuzzes the bitstream reader and the per-module summaries of incremental LTO
/// (`lto::incremental::summary`): an LTO IR container (seeded with the fixtures' `.ltoir`
/// files) and the same bytes as bitcode behind the magic give a summary or an opaque one,
/// never a panic, a hang or an allocation the input cannot pay for.
pub fn bitcode_summary(data: &[u8]) {
    use nvlinkrs::lto::incremental::summary;
    let module = nvlinkrs::lto::IrModule {
        name: "fuzz.ltoir".into(),
        data: Bytes::from_vec(data.to_vec()),
        form: nvlinkrs::lto::IrForm::Container,
    };
    let mut bc = b"BC\xc0\xde".to_vec();
    bc.extend_from_slice(data);
    for lines in [false, true] {
        let _ = summary::summarize(&module, lines);
        let _ = summary::summarize_bitcode(&bc, "fuzz.bc", lines);
    }
}

/// Fuzzes the image re-layout (`elf::relayout`): any bytes, any section name among the
/// file's, replaced by bytes of any length: an error or an image, never a panic; an
/// image it writes parses.
pub fn relayout(data: &[u8]) {
    let Some((&n, data)) = data.split_first() else {
        return;
    };
    let Ok(view) = ElfView::parse(data, "fuzz.cubin") else {
        let _ = replace_section(data, "fuzz.cubin", ".note.nv.tkinfo", &[0; 8]);
        return;
    };
    let Some(s) = view.sections.get(n as usize % view.sections.len().max(1)) else {
        return;
    };
    let name = s.name.to_string();
    for len in [0usize, 4, (n as usize) * 3] {
        if let Ok(out) = replace_section(data, "fuzz.cubin", &name, &vec![0xAB; len]) {
            ElfView::parse(&out, "relaid.cubin").expect("a re-laid image parses");
        }
    }
}
