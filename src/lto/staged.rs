//! What staged LTO (`--emit-ltoir`, `prelink`) stores in its container beside the IR:
//! the option tags of its own, their strings in the option data (the modules' option
//! consensus, the host objects' host-reference tables), how they are written and how a
//! later link reads them back (the module pool, `inspect`), each string checked as
//! `prelink`'s module comment says.

use crate::consensus::{Consensus, Opt};
use crate::diag::{Result, malformed};
use crate::fatbin::host::HOST_REF_SECTIONS;
use crate::ir::container;
use crate::ir::write::{LtoIr, Pair};

/// The option tag whose value is the offset, in the option data, of the consensus: the
/// agreed options as a NUL-terminated option string in a fatbin member's spelling
/// (`-ftz=0 -prec_div=1 -prec_sqrt=1 -fmad=1 -maxreg 32 `). Not one of cicc's tags;
/// libNVVM skips tags it does not know (checked with nvlink 13.5).
pub const CONSENSUS_TAG: u16 = 0x4E4C;

/// The option tag whose value is the offset, in the option data, of the host-reference
/// tables of the host objects linked (one line per table: `.nvHRKE name name`), which a
/// later nvlinkrs link adds to its own; nvlink does not read them.
pub const HOST_REFS_TAG: u16 = 0x4E48;

/// The LLVM version the helper's bitcode carries (LLVM 22.1), for the container header.
pub const LLVM_VERSION: (u8, u8) = (22, 1);

/// The string an earlier `--emit-ltoir` stored under `tag` in a container, with its
/// file offset; `None` without the tag (cicc's containers) or where the header is not
/// read (its errors are the link's). A tag that points outside the option data, a string
/// without its NUL inside it, or one that is not UTF-8 is refused with the offset: a
/// table read wrongly would drop a kernel the library's host code launches, silently.
fn stored(data: &[u8], tag: u16, origin: &str) -> Result<Option<(u64, String)>> {
    let Ok((h, _)) = container::parse_header(data, origin) else {
        return Ok(None);
    };
    let Some(value) = h.tag(tag) else {
        return Ok(None);
    };
    let (start, end) = (h.options_end as u64, h.ir_offset as u64);
    let at = start + value as u64;
    let what = tag_name(tag);
    if at >= end {
        return Err(malformed(
            origin,
            start,
            format!(
                "{what}: the tag's value {value} is past the option data ({} bytes)",
                end - start
            ),
        ));
    }
    let region = &data[at as usize..end as usize];
    let Some(len) = region.iter().position(|&b| b == 0) else {
        return Err(malformed(
            origin,
            at,
            format!("{what} has no NUL before the IR"),
        ));
    };
    match std::str::from_utf8(&region[..len]) {
        Ok(text) => Ok(Some((at, text.to_string()))),
        Err(e) => Err(malformed(
            origin,
            at + e.valid_up_to() as u64,
            format!("{what} is not UTF-8"),
        )),
    }
}

/// How messages name a stored tag.
fn tag_name(tag: u16) -> String {
    let what = match tag {
        CONSENSUS_TAG => "option consensus",
        HOST_REFS_TAG => "host-reference tables",
        _ => "string",
    };
    format!("the {what} (nvlinkrs tag {tag:#06x})")
}

/// The consensus an earlier `--emit-ltoir` stored in a container, if any: only what
/// [`consensus_string`] writes (the options nvlink agrees on across modules, each with a
/// number), so that a `.ltoir` passes libNVVM nothing its objects' option strings could
/// not; any other word (`-g`, `-Xnvvm`, a path) is refused with its offset.
pub fn stored_consensus(data: &[u8], origin: &str) -> Result<Option<String>> {
    let Some((at, text)) = stored(data, CONSENSUS_TAG, origin)? else {
        return Ok(None);
    };
    let mut words = text.split(' ').peekable();
    let mut offset = at;
    // a known option's value that is not a number is refused by name, at its offset
    let number = |opt: &str, v: Option<&str>, v_at: u64| match v {
        Some(v) if v.parse::<u32>().is_ok() => Ok(true),
        Some(v) => Err(malformed(
            origin,
            v_at,
            format!(
                "{} gives '{opt}' the value '{v}', which is not a number from 0 to {}",
                tag_name(CONSENSUS_TAG),
                u32::MAX
            ),
        )),
        None => Err(malformed(
            origin,
            v_at,
            format!("{} gives '{opt}' no value", tag_name(CONSENSUS_TAG)),
        )),
    };
    while let Some(w) = words.next() {
        let word_at = offset;
        offset += w.len() as u64 + 1;
        let ok = match w {
            "" => words.peek().is_none(),
            "-generate-line-info" | "-inline-info" => true,
            "-maxreg" | "-split-compile" => {
                let v = words.next();
                let v_at = offset;
                offset += v.map_or(0, |v| v.len() as u64 + 1);
                number(w, v, v_at)?
            }
            _ => match w.split_once('=') {
                Some((opt @ ("-ftz" | "-prec_div" | "-prec_sqrt" | "-fmad"), v)) => {
                    number(opt, Some(v), word_at + opt.len() as u64 + 1)?
                }
                _ => false,
            },
        };
        if !ok {
            return Err(malformed(
                origin,
                word_at,
                format!(
                    "{} holds '{w}', which is not an option a consensus carries (-maxreg N, -split-compile N, -generate-line-info, -inline-info, -ftz=N, -prec_div=N, -prec_sqrt=N, -fmad=N)",
                    tag_name(CONSENSUS_TAG)
                ),
            ));
        }
    }
    Ok(Some(text))
}

/// The host-reference tables an earlier `--emit-ltoir` stored (those of the host
/// objects it linked), as `(section, entries)`: each line a table's section and its
/// entries, one space between; another section, an empty table or an empty entry is
/// refused with its offset.
pub fn stored_host_refs(data: &[u8], origin: &str) -> Result<Vec<(&'static str, Vec<String>)>> {
    let Some((at, text)) = stored(data, HOST_REFS_TAG, origin)? else {
        return Ok(Vec::new());
    };
    let mut tables = Vec::new();
    let mut offset = at;
    for line in text.split_inclusive('\n') {
        let line_at = offset;
        offset += line.len() as u64;
        let Some(line) = line.strip_suffix('\n') else {
            return Err(malformed(
                origin,
                line_at,
                format!("{}: the last line has no newline", tag_name(HOST_REFS_TAG)),
            ));
        };
        let mut words = line.split(' ');
        let name = words.next().unwrap_or_default();
        let section = HOST_REF_SECTIONS.iter().find(|s| **s == name);
        let entries: Vec<String> = words.map(str::to_string).collect();
        match section {
            Some(section) if !entries.is_empty() && entries.iter().all(|e| !e.is_empty()) => {
                tables.push((*section, entries))
            }
            _ => {
                return Err(malformed(
                    origin,
                    line_at,
                    format!(
                        "{}: '{line}' is not a table (a section of {} and its entries, one space between)",
                        tag_name(HOST_REFS_TAG),
                        HOST_REF_SECTIONS.join(", ")
                    ),
                ));
            }
        }
    }
    Ok(tables)
}

/// The host-reference tables as stored: one line per table, its section then its entries.
pub fn host_refs_string(tables: &[(&'static str, Vec<String>)]) -> String {
    tables
        .iter()
        .filter(|(_, e)| !e.is_empty())
        .map(|(s, e)| format!("{s} {}\n", e.join(" ")))
        .collect()
}

/// The container of the linked bitcode for `target`, with each non-empty string of
/// `stored` in the option data under its tag.
pub fn container(target: crate::arch::Arch, bitcode: Vec<u8>, stored: &[(u16, String)]) -> Vec<u8> {
    let mut c = LtoIr::new(target, bitcode);
    c.llvm_version = LLVM_VERSION;
    for (tag, text) in stored.iter().filter(|(_, t)| !t.is_empty()) {
        // after the key, before the terminator (tag 99 stays where cicc has it)
        let at = c.option_data.len() as u32;
        c.pairs.push(Pair::new(*tag, at));
        c.option_data.extend_from_slice(text.as_bytes());
        c.option_data.push(0);
        // (the IR starts 4-aligned, as in cicc's files)
        while !c.option_data.len().is_multiple_of(4) {
            c.option_data.push(0);
        }
    }
    c.write()
}

/// The agreed options as a fatbin member's option string (what [`stored_consensus`]
/// gives back to the pool), empty when no module had an option string.
pub fn consensus_string(c: &Consensus) -> String {
    let mut s = String::new();
    if let Some(n) = c.value(Opt::MaxReg) {
        s.push_str(&format!("-maxreg {n} "));
    }
    if c.value(Opt::LineInfo).is_some() {
        s.push_str("-generate-line-info ");
    }
    if c.value(Opt::InlineInfo).is_some() {
        s.push_str("-inline-info ");
    }
    if let Some(n) = c.value(Opt::SplitCompile) {
        s.push_str(&format!("-split-compile {n} "));
    }
    for (opt, name) in [
        (Opt::Ftz, "-ftz"),
        (Opt::PrecDiv, "-prec_div"),
        (Opt::PrecSqrt, "-prec_sqrt"),
        (Opt::Fmad, "-fmad"),
    ] {
        if let Some(v) = c.value(opt) {
            s.push_str(&format!("{name}={v} "));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::{Arch, Variant};

    #[test]
    fn consensus_is_stored_and_read_back() {
        let bc = crate::ir::payload::tests::bitcode(1);
        let s = "-ftz=0 -prec_div=1 -prec_sqrt=1 -fmad=1 -maxreg 32 ";
        let refs = vec![(".nvHRKE", vec!["_Z5saxpy*".to_string(), "k2".into()])];
        let stored = [
            (CONSENSUS_TAG, s.to_string()),
            (HOST_REFS_TAG, host_refs_string(&refs)),
        ];
        let d = container(Arch::new(90, Variant::Plain), bc.clone(), &stored);
        assert_eq!(stored_consensus(&d, "c").unwrap().as_deref(), Some(s));
        assert_eq!(stored_host_refs(&d, "c").unwrap(), refs);
        let (h, _) = container::parse(&d, "c.ltoir").unwrap();
        assert_eq!((h.key, h.plain_bitcode), (Some(0), true));
        assert_eq!(h.llvm_version, LLVM_VERSION);
        assert_eq!(h.ir_offset % 4, 0);
        // without a consensus: cicc's layout, nothing stored
        let d = container(
            Arch::new(90, Variant::Plain),
            bc,
            &[(CONSENSUS_TAG, String::new())],
        );
        assert_eq!(stored_consensus(&d, "c").unwrap(), None);
        assert!(stored_host_refs(&d, "c").unwrap().is_empty());
        assert_eq!(d.len(), 44 + crate::ir::payload::tests::bitcode(1).len());
    }

    /// A known option whose value is not a number is refused naming the value, at its
    /// offset (it blamed the option: "holds '-maxreg', which is not an option a
    /// consensus carries").
    #[test]
    fn a_stored_value_that_is_no_number_is_named() {
        let bc = crate::ir::payload::tests::bitcode(1);
        let cases = [
            ("-ftz=0 -maxreg 99999999999 ", "-maxreg", "99999999999", 15),
            ("-split-compile x ", "-split-compile", "x", 15),
            ("-ftz=0 -fmad=yes ", "-fmad", "yes", 13),
        ];
        for (text, opt, value, at) in cases {
            let stored = [(CONSENSUS_TAG, text.to_string())];
            let d = container(Arch::new(90, Variant::Plain), bc.clone(), &stored);
            let base = d
                .windows(text.len())
                .position(|w| w == text.as_bytes())
                .unwrap();
            let e = stored_consensus(&d, "c.ltoir").unwrap_err();
            assert_eq!(
                e.message(),
                format!(
                    "'c.ltoir' at offset {:#x}: the option consensus (nvlinkrs tag 0x{CONSENSUS_TAG:04x}) gives '{opt}' the value '{value}', which is not a number from 0 to 4294967295",
                    base + at
                ),
            );
        }
        let stored = [(CONSENSUS_TAG, "-maxreg".to_string())];
        let d = container(Arch::new(90, Variant::Plain), bc, &stored);
        let e = stored_consensus(&d, "c.ltoir").unwrap_err();
        assert!(
            e.message().ends_with("gives '-maxreg' no value"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn damaged_stored_tags_never_panic() {
        // every byte of a container with both tags set to a few values: read or refused
        let bc = crate::ir::payload::tests::bitcode(1);
        let refs = vec![(".nvHRKE", vec!["k".to_string()])];
        let stored = [
            (CONSENSUS_TAG, "-ftz=0 -maxreg 32 ".to_string()),
            (HOST_REFS_TAG, host_refs_string(&refs)),
        ];
        let d = container(Arch::new(90, Variant::Plain), bc, &stored);
        let mut read = 0;
        for i in 0..d.len().min(120) {
            for v in [0x00, 0x0A, 0x20, 0x2D, 0x80, 0xFF] {
                let mut m = d.clone();
                m[i] = v;
                read += stored_consensus(&m, "m").is_ok_and(|c| c.is_some()) as usize;
                let _ = stored_host_refs(&m, "m");
            }
        }
        assert!(read > 100, "{read}");
    }
}
