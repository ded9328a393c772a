//! The `cache_entry` fuzz target: its body is `nvlinkrs_fuzz::cache_entry` (fuzz/src/lib.rs).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| nvlinkrs_fuzz::cache_entry(data));
