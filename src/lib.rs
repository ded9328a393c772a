//! nvlinkrs: an open device linker for CUDA, a drop-in for NVIDIA's `nvlink`.
//!
//! `link` is the one place the phases are called, in order; each phase reads what the
//! earlier ones produced and returns a new value. This version carries out the input
//! phase (every input classified and opened as nvlink opens it); the phases after it
//! (LTO, ptxas, ELF merge, output) come with the next issues, and until then a link stops
//! with a clear message after its inputs have been read and checked.

pub mod arch;
pub mod bytes;
pub mod cli;
pub mod diag;
pub mod elf;
pub mod fatbin;
pub mod input;
pub mod inspect;
pub mod lto;
pub mod toolkit;

use std::time::Instant;

use cli::LinkRequest;
use diag::{Diagnostics, Error, Result};

/// Per-phase wall times, in phase order (what `-time` will write).
#[derive(Debug, Default)]
pub struct Timings(pub Vec<(&'static str, std::time::Duration)>);

impl Timings {
    fn phase<T>(&mut self, name: &'static str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let t = Instant::now();
        let r = f();
        self.0.push((name, t.elapsed()));
        r
    }
}

/// Runs a device link.
pub fn link(req: &LinkRequest, diag: &Diagnostics) -> Result<Timings> {
    let mut timings = Timings::default();
    let paths = input::input_list(&req.inputs, &req.libraries, &req.library_paths);
    let trees = timings.phase("read", || {
        input::load(&paths, input::Mode::Link { lto: req.lto })
    })?;
    diag.check()?;
    let codes: usize = trees.iter().map(|t| t.codes().len()).sum();
    Err(Error::fatal(format!(
        "device linking is not implemented yet in nvlinkrs {}: the {} input(s) were read and hold {codes} piece(s) of device code (see `nvlinkrs inspect`); no output written",
        env!("CARGO_PKG_VERSION"),
        paths.len()
    )))
}

/// `nvlinkrs inspect`: the input trees, as text or JSON.
pub fn inspect(paths: &[std::path::PathBuf], json: bool) -> Result<String> {
    let trees = input::load(paths, input::Mode::Inspect)?;
    if json {
        Ok(inspect::render_json(&trees)?.to_string() + "\n")
    } else {
        inspect::render_text(&trees)
    }
}
