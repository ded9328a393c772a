//! Fuzzes the relocatable-cubin reader and the merge behind it: any bytes must give a
//! cubin or an error, and a cubin (mutated or not) linked with itself must give an image
//! or an error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nvlinkrs::bytes::Bytes;

fuzz_target!(|data: &[u8]| {
    let Ok(c) = nvlinkrs::elf::cubin::Cubin::parse(Bytes::from_vec(data.to_vec()), "fuzz.cubin") else {
        return;
    };
    for i in 0..c.sections.len() {
        let _ = c.relocations(i);
    }
    let diag = nvlinkrs::diag::Diagnostics::new("nvlinkrs");
    let inputs = vec![nvlinkrs::merge::Input { cubin: c, system: false }];
    if let Ok(img) = nvlinkrs::merge::link(&inputs, &nvlinkrs::merge::MergeOptions::default(), &diag) {
        let _ = nvlinkrs::elf::write::write(img);
    }
});
