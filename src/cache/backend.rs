//! The shared tier's URL: which store it names ([`Backend`]) and how messages show it
//! ([`redacted`]: no password, no token).

use crate::diag::{Error, Result};

/// memcached's default item limit (1 MiB) less room for its item header and key; a
/// server started with another (`-I 16m`) says so when first reached.
pub const MEMCACHED_MAX: u64 = (1 << 20) - 1024;

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

/// The URL as messages and `cache stats` show it: a password replaced by `***`, and a user
/// name given without a password too (`redis://TOKEN@host`: a token is a credential). A
/// `/` left unescaped in a password ends the authority, so the URL names no store; it is
/// hidden too (whatever comes before an `@` and after a `:` of the authority's first part).
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
        Some(u) if u.user.is_some() => format!("{}://***@{}{}", u.scheme, u.host, u.path),
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
        // a user name alone is a token (was: shown as it is)
        assert_eq!(redacted("redis://s3cr3tT0ken@h:1/2"), "redis://***@h:1/2");
        assert_eq!(
            redacted("webdav+https://tok%40en@h/x"),
            "webdav+https://***@h/x"
        );
        let e = Backend::parse("gopher://s3cr3tT0ken@h").unwrap_err();
        assert!(!e.message().contains("s3cr3t"), "{}", e.message());
    }
}
