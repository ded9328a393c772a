//! Fuzzes the LTO IR container writer: every container the reader accepts is taken
//! apart and written back byte for byte, and reads back as the same fields.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nvlinkrs::ir::write::LtoIr;

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = LtoIr::read(data, "fuzz.ltoir") {
        let out = c.write();
        assert_eq!(out, data, "written back differently");
        assert_eq!(LtoIr::read(&out, "fuzz.ltoir").ok(), Some(c));
    }
});
