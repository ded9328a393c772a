//! Fuzzes the `ar` archive reader, and the input walk over what it returns.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nvlinkrs::bytes::Bytes;
use nvlinkrs::input::{Mode, kind::Ext, walk};

fuzz_target!(|data: &[u8]| {
    let b = Bytes::from_vec(data.to_vec());
    let _ = nvlinkrs::input::archive::parse(&b, "fuzz.a");
    // The whole walk, as a link would do it; thin-archive members are not opened (no dir).
    if !data.starts_with(b"!<thin>") {
        let _ = walk("fuzz.a", Ext::Other, b, Mode::Link { lto: true }, None, 0);
    }
});
