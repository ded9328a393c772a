//! The record of a link: the calls made on it (`AddData`, `AddFile`), what a finished
//! link of ours holds, and what a caller asks of a finished link. The handle table
//! (`handle`), the cache of the real library's answers (`memo`), the replay to the real
//! library (`real`) and nvlinkrs' own link (`run`) all read it; it reads none of them.

use std::ffi::{CString, c_void};

use crate::options::Options;

pub type Handle = *mut c_void;

/// One `AddData`/`AddFile` call, kept for the link and for a replay to the real library.
pub enum Call {
    Data {
        kind: i32,
        /// The bytes, then a NUL they do not count: nvJitLink reads PTX as a C string,
        /// past the size it was given (a replay without the NUL failed as "bad input").
        data: Vec<u8>,
        name: Option<CString>,
    },
    File {
        kind: i32,
        path: CString,
        /// The file's bytes when it was added (`None`: not a regular file one could
        /// read): nvJitLink reads an input file at `AddFile`, so these are what it links
        /// and what the cache keys, whatever the file holds by `Complete`.
        data: Option<Vec<u8>>,
    },
}

/// What a finished link of ours holds.
#[derive(Default)]
pub struct Done {
    pub result: i32,
    pub cubin: Option<Vec<u8>>,
    pub ptx: Option<Vec<u8>>,
    pub error_log: String,
    pub info_log: String,
    /// The linked program's LTO IR (`-lto`), made when first asked for
    /// (`run::linked_ir`).
    pub ltoir: Option<Vec<u8>>,
}

/// A link run by nvlinkrs.
pub struct Ours {
    pub given: Vec<CString>,
    pub options: Options,
    pub calls: Vec<Call>,
    pub done: Option<Done>,
}

/// What a caller asks of a finished link.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum What {
    Cubin,
    Ptx,
    LtoIr,
    ErrorLog,
    InfoLog,
}
