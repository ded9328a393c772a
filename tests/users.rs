//! A second local user can neither read nor clobber anything of the first through
//! nvlinkrs: its outputs, its cache, a shared `file://` tier, its daemon, or the drop-in
//! libnvJitLink. The test makes two throwaway users (a victim and an attacker; it needs
//! root, as CI runs, and prints why it is skipped otherwise) and removes them, with their
//! homes, when it ends, passed or failed. Everything they run is reachable without
//! `/root`: the binaries, the toolkit and the fixtures are hard-linked (or copied) into a
//! world-readable folder; their shared folder is sticky and world-writable, as `/tmp` is.
//!
//! Needs the toolkit (CUDA_HOME), the fixtures (NVLINKRS_FIXTURES) and the drop-in built
//! beside the test binaries (scripts/test.sh does all of it).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::fixtures;

fn cuda() -> PathBuf {
    let c = std::env::var_os("CUDA_HOME").expect("CUDA_HOME (set by scripts/test.sh)");
    std::fs::canonicalize(c).unwrap()
}

/// A user made for the test; removed (with its home) when dropped.
struct User {
    name: String,
    uid: u32,
    gid: u32,
    home: PathBuf,
}

impl Drop for User {
    fn drop(&mut self) {
        // whatever still runs as this user was started by this test (a daemon a failed
        // check left): stopped by its id, else userdel refuses
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            if e.metadata().is_ok_and(|m| m.uid() == self.uid) {
                // SAFETY: a process of this test's own throwaway user.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        let _ = Command::new("userdel").arg("-r").arg(&self.name).output();
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

/// Why this test cannot run here, if it cannot.
fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("it makes two local users, which needs root (CI runs as root)".into());
    }
    if Command::new("useradd").arg("--help").output().is_err() {
        return Some("useradd is not installed".into());
    }
    None
}

/// Removes the users earlier runs of this test left when they were killed (named
/// `nvlrs<pid>v`/`a` for a process that no longer runs).
fn remove_stale_users() {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    for line in passwd.lines() {
        let name = line.split(':').next().unwrap_or_default();
        let Some(pid) = name
            .strip_prefix("nvlrs")
            .and_then(|r| r.strip_suffix(['v', 'a']))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        // SAFETY: signal 0 only asks whether the process exists.
        if unsafe { libc::kill(pid, 0) } != 0 {
            let _ = Command::new("userdel").arg("-r").arg(name).output();
        }
    }
}

fn make_user(world: &Path, role: char) -> User {
    let name = format!("nvlrs{}{role}", std::process::id());
    let home = world.join(format!("home-{role}"));
    let o = Command::new("useradd")
        .args(["-M", "-N", "-s", "/bin/sh", "-d"])
        .arg(&home)
        .arg(&name)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "useradd: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let id = |flag: &str| -> u32 {
        let o = Command::new("id").arg(flag).arg(&name).output().unwrap();
        String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
    };
    let user = User {
        uid: id("-u"),
        gid: id("-g"),
        name,
        home,
    };
    std::fs::create_dir(&user.home).unwrap();
    std::os::unix::fs::chown(&user.home, Some(user.uid), Some(user.gid)).unwrap();
    std::fs::set_permissions(&user.home, std::fs::Permissions::from_mode(0o700)).unwrap();
    user
}

/// The world both users see: the binaries, the toolkit and the fixtures in a
/// world-readable folder, and `tmp/`, sticky and world-writable.
struct World {
    dir: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755)).unwrap();
        let bin = root.join("bin");
        std::fs::create_dir(&bin).unwrap();
        let exe = Path::new(env!("CARGO_BIN_EXE_nvlinkrs"));
        link_or_copy(exe, &bin.join("nvlinkrs"));
        link_or_copy(
            &exe.parent().unwrap().join("libnvJitLink.so"),
            &bin.join("libnvJitLink.so"),
        );
        // the toolkit, its files hard-linked (the same file, no copy)
        let cp = Command::new("cp")
            .arg("-rlL")
            .arg(cuda())
            .arg(root.join("cuda"))
            .status()
            .unwrap();
        if !cp.success() {
            let cp = Command::new("cp")
                .arg("-rL")
                .arg(cuda())
                .arg(root.join("cuda"))
                .status();
            assert!(cp.unwrap().success(), "cannot copy the toolkit");
        }
        let fx = root.join("fx");
        std::fs::create_dir(&fx).unwrap();
        for f in [
            "merge/a_90.cubin",
            "merge/b_90.cubin",
            "saxpy.ltoir",
            "scale.ltoir",
        ] {
            std::fs::copy(
                fixtures().join(f),
                fx.join(Path::new(f).file_name().unwrap()),
            )
            .unwrap();
        }
        let tmp = root.join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).unwrap();
        World { dir }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// `program` run as `user`, in its home, with a clean environment (the world's
    /// toolkit, the user's home as HOME) and `env`.
    fn command(&self, user: &User, program: &Path, env: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(program);
        cmd.uid(user.uid)
            .gid(user.gid)
            .current_dir(&user.home)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &user.home)
            .env("CUDA_HOME", self.path("cuda"))
            .envs(env.iter().copied())
            .stdin(Stdio::null());
        cmd
    }

    /// nvlinkrs run as `user` with `args`.
    fn link(&self, user: &User, args: &[String], env: &[(&str, &str)]) -> Output {
        self.command(user, &self.path("bin/nvlinkrs"), env)
            .args(args)
            .output()
            .unwrap()
    }

    /// A shell command run as `user`.
    fn sh(&self, user: &User, script: &str) -> Output {
        self.command(user, Path::new("/bin/sh"), &[])
            .args(["-c", script])
            .output()
            .unwrap()
    }

    /// The plain link of the two sm_90 cubins, its output `out`.
    fn cubins(&self, out: &Path) -> Vec<String> {
        vec![
            "-arch=sm_90".into(),
            self.path("fx/a_90.cubin").display().to_string(),
            self.path("fx/b_90.cubin").display().to_string(),
            "-o".into(),
            out.display().to_string(),
        ]
    }
}

fn link_or_copy(from: &Path, to: &Path) {
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).unwrap();
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// As `user`, `path` holds `content` (a file of its own, 0644).
fn plant(user: &User, path: &Path, content: &[u8]) {
    std::fs::write(path, content).unwrap();
    std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid)).unwrap();
}

/// As `user`, a symlink at `at` to `to`.
fn plant_link(user: &User, at: &Path, to: &Path) {
    std::os::unix::fs::symlink(to, at).unwrap();
    std::os::unix::fs::lchown(at, Some(user.uid), Some(user.gid)).unwrap();
}

/// As `user`, a folder at `at`, world-writable.
fn plant_dir(user: &User, at: &Path) {
    std::fs::create_dir_all(at).unwrap();
    std::os::unix::fs::chown(at, Some(user.uid), Some(user.gid)).unwrap();
    std::fs::set_permissions(at, std::fs::Permissions::from_mode(0o777)).unwrap();
}

#[test]
fn a_second_user_can_neither_read_nor_clobber_the_first() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    remove_stale_users();
    let world = World::new();
    let vic = make_user(world.dir.path(), 'v');
    let att = make_user(world.dir.path(), 'a');
    // the image a link of the victim's writes where nothing is in the way
    let cold_out = vic.home.join("cold.cubin");
    let cold = world.link(&vic, &world.cubins(&cold_out), &[("NVLINKRS_CACHE", "0")]);
    assert!(cold.status.success(), "{}", text(&cold.stderr));
    let cold = std::fs::read(&cold_out).unwrap();
    outputs(&world, &vic, &att);
    cache(&world, &vic, &att, &cold);
    shared_tier(&world, &vic, &att, &cold);
    daemon(&world, &vic, &att, &cold);
    drop_in(&world, &vic, &att);
}

/// `-o`, `--register-link-binaries` and `--report-json` never write through another user's
/// symlink in the sticky folder (was: the victim's file replaced by the image, a dangling
/// link's target created), as nvlink refuses with fs.protected_symlinks (`--report-json`
/// warns and the link goes on, as the time trace); the victim's own link there is followed.
fn outputs(world: &World, vic: &User, att: &User) {
    let tmp = world.path("tmp");
    let precious = vic.home.join("precious.txt");
    plant(vic, &precious, b"precious");
    let created = vic.home.join("created.txt");
    let cases = [
        ("out.cubin", &precious, vec![]),
        ("new.cubin", &created, vec![]),
        (
            "reg.c",
            &precious,
            vec!["--register-link-binaries".to_string()],
        ),
    ];
    for (name, target, option) in cases {
        let at = tmp.join(format!("att-{name}"));
        plant_link(att, &at, target);
        let mut args = world.cubins(&vic.home.join("mine.cubin"));
        if option.is_empty() {
            args = world.cubins(&at);
        } else {
            args.push(format!("{}={}", option[0], at.display()));
        }
        let o = world.link(vic, &args, &[("NVLINKRS_CACHE", "0")]);
        // (after the infos a link with a registration file prints, as nvlink's)
        let refused = format!(
            "nvlinkrs fatal   : Could not open output file '{}'\n  Permission denied (os error 13)\n",
            at.display()
        );
        assert_eq!(o.status.code(), Some(1), "{name}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).ends_with(&refused),
            "{name}: {}",
            text(&o.stderr)
        );
        assert_eq!(std::fs::read(&precious).unwrap(), b"precious", "{name}");
        assert!(
            !created.exists(),
            "{name}: the dangling link's target was made"
        );
    }
    // the report is a side file, as the time trace: the link is written, a warning names
    // the report and why, and the other user's link is not followed
    let at = tmp.join("att-report.json");
    plant_link(att, &at, &precious);
    let mut args = world.cubins(&vic.home.join("mine.cubin"));
    args.push(format!("--report-json={}", at.display()));
    let o = world.link(vic, &args, &[("NVLINKRS_CACHE", "0")]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stderr),
        format!(
            "nvlinkrs warning : the report '{}' was not written: the file there is another user's\n",
            at.display()
        )
    );
    assert_eq!(std::fs::read(&precious).unwrap(), b"precious");
    // the victim's own link in the same folder is followed
    let own = tmp.join("vic-out.cubin");
    let target = vic.home.join("target.cubin");
    plant_link(vic, &own, &target);
    let o = world.link(vic, &world.cubins(&own), &[("NVLINKRS_CACHE", "0")]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        std::fs::symlink_metadata(&own)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(std::fs::read(&target).unwrap().starts_with(b"\x7fELF"));
}

/// The victim's cache is private (0700, the attacker cannot list or read it); a cache
/// folder the attacker made first is refused (a warning, the link runs uncached, nothing
/// of the victim's lands there).
fn cache(world: &World, vic: &User, att: &User, cold: &[u8]) {
    let out = vic.home.join("cached.cubin");
    let o = world.link(vic, &world.cubins(&out), &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let dir = vic.home.join(".cache/nvlinkrs/links");
    assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
    let o = world.sh(att, &format!("ls -R '{}'", dir.display()));
    assert!(
        !o.status.success(),
        "the attacker listed the victim's cache"
    );
    let squatted = world.path("tmp/team-cache");
    plant_dir(att, &squatted);
    let o = world.link(
        vic,
        &world.cubins(&out),
        &[("NVLINKRS_CACHE_DIR", squatted.to_str().unwrap())],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains(&squatted.display().to_string()),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(std::fs::read(&out).unwrap(), cold);
    let o = Command::new("find")
        .arg(&squatted)
        .args(["-user", &vic.name])
        .output()
        .unwrap();
    assert_eq!(
        text(&o.stdout),
        "",
        "the victim wrote into the attacker's cache folder"
    );
}

/// A `file://` team folder (sticky, world-writable): the attacker's folders and links in
/// it are never written through (was: the victim's file replaced by the entry through a
/// planted link); an entry the attacker forged is rejected where the team's key is set
/// (the link's image is the cold one), and without a key a read-only link that used the
/// tier says its entries are not authenticated; the victim's own entries cannot be
/// changed by the attacker.
fn shared_tier(world: &World, vic: &User, att: &User, cold: &[u8]) {
    // the attacker learns the entry's name from the same link into a tier of its own
    let own = att.home.join("tier");
    let env = |tier: &Path| {
        vec![(
            "NVLINKRS_REMOTE_CACHE".to_string(),
            format!("file://{}", tier.display()),
        )]
    };
    let as_env = |e: &[(String, String)]| -> Vec<(String, String)> { e.to_vec() };
    let run = |user: &User, out: &Path, e: &[(String, String)], cache: &str| {
        let mut all: Vec<(&str, &str)> = e.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        all.push(("NVLINKRS_CACHE_DIR", cache));
        world.link(user, &world.cubins(out), &all)
    };
    let o = run(
        att,
        &att.home.join("a.cubin"),
        &as_env(&env(&own)),
        &format!("{}/c1", att.home.display()),
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = world.sh(
        att,
        &format!("cd '{}' && find nvlinkrs -type f", own.display()),
    );
    let entry = text(&o.stdout).trim().to_string();
    assert_eq!(entry.matches('\n').count(), 0, "one entry: {entry}");
    let team = world.path("tmp/team");
    plant_dir(att, &team);
    // a link where the entry goes, in folders of the attacker's
    let (fan, _) = entry.rsplit_once('/').unwrap();
    plant_dir(att, &team.join("nvlinkrs"));
    plant_dir(att, &team.join(fan));
    let precious = vic.home.join("precious3.txt");
    plant(vic, &precious, b"precious");
    plant_link(att, &team.join(&entry), &precious);
    let team_env = env(&team);
    let vcache = |n: &str| format!("{}/{n}", vic.home.display());
    let o = run(vic, &vic.home.join("t1.cubin"), &team_env, &vcache("c1"));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(std::fs::read(&precious).unwrap(), b"precious");
    assert_eq!(std::fs::read(vic.home.join("t1.cubin")).unwrap(), cold);
    let warning = text(&o.stderr);
    assert!(warning.contains("is a symbolic link, refused"), "{warning}");
    // the attacker's folder, no link in it: the victim does not write there either
    std::fs::remove_file(team.join(&entry)).unwrap();
    let o = run(vic, &vic.home.join("t2.cubin"), &team_env, &vcache("c2"));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("belongs to another user"),
        "{}",
        text(&o.stderr)
    );
    assert!(!team.join(&entry).exists());
    // a forged entry (another image, every check of the format passing)
    let forged = forge(&entry, b"\x7fELF forged image");
    plant(att, &team.join(&entry), &forged);
    let mut keyed = team_env.clone();
    keyed.push(("NVLINKRS_REMOTE_CACHE_KEY".into(), "team secret".into()));
    let o = run(vic, &vic.home.join("t3.cubin"), &keyed, &vcache("c3"));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(std::fs::read(vic.home.join("t3.cubin")).unwrap(), cold);
    let mut read_only = team_env.clone();
    read_only.push(("NVLINKRS_REMOTE_CACHE_MODE".into(), "read-only".into()));
    let o = run(vic, &vic.home.join("t4.cubin"), &read_only, &vcache("c4"));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr)
            .contains("its entries are not authenticated (NVLINKRS_REMOTE_CACHE_KEY is not set)"),
        "{}",
        text(&o.stderr)
    );
    // the victim's own entries, in a team folder of its own: the attacker cannot change them
    let vteam = world.path("tmp/vteam");
    let o = run(vic, &vic.home.join("t5.cubin"), &env(&vteam), &vcache("c5"));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let e = vteam.join(&entry);
    let before = std::fs::read(&e).unwrap();
    world.sh(
        att,
        &format!(
            "echo x > '{0}'; mv -f /dev/null '{0}'; rm -f '{0}'",
            e.display()
        ),
    );
    assert_eq!(
        std::fs::read(&e).ok(),
        Some(before),
        "the attacker changed the victim's entry"
    );
}

/// A whole-link entry of the shared tier at `entry` (its key's digest in its name)
/// holding `image`: the header's length, digest and content hash all as a real one's.
fn forge(entry: &str, image: &[u8]) -> Vec<u8> {
    let hex: String = entry.split('/').skip(1).collect();
    let digest: Vec<u8> = (0..32)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let content = nvlinkrs::cache::pack(&[image, b"0", b"", b""]);
    let mut out = b"NVLRSC\x00\x03".to_vec();
    out.extend_from_slice(&(content.len() as u64).to_le_bytes());
    out.extend_from_slice(&digest);
    out.extend_from_slice(blake3::hash(&content).as_bytes());
    // (the cold time the entry took to make)
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&content);
    out
}

/// The daemon: a runtime folder the attacker made first is refused (the link runs in
/// process, with the cold image); the victim's own daemon cannot be reached by the
/// attacker.
fn daemon(world: &World, vic: &User, att: &User, cold: &[u8]) {
    let shared = world.path("tmp");
    plant_dir(att, &shared.join("nvlinkrs"));
    let out = vic.home.join("d1.cubin");
    let env = [
        ("NVLINKRS_DAEMON", "1"),
        ("XDG_RUNTIME_DIR", shared.to_str().unwrap()),
        ("NVLINKRS_CACHE", "0"),
    ];
    let o = world.link(vic, &world.cubins(&out), &env);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(std::fs::read(&out).unwrap(), cold);
    assert!(!shared.join("nvlinkrs/daemon.sock").exists());
    // the victim's daemon, in its own runtime folder (where the attacker can look)
    let run = world.path("tmp/vrun");
    std::fs::create_dir(&run).unwrap();
    std::os::unix::fs::chown(&run, Some(vic.uid), Some(vic.gid)).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755)).unwrap();
    let env = [
        ("NVLINKRS_DAEMON", "1"),
        ("XDG_RUNTIME_DIR", run.to_str().unwrap()),
        ("NVLINKRS_CACHE", "0"),
    ];
    let out2 = vic.home.join("d2.cubin");
    let o = world.link(vic, &world.cubins(&out2), &env);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        run.join("nvlinkrs/daemon.sock").exists(),
        "no daemon started"
    );
    let stolen = world.path("tmp/stolen.cubin");
    let only = [
        ("NVLINKRS_DAEMON", "only"),
        ("XDG_RUNTIME_DIR", run.to_str().unwrap()),
    ];
    let o = world.link(att, &world.cubins(&stolen), &only);
    let stop = world
        .command(vic, &world.path("bin/nvlinkrs"), &env)
        .args(["daemon", "stop"])
        .output()
        .unwrap();
    assert!(
        !o.status.success(),
        "the attacker's link went through the victim's daemon"
    );
    assert!(!stolen.exists());
    assert!(stop.status.success(), "{}", text(&stop.stderr));
}

/// The drop-in stages a link's inputs in a folder no other user can read (0700; was
/// 0755 with 0644 files): while a victim's `-lto` link runs (made slow by a ptxas
/// launcher), the attacker can read none of the staged files.
fn drop_in(world: &World, vic: &User, att: &User) {
    let exe = world.path("bin/link");
    let cc = Command::new("cc")
        .arg("-I")
        .arg(world.path("cuda/include"))
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/jitlink/link.c"))
        .arg("-o")
        .arg(&exe)
        .arg(world.path("cuda/lib/libnvJitLink.so.13"))
        .output()
        .unwrap();
    assert!(cc.status.success(), "{}", text(&cc.stderr));
    let slow = world.path("bin/slow.sh");
    std::fs::write(&slow, "#!/bin/sh\nsleep 3\nexec \"$@\"\n").unwrap();
    std::fs::set_permissions(&slow, std::fs::Permissions::from_mode(0o755)).unwrap();
    let tmp = world.path("tmp");
    let before: Vec<PathBuf> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let lib = world.path("cuda/lib");
    let preload = world.path("bin/libnvJitLink.so");
    let env = [
        ("LD_LIBRARY_PATH", lib.to_str().unwrap()),
        ("LD_PRELOAD", preload.to_str().unwrap()),
        ("TMPDIR", tmp.to_str().unwrap()),
        ("NVLINKRS_CACHE", "0"),
        ("NVLINKRS_PTXAS_LAUNCHER", slow.to_str().unwrap()),
    ];
    let mut child = world
        .command(vic, &exe, &env)
        .arg("sm_90")
        .arg(vic.home.join("jit.cubin"))
        .arg(world.path("fx/saxpy.ltoir"))
        .arg(world.path("fx/scale.ltoir"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let mut staged = Vec::new();
    while start.elapsed() < Duration::from_secs(60) && child.try_wait().unwrap().is_none() {
        for e in std::fs::read_dir(&tmp).unwrap().flatten() {
            let p = e.path();
            let m = e.metadata().unwrap();
            if m.is_dir()
                && m.uid() == vic.uid
                && !before.contains(&p)
                && p.join("in0.ltoir").exists()
                && !staged.contains(&p)
            {
                let o = world.sh(att, &format!("cat '{}'/in0.ltoir > /dev/null", p.display()));
                assert!(
                    !o.status.success(),
                    "the attacker read the victim's staged input"
                );
                assert_eq!(m.mode() & 0o777, 0o700, "{}", p.display());
                staged.push(p);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stdout));
    assert!(
        !staged.is_empty(),
        "no staging folder seen in {}",
        tmp.display()
    );
    assert!(
        staged.iter().all(|p| !p.exists()),
        "a staging folder was left"
    );
}
