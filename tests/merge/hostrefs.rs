//! The host-reference tables as nvlink reads them, against nvlink on host objects whose
//! tables are rewritten byte by byte (what a damaged object or a moved section offset
//! gives): which tables narrow the link to the kernels they name, and which entries a
//! table holds. The tables of well-formed objects (a variable-only host object, kernel
//! tables empty) are links of `links_equivalent_to_nvlink`.

use nvlinkrs::elf::ElfView;

use super::{args, differential, nvlinkrs, run};

/// `object` (a fixture) with `section`'s bytes from its start replaced by `bytes`
/// (which may run past its end, into the next section's), written into `dir` under a
/// name of its own.
fn rewritten(dir: &std::path::Path, object: &str, section: &str, bytes: &[u8]) -> String {
    let mut data = std::fs::read(&args(&[object])[0]).unwrap();
    let at = ElfView::parse(&data, object)
        .unwrap()
        .section(section)
        .expect(section)
        .offset as usize;
    data[at..at + bytes.len()].copy_from_slice(bytes);
    let n = std::fs::read_dir(dir).unwrap().count();
    let out = dir.join(format!("{n}_{object}"));
    std::fs::write(&out, data).unwrap();
    out.display().to_string()
}

/// Each rewritten table linked by both linkers beside a host object without tables
/// (`a.o`, `b.o`): the same kernels kept, equivalent images. `launch1_dc.o`'s `.nvHRKE`
/// holds `_Z11k_launched1*` and a NUL (17 bytes; its `.nvHRDI`, one NUL, follows), `a.o`'s
/// one NUL. nvlink reads a
/// string at the table's start and one after each NUL while it starts before the last
/// byte, each up to its NUL even past the table: a one-byte table has no entry whatever
/// its byte (nvlinkrs read `A` as a kernel's name and kept none), a table of NULs has
/// empty ones (nvlink keeps no kernel; nvlinkrs read none and kept every one), and a
/// string that runs past the table ends in the next section's bytes.
#[test]
fn damaged_kernel_tables_read_as_nvlink_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ke = ".nvHRKE";
    let cases: Vec<(&str, Vec<String>)> = vec![
        (
            "a one-byte kernel table that is not NUL",
            vec![rewritten(d, "a.o", ke, b"A"), "b.o".into()],
        ),
        (
            "a one-byte kernel table holding a pattern",
            vec![rewritten(d, "a.o", ke, b"*"), "b.o".into()],
        ),
        (
            "a one-byte internal-kernel table that is not NUL",
            vec![rewritten(d, "a.o", ".nvHRKI", b"k"), "b.o".into()],
        ),
        (
            "a one-byte variable table that is not NUL",
            vec![rewritten(d, "a.o", ".nvHRDE", b"A"), "b.o".into()],
        ),
        (
            "a kernel table of NULs",
            vec![
                rewritten(d, "launch1_dc.o", ke, &[0; 17]),
                "a.o".into(),
                "b.o".into(),
            ],
        ),
        (
            "a kernel table with an empty first entry",
            vec![
                rewritten(d, "launch1_dc.o", ke, b"\0_Z13k_unl*\0\0\0\0\0\0"),
                "a.o".into(),
                "b.o".into(),
            ],
        ),
        (
            "a kernel table whose last byte starts nothing",
            vec![
                rewritten(d, "launch1_dc.o", ke, &[&[0; 16][..], b"*"].concat()),
                "a.o".into(),
                "b.o".into(),
            ],
        ),
        (
            "a kernel table whose last entry runs past its end",
            vec![
                rewritten(d, "launch1_dc.o", ke, &[&[0; 15][..], b"_Z*"].concat()),
                "a.o".into(),
                "b.o".into(),
            ],
        ),
    ];
    let mut failures = Vec::new();
    for (what, inputs) in cases {
        let mut a = vec!["-arch=sm_90".to_string()];
        a.extend(args(&inputs.iter().map(String::as_str).collect::<Vec<_>>()));
        if let Err(e) = differential(&a) {
            failures.push(format!("{what}:\n    {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The variable-only host object (`hrvar.cu`) at sm_100: both kernels kept, as nvlink
/// keeps them (nvlinkrs kept none), and the image nvlink's byte for byte (it differed in
/// one byte of `kv`'s capsule until the capsule records of `__constant__` loads were
/// written: `cvar[1]`'s offset 4, `elf::capsule`'s bank 3).
#[test]
fn variable_only_host_object_sm_100() {
    let a = args(&["-arch=sm_100", "hrvar_dc100.o"]);
    assert_eq!(differential(&a), Ok(true));
    let dir = tempfile::tempdir().unwrap();
    let image = run(&nvlinkrs(), &a, dir.path()).output.unwrap();
    let c =
        nvlinkrs::elf::cubin::Cubin::parse(nvlinkrs::bytes::Bytes::from_vec(image), "x").unwrap();
    let mut kernels: Vec<&str> = (c.symbols.iter())
        .filter(|s| s.defined() && s.ty == nvlinkrs::elf::cubin::STT_FUNC)
        .map(|s| s.name.as_str())
        .collect();
    kernels.sort_unstable();
    assert_eq!(kernels, ["kv", "kv2"]);
}
