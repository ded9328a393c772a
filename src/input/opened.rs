//! The files one load opened: each mapped (or read, for the whole-link key) once however
//! many times it is named (a thin archive may name one file for every member), and their
//! identities (device and inode), which the output writer checks before writing over an
//! old output in place. A device is empty and a FIFO read to its end, as nvlink reads them.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::bytes::Bytes;
use crate::cache::Cache;
use crate::diag::{Error, Result};

/// A file's identity: device and inode.
pub type FileId = (u64, u64);

/// The files a load mapped, by path and by identity; and the link's cache, which the
/// fatbin members read in this load use for what they decompress (a large member comes
/// from the cache when it was extracted before).
#[derive(Default)]
pub struct Opened {
    inner: Mutex<Maps>,
    cache: Option<Arc<Cache>>,
}

#[derive(Default)]
struct Maps {
    by_path: HashMap<PathBuf, (Option<FileId>, Bytes)>,
    by_id: HashMap<FileId, Bytes>,
}

impl Opened {
    /// A load whose compressed members are kept in `cache`.
    pub fn with_cache(cache: Option<Arc<Cache>>) -> Opened {
        Opened {
            cache,
            ..Opened::default()
        }
    }

    /// The link's cache, for the members this load reads.
    pub fn cache(&self) -> Option<&Arc<Cache>> {
        self.cache.as_ref()
    }

    /// Maps `path` read-only ([`read_or_map`]; an empty file is an empty buffer), or hands
    /// out the bytes already opened of it or of another name of the same file.
    pub fn open(&self, path: &Path, shown: &str) -> Result<Bytes> {
        self.open_as(path, shown, false)
    }

    /// `path`'s bytes as [`Opened::open`] gives them, but read into memory, not mapped:
    /// the content the whole-link key hashes is then the content the link parses. (A
    /// mapping, even a private one, shows another process's writes through its own shared
    /// mapping of the file, which change neither its size nor its times: an input changed
    /// so while the link ran was stored under the key of its first content, and a later
    /// link of that content got the other image, exit 0.) Every later `open` of the file,
    /// by any of its names, hands out these bytes.
    pub fn open_in_memory(&self, path: &Path, shown: &str) -> Result<Bytes> {
        let opened = self.open_as(path, shown, true)?;
        if opened.is_in_memory() {
            return Ok(opened);
        }
        // (mapped by an earlier `open`: copied)
        let copy = Bytes::from_vec(opened.to_vec());
        let mut m = self.lock();
        let id = m.by_path.get(path).and_then(|(id, _)| *id);
        if let Some(id) = id {
            m.by_id.insert(id, copy.clone());
            for (i, b) in m.by_path.values_mut() {
                if *i == Some(id) {
                    *b = copy.clone();
                }
            }
        }
        m.by_path.insert(path.to_path_buf(), (id, copy.clone()));
        Ok(copy)
    }

    fn open_as(&self, path: &Path, shown: &str, in_memory: bool) -> Result<Bytes> {
        if let Some((_, b)) = self.lock().by_path.get(path) {
            return Ok(b.clone());
        }
        let f = open_to_read(path).map_err(|e| {
            Error::fatal(format!("Could not open input file '{shown}'")).context(e.to_string())
        })?;
        let meta = f.metadata().ok();
        if meta.as_ref().is_some_and(|m| m.is_dir()) {
            // as nvlink says it: a folder is a file it could not open
            return Err(Error::fatal(format!("Could not open input file '{shown}'"))
                .context("it is a directory"));
        }
        let id = meta.as_ref().map(file_id);
        if let Some(b) = id.and_then(|id| self.lock().by_id.get(&id).cloned()) {
            self.lock()
                .by_path
                .insert(path.to_path_buf(), (id, b.clone()));
            return Ok(b);
        }
        let bytes = read_or_map(&f, meta.as_ref(), shown, in_memory)?;
        let mut m = self.lock();
        if let Some(id) = id {
            m.by_id.insert(id, bytes.clone());
        }
        m.by_path.insert(path.to_path_buf(), (id, bytes.clone()));
        Ok(bytes)
    }

    /// The identity of the file opened as `path`.
    pub fn id_of(&self, path: &Path) -> Option<FileId> {
        self.lock().by_path.get(path).and_then(|(id, _)| *id)
    }

    /// The identities of every file opened.
    pub fn ids(&self) -> HashSet<FileId> {
        self.lock().by_id.keys().copied().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Maps> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The most read from a file that is not regular (a FIFO, a pipe): nvlink reads those to
/// their end, and no device code is near this size.
const MAX_STREAM: u64 = 4 << 30;

/// The bytes of the open file `f` (its metadata `meta`). A regular file is mapped (a
/// page past the end of a file another process cuts short meanwhile is a SIGBUS, which the
/// nvlinkrs command turns into nvlink's error naming the file, [`super::sigbus`], while
/// its table has room), or with `in_memory` (or no room) read into memory to the length
/// its metadata gives, no further (one cut short meanwhile gives fewer bytes, which its
/// reader refuses with a message). A character or block device (`/dev/zero`) is empty, as nvlink reads it (it was read to
/// the end of memory); a FIFO or pipe is read to its end, as nvlink does (waiting for its
/// writer), up to [`MAX_STREAM`].
fn read_or_map(
    f: &std::fs::File,
    meta: Option<&std::fs::Metadata>,
    shown: &str,
    in_memory: bool,
) -> Result<Bytes> {
    use std::io::Read;
    use std::os::unix::fs::FileTypeExt;
    let could_not = |e: String| Error::fatal(format!("Could not read file '{shown}'")).context(e);
    let regular = meta.is_some_and(|m| m.is_file() && m.len() > 0);
    if regular
        && !in_memory
        && let Some(slot) = super::sigbus::slot()
    {
        // SAFETY: the mapping is read-only and private to us; a file changed underneath
        // us while linking gives unspecified contents, and one cut short a SIGBUS
        // (above). The output is never written into a mapped file (`output::write_output`).
        let map = unsafe { memmap2::Mmap::map(f) }.map_err(|e| could_not(e.to_string()))?;
        super::sigbus::watch(slot, &map, shown);
        return Ok(Bytes::from_map(map));
    }
    let (limit, stream) = match meta {
        Some(m) if m.file_type().is_char_device() || m.file_type().is_block_device() => {
            return Ok(Bytes::from_vec(Vec::new()));
        }
        Some(m) if m.is_file() && m.len() == 0 => return Ok(Bytes::from_vec(Vec::new())),
        Some(m) if m.is_file() => (m.len(), false),
        _ => (MAX_STREAM + 1, true),
    };
    let mut data = Vec::with_capacity(if stream { 0 } else { limit as usize });
    f.take(limit)
        .read_to_end(&mut data)
        .map_err(|e| could_not(e.to_string()))?;
    if stream && data.len() as u64 > MAX_STREAM {
        return Err(could_not(format!(
            "it is not a regular file and holds more than {MAX_STREAM} bytes"
        )));
    }
    Ok(Bytes::from_vec(data))
}

/// The identity of the file `meta` describes.
pub fn file_id(meta: &std::fs::Metadata) -> FileId {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        (meta.dev(), meta.ino())
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        (0, 0)
    }
}

/// Opens a file the link reads (an options file, an input): in a background build
/// (`linkenv::BACKGROUND_MARK`), only a regular file, opened without waiting, so that a
/// FIFO put where the asking link read a file ends the build at once rather than holding
/// the daemon's one worker until a writer comes.
pub fn open_to_read(path: &Path) -> std::io::Result<std::fs::File> {
    if std::env::var_os(crate::linkenv::BACKGROUND_MARK).is_none() {
        return std::fs::File::open(path);
    }
    use std::os::unix::fs::OpenOptionsExt;
    let f = (std::fs::OpenOptions::new().read(true))
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    match f.metadata()?.is_file() {
        true => Ok(f),
        false => Err(std::io::Error::other(
            "not a regular file (a background build)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_named_twice_is_mapped_once() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.cubin");
        std::fs::write(&p, b"device code").unwrap();
        let other = d.path().join("b.cubin");
        std::fs::hard_link(&p, &other).unwrap();
        let o = Opened::default();
        let a = o.open(&p, "a.cubin").unwrap();
        let b = o.open(&other, "b.cubin").unwrap();
        let c = o
            .open(&d.path().join(".").join("a.cubin"), "a.cubin")
            .unwrap();
        assert_eq!(&*a, b"device code");
        // one mapping: the same memory
        assert_eq!(a.as_ptr(), b.as_ptr());
        assert_eq!(a.as_ptr(), c.as_ptr());
        assert_eq!(o.ids(), [file_id(&std::fs::metadata(&p).unwrap())].into());
        let e = o.open(&d.path().join("none"), "none").unwrap_err();
        assert!(e.message().contains("Could not open input file 'none'"));
    }

    /// The attacker's poisoned cache entry (issue 36 review): another process writes the
    /// input through a shared mapping while the link runs (no size or time changes). A
    /// mapping shows the write; the bytes held in memory, which the key hashed and every
    /// later open hands out by either name, do not.
    #[test]
    fn an_input_held_in_memory_does_not_see_writes_through_a_shared_mapping() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.cubin");
        std::fs::write(&p, b"add 4").unwrap();
        let other = d.path().join("b.cubin");
        std::fs::hard_link(&p, &other).unwrap();
        let o = Opened::default();
        let mapped = o.open(&other, "b.cubin").unwrap();
        let held = o.open_in_memory(&p, "a.cubin").unwrap();
        assert!(held.is_in_memory() && !mapped.is_in_memory());
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&p)
            .unwrap();
        // SAFETY: a mapping of a file only this test uses
        let mut writer = unsafe { memmap2::MmapMut::map_mut(&f) }.unwrap();
        writer[4] = b'5';
        assert_eq!(
            &*mapped, b"add 5",
            "a mapping sees the other process's write"
        );
        assert_eq!(&*held, b"add 4");
        for (path, shown) in [(&p, "a.cubin"), (&other, "b.cubin")] {
            assert_eq!(&*o.open(path, shown).unwrap(), b"add 4", "{shown}");
        }
    }

    /// An input another process cuts short after the key read it (`cp` over an object a
    /// parallel build rewrites): read into memory, not mapped, it stays readable. (Mapped,
    /// its pages past the new end are a SIGBUS: `sigbus`, `tests/hostile.rs`.)
    #[test]
    fn an_input_held_in_memory_stays_readable_when_cut_short() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.o");
        std::fs::write(&p, vec![7u8; 1 << 20]).unwrap();
        let o = Opened::default();
        let b = o.open_in_memory(&p, "a.o").unwrap();
        assert!(b.is_in_memory());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(0)
            .unwrap();
        assert_eq!(b.iter().map(|&x| x as u64).sum::<u64>(), 7 << 20);
        assert_eq!(o.open(&p, "a.o").unwrap().len(), 1 << 20);
    }

    /// A character device is empty, as nvlink reads it (`/dev/zero` was read to the end
    /// of memory).
    #[test]
    fn a_device_input_is_empty() {
        let o = Opened::default();
        assert!(
            o.open(Path::new("/dev/zero"), "/dev/zero")
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_fifo_input_is_read_to_its_end() {
        // (its metadata says length 0: it was taken for an empty file)
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.cubin");
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let writer = {
            let p = p.clone();
            std::thread::spawn(move || std::fs::write(p, b"device code from a pipe").unwrap())
        };
        let o = Opened::default();
        let b = o.open(&p, "x.cubin").unwrap();
        writer.join().unwrap();
        assert_eq!(&*b, b"device code from a pipe");
    }

    #[test]
    fn a_thin_archive_naming_one_file_many_times_maps_it_once() {
        // (one mapping per member passed the system's limit of 65,530: "Cannot allocate
        // memory")
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("m.ptx"), ".version 8.0\n.target sm_90\n").unwrap();
        let len = std::fs::metadata(d.path().join("m.ptx")).unwrap().len();
        let mut ar = b"!<thin>\n".to_vec();
        for _ in 0..100_000 {
            let h = format!(
                "{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
                "m.ptx/", 0, 0, 0, 644, len
            );
            ar.extend_from_slice(h.as_bytes());
        }
        let path = d.path().join("libthin.a");
        std::fs::write(&path, ar).unwrap();
        let trees = crate::input::load(&[path], crate::input::Mode::Inspect).unwrap();
        let codes = trees[0].codes();
        assert_eq!(codes.len(), 100_000);
        assert!(
            codes
                .iter()
                .all(|(_, c)| c.kind == crate::input::CodeKind::Ptx)
        );
    }
}
