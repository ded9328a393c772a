//! Fuzzes the two readers of lengths the LTO engines hand back and forth: the LLVM
//! helper's request framing, and the cutting of a split compile's result at libNVVM's
//! reported piece sizes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
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
});
