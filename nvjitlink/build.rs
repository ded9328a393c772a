//! Links the drop-in as nvJitLink is linked: soname `libnvJitLink.so.13` and the version
//! node `libnvJitLink.so.13`, which programs built with `nvJitLink.h` import their
//! symbols from (see `libnvJitLink.map`).

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let map = std::path::Path::new(&dir).join("libnvJitLink.map");
    println!("cargo:rerun-if-changed=libnvJitLink.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnvJitLink.so.13");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        map.display()
    );
}
