//! Everything a link writes: the output file (to a temporary file beside it, then renamed,
//! so that a failed link leaves nothing behind and a reader never sees half a file), the
//! `--register-link-binaries` C fragment, and the `-time` CSV rows.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use crate::diag::{Error, Result};

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, renamed
/// over the target once complete.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |f| f.write_all(bytes))
}

/// Removes the output a previous link left, if it is a plain file, on a thread of its
/// own: the page cache it held is what the new file's pages are then made of (renaming
/// over it after writing frees those pages only once the new ones were taken fresh, and
/// freeing 8 MB of it takes 1 to 5 ms). A reader sees the old file, none, or the whole
/// new one; a link that fails leaves none. Join it before writing the output.
pub fn remove_old_output(path: &Path) -> std::thread::JoinHandle<()> {
    let path = path.to_path_buf();
    std::thread::spawn(move || remove_plain_file(&path))
}

fn remove_plain_file(path: &Path) {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
        std::fs::remove_file(path).ok();
    }
}

/// `fill`'s content through a buffer that large writes pass by, flushed.
fn fill_buffered(
    file: &mut std::fs::File,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut w = std::io::BufWriter::with_capacity(1 << 18, file);
    fill(&mut w)?;
    w.flush()
}

/// As [`write_atomic`], with `fill` writing the content (through a buffer that large
/// writes pass by) as it produces it.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let cannot = |e: std::io::Error| {
        Error::fatal(format!("Could not open output file '{}'", path.display()))
            .context(e.to_string())
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // a device, FIFO or socket (`-o /dev/null`) is written in place: a rename would
    // replace the node with a plain file
    if std::fs::symlink_metadata(path)
        .is_ok_and(|m| !m.is_file() && !m.is_dir() && !m.file_type().is_symlink())
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(cannot)?;
        return fill_buffered(&mut f, fill).map_err(cannot);
    }
    // the old output goes first (see `remove_old_output`)
    remove_plain_file(path);
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".nvlinkrs-tmp")
        .tempfile_in(dir)
        .map_err(cannot)?;
    // not synced to disk: the rename is what keeps a half-written file from ever being
    // seen under the output's name (ld, lld and nvlink do not sync either; a sync cost
    // 10-20 ms on a 14 MB image, a quarter of a 128-unit link)
    fill_buffered(tmp.as_file_mut(), fill).map_err(cannot)?;
    // A plain file gets the permissions a newly created file would get (the temporary
    // file is created 0600).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = 0o666 & !umask();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(mode)).ok();
    }
    tmp.persist(path).map_err(|e| cannot(e.error))?;
    Ok(())
}

#[cfg(unix)]
fn umask() -> u32 {
    // The umask can only be read by setting it; read it once from /proc when possible.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

/// The C fragment nvcc's host stub includes: one line per linked module id. nvlink lists
/// the ids of an LTO link in reverse input order.
pub fn register_link_binaries(ids: &[String]) -> String {
    let mut s = format!("#define NUM_PRELINKED_OBJECTS {}\n", ids.len());
    for id in ids {
        s += &format!("DEFINE_REGISTER_FUNC({id})\n");
    }
    s
}

/// One `-time` row: what nvlink writes per phase.
pub struct TimeRow {
    pub source: String,
    pub phase: &'static str,
    pub output: String,
    pub arch: String,
    pub time: Duration,
}

const TIME_HEADER: &str = "source file name , phase name , phase input files , phase output file , arch , tool, metric , unit\n";

/// Appends rows to the `-time` file, writing the header when the file is new or empty.
pub fn append_times(path: &Path, rows: &[TimeRow]) -> Result<()> {
    let mut text = String::new();
    let empty = std::fs::metadata(path)
        .map(|m| m.len() == 0)
        .unwrap_or(true);
    if empty {
        text += TIME_HEADER;
    }
    for r in rows {
        text += &format!(
            "{} , {} ,  , {} , {} , nvlink , {:.4} , ms\n",
            r.source,
            r.phase,
            r.output,
            r.arch,
            r.time.as_secs_f64() * 1000.0
        );
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| {
            Error::fatal(format!("Could not open output file '{}'", path.display()))
                .context(e.to_string())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_output_is_written_into_not_replaced() {
        // (`-o /dev/null` as root replaced the device node with a plain file)
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("out.cubin");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        write_atomic(&fifo, b"device image").unwrap();
        // (checked before joining: a replaced FIFO leaves the reader waiting)
        use std::os::unix::fs::FileTypeExt;
        let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
        assert!(kind.is_fifo());
        assert_eq!(reader.join().unwrap(), b"device image");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn register_file_text() {
        assert_eq!(
            register_link_binaries(&["_b_cu".into(), "_a_cu".into()]),
            "#define NUM_PRELINKED_OBJECTS 2\nDEFINE_REGISTER_FUNC(_b_cu)\nDEFINE_REGISTER_FUNC(_a_cu)\n"
        );
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.cubin");
        std::fs::write(&p, b"old").unwrap();
        write_atomic(&p, b"new bytes").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new bytes");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
        let bad = d.path().join("no/such/dir/out.cubin");
        let e = write_atomic(&bad, b"x").unwrap_err();
        assert!(
            e.message().contains("Could not open output file"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn time_rows_append_after_one_header() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.csv");
        let row = || TimeRow {
            source: "lto.nvvm".into(),
            phase: "cicc",
            output: "lto.ptx".into(),
            arch: "sm_90".into(),
            time: Duration::from_micros(10986),
        };
        append_times(&p, &[row()]).unwrap();
        append_times(&p, &[row()]).unwrap();
        let t = std::fs::read_to_string(&p).unwrap();
        assert_eq!(t.matches("source file name").count(), 1);
        assert!(
            t.ends_with("lto.nvvm , cicc ,  , lto.ptx , sm_90 , nvlink , 10.9860 , ms\n"),
            "{t}"
        );
    }
}
