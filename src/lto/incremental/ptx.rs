//! The PTX of a partition, taken apart at the top level (directives, declarations,
//! variable and function definitions, with the comments before each), put in a canonical
//! form, and rewritten so that partitions link into one image:
//!
//! * canonical form ([`normalize`]): libNVVM emits a partition's functions in the order
//!   the IR linker met them, which depends on units the partition does not reach, and
//!   numbers labels and local depots by that order. So every function gets a prototype
//!   up front, definitions are sorted by name, variables by name (each after those its
//!   initializer names), and the function-scoped numbers are made 0; with line
//!   information, files and the strings naming inlined functions are numbered again
//!   (`lines`). Then a partition's PTX depends on what it reaches alone, and a cached one
//!   is what a cold compile gives.
//! * linking ([`rewrite`]): a pinned variable is defined by its owner and declared
//!   `.extern` by the others (an internal owner's definition becomes `.visible`); a kernel
//!   that is not the partition's own (one it launches) becomes an `.extern .entry`; a
//!   `.visible` or `.weak` function of a code partition becomes internal (each partition
//!   keeps its own copy, as the whole-program link keeps every function internal).

use std::collections::{BTreeMap, BTreeSet};

use crate::diag::{Error, Result};

mod lines;

/// What a top-level statement is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum What {
    /// `.version`, `.target`, `.address_size` (and the comments before them).
    Header,
    /// `.file` (line information).
    File,
    Variable,
    /// A function or kernel declaration (no body).
    Declaration,
    Function,
    Kernel,
    /// `.section` (DWARF) and anything else, kept where it was.
    Other,
}

/// One top-level statement.
#[derive(Clone, Debug)]
pub struct Item {
    pub what: What,
    /// `.visible`, `.extern`, `.weak`, `.common`, or "" (internal).
    pub linkage: String,
    pub name: String,
    /// The comments before it, then the statement, each ending in a newline.
    pub comments: String,
    pub text: String,
}

impl Item {
    fn render(&self, out: &mut String) {
        out.push_str(&self.comments);
        out.push_str(&self.text);
        out.push('\n');
    }
}

fn bad(what: &str) -> Error {
    Error::fatal("elfLink nvvm error").context(format!("incremental LTO: libNVVM's PTX {what}"))
}

/// Splits PTX into its top-level statements.
pub fn parse(ptx: &str) -> Result<Vec<Item>> {
    let b = ptx.as_bytes();
    let mut items = Vec::new();
    let mut comments = String::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if b[i..].starts_with(b"//") {
            let end = line_end(b, i);
            comments.push_str(&ptx[i..end]);
            comments.push('\n');
            i = end;
            continue;
        }
        if b[i..].starts_with(b"/*") {
            let end = find(b, i + 2, b"*/").ok_or_else(|| bad("has an unclosed comment"))? + 2;
            comments.push_str(&ptx[i..end]);
            comments.push('\n');
            i = end;
            continue;
        }
        let end = statement_end(ptx, i)?;
        let text = ptx[i..end].trim_end().to_string();
        let mut item = classify(text)?;
        item.comments = std::mem::take(&mut comments);
        items.push(item);
        i = end;
    }
    if !comments.is_empty() {
        items.push(Item {
            what: What::Other,
            linkage: String::new(),
            name: String::new(),
            comments,
            text: String::new(),
        });
    }
    Ok(items)
}

fn line_end(b: &[u8], i: usize) -> usize {
    b[i..]
        .iter()
        .position(|&c| c == b'\n')
        .map_or(b.len(), |n| i + n)
}

fn find(b: &[u8], from: usize, what: &[u8]) -> Option<usize> {
    b.get(from..)?
        .windows(what.len())
        .position(|w| w == what)
        .map(|n| from + n)
}

/// Where the statement starting at `i` ends: a one-line directive at its line's end; a
/// function or section after its closing brace; anything else after its `;` (braces of
/// an initializer included).
fn statement_end(ptx: &str, i: usize) -> Result<usize> {
    let b = ptx.as_bytes();
    let first = ptx[i..line_end(b, i)].trim_start();
    if [".version", ".target", ".address_size", ".file"]
        .iter()
        .any(|d| first.starts_with(d))
    {
        return Ok(line_end(b, i));
    }
    let mut depth = 0i32;
    let mut body = false;
    let mut k = i;
    while k < b.len() {
        match b[k] {
            b'"' => {
                k += 1;
                while k < b.len() && b[k] != b'"' {
                    k += 1 + (b[k] == b'\\') as usize;
                }
            }
            b'/' if b.get(k + 1) == Some(&b'/') => k = line_end(b, k) - 1,
            b'/' if b.get(k + 1) == Some(&b'*') => {
                k = find(b, k + 2, b"*/").ok_or_else(|| bad("has an unclosed comment"))? + 1
            }
            b'{' => {
                if depth == 0 {
                    let head = &ptx[i..k];
                    body = [".func", ".entry", ".section"]
                        .iter()
                        .any(|w| has_word(head, w))
                        && !head.contains('=');
                }
                depth += 1;
            }
            b'}' => {
                depth -= 1;
                if depth < 0 {
                    return Err(bad("has an unbalanced '}'"));
                }
                if depth == 0 && body {
                    return Ok(k + 1);
                }
            }
            b';' if depth == 0 => return Ok(k + 1),
            _ => {}
        }
        k += 1;
    }
    Err(bad("ends inside a statement"))
}

/// Whether `text` holds the directive `w` as a word.
fn has_word(text: &str, w: &str) -> bool {
    text.split(|c: char| c.is_whitespace() || c == '(')
        .any(|t| t == w)
}

fn classify(text: String) -> Result<Item> {
    let first = text.split_whitespace().next().unwrap_or("");
    let linkage = match first {
        ".visible" | ".extern" | ".weak" | ".common" => first.to_string(),
        _ => String::new(),
    };
    let head_end = text.find(['{', '=', ';']).unwrap_or(text.len());
    let head = &text[..head_end];
    let has_body = text[head_end..].starts_with('{');
    let (what, name) = if [".version", ".target", ".address_size"].contains(&first) {
        (What::Header, String::new())
    } else if first == ".file" {
        (What::File, String::new())
    } else if has_word(head, ".entry") || has_word(head, ".func") {
        let name = function_name(head)
            .ok_or_else(|| bad(&format!("has a function without a name: {head}")))?;
        let what = match (has_body, has_word(head, ".entry")) {
            (false, _) => What::Declaration,
            (true, true) => What::Kernel,
            (true, false) => What::Function,
        };
        (what, name)
    } else if [
        ".global",
        ".const",
        ".shared",
        ".local",
        ".tex",
        ".surfref",
        ".texref",
        ".samplerref",
    ]
    .iter()
    .any(|w| has_word(head, w))
    {
        let name = variable_name(head)
            .ok_or_else(|| bad(&format!("has a variable without a name: {head}")))?;
        (What::Variable, name)
    } else {
        (What::Other, String::new())
    };
    Ok(Item {
        what,
        linkage,
        name,
        comments: String::new(),
        text,
    })
}

/// `.func (.param .b32 r) name(...)` or `.entry name(...)`: the identifier after the
/// directive (and after the return parameters of a `.func`).
fn function_name(head: &str) -> Option<String> {
    let at = head
        .find(".entry")
        .map(|n| n + 6)
        .or_else(|| head.find(".func").map(|n| n + 5))?;
    let mut rest = head[at..].trim_start();
    if rest.starts_with('(') {
        let close = matching(rest, 0)?;
        rest = rest[close + 1..].trim_start();
    }
    let end = rest
        .find(|c: char| c.is_whitespace() || c == '(')
        .unwrap_or(rest.len());
    (end > 0).then(|| rest[..end].to_string())
}

/// The index of the `)` matching the `(` at `open`.
fn matching(s: &str, open: usize) -> Option<usize> {
    let mut depth = 0;
    for (k, c) in s[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + k);
                }
            }
            _ => {}
        }
    }
    None
}

/// A variable's name: the last word of its declarator that is not a directive, without
/// its array bounds (parenthesized attributes skipped).
fn variable_name(head: &str) -> Option<String> {
    let mut plain = String::new();
    let mut depth = 0;
    for c in head.chars() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    plain
        .split_whitespace()
        .rev()
        .find(|w| !w.starts_with('.'))
        .map(str::to_string)
}

/// The names a text uses (identifiers, `$` and `.` allowed inside as PTX does).
fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == '.'))
        .filter(|w| {
            !w.is_empty() && !w.starts_with('.') && !w.starts_with(|c: char| c.is_ascii_digit())
        })
}

/// A function's prototype: its header up to the end of its parameter list.
fn prototype(item: &Item) -> Option<String> {
    let head_end = item.text.find('{')?;
    let head = item.text[..head_end].trim_end();
    // the parameter list that follows the name
    let at = head.find(&item.name)? + item.name.len();
    let rest = &head[at..];
    let open = rest.find('(')?;
    let close = matching(rest, open)?;
    Some(format!("{}{};", &head[..at], &rest[..=close]))
}

/// Function-scoped numbers made 0: `$L__BB<n>_` labels and `__local_depot<n>`.
fn unnumbered(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = ["$L__BB", "__local_depot"]
        .iter()
        .filter_map(|p| rest.find(p).map(|n| (n, p.len())))
        .min()
    {
        let (n, len) = at;
        out.push_str(&rest[..n + len]);
        rest = &rest[n + len..];
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits > 0 {
            out.push('0');
            rest = &rest[digits..];
        }
    }
    out.push_str(rest);
    out
}

/// The canonical form of a partition's PTX (see the module comment).
pub fn normalize(ptx: &str) -> Result<String> {
    let items = parse(ptx)?;
    let mut out = String::with_capacity(ptx.len() + 4096);
    let pick = |w: What| items.iter().filter(move |i| i.what == w);
    let mut functions: Vec<&Item> = items
        .iter()
        .filter(|i| matches!(i.what, What::Function | What::Kernel))
        .collect();
    functions.sort_by(|a, b| a.name.cmp(&b.name));
    let lines = lines::Lines::new(&items, &functions)?;
    for i in pick(What::Header) {
        i.render(&mut out);
    }
    for f in &lines.file_directives {
        out.push_str(f);
        out.push('\n');
    }
    out.push('\n');
    let defined: BTreeSet<&str> = functions.iter().map(|i| i.name.as_str()).collect();
    // declarations of what is defined elsewhere, then prototypes of everything defined
    let mut decls: BTreeMap<&str, &Item> = BTreeMap::new();
    for i in pick(What::Declaration).filter(|i| !defined.contains(i.name.as_str())) {
        decls.entry(&i.name).or_insert(i);
    }
    for i in decls.values() {
        out.push_str(&i.text);
        out.push('\n');
    }
    for f in &functions {
        let p = prototype(f)
            .ok_or_else(|| bad(&format!("function '{}' has no parameter list", f.name)))?;
        out.push_str(&p);
        out.push('\n');
    }
    out.push('\n');
    for v in sorted_variables(pick(What::Variable).collect()) {
        v.render(&mut out);
    }
    out.push('\n');
    for f in functions {
        let text = unnumbered(&f.text);
        out.push_str(&match lines.any() {
            true => lines.renumber(&text),
            false => text,
        });
        out.push_str("\n\n");
    }
    for i in pick(What::Other) {
        let debug_str = i.text.starts_with(".section")
            && i.text.split_whitespace().nth(1) == Some(".debug_str");
        match (debug_str, lines.debug_str()) {
            (true, Some(s)) => {
                out.push_str(&i.comments);
                out.push_str(&s);
                out.push('\n');
            }
            _ => i.render(&mut out),
        }
    }
    Ok(out)
}

/// Variables by name, each after the variables its initializer names.
fn sorted_variables(mut vars: Vec<&Item>) -> Vec<&Item> {
    vars.sort_by(|a, b| a.name.cmp(&b.name));
    let by_name: BTreeMap<&str, usize> = vars
        .iter()
        .enumerate()
        .map(|(k, v)| (v.name.as_str(), k))
        .collect();
    let mut done = vec![false; vars.len()];
    let mut out = Vec::with_capacity(vars.len());
    fn visit<'a>(
        k: usize,
        vars: &[&'a Item],
        by_name: &BTreeMap<&str, usize>,
        done: &mut [bool],
        out: &mut Vec<&'a Item>,
    ) {
        if done[k] {
            return;
        }
        done[k] = true;
        let init = vars[k].text.split_once('=').map_or("", |(_, r)| r);
        let deps: BTreeSet<usize> = identifiers(init)
            .filter_map(|w| by_name.get(w).copied())
            .collect();
        for d in deps {
            visit(d, vars, by_name, done, out);
        }
        out.push(vars[k]);
    }
    for k in 0..vars.len() {
        visit(k, &vars, &by_name, &mut done, &mut out);
    }
    out
}

/// What [`rewrite`] is told about one partition.
pub struct Role<'a> {
    /// The data partition (it keeps `.visible` functions: their addresses are in the
    /// pinned variables it defines).
    pub data: bool,
    /// The kernels that are this partition's own.
    pub roots: &'a BTreeSet<String>,
    /// Pinned variables this partition defines for everyone.
    pub owns: &'a BTreeSet<String>,
    /// Every pinned variable (those not in `owns` are declared `.extern`).
    pub pinned: &'a BTreeSet<String>,
    /// Kernels some partition launches but does not own: their owner makes them visible.
    pub launched: &'a BTreeSet<String>,
}

/// The kernels a partition's PTX defines or declares that are not its own (those it
/// launches from the device).
pub fn foreign_kernels(ptx: &str, roots: &BTreeSet<String>) -> Result<BTreeSet<String>> {
    Ok(parse(ptx)?
        .into_iter()
        .filter(|i| {
            matches!(i.what, What::Kernel | What::Declaration) && has_word(&i.text, ".entry")
        })
        .filter(|i| !roots.contains(&i.name))
        .map(|i| i.name)
        .collect())
}

/// The variables a partition's PTX defines (not `.extern`).
pub fn defined_variables(ptx: &str) -> Result<BTreeSet<String>> {
    Ok(parse(ptx)?
        .into_iter()
        .filter(|i| i.what == What::Variable && i.linkage != ".extern")
        .map(|i| i.name)
        .collect())
}

/// A normalized partition PTX made to link with the others (see the module comment).
pub fn rewrite(ptx: &str, role: &Role) -> Result<String> {
    let mut out = String::with_capacity(ptx.len());
    for mut item in parse(ptx)? {
        match item.what {
            What::Variable if role.pinned.contains(&item.name) && item.linkage != ".extern" => {
                if role.owns.contains(&item.name) {
                    if item.linkage.is_empty() {
                        item.text = format!(".visible {}", item.text);
                    }
                } else {
                    item.text = extern_variable(&item);
                }
            }
            What::Kernel if !role.roots.contains(&item.name) => {
                let p = prototype(&item).ok_or_else(|| bad("has a kernel without parameters"))?;
                item.text = format!(".extern {}", without_linkage(&p));
            }
            What::Kernel if item.linkage.is_empty() && role.launched.contains(&item.name) => {
                // a kernel other partitions launch: they refer to it by name
                item.text = format!(".visible {}", item.text);
            }
            What::Declaration
                if !role.roots.contains(&item.name) && has_word(&item.text, ".entry") =>
            {
                item.text = format!(".extern {}", without_linkage(&item.text));
            }
            What::Declaration
                if has_word(&item.text, ".entry")
                    && item.linkage.is_empty()
                    && role.launched.contains(&item.name) =>
            {
                item.text = format!(".visible {}", item.text);
            }
            What::Function | What::Declaration
                if !role.data
                    && matches!(item.linkage.as_str(), ".visible" | ".weak")
                    && !has_word(&item.text, ".entry") =>
            {
                item.text = without_linkage(&item.text).to_string();
            }
            _ => {}
        }
        item.render(&mut out);
    }
    Ok(out)
}

fn without_linkage(text: &str) -> &str {
    let t = text.trim_start();
    for w in [".visible", ".extern", ".weak", ".common"] {
        if let Some(rest) = t.strip_prefix(w) {
            return rest.trim_start();
        }
    }
    t
}

/// A variable definition as an `.extern` declaration (no initializer).
fn extern_variable(item: &Item) -> String {
    let decl = item
        .text
        .split_once('=')
        .map_or(item.text.as_str(), |(d, _)| d);
    let decl = decl.trim_end().trim_end_matches(';').trim_end();
    format!(".extern {};", without_linkage(decl))
}

#[cfg(test)]
mod tests;
