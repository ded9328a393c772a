//! libnvJitLink's finalizer in a child process (nvlinkrs itself, started with the hidden
//! `__finalize` subcommand), as libNVVM's split compile is run (`lto::isolated`), under `crate::child`'s limits: a crash
//! in the library (a damaged library the loader maps, SIGBUS; a damaged unit it
//! finalizes, SIGSEGV or a heap abort), a hang, a spin or a flood of output costs the child, and the link goes on
//! without the finalizer, with a warning.
//!
//! Request (child's stdin): the jobs, framed by [`crate::frames`], each a `job` frame
//! followed by its units' `unit` frames; the library path and the architecture are the
//! arguments. Answer (stdout): per job an `image` frame, or `refused` where libnvJitLink
//! would not link the job's units alone. Exit 0; any other ending is a crash. The
//! arguments: the library, the architecture, `-g` or `-`, then libnvJitLink's further
//! options (the [`Mode`]).

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};

use super::nvjitlink::NvJitLink;
use super::{Finalizer, Mode};
use crate::arch::Arch;
use crate::child;
use crate::diag::{Error, Result};
use crate::frames::{decode, encode};

/// The hidden subcommand the child runs.
pub const SUBCOMMAND: &str = "__finalize";

/// libnvJitLink at `lib`, run in a child process.
pub struct Isolated {
    pub lib: PathBuf,
}

impl Finalizer for Isolated {
    fn finalize(&self, jobs: &[Vec<&[u8]>], mode: &Mode) -> Result<Vec<Option<Vec<u8>>>> {
        let body = encode(jobs.iter().flat_map(|units| {
            std::iter::once(("job", &[][..])).chain(units.iter().map(|u| ("unit", *u)))
        }));
        let mut cmd = child::self_command(SUBCOMMAND).map_err(|e| {
            Error::fatal(format!("cannot find this program to run libnvJitLink: {e}"))
        })?;
        cmd.arg(&self.lib)
            .arg(mode.arch.to_string())
            .arg(if mode.debug { "-g" } else { "-" })
            .args(&mode.extra);
        let limits = limits(body.len());
        let done = child::run(&mut cmd, body, limits)
            .map_err(|e| Error::fatal(format!("cannot start '{}': {e}", child::program(&cmd))))?;
        let ended = match done.ending {
            child::Ending::Exited(st) if st.success() => return answer(&done.stdout, jobs.len()),
            child::Ending::Exited(st) if st.signal().is_none() => format!("failed ({st})"),
            other => other.describe(),
        };
        let stderr = done.stderr;
        let mut e = Error::fatal(format!("libnvJitLink '{}' {ended}", self.lib.display()));
        if let Some(line) = String::from_utf8_lossy(&stderr)
            .lines()
            .find(|l| !l.is_empty())
        {
            e = e.context(line.to_string());
        }
        Err(e)
    }
}

/// What the child may take (`crate::child`): no CPU time for [`child::STALL`]; two
/// minutes plus ten seconds per MiB of units on the wall clock; images of at most four
/// times the units plus 64 MiB.
pub fn limits(request: usize) -> child::Limits {
    let s = std::time::Duration::from_secs;
    child::Limits {
        wall: child::Limits::wall_for(request, s(120), s(10)),
        stall: Some(child::STALL),
        stdout: 4 * request as u64 + (64 << 20),
    }
}

/// The child's answer: an image (or a refusal) per job.
fn answer(stdout: &[u8], jobs: usize) -> Result<Vec<Option<Vec<u8>>>> {
    let images: Vec<Option<Vec<u8>>> = decode(stdout)?
        .into_iter()
        .map(|(kind, data)| (kind == "image").then(|| data.to_vec()))
        .collect();
    if images.len() != jobs {
        return Err(Error::fatal(format!(
            "libnvJitLink's process answered {} of {jobs} jobs",
            images.len()
        )));
    }
    Ok(images)
}

/// The child's side: links each job with libnvJitLink and writes the answer.
pub fn child_main(args: &[String]) -> i32 {
    let mut input = Vec::new();
    if std::io::Read::read_to_end(&mut std::io::stdin(), &mut input).is_err() {
        return 2;
    }
    let [lib, arch, debug, extra @ ..] = args else {
        return 2;
    };
    let run = || -> Result<Vec<u8>> {
        let Some((_, arch)) = Arch::parse_target(arch) else {
            return Err(Error::fatal(format!("not an architecture: {arch}")));
        };
        let mut jobs: Vec<Vec<&[u8]>> = Vec::new();
        for (kind, data) in decode(&input)? {
            match (kind.as_str(), jobs.last_mut()) {
                ("job", _) => jobs.push(Vec::new()),
                ("unit", Some(job)) => job.push(data),
                _ => return Err(Error::fatal("malformed finalizer request")),
            }
        }
        let mode = Mode {
            arch,
            debug: debug == "-g",
            extra: extra.to_vec(),
        };
        let images = NvJitLink::load(Path::new(lib))?.finalize(&jobs, &mode)?;
        Ok(encode(images.iter().map(|i| match i {
            Some(d) => ("image", &d[..]),
            None => ("refused", &[][..]),
        })))
    };
    match run() {
        Ok(body) => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            if out.write_all(&body).and_then(|_| out.flush()).is_err() {
                return 2;
            }
            0
        }
        Err(e) => {
            let mut line = e.message().to_string();
            for c in e.context_chain() {
                line += &format!("; {c}");
            }
            crate::diag::to_stderr(&(line + "\n"));
            3
        }
    }
}
