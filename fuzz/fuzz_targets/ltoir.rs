//! Fuzzes the NVVM / LTO IR container header reader.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((h, _)) = nvlinkrs::ir::container::parse(data, "fuzz.ltoir") {
        let _ = h.arch();
    }
});
