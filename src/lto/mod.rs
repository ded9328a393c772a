//! Device IR: NVIDIA's IR containers (`.ltoir`, NVVM), LLVM bitcode, and libNVVM.

pub mod bitcode;
pub mod container;
pub mod libnvvm;
