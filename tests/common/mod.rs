//! What the test files share: where scripts/test.sh put the toolkit (`CUDA_HOME`) and the
//! fixtures (`NVLINKRS_FIXTURES`), and the program under test (`NVLINKRS_TEST_BIN`, where
//! scripts/same_bytes.sh puts a wrapper that also runs a baseline build, else the one
//! cargo built). Each file takes what it uses (`mod common; use common::...`).
#![allow(dead_code)]

use std::path::PathBuf;

pub fn cuda() -> PathBuf {
    PathBuf::from(std::env::var_os("CUDA_HOME").expect("CUDA_HOME (set by scripts/test.sh)"))
}

pub fn fixtures() -> PathBuf {
    PathBuf::from(
        std::env::var_os("NVLINKRS_FIXTURES").expect("NVLINKRS_FIXTURES (set by scripts/test.sh)"),
    )
}

pub fn nvlinkrs() -> PathBuf {
    std::env::var_os("NVLINKRS_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_nvlinkrs")))
}
