//! Links the daemon cannot run for its client: those whose arguments (or `-optf` files)
//! name the client's own descriptors or process (`/dev/fd/N`, `/dev/stdin`,
//! `/proc/self/...`, `/proc/PID/...`). Such a path opens another file in the daemon's
//! link process than in the client (the daemon's pipe, or nothing), so these links run in
//! the client's process.

use std::path::Path;

/// Parts of a path that name the opening process's own files.
const OWN: &[&str] = &["/dev/fd/", "/dev/std", "/proc/"];

/// How deep `-optf` files naming `-optf` files are followed before giving up (and
/// linking in process).
const MAX_DEPTH: usize = 8;

/// Whether the link of `args`, run in `cwd`, must run in the client's process.
pub fn must_link_in_process(args: &[String], cwd: &Path) -> bool {
    let cwd = cwd.to_string_lossy();
    cwd.starts_with("/dev") || cwd.starts_with("/proc") || names_own(args, cwd.as_ref(), 0)
}

fn names_own(args: &[String], cwd: &str, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return true;
    }
    if args.iter().any(|a| OWN.iter().any(|o| a.contains(o))) {
        return true;
    }
    // the -optf files' contents are arguments too
    let mut next_is_file = false;
    for a in args {
        let name = a.trim_start_matches('-');
        let file = if next_is_file {
            Some(a.as_str())
        } else {
            ["optf=", "options-file="]
                .iter()
                .find_map(|p| name.strip_prefix(p))
        };
        next_is_file = a.starts_with('-') && matches!(name, "optf" | "options-file");
        let Some(file) = file else { continue };
        let path = Path::new(cwd).join(file);
        // (a FIFO is not opened here: that would take its text from the link)
        if !std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            return true;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            return true;
        };
        let words: Vec<String> = text.split_whitespace().map(String::from).collect();
        if names_own(&words, cwd, depth + 1) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_and_process_paths_keep_the_link_in_process() {
        let d = tempfile::tempdir().unwrap();
        let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        let plain = s(&["-arch=sm_90", "a.cubin", "-o", "o.cubin"]);
        assert!(!must_link_in_process(&plain, d.path()));
        for own in [
            "/dev/fd/5",
            "--output-file=/proc/self/fd/5",
            "/dev/stdin",
            "/proc/4242/fd/3",
        ] {
            let mut a = plain.clone();
            a.push(own.into());
            assert!(must_link_in_process(&a, d.path()), "{own}");
        }
        assert!(must_link_in_process(&plain, Path::new("/dev/fd")));
        // inside an -optf file, and one it names
        std::fs::write(d.path().join("inner"), "-o /dev/fd/9").unwrap();
        std::fs::write(d.path().join("outer"), "a.cubin -optf inner").unwrap();
        std::fs::write(d.path().join("clean"), "a.cubin -o o.cubin").unwrap();
        for (opts, own) in [
            (s(&["-optf", "outer"]), true),
            (s(&["--options-file=inner"]), true),
            (s(&["-optf", "clean"]), false),
            (s(&["-optf", "missing"]), true),
        ] {
            assert_eq!(must_link_in_process(&opts, d.path()), own, "{opts:?}");
        }
        // an -optf file naming itself
        std::fs::write(d.path().join("loop"), "-optf loop").unwrap();
        assert!(must_link_in_process(&s(&["-optf", "loop"]), d.path()));
    }
}
