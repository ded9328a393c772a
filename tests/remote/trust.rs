//! The shared tier trusted no more than a local directory (issue 36 item 2), against real
//! servers on loopback: entries authenticated with the team's key
//! (`NVLINKRS_REMOTE_CACHE_KEY`), a store's forgeries rejected, what a keyless tier
//! replays checked; one slow answer turns the tier off; a forged 2 GiB entry costs
//! nothing; Redis's own refusal of a password; a token in the URL never shown.

use super::*;

/// One Redis command (RESP), its raw answer.
fn redis_cmd(port: u16, words: &[&[u8]]) -> Vec<u8> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut req = format!("*{}\r\n", words.len()).into_bytes();
    for w in words {
        req.extend_from_slice(format!("${}\r\n", w.len()).as_bytes());
        req.extend_from_slice(w);
        req.extend_from_slice(b"\r\n");
    }
    s.write_all(&req).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).unwrap();
    answer
}

/// The value of a bulk-string answer (`$N\r\n...\r\n`).
fn bulk(answer: &[u8]) -> Option<Vec<u8>> {
    let nl = answer.windows(2).position(|w| w == b"\r\n")?;
    let n: usize = std::str::from_utf8(answer.get(1..nl)?).ok()?.parse().ok()?;
    answer.get(nl + 2..nl + 2 + n).map(<[u8]>::to_vec)
}

fn port_of(url: &str) -> u16 {
    url.rsplit(':').next().unwrap().parse().unwrap()
}

/// The store's object holding the whole link (its content's first part the image), with
/// its key and how many bytes precede the entry (40 behind a MAC, else 0).
fn whole_link_object(port: u16, image: &[u8]) -> (Vec<u8>, Vec<u8>, usize) {
    let keys = redis_cmd(port, &[b"KEYS", b"*nvlinkrs/*"]);
    let text = String::from_utf8_lossy(&keys).into_owned();
    for k in text.lines().filter(|l| l.contains("nvlinkrs/")) {
        let obj = bulk(&redis_cmd(port, &[b"GET", k.as_bytes()])).unwrap();
        let skip = if obj.starts_with(b"NVLRSMAC") { 40 } else { 0 };
        let parts = obj
            .get(skip + HEADER..)
            .and_then(nvlinkrs::cache::unpack)
            .unwrap_or_default();
        // (four parts: the image, the registration flag and file, the messages; ptxas's
        // entry of a whole-program link starts with the same image)
        if parts.len() == 4 && parts[0] == image {
            return (k.as_bytes().to_vec(), obj, skip);
        }
    }
    panic!("no whole-link entry among {text}");
}

/// An entry with the header of `real` (its key's digest) holding the whole link's
/// `parts`: length and content hash as a real entry's, no MAC.
fn forged(real: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let content = nvlinkrs::cache::pack(parts);
    let mut out = real[..8].to_vec();
    out.extend_from_slice(&(content.len() as u64).to_le_bytes());
    out.extend_from_slice(&real[16..48]);
    out.extend_from_slice(blake3::hash(&content).as_bytes());
    // (the cold time the entry took to make, as a real entry's)
    out.extend_from_slice(&real[80..88]);
    out.extend_from_slice(&content);
    out
}

/// The length of an entry's header: magic, length, key, content digest, cold time.
const HEADER: usize = 88;

fn with_reg() -> Vec<String> {
    let mut a = saxpy();
    a.push("--register-link-binaries={OUT}.reg".into());
    a
}

/// With the team's key, entries are stored behind a MAC: another machine with the key
/// hits with the same bytes; an entry the store's owner rewrote (another image, a
/// registration file that injects host code, a message of its own, every unkeyed check
/// passing) is rejected and the link's image is the cold one, as it is for a machine with
/// another key (was: the forged image, registration file and warning, exit 0).
#[test]
fn the_team_key_rejects_an_entry_the_store_forged() {
    let plain = link(&with_reg(), None, &[]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    let plain = plain.out.unwrap();
    let server = redis();
    let port = port_of(&server.url);
    let mut env = tier_env(&server.url);
    env.push((
        "NVLINKRS_REMOTE_CACHE_KEY".into(),
        "the team's secret".into(),
    ));
    let dir = || tempfile::tempdir().unwrap();
    let (a, b, c) = (dir(), dir(), dir());
    let first = link(&with_reg(), Some(a.path()), &env);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let second = link(&with_reg(), Some(b.path()), &env);
    assert_eq!(second.report["cache"]["whole_link"], "hit");
    assert!(second.out.as_ref() == Some(&plain));
    let (key, object, skip) = whole_link_object(port, &plain);
    assert_eq!(skip, 40, "the entry is not behind a MAC");
    let evil = forged(
        &object[skip..],
        &[
            b"\x7fELF injected image",
            b"1",
            b"#define NUM_PRELINKED_OBJECTS 0\n",
            b"Wthis warning came from the store\n",
        ],
    );
    // the forger keeps the MAC it saw (it cannot make one for the new header)
    let mut keyed_evil = object[..skip].to_vec();
    keyed_evil.extend_from_slice(&evil);
    for (what, body) in [("unkeyed", &evil), ("old MAC", &keyed_evil)] {
        redis_cmd(port, &[b"SET", &key, body]);
        let cache = tempfile::tempdir().unwrap();
        let l = link(&with_reg(), Some(cache.path()), &env);
        assert_eq!(l.code, 0, "{what}: {}", l.stderr);
        assert!(
            l.out.as_ref() == Some(&plain),
            "{what}: the forged image was used"
        );
        assert!(
            !l.stderr.contains("came from the store"),
            "{what}: {}",
            l.stderr
        );
        assert_eq!(l.report["cache"]["whole_link"], "miss", "{what}");
        assert!(l.shared("rejected") >= 1, "{what}: {:#}", l.report);
    }
    // another key: the team's entries (the ptxas and LTO stages') are none of its
    let mut other = tier_env(&server.url);
    other.push(("NVLINKRS_REMOTE_CACHE_KEY".into(), "another team".into()));
    other.push(("NVLINKRS_REMOTE_CACHE_MODE".into(), "read-only".into()));
    let l = link(&with_reg(), Some(c.path()), &other);
    assert!(l.out.as_ref() == Some(&plain));
    assert_eq!(l.shared("hits"), 0, "{:#}", l.report);
    assert!(l.shared("rejected") >= 2, "{:#}", l.report);
    assert!(l.shared_warnings().is_empty(), "{}", l.stderr);
}

/// Without a key, a read-only tier warns at every link that used it; what it replays is
/// checked: a registration file that is not nvlink's grammar (`#error`, code) or messages
/// with control characters make the entry no hit (was: written and printed as stored).
#[test]
fn a_keyless_tier_warns_and_replays_only_what_nvlink_writes() {
    let plain = link(&with_reg(), None, &[]).out.unwrap();
    let server = redis();
    let port = port_of(&server.url);
    let env = tier_env(&server.url);
    let a = tempfile::tempdir().unwrap();
    let first = link(&with_reg(), Some(a.path()), &env);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(
        first.shared_warnings().is_empty(),
        "read-write: {}",
        first.stderr
    );
    let (key, object, skip) = whole_link_object(port, &plain);
    assert_eq!(skip, 0);
    let mut ro = env.clone();
    ro.push(("NVLINKRS_REMOTE_CACHE_MODE".into(), "read-only".into()));
    let notice = format!(
        "shared cache '{}': its entries are not authenticated (NVLINKRS_REMOTE_CACHE_KEY is not set): a hit is as sound as every writer of the store",
        server.url
    );
    let register = b"#define NUM_PRELINKED_OBJECTS 0\n";
    for (what, reg, messages) in [
        (
            "registration",
            &b"#error \"injected by the shared cache\"\n"[..],
            &b""[..],
        ),
        ("escape", &register[..], &b"W\x1b]0;owned\x07 hi\n"[..]),
        ("carriage return", &register[..], &b"Wok\rrewritten\n"[..]),
    ] {
        let evil = forged(&object, &[b"\x7fELF injected image", b"1", reg, messages]);
        redis_cmd(port, &[b"SET", &key, &evil]);
        let cache = tempfile::tempdir().unwrap();
        let l = link(&with_reg(), Some(cache.path()), &ro);
        assert_eq!(l.code, 0, "{what}: {}", l.stderr);
        assert!(
            l.out.as_ref() == Some(&plain),
            "{what}: the forged image was used"
        );
        assert_eq!(l.report["cache"]["whole_link"], "miss", "{what}");
        assert_eq!(
            l.shared_warnings(),
            [format!("nvlinkrs warning : {notice}")],
            "{what}"
        );
    }
}

/// An HTTP server on loopback answering every request `404` after `delay`, counting them.
fn slow_http_server(delay: Duration) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = std::sync::Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                while let Ok(n) = conn.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    seen.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(delay);
                    let answer = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
                    if conn.write_all(answer.as_bytes()).is_err() {
                        break;
                    }
                }
            });
        }
    });
    (port, count)
}

/// One answer slower than 2 s turns the tier off for the rest of the link, with one
/// warning: the store is asked once (was: every lookup waited its 2.5 s, a split link
/// 75.7 s against 32.3 s).
#[test]
fn one_slow_answer_turns_the_tier_off() {
    let plain = link(&saxpy(), None, &[]);
    let (port, requests) = slow_http_server(Duration::from_millis(2500));
    let url = format!("webdav+http://127.0.0.1:{port}/cache");
    let env = tier_env(&url);
    let c = tempfile::tempdir().unwrap();
    let l = link(&saxpy(), Some(c.path()), &env);
    assert_eq!(l.code, 0, "{}", l.stderr);
    assert!(l.out == plain.out);
    assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 1);
    let w = l.shared_warnings();
    let head = format!("nvlinkrs warning : shared cache '{url}': answered in ");
    assert!(
        w.len() == 1
            && w[0].starts_with(&head)
            && w[0].ends_with(" s, more than 2 s: too slow; this link went on without it"),
        "{}",
        l.stderr
    );
}

/// A store answering every object with a real entry header (the key's digest from the
/// object's name) that declares 2 GiB, then zeros without end: refused after the header
/// (larger than the stage's share), the link's peak memory under 300 MiB (was: what came
/// within 3 s read into memory, 420-700 MB).
#[test]
fn a_forged_two_gib_entry_costs_no_memory() {
    let plain = link(&saxpy(), None, &[]);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                let n = conn.read(&mut buf).unwrap_or(0);
                let request = String::from_utf8_lossy(&buf[..n]).into_owned();
                // GET /cache/nvlinkrs/xx/rest: the digest is xx + rest
                let hex: String = request
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or_default()
                    .rsplit('/')
                    .take(2)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                let mut head = b"NVLRSC\x00\x03".to_vec();
                head.extend_from_slice(&(2u64 << 30).to_le_bytes());
                for i in 0..32 {
                    let byte = hex
                        .get(2 * i..2 * i + 2)
                        .and_then(|h| u8::from_str_radix(h, 16).ok());
                    head.push(byte.unwrap_or(0));
                }
                head.extend_from_slice(&[0; 40]);
                let http = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
                    (2u64 << 30) + HEADER as u64
                );
                let chunk = vec![0u8; 1 << 20];
                if conn.write_all(http.as_bytes()).is_ok() && conn.write_all(&head).is_ok() {
                    while conn.write_all(&chunk).is_ok() {}
                }
            });
        }
    });
    let url = format!("webdav+http://127.0.0.1:{port}/cache");
    let mut env = tier_env(&url);
    env.push(("NVLINKRS_REMOTE_CACHE_MODE".into(), "read-only".into()));
    let c = tempfile::tempdir().unwrap();
    let (l, peak_kib) = link_measured(&saxpy(), Some(c.path()), &env);
    assert_eq!(l.code, 0, "{}", l.stderr);
    assert!(l.out == plain.out);
    assert!(l.shared("rejected") >= 1, "{:#}", l.report);
    assert!(peak_kib < 300 << 10, "peak {peak_kib} KiB");
}

/// As [`link`], with the link's peak resident memory (KiB) from `wait4`.
fn link_measured(args: &[String], cache: Option<&Path>, env: &[(String, String)]) -> (Linked, i64) {
    // (python's rusage of its child: the measuring wrapper)
    let dir = tempfile::tempdir().unwrap();
    let wrapper = dir.path().join("peak.py");
    std::fs::write(
        &wrapper,
        "import resource, subprocess, sys\nrc = subprocess.call(sys.argv[2:])\nopen(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\nsys.exit(rc)\n",
    )
    .unwrap();
    let peak = dir.path().join("peak");
    let l = link_via(
        &[
            "python3".to_string(),
            wrapper.display().to_string(),
            peak.display().to_string(),
        ],
        args,
        cache,
        env,
    );
    let kib = std::fs::read_to_string(&peak)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (l, kib)
}

/// A wrong Redis password says so, in the server's words (was: "io operation timeout
/// reached" after 3 s of reconnecting); so does a missing one.
#[test]
fn a_wrong_redis_password_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut cmd = Command::new(system_tool("redis-server"));
    cmd.args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .args(["--save", "", "--appendonly", "no", "--requirepass", "right"])
        .arg("--dir")
        .arg(dir.path());
    let _server = Server::start("redis-server", cmd, String::new(), dir, tcp_ready(port));
    let plain = link(&saxpy(), None, &[]);
    for (url, says) in [
        (
            format!("redis://:wrong@127.0.0.1:{port}"),
            "the server refused the credentials: WRONGPASS invalid username-password pair or user is disabled.",
        ),
        (
            format!("redis://127.0.0.1:{port}"),
            "the server refused the connection: NOAUTH Authentication required.",
        ),
    ] {
        let c = tempfile::tempdir().unwrap();
        let l = link(&saxpy(), Some(c.path()), &tier_env(&url));
        assert_eq!(l.code, 0, "{}", l.stderr);
        assert!(l.out == plain.out);
        assert_eq!(
            l.shared_warnings(),
            [format!(
                "nvlinkrs warning : shared cache '{}': cannot read: {says}; this link went on without it",
                url.replace(":wrong@", ":***@")
            )]
        );
    }
    // the right one works
    let c = tempfile::tempdir().unwrap();
    let l = link(
        &saxpy(),
        Some(c.path()),
        &tier_env(&format!("redis://:right@127.0.0.1:{port}")),
    );
    assert!(l.shared_warnings().is_empty(), "{}", l.stderr);
    assert!(l.shared("writes") >= 1, "{:#}", l.report);
}

/// A credential given as the user alone (`redis://TOKEN@host`) is shown as `***`, in the
/// warning, the report and `cache stats` (was: shown as it is).
#[test]
fn a_token_in_the_url_is_never_shown() {
    let c = tempfile::tempdir().unwrap();
    let url = "redis://s3cr3tT0ken@127.0.0.1:1";
    let l = link(&saxpy(), Some(c.path()), &tier_env(url));
    assert_eq!(l.code, 0, "{}", l.stderr);
    let everything = format!("{}{}{}", l.stderr, l.report, cache_stats(c.path()));
    assert!(!everything.contains("s3cr3t"), "{everything}");
    assert!(
        l.stderr.contains("shared cache 'redis://***@127.0.0.1:1'"),
        "{}",
        l.stderr
    );
}
