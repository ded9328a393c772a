//! `.note.nv.tkinfo`, the note each tool that built an image adds: per entry (ELF note
//! header, name `NVIDIA Corp`, type 2000) a version, then offsets into its own string
//! table of the tool's name, version, branch and command line.

use crate::bytes::Le;

/// One entry: tool name, version, branch, command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub tool: String,
    pub version: String,
    pub branch: String,
    pub command_line: String,
}

/// The entries of a note section; `None` when it is not laid out as expected.
pub fn entries(d: &[u8]) -> Option<Vec<Entry>> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < d.len() {
        let namesz = d.u32_at(at)? as usize;
        let descsz = d.u32_at(at + 4)? as usize;
        let desc = at + 12 + namesz.next_multiple_of(4);
        let body = d.get(desc..desc.checked_add(descsz)?)?;
        let string = |field: usize| -> Option<String> {
            let off = 24 + body.u32_at(field)? as usize;
            let s = body.get(off..)?;
            let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
            Some(String::from_utf8_lossy(&s[..end]).into_owned())
        };
        out.push(Entry {
            tool: string(8)?,
            version: string(12)?,
            branch: string(16)?,
            command_line: string(20)?,
        });
        at = desc + descsz.next_multiple_of(4);
    }
    Some(out)
}

/// When two notes differ only in their command lines, those that differ.
pub fn command_lines_only(e: &[u8], a: &[u8]) -> Option<Vec<(String, String)>> {
    let (e, a) = (entries(e)?, entries(a)?);
    if e.len() != a.len() {
        return None;
    }
    let mut out = Vec::new();
    for (x, y) in e.iter().zip(&a) {
        if (&x.tool, &x.version, &x.branch) != (&y.tool, &y.version, &y.branch) {
            return None;
        }
        if x.command_line != y.command_line {
            out.push((x.command_line.clone(), y.command_line.clone()));
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(cmd: &str) -> Vec<u8> {
        let strings = format!("\0nvlink\0V13.5\0Build x\0{cmd}\0");
        let mut desc = Vec::new();
        for v in [2u32, 0, 1, 8, 14, 22] {
            desc.extend_from_slice(&v.to_le_bytes());
        }
        desc.extend_from_slice(strings.as_bytes());
        let mut d = Vec::new();
        for v in [12u32, desc.len() as u32, 2000] {
            d.extend_from_slice(&v.to_le_bytes());
        }
        d.extend_from_slice(b"NVIDIA Corp\0");
        d.extend_from_slice(&desc);
        while d.len() % 4 != 0 {
            d.push(0);
        }
        d
    }

    #[test]
    fn reads_entries_and_finds_command_line_differences() {
        let e = entries(&note("-arch sm_90 ")).unwrap();
        assert_eq!(e[0].tool, "nvlink");
        assert_eq!(e[0].branch, "Build x");
        assert_eq!(e[0].command_line, "-arch sm_90 ");
        assert_eq!(
            command_lines_only(&note("-arch sm_90 "), &note("-arch sm_90 -v  ")),
            Some(vec![("-arch sm_90 ".into(), "-arch sm_90 -v  ".into())])
        );
        assert_eq!(command_lines_only(&note("a"), &note("a")), Some(vec![]));
        assert_eq!(command_lines_only(&note("a"), &[1, 2, 3]), None);
    }
}
