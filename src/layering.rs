//! A check that the crate's top-level modules (`src/X.rs` or `src/X/`) do not import each
//! other in a cycle: it reads every source file, lists the `crate::X` paths each module
//! names in another top-level module, and fails naming the files of a cycle's imports.
//! Items of `lib.rs` itself (the spine, which calls every phase) are not counted. And a
//! check that docs/layout.md has a line for every folder and top-level file
//! of `src/`, and none for one that is gone.

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
        let steps: Vec<String> = c
            .windows(2)
            .map(|w| {
                let files: Vec<&String> = g[&w[0]][&w[1]].iter().collect();
                format!("{} -> {} ({files:?})", w[0], w[1])
            })
            .collect();
        panic!(
            "the modules import each other in a cycle:\n{}",
            steps.join("\n")
        );
    }
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
