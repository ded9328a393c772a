//! Running NVIDIA's ptxas on PTX: the argument list nvlink's embedded ptxas records in
//! `.note.nv.tkinfo` (so that the output bytes match), a private temporary directory per
//! job, ptxas's messages captured and reported with the input's name. The jobs run on
//! the link's job pool (`crate::jobs`), their results in job order.
//!
//! `NVLINKRS_PTXAS_LAUNCHER=<command>` (CMake's `*_COMPILER_LAUNCHER`, split at
//! whitespace) runs each job as `<command> <ptxas> -arch=sm_XX -m64 [flags] lto.ptx -o
//! lto.cubin` in the job's directory: the form sccache recognises (the input by
//! position, the output after `-o`), with the same command line for the same job on any
//! machine. ptxas gives the same bytes for both spellings, but a launcher may hand back
//! other code (a wrapper that adds `-O0`, another ptxas, a farm's answer): what it hands
//! back must be a device ELF of the job's type, architecture and debug level defining the
//! PTX's kernels ([`check_launched`]), and the launcher is part of every cache key that
//! holds its results (its words and the identity of its file, [`launcher_id`]), so a link
//! without it never gets them. With one set a pool runs [`LAUNCHED_JOBS_PER_CORE`] jobs
//! per core (a farm does the work; `NVLINKRS_JOBS` still caps).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::arch::Arch;
use crate::diag::{Error, Result};

/// The setting naming a command that runs each ptxas job (sccache, a farm's client).
pub const LAUNCHER_VAR: &str = "NVLINKRS_PTXAS_LAUNCHER";

/// Jobs per core a pool runs when ptxas jobs go through a launcher.
pub const LAUNCHED_JOBS_PER_CORE: usize = 8;

/// The launcher command of `NVLINKRS_PTXAS_LAUNCHER` (in `env`), split at whitespace
/// (empty: none). A first word naming a file by a relative path is made absolute, as jobs
/// run in their own directories.
pub fn launcher(env: &crate::linkenv::LinkEnv) -> Vec<String> {
    let mut words: Vec<String> = env
        .text(LAUNCHER_VAR)
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    if let Some(first) = words.first_mut()
        && first.contains('/')
        && !first.starts_with('/')
        && let Ok(abs) = std::path::absolute(&*first)
    {
        *first = abs.display().to_string();
    }
    words
}

/// The file the launcher runs: its first word, found on `PATH` (of `env`) when it names
/// no folder; `None` without a launcher, or when `PATH` does not find it.
pub fn launcher_file(words: &[String], env: &crate::linkenv::LinkEnv) -> Option<PathBuf> {
    env.on_path(words.first()?).filter(|p| p.is_file())
}

/// What a cache key holds of the launcher: its words and the identity of its file
/// (empty without a launcher).
pub fn launcher_id(
    words: &[String],
    env: &crate::linkenv::LinkEnv,
    cache: &crate::cache::Cache,
) -> Result<String> {
    if words.is_empty() {
        return Ok(String::new());
    }
    let file = match launcher_file(words, env) {
        Some(f) => cache.tool_id(&f)?,
        None => String::new(),
    };
    Ok(format!("{}\0{file}", words.join("\0")))
}

/// How a PTX text becomes a cubin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxasOptions {
    pub target: Arch,
    /// `-c`: relocatable output (partial LTO, split slices).
    pub relocatable: bool,
    /// `-maxrregcount` (the command line's, else the modules' agreed `-maxreg`).
    pub maxrregcount: Option<u32>,
    /// `-g`: nvlink's ptxas gets `-no-bb-merge -ret-end -g`.
    pub debug: bool,
    /// `-Xptxas` values, in command-line order. ptxas records its options in its own
    /// canonical order in `.note.nv.tkinfo`, so only the set matters.
    pub extra: Vec<String>,
    /// `-split-compile N` as nvlink forwards it to its ptxas.
    pub split_compile: Option<u32>,
    /// The options a PTX fatbin member records, passed first (so that the command
    /// line's `-maxrregcount` comes last and wins, with ptxas's warning, as in nvlink).
    pub member: Vec<String>,
}

impl PtxasOptions {
    /// The argument list, without input and output files.
    pub fn args(&self) -> Vec<String> {
        let mut a: Vec<String> = self.member.clone();
        if let Some(n) = self.maxrregcount {
            a.extend(["-maxrregcount".into(), n.to_string()]);
        }
        if self.debug {
            a.extend(["-no-bb-merge".into(), "-ret-end".into(), "-g".into()]);
        }
        a.extend(self.extra.iter().cloned());
        a.extend([
            "-arch".into(),
            self.target.to_string(),
            "-m".into(),
            "64".into(),
        ]);
        if self.relocatable {
            a.push("-c".into());
        }
        if let Some(n) = self.split_compile {
            a.extend(["-split-compile".into(), n.to_string()]);
        }
        a
    }

    /// The argument list in the form compiler caches recognise: `-arch=sm_XX -m64` first,
    /// then the other options in [`PtxasOptions::args`]'s order.
    pub fn launcher_args(&self) -> Vec<String> {
        let mut a = vec![format!("-arch={}", self.target), "-m64".into()];
        let mut rest = self.args().into_iter();
        while let Some(x) = rest.next() {
            if x == "-arch" || x == "-m" {
                rest.next();
            } else {
                a.push(x);
            }
        }
        a
    }
}

/// One PTX text to assemble, with the name its messages are reported under.
pub struct Job {
    pub name: String,
    pub ptx: Vec<u8>,
    pub options: PtxasOptions,
}

/// What a successful ptxas run gives back.
pub struct Assembled {
    pub cubin: Vec<u8>,
    /// ptxas's messages (warnings, `-v` information), to be passed on.
    pub messages: String,
}

/// Something that turns PTX into cubins. The real one runs NVIDIA's ptxas; tests may
/// stand in a failing one for faults that cannot be produced otherwise.
pub trait Assembler: Send + Sync {
    fn assemble(&self, job: &Job) -> Result<Assembled>;

    /// Whether jobs go through a launcher (a pool may then run more than one per core).
    fn launched(&self) -> bool {
        false
    }
}

/// The ptxas executable of a toolkit, and the launcher that runs it, if any.
pub struct Ptxas {
    pub path: PathBuf,
    /// `NVLINKRS_PTXAS_LAUNCHER`'s words (empty: ptxas runs itself).
    pub launcher: Vec<String>,
}

impl Assembler for Ptxas {
    fn assemble(&self, job: &Job) -> Result<Assembled> {
        let dir = job_dir()
            .map_err(|e| Error::fatal(format!("cannot create a temporary directory: {e}")))?;
        let input = dir.path().join("lto.ptx");
        let output = dir.path().join("lto.cubin");
        std::fs::write(&input, &job.ptx)
            .map_err(|e| Error::fatal(format!("cannot write '{}': {e}", input.display())))?;
        if let Some((launcher, words)) = self.launcher.split_first() {
            // the same words for the same job anywhere: names relative to the job's directory
            let mut cmd = Command::new(launcher);
            cmd.args(words)
                .arg(&self.path)
                .args(job.options.launcher_args())
                .args(["lto.ptx", "-o", "lto.cubin"])
                .current_dir(dir.path());
            return run(cmd, Path::new(launcher), &job.name, &input, &output)
                .and_then(|a| check_launched(job, &a.cubin, &job.name).map(|()| a))
                .map(|mut a| {
                    a.messages = a.messages.replace("lto.ptx", "application ptx input");
                    a
                })
                .map_err(|e| {
                    e.context(format!(
                        "ptxas ran through {LAUNCHER_VAR}='{}'",
                        self.launcher.join(" ")
                    ))
                });
        }
        let mut cmd = Command::new(&self.path);
        cmd.args(job.options.args())
            .arg(&input)
            .arg("-o")
            .arg(&output);
        run(cmd, &self.path, &job.name, &input, &output)
    }

    fn launched(&self) -> bool {
        !self.launcher.is_empty()
    }
}

/// What a launcher handed back is ptxas' answer to the job, as far as it can say without
/// running ptxas: a 64-bit device ELF of the CUDA OS/ABI, relocatable when the job asked
/// `-c` (else an executable), for the job's architecture, with debug information exactly
/// when the job asked for it (`-g`, `-lineinfo`: the flags' top byte above 6), defining
/// every kernel of the PTX. A farm or a wrapper that fails, cuts the file short, answers
/// with another job's cubin or compiles for another architecture must not become the
/// image (code it changed within those bounds, `-O0` or zeroed instructions, is the
/// launcher's: it is in the keys of what it produced, `launcher_id`).
fn check_launched(job: &Job, cubin: &[u8], name: &str) -> Result<()> {
    let bad = |why: String| {
        Error::fatal("elfLink JIT compile failed")
            .context(format!("ptxas gave no usable output for '{name}': {why}"))
    };
    let elf = crate::elf::ElfView::parse(cubin, name).map_err(|e| bad(e.message().into()))?;
    if elf.e_machine != crate::elf::EM_CUDA || elf.osabi != crate::elf::ELFOSABI_CUDA {
        return Err(bad("not a device ELF".into()));
    }
    let options = &job.options;
    let want_type = if options.relocatable { 1 } else { 2 };
    if elf.e_type != want_type {
        return Err(bad(format!(
            "ELF type {} where the job asked for {want_type} ({})",
            elf.e_type,
            if options.relocatable {
                "-c"
            } else {
                "an executable"
            }
        )));
    }
    let arch = crate::elf::arch(cubin);
    if arch != Some(options.target) {
        return Err(bad(format!(
            "code for {}, not {}",
            arch.map_or_else(|| "no architecture".into(), |a| a.to_string()),
            options.target
        )));
    }
    let args = options.args();
    let debug_asked = args.iter().any(|a| {
        matches!(
            a.as_str(),
            "-g" | "--device-debug" | "-lineinfo" | "--generate-line-info"
        )
    });
    let debug_level = elf.e_flags >> 24;
    if (debug_level > 6) != debug_asked {
        return Err(bad(format!(
            "ELF flags {:#x} {} debug information, the job asked for {}",
            elf.e_flags,
            if debug_level > 6 { "with" } else { "without" },
            if debug_asked { "it" } else { "none" }
        )));
    }
    let ptx = &job.ptx;
    let symbols = elf.symbols(name).map_err(|e| bad(e.message().into()))?;
    let text = String::from_utf8_lossy(ptx);
    // (a kernel declared `.extern .entry`, another split piece's, is not defined here)
    let mut words = text
        .split(|c: char| c.is_whitespace() || c == '(')
        .filter(|w| !w.is_empty());
    let mut last = "";
    while let Some(w) = words.next() {
        let extern_decl = last == ".extern";
        last = w;
        if w == ".entry"
            && !extern_decl
            && let Some(kernel) = words.next()
            && !symbols.iter().any(|s| s.name == kernel)
        {
            return Err(bad(format!("it defines no kernel '{kernel}'")));
        }
    }
    Ok(())
}

/// A private directory (0700) for one ptxas job (`crate::scratch`).
fn job_dir() -> std::io::Result<tempfile::TempDir> {
    crate::scratch::private_dir("ptxas")
}

/// nvlink's embedded ptxas reads PTX from memory and calls it `application ptx input` in
/// its messages, where ours names the job's temporary file: the messages say nvlink's
/// words (the same from run to run, so a cached link repeats them as they were).
fn as_nvlink_names_the_input(messages: &str, input: &Path) -> String {
    messages.replace(&*input.to_string_lossy(), "application ptx input")
}

fn run(
    mut cmd: Command,
    tool: &Path,
    name: &str,
    input: &Path,
    output: &Path,
) -> Result<Assembled> {
    // ptxas dies with the link (a link the daemon kills, or the user, leaves none running);
    // the thread that starts it waits for it, so it outlives ptxas otherwise
    #[cfg(target_os = "linux")]
    // SAFETY: the closure only calls prctl, which is async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let out = cmd
        .output()
        .map_err(|e| Error::fatal(format!("cannot run ptxas '{}': {e}", tool.display())))?;
    let messages = as_nvlink_names_the_input(
        &(String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout)),
        input,
    );
    if !out.status.success() {
        let how = match out.status.code() {
            Some(c) => format!("exit status {c}"),
            None => "a signal".into(),
        };
        // nvlink's own words for a failed embedded ptxas; ptxas's messages come first.
        return Err(Error::fatal("elfLink fatbinary error")
            .context(format!(
                "ptxas '{}' failed on '{name}' ({how})",
                tool.display()
            ))
            .after_tool_output(messages));
    }
    let cubin = std::fs::read(output).map_err(|e| {
        Error::fatal("elfLink JIT compile failed")
            .context(format!("ptxas wrote no output for '{name}': {e}"))
    })?;
    Ok(Assembled { cubin, messages })
}

/// An assembler whose results are kept in the cache, keyed by ptxas's identity, the
/// launcher's, the argument list and the PTX text: a relink re-runs ptxas only for PTX
/// that changed.
pub struct Cached<'a> {
    pub inner: Box<dyn Assembler + 'a>,
    pub cache: &'a crate::cache::Cache,
    /// The identity of the ptxas binary ([`crate::cache::Cache::tool_id`]).
    pub tool: String,
    /// The launcher's words and file ([`launcher_id`]; empty without one).
    pub launcher: String,
}

impl Assembler for Cached<'_> {
    fn assemble(&self, job: &Job) -> Result<Assembled> {
        let key = crate::cache::Key::new("ptxas")
            .part("ptxas", self.tool.as_bytes())
            .part("launcher", self.launcher.as_bytes())
            .part("options", job.options.args().join("\0").as_bytes())
            .part("PTX", &job.ptx)
            .about(format!("ptxas '{}'", job.name));
        if let Some(parts) = self.cache.get(&key).and_then(|e| crate::cache::unpack(&e))
            && let [cubin, messages] = &parts[..]
            && crate::cache::plain_text(messages)
        {
            crate::trace::arg("cache", || "hit".into());
            return Ok(Assembled {
                cubin: cubin.clone(),
                messages: String::from_utf8_lossy(messages).into_owned(),
            });
        }
        crate::trace::arg("cache", || "miss".into());
        let started = std::time::Instant::now();
        let a = self.inner.assemble(job)?;
        self.cache.put(
            &key,
            &crate::cache::pack(&[&a.cubin, a.messages.as_bytes()]),
            started.elapsed(),
        );
        Ok(a)
    }

    fn launched(&self) -> bool {
        self.inner.launched()
    }
}

/// The toolkit's ptxas, run through `launcher` when one is given (found on `env`'s
/// `PATH`), its results cached when the link has a cache (the launcher is part of the
/// key).
pub fn for_link<'a>(
    kit: &crate::toolkit::Toolkit,
    cache: Option<&'a crate::cache::Cache>,
    launcher: &[String],
    env: &crate::linkenv::LinkEnv,
) -> Result<Box<dyn Assembler + 'a>> {
    let ptxas = Ptxas {
        path: kit.ptxas(),
        launcher: launcher.to_vec(),
    };
    Ok(match cache {
        Some(cache) => Box::new(Cached {
            tool: cache.tool_id(&ptxas.path)?,
            launcher: launcher_id(launcher, env, cache)?,
            inner: Box::new(ptxas),
            cache,
        }),
        None => Box::new(ptxas),
    })
}

/// Runs every job on the link's job pool: at most `threads` workers (0: one per core;
/// through a launcher at least [`LAUNCHED_JOBS_PER_CORE`] per core), largest jobs first,
/// make's jobserver and `NVLINKRS_JOBS` respected; the results are in job order.
pub fn assemble_all(
    pool: &crate::jobs::Jobs,
    assembler: &dyn Assembler,
    jobs: &[Job],
    threads: usize,
) -> Result<Vec<Result<Assembled>>> {
    let threads = if assembler.launched() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        threads.max(cores * LAUNCHED_JOBS_PER_CORE)
    } else {
        threads
    };
    Ok(pool.run_all(
        "ptxas",
        jobs,
        threads,
        |j| j.ptx.len(),
        |j| {
            let _span = crate::trace::span_with("ptxas", || format!("ptxas {}", j.name));
            crate::trace::arg("input", || j.name.clone().into());
            crate::trace::arg("args", || j.options.args().join(" ").into());
            crate::trace::arg("ptx_bytes", || j.ptx.len().into());
            let assembled = assembler.assemble(j);
            if let Err(e) = &assembled {
                crate::trace::arg("error", || e.message().into());
            }
            let mut a = assembled?;
            if j.options.debug {
                a.cubin = without_file_names(a.cubin);
            }
            Ok(a)
        },
    ))
}

/// ptxas `-g` records its files in its note (output `lto.cubin`, command line
/// `lto.ptx ... -o lto.cubin ...`); nvlink's ptxas, run inside nvlink, names none (output
/// `elf.o`): the cubin with its note so (the same cubin where its note is otherwise).
fn without_file_names(cubin: Vec<u8>) -> Vec<u8> {
    const NOTE: &str = ".note.nv.tkinfo";
    let Ok(view) = crate::elf::ElfView::parse(&cubin, "lto.cubin") else {
        return cubin;
    };
    let Some(note) = view.sections.iter().find(|s| s.name == NOTE) else {
        return cubin;
    };
    let Some(bytes) = cubin.get(note.offset as usize..(note.offset + note.size) as usize) else {
        return cubin;
    };
    let Some(new) = crate::elf::tkinfo::ptxas_without_files(bytes, "lto.ptx", "lto.cubin", "elf.o")
    else {
        return cubin;
    };
    crate::elf::relayout::replace_section(&cubin, "lto.cubin", NOTE, &new).unwrap_or(cubin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_order_matches_nvlinks_record() {
        let o = PtxasOptions {
            target: Arch::plain(90),
            relocatable: false,
            maxrregcount: Some(40),
            debug: false,
            extra: vec!["-O0".into()],
            split_compile: None,
            member: Vec::new(),
        };
        assert_eq!(
            o.args(),
            ["-maxrregcount", "40", "-O0", "-arch", "sm_90", "-m", "64"]
        );
        let o = PtxasOptions {
            relocatable: true,
            maxrregcount: None,
            extra: vec![],
            split_compile: Some(2),
            member: Vec::new(),
            ..o
        };
        assert_eq!(
            o.args(),
            ["-arch", "sm_90", "-m", "64", "-c", "-split-compile", "2"]
        );
        assert_eq!(
            o.launcher_args(),
            ["-arch=sm_90", "-m64", "-c", "-split-compile", "2"]
        );
        let o = PtxasOptions {
            maxrregcount: Some(40),
            member: vec!["-O3".into()],
            ..o
        };
        assert_eq!(
            o.launcher_args(),
            [
                "-arch=sm_90",
                "-m64",
                "-O3",
                "-maxrregcount",
                "40",
                "-c",
                "-split-compile",
                "2"
            ]
        );
    }

    struct Echo;
    impl Assembler for Echo {
        fn assemble(&self, job: &Job) -> Result<Assembled> {
            if job.ptx.is_empty() {
                return Err(Error::fatal(format!("empty '{}'", job.name)));
            }
            Ok(Assembled {
                cubin: job.ptx.clone(),
                messages: String::new(),
            })
        }
    }

    #[test]
    fn results_come_back_in_job_order() {
        let opts = PtxasOptions {
            target: Arch::plain(90),
            relocatable: true,
            maxrregcount: None,
            debug: false,
            extra: vec![],
            split_compile: None,
            member: Vec::new(),
        };
        let jobs: Vec<Job> = (0..20)
            .map(|i| Job {
                name: format!("slice{i}"),
                ptx: vec![i as u8; (i * 37) % 11],
                options: opts.clone(),
            })
            .collect();
        let out = assemble_all(&crate::jobs::Jobs::default(), &Echo, &jobs, 3).unwrap();
        for (i, r) in out.iter().enumerate() {
            match r {
                Ok(a) => assert_eq!(a.cubin, jobs[i].ptx),
                Err(e) => assert_eq!(e.message(), format!("empty 'slice{i}'")),
            }
        }
    }
}
