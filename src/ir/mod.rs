//! Device IR as it is stored in inputs: NVIDIA's IR containers (`.ltoir`, NVVM), their
//! byte scrambling, the check of a container's bitcode payload, and the recognition of
//! plain LLVM bitcode, and the writer of LTO IR containers (`write`). `input` and
//! `fatbin` use it to tell what a file or member holds, `lto` to hand the modules to an
//! engine and to write a prelinked `.ltoir`. Compiling IR is `lto`'s.

pub mod container;
mod header;
pub mod nvvm_container;
pub mod nvvm_tags;
pub mod obfuscation;
pub mod payload;
pub mod write;

pub use obfuscation::unscramble;

/// Raw bitcode (`BC C0 DE`) or the bitcode wrapper (`DE C0 17 0B`).
pub fn is_bitcode(data: &[u8]) -> bool {
    data.starts_with(b"BC\xc0\xde") || data.starts_with(&[0xDE, 0xC0, 0x17, 0x0B])
}
