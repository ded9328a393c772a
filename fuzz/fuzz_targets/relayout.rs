//! Fuzzes the image re-layout (`elf::relayout`): any bytes, any section name among the
//! file's, replaced by bytes of any length: an error or an image, never a panic; an
//! image it writes parses.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nvlinkrs::elf::ElfView;
use nvlinkrs::elf::relayout::replace_section;

fuzz_target!(|data: &[u8]| {
    let Some((&n, data)) = data.split_first() else {
        return;
    };
    let Ok(view) = ElfView::parse(data, "fuzz.cubin") else {
        let _ = replace_section(data, "fuzz.cubin", ".note.nv.tkinfo", &[0; 8]);
        return;
    };
    let Some(s) = view.sections.get(n as usize % view.sections.len().max(1)) else {
        return;
    };
    let name = s.name.to_string();
    for len in [0usize, 4, (n as usize) * 3] {
        if let Ok(out) = replace_section(data, "fuzz.cubin", &name, &vec![0xAB; len]) {
            ElfView::parse(&out, "relaid.cubin").expect("a re-laid image parses");
        }
    }
});
