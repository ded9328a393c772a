//! The CUDA toolkit the drop-in links with (ptxas, libNVVM, the real library beside
//! them), found once per process: `CUDA_HOME`/`CUDA_PATH`, else the CUDA wheels of the
//! Python environment the process runs in.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use nvlinkrs::toolkit::Toolkit;

/// The toolkit nvlinkrs links with, found once per process and kept, like the real library. Without `CUDA_HOME` or
/// `CUDA_PATH`, the CUDA wheels of the Python environment the process runs in
/// (`VIRTUAL_ENV`, `CONDA_PREFIX`) come first: a Python program's own.
pub fn toolkit() -> Option<&'static Toolkit> {
    static KIT: OnceLock<Option<Toolkit>> = OnceLock::new();
    KIT.get_or_init(|| {
        let given = ["CUDA_HOME", "CUDA_PATH"]
            .iter()
            .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()));
        let wheels = (!given).then(python_env_wheels).flatten();
        Toolkit::discover(wheels.as_deref(), None).ok()
    })
    .as_ref()
}

/// `site-packages/nvidia/cu13` of the Python environments the process can see, when it
/// holds ptxas (the nvidia-cuda-nvcc wheel): the active one (`VIRTUAL_ENV`,
/// `CONDA_PREFIX`) first, the one the process loaded extension modules from (cuda.bindings',
/// for a venv's python run without activating it) among the others
/// (`nvlinkrs::toolkit::wheel_file`; no Python is run).
fn python_env_wheels() -> Option<PathBuf> {
    let ptxas = nvlinkrs::toolkit::wheel_file(Path::new("bin/ptxas"))?;
    ptxas.parent()?.parent().map(Path::to_path_buf)
}
