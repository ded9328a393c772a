//! The `archive` fuzz target: its body is `nvlinkrs_fuzz::archive` (fuzz/src/lib.rs).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| nvlinkrs_fuzz::archive(data));
