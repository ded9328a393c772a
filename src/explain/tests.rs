//! The causes `--explain` gives, from the parts of two links.

use super::*;

fn parts(list: &[(Kind, &str, &str)]) -> Vec<Part> {
    list.iter()
        .map(|(k, n, v)| Part {
            kind: *k,
            name: n.to_string(),
            value: v.to_string(),
        })
        .collect()
}

#[test]
fn a_debug_struct_splits_into_its_fields() {
    #[derive(Debug)]
    #[allow(dead_code)]
    struct Inner {
        a: Vec<String>,
    }
    #[derive(Debug)]
    #[allow(dead_code)]
    struct Req {
        name: String,
        inner: Inner,
        opt: Option<(u32, u32)>,
        path: std::path::PathBuf,
    }
    let r = Req {
        name: "a, \"b\" }".into(),
        inner: Inner {
            a: vec!["x,y".into(), "z".into()],
        },
        opt: Some((1, 2)),
        path: "/p, q".into(),
    };
    let f = fields(&format!("{r:?}"));
    assert_eq!(
        f,
        [
            ("name".to_string(), r#""a, \"b\" }""#.to_string()),
            ("inner".into(), r#"Inner { a: ["x,y", "z"] }"#.into()),
            ("opt".into(), "Some((1, 2))".into()),
            ("path".into(), r#""/p, q""#.into()),
        ]
    );
}

#[test]
fn each_difference_is_one_cause() {
    let before = parts(&[
        (Kind::Option, "xptxas", "[]"),
        (Kind::Option, "maxrregcount", "None"),
        (Kind::Setting, "NVLINKRS_FINALIZER", "Auto"),
        (Kind::Tool, "ptxas", "/a/bin/ptxas\t1111"),
        (Kind::Tool, "libdevice", "/a/nvvm/libdevice.bc\t2222"),
        (Kind::Tool, "libNVVM", "/a/nvvm/lib64/libnvvm.so\t3333"),
        (Kind::Input, "x.o", "aa"),
        (Kind::Input, "y.o", "bb"),
        (Kind::Input, "z.o", "cc"),
    ]);
    let now = parts(&[
        (Kind::Option, "xptxas", r#"["-O1"]"#),
        (Kind::Option, "maxrregcount", "None"),
        (Kind::Option, "kernels_used", "[]"),
        (Kind::Tool, "ptxas", "/b/bin/ptxas\t1111"),
        (Kind::Tool, "libdevice", "/a/nvvm/libdevice.bc\t2223"),
        (Kind::Input, "x.o", "aa"),
        (Kind::Input, "y.o", "b2"),
        (Kind::Input, "w.o", "cc"),
        (Kind::Input, "v.o", "dd"),
    ]);
    assert_eq!(
        causes(&before, &now),
        [
            r#"option -Xptxas changed: [] → ["-O1"]"#,
            "option -kernels-used is new: []",
            "environment variable NVLINKRS_FINALIZER is no longer set (was Auto)",
            "tool ptxas moved (the same content): '/a/bin/ptxas' → '/b/bin/ptxas'",
            "tool libdevice changed: '/a/nvvm/libdevice.bc' has another content",
            "tool libNVVM is no longer used (was '/a/nvvm/lib64/libnvvm.so')",
            "input 2 'y.o' changed (its content)",
            "input 3 is now 'w.o' (was 'z.o')",
            "input 4 'v.o' is new",
        ]
    );
    assert!(causes(&now, &now).is_empty());
}

#[test]
fn a_missed_stage_names_its_new_inputs() {
    let mut before = Seen::new();
    let ptxas = before.entry("ptxas".into()).or_default();
    ptxas.entry("ptxas".into()).or_default().insert(1);
    ptxas.entry("options".into()).or_default().insert(2);
    ptxas.entry("PTX".into()).or_default().insert(3);
    let missed = |about: &str, parts: &[(&str, u64)]| Missed {
        stage: "ptxas".into(),
        about: about.into(),
        parts: parts.iter().map(|(l, d)| (l.to_string(), *d)).collect(),
    };
    let lines = stage_causes(
        &before,
        &[
            missed("ptxas 'a.o'", &[("ptxas", 1), ("options", 2), ("PTX", 4)]),
            missed("ptxas 'b.o'", &[("ptxas", 9), ("options", 8), ("PTX", 3)]),
            missed("ptxas 'c.o'", &[("ptxas", 1), ("options", 2), ("PTX", 3)]),
        ],
    );
    assert_eq!(
        lines,
        [
            "ptxas 'a.o' missed: new PTX",
            "ptxas 'b.o' missed: new ptxas and options",
            "ptxas 'c.o' missed, though the last link looked up the same inputs (its entry was evicted, or not stored)",
        ]
    );
}
