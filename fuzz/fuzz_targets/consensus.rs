//! Fuzzes the per-module NVVM option-string reader and the consensus check, and the
//! LTO IR unscrambling round trip.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
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
});
