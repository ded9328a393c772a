//! The architecture of a link given without `-arch` (`nvlinkrs -lto a.ltoir b.ltoir -o
//! app.cubin`; nvcc always passes one): the one every input with device code holds code
//! for. Archive members count one by one; libcudadevrt, which holds every architecture,
//! and whole-program code, which a link passes over, do not count.

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::arch::{Arch, Variant};
use crate::diag::{Error, Result};
use crate::input::{self, Mode};

/// The target every input agrees on, or nvlink's error for a missing `-arch` with what
/// was found.
pub fn infer(
    inputs: &[PathBuf],
    libraries: &[String],
    library_paths: &[PathBuf],
    lto: bool,
) -> Result<Arch> {
    let env = crate::linkenv::LinkEnv::current();
    let paths = input::input_list(inputs, libraries, library_paths, &env);
    let trees = input::load(&paths, Mode::Link { lto })?;
    let mut units: Vec<(String, BTreeSet<Arch>)> = input::units(&trees)
        .into_iter()
        .filter(|u| !u.cudadevrt)
        .map(|u| {
            let archs = u.linked_codes().into_iter().filter_map(|(_, c)| c.arch);
            (u.node.origin.clone(), archs.collect())
        })
        .collect();
    units.retain(|(_, a)| !a.is_empty());
    let mut common: Option<BTreeSet<Arch>> = None;
    for (_, a) in &units {
        common = Some(match common {
            None => a.clone(),
            Some(c) => c.intersection(a).copied().collect(),
        });
    }
    let common = common.unwrap_or_default();
    // one architecture, or one SM whose plain form every input has (sm_90 beside sm_90a)
    let pick = match common.len() {
        1 => common.first().copied(),
        _ => {
            let sms: BTreeSet<u32> = common.iter().map(|a| a.sm).collect();
            let plain = common.iter().find(|a| a.variant == Variant::Plain);
            plain.copied().filter(|_| sms.len() == 1)
        }
    };
    pick.ok_or_else(|| {
        let found: Vec<String> = units
            .iter()
            .map(|(origin, a)| {
                let names: Vec<String> = a.iter().map(Arch::to_string).collect();
                format!("'{origin}' holds {}", names.join(", "))
            })
            .collect();
        let detail = if found.is_empty() {
            "no -arch given, and no input says which architecture it is for; give -arch".into()
        } else {
            format!(
                "no -arch given, and the inputs do not agree on one architecture ({}); give -arch",
                found.join("; ")
            )
        };
        Error::fatal("Unknown arch name '(null)'").context(detail)
    })
}
