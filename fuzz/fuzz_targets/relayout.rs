//! The `relayout` fuzz target: its body is `nvlinkrs_fuzz::relayout` (fuzz/src/lib.rs).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| nvlinkrs_fuzz::relayout(data));
