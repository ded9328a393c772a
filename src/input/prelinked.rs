//! Objects an earlier device link already covers. An `nvcc -dlink` output is a host
//! object whose `__nv_module_id` names every module it linked (`def <id>` entries); when
//! such an object is among the inputs, nvlink leaves the host objects with those module
//! ids out of the link: their device code is not linked again and the
//! `--register-link-binaries` file does not list them (nvcc's host stub would otherwise
//! define their `__cudaRegisterLinkedBinary_*` functions a second time). The rule holds
//! whatever the order of the inputs, for an object given twice and inside an archive.
//! It covers only the code nvlink links itself: in an LTO link, an object whose IR goes
//! to libNVVM is linked again and listed (so nvcc's `-dlto` final link with the `-dlink`
//! object fails at the host link with nvlink as well).

use super::{CodeKind, Item, Node};
use std::collections::HashSet;

/// The module ids the `-dlink` objects among `trees` already linked.
fn linked_ids(trees: &[Node]) -> HashSet<String> {
    fn walk(n: &Node, out: &mut HashSet<String>) {
        if let Item::HostObject { prelinked, .. } = &n.item {
            out.extend(prelinked.iter().cloned());
        }
        for c in &n.children {
            walk(c, out);
        }
    }
    let mut out = HashSet::new();
    for t in trees {
        walk(t, &mut out);
    }
    out
}

/// The trees without the host objects (top level or archive members) that a `-dlink`
/// object among them already linked; with `lto`, those holding IR stay. `None` when no
/// input is such an object.
pub fn without_linked(trees: &[Node], lto: bool) -> Option<Vec<Node>> {
    let ids = linked_ids(trees);
    if ids.is_empty() {
        return None;
    }
    let keep = |n: &Node| match &n.item {
        Item::HostObject {
            module_id: Some(m), ..
        } if ids.contains(m) => {
            lto && n
                .codes()
                .iter()
                .any(|(_, c)| matches!(c.kind, CodeKind::Nvvm(_) | CodeKind::Bitcode))
        }
        _ => true,
    };
    let kept = trees
        .iter()
        .filter(|t| keep(t))
        .map(|t| {
            // (a clone shares the bytes: `Bytes` is a view of the mapped file)
            let mut t = t.clone();
            if matches!(t.item, Item::Archive { .. }) {
                t.children.retain(|c| keep(c));
            }
            t
        })
        .collect();
    Some(kept)
}
