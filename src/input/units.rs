//! The one walk over the input trees that every link phase shares: the units of device
//! code (a top-level input, or an archive member at any depth) in input order, each with
//! whether it came out of libcudadevrt (an archive holding the device runtime's object,
//! `super::is_device_runtime`, whose members inherit it), and the rules for what a host object gives: its module id and
//! host-reference tables, whether it holds relocatable device code (`__nv_relfatbin`),
//! and which of its device code a link reads (not the whole-program `.nv_fatbin`).

use super::{Code, Item, Node};

/// One unit of device code as a link sees it.
#[derive(Clone, Copy, Debug)]
pub struct Unit<'a> {
    pub node: &'a Node,
    /// Inside libcudadevrt (the archive or one it contains).
    pub cudadevrt: bool,
}

/// The units of `trees`, in input order: archives are opened (their members are the
/// units), inputs nvlink skips are left out.
pub fn units(trees: &[Node]) -> Vec<Unit<'_>> {
    fn walk<'a>(n: &'a Node, cudadevrt: bool, out: &mut Vec<Unit<'a>>) {
        match &n.item {
            Item::Archive { cudadevrt: c, .. } => {
                for ch in &n.children {
                    walk(ch, cudadevrt || *c, out);
                }
            }
            Item::Ignored(_) => {}
            _ => out.push(Unit { node: n, cudadevrt }),
        }
    }
    let mut out = Vec::new();
    for t in trees {
        walk(t, false, &mut out);
    }
    out
}

/// A host object's contribution besides device code.
#[derive(Clone, Debug)]
pub struct HostInfo {
    pub origin: String,
    pub module_id: Option<String>,
    pub host_refs: Vec<(&'static str, Vec<String>)>,
    pub cudadevrt: bool,
    /// Whether it holds relocatable device code (`__nv_relfatbin`); a host object without
    /// (plain host code, a whole-program `nvcc -c` object, libcudart_static's members)
    /// may refer to any device symbol, as far as nvlink can tell.
    pub relocatable: bool,
}

/// The host objects with relocatable device code among the inputs (their module ids and
/// host-reference tables), in order; whole-program objects take no part.
pub fn hosts(trees: &[Node]) -> Vec<HostInfo> {
    units(trees)
        .into_iter()
        .filter_map(|u| u.host())
        .filter(|h| h.relocatable)
        .collect()
}

impl<'a> Unit<'a> {
    pub fn is_host_object(&self) -> bool {
        matches!(self.node.item, Item::HostObject { .. })
    }

    /// What a host object gives besides device code; `None` for other units.
    pub fn host(&self) -> Option<HostInfo> {
        let Item::HostObject {
            module_id,
            host_refs,
            ..
        } = &self.node.item
        else {
            return None;
        };
        Some(HostInfo {
            origin: self.node.origin.clone(),
            module_id: module_id.clone(),
            host_refs: host_refs.clone(),
            cudadevrt: self.cudadevrt,
            relocatable: self.relocatable(),
        })
    }

    /// Whether a host object carries relocatable device code (`__nv_relfatbin`, what
    /// `-rdc`/`-dc` objects have), as opposed to whole-program code alone.
    pub fn relocatable(&self) -> bool {
        self.node.children.iter().any(|ch| {
            matches!(
                ch.item,
                Item::Container {
                    section: Some("__nv_relfatbin"),
                    ..
                }
            )
        })
    }

    /// The device code of the unit that a link reads: everything but the whole-program
    /// containers of a host object (its `.nv_fatbin`; relocatable code is in
    /// `__nv_relfatbin`).
    pub fn linked_codes(&self) -> Vec<(&'a str, &'a Code)> {
        let n = self.node;
        if !self.is_host_object() {
            return n.codes();
        }
        n.children
            .iter()
            .filter(|ch| {
                !matches!(
                    ch.item,
                    Item::Container {
                        section: Some(".nv_fatbin"),
                        ..
                    }
                )
            })
            .flat_map(|ch| ch.codes())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::Arch;
    use crate::input::CodeKind;

    fn node(origin: &str, item: Item, children: Vec<Node>) -> Node {
        Node {
            origin: origin.into(),
            size: 0,
            item,
            children,
        }
    }
    fn cubin(origin: &str, sm: u32) -> Node {
        let code = Code {
            kind: CodeKind::Cubin,
            arch: Some(Arch::plain(sm)),
            member: None,
            base: 0,
            raw: crate::bytes::Bytes::from_static(b""),
            cache: None,
        };
        node(origin, Item::Code(code), vec![])
    }
    fn archive(origin: &str, cudadevrt: bool, children: Vec<Node>) -> Node {
        let item = Item::Archive {
            thin: false,
            cudadevrt,
        };
        node(origin, item, children)
    }
    fn container(section: &'static str, code: Node) -> Node {
        let item = Item::Container {
            section: Some(section),
            offset: 0,
            version: 1,
            body_size: 0,
        };
        node(section, item, vec![code])
    }
    fn host(origin: &str, id: &str, children: Vec<Node>) -> Node {
        let item = Item::HostObject {
            module_id: Some(id.into()),
            prelinked: vec![],
            wrapper_version: None,
            host_refs: vec![(".nvHRKE", vec![format!("k_{id}")])],
        };
        node(origin, item, children)
    }

    #[test]
    fn archives_are_opened_and_libcudadevrt_is_inherited() {
        let trees = [
            cubin("a.cubin", 90),
            archive(
                "libcudadevrt.a",
                true,
                vec![
                    cubin("d1", 90),
                    archive("inner.a", false, vec![cubin("d2", 90)]),
                ],
            ),
            archive("libx.a", false, vec![cubin("x1", 90)]),
            node("skipped.so", Item::Ignored("host".into()), vec![]),
        ];
        let got: Vec<(&str, bool)> = units(&trees)
            .iter()
            .map(|u| (u.node.origin.as_str(), u.cudadevrt))
            .collect();
        assert_eq!(
            got,
            [
                ("a.cubin", false),
                ("d1", true),
                ("d2", true),
                ("x1", false)
            ]
        );
    }

    #[test]
    fn host_objects_give_tables_and_only_their_relocatable_code() {
        let rdc = host(
            "rdc.o",
            "m1",
            vec![
                container("__nv_relfatbin", cubin("rdc.o:sm_90", 90)),
                container(".nv_fatbin", cubin("rdc.o:sm_80", 80)),
            ],
        );
        let whole = host(
            "whole.o",
            "m2",
            vec![container(".nv_fatbin", cubin("whole.o:sm_90", 90))],
        );
        let trees = [rdc, archive("libh.a", false, vec![whole])];
        let all = units(&trees);
        let linked: Vec<Vec<&str>> = all
            .iter()
            .map(|u| u.linked_codes().iter().map(|(o, _)| *o).collect())
            .collect();
        assert_eq!(linked, [vec!["rdc.o:sm_90"], vec![]]);
        let infos: Vec<(String, bool)> = all
            .iter()
            .filter_map(|u| u.host())
            .map(|h| (h.origin, h.relocatable))
            .collect();
        assert_eq!(infos, [("rdc.o".into(), true), ("whole.o".into(), false)]);
        let hosts = hosts(&trees);
        assert_eq!(hosts.len(), 1);
        assert_eq!(hosts[0].module_id.as_deref(), Some("m1"));
        assert_eq!(hosts[0].host_refs[0].1, ["k_m1"]);
        // a unit that is not a host object reads all its code
        assert_eq!(units(&[cubin("c", 75)])[0].linked_codes().len(), 1);
    }

    #[test]
    fn libcudadevrt_is_known_by_its_module_id_not_its_name() {
        let devrt = "_0afad4c0_22_cuda_device_runtime_cu_f78b5b52_735892";
        let member = |id: &str| host("cuda_device_runtime.o", id, vec![]);
        // nvJitLink's inputs reach the drop-in as in<N>.a
        assert!(super::super::is_device_runtime(&[member(devrt)]));
        assert!(super::super::is_device_runtime(&[archive(
            "in1.a:inner.a",
            true,
            vec![]
        )]));
        assert!(!super::super::is_device_runtime(&[member(
            "_0afad4c0_5_a_cu_1"
        )]));
        assert!(!super::super::is_device_runtime(&[cubin(
            "libcudadevrt.a:x.cubin",
            90
        )]));
    }
}
