//! The `bitcode_summary` fuzz target: its body is `nvlinkrs_fuzz::bitcode_summary`
//! (fuzz/src/lib.rs).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| nvlinkrs_fuzz::bitcode_summary(data));
