//! Everything a link writes: the output file (to a temporary file beside it, then renamed,
//! so that a failed link leaves nothing behind and a reader never sees half a file), the
//! `--register-link-binaries` C fragment, and the `-time` CSV rows.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::diag::{Error, Result};

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, renamed
/// over the target once complete.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |f| f.write_all(bytes))
}

/// The output a previous link left, set aside on a thread of its own while the link runs
/// (a reader sees the old file, none, or the whole new one; a link that fails leaves
/// none). A plain file only this name links to, owned by this user, is renamed to a
/// temporary name beside it and the new output written over it in place: its page cache
/// is reused, where writing a fresh file takes every page new and removing the old one
/// frees them (on Linux writing into an existing file is much the faster, as mold
/// observes; 8 MB costs 1 to 5 ms either way). Anything else that is a plain file is
/// removed. Dropped without [`OldOutput::take`], it removes what it set aside.
pub struct OldOutput {
    thread: Option<std::thread::JoinHandle<Option<PathBuf>>>,
}

impl OldOutput {
    /// Waits for the old output to be set aside: the file to write the new one over.
    pub fn take(mut self) -> Option<PathBuf> {
        self.thread.take().and_then(|t| t.join().ok().flatten())
    }
}

impl Drop for OldOutput {
    fn drop(&mut self) {
        if let Some(aside) = self.thread.take().and_then(|t| t.join().ok().flatten()) {
            std::fs::remove_file(aside).ok();
        }
    }
}

/// Starts setting aside the output at `path` (see [`OldOutput`]).
pub fn set_aside_old_output(path: &Path) -> OldOutput {
    let path = path.to_path_buf();
    let thread = std::thread::spawn(move || {
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if !meta.is_file() {
            return None;
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            // (root may write into any file; another user's would keep its owner)
            let euid = unsafe { libc::geteuid() };
            if meta.nlink() == 1
                && meta.uid() == euid
                && let Some(aside) = aside_name(&path)
                && std::fs::rename(&path, &aside).is_ok()
            {
                return Some(aside);
            }
        }
        std::fs::remove_file(&path).ok();
        None
    });
    OldOutput {
        thread: Some(thread),
    }
}

/// The temporary name an old output is set aside under: hidden, beside it, this
/// process's.
fn aside_name(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_string_lossy();
    Some(path.with_file_name(format!(".{name}.{}.nvlinkrs-old", std::process::id())))
}

/// nvlink's message for an output it cannot write, with the system's reason.
fn cannot_open(path: &Path) -> impl Fn(std::io::Error) -> Error + Copy + '_ {
    move |e| {
        Error::fatal(format!("Could not open output file '{}'", path.display()))
            .context(e.to_string())
    }
}

/// Gives `file` the permissions a newly created file would get (the umask applied).
fn new_file_permissions(file: &std::fs::File) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o666 & !umask()))?;
    }
    #[cfg(not(unix))]
    let _ = file;
    Ok(())
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

/// As [`write_atomic_with`], writing over `aside` (the old output [`OldOutput`] set
/// aside) when there is one, then renaming it to `path`.
pub fn write_over(
    path: &Path,
    aside: Option<PathBuf>,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let Some(aside) = aside else {
        return write_atomic_with(path, fill);
    };
    let written = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).open(&aside)?;
        fill_buffered(&mut f, fill)?;
        use std::io::Seek;
        let end = f.stream_position()?;
        f.set_len(end)?;
        new_file_permissions(&f)?;
        std::fs::rename(&aside, path)
    })();
    if written.is_err() {
        std::fs::remove_file(&aside).ok();
    }
    written.map_err(cannot_open(path))
}

/// As [`write_atomic`], with `fill` writing the content (through a buffer that large
/// writes pass by) as it produces it.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let cannot = cannot_open(path);
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
    // the old output goes first (see `OldOutput`)
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
    // (the temporary file is created 0600)
    new_file_permissions(tmp.as_file()).ok();
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
    fn an_old_output_is_written_over_in_place() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.cubin");
        std::fs::write(&p, vec![7u8; 10_000]).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let inode = std::fs::metadata(&p).unwrap().ino();
        let old = set_aside_old_output(&p);
        let aside = old.take();
        // (while the link runs the name is free: a reader sees no half-written file)
        assert!(aside.is_some() && !p.exists());
        write_over(&p, aside, |w| w.write_all(b"shorter new image")).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"shorter new image");
        let m = std::fs::metadata(&p).unwrap();
        // the same file, cut to the new length, with a new file's permissions
        assert_eq!(m.ino(), inode);
        assert_eq!(m.permissions().mode() & 0o777, 0o666 & !umask());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_failed_link_leaves_neither_output_nor_temporary() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.cubin");
        // the link fails before writing: what was set aside goes
        std::fs::write(&p, b"old").unwrap();
        drop(set_aside_old_output(&p));
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
        // the writing fails
        std::fs::write(&p, b"old").unwrap();
        let aside = set_aside_old_output(&p).take();
        let e = write_over(&p, aside, |w| {
            w.write_all(b"part")?;
            Err(std::io::Error::other("disk full"))
        })
        .unwrap_err();
        assert!(e.message().contains("Could not open output file"));
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[test]
    fn an_old_output_with_another_name_is_not_written_into() {
        // a hard link elsewhere keeps the old bytes: the output is a new file
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.cubin");
        let other = d.path().join("kept.cubin");
        std::fs::write(&p, b"old").unwrap();
        std::fs::hard_link(&p, &other).unwrap();
        let aside = set_aside_old_output(&p).take();
        assert!(aside.is_none());
        write_over(&p, aside, |w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(std::fs::read(&other).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 2);
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
