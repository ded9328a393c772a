//! What the cache trusts on disk, and how it checks it: the cache directory is one it
//! created or one marked as a cache of nvlinkrs (`CACHEDIR.TAG`), owned by this user and
//! writable by nobody else, never a symbolic link; entries are opened without following
//! links or blocking, and only regular files of a bounded size are read; only names the
//! cache itself gives (hex digests, its temporary files) are ever listed or deleted.

use std::fs;
use std::io::{ErrorKind, Read};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use crate::diag::{Error, Result};

/// The marker of a cache root, in the Cache Directory Tagging format (backup tools skip a
/// directory holding it); its second line says the cache is nvlinkrs's.
pub const MARKER: &str = "CACHEDIR.TAG";
const MARKER_TEXT: &str = "Signature: 8a477f597d28d172789f06886806bc55\n\
# This file is a cache directory tag created by nvlinkrs.\n\
# nvlinkrs deletes only its own entries below this directory.\n";

/// The prefix of the cache's temporary files (written, then renamed into place).
pub const TMP_PREFIX: &str = ".tmp-";

fn refuse(dir: &Path, why: &str) -> Error {
    Error::fatal(format!(
        "cache: '{}' {why}; refusing to use it",
        dir.display()
    ))
}

fn me() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// What makes `dir` unsafe for nvlinkrs's own files, if anything: checked without
/// following a link, it must be a directory of this user with none of the `forbidden`
/// mode bits (else `open`, the words for that). The daemon's socket directory shares it.
pub(crate) fn unsafe_dir(
    dir: &Path,
    forbidden: u32,
    open: &'static str,
) -> std::io::Result<Option<&'static str>> {
    let meta = fs::symlink_metadata(dir)?;
    Ok(if meta.file_type().is_symlink() {
        Some("is a symbolic link")
    } else if !meta.is_dir() {
        Some("is not a directory")
    } else if meta.uid() != me() {
        Some("belongs to another user")
    } else if meta.mode() & forbidden != 0 {
        Some(open)
    } else {
        None
    })
}

/// Checks that `dir` (not followed if a link) is a directory of this user that nobody else
/// can write to.
fn check_private(dir: &Path) -> Result<()> {
    match unsafe_dir(dir, 0o022, "can be written by other users") {
        Ok(None) => Ok(()),
        Ok(Some(why)) => Err(refuse(dir, why)),
        Err(e) => Err(Error::fatal(format!(
            "cache: cannot read '{}': {e}",
            dir.display()
        ))),
    }
}

/// Refuses to make a missing cache root `dir` (or its missing parents) inside a folder of
/// another user than root: a link run as root with a user's `HOME` (`sudo -E`, a build
/// container with the home mounted) made that user's `~/.cache` root's, and the user's
/// pip, ccache and nvlinkrs could no longer write there (attacker review of 2026-12-01).
/// nvlink writes nothing under `HOME`: the link goes on without the cache. (Root's own
/// folders, `/tmp` say, are anyone's to make a folder in where their mode allows.)
fn not_in_another_users_folder(dir: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let existing = dir.ancestors().skip(1).find_map(|a| {
        let a = if a.as_os_str().is_empty() {
            Path::new(".")
        } else {
            a
        };
        fs::metadata(a).ok().map(|m| (a.to_path_buf(), m.uid()))
    });
    match existing {
        Some((folder, owner)) if owner != me() && owner != 0 => Err(Error::fatal(format!(
            "cache: will not create '{}' in '{}', which belongs to another user (uid {owner})",
            dir.display(),
            folder.display()
        ))),
        _ => Ok(()),
    }
}

/// Creates `dir` private (0700) when it does not exist; true when this call created it.
fn create_private(dir: &Path) -> Result<bool> {
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(Error::fatal(format!(
            "cache: cannot create '{}': {e}",
            dir.display()
        ))),
    }
}

/// A directory inside the cache (`objects/`, `objects/xx/`, `tools/`): created private,
/// else checked.
pub fn private_subdir(dir: &Path) -> Result<()> {
    create_private(dir)?;
    check_private(dir)
}

/// Makes `dir` the root of a cache or checks that it may be one: created private when
/// missing (its parents as any directory), else it must be private to this user and
/// either hold the marker, or be empty or hold only a cache's own subdirectories with
/// names the cache gives (a cache of an earlier version); the marker is then written.
/// Nothing of a directory that fails is changed.
pub fn claim_root(dir: &Path) -> Result<()> {
    if fs::symlink_metadata(dir).is_err() {
        not_in_another_users_folder(dir)?;
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent).map_err(|e| {
                Error::fatal(format!("cache: cannot create '{}': {e}", parent.display()))
            })?;
        }
    }
    create_private(dir)?;
    check_private(dir)?;
    if claimed(dir) || unclaimed_listing(dir)? == Listing::ClaimedMeanwhile {
        return Ok(());
    }
    let marker = dir.join(MARKER);
    let mut tmp = tempfile::Builder::new()
        .prefix(TMP_PREFIX)
        .tempfile_in(dir)
        .map_err(|e| Error::fatal(format!("cache: cannot write in '{}': {e}", dir.display())))?;
    std::io::Write::write_all(&mut tmp, MARKER_TEXT.as_bytes())
        .map_err(|e| Error::fatal(format!("cache: cannot write '{}': {e}", marker.display())))?;
    tmp.persist(&marker)
        .map_err(|e| Error::fatal(format!("cache: cannot write '{}': {e}", marker.display())))?;
    Ok(())
}

/// Whether `dir` holds nvlinkrs's marker: a cache root already claimed.
fn claimed(dir: &Path) -> bool {
    read_regular(&dir.join(MARKER), 4096)
        .is_ok_and(|text| text.is_some_and(|t| t.starts_with(MARKER_TEXT.as_bytes())))
}

/// What the listing of a root without the marker found ([`unclaimed_listing`]).
#[derive(Debug, PartialEq, Eq)]
enum Listing {
    /// Only what a cache of nvlinkrs holds: the root may be claimed.
    OnlyOurs,
    /// nvlinkrs's marker, put there by a link that claimed the root since this one looked.
    ClaimedMeanwhile,
}

/// Lists a root that held no marker when [`claim_root`] looked: refused unless it holds only
/// a cache's own files and folders, or the marker another link has claimed it with since
/// (links starting together in a new cache; was a refusal, "it has 'CACHEDIR.TAG'", and
/// the default cache's refusal is silent: those links went uncached and uncounted, 3 of
/// 8 counted in a CI run of tests/observe.rs `concurrent_links_lose_no_count_in_the_stats`).
fn unclaimed_listing(dir: &Path) -> Result<Listing> {
    let cannot =
        |e: std::io::Error| Error::fatal(format!("cache: cannot read '{}': {e}", dir.display()));
    for e in fs::read_dir(dir).map_err(cannot)? {
        let e = e.map_err(cannot)?;
        let name = e.file_name();
        let ours = match name.to_str() {
            Some(MARKER) if claimed(dir) => return Ok(Listing::ClaimedMeanwhile),
            Some("objects") => only_names(&e.path(), is_fan_name),
            Some("tools") => only_names(&e.path(), is_tool_name),
            Some("explain") => only_names(&e.path(), is_record_name),
            Some(STATS | SHARED_STATS | TRIMMED) => e.file_type().is_ok_and(|t| t.is_file()),
            // (another link making the cache at once: its marker on its way in; was a
            // refused cache, so links starting together in a new cache went uncached and
            // uncounted, tests/observe.rs concurrent_links_lose_no_count_in_the_stats)
            Some(n) if n.starts_with(TMP_PREFIX) => e.file_type().is_ok_and(|t| t.is_file()),
            _ => false,
        };
        if !ours {
            return Err(refuse(
                dir,
                &format!(
                    "is not empty and holds no {MARKER} of nvlinkrs (it has '{}')",
                    name.to_string_lossy()
                ),
            ));
        }
    }
    Ok(Listing::OnlyOurs)
}

/// True when `dir` is a real directory holding only names `own` accepts (or temporary
/// files of the cache).
fn only_names(dir: &Path, own: fn(&str) -> bool) -> bool {
    fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir())
        && fs::read_dir(dir).is_ok_and(|list| {
            list.flatten().all(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| own(n) || n.starts_with(TMP_PREFIX))
            })
        })
}

/// Why a file of the cache was not read.
#[derive(Debug)]
pub enum Unreadable {
    /// It does not exist: a plain miss.
    Missing,
    /// It exists but is no regular file, is too large, or cannot be read: corrupt.
    Bad,
}

/// Reads the regular file at `path`, without following a link at its last component and
/// without blocking on a FIFO or device, when it holds at most `max` bytes; the file stays
/// open for the caller (to touch it).
pub fn open_regular(path: &Path, max: u64) -> std::result::Result<(fs::File, Vec<u8>), Unreadable> {
    let mut f = fs::File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.kind() {
            ErrorKind::NotFound => Unreadable::Missing,
            _ => Unreadable::Bad,
        })?;
    let meta = f.metadata().map_err(|_| Unreadable::Bad)?;
    if !meta.is_file() || meta.len() > max {
        return Err(Unreadable::Bad);
    }
    let mut data = Vec::with_capacity(meta.len() as usize);
    (&mut f)
        .take(max + 1)
        .read_to_end(&mut data)
        .map_err(|_| Unreadable::Bad)?;
    if data.len() as u64 > max {
        return Err(Unreadable::Bad);
    }
    Ok((f, data))
}

/// [`open_regular`]'s content: `Ok(None)` when missing, an error when bad.
pub fn read_regular(path: &Path, max: u64) -> std::result::Result<Option<Vec<u8>>, Unreadable> {
    match open_regular(path, max) {
        Ok((_, d)) => Ok(Some(d)),
        Err(Unreadable::Missing) => Ok(None),
        Err(e) => Err(e),
    }
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// True for the name of a fan-out directory under `objects/` (two hex digits).
pub fn is_fan_name(name: &str) -> bool {
    is_hex(name, 2)
}

/// True for an entry's file name inside its fan-out directory (the digest's other 62 hex
/// digits).
pub fn is_entry_name(name: &str) -> bool {
    is_hex(name, 62)
}

/// The files of the cache's root besides its folders: the counters (`stats`), the shared
/// tier's counters (`remote`), the stamp of the last trim (`trim`). Named here, where
/// [`claim_root`] checks a root, and used there.
pub const STATS: &str = "stats.json";
pub const SHARED_STATS: &str = "shared-stats.json";
pub const TRIMMED: &str = "trimmed";

/// True for an explanation record's file name under `explain/`: 64 hex digits and
/// `.json` (`records`).
pub fn is_record_name(name: &str) -> bool {
    name.strip_suffix(".json")
        .is_some_and(|h| digest_bytes(h).is_some())
}

/// True for a remembered tool identity's file name under `tools/` (a digest).
pub fn is_tool_name(name: &str) -> bool {
    is_hex(name, 64)
}

/// The 32 bytes of a key digest from its hex form.
pub fn digest_bytes(hex: &str) -> Option<[u8; 32]> {
    if !is_hex(hex, 64) {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link that looked for the marker before another link put it there, and lists the
    /// root after, takes the cache that link claimed (was: refused, silently for the
    /// default cache; the second half of that race, which cannot be timed here, is the
    /// listing of a root holding the marker). Another tool's `CACHEDIR.TAG` is still no
    /// claim.
    #[test]
    fn a_root_claimed_meanwhile_by_another_link_is_taken() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("links");
        claim_root(&root).unwrap();
        std::fs::create_dir(root.join("objects")).unwrap();
        std::fs::write(root.join(STATS), "{}").unwrap();
        assert_eq!(unclaimed_listing(&root).unwrap(), Listing::ClaimedMeanwhile);
        std::fs::write(
            root.join(MARKER),
            "Signature: 8a477f597d28d172789f06886806bc55\n# ccache\n",
        )
        .unwrap();
        let e = unclaimed_listing(&root).unwrap_err();
        assert!(
            e.message().ends_with("is not empty and holds no CACHEDIR.TAG of nvlinkrs (it has 'CACHEDIR.TAG'); refusing to use it"),
            "{}",
            e.message()
        );
        assert!(claim_root(&root).is_err());
    }
}
