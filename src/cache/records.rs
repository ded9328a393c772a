//! The cache's small per-output records (`--explain`'s: what the last link to an output
//! was made of), under `explain/`, one file per output named by a digest
//! ([`is_record_name`]). They are not entries: no key checks them, a damaged one only
//! makes `--explain` say less, and they are kept to [`MAX_RECORDS`], the least recently
//! written going first.

use std::io::Write;

use super::{Cache, guard};

/// The most records kept.
pub const MAX_RECORDS: usize = 4096;
/// The largest record read.
const MAX_RECORD: u64 = 16 << 20;
const DIR: &str = "explain";

pub use super::guard::is_record_name;

impl Cache {
    /// The record `id` (64 hex digits), if there is one.
    pub fn record(&self, id: &str) -> Option<Vec<u8>> {
        let path = self.dir.join(DIR).join(format!("{id}.json"));
        guard::read_regular(&path, MAX_RECORD).ok().flatten()
    }

    /// Writes the record `id` (best effort), through a temporary file; now and then (one
    /// write in 32, by the record's name) the oldest go beyond [`MAX_RECORDS`].
    pub fn put_record(&self, id: &str, bytes: &[u8]) {
        let dir = self.dir.join(DIR);
        if guard::private_subdir(&dir).is_err() || !is_record_name(&format!("{id}.json")) {
            return;
        }
        if let Ok(mut tmp) = tempfile::Builder::new()
            .prefix(guard::TMP_PREFIX)
            .tempfile_in(&dir)
            && tmp.write_all(bytes).is_ok()
        {
            let _ = tmp.persist(dir.join(format!("{id}.json")));
        }
        if id.ends_with('0') && id.as_bytes()[id.len() - 2] < b'8' {
            self.trim_records(MAX_RECORDS);
        }
    }

    /// Removes the least recently written records beyond `keep`.
    pub(super) fn trim_records(&self, keep: usize) {
        let Ok(list) = std::fs::read_dir(self.dir.join(DIR)) else {
            return;
        };
        let mut records: Vec<_> = list
            .flatten()
            .filter(|f| f.file_name().to_str().is_some_and(is_record_name))
            .filter_map(|f| {
                let m = f.metadata().ok().filter(|m| m.is_file())?;
                Some((m.modified().ok()?, f.path()))
            })
            .collect();
        if records.len() <= keep {
            return;
        }
        records.sort();
        for (_, p) in &records[..records.len() - keep] {
            let _ = std::fs::remove_file(p);
        }
    }

    /// The records' folder (for `clear`).
    pub(super) fn records_dir(&self) -> std::path::PathBuf {
        self.dir.join(DIR)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_kept_and_trimmed_oldest_first() {
        let d = tempfile::tempdir().unwrap();
        let cache = Cache::open(d.path(), super::super::DEFAULT_CAP).unwrap();
        let id = |i: u8| format!("{:02x}", i).repeat(32);
        for i in 0..5 {
            cache.put_record(&id(i), format!("record {i}").as_bytes());
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(cache.record(&id(3)).unwrap(), b"record 3");
        assert_eq!(cache.record(&"ab".repeat(32)), None);
        cache.put_record("../../x", b"no");
        cache.trim_records(2);
        assert_eq!(cache.record(&id(0)), None);
        assert!(cache.record(&id(4)).is_some() && cache.record(&id(3)).is_some());
        cache.clear().unwrap();
        assert_eq!(cache.record(&id(4)), None);
    }
}
