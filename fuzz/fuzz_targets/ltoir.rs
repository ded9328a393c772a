//! Fuzzes the NVVM / LTO IR container header reader, and the reading of the strings
//! `--emit-ltoir` stores in the option data (the consensus, the host-reference tables).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((h, _)) = nvlinkrs::ir::container::parse(data, "fuzz.ltoir") {
        let _ = h.arch();
    }
    let _ = nvlinkrs::lto::prelink::stored_consensus(data, "fuzz.ltoir");
    let _ = nvlinkrs::lto::prelink::stored_host_refs(data, "fuzz.ltoir");
});
