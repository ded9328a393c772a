//! The C entry points. Each is a `nvlinkrs_jitlink_*` function, bound by `.symver` to
//! nvJitLink's plain name and to every `__nvJitLink<Fn>_13_N` name of the 13.0-13.5
//! headers, all under the version node `libnvJitLink.so.13` (a program built with the
//! header imports the versioned names from that node; without it a preloaded library is
//! passed over). No panic crosses into the caller: each call runs under `catch_unwind`
//! and a panic is `NVJITLINK_ERROR_INTERNAL`.

use std::ffi::{c_char, c_uint, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::handle::{self, Handle};
use crate::rc;

/// Runs one API call, a panic turned into `NVJITLINK_ERROR_INTERNAL`.
fn guarded(f: impl FnOnce() -> i32) -> i32 {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(rc::INTERNAL)
}

/// Binds `$imp` to `$name` under the node `libnvJitLink.so.13` (libnvJitLink.map).
macro_rules! bind {
    ($imp:literal, $name:expr) => {
        core::arch::global_asm!(concat!(
            ".globl ",
            $name,
            "\n.type ",
            $name,
            ",@function\n.set ",
            $name,
            ", ",
            $imp,
            "\n",
            ".symver ",
            $name,
            ", ",
            $name,
            "@@libnvJitLink.so.13\n"
        ));
    };
}

/// The plain name and the six versioned ones of the 13.0-13.5 headers.
macro_rules! export {
    ($imp:literal, $fn:literal) => {
        bind!($imp, $fn);
        bind!($imp, concat!("__", $fn, "_13_0"));
        bind!($imp, concat!("__", $fn, "_13_1"));
        bind!($imp, concat!("__", $fn, "_13_2"));
        bind!($imp, concat!("__", $fn, "_13_3"));
        bind!($imp, concat!("__", $fn, "_13_4"));
        bind!($imp, concat!("__", $fn, "_13_5"));
    };
}

export!("nvlinkrs_jitlink_create", "nvJitLinkCreate");
export!("nvlinkrs_jitlink_destroy", "nvJitLinkDestroy");
export!("nvlinkrs_jitlink_add_data", "nvJitLinkAddData");
export!("nvlinkrs_jitlink_add_file", "nvJitLinkAddFile");
export!("nvlinkrs_jitlink_complete", "nvJitLinkComplete");
export!("nvlinkrs_jitlink_cubin_size", "nvJitLinkGetLinkedCubinSize");
export!("nvlinkrs_jitlink_cubin", "nvJitLinkGetLinkedCubin");
export!("nvlinkrs_jitlink_ptx_size", "nvJitLinkGetLinkedPtxSize");
export!("nvlinkrs_jitlink_ptx", "nvJitLinkGetLinkedPtx");
export!("nvlinkrs_jitlink_ltoir_size", "nvJitLinkGetLinkedLTOIRSize");
export!("nvlinkrs_jitlink_ltoir", "nvJitLinkGetLinkedLTOIR");
export!(
    "nvlinkrs_jitlink_error_log_size",
    "nvJitLinkGetErrorLogSize"
);
export!("nvlinkrs_jitlink_error_log", "nvJitLinkGetErrorLog");
export!("nvlinkrs_jitlink_info_log_size", "nvJitLinkGetInfoLogSize");
export!("nvlinkrs_jitlink_info_log", "nvJitLinkGetInfoLog");
bind!("nvlinkrs_jitlink_version", "nvJitLinkVersion");
bind!("nvlinkrs_jitlink_api", "__nvJitLinkAPI");

/// # Safety
/// As `nvJitLinkCreate`: `handle` writable, `options` `num` readable C strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvlinkrs_jitlink_create(
    out: *mut Handle,
    num: u32,
    options: *const *const c_char,
) -> i32 {
    // SAFETY: the caller's pointers, as the header describes them
    guarded(|| unsafe { handle::create(out, num, options) })
}

/// # Safety
/// As `nvJitLinkDestroy`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvlinkrs_jitlink_destroy(h: *mut Handle) -> i32 {
    // SAFETY: as above
    guarded(|| unsafe { handle::destroy(h) })
}

/// # Safety
/// As `nvJitLinkAddData`: `data` `size` readable bytes, `name` null or a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvlinkrs_jitlink_add_data(
    h: Handle,
    kind: i32,
    data: *const c_void,
    size: usize,
    name: *const c_char,
) -> i32 {
    // SAFETY: as above
    guarded(|| unsafe { handle::add_data(h, kind, data, size, name) })
}

/// # Safety
/// As `nvJitLinkAddFile`: `path` a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvlinkrs_jitlink_add_file(
    h: Handle,
    kind: i32,
    path: *const c_char,
) -> i32 {
    // SAFETY: as above
    guarded(|| unsafe { handle::add_file(h, kind, path) })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvlinkrs_jitlink_complete(h: Handle) -> i32 {
    guarded(|| handle::complete(h))
}

macro_rules! getter {
    ($size_fn:ident, $copy_fn:ident, $what:expr) => {
        /// # Safety
        /// `size` writable.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $size_fn(h: Handle, size: *mut usize) -> i32 {
            // SAFETY: the caller's pointer
            guarded(|| unsafe { handle::size(h, $what, size) })
        }
        /// # Safety
        /// `buf` has room for the size the size call gave.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $copy_fn(h: Handle, buf: *mut c_void) -> i32 {
            // SAFETY: the caller's buffer
            guarded(|| unsafe { handle::copy(h, $what, buf) })
        }
    };
}

getter!(
    nvlinkrs_jitlink_cubin_size,
    nvlinkrs_jitlink_cubin,
    handle::What::Cubin
);
getter!(
    nvlinkrs_jitlink_ptx_size,
    nvlinkrs_jitlink_ptx,
    handle::What::Ptx
);
getter!(
    nvlinkrs_jitlink_ltoir_size,
    nvlinkrs_jitlink_ltoir,
    handle::What::LtoIr
);
getter!(
    nvlinkrs_jitlink_error_log_size,
    nvlinkrs_jitlink_error_log,
    handle::What::ErrorLog
);
getter!(
    nvlinkrs_jitlink_info_log_size,
    nvlinkrs_jitlink_info_log,
    handle::What::InfoLog
);

/// # Safety
/// As `nvJitLinkVersion`: both pointers writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvlinkrs_jitlink_version(major: *mut c_uint, minor: *mut c_uint) -> i32 {
    if major.is_null() || minor.is_null() {
        return rc::NULL_INPUT;
    }
    // SAFETY: checked non-null; the caller's
    unsafe {
        (*major, *minor) = (13, 5);
    }
    rc::SUCCESS
}

/// `__nvJitLinkAPI`: the real library's table of its own entry points (asked with a
/// magic number), so it comes from the real library, when there is one; else null.
#[unsafe(no_mangle)]
pub extern "C" fn nvlinkrs_jitlink_api(magic: usize) -> *const c_void {
    catch_unwind(|| crate::real::api_table(magic)).unwrap_or(std::ptr::null())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_with_a_null_pointer_is_null_input() {
        let mut n = 0;
        // SAFETY: one valid pointer, one null, as a caller may pass
        unsafe {
            assert_eq!(
                nvlinkrs_jitlink_version(&mut n, std::ptr::null_mut()),
                rc::NULL_INPUT
            );
            assert_eq!(
                nvlinkrs_jitlink_version(std::ptr::null_mut(), &mut n),
                rc::NULL_INPUT
            );
        }
    }
}
