//! libNVVM, loaded at run time. All unsafe FFI of the crate lives in this file.

use std::ffi::c_int;
use std::path::{Path, PathBuf};

use crate::diag::{Error, Result};

type VersionFn = unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int;

/// A loaded libNVVM.
pub struct LibNvvm {
    lib: libloading::Library,
    pub path: PathBuf,
}

impl LibNvvm {
    pub fn load(path: &Path) -> Result<LibNvvm> {
        // SAFETY: loading a shared library runs its initialisers; libnvvm's are the ones
        // NVIDIA ships for exactly this use (nvlink dlopens the same file).
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| {
            Error::fatal(format!(
                "elfLink linker library load error: cannot load libNVVM '{}': {e}",
                path.display()
            ))
        })?;
        Ok(LibNvvm {
            lib,
            path: path.to_path_buf(),
        })
    }

    fn version_pair(&self, symbol: &[u8]) -> Result<(i32, i32)> {
        // SAFETY: nvvmVersion / nvvmIRVersion have the C signature `nvvmResult f(int*, int*)`
        // (nvvm.h); the symbol name is NUL-free and the library outlives the call.
        unsafe {
            let f: libloading::Symbol<VersionFn> = self.lib.get(symbol).map_err(|e| {
                Error::fatal(format!("'{}' is not libNVVM: {e}", self.path.display()))
            })?;
            let (mut a, mut b) = (0, 0);
            let rc = f(&mut a, &mut b);
            if rc != 0 {
                return Err(Error::fatal(format!(
                    "libNVVM version query failed with code {rc}"
                )));
            }
            Ok((a, b))
        }
    }

    /// `nvvmVersion`: the libNVVM release (2.0 for CUDA 13).
    pub fn version(&self) -> Result<(i32, i32)> {
        self.version_pair(b"nvvmVersion")
    }
}
