//! The command line's tests: nvlink's spellings normalized, options parsed into a
//! request, and the options nvlinkrs refuses.

use super::*;

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

#[test]
fn nvcc_dlink_command_lines_parse() {
    // The exact shapes `nvcc -dlink -v` and `nvcc -dlink -dlto -v` print (paths shortened).
    let plain = words(
        "-m64 --arch=sm_90 --register-link-binaries=x.reg.c -Lcu/lib/stubs -Lcu/lib -cpu-arch=X86_64 a.o b.o -lcudadevrt -o x.sm_90.cubin --host-ccbin gcc",
    );
    let (a, w, given) = parse(&plain).unwrap();
    assert!(w.is_empty());
    assert_eq!(a.arch.as_deref(), Some("sm_90"));
    assert_eq!(a.machine.as_deref(), Some("64"));
    assert_eq!(
        a.library_path,
        [PathBuf::from("cu/lib/stubs"), PathBuf::from("cu/lib")]
    );
    assert_eq!(a.library, ["cudadevrt"]);
    assert_eq!(a.inputs, [PathBuf::from("a.o"), PathBuf::from("b.o")]);
    assert_eq!(a.host_ccbin.as_deref(), Some("gcc"));
    assert_eq!(a.cpu_arch.as_deref(), Some("X86_64"));
    assert!(given.iter().any(|g| g == "register-link-binaries"));
    let lto = words(
        "-m64 --arch=sm_90 -Lcu/lib -cpu-arch=X86_64 -dlto -nvvmpath=cu/nvvm al.o bl.o -lcudadevrt -o x.cubin --host-ccbin gcc",
    );
    let (a, _, _) = parse(&lto).unwrap();
    assert!(a.dlto);
    let r = a.request().unwrap();
    assert!(r.lto);
    assert_eq!(r.target.to_string(), "sm_90");
}

#[test]
fn nvlink_spellings() {
    let (a, _, _) = parse(&words("--arch sm_90a -lto -o out -Xptxas -v -ghls a.ltoir")).unwrap();
    assert_eq!(a.arch.as_deref(), Some("sm_90a"));
    assert!(a.link_time_opt);
    assert_eq!(a.xptxas, ["-v"]);
    assert_eq!(a.gen_host_linker_script.as_deref(), Some("lcs-aug"));
    assert_eq!(a.output_file, Some(PathBuf::from("out")));
    let (a, _, _) = parse(&words("-ghls=lcs-abs -arch=sm_80")).unwrap();
    assert_eq!(a.gen_host_linker_script.as_deref(), Some("lcs-abs"));
}

#[test]
fn nvlink_messages_for_bad_command_lines() {
    let msg = |s: &str| match parse(&words(s)).and_then(|(a, _, _)| a.request()) {
        Err(e) => e.message().to_string(),
        Ok(_) => "ok".into(),
    };
    assert_eq!(msg("--bogus a.o"), "Unknown option '-bogus'");
    assert_eq!(
        msg("-arch sm_90 -ox.cubin b.o"),
        "Unknown option 'ox.cubin'"
    );
    assert_eq!(msg("-o x a.o"), "Unknown arch name '(null)'");
    assert_eq!(
        msg("-arch=sm_70 -o x a.o"),
        "Value 'sm_70' is not defined for option 'arch'"
    );
    assert_eq!(
        msg("-arch=sm_90f -o x a.o"),
        "Value 'sm_90f' is not defined for option 'arch'"
    );
    assert_eq!(
        msg("-m32 -arch=sm_90 -o x a.o"),
        "Value '32' is not defined for option 'machine'"
    );
    assert_eq!(
        msg("-arch=sm_90 a.o"),
        "Must specify output file with -o option"
    );
    assert_eq!(
        msg("-arch=sm_90 -o x"),
        "No input files specified; use option --help for more information"
    );
    assert_eq!(
        msg("-arch=sm_90 -o x -lcudadevrt"),
        "No input files specified; use option --help for more information"
    );
    assert_eq!(
        msg("-arch=sm_90 -o x a.o -disable-smem-reservation=maybe"),
        "'maybe': expected true or false"
    );
    assert_eq!(
        msg("-arch=sm_90 -o x a.o -maxrregcount=abc"),
        "'abc': expected a number"
    );
    assert_eq!(
        msg("-arch=lto_90 -o x a.o"),
        "Link target of 'lto_90' is virtual target that is not JIT-able; use 'sm_' target instead"
    );
    assert_eq!(msg("-arch=sm_90 -lto -o x a.o"), "ok");
    assert_eq!(
        msg("-arch=sm_90 -o x -optf /nonexistent/opts a.o"),
        "Could not open options file '/nonexistent/opts'"
    );
    // (`-o ""`: nvlink's words, where clap's were "a value is required")
    let empty = ["-arch=sm_90", "-o", "", "a.o"].map(String::from);
    let e = parse(&empty).err().map(|e| e.message().to_string());
    assert_eq!(e.as_deref(), Some("Could not open output file ''"));
}

#[test]
fn spellings_as_nvlink_takes_them() {
    let msg = |s: &str| match parse(&words(s)).and_then(|(a, _, _)| a.request()) {
        Err(e) => e.message().to_string(),
        Ok(_) => "ok".into(),
    };
    // a short name after one dash, its long name after two; either for the others
    assert_eq!(msg("-arch=sm_90 -o x a.o -debug"), "Unknown option 'debug'");
    assert_eq!(msg("-arch=sm_90 -o x a.o --g"), "Unknown option '-g'");
    assert_eq!(
        msg("-arch=sm_90 -o x a.o --Ofc=max"),
        "Unknown option '-Ofc'"
    );
    assert_eq!(
        msg("--arch=sm_90 -o x a.o --debug -w -dlto -nvvmpath=n"),
        "ok"
    );
    // `-library` is `-l ibrary`, `-machine` is `-m achine`
    let (a, _, _) = parse(&words("-arch=sm_90 -o x a.o -library")).unwrap();
    assert_eq!(a.library, ["ibrary"]);
    assert_eq!(
        msg("-arch=sm_90 -o x a.o -machine"),
        "'achine': expected a number"
    );
    // what CMake and nvcc -shared pass
    let (a, _, given) = parse(&words("--shared --uumn -Xlinker -z --arch=sm_90 -o x a.o")).unwrap();
    assert!(a.shared && a.uumn);
    assert_eq!(a.host_linker_options, ["-z"]);
    refuse_unimplemented(&given).unwrap();
    assert_eq!(
        msg("-arch=sm_90 -o x a.o -o"),
        "argument expected after '-o'"
    );
    assert_eq!(
        msg("-arch=sm_90 -o x a.o -cpu-arch=bogus"),
        "Value 'bogus' is not defined for option 'cpu-arch'"
    );
    assert_eq!(
        msg("-arch=sm_90 -o x a.o -emit-ptx"),
        "Conflicting options '-emit-ptx' and 'no -dlto'"
    );
    // the level of -Ofc may be left out; a negative count is taken
    assert_eq!(msg("-arch=sm_90 -o x a.o -dlto -nvvmpath=n -Ofc"), "ok");
    assert_eq!(msg("-arch=sm_90 -o x a.o -maxrregcount=-3"), "ok");
}

#[test]
fn redefinition_warns_and_last_wins() {
    let (a, w, _) = parse(&words("-arch=sm_90 -o x -arch=sm_80 a.o")).unwrap();
    assert_eq!(a.arch.as_deref(), Some("sm_80"));
    assert_eq!(
        w,
        ["incompatible redefinition for option 'arch', the last value of this option was used"]
    );
}

#[test]
fn options_files_expand_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("opts");
    std::fs::write(&f, "-arch=sm_90\n  \"-o\" 'my out.cubin' -lcudadevrt\n").unwrap();
    let (a, _, _) = parse(&["-optf".to_string(), f.display().to_string(), "a.o".into()]).unwrap();
    assert_eq!(a.arch.as_deref(), Some("sm_90"));
    assert_eq!(a.output_file, Some(PathBuf::from("my out.cubin")));
    assert_eq!(a.library, ["cudadevrt"]);
    assert_eq!(a.inputs, [PathBuf::from("a.o")]);
}

#[test]
fn unimplemented_options_are_refused_by_name() {
    let (_, _, given) = parse(&words("-arch=sm_90 -ghls -o x a.o")).unwrap();
    let e = refuse_unimplemented(&given).unwrap_err();
    assert!(
        e.message()
            .starts_with("option '-gen-host-linker-script' is recognised but not implemented yet"),
        "{}",
        e.message()
    );
    let (_, _, given) = parse(&words("-arch=sm_90 -o x -L. -lcudadevrt a.o -w")).unwrap();
    refuse_unimplemented(&given).unwrap();
}

/// Every `NVLINKRS_*` variable the code outside tests reads (a quoted name in `src/` or
/// the drop-in's `nvjitlink/src/`, up to a file's `#[cfg(test)]` module) has its row in
/// docs/options.md, and the table names no variable nothing reads.
#[test]
fn every_setting_read_is_documented() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut read = std::collections::BTreeSet::new();
    let mut stack = vec![root.join("src"), root.join("nvjitlink/src")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") || p.ends_with("tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            for (i, _) in code.match_indices("\"NVLINKRS_") {
                let name: String = code[i + 1..]
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                    .collect();
                if name.len() > "NVLINKRS_".len() && code[i + 1 + name.len()..].starts_with('"') {
                    read.insert(name);
                }
            }
        }
    }
    let doc = std::fs::read_to_string(root.join("docs/options.md")).unwrap();
    let rows: std::collections::BTreeSet<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`'))
        .map(|(name, _)| name.to_string())
        .collect();
    assert!(read.len() > 20, "found {read:?}");
    let missing: Vec<_> = read.difference(&rows).collect();
    let stale: Vec<_> = rows.difference(&read).collect();
    assert!(
        missing.is_empty(),
        "read but not in docs/options.md: {missing:?}"
    );
    assert!(
        stale.is_empty(),
        "in docs/options.md but read nowhere: {stale:?}"
    );
}
