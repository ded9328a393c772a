//! The functions the driver provides, which a link leaves undefined (`vprintf`, the
//! device-graph calls, ...), against nvlink's own answer: a kernel calls every candidate
//! name, and both linkers must accept and refuse the same ones. The candidates come from
//! where new ones would appear, not from a list kept here: every `cuda*`/`cnp*` name the
//! nvlink binary holds, and every function the device runtime header declares.

use std::collections::BTreeSet;
use std::process::Command;

use super::{cuda, differential};

/// The NUL-terminated strings of `data` that look like C identifiers starting with one
/// of `prefixes` followed by an upper-case letter (`cudaGraphLaunch`, `cnpGetDevice`).
fn identifiers(data: &[u8], prefixes: &[&str]) -> BTreeSet<String> {
    data.split(|&b| b == 0)
        .filter_map(|s| std::str::from_utf8(s).ok())
        .filter(|s| s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        .filter(|s| {
            prefixes.iter().any(|p| {
                s.strip_prefix(p)
                    .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_uppercase()))
            })
        })
        .map(str::to_string)
        .collect()
}

/// The functions `cuda_device_runtime_api.h` declares or defines (`cudaGraphLaunch(`,
/// `__cudaCDP2Malloc(`), as the identifiers before a `(` in its declarations.
fn header_functions() -> BTreeSet<String> {
    let text = std::fs::read_to_string(cuda().join("include/cuda_device_runtime_api.h")).unwrap();
    let mut out = BTreeSet::new();
    for line in text.lines().filter(|l| l.contains("__device__")) {
        for (at, _) in line.match_indices('(') {
            let head = &line[..at];
            let start = head
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(0, |i| i + 1);
            let name = &head[start..];
            if name.starts_with("cuda") || name.starts_with("__cudaCDP2") {
                out.insert(name.to_string());
            }
        }
    }
    out
}

/// PTX of one kernel calling each of `names` as an external function.
fn calls_ptx(arch: &str, names: &[String]) -> String {
    let mut p = format!(".version 9.0\n.target {arch}\n.address_size 64\n");
    for n in names {
        p += &format!(".extern .func (.param .b32 r) {n} (.param .b64 p0);\n");
    }
    p += ".visible .entry calls_all(.param .u64 kp)\n{\n  .reg .b64 %rd<2>; .reg .b32 %r<2>;\n";
    p += "  ld.param.u64 %rd1, [kp];\n";
    for n in names {
        p += &format!(
            "  {{ .param .b64 p0; st.param.b64 [p0], %rd1; .param .b32 r; \
             call.uni (r), {n}, (p0); ld.param.b32 %r1, [r]; st.global.u32 [%rd1], %r1; }}\n"
        );
    }
    p + "  ret;\n}\n"
}

/// The names nvlink reports as undefined references in `messages`.
fn refused(messages: &[String]) -> BTreeSet<String> {
    messages
        .iter()
        .filter_map(|m| m.strip_prefix("nvlink error   : Undefined reference to '"))
        .filter_map(|m| m.split('\'').next())
        .map(str::to_string)
        .collect()
}

/// Every candidate name called from one kernel, at sm_80, sm_90, sm_100 and sm_120: the
/// same exit code and messages as nvlink (the same names refused), and with the refused
/// names left out, both link, to byte-identical images. The candidates: the `cuda*` and
/// `cnp*` names in the nvlink binary (where nvlink 13.5 keeps its table of the driver's
/// functions), the functions of the device runtime header, the C library names nvlink
/// knows, and names that look like them but are not the driver's. The device-graph calls
/// (`cudaGraphSetConditional`, ...) were undefined references here.
#[test]
fn driver_functions_as_nvlink_accepts_them() {
    let binary = std::fs::read(cuda().join("bin/nvlink")).unwrap();
    let mut names = identifiers(&binary, &["cuda", "cnp"]);
    for graph in ["cudaGraphSetConditional", "cudaGraphKernelNodeUpdatesApply"] {
        assert!(names.contains(graph), "{graph} is not in the nvlink binary");
    }
    names.extend(header_functions());
    names.extend(
        [
            "vprintf",
            "malloc",
            "free",
            "vfprintf",
            "__assertfail",
            "__profile",
            "printf",
            "fprintf",
            "__cuda_syscall_anything",
            "__cuda_syscal",
            "cnpFoo",
            "cudaGraphFoo",
            "cudaSubgridFoo",
        ]
        .map(String::from),
    );
    let names: Vec<String> = names.into_iter().collect();
    let dir = tempfile::tempdir().unwrap();
    for arch in ["sm_80", "sm_90", "sm_100", "sm_120"] {
        // (ptxas refuses a call to cudaDeviceSynchronize from sm_90 on)
        let names: Vec<String> = names
            .iter()
            .filter(|n| arch == "sm_80" || *n != "cudaDeviceSynchronize")
            .cloned()
            .collect();
        let link = |names: &[String], tag: &str| -> Vec<String> {
            let ptx = dir.path().join(format!("{tag}_{arch}.ptx"));
            let cubin = dir.path().join(format!("{tag}_{arch}.cubin"));
            std::fs::write(&ptx, calls_ptx(arch, names)).unwrap();
            let ok = Command::new(cuda().join("bin/ptxas"))
                .args([&format!("-arch={arch}"), "-c"])
                .arg(&ptx)
                .arg("-o")
                .arg(&cubin)
                .status()
                .unwrap()
                .success();
            assert!(ok, "ptxas {tag} {arch}");
            vec![format!("-arch={arch}"), cubin.display().to_string()]
        };
        let all = link(&names, "all");
        let nv = super::run(&cuda().join("bin/nvlink"), &all, dir.path());
        let rs = super::run(&super::nvlinkrs(), &all, dir.path());
        assert_eq!(nv.code, 255, "{arch}: nvlink refuses some");
        assert_eq!(
            (rs.code, &rs.messages),
            (nv.code, &nv.messages),
            "{arch}: every candidate"
        );
        let no = refused(&nv.messages);
        for driver in ["cudaGraphLaunch", "cudaGraphKernelNodeSetParam", "vprintf"] {
            assert!(!no.contains(driver), "{arch}: nvlink refuses {driver}");
        }
        assert!(
            no.contains("cudaGraphFoo") && no.contains("printf"),
            "{arch}"
        );
        let accepted: Vec<String> = names.iter().filter(|n| !no.contains(*n)).cloned().collect();
        let a = link(&accepted, "accepted");
        match differential(&a) {
            Ok(true) => {}
            Ok(false) => panic!("{arch}: the accepted names: not byte-identical"),
            Err(d) => panic!("{arch}: the accepted names: {d}"),
        }
    }
}
