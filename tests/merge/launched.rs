//! Kernels launched from the device in a link the host-reference tables narrow (issue 22):
//! nvlink drops the kernels no host object launches, but keeps every kernel whose
//! descriptor device code takes (a device-side launch), even where that code goes itself
//! (a launching kernel the host never launches, a function nothing calls) or is the
//! launched kernel (a recursive launch); libcudadevrt's launch functions stay with them.
//! nvlinkrs dropped them all: an image without the kernels, exit 0.

use std::collections::BTreeSet;

use nvlinkrs::bytes::Bytes;
use nvlinkrs::elf::cubin::{Cubin, STT_FUNC};

use super::{args, cuda, differential, nvlinkrs, run, run_with};

/// The image's defined functions by name.
fn functions(image: &[u8]) -> BTreeSet<String> {
    let c = Cubin::parse(Bytes::from_vec(image.to_vec()), "image").unwrap();
    c.symbols
        .iter()
        .filter(|s| s.defined() && !s.name.is_empty() && s.ty == STT_FUNC)
        .map(|s| s.name.to_string())
        .collect()
}

/// The links: `dp.cu`'s unit (its host code launches nothing; `dpmain.cu` would) beside
/// another host object, as in a program whose launching unit's host side is elsewhere,
/// and `devlaunch.cu` alone; at sm_90 and sm_100; plain and whole-program LTO (libNVVM
/// keeps the kernels external beside libcudadevrt, and the merge narrows the link).
fn links() -> Vec<(&'static str, Vec<String>)> {
    let lib = format!("-L{}", cuda().join("lib").display());
    let nvvm = format!("-nvvmpath={}", cuda().join("nvvm").display());
    let l = |a: &[&str]| args(&[a, &[lib.as_str(), "-lcudadevrt"][..]].concat());
    let lto = |a: &[&str]| l(&[&["-dlto", nvvm.as_str()][..], a].concat());
    vec![
        (
            "dp unit beside a host object sm_90",
            l(&["-arch=sm_90", "dp_dc90.o", "launch1_dc.o"]),
        ),
        (
            "dp unit beside a host object sm_100",
            l(&["-arch=sm_100", "launch1_dc100.o", "dp_dc100.o"]),
        ),
        (
            "device launches sm_90",
            l(&["-arch=sm_90", "devlaunch_dc90.o"]),
        ),
        (
            "device launches sm_100",
            l(&["-arch=sm_100", "devlaunch_dc100.o"]),
        ),
        (
            "dp unit beside a host object, whole LTO sm_90",
            lto(&["-arch=sm_90", "dp_lto90.o", "launch1_lto.o"]),
        ),
        (
            "device launches, whole LTO sm_90",
            lto(&["-arch=sm_90", "devlaunch_lto90.o"]),
        ),
        (
            "device launches, whole LTO sm_100",
            lto(&["-arch=sm_100", "devlaunch_lto100.o"]),
        ),
    ]
}

/// Each link is equivalent to nvlink's (the same functions, kernels and libcudadevrt's
/// included), and the kernels it must keep are there.
#[test]
fn device_launched_kernels_kept() {
    let mut failures = Vec::new();
    for (what, a) in links() {
        if let Err(d) = differential(&a) {
            failures.push(format!("{what}:\n    {d}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // what nvlink keeps and drops, spelled out (the tables name neither parent nor top)
    let dir = tempfile::tempdir().unwrap();
    let out = run(&nvlinkrs(), &links()[3].1, dir.path());
    let f = functions(&out.output.expect("an image"));
    for k in [
        "_Z8launchedPi",
        "_Z3midPi",
        "_Z5grandPi",
        "_Z7selfreci",
        "_Z12orphan_childPi",
        "__cudaCDP2LaunchDeviceV2",
    ] {
        assert!(f.contains(k), "{k} missing: {f:?}");
    }
    for k in ["_Z3topPi", "_Z9unused_fnPi"] {
        assert!(!f.contains(k), "{k} kept: {f:?}");
    }
}

/// The same function sets as nvlink's with the sm_100 finalizer off (the code then
/// differs from nvlink's regenerated code; the kernel set must not).
#[test]
fn device_launched_kernels_kept_finalizer_off() {
    for (what, a) in links().into_iter().filter(|(w, _)| w.ends_with("sm_100")) {
        let dir = tempfile::tempdir().unwrap();
        let want = run(&cuda().join("bin/nvlink"), &a, dir.path());
        let got = run_with(
            &nvlinkrs(),
            &a,
            dir.path(),
            &[("NVLINKRS_FINALIZER", "off")],
        );
        assert_eq!((want.code, got.code), (0, 0), "{what}: {:?}", got.messages);
        assert_eq!(
            functions(&want.output.unwrap()),
            functions(&got.output.unwrap()),
            "{what}"
        );
    }
}
