//! The command line nvlink records in its own `.note.nv.tkinfo` entry of a merged image:
//! which options, in which order and spelling (read off nvlink 13.5's notes for every
//! option it records). Input and output files are recorded only by a debug link.

use std::path::Path;

use crate::cli::LinkRequest;

/// A path's last component, as nvlink's debug notes record files.
pub fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The note's command line: each option as `-name value ` (a flag: `-name  `), repeated
/// options once with their values joined by commas.
pub fn command_line(req: &LinkRequest) -> String {
    let mut s = String::new();
    let flag = |on: bool, name: &str, s: &mut String| {
        if on {
            *s += &format!("-{name}  ");
        }
    };
    // a debug link (and -verbose-tkinfo=true) records its files too (names only)
    let r = &req.recorded;
    let files = req.debug || r.verbose_tkinfo;
    // (the inputs, the two warning switches, then the output: read off nvlink's notes)
    if files {
        let inputs: Vec<String> = req.inputs.iter().map(|p| file_name(p)).collect();
        s += &format!("{} ", inputs.join(","));
    }
    flag(
        r.suppress_stack_size_warning,
        "suppress-stack-size-warning",
        &mut s,
    );
    flag(r.suppress_arch_warning, "suppress-arch-warning", &mut s);
    if files {
        s += &format!("-o {} ", file_name(&req.output));
    }
    flag(req.debug, "g", &mut s);
    s += &format!("-arch {} ", req.target);
    if let Some(m) = &req.machine {
        s += &format!("-m {m} ");
    }
    if !req.libraries.is_empty() {
        s += &format!("-l {} ", req.libraries.join(","));
    }
    if !req.library_paths.is_empty() {
        let paths: Vec<String> = req
            .library_paths
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        s += &format!("-L {} ", paths.join(","));
    }
    // (a debug link records --register-link-binaries, under an empty option name, by
    // its name only, as it does -time: nvcc gives an absolute path in /tmp)
    if let (true, Some(r)) = (files, &req.register_link_binaries) {
        s += &format!("- {} ", file_name(r));
    }
    flag(req.verbose, "v", &mut s);
    flag(req.verbose2, "v2", &mut s);
    flag(r.disable_warnings, "w", &mut s);
    flag(r.warning_as_error, "Werror", &mut s);
    flag(r.disable_infos, "disable-infos", &mut s);
    flag(req.preserve_relocs, "preserve-relocs", &mut s);
    flag(r.keep_system_libraries, "keep-system-libraries", &mut s);
    if !req.kernels_used.is_empty() {
        s += &format!("-kernels-used {} ", req.kernels_used.join(","));
    }
    if !req.variables_used.is_empty() {
        s += &format!("-variables-used {} ", req.variables_used.join(","));
    }
    if let Some(c) = &req.cpu_arch {
        s += &format!("-cpu-arch {c} ");
    }
    if let (true, Some(t)) = (files, &req.time) {
        s += &format!("-time {} ", file_name(t));
    }
    flag(r.report_arch, "report-arch", &mut s);
    flag(r.extra_warnings, "extrawarn", &mut s);
    if req.lto {
        // recorded as spelled: `-dlto`, or `-lto` for `-lto` / `--link-time-opt`
        flag(
            true,
            if req.lto_spelled_dlto { "dlto" } else { "lto" },
            &mut s,
        );
    }
    // (recorded whenever given, in a link without LTO too)
    if let Some(p) = &req.nvvmpath {
        s += &format!("-nvvmpath {} ", p.display());
    }
    if let Some(n) = req.split_compile {
        s += &format!("-split-compile {n} ");
    }
    if let Some(n) = req.split_compile_extended {
        s += &format!("-split-compile-extended {n} ");
    }
    if let Some(l) = &req.ofast_compile {
        s += &format!("-Ofc {l} ");
    }
    if !req.xptxas.is_empty() {
        s += &format!("-Xptxas {} ", req.xptxas.join(","));
    }
    if !req.xnvvm.is_empty() {
        s += &format!("-Xnvvm {} ", req.xnvvm.join(","));
    }
    if let Some(n) = req.maxrregcount {
        s += &format!("-maxrregcount {n} ");
    }
    match req.dump_callgraph {
        Some(true) => flag(true, "dump-callgraph", &mut s),
        Some(false) => flag(true, "dump-callgraph-no-demangle", &mut s),
        None => {}
    }
    flag(req.ignore_host_info, "ignore-host-info", &mut s);
    flag(r.use_host_info, "use-host-info", &mut s);
    // (`-r` last, whatever came before it on the command line)
    flag(req.relocatable, "r", &mut s);
    s
}
