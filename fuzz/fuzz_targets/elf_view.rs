//! The `elf_view` fuzz target: its body is `nvlinkrs_fuzz::elf_view` (fuzz/src/lib.rs).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| nvlinkrs_fuzz::elf_view(data));
