//! nvJitLink's options, as far as nvlinkrs carries them out. `read` takes a `Create`'s
//! options when every one of them is one nvlinkrs links as nvJitLink does; any other
//! (an unknown or malformed option, `-arch` missing or not `sm_NN`, `-ptx` without
//! `-lto`, `-O0`, `-g` with `-lto`, the math options without `-lto`, an `-Xptxas` value with a comma,
//! `-split-compile` without `-lto`, `-r` with `-ptx`, `-verbose`, `-time`, ...); `-kernels-used`
//! beside libcudadevrt is handed over at `Complete` (`run::link`) makes the link the real library's
//! from `Create` on, so its result code and error log are nvJitLink's own.

use std::ffi::CString;

/// What a link of ours was asked for.
#[derive(Debug, Default, Clone)]
pub struct Options {
    /// `sm_NN`, `sm_NNa`, `sm_NNf`
    pub arch: String,
    pub lto: bool,
    /// `-ptx` (with `-lto`): the linked PTX instead of a cubin
    pub ptx: bool,
    pub no_cache: bool,
    pub debug: bool,
    pub maxrregcount: Option<u32>,
    /// `-r`: a relocatable cubin
    pub relocatable: bool,
    /// `-kernels-used=<name>`, in the order given
    pub kernels_used: Vec<String>,
    /// `-Xptxas=<options>`: options for ptxas, in the order given.
    pub xptxas: Vec<String>,
    /// The math options and `-split-compile` of an `-lto` link (`-ftz=1`...), libNVVM's
    /// as they are.
    pub xnvvm: Vec<String>,
}

/// `sm_NN`, `sm_NNa` or `sm_NNf` of an architecture nvJitLink 13.5 takes, spelled as it
/// prints it (nvJitLink refuses the others at `Create`: `sm_999`, `sm_10`, `sm_90f`...,
/// with codes of its own, so those links are its).
fn is_sm(arch: &str) -> bool {
    use nvlinkrs::arch::{Arch, TargetKind};
    matches!(Arch::parse_target(arch), Some((TargetKind::Sass, a))
        if nvlinkrs::arch::is_known_target(a) && a.to_string() == arch)
}

/// A register count as nvJitLink passes it on unchanged: digits, no sign or leading
/// zero, not 0 (ptxas warns of 0 and of a count given twice, in nvJitLink's info log;
/// `+24` is written into the image's tool note as given).
fn register_count(n: &str) -> Option<u32> {
    let plain = !n.is_empty() && !n.starts_with('0') && n.bytes().all(|b| b.is_ascii_digit());
    plain.then(|| n.parse().ok()).flatten()
}

/// A ptxas option nvlinkrs passes on as nvJitLink does, one that compiles the PTX as
/// given (nvJitLink compiles a PTX input at `AddData`, nvlinkrs at `Complete`: an option
/// that makes ptxas stop or fail, `--version`, a bogus one, would answer `AddData`
/// otherwise, so those links stay nvJitLink's): an optimization level, `-v`, line
/// information, a register limit, the `fmad` and warning switches, each alone (a comma
/// would be one word to nvJitLink's ptxas).
fn ptxas_option(v: &str) -> bool {
    let digits = |n: &str| !n.is_empty() && n.len() < 6 && n.bytes().all(|b| b.is_ascii_digit());
    let boolean = |b: &str| matches!(b, "true" | "false");
    match v.split_once('=') {
        Some(("-maxrregcount" | "--maxrregcount", n)) => digits(n),
        Some(("-fmad" | "--fmad" | "--allow-expensive-optimizations", b)) => boolean(b),
        Some(_) => false,
        None => matches!(
            v,
            "-O0"
                | "-O1"
                | "-O2"
                | "-O3"
                | "-v"
                | "--verbose"
                | "-lineinfo"
                | "--generate-line-info"
                | "-warn-spills"
                | "--warn-on-spills"
                | "-warn-lmem-usage"
                | "--warn-on-local-memory-usage"
                | "-warn-double-usage"
                | "--warn-on-double-precision-use"
        ),
    }
}

/// The options, when nvlinkrs can link with them; `None` hands the link to nvJitLink.
pub fn read(given: &[CString]) -> Option<Options> {
    let mut o = Options::default();
    for opt in given {
        let opt = opt.to_str().ok()?;
        match opt.split_once('=') {
            Some(("-arch", a)) if is_sm(a) && o.arch.is_empty() => o.arch = a.to_string(),
            Some(("-maxrregcount", n)) if o.maxrregcount.is_none() => {
                o.maxrregcount = Some(register_count(n)?)
            }
            // (one option per `-Xptxas`, of those `ptxas_option` lists)
            Some(("-Xptxas", v)) if ptxas_option(v) => o.xptxas.push(v.to_string()),
            Some(("-kernels-used", k)) if !k.is_empty() => o.kernels_used.push(k.to_string()),
            // (libNVVM's threads, 0 one per core, in an `-lto` link: libNVVM's, as
            // nvJitLink hands it on; nvlink's `-split-compile` is ptxas's too, which
            // nvJitLink's is not: its image is the one without, where nvlink's tool note
            // records it)
            Some(("-split-compile", n))
                if !n.is_empty()
                    && n.len() < 10
                    && n.bytes().all(|b| b.is_ascii_digit())
                    && !o.xnvvm.iter().any(|x| x.starts_with("-split-compile=")) =>
            {
                o.xnvvm.push(opt.to_string())
            }
            // (libNVVM's, in an `-lto` link: its images are `-Xnvvm=-ftz=1`'s; without
            // `-lto` the link is nvJitLink's)
            Some(("-ftz" | "-prec-div" | "-prec-sqrt" | "-fma", "0" | "1")) => {
                o.xnvvm.push(opt.to_string())
            }
            Some(_) => return None,
            None => match opt {
                "-lto" => o.lto = true,
                "-ptx" => o.ptx = true,
                "-no-cache" => o.no_cache = true,
                // (ptxas's `-g` for PTX, and a debug link: nvJitLink's images)
                "-g" => o.debug = true,
                "-r" => o.relocatable = true,
                // (nvJitLink's `-lineinfo` is ptxas's, in the PTX's compile and in the
                // LTO link's: its images are `-Xptxas=-lineinfo`'s, byte for byte)
                "-lineinfo" => o.xptxas.push(opt.to_string()),
                // (not `-O3`, nvJitLink's default level: given, it is written into the
                // image's tool note as ptxas' `-O 3`)
                _ => return None,
            },
        }
    }
    // (`-split-compile` and the math options only with `-lto`; `-g` only without:
    // nvJitLink's LTO debug image embeds other PTX than libNVVM's with nvlink's options)
    // (`-r` writes a cubin: with `-ptx` the link is nvJitLink's)
    let lto_only = o.lto || o.xnvvm.is_empty();
    let image = !(o.relocatable && o.ptx);
    (!o.arch.is_empty() && (o.lto || !o.ptx) && lto_only && !(o.lto && o.debug) && image)
        .then_some(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(v: &[&str]) -> Option<Options> {
        read(
            &v.iter()
                .map(|s| CString::new(*s).unwrap())
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn what_is_ours_and_what_is_handed_over() {
        let o = opts(&["-arch=sm_90", "-Xptxas=-O1", "-Xptxas=-v"]).unwrap();
        assert_eq!(o.xptxas, ["-O1", "-v"]);
        let o = opts(&[
            "-arch=sm_90",
            "-lto",
            "-ftz=1",
            "-prec-div=0",
            "-split-compile=4",
        ]);
        assert_eq!(
            o.unwrap().xnvvm,
            ["-ftz=1", "-prec-div=0", "-split-compile=4"]
        );
        assert!(opts(&["-arch=sm_90", "-lto", "-r"]).unwrap().relocatable);
        let o = opts(&["-arch=sm_90", "-kernels-used=a", "-kernels-used=b"]).unwrap();
        assert_eq!(o.kernels_used, ["a", "b"]);
        let o = opts(&["-arch=sm_90a", "-lto", "-ptx", "-maxrregcount=32"]).unwrap();
        assert_eq!(
            (o.arch.as_str(), o.lto, o.ptx, o.maxrregcount),
            ("sm_90a", true, true, Some(32))
        );
        for bad in [
            &["-arch=sm_90", "-bogus"][..],
            &["-arch=sm_XX"],
            &["-arch=compute_90"],
            &[],
            &["-arch=sm_90", "-ptx"],
            &["-arch=sm_90", "-O2"],
            &["-arch=sm_90", "-lto", "-g"],
            &["-arch=sm_90", "-lineinfo=1"],
            &["-arch=sm_90", "-ftz=1"],
            &["-arch=sm_90", "-lto", "-ftz=2"],
            &["-arch=sm_90", "-lto", "-use_fast_math"],
            &["-arch=sm_90", "-split-compile=2"],
            &["-arch=sm_90", "-lto", "-split-compile=x"],
            &[
                "-arch=sm_90",
                "-lto",
                "-split-compile=2",
                "-split-compile=3",
            ],
            &["-arch=sm_90", "-maxrregcount=x"],
            &["-arch=sm_90", "-arch=sm_80"],
            &["-arch=sm_90", "-lto", "-kernels-used="],
            &["-arch=sm_90", "-O3"],
            &["-arch=sm_999"],
            &["-arch=sm_10"],
            &["-arch=sm_90f"],
            &["-arch=sm_80a"],
            &["-arch=sm_090"],
            &["-arch=sm_99999999999999999999"],
            &["-arch=sm_90", "-maxrregcount=+24"],
            &["-arch=sm_90", "-maxrregcount=0"],
            &["-arch=sm_90", "-maxrregcount=024"],
            &["-arch=sm_90", "-maxrregcount=24", "-maxrregcount=40"],
            &["-arch=sm_90", "-Xptxas=-O2,-v"],
            &["-arch=sm_90", "-Xptxas="],
            &["-arch=sm_90", "-Xptxas=--version"],
            &["-arch=sm_90", "-Xptxas=-bogus"],
            &["-arch=sm_90", "-Xptxas=--maxrregcount=x"],
            &["-arch=sm_90", "-lto", "-r", "-ptx"],
        ] {
            assert!(opts(bad).is_none(), "{bad:?}");
        }
    }
}
