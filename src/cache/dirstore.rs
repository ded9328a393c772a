//! The `file://` shared tier: a directory several users or machines reach (an NFS mount,
//! a team folder), read and written here without OpenDAL, because such a folder is
//! writable by others. Every step below the root is opened relative to the folder before
//! it without following a link (`O_NOFOLLOW`): a link planted at an entry or a fan-out
//! folder is refused, never followed to another file. Entries are written to a temporary
//! name in their folder and renamed into place (a reader never sees half an entry, and a
//! link planted at the entry's name is replaced, not written through), and only into
//! folders this user owns: a folder another user made (and could change at will) is
//! refused for writing. Reads take regular files only, and at most what the caller wants.

use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::diag::{Error, Result};

/// What a store's `read` asks of an object's first bytes: the length the whole object
/// should have, or `None` to stop reading there.
pub type Want<'a> = dyn Fn(&[u8]) -> Option<u64> + 'a;

/// A `file://` store rooted at a folder.
pub struct DirStore {
    root: PathBuf,
}

fn c(name: &[u8]) -> Result<CString> {
    CString::new(name).map_err(|_| Error::fatal("a path holds a NUL byte"))
}

/// `openat(dir, name, flags)`, the descriptor owned.
fn open_at(
    dir: libc::c_int,
    name: &[u8],
    flags: libc::c_int,
    mode: libc::mode_t,
) -> std::io::Result<OwnedFd> {
    let name = c(name).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: a valid NUL-terminated name; the descriptor returned is owned by the caller.
    let fd = unsafe {
        libc::openat(
            dir,
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor just opened, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `fstat` of a descriptor.
fn stat(fd: &OwnedFd) -> std::io::Result<libc::stat> {
    // SAFETY: fstat fills the zeroed struct for a valid descriptor.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st)
}

/// What a refused step says: a link, or not what it should be.
fn refused(shown: &Path, e: std::io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::ELOOP) => Error::fatal(format!(
            "'{}' is a symbolic link, refused (a shared folder's entries are never followed elsewhere)",
            shown.display()
        )),
        Some(libc::ENOTDIR) => Error::fatal(format!("'{}' is not a folder", shown.display())),
        _ => Error::fatal(format!("cannot open '{}': {e}", shown.display())),
    }
}

impl DirStore {
    pub fn open(root: &str) -> Result<DirStore> {
        Ok(DirStore {
            root: PathBuf::from(root),
        })
    }

    /// The root folder (created when missing), opened.
    fn root_fd(&self, create: bool) -> Result<Option<OwnedFd>> {
        if create {
            std::fs::create_dir_all(&self.root)
                .map_err(|e| Error::fatal(format!("cannot make '{}': {e}", self.root.display())))?;
        }
        let flags = libc::O_RDONLY | libc::O_DIRECTORY;
        match open_at(libc::AT_FDCWD, self.root.as_os_str().as_bytes(), flags, 0) {
            Ok(fd) => Ok(Some(fd)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(refused(&self.root, e)),
        }
    }

    /// The folders of `path` (all but its last part) opened one below the other without
    /// following links; with `create`, made when missing and refused unless this user
    /// owns them. `None` where one is missing (reading).
    fn folder_of(&self, path: &str, create: bool) -> Result<Option<(OwnedFd, String)>> {
        let Some(mut dir) = self.root_fd(create)? else {
            return Ok(None);
        };
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let Some((last, folders)) = parts.split_last() else {
            return Err(Error::fatal(format!("'{path}' names no entry")));
        };
        let mut shown = self.root.clone();
        for name in folders {
            shown.push(name);
            if create {
                let n = c(name.as_bytes())?;
                // SAFETY: a valid descriptor and name; EEXIST is the usual answer.
                if unsafe { libc::mkdirat(dir.as_raw_fd(), n.as_ptr(), 0o777) } != 0 {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::AlreadyExists {
                        return Err(Error::fatal(format!(
                            "cannot make '{}': {e}",
                            shown.display()
                        )));
                    }
                }
            }
            let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;
            dir = match open_at(dir.as_raw_fd(), name.as_bytes(), flags, 0) {
                Ok(fd) => fd,
                Err(e) if !create && e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(refused(&shown, e)),
            };
            if create {
                let st = stat(&dir).map_err(|e| refused(&shown, e))?;
                // SAFETY: geteuid has no preconditions.
                let me = unsafe { libc::geteuid() };
                if st.st_uid != me {
                    return Err(Error::fatal(format!(
                        "'{}' belongs to another user (uid {}): entries are written only into folders of one's own",
                        shown.display(),
                        st.st_uid
                    )));
                }
            }
        }
        Ok(Some((dir, last.to_string())))
    }

    /// The entry at `path`, read as [`super::store::Store::read`] says; `None` when there
    /// is none. A link or anything but a regular file there is refused (an error).
    pub fn read(&self, path: &str, head: usize, want: &Want<'_>) -> Result<Option<Vec<u8>>> {
        let Some((dir, name)) = self.folder_of(path, false)? else {
            return Ok(None);
        };
        let shown = self.root.join(path);
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK;
        let fd = match open_at(dir.as_raw_fd(), name.as_bytes(), flags, 0) {
            Ok(fd) => fd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(refused(&shown, e)),
        };
        let st = stat(&fd).map_err(|e| refused(&shown, e))?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(Error::fatal(format!(
                "'{}' is not a regular file",
                shown.display()
            )));
        }
        let mut file = std::fs::File::from(fd);
        let io =
            |e: std::io::Error| Error::fatal(format!("cannot read '{}': {e}", shown.display()));
        let mut data = Vec::new();
        (&mut file)
            .take(head as u64)
            .read_to_end(&mut data)
            .map_err(io)?;
        if data.len() < head {
            return Ok(Some(data));
        }
        let Some(total) = want(&data) else {
            return Ok(Some(data));
        };
        // (one byte more than wanted: a longer file fails the caller's check)
        let more = total.saturating_add(1).saturating_sub(data.len() as u64);
        file.take(more).read_to_end(&mut data).map_err(io)?;
        Ok(Some(data))
    }

    /// Writes `data` at `path`: a new file in the entry's folder (this user's), renamed
    /// over the entry's name.
    pub fn write(&self, path: &str, data: &[u8]) -> Result<()> {
        use std::io::Write;
        let Some((dir, name)) = self.folder_of(path, true)? else {
            return Err(Error::fatal(format!(
                "cannot open '{}'",
                self.root.display()
            )));
        };
        let shown = self.root.join(path);
        let io =
            |e: std::io::Error| Error::fatal(format!("cannot write '{}': {e}", shown.display()));
        let tmp = format!(
            ".{name}.{}.{}.tmp",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        );
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
        let fd = open_at(dir.as_raw_fd(), tmp.as_bytes(), flags, 0o666).map_err(io)?;
        let (t, n) = (c(tmp.as_bytes())?, c(name.as_bytes())?);
        let unlink = || {
            // SAFETY: valid descriptor and name; the temporary is ours (O_EXCL).
            unsafe { libc::unlinkat(dir.as_raw_fd(), t.as_ptr(), 0) };
        };
        let mut file = std::fs::File::from(fd);
        if let Err(e) = file.write_all(data) {
            unlink();
            return Err(io(e));
        }
        // SAFETY: valid descriptors and names; a link at the entry's name is replaced.
        if unsafe { libc::renameat(dir.as_raw_fd(), t.as_ptr(), dir.as_raw_fd(), n.as_ptr()) } != 0
        {
            let e = std::io::Error::last_os_error();
            unlink();
            return Err(io(e));
        }
        Ok(())
    }
}
