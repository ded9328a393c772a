//! `--explain`: why a link was not a whole-link cache hit, as `ninja -d explain` says why
//! a target is rebuilt. The whole-link key is made from a list of [`Part`]s (each option
//! of the normalized request, each tool's path and identity, each setting of the
//! environment that changes the image, each input's name and content digest: whoever
//! makes the key hands them here as a list, [`Parts::key`]); after every cached link the
//! list is kept in the cache as the [`Record`] of its output (by the output's path and the
//! target, or nvcc's output for a link nvcc runs on a temporary file), with the digests
//! of every named part each stage looked up. A link that misses then says, one line per
//! cause, what differs from the last link to the same output ([`causes`]), and for each
//! stage lookup that missed, which of its inputs the last link had not looked up
//! ([`stage_causes`]).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::cache::Key;
use crate::cache::tally::{Missed, Seen};

mod link;
mod options;
#[cfg(test)]
mod tests;

pub use link::Last;
pub use options::fields;

/// What a part of the key is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    /// A field of the normalized request (its name and `Debug` value).
    Option,
    /// A tool by its role (`ptxas`): its path, a tab, its identity.
    Tool,
    /// A variable of the environment that changes the image by its value.
    Setting,
    /// An input: its name, and its content's digest.
    Input,
}

/// One part of the whole-link key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    pub kind: Kind,
    pub name: String,
    pub value: String,
}

/// The parts of a whole-link key, in order.
#[derive(Clone, Debug, Default)]
pub struct Parts(pub Vec<Part>);

impl Parts {
    pub fn push(&mut self, kind: Kind, name: impl Into<String>, value: impl Into<String>) {
        self.0.push(Part {
            kind,
            name: name.into(),
            value: value.into(),
        });
    }

    /// The whole-link key the parts make (each kind, name and value, in order).
    pub fn key(&self) -> Key {
        let mut k = Key::new("link");
        for p in &self.0 {
            k = k
                .text(&format!("{:?}", p.kind))
                .text(&p.name)
                .text(&p.value);
        }
        k
    }
}

/// What the last cached link to an output was made of.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Record {
    pub output: String,
    pub target: String,
    pub key: String,
    pub parts: Vec<Part>,
    /// The digests of the named parts each stage looked up.
    pub stages: Seen,
}

impl Record {
    pub fn from_bytes(b: &[u8]) -> Option<Record> {
        serde_json::from_slice(b).ok()
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// The name of the record of links to `output` for `target`: nvcc's output when the
/// output is a temporary file of the nvcc that runs the link (another name each run),
/// else the output's absolute path.
pub fn record_id(output: &Path, target: &str) -> (String, String) {
    let identity = match crate::trace::nvcc::output_of_parent(output) {
        Some((_, out)) => out,
        None => std::path::absolute(output).unwrap_or_else(|_| output.to_path_buf()),
    };
    let shown = identity.display().to_string();
    let id = blake3::hash(format!("{shown}\0{target}").as_bytes())
        .to_hex()
        .to_string();
    (id, shown)
}

/// Longest value shown whole in a cause.
const SHOWN: usize = 120;

fn shown(v: &str) -> String {
    // (an option's value as the request's `Debug` has it: `None`, `Some(32)`)
    let v = match v {
        "None" => "(not given)",
        _ => v
            .strip_prefix("Some(")
            .and_then(|x| x.strip_suffix(')'))
            .unwrap_or(v),
    };
    match v.char_indices().nth(SHOWN) {
        Some((at, _)) => format!("{}…", &v[..at]),
        None => v.to_string(),
    }
}

/// `line` with its control characters written as escapes (`\n`, `\u{1b}`): a name from
/// a file or a record never moves the terminal's cursor or starts a line of its own.
pub fn printable(line: &str) -> String {
    line.chars()
        .flat_map(|c| match c.is_control() {
            true => c.escape_default().collect::<Vec<_>>(),
            false => vec![c],
        })
        .collect()
}

fn of_kind(parts: &[Part], kind: Kind) -> Vec<&Part> {
    parts.iter().filter(|p| p.kind == kind).collect()
}

/// One line per difference between the parts of the last link (`before`) and this
/// one's (`now`): options and settings by name, tools by role, inputs by position.
pub fn causes(before: &[Part], now: &[Part]) -> Vec<String> {
    let mut out = Vec::new();
    for (kind, what) in [
        (Kind::Option, "option"),
        (Kind::Setting, "environment variable"),
    ] {
        let (b, n) = (of_kind(before, kind), of_kind(now, kind));
        let old: BTreeMap<&str, &str> = b
            .iter()
            .map(|p| (p.name.as_str(), p.value.as_str()))
            .collect();
        let new: BTreeMap<&str, &str> = n
            .iter()
            .map(|p| (p.name.as_str(), p.value.as_str()))
            .collect();
        let spell = |name: &str| match kind {
            Kind::Option => options::spelling(name),
            _ => name.to_string(),
        };
        for p in &n {
            match old.get(p.name.as_str()) {
                Some(v) if *v == p.value => {}
                Some(v) => out.push(format!(
                    "{what} {} changed: {} → {}",
                    spell(&p.name),
                    shown(v),
                    shown(&p.value)
                )),
                None => out.push(format!(
                    "{what} {} is new: {}",
                    spell(&p.name),
                    shown(&p.value)
                )),
            }
        }
        for p in b.iter().filter(|p| !new.contains_key(p.name.as_str())) {
            out.push(format!(
                "{what} {} is no longer set (was {})",
                spell(&p.name),
                shown(&p.value)
            ));
        }
    }
    out.extend(tool_causes(
        &of_kind(before, Kind::Tool),
        &of_kind(now, Kind::Tool),
    ));
    out.extend(input_causes(
        &of_kind(before, Kind::Input),
        &of_kind(now, Kind::Input),
    ));
    out
}

/// Tools by role: another file, or the same file with another content.
fn tool_causes(before: &[&Part], now: &[&Part]) -> Vec<String> {
    let split = |v: &str| -> (String, String) {
        let (path, id) = v.split_once('\t').unwrap_or((v, ""));
        (path.to_string(), id.to_string())
    };
    let old: BTreeMap<&str, (String, String)> = before
        .iter()
        .map(|p| (p.name.as_str(), split(&p.value)))
        .collect();
    let mut out = Vec::new();
    for p in now {
        let (path, id) = split(&p.value);
        match old.get(p.name.as_str()) {
            Some((op, oi)) if *op == path && *oi == id => {}
            Some((op, oi)) if *op != path && *oi == id => out.push(format!(
                "tool {} moved (the same content): '{op}' → '{path}'",
                p.name
            )),
            Some((op, _)) if *op != path => {
                out.push(format!("tool {} changed: '{op}' → '{path}'", p.name))
            }
            Some(_) => out.push(format!(
                "tool {} changed: '{path}' has another content",
                p.name
            )),
            None => out.push(format!("tool {} is new: '{path}'", p.name)),
        }
    }
    for p in before
        .iter()
        .filter(|p| !now.iter().any(|n| n.name == p.name))
    {
        out.push(format!(
            "tool {} is no longer used (was '{}')",
            p.name,
            split(&p.value).0
        ));
    }
    out
}

/// Inputs by position: another file, the same name with another content, added, gone.
fn input_causes(before: &[&Part], now: &[&Part]) -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..before.len().max(now.len()) {
        let n = i + 1;
        match (before.get(i), now.get(i)) {
            (Some(b), Some(c)) if b.name != c.name => {
                out.push(format!("input {n} is now '{}' (was '{}')", c.name, b.name))
            }
            (Some(b), Some(c)) if b.value != c.value => {
                out.push(format!("input {n} '{}' changed (its content)", c.name))
            }
            (None, Some(c)) => out.push(format!("input {n} '{}' is new", c.name)),
            (Some(b), None) => out.push(format!("input {n} '{}' is gone", b.name)),
            _ => {}
        }
    }
    out
}

/// The most stage lookups explained one by one; the others are counted.
const MAX_STAGE_LINES: usize = 50;

/// For each lookup that missed, which of its named parts the last link (`before`: what
/// its stages looked up) had not looked up in that stage.
pub fn stage_causes(before: &Seen, missed: &[Missed]) -> Vec<String> {
    let mut out = Vec::new();
    for m in missed.iter().take(MAX_STAGE_LINES) {
        let what = match m.about.as_str() {
            "" => m.stage.clone(),
            a => a.to_string(),
        };
        let seen = before.get(&m.stage);
        let new: Vec<&str> = m
            .parts
            .iter()
            .filter(|(label, d)| {
                !seen
                    .and_then(|s| s.get(label))
                    .is_some_and(|s| s.contains(d))
            })
            .map(|(label, _)| label.as_str())
            .collect();
        out.push(match new.as_slice() {
            [] if m.parts.is_empty() => format!("{what} missed"),
            [] => format!(
                "{what} missed, though the last link looked up the same inputs (its entry was evicted, or not stored)"
            ),
            [one] => format!("{what} missed: new {one}"),
            [first @ .., last] => format!("{what} missed: new {} and {last}", first.join(", ")),
        });
    }
    if missed.len() > MAX_STAGE_LINES {
        out.push(format!(
            "and {} more stage lookups missed",
            missed.len() - MAX_STAGE_LINES
        ));
    }
    out
}
