//! A PTX file linked for a target below sm_90, where nvlinkrs keeps to the image nvlink
//! makes of the same PTX in a fatbin rather than to nvlink's own
//! (docs/rules/differences.md): nvlink 13.5 compiles such a file as
//! extensible-whole-program code and leaves it out of the image.

use std::process::Command;

use super::{cuda, nvlinkrs, run};

/// `text` compiled by nvcc with `flags` into `dir/name`.
fn nvcc(dir: &std::path::Path, name: &str, text: &str, flags: &[&str]) -> String {
    let cu = dir.join(format!("{}.cu", name.split('.').next().unwrap()));
    std::fs::write(&cu, text).unwrap();
    let out = dir.join(name);
    let ok = Command::new(cuda().join("bin/nvcc"))
        .args(flags)
        .arg(&cu)
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap()
        .success();
    assert!(ok, "nvcc {name}");
    out.display().to_string()
}

/// Function symbols an image defines.
fn functions(image: &[u8]) -> Vec<String> {
    let c =
        nvlinkrs::elf::cubin::Cubin::parse(nvlinkrs::bytes::Bytes::from_vec(image.to_vec()), "x")
            .unwrap();
    c.symbols
        .iter()
        .filter(|s| s.defined() && s.ty == nvlinkrs::elf::cubin::STT_FUNC)
        .map(|s| s.name.to_string())
        .collect()
}

/// At sm_75 and sm_80 a cubin calling a function that a PTX file defines: nvlink
/// refuses it (`Undefined reference`, exit 255), nvlinkrs links it to nvlink's image of
/// the cubin and that PTX in a fatbin, byte for byte; the PTX file alone: nvlink's image
/// has no function, nvlinkrs' is equivalent to nvlink's of the fatbin. At sm_90 nvlink
/// links the file as it links the fatbin.
#[test]
fn ptx_files_below_sm_90() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let caller = "extern __device__ int g(int);\n__global__ void k(int *p) { p[0] = g(p[1]); }\n";
    let callee = "__device__ int g(int x) { return x * 3 + 1; }\n__global__ void kb(int *p) { p[2] = g(p[3]); }\n";
    for sm in ["75", "80", "90"] {
        let arch = format!("-arch=sm_{sm}");
        let virt = format!("arch=compute_{sm},code=compute_{sm}");
        let a = nvcc(
            d,
            &format!("a.{sm}.cubin"),
            caller,
            &["-cubin", "-rdc=true", &arch],
        );
        let ptx = nvcc(
            d,
            &format!("b.{sm}.ptx"),
            callee,
            &["-ptx", "-rdc=true", &arch],
        );
        let fatbin = nvcc(
            d,
            &format!("b.{sm}.fatbin"),
            callee,
            &["-fatbin", "-rdc=true", "-gencode", &virt],
        );
        let link = |tool: &std::path::Path, inputs: &[&str]| {
            let mut args = vec![arch.clone()];
            args.extend(inputs.iter().map(|s| s.to_string()));
            run(tool, &args, d)
        };
        let nvlink = cuda().join("bin/nvlink");
        for inputs in [vec![a.as_str(), &ptx], vec![&ptx]] {
            let with_fatbin: Vec<&str> = inputs
                .iter()
                .map(|&i| if i == ptx { fatbin.as_str() } else { i })
                .collect();
            let want = link(&nvlink, &with_fatbin);
            assert_eq!((want.code, want.messages.len()), (0, 0), "sm_{sm} fatbin");
            let want = want.output.unwrap();
            let got = link(&nvlinkrs(), &inputs);
            assert_eq!(
                (got.code, &got.messages),
                (0, &Vec::new()),
                "sm_{sm} {inputs:?}"
            );
            let got = got.output.unwrap();
            let same = nvlinkrs::elf::equiv::compare(&want, &got).unwrap();
            // (the file alone: equivalent, `.debug_frame`'s name elsewhere in the string
            // table, as when nvlinkrs links the fatbin itself)
            match inputs.len() {
                2 => assert!(same.identical, "sm_{sm} {inputs:?}: not the fatbin's image"),
                _ => assert!(same.equivalent(), "sm_{sm}: {:?}", same.differences),
            }
            let theirs = link(&nvlink, &inputs);
            match (sm, inputs.len()) {
                ("90", _) => assert!(theirs.output.unwrap() == want, "sm_90 {inputs:?}"),
                (_, 2) => {
                    assert_eq!(theirs.code, 255);
                    assert_eq!(
                        theirs.messages,
                        [format!(
                            "nvlink error   : Undefined reference to '_Z1gi' in '{a}'"
                        )]
                    );
                }
                _ => {
                    assert_eq!(theirs.code, 0);
                    assert_eq!(functions(&theirs.output.unwrap()), Vec::<String>::new());
                    assert!(functions(&want).contains(&"_Z2kbPi".to_string()));
                }
            }
        }
    }
}
