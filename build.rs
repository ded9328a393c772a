//! Link settings of the `nvlinkrs` programs: relative relocations packed (`DT_RELR`,
//! binutils 2.38 and glibc 2.36 on), so that starting one does not read and apply tens
//! of thousands of them (the shared-cache tier's crates brought 24,000; packed, a
//! command-line link's peak memory is ~0.5 MiB lower).

fn main() {
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if linux_gnu {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
