//! `nvlinkrs shim`: an overlay toolkit whose `bin/nvcc` runs nvlinkrs as its nvlink.
//!
//! nvcc reads `nvcc.profile` from the directory it was started from (`_HERE_`, the path it
//! was called by, symbolic links not followed), takes the toolkit root from it
//! (`TOP = $(_HERE_)/..`) and puts `_HERE_` first on the `PATH` of the tools it runs; so
//! `PATH` cannot put another nvlink before the toolkit's, and nvcc 13.5's `--nvlink-prefix`
//! hands the prefix to nvlink as an input. An overlay does work: a directory holding a link
//! to every entry of the toolkit's root, and a `bin/` of links to every tool but `nvlink`,
//! a script that runs nvlinkrs (or says it has gone), and `nvcc.profile`, a copy whose
//! `TOP` names the toolkit (so the `-L` paths nvcc gives nvlink, which the image's tool
//! note records, are the ones the toolkit's own nvcc gives). The toolkit itself is never
//! written. A marker file lists what the overlay holds, so that making it again replaces
//! only what it made and `--remove` removes only that.

use std::path::{Path, PathBuf};

use crate::diag::{Error, Result};

/// The marker file at the overlay's root.
pub const MARKER: &str = ".nvlinkrs-shim";

/// A Meson native file naming the overlay's nvcc (Meson reads no environment variable
/// for the CUDA compiler, and one found on `PATH` is recorded by its bare name).
pub const MESON_NATIVE: &str = "nvlinkrs-meson.ini";

/// A CMake toolchain file (`-DCMAKE_TOOLCHAIN_FILE=`): the overlay's nvcc as the CUDA
/// compiler, the overlay's nvlink as the device linker when the compiler is Clang, and
/// the wheels' `libcudart.so.13` for `find_package(CUDAToolkit)`.
pub const CMAKE_TOOLCHAIN: &str = "nvlinkrs.cmake";

/// The rules the toolchain file has CMake read once the compiler is known.
const CMAKE_RULES: &str = "nvlinkrs-rules.cmake";

/// The files the overlay writes (everything else it makes is a link or `bin/`).
const WRITTEN: [&str; 6] = [
    "bin/nvlink",
    "bin/ptxas",
    "bin/nvcc.profile",
    MESON_NATIVE,
    CMAKE_TOOLCHAIN,
    CMAKE_RULES,
];

/// What one overlay was made from and holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlay {
    pub root: PathBuf,
    /// The toolkit it mirrors (absolute).
    pub toolkit: PathBuf,
    /// The program its `bin/nvlink` runs.
    pub linker: PathBuf,
    /// Entries made, relative to `root`, in the order made (directories before what is in them).
    pub made: Vec<PathBuf>,
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::fatal(format!("shim: cannot {what} '{}': {e}", path.display()))
}

fn absolute(path: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(path).map_err(|e| io_error("open", path, e))
}

impl Overlay {
    /// Reads the marker of the overlay at `root`; `None` when there is none.
    pub fn read(root: &Path) -> Result<Option<Overlay>> {
        let marker = root.join(MARKER);
        let text = match std::fs::read_to_string(&marker) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error("read", &marker, e)),
        };
        let mut o = Overlay {
            root: root.to_path_buf(),
            toolkit: PathBuf::new(),
            linker: PathBuf::new(),
            made: Vec::new(),
        };
        for (n, line) in text.lines().enumerate() {
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            let (key, value) = line.split_once('\t').ok_or_else(|| {
                Error::fatal(format!(
                    "shim: '{}' line {}: not a shim marker line",
                    marker.display(),
                    n + 1
                ))
            })?;
            match key {
                "toolkit" => o.toolkit = PathBuf::from(value),
                "nvlink" => o.linker = PathBuf::from(value),
                "made" => {
                    let rel = PathBuf::from(value);
                    // only names inside the overlay are ever removed
                    if rel.is_absolute() || rel.components().any(|c| c.as_os_str() == "..") {
                        return Err(Error::fatal(format!(
                            "shim: '{}' line {}: '{value}' is outside the overlay",
                            marker.display(),
                            n + 1
                        )));
                    }
                    o.made.push(rel)
                }
                _ => {
                    return Err(Error::fatal(format!(
                        "shim: '{}' line {}: unknown key '{key}'",
                        marker.display(),
                        n + 1
                    )));
                }
            }
        }
        Ok(Some(o))
    }

    fn marker_text(&self) -> String {
        let mut s = format!(
            "# made by `nvlinkrs shim`: `nvlinkrs shim --remove {}` removes what is listed here\ntoolkit\t{}\nnvlink\t{}\n",
            self.root.display(),
            self.toolkit.display(),
            self.linker.display()
        );
        for m in &self.made {
            s.push_str(&format!("made\t{}\n", m.display()));
        }
        s
    }

    /// Removes the entries made (links, and directories once empty), last made first.
    fn remove_made(&mut self) -> Result<()> {
        while let Some(rel) = self.made.pop() {
            let p = self.root.join(&rel);
            let Ok(meta) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            let r = if meta.file_type().is_symlink() || WRITTEN.iter().any(|w| rel == Path::new(w))
            {
                std::fs::remove_file(&p)
            } else if meta.is_dir() {
                match std::fs::remove_dir(&p) {
                    // something of the user's is in it: it stays
                    Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => Ok(()),
                    r => r,
                }
            } else {
                // replaced by a file of the user's since: not ours to remove
                Ok(())
            };
            r.map_err(|e| io_error("remove", &p, e))?;
        }
        Ok(())
    }

    /// The lines that point each build system at the overlay.
    pub fn recipe(&self) -> String {
        let r = self.root.display();
        format!(
            "CMake:  cmake -DCMAKE_TOOLCHAIN_FILE={r}/{CMAKE_TOOLCHAIN} ... (a new build directory; Clang: add -DCMAKE_CUDA_COMPILER=clang++)\n\
             Meson:  meson setup --native-file {r}/{MESON_NATIVE} BUILDDIR\n\
             make:   make NVCC={r}/bin/nvcc\n\
             Bazel:  CUDA_PATH={r} bazel build ... (rules_cuda; or toolkit_path = \"{r}\" in cuda.local_toolchain)\n"
        )
    }
}

/// The toolkit an overlay at `path` would mirror: `path` itself, or, when `path` is an
/// overlay, the toolkit it was made from.
/// The path is kept as given (made absolute, links not resolved): nvcc started from it
/// would see that path in `_HERE_`.
fn original_toolkit(path: &Path) -> Result<PathBuf> {
    let abs = std::path::absolute(path).map_err(|e| io_error("open", path, e))?;
    if let Some(o) = Overlay::read(&abs)? {
        return Ok(o.toolkit);
    }
    if !abs.join("bin").join("nvcc").is_file() {
        return Err(Error::fatal(format!(
            "shim: '{}' is not a CUDA toolkit (no bin/nvcc)",
            abs.display()
        )));
    }
    Ok(abs)
}

/// Makes (or makes again) `root` an overlay of `toolkit` whose `bin/nvlink` is `linker`.
/// A directory that is not empty and holds no marker is refused; on an error, what was
/// made is removed again.
pub fn install(toolkit: &Path, root: &Path, linker: &Path) -> Result<Overlay> {
    let toolkit = original_toolkit(toolkit)?;
    let linker = absolute(linker)?;
    // checked before anything is created: nothing is ever made inside the toolkit
    let real = absolute(&toolkit)?;
    let planned = resolved(root)?;
    if planned.starts_with(&real) || real.starts_with(&planned) {
        return Err(Error::fatal(format!(
            "shim: the overlay '{}' and the toolkit '{}' overlap; give a directory of its own",
            planned.display(),
            toolkit.display()
        )));
    }
    let created = !root.exists();
    std::fs::create_dir_all(root).map_err(|e| io_error("create", root, e))?;
    let root = absolute(root)?;
    match Overlay::read(&root)? {
        Some(mut old) => old.remove_made()?,
        None => {
            let mut entries = std::fs::read_dir(&root).map_err(|e| io_error("read", &root, e))?;
            if entries.next().is_some() {
                return Err(Error::fatal(format!(
                    "shim: '{}' is not empty and was not made by nvlinkrs shim (no {MARKER})",
                    root.display()
                )));
            }
        }
    }
    let mut o = Overlay {
        root,
        toolkit,
        linker,
        made: Vec::new(),
    };
    match fill(&mut o) {
        Ok(()) => Ok(o),
        Err(e) => {
            let _ = o.remove_made();
            let _ = std::fs::remove_file(o.root.join(MARKER));
            if created {
                let _ = std::fs::remove_dir(&o.root);
            }
            Err(e)
        }
    }
}

/// `path` with links resolved as far as it exists, the rest appended as given.
fn resolved(path: &Path) -> Result<PathBuf> {
    let abs = std::path::absolute(path).map_err(|e| io_error("open", path, e))?;
    let mut existing = abs.as_path();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => break,
        }
    }
    let mut out = absolute(existing)?;
    out.extend(rest.iter().rev());
    Ok(out)
}

fn sorted_entries(dir: &Path) -> Result<Vec<std::ffi::OsString>> {
    let mut names = std::fs::read_dir(dir)
        .map_err(|e| io_error("read", dir, e))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|e| io_error("read", dir, e))?;
    names.sort();
    Ok(names)
}

fn fill(o: &mut Overlay) -> Result<()> {
    let link = |o: &mut Overlay, target: &Path, rel: PathBuf| -> Result<()> {
        let at = o.root.join(&rel);
        std::os::unix::fs::symlink(target, &at).map_err(|e| io_error("create", &at, e))?;
        o.made.push(rel);
        Ok(())
    };
    for name in sorted_entries(&o.toolkit)? {
        if name == "bin" || name == MARKER {
            continue;
        }
        let target = o.toolkit.join(&name);
        link(o, &target, PathBuf::from(&name))?;
    }
    let bin = o.root.join("bin");
    // (kept by a remove when the user had put something in it)
    match std::fs::create_dir(&bin) {
        Err(e) if !(e.kind() == std::io::ErrorKind::AlreadyExists && bin.is_dir()) => {
            return Err(io_error("create", &bin, e));
        }
        _ => {}
    }
    o.made.push(PathBuf::from("bin"));
    for name in sorted_entries(&o.toolkit.join("bin"))? {
        if name == "nvlink" || name == "ptxas" || name == "nvcc.profile" {
            continue;
        }
        let target = o.toolkit.join("bin").join(&name);
        link(o, &target, Path::new("bin").join(&name))?;
    }
    let script = nvlink_script(&o.linker, &o.root);
    write_program(o, "bin/nvlink", &script)?;
    let script = ptxas_script(&o.toolkit.join("bin/ptxas"));
    write_program(o, "bin/ptxas", &script)?;
    let profile = o.toolkit.join("bin/nvcc.profile");
    let text = std::fs::read_to_string(&profile).map_err(|e| io_error("read", &profile, e))?;
    write_made(o, "bin/nvcc.profile", &with_top(&text, &o.toolkit))?;
    let text = format!("[binaries]\ncuda = '{}/bin/nvcc'\n", o.root.display());
    write_made(o, MESON_NATIVE, &text)?;
    let (toolchain, rules) = cmake_files(&o.root, &o.toolkit);
    write_made(o, CMAKE_TOOLCHAIN, &toolchain)?;
    write_made(o, CMAKE_RULES, &rules)?;
    crate::output::write_atomic(&o.root.join(MARKER), o.marker_text().as_bytes())
}

/// The overlay's `bin/nvlink`: a script that runs `linker` under the name nvcc gave it
/// (so that its messages say `nvlink`), and, once `linker` has moved or gone (a venv made
/// again, a `cargo install` elsewhere), says so and how to point the overlay at the new
/// one, where a link to it would leave nvcc to exit 127 without a word.
fn nvlink_script(linker: &Path, root: &Path) -> String {
    let quoted = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', "'\\''"));
    let (l, r) = (quoted(linker), quoted(root));
    format!(
        "#!/usr/bin/env bash\n\
         # made by `nvlinkrs shim`: nvcc's nvlink is nvlinkrs\n\
         if [ -x {l} ]; then exec -a \"$0\" {l} \"$@\"; fi\n\
         printf 'nvlink fatal   : the nvlinkrs this toolkit overlay runs (%s) is not there (moved or removed): make the overlay again with the nvlinkrs to use: nvlinkrs shim %s\\n' {l} {r} >&2\n\
         exit 1\n"
    )
}

/// The overlay's `bin/ptxas`: a script that runs the toolkit's. A file, not a link: clang
/// finds the CUDA installation from the `ptxas` on `PATH` and follows a link to its end,
/// which would take it to the toolkit and its nvlink; a file keeps it in the overlay, whose
/// nvlink its device link (`clang-nvlink-wrapper`) then runs.
fn ptxas_script(ptxas: &Path) -> String {
    let quoted = format!("'{}'", ptxas.display().to_string().replace('\'', "'\\''"));
    format!(
        "#!/bin/sh\n\
         # made by `nvlinkrs shim`: the toolkit's ptxas (a file, so that clang stays in the overlay)\n\
         exec {quoted} \"$@\"\n"
    )
}

/// The CMake toolchain file and the rules it has CMake read. CMake with Clang as the CUDA
/// compiler runs `TOOLKIT/bin/nvlink` for the device link, the toolkit being the `TOP` of
/// nvcc's profile, which names the real toolkit (so the paths nvcc hands nvlink are its
/// own): the rules, read once the compiler is known, name the overlay's nvlink instead.
/// NVIDIA's wheels hold `lib/libcudart.so.13` without `libcudart.so`, which
/// `find_package(CUDAToolkit)` looks for: the toolchain file names it.
fn cmake_files(root: &Path, toolkit: &Path) -> (String, String) {
    // (a CMake quoted argument: `\`, `"` and `$` escaped)
    let q = |p: &Path| {
        let s = p.display().to_string();
        format!(
            "\"{}\"",
            s.replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('$', "\\$")
        )
    };
    let (nvcc, nvlink, rules) = (
        q(&root.join("bin/nvcc")),
        q(&root.join("bin/nvlink")),
        q(&root.join(CMAKE_RULES)),
    );
    let lib = toolkit.join("lib");
    let (so13, so, so64) = (
        q(&lib.join("libcudart.so.13")),
        q(&lib.join("libcudart.so")),
        q(&toolkit.join("lib64/libcudart.so")),
    );
    let toolchain = format!(
        "# made by `nvlinkrs shim`: cmake -DCMAKE_TOOLCHAIN_FILE=<this file> (a new build directory)\n\
         # NVIDIA's compiler: the overlay's nvcc, whose device links run nvlinkrs\n\
         if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{{CUDACXX}})\n  set(CMAKE_CUDA_COMPILER {nvcc})\nendif()\n\
         # Clang as the CUDA compiler: its device link through the overlay's nvlink\n\
         set(CMAKE_USER_MAKE_RULES_OVERRIDE_CUDA {rules})\n\
         # NVIDIA's wheels: libcudart.so.13 and no libcudart.so, which find_package(CUDAToolkit) wants\n\
         if(EXISTS {so13} AND NOT EXISTS {so} AND NOT EXISTS {so64})\n\
         \x20 set(CUDA_CUDART {so13} CACHE FILEPATH \"libcudart (nvlinkrs shim)\")\n\
         \x20 set(CUDA_cudart_LIBRARY {so13} CACHE FILEPATH \"libcudart (nvlinkrs shim)\")\nendif()\n"
    );
    let rules = format!(
        "# made by `nvlinkrs shim`, read through {CMAKE_TOOLCHAIN}: CMake's own device link (Clang) runs the overlay's nvlink\n\
         if(CMAKE_CUDA_COMPILER_ID STREQUAL \"Clang\")\n  set(CMAKE_CUDA_DEVICE_LINKER {nvlink})\nendif()\n"
    );
    (toolchain, rules)
}

/// A script of the overlay's, made executable.
fn write_program(o: &mut Overlay, rel: &str, text: &str) -> Result<()> {
    write_made(o, rel, text)?;
    let at = o.root.join(rel);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| io_error("create", &at, e))
}

fn write_made(o: &mut Overlay, rel: &str, text: &str) -> Result<()> {
    crate::output::write_atomic(&o.root.join(rel), text.as_bytes())?;
    o.made.push(PathBuf::from(rel));
    Ok(())
}

/// `nvcc.profile` with its `TOP` (the toolkit root, `$(_HERE_)/..` as shipped) naming
/// `toolkit` as the toolkit's own nvcc would (`toolkit/bin/..`: the `-L` paths nvcc gives
/// nvlink, recorded in the image, are then the same); `_HERE_` stays the overlay's `bin/`,
/// where nvcc then finds nvlink.
fn with_top(profile: &str, toolkit: &Path) -> String {
    let here = toolkit.join("bin").display().to_string();
    let mut out = String::new();
    let mut replaced = false;
    for line in profile.lines() {
        let is_top = line
            .strip_prefix("TOP")
            .is_some_and(|rest| rest.trim_start().starts_with('='));
        if is_top && !replaced {
            out.push_str(&line.replace("$(_HERE_)", &here));
            replaced = true;
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    if replaced {
        out
    } else {
        format!("TOP = {}\n{out}", toolkit.display())
    }
}

/// Undoes `install`: removes what the marker lists, the marker, and the overlay directory
/// when nothing else is left in it.
pub fn remove(root: &Path) -> Result<()> {
    let mut o = Overlay::read(root)?.ok_or_else(|| {
        Error::fatal(format!(
            "shim: '{}' was not made by nvlinkrs shim (no {MARKER})",
            root.display()
        ))
    })?;
    o.remove_made()?;
    let marker = root.join(MARKER);
    std::fs::remove_file(&marker).map_err(|e| io_error("remove", &marker, e))?;
    let _ = std::fs::remove_dir(root);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toolkit-shaped directory: bin/{nvcc,nvlink,nvcc.profile}, include/, lib/.
    fn fake_toolkit(dir: &Path) -> PathBuf {
        let tk = dir.join("toolkit");
        for d in ["bin", "include", "lib"] {
            std::fs::create_dir_all(tk.join(d)).unwrap();
        }
        for f in ["bin/nvcc", "bin/nvlink"] {
            std::fs::write(tk.join(f), f).unwrap();
        }
        std::fs::write(
            tk.join("bin/nvcc.profile"),
            "\nTOP   = $(_HERE_)/..\nPATH += $(_HERE_):\n",
        )
        .unwrap();
        tk
    }

    #[test]
    fn install_again_and_remove() {
        let dir = tempfile::tempdir().unwrap();
        let tk = fake_toolkit(dir.path());
        let linker = dir.path().join("nvlinkrs");
        std::fs::write(&linker, "ours").unwrap();
        let ov = dir.path().join("ov");
        let o = install(&tk, &ov, &linker).unwrap();
        let names: Vec<String> = o.made.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            names,
            [
                "include",
                "lib",
                "bin",
                "bin/nvcc",
                "bin/nvlink",
                "bin/ptxas",
                "bin/nvcc.profile",
                MESON_NATIVE,
                CMAKE_TOOLCHAIN,
                CMAKE_RULES
            ]
        );
        // (ptxas a file that runs the toolkit's: clang follows a link to the toolkit)
        let ptxas = ov.join("bin/ptxas");
        assert!(
            !std::fs::symlink_metadata(&ptxas)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        let script = std::fs::read_to_string(&ptxas).unwrap();
        assert!(
            script.contains(&format!(
                "exec '{}' \"$@\"",
                o.toolkit.join("bin/ptxas").display()
            )),
            "{script}"
        );
        let script = std::fs::read_to_string(ov.join("bin/nvlink")).unwrap();
        assert!(
            script.contains(&format!("exec -a \"$0\" '{}' \"$@\"", o.linker.display())),
            "{script}"
        );
        assert_eq!(
            std::fs::read_link(ov.join("bin/nvcc")).unwrap(),
            tk.join("bin/nvcc")
        );
        assert_eq!(Overlay::read(&ov).unwrap().unwrap(), o);
        assert_eq!(
            std::fs::read_to_string(ov.join("bin/nvcc.profile")).unwrap(),
            format!(
                "\nTOP   = {}/bin/..\nPATH += $(_HERE_):\n",
                o.toolkit.display()
            )
        );
        // again, from the overlay itself as the toolkit: the same overlay, and a file
        // of the user's in bin/ stays
        std::fs::write(ov.join("bin/mine"), "user").unwrap();
        let again = install(&ov, &ov, &linker).unwrap();
        assert_eq!(again, o);
        remove(&ov).unwrap();
        assert_eq!(
            std::fs::read_to_string(ov.join("bin/mine")).unwrap(),
            "user"
        );
        assert_eq!(sorted_entries(&ov).unwrap(), ["bin"]);
        std::fs::remove_file(ov.join("bin/mine")).unwrap();
        // the toolkit is untouched
        assert_eq!(
            std::fs::read_to_string(tk.join("bin/nvlink")).unwrap(),
            "bin/nvlink"
        );
        assert_eq!(sorted_entries(&tk.join("bin")).unwrap().len(), 3);
    }

    #[test]
    fn the_overlays_nvlink_says_when_its_nvlinkrs_has_gone() {
        let dir = tempfile::tempdir().unwrap();
        let tk = fake_toolkit(dir.path());
        let linker = dir.path().join("it's nvlinkrs");
        std::fs::write(&linker, "#!/bin/sh\necho \"ran with $*\"\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&linker, std::fs::Permissions::from_mode(0o755)).unwrap();
        let ov = dir.path().join("o v");
        install(&tk, &ov, &linker).unwrap();
        let nvlink = ov.join("bin/nvlink");
        let run = || {
            std::process::Command::new(&nvlink)
                .arg("-v")
                .output()
                .unwrap()
        };
        let ran = run();
        assert_eq!(String::from_utf8_lossy(&ran.stdout), "ran with -v\n");
        std::fs::remove_file(&linker).unwrap();
        let gone = run();
        assert_eq!(gone.status.code(), Some(1));
        assert_eq!(
            String::from_utf8_lossy(&gone.stderr),
            format!(
                "nvlink fatal   : the nvlinkrs this toolkit overlay runs ({}) is not there (moved or removed): make the overlay again with the nvlinkrs to use: nvlinkrs shim {}\n",
                absolute(&linker).unwrap_or(linker.clone()).display(),
                ov.display()
            )
        );
    }

    /// CMake's files name the overlay's programs in quoted arguments, whatever the path.
    #[test]
    fn cmake_files_quote_their_paths() {
        let (toolchain, rules) = cmake_files(Path::new("/o/a\"b$c"), Path::new("/t"));
        assert!(
            toolchain.contains(r#"set(CMAKE_CUDA_COMPILER "/o/a\"b\$c/bin/nvcc")"#),
            "{toolchain}"
        );
        assert!(
            toolchain.contains(
                r#"set(CMAKE_USER_MAKE_RULES_OVERRIDE_CUDA "/o/a\"b\$c/nvlinkrs-rules.cmake")"#
            ),
            "{toolchain}"
        );
        assert!(
            toolchain.contains(r#"set(CUDA_CUDART "/t/lib/libcudart.so.13" CACHE"#),
            "{toolchain}"
        );
        assert!(
            rules.contains(r#"set(CMAKE_CUDA_DEVICE_LINKER "/o/a\"b\$c/bin/nvlink")"#),
            "{rules}"
        );
    }

    #[test]
    fn refusals() {
        let dir = tempfile::tempdir().unwrap();
        let tk = fake_toolkit(dir.path());
        let linker = dir.path().join("nvlinkrs");
        std::fs::write(&linker, "ours").unwrap();
        let busy = dir.path().join("busy");
        std::fs::create_dir(&busy).unwrap();
        std::fs::write(busy.join("x"), "").unwrap();
        let e = install(&tk, &busy, &linker).unwrap_err();
        assert!(
            e.message()
                .contains("is not empty and was not made by nvlinkrs shim"),
            "{e}"
        );
        let e = remove(&busy).unwrap_err();
        assert!(e.message().contains("was not made by nvlinkrs shim"), "{e}");
        let e = install(&tk, &tk.join("new/ov"), &linker).unwrap_err();
        assert!(e.message().contains("overlap"), "{e}");
        assert!(!tk.join("new").exists(), "nothing made in the toolkit");
        let e = install(&busy, &dir.path().join("ov"), &linker).unwrap_err();
        assert!(
            e.message().contains("is not a CUDA toolkit (no bin/nvcc)"),
            "{e}"
        );
        let e = install(&tk, &dir.path().join("ov2"), &dir.path().join("missing")).unwrap_err();
        assert!(e.message().contains("missing"), "{e}");
    }
}
