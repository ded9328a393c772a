//! The whole-link key: everything that decides a link's output, taken from what the link
//! itself reads. The request (normalized: what changes no byte left out), the tools'
//! identities (nvlinkrs itself, ptxas, the libNVVM the link loads — `-nvvmpath`'s or the
//! toolkit's —, libdevice, the LLVM helper, the finalizer's libnvJitLink, the ptxas
//! launcher's file), the environment's settings that change the image by value (the
//! finalizer's, the launcher's words, incremental LTO's mode), all from the link's one
//! [`LinkEnv`] snapshot; and the inputs, read through the link's own [`Opened`] maps, so
//! that the bytes hashed are the bytes linked (one read: a file replaced after the key was
//! made is not what the link reads either). A file named twice is keyed as "the same file
//! as input N" (nvlink reads an archive once per file, so a link and a copy are different
//! links). Every file the key holds is stamped (device, inode, size, modification and
//! change times) when read, and a link is stored only when none changed while it ran
//! ([`LinkKey::unchanged`]).
//!
//! [`LinkEnv`]: crate::linkenv::LinkEnv

use std::collections::hash_map::Entry;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::cache::{Cache, Key};
use crate::cli::LinkRequest;
use crate::cli::incremental::Mode;
use crate::explain::{self, Kind, Parts};
use crate::input::Opened;
use crate::plan::Plan;

/// A file as it was when the key read it: device, inode, size, modification and change
/// times (a rewrite in place changes the change time, whatever it restores).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp([i64; 7]);

impl Stamp {
    pub fn of(meta: &std::fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp([
            meta.dev() as i64,
            meta.ino() as i64,
            meta.size() as i64,
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime(),
            meta.ctime_nsec(),
        ])
    }

    /// The file's identity (device, inode), as `Opened` knows a file by.
    fn file_id(&self) -> Option<crate::input::FileId> {
        Some((self.0[0] as u64, self.0[1] as u64))
    }

    /// The stamp of `path` now (after symbolic links), when it is a regular file.
    pub fn now(path: &Path) -> Option<Stamp> {
        let meta = std::fs::metadata(path).ok()?;
        meta.is_file().then(|| Stamp::of(&meta))
    }
}

/// A link's key, with the parts it is made of (for `--explain`) and the files it holds
/// as they were read.
pub struct LinkKey {
    pub key: Key,
    pub parts: Parts,
    stamps: Vec<(PathBuf, Stamp)>,
}

impl LinkKey {
    /// Whether every file the key holds is as it was when read: a link whose input or
    /// tool changed while it ran may have read another content than the key's, and is
    /// not stored.
    pub fn unchanged(&self) -> bool {
        self.stamps
            .par_iter()
            .all(|(p, s)| Stamp::now(p).is_some_and(|now| now == *s))
    }

    /// The key of the same link in incremental LTO's mode `mode` (`Off`: no
    /// `--incremental`). A link in `Auto` mode writes one of two images, the whole-program
    /// link's or the partitioned link's, each what a cold link in that mode writes: it is
    /// looked up and stored under those modes' keys, never under its own, so a hit is the
    /// image a cold link of its kind writes, wherever the entry came from.
    pub fn in_mode(&self, mode: Mode) -> Key {
        let var = crate::cli::incremental::VAR;
        let mut parts = self.parts.clone();
        let at = parts
            .0
            .iter()
            .position(|p| p.kind == Kind::Setting && p.name == var);
        match (at, mode) {
            (Some(i), Mode::Off) => {
                parts.0.remove(i);
            }
            (Some(i), m) => parts.0[i].value = format!("{m:?}"),
            (None, _) => {}
        }
        parts.key()
    }
}

/// The key of this link, or `None` when it is not cached (see the module comment of
/// `linkcache`) or an input cannot be read (the link then reports it).
/// (`given`: the finalizer the process gave the link, [`crate::finalize::Given`]: its
/// library is keyed in place of the toolkit's.)
pub fn key(plan: &Plan, cache: &Cache, opened: &Opened, given: Option<&Path>) -> Option<LinkKey> {
    key_or_why(plan, cache, opened, given).ok()
}

/// As [`key`], with why a link has no key. The key is made from a list of [`Parts`]
/// (each option of the normalized request, each tool's role, path and identity, each
/// setting, each input's name and content), which `--explain` compares with the last
/// link's.
pub fn key_or_why(
    plan: &Plan,
    cache: &Cache,
    opened: &Opened,
    given: Option<&Path>,
) -> Result<LinkKey, &'static str> {
    begin(plan, cache, opened, given)?.finish(cache)
}

/// A key whose tools are stamped but not yet identified: everything else read and hashed,
/// the inputs read into the link's [`Opened`] (so the link parses the bytes hashed,
/// whichever reads first).
pub struct Begun {
    options: Parts,
    tools: Vec<(&'static str, PathBuf, Stamp)>,
    rest: Parts,
    stamps: Vec<(PathBuf, Stamp)>,
}

impl Begun {
    /// The key, with each tool's identity ([`Cache::tool_id`]: hashed, the first time a
    /// cache sees its version). A tool that changes from its stamp on is seen by
    /// [`LinkKey::unchanged`].
    pub fn finish(self, cache: &Cache) -> Result<LinkKey, &'static str> {
        let mut parts = self.options;
        let mut stamps = Vec::with_capacity(self.tools.len() + self.stamps.len());
        for (role, t, stamp) in self.tools {
            let (id, meta) = cache
                .tool_id_opened(&t)
                .map_err(|_| "a tool cannot be read")?;
            // (the bytes hashed are the file stamped: a name switched to another file
            // meanwhile, and back before the link ends, is no key)
            if Stamp::of(&meta) != stamp {
                return Err("a tool changed while the key was made");
            }
            parts.push(Kind::Tool, role, format!("{}\t{id}", t.display()));
            stamps.push((t, stamp));
        }
        parts.0.extend(self.rest.0);
        stamps.extend(self.stamps);
        Ok(LinkKey {
            key: parts.key(),
            parts,
            stamps,
        })
    }
}

/// The key but for the tools' identities, or why the link has none.
pub fn begin(
    plan: &Plan,
    cache: &Cache,
    opened: &Opened,
    given: Option<&Path>,
) -> Result<Begun, &'static str> {
    let req = plan.req;
    if req.time.is_some() {
        return Err("-time writes a file of its own on every link");
    }
    if req.dump_callgraph.is_some() {
        return Err("-dump-callgraph prints the call graph on every link");
    }
    if req.verbose || req.verbose2 || req.verbose_keep {
        return Err("a verbose link prints what it does on every link");
    }
    if plan.env.get(crate::lto::incremental::DUMP_VAR).is_some() {
        return Err("incremental LTO's PTX dump writes files on every link");
    }
    let mut options = Parts::default();
    for (name, value) in explain::fields(&format!("{:?}", normalized(req))) {
        // (the inputs are parts of their own, with their contents)
        if name != "inputs" {
            options.push(Kind::Option, name, value);
        }
    }
    let refused = "the finalizer's setting is refused";
    let tools = (tools(plan, given).ok_or(refused)?.into_iter())
        .filter_map(|(role, t)| Stamp::now(&t).map(|stamp| (role, t, stamp)))
        .collect();
    let mut rest = Parts::default();
    for (name, value) in settings(plan).ok_or("a setting of the environment is refused")? {
        rest.push(Kind::Setting, name, value);
    }
    let stamps = inputs(plan, cache, &mut rest, opened)?;
    Ok(Begun {
        options,
        tools,
        rest,
        stamps,
    })
}

/// Whether the cache remembers the identity of every tool of this link for its present
/// version ([`Cache::tool_id_remembered`]), so that making the key hashes no tool.
pub fn tools_remembered(plan: &Plan, cache: &Cache, given: Option<&Path>) -> bool {
    tools(plan, given).is_none_or(|tools| {
        tools
            .iter()
            .all(|(_, t)| Stamp::now(t).is_none() || cache.tool_id_remembered(t))
    })
}

/// The request without what does not change the result's bytes: where the cache is, the
/// report's file, the output's and the registration file's names (unless the image
/// records them: a debug link's note, and one with -verbose-tkinfo=true), and the folder
/// of the drop-in's staged inputs (another on every call; their names are not).
fn normalized(req: &LinkRequest) -> LinkRequest {
    let files_noted = req.debug || req.recorded.verbose_tkinfo;
    LinkRequest {
        inputs: req.inputs.iter().map(|p| named(req, p)).collect(),
        output: match files_noted {
            true => req
                .output
                .file_name()
                .map(PathBuf::from)
                .unwrap_or_default(),
            // (an `--emit-ltoir` output named `*.o` is a host object: the name's
            // extension decides the bytes)
            false if req.emit_ltoir && crate::lto::prelink::as_host_object(&req.output) => {
                PathBuf::from("x.o")
            }
            false => PathBuf::new(),
        },
        register_link_binaries: match files_noted {
            true => req.register_link_binaries.clone(),
            false => req.register_link_binaries.as_ref().map(|_| PathBuf::new()),
        },
        cache: crate::cache::place::Place {
            dir: None,
            default: false,
            remote: None,
        },
        report_json: None,
        // (what they held is in the request; where it was, not)
        options_files: Vec::new(),
        // (the trace and --explain show the link, they change nothing in it)
        observe: Default::default(),
        // (`--incremental` as the mode it makes: `settings`)
        incremental: false,
        ..req.clone()
    }
}

/// How the key names an input: as given, or the drop-in's by file name.
fn named(req: &LinkRequest, p: &Path) -> PathBuf {
    match req.nvjitlink {
        true => p.file_name().map(PathBuf::from).unwrap_or_default(),
        false => p.to_path_buf(),
    }
}

/// The files whose identities the key holds (those that exist are keyed), by role:
/// nvlinkrs itself, ptxas, libdevice, the libNVVM an LTO link loads, the LLVM helper, the
/// launcher's file, and libnvJitLink where the finalizer may run (the one `given`, else
/// the toolkit's). `None` for a finalizer setting the link refuses.
fn tools(plan: &Plan, given: Option<&Path>) -> Option<Vec<(&'static str, PathBuf)>> {
    let mut tools: Vec<(&str, PathBuf)> = (crate::toolkit::own_image().into_iter())
        .map(|p| ("nvlinkrs", p))
        .collect();
    let kit = plan.toolkit().ok();
    if let Some(kit) = kit {
        tools.push(("ptxas", kit.ptxas()));
        tools.push(("libdevice", kit.libdevice()));
    }
    tools.extend(plan.libnvvm().map(|p| ("libNVVM", p)));
    tools.extend(crate::lto::llvm_helper::locate_in(&plan.env).map(|p| ("LLVM helper", p)));
    let launcher = crate::ptxas_driver::launcher(&plan.env);
    tools.extend(
        crate::ptxas_driver::launcher_file(&launcher, &plan.env).map(|p| ("ptxas launcher", p)),
    );
    if finalizer(plan)?.is_some() {
        match given {
            Some(lib) => tools.push(("libnvJitLink", lib.to_path_buf())),
            None => tools.extend(
                kit.and_then(|k| k.libnvjitlink())
                    .map(|p| ("libnvJitLink", p)),
            ),
        }
    }
    Some(tools)
}

/// The finalizer's setting where it changes the image (sm_100+ code, not `off`).
fn finalizer(plan: &Plan) -> Option<Option<crate::finalize::Setting>> {
    use crate::finalize::Setting;
    Some(match crate::finalize::setting(&plan.env).ok()? {
        Setting::Off => None,
        _ if plan.req.target.sm < 100 => None,
        s => Some(s),
    })
}

/// The settings of the environment that change the image by their value, each a
/// variable's name and value: the finalizer's, the launcher's words (what runs ptxas,
/// and how), and incremental LTO's mode in an LTO link (`--incremental` or
/// `NVLINKRS_INCREMENTAL`: partitions are another image than the whole program's).
/// `None` for a mode the link refuses.
fn settings(plan: &Plan) -> Option<Vec<(String, String)>> {
    let mut s = Vec::new();
    let mode = plan.incremental().ok()?;
    if plan.req.lto && mode != Mode::Off {
        s.push((
            crate::cli::incremental::VAR.to_string(),
            format!("{mode:?}"),
        ));
    }
    // (at sm_100+, `off` too: --explain then says the setting changed, not that it went)
    if plan.req.target.sm >= 100 {
        let f = crate::finalize::setting(&plan.env).ok()?;
        s.push((crate::finalize::VAR.to_string(), format!("{f:?}")));
    }
    let launcher = crate::ptxas_driver::launcher(&plan.env);
    if !launcher.is_empty() {
        s.push((
            crate::ptxas_driver::LAUNCHER_VAR.to_string(),
            format!("{launcher:?}"),
        ));
    }
    Some(s)
}

/// Where an input's digest comes from: its bytes, read into memory for the link too,
/// or, for the toolkit's own libcudadevrt (which nvcc's and the drop-in's links name),
/// the digest remembered per file version as the tools' are
/// ([`Cache::tool_id`]: path, size, times, inode, with the tools' trust: a process
/// rewriting the file's pages through a shared mapping, which changes no time, goes
/// unseen, as it would for ptxas), the same value without reading and hashing a megabyte
/// on every link. A thin one is no key, as any thin archive.
enum Source {
    Bytes(crate::bytes::Bytes),
    Toolkit(String),
}

/// Whether the file at `path` starts as a thin archive does (its members, other files,
/// are in no digest of its own: such a link is never cached whole).
fn thin_archive(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 7];
    std::fs::File::open(path).is_ok_and(|mut f| f.read_exact(&mut head).is_ok())
        && &head == b"!<thin>"
}

/// Adds the inputs to `parts`, in order: each file's name and content digest, or the
/// earlier input it is the same file as; read through `opened` (the maps the link reads).
/// Why not when an input is not a regular file (a FIFO is read once: by the link), cannot
/// be read, or is a thin archive (its members live in other files).
fn inputs(
    plan: &Plan,
    cache: &Cache,
    parts: &mut Parts,
    opened: &Opened,
) -> Result<Vec<(PathBuf, Stamp)>, &'static str> {
    let paths = plan.inputs();
    let kit = plan.toolkit().ok().and_then(|k| k.root.canonicalize().ok());
    let mut stamps = Vec::with_capacity(paths.len());
    let mut maps = Vec::with_capacity(paths.len());
    for path in &paths {
        // (stat only: opening a FIFO here would block, or take its bytes from the link)
        let stamp =
            Stamp::now(path).ok_or("an input is not a regular file (a FIFO is read once)")?;
        let in_toolkit = path.file_name().is_some_and(|n| n == "libcudadevrt.a")
            && (kit.as_deref())
                .is_some_and(|k| path.canonicalize().is_ok_and(|p| p.starts_with(k)));
        let source = match in_toolkit {
            true => {
                if thin_archive(path) {
                    return Err("a thin archive's members live in other files");
                }
                let (id, meta) =
                    (cache.tool_id_opened(path)).map_err(|_| "an input cannot be read")?;
                if Stamp::of(&meta) != stamp {
                    return Err("an input changed while the key was made");
                }
                (stamp.file_id(), Source::Toolkit(id))
            }
            false => {
                // (read into memory: the bytes hashed are the bytes the link parses,
                // whatever another process writes meanwhile)
                let data = opened
                    .open_in_memory(path, &path.display().to_string())
                    .map_err(|_| "an input cannot be read")?;
                if data.starts_with(b"!<thin>") {
                    return Err("a thin archive's members live in other files");
                }
                (opened.id_of(path), Source::Bytes(data))
            }
        };
        stamps.push((path.clone(), stamp));
        maps.push(source);
    }
    // the same file named again: the input it is the same as (by device and inode)
    let mut first_of = std::collections::HashMap::new();
    let again: Vec<Option<usize>> = (maps.iter().enumerate())
        .map(|(i, (id, _))| match first_of.entry((*id)?) {
            Entry::Occupied(first) => Some(*first.get()),
            Entry::Vacant(v) => {
                v.insert(i);
                None
            }
        })
        .collect();
    // the content of each file once, on the pool
    let digests: Vec<Option<String>> = (0..maps.len())
        .into_par_iter()
        .map(|i| {
            again[i].is_none().then(|| match &maps[i].1 {
                Source::Bytes(data) => blake3::hash(data).to_hex().to_string(),
                Source::Toolkit(id) => id.clone(),
            })
        })
        .collect();
    for ((path, again), digest) in paths.iter().zip(again).zip(digests) {
        let value = match (again, digest) {
            (Some(earlier), _) => format!("the same file as input {}", earlier + 1),
            (None, d) => d.unwrap_or_default(),
        };
        parts.push(
            Kind::Input,
            named(plan.req, path).display().to_string(),
            value,
        );
    }
    Ok(stamps)
}
