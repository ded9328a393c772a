//! libNVVM's split compile in a child process. With `-split-compile-extended` libNVVM
//! compiles on threads of its own, and it sometimes corrupts its heap doing so: on 2 cores,
//! 1 link in about 50 aborted inside `nvvmCompileProgram` ("corrupted size vs. prev_size",
//! the abort on one of libNVVM's threads), 2 in 60 answered piece sizes that add up to
//! more than the result it returned, and nvlink, which runs libNVVM in its own process,
//! failed 5 times in 40 (aborts and hangs). So nvlinkrs runs that compile in a
//! child (itself, started with the hidden `__nvvm-compile` subcommand): a crash costs the
//! child, and the compile is run again, up to [`ATTEMPTS`] times in all; the linker and its
//! output are never touched by a corrupted heap. Compiles without split stay in process.
//!
//! Request (child's stdin): the modules, framed by [`crate::frames`], each
//! name prefixed `C:` (an NVIDIA container) or `B:` (bitcode); the libNVVM path and the
//! options are the arguments. Answer (stdout): `whole` or `reloc`, then `info` messages,
//! then `ptx` pieces; or `error` and its `context` lines. Exit 0 for either answer; any
//! other ending is a crash.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{Engine, IrForm, IrModule, LtoOutput, NvvmEngine};
use crate::bytes::Bytes;
use crate::diag::{Diagnostics, Error, Result};
use crate::frames::{decode, encode};

/// How many times a crashed compile is run.
pub const ATTEMPTS: usize = 3;

/// A child that uses no CPU time for this long is stuck (libNVVM does no I/O while it
/// compiles): it is stopped and the compile run again. nvlink's hangs under
/// `-split-compile-extended` are of this kind (all threads waiting on futexes, 0% CPU).
pub const STALL: std::time::Duration = std::time::Duration::from_secs(10);

/// The hidden subcommand the child runs.
pub const SUBCOMMAND: &str = "__nvvm-compile";

/// Set (to the subcommand) in a child's environment: a first argument that names a
/// hidden subcommand is one only with it (else it is an input file of that name).
pub const CHILD_VAR: &str = "NVLINKRS_CHILD";

/// Whether this process was started as the hidden subcommand `name` (its first argument,
/// and [`CHILD_VAR`] naming it).
pub fn started_as(args: &[String], name: &str) -> bool {
    args.first().is_some_and(|a| a == name)
        && std::env::var_os(CHILD_VAR).is_some_and(|v| v == name)
}

/// libNVVM at `lib`, run in a child process.
pub struct IsolatedNvvm {
    pub lib: PathBuf,
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
        let exe = std::env::current_exe()
            .map_err(|e| Error::fatal(format!("cannot find this program to run libNVVM: {e}")))?;
        let mut crashes = Vec::new();
        for _ in 0..ATTEMPTS {
            let mut cmd = Command::new(&exe);
            cmd.env(CHILD_VAR, SUBCOMMAND)
                .arg(SUBCOMMAND)
                .arg(&self.lib)
                .arg("--")
                .args(options)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            dies_with_the_link(&mut cmd);
            let child = cmd
                .spawn()
                .map_err(|e| Error::fatal(format!("cannot start '{}': {e}", exe.display())))?;
            let (status, stdout, stderr) = supervise(child, &body)?;
            if status.as_ref().is_some_and(|s| s.success()) {
                return answer(&stdout, diag);
            }
            crashes.push(match status {
                Some(st) => match child_message(&stderr).as_str() {
                    "" => format!("attempt ended by {st}"),
                    msg => format!("attempt ended by {st}: {msg}"),
                },
                None => format!(
                    "attempt stopped after {} s without progress",
                    STALL.as_secs()
                ),
            });
        }
        let mut e = Error::fatal("elfLink nvvm error").context(format!(
            "libNVVM crashed in each of {ATTEMPTS} attempts at the split compile"
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

/// Feeds the child its request and collects its output; stops it when it makes no
/// progress for [`STALL`] (status `None`).
pub(crate) fn supervise(
    mut child: std::process::Child,
    body: &[u8],
) -> Result<(Option<std::process::ExitStatus>, Vec<u8>, Vec<u8>)> {
    use std::io::Read;
    let stdin = child.stdin.take();
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let pid = child.id();
    std::thread::scope(|s| {
        // (a thread that cannot be made, under a memory or process limit, is an error
        // of this step, which the caller falls back from; never a panic)
        let thread = || std::thread::Builder::new();
        let feeder = thread().spawn_scoped(s, move || {
            if let Some(mut p) = stdin {
                let _ = p.write_all(body);
            }
        });
        let out = thread().spawn_scoped(s, move || {
            let mut v = Vec::new();
            if let Some(p) = stdout.as_mut() {
                let _ = p.read_to_end(&mut v);
            }
            v
        });
        let err = thread().spawn_scoped(s, move || {
            let mut v = Vec::new();
            if let Some(p) = stderr.as_mut() {
                let _ = p.read_to_end(&mut v);
            }
            v
        });
        let (out, err) = match (feeder, out, err) {
            (Ok(_), Ok(out), Ok(err)) => (out, err),
            (f, o, e) => {
                let _ = child.kill();
                let _ = child.wait();
                let why = [f.err(), o.err(), e.err()].into_iter().flatten().next();
                return Err(Error::fatal(format!(
                    "cannot start a thread to talk to the child process: {}",
                    why.map_or_else(String::new, |e| e.to_string())
                )));
            }
        };
        let watch = cpu_ticks(pid).is_some();
        let mut last = (cpu_ticks(pid), std::time::Instant::now());
        let status = loop {
            match child.try_wait() {
                Ok(Some(st)) => break Some(st),
                Ok(None) => {}
                Err(e) => return Err(Error::fatal(format!("waiting for libNVVM's process: {e}"))),
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            let now = cpu_ticks(pid);
            if now != last.0 {
                last = (now, std::time::Instant::now());
            } else if watch && last.1.elapsed() >= STALL {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        };
        Ok((
            status,
            out.join().unwrap_or_default(),
            err.join().unwrap_or_default(),
        ))
    })
}

/// The CPU time a process has used so far, in clock ticks (Linux `/proc`; `None` where
/// that cannot be read, and then no stall is ever declared).
pub(crate) fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // fields after the parenthesised command name; utime and stime are the 12th and 13th
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
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
    let mut stdout = std::io::stdout().lock();
    if stdout
        .write_all(&body)
        .and_then(|_| stdout.flush())
        .is_err()
    {
        return 2;
    }
    0
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

/// A child started for the link ends with the thread that started it (which waits for
/// it): a link killed by the user or the daemon leaves none running.
pub(crate) fn dies_with_the_link(cmd: &mut Command) {
    #[cfg(target_os = "linux")]
    // SAFETY: the closure only calls prctl, which is async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(cmd, || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}
