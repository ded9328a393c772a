//! Fuzzes the NVVM container reader (magics 0x7F4E5C7D, 0x1EE55A01 and its padded
//! form): the input raw, behind each magic, and as the pairs, blobs and IR of a
//! well-formed header (which reaches the pair and blob readers). Whatever it accepts
//! must describe data inside the input.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nvlinkrs::ir::nvvm_container::{LEGACY_MAGIC, MAGIC, VERSIONS, parse};

fn check(d: &[u8]) {
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

fuzz_target!(|data: &[u8]| {
    check(data);
    for prefix in [&MAGIC.to_le_bytes()[..], &LEGACY_MAGIC.to_le_bytes(), &[0, 0, 0, 0, 1, 0x5a, 0xe5, 0x1e]] {
        check(&[prefix, data].concat());
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
        check(&d);
    }
});
