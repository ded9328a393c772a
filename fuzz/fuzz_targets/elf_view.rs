//! Fuzzes the device ELF view (cubin summary) and the host-object section reader.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nvlinkrs::bytes::Bytes;

fuzz_target!(|data: &[u8]| {
    let _ = nvlinkrs::elf::image_extent(data);
    let _ = nvlinkrs::elf::device_summary(data, "fuzz.cubin");
    let b = Bytes::from_vec(data.to_vec());
    let _ = nvlinkrs::fatbin::host::read(&b, "fuzz.o");
});
