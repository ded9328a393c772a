//! `.note.nv.tkinfo`, the note each tool that built an image adds: per entry (ELF note
//! header, name `NVIDIA Corp`, type 2000) a version, then offsets into its own string
//! table of the tool's name, version, branch and command line.

use crate::bytes::Le;

/// The branch libnvJitLink's notes name (its own entry's, and its ptxas's).
pub const JIT_BRANCH: &str = "Build system must define TOOLS_VERSION_EXTENDED";

/// One entry: tool name, version, branch, command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub tool: String,
    pub version: String,
    pub branch: String,
    pub command_line: String,
}

/// Each entry of a note section: where it is, and its output name, tool, version, branch
/// and command line; `None` when the note is not laid out as expected.
fn walk(d: &[u8]) -> Option<Vec<(std::ops::Range<usize>, [String; 5])>> {
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
        let end = (desc + descsz.next_multiple_of(4)).min(d.len());
        out.push((
            at..end,
            [
                string(4)?,
                string(8)?,
                string(12)?,
                string(16)?,
                string(20)?,
            ],
        ));
        at = desc + descsz.next_multiple_of(4);
    }
    Some(out)
}

/// The entries of a note section; `None` when it is not laid out as expected.
pub fn entries(d: &[u8]) -> Option<Vec<Entry>> {
    let entries = walk(d)?
        .into_iter()
        .map(|(_, [_, tool, version, branch, command_line])| Entry {
            tool,
            version,
            branch,
            command_line,
        });
    Some(entries.collect())
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

/// One entry (output name, tool, version, branch, command line), padded to 4 bytes.
pub fn build(output: &str, tool: &str, version: &str, branch: &str, command_line: &str) -> Vec<u8> {
    let mut blob = Vec::new();
    let field = |s: &str, blob: &mut Vec<u8>| {
        let at = blob.len() as u32;
        blob.extend_from_slice(s.as_bytes());
        blob.push(0);
        at
    };
    // the output's name comes first (empty but for debug links)
    let out = field(output, &mut blob);
    let tool = field(tool, &mut blob);
    let version = field(version, &mut blob);
    let branch = field(branch, &mut blob);
    let cmd = field(command_line, &mut blob);
    while blob.len() % 4 != 0 {
        blob.push(0);
    }
    let mut desc = Vec::new();
    for v in [2u32, out, tool, version, branch, cmd] {
        desc.extend_from_slice(&v.to_le_bytes());
    }
    desc.extend_from_slice(&blob);
    let mut n = Vec::new();
    n.extend_from_slice(&12u32.to_le_bytes());
    n.extend_from_slice(&(desc.len() as u32).to_le_bytes());
    n.extend_from_slice(&2000u32.to_le_bytes());
    n.extend_from_slice(b"NVIDIA Corp\0");
    n.extend_from_slice(&desc);
    n
}

/// The note with its ptxas entries' files taken out: an output named `output` (or
/// ending in `/output`) renamed `renamed`, and the command line without the input
/// (`input` first, or a path ending in `/input`) and `-o` with the output; `None` when
/// nothing changes.
pub fn ptxas_without_files(d: &[u8], input: &str, output: &str, renamed: &str) -> Option<Vec<u8>> {
    let named = |w: &str, name: &str| w == name || w.ends_with(&format!("/{name}"));
    let mut out = Vec::with_capacity(d.len());
    let mut changed = false;
    for (span, [out_name, tool, version, branch, cmd]) in walk(d)? {
        if tool != "ptxas" || !named(&out_name, output) {
            out.extend_from_slice(&d[span]);
            continue;
        }
        // words are separated by single spaces, options ptxas pads with two
        let mut kept: Vec<&str> = Vec::new();
        let mut words = cmd.split(' ').peekable();
        while let Some(w) = words.next() {
            if w == "-o" && words.peek().is_some_and(|o| named(o, output)) {
                words.next();
            } else if !(kept.is_empty() && named(w, input)) {
                kept.push(w);
            }
        }
        out.extend(build(renamed, &tool, &version, &branch, &kept.join(" ")));
        changed = true;
    }
    changed.then_some(out)
}

/// ptxas's entries as libnvJitLink's own ptxas writes them (its branch, and `-arch sm_NN`
/// without the `-m 64` the ptxas command adds), when the note keeps its size (so that
/// an image's layout stays as it is); `None` when nothing changes or the size would.
pub fn as_jit_ptxas(d: &[u8], jit_branch: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(d.len());
    for (span, [output, tool, version, branch, cmd]) in walk(d)? {
        if tool == "ptxas" && branch.starts_with("Build cuda_") {
            let cmd = cmd.replacen(" -m 64", "", 1);
            out.extend(build(&output, &tool, &version, jit_branch, &cmd));
        } else {
            out.extend_from_slice(&d[span]);
        }
    }
    (out.len() == d.len() && out != d).then_some(out)
}

/// An image's ptxas notes as libnvJitLink's embedded ptxas writes them ([`as_jit_ptxas`]),
/// in place: for what ptxas made in a link that stands in for libnvJitLink's (the rest
/// of such an image is what nvlink writes, byte for byte).
pub fn jit_ptxas_in_place(image: &mut [u8]) {
    let section = |i: usize| -> Option<(String, std::ops::Range<usize>)> {
        let shoff = image.u64_at(0x28)? as usize;
        let (size, strndx) = (image.u16_at(0x3a)? as usize, image.u16_at(0x3e)? as usize);
        let hdr = shoff + i * size;
        let str_hdr = shoff + strndx * size;
        let strtab = image.u64_at(str_hdr + 0x18)? as usize;
        let name_at = strtab + image.u32_at(hdr)? as usize;
        let name = image.get(name_at..)?.split(|&b| b == 0).next()?;
        let (off, len) = (
            image.u64_at(hdr + 0x18)? as usize,
            image.u64_at(hdr + 0x20)? as usize,
        );
        Some((
            String::from_utf8_lossy(name).into_owned(),
            off..off.checked_add(len)?,
        ))
    };
    let count = image.u16_at(0x3c).unwrap_or(0) as usize;
    let found = (0..count)
        .filter_map(section)
        .find(|(name, _)| name == ".note.nv.tkinfo");
    if let Some((_, range)) = found
        && let Some(note) = image.get(range.clone())
        && let Some(new) = as_jit_ptxas(note, JIT_BRANCH)
    {
        image[range].copy_from_slice(&new);
    }
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

    /// ptxas `-g`'s files out of its entry, as nvlink's in-process ptxas writes it (read
    /// off nvlink's `-dlto -g` image); nvlink's entry and a ptxas entry of other files
    /// stay.
    #[test]
    fn ptxas_files_taken_out() {
        let ptxas = |out: &str, cmd: &str| build(out, "ptxas", "V13.5", "Build x", cmd);
        let mut d = build(
            "out.cubin",
            "nvlink",
            "V13.5",
            "Build x",
            "a.o -o out.cubin -g ",
        );
        d.extend(ptxas(
            "lto.cubin",
            "job/lto.ptx -no-bb-merge  -ret-end  -g  -o job/lto.cubin -arch sm_90 -m 64 -c  ",
        ));
        d.extend(ptxas("", "-maxrregcount 32 -arch sm_90 -m 64 -c  "));
        let got = ptxas_without_files(&d, "lto.ptx", "lto.cubin", "elf.o").unwrap();
        let mut want = build(
            "out.cubin",
            "nvlink",
            "V13.5",
            "Build x",
            "a.o -o out.cubin -g ",
        );
        want.extend(ptxas(
            "elf.o",
            "-no-bb-merge  -ret-end  -g  -arch sm_90 -m 64 -c  ",
        ));
        want.extend(ptxas("", "-maxrregcount 32 -arch sm_90 -m 64 -c  "));
        assert_eq!(got, want);
        assert_eq!(
            ptxas_without_files(&want, "lto.ptx", "lto.cubin", "elf.o"),
            None
        );
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

    /// nvJitLink's ptxas spelling: its branch, no `-m 64`; the same size, so in place.
    #[test]
    fn ptxas_entries_become_nvjitlinks_in_place() {
        let v = "Cuda compilation tools, release 13.5, V13.5.37";
        let ours = [
            build(
                "",
                "nvlink",
                v,
                "Build cuda_13.5.r13.5/compiler.39125733_0",
                "-arch sm_90 ",
            ),
            build(
                "",
                "ptxas",
                v,
                "Build cuda_13.5.r13.5/compiler.39125733_0",
                "-arch sm_90 -m 64 -c ",
            ),
        ]
        .concat();
        let jit = as_jit_ptxas(&ours, JIT_BRANCH).unwrap();
        let e = entries(&jit).unwrap();
        assert_eq!(e[0].tool, "nvlink");
        assert_eq!(e[0].branch, "Build cuda_13.5.r13.5/compiler.39125733_0");
        assert_eq!(
            (e[1].branch.as_str(), e[1].command_line.as_str()),
            (JIT_BRANCH, "-arch sm_90 -c ")
        );
        assert_eq!(jit.len(), ours.len());
        // nothing to change, or a size that would change: left as it is
        assert_eq!(as_jit_ptxas(&jit, JIT_BRANCH), None);
        let long = build("", "ptxas", v, "Build cuda_x", "-arch sm_90 -m 64 ");
        assert_eq!(as_jit_ptxas(&long, JIT_BRANCH), None);
    }
}
