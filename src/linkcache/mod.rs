//! The whole-link stage of the cache: a link whose tools, options, settings and input
//! contents were all seen before is answered from the cache (its output, its
//! `--register-link-binaries` file and its messages, repeated in order) without reading an
//! input as device code. What the key holds is in [`key`]. Links whose effects go beyond
//! those (`-time`, `-dump-callgraph`, the verbose modes, incremental LTO's PTX dump) and links with thin archives
//! (whose members live in other files) or inputs that are not regular files (a FIFO is read
//! once) always run. What is stored is the bytes the link wrote
//! ([`Written`](crate::output::Written)), never what is read back from its files, and only
//! when the output and the registration file are regular files (not `/dev/null`, a pipe or
//! a FIFO) and no file the key holds changed while the link ran.

pub mod key;
#[cfg(test)]
mod tests;

use crate::cache::{Cache, Key, pack};
use crate::cli::LinkRequest;
use crate::cli::incremental::Mode;
use crate::context::LinkContext;
use crate::diag::{Diagnostics, Level, Result};
use crate::explain;
use crate::input::Opened;
use crate::output;
use crate::plan::Plan;
use crate::report::Timings;

/// Runs the link's phases (`phases`, told whether to keep what they write) through the
/// whole-link cache: answered from it when the same link was stored, else run and stored.
/// The inputs are read through `opened`, which the phases read them through too. Also says
/// what the cache did, for the report: `off` (no cache), `hit`, `miss`, `changed` (a miss
/// not stored: a file the key holds changed while the link ran), or `not cached` (a link
/// the cache does not take). With `--explain`, a link that is no hit says why
/// ([`crate::explain`]); every cached link leaves its record for the next one.
pub fn around(
    plan: &Plan,
    ctx: &LinkContext,
    opened: &Opened,
    phases: impl FnOnce(bool) -> Result<Timings>,
) -> Result<(Timings, &'static str)> {
    let (req, diag) = (plan.req, ctx.diag);
    let Some(cache) = ctx.cache() else {
        if req.observe.explain {
            diag.explain("the link has no cache, so nothing to compare it with");
        }
        return Ok((phases(false)?, "off"));
    };
    let given = ctx.finalizer.as_ref().map(|g| g.library.as_path());
    let earlier = diag.printed().len(); // messages from before the link are not its own
    let make_key = || {
        let _span = crate::trace::span("cache", "whole-link key (inputs and tools hashed)");
        key::key_or_why(plan, cache, opened, given)
    };
    // A cache that does not know this link's tools yet (its first link with them) holds no
    // entry made with them, unless they were reinstalled unchanged: the link then runs
    // while they are hashed (200-400 MB) and is stored under the key made beside it, not
    // looked up first. The rest of the key is made before the link starts (its inputs
    // read into memory, so the link parses the bytes hashed; every file stamped, so a
    // change while the link runs stores nothing). Not with a shared tier, whose entries a
    // new machine's first link is there to find, nor with `--explain`, which weighs the
    // key before the link, nor in a cache that cannot remember the tools (every link would
    // find them unknown).
    let beside = !req.observe.explain
        && cache.remote().is_none()
        && !key::tools_remembered(plan, cache, given)
        && cache.can_remember_tools();
    let begun = beside.then(|| {
        let _span = crate::trace::span("cache", "whole-link key (inputs hashed)");
        key::begin(plan, cache, opened, given)
    });
    let mut phases = Some(phases);
    // (the entry's cold time is the link's, after the key: a hit makes the key too, and
    // the first link in a cache hashes the tools for every later one)
    let mut started = std::time::Instant::now();
    let (made, ran_beside) = match begun {
        Some(Ok(begun)) => {
            let (made, ran) = link_beside(begun, cache, phases.take().expect("once"));
            (made, Some(ran))
        }
        Some(Err(why)) => (Err(why), None),
        None => (make_key(), None),
    };
    if ran_beside.is_none() {
        started = std::time::Instant::now();
    }
    let last = explain::Last::of(req, cache, made.is_ok());
    let (key, why) = match made {
        Ok(k) => (Some(k), None),
        Err(why) => (None, Some(why)),
    };
    // the shared tier's first failure, once per link (after the store: never replayed)
    let shared_failure = || {
        for warning in cache.remote_warnings() {
            diag.warning_never_error(&warning);
        }
    };
    // (`--explain` remembers the link's own key, whatever entry answered it)
    let looked_up = key.iter().filter(|_| ran_beside.is_none());
    for (own, looked) in looked_up.flat_map(|k| lookups(plan, k).into_iter().map(move |l| (k, l))) {
        let mut written = output::Written::default();
        if let Some(entry) = cache.get(&looked)
            && replay(req, diag, &entry, &mut written)?
        {
            let t = Timings {
                phases: vec![("cache", std::time::Duration::ZERO)],
                written,
                ..Default::default()
            };
            last.remember(cache, &own.parts, &own.key, None);
            shared_failure();
            return Ok((t, "hit"));
        }
    }
    if req.observe.explain {
        match (&key, why) {
            (Some(k), _) => last.say_why(diag, Ok(k.parts.0.as_slice())),
            (None, why) => last.say_why(diag, Err(why.unwrap_or("no key"))),
        }
    }
    let ran = match ran_beside {
        Some(ran) => ran,
        None => (phases.take().expect("once"))(key.is_some()),
    };
    if req.observe.explain {
        last.say_stages(diag, cache);
    }
    let timings = ran.inspect_err(|_| shared_failure())?;
    let mut whole = if key.is_some() { "miss" } else { "not cached" };
    if let Some(key) = &key
        && diag.error_count() == 0
        && !timings.fell_back
    {
        match key.unchanged() {
            true => {
                store(
                    req,
                    diag,
                    earlier,
                    cache,
                    &stored_as(plan, key, &timings),
                    &timings.written,
                    started.elapsed(),
                );
                let seen = cache.seen_and_missed().0;
                last.remember(cache, &key.parts, &key.key, Some(seen));
            }
            false => whole = "changed",
        }
    }
    if let Some(failure) = cache.store_failure() {
        ctx.cache_problem(req, &format!("{failure}; the output is not cached"));
    }
    shared_failure();
    Ok((timings, whole))
}

/// The link's phases run while another thread hashes the tools of the key `begun` (on one
/// thread: the phases mostly wait on one child, libNVVM's or ptxas's, and the spare core
/// hashes): the key, and what the phases returned.
fn link_beside(
    begun: key::Begun,
    cache: &crate::cache::Cache,
    phases: impl FnOnce(bool) -> Result<Timings>,
) -> (Result<key::LinkKey, &'static str>, Result<Timings>) {
    std::thread::scope(|s| {
        let trace = crate::trace::current();
        let tools = move || {
            let _lane = crate::trace::lane(&trace);
            let _span = crate::trace::span("cache", "whole-link key (tools hashed)");
            begun.finish(cache)
        };
        let hashing = s.spawn(
            || match rayon::ThreadPoolBuilder::new().num_threads(1).build() {
                Ok(one) => one.install(tools),
                Err(_) => tools(),
            },
        );
        let ran = phases(true);
        let made = hashing.join().unwrap_or(Err("the key could not be made"));
        (made, ran)
    })
}

/// Whether the link is incremental LTO's `Auto` mode, whose image is the whole-program
/// link's or the partitioned link's ([`key::LinkKey::in_mode`]).
fn auto(plan: &Plan) -> bool {
    plan.req.lto && plan.incremental().is_ok_and(|m| m == Mode::Auto)
}

/// The keys a link is looked up under, in order: its own, but for an `Auto` link the
/// whole-program link's (nvlink's bytes, which a link without `--incremental` stores too)
/// and then the partitioned link's (never its own).
fn lookups(plan: &Plan, key: &key::LinkKey) -> Vec<Key> {
    if crate::cli::incremental::is_background(&plan.env) && !plan.req.lto {
        // (its image is the link's own, whose entry the link that asked for it stored:
        // the build is there for the finalizer's per-unit jobs, which only linking makes)
        return Vec::new();
    }
    match auto(plan) {
        true => vec![key.in_mode(Mode::Off), key.in_mode(Mode::Partitions)],
        false => vec![key.key.clone()],
    }
}

/// The key a finished link is stored under: its own, or for an `Auto` link the key of
/// the mode whose image it wrote.
fn stored_as(plan: &Plan, key: &key::LinkKey, timings: &Timings) -> Key {
    match (auto(plan), timings.partitioned) {
        (true, true) => key.in_mode(Mode::Partitions),
        (true, false) => key.in_mode(Mode::Off),
        (false, _) => key.key.clone(),
    }
}

/// The whole-link key (its hex digest) of the link `args` asks for, made as that link
/// would make it in the environment `env` (its cache's tool memos included); `None` when
/// the link would have none (no cache, a link the cache does not take, a command line it
/// refuses). The daemon merges requests in flight only when their keys agree.
pub fn request_key(args: &[String], env: &crate::linkenv::LinkEnv) -> Option<String> {
    let (parsed, _, given) = crate::cli::parse(args).ok()?;
    if parsed.help || parsed.version {
        return None;
    }
    crate::cli::refuse_unimplemented(&given).ok()?;
    key_of(&parsed.request().ok()?, env)
}

/// The whole-link key (its hex digest) of the link `req` in the environment `env`, as
/// [`request_key`] makes it (incremental LTO's background build asks for its own link so).
pub fn key_of(req: &LinkRequest, env: &crate::linkenv::LinkEnv) -> Option<String> {
    let cache = Cache::open(req.cache.dir.as_ref()?, crate::cache::DEFAULT_CAP).ok()?;
    let plan = Plan::with_env(req, env.clone());
    key::key(&plan, &cache, &Opened::default(), None).map(|k| k.key.finish())
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
pub fn replay(
    req: &LinkRequest,
    diag: &Diagnostics,
    entry: &[u8],
    written: &mut output::Written,
) -> Result<bool> {
    let Ok(parts) = crate::frames::decode(entry) else {
        return Ok(false);
    };
    let [(_, out), (_, has_register), (_, register), (_, messages)] = &parts[..] else {
        return Ok(false);
    };
    // (what a store's writer could slip in: a registration file that is more than nvlink
    // writes, which nvcc compiles into the host program, and terminal escapes)
    let register_ok = match *has_register {
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
    if req.image_in_memory {
        written.out = Some(out.to_vec());
    } else {
        output::write_atomic(&req.output, out)?;
    }
    if let (Some(path), b"1") = (&req.register_link_binaries, *has_register) {
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
mod registration_tests {
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
