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
//! leaves no half entry), each with a header holding its length, its key and the BLAKE3
//! hash of its content; every read checks all three (an entry of another key copied into
//! place is no hit), and a corrupt entry counts as a miss and is removed. Reads touch an
//! entry's modification time; when the cache has grown past its cap the least recently
//! used entries go, counted once a link is done with it and at most every ten minutes
//! ([`trim`]). A store that fails is noted, never an error of the link. What the cache
//! accepts as its directory and how it reads entries is in [`guard`]. Behind it there may
//! be a shared tier ([`remote`]): a local miss asks it, a shared entry that passes the
//! same check is copied in, and every store goes there too.

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::diag::{Error, Result};

mod backend;
mod dirstore;
pub(crate) mod guard;
pub mod place;
mod records;
pub mod remote;
pub mod stats;
mod store;
pub mod tally;
mod trim;
pub use guard::MARKER;
/// Why a directory is not to be trusted (the daemon checks its socket's directory so too).
pub(crate) use guard::unsafe_dir;

/// The version of the key derivation and entry format. Every key includes it.
pub const CACHE_VERSION: u32 = 4;

/// The default size cap: 2 GiB.
pub const DEFAULT_CAP: u64 = 2 << 30;

const MAGIC: &[u8; 8] = b"NVLRSC\x00\x03";
/// Magic, content length, key digest, content hash, and the microseconds the entry took
/// to make (what a hit saves: `nvlinkrs stats`).
const HEADER: usize = 8 + 8 + 32 + 32 + 8;

/// A cache key under construction: every part is length-prefixed, so that no two
/// different sequences of parts hash alike. It counts the bytes of its parts (the inputs'
/// contents, mostly), which bound how large a shared entry of its stage is read. Named
/// parts ([`Key::part`]) are hashed on their own first and their digests kept, so that
/// `--explain` can say which of a missed lookup's inputs was new.
#[derive(Clone)]
pub struct Key {
    hasher: blake3::Hasher,
    stage: String,
    bytes: u64,
    /// The named parts: label and the first 8 bytes of the part's digest.
    parts: Vec<(String, u64)>,
    /// What the lookup is for (`ptxas 'b.o'`), for the trace and `--explain`.
    about: String,
}

impl Key {
    /// A key for `stage`, starting with the cache version.
    pub fn new(stage: &str) -> Key {
        Key::versioned(CACHE_VERSION, stage)
    }

    fn versioned(version: u32, stage: &str) -> Key {
        Key {
            hasher: blake3::Hasher::new(),
            stage: stage.to_string(),
            bytes: 0,
            parts: Vec::new(),
            about: String::new(),
        }
        .bytes(&version.to_le_bytes())
        .text(stage)
    }

    pub fn bytes(mut self, part: &[u8]) -> Key {
        self.hasher.update(&(part.len() as u64).to_le_bytes());
        self.hasher.update(part);
        self.bytes = self.bytes.saturating_add(part.len() as u64);
        self
    }

    pub fn text(self, part: &str) -> Key {
        self.bytes(part.as_bytes())
    }

    /// A part named `label` (`PTX`, `options`, `module 'b.o'`): its digest goes into
    /// the key, and is kept for `--explain`.
    pub fn part(mut self, label: impl Into<String>, part: &[u8]) -> Key {
        let digest = blake3::hash(part);
        let d = digest.as_bytes();
        self.parts.push((
            label.into(),
            u64::from_le_bytes(d[..8].try_into().expect("8 bytes")),
        ));
        self.hasher.update(&(d.len() as u64).to_le_bytes());
        self.hasher.update(d);
        self.bytes = self.bytes.saturating_add(part.len() as u64);
        self
    }

    /// Says what the lookup is for (the trace's and `--explain`'s name for it).
    pub fn about(mut self, what: impl Into<String>) -> Key {
        self.about = what.into();
        self
    }

    /// The stage the key is of.
    pub fn stage(&self) -> &str {
        &self.stage
    }

    /// The hex digest that names the entry.
    pub fn finish(&self) -> String {
        self.hasher.finalize().to_hex().to_string()
    }

    /// The digest's bytes, which an entry's header repeats.
    fn digest(&self) -> [u8; 32] {
        *self.hasher.finalize().as_bytes()
    }
}

/// An open cache directory.
pub struct Cache {
    dir: PathBuf,
    cap: u64,
    /// What this process's lookups and stores did, for the report, `nvlinkrs stats` and
    /// `--explain`.
    tally: std::sync::Mutex<tally::Tally>,
    /// The tally went to the stats file ([`Cache::record_link`]); else a drop sends it.
    recorded: std::sync::atomic::AtomicBool,
    /// The first store that failed (the link goes on; it warns once at its end).
    store_failure: std::sync::Mutex<Option<String>>,
    /// Something was stored: the cache is brought within its cap when dropped.
    stored: std::sync::atomic::AtomicBool,
    /// The shared tier behind this cache, if one was named.
    remote: Option<remote::Remote>,
    /// Each tool answer being found or found by this process, by its memo's path: the
    /// first thread to ask computes it, the others wait for it (the whole-link key hashes
    /// the tools beside the link's phases, which ask for some of them too); an answer
    /// that failed is asked again.
    tool_answers: std::sync::Mutex<HashMap<PathBuf, ToolAnswer>>,
}

/// One tool answer, once found ([`Cache::per_tool_version`]).
type ToolAnswer = std::sync::Arc<std::sync::Mutex<Option<String>>>;

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache").field("dir", &self.dir).finish()
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        if let Some(r) = &self.remote {
            r.save_counters(&self.dir);
        }
        // (a process that is no link, the LLVM helper: its stages' counts only)
        if !*self.recorded.get_mut() {
            let t = self.tally.get_mut().unwrap_or_else(|e| e.into_inner());
            if !t.by_stage.is_empty() {
                let _ = stats::add(&self.dir, &stats::Totals::of_stages(t.by_stage.clone()));
            }
        }
        if *self.stored.get_mut() && trim::due(&self.dir) {
            self.evict();
        }
    }
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
    /// Opens the cache at `dir`, capped at `cap` bytes: created private (0700) when
    /// missing, else refused unless it is safe and a cache (see [`guard::claim_root`]).
    pub fn open(dir: &Path, cap: u64) -> Result<Cache> {
        guard::claim_root(dir)?;
        for sub in ["objects", "tools"] {
            guard::private_subdir(&dir.join(sub))?;
        }
        Ok(Cache {
            dir: dir.to_path_buf(),
            cap,
            tally: Default::default(),
            recorded: Default::default(),
            store_failure: Default::default(),
            stored: Default::default(),
            remote: None,
            tool_answers: Default::default(),
        })
    }

    /// The cache with the shared tier `spec` names behind it (one that cannot be used is
    /// off, its reason kept for [`Cache::remote_warnings`]).
    pub fn with_remote(mut self, spec: Option<&remote::Spec>) -> Cache {
        self.remote = spec.map(remote::Remote::open);
        self
    }

    /// The shared tier, if one was named.
    pub fn remote(&self) -> Option<&remote::Remote> {
        self.remote.as_ref()
    }

    /// The shared tier's warnings for this link: its first failure, and that its entries
    /// are not authenticated (a read-only tier without the team's key that was used).
    pub fn remote_warnings(&self) -> Vec<String> {
        let Some(r) = &self.remote else {
            return Vec::new();
        };
        [r.failure(), r.notice()].into_iter().flatten().collect()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join("objects").join(&key[..2]).join(&key[2..])
    }

    /// The largest entry file read: one larger than the cap would have been evicted.
    fn max_entry(&self) -> u64 {
        self.cap.saturating_add(HEADER as u64)
    }

    /// The length of the entry file of `key` whose first [`HEADER`] bytes are `head`:
    /// `None` when they are no such entry's, or it is larger than a local one may be. The
    /// shared tier stops reading an object there (a server sending garbage, or without
    /// end, costs [`HEADER`] bytes, not the memory it could send within the time limit).
    fn entry_len(&self, head: &[u8], key: &Key) -> Option<u64> {
        let head = head.get(..HEADER)?;
        let len = u64::from_le_bytes(head[8..16].try_into().expect("8 bytes"));
        let total = len.checked_add(HEADER as u64)?;
        (&head[..8] == MAGIC && head[16..48] == key.digest() && total <= self.max_entry())
            .then_some(total)
    }

    /// The largest shared entry read for `key`: 64 times the bytes its key was made of (256
    /// for an extracted member, which decompression enlarges), plus 64 MiB, and no more
    /// than a local entry. A forged header declaring 2 GiB costs nothing: it is refused
    /// before its body is read. (A real entry larger than that is only a local hit.)
    fn shared_cap(&self, key: &Key) -> u64 {
        let factor = if key.stage == "member" { 256 } else { 64 };
        key.bytes
            .saturating_mul(factor)
            .saturating_add(64 << 20)
            .min(self.max_entry())
    }

    /// The entry for `key`, if present and intact (a corrupt one is removed).
    pub fn get(&self, key: &Key) -> Option<Vec<u8>> {
        let started = std::time::Instant::now();
        let _span = crate::trace::span_with("cache", || format!("cache lookup {}", key.stage));
        let hex = key.finish();
        let path = self.path(&hex);
        let mut found = match guard::open_regular(&path, self.max_entry()) {
            Ok((file, data)) if check(&data, &key.digest()) => {
                // recently used: the eviction order
                let _ = file.set_modified(std::time::SystemTime::now());
                Some((tally::Found::Local, data))
            }
            Ok(_) | Err(guard::Unreadable::Bad) => {
                let _ = fs::remove_file(&path);
                None
            }
            Err(guard::Unreadable::Missing) => None,
        };
        // the shared tier: its entry checked as a local one, then copied in
        if found.is_none()
            && let Some(r) = &self.remote
            && let Some(entry) = r.get(&hex, &|head| {
                self.entry_len(head, key)
                    .filter(|&n| n <= self.shared_cap(key))
            })
        {
            let intact = entry.len() as u64 <= self.shared_cap(key) && check(&entry, &key.digest());
            r.checked(intact);
            if intact {
                if let Err(e) = self.write_entry(&path, &entry) {
                    let mut first = self.store_failure.lock().unwrap_or_else(|e| e.into_inner());
                    first.get_or_insert_with(|| e.to_string());
                }
                found = Some((tally::Found::Shared, entry));
            }
        }
        let counted = found
            .as_ref()
            .map(|(from, data)| (*from, data.len() as u64, cold_time(data)));
        self.tally().lookup(key, counted, started.elapsed());
        crate::trace::arg("stage", || key.stage.clone().into());
        if !key.about.is_empty() {
            crate::trace::arg("for", || key.about.clone().into());
        }
        crate::trace::arg("key", || hex[..16].into());
        crate::trace::arg("result", || match &found {
            Some((tally::Found::Local, _)) => "hit (local)".into(),
            Some((tally::Found::Shared, _)) => "hit (shared)".into(),
            None => "miss".into(),
        });
        if let Some((_, data)) = &found {
            crate::trace::arg("bytes", || data.len().into());
            crate::trace::arg("cold_ms", || {
                (cold_time(data).as_secs_f64() * 1000.0).into()
            });
        }
        found.map(|(_, mut data)| {
            data.drain(..HEADER);
            data
        })
    }

    fn tally(&self) -> std::sync::MutexGuard<'_, tally::Tally> {
        self.tally.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores `data` under `key`, best effort: a failure (a full disk, something else at
    /// the entry's place) is remembered for [`Cache::store_failure`] and the link goes on.
    /// `cold`: what making `data` took (what a hit on it saves).
    pub fn put(&self, key: &Key, data: &[u8], cold: std::time::Duration) {
        if let Err(e) = self.try_put(key, data, cold) {
            let mut first = self.store_failure.lock().unwrap_or_else(|e| e.into_inner());
            first.get_or_insert_with(|| e.to_string());
        }
    }

    /// The first failed store's message, if any.
    pub fn store_failure(&self) -> Option<String> {
        self.store_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Stores `data` under `key`: written beside its place and renamed into it, and
    /// handed to the shared tier (in read-write mode) even when the local store fails.
    pub fn try_put(&self, key: &Key, data: &[u8], cold: std::time::Duration) -> Result<()> {
        let _span = crate::trace::span_with("cache", || format!("cache store {}", key.stage));
        let hex = key.finish();
        let mut entry = Vec::with_capacity(HEADER + data.len());
        entry.extend_from_slice(MAGIC);
        entry.extend_from_slice(&(data.len() as u64).to_le_bytes());
        entry.extend_from_slice(&key.digest());
        entry.extend_from_slice(blake3::hash(data).as_bytes());
        entry.extend_from_slice(&(cold.as_micros() as u64).to_le_bytes());
        entry.extend_from_slice(data);
        crate::trace::arg("stage", || key.stage.clone().into());
        crate::trace::arg("key", || hex[..16].into());
        crate::trace::arg("bytes", || entry.len().into());
        self.tally().store(&key.stage, entry.len() as u64);
        let local = self.write_entry(&self.path(&hex), &entry);
        if let Some(r) = &self.remote {
            r.put(&hex, &entry);
        }
        local
    }

    /// Writes a whole entry file (header and content) at `path`, through a temporary file.
    fn write_entry(&self, path: &Path, entry: &[u8]) -> Result<()> {
        let dir = path.parent().expect("objects/xx");
        guard::private_subdir(dir)?;
        let mut tmp = tempfile::Builder::new()
            .prefix(guard::TMP_PREFIX)
            .tempfile_in(dir)
            .map_err(|e| io_error("write in", dir, e))?;
        tmp.write_all(entry)
            .map_err(|e| io_error("write", tmp.path(), e))?;
        tmp.persist(path)
            .map_err(|e| io_error("store", path, e.error))?;
        self.stored
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Every entry file (by its name: nothing else under `objects/` is the cache's) with
    /// its size and last use; not followed when a link.
    fn entries(&self) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
        let mut out = Vec::new();
        for d in self.fans() {
            let Ok(files) = fs::read_dir(&d) else {
                continue;
            };
            for f in files.flatten() {
                if !f.file_name().to_str().is_some_and(guard::is_entry_name) {
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

    /// The fan-out directories under `objects/` (by name, real directories only).
    fn fans(&self) -> Vec<PathBuf> {
        let Ok(fan) = fs::read_dir(self.dir.join("objects")) else {
            return Vec::new();
        };
        fan.flatten()
            .filter(|d| d.file_name().to_str().is_some_and(guard::is_fan_name))
            .filter(|d| d.file_type().is_ok_and(|t| t.is_dir()))
            .map(|d| d.path())
            .collect()
    }

    /// Removes the least recently used entries until the cache is within its cap.
    fn evict(&self) {
        let mut entries = self.entries();
        let mut total: u64 = entries.iter().map(|e| e.1).sum();
        if total <= self.cap {
            return;
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
    }

    /// Hits and misses over all stages.
    pub fn totals(&self) -> (u64, u64) {
        self.counts()
            .iter()
            .fold((0, 0), |(h, m), (_, sh, sm)| (h + sh, m + sm))
    }

    /// (stage, hits, misses) for every stage looked up so far.
    pub fn counts(&self) -> Vec<(String, u64, u64)> {
        let t = self.tally();
        t.by_stage
            .iter()
            .filter(|(_, c)| c.hits() + c.misses > 0)
            .map(|(k, c)| (k.clone(), c.hits(), c.misses))
            .collect()
    }

    /// Every stage's counts so far (lookups and stores).
    pub fn stage_counts(&self) -> std::collections::BTreeMap<String, tally::StageCounts> {
        self.tally().by_stage.clone()
    }

    /// The digests of the named parts looked up so far, and the lookups that missed (for
    /// `--explain`).
    pub fn seen_and_missed(&self) -> (tally::Seen, Vec<tally::Missed>) {
        let t = self.tally();
        (t.seen.clone(), t.missed.clone())
    }

    /// Adds this link (`link`: what it was) and its stages' counts to the cache's
    /// counters ([`stats`]), once; best effort.
    pub fn record_link(&self, link: stats::LinkFacts) {
        if self
            .recorded
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        let stages = self.stage_counts();
        let _ = stats::add(&self.dir, &stats::Totals::of_link(&link, stages));
    }

    pub fn stats(&self) -> Stats {
        let entries = self.entries();
        Stats {
            entries: entries.len() as u64,
            bytes: entries.iter().map(|e| e.1).sum(),
        }
    }

    /// The entries that fail their check, their key (from their name) included; left in
    /// place (`get` removes them). Never blocks on, or follows, a planted file.
    pub fn verify(&self) -> Vec<PathBuf> {
        self.entries()
            .into_iter()
            .map(|(p, _, _)| p)
            .filter(|p| {
                let digest = p
                    .parent()
                    .and_then(Path::file_name)
                    .zip(p.file_name())
                    .and_then(|(fan, rest)| {
                        guard::digest_bytes(&format!("{}{}", fan.to_str()?, rest.to_str()?))
                    });
                let intact = digest.is_some_and(|k| {
                    guard::read_regular(p, self.max_entry())
                        .ok()
                        .flatten()
                        .is_some_and(|d| check(&d, &k))
                });
                !intact
            })
            .collect()
    }

    /// Removes every entry, remembered tool identity, the counters (the links' and the
    /// shared tier's) and the links' `--explain` records: the files the cache names itself
    /// (and its temporary files), and the fan-out directories left empty. Anything else
    /// in the directory stays.
    pub fn clear(&self) -> Result<()> {
        let own = |dir: &Path, is_own: fn(&str) -> bool| -> Result<()> {
            // (a folder of the cache that is a symbolic link is not followed: `explain`
            // pointing elsewhere had its records' names deleted there, attacker review)
            if !fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
                return Ok(());
            }
            let Ok(list) = fs::read_dir(dir) else {
                return Ok(());
            };
            for f in list.flatten() {
                let name = f.file_name();
                let name = name.to_str().unwrap_or_default();
                if (is_own(name) || name.starts_with(guard::TMP_PREFIX))
                    && f.file_type().is_ok_and(|t| !t.is_dir())
                {
                    fs::remove_file(f.path()).map_err(|e| io_error("clear", &f.path(), e))?;
                }
            }
            Ok(())
        };
        for d in self.fans() {
            own(&d, guard::is_entry_name)?;
            let _ = fs::remove_dir(&d); // only when empty
        }
        own(&self.dir.join("tools"), guard::is_tool_name)?;
        own(&self.records_dir(), records::is_record_name)?;
        // the counters (the links' and the shared tier's) start again from nothing
        for f in [remote::STATS, stats::FILE] {
            match fs::remove_file(self.dir.join(f)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(io_error("clear", &self.dir.join(f), e));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The identity of a tool file: the hash of its content, remembered per file version
    /// (path, size, modification and change times, device and inode) so that a 40 MB
    /// libNVVM is hashed once. The change time is the kernel's (no call sets it), so a
    /// tool rewritten in place with its size and modification time restored is another
    /// version.
    pub fn tool_id(&self, path: &Path) -> Result<String> {
        self.tool_id_opened(path).map(|(id, _)| id)
    }

    /// [`Cache::tool_id`], with the metadata of the file it is the identity of: the file is
    /// opened once, its version read from the open file and its bytes hashed from it (a
    /// name switched to another file between a look and a read cannot give one file's
    /// version another's hash).
    pub fn tool_id_opened(&self, path: &Path) -> Result<(String, fs::Metadata)> {
        let file = fs::File::open(path).map_err(|e| io_error("read", path, e))?;
        let meta = file.metadata().map_err(|e| io_error("read", path, e))?;
        let memo = self.tool_memo_of("tool-version", path, &meta);
        let id = self.answer(memo, guard::is_tool_name, || {
            // (hashed on every core of the pool it runs on: a link's tools are 200-400 MB,
            // nvlinkrs, ptxas, libNVVM and libnvJitLink, hashed once per cache)
            let mut h = blake3::Hasher::new();
            if meta.len() > 0 {
                // SAFETY: a read-only map of a tool file; another process writing it
                // meanwhile changes its change time, which the link's stamps see
                let map =
                    unsafe { memmap2::Mmap::map(&file) }.map_err(|e| io_error("read", path, e))?;
                h.update_rayon(&map);
            }
            Ok(h.finalize().to_hex().to_string())
        })?;
        Ok((id, meta))
    }

    /// The version line ptxas at `path` prints (`ptxas --version`'s "Cuda compilation
    /// tools, ..."), remembered per file version as [`Cache::tool_id`] is; `None` where it
    /// prints none.
    pub fn ptxas_version(&self, path: &Path) -> Option<String> {
        let valid = |v: &str| v.starts_with("Cuda compilation tools") && v.len() <= 200;
        let ask = || {
            crate::toolkit::ptxas_version_of(path)
                .ok_or_else(|| crate::diag::Error::fatal("no version".to_string()))
        };
        self.per_tool_version("ptxas-version-line", path, valid, ask)
            .ok()
    }

    /// `compute`'s answer for the file at `path`, remembered (under `tools/`, as `what`)
    /// per file version: path, size, modification time, inode. A remembered answer that
    /// is not `valid` is computed again.
    fn per_tool_version(
        &self,
        what: &str,
        path: &Path,
        valid: impl Fn(&str) -> bool,
        compute: impl FnOnce() -> Result<String>,
    ) -> Result<String> {
        let memo = self.tool_memo(what, path)?;
        self.answer(memo, valid, compute)
    }

    /// The answer remembered at `memo`, found once per process.
    fn answer(
        &self,
        memo: PathBuf,
        valid: impl Fn(&str) -> bool,
        compute: impl FnOnce() -> Result<String>,
    ) -> Result<String> {
        let answer = self.answer_slot(&memo);
        let mut found = answer.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(id) = found.as_ref() {
            return Ok(id.clone());
        }
        let id = match remembered_file(&memo, valid) {
            Some(id) => id,
            None => {
                let id = compute()?;
                if let Ok(mut tmp) = tempfile::Builder::new()
                    .prefix(guard::TMP_PREFIX)
                    .tempfile_in(self.dir.join("tools"))
                {
                    let _ = tmp.write_all(id.as_bytes());
                    let _ = tmp.persist(&memo);
                }
                id
            }
        };
        *found = Some(id.clone());
        Ok(id)
    }

    /// This process's answer for `memo`, found or being found.
    fn answer_slot(&self, memo: &Path) -> ToolAnswer {
        let mut answers = self.tool_answers.lock().unwrap_or_else(|e| e.into_inner());
        std::sync::Arc::clone(answers.entry(memo.to_path_buf()).or_default())
    }

    /// Whether a tool's identity found now can be remembered (the cache takes a file
    /// under `tools/`): a cache that cannot (read-only) would find every tool unknown on
    /// every link.
    pub fn can_remember_tools(&self) -> bool {
        tempfile::Builder::new()
            .prefix(guard::TMP_PREFIX)
            .tempfile_in(self.dir.join("tools"))
            .is_ok()
    }

    /// Whether the identity of the tool at `path` ([`Cache::tool_id`]) is remembered for
    /// its present version, so that asking for it hashes nothing (what is read is kept
    /// for the asking: the memo is read once).
    pub fn tool_id_remembered(&self, path: &Path) -> bool {
        let Ok(memo) = self.tool_memo("tool-version", path) else {
            return false;
        };
        let answer = self.answer_slot(&memo);
        // (another thread finding it now: not remembered yet)
        let Ok(mut found) = answer.try_lock() else {
            return false;
        };
        if found.is_none() {
            *found = remembered_file(&memo, guard::is_tool_name);
        }
        found.is_some()
    }

    /// Where `what` is remembered for the present version of the file at `path`.
    fn tool_memo(&self, what: &str, path: &Path) -> Result<PathBuf> {
        let meta = fs::metadata(path).map_err(|e| io_error("read", path, e))?;
        Ok(self.tool_memo_of(what, path, &meta))
    }

    /// Where `what` is remembered for the version `meta` of the file at `path`.
    fn tool_memo_of(&self, what: &str, path: &Path, meta: &fs::Metadata) -> PathBuf {
        let mut version = Key::new(what)
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
            version = version
                .bytes(&meta.ino().to_le_bytes())
                .bytes(&meta.dev().to_le_bytes())
                .bytes(&meta.ctime().to_le_bytes())
                .bytes(&meta.ctime_nsec().to_le_bytes());
        }
        self.dir.join("tools").join(version.finish())
    }
}

/// The answer remembered on disk at `memo`, if `valid`.
fn remembered_file(memo: &Path, valid: impl Fn(&str) -> bool) -> Option<String> {
    let id = String::from_utf8(guard::read_regular(memo, 256).ok()??).ok()?;
    valid(&id).then_some(id)
}

/// What the entry `data` (header and content) took to make, as its header says.
fn cold_time(data: &[u8]) -> std::time::Duration {
    let us = data
        .get(80..88)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
    // (outside the content's digest: a day at most, whatever a damaged header says)
    std::time::Duration::from_micros(us.min(86_400_000_000))
}

/// Checks an entry's header against its key and its content.
fn check(data: &[u8], key: &[u8; 32]) -> bool {
    let Some(header) = data.get(..HEADER) else {
        return false;
    };
    let len = u64::from_le_bytes(header[8..16].try_into().expect("8 bytes"));
    let body = &data[HEADER..];
    &header[..8] == MAGIC
        && body.len() as u64 == len
        && &header[16..48] == key
        && blake3::hash(body).as_bytes() == &header[48..80]
}

/// Reads `data` as the entry of `key` would be read (header, key and content checked):
/// the content when it passes. For the fuzz target, which drives the reader with hostile
/// entries.
pub fn check_entry(data: &[u8], key: &Key) -> Option<Vec<u8>> {
    check(data, &key.digest()).then(|| data[HEADER..].to_vec())
}

/// Whether `text`, messages an entry holds to be printed again, is plain text: UTF-8
/// without control characters but newlines and tabs (no terminal escapes, no carriage
/// returns rewriting a line). An entry with other text is no hit.
pub fn plain_text(text: &[u8]) -> bool {
    std::str::from_utf8(text)
        .is_ok_and(|t| !t.chars().any(|c| c.is_control() && c != '\n' && c != '\t'))
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
