//! A drop-in `libnvJitLink.so.13`: NVIDIA's nvJitLink C API (`nvJitLink.h`, 13.5) whose
//! links run through nvlinkrs' own pipeline and its on-disk cache, so that a process
//! linking the same device code as an earlier one gets the image from disk.
//!
//! The calls of a link are recorded (`handle`); `Complete` runs them as one nvlinkrs
//! link (`run`). Whatever nvlinkrs does not carry out (an option it does not know, an
//! input it would judge otherwise than nvJitLink, a failed link, whose messages and
//! result code are nvJitLink's own) is handed, every recorded call replayed, to the real
//! library (`real`), so a caller sees nvJitLink's answers. `exports` binds the C names to
//! the version node `libnvJitLink.so.13`; `options` reads nvJitLink's options.

#![allow(non_snake_case)]

mod exports;
mod handle;
mod kit;
mod memo;
mod options;
mod real;
mod record;
mod run;

/// `NVLINKRS_JITLINK_LOG=FILE`: one line per finished link, saying who linked it
/// (`nvlinkrs: linked`, `nvlinkrs: cache hit`, `nvJitLink: <why>`), for tests and for
/// checking a setup.
pub(crate) fn trace(line: &str) {
    if let Some(path) = std::env::var_os("NVLINKRS_JITLINK_LOG") {
        trace_to(std::path::Path::new(&path), line);
    }
}

/// Appends `line` to the log at `path` in one write: the lines of links finishing at once
/// on other threads, or in other processes, never run into each other (`writeln!` on a
/// file is a write for the text and another for the newline).
fn trace_to(path: &std::path::Path, line: &str) {
    use std::io::Write;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path);
    if let Ok(mut f) = file {
        let _ = f.write_all(format!("{line}\n").as_bytes());
    }
}

/// The bytes of a file an `AddFile` names, read only when it is a regular file and no
/// further than its size (`/dev/zero` never ends, a FIFO blocks at `open`), by the path's
/// bytes as given; `None` when it cannot be read so (the real library judges it then).
pub(crate) fn read_input(path: &std::ffi::CStr) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::ffi::OsStrExt;
    let path = std::path::Path::new(std::ffi::OsStr::from_bytes(path.to_bytes()));
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let file = std::fs::File::open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut data = Vec::new();
    file.take(meta.len()).read_to_end(&mut data).ok()?;
    Some(data)
}

#[cfg(test)]
mod tests {
    /// Lines from many threads at once, each whole on its own line (they ran into each
    /// other: "nvlinkrs: cache hitnvlinkrs: cache hit", then an empty line).
    #[test]
    fn log_lines_of_concurrent_links_stay_whole() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        std::thread::scope(|s| {
            for t in 0..8 {
                let log = &log;
                s.spawn(move || {
                    for _ in 0..400 {
                        super::trace_to(log, &format!("nvlinkrs: cache hit {t}"));
                    }
                });
            }
        });
        let text = std::fs::read_to_string(&log).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 8 * 400);
        for l in lines {
            assert!(
                l.len() == "nvlinkrs: cache hit 0".len() && l.starts_with("nvlinkrs: cache hit "),
                "{l:?}"
            );
        }
    }

    #[test]
    fn input_files_are_read_only_when_regular() {
        assert_eq!(super::read_input(c"/dev/zero"), None);
        assert_eq!(super::read_input(c"/"), None);
        assert_eq!(super::read_input(c"/nonexistent/in.cubin"), None);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.cubin");
        std::fs::write(&path, b"bytes").unwrap();
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        assert_eq!(super::read_input(&c).as_deref(), Some(&b"bytes"[..]));
    }
}

/// nvJitLink's result codes (`nvJitLinkResult`), as the header numbers them.
pub mod rc {
    pub const SUCCESS: i32 = 0;
    pub const INVALID_INPUT: i32 = 3;
    pub const PTX_COMPILE: i32 = 4;
    pub const NVVM_COMPILE: i32 = 5;
    pub const INTERNAL: i32 = 6;
    pub const NULL_INPUT: i32 = 10;
}

/// nvJitLink's input types (`nvJitLinkInputType`).
pub mod input {
    pub const CUBIN: i32 = 1;
    pub const PTX: i32 = 2;
    pub const LTOIR: i32 = 3;
    pub const FATBIN: i32 = 4;
    pub const OBJECT: i32 = 5;
    pub const LIBRARY: i32 = 6;
    pub const ANY: i32 = 10;
}
