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
                found_via: "the CUDA wheels of a Python environment".into(),
            });
        }
        tried.push("the PyPI wheels (site-packages/nvidia/cu13 of the Python environments)".into());
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
        ptxas_version_of(&self.ptxas())
    }
}

/// The last line of `ptxas --version` of the ptxas at `path`.
pub fn ptxas_version_of(path: &Path) -> Option<String> {
    let out = Command::new(path).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find(|l| l.starts_with("Cuda compilation tools"))
        .map(str::to_string)
}

/// The CUDA wheels' toolkit (`site-packages/nvidia/cu13` holding ptxas or libNVVM), found
/// without running Python (asking `python3` cost 0.47 s a process under pyenv, ten times
/// NVIDIA's whole link): the site folders of, in order, the active environment
/// (`VIRTUAL_ENV`, `CONDA_PREFIX`), the one this program is installed in (`nvlinkrs` in a
/// venv's `bin`, the drop-in under `site-packages`), the `python3` on `PATH` (as named: a
/// venv's link, then the interpreter it resolves to), the version pyenv selects
/// (`PYENV_VERSION`, else `$PYENV_ROOT/version`) and the user's own site (`~/.local`).
/// Python's import path can hold other folders (`PYTHONPATH`, `.pth` files): a toolkit
/// there is found through `CUDA_HOME`.
fn pypi_root(env: &LinkEnv) -> Option<PathBuf> {
    site_folders(env)
        .into_iter()
        .map(|s| s.join("nvidia").join("cu13"))
        .find(|r| is_root(r))
}

/// A file of NVIDIA's CUDA wheels (`rel` under `site-packages/nvidia/cu13`, e.g.
/// `lib/libnvJitLink.so.13` of the nvidia-nvjitlink wheel, which a runtime-only
/// environment has without a toolkit) in the first site folder that holds it.
pub fn wheel_file(rel: &Path) -> Option<PathBuf> {
    site_folders(&LinkEnv::current())
        .into_iter()
        .map(|s| s.join("nvidia").join("cu13").join(rel))
        .find(|f| f.is_file())
}

/// The `site-packages` (and Debian's `dist-packages`) folders [`pypi_root`] looks in.
fn site_folders(env: &LinkEnv) -> Vec<PathBuf> {
    let mut prefixes: Vec<PathBuf> = ["VIRTUAL_ENV", "CONDA_PREFIX"]
        .iter()
        .filter_map(|v| env.non_empty(v).map(PathBuf::from))
        .collect();
    let mut sites = Vec::new();
    let me = own_image();
    if let Some(me) = &me {
        prefixes.extend(me.parent().and_then(Path::parent).map(Path::to_path_buf));
    }
    // (where this program's own site folder comes: after the active environment and the
    // prefix it runs from, before any other Python's, so that the drop-in installed in a
    // venv takes that venv's wheels over ~/.local's or another Python's)
    let own_site_at = prefixes.len();
    if let Some(py) = env.on_path("python3") {
        prefixes.extend(py.parent().and_then(Path::parent).map(Path::to_path_buf));
        if let Ok(real) = std::fs::canonicalize(&py) {
            prefixes.extend(real.parent().and_then(Path::parent).map(Path::to_path_buf));
        }
    }
    let home = env
        .get("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute());
    let pyenv = env
        .non_empty("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".pyenv")));
    if let Some(root) = pyenv {
        let chosen = env
            .non_empty("PYENV_VERSION")
            .map(|v| v.to_string_lossy().into_owned())
            .or_else(|| std::fs::read_to_string(root.join("version")).ok())
            .unwrap_or_default();
        for v in chosen.split([':', '\n']).map(str::trim) {
            if !v.is_empty() && !v.contains('/') && v != "system" {
                prefixes.push(root.join("versions").join(v));
            }
        }
    }
    prefixes.extend(home.map(|h| h.join(".local")));
    let own_site = me.as_ref().and_then(|me| {
        me.ancestors()
            .find(|a| {
                a.file_name()
                    .is_some_and(|n| n == "site-packages" || n == "dist-packages")
            })
            .map(Path::to_path_buf)
    });
    for (i, prefix) in prefixes.into_iter().enumerate() {
        if i == own_site_at {
            // (the drop-in installed under a site folder)
            sites.extend(own_site.clone());
        }
        let Ok(dir) = std::fs::read_dir(prefix.join("lib")) else {
            continue;
        };
        let mut pythons: Vec<PathBuf> = dir
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
            .map(|e| e.path())
            .collect();
        pythons.sort();
        for p in pythons {
            sites.push(p.join("site-packages"));
            sites.push(p.join("dist-packages"));
        }
    }
    if let Some(site) = own_site
        && !sites.contains(&site)
    {
        sites.push(site);
    }
    // (the one a Python program runs in, unactivated: where its extension modules were
    // loaded from, e.g. cuda.bindings', for the drop-in inside that program)
    if let Ok(maps) = std::fs::read_to_string("/proc/self/maps") {
        for p in maps.lines().filter_map(|l| l.find('/').map(|at| &l[at..])) {
            if let Some(at) = p.find("/site-packages/") {
                let site = PathBuf::from(&p[..at + 14]);
                if !sites.contains(&site) {
                    sites.push(site);
                }
            }
        }
    }
    sites
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
