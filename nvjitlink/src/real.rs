//! NVIDIA's own libnvJitLink, for the links nvlinkrs hands over. Found through
//! `NVLINKRS_REAL_NVJITLINK` (a path), else in the CUDA toolkit nvlinkrs finds
//! (`lib/libnvJitLink.so.13`: the toolkit, or the nvidia-nvjitlink wheel's `cu13`
//! folder, else the nvidia-nvjitlink wheel of a Python environment without a toolkit),
//! never this library itself; loaded by its path with `RTLD_LOCAL |
//! RTLD_DEEPBIND`, so that its own calls stay inside it (not back into the drop-in, which
//! defines the same names and may be preloaded).

use std::ffi::{CStr, CString, c_char, c_void};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, mpsc};

use nvlinkrs::finalize::nvjitlink::NvJitLink;
use nvlinkrs::finalize::{Finalizer, Given, Mode};

use crate::rc;
use crate::record::{Call, Handle, What};

type CreateFn = unsafe extern "C" fn(*mut Handle, u32, *const *const c_char) -> i32;
type DestroyFn = unsafe extern "C" fn(*mut Handle) -> i32;
type AddDataFn = unsafe extern "C" fn(Handle, i32, *const c_void, usize, *const c_char) -> i32;
type AddFileFn = unsafe extern "C" fn(Handle, i32, *const c_char) -> i32;
type CompleteFn = unsafe extern "C" fn(Handle) -> i32;
type SizeFn = unsafe extern "C" fn(Handle, *mut usize) -> i32;
type CopyFn = unsafe extern "C" fn(Handle, *mut c_void) -> i32;
type ApiFn = unsafe extern "C" fn(usize) -> *const c_void;

struct Api {
    create: CreateFn,
    destroy: DestroyFn,
    add_data: AddDataFn,
    add_file: AddFileFn,
    complete: CompleteFn,
    sizes: [SizeFn; 5],
    copies: [CopyFn; 5],
    api: Option<ApiFn>,
    path: PathBuf,
    _lib: libloading::os::unix::Library,
}

// SAFETY: function pointers into a library loaded for the life of the process; nvJitLink
// takes calls on different handles from any thread.
unsafe impl Send for Api {}
unsafe impl Sync for Api {}

/// Where the real library is: the environment's path, else the toolkit's.
pub fn location() -> Option<PathBuf> {
    let chosen = match std::env::var_os("NVLINKRS_REAL_NVJITLINK").filter(|v| !v.is_empty()) {
        Some(p) => Some(PathBuf::from(p)),
        None => crate::kit::toolkit()
            .and_then(|kit| kit.libnvjitlink())
            // (a runtime-only Python environment: the nvidia-nvjitlink wheel without a
            // toolkit beside it, where nvlinkrs cannot link but NVIDIA's library can)
            .or_else(|| {
                nvlinkrs::toolkit::wheel_file(std::path::Path::new("lib/libnvJitLink.so.13"))
            }),
    }?;
    // (never the drop-in itself: the file nvlinkrs' code was loaded from)
    let own = nvlinkrs::toolkit::own_image().and_then(|p| std::fs::canonicalize(p).ok());
    let real = std::fs::canonicalize(&chosen).ok()?;
    (Some(&real) != own.as_ref()).then_some(real)
}

/// The real library, loaded on first need; `None` where there is none (or it does not
/// load). Process-wide, as the loader's own record of a library is.
fn api() -> Option<&'static Api> {
    static API: OnceLock<Option<Api>> = OnceLock::new();
    API.get_or_init(|| {
        let path = location()?;
        use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
        // SAFETY: loading NVIDIA's library runs its initialisers, made for this use
        let lib =
            unsafe { Library::open(Some(&path), RTLD_NOW | RTLD_LOCAL | libc::RTLD_DEEPBIND) }
                .ok()?;
        // SAFETY: each name gets the signature nvJitLink.h declares for it
        unsafe {
            macro_rules! get {
                ($name:literal) => {
                    *lib.get(concat!($name, "\0").as_bytes()).ok()?
                };
            }
            Some(Api {
                create: get!("nvJitLinkCreate"),
                destroy: get!("nvJitLinkDestroy"),
                add_data: get!("nvJitLinkAddData"),
                add_file: get!("nvJitLinkAddFile"),
                complete: get!("nvJitLinkComplete"),
                sizes: [
                    get!("nvJitLinkGetLinkedCubinSize"),
                    get!("nvJitLinkGetLinkedPtxSize"),
                    get!("nvJitLinkGetLinkedLTOIRSize"),
                    get!("nvJitLinkGetErrorLogSize"),
                    get!("nvJitLinkGetInfoLogSize"),
                ],
                copies: [
                    get!("nvJitLinkGetLinkedCubin"),
                    get!("nvJitLinkGetLinkedPtx"),
                    get!("nvJitLinkGetLinkedLTOIR"),
                    get!("nvJitLinkGetErrorLog"),
                    get!("nvJitLinkGetInfoLog"),
                ],
                api: lib.get(b"__nvJitLinkAPI\0").ok().map(|s| *s),
                path,
                _lib: lib,
            })
        }
    })
    .as_ref()
}

/// NVIDIA's library as the sm_100+ finalizer of the links the drop-in runs itself (as
/// NVIDIA's library regenerates the code of `-dc` objects), and its path: loaded once,
/// bound to its own definitions as `api` loads it.
fn finalizer_library() -> Option<&'static (NvJitLink, PathBuf)> {
    static LIB: OnceLock<Option<(NvJitLink, PathBuf)>> = OnceLock::new();
    LIB.get_or_init(|| {
        let path = location()?;
        let lib = NvJitLink::load_beside_the_drop_in(&path).ok()?;
        Some((lib, path))
    })
    .as_ref()
}

/// A finalizer job sent to the thread that called `Complete`, and where its answer goes.
struct Job {
    inputs: Vec<Vec<u8>>,
    mode: Mode,
    back: mpsc::Sender<nvlinkrs::diag::Result<Option<Vec<u8>>>>,
}

/// The finalizer given to a link: each job sent to the calling thread (`with_finalizer`).
struct OnCaller(Mutex<mpsc::Sender<Option<Job>>>);

impl Finalizer for OnCaller {
    fn link(&self, job: &[&[u8]], mode: &Mode) -> nvlinkrs::diag::Result<Option<Vec<u8>>> {
        let gone = || nvlinkrs::diag::Error::fatal("the drop-in's finalizer thread is gone");
        let (back, answer) = mpsc::channel();
        let job = Job {
            inputs: job.iter().map(|j| j.to_vec()).collect(),
            mode: mode.clone(),
            back,
        };
        let sent = self.0.lock().map_err(|_| gone())?.send(Some(job));
        sent.map_err(|_| gone())?;
        answer.recv().map_err(|_| gone())?
    }
}

/// `link` run on a thread of its own, given the finalizer (where `wanted` and NVIDIA's
/// library is there), while this thread, the one that called the drop-in, runs the
/// finalizer's jobs it sends: NVIDIA's library is called from the program's own thread,
/// as without the drop-in. (A link it refused, `archive member size exceeds library
/// bounds`, left a lock of its held by the thread that called it: a later call from
/// any other thread waited for ever.)
pub fn with_finalizer<T: Send>(
    wanted: bool,
    link: impl FnOnce(Option<Arc<Given>>) -> T + Send,
) -> T {
    let Some((lib, path)) = wanted.then(finalizer_library).flatten() else {
        return link(None);
    };
    let (tx, rx) = mpsc::channel::<Option<Job>>();
    let done = tx.clone();
    let given = Arc::new(Given {
        finalizer: Box::new(OnCaller(Mutex::new(tx))),
        library: path.clone(),
    });
    std::thread::scope(|s| {
        let t = s.spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| link(Some(given))));
            let _ = done.send(None);
            r
        });
        while let Ok(Some(job)) = rx.recv() {
            let inputs: Vec<&[u8]> = job.inputs.iter().map(Vec::as_slice).collect();
            let _ = job.back.send(lib.link(&inputs, &job.mode));
        }
        match t.join() {
            Ok(Ok(r)) => r,
            Ok(Err(p)) | Err(p) => std::panic::resume_unwind(p),
        }
    })
}

/// Whether there is a real library to hand links to.
pub fn available() -> bool {
    api().is_some()
}

/// `__nvJitLinkAPI`, answered by the real library (null without one).
pub fn api_table(magic: usize) -> *const c_void {
    match api().and_then(|a| a.api) {
        // SAFETY: the real library's own entry, called as the drop-in was
        Some(f) => unsafe { f(magic) },
        None => std::ptr::null(),
    }
}

/// A link of the real library's, and the inputs replayed into it: nvJitLink keeps
/// pointers to an input's bytes and name until the link is done (a name freed earlier
/// came back as garbage in its messages), so they live as long as the handle.
pub struct RealLink {
    api: &'static Api,
    h: Handle,
    kept: Vec<Call>,
    given: Vec<CString>,
    /// A call failed, or one was not kept (null bytes): the link is not cached.
    unkept: bool,
    /// `Complete` was called.
    completed: bool,
    /// Copies of fatbins cut short, padded with zeros to the size their header gives
    /// (see [`padded_fatbin`]), and of files rewritten since `AddFile`, kept as long as
    /// the inputs.
    padded: Vec<Vec<u8>>,
}

/// The most a fatbin cut short is padded by.
const MAX_PAD: u64 = 1 << 30;

/// nvJitLink reads a fatbin as far as its header's body size says, past the size it was
/// given (a fatbin cut short crashed it, from the drop-in's copy; from a caller's buffer
/// it reads whatever follows): such a fatbin is given from a copy padded with zeros to
/// that size, which it reads and refuses (`INVALID_INPUT`). `None` for any other input.
fn padded_fatbin(data: &[u8]) -> Option<Vec<u8>> {
    if !nvlinkrs::fatbin::is_fatbin(data) {
        return None;
    }
    let header = u16::from_le_bytes(data.get(6..8)?.try_into().ok()?) as u64;
    let body = u64::from_le_bytes(data.get(8..16)?.try_into().ok()?);
    let end = header.max(16).checked_add(body)?;
    let have = data.len() as u64;
    (end > have && end - have <= MAX_PAD).then(|| {
        let mut copy = vec![0u8; end as usize + 1];
        copy[..data.len()].copy_from_slice(data);
        copy
    })
}

// SAFETY: the handle is used under the link's lock only, one call at a time
unsafe impl Send for RealLink {}

impl Drop for RealLink {
    fn drop(&mut self) {
        if !self.h.is_null() {
            // SAFETY: a handle the real library made and nothing else destroys
            unsafe { (self.api.destroy)(&mut self.h) };
        }
    }
}

fn slot(what: What) -> usize {
    match what {
        What::Cubin => 0,
        What::Ptx => 1,
        What::LtoIr => 2,
        What::ErrorLog => 3,
        What::InfoLog => 4,
    }
}

impl RealLink {
    pub fn add_data(
        &mut self,
        kind: i32,
        data: Option<&[u8]>,
        size: usize,
        name: Option<&CStr>,
    ) -> i32 {
        let ptr = data.map_or(std::ptr::null(), |d| d.as_ptr() as *const c_void);
        let name = name.map_or(std::ptr::null(), CStr::as_ptr);
        // SAFETY: the caller's bytes (or null, for the library to judge)
        let code = unsafe { (self.api.add_data)(self.h, kind, ptr, size, name) };
        self.unkept |= code != rc::SUCCESS || data.is_none();
        code
    }

    /// A caller's input: copied and kept (for the cache's key), then given.
    pub fn add_kept(
        &mut self,
        kind: i32,
        data: Option<&[u8]>,
        size: usize,
        name: Option<CString>,
    ) -> i32 {
        match data {
            Some(d) => self.replay_one(Call::Data {
                kind,
                data: [d, b"\0"].concat(),
                name,
            }),
            None => self.add_data(kind, None, size, name.as_deref()),
        }
    }

    /// Whether the link may go through the cache: every call kept and answered.
    pub fn cacheable(&self) -> bool {
        !self.unkept
    }

    pub fn key(&self) -> Option<(nvlinkrs::cache::Cache, nvlinkrs::cache::Key)> {
        crate::memo::key(&self.api.path, &self.given, &self.kept)
    }

    /// Every answer of the finished link, for the cache.
    pub fn answers(&mut self, result: i32) -> crate::memo::Answers {
        let items = crate::memo::ALL
            .iter()
            .map(|&what| {
                let mut size = 0usize;
                // SAFETY: a size into a local, then a buffer of that size
                let code = unsafe { self.size(what, &mut size) };
                let mut bytes = vec![0u8; size];
                if code == rc::SUCCESS && size > 0 {
                    // SAFETY: `bytes` has the room the library asked for
                    unsafe { self.copy(what, bytes.as_mut_ptr() as *mut c_void) };
                }
                (code, bytes)
            })
            .collect();
        crate::memo::Answers { result, items }
    }

    pub fn add_file(&mut self, kind: i32, path: Option<&CStr>) -> i32 {
        self.unkept |= path.is_none();
        let path = path.map_or(std::ptr::null(), CStr::as_ptr);
        // SAFETY: a C string (or null, for the library to judge)
        let code = unsafe { (self.api.add_file)(self.h, kind, path) };
        self.unkept |= code != rc::SUCCESS;
        code
    }

    pub fn replay_one(&mut self, call: Call) -> i32 {
        let code = match &call {
            Call::Data { kind, data, name } => {
                let size = data.len() - 1;
                match padded_fatbin(&data[..size]) {
                    Some(copy) => {
                        let code = self.add_data(*kind, Some(&copy), size, name.as_deref());
                        // (kept: moving the Vec leaves its bytes where they are)
                        self.padded.push(copy);
                        code
                    }
                    None => self.add_data(*kind, Some(data), size, name.as_deref()),
                }
            }
            // (a file rewritten since `AddFile`: nvJitLink read it then, so its bytes of
            // then, under its path)
            Call::File {
                kind,
                path,
                data: Some(then),
            } if crate::read_input(path).as_ref() != Some(then) => {
                let copy = [then.as_slice(), b"\0"].concat();
                let code = self.add_data(*kind, Some(&copy), then.len(), Some(path));
                self.padded.push(copy);
                code
            }
            Call::File { kind, path, .. } => self.add_file(*kind, Some(path)),
        };
        self.kept.push(call);
        code
    }

    pub fn completed(&self) -> bool {
        self.completed
    }

    pub fn complete(&mut self) -> i32 {
        self.completed = true;
        // SAFETY: the real handle
        unsafe { (self.api.complete)(self.h) }
    }

    /// # Safety
    /// The caller's pointer.
    pub unsafe fn size(&mut self, what: What, size: *mut usize) -> i32 {
        // SAFETY: passed on as the caller gave it
        unsafe { (self.api.sizes[slot(what)])(self.h, size) }
    }

    /// # Safety
    /// The caller's buffer.
    pub unsafe fn copy(&mut self, what: What, buf: *mut c_void) -> i32 {
        // SAFETY: passed on as the caller gave it
        unsafe { (self.api.copies[slot(what)])(self.h, buf) }
    }
}

/// A real link made with these options, and `Create`'s result. `Err`: no real library
/// (`NVJITLINK_ERROR_INTERNAL`).
pub fn create(given: &[CString]) -> Result<(RealLink, i32), i32> {
    let api = api().ok_or(rc::INTERNAL)?;
    let ptrs: Vec<*const c_char> = given.iter().map(|c| c.as_ptr()).collect();
    let mut h: Handle = std::ptr::null_mut();
    // SAFETY: C strings that live across the call
    let code = unsafe { (api.create)(&mut h, ptrs.len() as u32, ptrs.as_ptr()) };
    Ok((
        RealLink {
            api,
            h,
            kept: Vec::new(),
            given: given.to_vec(),
            unkept: code != rc::SUCCESS,
            completed: false,
            padded: Vec::new(),
        },
        code,
    ))
}

/// A real link made with these options and given these inputs; the result is the first
/// failing call's code, else `SUCCESS`.
pub fn replay(given: &[CString], calls: Vec<Call>) -> Result<(RealLink, i32), i32> {
    let (mut link, mut code) = create(given)?;
    for call in calls {
        let c = link.replay_one(call);
        if code == rc::SUCCESS {
            code = c;
        }
    }
    Ok((link, code))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_fatbin_cut_short_is_padded_to_its_header_size() {
        let mut fatbin = vec![0u8; 16];
        fatbin[..4].copy_from_slice(&0xba55_ed50u32.to_le_bytes());
        fatbin[6..8].copy_from_slice(&16u16.to_le_bytes());
        fatbin[8..16].copy_from_slice(&100u64.to_le_bytes());
        let copy = super::padded_fatbin(&fatbin).unwrap();
        assert_eq!((copy.len(), &copy[..16]), (117, &fatbin[..]));
        assert!(copy[16..].iter().all(|&b| b == 0));
        // whole, not a fatbin, or a body size past the cap: as given
        fatbin.resize(116, 7);
        assert!(super::padded_fatbin(&fatbin).is_none());
        assert!(super::padded_fatbin(b"not a fatbin at all").is_none());
        fatbin[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(super::padded_fatbin(&fatbin).is_none());
    }
}
