//! What each input gives the merge: for every unit (an object, a fatbin, a raw file, an
//! archive member) the SASS for the target by nvlink's rules (the exact SM first, then an
//! older SM of the same family before sm_90; `a` code only for itself), else its PTX for
//! ptxas `-c`, else nvlink's warning. Units keep input order; libcudadevrt is marked.
//! Whole-program device code is not linked, as nvlink does not link it: a host object's
//! `.nv_fatbin` (what `nvcc -c` without `-rdc` embeds) is passed over, and an executable
//! cubin (e_type 2) contributes nothing, so a whole-program build's device link writes
//! an image without code.

use rayon::prelude::*;

use crate::arch::{Arch, ir_compatible, ptx_compatible, sass_compatible};
use crate::bytes::Bytes;
use crate::diag::{Diagnostics, Error, Result};
use crate::elf::elf_type;
use crate::input::{self, Code, CodeKind, Item, Node};

pub enum Source {
    Cubin(Bytes),
    /// PTX, with the ptxas options its fatbin member records (nvcc's `-lineinfo`,
    /// `-G`, `-maxrregcount`, `-Xptxas`), which nvlink passes on to its ptxas.
    Ptx(Bytes, Vec<String>),
}

pub struct Unit {
    pub origin: String,
    pub source: Source,
    pub cudadevrt: bool,
    /// From a host object (nvcc `-dc`), whose host-reference tables speak for it; a
    /// cubin, PTX or fatbin file has none.
    pub host: bool,
}

/// `lto`: units with IR for the target went to libNVVM and are left out here. The walk
/// decides, in input order, which code each unit gives; the members chosen are then
/// decompressed on the pool, and the units, warnings and the first error come out in
/// input order, as a walk reading each member in turn gives them.
pub fn collect(trees: &[Node], target: Arch, lto: bool, diag: &Diagnostics) -> Result<Vec<Unit>> {
    let mut plan = Vec::new();
    let stop = input::units(trees)
        .into_iter()
        .try_for_each(|u| {
            // a raw executable cubin is passed over whatever its SM (nvlink 13.5)
            if let Item::Code(c) = &u.node.item
                && is_executable(u.node, c)?
            {
                return Ok(());
            }
            unit(u, target, lto, &mut plan)
        })
        .err();
    // (a member's extraction may be a cache lookup: recorded on the worker's lane)
    let trace = crate::trace::current();
    let read: Vec<Option<Result<Bytes>>> = plan
        .par_iter()
        .map(|p| match p {
            Planned::Read { origin, code, .. } => {
                let _lane = crate::trace::lane(&trace);
                Some(code.bytes(origin))
            }
            Planned::Warn(_) => None,
        })
        .collect();
    let mut out = Vec::new();
    for (p, bytes) in plan.into_iter().zip(read) {
        match p {
            Planned::Warn(w) => diag.warning(&w),
            Planned::Read {
                node,
                code,
                ptx,
                cudadevrt,
                host,
                ..
            } => {
                let bytes = bytes.expect("one read per planned unit")?;
                // whole-program SASS for the target: nothing to link, and no PTX either
                if !ptx && elf_type(&bytes) == Some(2) {
                    continue;
                }
                out.push(Unit {
                    origin: node.origin.clone(),
                    source: if ptx {
                        Source::Ptx(bytes, member_ptxas_options(code))
                    } else {
                        Source::Cubin(bytes)
                    },
                    cudadevrt,
                    host,
                });
            }
        }
    }
    match stop {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// What the walk decided for a unit, before any member is read.
enum Planned<'n> {
    /// The unit's SASS (`ptx`: its PTX), to be read from `code`.
    Read {
        node: &'n Node,
        origin: &'n str,
        code: &'n Code,
        ptx: bool,
        cudadevrt: bool,
        host: bool,
    },
    Warn(String),
}

/// The options a PTX fatbin member records for ptxas, less `--compile-only` (a link's
/// PTX is always assembled relocatable).
fn member_ptxas_options(c: &crate::input::Code) -> Vec<String> {
    let text = c.member.as_ref().and_then(|m| m.option_text());
    text.iter()
        .flat_map(|t| t.split_whitespace())
        .filter(|o| *o != "--compile-only")
        .map(String::from)
        .collect()
}

/// Whether the input `trees` (a host object or fatbin, as read) hold code a link for
/// `target` takes: SASS that runs there, PTX that compiles for it, or (`lto`) IR for
/// it. What libnvJitLink asks of such an input at `AddData` (it refuses one of
/// cooperative-groups code built for sm_90, sm_100 and sm_120 at sm_80 or sm_110, where
/// nvlink warns and links without it).
pub fn has_code_for(trees: &[Node], target: Arch, lto: bool) -> bool {
    (input::units(trees).iter()).any(|u| {
        (u.linked_codes().iter()).any(|(_, c)| match c.kind {
            CodeKind::Cubin => c.arch.is_none_or(|a| sass_compatible(a, target)),
            CodeKind::Ptx => c.arch.is_none_or(|a| ptx_compatible(a, target)),
            CodeKind::Nvvm(_) | CodeKind::Bitcode => {
                lto && c.arch.is_none_or(|a| ir_compatible(a, target))
            }
            CodeKind::Other(_) => false,
        })
    })
}

fn unit<'n>(u: input::Unit<'n>, target: Arch, lto: bool, out: &mut Vec<Planned<'n>>) -> Result<()> {
    let (n, cudadevrt) = (u.node, u.cudadevrt);
    let codes = u.linked_codes();
    if codes.is_empty() {
        return Ok(());
    }
    let has_ir = codes.iter().any(|(_, c)| {
        matches!(c.kind, CodeKind::Nvvm(_) | CodeKind::Bitcode)
            && (c.member.is_none() || c.arch.is_none_or(|a| ir_compatible(a, target)))
    });
    if lto && has_ir && !cudadevrt {
        return Ok(());
    }
    let sass = codes
        .iter()
        .filter(|(_, c)| c.kind == CodeKind::Cubin)
        .filter(|(_, c)| c.arch.is_none_or(|a| sass_compatible(a, target)))
        .max_by_key(|(_, c)| c.arch.map(|a| (a == target, a.sm)));
    if let Some(&(origin, code)) = sass {
        out.push(Planned::Read {
            node: n,
            origin,
            code,
            ptx: false,
            cudadevrt,
            host: u.is_host_object(),
        });
        return Ok(());
    }
    let ptx = codes
        .iter()
        .filter(|(_, c)| c.kind == CodeKind::Ptx)
        .filter(|(_, c)| c.arch.is_none_or(|a| ptx_compatible(a, target)))
        .max_by_key(|(_, c)| c.arch.map(|a| a.sm));
    if let Some(&(origin, code)) = ptx {
        out.push(Planned::Read {
            node: n,
            origin,
            code,
            ptx: true,
            cudadevrt,
            host: u.is_host_object(),
        });
        return Ok(());
    }
    // IR for the target but neither SASS nor PTX, in a link without -dlto
    if has_ir && !lto && !cudadevrt {
        return Err(Error::fatal("LTO objects found, use -dlto"));
    }
    // a cubin given as a file (not a fatbin member) for another SM ends the link; below
    // sm_100 for an sm_100+ target, nvlink warns first that the output would be limited
    if let Item::Code(c) = &n.item
        && c.kind == CodeKind::Cubin
        && c.member.is_none()
        && let Some(arch) = c.arch
    {
        if target.sm >= 100 && arch.sm < 100 {
            out.push(Planned::Warn(format!(
                "Output is limited to run on SM Arch '{}' only due to limitations in input file {}",
                target.to_string().trim_start_matches("sm_"),
                n.origin
            )));
        }
        return Err(Error::fatal(format!(
            "Input file '{}' arch does not match target '{target}'",
            n.origin
        )));
    }
    // (in an LTO link the pool has said so already, before `-dlto` was ignored)
    if !cudadevrt && !lto {
        out.push(Planned::Warn(not_found(target, &n.origin, &codes)));
    }
    Ok(())
}

/// nvlink's warning for an input without code for the target, then what it does hold.
pub(crate) fn not_found(target: Arch, origin: &str, codes: &[(&str, &Code)]) -> String {
    let mut held: Vec<String> = codes
        .iter()
        .filter_map(|(_, c)| {
            let a = c.arch?;
            Some(match c.kind {
                CodeKind::Cubin => format!("{a} (SASS)"),
                CodeKind::Ptx => format!("{} (PTX)", a.to_string().replace("sm_", "compute_")),
                _ => format!("{} (LTO IR)", a.to_string().replace("sm_", "lto_")),
            })
        })
        .collect();
    held.dedup();
    format!(
        "SM Arch ('{target}') not found in '{origin}'\n  it holds {}",
        if held.is_empty() {
            "no device code for any architecture".into()
        } else {
            held.join(", ")
        }
    )
}

/// Whether a cubin is an executable (whole-program) image, which nvlink passes over.
fn is_executable(n: &Node, c: &Code) -> Result<bool> {
    Ok(c.kind == CodeKind::Cubin && elf_type(&c.bytes(&n.origin)?) == Some(2))
}
