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
    // for the SM the header names (sm_100+ takes the capsule-Mercury paths), then -r,
    // then --preserve-relocs
    let sm = (c.e_flags >> 8) & 0xFF;
    let inputs = vec![nvlinkrs::merge::Input { cubin: c, system: false }];
    for (relocatable, preserve_relocs) in [(false, false), (true, false), (false, true)] {
        let opts = nvlinkrs::merge::MergeOptions {
            target: Some(nvlinkrs::arch::Arch::plain(sm)),
            relocatable,
            preserve_relocs,
            ..Default::default()
        };
        if let Ok(img) = nvlinkrs::merge::link(&inputs, &opts, &diag) {
            let _ = nvlinkrs::elf::write::write(img);
        }
    }
});
