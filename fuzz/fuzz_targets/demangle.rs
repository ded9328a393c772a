//! The demangler reads symbol names from inputs: any bytes must give a string back
//! (never a panic, never unbounded work), and a name it cannot read comes back as given.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(name) = std::str::from_utf8(data) else {
        return;
    };
    let out = nvlinkrs::demangle::demangle(name);
    if !name.starts_with("_Z") {
        assert_eq!(out, name);
    }
});
