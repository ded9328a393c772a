//! Link settings of the `nvlinkrs` programs: relative relocations packed (`DT_RELR`,
//! binutils 2.38 and glibc 2.36 on), so that starting one does not read and apply tens
//! of thousands of them (the shared-cache tier's crates brought 24,000; packed, a
//! command-line link's peak memory is ~0.5 MiB lower); with the LLVM feature, the one
//! C++ call into LLVM's linker the C API lacks (`src/lto/only_needed.cpp`).

fn main() {
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if linux_gnu {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_LLVM").is_some() {
        only_needed_linker();
    }
}

/// The LLVM feature's one C++ call (`src/lto/only_needed.cpp`: LLVM's linker in
/// "only needed" mode, which the C API lacks), compiled against the LLVM that llvm-sys
/// links (`LLVM_SYS_211_PREFIX`, else `llvm-config` on `PATH`).
fn only_needed_linker() {
    let source = "src/lto/only_needed.cpp";
    println!("cargo:rerun-if-changed={source}");
    println!("cargo:rerun-if-env-changed=LLVM_SYS_211_PREFIX");
    let config = match std::env::var_os("LLVM_SYS_211_PREFIX") {
        Some(p) => std::path::Path::new(&p).join("bin/llvm-config"),
        None => "llvm-config".into(),
    };
    let out = std::process::Command::new(&config)
        .arg("--cxxflags")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", config.display()));
    assert!(
        out.status.success(),
        "{} --cxxflags failed",
        config.display()
    );
    let flags = String::from_utf8(out.stdout).expect("llvm-config prints text");
    let mut build = cc::Build::new();
    build.cpp(true).file(source).warnings(false);
    for f in flags.split_whitespace() {
        build.flag(f);
    }
    build.compile("nvlinkrs_only_needed");
}
