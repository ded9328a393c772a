//! Everything a link writes: the output file, the `--register-link-binaries` C fragment,
//! and the `-time` CSV rows. A file is written beside its target and renamed over it once
//! complete (a reader never sees half a file, a failed or killed link leaves the old one,
//! as nvlink does), through a symlink to its target, keeping an existing file's mode; a
//! device, FIFO or `/proc/self/fd/N` is written into directly, and so is a file whose
//! directory refuses the new one. Another user's symlink in a sticky world-writable folder
//! is not followed (the kernel's `fs.protected_symlinks` rule). Temporary names carry the
//! process id, and a link reclaims those of processes that no longer run.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::diag::{Error, Result};
use crate::scratch::{LEFTOVER_AGE, abandoned};

/// The bytes a link wrote to its output and registration file, kept when `keep` is set
/// (a link the cache will store).
#[derive(Debug, Default)]
pub struct Written {
    pub keep: bool,
    pub out: Option<Vec<u8>>,
    pub register: Option<Vec<u8>>,
}

impl Written {
    /// A record that keeps what is written when `keep`.
    pub fn new(keep: bool) -> Written {
        Written {
            keep,
            ..Default::default()
        }
    }
}

/// Writes `bytes` to `path` (see the module's comment).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |f| f.write_all(bytes))
}

/// Writes a merged image to the output `prepare` found, streaming it; or, when `keep`
/// (a link the cache stores, or `-v`), through a buffer whose bytes are returned: the
/// cache stores the bytes written, not what the output reads back.
pub fn write_image(
    found: Found,
    image: &mut crate::elf::write::Image,
    keep: bool,
) -> Result<Option<Vec<u8>>> {
    use crate::elf::write::write_to;
    if !keep {
        return write_output(found, |w| write_to(image, w)).map(|_| None);
    }
    let mut bytes = Vec::new();
    write_to(image, &mut bytes).map_err(|e| Error::fatal(e.to_string()))?;
    write_output(found, |w| w.write_all(&bytes))?;
    Ok(Some(bytes))
}

/// The image's bytes, as [`write_image`] would write them.
pub fn image_bytes(image: &mut crate::elf::write::Image) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    crate::elf::write::write_to(image, &mut bytes).map_err(|e| Error::fatal(e.to_string()))?;
    Ok(bytes)
}

/// An image made elsewhere (`finalize::debug`) written as [`write_image`] writes one;
/// the bytes when `keep`.
pub fn write_bytes(found: Found, bytes: Vec<u8>, keep: bool) -> Result<Option<Vec<u8>>> {
    write_output(found, |w| w.write_all(&bytes))?;
    Ok(keep.then_some(bytes))
}

/// As [`write_atomic`], with `fill` writing the content (through a buffer that large
/// writes pass by) as it produces it.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    write_output(prepare(path).take(), fill)
}

/// Where an output goes, found on a thread while the link runs ([`prepare`]).
pub struct Prepared {
    thread: Option<std::thread::JoinHandle<std::io::Result<Target>>>,
    path: PathBuf,
}

impl Prepared {
    /// Waits for the output's target to be found.
    pub fn take(mut self) -> Found {
        let target = match self.thread.take().map(|t| t.join()) {
            Some(Ok(t)) => t,
            _ => resolve(&self.path),
        };
        Found {
            path: self.path.clone(),
            target,
        }
    }
}

/// The output's target ([`Prepared::take`]).
pub struct Found {
    path: PathBuf,
    target: std::io::Result<Target>,
}

/// What an output path names once symlinks are followed.
#[derive(Debug)]
enum Target {
    /// A device, FIFO or socket, or a link whose target is no path (`/proc/self/fd/N`):
    /// written into directly (a rename would replace the node with a plain file).
    Special(PathBuf),
    /// A plain file, or none yet: written beside it and renamed over it.
    File {
        path: PathBuf,
        old: Option<std::fs::Metadata>,
    },
}

/// Starts finding where the output at `path` goes, on a thread of its own: symlinks
/// followed, leftovers of killed links to it reclaimed.
pub fn prepare(path: &Path) -> Prepared {
    let p = path.to_path_buf();
    let thread = std::thread::Builder::new()
        .spawn(move || {
            let t = resolve(&p)?;
            if let Target::File { path, .. } = &t {
                reclaim_leftovers(path, LEFTOVER_AGE);
            }
            Ok(t)
        })
        .ok();
    Prepared {
        thread,
        path: path.to_path_buf(),
    }
}

/// Which of descriptors 0-2 were closed when the process started (bit N for descriptor
/// N), before Rust's runtime opened /dev/null on them: a fact of the process, noted once.
static CLOSED_AT_START: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Notes which of descriptors 0-2 were closed at start-up (the `nvlinkrs` command's).
pub fn note_closed_at_start(mask: u8) {
    CLOSED_AT_START.store(mask, std::sync::atomic::Ordering::Relaxed);
}

/// Whether `p` names a standard descriptor that was closed at start-up (`/dev/stdout`
/// leads there): opening it fails as it did then, not on the runtime's /dev/null.
fn closed_at_start(p: &Path) -> bool {
    let closed = CLOSED_AT_START.load(std::sync::atomic::Ordering::Relaxed);
    ["/proc/self/fd/", "/dev/fd/"].iter().any(|dir| {
        p.to_str()
            .and_then(|s| s.strip_prefix(dir))
            .and_then(|n| n.parse::<u8>().ok())
            .is_some_and(|fd| fd < 3 && closed & (1 << fd) != 0)
    })
}

/// Follows `path`'s symlinks (as `open` would) to what it names.
fn resolve(path: &Path) -> std::io::Result<Target> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        if closed_at_start(&p) {
            return Err(std::io::Error::from_raw_os_error(libc::ENOENT));
        }
        let meta = match std::fs::symlink_metadata(&p) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Target::File { path: p, old: None });
            }
            r => r?,
        };
        let kind = meta.file_type();
        if kind.is_symlink() {
            if !may_follow(&p, &meta) {
                return Err(std::io::Error::from_raw_os_error(libc::EACCES));
            }
            let to = std::fs::read_link(&p)?;
            let next = match p.parent() {
                Some(d) if to.is_relative() => d.join(to),
                _ => to,
            };
            // a link the kernel resolves itself (`/proc/self/fd/1` names `pipe:[N]` or
            // a deleted file): what it opens is not what its text names
            if let Ok(opened) = std::fs::metadata(&p) {
                let elsewhere = match std::fs::metadata(&next) {
                    Ok(n) => !same_file(&n, &opened),
                    Err(e) => e.kind() == std::io::ErrorKind::NotFound,
                };
                if elsewhere {
                    return Ok(Target::Special(p));
                }
            }
            p = next;
        } else if kind.is_file() {
            return Ok(Target::File {
                path: p,
                old: Some(meta),
            });
        } else if kind.is_dir() {
            return Err(std::io::Error::from_raw_os_error(libc::EISDIR));
        } else {
            return Ok(Target::Special(p));
        }
    }
    Err(std::io::Error::from_raw_os_error(libc::ELOOP))
}

/// Whether the symlink at `p` (described by `link`) may be followed to write through it:
/// not when it lies in a sticky world-writable folder (`/tmp`) and belongs to another
/// user than this one and the folder's owner. The kernel's `fs.protected_symlinks` rule,
/// kept whatever that setting is: a link is never opened here (its target is written
/// beside and renamed over), so the kernel would not stop another user's link to one of
/// this user's files, as it stops nvlink's open ("Could not open output file").
fn may_follow(p: &Path, link: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Ok(d) = std::fs::metadata(dir) else {
        return true; // (nothing to follow into then: the write fails on its own)
    };
    let shared = d.mode() & 0o1002 == 0o1002;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    !shared || link.uid() == me || link.uid() == d.uid()
}

fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    crate::input::file_id(a) == crate::input::file_id(b)
}

/// Writes the output `found` names: a new file beside it renamed over it, so that at
/// every instant its name holds the old file or the whole new one (a failed or killed
/// link leaves the old one). Where no file can be made beside it or the rename is refused
/// (a directory this user cannot write, another user's file in sticky `/tmp`) but the old
/// file is writable, it is written into, as nvlink writes it.
pub fn write_output(
    found: Found,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let cannot = cannot_open(&found.path);
    match found.target.map_err(cannot)? {
        Target::Special(p) => {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(p)
                .map_err(cannot)?;
            fill_buffered(&mut f, fill).map_err(cannot)
        }
        Target::File { path, old } => write_beside(&path, old.as_ref(), true, fill).map_err(cannot),
    }
}

/// Writes a new file beside `path` and renames it over `path`, with the old file's mode
/// (and owner, where root writes another user's file), or a new file's; or, where that is
/// refused and `into_old`, into the old file ([`write_into`]).
fn write_beside(
    path: &Path,
    old: Option<&std::fs::Metadata>,
    into_old: bool,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let full = path.file_name().unwrap_or_default().to_string_lossy();
    let name = temp_stem(&full);
    let refused = |e: &std::io::Error| {
        into_old && old.is_some() && e.kind() == std::io::ErrorKind::PermissionDenied
    };
    // (created 0600: nobody else reads it half written)
    let mut tmp = match tempfile::Builder::new()
        .prefix(&format!(".{name}.{}.", std::process::id()))
        .suffix(".nvlinkrs-tmp")
        .tempfile_in(dir)
    {
        Ok(t) => t,
        Err(e) if refused(&e) => {
            // (the image is made first: it may borrow the bytes of the file it replaces)
            let mut image = Vec::new();
            fill(&mut image)?;
            return write_into(path, |f| f.write_all(&image));
        }
        Err(e) => return Err(e),
    };
    // not synced to disk: the rename is what keeps a half-written file from ever being
    // seen under the output's name (ld, lld and nvlink do not sync either; a sync cost
    // 10-20 ms on a 14 MB image, a quarter of a 128-unit link)
    fill_buffered(tmp.as_file_mut(), fill)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let mode = old.map_or(0o666 & !umask(), |m| m.mode() & 0o7777);
        if let Some(m) = old.filter(|m| m.uid() != unsafe { libc::geteuid() }) {
            std::os::unix::fs::fchown(tmp.as_file(), Some(m.uid()), Some(m.gid())).ok();
        }
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(mode))?;
    }
    if old.is_some_and(|m| m.is_file()) {
        let (file, tmp_path) = tmp.into_parts();
        if exchange(&tmp_path, path) {
            // the old file is now under the temporary's name: dropping it unlinks it
            drop(tmp_path);
            return Ok(());
        }
        tmp = tempfile::NamedTempFile::from_parts(file, tmp_path);
    }
    match tmp.persist(path) {
        Ok(_) => Ok(()),
        Err(e) if refused(&e.error) => {
            let mut written = e.file.reopen()?;
            write_into(path, |f| std::io::copy(&mut written, f).map(drop))
        }
        Err(e) => Err(e.error),
    }
}

/// Swaps the new file at `new` with the old plain file at `path` in one step
/// (`renameat2`'s `RENAME_EXCHANGE`): at every instant `path` names the old image or the
/// whole new one, as with a rename, but ext4 does not write the new file's blocks out
/// first, as it does for a rename over an existing file (its `auto_da_alloc`: 5-8 ms for
/// an 8 MB image, a tenth of a 128-unit link). False where the swap is not made (a
/// filesystem without it, the old file gone meanwhile, a directory put there): the caller
/// renames instead.
fn exchange(new: &Path, path: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::ffi::OsStrExt;
        let (Ok(a), Ok(b)) = (
            std::ffi::CString::new(new.as_os_str().as_bytes()),
            std::ffi::CString::new(path.as_os_str().as_bytes()),
        ) else {
            return false;
        };
        let swap = || unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                a.as_ptr(),
                libc::AT_FDCWD,
                b.as_ptr(),
                libc::RENAME_EXCHANGE,
            ) == 0
        };
        if !swap() {
            return false;
        }
        // (only a plain file is to be unlinked under the temporary's name: anything
        // else that took the old file's place meanwhile is swapped back)
        if std::fs::symlink_metadata(new).is_ok_and(|m| m.is_file()) {
            return true;
        }
        swap();
        false
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (new, path);
        false
    }
}

/// Writes `bytes` into the existing file `path`, cut to their length (opened before it is
/// cut: a file this user cannot write is left as it was).
fn write_into(
    path: &Path,
    bytes: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
    f.set_len(0)?;
    bytes(&mut f)
}

/// Removes the temporary files beside `path` that links to it killed before they
/// finished left (`.NAME.PID.*.nvlinkrs-old` / `-tmp` of a process that no longer runs,
/// unchanged for `age`).
fn reclaim_leftovers(path: &Path, age: Duration) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let prefix = format!(".{}.", temp_stem(&name.to_string_lossy()));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let file = e.file_name();
        let file = file.to_string_lossy();
        let Some(rest) = file.strip_prefix(&prefix) else {
            continue;
        };
        if !(rest.ends_with(".nvlinkrs-old") || rest.ends_with(".nvlinkrs-tmp")) {
            continue;
        }
        let pid = rest.split('.').next().and_then(|p| p.parse::<i32>().ok());
        if e.metadata()
            .is_ok_and(|m| m.is_file() && abandoned(pid, &m, age))
        {
            std::fs::remove_file(e.path()).ok();
        }
    }
}

/// The part of an output's name its temporary file's name starts with: the name, cut to
/// its first 100 bytes (a name of up to 255 bytes is an output nvlink writes; with the
/// process id and the suffixes the whole name must still fit in 255).
fn temp_stem(name: &str) -> &str {
    let mut end = name.len().min(100);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// nvlink's failure for an output whose folder is not there, which an LTO link meets
/// before its compile (nvlink opens the output first: its message comes before
/// libNVVM's work and before "expected libcudadevrt object").
pub fn folder_is_there(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => return Ok(()),
    };
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(cannot_open(path)(std::io::Error::from_raw_os_error(
            libc::ENOTDIR,
        ))),
        Err(e) => Err(cannot_open(path)(e)),
    }
}

/// nvlink's message for an output it cannot write, with the system's reason.
fn cannot_open(path: &Path) -> impl Fn(std::io::Error) -> Error + Copy + '_ {
    move |e| {
        // (tempfile's errors end by naming the temporary file: the user named the output)
        let reason = e.to_string();
        let reason = reason.split(" at path ").next().unwrap_or_default();
        Error::fatal(format!("Could not open output file '{}'", path.display())).context(reason)
    }
}

/// `fill`'s content through a buffer that large writes pass by, flushed.
fn fill_buffered(
    file: &mut std::fs::File,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut w = std::io::BufWriter::with_capacity(1 << 18, file);
    fill(&mut w)?;
    w.flush()
}

#[cfg(unix)]
fn umask() -> u32 {
    // The umask can only be read by setting it; read it once from /proc when possible.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

/// The C fragment nvcc's host stub includes: one line per linked module id. nvlink lists
/// the ids of an LTO link in reverse input order.
pub fn register_link_binaries(ids: &[String]) -> String {
    let mut s = format!("#define NUM_PRELINKED_OBJECTS {}\n", ids.len());
    for id in ids {
        s += &format!("DEFINE_REGISTER_FUNC({id})\n");
    }
    s
}

/// One `-time` row: what nvlink writes per phase.
pub struct TimeRow {
    pub source: String,
    pub phase: &'static str,
    pub output: String,
    pub arch: String,
    pub time: Duration,
}

const TIME_HEADER: &str = "source file name , phase name , phase input files , phase output file , arch , tool, metric , unit\n";

/// Appends rows to the `-time` file, writing the header when the file is new or empty.
pub fn append_times(path: &Path, rows: &[TimeRow]) -> Result<()> {
    let mut text = String::new();
    let empty = std::fs::metadata(path)
        .map(|m| m.len() == 0)
        .unwrap_or(true);
    if empty {
        text += TIME_HEADER;
    }
    for r in rows {
        text += &format!(
            "{} , {} ,  , {} , {} , nvlink , {:.4} , ms\n",
            r.source,
            r.phase,
            r.output,
            r.arch,
            r.time.as_secs_f64() * 1000.0
        );
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| {
            Error::fatal(format!("Could not open output file '{}'", path.display()))
                .context(e.to_string())
        })
}

#[cfg(test)]
mod tests;

/// Why a file the link writes beside its output (the time trace, the `--report-json`
/// report) may not go to `path`, if it may not: never over the link's output or another
/// file of the link's (`guarded`: its inputs, the libraries found, the options files; the
/// same file through a symlink or a hard link, or by another spelling of a name that does
/// not exist yet), never into a file that is not a regular one of this user's (another
/// user's file in a shared folder, a FIFO, a device).
pub fn side_file_refusal(output: &Path, guarded: &[PathBuf], path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    if same_place(path, output) {
        return Some("it is the link's output".into());
    }
    if let Some(i) = guarded.iter().find(|i| same_place(path, i)) {
        return Some(format!("it is the input '{}'", i.display()));
    }
    // SAFETY: getuid(2) cannot fail.
    let me = unsafe { libc::getuid() };
    for meta in [std::fs::symlink_metadata(path), std::fs::metadata(path)] {
        match meta {
            Ok(m) if m.uid() != me => return Some("the file there is another user's".into()),
            Ok(m) if !m.is_file() && !m.file_type().is_symlink() => {
                return Some("the file there is not a regular file".into());
            }
            _ => {}
        }
    }
    None
}

/// Whether two paths name one file: the same file where both exist, else the same place
/// (`./out.cubin` and `out.cubin`, `d/../x` and `x`: the folder resolved, the name kept).
pub fn same_place(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => same_file(&x, &y),
        (Ok(_), Err(_)) | (Err(_), Ok(_)) => false,
        _ => place(a) == place(b),
    }
}

/// Where a path that names no file yet would be made: its folder resolved (symlinks
/// followed), its name kept; the path made absolute where the folder does not exist.
fn place(p: &Path) -> PathBuf {
    let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    match (abs.parent(), abs.file_name()) {
        (Some(d), Some(n)) => d.canonicalize().map_or(abs.clone(), |d| d.join(n)),
        _ => abs,
    }
}

/// Writes a file beside the output (the time trace, the report) at `path`, unless
/// [`side_file_refusal`] refuses it: checked again on the file its symlinks lead to, in
/// its folder opened once (`pinned`: a link switched meanwhile, the file's or a folder's
/// on the way, changes nothing), where it is written beside and renamed over, never
/// opened (a FIFO or another user's file put there meanwhile is replaced, or the rename
/// refused, never written into); an old file's mode is kept. `Err`: why not, for a
/// warning.
pub fn write_side_file(
    path: &Path,
    output: &Path,
    guarded: &[PathBuf],
    bytes: &[u8],
) -> std::result::Result<(), String> {
    if let Some(why) = side_file_refusal(output, guarded, path) {
        return Err(why);
    }
    let real = match resolve(path) {
        Ok(Target::File { path, .. }) => path,
        Ok(Target::Special(_)) => return Err("the file there is not a regular file".into()),
        Err(e) => return Err(e.to_string()),
    };
    let (_folder, real) = pinned(&real).map_err(|e| e.to_string())?;
    if let Some(why) = side_file_refusal(output, guarded, &real) {
        return Err(why);
    }
    let old = std::fs::symlink_metadata(&real)
        .ok()
        .filter(|m| m.is_file());
    write_beside(&real, old.as_ref(), false, |f| f.write_all(bytes)).map_err(|e| e.to_string())
}

/// `path` by way of its folder opened now (`/proc/self/fd/N/name`, the folder held open
/// by the returned file): what is checked and written there is in that folder, whatever
/// its path names later. The path itself where `/proc` is not mounted.
fn pinned(path: &Path) -> std::io::Result<(Option<std::fs::File>, PathBuf)> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let (dir, name) = match (path.parent(), path.file_name()) {
        (Some(d), Some(n)) if !d.as_os_str().is_empty() => (d, n),
        (_, Some(n)) => (Path::new("."), n),
        _ => return Ok((None, path.to_path_buf())),
    };
    let folder = (std::fs::OpenOptions::new().read(true))
        .custom_flags(libc::O_DIRECTORY)
        .open(dir)?;
    let at = PathBuf::from(format!("/proc/self/fd/{}", folder.as_raw_fd()));
    match at.is_dir() {
        true => Ok((Some(folder), at.join(name))),
        false => Ok((None, path.to_path_buf())),
    }
}
