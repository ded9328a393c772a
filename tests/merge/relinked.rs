//! The final link of an `-r` output nvlink wrote (what a build that links device code in
//! two steps gives the second step): each test failed before its fix, found by the second
//! sweep on programs nobody here wrote (issue 35). The sources are compiled here with the
//! pinned nvcc; nvlink's `-r` output is linked by both linkers, which must agree byte for
//! byte.

use std::path::{Path, PathBuf};

use super::review::compiled;
use super::{cuda, differential, run};

/// nvlink's `-r` output of `objs` at `sm`, written in `dir`.
fn nvlinks_relocatable(dir: &Path, sm: &str, objs: &[PathBuf]) -> PathBuf {
    let mut a = vec![format!("-arch={sm}"), "-r".to_string()];
    a.extend(objs.iter().map(|o| o.display().to_string()));
    let out = run(&cuda().join("bin/nvlink"), &a, dir);
    assert_eq!(out.code, 0, "nvlink -r at {sm}: {:?}", out.messages);
    let r = dir.join(format!("r_{sm}.o"));
    std::fs::write(&r, out.output.expect("nvlink's -r output")).unwrap();
    r
}

/// Each (label, sm, nvlink's `-r` output) linked by both linkers: the failures.
fn relinks_identical(links: &[(String, String, PathBuf)]) -> Vec<String> {
    let mut failures = Vec::new();
    for (what, sm, r) in links {
        match differential(&[format!("-arch={sm}"), r.display().to_string()]) {
            Ok(true) => {}
            Ok(false) => failures.push(format!("{what} {sm}: equivalent, not identical")),
            Err(e) => failures.push(format!("{what} {sm}:\n    {e}")),
        }
    }
    failures
}

/// Two units' `printf` strings, each unit's a local `$str`: an `-r` output holds both
/// under one name, and at sm_100+ the Mercury symbol table gives each the CUDA object
/// type and `st_other` of its own Mercury symbol (was: the second `$str` matched the
/// first's, so it kept a plain object's type, 1, and `st_other` 0).
#[test]
fn each_units_local_strings_keep_their_mercury_types() {
    let a = "#include <cstdio>\n__global__ void hello(int v) { printf(\"hello %d\\n\", v); }\n";
    let b = "#include <cstdio>\n__global__ void bye(int v) { printf(\"goodbye, %d\\n\", v); }\n";
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for sm in ["sm_90", "sm_100", "sm_120"] {
        let objs = [
            compiled(dir.path(), "hello", a, sm, &[]),
            compiled(dir.path(), "bye", b, sm, &[]),
        ];
        let r = nvlinks_relocatable(dir.path(), sm, &objs);
        links.push(("printf in two units".to_string(), sm.to_string(), r));
    }
    let failures = relinks_identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A kernel whose call tree recurses and, through a callee, allocates: its `-r` record
/// list has neither `CRS_STACK_SIZE` nor `EXTERNS`, and nvlink's final link adds the
/// unknown stack size first, then the list (was: the list, then the stack size).
#[test]
fn a_recursing_kernels_stack_record_comes_before_its_new_externs() {
    let src = "__device__ int depth(int n) { return n < 2 ? n : depth(n - 1) + depth(n - 2); }
__device__ __noinline__ int *make(int n) { return new int[n]; }
__global__ void grow(int *o, int n) { int *p = make(4); p[0] = depth(n); o[0] = p[0]; }
__global__ void walk(int *o) { o[1] = depth(o[2]); }
";
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for sm in ["sm_80", "sm_90", "sm_100", "sm_120"] {
        let objs = [compiled(dir.path(), "grow", src, sm, &[])];
        let r = nvlinks_relocatable(dir.path(), sm, &objs);
        links.push(("recursion and new".to_string(), sm.to_string(), r));
    }
    let failures = relinks_identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
