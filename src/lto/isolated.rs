//! libNVVM's whole-program compiles in a child process. With `-split-compile-extended`
//! libNVVM compiles on threads of its own, and it sometimes corrupts its heap doing so: on 2 cores,
//! 1 link in about 50 aborted inside `nvvmCompileProgram` ("corrupted size vs. prev_size",
//! the abort on one of libNVVM's threads), 2 in 60 answered piece sizes that add up to
//! more than the result it returned, and nvlink, which runs libNVVM in its own process,
//! failed 5 times in 40 (aborts and hangs). So nvlinkrs runs that compile in a
//! child (itself, started with the hidden `__nvvm-compile` subcommand): a crash costs the
//! child, and the compile is run again, up to [`ATTEMPTS`] times in all; the linker and its
//! output are never touched by a corrupted heap. Whole-program compiles without split run
//! there too, for another reason: libNVVM's output depends on where its data lies in
//! memory, which the child fixes ([`fixed_layout`]).
//!
//! Request (child's stdin): the modules, framed by [`crate::frames`], each
//! name prefixed `C:` (an NVIDIA container) or `B:` (bitcode); the libNVVM path and the
//! options are the arguments. Answer (stdout): `whole` or `reloc`, then `info` messages,
//! then `ptx` pieces; or `error` and its `context` lines. Exit 0 for either answer; any
//! other ending is a crash.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{Engine, IrForm, IrModule, LtoOutput, NvvmEngine};
use crate::bytes::Bytes;
use crate::child;
use crate::diag::{Diagnostics, Error, Result};
use crate::frames::{decode, encode};

/// How many times a crashed compile is run.
pub const ATTEMPTS: usize = 3;

/// The hidden subcommand the child runs.
pub const SUBCOMMAND: &str = "__nvvm-compile";

/// What one attempt may take (`crate::child`): no CPU time for [`child::STALL`] is a
/// stuck child (libNVVM does no I/O while it compiles; nvlink's hangs under
/// `-split-compile-extended` are of this kind, all threads waiting on futexes, 0% CPU);
/// 10 minutes plus one per MiB of IR on the wall clock (a child that spins); PTX of at
/// most 64 times the IR plus 256 MiB.
pub fn limits(request: usize) -> child::Limits {
    let s = std::time::Duration::from_secs;
    child::Limits {
        wall: child::Limits::wall_for(request, s(600), s(60)),
        stall: Some(child::STALL),
        stdout: 64 * request as u64 + (256 << 20),
    }
}

/// libNVVM at `lib`, run in a child process; `cancel`: a compile another thread may
/// stop (then the attempt running is killed and none follows).
pub struct IsolatedNvvm {
    pub lib: PathBuf,
    pub cancel: Option<std::sync::Arc<child::Cancel>>,
}

impl IsolatedNvvm {
    fn stopped(&self) -> bool {
        self.cancel.as_ref().is_some_and(|c| c.stopped())
    }
}

impl Engine for IsolatedNvvm {
    fn compile(
        &self,
        modules: &[IrModule],
        options: &[String],
        diag: &Diagnostics,
    ) -> Result<LtoOutput> {
        let names: Vec<String> = modules
            .iter()
            .map(|m| match m.form {
                IrForm::Container => format!("C:{}", m.name),
                IrForm::Bitcode => format!("B:{}", m.name),
            })
            .collect();
        let body = encode(
            names
                .iter()
                .map(String::as_str)
                .zip(modules.iter().map(|m| &m.data[..])),
        );
        let mut crashes = Vec::new();
        for _ in 0..ATTEMPTS {
            if self.stopped() {
                return Err(Error::fatal(
                    "libNVVM's compile was stopped: its image is not needed",
                ));
            }
            let mut cmd = child::self_command(SUBCOMMAND).map_err(|e| {
                Error::fatal(format!("cannot find this program to run libNVVM: {e}"))
            })?;
            cmd.arg(&self.lib).arg("--").args(options);
            fixed_layout(&mut cmd);
            let running = |pid| {
                if let Some(c) = &self.cancel {
                    c.running(pid);
                }
            };
            let done = child::run_started(&mut cmd, body.clone(), limits(body.len()), |pid| {
                running(Some(pid))
            });
            running(None);
            let done = done.map_err(|e| {
                Error::fatal(format!("cannot start '{}': {e}", child::program(&cmd)))
            })?;
            let st = match done.ending {
                child::Ending::Exited(st) if st.success() => {
                    // (what libNVVM printed, its verifier's reason for a refused module
                    // say, comes first, as in nvlink's process)
                    if !done.stderr.is_empty() {
                        diag.tool_output(&String::from_utf8_lossy(&done.stderr));
                    }
                    return answer(&done.stdout, diag);
                }
                child::Ending::Exited(st) => st,
                other => {
                    crashes.push(format!("attempt {}", other.describe()));
                    continue;
                }
            };
            crashes.push(match child_message(&done.stderr).as_str() {
                "" => format!("attempt ended by {st}"),
                msg => format!("attempt ended by {st}: {msg}"),
            });
        }
        let mut e = Error::fatal("elfLink nvvm error").context(format!(
            "libNVVM crashed in each of {ATTEMPTS} attempts at the compile"
        ));
        // (a crash libNVVM repeats: said once)
        if crashes.iter().all(|c| *c == crashes[0]) {
            return Err(e.context(format!("each {}", crashes[0])));
        }
        for c in crashes {
            e = e.context(c);
        }
        Err(e)
    }
}

/// The child runs without address-space randomization (as `setarch -R` runs a program):
/// libNVVM orders some of its output by where its data lies in memory (the string
/// constants of a program whose units have identical ones: nvlink wrote 3 different
/// images in 6 runs of one link, `benches/results/sweep.md`), and a child that reads its
/// request on one thread before libNVVM starts finds its memory laid out alike on every
/// run, so the link's image is the same on every run. Where the system refuses, the
/// child runs as it is.
fn fixed_layout(cmd: &mut std::process::Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        /// `ADDR_NO_RANDOMIZE` of `personality(2)`, which `exec` keeps.
        const ADDR_NO_RANDOMIZE: libc::c_ulong = 0x0040000;
        // SAFETY: the closure only calls personality, which is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                let current = libc::personality(0xffff_ffff);
                if current != -1 {
                    libc::personality(current as libc::c_ulong | ADDR_NO_RANDOMIZE);
                }
                Ok(())
            });
        }
    }
}

/// What a child said on stderr, as one line: its messages without the `<tool> fatal   :`
/// they start with (the link's own message says it), lines joined with `; `.
fn child_message(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    text.lines()
        .map(|l| {
            let l = l.trim();
            l.split_once(" fatal   : ")
                .or_else(|| l.split_once(" error   : "))
                .filter(|(tool, _)| !tool.contains(' '))
                .map_or(l, |(_, m)| m)
        })
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Reads the child's answer.
fn answer(stdout: &[u8], diag: &Diagnostics) -> Result<LtoOutput> {
    let frames = decode(stdout)?;
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let mut out = LtoOutput {
        ptx: Vec::new(),
        whole_program: false,
    };
    let mut error: Option<Error> = None;
    for (kind, data) in frames {
        match kind.as_str() {
            "whole" => out.whole_program = true,
            "reloc" => out.whole_program = false,
            "info" => diag.info(&text(data)),
            "ptx" => out.ptx.push(data.to_vec()),
            "error" => error = Some(Error::fatal(text(data))),
            "context" => error = error.map(|e| e.context(text(data))),
            _ => {}
        }
    }
    match error {
        Some(e) => Err(e),
        None if out.ptx.is_empty() => Err(Error::fatal("libNVVM's process answered no PTX")),
        None => Ok(out),
    }
}

/// The child's side: compiles the request with libNVVM and writes the answer.
pub fn child_main(args: &[String]) -> i32 {
    // (the answer goes out on a copy of stdout; stdout itself becomes stderr, so that
    // what libNVVM, or a library standing in for it, prints cannot corrupt the answer)
    let Some(mut answer_out) = answer_channel() else {
        return 2;
    };
    let mut input = Vec::new();
    if std::io::Read::read_to_end(&mut std::io::stdin(), &mut input).is_err() {
        return 2;
    }
    let (lib, options) = match args {
        [lib, sep, options @ ..] if sep == "--" => (Path::new(lib), options),
        _ => return 2,
    };
    let diag = Diagnostics::collector();
    let result = compile_here(lib, &input, options, &diag);
    if let Err(e) = &result
        && super::is_split_mismatch(e)
    {
        // libNVVM's race again, seen as an answer that does not add up: a crash
        crate::diag::to_stderr(&(e.context_chain().join("; ") + "\n"));
        return 3;
    }
    let mut frames: Vec<(String, Vec<u8>)> = diag
        .infos()
        .into_iter()
        .map(|m| ("info".to_string(), m.into_bytes()))
        .collect();
    match result {
        Ok(out) => {
            let kind = if out.whole_program { "whole" } else { "reloc" };
            frames.push((kind.into(), Vec::new()));
            frames.extend(out.ptx.into_iter().map(|p| ("ptx".to_string(), p)));
        }
        Err(e) => {
            frames.push(("error".into(), e.message().as_bytes().to_vec()));
            for c in e.context_chain() {
                frames.push(("context".into(), c.as_bytes().to_vec()));
            }
        }
    }
    let body = encode(frames.iter().map(|(k, v)| (k.as_str(), v.as_slice())));
    if answer_out
        .write_all(&body)
        .and_then(|_| answer_out.flush())
        .is_err()
    {
        return 2;
    }
    0
}

/// A copy of the child's stdout for its answer, with stdout (descriptor 1) then made a
/// copy of stderr; none when the descriptors cannot be copied.
fn answer_channel() -> Option<std::fs::File> {
    use std::os::fd::FromRawFd;
    // SAFETY: dup and dup2 on the process's own standard descriptors; the copy is owned
    // by the File alone.
    unsafe {
        let copy = libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3);
        if copy < 0 || libc::dup2(2, 1) < 0 {
            return None;
        }
        Some(std::fs::File::from_raw_fd(copy))
    }
}

fn compile_here(
    lib: &Path,
    input: &[u8],
    options: &[String],
    diag: &Diagnostics,
) -> Result<LtoOutput> {
    let modules: Vec<IrModule> = decode(input)?
        .into_iter()
        .map(|(name, data)| {
            let (form, name) = match name.split_at_checked(2) {
                Some(("B:", n)) => (IrForm::Bitcode, n),
                Some((_, n)) => (IrForm::Container, n),
                None => (IrForm::Container, name.as_str()),
            };
            IrModule {
                name: name.to_string(),
                data: Bytes::from_vec(data.to_vec()),
                form,
            }
        })
        .collect();
    let engine = NvvmEngine {
        lib: super::libnvvm::LibNvvm::load(lib)?,
    };
    engine.compile(&modules, options, diag)
}
