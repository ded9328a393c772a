//! Fuzzes the cache reader with hostile entries: arbitrary bytes at an entry's place
//! (never a hit unless they pass the header check, and `verify` agrees with `get`), and
//! stored entries with bytes changed on disk (a hit gives back exactly what was stored,
//! or nothing). Hits are unpacked as the whole-link stage unpacks them.
#![no_main]
use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use nvlinkrs::cache::{Cache, DEFAULT_CAP, Key, check_entry, unpack};

fn cache() -> &'static (tempfile::TempDir, Cache) {
    static CACHE: OnceLock<(tempfile::TempDir, Cache)> = OnceLock::new();
    CACHE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path(), DEFAULT_CAP).unwrap();
        (dir, cache)
    })
}

fn entry_path(dir: &std::path::Path, key: &Key) -> PathBuf {
    let hex = key.finish();
    dir.join("objects").join(&hex[..2]).join(&hex[2..])
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, payload)) = data.split_first() else {
        return;
    };
    let (dir, cache) = cache();
    let key = Key::new("fuzz").text("entry");
    let path = entry_path(dir.path(), &key);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    if mode % 2 == 0 {
        // arbitrary bytes where the entry goes
        std::fs::write(&path, payload).unwrap();
        let intact = cache.verify().is_empty();
        let got = cache.get(&key);
        assert_eq!(intact, got.is_some());
        assert_eq!(got, check_entry(payload, &key));
        if let Some(g) = got {
            let _ = unpack(&g);
        }
    } else {
        // a stored entry, one byte changed (or none, when the position is past the end)
        cache.put(&key, payload);
        let mut on_disk = std::fs::read(&path).unwrap();
        let at = usize::from(mode) * 7 % (on_disk.len() + 1);
        if let Some(b) = on_disk.get_mut(at) {
            *b ^= payload.first().copied().unwrap_or(1) | 1;
        }
        std::fs::write(&path, &on_disk).unwrap();
        match cache.get(&key) {
            Some(g) => {
                assert_eq!(g, payload);
                let _ = unpack(&g);
            }
            None => assert!(at < on_disk.len(), "an untouched entry was a miss"),
        }
    }
    let _ = std::fs::remove_file(&path);
});
