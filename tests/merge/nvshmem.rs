//! NVSHMEM's device library (the `nvidia-nvshmem-cu13` 3.8 wheel, which ptxas 13.0 built),
//! issue 35 item 4: a ring kernel through NVSHMEM's headers linked with
//! `libnvshmem_device.a` and libcudadevrt, `-rdc` at sm_90 and sm_100 and partial LTO at
//! sm_90, as nvlink links it. Before: its transfer functions' switch tables (constant bank
//! 2) read wrong offsets, `.nv.compat` kept the first input's records (13.0's code counts
//! as `CUDA_INTERNAL_TARGET` 2 and brings attribute 0x07), and at sm_100 the 13.0
//! functions' `.nv.info` lacked attribute 0x6D. The bitcode library is `tests/ltoir.rs`'s.

use super::{cuda, differential, fixtures};

fn nvshmem() -> std::path::PathBuf {
    fixtures().parent().unwrap().join("nvshmem")
}

/// The links, each with the device library and libcudadevrt.
fn links() -> Vec<(&'static str, Vec<String>, bool)> {
    let d = nvshmem();
    let libs = [
        format!("-L{}", d.join("lib").display()),
        format!("-L{}", cuda().join("lib").display()),
        "-lnvshmem_device".to_string(),
        "-lcudadevrt".to_string(),
    ];
    let nvvm = format!("-nvvmpath={}", cuda().join("nvvm").display());
    let link = |head: &[&str], unit: &str| -> Vec<String> {
        let mut a: Vec<String> = head.iter().map(|s| s.to_string()).collect();
        a.push(d.join(unit).display().to_string());
        a.extend(libs.iter().cloned());
        a
    };
    vec![
        // (what, arguments, byte-identical)
        ("-rdc sm_90", link(&["-arch=sm_90"], "ring_90.cubin"), true),
        // (equivalent: the libraries' local __cuda_sm20_* functions come first in
        // nvlink's sm_100 image, after its weak copies in ours)
        (
            "-rdc sm_100",
            link(&["-arch=sm_100"], "ring_100.cubin"),
            false,
        ),
        (
            "partial LTO sm_90",
            link(&["-arch=sm_90", "-dlto", &nvvm], "ring_lto90.o"),
            true,
        ),
    ]
}

#[test]
fn nvshmem_device_library_links_as_nvlink() {
    let mut failures = Vec::new();
    for (what, a, identical) in links() {
        match differential(&a) {
            Ok(same) if same == identical => {}
            Ok(same) => failures.push(format!(
                "{what}: byte-identical {same}, expected {identical}"
            )),
            Err(d) => failures.push(format!("{what}:\n    {d}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
