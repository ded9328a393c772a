//! One test per key ingredient (the sccache habit), and the entry life cycle.

use super::*;

fn key(version: u32, stage: &str, tool: &str, options: &str, input: &[u8]) -> String {
    Key::versioned(version, stage)
        .text(tool)
        .text(options)
        .bytes(input)
        .finish()
}

const BASE: (u32, &str, &str, &str, &[u8]) =
    (CACHE_VERSION, "link", "tool-a", "-arch sm_90", b"input");

fn base() -> String {
    key(BASE.0, BASE.1, BASE.2, BASE.3, BASE.4)
}

#[test]
fn the_same_ingredients_give_the_same_key() {
    assert_eq!(base(), base());
}

#[test]
fn the_cache_version_changes_the_key() {
    assert_ne!(
        key(CACHE_VERSION + 1, BASE.1, BASE.2, BASE.3, BASE.4),
        base()
    );
}

#[test]
fn the_stage_changes_the_key() {
    assert_ne!(key(BASE.0, "ptxas", BASE.2, BASE.3, BASE.4), base());
}

#[test]
fn a_tool_identity_changes_the_key() {
    assert_ne!(key(BASE.0, BASE.1, "tool-b", BASE.3, BASE.4), base());
    // and a tool's identity follows its content
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), DEFAULT_CAP).unwrap();
    let tool = dir.path().join("ptxas");
    std::fs::write(&tool, b"version 1").unwrap();
    let first = cache.tool_id(&tool).unwrap();
    assert_eq!(cache.tool_id(&tool).unwrap(), first, "remembered");
    std::fs::write(&tool, b"version 2, longer").unwrap();
    assert_ne!(cache.tool_id(&tool).unwrap(), first);
}

#[test]
fn the_options_change_the_key() {
    assert_ne!(key(BASE.0, BASE.1, BASE.2, "-arch sm_80", BASE.4), base());
}

#[test]
fn the_input_content_changes_the_key() {
    assert_ne!(key(BASE.0, BASE.1, BASE.2, BASE.3, b"inpuT"), base());
}

#[test]
fn parts_cannot_run_into_each_other() {
    // "ab" + "c" and "a" + "bc" must differ
    let a = Key::new("s").text("ab").text("c").finish();
    let b = Key::new("s").text("a").text("bc").finish();
    assert_ne!(a, b);
}

#[test]
fn entries_round_trip_and_corruption_is_a_miss_that_removes_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), DEFAULT_CAP).unwrap();
    let k = Key::new("t").text("x");
    assert_eq!(cache.get(&k), None);
    cache.put(&k, b"cubin bytes").unwrap();
    assert_eq!(cache.get(&k).as_deref(), Some(&b"cubin bytes"[..]));
    assert!(cache.verify().is_empty());
    // flip one content byte on disk
    let path = cache.path(&k.finish());
    let mut d = std::fs::read(&path).unwrap();
    let last = d.len() - 1;
    d[last] ^= 1;
    std::fs::write(&path, &d).unwrap();
    assert_eq!(cache.verify(), std::slice::from_ref(&path));
    assert_eq!(cache.get(&k), None);
    assert!(!path.exists(), "the corrupt entry is evicted");
    // a truncated entry too
    cache.put(&k, b"cubin bytes").unwrap();
    std::fs::write(&path, &std::fs::read(&path).unwrap()[..20]).unwrap();
    assert_eq!(cache.get(&k), None);
    assert_eq!(cache.totals(), (1, 3));
}

#[test]
fn the_least_recently_used_entries_go_first() {
    let dir = tempfile::tempdir().unwrap();
    // room for two entries of 100 bytes (plus headers), not three
    let cache = Cache::open(dir.path(), 2 * (100 + HEADER as u64)).unwrap();
    let keys: Vec<Key> = (0..3).map(|i| Key::new("t").text(&i.to_string())).collect();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(100);
    cache.put(&keys[0], &[0; 100]).unwrap();
    cache.put(&keys[1], &[1; 100]).unwrap();
    for (i, k) in keys[..2].iter().enumerate() {
        let f = std::fs::File::options()
            .append(true)
            .open(cache.path(&k.finish()))
            .unwrap();
        f.set_modified(old + std::time::Duration::from_secs(i as u64))
            .unwrap();
    }
    // using entry 0 makes entry 1 the least recently used
    assert!(cache.get(&keys[0]).is_some());
    cache.put(&keys[2], &[2; 100]).unwrap();
    assert!(cache.get(&keys[0]).is_some());
    assert!(cache.get(&keys[1]).is_none());
    assert!(cache.get(&keys[2]).is_some());
    assert_eq!(cache.stats().entries, 2);
    cache.clear().unwrap();
    assert_eq!(cache.stats(), Stats::default());
}

#[test]
fn a_directory_others_can_write_is_made_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let _cache = Cache::open(dir.path(), DEFAULT_CAP).unwrap();
    let mode = std::fs::metadata(dir.path()).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}

#[test]
fn packed_parts_round_trip() {
    let parts: [&[u8]; 3] = [b"out", b"", b"messages"];
    let packed = pack(&parts);
    assert_eq!(unpack(&packed).unwrap(), parts.map(|p| p.to_vec()));
    assert!(unpack(&packed[..packed.len() - 1]).is_none());
}
