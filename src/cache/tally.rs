//! What one process's lookups and stores did, stage by stage: hits (local or from the
//! shared tier), misses, stores, bytes, the time the entries found had cost and the time
//! they saved (for the report and `nvlinkrs stats`); and, for `--explain`, the digests of
//! every named part each stage looked up ([`Seen`]) and the lookups that missed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One stage's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StageCounts {
    pub local_hits: u64,
    /// Hits from the shared tier (copied into the local cache).
    pub shared_hits: u64,
    pub misses: u64,
    pub stores: u64,
    /// Entry bytes read by hits and written by stores.
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// What the entries found took to make, less what finding them took, in microseconds.
    pub saved_us: u64,
}

impl StageCounts {
    pub fn hits(&self) -> u64 {
        self.local_hits + self.shared_hits
    }

    pub fn add(&mut self, o: &StageCounts) {
        self.local_hits = self.local_hits.saturating_add(o.local_hits);
        self.shared_hits = self.shared_hits.saturating_add(o.shared_hits);
        self.misses = self.misses.saturating_add(o.misses);
        self.stores = self.stores.saturating_add(o.stores);
        self.bytes_read = self.bytes_read.saturating_add(o.bytes_read);
        self.bytes_written = self.bytes_written.saturating_add(o.bytes_written);
        self.saved_us = self.saved_us.saturating_add(o.saved_us);
    }
}

/// The digests of the named parts looked up, by stage and label.
pub type Seen = BTreeMap<String, BTreeMap<String, BTreeSet<u64>>>;

/// A lookup that missed: its stage, what it was for, its named parts' digests.
#[derive(Clone, Debug)]
pub struct Missed {
    pub stage: String,
    pub about: String,
    pub parts: Vec<(String, u64)>,
}

/// Where a hit came from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Found {
    Local,
    Shared,
}

/// The process's tally.
#[derive(Default)]
pub struct Tally {
    pub by_stage: BTreeMap<String, StageCounts>,
    pub seen: Seen,
    pub missed: Vec<Missed>,
}

/// The most lookups that missed kept for `--explain` (a link of thousands of jobs that all
/// missed says why for these).
const MAX_MISSED: usize = 10_000;

impl Tally {
    /// A lookup of `key`: found (where, the entry's size and what it cost to make) or not,
    /// having taken `took`.
    pub fn lookup(
        &mut self,
        key: &super::Key,
        found: Option<(Found, u64, Duration)>,
        took: Duration,
    ) {
        let c = self.by_stage.entry(key.stage.clone()).or_default();
        match found {
            Some((from, bytes, cold)) => {
                match from {
                    Found::Local => c.local_hits += 1,
                    Found::Shared => c.shared_hits += 1,
                }
                c.bytes_read += bytes;
                c.saved_us += cold.saturating_sub(took).as_micros() as u64;
            }
            None => {
                c.misses += 1;
                if self.missed.len() < MAX_MISSED {
                    self.missed.push(Missed {
                        stage: key.stage.clone(),
                        about: key.about.clone(),
                        parts: key.parts.clone(),
                    });
                }
            }
        }
        if !key.parts.is_empty() {
            let stage = self.seen.entry(key.stage.clone()).or_default();
            for (label, d) in &key.parts {
                stage.entry(label.clone()).or_default().insert(*d);
            }
        }
    }

    /// A store of `bytes` entry bytes.
    pub fn store(&mut self, stage: &str, bytes: u64) {
        let c = self.by_stage.entry(stage.to_string()).or_default();
        c.stores += 1;
        c.bytes_written += bytes;
    }
}
