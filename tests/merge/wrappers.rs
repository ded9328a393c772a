//! Build systems' own device-link command lines, exactly as they spell them (not nvcc's):
//! Bazel rules_cuda's wrapper device link, TensorFlow/NCCL's genrule, CMake's Clang-CUDA
//! device link, and a link without LTO that is given `-nvvmpath`. Each runs through nvlink
//! and nvlinkrs in folders of their own; the exit codes, the images and the registration
//! files must be the same bytes.

use std::path::Path;
use std::process::Command;

use super::{cuda, fixtures, nvlinkrs};

/// Runs `tool` with `args` in a fresh folder, `{dir}` in an argument standing for it: the
/// exit code and the files it wrote, by name.
fn run(tool: &Path, args: &[String]) -> (i32, Vec<(String, Vec<u8>)>) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let args: Vec<String> = args.iter().map(|a| a.replace("{dir}", &d)).collect();
    let out = Command::new(tool)
        .args(&args)
        .env("XDG_CACHE_HOME", dir.path().join(".cache"))
        .output()
        .unwrap();
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    (out.status.code().unwrap_or(-1), files)
}

fn same_as_nvlink(what: &str, args: &[String]) {
    let want = run(&cuda().join("bin/nvlink"), args);
    let got = run(&nvlinkrs(), args);
    assert_eq!(want.0, 0, "{what}: nvlink failed");
    let names = |f: &[(String, Vec<u8>)]| f.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&want.1), names(&got.1), "{what}: other files written");
    for ((name, w), (_, g)) in want.1.iter().zip(&got.1) {
        assert!(w == g, "{what}: {name} is not nvlink's, byte for byte");
    }
    assert_eq!(want.0, got.0, "{what}: exit codes");
}

fn objects() -> Vec<String> {
    ["a.o", "b.o"]
        .iter()
        .map(|o| fixtures().join(o).display().to_string())
        .collect()
}

/// rules_cuda's `cuda_toolkit(nvlink = ...)` wrapper device link: `--arch=`, the registration
/// file and `--output-file=`, libcudadevrt named as a file after the objects.
#[test]
fn rules_cuda_wrapper_device_link() {
    let devrt = cuda().join("lib/libcudadevrt.a").display().to_string();
    let mut args = vec![
        "--arch=sm_90".to_string(),
        "--register-link-binaries={dir}/reg.h".into(),
        "--output-file={dir}/out.cubin".into(),
    ];
    args.extend(objects());
    args.push(devrt);
    same_as_nvlink("rules_cuda", &args);
}

/// TensorFlow's and NCCL's genrule: `--cpu-arch=X86_64` first, the objects before the
/// registration file and `--output-file=`.
#[test]
fn tensorflow_nccl_genrule_device_link() {
    let mut args = vec!["--cpu-arch=X86_64".to_string(), "--arch=sm_90".into()];
    args.extend(objects());
    args.extend([
        "--register-link-binaries={dir}/reg.c".into(),
        "--output-file={dir}/out.cubin".into(),
    ]);
    same_as_nvlink("TF/NCCL", &args);
}

/// CMake's device link with Clang as the CUDA compiler (`CMAKE_CUDA_DEVICE_LINKER`):
/// `-arch=`, `--register-link-binaries=` and `-o=`.
#[test]
fn cmake_clang_device_link() {
    let mut args = vec![
        "-arch=sm_90".to_string(),
        "--register-link-binaries={dir}/register.h".into(),
        "-o={dir}/sm_90.cubin".into(),
    ];
    args.extend(objects());
    same_as_nvlink("CMake Clang-CUDA", &args);
}

/// A link without LTO given `-nvvmpath` (the wheels' nvcc layout, a wrapper that always
/// passes it): nvlink records the option in the image's tool note all the same.
#[test]
fn nvvmpath_without_lto_is_recorded() {
    let mut args = vec![
        "-arch=sm_90".to_string(),
        format!("-nvvmpath={}", cuda().join("nvvm").display()),
        format!("-L{}", cuda().join("lib").display()),
        "-o".into(),
        "{dir}/out.cubin".into(),
    ];
    args.extend(objects());
    args.push("-lcudadevrt".into());
    same_as_nvlink("-nvvmpath without LTO", &args);
}
