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

    /// The stamp of `path` now (after symbolic links), when it is a regular file.
    pub fn now(path: &Path) -> Option<Stamp> {
        let meta = std::fs::metadata(path).ok()?;
        meta.is_file().then(|| Stamp::of(&meta))
    }
}

/// A link's key, with the files it holds as they were read.
pub struct LinkKey {
    pub key: Key,
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
}

/// The key of this link, or `None` when it is not cached (see the module comment of
/// `linkcache`) or an input cannot be read (the link then reports it).
/// (`given`: the finalizer the process gave the link, [`crate::finalize::Given`]: its
/// library is keyed in place of the toolkit's.)
pub fn key(plan: &Plan, cache: &Cache, opened: &Opened, given: Option<&Path>) -> Option<LinkKey> {
    let req = plan.req;
    if req.time.is_some()
        || req.dump_callgraph.is_some()
        || req.verbose
        || req.verbose2
        || req.verbose_keep
        || plan.env.get(crate::lto::incremental::DUMP_VAR).is_some()
    {
        return None;
    }
    let mut k = Key::new("link").text(&format!("{:?}", normalized(req)));
    let mut stamps = Vec::new();
    for t in tools(plan, given)? {
        let Some(stamp) = Stamp::now(&t) else {
            continue;
        };
        k = k
            .text(&t.display().to_string())
            .text(&cache.tool_id(&t).ok()?);
        stamps.push((t, stamp));
    }
    k = k.text(&settings(plan)?);
    let (k, inputs) = inputs(plan, k, opened)?;
    stamps.extend(inputs);
    Some(LinkKey { key: k, stamps })
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

/// The files whose identities the key holds (those that exist are keyed): nvlinkrs
/// itself, ptxas, libdevice, the libNVVM an LTO link loads, the LLVM helper, the
/// launcher's file, and libnvJitLink where the finalizer may run (the one `given`, else
/// the toolkit's). `None` for a finalizer setting the link refuses.
fn tools(plan: &Plan, given: Option<&Path>) -> Option<Vec<PathBuf>> {
    let mut tools: Vec<PathBuf> = crate::toolkit::own_image().into_iter().collect();
    let kit = plan.toolkit().ok();
    if let Some(kit) = kit {
        tools.push(kit.ptxas());
        tools.push(kit.libdevice());
    }
    tools.extend(plan.libnvvm());
    tools.extend(crate::lto::llvm_helper::locate_in(&plan.env));
    let launcher = crate::ptxas_driver::launcher(&plan.env);
    tools.extend(crate::ptxas_driver::launcher_file(&launcher, &plan.env));
    if finalizer(plan)?.is_some() {
        match given {
            Some(lib) => tools.push(lib.to_path_buf()),
            None => tools.extend(kit.and_then(|k| k.libnvjitlink())),
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

/// The settings of the environment that change the image by their value: the
/// finalizer's, the launcher's words (what runs ptxas, and how), and incremental LTO's
/// mode in an LTO link (`--incremental` or `NVLINKRS_INCREMENTAL`: partitions are
/// another image than the whole program's). `None` for a mode the link refuses.
fn settings(plan: &Plan) -> Option<String> {
    let mut s = String::new();
    let mode = plan.incremental().ok()?;
    if plan.req.lto && mode != crate::cli::incremental::Mode::Off {
        s += &format!("{}={mode:?}\n", crate::cli::incremental::VAR);
    }
    if let Some(f) = finalizer(plan)? {
        s += &format!("{}={f:?}\n", crate::finalize::VAR);
    }
    let launcher = crate::ptxas_driver::launcher(&plan.env);
    if !launcher.is_empty() {
        s += &format!("{}={launcher:?}\n", crate::ptxas_driver::LAUNCHER_VAR);
    }
    Some(s)
}

/// Adds the inputs to `k`, in order: each file's name and content, or the earlier input
/// it is the same file as; read through `opened` (the maps the link reads). `None` when
/// an input is not a regular file (a FIFO is read once: by the link), cannot be read, or
/// is a thin archive (its members live in other files).
fn inputs(plan: &Plan, mut k: Key, opened: &Opened) -> Option<(Key, Vec<(PathBuf, Stamp)>)> {
    let paths = plan.inputs();
    let mut stamps = Vec::with_capacity(paths.len());
    let mut maps = Vec::with_capacity(paths.len());
    for path in &paths {
        // (stat only: opening a FIFO here would block, or take its bytes from the link)
        let stamp = Stamp::now(path)?;
        // (held in memory: the bytes hashed are the bytes the link parses, whatever
        // another process writes through a mapping of its own meanwhile)
        let data = opened
            .open_in_memory(path, &path.display().to_string())
            .ok()?;
        if data.starts_with(b"!<thin>") {
            return None;
        }
        stamps.push((path.clone(), stamp));
        maps.push((opened.id_of(path), data));
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
    let digests: Vec<Option<blake3::Hash>> = (0..maps.len())
        .into_par_iter()
        .map(|i| again[i].is_none().then(|| blake3::hash(&maps[i].1)))
        .collect();
    for ((path, again), digest) in paths.iter().zip(again).zip(digests) {
        k = k.text(&named(plan.req, path).display().to_string());
        k = match (again, digest) {
            (Some(earlier), _) => k.text("again").text(&earlier.to_string()),
            (None, d) => k
                .text("content")
                .bytes(d.as_ref().map_or(&[][..], |d| d.as_bytes())),
        };
    }
    Some((k, stamps))
}
