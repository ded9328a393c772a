//! The assemble phase: every input's cubin for the merge, in input order. SASS as the
//! gather found it, PTX through ptxas `-c` on the link's job pool, each checked against
//! the target; the LTO phase's cubins first; libcudadevrt objects nothing uses left out.

use crate::context::LinkContext;
use crate::diag::{Error, Result};
use crate::plan::Plan;
use crate::{arch, bytes, elf, merge, ptxas_driver};

/// A cubin the merge can take: relocatable, for the target's SM.
pub fn check_object(plan: &Plan, c: &elf::cubin::Cubin) -> Result<()> {
    let req = plan.req;
    if c.e_type == 0xFF00 {
        // nvlink links it; its shared memory comes already laid out per kernel
        return Err(Error::fatal(format!(
            "'{}' holds --extensible-whole-program code (e_type 0xff00), which nvlinkrs does not link yet; refusing rather than writing another image than nvlink's",
            c.origin
        )));
    }
    if c.e_type != 1 {
        return Err(Error::fatal(format!(
            "'{}' is not a relocatable device object (e_type {}); only objects built with -rdc=true / -dc / ptxas -c can be linked",
            c.origin, c.e_type
        )));
    }
    let sm = (c.e_flags >> 8) & 0xFF;
    if !arch::sass_compatible(arch::Arch::plain(sm), req.target) {
        return Err(Error::fatal(format!(
            "Arch mismatch: '{}' is sm_{sm}, the link is for {}",
            c.origin, req.target
        )));
    }
    Ok(())
}

/// The cubins of the merge, in input order: SASS as found, PTX
/// through ptxas `-c` (in parallel), the LTO result first (last for the drop-in
/// libnvJitLink).
pub fn objects(
    plan: &Plan,
    ctx: &LinkContext,
    units: Vec<crate::gather::Unit>,
    lto_cubins: Vec<merge::Input>,
) -> Result<Vec<merge::Input>> {
    use crate::gather::Source;
    let jobs: Vec<ptxas_driver::Job> = units
        .iter()
        .filter_map(|u| match &u.source {
            Source::Ptx(p, member) => Some(ptxas_driver::Job {
                name: u.origin.clone(),
                ptx: p.to_vec(),
                options: ptxas_driver::PtxasOptions {
                    member: member.clone(),
                    ..plan.ptxas_options(true)
                },
            }),
            Source::Cubin(_) => None,
        })
        .collect();
    let mut assembled = if jobs.is_empty() {
        Vec::new()
    } else {
        let ptxas =
            ptxas_driver::for_link(plan.toolkit()?, ctx.cache(), &ctx.ptxas_launcher, &plan.env)?;
        ptxas_driver::assemble_all(&ctx.jobs, ptxas.as_ref(), &jobs, 0)?
    }
    .into_iter();
    let mut raw: Vec<(String, bytes::Bytes, bool)> = Vec::new();
    for u in units {
        let data = match u.source {
            Source::Cubin(b) => b,
            Source::Ptx(..) => {
                let mut a = assembled.next().expect("one result per job")?;
                ctx.diag.tool_output(&a.messages);
                if plan.req.nvjitlink {
                    // (as libnvJitLink's own ptxas notes itself)
                    elf::tkinfo::jit_ptxas_in_place(&mut a.cubin);
                }
                bytes::Bytes::from_vec(a.cubin)
            }
        };
        raw.push((u.origin, data, u.cudadevrt));
    }
    use rayon::prelude::*;
    let parsed: Vec<Result<merge::Input>> = raw
        .into_par_iter()
        .map(|(origin, data, cudadevrt)| {
            let cubin = elf::cubin::Cubin::parse(data, &origin)?;
            check_object(plan, &cubin)?;
            Ok(merge::Input { cubin, cudadevrt })
        })
        .collect();
    let parsed = parsed.into_iter().collect::<Result<Vec<_>>>()?;
    // (libnvJitLink puts libNVVM's output after the other inputs: its image of an LTO
    // link beside libcudadevrt has the device runtime's frames and records first)
    let out = match plan.req.nvjitlink {
        true => parsed.into_iter().chain(lto_cubins).collect(),
        false => lto_cubins.into_iter().chain(parsed).collect(),
    };
    // (-keep-system-libraries: every member, as nvJitLink takes them)
    let keep = plan.req.nvjitlink_cudadevrt || plan.req.recorded.keep_system_libraries;
    Ok(drop_unused_cudadevrt(out, keep))
}

/// libcudadevrt objects nothing refers to are left out (nvlink drops them, debug
/// frames and notes included), and so is a second copy of one already kept: a library
/// named twice (CMake's device link line has `-lcudadevrt` and nvcc adds its own) gives
/// its members once, as an archive member is only taken for a symbol still undefined.
/// libnvJitLink takes every member of a libcudadevrt its caller gave (`jit`), as it
/// takes every member of any archive, and with them its memcpy and memset kernels; a
/// second copy adds nothing, as in nvlink.
fn drop_unused_cudadevrt(inputs: Vec<merge::Input>, jit: bool) -> Vec<merge::Input> {
    use rustc_hash::FxHashSet as HashSet;
    // (without libcudadevrt there is nothing to leave out: no sets of every name built)
    if !inputs.iter().any(|i| i.cudadevrt) {
        return inputs;
    }
    let global = |s: &&elf::cubin::Symbol| s.bind != elf::cubin::STB_LOCAL;
    let wanted: HashSet<&str> = inputs
        .iter()
        .filter(|i| !i.cudadevrt)
        .flat_map(|i| i.cubin.symbols.iter())
        .filter(|s| !s.defined() && global(s))
        .map(|s| s.name.as_str())
        .collect();
    let mut defined: HashSet<&str> = inputs
        .iter()
        .filter(|i| !i.cudadevrt)
        .flat_map(|i| i.cubin.symbols.iter())
        .filter(|s| s.defined() && global(s))
        .map(|s| s.name.as_str())
        .collect();
    let mut keep = Vec::with_capacity(inputs.len());
    for i in &inputs {
        let k = !i.cudadevrt
            || i.cubin.symbols.iter().any(|s| {
                s.defined()
                    && global(&s)
                    && (jit || wanted.contains(s.name.as_str()))
                    && !defined.contains(s.name.as_str())
            });
        if k && i.cudadevrt {
            defined.extend(
                i.cubin
                    .symbols
                    .iter()
                    .filter(|s| s.defined() && global(s))
                    .map(|s| s.name.as_str()),
            );
        }
        keep.push(k);
    }
    inputs
        .into_iter()
        .zip(keep)
        .filter_map(|(i, k)| k.then_some(i))
        .collect()
}
