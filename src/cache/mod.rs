//! The content-addressed cache: results of the expensive stages (the whole link, the
//! LTO engine's PTX for a module set and options, ptxas's cubin for a PTX text, large
//! compressed members once extracted), stored
//! under a key that hashes everything that decides them:
//!
//! * [`CACHE_VERSION`] (the format of keys and entries; bumped when either changes),
//! * the stage,
//! * the identities of the tools involved (nvlinkrs itself, libNVVM, ptxas, the LLVM
//!   helper: their file contents, hashed once per file version and remembered),
//! * the normalized options,
//! * the content of every input.
//!
//! Entries are files under `objects/`, written to a temporary name and renamed (a crash
//! leaves no half entry), each with a header holding its length and the BLAKE3 hash of
//! its content; every read checks both, and a corrupt entry counts as a miss and is
//! removed. Reads touch an entry's modification time; when the cache grows past its cap
//! the least recently used entries go. The directory is created private to its user
//! (0700) and a cache directory other users can write to is refused.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::diag::{Error, Result};

/// The version of the key derivation and entry format. Every key includes it.
pub const CACHE_VERSION: u32 = 1;

/// The default size cap: 2 GiB.
pub const DEFAULT_CAP: u64 = 2 << 30;

const MAGIC: &[u8; 8] = b"NVLRSC\x00\x01";
const HEADER: usize = 8 + 8 + 32;

/// A cache key under construction: every part is length-prefixed, so that no two
/// different sequences of parts hash alike.
#[derive(Clone)]
pub struct Key(blake3::Hasher, String);

impl Key {
    /// A key for `stage`, starting with the cache version.
    pub fn new(stage: &str) -> Key {
        Key::versioned(CACHE_VERSION, stage)
    }

    fn versioned(version: u32, stage: &str) -> Key {
        Key(blake3::Hasher::new(), stage.to_string())
            .bytes(&version.to_le_bytes())
            .text(stage)
    }

    pub fn bytes(mut self, part: &[u8]) -> Key {
        self.0.update(&(part.len() as u64).to_le_bytes());
        self.0.update(part);
        self
    }

    pub fn text(self, part: &str) -> Key {
        self.bytes(part.as_bytes())
    }

    /// The hex digest that names the entry.
    pub fn finish(&self) -> String {
        self.0.finalize().to_hex().to_string()
    }
}

/// The cache of the link running in this process, for the stage the input readers reach
/// (extracted members, deep inside parsing where no cache is passed); set by
/// [`crate::link`] for the link's duration.
static CURRENT: std::sync::RwLock<Option<std::sync::Arc<Cache>>> = std::sync::RwLock::new(None);

/// The running link's cache, if it has one.
pub fn current() -> Option<std::sync::Arc<Cache>> {
    CURRENT.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Makes `cache` the running link's cache until the guard is dropped.
pub fn set_current(cache: &std::sync::Arc<Cache>) -> CurrentGuard {
    *CURRENT.write().unwrap_or_else(|e| e.into_inner()) = Some(std::sync::Arc::clone(cache));
    CurrentGuard(())
}

/// Clears the running link's cache when dropped.
pub struct CurrentGuard(());

impl Drop for CurrentGuard {
    fn drop(&mut self) {
        *CURRENT.write().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// An open cache directory.
pub struct Cache {
    dir: PathBuf,
    cap: u64,
    /// Hits and misses per stage, for the report.
    by_stage: std::sync::Mutex<std::collections::BTreeMap<String, (u64, u64)>>,
}

/// What `nvlinkrs cache stats` prints.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub entries: u64,
    pub bytes: u64,
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::fatal(format!("cache: cannot {what} '{}': {e}", path.display()))
}

impl Cache {
    /// Opens (creating it, mode 0700) the cache at `dir`, capped at `cap` bytes.
    pub fn open(dir: &Path, cap: u64) -> Result<Cache> {
        let objects = dir.join("objects");
        fs::create_dir_all(&objects).map_err(|e| io_error("create", &objects, e))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::{MetadataExt, PermissionsExt};
            for d in [dir, objects.as_path(), &dir.join("tools")] {
                let _ = fs::create_dir_all(d);
                let meta = fs::metadata(d).map_err(|e| io_error("read", d, e))?;
                // SAFETY: geteuid has no preconditions and cannot fail.
                let me = unsafe { libc::geteuid() };
                if meta.uid() != me {
                    return Err(Error::fatal(format!(
                        "cache: '{}' belongs to another user; refusing to use it",
                        d.display()
                    )));
                }
                if meta.mode() & 0o077 != 0 {
                    fs::set_permissions(d, fs::Permissions::from_mode(0o700))
                        .map_err(|e| io_error("make private", d, e))?;
                }
            }
        }
        Ok(Cache {
            dir: dir.to_path_buf(),
            cap,
            by_stage: Default::default(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join("objects").join(&key[..2]).join(&key[2..])
    }

    /// The entry for `key`, if present and intact (a corrupt one is removed).
    pub fn get(&self, key: &Key) -> Option<Vec<u8>> {
        let path = self.path(&key.finish());
        let found = fs::read(&path).ok().and_then(|data| match check(&data) {
            Some(()) => Some(data[HEADER..].to_vec()),
            None => {
                let _ = fs::remove_file(&path);
                None
            }
        });
        {
            let mut by = self.by_stage.lock().unwrap_or_else(|e| e.into_inner());
            let e = by.entry(key.1.clone()).or_default();
            if found.is_some() {
                e.0 += 1;
            } else {
                e.1 += 1;
            }
        }
        if found.is_some() {
            // recently used: the eviction order
            if let Ok(f) = fs::File::options().append(true).open(&path) {
                let _ = f.set_modified(std::time::SystemTime::now());
            }
        }
        found
    }

    /// Stores `data` under `key`: written beside its place and renamed into it.
    pub fn put(&self, key: &Key, data: &[u8]) -> Result<()> {
        let path = self.path(&key.finish());
        let dir = path.parent().expect("objects/xx");
        fs::create_dir_all(dir).map_err(|e| io_error("create", dir, e))?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(dir)
            .map_err(|e| io_error("write in", dir, e))?;
        let mut entry = Vec::with_capacity(HEADER + data.len());
        entry.extend_from_slice(MAGIC);
        entry.extend_from_slice(&(data.len() as u64).to_le_bytes());
        entry.extend_from_slice(blake3::hash(data).as_bytes());
        entry.extend_from_slice(data);
        tmp.write_all(&entry)
            .map_err(|e| io_error("write", tmp.path(), e))?;
        tmp.persist(&path)
            .map_err(|e| io_error("store", &path, e.error))?;
        self.evict()
    }

    /// Every entry file with its size and last use.
    fn entries(&self) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
        let mut out = Vec::new();
        let Ok(fan) = fs::read_dir(self.dir.join("objects")) else {
            return out;
        };
        for d in fan.flatten() {
            let Ok(files) = fs::read_dir(d.path()) else {
                continue;
            };
            for f in files.flatten() {
                if f.file_name().to_string_lossy().starts_with(".tmp-") {
                    continue;
                }
                if let Ok(m) = f.metadata() {
                    let used = m.modified().unwrap_or(std::time::UNIX_EPOCH);
                    out.push((f.path(), m.len(), used));
                }
            }
        }
        out
    }

    /// Removes the least recently used entries until the cache is within its cap.
    fn evict(&self) -> Result<()> {
        let mut entries = self.entries();
        let mut total: u64 = entries.iter().map(|e| e.1).sum();
        if total <= self.cap {
            return Ok(());
        }
        entries.sort_by_key(|e| (e.2, e.0.clone()));
        for (path, size, _) in entries {
            if total <= self.cap {
                break;
            }
            if fs::remove_file(&path).is_ok() {
                total -= size;
            }
        }
        Ok(())
    }

    /// Hits and misses over all stages.
    pub fn totals(&self) -> (u64, u64) {
        self.counts()
            .iter()
            .fold((0, 0), |(h, m), (_, sh, sm)| (h + sh, m + sm))
    }

    /// (stage, hits, misses) for every stage looked up so far.
    pub fn counts(&self) -> Vec<(String, u64, u64)> {
        let by = self.by_stage.lock().unwrap_or_else(|e| e.into_inner());
        by.iter().map(|(k, (h, m))| (k.clone(), *h, *m)).collect()
    }

    pub fn stats(&self) -> Stats {
        let entries = self.entries();
        Stats {
            entries: entries.len() as u64,
            bytes: entries.iter().map(|e| e.1).sum(),
        }
    }

    /// The entries that fail their check (left in place; `get` removes them).
    pub fn verify(&self) -> Vec<PathBuf> {
        self.entries()
            .into_iter()
            .filter(|(p, _, _)| fs::read(p).ok().and_then(|d| check(&d)).is_none())
            .map(|(p, _, _)| p)
            .collect()
    }

    /// Removes every entry and remembered tool identity.
    pub fn clear(&self) -> Result<()> {
        for sub in ["objects", "tools"] {
            let d = self.dir.join(sub);
            if d.exists() {
                fs::remove_dir_all(&d).map_err(|e| io_error("clear", &d, e))?;
            }
            fs::create_dir_all(&d).map_err(|e| io_error("create", &d, e))?;
        }
        Ok(())
    }

    /// The identity of a tool file: the hash of its content, remembered per file version
    /// (path, size, modification time, inode) so that a 40 MB libNVVM is hashed once.
    pub fn tool_id(&self, path: &Path) -> Result<String> {
        let meta = fs::metadata(path).map_err(|e| io_error("read", path, e))?;
        let mut version = Key::new("tool-version")
            .text(&path.display().to_string())
            .bytes(&meta.len().to_le_bytes());
        if let Ok(t) = meta.modified()
            && let Ok(d) = t.duration_since(std::time::UNIX_EPOCH)
        {
            version = version.bytes(&d.as_nanos().to_le_bytes());
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            version = version.bytes(&meta.ino().to_le_bytes());
        }
        let memo = self.dir.join("tools").join(version.finish());
        if let Ok(id) = fs::read_to_string(&memo)
            && id.len() == 64
        {
            return Ok(id);
        }
        let data = fs::read(path).map_err(|e| io_error("read", path, e))?;
        let id = blake3::hash(&data).to_hex().to_string();
        let _ = fs::create_dir_all(self.dir.join("tools"));
        if let Ok(mut tmp) = tempfile::NamedTempFile::new_in(self.dir.join("tools")) {
            let _ = tmp.write_all(id.as_bytes());
            let _ = tmp.persist(&memo);
        }
        Ok(id)
    }
}

/// Checks an entry's header against its content.
fn check(data: &[u8]) -> Option<()> {
    let header = data.get(..HEADER)?;
    if &header[..8] != MAGIC {
        return None;
    }
    let len = u64::from_le_bytes(header[8..16].try_into().ok()?);
    let body = &data[HEADER..];
    if body.len() as u64 != len || blake3::hash(body).as_bytes() != &header[16..48] {
        return None;
    }
    Some(())
}

/// Several byte strings in one entry (and back), each length-prefixed; lengths are
/// checked against what is left.
pub fn pack(parts: &[&[u8]]) -> Vec<u8> {
    crate::frames::encode(parts.iter().map(|p| ("", *p)))
}

pub fn unpack(data: &[u8]) -> Option<Vec<Vec<u8>>> {
    crate::frames::decode(data)
        .ok()
        .map(|v| v.into_iter().map(|(_, d)| d.to_vec()).collect())
}

#[cfg(test)]
mod tests;
