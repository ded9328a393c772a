//! The shared cache tier: a store several machines reach (Redis, S3 or an S3-compatible
//! server, WebDAV, memcached, a shared directory), behind the local cache. Set with
//! `--remote-cache URL` or `NVLINKRS_REMOTE_CACHE=URL`; `NVLINKRS_REMOTE_CACHE_MODE`
//! is `read-write` (the default: what a link computes is stored there too) or
//! `read-only` (developers read what CI wrote).
//!
//! It holds the local cache's entry files as they are (the same header: length, key
//! digest, BLAKE3 of the content) under `nvlinkrs/xx/rest`, and every entry read from it
//! is checked against its key exactly as a local one is before it is used and copied into
//! the local cache: a shared store is trusted no more than a local directory. Entries
//! larger than the store takes (memcached's item limit) are not written. Every operation
//! has a short time limit; the first failure (a server that does not answer, refuses,
//! or errs) turns the tier off for the rest of the link and becomes one warning at its
//! end; the link goes on with the local cache. This link's hits, misses, errors and bytes
//! are added to a small file in the local cache's root ([`STATS`]) that
//! `nvlinkrs cache stats` prints. The stores themselves are in [`super::store`] (OpenDAL,
//! built with the `remote-cache` feature).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::diag::{Error, Result};

/// The setting naming the shared tier.
pub const URL_VAR: &str = "NVLINKRS_REMOTE_CACHE";
/// The setting of its mode: `read-write` (default) or `read-only`.
pub const MODE_VAR: &str = "NVLINKRS_REMOTE_CACHE_MODE";
/// The file in the local cache's root holding the shared tier's counters.
pub const STATS: &str = "shared-stats.json";
/// memcached's default item limit (1 MiB) less room for its item header and key; a
/// server started with another (`-I 16m`) says so when first reached.
const MEMCACHED_MAX: u64 = (1 << 20) - 1024;
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

/// A store the tier can use, from its URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// `redis://[user:password@]host[:port][/db]`, `rediss://…`, `redis+unix:///path`.
    Redis {
        endpoint: String,
        username: Option<String>,
        password: Option<String>,
        db: i64,
    },
    /// `memcached://host[:port]`, `memcached+unix:///path`.
    Memcached { endpoint: String },
    /// `s3://bucket[/prefix]`, the rest from the usual `AWS_*` settings
    /// (`AWS_ENDPOINT_URL` for an S3-compatible server).
    S3 { bucket: String, root: String },
    /// `webdav+http://[user:password@]host[:port][/path]` (or `webdav+https`).
    Webdav {
        endpoint: String,
        root: String,
        username: Option<String>,
        password: Option<String>,
    },
    /// `file:///dir`: a directory (an NFS mount, say).
    Fs { root: String },
}

/// The parts of `scheme://[user[:password]@]host[/path]`.
struct Url<'a> {
    scheme: &'a str,
    user: Option<String>,
    password: Option<String>,
    host: &'a str,
    path: &'a str,
}

fn split_url(url: &str) -> Option<Url<'_>> {
    let (scheme, rest) = url.split_once("://")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let (userinfo, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    let (user, password) = match userinfo.map(|u| u.split_once(':').unwrap_or((u, ""))) {
        Some((u, p)) => (
            Some(percent_decoded(u)).filter(|u| !u.is_empty()),
            Some(percent_decoded(p)).filter(|p| !p.is_empty()),
        ),
        None => (None, None),
    };
    Some(Url {
        scheme,
        user,
        password,
        host,
        path,
    })
}

/// `%XX` escapes decoded (a password or user name holding `/`, `@` or `:`); a `%` that
/// starts no escape stays as it is.
fn percent_decoded(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).and_then(|&c| hex(c)),
            b.get(i + 2).and_then(|&c| hex(c)),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The URL as messages and `cache stats` show it: a password replaced by `***`. A `/` left
/// unescaped in a password ends the authority, so the URL names no store; it is hidden
/// too (whatever comes before an `@` and after a `:` of the authority's first part).
pub fn redacted(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://")
        && let Some((userinfo, after)) = rest.rsplit_once('@')
        && userinfo.contains('/')
        && let Some((user, _)) = userinfo.split_once(':')
        && !user.contains('/')
    {
        return format!("{scheme}://{user}:***@{after}");
    }
    match split_url(url) {
        Some(u) if u.password.is_some() => format!(
            "{}://{}:***@{}{}",
            u.scheme,
            u.user.unwrap_or_default(),
            u.host,
            u.path
        ),
        _ => url.to_string(),
    }
}

impl Backend {
    /// The store `url` names (see the variants), or why it names none.
    pub fn parse(url: &str) -> Result<Backend> {
        let bad = |why: &str| Error::fatal(format!("'{}' {why}", redacted(url)));
        let u = split_url(url).ok_or_else(|| {
            bad("is not a URL (redis://, rediss://, redis+unix://, s3://, webdav+http://, webdav+https://, memcached://, memcached+unix://, file://)")
        })?;
        let need_host = || {
            if u.host.is_empty() {
                Err(bad("names no host"))
            } else {
                Ok(())
            }
        };
        let need_path = |what: &str| {
            if u.path.len() > 1 {
                Ok(u.path.to_string())
            } else {
                Err(bad(&format!("names no {what}")))
            }
        };
        Ok(match u.scheme {
            "redis" | "rediss" => {
                need_host()?;
                let db = match u.path.trim_matches('/') {
                    "" => 0,
                    d => d
                        .parse()
                        .map_err(|_| bad("has a path that is no database number"))?,
                };
                let scheme = if u.scheme == "rediss" {
                    "rediss"
                } else {
                    "tcp"
                };
                Backend::Redis {
                    endpoint: format!("{scheme}://{}", with_port(u.host, 6379)),
                    username: u.user,
                    password: u.password,
                    db,
                }
            }
            // (the client reads an endpoint with an authority: `unix://localhost/PATH`)
            "redis+unix" | "unix" => Backend::Redis {
                endpoint: format!("unix://localhost{}", need_path("socket")?),
                username: u.user,
                password: u.password,
                db: 0,
            },
            "memcached" => {
                need_host()?;
                Backend::Memcached {
                    endpoint: format!("tcp://{}", with_port(u.host, 11211)),
                }
            }
            "memcached+unix" => Backend::Memcached {
                endpoint: format!("unix://{}", need_path("socket")?),
            },
            "s3" => {
                need_host()?;
                Backend::S3 {
                    bucket: u.host.to_string(),
                    root: format!("/{}", u.path.trim_matches('/')),
                }
            }
            "webdav+http" | "webdav+https" => {
                need_host()?;
                Backend::Webdav {
                    endpoint: format!("{}://{}", &u.scheme["webdav+".len()..], u.host),
                    root: format!("/{}", u.path.trim_matches('/')),
                    username: u.user,
                    password: u.password,
                }
            }
            "file" => Backend::Fs {
                root: need_path("directory")?,
            },
            other => return Err(bad(&format!("has an unknown scheme '{other}'"))),
        })
    }

    /// The largest entry file the store holds.
    pub fn max_entry(&self) -> u64 {
        match self {
            Backend::Memcached { .. } => MEMCACHED_MAX,
            _ => u64::MAX,
        }
    }
}

/// `host` with `port` when it names none.
fn with_port(host: &str, port: u16) -> String {
    if host
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        host.to_string()
    } else {
        format!("{host}:{port}")
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

    fn live(&self) -> Option<&super::store::Store> {
        self.store
            .as_ref()
            .filter(|_| !self.off.load(Ordering::SeqCst))
    }

    /// The entry file stored for the key `hex`, unchecked (the caller checks it). `None`
    /// for a miss or a failure (noted). `want` gives the entry's length from its header
    /// (`None`: not an entry of this key): reading stops there, or at the header.
    pub fn get(&self, hex: &str, want: &super::store::Want<'_>) -> Option<Vec<u8>> {
        let store = self.live()?;
        match store.read(&entry_path(hex), super::HEADER, want) {
            Ok(Some(data)) => {
                self.count(|c| c.bytes_read += data.len() as u64);
                Some(data)
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

    /// Counts what became of an entry [`Remote::get`] returned: a hit, or one that failed
    /// its check (a miss).
    pub fn checked(&self, intact: bool) {
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
        let max = store.item_limit().map_or(self.max_entry, |l| {
            l.saturating_sub(MEMCACHED_ITEM_OVERHEAD)
        });
        if entry.len() as u64 > max {
            self.count(|c| c.skipped += 1);
            return;
        }
        match store.write(&entry_path(hex), entry) {
            Ok(()) => self.count(|c| {
                c.writes += 1;
                c.bytes_written += entry.len() as u64
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

/// Adds `mine` to the counters of `url` in `dir`'s [`STATS`] file.
fn add_counters(dir: &Path, url: &str, mine: &Counters) -> std::io::Result<()> {
    use std::io::{Read, Seek, Write};
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(dir.join(STATS))?;
    if !f.metadata()?.is_file() {
        return Ok(());
    }
    // SAFETY: flock on a descriptor this function owns; released when `f` is closed.
    if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&f), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut text = String::new();
    (&mut f).take(1 << 20).read_to_string(&mut text)?;
    let mut all: BTreeMap<String, Counters> = serde_json::from_str(&text).unwrap_or_default();
    all.entry(url.to_string()).or_default().add(mine);
    let out = serde_json::to_vec_pretty(&all).map_err(std::io::Error::other)?;
    f.set_len(0)?;
    f.rewind()?;
    f.write_all(&out)
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
    fn urls_name_their_stores() {
        let p = |u: &str| Backend::parse(u).unwrap();
        assert_eq!(
            p("redis://127.0.0.1:6379"),
            Backend::Redis {
                endpoint: "tcp://127.0.0.1:6379".into(),
                username: None,
                password: None,
                db: 0
            }
        );
        assert_eq!(
            p("redis://u:pw@h:1/3"),
            Backend::Redis {
                endpoint: "tcp://h:1".into(),
                username: Some("u".into()),
                password: Some("pw".into()),
                db: 3
            }
        );
        assert_eq!(
            p("redis+unix:///run/redis.sock"),
            Backend::Redis {
                endpoint: "unix://localhost/run/redis.sock".into(),
                username: None,
                password: None,
                db: 0
            }
        );
        assert_eq!(
            p("s3://bucket/some/prefix/"),
            Backend::S3 {
                bucket: "bucket".into(),
                root: "/some/prefix".into()
            }
        );
        assert_eq!(
            p("webdav+http://127.0.0.1:8080/dav"),
            Backend::Webdav {
                endpoint: "http://127.0.0.1:8080".into(),
                root: "/dav".into(),
                username: None,
                password: None
            }
        );
        assert_eq!(
            p("memcached://127.0.0.1:11211"),
            Backend::Memcached {
                endpoint: "tcp://127.0.0.1:11211".into()
            }
        );
        assert_eq!(
            p("file:///srv/cache"),
            Backend::Fs {
                root: "/srv/cache".into()
            }
        );
        assert_eq!(p("memcached://h:1").max_entry(), MEMCACHED_MAX);
        assert_eq!(
            p("memcached://h"),
            Backend::Memcached {
                endpoint: "tcp://h:11211".into()
            }
        );
        assert_eq!(
            p("redis://[::1]"),
            Backend::Redis {
                endpoint: "tcp://[::1]:6379".into(),
                username: None,
                password: None,
                db: 0
            }
        );
        for (bad, why) in [
            ("ftp://h/x", "unknown scheme 'ftp'"),
            ("redis://", "names no host"),
            ("redis://h/x", "no database number"),
            ("file://", "names no directory"),
            ("127.0.0.1:6379", "is not a URL"),
        ] {
            let e = Backend::parse(bad).unwrap_err();
            assert!(e.message().contains(why), "{bad}: {}", e.message());
        }
    }

    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(redacted("redis://u:secret@h:1/2"), "redis://u:***@h:1/2");
        assert_eq!(redacted("redis://h:1"), "redis://h:1");
        // a password with an unescaped '/' names no store, and is not shown either
        assert_eq!(redacted("redis://:pa/ss@h:1"), "redis://:***@h:1");
        assert_eq!(
            redacted("webdav+http://alice:se/cr@et@h/x"),
            "webdav+http://alice:***@h/x"
        );
        let r = Remote::open(&Spec {
            url: "webdav+http://alice:se/cret@h/x".into(),
            mode: None,
            from_flag: false,
        });
        assert_eq!(r.shown(), "webdav+http://alice:***@h/x");
        // escaped, it is the password
        assert_eq!(
            Backend::parse("redis://u%3Ax:p%2Fa%40ss%3A@h:1").unwrap(),
            Backend::Redis {
                endpoint: "tcp://h:1".into(),
                username: Some("u:x".into()),
                password: Some("p/a@ss:".into()),
                db: 0
            }
        );
        assert_eq!(redacted("redis://u:p%2Fa@h:1"), "redis://u:***@h:1");
        let e = Backend::parse("ftp://u:secret@h").unwrap_err();
        assert!(!e.message().contains("secret"));
    }

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
