//! The shared tier's stores: a folder (`file://`, [`super::dirstore`], always built), or a
//! server through OpenDAL (built with the `remote-cache` feature; the storage layer
//! sccache uses): a Redis, S3, WebDAV or memcached operator, and a small tokio runtime of
//! its own that the link's threads block on, each operation bounded by a short time limit.
//! Without the feature, opening a server's store is an error that says so (the link then
//! goes on without the tier).

#[cfg(feature = "remote-cache")]
use std::io::{Read, Write};

use crate::diag::{Error, Result};

use super::backend::Backend;

/// The longest one read or write may take before the tier counts as failed (a write
/// gets a second more per 8 MiB).
#[cfg(feature = "remote-cache")]
pub const OP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// The longest a server of a socket protocol (Redis, memcached) may take to accept the
/// first connection: its client library would otherwise retry for seconds.
#[cfg(feature = "remote-cache")]
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

pub use super::dirstore::Want;

/// A shared tier's store: a folder (`file://`, [`super::dirstore`]) or a server reached
/// through OpenDAL.
pub enum Store {
    Dir(super::dirstore::DirStore),
    Dal(Box<DalStore>),
}

impl Store {
    /// The store for `backend` (nothing is contacted yet).
    pub fn open(backend: &Backend) -> Result<Store> {
        match backend {
            Backend::Fs { root } => super::dirstore::DirStore::open(root).map(Store::Dir),
            other => DalStore::open(other).map(|d| Store::Dal(Box::new(d))),
        }
    }

    /// The object at `path`: `None` when there is none. Once `head` bytes are in, `want`
    /// says how long the whole object should be, and reading stops at that length and one
    /// byte more (a longer object fails the caller's check), or right there when it says
    /// `None`: a store sending without end costs no memory.
    pub fn read(&self, path: &str, head: usize, want: &Want<'_>) -> Result<Option<Vec<u8>>> {
        match self {
            Store::Dir(d) => d.read(path, head, want),
            Store::Dal(d) => d.read(path, head, want),
        }
    }

    /// Writes `data` at `path` (replacing what was there).
    pub fn write(&self, path: &str, data: &[u8]) -> Result<()> {
        match self {
            Store::Dir(d) => d.write(path, data),
            Store::Dal(d) => d.write(path, data),
        }
    }

    /// The largest value the server said it takes (memcached's `item_size_max`).
    pub fn item_limit(&self) -> Option<u64> {
        match self {
            Store::Dir(_) => None,
            Store::Dal(d) => d.item_limit(),
        }
    }
}

/// A store reached through OpenDAL.
#[cfg(feature = "remote-cache")]
pub struct DalStore {
    op: opendal::Operator,
    rt: tokio::runtime::Runtime,
    /// The socket to try once before the first operation (Redis, memcached).
    probe: Option<Probe>,
    /// What the probe found: memcached's item limit, or why the server is unreachable.
    probed: std::sync::OnceLock<std::result::Result<Option<u64>, String>>,
}

/// Where a socket-protocol server listens, and whether it is memcached (asked for its
/// item limit).
#[cfg(feature = "remote-cache")]
#[derive(Debug, Clone)]
struct Probe {
    /// `host:port`, or a unix socket's path (starting with `/`).
    addr: String,
    memcached: bool,
    /// A plain Redis connection (not TLS): asked to `AUTH` with these (user, password),
    /// or to `PING` without, so that a refusal is the server's own word (`WRONGPASS`).
    redis: Option<(Option<String>, Option<String>)>,
}

#[cfg(feature = "remote-cache")]
impl Probe {
    /// The socket of an endpoint `tcp://host:port`, `rediss://host:port`,
    /// `unix://[localhost]/path`.
    fn of(endpoint: &str, memcached: bool) -> Option<Probe> {
        let (scheme, rest) = endpoint.split_once("://")?;
        let addr = match scheme {
            "unix" => rest.trim_start_matches("localhost").to_string(),
            _ => rest.to_string(),
        };
        Some(Probe {
            addr,
            memcached,
            redis: None,
        })
    }

    /// Connects once, within [`CONNECT_TIMEOUT`]; memcached says its item limit
    /// (`stats settings`, `item_size_max`).
    fn connect(&self) -> std::result::Result<Option<u64>, String> {
        use std::net::ToSocketAddrs;
        let addr = &self.addr;
        let mut stream: Box<dyn ReadWrite> = if addr.starts_with('/') {
            let s = std::os::unix::net::UnixStream::connect(addr)
                .map_err(|e| format!("cannot connect to '{addr}': {e}"))?;
            let _ = s.set_read_timeout(Some(CONNECT_TIMEOUT));
            Box::new(s)
        } else {
            let addrs: Vec<_> = addr
                .to_socket_addrs()
                .map_err(|e| format!("cannot resolve '{addr}': {e}"))?
                .collect();
            let mut last = Err(format!("'{addr}' resolves to no address"));
            for a in addrs {
                match std::net::TcpStream::connect_timeout(&a, CONNECT_TIMEOUT) {
                    Ok(s) => {
                        let _ = s.set_read_timeout(Some(CONNECT_TIMEOUT));
                        last = Ok(s);
                        break;
                    }
                    Err(e) => last = Err(format!("cannot connect to {a}: {e}")),
                }
            }
            Box::new(last?)
        };
        if let Some((user, password)) = &self.redis {
            redis_hello(&mut stream, user.as_deref(), password.as_deref())?;
        }
        if !self.memcached {
            return Ok(None);
        }
        // (a server that does not say keeps the default limit)
        let _ = stream.write_all(b"stats settings\r\n");
        let mut text = Vec::new();
        let mut buf = [0u8; 4096];
        while !text.ends_with(b"END\r\n") && text.len() < 1 << 16 {
            match stream.read(&mut buf) {
                Ok(n) if n > 0 => text.extend_from_slice(&buf[..n]),
                _ => break,
            }
        }
        Ok(String::from_utf8_lossy(&text).lines().find_map(|l| {
            l.strip_prefix("STAT item_size_max ")
                .and_then(|n| n.trim().parse().ok())
        }))
    }
}

/// Redis's answer to `AUTH` (with a password) or `PING` (without): an error reply is the
/// tier's failure in the server's words (`WRONGPASS invalid username-password pair...`,
/// `NOAUTH Authentication required.`), not a time-out of the client's reconnecting.
#[cfg(feature = "remote-cache")]
fn redis_hello(
    stream: &mut Box<dyn ReadWrite>,
    user: Option<&str>,
    password: Option<&str>,
) -> std::result::Result<(), String> {
    let words: Vec<&str> = match (user, password) {
        (Some(u), Some(p)) => vec!["AUTH", u, p],
        (None, Some(p)) => vec!["AUTH", p],
        _ => vec!["PING"],
    };
    let mut request = format!("*{}\r\n", words.len());
    for w in &words {
        request += &format!("${}\r\n{w}\r\n", w.len());
    }
    // (a server that says nothing in time is left to the client's own time limit)
    if stream.write_all(request.as_bytes()).is_err() {
        return Ok(());
    }
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while line.len() < 512 && !line.ends_with(b"\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => line.push(byte[0]),
            _ => return Ok(()),
        }
    }
    match line.strip_prefix(b"-") {
        Some(err) => {
            let text: String = String::from_utf8_lossy(err)
                .chars()
                .filter(|c| !c.is_control())
                .collect();
            let asked = if password.is_some() {
                "refused the credentials"
            } else {
                "refused the connection"
            };
            Err(format!("the server {asked}: {}", text.trim()))
        }
        None => Ok(()),
    }
}

#[cfg(feature = "remote-cache")]
trait ReadWrite: std::io::Read + std::io::Write {}
#[cfg(feature = "remote-cache")]
impl<T: std::io::Read + std::io::Write> ReadWrite for T {}

#[cfg(feature = "remote-cache")]
impl DalStore {
    /// The operator for `backend` (nothing is contacted yet).
    pub fn open(backend: &Backend) -> Result<DalStore> {
        use opendal::services;
        // (the HTTP transport for S3 and WebDAV, and the services, registered once)
        opendal::install_default();
        let probe = match backend {
            Backend::Redis {
                endpoint,
                username,
                password,
                ..
            } => Probe::of(endpoint, false).map(|mut p| {
                if !endpoint.starts_with("rediss://") {
                    p.redis = Some((username.clone(), password.clone()));
                }
                p
            }),
            Backend::Memcached { endpoint } => Probe::of(endpoint, true),
            _ => None,
        };
        let built = match backend.clone() {
            Backend::Redis {
                endpoint,
                username,
                password,
                db,
            } => {
                let mut b = services::Redis::default().endpoint(&endpoint).db(db);
                if let Some(u) = &username {
                    b = b.username(u);
                }
                if let Some(p) = &password {
                    b = b.password(p);
                }
                opendal::Operator::new(b)
            }
            Backend::Memcached { endpoint } => {
                opendal::Operator::new(services::Memcached::default().endpoint(&endpoint))
            }
            Backend::S3 { bucket, root } => {
                let region = std::env::var("AWS_REGION")
                    .or_else(|_| std::env::var("AWS_DEFAULT_REGION"))
                    .unwrap_or_else(|_| "us-east-1".into());
                opendal::Operator::new(
                    services::S3::default()
                        .bucket(&bucket)
                        .root(&root)
                        .region(&region),
                )
            }
            Backend::Webdav {
                endpoint,
                root,
                username,
                password,
            } => {
                let mut b = services::Webdav::default().endpoint(&endpoint).root(&root);
                if let Some(u) = &username {
                    b = b.username(u);
                }
                if let Some(p) = &password {
                    b = b.password(p);
                }
                opendal::Operator::new(b)
            }
            // (file:// is the folder store's: `Store::open` never comes here with it)
            Backend::Fs { root } => opendal::Operator::new(services::Fs::default().root(&root)),
        };
        let op = built.map_err(|e| Error::fatal(format!("cannot be set up: {e}")))?;
        let op = op.layer(
            opendal::layers::TimeoutLayer::new()
                .with_timeout(OP_TIMEOUT)
                .with_io_timeout(OP_TIMEOUT),
        );
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("nvlinkrs-shared-cache")
            .enable_all()
            .build()
            .map_err(|e| Error::fatal(format!("cannot start its client: {e}")))?;
        Ok(DalStore {
            op,
            rt,
            probe,
            probed: std::sync::OnceLock::new(),
        })
    }

    /// The server's socket accepts a connection (tried once per link).
    fn reachable(&self) -> Result<()> {
        let Some(probe) = &self.probe else {
            return Ok(());
        };
        match self.probed.get_or_init(|| probe.connect()) {
            Ok(_) => Ok(()),
            Err(e) => Err(Error::fatal(e.clone())),
        }
    }

    /// The largest value the server said it takes (memcached's `item_size_max`), once
    /// it was reached.
    pub fn item_limit(&self) -> Option<u64> {
        match self.probed.get() {
            Some(Ok(limit)) => *limit,
            _ => None,
        }
    }

    /// The object at `path`: `None` when there is none. Read as a stream: once `head`
    /// bytes are in, `want` says how long the whole object should be, and reading stops
    /// at that length and one byte more (a longer object fails the caller's check), or
    /// right there when it says `None`; a server sending without end costs no memory.
    pub fn read(&self, path: &str, head: usize, want: &Want<'_>) -> Result<Option<Vec<u8>>> {
        use futures_core::Stream;
        self.reachable()?;
        let fetch = async {
            let mut stream = Box::pin(self.op.reader(path).await?.into_stream(..).await?);
            let mut data = Vec::new();
            let mut limit: Option<u64> = None;
            while let Some(buf) = std::future::poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
                for bytes in buf? {
                    data.extend_from_slice(&bytes);
                }
                if limit.is_none() && data.len() >= head {
                    match want(&data) {
                        Some(total) => limit = Some(total.saturating_add(1)),
                        None => break,
                    }
                }
                if let Some(l) = limit
                    && data.len() as u64 >= l
                {
                    data.truncate(l as usize);
                    break;
                }
            }
            Ok::<_, opendal::Error>(data)
        };
        let got = self
            .rt
            .block_on(async { tokio::time::timeout(OP_TIMEOUT, fetch).await });
        match got {
            Err(_) => Err(Error::fatal(format!(
                "no answer within {} s",
                OP_TIMEOUT.as_secs()
            ))),
            Ok(Ok(data)) => Ok(Some(data)),
            Ok(Err(e)) if e.kind() == opendal::ErrorKind::NotFound => Ok(None),
            Ok(Err(e)) => Err(Error::fatal(one_line(&e))),
        }
    }

    /// Writes `data` at `path` (replacing what was there).
    pub fn write(&self, path: &str, data: &[u8]) -> Result<()> {
        self.reachable()?;
        let limit = OP_TIMEOUT + std::time::Duration::from_secs(data.len() as u64 >> 23);
        let data = data.to_vec();
        let got = self
            .rt
            .block_on(async { tokio::time::timeout(limit, self.op.write(path, data)).await });
        match got {
            Err(_) => Err(Error::fatal(format!(
                "no answer within {} s",
                limit.as_secs()
            ))),
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(Error::fatal(one_line(&e))),
        }
    }
}

/// OpenDAL's error as one line: what failed and why, down to the innermost cause (its
/// context, the request's details, is left out).
#[cfg(feature = "remote-cache")]
fn one_line(e: &opendal::Error) -> String {
    let mut text = e.message().to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(not(feature = "remote-cache"))]
pub struct DalStore;

#[cfg(not(feature = "remote-cache"))]
impl DalStore {
    pub fn open(_: &Backend) -> Result<DalStore> {
        Err(Error::fatal(
            "this nvlinkrs was built without the remote-cache feature",
        ))
    }

    pub fn read(&self, _: &str, _: usize, _: &Want<'_>) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }

    pub fn write(&self, _: &str, _: &[u8]) -> Result<()> {
        Ok(())
    }

    pub fn item_limit(&self) -> Option<u64> {
        None
    }
}
