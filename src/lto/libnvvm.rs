//! libNVVM, loaded at run time. All of libNVVM's FFI lives in this file: the
//! public C API of `nvvm.h` and the private entries nvlink uses through `__nvvmHandle`:
//! `0x2080` adds an NVIDIA LTO IR container to a program (the public add refuses them);
//! `0xf00d` and `0xb0ba` tell how many PTX modules a split compile
//! (`-split-compile-extended`) produced and how long each is.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::path::{Path, PathBuf};

use crate::diag::{Error, Result};

type Handle = *mut c_void;
type VersionFn = unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int;
type CreateFn = unsafe extern "C" fn(*mut Handle) -> c_int;
type DestroyFn = unsafe extern "C" fn(*mut Handle) -> c_int;
type AddFn = unsafe extern "C" fn(Handle, *const c_char, usize, *const c_char) -> c_int;
type CompileFn = unsafe extern "C" fn(Handle, c_int, *const *const c_char) -> c_int;
type SizeFn = unsafe extern "C" fn(Handle, *mut usize) -> c_int;
type CopyFn = unsafe extern "C" fn(Handle, *mut c_char) -> c_int;
type ErrorStringFn = unsafe extern "C" fn(c_int) -> *const c_char;
type PrivateHandleFn = unsafe extern "C" fn(c_int) -> *const c_void;
/// `__nvvmHandle(0xf00d)`: `(program, &count)`, the number of PTX modules in the result.
type SliceCountFn = unsafe extern "C" fn(Handle, *mut u32) -> c_int;
/// `__nvvmHandle(0xb0ba)`: `(program, count, sizes)`, each module's length in bytes.
type SliceSizesFn = unsafe extern "C" fn(Handle, usize, *mut u64) -> c_int;

/// The `__nvvmHandle` code of the add-LTO-IR entry (signature as `nvvmAddModuleToProgram`).
const ADD_LTO_IR: c_int = 0x2080;
/// The `__nvvmHandle` codes of the split-result entries (observed: nvlink fetches both
/// and calls them after a compile, count first; the result is the modules back to back).
const SLICE_COUNT: c_int = 0xf00d;
const SLICE_SIZES: c_int = 0xb0ba;

/// `nvvmCompileProgram`'s result when it produced whole-program PTX (observed with
/// `--device-c` when nothing is left unresolved); 0 is relocatable PTX.
pub const RESULT_WHOLE_PROGRAM: i32 = 100;

struct Api {
    version: VersionFn,
    create: CreateFn,
    destroy: DestroyFn,
    add_module: AddFn,
    compile: CompileFn,
    result_size: SizeFn,
    result: CopyFn,
    log_size: SizeFn,
    log: CopyFn,
    error_string: ErrorStringFn,
    handle: Option<PrivateHandleFn>,
}

/// A loaded libNVVM with every entry point resolved.
pub struct LibNvvm {
    api: Api,
    pub path: PathBuf,
    // Kept last so that it is dropped after everything that points into it.
    _lib: libloading::Library,
}

// SAFETY: the struct holds plain function pointers into a library that stays loaded as
// long as the struct lives; libNVVM's API may be called from any thread (one program per
// thread at a time, which `Program` enforces by `&mut self`).
unsafe impl Send for LibNvvm {}
unsafe impl Sync for LibNvvm {}

fn load_error(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::fatal("elfLink linker library load error")
        .context(format!("libNVVM '{}': {what}", path.display()))
}

/// Fails, with the loader's error (nvlink's message), where `path` is not a regular file
/// (missing, a directory, a device): checked before the cache reads the library for its
/// identity, where the library is loaded by a child, not here.
pub fn check_file(path: &Path) -> Result<()> {
    match std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        true => Ok(()),
        false => LibNvvm::load(path).map(|_| ()),
    }
}

impl LibNvvm {
    /// Loads the library and resolves the entry points nvlink resolves.
    pub fn load(path: &Path) -> Result<LibNvvm> {
        // SAFETY: loading a shared library runs its initialisers; libnvvm's are the ones
        // NVIDIA ships for exactly this use (nvlink dlopens the same file).
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| load_error(path, crate::diag::with_sources(&e)))?;
        // SAFETY: each symbol is given the C signature `nvvm.h` declares for it; the
        // pointers are only used while `lib` is alive (it is moved into the result).
        let api = unsafe {
            macro_rules! get {
                ($name:literal) => {
                    *lib.get(concat!($name, "\0").as_bytes())
                        .map_err(|e| load_error(path, format!("no {}: {e}", $name)))?
                };
            }
            Api {
                version: get!("nvvmVersion"),
                create: get!("nvvmCreateProgram"),
                destroy: get!("nvvmDestroyProgram"),
                add_module: get!("nvvmAddModuleToProgram"),
                compile: get!("nvvmCompileProgram"),
                result_size: get!("nvvmGetCompiledResultSize"),
                result: get!("nvvmGetCompiledResult"),
                log_size: get!("nvvmGetProgramLogSize"),
                log: get!("nvvmGetProgramLog"),
                error_string: get!("nvvmGetErrorString"),
                handle: lib.get(b"__nvvmHandle\0").ok().map(|s| *s),
            }
        };
        Ok(LibNvvm {
            api,
            path: path.to_path_buf(),
            _lib: lib,
        })
    }

    /// `nvvmVersion`: the libNVVM release (2.0 for CUDA 13).
    pub fn version(&self) -> Result<(i32, i32)> {
        let (mut a, mut b) = (0, 0);
        // SAFETY: two valid out-pointers, as nvvm.h asks.
        let rc = unsafe { (self.api.version)(&mut a, &mut b) };
        if rc != 0 {
            return Err(Error::fatal(format!(
                "nvvmVersion failed: {}",
                self.error_string(rc)
            )));
        }
        Ok((a, b))
    }

    /// `nvvmGetErrorString`, owned.
    pub fn error_string(&self, rc: i32) -> String {
        // SAFETY: libNVVM returns a pointer to a static NUL-terminated string (or null).
        unsafe {
            let p = (self.api.error_string)(rc);
            if p.is_null() {
                format!("NVVM error {rc}")
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        }
    }

    /// An address in libNVVM's code (its compile entry), for the crash guard to find the
    /// library's segments by.
    pub fn code_address(&self) -> usize {
        self.api.compile as usize
    }

    /// A new, empty program.
    pub fn program(&self) -> Result<Program<'_>> {
        let mut raw: Handle = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; the handle is destroyed by `Program::drop`.
        let rc = unsafe { (self.api.create)(&mut raw) };
        if rc != 0 || raw.is_null() {
            return Err(Error::fatal("elfLink nvvm error")
                .context(format!("nvvmCreateProgram: {}", self.error_string(rc))));
        }
        Ok(Program { nvvm: self, raw })
    }
}

/// One libNVVM program; destroyed on drop.
pub struct Program<'a> {
    nvvm: &'a LibNvvm,
    raw: Handle,
}

/// What `nvvmCompileProgram` said.
pub struct Compiled {
    /// 0 (relocatable PTX) or [`RESULT_WHOLE_PROGRAM`].
    pub code: i32,
    pub log: String,
}

fn c_string(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::fatal(format!("{what} '{s}' contains a NUL byte")))
}

impl Program<'_> {
    /// Adds an NVIDIA LTO IR container (or NVVM IR) through `__nvvmHandle(0x2080)`.
    pub fn add_lto_ir(&mut self, data: &[u8], name: &str) -> Result<()> {
        let add = self.private_add()?;
        self.add_with(add, data, name)
    }

    /// Adds LLVM bitcode (or NVVM IR text) through the public `nvvmAddModuleToProgram`.
    pub fn add_bitcode(&mut self, data: &[u8], name: &str) -> Result<()> {
        self.add_with(self.nvvm.api.add_module, data, name)
    }

    fn private_add(&self) -> Result<AddFn> {
        let f = self.private_entry(ADD_LTO_IR, "the LTO IR entry")?;
        // SAFETY: for 0x2080 the entry has the signature of nvvmAddModuleToProgram
        // (observed: nvlink calls it so); a non-null code pointer.
        Ok(unsafe { std::mem::transmute::<*const c_void, AddFn>(f) })
    }

    /// `__nvvmHandle(code)`, refused when the library lacks it.
    fn private_entry(&self, code: c_int, what: &str) -> Result<*const c_void> {
        let handle = self.nvvm.api.handle.ok_or_else(|| {
            Error::fatal("elfLink linker library load error").context(format!(
                "'{}' has no __nvvmHandle",
                self.nvvm.path.display()
            ))
        })?;
        // SAFETY: `__nvvmHandle(code)` returns a function pointer or null.
        let f = unsafe { handle(code) };
        if f.is_null() {
            return Err(
                Error::fatal("elfLink linker library load error").context(format!(
                    "'{}' does not provide {what} __nvvmHandle({code:#x})",
                    self.nvvm.path.display()
                )),
            );
        }
        Ok(f)
    }

    /// The lengths of the PTX modules a split compile put back to back in the result,
    /// or `None` when the result is one module. Call after a successful compile.
    pub fn slice_sizes(&self) -> Result<Option<Vec<usize>>> {
        let count_fn = self.private_entry(SLICE_COUNT, "the split-count entry")?;
        let sizes_fn = self.private_entry(SLICE_SIZES, "the split-sizes entry")?;
        // SAFETY: the signatures observed for these codes (see the type aliases); non-null.
        let (count_fn, sizes_fn) = unsafe {
            (
                std::mem::transmute::<*const c_void, SliceCountFn>(count_fn),
                std::mem::transmute::<*const c_void, SliceSizesFn>(sizes_fn),
            )
        };
        let mut count = 0u32;
        // SAFETY: a valid program handle and out-pointer.
        let rc = unsafe { count_fn(self.raw, &mut count) };
        if rc != 0 {
            return Err(Error::fatal("elfLink nvvm error").context(format!(
                "libNVVM split-count query: {}",
                self.nvvm.error_string(rc)
            )));
        }
        if count <= 1 {
            return Ok(None);
        }
        let mut sizes = vec![0u64; count as usize];
        // SAFETY: `sizes` has room for the `count` entries libNVVM just announced.
        let rc = unsafe { sizes_fn(self.raw, count as usize, sizes.as_mut_ptr()) };
        if rc != 0 {
            return Err(Error::fatal("elfLink nvvm error").context(format!(
                "libNVVM split-sizes query: {}",
                self.nvvm.error_string(rc)
            )));
        }
        Ok(Some(sizes.into_iter().map(|n| n as usize).collect()))
    }

    fn add_with(&mut self, add: AddFn, data: &[u8], name: &str) -> Result<()> {
        let cname = c_string(name, "module name")?;
        // SAFETY: `data` is valid for `data.len()` bytes and libNVVM copies what it keeps
        // before returning (the buffer is not referenced after the call); the name is
        // NUL-terminated.
        let rc = unsafe { add(self.raw, data.as_ptr().cast(), data.len(), cname.as_ptr()) };
        if rc != 0 {
            let log = self.log();
            let mut e = Error::fatal("elfLink nvvm error").context(format!(
                "libNVVM refused the module '{name}': {}",
                self.nvvm.error_string(rc)
            ));
            if !log.trim().is_empty() {
                e = e.context(format!("libNVVM log: {}", log.trim_end()));
            }
            return Err(e);
        }
        Ok(())
    }

    /// `nvvmCompileProgram` with these options. Codes other than 0 and
    /// [`RESULT_WHOLE_PROGRAM`] are returned as `Err((log, error string))`.
    pub fn compile(
        &mut self,
        options: &[String],
    ) -> Result<std::result::Result<Compiled, (String, String)>> {
        let owned: Vec<CString> = options
            .iter()
            .map(|o| c_string(o, "libNVVM option"))
            .collect::<Result<_>>()?;
        let ptrs: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        // SAFETY: `ptrs` holds `ptrs.len()` valid NUL-terminated strings that outlive the call.
        let rc = unsafe { (self.nvvm.api.compile)(self.raw, ptrs.len() as c_int, ptrs.as_ptr()) };
        let log = self.log();
        if rc == 0 || rc == RESULT_WHOLE_PROGRAM {
            Ok(Ok(Compiled { code: rc, log }))
        } else {
            Ok(Err((log, self.nvvm.error_string(rc))))
        }
    }

    /// The compiled result (PTX text, without the trailing NUL libNVVM counts).
    pub fn result(&self) -> Result<Vec<u8>> {
        self.copy_out(
            self.nvvm.api.result_size,
            self.nvvm.api.result,
            "nvvmGetCompiledResult",
        )
    }

    /// The compiled result as libNVVM gives it, every byte (binary output: `-gen-lto`'s
    /// container, whose last bytes may be 0).
    pub fn result_bytes(&self) -> Result<Vec<u8>> {
        self.copy_raw(
            self.nvvm.api.result_size,
            self.nvvm.api.result,
            "nvvmGetCompiledResult",
        )
    }

    /// The program log (empty when there is none).
    pub fn log(&self) -> String {
        match self.copy_out(
            self.nvvm.api.log_size,
            self.nvvm.api.log,
            "nvvmGetProgramLog",
        ) {
            Ok(v) => String::from_utf8_lossy(&v).into_owned(),
            Err(_) => String::new(),
        }
    }

    /// Copies a sized result out of libNVVM, without the trailing NULs it counts.
    fn copy_out(&self, size: SizeFn, copy: CopyFn, what: &str) -> Result<Vec<u8>> {
        let mut buf = self.copy_raw(size, copy, what)?;
        while buf.last() == Some(&0) {
            buf.pop();
        }
        Ok(buf)
    }

    fn copy_raw(&self, size: SizeFn, copy: CopyFn, what: &str) -> Result<Vec<u8>> {
        let mut n = 0usize;
        // SAFETY: valid handle and out-pointer.
        let rc = unsafe { size(self.raw, &mut n) };
        if rc != 0 {
            return Err(Error::fatal("elfLink nvvm error")
                .context(format!("{what}Size: {}", self.nvvm.error_string(rc))));
        }
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut buf = vec![0u8; n];
        // SAFETY: the buffer holds the `n` bytes libNVVM just said it will write.
        let rc = unsafe { copy(self.raw, buf.as_mut_ptr().cast()) };
        if rc != 0 {
            return Err(Error::fatal("elfLink nvvm error")
                .context(format!("{what}: {}", self.nvvm.error_string(rc))));
        }
        Ok(buf)
    }
}

impl Drop for Program<'_> {
    fn drop(&mut self) {
        // SAFETY: the handle came from nvvmCreateProgram and is destroyed once.
        unsafe {
            (self.nvvm.api.destroy)(&mut self.raw);
        }
    }
}
