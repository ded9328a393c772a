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

/// Waits (five minutes at most) until the daemon of the runtime folder `runtime` has no
/// background build queued or running (`daemon status` ends with `background idle`).
pub fn wait_background_idle(runtime: &std::path::Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    loop {
        let status = std::process::Command::new(nvlinkrs())
            .args(["daemon", "status"])
            .env("XDG_RUNTIME_DIR", runtime)
            .output()
            .unwrap();
        if String::from_utf8_lossy(&status.stdout).ends_with("background idle\n") {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the background build did not end"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

pub fn nvlinkrs() -> PathBuf {
    std::env::var_os("NVLINKRS_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_nvlinkrs")))
}
