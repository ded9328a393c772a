//! Line information in canonical form (`-lineinfo`): libNVVM numbers the `.file`
//! directives and the `.debug_str` strings that name inlined functions in the order the
//! IR linker met them, so both are numbered again: files by path, strings by their first
//! use in the (sorted) functions. `.loc N`, `inlined_at N` and `$L__info_stringN` in the
//! functions follow.

use std::collections::BTreeMap;

use super::{Item, What, bad};
use crate::diag::Result;

const STRING: &str = "$L__info_string";

/// New numbers of the files and strings, and the `.debug_str` strings' bytes.
pub struct Lines {
    files: BTreeMap<u64, u64>,
    /// The `.file` directives renumbered, in their new order.
    pub file_directives: Vec<String>,
    strings: BTreeMap<u64, String>,
    order: Vec<u64>,
}

/// `.file N rest` as (N, rest).
fn file_number(text: &str) -> Option<(u64, &str)> {
    let rest = text.strip_prefix(".file")?.trim_start();
    let end = rest.find(|c: char| !c.is_ascii_digit())?;
    Some((rest[..end].parse().ok()?, rest[end..].trim_start()))
}

impl Lines {
    /// The numbering for `items` whose functions come out in `functions`' order.
    pub fn new(items: &[Item], functions: &[&Item]) -> Result<Lines> {
        let mut files: Vec<(u64, &str)> = items
            .iter()
            .filter(|i| i.what == What::File)
            .map(|i| {
                file_number(&i.text)
                    .ok_or_else(|| bad(&format!("has a bad .file directive: {}", i.text)))
            })
            .collect::<Result<_>>()?;
        files.sort_by(|a, b| a.1.cmp(b.1));
        let file_directives = files
            .iter()
            .enumerate()
            .map(|(k, (_, rest))| format!(".file\t{} {rest}", k + 1))
            .collect();
        let files = files
            .iter()
            .enumerate()
            .map(|(k, (n, _))| (*n, k as u64 + 1))
            .collect();
        let mut strings = BTreeMap::new();
        for i in items
            .iter()
            .filter(|i| i.what == What::Other && i.text.starts_with(".section"))
        {
            if i.text.split_whitespace().nth(1) == Some(".debug_str") {
                strings.extend(debug_strings(&i.text)?);
            }
        }
        let mut order = Vec::new();
        for f in functions {
            for n in numbers_after(&f.text, STRING) {
                if strings.contains_key(&n) && !order.contains(&n) {
                    order.push(n);
                }
            }
        }
        // strings no function names stay, after the others
        order.extend(
            strings
                .keys()
                .filter(|k| !order.contains(k))
                .copied()
                .collect::<Vec<_>>(),
        );
        Ok(Lines {
            files,
            file_directives,
            strings,
            order,
        })
    }

    /// Whether there is line information to renumber.
    pub fn any(&self) -> bool {
        !self.files.is_empty() || !self.strings.is_empty()
    }

    /// A function's text with its file and string numbers made new.
    pub fn renumber(&self, text: &str) -> String {
        let strings: BTreeMap<u64, u64> = self
            .order
            .iter()
            .enumerate()
            .map(|(k, &n)| (n, k as u64))
            .collect();
        let text = replace_numbers(text, ".loc", &self.files);
        let text = replace_numbers(&text, "inlined_at", &self.files);
        replace_numbers(&text, STRING, &strings)
    }

    /// The `.debug_str` section with its strings in their new order.
    pub fn debug_str(&self) -> Option<String> {
        if self.strings.is_empty() {
            return None;
        }
        let mut out = String::from(".section\t.debug_str\n\t{\n");
        for (k, n) in self.order.iter().enumerate() {
            out.push_str(&format!("{STRING}{k}:\n{}\n", self.strings[n]));
        }
        out.push_str("\n\t}");
        Some(out)
    }
}

/// The strings of a `.debug_str` section: label number to its `.b8` lines.
fn debug_strings(text: &str) -> Result<BTreeMap<u64, String>> {
    let mut out: BTreeMap<u64, String> = BTreeMap::new();
    let mut current = None;
    for line in text.lines().map(str::trim) {
        if let Some(n) = line.strip_prefix(STRING).and_then(|r| r.strip_suffix(':')) {
            let n: u64 = n
                .parse()
                .map_err(|_| bad(&format!("has a bad string label: {line}")))?;
            current = Some(n);
            out.insert(n, String::new());
        } else if line.starts_with(".b8") {
            let n = current.ok_or_else(|| bad("has .debug_str bytes before any label"))?;
            let s = out.get_mut(&n).expect("inserted with its label");
            if !s.is_empty() {
                s.push('\n');
            }
            s.push_str(line);
        }
    }
    Ok(out)
}

/// The numbers written right after `word` (and its blanks) in `text`.
fn numbers_after<'a>(text: &'a str, word: &'a str) -> impl Iterator<Item = u64> + 'a {
    text.match_indices(word).filter_map(move |(at, _)| {
        let rest = text[at + word.len()..].trim_start_matches([' ', '\t']);
        let end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        rest[..end].parse().ok()
    })
}

/// `text` with each number after `word` mapped (numbers not in the map kept).
fn replace_numbers(text: &str, word: &str, map: &BTreeMap<u64, u64>) -> String {
    if map.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(word) {
        let after = at + word.len();
        out.push_str(&rest[..after]);
        rest = &rest[after..];
        let blanks = rest.len() - rest.trim_start_matches([' ', '\t']).len();
        out.push_str(&rest[..blanks]);
        rest = &rest[blanks..];
        let end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        match rest[..end].parse::<u64>().ok().and_then(|n| map.get(&n)) {
            Some(new) => out.push_str(&new.to_string()),
            None => out.push_str(&rest[..end]),
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}
