//! The README's figures and links: every figure it quotes (a number with `x`, `×`, `s`,
//! `ms` or `%`) stands in a paragraph or table row that names its results file
//! (`benches/results/NAME.md`), and appears in that file; every file it links to exists.
//! A figure copied by hand and left behind when the benchmark ran again fails here.

use std::path::Path;

/// A figure: its number as written, and the line it is on.
#[derive(Debug, PartialEq)]
struct Figure {
    number: String,
    line: usize,
}

/// The blocks of a markdown text: paragraphs (lines up to a blank line), each table row on
/// its own, code lines (indented four spaces) left out; each with its first line number.
fn blocks(text: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut open = false;
    for (i, line) in text.lines().enumerate() {
        let code = line.starts_with("    ");
        if line.trim().is_empty() || code {
            open = false;
        } else if line.starts_with('|') {
            out.push((i + 1, line.to_string()));
            open = false;
        } else if open {
            out.last_mut().unwrap().1.push_str(&format!("\n{line}"));
        } else {
            out.push((i + 1, line.to_string()));
            open = true;
        }
    }
    out
}

/// The figures of a block: a number not inside a name or version (not after a letter,
/// digit, `_`, `.` or `-`), then `x` or `×` at once, or `s`, `ms` or `%` after at most one
/// space, the unit not followed by a letter or digit.
fn figures(block: &str, first_line: usize) -> Vec<Figure> {
    let chars: Vec<char> = block.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let before = if i == 0 { ' ' } else { chars[i - 1] };
        if !chars[i].is_ascii_digit() || before.is_alphanumeric() || "_.-".contains(before) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
            i += 1;
        }
        let number: String = chars[start..i].iter().collect::<String>();
        let number = number.trim_end_matches('.').to_string();
        let rest: String = chars[i..chars.len().min(i + 4)].iter().collect();
        let unit_len = if rest.starts_with('x') || rest.starts_with('×') {
            Some(1)
        } else {
            let spaced = rest.strip_prefix(' ').unwrap_or(&rest);
            let gap = rest.len() - spaced.len();
            ["ms", "s", "%"]
                .iter()
                .find(|u| spaced.starts_with(*u))
                .map(|u| gap + u.chars().count())
        };
        if let Some(n) = unit_len {
            let after = chars.get(i + n).copied().unwrap_or(' ');
            if !after.is_alphanumeric() {
                let line = first_line + chars[..start].iter().filter(|c| **c == '\n').count();
                out.push(Figure { number, line });
            }
        }
    }
    out
}

/// Whether `number` stands in `text` as a number of its own (not inside a longer one).
fn has_number(text: &str, number: &str) -> bool {
    text.match_indices(number).any(|(at, _)| {
        let before = text[..at].chars().next_back().unwrap_or(' ');
        let mut after = text[at + number.len()..].chars();
        let next = after.next().unwrap_or(' ');
        let digit_after_dot = next == '.' && after.next().is_some_and(|c| c.is_ascii_digit());
        !before.is_ascii_digit() && before != '.' && !next.is_ascii_digit() && !digit_after_dot
    })
}

/// The results files a block names (`benches/results/NAME.md`).
fn results_named(block: &str) -> Vec<String> {
    let key = "benches/results/";
    block
        .match_indices(key)
        .filter_map(|(at, _)| {
            let tail = &block[at..];
            let end = tail.find(".md")? + 3;
            Some(tail[..end].to_string())
        })
        .collect()
}

/// The local files a markdown text links to (`[..](path)`, not a URL or an anchor).
fn links(text: &str) -> Vec<String> {
    text.match_indices("](")
        .filter_map(|(at, _)| {
            let tail = &text[at + 2..];
            let target = &tail[..tail.find(')')?];
            let local = !target.contains("://") && !target.starts_with('#');
            local.then(|| target.split('#').next().unwrap().to_string())
        })
        .collect()
}

#[test]
fn figures_are_found_in_the_text() {
    let text = "Took 0.041 s (229x, [r](benches/results/remote.md)); sm_90, V13.5, 4 x 30 units\n\
                \n    9.9 s in code\n| a | 2.98x |\n";
    let b = blocks(text);
    assert_eq!(b.len(), 2);
    let numbers: Vec<String> = figures(&b[0].1, b[0].0)
        .into_iter()
        .map(|f| f.number)
        .collect();
    assert_eq!(numbers, ["0.041", "229"]);
    assert_eq!(results_named(&b[0].1), ["benches/results/remote.md"]);
    assert_eq!(
        figures(&b[1].1, b[1].0),
        [Figure {
            number: "2.98".into(),
            line: 4
        }]
    );
    assert!(has_number("| 2.98x |", "2.98") && !has_number("12.985", "2.98"));
    assert!(!has_number("2.981", "2.98") && has_number("2.98.", "2.98"));
}

#[test]
fn readme_figures_come_from_their_results_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let mut wrong = Vec::new();
    for (line, block) in blocks(&readme) {
        let found = figures(&block, line);
        if found.is_empty() {
            continue;
        }
        let files = results_named(&block);
        if files.is_empty() {
            wrong.push(format!(
                "README.md:{line}: figures {found:?} name no results file"
            ));
            continue;
        }
        let texts: Vec<String> = files
            .iter()
            .map(|f| std::fs::read_to_string(root.join(f)).unwrap_or_default())
            .collect();
        for f in found {
            if !texts.iter().any(|t| has_number(t, &f.number)) {
                wrong.push(format!(
                    "README.md:{}: {} is in none of {files:?}",
                    f.line, f.number
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn readme_links_reach_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let missing: Vec<String> = links(&readme)
        .into_iter()
        .filter(|l| !root.join(l).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "README.md links to what is not there: {missing:?}"
    );
}
