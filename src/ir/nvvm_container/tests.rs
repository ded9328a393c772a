//! Unit tests of the NVVM container reader, on containers written as seed 000 lays
//! them out.

use super::*;
use crate::ir::payload::tests::bitcode;

/// A container for sm_89 with Ftz and Fmad set, as the seed's annotated dump has it.
fn seed_example(magic: u32) -> Vec<u8> {
    write(
        magic,
        VERSIONS,
        0,
        &[(1, 8), (2, 9), (13, 1), (15, 1)],
        &[],
        &bitcode(2),
    )
}

fn message(d: &[u8]) -> String {
    parse(d, "c.nvvm").unwrap_err().message().to_string()
}

#[test]
fn reads_the_seed_example_byte_for_byte() {
    let d = seed_example(MAGIC);
    #[rustfmt::skip]
    let head: [u8; 44] = [
        0x7D, 0x5C, 0x4E, 0x7F, 0x01, 0x41, 0x02, 0x62, 0x03, 0x02, 0x14, 0x00,
        0x00, 0x00, 0x18, 0x00, 0x2C, 0x00, 0x00, 0x00, 0x2C, 0x00, 0x00, 0x00,
        0x01, 0x00, 0x08, 0x00, 0x02, 0x00, 0x09, 0x00, 0x0D, 0x00, 0x01, 0x00,
        0x0F, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];
    assert_eq!(d[..44], head);
    let c = parse(&d, "c.nvvm").unwrap();
    assert_eq!(c.target().unwrap().to_string(), "sm_89");
    assert_eq!(c.ir_level_name(), "NVVM_IR_LEVEL_UNIFIED_AFTER_DCI");
    assert_eq!((c.ir_offset, c.payload), (0x2C, Payload::Bitcode));
    assert_eq!(c.llvm_version, (20, 0));
    let names: Vec<_> = c.tags.iter().map(|t| t.name().unwrap()).collect();
    assert_eq!(
        names,
        ["SmMajor", "SmMinor", "FastMath.Ftz", "FastMath.Fmad"]
    );
    assert!(c.warnings.is_empty());
    assert_eq!(
        c.lines()[1],
        "options: SmMajor=8 SmMinor=9 FastMath.Ftz=1 FastMath.Fmad=1"
    );
}

#[test]
fn legacy_and_padded_magics_read_alike() {
    let d = seed_example(LEGACY_MAGIC);
    let c = parse(&d, "c.nvvm").unwrap();
    assert_eq!((c.magic, c.base, c.ir_offset), (LEGACY_MAGIC, 0, 0x2C));
    let mut p = vec![0; 4];
    p.extend_from_slice(&d);
    let c = parse(&p, "c.nvvm").unwrap();
    assert_eq!((c.base, c.ir_offset, c.tags[0].at), (4, 0x30, 0x1C));
    assert_eq!(c.format_name(), "NVVM container (0x1ee55a01, 4 bytes in)");
    // offsets in errors are file offsets
    p[4 + 0x0E] = 2;
    assert!(message(&p).starts_with("'c.nvvm' at offset 0x12: header size 2"));
    // the padded form exists only for the older magic
    let mut q = vec![0; 4];
    q.extend_from_slice(&seed_example(MAGIC));
    assert!(message(&q).ends_with("found 0x00000000"));
    assert!(message(&[1, 0x5A]).ends_with("found 2 bytes"));
}

#[test]
fn values_blobs_and_the_long_form() {
    let mut blobs = b"kernel\0".to_vec();
    blobs.extend_from_slice(&2u32.to_le_bytes()); // PerKernelRegisters: 2 entries
    blobs.extend_from_slice(&[40, 0, 0, 0, 64, 0, 0, 0]);
    let tags = [(1, 9), (2, 0), (19, 0x1_0000), (209, 0), (214, 7), (777, 3)];
    let d = write(MAGIC, VERSIONS, 1, &tags, &blobs, &bitcode(1));
    let c = parse(&d, "c.nvvm").unwrap();
    assert_eq!(c.tag(19), Some(0x1_0000));
    let scalar = c.scalar_end as u64;
    assert_eq!(c.tags[3].blob, Some((scalar, 7)));
    assert_eq!(c.tags[4].blob, Some((scalar + 7, 12)));
    assert_eq!(c.tags[5].name(), None); // unknown tags are kept, unnamed
    assert!(c.lines()[1].contains("TargetFuncName=[7 bytes at 0x"));
    assert!(c.lines()[1].ends_with("tag 777=3"));
    assert_eq!(c.ir_level_name(), "NVVM_IR_LEVEL_LTO");
    // 1024 in the 8-byte form the seed shows reads as 1024
    let mut long = d[..24].to_vec();
    long.extend_from_slice(&[0x13, 0, 0xFF, 0xFF, 0, 4, 0, 0, 0, 0, 0, 0]);
    long[0x10] = 36;
    long[0x14] = 36;
    long.extend_from_slice(&bitcode(1));
    assert_eq!(parse(&long, "c.nvvm").unwrap().tag(19), Some(1024));
}

#[test]
fn blob_references_are_checked() {
    let ir = bitcode(1);
    type Case<'a> = (&'a [(u16, u32)], &'a [u8], &'a str);
    let cases: [Case; 6] = [
        (
            &[(201, 0)],
            &[0; 23],
            "tag 201 (MemoryWindowCBank) points at blob offset 0, 24 bytes",
        ),
        (
            &[(209, 4)],
            b"abcd",
            "tag 209 (TargetFuncName) points at blob offset 4, past",
        ),
        (&[(209, 0)], b"abcd", "a string with no NUL"),
        (
            &[(206, 0)],
            &[0xFF, 0xFF, 0xFF, 0xFF],
            "tag 206 (PerKernelCBankOffsets) points at blob offset 0, 17179869184 bytes",
        ),
        (&[(208, 0)], &[0xFF; 8], "whose size does not fit"),
        (
            &[(301, 1), (401, 0)],
            &[0; 43],
            "0x1c: tag 401 (TMADescriptor) points at blob offset 0, 44 bytes",
        ),
    ];
    for (tags, blobs, want) in cases {
        let d = write(MAGIC, VERSIONS, 0, tags, blobs, &ir);
        let m = message(&d);
        assert!(m.contains(want), "{want}: {m}");
        assert!(m.starts_with("'c.nvvm' at offset 0x1"), "{m}");
    }
    // 401 is data only when tag 301 selects it
    let d = write(MAGIC, VERSIONS, 0, &[(301, 4), (401, 0)], &[], &ir);
    assert_eq!(parse(&d, "c.nvvm").unwrap().tags[1].blob, None);
    let mut tma = vec![0; 60];
    tma[0] = 1;
    let d = write(MAGIC, VERSIONS, 0, &[(301, 1), (401, 0)], &tma, &ir);
    assert_eq!(parse(&d, "c.nvvm").unwrap().tags[1].blob.unwrap().1, 60);
}

#[test]
fn header_fields_and_the_version_gate() {
    let good = seed_example(LEGACY_MAGIC);
    let set = |at: usize, v: &[u8]| {
        let mut d = good.clone();
        d[at..at + v.len()].copy_from_slice(v);
        d
    };
    for (at, v, want) in [
        (
            4,
            &[2u8][..],
            "0x4: container major version 2 not compatible",
        ),
        (6, &[3], "0x6: NVVM IR major version 3 not compatible"),
        (8, &[4], "0x8: NVVM debug major version 4 not compatible"),
        (10, &[20, 1], "0xa: LLVM version 20.1 not compatible"),
        (10, &[21, 0], "0xa: LLVM version 21.0 not compatible"),
        (0x0E, &[0xFF, 0xFF], "0xe: header size 65535"),
        (0x0E, &[23, 0], "0xe: header size 23"),
        (
            0x10,
            &[0xFF, 0xFF, 0xFF, 0xFF],
            "0x10: end of the option pairs 4294967295",
        ),
        (0x10, &[20, 0, 0, 0], "0x10: end of the option pairs 20"),
        (0x14, &[40, 0, 0, 0], "0x14: end of the blob region 40"),
        (
            0x14,
            &[0xFF, 0xFF, 0, 0],
            "0x14: end of the blob region 65535",
        ),
        (
            0x28,
            &[1, 0],
            "0x2c: option tags end without the 0 terminator",
        ),
        (0x2C, &[0, 0], "0x2c: the IR is not LLVM bitcode"),
    ] {
        let m = message(&set(at, v));
        assert!(m.contains(&format!("at offset {want}")), "{want}: {m}");
    }
    // an older LLVM passes the gate, newer minors warn
    assert!(parse(&set(10, &[19, 9]), "c.nvvm").is_ok());
    let c = parse(&set(5, &[0x50]), "c.nvvm").unwrap();
    assert_eq!(c.warnings.len(), 1);
    assert!(c.warnings[0].contains("container minor version 80 newer"));
    // the IR must be there
    let d = write(LEGACY_MAGIC, VERSIONS, 0, &[], &[], &[]);
    assert!(message(&d).contains("0x14: no IR follows the blob region"));
    // tag 99 marks a compressed payload
    let d = write(LEGACY_MAGIC, VERSIONS, 0, &[(99, 0x75D4_9913)], &[], b"xyz");
    assert_eq!(
        parse(&d, "c.nvvm").unwrap().payload,
        Payload::Compressed(0x75D4_9913)
    );
}

#[test]
fn every_cut_fails_cleanly() {
    let mut blobs = b"k\0".to_vec();
    blobs.extend_from_slice(&[0; 24]);
    let d = write(
        LEGACY_MAGIC,
        VERSIONS,
        1,
        &[(1, 9), (209, 0), (201, 2)],
        &blobs,
        &bitcode(1),
    );
    let c = parse(&d, "c.nvvm").unwrap();
    // (a payload cut between two bitcode blocks is the payload check's to judge)
    for n in 0..c.ir_offset as usize + 4 {
        assert!(parse(&d[..n], "cut.nvvm").is_err(), "cut at {n}");
    }
}
