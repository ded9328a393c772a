//! Fuzzes the fatbin container reader and member decompression (zstd, LZ4).
#![no_main]
use libfuzzer_sys::fuzz_target;
use nvlinkrs::bytes::Bytes;

fuzz_target!(|data: &[u8]| {
    let b = Bytes::from_vec(data.to_vec());
    if let Ok(containers) = nvlinkrs::fatbin::parse(&b, "fuzz.fatbin", 0) {
        for c in containers {
            for m in c.members {
                let _ = m.option_text();
                let _ = m.data("fuzz.fatbin", 0, None);
            }
        }
    }
});
