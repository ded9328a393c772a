//! Fuzzes the bitstream reader and the per-module summaries of incremental LTO
//! (`lto::incremental::summary`): an LTO IR container (seeded with the fixtures' `.ltoir`
//! files, their payload unscrambled on the way) and the same bytes as bitcode behind the
//! magic must give a summary or an opaque one, never a panic, a hang or an allocation the
//! input cannot pay for.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nvlinkrs::lto::incremental::summary;

fuzz_target!(|data: &[u8]| {
    let module = nvlinkrs::lto::IrModule {
        name: "fuzz.ltoir".into(),
        data: nvlinkrs::bytes::Bytes::from_vec(data.to_vec()),
        form: nvlinkrs::lto::IrForm::Container,
    };
    let mut bc = b"BC\xc0\xde".to_vec();
    bc.extend_from_slice(data);
    for lines in [false, true] {
        let _ = summary::summarize(&module, lines);
        let _ = summary::summarize_bitcode(&bc, "fuzz.bc", lines);
    }
});
