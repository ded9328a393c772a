//! The device ELF writer: an `Image` (sections and symbols that refer to each other by
//! position in the image) is laid out in nvlink's section order — string tables and
//! symbols, non-alloc sections, notes, `.nv.info*`, callgraph, relocation sections,
//! constant banks, code, initialised data, then the memory-only sections — and written
//! with its section header table and, for executables, the program headers (four; six
//! in the sm_100+ layout, where the parameter banks follow the memory-only sections and
//! the capsule-Mercury sections come last).

use crate::bytes::Name;
use rustc_hash::FxHashMap as HashMap;
use std::io::Write;

use super::cubin::*;

/// How a section's `sh_link`/`sh_info` is computed once the final order is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ref {
    Raw(u32),
    Symtab,
    Section(usize),
    Symbol(usize),
}

#[derive(Clone, Debug)]
pub struct OutSection {
    pub name: Name,
    pub ty: u32,
    pub flags: u64,
    pub link: Ref,
    pub info: Ref,
    pub align: u64,
    pub entsize: u64,
    pub data: Vec<u8>,
    /// The bytes, when they are one input's section as it is but for `edits` (a
    /// function's code): written from the input's mapping, never copied into the image.
    /// `data` is then empty.
    pub source: Option<crate::bytes::Bytes>,
    /// The runs of `source`'s bytes that are replaced (the relocations applied to it):
    /// (offset, length), sorted, apart, each inside `source`.
    pub edits: Vec<(usize, usize)>,
    /// The bytes that replace them, run after run.
    pub edit_bytes: Vec<u8>,
    /// Size of a memory-only section (ignored when the section has bytes).
    pub mem_size: u64,
    /// Another image section whose bytes this one shares (same offset and size, nothing
    /// written): the capsule-Mercury views of the constant bank and initialised data.
    pub alias: Option<usize>,
    /// 32-bit fields filled once the final order is known: (offset, the index `Ref`
    /// resolves to).
    pub patches: Vec<(usize, Ref)>,
}

impl OutSection {
    pub fn new(name: impl Into<Name>, ty: u32, flags: u64) -> OutSection {
        OutSection {
            name: name.into(),
            ty,
            flags,
            link: Ref::Raw(0),
            info: Ref::Raw(0),
            align: 1,
            entsize: 0,
            data: Vec::new(),
            source: None,
            edits: Vec::new(),
            edit_bytes: Vec::new(),
            mem_size: 0,
            alias: None,
            patches: Vec::new(),
        }
    }
    pub fn memory_only(&self) -> bool {
        matches!(
            self.ty,
            SHT_NOBITS | SHT_CUDA_GLOBAL | SHT_CUDA_SHARED | SHT_CUDA_SHARED_RESERVED
        )
    }
    pub fn size(&self) -> u64 {
        if self.memory_only() {
            self.mem_size
        } else if let Some(src) = &self.source {
            src.len() as u64
        } else {
            self.data.len() as u64
        }
    }
    /// The section's bytes in `data` (a `source` copied, its edits made).
    pub fn materialize(&mut self) {
        if let Some(src) = self.source.take() {
            self.data = src.to_vec();
            let mut from = 0;
            for (at, n) in std::mem::take(&mut self.edits) {
                self.data[at..at + n].copy_from_slice(&self.edit_bytes[from..from + n]);
                from += n;
            }
            self.edit_bytes = Vec::new();
        }
    }
}

#[derive(Clone, Debug)]
pub struct OutSymbol {
    pub name: Name,
    pub value: u64,
    pub size: u64,
    pub bind: u8,
    pub ty: u8,
    pub other: u8,
    /// Image section the symbol is defined in.
    pub section: Option<usize>,
}

#[derive(Clone, Debug)]
pub struct Image {
    pub e_type: u16,
    pub e_flags: u32,
    pub osabi: u8,
    pub abi_version: u8,
    /// In final order, without the null section and the three tables the writer makes.
    pub sections: Vec<OutSection>,
    /// Locals first; without the null symbol.
    pub symbols: Vec<OutSymbol>,
    /// Strings placed first in `.strtab` (prototype strings), in order.
    pub leading_strings: Vec<String>,
    /// nvlink's sm_100+ `.strtab`: only the symbols' names, in table order, the
    /// prototype strings last (for an image whose tables do not refer to them).
    pub symbol_names_only: bool,
    /// Section names in nvlink's creation order, those it drops included: listed first
    /// in `.shstrtab` (empty in the sm_100+ layout, whose tables hold only what the
    /// image names).
    pub created_sections: Vec<Name>,
    /// The same for `.strtab`, after the leading strings (local objects' names among
    /// them, where nvlink meets them).
    pub created_strtab: Vec<Name>,
    /// Global names in nvlink's creation order, dropped table symbols included: listed
    /// in `.strtab` after the section names (below sm_100).
    pub created_globals: Vec<Name>,
    pub program_headers: bool,
    /// nvlink's sm_100+ layout: parameter banks after the memory-only sections, six
    /// program headers.
    pub mercury_layout: bool,
    /// `.nv.merc.symtab`: its image section and its entries (without the null symbol),
    /// encoded by the writer, whose `.strtab` holds their names.
    pub merc_symbols: Option<(usize, Vec<OutSymbol>)>,
    /// The null symbol's value: 0 but where nvlink's sm_90 layout moved it (see
    /// `merge::shared`'s `laid_out_shared`).
    pub null_symbol_value: u64,
}

/// Where a section goes in nvlink's output order (stable within a rank); `mercury`
/// is the sm_100+ layout.
pub fn rank(s: &OutSection, mercury: bool) -> u8 {
    let n = s.name.as_str();
    if n.starts_with(".nv.merc.") || n.starts_with(".nv.capmerc") {
        return match s.ty {
            SHT_MERC_SYMTAB => 20,
            SHT_MERC_INFO if n == ".nv.merc.nv.info" => 22,
            SHT_MERC_INFO => 23,
            SHT_MERC_CALLGRAPH => 24,
            SHT_MERC_PROTOTYPE => 25,
            SHT_MERC_RELA | SHT_MERC_RESOLVED_RELA => 26,
            SHT_CAPMERC_TEXT => 28,
            _ if s.flags & SHF_ALLOC == 0 => 21,
            _ if s.flags & SHF_WRITE != 0 => 29,
            _ => 27,
        };
    }
    if mercury && n.starts_with(".nv.constant0") {
        return 17;
    }
    match s.ty {
        SHT_NOTE => 2,
        SHT_CUDA_INFO if n == ".nv.info" => 3,
        SHT_CUDA_COMPAT => 4,
        SHT_CUDA_INFO => 5,
        SHT_CUDA_CALLGRAPH => 6,
        SHT_CUDA_PROTOTYPE => 7,
        SHT_CUDA_RELOCINFO => 8,
        SHT_RELA | SHT_REL | SHT_CUDA_RESOLVED_RELA => 9,
        _ if s.flags & SHF_ALLOC == 0 => 1,
        // (module and parameter banks together, in nvlink's creation order)
        _ if n.starts_with(".nv.constant") => 10,
        _ if s.flags & SHF_EXECINSTR != 0 => 12,
        SHT_CUDA_GLOBAL_INIT => 13,
        _ if n == ".nv.global.init" => 13,
        // (.nv.global among the windows, in nvlink's creation order)
        _ if s.memory_only() => 15,
        _ => 14,
    }
}

/// A string table being filled: its bytes, and where each string it holds starts (the
/// strings borrowed from the image, not copied).
struct StrTab<'a> {
    bytes: Vec<u8>,
    at: HashMap<&'a str, u32>,
}

impl<'a> StrTab<'a> {
    fn new() -> StrTab<'a> {
        StrTab::with_capacity(0)
    }
    /// A table with room for `n` strings (no rehash while it is filled).
    fn with_capacity(n: usize) -> StrTab<'a> {
        StrTab {
            bytes: vec![0],
            at: HashMap::with_capacity_and_hasher(n, Default::default()),
        }
    }
    fn add(&mut self, s: &'a str) -> u32 {
        if s.is_empty() {
            return 0;
        }
        self.add_leading(s)
    }

    /// A prototype string below sm_100: an empty one too gets its own byte, once (as
    /// nvlink adds it, where a device-runtime link's prototypes have one).
    fn add_leading(&mut self, s: &'a str) -> u32 {
        if let Some(&o) = self.at.get(s) {
            return o;
        }
        let o = self.bytes.len() as u32;
        self.bytes.extend_from_slice(s.as_bytes());
        self.bytes.push(0);
        self.at.insert(s, o);
        o
    }
}

/// Offsets the strings of `leading` get in `.strtab` (what `.nv.callgraph` refers to).
pub fn leading_offsets(leading: &[String]) -> HashMap<String, u32> {
    let mut t = StrTab::new();
    leading
        .iter()
        .map(|s| (s.clone(), t.add_leading(s)))
        .collect()
}

/// The ELF file of `img`, in memory.
pub fn write(mut img: Image) -> Vec<u8> {
    let mut v = Vec::new();
    write_to(&mut img, &mut v).expect("writing to memory does not fail");
    v
}

const ZEROS: [u8; 256] = [0; 256];

/// The file as a list of byte slices, in order, and how far it has got.
struct Out<'a> {
    pieces: Vec<&'a [u8]>,
    pos: u64,
}

impl<'a> Out<'a> {
    fn bytes(&mut self, b: &'a [u8]) {
        if !b.is_empty() {
            self.pieces.push(b);
            self.pos += b.len() as u64;
        }
    }
    fn align(&mut self, align: u64) {
        let a = align.max(1);
        let mut pad = ((a - self.pos % a) % a) as usize;
        while pad > 0 {
            let n = pad.min(ZEROS.len());
            self.bytes(&ZEROS[..n]);
            pad -= n;
        }
    }
    /// `data` at the next multiple of `align`; its offset.
    fn put(&mut self, data: &'a [u8], align: u64) -> u64 {
        self.align(align);
        let at = self.pos;
        self.bytes(data);
        at
    }
}

/// Writes `pieces` to `w` in order, as few system calls as the vectored write allows.
fn write_pieces<W: Write + ?Sized>(w: &mut W, pieces: &[&[u8]]) -> std::io::Result<()> {
    use std::io::IoSlice;
    for batch in pieces.chunks(1024) {
        let mut slices: Vec<IoSlice> = batch.iter().map(|b| IoSlice::new(b)).collect();
        let mut rest = &mut slices[..];
        while !rest.is_empty() {
            match w.write_vectored(rest) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => IoSlice::advance_slices(&mut rest, n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// `syms` as `.symtab` entries (after the null one), their names added to `strtab`;
/// section `i` of the image is section `i + base` of the file.
fn encode_symbols<'a>(syms: &'a [OutSymbol], strtab: &mut StrTab<'a>, base: usize) -> Vec<u8> {
    let mut t = vec![0u8; 24];
    for s in syms {
        let name = strtab.add(&s.name);
        t.extend_from_slice(&name.to_le_bytes());
        t.push(s.bind << 4 | s.ty);
        t.push(s.other);
        let shndx = s.section.map_or(0, |i| (i + base) as u16);
        t.extend_from_slice(&shndx.to_le_bytes());
        t.extend_from_slice(&s.value.to_le_bytes());
        t.extend_from_slice(&s.size.to_le_bytes());
    }
    t
}

/// Section indices of the file: 0 null, 1 .shstrtab, 2 .strtab, 3 .symtab, then the
/// image's from `BASE`.
const BASE: usize = 4;

/// nvlink's sh_info of a symbol table: the index of the first global, but the count when
/// the table ends with section symbols (sm_100+ puts the parameter banks' last); the
/// locals a debug link lists among the globals do not count.
fn locals_end(syms: &[OutSymbol]) -> u32 {
    match syms.last() {
        Some(l) if l.bind == STB_LOCAL && l.ty == STT_SECTION => syms.len() as u32 + 1,
        _ => {
            syms.iter()
                .position(|s| s.bind != STB_LOCAL)
                .unwrap_or(syms.len()) as u32
                + 1
        }
    }
}

/// The file's own tables: section names, strings, symbols (the Mercury symbol table,
/// encoded here, is put in its section of the image).
struct Tables {
    shstr: Vec<u8>,
    strtab: Vec<u8>,
    symtab: Vec<u8>,
    symtab_info: u32,
    /// Each file section's name in `.shstrtab`.
    names: Vec<u32>,
}

/// The string and symbol tables of `img`, in nvlink's order of names.
fn tables(img: &mut Image) -> Tables {
    let base = BASE;
    let symtab_info = locals_end(&img.symbols);
    // (the Mercury symbols' names go in `.strtab` too; their table is encoded here)
    let merc_symbols = img.merc_symbols.take();
    let mut shstr = StrTab::with_capacity(img.sections.len() + 3);
    let mut names = vec![0u32; img.sections.len() + base];
    names[1] = shstr.add(".shstrtab");
    names[2] = shstr.add(".strtab");
    names[3] = shstr.add(".symtab");
    for s in &img.created_sections {
        shstr.add(s);
    }
    for (i, s) in img.sections.iter().enumerate() {
        names[i + base] = shstr.add(&s.name);
    }
    let names_only = img.symbol_names_only;
    if names_only {
        // nvlink's sm_100+ .shstrtab ends with 36 zero bytes (read off nvlink 13.5 on
        // the a/b fixtures, whole-program objects and generated programs)
        shstr.bytes.extend_from_slice(&[0; 36]);
    }
    let strings = img.leading_strings.len() + img.symbols.len();
    let mut strtab = StrTab::with_capacity(strings + 3);
    for s in img.leading_strings.iter().filter(|_| !names_only) {
        strtab.add_leading(s);
    }
    for s in [".shstrtab", ".strtab", ".symtab"]
        .iter()
        .filter(|_| !names_only)
    {
        strtab.add(s);
    }
    for s in &img.created_strtab {
        strtab.add(s);
    }
    for s in img.sections.iter().filter(|_| !names_only) {
        strtab.add(&s.name);
    }
    for s in &img.created_globals {
        strtab.add(s);
    }
    let mut symtab = encode_symbols(&img.symbols, &mut strtab, base);
    symtab[8..16].copy_from_slice(&img.null_symbol_value.to_le_bytes());
    // (the Mercury table's null symbol has the same value: a replaced copy's bank 2,
    // the one case where an sm_100+ image's is not 0)
    let merc_symtab = (merc_symbols.as_ref()).map(|(at, syms)| {
        let mut data = encode_symbols(syms, &mut strtab, base);
        data[8..16].copy_from_slice(&img.null_symbol_value.to_le_bytes());
        (*at, data, locals_end(syms))
    });
    for s in img.leading_strings.iter().filter(|_| names_only) {
        strtab.add(s);
    }
    // (the tables' maps are let go before the sections are written)
    let (shstr, strtab) = (shstr.bytes, strtab.bytes);
    drop(merc_symbols);
    if let Some((at, data, info)) = merc_symtab {
        let s = &mut img.sections[at];
        s.data = data;
        s.info = Ref::Raw(info);
    }
    Tables {
        shstr,
        strtab,
        symtab,
        symtab_info,
        names,
    }
}

/// The value a reference stands for in the file.
fn resolve(r: Ref) -> u32 {
    match r {
        Ref::Raw(v) => v,
        Ref::Symtab => 3,
        Ref::Section(i) => (i + BASE) as u32,
        Ref::Symbol(i) => i as u32 + 1,
    }
}

/// The sections' patches applied (their bytes are borrowed, unchanged, from here on).
fn apply_patches(img: &mut Image) {
    for s in &mut img.sections {
        if s.alias.is_some() || s.patches.is_empty() {
            continue;
        }
        s.materialize();
        for (off, r) in std::mem::take(&mut s.patches) {
            let v = resolve(r).to_le_bytes();
            if let Some(b) = s.data.get_mut(off..off + 4) {
                b.copy_from_slice(&v);
            }
        }
    }
}

/// Where the program headers' segments lie: (offset, size) of the constant banks, the
/// code (both one span below sm_100), the parameter banks (sm_100+); the data (offset,
/// file size, memory size).
#[derive(Default)]
struct Spans {
    banks: Option<(u64, u64)>,
    code: Option<(u64, u64)>,
    params: Option<(u64, u64)>,
    load_rw: Option<(u64, u64, u64)>,
}

/// The image's sections put in `out` in order, each one's (offset, size) in `place`;
/// the segments' spans.
fn lay_out<'a>(img: &'a Image, out: &mut Out<'a>, place: &mut [(u64, u64)]) -> Spans {
    let base = BASE;
    let mercury = img.mercury_layout;
    let (mut banks, mut code, mut params) = (None::<(u64, u64)>, None::<(u64, u64)>, None);
    let mut load_rw = None::<(u64, u64, u64)>;
    // (the data segment's memory-only sections: alignment, size)
    let mut rw_memory: Vec<(u64, u64)> = Vec::new();
    let grow = |span: &mut Option<(u64, u64)>, at: u64, size: u64| {
        let start = span.map_or(at, |x| x.0);
        *span = Some((start, at + size - start));
    };
    for (i, s) in img.sections.iter().enumerate() {
        if let Some(a) = s.alias {
            place[i + base] = place[a + base];
            continue;
        }
        if s.memory_only() {
            // at an offset aligned as the section is, the padding written and, after
            // initialised data, counted in the data segment's file part; in the
            // segment's memory each one aligned after the one before, from the end of
            // the whole file part (its padding for a later, stricter section included:
            // as nvlink, issue 22's CUB program at sm_100)
            let before = out.pos;
            out.align(s.align);
            let at = out.pos;
            place[i + base] = (at, s.mem_size);
            // (the Mercury copy of reserved shared memory is in no segment)
            if s.name.starts_with(".nv.merc.") {
                continue;
            }
            if let Some(rw) = &mut load_rw {
                rw.1 += at - before;
                rw_memory.push((s.align.max(1), s.mem_size));
            } else if s.flags & SHF_ALLOC != 0 {
                load_rw = Some((at, 0, 0));
                rw_memory.push((s.align.max(1), s.mem_size));
            }
            continue;
        }
        let (at, size) = match &s.source {
            Some(src) => {
                out.align(s.align);
                let at = out.pos;
                let (mut from, mut b) = (0, 0);
                for &(e, n) in &s.edits {
                    out.bytes(&src[from..e]);
                    out.bytes(&s.edit_bytes[b..b + n]);
                    (from, b) = (e + n, b + n);
                }
                out.bytes(&src[from..]);
                (at, src.len() as u64)
            }
            None => (out.put(&s.data, s.align), s.data.len() as u64),
        };
        place[i + base] = (at, size);
        let r = rank(s, mercury);
        match r {
            10 | 11 if !mercury => grow(&mut code, at, size),
            10 | 11 => grow(&mut banks, at, size),
            12 => grow(&mut code, at, size),
            17 => grow(&mut params, at, size),
            _ => {}
        }
        if r == 13 {
            load_rw = Some((at, size, size));
        }
    }
    if let Some(rw) = &mut load_rw {
        rw.2 = (rw_memory.iter()).fold(rw.1.max(rw.2), |m, &(a, n)| m.next_multiple_of(a) + n);
    }
    Spans {
        banks,
        code,
        params,
        load_rw,
    }
}

/// One section header.
#[allow(clippy::too_many_arguments)]
fn section_header(
    out: &mut Vec<u8>,
    name: u32,
    ty: u32,
    flags: u64,
    (off, size): (u64, u64),
    link: u32,
    info: u32,
    align: u64,
    entsize: u64,
) {
    out.extend_from_slice(&name.to_le_bytes());
    out.extend_from_slice(&ty.to_le_bytes());
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&off.to_le_bytes());
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(&link.to_le_bytes());
    out.extend_from_slice(&info.to_le_bytes());
    out.extend_from_slice(&align.to_le_bytes());
    out.extend_from_slice(&entsize.to_le_bytes());
}

/// The program headers, appended to `table` (which ends at `phoff` in the file): how
/// many.
fn program_headers(img: &Image, spans: &Spans, phoff: u64, table: &mut Vec<u8>) -> u16 {
    let mercury = img.mercury_layout;
    let Spans {
        banks,
        code,
        params,
        load_rw,
    } = *spans;
    let mut phnum = 0u16;
    // a segment with nothing in it is left out (nvlink's image of no code has the
    // program headers' two only); None stands for the program header table
    // (the data segment stays when its sections are all empty: nvlink's sm_80 image
    // of a kernel with only dynamic shared memory has it, of no size)
    let full = |s: Option<(u64, u64)>| s.map(|(o, n)| Some((o, n, n)));
    let data = load_rw.map(Some);
    let segments = if mercury {
        // PHDR and its LOAD read-only, then banks, code, data, parameter banks
        vec![
            (6, 4, Some(None)),
            (1, 4, Some(None)),
            (1, 4, full(banks)),
            (1, 5, full(code)),
            (1, 6, data),
            (1, 4, full(params)),
        ]
    } else {
        vec![
            (6, 5, Some(None)),
            (1, 5, full(code)),
            (1, 6, data),
            (1, 5, Some(None)),
        ]
    };
    // (type, flags, (offset, file size, memory size) or None for the table)
    type Segment = (u32, u32, Option<(u64, u64, u64)>);
    let kept: Vec<Segment> = segments
        .into_iter()
        .filter_map(|(ty, flags, span)| Some((ty, flags, span?)))
        .filter(|&(_, flags, span)| flags == 6 || span.is_none_or(|x| x.2 > 0))
        .collect();
    let phsize = kept.len() as u64 * 56;
    let ph = |out: &mut Vec<u8>, ty: u32, flags: u32, off: u64, filesz: u64, memsz: u64| {
        out.extend_from_slice(&ty.to_le_bytes());
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&off.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes());
        out.extend_from_slice(&filesz.to_le_bytes());
        out.extend_from_slice(&memsz.to_le_bytes());
        out.extend_from_slice(&8u64.to_le_bytes());
    };
    for (ty, flags, span) in kept {
        let (o, file, mem) = span.unwrap_or((phoff, phsize, phsize));
        ph(table, ty, flags, o, file, mem);
        phnum += 1;
    }
    phnum
}

/// Writes the ELF file of `img` to `w`: the sections' bytes are handed to the system
/// where they lie (the input mappings for code, with the relocations' edits between),
/// never gathered into one buffer.
pub fn write_to<W: Write + ?Sized>(img: &mut Image, w: &mut W) -> std::io::Result<()> {
    let t = tables(img);
    apply_patches(img);
    let img = &*img;
    let mut out = Out {
        pieces: Vec::new(),
        pos: 0,
    };
    out.bytes(&ZEROS[..64]); // the ELF header, replaced at the end
    // (offset, size) per section index
    let mut place = vec![(0u64, 0u64); img.sections.len() + BASE];
    place[1] = (out.put(&t.shstr, 1), t.shstr.len() as u64);
    place[2] = (out.put(&t.strtab, 1), t.strtab.len() as u64);
    place[3] = (out.put(&t.symtab, 8), t.symtab.len() as u64);
    let spans = lay_out(img, &mut out, &mut place);
    // (the section header table is 8-aligned below sm_100; nvlink's sm_100+ layout
    // writes it right after the last section)
    if !img.symbol_names_only {
        out.align(8);
    }
    let shoff = out.pos;
    let shnum = img.sections.len() + BASE;
    let mut table: Vec<u8> = Vec::with_capacity(shnum * 64 + 4 * 56);
    let names = &t.names;
    let header = section_header;
    header(&mut table, 0, 0, 0, (0, 0), 0, 0, 0, 0);
    header(&mut table, names[1], SHT_STRTAB, 0, place[1], 0, 0, 1, 0);
    header(&mut table, names[2], SHT_STRTAB, 0, place[2], 0, 0, 1, 0);
    header(
        &mut table,
        names[3],
        SHT_SYMTAB,
        0,
        place[3],
        2,
        t.symtab_info,
        8,
        24,
    );
    for (i, s) in img.sections.iter().enumerate() {
        header(
            &mut table,
            names[i + BASE],
            s.ty,
            s.flags,
            place[i + BASE],
            resolve(s.link),
            resolve(s.info),
            s.align,
            s.entsize,
        );
    }
    let phoff = shoff + table.len() as u64;
    let phnum = match img.program_headers {
        true => program_headers(img, &spans, phoff, &mut table),
        false => 0,
    };
    // ELF header
    let mut h = Vec::with_capacity(64);
    h.extend_from_slice(b"\x7fELF\x02\x01\x01");
    h.push(img.osabi);
    h.push(img.abi_version);
    h.extend_from_slice(&[0u8; 7]);
    h.extend_from_slice(&img.e_type.to_le_bytes());
    h.extend_from_slice(&super::EM_CUDA.to_le_bytes());
    h.extend_from_slice(&1u32.to_le_bytes());
    h.extend_from_slice(&0u64.to_le_bytes());
    h.extend_from_slice(&(if phnum > 0 { phoff } else { 0 }).to_le_bytes());
    h.extend_from_slice(&shoff.to_le_bytes());
    h.extend_from_slice(&img.e_flags.to_le_bytes());
    h.extend_from_slice(&64u16.to_le_bytes());
    // nvlink's -r output below sm_100 gives the entry size of program headers it has not
    let relocatable_sass = img.e_type == 1 && (img.e_flags >> 8) & 0xFF < 100;
    let phentsize = if phnum > 0 || relocatable_sass {
        56u16
    } else {
        0
    };
    h.extend_from_slice(&phentsize.to_le_bytes());
    h.extend_from_slice(&phnum.to_le_bytes());
    h.extend_from_slice(&64u16.to_le_bytes());
    h.extend_from_slice(&(shnum as u16).to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes());
    out.bytes(&table);
    out.pieces[0] = &h;
    write_pieces(w, &out.pieces)
}
