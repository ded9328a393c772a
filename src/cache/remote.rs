//! The shared cache tier: a store several machines reach (Redis, S3 or an S3-compatible
//! server, WebDAV, memcached, a shared directory), behind the local cache. Set with
//! `--remote-cache URL` or `NVLINKRS_REMOTE_CACHE=URL`; `NVLINKRS_REMOTE_CACHE_MODE`
//! is `read-write` (the default: what a link computes is stored there too) or
//! `read-only` (developers read what CI wrote).
//!
//! It holds the local cache's entry files (the same header: length, key digest, BLAKE3 of
//! the content) under `nvlinkrs/xx/rest`, and every entry read from it is checked against
//! its key exactly as a local one is before it is used and copied into the local cache.
//! That check alone stops damage, not a forger: whoever can write the store can write an
//! entry that passes it. So entries are authenticated with the team's key
//! (`NVLINKRS_REMOTE_CACHE_KEY`, [`KEY_VAR`]): each is stored behind a keyed BLAKE3 MAC of
//! its header, which holds the key digest and the content's hash (and so commits to both),
//! and one whose MAC fails is rejected after its first 120 bytes. Without a key, a
//! read-only tier (developers reading what CI wrote) warns at every link that used one of
//! its entries: such a hit is as sound as every writer of the store. Entries larger than their stage's
//! share ([`super::Cache`]'s `shared_cap`) are not read, nor larger than the store takes
//! (memcached's item limit) written.
//!
//! Every operation has a short time limit, and a read answered slower than [`SLOW`], or more
//! than [`BUDGET`] spent on the tier in all, turns the tier off for the rest of the link
//! as a failure does (a server that does not answer, refuses, or errs); the first becomes
//! one warning at the link's end, and the link goes on with the local cache. This link's
//! hits, misses, errors and bytes are added to a small file in the local cache's root
//! ([`STATS`]) that `nvlinkrs cache stats` prints. The stores themselves are in
//! [`super::store`].

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::diag::{Error, Result};

pub use super::backend::{Backend, redacted};

/// The setting naming the shared tier.
pub const URL_VAR: &str = "NVLINKRS_REMOTE_CACHE";
/// The setting of its mode: `read-write` (default) or `read-only`.
pub const MODE_VAR: &str = "NVLINKRS_REMOTE_CACHE_MODE";
/// The setting holding the team's key (any text; the MAC key is derived from it).
pub const KEY_VAR: &str = "NVLINKRS_REMOTE_CACHE_KEY";
/// A read answered slower than this turns the tier off for the rest of the link.
pub const SLOW: Duration = Duration::from_secs(2);
/// The most time one link (one process) spends on the tier, all operations together.
pub const BUDGET: Duration = Duration::from_secs(10);
/// What an authenticated entry is stored behind: this magic and the MAC.
const MAC_MAGIC: &[u8; 8] = b"NVLRSMAC";
const MAC_LEN: usize = 8 + 32;
/// The file in the local cache's root holding the shared tier's counters.
pub const STATS: &str = super::guard::SHARED_STATS;
/// What a memcached item holds besides the value (its header, key and flags), at most.
const MEMCACHED_ITEM_OVERHEAD: u64 = 1024;

/// The shared tier as the user named it (checked when it is opened).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub url: String,
    /// `NVLINKRS_REMOTE_CACHE_MODE` as given, if it was.
    pub mode: Option<String>,
    /// Given on the command line (a helper process is handed it so too; a setting it
    /// inherits with the environment).
    pub from_flag: bool,
}

impl Spec {
    /// The command line's `--remote-cache`, else `NVLINKRS_REMOTE_CACHE`; none when empty.
    pub fn choose(flag: Option<&str>) -> Option<Spec> {
        let url = match flag {
            Some(u) => u.to_string(),
            None => std::env::var(URL_VAR).ok()?,
        };
        let url = url.trim().to_string();
        (!url.is_empty()).then(|| Spec {
            url,
            mode: std::env::var(MODE_VAR).ok(),
            from_flag: flag.is_some(),
        })
    }
}

/// Where the entry of a key (its hex digest) lives in the store.
pub fn entry_path(hex: &str) -> String {
    format!("nvlinkrs/{}/{}", &hex[..2], &hex[2..])
}

/// What the shared tier did, summed over the links of one local cache.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counters {
    /// Lookups answered by a checked entry.
    pub hits: u64,
    /// Lookups that found nothing.
    pub misses: u64,
    /// Operations that failed (after which a link leaves the tier alone).
    pub errors: u64,
    /// Entries found that failed their check (another key's, damaged): misses too.
    pub rejected: u64,
    /// Entries too large for the store, not written.
    pub skipped: u64,
    pub writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

impl Counters {
    fn add(&mut self, o: &Counters) {
        self.hits += o.hits;
        self.misses += o.misses;
        self.errors += o.errors;
        self.rejected += o.rejected;
        self.skipped += o.skipped;
        self.writes += o.writes;
        self.bytes_read += o.bytes_read;
        self.bytes_written += o.bytes_written;
    }

    fn is_zero(&self) -> bool {
        *self == Counters::default()
    }
}

/// The shared tier of one link (or one helper process of a link).
pub struct Remote {
    spec: Spec,
    /// The URL as shown (no password).
    shown: String,
    read_only: bool,
    max_entry: u64,
    /// The store; `None` when it could not be opened (the failure is then set).
    store: Option<super::store::Store>,
    /// Set after the first failure: nothing more is asked of the store in this link.
    off: AtomicBool,
    failure: Mutex<Option<String>>,
    counts: Mutex<Counters>,
    /// The MAC key derived from [`KEY_VAR`], when it is set.
    mac: Option<[u8; 32]>,
    /// Time spent on the store so far, against [`BUDGET`].
    spent: Mutex<Duration>,
    /// An entry of the tier was used (for the unauthenticated tier's warning).
    used: AtomicBool,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote").field("url", &self.shown).finish()
    }
}

impl Remote {
    /// The tier `spec` names. A URL or mode that cannot be used, or a store that cannot
    /// be set up, gives a tier that is off with its failure noted (one warning at the
    /// link's end), never an error.
    pub fn open(spec: &Spec) -> Remote {
        let shown = redacted(&spec.url);
        let mode = match spec.mode.as_deref().map(str::trim) {
            None | Some("") | Some("read-write") => Ok(false),
            Some("read-only") => Ok(true),
            Some(other) => Err(Error::fatal(format!(
                "{MODE_VAR}='{other}' is neither read-only nor read-write"
            ))),
        };
        let opened = mode.and_then(|read_only| {
            let backend = Backend::parse(&spec.url)?;
            Ok((
                read_only,
                backend.max_entry(),
                super::store::Store::open(&backend)?,
            ))
        });
        match opened {
            Ok((read_only, max_entry, store)) => Remote {
                spec: spec.clone(),
                shown,
                read_only,
                max_entry,
                store: Some(store),
                off: AtomicBool::new(false),
                failure: Mutex::new(None),
                counts: Mutex::default(),
                mac: mac_key(),
                spent: Mutex::default(),
                used: AtomicBool::new(false),
            },
            Err(e) => Remote {
                spec: spec.clone(),
                failure: Mutex::new(Some(e.message().to_string())),
                off: AtomicBool::new(true),
                store: None,
                shown,
                read_only: true,
                max_entry: 0,
                counts: Mutex::default(),
                mac: None,
                spent: Mutex::default(),
                used: AtomicBool::new(false),
            },
        }
    }

    /// The URL as shown (without a password).
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The tier as named.
    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    fn count(&self, f: impl FnOnce(&mut Counters)) {
        f(&mut self.counts.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// The counters of this link so far.
    pub fn counters(&self) -> Counters {
        *self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes a failure: the first is kept for the warning, and the tier goes off.
    pub fn fail(&self, what: String) {
        self.count(|c| c.errors += 1);
        self.failed_elsewhere(what);
    }

    /// Notes a failure a helper process of the link met (and counted): the tier goes off.
    pub fn failed_elsewhere(&self, what: String) {
        self.off.store(true, Ordering::SeqCst);
        let mut first = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        first.get_or_insert(what);
    }

    /// The first failure of this link, as it happened (for a helper to hand back).
    pub fn first_failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The first failure of this link, if any: the warning it gives.
    pub fn failure(&self) -> Option<String> {
        let f = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        f.as_ref().map(|why| {
            format!(
                "shared cache '{}': {why}; this link went on without it",
                self.shown
            )
        })
    }

    /// The warning of a read-only tier without a key whose entries this link used (a hit):
    /// they are not authenticated.
    pub fn notice(&self) -> Option<String> {
        (self.read_only && self.mac.is_none() && self.used.load(Ordering::SeqCst)).then(|| {
            format!(
                "shared cache '{}': its entries are not authenticated ({KEY_VAR} is not set): a hit is as sound as every writer of the store",
                self.shown
            )
        })
    }

    /// Runs one operation on the store, timed against [`BUDGET`] and, for a read (`answer`),
    /// [`SLOW`]: past either the tier goes off (the operation's own result stands; a
    /// failure is its own reason). A write is bounded by its time limit, which grows with
    /// its size.
    fn timed<T>(&self, answer: bool, op: impl FnOnce() -> Result<T>) -> Result<T> {
        let start = Instant::now();
        let out = op()?;
        let took = start.elapsed();
        let total = {
            let mut spent = self.spent.lock().unwrap_or_else(|e| e.into_inner());
            *spent += took;
            *spent
        };
        if answer && took > SLOW {
            self.fail(format!(
                "answered in {:.1} s, more than {} s: too slow",
                took.as_secs_f64(),
                SLOW.as_secs()
            ));
        } else if total > BUDGET {
            self.fail(format!(
                "took {:.1} s in this link, more than its {} s",
                total.as_secs_f64(),
                BUDGET.as_secs()
            ));
        }
        Ok(out)
    }

    fn live(&self) -> Option<&super::store::Store> {
        self.store
            .as_ref()
            .filter(|_| !self.off.load(Ordering::SeqCst))
    }

    /// The entry file stored for the key `hex`, unchecked but for its MAC (the caller checks
    /// the rest). `None` for a miss or a failure (noted); an entry whose MAC fails is
    /// returned empty (the caller's check rejects it). `want` gives the entry's length from
    /// its header (`None`: not an entry of this key, or larger than its stage's share):
    /// reading stops there, or at the header.
    pub fn get(&self, hex: &str, want: &super::store::Want<'_>) -> Option<Vec<u8>> {
        let store = self.live()?;
        let skip = if self.mac.is_some() { MAC_LEN } else { 0 };
        let head = skip + super::HEADER;
        let wrapped = |h: &[u8]| {
            if self.mac.is_some() && !self.authentic(h) {
                return None;
            }
            want(&h[skip..]).map(|total| total + skip as u64)
        };
        match self.timed(true, || store.read(&entry_path(hex), head, &wrapped)) {
            Ok(Some(data)) => {
                self.count(|c| c.bytes_read += data.len() as u64);
                Some(match self.mac {
                    Some(_) if self.authentic(&data) => data[skip..].to_vec(),
                    Some(_) => Vec::new(),
                    None => data,
                })
            }
            Ok(None) => {
                self.count(|c| c.misses += 1);
                None
            }
            Err(e) => {
                self.fail(format!("cannot read: {}", e.message()));
                None
            }
        }
    }

    /// Whether `object` starts with the MAC of the entry header that follows it.
    fn authentic(&self, object: &[u8]) -> bool {
        match (self.mac, object.get(..MAC_LEN + super::HEADER)) {
            (Some(key), Some(h)) => {
                let tag = blake3::keyed_hash(&key, &h[MAC_LEN..]);
                &h[..8] == MAC_MAGIC
                    && blake3::Hash::from_bytes(h[8..MAC_LEN].try_into().expect("32 bytes")) == tag
            }
            _ => false,
        }
    }

    /// Counts what became of an entry [`Remote::get`] returned: a hit, or one that failed
    /// its check (a miss).
    pub fn checked(&self, intact: bool) {
        if intact {
            self.used.store(true, Ordering::SeqCst);
        }
        self.count(|c| {
            if intact {
                c.hits += 1
            } else {
                c.rejected += 1;
                c.misses += 1;
            }
        });
    }

    /// Stores an entry file under the key `hex` (read-write mode only); one too large for
    /// the store is skipped.
    pub fn put(&self, hex: &str, entry: &[u8]) {
        if self.read_only {
            return;
        }
        let Some(store) = self.live() else {
            return;
        };
        // (with the team's key: behind the MAC of its header)
        let sealed;
        let object = match (self.mac, entry.get(..super::HEADER)) {
            (Some(key), Some(header)) => {
                let tag = blake3::keyed_hash(&key, header);
                sealed = [&MAC_MAGIC[..], tag.as_bytes(), entry].concat();
                &sealed[..]
            }
            _ => entry,
        };
        let max = store.item_limit().map_or(self.max_entry, |l| {
            l.saturating_sub(MEMCACHED_ITEM_OVERHEAD)
        });
        if object.len() as u64 > max {
            self.count(|c| c.skipped += 1);
            return;
        }
        match self.timed(false, || store.write(&entry_path(hex), object)) {
            Ok(()) => self.count(|c| {
                c.writes += 1;
                c.bytes_written += object.len() as u64
            }),
            Err(e) => self.fail(format!("cannot write: {}", e.message())),
        }
    }

    /// Adds this link's counters to the local cache's [`STATS`] file (best effort, under
    /// a lock, so that links ending together all count).
    pub fn save_counters(&self, cache_dir: &Path) {
        let mine = self.counters();
        if mine.is_zero() {
            return;
        }
        let _ = add_counters(cache_dir, &self.shown, &mine);
    }
}

/// The MAC key derived from [`KEY_VAR`]'s text, when it is set (and not empty).
fn mac_key() -> Option<[u8; 32]> {
    let text = std::env::var_os(KEY_VAR).filter(|k| !k.is_empty())?;
    use std::os::unix::ffi::OsStrExt;
    Some(blake3::derive_key(
        "nvlinkrs shared cache entry authentication, 2026-12",
        text.as_bytes(),
    ))
}

/// Adds `mine` to the counters of `url` in `dir`'s [`STATS`] file.
fn add_counters(dir: &Path, url: &str, mine: &Counters) -> std::io::Result<()> {
    super::stats::update_locked(&dir.join(STATS), |text| {
        let mut all: BTreeMap<String, Counters> = serde_json::from_str(text).unwrap_or_default();
        all.entry(url.to_string()).or_default().add(mine);
        serde_json::to_vec_pretty(&all).map_err(std::io::Error::other)
    })
}

/// The shared tiers' counters kept in the local cache `dir` (by URL).
pub fn saved_counters(dir: &Path) -> BTreeMap<String, Counters> {
    super::guard::read_regular(&dir.join(STATS), 1 << 20)
        .ok()
        .flatten()
        .and_then(|t| serde_json::from_slice(&t).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_mode_or_url_is_a_tier_that_is_off_with_one_reason() {
        let r = Remote::open(&Spec {
            url: "redis://127.0.0.1:1".into(),
            mode: Some("sometimes".into()),
            from_flag: false,
        });
        assert!(r.get(&"ab".repeat(32), &|_| None).is_none());
        let w = r.failure().unwrap();
        assert!(w.contains("NVLINKRS_REMOTE_CACHE_MODE='sometimes'"), "{w}");
        let r = Remote::open(&Spec {
            url: "gopher://x".into(),
            mode: None,
            from_flag: true,
        });
        assert!(r.failure().unwrap().contains("unknown scheme"));
    }

    #[test]
    fn counters_add_up_in_the_stats_file() {
        let d = tempfile::tempdir().unwrap();
        let c = Counters {
            hits: 2,
            misses: 1,
            bytes_read: 10,
            ..Default::default()
        };
        add_counters(d.path(), "redis://h:1", &c).unwrap();
        add_counters(d.path(), "redis://h:1", &c).unwrap();
        add_counters(d.path(), "s3://b", &c).unwrap();
        let all = saved_counters(d.path());
        assert_eq!(all["redis://h:1"].hits, 4);
        assert_eq!(all["redis://h:1"].bytes_read, 20);
        assert_eq!(all["s3://b"].misses, 1);
    }
}
