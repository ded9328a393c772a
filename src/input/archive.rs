//! `ar` archives as nvlink reads them: GNU and BSD member names, the long-name table,
//! thin archives (members are files beside the archive), the symbol tables and
//! `__.LIBDEP` skipped. Every member is returned (nvlink loads them all), in order.

use crate::bytes::Bytes;
use crate::diag::{Result, malformed};

pub const MAGIC: &[u8; 8] = b"!<arch>\n";
pub const THIN_MAGIC: &[u8; 8] = b"!<thin>\n";
const HEADER: usize = 60;

pub fn is_archive(data: &[u8]) -> bool {
    data.starts_with(MAGIC) || data.starts_with(THIN_MAGIC)
}

#[derive(Clone, Debug)]
pub enum MemberData {
    /// The member's bytes, a window into the archive.
    Inline(Bytes),
    /// Thin archive: the member is a file, named relative to the archive's folder.
    External(String),
}

#[derive(Clone, Debug)]
pub struct ArchiveMember {
    pub name: String,
    /// File offset of the member's header.
    pub offset: u64,
    pub size: u64,
    pub data: MemberData,
}

#[derive(Clone, Debug)]
pub struct Archive {
    pub thin: bool,
    pub members: Vec<ArchiveMember>,
}

fn field(h: &[u8], r: std::ops::Range<usize>) -> &str {
    std::str::from_utf8(&h[r])
        .unwrap_or("")
        .trim_end_matches(' ')
}

fn decimal(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

pub fn parse(data: &Bytes, origin: &str) -> Result<Archive> {
    let thin = data.starts_with(THIN_MAGIC);
    if !thin && !data.starts_with(MAGIC) {
        return Err(malformed(
            origin,
            0,
            "unexpected archive format: expected !<arch> or !<thin>",
        ));
    }
    let mut members = Vec::new();
    let mut longnames: Option<Bytes> = None;
    let mut off = MAGIC.len();
    while off < data.len() {
        if data.len() - off < HEADER {
            return Err(malformed(
                origin,
                off as u64,
                format!(
                    "archive member header needs 60 bytes, {} left",
                    data.len() - off
                ),
            ));
        }
        let h = &data[off..off + HEADER];
        if &h[58..60] != b"`\n" {
            return Err(malformed(
                origin,
                off as u64 + 58,
                "unexpected archive format: member header does not end in \"`\\n\"",
            ));
        }
        let raw_name = field(h, 0..16).to_string();
        let size = decimal(field(h, 48..58)).ok_or_else(|| {
            malformed(
                origin,
                off as u64 + 48,
                format!("member size {:?} is not a decimal number", field(h, 48..58)),
            )
        })?;
        let body = off + HEADER;
        // Special members and thin-archive symbol/name tables are stored inline.
        let special = raw_name == "/"
            || raw_name == "//"
            || raw_name == "/SYM64/"
            || raw_name.starts_with("__.SYMDEF");
        let inline = !thin || special;
        if inline && size > (data.len() - body) as u64 {
            return Err(malformed(
                origin,
                off as u64 + 48,
                format!(
                    "archive member size exceeds library bounds ({size} bytes, {} left)",
                    data.len() - body
                ),
            ));
        }
        let mut content_start = body;
        let mut content_size = size as usize;
        let name = if raw_name == "//" {
            longnames = Some(data.slice(body..body + size as usize));
            None
        } else if special || raw_name == "__.LIBDEP" {
            None
        } else if let Some(idx) = raw_name.strip_prefix('/') {
            let idx = decimal(idx).ok_or_else(|| {
                malformed(
                    origin,
                    off as u64,
                    format!("bad long-name reference {raw_name:?}"),
                )
            })?;
            let table = longnames
                .as_ref()
                .ok_or_else(|| malformed(origin, off as u64, "longnames header not found"))?;
            let start = usize::try_from(idx)
                .ok()
                .filter(|&i| i < table.len())
                .ok_or_else(|| {
                    malformed(
                        origin,
                        off as u64,
                        format!(
                            "longnames index out of range ({idx}, table has {} bytes)",
                            table.len()
                        ),
                    )
                })?;
            let rest = &table[start..];
            let end = rest
                .iter()
                .position(|&b| b == b'\n')
                .ok_or_else(|| malformed(origin, off as u64, "unterminated longname in archive"))?;
            let n = String::from_utf8_lossy(&rest[..end]);
            Some(n.strip_suffix('/').unwrap_or(&n).to_string())
        } else if let Some(len) = raw_name.strip_prefix("#1/") {
            // BSD: the name is stored at the start of the member's data.
            let len = decimal(len).ok_or_else(|| {
                malformed(
                    origin,
                    off as u64,
                    format!("bad BSD name length {raw_name:?}"),
                )
            })?;
            if len > size {
                return Err(malformed(
                    origin,
                    off as u64,
                    "library/member name too long",
                ));
            }
            let n = &data[body..body + len as usize];
            let end = n.iter().position(|&b| b == 0).unwrap_or(n.len());
            content_start += len as usize;
            content_size -= len as usize;
            Some(String::from_utf8_lossy(&n[..end]).into_owned())
        } else {
            Some(raw_name.strip_suffix('/').unwrap_or(&raw_name).to_string())
        };
        if let Some(name) = name {
            let data = if thin {
                MemberData::External(name.clone())
            } else {
                MemberData::Inline(data.slice(content_start..content_start + content_size))
            };
            members.push(ArchiveMember {
                name,
                offset: off as u64,
                size: content_size as u64,
                data,
            });
        }
        off = body + if inline { size as usize } else { 0 };
        off += off & 1; // members are 2-aligned
    }
    Ok(Archive { thin, members })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn build(members: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        let mut longnames = Vec::new();
        let mut names = Vec::new();
        for (n, _) in members {
            if n.len() >= 16 {
                names.push(format!("/{}", longnames.len()));
                longnames.extend_from_slice(n.as_bytes());
                longnames.extend_from_slice(b"/\n");
            } else {
                names.push(format!("{n}/"));
            }
        }
        let mut push = |name: &str, d: &[u8]| {
            out.extend_from_slice(
                format!(
                    "{name:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
                    0,
                    0,
                    0,
                    644,
                    d.len()
                )
                .as_bytes(),
            );
            out.extend_from_slice(d);
            if d.len() % 2 == 1 {
                out.push(b'\n');
            }
        };
        if !longnames.is_empty() {
            push("//", &longnames);
        }
        for ((_, d), n) in members.iter().zip(&names) {
            push(n, d);
        }
        out
    }

    #[test]
    fn reads_short_and_long_names_in_order() {
        let a = build(&[("a.o", b"AAA"), ("a_very_long_member_name.o", b"BB")]);
        let ar = parse(&Bytes::from_vec(a), "lib.a").unwrap();
        let names: Vec<_> = ar.members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["a.o", "a_very_long_member_name.o"]);
        match &ar.members[1].data {
            MemberData::Inline(b) => assert_eq!(&**b, b"BB"),
            _ => panic!(),
        }
    }

    #[test]
    fn size_past_the_end_is_reported_with_offset() {
        let mut a = build(&[("a.o", b"AAAA")]);
        let at = 8 + 48;
        a[at..at + 10].copy_from_slice(b"999       ");
        let e = parse(&Bytes::from_vec(a), "lib.a").unwrap_err();
        assert!(
            e.message()
                .contains("'lib.a' at offset 0x38: archive member size exceeds library bounds"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn cut_anywhere_is_an_error_or_fewer_members_never_a_panic() {
        let a = build(&[("a.o", b"AAAA"), ("a_very_long_member_name.o", b"BBBBBB")]);
        for n in 8..a.len() {
            let _ = parse(&Bytes::from_vec(a[..n].to_vec()), "lib.a");
        }
    }
}
