//! nvlink's checks of option values and combinations, with its messages: typed values
//! (`'abc': expected a number`, `Value 'x' is not defined for option 'cpu-arch'`), the
//! architecture, and options that need another (`-emit-ptx` only with `-dlto`), in the
//! order nvlink checks them.

use super::LinkArgs;
use crate::arch::{self, Arch, TargetKind};
use crate::diag::{Error, Result};

/// `-cpu-arch` values nvlink 13.5 takes (exactly as spelled).
pub const CPU_ARCHS: &[&str] = &[
    "unknown", "X86", "X86_64", "ARMv7", "AARCH64", "PPC64LE", "RISCV64",
];

/// A value from a fixed list, with nvlink's message otherwise.
pub fn one_of(option: &str, value: Option<&str>, allowed: &[&str]) -> Result<()> {
    match value {
        Some(v) if !allowed.contains(&v) => Err(Error::fatal(format!(
            "Value '{v}' is not defined for option '{option}'"
        ))),
        _ => Ok(()),
    }
}

/// `--cuda-api-version MAJOR.MINOR`, whose major number must be the toolkit's (13).
pub fn cuda_api_version(v: &str) -> Result<()> {
    let parsed = v
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)));
    match parsed {
        None => Err(Error::fatal("--cuda-api-version value cannot be parsed")),
        Some((13, _)) => Ok(()),
        Some(_) => Err(Error::fatal(
            "--cuda-api-version major number must be == toolkit version",
        )),
    }
}

/// Options nvlink takes only with another (`-emit-ptx` only with `-dlto`), in the order
/// nvlink checks them, with its message.
pub fn check_conflicts(a: &LinkArgs) -> Result<()> {
    let conflict =
        |x: &str, y: &str| Err(Error::fatal(format!("Conflicting options '{x}' and '{y}'")));
    if a.gen_host_linker_script.is_some() && !a.inputs.is_empty() {
        return Err(Error::fatal(
            "Input files are not allowed with -ghls option; use --help for more information",
        ));
    }
    if a.suppress_debug_info && !a.debug {
        return conflict("-suppress-debug-info", "no -g");
    }
    let lto = a.link_time_opt || a.dlto;
    // (-r implies -force-partial-lto, and nvlink names that option in the conflict)
    if (a.force_partial_lto || a.relocatable_link) && a.force_whole_lto && lto {
        return conflict("-force-partial-lto", "-force-whole-lto");
    }
    for (given, name) in [
        (a.force_partial_lto, "-force-partial-lto"),
        (a.force_whole_lto, "-force-whole-lto"),
        (a.nvvm_latest, "-nvvm-latest"),
        (a.emit_ptx, "-emit-ptx"),
        (a.ofast_compile.is_some(), "--Ofast-compile"),
    ] {
        if given && !lto {
            return conflict(name, "no -dlto");
        }
    }
    if let Some(level) = &a.ofast_compile
        && !["", "0", "min", "mid", "max"].contains(&level.as_str())
    {
        return Err(Error::fatal(
            "Invalid argument for option '--Ofast-compile'",
        ));
    }
    if let Some(v) = &a.cuda_api_version {
        cuda_api_version(v)?;
    }
    // nvlinkrs' own: a prelinked IR library comes out of a relocatable LTO link only
    if a.emit_ltoir && !(lto && a.relocatable_link) {
        return Err(Error::fatal(
            "option '--emit-ltoir' needs -lto (or -dlto) and -r: it writes the linked LTO IR of a relocatable link",
        ));
    }
    if a.emit_ltoir && (a.emit_ptx || a.debug || a.gen_host_linker_script.is_some()) {
        return Err(Error::fatal(
            "option '--emit-ltoir' writes LTO IR: -emit-ptx and -g cannot go with it",
        ));
    }
    if a.emit_ltoir {
        refuse_with_emit_ltoir(a)?;
    }
    Ok(())
}

/// `--emit-ltoir` links IR and compiles nothing: the options of libNVVM's and ptxas's
/// compile, of the kernels kept and of the partial link have nothing to act on, and a
/// stored option a later link would take from the library is one nvlink ignores (the
/// consensus, as measured), so each is refused by name rather than ignored; the link
/// that compiles the library takes them.
fn refuse_with_emit_ltoir(a: &LinkArgs) -> Result<()> {
    for (given, name) in [
        (!a.kernels_used.is_empty(), "-kernels-used"),
        (!a.variables_used.is_empty(), "-variables-used"),
        (a.ignore_host_info, "-ignore-host-info"),
        (!a.xnvvm.is_empty(), "-Xnvvm"),
        (!a.xptxas.is_empty(), "-Xptxas"),
        (a.maxrregcount.is_some(), "-maxrregcount"),
        (a.ofast_compile.is_some(), "-Ofast-compile"),
        (a.split_compile.is_some(), "-split-compile"),
        (
            a.split_compile_extended.is_some(),
            "-split-compile-extended",
        ),
        (a.dump_callgraph, "-dump-callgraph"),
        (a.dump_callgraph_no_demangle, "-dump-callgraph-no-demangle"),
        (a.force_partial_lto, "-force-partial-lto"),
    ] {
        if given {
            return Err(Error::fatal(format!(
                "option '{name}' is not carried out by '--emit-ltoir', which links IR and compiles nothing (give it to the link that compiles the library); refusing rather than ignoring it"
            )));
        }
    }
    Ok(())
}

pub fn bool_value(v: &str) -> Result<bool> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(Error::fatal(format!("'{v}': expected true or false"))),
    }
}

/// A number as nvlink reads one: a signed integer.
pub fn int_value(v: &str) -> Result<i64> {
    v.parse()
        .map_err(|_| Error::fatal(format!("'{v}': expected a number")))
}

/// A count: nvlink takes a negative one and does nothing with it (read as not given).
pub fn number_value(v: &str) -> Result<Option<u32>> {
    Ok(u32::try_from(int_value(v)?).ok())
}

/// `-arch`'s value: the target kind and architecture, with nvlink's message otherwise.
pub fn target(arch_s: &str) -> Result<(TargetKind, Arch)> {
    Arch::parse_target(arch_s)
        .filter(|(_, a)| arch::is_known_target(*a))
        .ok_or_else(|| Error::fatal(format!("Value '{arch_s}' is not defined for option 'arch'")))
}
