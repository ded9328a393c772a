//! Finding the CUDA toolkit nvlinkrs drives (ptxas, libNVVM, libdevice, libcudadevrt):
//! `--cuda-path`, `-nvvmpath`, `CUDA_HOME`/`CUDA_PATH`, `nvcc`/`ptxas` on `PATH`,
//! `/usr/local/cuda`, `/opt/cuda`, then the PyPI wheel layout (`site-packages/nvidia/cu13`),
//! in that order; when none holds a toolkit, the message lists every place tried.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::diag::{Error, Result};
use crate::linkenv::LinkEnv;

#[derive(Clone, Debug)]
pub struct Toolkit {
    pub root: PathBuf,
    /// How it was found, for `--version` and `-v`.
    pub found_via: String,
}

fn is_root(p: &Path) -> bool {
    p.join("bin").join("ptxas").is_file() || p.join("nvvm").is_dir()
}

/// Where the project's `scripts/setup.sh` puts the CUDA wheels (`NVLINKRS_TOOLCHAIN_DIR`,
/// else `cuda-<version>` under `$XDG_CACHE_HOME/nvlinkrs` or `~/.cache/nvlinkrs`, newest
/// name first), each as its `cuda` link to the toolkit root: a user who ran the README's
/// commands has a toolkit there without setting `CUDA_HOME`.
fn setup_roots(env: &LinkEnv) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if let Some(d) = env.non_empty("NVLINKRS_TOOLCHAIN_DIR") {
        roots.push(PathBuf::from(d).join("cuda"));
    }
    let base = env
        .get("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            env.get("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".cache"))
        })
        .map(|c| c.join("nvlinkrs"));
    if let Some(base) = base
        && let Ok(entries) = std::fs::read_dir(&base)
    {
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.starts_with("cuda-"))
            .collect();
        names.sort_by(|a, b| b.cmp(a));
        roots.extend(names.into_iter().map(|n| base.join(n).join("cuda")));
    }
    roots
}

impl Toolkit {
    /// The toolkit this process's environment finds ([`Toolkit::discover_in`]).
    pub fn discover(cuda_path: Option<&Path>, nvvmpath: Option<&Path>) -> Result<Toolkit> {
        Toolkit::discover_in(cuda_path, nvvmpath, &LinkEnv::current())
    }

    /// The toolkit `--cuda-path`, `-nvvmpath` and the environment `env` find.
    pub fn discover_in(
        cuda_path: Option<&Path>,
        nvvmpath: Option<&Path>,
        env: &LinkEnv,
    ) -> Result<Toolkit> {
        let mut tried = Vec::new();
        let mut candidates: Vec<(PathBuf, String)> = Vec::new();
        if let Some(p) = cuda_path {
            candidates.push((p.to_path_buf(), "--cuda-path".into()));
        }
        if let Some(p) = nvvmpath {
            candidates.push((p.join(".."), "-nvvmpath".into()));
        }
        if cuda_path.is_none() {
            tried.push("--cuda-path (not given)".to_string());
        }
        for var in ["CUDA_HOME", "CUDA_PATH"] {
            match env.non_empty(var) {
                Some(v) => candidates.push((PathBuf::from(v), var.into())),
                None => tried.push(format!("{var} (not set)")),
            }
        }
        for tool in ["nvcc", "ptxas"] {
            let root = env.on_path(tool).filter(|p| p.is_file()).and_then(|p| {
                let bin = std::fs::canonicalize(&p).ok()?;
                bin.parent()?.parent().map(Path::to_path_buf)
            });
            match root {
                Some(root) => candidates.push((root, format!("{tool} on PATH"))),
                None => tried.push(format!("{tool} on PATH (none)")),
            }
        }
        for dir in ["/usr/local/cuda", "/opt/cuda"] {
            candidates.push((PathBuf::from(dir), "the usual place".into()));
        }
        for (root, via) in candidates {
            if is_root(&root) {
                let root = std::fs::canonicalize(&root).unwrap_or(root);
                return Ok(Toolkit {
                    root,
                    found_via: via,
                });
            }
            tried.push(format!("{} ({via})", root.display()));
        }
        if let Some(root) = pypi_root(env) {
            return Ok(Toolkit {
                root,
                found_via: "the nvidia-cuda-nvcc wheel of python3".into(),
            });
        }
        tried.push("the PyPI wheels (python3's site-packages/nvidia/cu13)".into());
        for root in setup_roots(env) {
            if is_root(&root) {
                let root = std::fs::canonicalize(&root).unwrap_or(root);
                return Ok(Toolkit {
                    root,
                    found_via: "the toolkit nvlinkrs' own setup installed".into(),
                });
            }
            tried.push(format!("{} (nvlinkrs' setup)", root.display()));
        }
        Err(Error::fatal("no CUDA toolkit found").context(format!(
            "tried: {}; give --cuda-path DIR or set CUDA_HOME to a toolkit (the folder with bin/ptxas and nvvm/)",
            tried.join(", ")
        )))
    }

    pub fn ptxas(&self) -> PathBuf {
        self.root.join("bin").join("ptxas")
    }

    /// libNVVM: `<nvvmpath>/lib64/libnvvm.so` as nvlink looks for it, else the toolkit's.
    pub fn libnvvm(&self, nvvmpath: Option<&Path>) -> Option<PathBuf> {
        let mut c = Vec::new();
        if let Some(n) = nvvmpath {
            c.push(n.join("lib64").join("libnvvm.so"));
        }
        c.push(self.root.join("nvvm").join("lib64").join("libnvvm.so"));
        c.push(self.root.join("lib").join("libnvvm.so.4"));
        c.push(self.root.join("lib64").join("libnvvm.so"));
        c.into_iter().find(|p| p.exists())
    }

    /// libnvJitLink (the opt-in sm_100+ finalizer, `src/finalize/`).
    pub fn libnvjitlink(&self) -> Option<PathBuf> {
        [
            "lib/libnvJitLink.so.13",
            "lib64/libnvJitLink.so.13",
            "lib64/libnvJitLink.so",
        ]
        .iter()
        .map(|p| self.root.join(p))
        .find(|p| p.exists())
    }

    pub fn libdevice(&self) -> PathBuf {
        self.root
            .join("nvvm")
            .join("libdevice")
            .join("libdevice.10.bc")
    }

    /// The last line of `ptxas --version` ("Cuda compilation tools, release 13.5, V13.5.37").
    pub fn ptxas_version(&self) -> Option<String> {
        let out = Command::new(self.ptxas()).arg("--version").output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .find(|l| l.starts_with("Cuda compilation tools"))
            .map(str::to_string)
    }
}

/// The wheels' toolkit, asked of `python3` on `PATH`. Python puts the directory it runs
/// in first on its import path, so it runs in `/` and without that entry
/// (`PYTHONSAFEPATH`): an `nvidia.py` in the build directory would run with the user's
/// rights.
fn pypi_root(env: &LinkEnv) -> Option<PathBuf> {
    let out = Command::new(env.on_path("python3")?)
        .current_dir("/")
        .env("PYTHONSAFEPATH", "1")
        .args(["-c", "import nvidia, os\nfor p in nvidia.__path__:\n  q = os.path.join(p, 'cu13')\n  if os.path.isdir(q): print(q); break"])
        .output()
        .ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (out.status.success() && is_root(&p)).then_some(p)
}

/// The file nvlinkrs' code was loaded from: the executable, or the shared library it is
/// part of (the drop-in libnvJitLink, whose process is someone else's program).
pub fn own_image() -> Option<PathBuf> {
    // SAFETY: Dl_info is plain data (pointers and integers); all zeros is a valid value
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables for an address of this code
    let found = unsafe { libc::dladdr(own_image as *const libc::c_void, &mut info) };
    if found != 0 && !info.dli_fname.is_null() {
        // SAFETY: the loader's own C string
        let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
        let path = PathBuf::from(name.to_string_lossy().into_owned());
        if path.is_absolute()
            && path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().contains(".so"))
        {
            return Some(path);
        }
    }
    std::env::current_exe().ok()
}
