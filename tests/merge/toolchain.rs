//! Callers that do not start the overlay's nvcc (issue 38): CMake through the toolchain
//! file `nvlinkrs shim` writes (NVIDIA's compiler with `find_package(CUDAToolkit)`, and
//! Clang as the CUDA compiler, whose device link CMake runs itself), and clang's own
//! device link (`clang++ -fgpu-rdc`, clang-nvlink-wrapper), with the overlay's `bin/` on
//! `PATH` or given as `--cuda-path`. Each build runs once with the real toolkit and once
//! through the overlay: nvlinkrs must have run (its time trace is there) and every device
//! image must be the real build's, byte for byte. The sources are the build-system
//! fixture's (`tests/fixtures/buildsys`); CMake and Ninja are the toolchain venv's,
//! clang-22 the one scripts/setup.sh installs.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::buildsys::{images, mask_temporary_names, source, step, tools_path};
use super::{cuda, shim};

/// clang's CUDA headers include `curand_mtgp32_kernel.h`, which NVIDIA's wheels (the
/// toolkit the setup installs) do not ship: an empty one in a folder of its own.
fn clang_stub_headers(dir: &Path) -> PathBuf {
    let stub = dir.join("stub");
    std::fs::create_dir_all(&stub).unwrap();
    std::fs::write(stub.join("curand_mtgp32_kernel.h"), "").unwrap();
    stub
}

/// A command with the venv's tools on `PATH` and nvlinkrs' time trace at `trace`.
fn traced(program: &str, trace: &Path) -> Command {
    let mut c = Command::new(program);
    c.env("PATH", tools_path())
        .env("NVLINKRS_TIME_TRACE", trace)
        .env_remove("CUDA_HOME")
        .env_remove("CUDA_PATH");
    c
}

/// `cmake -S src -B dir -G Ninja`, traced (`traced`), for the caller's own options.
fn configure(trace: &Path, src: &Path, dir: &Path) -> Command {
    let mut c = traced("cmake", trace);
    c.arg("-S")
        .arg(src)
        .arg("-B")
        .arg(dir)
        .args(["-G", "Ninja"]);
    c
}

/// The project: the fixture's library and kernels, found with `find_package(CUDAToolkit)`
/// and linked with `CUDA::cudart` (which the wheels' layout alone does not satisfy).
fn project(dir: &Path) -> PathBuf {
    let p = dir.join("project");
    std::fs::create_dir_all(&p).unwrap();
    let s = source().display().to_string();
    std::fs::write(
        p.join("CMakeLists.txt"),
        format!(
            "cmake_minimum_required(VERSION 3.25)\nproject(tc LANGUAGES CXX CUDA)\n\
             set(CMAKE_CUDA_ARCHITECTURES 90)\nfind_package(CUDAToolkit REQUIRED)\n\
             add_library(devlib STATIC {s}/vec.cu {s}/ops.cu)\n\
             set_target_properties(devlib PROPERTIES CUDA_SEPARABLE_COMPILATION ON)\n\
             add_executable(app {s}/kern.cu {s}/main.cpp)\n\
             target_link_libraries(app PRIVATE devlib CUDA::cudart)\n\
             set_target_properties(app PROPERTIES CUDA_SEPARABLE_COMPILATION ON)\n"
        ),
    )
    .unwrap();
    p
}

/// CMake with NVIDIA's compiler, given only the toolchain file: the overlay's nvcc, the
/// wheels' libcudart found, the device link through nvlinkrs, the images the real
/// toolkit's build makes (which needs the library named by hand).
#[test]
fn cmake_with_the_toolchain_file_builds_through_nvlinkrs() {
    let tmp = tempfile::tempdir().unwrap();
    let overlay = shim(&tmp.path().join("overlay"));
    let src = project(tmp.path());
    let trace = tmp.path().join("trace.json");
    let build = |dir: &Path, extra: &[String]| {
        step(configure(&trace, &src, dir).args(extra), "cmake configure");
        step(
            traced("cmake", &trace).arg("--build").arg(dir),
            "cmake --build",
        );
    };
    // (nvcc as the overlay was made from it: the paths nvcc hands nvlink, which the image's
    // note records, follow the way it was started)
    let real = cuda();
    let cudart = real.join("lib/libcudart.so.13");
    let theirs = tmp.path().join("theirs");
    build(
        &theirs,
        &[
            format!("-DCMAKE_CUDA_COMPILER={}", real.join("bin/nvcc").display()),
            format!("-DCUDA_CUDART={}", cudart.display()),
            format!("-DCUDA_cudart_LIBRARY={}", cudart.display()),
        ],
    );
    assert!(!trace.exists(), "the real toolkit's build ran nvlinkrs");
    let ours = tmp.path().join("ours");
    let file = overlay.join(nvlinkrs::shim::CMAKE_TOOLCHAIN);
    build(
        &ours,
        &[format!("-DCMAKE_TOOLCHAIN_FILE={}", file.display())],
    );
    assert!(trace.is_file(), "the device link ran nvlinkrs");
    let (t, o) = (
        images(&theirs.join("app"), &tmp.path().join("x_theirs")),
        images(&ours.join("app"), &tmp.path().join("x_ours")),
    );
    assert!(!t.is_empty());
    same_images(&t, &o, "CMake (NVIDIA)");
}

/// Two builds' device images (`images`): the same names, byte for byte but for the names
/// of nvcc's temporary files, which its image notes record and which differ between two
/// builds with nvlink as well (else what differs).
fn same_images(theirs: &[(String, Vec<u8>)], ours: &[(String, Vec<u8>)], what: &str) {
    // (named after the executable: its name, then the image's number and target)
    let names = |v: &[(String, Vec<u8>)]| {
        (v.iter())
            .map(|(n, _)| {
                n.split_once('.')
                    .map_or(n.clone(), |(_, rest)| rest.to_string())
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(names(theirs), names(ours), "{what}: the images");
    for ((name, t), (_, o)) in theirs.iter().zip(ours) {
        let (t, o) = (mask_temporary_names(t), mask_temporary_names(o));
        let r = nvlinkrs::elf::equiv::compare(&t, &o).unwrap();
        assert!(t == o, "{what} {name}: {:?} {:?}", r.differences, r.notes);
    }
}

/// CMake with Clang as the CUDA compiler links device code itself, with the nvlink of the
/// toolkit it found (nvcc's `TOP`, the real toolkit): the toolchain file's rules name the
/// overlay's. Built up to the device link's image: the step after it, CMake 4.4's
/// `fatbinary -im=...`, is an option CUDA 13's fatbinary no longer has (the real toolkit's
/// build stops there too).
#[test]
fn cmake_with_clang_device_links_through_nvlinkrs() {
    let tmp = tempfile::tempdir().unwrap();
    let overlay = shim(&tmp.path().join("overlay"));
    let src = project(tmp.path());
    let stub = clang_stub_headers(tmp.path());
    let trace = tmp.path().join("trace.json");
    let real = std::fs::canonicalize(cuda()).unwrap();
    let cudart = real.join("lib/libcudart.so.13");
    let build = |dir: &Path, extra: &[String]| -> (Vec<u8>, Vec<u8>) {
        step(
            configure(&trace, &src, dir)
                .arg("-DCMAKE_CUDA_COMPILER=clang++-22")
                .arg(format!("-DCUDAToolkit_ROOT={}", real.display()))
                .arg(format!("-DCMAKE_CUDA_FLAGS=-I{}", stub.display()))
                .args(extra),
            "cmake configure (Clang)",
        );
        let cubin = "CMakeFiles/app.dir/sm_90.cubin";
        step(
            traced("ninja", &trace).arg("-C").arg(dir).arg(cubin),
            "ninja (device link)",
        );
        let read = |f: &str| std::fs::read(dir.join(f)).unwrap();
        (
            read(cubin),
            read("CMakeFiles/app.dir/cmake_cuda_register.h"),
        )
    };
    let theirs = build(
        &tmp.path().join("theirs"),
        &[
            format!("-DCUDA_CUDART={}", cudart.display()),
            format!("-DCUDA_cudart_LIBRARY={}", cudart.display()),
        ],
    );
    assert!(!trace.exists(), "the real toolkit's build ran nvlinkrs");
    let file = overlay.join(nvlinkrs::shim::CMAKE_TOOLCHAIN);
    let ours = build(
        &tmp.path().join("ours"),
        &[format!("-DCMAKE_TOOLCHAIN_FILE={}", file.display())],
    );
    assert!(trace.is_file(), "CMake's Clang device link ran nvlinkrs");
    assert!(theirs.0 == ours.0, "the device image differs from nvlink's");
    assert!(
        theirs.1 == ours.1,
        "the registration file differs from nvlink's"
    );
}

/// clang's own device link (`-fgpu-rdc`: clang-linker-wrapper, clang-nvlink-wrapper)
/// runs the nvlink of the installation it finds: with the overlay's `bin/` on `PATH`
/// (clang follows the `ptxas` it finds there to its installation: the overlay's is a file
/// for that) or the overlay as `--cuda-path`, nvlinkrs; the executable's device image
/// nvlink's. Was: on `PATH`, clang followed the overlay's link to the real toolkit and
/// ran the real nvlink.
#[test]
fn clangs_own_device_link_runs_nvlinkrs_through_the_overlay() {
    let tmp = tempfile::tempdir().unwrap();
    let overlay = shim(&tmp.path().join("overlay"));
    let stub = clang_stub_headers(tmp.path());
    let real = std::fs::canonicalize(cuda()).unwrap();
    let s = source();
    let build = |name: &str, bin: &Path, cuda_path: Option<&Path>, trace: &Path| -> PathBuf {
        let exe = tmp.path().join(name);
        let path = format!("{}:{}", bin.display(), tools_path());
        let mut c = traced("clang++-22", trace);
        c.env("PATH", path)
            .args(["-x", "cuda", "--offload-arch=sm_90", "-fgpu-rdc", "-I"])
            .arg(&stub)
            .args(cuda_path.map(|p| format!("--cuda-path={}", p.display())))
            .args(["vec.cu", "ops.cu", "kern.cu"].map(|f| s.join(f)))
            .args(["-x", "c++"])
            .arg(s.join("main.cpp"))
            .arg(format!("-L{}", real.join("lib").display()))
            .args(["-l:libcudart.so.13", "-o"])
            .arg(&exe);
        step(&mut c, name);
        exe
    };
    let none = tmp.path().join("none.json");
    let theirs = build("theirs", &real.join("bin"), None, &none);
    assert!(!none.exists(), "the real toolkit's build ran nvlinkrs");
    let want = images(&theirs, &tmp.path().join("x_theirs"));
    assert!(!want.is_empty());
    for (name, cuda_path) in [("on_path", None), ("cuda_path", Some(overlay.as_path()))] {
        let trace = tmp.path().join(format!("{name}.json"));
        let exe = build(name, &overlay.join("bin"), cuda_path, &trace);
        assert!(trace.is_file(), "{name}: clang's device link ran nvlinkrs");
        let got = images(&exe, &tmp.path().join(format!("x_{name}")));
        same_images(&want, &got, name);
    }
}

/// clang's `-fgpu-rdc` device code names another unit's kernel, which its host code
/// launches, as a plain function (`__clang_gpu_used_external`): nvlink refuses the link,
/// `Function 'vec_kernel(float *)' not declared __global__ in all source files`, then
/// `merge_elf failed`, exit 1, in either input order (found by the new-user review of the
/// toolchain file). Was: linked.
#[test]
fn a_kernel_declared_as_a_plain_function_elsewhere_is_refused_as_by_nvlink() {
    let tmp = tempfile::tempdir().unwrap();
    let stub = clang_stub_headers(tmp.path());
    let real = std::fs::canonicalize(cuda()).unwrap();
    let compile = |name: &str, text: &str| -> String {
        let src = tmp.path().join(format!("{name}.cu"));
        std::fs::write(&src, text).unwrap();
        let out = tmp.path().join(format!("{name}.cubin"));
        let mut c = Command::new("clang++-22");
        c.args([
            "-x",
            "cuda",
            "--offload-arch=sm_90",
            "-fgpu-rdc",
            "--cuda-device-only",
            "-c",
        ])
        .arg(format!("--cuda-path={}", real.display()))
        .arg("-I")
        .arg(&stub)
        .arg(&src)
        .arg("-o")
        .arg(&out);
        step(&mut c, name);
        out.display().to_string()
    };
    let kernel = compile(
        "kernel",
        "__global__ void vec_kernel(float *p) { p[threadIdx.x] += 1.f; }\n",
    );
    let user = compile(
        "user",
        "__global__ void vec_kernel(float *p);\nvoid launch(float *p) { vec_kernel<<<1, 32>>>(p); }\n\
         __global__ void local_kernel(float *p) { p[0] = 2.f; }\n",
    );
    for order in [[&kernel, &user], [&user, &kernel]] {
        let mut args = vec!["-arch=sm_90".to_string()];
        args.extend(order.iter().map(|s| s.to_string()));
        if let Err(e) = super::differential(&args) {
            panic!("{order:?}: {e}");
        }
        let r = super::run(&cuda().join("bin/nvlink"), &args, tmp.path());
        assert_eq!(r.code, 1, "nvlink refuses it: {:?}", r.messages);
    }
}
