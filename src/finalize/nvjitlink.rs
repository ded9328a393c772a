//! libnvJitLink (the toolkit's `lib/libnvJitLink.so.13`), loaded at run time, as a
//! [`Finalizer`]: a job's inputs added (cubins, and PTX: what is not ELF) and linked
//! with the mode's options (`-arch=sm_XX`, `-g`, `-r`, ...). All of
//! libnvJitLink's FFI lives here: the public C API of `nvJitLink.h` under its
//! versioned names (`__nvJitLink*_13_0`, which every 13.x library exports).

use std::ffi::{CString, c_char, c_int, c_void};
use std::path::{Path, PathBuf};

use super::Finalizer;
use super::Mode;
use crate::diag::{Error, Result};

type Handle = *mut c_void;
type CreateFn = unsafe extern "C" fn(*mut Handle, u32, *const *const c_char) -> c_int;
type DestroyFn = unsafe extern "C" fn(*mut Handle) -> c_int;
type AddDataFn = unsafe extern "C" fn(Handle, c_int, *const c_void, usize, *const c_char) -> c_int;
type CompleteFn = unsafe extern "C" fn(Handle) -> c_int;
type SizeFn = unsafe extern "C" fn(Handle, *mut usize) -> c_int;
type CopyFn = unsafe extern "C" fn(Handle, *mut c_void) -> c_int;

/// `NVJITLINK_INPUT_CUBIN`, `NVJITLINK_INPUT_PTX`.
const INPUT_CUBIN: c_int = 1;
const INPUT_PTX: c_int = 2;

struct Api {
    create: CreateFn,
    destroy: DestroyFn,
    add_data: AddDataFn,
    complete: CompleteFn,
    cubin_size: SizeFn,
    cubin: CopyFn,
}

/// A loaded libnvJitLink.
pub struct NvJitLink {
    api: Api,
    pub path: PathBuf,
    // Never unloaded: libnvJitLink's finalizer leaves worker threads behind, and
    // unloading the code under them crashed one link in four.
    _lib: std::mem::ManuallyDrop<libloading::Library>,
}

// SAFETY: plain function pointers into a library that stays loaded while the struct
// lives; each call below uses a handle of its own, which libnvJitLink allows from any
// thread.
unsafe impl Send for NvJitLink {}
unsafe impl Sync for NvJitLink {}

fn failed(what: &str, rc: c_int) -> Error {
    Error::fatal("elfLink finalization failed")
        .context(format!("libnvJitLink: {what} returned {rc}"))
}

impl NvJitLink {
    pub fn load(path: &Path) -> Result<NvJitLink> {
        // SAFETY: loading runs the library's initialisers, NVIDIA's own for this use.
        let lib = unsafe { libloading::Library::new(path) };
        NvJitLink::from(lib, path)
    }

    /// The library loaded inside a program that has the drop-in libnvJitLink, which
    /// exports the same names: bound to its own definitions first (`RTLD_DEEPBIND`), so
    /// that its calls of its own entry points never reach the drop-in.
    pub fn load_beside_the_drop_in(path: &Path) -> Result<NvJitLink> {
        use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
        let flags = RTLD_NOW | RTLD_LOCAL | libc::RTLD_DEEPBIND;
        // SAFETY: as in `load`
        let lib = unsafe { Library::open(Some(path), flags) }.map(libloading::Library::from);
        NvJitLink::from(lib, path)
    }

    fn from(
        lib: std::result::Result<libloading::Library, libloading::Error>,
        path: &Path,
    ) -> Result<NvJitLink> {
        let load_error = |e: &dyn std::fmt::Display| {
            Error::fatal("elfLink linker library load error")
                .context(format!("libnvJitLink '{}': {e}", path.display()))
        };
        let lib = lib.map_err(|e| load_error(&crate::diag::with_sources(&e)))?;
        // SAFETY: each symbol gets the C signature nvJitLink.h declares for it; the
        // pointers are used only while `lib` lives (it is moved into the result).
        let api = unsafe {
            macro_rules! get {
                ($name:literal) => {
                    *lib.get(concat!("__", $name, "_13_0\0").as_bytes())
                        .map_err(|e| load_error(&format!("no {}: {e}", $name)))?
                };
            }
            Api {
                create: get!("nvJitLinkCreate"),
                destroy: get!("nvJitLinkDestroy"),
                add_data: get!("nvJitLinkAddData"),
                complete: get!("nvJitLinkComplete"),
                cubin_size: get!("nvJitLinkGetLinkedCubinSize"),
                cubin: get!("nvJitLinkGetLinkedCubin"),
            }
        };
        Ok(NvJitLink {
            api,
            path: path.to_path_buf(),
            _lib: std::mem::ManuallyDrop::new(lib),
        })
    }
}

/// A handle destroyed when dropped.
struct Link<'a>(&'a Api, Handle);

impl Drop for Link<'_> {
    fn drop(&mut self) {
        // SAFETY: the handle came from create and is destroyed once.
        unsafe { (self.0.destroy)(&mut self.1) };
    }
}

impl Finalizer for NvJitLink {
    fn link(&self, job: &[&[u8]], mode: &Mode) -> Result<Option<Vec<u8>>> {
        self.run(job, &mode.options())
    }
}

impl NvJitLink {
    /// `units` (cubins, or PTX) linked with `options`: the image, or `None` where
    /// libnvJitLink refuses them.
    pub fn run(&self, units: &[&[u8]], options: &[String]) -> Result<Option<Vec<u8>>> {
        let mut owned = Vec::with_capacity(options.len());
        for o in options {
            owned.push(CString::new(o.as_str()).map_err(|_| {
                Error::fatal(format!("a finalizer option holds a NUL byte: {o:?}"))
            })?);
        }
        let options: Vec<*const std::ffi::c_char> = owned.iter().map(|o| o.as_ptr()).collect();
        let mut raw: Handle = std::ptr::null_mut();
        // SAFETY: a valid out-pointer and NUL-terminated options that outlive the call.
        let rc = unsafe { (self.api.create)(&mut raw, options.len() as u32, options.as_ptr()) };
        if rc != 0 || raw.is_null() {
            return Err(failed("nvJitLinkCreate", rc));
        }
        let link = Link(&self.api, raw);
        for unit in units {
            let (kind, name, text);
            let data: &[u8] = if unit.starts_with(b"\x7fELF") {
                (kind, name) = (INPUT_CUBIN, c"unit.cubin");
                unit
            } else {
                // (PTX is a NUL-terminated text)
                (kind, name) = (INPUT_PTX, c"standin.ptx");
                text = [*unit, b"\0"].concat();
                &text
            };
            // SAFETY: the input's bytes and length, and a NUL-terminated name.
            let rc = unsafe {
                (self.api.add_data)(
                    link.1,
                    kind,
                    data.as_ptr().cast(),
                    data.len(),
                    name.as_ptr(),
                )
            };
            if rc != 0 {
                return Err(failed("nvJitLinkAddData", rc));
            }
        }
        // SAFETY: a live handle. A unit that needs another unit's definitions fails here
        // (undefined references): it is left as ptxas wrote it.
        if unsafe { (self.api.complete)(link.1) } != 0 {
            return Ok(None);
        }
        let mut size = 0usize;
        // SAFETY: a live handle and a valid out-pointer.
        let rc = unsafe { (self.api.cubin_size)(link.1, &mut size) };
        if rc != 0 {
            return Err(failed("nvJitLinkGetLinkedCubinSize", rc));
        }
        let mut image = vec![0u8; size];
        // SAFETY: a buffer of the size libnvJitLink reported.
        let rc = unsafe { (self.api.cubin)(link.1, image.as_mut_ptr().cast()) };
        if rc != 0 {
            return Err(failed("nvJitLinkGetLinkedCubin", rc));
        }
        Ok(Some(image))
    }
}
