//! The whole-link stage of the cache: a link whose tools, options and input contents were
//! all seen before is answered from the cache (its output, its `--register-link-binaries`
//! file and its messages, repeated in order) without reading an input as device code.
//! Links whose effects go beyond those (`-time`, `-dump-callgraph`, the verbose modes) and
//! links with thin archives (whose members live in other files) or inputs that are not
//! regular files (a FIFO is read once) always run. What is stored is the bytes the link
//! wrote ([`Written`](crate::output::Written)), never what is read back from its files, and only when the output
//! and the registration file are regular files (not `/dev/null`, a pipe or a FIFO).

use std::path::PathBuf;

use crate::cache::{Cache, Key, pack, unpack};
use crate::cli::LinkRequest;
use crate::context::LinkContext;
use crate::diag::{Diagnostics, Level, Result};
use crate::explain::{self, Kind, Parts};
use crate::plan::Plan;
use crate::report::Timings;
use crate::toolkit::Toolkit;
use crate::{input, output};

/// Runs the link's phases (`phases`, told whether to keep what they write) through the
/// whole-link cache: answered from it when the same link was stored, else run and stored.
/// Also says what the cache did, for the report: `off` (no cache), `hit`, `miss`, or `not
/// cached` (a link the cache does not take). With `--explain`, a link that is no hit says
/// why ([`crate::explain`]); every cached link leaves its record for the next one.
pub fn around(
    plan: &Plan,
    ctx: &LinkContext,
    phases: impl FnOnce(bool) -> Result<Timings>,
) -> Result<(Timings, &'static str)> {
    let (req, diag) = (plan.req, ctx.diag);
    let Some(cache) = ctx.cache() else {
        if req.observe.explain {
            diag.explain("the link has no cache, so nothing to compare it with");
        }
        return Ok((phases(false)?, "off"));
    };
    let started = std::time::Instant::now();
    let parts = {
        let _span = crate::trace::span("cache", "whole-link key");
        key_parts(req, cache, plan.toolkit().ok())
    };
    let key = parts.as_ref().ok().map(Parts::key);
    let last = explain::Last::of(req, cache, key.is_some());
    let earlier = diag.printed().len(); // messages from before the link are not its own
    // the shared tier's first failure, once per link (after the store: never replayed)
    let shared_failure = || {
        for warning in cache.remote_warnings() {
            diag.warning_never_error(&warning);
        }
    };
    if let Some(key) = &key
        && let Some(entry) = cache.get(key)
        && replay(req, diag, &entry)?
    {
        let t = Timings {
            phases: vec![("cache", std::time::Duration::ZERO)],
            ..Default::default()
        };
        if let Ok(parts) = &parts {
            last.remember(cache, parts, key, None);
        }
        shared_failure();
        return Ok((t, "hit"));
    }
    if req.observe.explain {
        last.say_why(diag, parts.as_ref().map(|p| p.0.as_slice()).map_err(|e| *e));
    }
    let ran = phases(key.is_some());
    if req.observe.explain {
        last.say_stages(diag, cache);
    }
    let timings = ran.inspect_err(|_| shared_failure())?;
    if let Some(key) = &key
        && diag.error_count() == 0
        && !timings.fell_back
    {
        store(
            req,
            diag,
            earlier,
            cache,
            key,
            &timings.written,
            started.elapsed(),
        );
        if let Ok(parts) = &parts {
            last.remember(cache, parts, key, Some(cache.seen_and_missed().0));
        }
    }
    if let Some(failure) = cache.store_failure() {
        ctx.cache_problem(req, &format!("{failure}; the output is not cached"));
    }
    shared_failure();
    let whole = if key.is_some() { "miss" } else { "not cached" };
    Ok((timings, whole))
}

/// What this link's whole-link key is made of ([`Parts`]: the normalized request's
/// options, the tools, the settings, the inputs), or why the link is not cached (see the
/// module comment; an input that cannot be read is reported by the link).
pub fn key_parts(
    req: &LinkRequest,
    cache: &Cache,
    kit: Option<&Toolkit>,
) -> std::result::Result<Parts, &'static str> {
    if req.time.is_some() {
        return Err("-time writes a file of its own on every link");
    }
    if req.dump_callgraph.is_some() {
        return Err("-dump-callgraph prints the call graph on every link");
    }
    if req.verbose || req.verbose2 || req.verbose_keep {
        return Err("a verbose link prints what it does on every link");
    }
    let mut parts = Parts::default();
    for (name, value) in explain::fields(&format!("{:?}", normalized(req))) {
        // (the inputs are parts of their own, with their contents)
        if name != "inputs" {
            parts.push(Kind::Option, name, value);
        }
    }
    // the tools: nvlinkrs itself, and the toolkit's ptxas, libNVVM and libdevice, and
    // the LLVM helper, where they exist
    let mut tools: Vec<(&str, PathBuf)> = crate::toolkit::own_image()
        .into_iter()
        .map(|p| ("nvlinkrs", p))
        .collect();
    if let Some(kit) = kit {
        tools.push(("ptxas", kit.ptxas()));
        tools.push(("libdevice", kit.libdevice()));
    }
    if let Some(p) = &req.nvvmpath {
        tools.push(("libNVVM", p.join("lib64").join("libnvvm.so")));
    }
    tools.extend(crate::lto::llvm_helper_path().map(|p| ("LLVM helper", p)));
    // the finalizer changes sm_100+ code: its setting and library are part of the key
    // (of sm_100+ links: the others never run it)
    let refused = "the finalizer's setting is refused";
    match crate::finalize::setting().map_err(|_| refused)? {
        crate::finalize::Setting::Off => {}
        _ if req.target.sm < 100 => {}
        s => {
            parts.push(Kind::Setting, crate::finalize::VAR, format!("{s:?}"));
            tools.extend(
                kit.and_then(|kit| kit.libnvjitlink())
                    .map(|p| ("libnvJitLink", p)),
            );
        }
    }
    for (role, t) in tools.iter().filter(|(_, t)| t.is_file()) {
        let id = cache.tool_id(t).map_err(|_| "a tool cannot be read")?;
        parts.push(Kind::Tool, *role, format!("{}\t{id}", t.display()));
    }
    for path in input::input_list(&req.inputs, &req.libraries, &req.library_paths) {
        // (stat only: reading a FIFO here would take its bytes from the link, or block)
        if !std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            return Err("an input is not a regular file (a FIFO is read once)");
        }
        let data = std::fs::read(&path).map_err(|_| "an input cannot be read")?;
        if data.starts_with(b"!<thin>") {
            return Err("a thin archive's members live in other files");
        }
        let name = named(req, &path).display().to_string();
        parts.push(Kind::Input, name, blake3::hash(&data).to_hex().to_string());
    }
    Ok(parts)
}

/// How the key names an input: as given, or the drop-in's by file name (staged inputs:
/// their folder is another on every call, their names are not).
fn named(req: &LinkRequest, p: &std::path::Path) -> PathBuf {
    match req.nvjitlink {
        true => p.file_name().map(PathBuf::from).unwrap_or_default(),
        false => p.to_path_buf(),
    }
}

/// The request without what does not change the result's bytes (a debug link's note,
/// and one with -verbose-tkinfo=true, records the output's name and the registration
/// file as given).
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
        // (where the cache is, the shared tier included, changes no result)
        cache: crate::cache::place::Place {
            dir: None,
            default: false,
            remote: None,
        },
        report_json: None,
        // (the trace and --explain show the link, they change nothing in it)
        observe: Default::default(),
        ..req.clone()
    }
}

/// Whether `path` names a regular file (after symlinks), asked without opening it.
fn regular(path: &std::path::Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// Stores the finished link: the output and register file bytes it wrote, and the
/// messages it printed (those after the first `earlier`).
pub fn store(
    req: &LinkRequest,
    diag: &Diagnostics,
    earlier: usize,
    cache: &Cache,
    key: &Key,
    written: &crate::output::Written,
    cold: std::time::Duration,
) {
    let Some(out) = written.out.as_deref().filter(|_| regular(&req.output)) else {
        return;
    };
    let register = match &req.register_link_binaries {
        Some(p) if !regular(p) => return,
        Some(_) => match &written.register {
            Some(r) => Some(r.as_slice()),
            None => return,
        },
        None => None,
    };
    let mut messages = String::new();
    for (level, m) in diag.printed().into_iter().skip(earlier) {
        let tag = match level {
            Level::Info => 'I',
            Level::Warning => 'W',
            // another tool's text, whole lines, one entry line each
            Level::Tool if m.ends_with('\n') => {
                for line in m.lines() {
                    messages.push('T');
                    messages.push_str(line);
                    messages.push('\n');
                }
                continue;
            }
            // errors are not cached (the link is not stored)
            Level::Error | Level::Fatal | Level::Tool => return,
        };
        if m.contains('\n') {
            return;
        }
        messages.push(tag);
        messages.push_str(&m);
        messages.push('\n');
    }
    let has_register: &[u8] = if register.is_some() { b"1" } else { b"0" };
    let entry = pack(&[
        out,
        has_register,
        register.unwrap_or_default(),
        messages.as_bytes(),
    ]);
    cache.put(key, &entry, cold);
}

/// Writes a cached link's files and repeats its messages; false when the entry does not
/// have the expected shape (then the link runs).
pub fn replay(req: &LinkRequest, diag: &Diagnostics, entry: &[u8]) -> Result<bool> {
    let Some(parts) = unpack(entry) else {
        return Ok(false);
    };
    let [out, has_register, register, messages] = &parts[..] else {
        return Ok(false);
    };
    // (what a store's writer could slip in: a registration file that is more than nvlink
    // writes, which nvcc compiles into the host program, and terminal escapes)
    let register_ok = match has_register.as_slice() {
        b"1" => registration_file(register),
        b"0" => register.is_empty(),
        _ => false,
    };
    if !register_ok || !crate::cache::plain_text(messages) {
        return Ok(false);
    }
    for line in String::from_utf8_lossy(messages).lines() {
        match line.split_at_checked(1) {
            Some(("I", m)) => diag.info(m),
            Some(("W", m)) => diag.warning(m),
            Some(("T", m)) => diag.tool_output(&format!("{m}\n")),
            _ => {}
        }
    }
    output::write_atomic(&req.output, out)?;
    if let (Some(path), b"1") = (&req.register_link_binaries, has_register.as_slice()) {
        output::write_atomic(path, register)?;
    }
    Ok(true)
}

/// Whether `text` is a registration file as nvlink writes one
/// ([`output::register_link_binaries`]): `#define NUM_PRELINKED_OBJECTS N`, then exactly N
/// lines `DEFINE_REGISTER_FUNC(id)` whose ids are C identifiers.
fn registration_file(text: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(text) else {
        return false;
    };
    let Some(body) = text.strip_suffix('\n') else {
        return false;
    };
    let mut lines = body.split('\n');
    let count = lines
        .next()
        .and_then(|l| l.strip_prefix("#define NUM_PRELINKED_OBJECTS "))
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|n| n.parse::<usize>().ok());
    let identifier = |id: &str| {
        id.bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    };
    let mut ids = 0;
    for line in lines {
        match line
            .strip_prefix("DEFINE_REGISTER_FUNC(")
            .and_then(|l| l.strip_suffix(')'))
        {
            Some(id) if identifier(id) => ids += 1,
            _ => return false,
        }
    }
    count == Some(ids)
}

#[cfg(test)]
mod tests {
    use super::registration_file;

    #[test]
    fn registration_files_as_nvlink_writes_them() {
        let ids = ["_b_cu".to_string(), "__nv_module_id_7a_cu_1f".to_string()];
        assert!(registration_file(
            crate::output::register_link_binaries(&ids).as_bytes()
        ));
        assert!(registration_file(
            crate::output::register_link_binaries(&[]).as_bytes()
        ));
        for bad in [
            "#error \"injected by the shared cache\"\n",
            "#define NUM_PRELINKED_OBJECTS 1\nDEFINE_REGISTER_FUNC(a)\nint x;\n",
            "#define NUM_PRELINKED_OBJECTS 2\nDEFINE_REGISTER_FUNC(a)\n",
            "#define NUM_PRELINKED_OBJECTS 1\nDEFINE_REGISTER_FUNC(a) system(\"x\")\n",
            "#define NUM_PRELINKED_OBJECTS 1\nDEFINE_REGISTER_FUNC(a);b()\n",
            "#define NUM_PRELINKED_OBJECTS 1\nDEFINE_REGISTER_FUNC(1a)\n",
            "#define NUM_PRELINKED_OBJECTS 0",
            "#define NUM_PRELINKED_OBJECTS +0\n",
        ] {
            assert!(!registration_file(bad.as_bytes()), "{bad:?}");
        }
    }
}
