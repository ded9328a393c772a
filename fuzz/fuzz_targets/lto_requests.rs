//! The `lto_requests` fuzz target: its body is `nvlinkrs_fuzz::lto_requests` (fuzz/src/lib.rs).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| nvlinkrs_fuzz::lto_requests(data));
