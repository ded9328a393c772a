//! libnvJitLink's finalizer in a child process (nvlinkrs itself, started with the hidden
//! `__finalize` subcommand), as libNVVM's split compile is run (`lto::isolated`): a crash
//! in the library (a damaged library the loader maps, SIGBUS; a damaged unit it
//! finalizes, SIGSEGV or a heap abort) or a hang costs the child, and the link goes on
//! without the finalizer, with a warning.
//!
//! Request (child's stdin): the jobs, framed by [`crate::frames`], each a `job` frame
//! followed by its units' `unit` frames; the library path and the architecture are the
//! arguments. Answer (stdout): per job an `image` frame, or `refused` where libnvJitLink
//! would not link the job's units alone. Exit 0; any other ending is a crash. The
//! arguments: the library, the architecture, `-g` or `-`, then libnvJitLink's further
//! options (the [`Mode`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::nvjitlink::NvJitLink;
use super::{Finalizer, Mode};
use crate::arch::Arch;
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
        let exe = std::env::current_exe().map_err(|e| {
            Error::fatal(format!("cannot find this program to run libnvJitLink: {e}"))
        })?;
        let mut cmd = Command::new(&exe);
        cmd.env(crate::lto::isolated::CHILD_VAR, SUBCOMMAND)
            .arg(SUBCOMMAND)
            .arg(&self.lib)
            .arg(mode.arch.to_string())
            .arg(if mode.debug { "-g" } else { "-" })
            .args(&mode.extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        crate::lto::isolated::dies_with_the_link(&mut cmd);
        let child = cmd
            .spawn()
            .map_err(|e| Error::fatal(format!("cannot start '{}': {e}", exe.display())))?;
        let (status, stdout, stderr) = crate::lto::isolated::supervise(child, &body)?;
        let ended = match status {
            Some(st) if st.success() => return answer(&stdout, jobs.len()),
            Some(st) => ended_by(st),
            None => format!(
                "made no progress for {} s",
                crate::lto::isolated::STALL.as_secs()
            ),
        };
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

/// How the child ended: `crashed (SIGSEGV)`, or `failed (exit status 3)`.
fn ended_by(st: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    let name = match st.signal() {
        None => return format!("failed ({st})"),
        Some(libc::SIGSEGV) => "SIGSEGV".to_string(),
        Some(libc::SIGBUS) => "SIGBUS".to_string(),
        Some(libc::SIGABRT) => "SIGABRT".to_string(),
        Some(libc::SIGILL) => "SIGILL".to_string(),
        Some(libc::SIGFPE) => "SIGFPE".to_string(),
        Some(libc::SIGKILL) => "SIGKILL".to_string(),
        Some(n) => format!("signal {n}"),
    };
    format!("crashed ({name})")
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
