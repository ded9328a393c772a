//! Tests of the output writer: the file replaced whole or written into, symlinks, FIFOs,
//! descriptors, leftovers of killed links, private temporaries, the register fragment and
//! the `-time` rows.

use super::*;

/// An output name of 255 bytes (the most a file system takes, and nvlink writes) is
/// written, twice (replacing), and leaves no temporary file (was: `File name too
/// long`, the temporary name being the output's with more after it); a multibyte
/// name is cut at a character boundary.
#[test]
fn the_longest_output_names_are_written() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["x".repeat(249) + ".cubin", "é".repeat(124) + ".o"] {
        let out = dir.path().join(&name);
        write_atomic(&out, b"one").unwrap();
        write_atomic(&out, b"two").unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"two");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

#[test]
fn a_fifo_output_is_written_into_not_replaced() {
    // (`-o /dev/null` as root replaced the device node with a plain file)
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("out.cubin");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    write_atomic(&fifo, b"device image").unwrap();
    // (checked before joining: a replaced FIFO leaves the reader waiting)
    use std::os::unix::fs::FileTypeExt;
    let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(kind.is_fifo());
    assert_eq!(reader.join().unwrap(), b"device image");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn a_standard_descriptor_closed_at_start_is_no_output() {
    // (Rust's runtime opens /dev/null on it: the image went nowhere with exit 0)
    assert!(!closed_at_start(Path::new("/proc/self/fd/1")));
    note_closed_at_start(0b010);
    let closed = closed_at_start(Path::new("/proc/self/fd/1"))
        && closed_at_start(Path::new("/dev/fd/1"))
        && !closed_at_start(Path::new("/proc/self/fd/2"))
        && !closed_at_start(Path::new("/proc/self/fd/10"));
    note_closed_at_start(0);
    assert!(closed);
}

#[test]
fn register_file_text() {
    assert_eq!(
        register_link_binaries(&["_b_cu".into(), "_a_cu".into()]),
        "#define NUM_PRELINKED_OBJECTS 2\nDEFINE_REGISTER_FUNC(_b_cu)\nDEFINE_REGISTER_FUNC(_a_cu)\n"
    );
}

fn ino(p: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).unwrap().ino()
}

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

fn files(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn link_output(p: &Path, image: &[u8]) -> Result<()> {
    write_output(prepare(p).take(), |w| w.write_all(image))
}

#[test]
fn the_output_name_holds_the_old_image_until_the_new_one_is_whole() {
    // (it was renamed aside for the whole write: a link killed then left no output)
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("out.cubin");
    std::fs::write(&p, vec![7u8; 10_000]).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o750)).unwrap();
    let target = prepare(&p);
    write_output(target.take(), |w| {
        assert_eq!(std::fs::read(&p).unwrap(), vec![7u8; 10_000]);
        w.write_all(b"shorter ")?;
        assert_eq!(std::fs::read(&p).unwrap(), vec![7u8; 10_000]);
        w.write_all(b"new image")
    })
    .unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"shorter new image");
    assert_eq!(mode(&p), 0o750);
    assert_eq!(files(d.path()), ["out.cubin"]);
    // a new output gets a new file's permissions
    let q = d.path().join("new.cubin");
    write_atomic(&q, b"x").unwrap();
    assert_eq!(mode(&q), 0o666 & !umask());
}

#[test]
fn a_refused_new_file_writes_into_the_old_one() {
    // (the refusal itself needs a user other than root: tests/merge.rs
    // `outputs_where_users_point_them`): the same file, cut, and never a new one
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("out.cubin");
    std::fs::write(&p, vec![7u8; 1000]).unwrap();
    let inode = ino(&p);
    write_into(&p, |f| f.write_all(b"new")).unwrap();
    assert_eq!(
        (std::fs::read(&p).unwrap(), ino(&p)),
        (b"new".to_vec(), inode)
    );
    // no such file: nothing is created
    let e = write_into(&d.path().join("none"), |f| f.write_all(b"x")).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    assert_eq!(files(d.path()), ["out.cubin"]);
}

#[test]
fn an_output_that_is_an_input_is_a_new_file() {
    // (the image borrows the inputs' mapped bytes until it is written: writing over
    // one of them in place corrupted the image)
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("s.cubin");
    std::fs::write(&p, vec![7u8; 100_000]).unwrap();
    let inode = ino(&p);
    let mapped = crate::input::open(&p, "s.cubin").unwrap();
    let image: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
    link_output(&p, &image).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), image);
    assert_ne!(ino(&p), inode);
    assert!(
        mapped.iter().all(|&b| b == 7),
        "the input changed under the link"
    );
    assert_eq!(files(d.path()), ["s.cubin"]);
}

#[test]
fn a_failed_link_leaves_the_old_output_and_no_temporary() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("out.cubin");
    // the link fails before writing: the old output stays (as nvlink leaves it)
    std::fs::write(&p, b"old").unwrap();
    drop(prepare(&p));
    assert_eq!(std::fs::read(&p).unwrap(), b"old");
    // the writing of the new file fails (a full disk): the old one stays, with no
    // temporary beside it (it was written over in place, and removed on failure)
    let fail = |w: &mut dyn Write| {
        w.write_all(b"part")?;
        Err(std::io::Error::other("disk full"))
    };
    let e = write_output(prepare(&p).take(), fail).unwrap_err();
    assert!(e.message().contains("Could not open output file"));
    assert_eq!(std::fs::read(&p).unwrap(), b"old");
    assert_eq!(files(d.path()), ["out.cubin"]);
}

#[test]
fn the_new_file_is_swapped_in_only_for_a_plain_old_one() {
    // (the swap that spares ext4's flush of a rename over an existing file)
    let d = tempfile::tempdir().unwrap();
    let (new, old) = (d.path().join("new"), d.path().join("old"));
    std::fs::write(&new, b"new").unwrap();
    std::fs::write(&old, b"old").unwrap();
    assert!(exchange(&new, &old));
    assert_eq!(std::fs::read(&old).unwrap(), b"new");
    assert_eq!(std::fs::read(&new).unwrap(), b"old");
    // a directory put where the old file was is swapped back, and left alone
    std::fs::remove_file(&old).unwrap();
    std::fs::create_dir(&old).unwrap();
    assert!(!exchange(&new, &old));
    assert!(std::fs::metadata(&old).unwrap().is_dir());
    assert_eq!(std::fs::read(&new).unwrap(), b"old");
    // nothing there any more: no swap (the caller renames)
    assert!(!exchange(&new, &d.path().join("gone")));
    assert_eq!(files(d.path()), ["new", "old"]);
}

#[test]
fn an_old_output_with_another_name_is_not_written_into() {
    // a hard link elsewhere keeps the old bytes: the output is a new file
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("out.cubin");
    let other = d.path().join("kept.cubin");
    std::fs::write(&p, b"old").unwrap();
    std::fs::hard_link(&p, &other).unwrap();
    link_output(&p, b"new").unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"new");
    assert_eq!(std::fs::read(&other).unwrap(), b"old");
    assert_eq!(files(d.path()), ["kept.cubin", "out.cubin"]);
}

#[test]
fn a_symlinked_output_is_written_through_to_its_target() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let sub = d.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let target = sub.join("real.cubin");
    std::fs::write(&target, b"old").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).unwrap();
    let link = d.path().join("out.cubin");
    std::os::unix::fs::symlink("sub/real.cubin", &link).unwrap();
    let chain = d.path().join("chain.cubin");
    std::os::unix::fs::symlink("out.cubin", &chain).unwrap();
    link_output(&chain, b"new image").unwrap();
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        std::fs::symlink_metadata(&chain)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read(&target).unwrap(), b"new image");
    assert_eq!(mode(&target), 0o755);
    assert_eq!(files(&sub), ["real.cubin"]);
    // a dangling link: its target is created
    let dangling = d.path().join("dangling.cubin");
    std::os::unix::fs::symlink("sub/made.cubin", &dangling).unwrap();
    write_atomic(&dangling, b"made").unwrap();
    assert_eq!(std::fs::read(sub.join("made.cubin")).unwrap(), b"made");
    assert!(
        std::fs::symlink_metadata(&dangling)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // a loop is an error naming the output
    std::os::unix::fs::symlink("loop2", d.path().join("loop1")).unwrap();
    std::os::unix::fs::symlink("loop1", d.path().join("loop2")).unwrap();
    let e = write_atomic(&d.path().join("loop1"), b"x").unwrap_err();
    assert!(e.message().contains("loop1"), "{}", e.message());
}

#[test]
fn a_proc_fd_output_is_written_through() {
    // `/proc/self/fd/N` names what the descriptor holds (here a deleted file), not a
    // path a rename could reach
    use std::io::{Read, Seek};
    let mut f = tempfile::tempfile().unwrap();
    use std::os::fd::AsRawFd;
    let p = PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd()));
    write_atomic(&p, b"through the descriptor").unwrap();
    let mut got = String::new();
    f.rewind().unwrap();
    f.read_to_string(&mut got).unwrap();
    assert_eq!(got, "through the descriptor");
}

#[test]
fn leftovers_of_killed_links_are_reclaimed() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("out.cubin");
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let live = std::process::id();
    let names = [
        format!(".out.cubin.{dead}.0.nvlinkrs-old"),
        format!(".out.cubin.{dead}.abc123.nvlinkrs-tmp"),
        format!(".out.cubin.{live}.0.nvlinkrs-old"),
        format!(".other.cubin.{dead}.0.nvlinkrs-old"),
        format!(".out.cubin.{dead}.0.kept"),
    ];
    for n in &names {
        std::fs::write(d.path().join(n), b"x").unwrap();
    }
    // (recent ones are left: a directory shared by machines)
    reclaim_leftovers(&p, LEFTOVER_AGE);
    assert_eq!(files(d.path()).len(), 5);
    reclaim_leftovers(&p, Duration::ZERO);
    let mut kept = names[2..].to_vec();
    kept.sort();
    assert_eq!(files(d.path()), kept);
}

#[test]
fn temporary_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("out.cubin");
    write_atomic_with(&p, |w| {
        let tmp = std::fs::read_dir(d.path())
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        assert!(tmp.file_name().to_string_lossy().ends_with(".nvlinkrs-tmp"));
        let m = tmp.metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!(m, 0o600);
        w.write_all(b"x")
    })
    .unwrap();
}

#[test]
fn atomic_write_replaces_and_leaves_no_temporary() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("out.cubin");
    std::fs::write(&p, b"old").unwrap();
    write_atomic(&p, b"new bytes").unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"new bytes");
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    let bad = d.path().join("no/such/dir/out.cubin");
    let e = write_atomic(&bad, b"x").unwrap_err();
    assert!(
        e.message().contains("Could not open output file"),
        "{}",
        e.message()
    );
    // the reason names no temporary file (the message names the output)
    let text = e.to_string();
    assert!(
        text.contains("No such file") && !text.contains("nvlinkrs-tmp"),
        "{text}"
    );
}

#[test]
fn time_rows_append_after_one_header() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("t.csv");
    let row = || TimeRow {
        source: "lto.nvvm".into(),
        phase: "cicc",
        output: "lto.ptx".into(),
        arch: "sm_90".into(),
        time: Duration::from_micros(10986),
    };
    append_times(&p, &[row()]).unwrap();
    append_times(&p, &[row()]).unwrap();
    let t = std::fs::read_to_string(&p).unwrap();
    assert_eq!(t.matches("source file name").count(), 1);
    assert!(
        t.ends_with("lto.nvvm , cicc ,  , lto.ptx , sm_90 , nvlink , 10.9860 , ms\n"),
        "{t}"
    );
}

/// A file beside the output is written in the folder its path named when it was checked:
/// the folder moved away and another put in its place (a symlink switched, mid-link,
/// from a safe folder to the inputs' one: attacker review, 2026-12-02), the file still
/// lands in the first; an old file's mode is kept.
#[test]
fn a_side_file_lands_in_the_folder_it_was_checked_in() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let (safe, inputs) = (dir.path().join("safe"), dir.path().join("in"));
    std::fs::create_dir(&safe).unwrap();
    std::fs::create_dir(&inputs).unwrap();
    std::fs::write(inputs.join("a.o"), b"input").unwrap();
    std::fs::write(safe.join("a.o"), b"old report").unwrap();
    std::fs::set_permissions(safe.join("a.o"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = dir.path().join("dl");
    std::os::unix::fs::symlink(&safe, &link).unwrap();
    let (_held, there) = pinned(&link.join("a.o")).unwrap();
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(&inputs, &link).unwrap();
    let old = std::fs::symlink_metadata(&there).ok();
    write_beside(&there, old.as_ref(), false, |f| f.write_all(b"report")).unwrap();
    assert_eq!(std::fs::read(inputs.join("a.o")).unwrap(), b"input");
    assert_eq!(std::fs::read(safe.join("a.o")).unwrap(), b"report");
    let mode = std::fs::metadata(safe.join("a.o"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}
