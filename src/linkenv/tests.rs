use super::*;

/// Every `.rs` file under `dir`.
fn sources(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The quoted words of `text` that look like environment variables: upper case, with an
/// underscore (`"CUDA_HOME"`), or any upper-case word a reading call names
/// (`var_os("PATH")`, `env.get("HOME")`).
fn variable_names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let calls = [
        "var(\"",
        "var_os(\"",
        "get(\"",
        "non_empty(\"",
        "text(\"",
        "paths(\"",
    ];
    for (at, _) in text.match_indices('"') {
        let rest = &text[at + 1..];
        let Some(end) = rest.find('"') else { continue };
        let word = &rest[..end];
        let upper = !word.is_empty()
            && word.starts_with(|c: char| c.is_ascii_uppercase())
            && word
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        let called = calls.iter().any(|c| text[..at + 1].ends_with(c));
        if upper && (word.contains('_') || called) {
            out.push(word.to_string());
        }
    }
    out
}

/// The list is complete: every variable the sources of the linker and of the drop-in
/// read (in the files that read the environment) is in [`VARS`], so the cache key and the
/// daemon see it (a variable added without a line here fails this test).
#[test]
fn every_variable_the_sources_read_is_listed() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    sources(&root.join("nvjitlink/src"), &mut files);
    let mut missing = Vec::new();
    let mut seen = 0;
    for f in files {
        if f.ends_with("linkenv/mod.rs") || f.ends_with("linkenv/tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let reads = ["env::var", "vars_os", "LinkEnv", "env: &"]
            .iter()
            .any(|w| text.contains(w));
        if !reads {
            continue;
        }
        for name in variable_names(&text) {
            // (compile-time variables, the names tests give their own fixtures, and the
            // fixtures' folder scripts/test.sh gives the tests)
            if name.starts_with("CARGO_")
                || name.starts_with("NVLINKRS_TEST_")
                || name == "NVLINKRS_FIXTURES"
            {
                continue;
            }
            seen += 1;
            if effect(&name).is_none() {
                missing.push(format!("{name} ({})", f.display()));
            }
        }
    }
    assert!(seen > 20, "the scan found only {seen} names");
    assert!(missing.is_empty(), "not in linkenv::VARS: {missing:?}");
}

#[test]
fn the_snapshot_keeps_what_a_link_reads_and_forwards_all_but_the_daemons_own() {
    let env = LinkEnv::from_pairs([
        ("CUDA_HOME", "/cuda"),
        ("EDITOR", "vi"),
        ("NVLINKRS_SOMETHING_NEWER", "1"),
        ("NVLINKRS_DAEMON", "1"),
        ("AWS_REGION", "eu"),
        ("PATH", "/a:/b"),
    ]);
    assert_eq!(env.get("CUDA_HOME"), Some(OsStr::new("/cuda")));
    assert_eq!(env.get("EDITOR"), None);
    assert_eq!(
        env.paths("PATH"),
        [PathBuf::from("/a"), PathBuf::from("/b")]
    );
    let sent: Vec<String> = env.forwarded().collect();
    assert_eq!(
        sent,
        [
            "AWS_REGION=eu",
            "CUDA_HOME=/cuda",
            "NVLINKRS_SOMETHING_NEWER=1",
            "PATH=/a:/b"
        ]
    );
    assert_eq!(effect("SCCACHE_DIR"), Some(Effect::Runs));
    assert!(!forwarded("NVLINKRS_IN_DAEMON"));
}
