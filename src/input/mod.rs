//! The input phase: resolves `-l` libraries through `-L`, memory-maps every input, and
//! opens each one down to its device code — archives to members, host objects to their
//! fatbin sections, fatbins to members — applying nvlink's decisions (`kind::decide`).
//! The result is one tree per input, in command-line order; `inspect` prints these trees
//! and the link phases read the device code at their leaves.

pub mod archive;
pub mod host_refs;
pub mod kind;
pub mod opened;
pub mod prelinked;
pub mod sigbus;
pub mod units;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use rayon::prelude::*;

use crate::arch::{Arch, Variant};
use crate::bytes::Bytes;
use crate::cache::Cache;
use crate::diag::{Context, Error, Result};
use crate::fatbin::{self, Member, MemberKind, host};
use crate::ir::container::{self, IrFormat};
use crate::linkenv::LinkEnv;
pub use host_refs::{HostRefs, glob};
use kind::{Content, Ext, Role};
pub use opened::{FileId, Opened, file_id, open_to_read};
pub use units::{HostInfo, Unit, hosts, units};

/// Archives inside archives inside fatbins ... deeper than this is refused.
const MAX_DEPTH: usize = 8;

/// What device code a leaf holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeKind {
    Ptx,
    Cubin,
    /// NVIDIA IR (LTO IR container, NVVM container or legacy NVVM IR).
    Nvvm(Option<IrFormat>),
    Bitcode,
    /// A fatbin member of a kind this version does not read.
    Other(u16),
}

impl CodeKind {
    /// The name `inspect --json` uses.
    pub fn json_name(self) -> String {
        match self {
            CodeKind::Ptx => "ptx".into(),
            CodeKind::Cubin => "cubin".into(),
            CodeKind::Nvvm(_) => "ltoir".into(),
            CodeKind::Bitcode => "bitcode".into(),
            CodeKind::Other(n) => format!("kind{n}"),
        }
    }
}

/// One piece of device code: a raw file, or a fatbin member.
#[derive(Clone, Debug)]
pub struct Code {
    pub kind: CodeKind,
    pub arch: Option<Arch>,
    /// The fatbin member header, when the code came from a fatbin.
    pub member: Option<Member>,
    /// File offset of the fatbin the member belongs to (0 for raw files).
    pub base: u64,
    raw: Bytes,
    /// The link's cache, which keeps large members once extracted (see [`Opened`]); not
    /// owned, so that input trees left to the process exit do not keep the cache from
    /// being closed (and trimmed) at the end of the link.
    cache: Option<Weak<Cache>>,
}

impl Code {
    /// The uncompressed content (a window into the input when stored plainly).
    pub fn bytes(&self, origin: &str) -> Result<Bytes> {
        match &self.member {
            Some(m) => {
                let cache = self.cache.as_ref().and_then(Weak::upgrade);
                m.data(origin, self.base, cache.as_deref())
            }
            None => Ok(self.raw.clone()),
        }
    }

    /// Uncompressed size without decompressing, when known from a header.
    pub fn size_hint(&self) -> Option<u64> {
        match &self.member {
            Some(m) if m.uncompressed_size != 0 => Some(m.uncompressed_size),
            Some(_) => None,
            None => Some(self.raw.len() as u64),
        }
    }
}

/// What nvlink 13.5 looks for in a module id to know the device runtime's object.
const DEVICE_RUNTIME_MODULE: &str = "_cuda_device_runtime_";

/// Whether an archive's members are libcudadevrt, by what they are: a host object
/// compiled from the device runtime's source, whose module id names
/// `cuda_device_runtime.cu` (`_0afad4c0_22_cuda_device_runtime_cu_…`), the one place
/// the command line and the drop-in libnvJitLink (whose inputs reach the link as
/// `in0.o`, `in1.a`) both decide it. Not by the archive's name: nvlink goes by that, so
/// a copy of libcudadevrt under another name counts as program code there (its kernel
/// tables narrow the link to its own kernels); here it is the device runtime wherever
/// it comes from, as nvJitLink treats it.
pub fn is_device_runtime(members: &[Node]) -> bool {
    members.iter().any(|m| match &m.item {
        Item::HostObject { module_id, .. } => module_id
            .as_deref()
            .is_some_and(|id| id.contains(DEVICE_RUNTIME_MODULE)),
        Item::Archive { cudadevrt, .. } => *cudadevrt,
        _ => false,
    })
}

#[derive(Clone, Debug)]
pub enum Item {
    Archive {
        thin: bool,
        cudadevrt: bool,
    },
    HostObject {
        module_id: Option<String>,
        /// The module ids this (`nvcc -dlink`) object already linked.
        prelinked: Vec<String>,
        wrapper_version: Option<u32>,
        host_refs: Vec<(&'static str, Vec<String>)>,
    },
    Container {
        section: Option<&'static str>,
        offset: u64,
        version: u16,
        body_size: u64,
    },
    Code(Code),
    /// Skipped, as nvlink skips it (the reason says why).
    Ignored(String),
}

#[derive(Clone, Debug)]
pub struct Node {
    /// Display name: `a.o`, `./libx.a:b.o`.
    pub origin: String,
    pub size: u64,
    pub item: Item,
    pub children: Vec<Node>,
}

impl Node {
    /// Every device-code leaf under this node, in order, with its origin.
    pub fn codes(&self) -> Vec<(&str, &Code)> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }
    fn collect<'a>(&'a self, out: &mut Vec<(&'a str, &'a Code)>) {
        if let Item::Code(c) = &self.item {
            out.push((&self.origin, c));
        }
        for ch in &self.children {
            ch.collect(out);
        }
    }
}

/// How classification decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// nvlink's decisions, for a link (`lto`: whether -lto was given).
    Link { lto: bool },
    /// Content decides, and the extension must agree with it (for `inspect`).
    Inspect,
}

/// Maps a file read-only. Empty files cannot be mapped and are an empty buffer.
pub fn open(path: &Path, shown: &str) -> Result<Bytes> {
    Opened::default().open(path, shown)
}

/// `-l<name>` → `lib<name>.a` in the `-L` folders, then `LIBRARY_PATH` (of `env`).
/// nvlink 13.5 skips a library it cannot find without a message, and so do we (`None`).
pub fn find_library(name: &str, dirs: &[PathBuf], env: &LinkEnv) -> Option<PathBuf> {
    let file = format!("lib{name}.a");
    let env_dirs = env.paths("LIBRARY_PATH");
    dirs.iter()
        .chain(&env_dirs)
        .map(|d| d.join(&file))
        .find(|p| p.is_file())
}

/// The inputs of a link in nvlink's order: files as given, then the resolved libraries.
pub fn input_list(
    inputs: &[PathBuf],
    libraries: &[String],
    dirs: &[PathBuf],
    env: &LinkEnv,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = inputs.to_vec();
    out.extend(libraries.iter().filter_map(|l| find_library(l, dirs, env)));
    out
}

/// Opens every input (in parallel) and returns their trees in input order.
pub fn load(paths: &[PathBuf], mode: Mode) -> Result<Vec<Node>> {
    load_with(paths, mode, &Opened::default())
}

/// As [`load`], mapping each file once through `opened` (which then knows every file
/// the trees borrow from).
pub fn load_with(paths: &[PathBuf], mode: Mode, opened: &Opened) -> Result<Vec<Node>> {
    let trace = crate::trace::current();
    paths
        .par_iter()
        .map(|p| {
            let _lane = crate::trace::lane(&trace);
            let shown = p.display().to_string();
            let data = opened.open(p, &shown)?;
            walk_with(opened, &shown, Ext::of(p), data, mode, p.parent(), 0)
        })
        .collect()
}

/// nvlink reads an archive once however often the command line names it (by file: the
/// same file through another path or a link; a copy is another archive), where an object
/// named twice is linked twice: the trees of an archive file already read are dropped.
pub fn once_per_archive(trees: Vec<Node>, paths: &[PathBuf], opened: &Opened) -> Vec<Node> {
    let mut seen = std::collections::HashSet::new();
    trees
        .into_iter()
        .zip(paths)
        .filter(|(t, p)| {
            !matches!(t.item, Item::Archive { .. })
                || opened.id_of(p).is_none_or(|id| seen.insert(id))
        })
        .map(|(t, _)| t)
        .collect()
}

fn role_for_inspect(origin: &str, ext: Ext, content: Content) -> Result<Role> {
    let role = match content {
        Content::DeviceElf => Role::Cubin,
        Content::HostElf => Role::HostObject,
        Content::Fatbin => Role::Fatbin,
        Content::Ir(_) | Content::Bitcode => Role::Ir,
        Content::Ptx => Role::Ptx,
        Content::Archive | Content::ThinArchive => Role::Archive,
        Content::Unknown => Role::Ignored,
    };
    let claimed = match ext {
        Ext::Cubin => Some(Role::Cubin),
        Ext::Ptx => Some(Role::Ptx),
        Ext::Fatbin => Some(Role::Fatbin),
        Ext::Nvvm | Ext::Ltoir | Ext::Bc => Some(Role::Ir),
        Ext::Other | Ext::Bare | Ext::So => None,
    };
    match claimed {
        Some(c) if c != role => Err(crate::diag::malformed(
            origin,
            0,
            format!(
                "its extension says {} but its content is {}",
                format!("{ext:?}").to_lowercase(),
                content.name()
            ),
        )),
        _ => Ok(role),
    }
}

/// Opens one input (or archive member) down to its device code.
pub fn walk(
    origin: &str,
    ext: Ext,
    data: Bytes,
    mode: Mode,
    dir: Option<&Path>,
    depth: usize,
) -> Result<Node> {
    walk_with(&Opened::default(), origin, ext, data, mode, dir, depth)
}

/// As [`walk`], opening a thin archive's member files through `opened`.
fn walk_with(
    opened: &Opened,
    origin: &str,
    ext: Ext,
    data: Bytes,
    mode: Mode,
    dir: Option<&Path>,
    depth: usize,
) -> Result<Node> {
    if depth > MAX_DEPTH {
        return Err(Error::fatal(format!(
            "'{origin}': containers nested more than {MAX_DEPTH} deep"
        )));
    }
    let content = kind::sniff(&data);
    let role = match mode {
        Mode::Link { lto } => kind::decide(origin, ext, &data, lto)?,
        Mode::Inspect => role_for_inspect(origin, ext, content)
            .context(format!("first bytes: {}", hex(&data, 8)))?,
    };
    let size = data.len() as u64;
    let leaf = |kind: CodeKind, arch: Option<Arch>| Node {
        origin: origin.to_string(),
        size,
        item: Item::Code(Code {
            kind,
            arch,
            member: None,
            base: 0,
            raw: data.clone(),
            cache: None,
        }),
        children: Vec::new(),
    };
    Ok(match role {
        Role::Cubin => leaf(CodeKind::Cubin, crate::elf::arch(&data)),
        Role::Ptx => leaf(CodeKind::Ptx, ptx_target(&data)),
        Role::Ir => match content {
            Content::Bitcode => leaf(CodeKind::Bitcode, None),
            Content::Ir(f) => {
                let arch = container::parse_header(&data, origin)
                    .ok()
                    .and_then(|(h, _)| h.arch());
                leaf(CodeKind::Nvvm(Some(f)), arch)
            }
            _ => leaf(CodeKind::Nvvm(None), None),
        },
        Role::Fatbin => Node {
            origin: origin.to_string(),
            size,
            item: Item::Container {
                section: None,
                offset: 0,
                version: 0,
                body_size: 0,
            },
            children: containers(origin, &data, None, 0, opened.cache())?,
        }
        .flatten_single_file(),
        Role::HostObject => {
            // (nvlink's words for any host object it cannot read in a link)
            let h = host::read(&data, origin).map_err(|e| match mode {
                Mode::Link { .. } => Error::fatal(format!("Could not find fatbin in '{origin}'"))
                    .context(e.to_string()),
                Mode::Inspect => e,
            })?;
            let mut children = Vec::new();
            for s in &h.fatbins {
                children.extend(containers(
                    origin,
                    &s.data,
                    Some(s.name),
                    s.offset,
                    opened.cache(),
                )?);
            }
            Node {
                origin: origin.to_string(),
                size,
                item: Item::HostObject {
                    module_id: h.module_id,
                    prelinked: h.prelinked,
                    wrapper_version: h.wrapper_version,
                    host_refs: h.host_refs,
                },
                children,
            }
        }
        Role::Archive => {
            let ar = archive::parse(&data, origin)?;
            let children = ar
                .members
                .par_iter()
                .map(|m| {
                    let name = format!("{origin}:{}", m.name);
                    let ext = Ext::of_member(&m.name);
                    let bytes = match &m.data {
                        archive::MemberData::Inline(b) => b.clone(),
                        archive::MemberData::External(rel) => {
                            let p = dir.map_or_else(|| PathBuf::from(rel), |d| d.join(rel));
                            opened
                                .open(&p, &p.display().to_string())
                                .context(format!("member of thin archive '{origin}'"))?
                        }
                    };
                    walk_with(opened, &name, ext, bytes, mode, dir, depth + 1)
                })
                .collect::<Result<Vec<_>>>()?;
            Node {
                origin: origin.to_string(),
                size,
                item: Item::Archive {
                    thin: ar.thin,
                    cudadevrt: is_device_runtime(&children),
                },
                children,
            }
        }
        Role::Ignored => Node {
            origin: origin.to_string(),
            size,
            item: Item::Ignored(match content {
                Content::HostElf => {
                    "host ELF that is not a relocatable object (nvlink skips it)".into()
                }
                c => format!("{} content; nvlink skips it", c.name()),
            }),
            children: Vec::new(),
        },
    })
}

impl Node {
    /// A `.fatbin` file is shown as its containers directly.
    fn flatten_single_file(mut self) -> Node {
        if self.children.len() == 1 {
            let c = self.children.pop().expect("one child");
            return Node {
                origin: self.origin,
                size: self.size,
                item: c.item,
                children: c.children,
            };
        }
        self
    }
}

fn containers(
    origin: &str,
    data: &Bytes,
    section: Option<&'static str>,
    base: u64,
    cache: Option<&Arc<Cache>>,
) -> Result<Vec<Node>> {
    let parsed = fatbin::parse(data, origin, base).with_context(|| match section {
        Some(s) => format!("in section {s} of '{origin}'"),
        None => format!("in fatbin '{origin}'"),
    })?;
    Ok(parsed
        .into_iter()
        .map(|c| Node {
            origin: origin.to_string(),
            size: 16 + c.body_size,
            item: Item::Container {
                section,
                offset: base + c.offset,
                version: c.version,
                body_size: c.body_size,
            },
            children: c
                .members
                .into_iter()
                .map(|m| {
                    let kind = match m.kind {
                        MemberKind::Ptx => CodeKind::Ptx,
                        MemberKind::Elf => CodeKind::Cubin,
                        MemberKind::Nvvm => CodeKind::Nvvm(None),
                        MemberKind::Other(n) => CodeKind::Other(n),
                    };
                    Node {
                        origin: origin.to_string(),
                        size: m.header_size as u64 + m.payload_size,
                        item: Item::Code(Code {
                            kind,
                            arch: Some(m.arch()),
                            base,
                            raw: m.payload.clone(),
                            member: Some(m),
                            cache: cache.map(Arc::downgrade),
                        }),
                        children: Vec::new(),
                    }
                })
                .collect(),
        })
        .collect())
}

/// The `.target sm_NN[a|f]` of a PTX text.
pub fn ptx_target(data: &[u8]) -> Option<Arch> {
    let head = &data[..data.len().min(64 * 1024)];
    let text = String::from_utf8_lossy(head);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(".target"))?;
    let t = line.trim_start().trim_start_matches(".target").trim();
    let first = t.split([',', ' ', '\t']).next()?;
    Arch::parse_target(first).map(|(_, a)| a).or_else(|| {
        first
            .strip_prefix("sm_")
            .and_then(|n| n.parse().ok())
            .map(|sm| Arch::new(sm, Variant::Plain))
    })
}

pub fn hex(d: &[u8], n: usize) -> String {
    d.iter()
        .take(n)
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}
