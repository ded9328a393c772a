//! A check that the crate's top-level modules (`src/X.rs` or `src/X/`) do not import each
//! other in a cycle: it reads every source file, lists the `crate::X` paths each module
//! names in another top-level module, and fails naming the files of a cycle's imports.
//! Items of `lib.rs` itself (the spine, which calls every phase) are not counted. The
//! same one level down and further: the modules of each folder (`src/cache/guard.rs`,
//! `src/lto/incremental/`), and every level of the drop-in's crate, through `crate::`,
//! `super::` and `self::` paths; a folder's `mod.rs` is its spine, as `lib.rs` is the
//! crate's. That no source file is over 800 lines, and no function over 150 but those
//! listed as still to split. And a check that docs/layout.md has a
//! line for every folder and top-level file of `src/`, and none for one that is gone.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The top-level modules named by `crate::` paths in `text`: `crate::a::b`, and each first
/// name of a brace group, `crate::{a, b::{c, d}}` giving `a` and `b`. Line comments are
/// left out.
fn crate_paths(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                // the names at the group's first level, each up to `::`, `,` or `}`
                let (mut depth, mut start) = (0, true);
                for (i, ch) in group.char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => start = true,
                        c if start && depth == 0 && (c.is_alphanumeric() || c == '_') => {
                            out.insert(ident(&group[i..]));
                            start = false;
                        }
                        c if c.is_whitespace() => {}
                        _ => start = false,
                    }
                }
            } else {
                out.insert(ident(rest));
            }
        }
    }
    out.remove("");
    out
}

fn ident(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// module → module it imports → the files that do.
type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// The imports between the top-level modules of the crate under `src`.
fn graph(src: &Path) -> Graph {
    let mut modules = BTreeSet::new();
    for e in std::fs::read_dir(src).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_stem().unwrap().to_string_lossy().to_string();
        if p.is_dir() && name != "bin" || p.extension().is_some_and(|x| x == "rs") {
            modules.insert(name);
        }
    }
    // the crate root, the binaries' roots, and this check (its examples name modules)
    for m in ["lib", "main", "layering"] {
        modules.remove(m);
    }
    let mut files = Vec::new();
    sources(src, &mut files);
    let mut g = Graph::new();
    for f in files {
        let rel = f.strip_prefix(src).unwrap();
        let from = rel.iter().next().unwrap().to_string_lossy();
        let from = from.trim_end_matches(".rs").to_string();
        if !modules.contains(&from) {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for to in crate_paths(&text) {
            if to != from && modules.contains(&to) {
                g.entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_default()
                    .insert(rel.display().to_string());
            }
        }
    }
    g
}

/// A cycle of the graph, as the modules along it (the first again at the end).
fn cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        g: &Graph,
        m: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == m) {
            let mut c = path[at..].to_vec();
            c.push(m.to_string());
            return Some(c);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for to in g.get(m).into_iter().flat_map(|t| t.keys()) {
            if let Some(c) = visit(g, to, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|m| visit(g, m, &mut Vec::new(), &mut done))
}

#[test]
fn paths_are_read_from_uses_and_brace_groups() {
    let got = crate_paths(
        "use crate::arch::{Arch, sass_compatible};\n\
         use crate::{elf, fatbin::{self, Member}, input::archive};\n\
         // crate::merge in a comment\n\
         let x = crate::ir::is_bitcode(d) && crate::diag::Error::fatal(\"\");",
    );
    let want = ["arch", "diag", "elf", "fatbin", "input", "ir"];
    assert_eq!(got, want.iter().map(|s| s.to_string()).collect());
}

#[test]
fn a_cycle_is_found_and_named() {
    let mut g = Graph::new();
    for (a, b) in [("input", "ir"), ("lto", "input"), ("ir", "lto")] {
        g.entry(a.into()).or_default().entry(b.into()).or_default();
    }
    assert_eq!(cycle(&g).unwrap(), ["input", "ir", "lto", "input"]);
    g.get_mut("ir").unwrap().clear();
    assert_eq!(cycle(&g), None);
}

#[test]
fn no_top_level_module_imports_one_that_imports_it_back() {
    let g = graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    // (the reading found the imports it should)
    for (from, to) in [
        ("lto", "input"),
        ("input", "ir"),
        ("fatbin", "ir"),
        ("merge", "elf"),
    ] {
        assert!(
            g.get(from).is_some_and(|t| t.contains_key(to)),
            "{from} -> {to}"
        );
    }
    if let Some(c) = cycle(&g) {
        panic!(
            "the modules import each other in a cycle:\n{}",
            steps(&g, &c).join("\n")
        );
    }
}

/// A cycle's steps, each with the files that import.
fn steps(g: &Graph, c: &[String]) -> Vec<String> {
    c.windows(2)
        .map(|w| {
            let files: Vec<&String> = g[&w[0]][&w[1]].iter().collect();
            format!("{} -> {} ({files:?})", w[0], w[1])
        })
        .collect()
}

/// A source file's module path under its crate's `src` (`lto/incremental/plan.rs`: lto,
/// incremental, plan; `cache/mod.rs`: cache; `lib.rs`: none).
fn module_path(rel: &Path) -> Vec<String> {
    let mut m: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().to_string())
        .collect();
    let last = m.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        m.push(stem.to_string());
    }
    m
}

/// The paths named in `text` from `crate::`, `super::` and `self::`, resolved for a file
/// of module path `here` (`root`: the file is its module's `mod.rs` or `lib.rs`), each as
/// the module path it names plus the names after it (a brace group's first names, each
/// its own path). Line comments are left out.
fn named_paths(text: &str, here: &[String], root: bool) -> BTreeSet<Vec<String>> {
    let mut out = BTreeSet::new();
    // the module `self` names: the file's own module
    let own: Vec<String> = here.to_vec();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let bytes = code.as_bytes();
        let mut i = 0;
        while i < code.len() {
            let rest = &code[i..];
            let starts = ["crate::", "super::", "self::"]
                .iter()
                .find(|p| rest.starts_with(**p))
                .copied();
            let boundary = i == 0
                || !(bytes[i - 1].is_ascii_alphanumeric()
                    || bytes[i - 1] == b'_'
                    || bytes[i - 1] == b':');
            let Some(start) = starts.filter(|_| boundary) else {
                i += rest.chars().next().map_or(1, char::len_utf8);
                continue;
            };
            let mut base: Vec<String> = match start {
                "crate::" => Vec::new(),
                // (`super` of a file's module: its parent; a mod.rs's `self` is its module)
                "super::" => own[..own.len().saturating_sub(1)].to_vec(),
                _ => own.clone(),
            };
            let _ = root;
            let mut tail = &rest[start.len()..];
            while let Some(t) = tail.strip_prefix("super::") {
                base.pop();
                tail = t;
            }
            // segments up to the end of the path or a brace group
            loop {
                let id = ident(tail);
                if id.is_empty() {
                    break;
                }
                tail = &tail[id.len()..];
                base.push(id);
                match tail.strip_prefix("::") {
                    Some(t) => tail = t,
                    None => break,
                }
            }
            if let Some(group) = tail.strip_prefix('{') {
                for first in crate_paths(&format!("crate::{{{group}")) {
                    let mut p = base.clone();
                    if first != "self" {
                        p.push(first);
                    }
                    out.insert(p);
                }
            } else {
                out.insert(base);
            }
            i += start.len();
        }
    }
    out
}

/// folder → (child module → child module it imports → the files that do), for every
/// folder of the crate under `src` (the crate itself as the empty path).
type Folders = BTreeMap<Vec<String>, Graph>;

/// The imports between the child modules of each folder module of the crate under `src`:
/// an import of `crate::a::b::X` (or through `super::`) by a file of `crate::a::c` is an
/// edge c -> b in folder `a` when `b` is a module. A folder's own `mod.rs` is its spine,
/// as `lib.rs` is the crate's: its imports of its children are not counted.
fn folders(src: &Path) -> Folders {
    let mut files = Vec::new();
    sources(src, &mut files);
    let paths: Vec<(std::path::PathBuf, Vec<String>, bool)> = files
        .into_iter()
        .map(|f| {
            let rel = f.strip_prefix(src).unwrap().to_path_buf();
            let name = rel.file_name().unwrap().to_string_lossy().to_string();
            let m = module_path(&rel);
            (
                f,
                m,
                matches!(name.as_str(), "mod.rs" | "lib.rs" | "main.rs"),
            )
        })
        .collect();
    let modules: BTreeSet<Vec<String>> = paths.iter().map(|(_, m, _)| m.clone()).collect();
    let mut out = Folders::new();
    for (f, here, root) in &paths {
        let text = std::fs::read_to_string(f).unwrap();
        let named = named_paths(&text, here, *root);
        // each folder the file is inside, and the child of it the file belongs to
        for d in 0..here.len() {
            if *root && d + 1 == here.len() {
                continue; // (a folder's spine)
            }
            let (folder, from) = (&here[..d], &here[d]);
            for r in &named {
                if r.len() > d
                    && r[..d] == *folder
                    && r[d] != *from
                    && modules.contains(&r[..=d].to_vec())
                {
                    out.entry(folder.to_vec())
                        .or_default()
                        .entry(from.clone())
                        .or_default()
                        .entry(r[d].clone())
                        .or_default()
                        .insert(f.strip_prefix(src).unwrap().display().to_string());
                }
            }
        }
    }
    out
}

/// Each folder's cycle, as the steps of it with the files that import.
fn folder_cycles(all: &Folders, skip_top: bool) -> Vec<String> {
    let mut found = Vec::new();
    for (folder, g) in all {
        if skip_top && folder.is_empty() {
            continue;
        }
        if let Some(c) = cycle(g) {
            let steps = steps(g, &c);
            found.push(format!("in {}/: {}", folder.join("/"), steps.join("; ")));
        }
    }
    found
}

#[test]
fn paths_are_resolved_from_crate_super_and_self() {
    let here: Vec<String> = ["cache", "remote"].iter().map(|s| s.to_string()).collect();
    let got = named_paths(
        "use super::store::Store;\n use super::{guard, stats::update};\n\
         let x = crate::lto::pool::Pool::new(); self::inner::f(); // super::trim\n\
         super::super::diag::Error",
        &here,
        false,
    );
    let want: BTreeSet<Vec<String>> = [
        vec!["cache", "store", "Store"],
        vec!["cache", "guard"],
        vec!["cache", "stats"],
        vec!["lto", "pool", "Pool", "new"],
        vec!["cache", "remote", "inner", "f"],
        vec!["diag", "Error"],
    ]
    .iter()
    .map(|p| p.iter().map(|s| s.to_string()).collect())
    .collect();
    assert_eq!(got, want);
}

#[test]
fn no_module_of_a_folder_imports_one_that_imports_it_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let crate_src = folders(&root.join("src"));
    // (the reading found imports inside folders it should)
    let lto = &crate_src[&vec!["lto".to_string()]];
    assert!(lto["phase"].contains_key("pool"), "{lto:?}");
    // the crate's top level has its own check above; the drop-in's, every level
    let mut found = folder_cycles(&crate_src, true);
    found.extend(folder_cycles(&folders(&root.join("nvjitlink/src")), false));
    assert!(
        found.is_empty(),
        "modules of a folder import each other in a cycle:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_source_file_is_over_800_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "nvjitlink/src"] {
        sources(&root.join(dir), &mut files);
    }
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).unwrap().lines().count();
            (n > 800).then(|| format!("{} ({n} lines)", f.strip_prefix(root).unwrap().display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "files over 800 lines (one concern each): {long:?}"
    );
}

/// The functions of `text` longer than `max` lines, by name: a `fn` line to the line that
/// closes it at the same indent.
fn long_functions(text: &str, max: usize) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        let code = l.trim_start();
        let indent = l.len() - code.len();
        let name = [
            "fn ",
            "pub fn ",
            "pub(crate) fn ",
            "pub(super) fn ",
            "unsafe fn ",
        ]
        .iter()
        .find_map(|p| code.strip_prefix(p))
        .map(ident);
        match name {
            Some(name) if !code.ends_with(';') => {
                let close = format!("{}}}", " ".repeat(indent));
                let end = (i..lines.len()).find(|&j| lines[j] == close).unwrap_or(i);
                if end + 1 - i > max {
                    out.push((name, end + 1 - i));
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// Functions over 150 lines that are still to be split (issue 40), each with its file:
/// none may be added, and one split must leave this list.
const LONG_FUNCTIONS: &[(&str, &str)] = &[
    ("src/elf/equiv.rs", "compare"),
    ("src/elf/write.rs", "write_to"),
    ("src/lto/llvm_engine.rs", "compile_in_process"),
    ("src/lto/phase.rs", "run"),
    ("src/merge/creation.rs", "created_sections"),
    ("src/merge/relocations.rs", "plan_relocations"),
    ("src/elf/relayout.rs", "replace_section"),
    ("src/merge/mercury/relocs.rs", "merc_relocations"),
    ("src/finalize/whole.rs", "take"),
    ("src/lto/incremental/summary/body.rs", "instruction"),
    ("src/lto/llvm_split.rs", "partition"),
    ("src/merge/nvinfo.rs", "info"),
];

#[test]
fn no_function_is_over_150_lines_but_those_still_to_split() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "nvjitlink/src"] {
        sources(&root.join(dir), &mut files);
    }
    let mut found = BTreeSet::new();
    for f in &files {
        let rel = f.strip_prefix(root).unwrap().display().to_string();
        for (name, _) in long_functions(&std::fs::read_to_string(f).unwrap(), 150) {
            found.insert((rel.clone(), name));
        }
    }
    let listed: BTreeSet<(String, String)> = LONG_FUNCTIONS
        .iter()
        .map(|(f, n)| (f.to_string(), n.to_string()))
        .collect();
    let new: Vec<_> = found.difference(&listed).collect();
    let split: Vec<_> = listed.difference(&found).collect();
    assert!(
        new.is_empty() && split.is_empty(),
        "functions over 150 lines not listed: {new:?}; listed but no longer over: {split:?}"
    );
}

#[test]
fn long_functions_are_measured_from_fn_to_its_closing_brace() {
    let text = format!(
        "fn short() {{\n}}\n    pub fn long() {{\n{}    }}\nfn decl();\n",
        "        x;\n".repeat(4)
    );
    assert_eq!(long_functions(&text, 5), [("long".to_string(), 6)]);
}

/// The paths docs/layout.md gives a line of its own (`    src/...  what`).
fn layout_lines(layout: &str) -> BTreeSet<String> {
    layout
        .lines()
        .filter_map(|l| l.strip_prefix("    "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.starts_with("src/"))
        .map(String::from)
        .collect()
}

#[test]
fn layout_lines_are_the_indented_src_paths() {
    let layout = "# Layout\n\nsrc/a.rs  not indented\n\n    src/b.rs    b\n                \
                  more of b\n    src/c/      c\n    tests/      t\n";
    let want = ["src/b.rs", "src/c/"];
    assert_eq!(
        layout_lines(layout),
        want.iter().map(|s| s.to_string()).collect()
    );
}

#[test]
fn docs_layout_names_every_folder_and_file_of_src() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let listed = layout_lines(&std::fs::read_to_string(root.join("docs/layout.md")).unwrap());
    let mut present = BTreeSet::new();
    for e in std::fs::read_dir(root.join("src")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if p.is_dir() {
            present.insert(format!("src/{name}/"));
        } else if name.ends_with(".rs") {
            present.insert(format!("src/{name}"));
        }
    }
    let missing: Vec<&String> = present.difference(&listed).collect();
    let stale: Vec<&String> = listed.difference(&present).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/layout.md: no line for {missing:?}; lines for what is not in src/: {stale:?}"
    );
}
