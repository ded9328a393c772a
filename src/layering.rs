//! A check that the crate's top-level modules (`src/X.rs` or `src/X/`) do not import each
//! other in a cycle: it reads every source file, lists the paths each module names in
//! another top-level module, and fails naming the files of a cycle's imports. Items of
//! `lib.rs` itself (the spine, which calls every phase) are not counted. The same one
//! level down and further: the modules of each folder (`src/cache/guard.rs`,
//! `src/lto/incremental/`), and every level of the drop-in's crate. A path is one from
//! `crate::`, `super::` or `self::`, or from a name a `use` brought in (`use
//! crate::lto::{self}`, then `lto::phase::f()`); a folder's `mod.rs` is its spine, as
//! `lib.rs` is the crate's, and its imports of the folder's siblings are its module's.
//! That no source file is over 800 lines, and no function over 150 but those listed as
//! still to split. And a check that docs/layout.md has a line for every folder and
//! top-level file of `src/`, and none for one that is gone.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

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
        let named = named_paths(&text, &module_path(rel));
        for to in named.iter().filter_map(|p| p.first()) {
            if *to != from && modules.contains(to) {
                g.entry(from.clone())
                    .or_default()
                    .entry(to.clone())
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
    let got: BTreeSet<String> = named_paths(
        "use crate::arch::{Arch, sass_compatible};\n\
         use crate::{elf, fatbin::{self, Member}, input::archive};\n\
         // crate::merge in a comment\n\
         let x = crate::ir::is_bitcode(d) && crate::diag::Error::fatal(\"\");",
        &[],
    )
    .into_iter()
    .map(|p| p[0].clone())
    .collect();
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
/// of module path `here`, each as the module path it names plus the names after it: every
/// leaf of a `use` tree (`use super::{self as up, guard::{a, b}}`, over several lines or
/// one), and every other path that starts with one of those three or with a name a `use`
/// brought in (`use crate::lto::{self}` then `lto::phase::f()`). Line comments are left
/// out.
fn named_paths(text: &str, here: &[String]) -> BTreeSet<Vec<String>> {
    let code: Vec<&str> = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect();
    let code = code.join(" ");
    let mut out = BTreeSet::new();
    let mut names: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for tree in use_trees(&code) {
        let mut leaves = Vec::new();
        use_leaves(tree, &[], &mut leaves);
        for (path, name) in leaves {
            if let Some(p) = resolve(&path, here, &names) {
                names.insert(name, p.clone());
                out.insert(p);
            }
        }
    }
    let b = code.as_bytes();
    let is_id = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        if !is_id(b[i]) || i > 0 && (is_id(b[i - 1]) || b[i - 1] == b':') {
            i += 1;
            continue;
        }
        // a path's segments, up to its end or a `use` group (read above)
        let (mut segs, mut j) = (Vec::new(), i);
        loop {
            let id = ident(&code[j..]);
            j += id.len();
            segs.push(id);
            match code[j..].strip_prefix("::") {
                Some(t) if t.starts_with(|c: char| c.is_alphanumeric() || c == '_') => j += 2,
                _ => break,
            }
        }
        if segs.len() > 1
            && let Some(p) = resolve(&segs, here, &names)
        {
            out.insert(p);
        }
        i = j.max(i + 1);
    }
    out
}

/// The trees of the `use` declarations in `code` (`pub(crate) use a::{b, c};`: `a::{b, c}`).
fn use_trees(code: &str) -> Vec<&str> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("use ").map(|k| from + k) {
        from = at + 4;
        let boundary = at == 0 || !(b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_');
        if let (true, Some(end)) = (boundary, code[from..].find(';')) {
            out.push(&code[from..from + end]);
        }
    }
    out
}

/// The leaves of a `use` tree under `prefix`: each path, and the name it brings in (its
/// last segment, or its `as` name; `self` names the module before it).
fn use_leaves(tree: &str, prefix: &[String], out: &mut Vec<(Vec<String>, String)>) {
    let tree = tree.trim();
    let segments = |t: &str| -> Vec<String> {
        let mut p = prefix.to_vec();
        p.extend(
            t.split("::")
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty()),
        );
        p
    };
    if let (Some(open), true) = (tree.find('{'), tree.ends_with('}')) {
        let p = segments(&tree[..open]);
        let inner = &tree[open + 1..tree.len() - 1];
        let (mut depth, mut start) = (0, 0);
        for (i, ch) in inner.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    use_leaves(&inner[start..i], &p, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        return use_leaves(&inner[start..], &p, out);
    }
    let (path, alias) = match tree.split_once(" as ") {
        Some((p, a)) => (p, Some(a.trim().to_string())),
        None => (tree, None),
    };
    let mut p = segments(path);
    if p.last().is_some_and(|s| s == "self") {
        p.pop();
    }
    let name = alias.or_else(|| p.last().cloned()).unwrap_or_default();
    if !tree.is_empty() && !matches!(name.as_str(), "" | "_" | "*") {
        out.push((p, name));
    }
}

/// The module path `path` names from a file of module path `here`: from `crate`
/// (`$crate`), `super` or `self`, or from a name a `use` brought in (`names`); `None`
/// from anything else (another crate, a local name).
fn resolve(
    path: &[String],
    here: &[String],
    names: &BTreeMap<String, Vec<String>>,
) -> Option<Vec<String>> {
    let (head, mut rest) = path.split_first()?;
    let mut base = match head.trim_start_matches('$') {
        "crate" => Vec::new(),
        // (`super` of a file's module: its parent; a mod.rs's `self` is its module)
        "super" => here[..here.len().saturating_sub(1)].to_vec(),
        "self" => here.to_vec(),
        _ => names.get(head)?.clone(),
    };
    while let Some(("super", tail)) = rest.split_first().map(|(s, t)| (s.as_str(), t)) {
        base.pop();
        rest = tail;
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// folder → (child module → child module it imports → the files that do), for every
/// folder of the crate under `src` (the crate itself as the empty path).
type Folders = BTreeMap<Vec<String>, Graph>;

/// The imports between the child modules of each folder module of the crate under `src`:
/// an import of `crate::a::b::X` (or through `super::`, or a name a `use` brought in) by
/// a file of `crate::a::c` is an edge c -> b in folder `a` when `b` is a module. A folder's
/// own `mod.rs` is its spine, as `lib.rs` is the crate's: its imports of its children are
/// not counted (its imports of its folder's siblings are its module's).
fn folders(src: &Path) -> Folders {
    let mut files = Vec::new();
    sources(src, &mut files);
    let paths: Vec<(std::path::PathBuf, Vec<String>)> = files
        .into_iter()
        .map(|f| {
            let m = module_path(f.strip_prefix(src).unwrap());
            (f, m)
        })
        .collect();
    let modules: BTreeSet<Vec<String>> = paths.iter().map(|(_, m)| m.clone()).collect();
    let mut out = Folders::new();
    for (f, here) in &paths {
        let text = std::fs::read_to_string(f).unwrap();
        let named = named_paths(&text, here);
        // each folder the file is inside, and the child of it the file belongs to (a
        // folder's mod.rs belongs to its folder's module: its imports of its own children
        // name no folder it is inside)
        for d in 0..here.len() {
            let (folder, from) = (&here[..d], &here[d]);
            for r in &named {
                if r.len() > d && r[..d] == *folder && r[d] != *from && modules.contains(&r[..=d]) {
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

fn paths(list: &[&[&str]]) -> BTreeSet<Vec<String>> {
    list.iter()
        .map(|p| p.iter().map(|s| s.to_string()).collect())
        .collect()
}

#[test]
fn paths_are_resolved_from_crate_super_and_self() {
    let here: Vec<String> = ["cache", "remote"].iter().map(|s| s.to_string()).collect();
    let got = named_paths(
        "use super::store::Store;\n use super::{guard, stats::update};\n\
         let x = crate::lto::pool::Pool::new(); self::inner::f(); // super::trim\n\
         super::super::diag::Error",
        &here,
    );
    let want = paths(&[
        &["cache", "store", "Store"],
        &["cache", "guard"],
        &["cache", "stats", "update"],
        &["lto", "pool", "Pool", "new"],
        &["cache", "remote", "inner", "f"],
        &["diag", "Error"],
    ]);
    assert_eq!(got, want);
}

#[test]
fn paths_are_followed_through_the_names_a_use_brings_in_and_groups_over_lines() {
    let here: Vec<String> = ["lto", "incremental"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let got = named_paths(
        "use crate::lto::{self, IrForm};\n\
         pub(crate) use super::{\n    self as up, // the folder\n    staged::{\n        Tag,\n    },\n};\n\
         fn f() { lto::phase::run(); up::pool::Pool::new(); IrForm::Bitcode; }\n\
         use lto::link_ir as ir;\nir::kernels(); std::mem::take(x); \"crate::x\"; $crate::y::z",
        &here,
    );
    let want = paths(&[
        &["lto"],
        &["lto", "IrForm"],
        &["lto", "IrForm", "Bitcode"],
        &["lto", "staged", "Tag"],
        &["lto", "phase", "run"],
        &["lto", "pool", "Pool", "new"],
        &["lto", "link_ir"],
        &["lto", "link_ir", "kernels"],
        &["x"],
        &["y", "z"],
    ]);
    assert_eq!(got, want);
}

#[test]
fn a_folder_modules_own_file_imports_for_its_module() {
    // a/b/mod.rs imports a/c.rs, which imports a/b/d.rs: a cycle b <-> c in a/
    let dir = tempfile::tempdir().unwrap();
    let files = [
        ("a/mod.rs", "pub mod b; pub mod c;"),
        ("a/b/mod.rs", "use crate::a::{self};\nfn f() { a::c::g() }"),
        ("a/b/d.rs", "pub fn h() {}"),
        ("a/c.rs", "pub fn g() { super::b::d::h() }"),
    ];
    for (f, text) in files {
        let p = dir.path().join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let found = folder_cycles(&folders(dir.path()), true);
    assert_eq!(
        found,
        [r#"in a/: b -> c (["a/b/mod.rs"]); c -> b (["a/c.rs"])"#]
    );
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

/// The repository's root and every source file of the crate and of the drop-in's.
fn both_crates() -> (&'static Path, Vec<std::path::PathBuf>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "nvjitlink/src"] {
        sources(&root.join(dir), &mut files);
    }
    (root, files)
}

#[test]
fn no_source_file_is_over_800_lines() {
    let (root, files) = both_crates();
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
        match fn_name(code) {
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

/// The name of the function a line declares (`pub(crate) const unsafe extern "C" fn f(`).
fn fn_name(code: &str) -> Option<String> {
    let (before, after) = code.split_once("fn ")?;
    let qualified = before.split_whitespace().all(|w| {
        matches!(w, "pub" | "const" | "async" | "unsafe" | "extern")
            || w.starts_with("pub(") && w.ends_with(')')
            || w.len() > 1 && w.starts_with('"') && w.ends_with('"')
    });
    Some(ident(after)).filter(|n| qualified && !n.is_empty())
}

/// Functions over 150 lines that are still to be split (issue 40), each with its file:
/// none may be added, and one split must leave this list.
const LONG_FUNCTIONS: &[(&str, &str)] = &[];

#[test]
fn no_function_is_over_150_lines_but_those_still_to_split() {
    let (root, files) = both_crates();
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
        "fn short() {{\n}}\n    pub fn long() {{\n{}    }}\nfn decl();\n\
         pub unsafe extern \"C\" fn exported() {{\n{}}}\ntype F = unsafe extern \"C\" fn();\n",
        "        x;\n".repeat(4),
        "    x;\n".repeat(5)
    );
    assert_eq!(
        long_functions(&text, 5),
        [("long".to_string(), 6), ("exported".to_string(), 7)]
    );
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
