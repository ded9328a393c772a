//! Link-time optimization: the module pool (`pool`), the option list nvlink hands libNVVM,
//! and the engines that turn a module set into PTX behind one trait (libNVVM, `libnvvm`;
//! or LLVM for bitcode, `llvm_engine`, `llvm_split`, run in the `llvm_helper` process).
//! `phase` is the LTO phase of a link and chooses the engine; `crash` gives a last word
//! when libNVVM crashes in process, `isolated` runs its split compile in a child process,
//! `split_data` gives each variable a split compile copies one home, `prelink` links IR
//! into one `.ltoir` (`--emit-ltoir`) or a mixed link's one module, the helper's part of
//! which beyond the link is `link_ir`'s; `linked_ir` gives the drop-in libnvJitLink
//! nvJitLink's container of the linked IR. The IR containers themselves are read and written
//! by `ir`.

pub mod bitcode;
pub mod crash;
pub mod incremental;
pub mod isolated;
pub mod libnvvm;
#[cfg(feature = "llvm")]
pub mod link_ir;
pub mod linked_ir;
pub mod llvm_engine;
pub mod llvm_helper;
#[cfg(feature = "llvm")]
pub mod llvm_split;
pub mod phase;
pub mod pool;
pub mod prelink;
pub mod split_data;
pub mod staged;

use crate::arch::Arch;
use crate::bytes::Bytes;
use crate::consensus::{Consensus, Opt};
use crate::diag::{Diagnostics, Error, Level, Result};
use crate::input::HostRefs;

pub use bitcode::{BitcodeSummary, summarize as summarize_bitcode};
pub use llvm_helper::locate as llvm_helper_path;

/// The version of the libNVVM at `path` (loaded for the question), as `nvvmVersion`
/// answers it.
pub fn libnvvm_version(path: &std::path::Path) -> Result<(i32, i32)> {
    libnvvm::LibNvvm::load(path).and_then(|l| l.version())
}

/// How a module is handed to the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IrForm {
    /// An NVIDIA LTO IR / NVVM container (scrambled or plain inside).
    Container,
    /// Plain LLVM bitcode.
    Bitcode,
}

/// One IR module of the program.
#[derive(Clone, Debug)]
pub struct IrModule {
    /// The name nvlink gives libNVVM: the path, or `archive:member`.
    pub name: String,
    pub data: Bytes,
    pub form: IrForm,
}

/// What an engine produced.
#[derive(Clone, Debug)]
pub struct LtoOutput {
    /// The PTX modules: one, or the pieces of a split compile in [`canonical_order`].
    pub ptx: Vec<Vec<u8>>,
    /// True when the PTX is a whole program (ptxas without `-c`); false when it is
    /// relocatable and must be merged with other device code. Split pieces are always
    /// relocatable.
    pub whole_program: bool,
}

/// How [`split_result`] describes piece sizes that do not fit the result (libNVVM's race,
/// see `isolated`: the child treats it as a crash, [`is_split_mismatch`]).
const SPLIT_MISMATCH: &str = "libNVVM's piece sizes do not match its result";

/// Whether `e` is [`split_result`]'s refusal of piece sizes that do not add up.
pub fn is_split_mismatch(e: &Error) -> bool {
    e.context_chain()
        .iter()
        .any(|c| c.starts_with(SPLIT_MISMATCH))
}

/// Cuts a split compile's result (its modules back to back) at the lengths libNVVM
/// reported, refusing lengths that do not add up to the result, and puts the pieces in
/// [`canonical_order`].
pub fn split_result(ptx: Vec<u8>, sizes: &[usize]) -> Result<Vec<Vec<u8>>> {
    let total = sizes
        .iter()
        .try_fold(0usize, |a, &n| a.checked_add(n))
        .filter(|&t| t == ptx.len());
    if total.is_none() || sizes.contains(&0) {
        return Err(Error::fatal("elfLink nvvm error").context(format!(
            "{SPLIT_MISMATCH}: {} split modules of {:?} bytes for a result of {} bytes",
            sizes.len(),
            sizes,
            ptx.len()
        )));
    }
    let mut pieces = Vec::with_capacity(sizes.len());
    let mut at = 0;
    for &n in sizes {
        pieces.push(ptx[at..at + n].to_vec());
        at += n;
    }
    Ok(canonical_order(pieces))
}

/// libNVVM hands back the pieces of a split compile in the order its threads finished
/// them, which changes from run to run (so nvlink's output does too). nvlinkrs sorts them
/// by content, so the same program gives the same bytes whatever the thread count.
pub fn canonical_order(mut pieces: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    pieces.sort_unstable();
    pieces
}

/// An LTO back end: a module set and an option list in, PTX out.
pub trait Engine: Send + Sync {
    /// Compiles the modules. Messages the back end prints (its log) go to `diag`.
    fn compile(
        &self,
        modules: &[IrModule],
        options: &[String],
        diag: &Diagnostics,
    ) -> Result<LtoOutput>;
}

/// libNVVM, as nvlink drives it.
pub struct NvvmEngine {
    pub lib: libnvvm::LibNvvm,
}

impl Engine for NvvmEngine {
    fn compile(
        &self,
        modules: &[IrModule],
        options: &[String],
        diag: &Diagnostics,
    ) -> Result<LtoOutput> {
        // (a crash in libNVVM from here on ends the process with a message naming the
        // modules, not silently)
        let names: Vec<String> = modules.iter().map(|m| format!("'{}'", m.name)).collect();
        let _guard = crash::Guard::new(
            &format!("libNVVM crashed compiling {}", names.join(", ")),
            Some(self.lib.code_address()),
        );
        let mut prog = self.lib.program()?;
        for m in modules {
            match m.form {
                IrForm::Container => prog.add_lto_ir(&m.data, &m.name)?,
                IrForm::Bitcode => prog.add_bitcode(&m.data, &m.name)?,
            }
        }
        match prog.compile(options)? {
            Ok(done) => {
                if !done.log.trim().is_empty() {
                    diag.info(&done.log);
                }
                // nvlink's order: the pieces' sizes, then the result.
                let sizes = prog.slice_sizes()?;
                let ptx = prog.result()?;
                Ok(match sizes {
                    Some(sizes) => LtoOutput {
                        ptx: split_result(ptx, &sizes)?,
                        whole_program: false,
                    },
                    None => LtoOutput {
                        ptx: vec![ptx],
                        whole_program: done.code == libnvvm::RESULT_WHOLE_PROGRAM,
                    },
                })
            }
            Err((log, error)) => {
                // nvlink prints libNVVM's log and error string as one info line, then fails.
                diag.info(&format!("{log}{error}"));
                Err(Error::fatal("elfLink JIT compile failed").context(format!(
                    "libNVVM failed: {error}; options: {}",
                    options_in_short(options)
                )))
            }
        }
    }
}

/// An engine whose compiles are spans of the link's trace: the engine, the modules and
/// options, and what came out (a whole program, or the pieces of a split compile, which
/// the engine cuts and compiles inside the one call: their sizes, as their times are not
/// seen from outside; each piece's ptxas job is a span of its own).
pub struct Traced<'a> {
    pub inner: Box<dyn Engine + 'a>,
    pub name: &'static str,
}

impl Engine for Traced<'_> {
    fn compile(
        &self,
        modules: &[IrModule],
        options: &[String],
        diag: &Diagnostics,
    ) -> Result<LtoOutput> {
        let _span = crate::trace::span_with("lto", || format!("{} compile", self.name));
        crate::trace::arg("modules", || {
            modules
                .iter()
                .map(|m| m.name.clone())
                .collect::<Vec<_>>()
                .into()
        });
        crate::trace::arg("options", || options.join(" ").into());
        let out = self.inner.compile(modules, options, diag);
        if let Ok(o) = &out {
            crate::trace::arg("whole_program", || o.whole_program.into());
            crate::trace::arg("pieces", || o.ptx.len().into());
            crate::trace::arg("piece_bytes", || {
                o.ptx.iter().map(Vec::len).collect::<Vec<_>>().into()
            });
        }
        out
    }
}

/// An engine whose results are kept in the cache, keyed by the engine's identity, the
/// option list and every module (name, form, bytes). The engine's messages are kept with
/// the PTX and repeated on a hit.
pub struct CachedEngine<'a> {
    pub inner: Box<dyn Engine + 'a>,
    pub cache: &'a crate::cache::Cache,
    /// The identities of the engine's files (libNVVM; or the LLVM helper and libdevice).
    pub identity: String,
}

impl Engine for CachedEngine<'_> {
    fn compile(
        &self,
        modules: &[IrModule],
        options: &[String],
        diag: &Diagnostics,
    ) -> Result<LtoOutput> {
        let mut key = crate::cache::Key::new("lto")
            .part("engine", self.identity.as_bytes())
            .part("options", options.join("\0").as_bytes())
            .about(format!("LTO of {} modules", modules.len()));
        for m in modules {
            key = key
                .text(&m.name)
                .text(if m.form == IrForm::Bitcode { "B" } else { "C" })
                .part(format!("module '{}'", m.name), &m.data);
        }
        if let Some(parts) = self.cache.get(&key).and_then(|e| crate::cache::unpack(&e))
            && parts.len() >= 2
            && crate::cache::plain_text(&parts[1])
        {
            for line in String::from_utf8_lossy(&parts[1]).lines() {
                diag.info(line);
            }
            return Ok(LtoOutput {
                whole_program: parts[0] == b"whole",
                ptx: parts[2..].to_vec(),
            });
        }
        let collected = Diagnostics::collector();
        let started = std::time::Instant::now();
        let result = self.inner.compile(modules, options, &collected);
        // (in order: what libNVVM printed, its reason for a refused module, comes first)
        let printed = collected.printed();
        for (level, m) in &printed {
            match level {
                Level::Tool => diag.tool_output(m),
                Level::Warning => diag.warning(m),
                _ => diag.info(m),
            }
        }
        let infos = collected.infos();
        let out = result?;
        // messages that span lines are not kept (they would come back split), nor a
        // compile that printed more than info lines
        if infos.iter().all(|m| !m.contains('\n')) && infos.len() == printed.len() {
            let kind: &[u8] = if out.whole_program {
                b"whole"
            } else {
                b"reloc"
            };
            let joined = infos.join("\n");
            let mut parts: Vec<&[u8]> = vec![kind, joined.as_bytes()];
            parts.extend(out.ptx.iter().map(Vec::as_slice));
            self.cache
                .put(&key, &crate::cache::pack(&parts), started.elapsed());
        }
        Ok(out)
    }
}

/// Everything that decides libNVVM's option list.
#[derive(Clone, Debug, Default)]
pub struct LtoSettings {
    pub target: Option<Arch>,
    pub split_compile: Option<u32>,
    /// `-split-compile-extended=N`: libNVVM cuts the program into pieces that ptxas
    /// assembles in parallel (N threads; 0: one per core).
    pub split_compile_extended: Option<u32>,
    pub ofast_compile: Option<String>,
    /// `-maxrregcount` from the command line (wins over the modules' value).
    pub maxrregcount: Option<u32>,
    /// `--device-c`: host objects take part, so the result may have to be relocatable.
    pub device_c: bool,
    /// Partial LTO (`--force-device-c`): relocatable output whatever the host info says.
    pub force_device_c: bool,
    pub debug: bool,
    /// `-has-global-host-info` (off with `-ignore-host-info`).
    pub host_info: bool,
    pub xnvvm: Vec<String>,
    /// `-nvvm-latest`: libNVVM's newer NVVM whatever the target (it reads the bitcode
    /// LLVM 22 writes, which NVVM 7, libNVVM's choice up to sm_90, refuses).
    pub nvvm_latest: bool,
    pub host_refs: HostRefs,
}

/// The option list nvlink 13.5 hands `nvvmCompileProgram`, in its order.
pub fn nvvm_options(s: &LtoSettings, consensus: &Consensus) -> Vec<String> {
    let mut o: Vec<String> = Vec::new();
    let target = s.target.map(|a| a.to_string()).unwrap_or_default();
    o.push(format!("-arch={}", target.replacen("sm_", "compute_", 1)));
    o.push("-link-lto".into());
    if let Some(n) = s.split_compile.filter(|&n| n != 1) {
        o.push(format!("-split-compile={n}"));
    }
    if let Some(n) = s.split_compile_extended.filter(|&n| n != 1) {
        o.push(format!("-split-compile-extended={n}"));
    }
    if let Some(l) = &s.ofast_compile {
        o.push(format!("-Ofast-compile={l}"));
    }
    if let Some(n) = s
        .maxrregcount
        .or(consensus.value(Opt::MaxReg))
        .filter(|&n| n > 0)
    {
        o.push(format!("-maxreg={n}"));
    }
    if consensus.value(Opt::LineInfo).is_some() {
        o.push("-generate-line-info".into());
    }
    if consensus.value(Opt::InlineInfo).is_some() {
        o.push("-inline-info".into());
    }
    if s.device_c {
        o.push("--device-c".into());
    }
    if s.force_device_c {
        o.push("--force-device-c".into());
    }
    if s.debug {
        o.push("-g".into());
        o.push("-opt=0".into());
    }
    if s.host_info {
        o.push("-has-global-host-info".into());
    }
    let user = &s.xnvvm;
    let own = o.len();
    for u in user {
        if !nvlink_drops(u, &o[..own]) {
            o.push(u.clone());
        }
    }
    if !user.is_empty() {
        // With any -Xnvvm, the math options are spelled out: the user's where given,
        // else the modules' agreed value, else libNVVM's default.
        for (prefix, opt, default) in [
            ("-ftz=", Opt::Ftz, 0),
            ("-prec-div=", Opt::PrecDiv, 1),
            ("-prec-sqrt=", Opt::PrecSqrt, 1),
            ("-fma=", Opt::Fmad, 1),
        ] {
            if !user.iter().any(|u| u.starts_with(prefix)) {
                o.push(format!(
                    "{prefix}{}",
                    consensus.value(opt).unwrap_or(default)
                ));
            }
        }
    }
    // (after the math options, before the host references: read off nvlink 13.5
    // through a logging libNVVM)
    if s.nvvm_latest {
        o.push("-nvvm-version=nvvm-latest".into());
    }
    o.extend(host_ref_options(&s.host_refs));
    o
}

/// Whether nvlink 13.5 leaves the user's `-Xnvvm` value `u` out, `own` being the options
/// it built itself: `-compile-time` always; a switch it sets itself (`-link-lto`, `-g`,
/// `--device-c`, ...) when it is already in `own`; any `-Ofast-compile=` beside its own.
/// Everything else goes through as given, repeats included (`-Xopt` before each pass
/// knob; a repeated `-arch=` or `-maxreg=` is libNVVM's error, as with nvlink). Read off
/// nvlink through a logging libNVVM.
fn nvlink_drops(u: &str, own: &[String]) -> bool {
    const SWITCHES: [&str; 7] = [
        "-link-lto",
        "-generate-line-info",
        "-inline-info",
        "--device-c",
        "--force-device-c",
        "-g",
        "-has-global-host-info",
    ];
    const OFC: &str = "-Ofast-compile=";
    u == "-compile-time"
        || SWITCHES.contains(&u) && own.iter().any(|o| o == u)
        || u.starts_with(OFC) && own.iter().any(|o| o.starts_with(OFC))
}

/// The host-reference lists as libNVVM options (`-host-ref-ek=a,b`), empty lists left
/// out. As nvlink joins them: a comma before an entry only once the text has something,
/// so an empty entry (a damaged table's) leaves no comma at the start, one at the end.
fn host_ref_options(r: &HostRefs) -> Vec<String> {
    let join = |l: &Vec<String>| {
        l.iter().fold(String::new(), |mut t, e| {
            if !t.is_empty() {
                t.push(',');
            }
            t + e
        })
    };
    [
        ("ek", &r.ek),
        ("ik", &r.ik),
        ("ec", &r.ec),
        ("ic", &r.ic),
        ("eg", &r.eg),
        ("ig", &r.ig),
    ]
    .into_iter()
    .filter(|(_, l)| !l.is_empty())
    .map(|(k, l)| format!("-host-ref-{k}={}", join(l)))
    .collect()
}

/// libNVVM's options for a message: those that are not host-reference lists (thousands of
/// names in a Thrust program: a 10 KB line), each list as its option and its count.
fn options_in_short(options: &[String]) -> String {
    let mut out: Vec<String> = Vec::new();
    for o in options {
        match o.split_once('=') {
            Some((name, list)) if name.starts_with("-host-ref") && list.len() > 64 => {
                out.push(format!("{name}=<{} names>", list.split(',').count()));
            }
            _ => out.push(o.clone()),
        }
    }
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> LtoSettings {
        LtoSettings {
            target: Some(Arch::plain(90)),
            device_c: true,
            host_info: true,
            ..Default::default()
        }
    }

    #[test]
    fn split_results_are_cut_at_the_reported_sizes_and_sorted() {
        // (libNVVM's trailing NUL is gone by then: `Program::result` strips it)
        let ptx = b"//b-piece//a-piece//c".to_vec();
        let pieces = split_result(ptx.clone(), &[9, 9, 3]).unwrap();
        assert_eq!(pieces, [&b"//a-piece"[..], b"//b-piece", b"//c"]);
        // lengths that overrun, fall short, overflow or are empty are refused, not trusted
        for bad in [&[9, 9, 5][..], &[9, 9, 2], &[usize::MAX, 2], &[9, 0, 3]] {
            let e = split_result(ptx.clone(), bad).unwrap_err().to_string();
            assert!(e.contains(SPLIT_MISMATCH), "{e}");
        }
    }

    #[test]
    fn split_options_go_where_nvlink_puts_them() {
        let mut s = settings();
        s.split_compile_extended = Some(3);
        s.maxrregcount = Some(64);
        assert_eq!(
            nvvm_options(&s, &Consensus::default()),
            [
                "-arch=compute_90",
                "-link-lto",
                "-split-compile-extended=3",
                "-maxreg=64",
                "--device-c",
                "-has-global-host-info"
            ]
        );
    }

    #[test]
    fn default_list() {
        assert_eq!(
            nvvm_options(&settings(), &Consensus::default()),
            [
                "-arch=compute_90",
                "-link-lto",
                "--device-c",
                "-has-global-host-info"
            ]
        );
    }

    #[test]
    fn xnvvm_spells_out_math_options_and_drops_nvlinks_own() {
        let mut s = settings();
        s.xnvvm = crate::cli::comma_list(&["-prec-div=0".into(), "-foo,-link-lto".into()]);
        assert_eq!(
            nvvm_options(&s, &Consensus::default()),
            [
                "-arch=compute_90",
                "-link-lto",
                "--device-c",
                "-has-global-host-info",
                "-prec-div=0",
                "-foo",
                "-ftz=0",
                "-prec-sqrt=1",
                "-fma=1"
            ]
        );
    }

    #[test]
    fn xnvvm_keeps_repeats_but_of_what_nvlink_adds_itself() {
        let mut s = settings();
        s.debug = true;
        s.ofast_compile = Some("max".into());
        s.xnvvm = crate::cli::comma_list(&[
            "-Xopt,-do-licm=0,-Xopt,-do-remat=0,-g,-opt=0,-Ofast-compile=min".into(),
            "-compile-time,--device-c,--force-device-c,-inline-info,-inline-info".into(),
        ]);
        assert_eq!(
            nvvm_options(&s, &Consensus::default()),
            [
                "-arch=compute_90",
                "-link-lto",
                "-Ofast-compile=max",
                "--device-c",
                "-g",
                "-opt=0",
                "-has-global-host-info",
                "-Xopt",
                "-do-licm=0",
                "-Xopt",
                "-do-remat=0",
                "-opt=0",
                "--force-device-c",
                "-inline-info",
                "-inline-info",
                "-ftz=0",
                "-prec-div=1",
                "-prec-sqrt=1",
                "-fma=1"
            ]
        );
    }

    #[test]
    fn host_tables_are_reversed_and_used_lists_wrapped() {
        let a = ["_Z5saxpy*".to_string()];
        let b = ["m1".to_string(), "m2".to_string()];
        let c = ["k*".to_string()];
        let r = HostRefs::from_tables([
            (".nvHRKE", &a[..]),
            (".nvHRKI", &c[..]),
            (".nvHRKI", &b[..]),
        ]);
        assert_eq!(r.ik, ["m2", "m1", "k*"]);
        assert_eq!(r.ek, ["_Z5saxpy*"]);
        let used = crate::cli::comma_list(&["saxpy,doubler".into(), "zz".into()]);
        let u = HostRefs::from_used(&used, &["calls".into()]);
        assert_eq!(
            host_ref_options(&u),
            [
                "-host-ref-ek=*saxpy*,*doubler*,*zz*",
                "-host-ref-ik=*saxpy*,*doubler*,*zz*",
                "-host-ref-ec=*calls*",
                "-host-ref-ic=*calls*",
                "-host-ref-eg=*calls*",
                "-host-ref-ig=*calls*"
            ]
        );
    }

    /// nvlink 13.5's lists from damaged tables (read off a logging libNVVM): each name
    /// once, where it last appears; a comma only once the text has something.
    #[test]
    fn host_tables_listed_once_and_joined_as_nvlink_joins_them() {
        let t = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let one = |tables: &[(&'static str, Vec<String>)]| {
            let r = HostRefs::from_tables(tables.iter().map(|(s, e)| (*s, e.as_slice())));
            host_ref_options(&r)
        };
        // `\0\0kl*\0\0\0\0\0`, `\0\0kl*\0\0\0kk`, `\0kern_unla*` (past its end)
        assert_eq!(
            one(&[(".nvHRKE", t(&["", "", "kl*", "", "", ""]))]),
            ["-host-ref-ek=kl*"]
        );
        assert_eq!(
            one(&[(".nvHRKE", t(&["", "", "kl*", "", "", "kk"]))]),
            ["-host-ref-ek=kk,,kl*"]
        );
        assert_eq!(
            one(&[(".nvHRKE", t(&["", "kern_unla*"]))]),
            ["-host-ref-ek=kern_unla*,"]
        );
        // two host objects launching one kernel
        assert_eq!(
            one(&[
                (".nvHRKE", t(&["klaunched"])),
                (".nvHRKE", t(&["kern_unlaunched", "klaunched"]))
            ]),
            ["-host-ref-ek=klaunched,kern_unlaunched"]
        );
    }

    #[test]
    fn long_host_reference_lists_are_counted_in_messages() {
        let names: Vec<String> = (0..50).map(|n| format!("_Z6kernel{n}v")).collect();
        let options = vec![
            "-arch=compute_100".to_string(),
            format!("-host-ref-ek={}", names.join(",")),
            "-host-ref-ec=x".to_string(),
        ];
        assert_eq!(
            options_in_short(&options),
            "-arch=compute_100 -host-ref-ek=<50 names> -host-ref-ec=x"
        );
    }
}
