//! The `nvvm_container` fuzz target: its body is `nvlinkrs_fuzz::nvvm_container` (fuzz/src/lib.rs).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| nvlinkrs_fuzz::nvvm_container(data));
