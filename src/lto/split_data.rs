//! One home for each variable that a split compile copies into several pieces.
//!
//! libNVVM's split compile gives every piece that uses a file-scope `static` variable
//! its own `.weak` definition of it (the variable renamed to a program-wide unique
//! `__nv_static_…` name), and the piece holding the program's variables has them all.
//! Merged as they come, each piece's `.nv.global` (and `.nv.constantN`, `.nv.global.init`)
//! keeps room for its copies though only one copy of each is used: with many units the
//! holes grow to several times the program's data, and a constant bank past 64 KiB.
//! Before ptxas runs, [`single_home`] keeps each weak variable's definition in one piece
//! (the one defining the most of them: the program's variable piece) and turns the other
//! pieces' copies into `.extern` declarations of it, so the merged data sections hold
//! every variable once, as without split.

use std::collections::HashMap;

/// A module-scope weak variable definition in a piece: its byte range (through the
/// `;`) and its name.
struct WeakVar {
    start: usize,
    end: usize,
    name: String,
}

/// The `.weak .global` / `.weak .const` definitions at the top level of a PTX module.
fn weak_vars(ptx: &[u8]) -> Vec<WeakVar> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < ptx.len() {
        let line_end = ptx[at..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(ptx.len(), |n| at + n + 1);
        let line = &ptx[at..line_end];
        if line.starts_with(b".weak .global ") || line.starts_with(b".weak .const ") {
            let Some(semi) = ptx[at..].iter().position(|&b| b == b';').map(|n| at + n) else {
                break;
            };
            if let Some(name) = var_name(&ptx[at..semi]) {
                out.push(WeakVar {
                    start: at,
                    end: semi + 1,
                    name,
                });
            }
            at = ptx[semi..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(ptx.len(), |n| semi + n + 1);
            continue;
        }
        at = line_end;
    }
    out
}

/// The declaration part of a definition: everything before its initializer.
fn declarator(def: &[u8]) -> &[u8] {
    let end = def.iter().position(|&b| b == b'=').unwrap_or(def.len());
    def[..end].trim_ascii_end()
}

/// The variable a definition names: the last word of its declarator, without `[N]`.
fn var_name(def: &[u8]) -> Option<String> {
    let decl = std::str::from_utf8(declarator(def)).ok()?;
    let last = decl.split_ascii_whitespace().last()?;
    let name = last.split('[').next()?;
    (!name.is_empty() && !name.starts_with('.')).then(|| name.to_string())
}

/// Keeps each weak variable's definition in one piece and declares it `.extern` in the
/// others. The home of a variable is, among the pieces defining it, the one with the
/// most weak definitions (the first such in piece order). Pieces are returned in the
/// same order; a piece with nothing to change is returned as it was.
pub fn single_home(pieces: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    if pieces.len() < 2 {
        return pieces;
    }
    let vars: Vec<Vec<WeakVar>> = pieces.iter().map(|p| weak_vars(p)).collect();
    let mut home: HashMap<&str, usize> = HashMap::new();
    for (p, vs) in vars.iter().enumerate() {
        for v in vs {
            let h = home.entry(v.name.as_str()).or_insert(p);
            if vars[p].len() > vars[*h].len() {
                *h = p;
            }
        }
    }
    pieces
        .into_iter()
        .zip(&vars)
        .enumerate()
        .map(|(p, (ptx, vs))| {
            let away: Vec<&WeakVar> = vs.iter().filter(|v| home[v.name.as_str()] != p).collect();
            if away.is_empty() {
                return ptx;
            }
            let mut out = Vec::with_capacity(ptx.len());
            let mut from = 0;
            for v in away {
                out.extend_from_slice(&ptx[from..v.start]);
                let decl = declarator(&ptx[v.start..v.end - 1]);
                out.extend_from_slice(b".extern");
                out.extend_from_slice(&decl[b".weak".len()..]);
                out.push(b';');
                from = v.end;
            }
            out.extend_from_slice(&ptx[from..]);
            out
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(body: &str) -> Vec<u8> {
        format!(".version 9.5\n.target sm_90\n.address_size 64\n\n{body}\n.visible .func f()\n{{\nret;\n}}\n").into_bytes()
    }

    #[test]
    fn each_weak_variable_is_defined_in_the_piece_holding_most_of_them() {
        let a = piece(".weak .global .align 4 .b8 sa[160];\n.extern .global .align 4 .u32 n;");
        let b = piece(
            ".weak .const .align 4 .b8 sc[8] = {1, 0, 0, 0,\n 2, 0, 0, 0};\n\
             .global .align 4 .u32 n;\n\
             .weak .global .align 4 .b8 sa[160];\n\
             .weak .global .align 8 .f64 sd = 0d3FF0000000000000;",
        );
        let c = piece(".weak .const .align 4 .b8 sc[8] = {1, 0, 0, 0, 2, 0, 0, 0};");
        let out = single_home(vec![a, b.clone(), c]);
        let text: Vec<String> = out
            .iter()
            .map(|p| String::from_utf8(p.clone()).unwrap())
            .collect();
        assert_eq!(
            text[0],
            String::from_utf8(piece(
                ".extern .global .align 4 .b8 sa[160];\n.extern .global .align 4 .u32 n;"
            ))
            .unwrap()
        );
        assert_eq!(out[1], b, "the home piece is unchanged");
        assert_eq!(
            text[2],
            String::from_utf8(piece(".extern .const .align 4 .b8 sc[8];")).unwrap()
        );
    }

    #[test]
    fn a_single_piece_or_one_without_weak_variables_is_unchanged() {
        let a = piece(".global .align 4 .u32 n;\n.weak .global .align 4 .b8 sa[16];");
        assert_eq!(single_home(vec![a.clone()]), vec![a.clone()]);
        let b = piece(".extern .global .align 4 .u32 n;");
        assert_eq!(single_home(vec![a.clone(), b.clone()]), vec![a, b]);
    }
}
