//! The links callers hold (`nvJitLinkHandle`): what each recorded, and the calls on it.
//! A link is ours (its calls recorded, `Complete` run by nvlinkrs) until something makes
//! it the real library's, from then on every call going to the real handle.
//!
//! The table of live handles is process-wide, the one global the drop-in keeps: a C
//! caller holds only an opaque pointer, and a handle destroyed or never made must give
//! `NVJITLINK_ERROR_INVALID_INPUT` instead of being read as memory, which needs a record
//! of the handles handed out. Each link has a lock of its own: different handles run in
//! parallel, as nvJitLink allows.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::real::RealLink;
use crate::{options, rc, real, run};

pub use crate::record::{Call, Done, Handle, Ours, What};

pub enum Link {
    Ours(Ours),
    Real(RealLink),
    /// A link of the real library's, answered from the cache (`memo`), with the real
    /// link its calls were replayed on, not completed (none without a real library).
    Cached(crate::memo::Answers, Option<RealLink>),
}

fn table() -> &'static Mutex<HashMap<usize, Arc<Mutex<Link>>>> {
    static TABLE: std::sync::OnceLock<Mutex<HashMap<usize, Arc<Mutex<Link>>>>> =
        std::sync::OnceLock::new();
    TABLE.get_or_init(Default::default)
}

/// Handles are numbers, not addresses: aligned, never null, never reused.
static NEXT: AtomicUsize = AtomicUsize::new(1);

fn lookup(h: Handle) -> Option<Arc<Mutex<Link>>> {
    let t = table().lock().unwrap_or_else(|e| e.into_inner());
    t.get(&(h as usize)).cloned()
}

/// Runs `f` on the link `h` names; `INVALID_INPUT` for a handle that is not one.
/// (A null handle, like any null pointer, is `NVJITLINK_ERROR_NULL_INPUT`, as nvJitLink
/// answers.)
fn with(h: Handle, f: impl FnOnce(&mut Link) -> i32) -> i32 {
    if h.is_null() {
        return rc::NULL_INPUT;
    }
    match lookup(h) {
        Some(link) => f(&mut link.lock().unwrap_or_else(|e| e.into_inner())),
        None => rc::INVALID_INPUT,
    }
}

/// # Safety
/// `out` writable (or null), `options` `num` C strings (or null).
pub unsafe fn create(out: *mut Handle, num: u32, options: *const *const c_char) -> i32 {
    if out.is_null() || options.is_null() {
        return rc::NULL_INPUT;
    }
    let mut given = Vec::new();
    for i in 0..num as usize {
        // SAFETY: the caller's array of `num` strings
        let p = unsafe { *options.add(i) };
        if p.is_null() {
            return rc::NULL_INPUT;
        }
        // SAFETY: a C string of the caller's
        given.push(unsafe { CStr::from_ptr(p) }.to_owned());
    }
    let (link, code) = match options::read(&given) {
        Some(options) => (
            Link::Ours(Ours {
                given,
                options,
                calls: Vec::new(),
                done: None,
            }),
            rc::SUCCESS,
        ),
        // an option nvlinkrs does not carry out: the real library's link from the start
        None => match real::create(&given).inspect(|_| crate::trace("nvJitLink: options")) {
            Ok((real, code)) => (Link::Real(real), code),
            // no real library: a handle all the same, whose error log says why (as
            // nvJitLink's handle of a refused `Create` has its reason)
            Err(code) => {
                crate::trace("nvlinkrs: no real library to hand the link to");
                (Link::Cached(no_real_library(&given, code), None), code)
            }
        },
    };
    let id = NEXT.fetch_add(1, Ordering::Relaxed) << 4;
    table()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(id, Arc::new(Mutex::new(link)));
    // SAFETY: checked non-null above
    unsafe { *out = id as Handle };
    code
}

/// The answers of a link whose options only the real library carries out, where there is
/// none: `code` for `Complete` and the images, the error log saying why.
fn no_real_library(given: &[CString], code: i32) -> crate::memo::Answers {
    let options: Vec<_> = given.iter().map(|o| o.to_string_lossy()).collect();
    let log = format!(
        "ERROR: nvlinkrs does not carry out these options ({}) and found no libnvJitLink to hand the link to (NVLINKRS_REAL_NVJITLINK)\n\0",
        options.join(" ")
    );
    let items = crate::memo::ALL
        .iter()
        .map(|what| match what {
            What::ErrorLog => (rc::SUCCESS, log.clone().into_bytes()),
            What::InfoLog => (rc::SUCCESS, Vec::new()),
            _ => (code, Vec::new()),
        })
        .collect();
    crate::memo::Answers {
        result: code,
        items,
    }
}

/// # Safety
/// `h` null or writable.
pub unsafe fn destroy(h: *mut Handle) -> i32 {
    // SAFETY: checked non-null first
    if h.is_null() || unsafe { *h }.is_null() {
        return rc::NULL_INPUT;
    }
    // SAFETY: checked non-null
    let id = unsafe { *h } as usize;
    let gone = table()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&id);
    match gone {
        Some(_) => {
            // SAFETY: as above
            unsafe { *h = std::ptr::null_mut() };
            rc::SUCCESS
        }
        None => rc::INVALID_INPUT,
    }
}

/// Makes a link the real library's: every call so far replayed there. The result is
/// the first failing call's code, else `SUCCESS`.
fn hand_over(link: &mut Link) -> i32 {
    let Link::Ours(ours) = link else {
        return rc::SUCCESS;
    };
    if !real::available() {
        return rc::INTERNAL;
    }
    match real::replay(&ours.given, std::mem::take(&mut ours.calls)) {
        Ok((real, code)) => {
            *link = Link::Real(real);
            code
        }
        Err(code) => code,
    }
}

/// # Safety
/// `data` `size` readable bytes, `name` null or a C string.
pub unsafe fn add_data(
    h: Handle,
    kind: i32,
    data: *const c_void,
    size: usize,
    name: *const c_char,
) -> i32 {
    with(h, |link| {
        // SAFETY: the caller's pointers
        let (bytes, name) = unsafe {
            let bytes =
                (!data.is_null()).then(|| std::slice::from_raw_parts(data as *const u8, size));
            let name = (!name.is_null()).then(|| CStr::from_ptr(name).to_owned());
            (bytes, name)
        };
        uncache(link);
        match link {
            Link::Real(r) => r.add_kept(kind, bytes, size, name),
            // (an input after `Complete`: nvJitLink refuses it so)
            Link::Cached(..) => rc::INTERNAL,
            Link::Ours(_) if bytes.is_none() => {
                // (no bytes: nvJitLink's answer, on the real link)
                crate::trace("nvJitLink: input");
                match hand_over(link) {
                    rc::SUCCESS => match link {
                        Link::Real(r) => r.add_data(kind, None, size, name.as_deref()),
                        _ => rc::INTERNAL,
                    },
                    code => code,
                }
            }
            Link::Ours(ours) => {
                let data = [bytes.unwrap_or_default(), b"\0"].concat();
                let accepted = ours.done.is_none()
                    && run::acceptable(&ours.options, kind, &data[..data.len() - 1]);
                record(link, Call::Data { kind, data, name }, accepted)
            }
        }
    })
}

/// An input after `Complete` to a link the cache answered: the real link completed
/// after all, so that it refuses the input with nvJitLink's own words in its error log.
fn uncache(link: &mut Link) {
    if let Link::Cached(_, kept @ Some(_)) = link
        && let Some(mut real) = kept.take()
    {
        real.complete();
        *link = Link::Real(real);
    }
}

/// Keeps an input nvlinkrs takes as nvJitLink would (`accepted`); else nvJitLink judges
/// it (and words its message): the earlier calls replayed, then this one, on the real
/// library.
fn record(link: &mut Link, call: Call, accepted: bool) -> i32 {
    if let (true, Link::Ours(ours)) = (accepted, &mut *link) {
        ours.calls.push(call);
        return rc::SUCCESS;
    }
    crate::trace("nvJitLink: input");
    let completed = matches!(link, Link::Ours(o) if o.done.is_some());
    let code = hand_over(link);
    if let (true, Link::Real(r)) = (completed, &mut *link) {
        // an input after `Complete`: the real link completed too, so that it answers
        // (refuses) the input, and the image, as nvJitLink's own handle would
        r.complete();
    }
    match link {
        Link::Real(r) if code == rc::SUCCESS => r.replay_one(call),
        _ => code,
    }
}

/// # Safety
/// `path` a C string (or null).
pub unsafe fn add_file(h: Handle, kind: i32, path: *const c_char) -> i32 {
    with(h, |link| {
        // SAFETY: the caller's string
        let path = (!path.is_null()).then(|| unsafe { CStr::from_ptr(path) }.to_owned());
        let call = match path {
            Some(path) => Call::File {
                kind,
                data: crate::read_input(&path),
                path,
            },
            None => {
                return match link {
                    Link::Real(r) => r.add_file(kind, None),
                    _ => rc::NULL_INPUT,
                };
            }
        };
        uncache(link);
        match link {
            Link::Real(r) => r.replay_one(call),
            Link::Cached(..) => rc::INTERNAL,
            Link::Ours(ours) => {
                let Call::File { data, .. } = &call else {
                    unreachable!()
                };
                let accepted = ours.done.is_none()
                    && data
                        .as_ref()
                        .is_some_and(|b| run::acceptable(&ours.options, kind, b));
                record(link, call, accepted)
            }
        }
    })
}

pub fn complete(h: Handle) -> i32 {
    with(h, |link| match link {
        Link::Real(_) => complete_real(link),
        // a link completed already: nvJitLink answers a second `Complete` so
        Link::Cached(..) => rc::INTERNAL,
        Link::Ours(ours) => {
            if ours.done.is_some() {
                return rc::INTERNAL;
            }
            let mut messages = String::new();
            match run::link(ours, &mut messages) {
                Some(done) => {
                    let code = done.result;
                    ours.done = Some(done);
                    code
                }
                // no real library either: nvlinkrs' messages, as nvJitLink's log has its own
                None if !real::available() => {
                    crate::trace("nvlinkrs: no real library to hand the link to");
                    if messages.is_empty() {
                        messages = "ERROR: nvlinkrs could not run the link (no CUDA toolkit with ptxas and libNVVM found) and found no libnvJitLink to hand it to (NVLINKRS_REAL_NVJITLINK)\n".into();
                    }
                    ours.done = Some(Done {
                        result: rc::INTERNAL,
                        error_log: messages,
                        ..Default::default()
                    });
                    rc::INTERNAL
                }
                // what nvlinkrs could not link (or failed to): the real library's link,
                // with its result and logs
                None => {
                    crate::trace("nvJitLink: link");
                    match hand_over(link) {
                        rc::SUCCESS => complete_real(link),
                        code => code,
                    }
                }
            }
        }
    })
}

/// `Complete` on the real library, through the cache (`memo`): a link seen before is
/// answered from it, a new one that succeeds is kept.
fn complete_real(link: &mut Link) -> i32 {
    let Link::Real(r) = link else {
        return rc::INTERNAL;
    };
    if r.completed() {
        // (the real library's answer to a second `Complete`)
        return r.complete();
    }
    let memo = if r.cacheable() { r.key() } else { None };
    if let Some((cache, key)) = &memo
        && let Some(answers) = crate::memo::lookup(cache, key)
    {
        crate::trace("nvJitLink: cache hit");
        let code = answers.result;
        if let Link::Real(real) = std::mem::replace(link, Link::Cached(answers, None))
            && let Link::Cached(_, kept) = link
        {
            *kept = Some(real);
        }
        return code;
    }
    let started = std::time::Instant::now();
    let code = r.complete();
    if let (rc::SUCCESS, Some((cache, key))) = (code, &memo) {
        crate::memo::store(cache, key, &r.answers(code), started.elapsed());
        crate::trace("nvJitLink: linked, cached");
    }
    code
}

/// What a `Get…Size` call answers for a link of ours (nvJitLink's codes, observed: no
/// cubin is `INTERNAL`, PTX without `-ptx` `INVALID_INPUT`; a log's size counts its
/// NUL, an empty log is 0).
fn ours_bytes(ours: &Ours, what: What) -> Result<Cow<'_, [u8]>, i32> {
    let done = ours.done.as_ref();
    let log = |s: Option<&String>| match s {
        Some(s) if !s.is_empty() => Ok(Cow::Owned([s.as_bytes(), b"\0"].concat())),
        _ => Ok(Cow::Borrowed(&[][..])),
    };
    match what {
        What::Cubin => lent(done.and_then(|d| d.cubin.as_deref())),
        What::Ptx if !ours.options.ptx => Err(rc::INVALID_INPUT),
        What::Ptx => lent(done.and_then(|d| d.ptx.as_deref())),
        // (before `Complete`, an `-lto` link has none yet, as nvJitLink answers)
        What::LtoIr if ours.options.lto => lent(done.and_then(|d| d.ltoir.as_deref())),
        What::LtoIr => Err(rc::INVALID_INPUT),
        What::ErrorLog => log(done.map(|d| &d.error_log)),
        What::InfoLog => log(done.map(|d| &d.info_log)),
    }
}

/// An image of a link of ours, lent (not copied): a size asked and a copy made of
/// megabytes.
fn lent(b: Option<&[u8]>) -> Result<Cow<'_, [u8]>, i32> {
    b.map(Cow::Borrowed).ok_or(rc::INTERNAL)
}

/// # Safety
/// `size` null or writable.
pub unsafe fn size(h: Handle, what: What, size: *mut usize) -> i32 {
    with(h, |link| {
        linked_ir(link, what);
        // SAFETY: the caller's pointer
        unsafe { size_of(link, what, size) }
    })
}

/// nvJitLink keeps the linked program's LTO IR (its own container) from every `-lto`
/// link: asked for it, a link of ours makes it (`run::linked_ir`, libNVVM's `-gen-lto`,
/// once), or where it cannot, is run again by the real library, which answers from then
/// on.
fn linked_ir(link: &mut Link, what: What) {
    let Link::Ours(ours) = &mut *link else {
        return;
    };
    let wanted = what == What::LtoIr
        && ours.options.lto
        && (ours.done.as_ref()).is_some_and(|d| d.result == rc::SUCCESS && d.ltoir.is_none());
    if !wanted {
        return;
    }
    if let Some(ir) = crate::run::linked_ir(ours) {
        crate::trace("nvlinkrs: linked LTO IR");
        if let Some(done) = ours.done.as_mut() {
            done.ltoir = Some(ir);
        }
        return;
    }
    crate::trace("nvJitLink: linked LTO IR");
    if hand_over(link) == rc::SUCCESS
        && let Link::Real(r) = link
    {
        r.complete();
    }
}

/// # Safety
/// `size` null or writable.
unsafe fn size_of(link: &mut Link, what: What, size: *mut usize) -> i32 {
    match link {
        // SAFETY: the caller's pointer, passed on
        Link::Real(r) => unsafe { r.size(what, size) },
        Link::Cached(a, _) => match a.get(what) {
            _ if size.is_null() => rc::NULL_INPUT,
            (rc::SUCCESS, bytes) => {
                // SAFETY: checked non-null
                unsafe { *size = bytes.len() };
                rc::SUCCESS
            }
            (code, _) => *code,
        },
        Link::Ours(ours) => {
            if size.is_null() {
                return rc::NULL_INPUT;
            }
            match ours_bytes(ours, what) {
                Ok(b) => {
                    // SAFETY: checked non-null
                    unsafe { *size = b.len() };
                    rc::SUCCESS
                }
                Err(code) => code,
            }
        }
    }
}

/// # Safety
/// `buf` null or with room for the size `size` gave.
pub unsafe fn copy(h: Handle, what: What, buf: *mut c_void) -> i32 {
    with(h, |link| {
        linked_ir(link, what);
        // SAFETY: the caller's buffer
        unsafe { copy_of(link, what, buf) }
    })
}

/// # Safety
/// `buf` null or with room for the size `size` gave.
unsafe fn copy_of(link: &mut Link, what: What, buf: *mut c_void) -> i32 {
    match link {
        // SAFETY: the caller's buffer, passed on
        Link::Real(r) => unsafe { r.copy(what, buf) },
        Link::Cached(a, _) => match a.get(what) {
            _ if buf.is_null() => rc::NULL_INPUT,
            (rc::SUCCESS, bytes) => {
                // SAFETY: the caller made room for the size it was given
                unsafe {
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf as *mut u8, bytes.len())
                };
                rc::SUCCESS
            }
            (code, _) => *code,
        },
        Link::Ours(ours) => {
            if buf.is_null() {
                return rc::NULL_INPUT;
            }
            match ours_bytes(ours, what) {
                Ok(b) => {
                    // SAFETY: the caller made room for the size it was given
                    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), buf as *mut u8, b.len()) };
                    rc::SUCCESS
                }
                Err(code) => code,
            }
        }
    }
}
