//! `--explain` in a link: the record of the last link to the same output read before the
//! lookup, the causes said after a miss, and this link's record left for the next one.

use crate::cache::Cache;
use crate::cache::Key;
use crate::cache::tally::Seen;
use crate::cli::LinkRequest;
use crate::diag::Diagnostics;

use super::{Part, Parts, Record};

/// The last link to this link's output, as its record says.
pub struct Last {
    /// The record's name, and the output as the record names it (none: no record kept,
    /// the drop-in's links, whose outputs are temporary files).
    id: Option<(String, String)>,
    record: Option<Record>,
    target: String,
}

impl Last {
    /// The record of the last link to `req`'s output in `cache` (read when the link is
    /// cached or explained).
    pub fn of(req: &LinkRequest, cache: &Cache, keyed: bool) -> Last {
        let target = req.target.to_string();
        let id = (!req.nvjitlink).then(|| super::record_id(&req.output, &target));
        let record = id
            .as_ref()
            .filter(|_| keyed || req.observe.explain)
            .and_then(|(id, _)| cache.record(id))
            .and_then(|b| Record::from_bytes(&b));
        Last { id, record, target }
    }

    /// Says why the link is no hit: what differs from the last link (`now`: this link's
    /// parts, or why it is not cached).
    pub fn say_why(&self, diag: &Diagnostics, now: Result<&[Part], &str>) {
        let shown = self.id.as_ref().map_or("", |(_, s)| s.as_str());
        let now = match now {
            Ok(p) => p,
            Err(why) => return diag.explain(&format!("this link is never cached whole: {why}")),
        };
        let Some(before) = &self.record else {
            return diag.explain(&super::printable(&format!(
                "no earlier link to '{shown}' for {} in this cache",
                self.target
            )));
        };
        let causes = super::causes(&before.parts, now);
        if causes.is_empty() {
            diag.explain(&super::printable(&format!(
                "the same inputs, tools, options and settings as the last link to '{shown}': its entry is gone (evicted, cleared, or not stored)"
            )));
        }
        for c in causes {
            diag.explain(&super::printable(&c));
        }
    }

    /// Says, for each stage lookup that missed, which of its inputs the last link had
    /// not looked up.
    pub fn say_stages(&self, diag: &Diagnostics, cache: &Cache) {
        let Some(before) = &self.record else { return };
        let (_, missed) = cache.seen_and_missed();
        let missed: Vec<_> = missed.into_iter().filter(|m| m.stage != "link").collect();
        for line in super::stage_causes(&before.stages, &missed) {
            diag.explain(&super::printable(&line));
        }
    }

    /// Leaves this link's record (its parts and key; `stages`: what its stages looked
    /// up, or, for a hit, which ran none, the last link's), when it differs from the last.
    pub fn remember(&self, cache: &Cache, parts: &Parts, key: &Key, stages: Option<Seen>) {
        let Some((id, shown)) = &self.id else { return };
        let hex = key.finish();
        if stages.is_none() && self.record.as_ref().is_some_and(|r| r.key == hex) {
            return;
        }
        let record = Record {
            output: shown.clone(),
            target: self.target.clone(),
            key: hex,
            parts: parts.0.clone(),
            stages: stages
                .or_else(|| self.record.as_ref().map(|r| r.stages.clone()))
                .unwrap_or_default(),
        };
        cache.put_record(id, &record.to_bytes());
    }
}
