//! `nvlinkrs inspect FILE...`: every input opened down to its device code, printed as a
//! readable tree, or with `--json` as one object whose `device_code` list holds every
//! piece of device code (kind, arch, uncompressed size, origin, and what it contains).

use rayon::prelude::*;
use serde_json::{Value, json};

use crate::diag::Result;
use crate::elf::{self, DeviceSummary};
use crate::input::{Code, CodeKind, Item, Node};
use crate::ir::{self, container};
use crate::lto;

/// What one piece of device code holds, computed from its (uncompressed) bytes.
pub struct Detail {
    pub size: u64,
    pub json: Value,
    pub lines: Vec<String>,
}

fn elf_detail(s: &DeviceSummary) -> (Value, Vec<String>) {
    let kernels: Vec<&str> = s.kernels().map(|k| k.name.as_str()).collect();
    let functions: Vec<&str> = s
        .symbols
        .iter()
        .filter(|k| k.is_function() && !k.is_kernel())
        .map(|k| k.name.as_str())
        .collect();
    let variables: Vec<&str> = s
        .symbols
        .iter()
        .filter(|k| k.is_variable())
        .map(|k| k.name.as_str())
        .collect();
    let sections: Vec<Value> = s
        .sections
        .iter()
        .skip(1)
        .map(|x| json!({"name": x.name, "type": x.ty, "size": x.size}))
        .collect();
    let j = json!({
        "type": s.type_name(), "e_flags": format!("{:#010x}", s.e_flags), "arch": s.arch.to_string(),
        "osabi": s.osabi, "abi_version": s.abi_version, "virtual_arch": s.virtual_sm.map(|v| format!("compute_{v}")),
        "cuda_version": s.cuda_version, "debug_level": s.debug_level,
        "sections": sections, "kernels": kernels, "functions": functions, "variables": variables,
    });
    let mut l = vec![format!(
        "{}, e_flags {:#010x} ({}{}), {} sections, {} symbols",
        s.type_name(),
        s.e_flags,
        s.arch,
        s.virtual_sm
            .map(|v| format!(" from compute_{v}"))
            .unwrap_or_default(),
        s.sections.len().saturating_sub(1),
        s.symbols.len()
    )];
    if !kernels.is_empty() {
        l.push(format!("kernels: {}", kernels.join(", ")));
    }
    if !functions.is_empty() {
        l.push(format!("functions: {}", functions.join(", ")));
    }
    if !variables.is_empty() {
        l.push(format!("variables: {}", variables.join(", ")));
    }
    (j, l)
}

/// Reads what a piece of device code contains. Malformed content is an error.
pub fn detail(origin: &str, code: &Code) -> Result<Detail> {
    let bytes = code.bytes(origin)?;
    let size = bytes.len() as u64;
    let (json, lines) = match code.kind {
        CodeKind::Cubin => {
            let (j, l) = elf_detail(&elf::device_summary(&bytes, origin)?);
            (json!({ "elf": j }), l)
        }
        CodeKind::Ptx => {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]);
            let ver = text
                .lines()
                .find(|l| l.trim_start().starts_with(".version"))
                .map(|l| l.trim().to_string());
            let target = text
                .lines()
                .find(|l| l.trim_start().starts_with(".target"))
                .map(|l| l.trim().to_string());
            let l = vec![
                format!(
                    "{} {}",
                    ver.clone().unwrap_or_default(),
                    target.clone().unwrap_or_default()
                )
                .trim()
                .to_string(),
            ];
            (json!({"ptx": {"version": ver, "target": target}}), l)
        }
        CodeKind::Nvvm(_) if ir::is_bitcode(&bytes) => bitcode_detail(origin, &bytes)?,
        CodeKind::Nvvm(_) => {
            let (h, warnings) = container::parse(&bytes, origin)?;
            if let Some(c) = &h.nvvm {
                return Ok(Detail {
                    size,
                    json: nvvm_json(c),
                    lines: c.lines(),
                });
            }
            let tags: Vec<Value> = h.tags.iter().map(|(t, v)| json!([t, v])).collect();
            let j = json!({"ltoir": {
                "format": h.format.name(), "version": format!("{}.{}", h.version.0, h.version.1),
                "nvvm_ir_version": format!("{}.{}", h.nvvm_ir_version.0, h.nvvm_ir_version.1),
                "debug_version": format!("{}.{}", h.debug_version.0, h.debug_version.1),
                "llvm_version": format!("{}.{}", h.llvm_version.0, h.llvm_version.1),
                "ir_level": h.ir_level, "arch": h.arch().map(|a| a.to_string()), "tags": tags,
                "key": h.key.map(|k| format!("{k:#010x}")), "ir_offset": h.ir_offset, "ir_size": h.ir_size,
                "payload": if h.plain_bitcode { "llvm bitcode" } else { "obfuscated" }, "warnings": warnings,
            }});
            let mut l = vec![format!(
                "{} {}.{}, NVVM IR {}.{}, debug {}.{}, LLVM {}.{}, IR level {}, target {}, key {}, IR {} bytes at {:#x} ({})",
                h.format.name(),
                h.version.0,
                h.version.1,
                h.nvvm_ir_version.0,
                h.nvvm_ir_version.1,
                h.debug_version.0,
                h.debug_version.1,
                h.llvm_version.0,
                h.llvm_version.1,
                h.ir_level,
                h.arch()
                    .map(|a| a.to_string())
                    .unwrap_or_else(|| "?".into()),
                h.key
                    .map(|k| format!("{k:#010x}"))
                    .unwrap_or_else(|| "-".into()),
                h.ir_size,
                h.ir_offset,
                if h.plain_bitcode {
                    "plain LLVM bitcode"
                } else {
                    "obfuscated"
                }
            )];
            l.extend(warnings.into_iter().map(|w| format!("warning: {w}")));
            // what `--emit-ltoir` stored for a later link (nothing in cicc's containers)
            let mut j = j;
            // (a damaged one shown as the warning a link's error would be)
            let stored_warning = |e: crate::diag::Error, l: &mut Vec<String>| {
                l.push(format!("warning: {}; a link refuses it", e.message()));
            };
            match lto::staged::stored_consensus(&bytes, origin) {
                Ok(Some(c)) => {
                    l.push(format!(
                        "option consensus (nvlinkrs tag 0x4e4c): {}",
                        c.trim_end()
                    ));
                    j["ltoir"]["consensus"] = json!(c);
                }
                Ok(None) => {}
                Err(e) => stored_warning(e, &mut l),
            }
            let refs = lto::staged::stored_host_refs(&bytes, origin).unwrap_or_else(|e| {
                stored_warning(e, &mut l);
                Vec::new()
            });
            for (section, entries) in &refs {
                l.push(format!(
                    "host references {section} (nvlinkrs tag 0x4e48): {}",
                    entries.join(" ")
                ));
            }
            if !refs.is_empty() {
                j["ltoir"]["host_refs"] = json!(refs);
            }
            (j, l)
        }
        CodeKind::Bitcode => bitcode_detail(origin, &bytes)?,
        CodeKind::Other(n) => (
            json!({"unknown_kind": n}),
            vec![format!("fatbin member kind {n}: not read by this version")],
        ),
    };
    Ok(Detail { size, json, lines })
}

/// An NVVM container for `inspect --json`: the header, each option pair by name (a blob
/// tag with its data's place), the payload.
fn nvvm_json(c: &ir::nvvm_container::NvvmContainer) -> Value {
    let pair = |(a, b): (u8, u8)| format!("{a}.{b}");
    let tags: Vec<Value> = c
        .tags
        .iter()
        .map(|t| {
            json!({"tag": t.tag, "name": t.name(), "value": t.value,
                   "blob": t.blob.map(|(at, n)| json!({"offset": at, "size": n}))})
        })
        .collect();
    json!({"nvvm_container": {
        "format": c.format_name(), "magic_offset": c.base, "version": pair(c.version),
        "nvvm_ir_version": pair(c.nvvm_ir_version), "debug_version": pair(c.debug_version),
        "llvm_version": pair(c.llvm_version), "ir_level": c.ir_level,
        "ir_level_name": c.ir_level_name(), "target": c.target().map(|a| a.to_string()),
        "header_size": c.header_size, "scalar_fields_end": c.scalar_end,
        "blob_data_end": c.blob_end, "tags": tags, "ir_offset": c.ir_offset,
        "ir_size": c.ir_size, "payload": match c.payload {
            ir::nvvm_container::Payload::Bitcode => json!("llvm bitcode"),
            ir::nvvm_container::Payload::Compressed(a) => json!({"compressed": a}),
        },
        "linkable": false, "warnings": c.warnings,
    }})
}

fn bitcode_detail(origin: &str, bytes: &[u8]) -> Result<(Value, Vec<String>)> {
    let s = lto::summarize_bitcode(bytes, origin)?;
    let l = vec![
        format!(
            "LLVM bitcode, triple {}, {} declarations",
            s.triple, s.declarations
        ),
        format!("data layout: {}", s.data_layout),
        format!("kernels: {}", s.kernels.join(", ")),
        format!("functions: {}", s.functions.join(", ")),
    ];
    Ok((json!({ "bitcode": s }), l))
}

fn describe(node: &Node) -> String {
    match &node.item {
        Item::Archive { thin, cudadevrt } => format!(
            "{}archive{}, {} members",
            if *thin { "thin " } else { "" },
            if *cudadevrt { " (libcudadevrt)" } else { "" },
            node.children.len()
        ),
        Item::HostObject {
            module_id,
            prelinked,
            wrapper_version,
            host_refs,
        } => {
            let mut s = String::from("host object");
            if node.children.is_empty() {
                s += " without device code (nvlink skips it)";
            }
            if !prelinked.is_empty() {
                s += &format!(", links modules {}", prelinked.join(" "));
            } else if let Some(m) = module_id {
                s += &format!(", module id {m}");
            }
            if let Some(v) = wrapper_version {
                s += &format!(", fatbin wrapper v{v}");
            }
            for (sec, entries) in host_refs {
                s += &format!(", {sec} {:?}", entries.join(" "));
            }
            s
        }
        Item::Container {
            section,
            offset,
            version,
            body_size,
        } => format!(
            "fatbin container{} at {offset:#x}, version {version}, {} bytes, {} members",
            section.map(|s| format!(" in {s}")).unwrap_or_default(),
            16 + body_size,
            node.children.len()
        ),
        Item::Code(c) => code_line(c),
        Item::Ignored(why) => format!("ignored: {why}"),
    }
}

fn code_line(c: &Code) -> String {
    let arch = c.arch.map(|a| a.to_string()).unwrap_or_else(|| "-".into());
    let mut s = format!("{} {arch}", c.kind.json_name());
    if let Some(m) = &c.member {
        s += &format!(
            " code version [{},{}], flags {:#x}, {} bytes stored ({})",
            m.code_version.0,
            m.code_version.1,
            m.flags,
            m.payload.len(),
            m.compression().name()
        );
        if let Some(o) = m.option_text() {
            s += &format!(", options {o:?}");
        }
        if let Some(i) = &m.identifier {
            s += &format!(", identifier {i:?}");
        }
    }
    s
}

/// The details of every code leaf of every tree, computed in parallel, in tree order.
fn all_details(trees: &[Node]) -> Result<Vec<Detail>> {
    let codes: Vec<(&str, &Code)> = trees.iter().flat_map(|t| t.codes()).collect();
    codes.par_iter().map(|(o, c)| detail(o, c)).collect()
}

pub fn render_json(trees: &[Node]) -> Result<Value> {
    let mut details = all_details(trees)?.into_iter();
    let mut list = Vec::new();
    for t in trees {
        for (origin, c) in t.codes() {
            let d = details.next().expect("one detail per code");
            let mut o = serde_json::Map::new();
            o.insert("kind".into(), json!(c.kind.json_name()));
            o.insert("arch".into(), json!(c.arch.map(|a| a.to_string())));
            o.insert("size".into(), json!(d.size));
            o.insert("origin".into(), json!(origin));
            if let Some(m) = &c.member {
                o.insert("container_offset".into(), json!(c.base));
                o.insert("member_offset".into(), json!(c.base + m.offset));
                o.insert("compression".into(), json!(m.compression().name()));
                o.insert("stored_size".into(), json!(m.payload.len()));
                o.insert(
                    "code_version".into(),
                    json!([m.code_version.0, m.code_version.1]),
                );
                o.insert("flags".into(), json!(format!("{:#x}", m.flags)));
                o.insert("options".into(), json!(m.option_text()));
                o.insert("identifier".into(), json!(m.identifier));
            }
            if let Value::Object(extra) = d.json {
                o.extend(extra);
            }
            list.push(Value::Object(o));
        }
    }
    let inputs: Vec<Value> = trees.iter().map(tree_json).collect();
    Ok(json!({ "inputs": inputs, "device_code": list }))
}

fn tree_json(n: &Node) -> Value {
    json!({
        "origin": n.origin,
        "size": n.size,
        "what": describe(n),
        "children": n.children.iter().map(tree_json).collect::<Vec<_>>(),
    })
}

pub fn render_text(trees: &[Node]) -> Result<String> {
    let details = all_details(trees)?;
    let mut out = String::new();
    let mut i = 0;
    for t in trees {
        text_node(t, 0, &details, &mut i, &mut out);
    }
    Ok(out)
}

fn text_node(n: &Node, depth: usize, details: &[Detail], i: &mut usize, out: &mut String) {
    let pad = "  ".repeat(depth);
    let label = if depth == 0
        || matches!(n.item, Item::Archive { .. } | Item::HostObject { .. })
            && n.origin.contains(':')
    {
        format!("{}: ", n.origin)
    } else {
        String::new()
    };
    if let Item::Code(_) = n.item {
        let d = &details[*i];
        *i += 1;
        out.push_str(&format!(
            "{pad}{label}{} -> {} bytes\n",
            describe(n),
            d.size
        ));
        for l in &d.lines {
            out.push_str(&format!("{pad}    {l}\n"));
        }
    } else {
        out.push_str(&format!("{pad}{label}{}\n", describe(n)));
    }
    for c in &n.children {
        text_node(c, depth + 1, details, i, out);
    }
}
