//! Fuzzes the link path end to end, as the command line runs it: the bytes are written
//! to a file (a cubin, a host object, a fatbin or an archive, by the first byte), linked
//! for an SM the second byte picks through `nvlinkrs::link` (classification, the input
//! walk, gathering, the merge, the output writer), and the outcome is checked: a link
//! that succeeds leaves an image that reads back as an executable device ELF, one that
//! fails leaves no output file and no temporary beside it. No toolkit is reachable
//! (`--cuda-path` names an empty directory), so PTX members fail instead of running
//! ptxas, and no cache is used.
#![no_main]
use libfuzzer_sys::fuzz_target;

const EXTENSIONS: [&str; 4] = ["cubin", "o", "fatbin", "a"];
const SMS: [u32; 5] = [75, 80, 90, 100, 120];

fuzz_target!(|data: &[u8]| {
    let [ext, sm, body @ ..] = data else {
        return;
    };
    let dir = tempfile::tempdir().expect("temporary directory");
    let ext = EXTENSIONS[*ext as usize % EXTENSIONS.len()];
    let sm = SMS[*sm as usize % SMS.len()];
    let input = dir.path().join(format!("in.{ext}"));
    let output = dir.path().join("out.cubin");
    let empty = dir.path().join("no-toolkit");
    std::fs::create_dir(&empty).expect("directory");
    std::fs::write(&input, body).expect("input");
    let args: Vec<String> = vec![
        format!("-arch=sm_{sm}"),
        input.display().to_string(),
        "-o".into(),
        output.display().to_string(),
        "--no-cache".into(),
        "--cuda-path".into(),
        empty.display().to_string(),
    ];
    let Ok((parsed, _, _)) = nvlinkrs::cli::parse(&args) else {
        panic!("the fuzz target's own command line is refused");
    };
    let req = parsed.request().expect("request");
    let diag = nvlinkrs::diag::Diagnostics::collector();
    let linked = nvlinkrs::link(&req, &diag, &nvlinkrs::Process::default());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("listing")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "no-toolkit" && !n.starts_with("in."))
        .collect();
    match linked {
        Ok(_) => {
            assert_eq!(left, ["out.cubin"], "a link that succeeded left {left:?}");
            // (read back as an ELF, not as a linkable cubin: a section alignment that is no
            // power of two, from a shared variable's alignment in a damaged input, is
            // copied into the image as nvlink copies it, and the cubin reader refuses it)
            let image = std::fs::read(&output).expect("the image");
            let elf = nvlinkrs::elf::ElfView::parse(&image, "out.cubin");
            assert!(
                elf.is_ok_and(|e| e.e_type == 2),
                "the image does not read back as an executable ELF"
            );
        }
        Err(_) => assert!(left.is_empty(), "a failed link left {left:?}"),
    }
});
