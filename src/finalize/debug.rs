//! sm_100+ debug links: a link with `-g`, or with `-G` code (or line tables: `-lineinfo`,
//! `-G -dopt=on`) among its inputs. nvlink's
//! finalizer then regenerates every function at the debug level (with `-g`, code ptxas
//! optimized comes out as debug code, 1,194 differences in a dynamic-parallelism
//! program; beside `-G` code, libcudadevrt's functions get other code and capsules), and
//! the line tables, frames and `.nv.info` offsets follow that code. The whole image is
//! then the finalizer's link of the program: libnvJitLink given the same units (with
//! `-g` where the link has it) writes nvlink's image but for the tool note
//! (docs/rules/finalizer.md, "sm_100+ debug links"). This phase takes that image,
//! checked against the merge's (the same kernels and global symbols), with the merge's
//! tool note; where the finalizer fails or the two disagree, the merge's image stays,
//! with a warning.

use std::collections::BTreeSet;

use super::{Finalizer, Mode, VAR};
use crate::bytes::Bytes;
use crate::context::LinkContext;
use crate::diag::{Error, Result};
use crate::elf::cubin::{Cubin, STB_LOCAL};
use crate::merge::Input;
use crate::plan::Plan;

/// The tool note, which the image takes from the merge.
const NOTE: &str = ".note.nv.tkinfo";

/// Whether this link's image is the finalizer's debug link: the finalizer runs
/// ([`super::wanted`]), the link has `-g` or a unit with debug information (`-G`) or
/// line tables (`-lineinfo`), and
/// none of the options nvlinkrs does not hand libnvJitLink (`--preserve-relocs`,
/// `-disable-smem-reservation`, `-allow-undefined-globals`) is given
/// (`-maxrregcount`, `-kernels-used` and `-variables-used` it hands on).
pub fn wanted(plan: &Plan, ctx: &LinkContext<'_>, inputs: &[Input]) -> Result<bool> {
    let req = plan.req;
    // (`-G` code has `.debug_info`; `-lineinfo` code and `-G -dopt=on` code line tables,
    // which follow the code the finalizer regenerates)
    let names = [".debug_info", ".debug_line", ".nv_debug_line_sass"];
    let debug = req.debug
        || (inputs.iter()).any(|i| {
            i.cubin
                .sections
                .iter()
                .any(|s| names.contains(&s.name.as_str()))
        });
    let plain =
        !req.preserve_relocs && !req.disable_smem_reservation && !req.allow_undefined_globals;
    Ok(debug && plain && super::wanted(plan, ctx)?)
}

/// The finalizer's image of `inputs` (the units the merge linked, in its order), with
/// `merged`'s tool note; `None`, with a warning, where the finalizer fails, refuses
/// the units, or its image has other kernels or global symbols than `merged`.
pub fn phase(
    plan: &Plan,
    ctx: &LinkContext<'_>,
    inputs: &[Input],
    merged: &[u8],
) -> Result<Option<Vec<u8>>> {
    let diag = ctx.diag;
    let (fin, _) = super::Chosen::get(plan, ctx, inputs)?;
    let req = plan.req;
    let mut extra: Vec<String> = req
        .maxrregcount
        .map(|n| format!("-maxrregcount={n}"))
        .into_iter()
        .collect();
    extra.extend(
        req.kernels_used
            .iter()
            .map(|k| format!("-kernels-used={k}")),
    );
    extra.extend(
        req.variables_used
            .iter()
            .map(|v| format!("-variables-used={v}")),
    );
    // (libnvJitLink keeps every kernel: where the host objects' tables narrowed the
    // merge's, it is told the kernels the merge kept)
    let ours = Cubin::parse(Bytes::from_vec(merged.to_vec()), "the merged image")?;
    if req.kernels_used.is_empty() {
        let kept = kernels(&ours);
        let given: BTreeSet<String> = inputs.iter().flat_map(|i| kernels(&i.cubin)).collect();
        // (none kept: no list tells libnvJitLink that, and nvlink's image is the
        // merge's, without code: a unit that includes Thrust's headers and launches
        // nothing, at -lineinfo)
        if kept.is_empty() && !given.is_empty() {
            return Ok(None);
        }
        if kept != given {
            extra.extend(kept.iter().map(|k| format!("-kernels-used={k}")));
        }
    }
    let mode = Mode {
        arch: req.target,
        debug: req.debug,
        extra,
    };
    match image(fin.finalizer(), &mode, inputs, &ours) {
        Ok(image) => Ok(Some(image)),
        Err(e) => {
            let line = super::one_line(&e);
            diag.warning_never_error(&format!(
                "{VAR}: {line}; the debug image is the merge's, not finalized"
            ));
            Ok(None)
        }
    }
}

/// `fin`'s image of `inputs` with the merged image's (`ours`) tool note, or why not.
pub fn image(fin: &dyn Finalizer, mode: &Mode, inputs: &[Input], ours: &Cubin) -> Result<Vec<u8>> {
    let job: Vec<&[u8]> = inputs.iter().map(|i| &i.cubin.data[..]).collect();
    fin.prepare()?;
    let Some(image) = fin.link(&job, mode)? else {
        return Err(Error::fatal("libnvJitLink refused to link the program"));
    };
    let origin = "libnvJitLink's debug image (finalized)";
    let fin_image = Cubin::parse(Bytes::from_vec(image), origin)?;
    // the same kind of file for the same target: an executable of the merge's flags
    // (but the debug byte, the top one, which the finalizer's image has as nvlink
    // makes it)
    let header = |c: &Cubin| (c.e_type, c.e_flags & 0x00FF_FFFF, c.osabi, c.abi_version);
    if header(&fin_image) != header(ours) {
        return Err(Error::fatal(format!(
            "libnvJitLink's image is of another kind or target (type {}, flags {:#x}; the merge's type {}, flags {:#x})",
            fin_image.e_type, fin_image.e_flags, ours.e_type, ours.e_flags
        )));
    }
    let (a, b) = (globals(ours), globals(&fin_image));
    if a != b {
        let only = |x: &BTreeSet<(bool, String)>, y: &BTreeSet<(bool, String)>| {
            x.difference(y)
                .map(|s| s.1.clone())
                .take(3)
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(Error::fatal(format!(
            "libnvJitLink's image has other symbols than the merge's (only in the merge's: [{}]; only in libnvJitLink's: [{}])",
            only(&a, &b),
            only(&b, &a)
        )));
    }
    let note = ours
        .sections
        .iter()
        .find(|s| s.name == NOTE)
        .map(|s| ours.bytes(s).to_vec())
        .ok_or_else(|| Error::fatal("the merged image has no tool note"))?;
    crate::elf::relayout::replace_section(&fin_image.data, origin, NOTE, &note)
}

/// The image's defined global and weak symbols: (is a kernel, name).
fn globals(c: &Cubin) -> BTreeSet<(bool, String)> {
    (c.symbols.iter())
        .filter(|s| s.defined() && s.bind != STB_LOCAL && !s.name.is_empty())
        .map(|s| (s.is_entry(), s.name.to_string()))
        .collect()
}

/// The kernels `c` defines.
fn kernels(c: &Cubin) -> BTreeSet<String> {
    (c.symbols.iter())
        .filter(|s| s.defined() && s.is_entry() && !s.name.is_empty())
        .map(|s| s.name.to_string())
        .collect()
}
