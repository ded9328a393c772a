//! Temporary files and folders a link leaves while it runs, and the one rule that
//! reclaims those a killed process left: named with the process id, they go once that
//! process no longer runs and they have not changed for [`LEFTOVER_AGE`]. The private
//! scratch folders ([`private_dir`]: ptxas's jobs, the drop-in libnvJitLink's staged
//! inputs) are made 0700 in the system's temporary folder, so that no other user reads
//! what a link stages there; the first one a process makes reclaims this user's folders of
//! the same kind that dead processes left. The output's temporaries are reclaimed by
//! `output` with [`abandoned`].

use std::path::Path;
use std::time::Duration;

/// How long a temporary file of a process that no longer runs here is left alone (a
/// directory shared over the network may hold another machine's link in progress).
pub(crate) const LEFTOVER_AGE: Duration = Duration::from_secs(60);

/// A private folder (0700) in the system's temporary folder for one piece of work of
/// the kind `tag` (`ptxas`, `nvjitlink`, `finalizer`: the worker's socket), named
/// `nvlinkrs-TAG-PID-XXXXXX`: the first one
/// of its kind this process makes removes those of this user's processes that were
/// killed before they removed theirs, unless another process did within [`LEFTOVER_AGE`]
/// ([`reclaim_due`]). Removed when dropped.
pub fn private_dir(tag: &str) -> std::io::Result<tempfile::TempDir> {
    use std::collections::BTreeSet;
    use std::sync::Mutex;
    static RECLAIMED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let mut b = tempfile::Builder::new();
    let prefix = format!("nvlinkrs-{tag}-{}-", std::process::id());
    b.prefix(&prefix);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        b.permissions(std::fs::Permissions::from_mode(0o700));
    }
    in_a_temporary_folder(|tmp| {
        let first = RECLAIMED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(format!("{tag}\0{}", tmp.display()));
        if first && reclaim_due(tmp, tag) {
            reclaim(tmp, tag, LEFTOVER_AGE);
        }
        b.tempdir_in(tmp)
    })
}

/// `make` run in the system's temporary folder (`TMPDIR`), or where that fails (a
/// `TMPDIR` not writable, missing or a file: a sandbox's or a batch job's) in `/tmp`, then
/// `/var/tmp`: nvlink makes no temporary file, so a link must not fail for want of one
/// where another folder serves. The first folder's error where every one fails.
pub fn in_a_temporary_folder<T>(
    mut make: impl FnMut(&Path) -> std::io::Result<T>,
) -> std::io::Result<T> {
    let first = std::env::temp_dir();
    let mut error = None;
    for tmp in [first.as_path(), Path::new("/tmp"), Path::new("/var/tmp")] {
        if error.is_some() && tmp == first {
            continue;
        }
        match make(tmp) {
            Ok(t) => return Ok(t),
            Err(e) => {
                error.get_or_insert(e);
            }
        }
    }
    Err(error.expect("a folder was tried"))
}

/// Whether this user's `tag` folders in `tmp` are to be reclaimed now: not when this
/// user's stamp (`nvlinkrs-reclaimed-TAG-UID`) says a process did within
/// [`LEFTOVER_AGE`] (reading a large temporary folder whole cost a process's first link,
/// the drop-in's cache hit, up to a millisecond). The stamp is an empty file of its own,
/// made new (`O_EXCL`) or found as this user's regular file with no other name (a hard
/// link to another file of the user's is no stamp), and touched when due; nothing is ever
/// written into it. Where it is none of that, every process reclaims, as without it.
fn reclaim_due(tmp: &Path, tag: &str) -> bool {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    // SAFETY: geteuid cannot fail
    let uid = unsafe { libc::geteuid() };
    let stamp = tmp.join(format!("nvlinkrs-reclaimed-{tag}-{uid}"));
    let flags = libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(flags)
        .open(&stamp);
    if made.is_ok() {
        return true;
    }
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(&stamp)
    else {
        return true;
    };
    let Ok(m) = file.metadata() else {
        return true;
    };
    if !m.is_file() || m.uid() != uid || m.nlink() != 1 || m.size() != 0 {
        return true;
    }
    let fresh = !changed_before(&m, LEFTOVER_AGE);
    if !fresh {
        let _ = file.set_modified(std::time::SystemTime::now());
    }
    !fresh
}

/// Removes the `tag` folders in `tmp` of this user's processes that no longer run,
/// unchanged for `age`.
fn reclaim(tmp: &Path, tag: &str, age: Duration) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    let prefix = format!("nvlinkrs-{tag}-");
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
            continue;
        };
        let pid = rest.split('-').next().and_then(|p| p.parse::<i32>().ok());
        // (symlink_metadata: a link planted under such a name is no folder of ours)
        let left = e.metadata().is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt;
            m.is_dir() && m.uid() == unsafe { libc::geteuid() } && abandoned(pid, &m, age)
        });
        if left {
            std::fs::remove_dir_all(e.path()).ok();
        }
    }
}

/// Whether a temporary file or folder of process `pid` (named in it), described by `m`,
/// was left behind: that process no longer runs, and it has not changed for `age`
/// ([`LEFTOVER_AGE`] outside tests).
pub(crate) fn abandoned(pid: Option<i32>, m: &std::fs::Metadata, age: Duration) -> bool {
    pid.is_some_and(|pid| pid > 0 && !process_runs(pid)) && changed_before(m, age)
}

/// Whether `m`'s file was last changed (written, renamed) longer than `age` ago.
fn changed_before(m: &std::fs::Metadata, age: Duration) -> bool {
    use std::os::unix::fs::MetadataExt;
    let changed = std::time::UNIX_EPOCH + Duration::from_secs(m.ctime().max(0) as u64);
    changed.elapsed().is_ok_and(|e| e >= age)
}

/// Whether a process with this id runs (one of another user's counts).
fn process_runs(pid: i32) -> bool {
    // SAFETY: signal 0 only asks whether the process exists.
    let sent = unsafe { libc::kill(pid, 0) };
    sent == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn a_reclaim_stamps_the_folder_for_the_next_minute() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(reclaim_due(tmp.path(), "nvjitlink"));
        assert!(!reclaim_due(tmp.path(), "nvjitlink"));
        // (another kind has its own stamp)
        assert!(reclaim_due(tmp.path(), "ptxas"));
        // a hard link to a file of the user's: no stamp, and nothing written into it
        let hard = tempfile::tempdir().unwrap();
        let precious = hard.path().join("precious");
        std::fs::write(&precious, b"IMPORTANT").unwrap();
        let named = hard
            .path()
            .join(format!("nvlinkrs-reclaimed-ptxas-{}", unsafe {
                libc::geteuid()
            }));
        std::fs::hard_link(&precious, &named).unwrap();
        assert!(reclaim_due(hard.path(), "ptxas"));
        assert!(reclaim_due(hard.path(), "ptxas"));
        assert_eq!(std::fs::read(&precious).unwrap(), b"IMPORTANT");
        // a link where the stamp would be: followed by no one, every process reclaims
        let other = tempfile::tempdir().unwrap();
        let uid = unsafe { libc::geteuid() };
        let stamp = other.path().join(format!("nvlinkrs-reclaimed-ptxas-{uid}"));
        std::os::unix::fs::symlink(other.path().join("target"), &stamp).unwrap();
        assert!(reclaim_due(other.path(), "ptxas"));
        assert!(reclaim_due(other.path(), "ptxas"));
        assert!(!other.path().join("target").exists());
    }

    #[test]
    fn private_dirs_are_private_and_reclaimed() {
        use std::os::unix::fs::PermissionsExt;
        for tag in ["ptxas", "nvjitlink"] {
            let d = private_dir(tag).unwrap();
            let mode = std::fs::metadata(d.path()).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
            let name = d.path().file_name().unwrap().to_string_lossy().into_owned();
            assert!(name.starts_with(&format!("nvlinkrs-{tag}-{}-", std::process::id())));
        }
        // a killed link's folder goes, a running one's, another kind's and others stay
        let tmp = tempfile::tempdir().unwrap();
        let mut child = Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        for n in [
            format!("nvlinkrs-nvjitlink-{dead}-abc"),
            format!("nvlinkrs-nvjitlink-{}-abc", std::process::id()),
            format!("nvlinkrs-ptxas-{dead}-abc"),
            format!("other-{dead}-abc"),
        ] {
            std::fs::create_dir(tmp.path().join(&n)).unwrap();
            std::fs::write(tmp.path().join(n).join("in0.ltoir"), b"x").unwrap();
        }
        reclaim(tmp.path(), "nvjitlink", LEFTOVER_AGE);
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 4);
        reclaim(tmp.path(), "nvjitlink", Duration::ZERO);
        let mut left: Vec<String> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                format!("nvlinkrs-nvjitlink-{}-abc", std::process::id()),
                format!("nvlinkrs-ptxas-{dead}-abc"),
                format!("other-{dead}-abc"),
            ]
        );
    }
}
