//! A partition through libNVVM: its option list and cache key, its compile (the PTX in
//! canonical form, stored with libNVVM's log, its time, and what the rewrite needs to
//! know of it without reading it again: the variables it defines, the kernels it holds
//! that are other partitions').

use std::collections::BTreeSet;
use std::time::Instant;

use super::summary::{self, Hash, Hasher};
use super::{plan, ptx};
use crate::consensus::Consensus;
use crate::diag::{Error, Result};
use crate::lto::{self, IrModule, LtoSettings};

/// The version of what partition entries hold (bumped when the PTX's canonical form or
/// the rewrite changes).
pub const FORMAT: &str = "incremental-3";

/// One partition's libNVVM compile.
pub struct Job {
    pub options: Vec<String>,
    pub key: crate::cache::Key,
    pub reach: usize,
    /// The partition's own kernels.
    pub roots: BTreeSet<String>,
    /// The data partition of a program whose variables no two partitions share and the
    /// host cannot see: nothing to define, so nothing to compile (libNVVM's newer NVVM,
    /// at sm_100 and later, refuses the empty module it would make: "wrong initializer
    /// for intrinsic global variable").
    pub empty: bool,
}

/// The jobs of a plan: nvlink's options with each partition's lists, and the key of its
/// PTX: the options, the manifest, the program's renaming context, libNVVM's identity.
pub fn jobs(
    parts: &plan::Plan,
    settings: &LtoSettings,
    consensus: &Consensus,
    sums: &[summary::Summary],
    tool: &str,
) -> Vec<Job> {
    let base = base_options(settings, consensus);
    let context = program_context(sums);
    parts
        .partitions
        .iter()
        .map(|p| {
            let mut options = base.clone();
            options.extend(p.lists.partition_options());
            let key = crate::cache::Key::new("inc-ptx")
                .text(FORMAT)
                .text(tool)
                .text(&options.join("\0"))
                .bytes(&p.manifest.0)
                .bytes(&context.0);
            Job {
                options,
                key,
                reach: p.reach,
                roots: p.lists.ek.iter().chain(&p.lists.ik).cloned().collect(),
                empty: p.module.is_none() && p.reach == 0,
            }
        })
        .collect()
}

/// nvlink's option list for the link, less what partitions replace: `--device-c` (with
/// it libNVVM keeps every kernel once a function is left unresolved, as libcudadevrt's
/// are) and the host-reference lists (each partition has its own).
fn base_options(settings: &LtoSettings, consensus: &Consensus) -> Vec<String> {
    let s = LtoSettings {
        device_c: false,
        force_device_c: false,
        host_info: true,
        host_refs: Default::default(),
        ..settings.clone()
    };
    lto::nvvm_options(&s, consensus)
}

/// What every partition's PTX depends on beyond what it reaches: the names the IR
/// linker may rename (its renaming follows them) and the modules' inline assembly.
fn program_context(sums: &[summary::Summary]) -> Hash {
    let mut h = Hasher::new("program");
    h.hash(&plan::collisions(sums));
    for s in sums {
        h.str(&s.asm);
    }
    h.done()
}

/// A partition's PTX in canonical form and what is known of it.
pub struct Entry {
    pub ptx: String,
    /// libNVVM's messages.
    pub log: String,
    /// How long libNVVM took, in milliseconds.
    pub ms: u64,
    /// The variables its PTX defines (not `.extern`).
    pub defined: BTreeSet<String>,
    /// The kernels its PTX holds that are not its own (those it launches).
    pub foreign: BTreeSet<String>,
}

impl Entry {
    fn pack(&self) -> Vec<u8> {
        let set = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join("\n");
        let (defined, foreign, ms) = (set(&self.defined), set(&self.foreign), self.ms.to_string());
        crate::cache::pack(&[
            self.ptx.as_bytes(),
            self.log.as_bytes(),
            ms.as_bytes(),
            defined.as_bytes(),
            foreign.as_bytes(),
        ])
    }

    /// An entry as the cache holds it (`None`: another form, a miss).
    pub fn unpack(data: &[u8]) -> Option<Entry> {
        let parts = crate::cache::unpack(data)?;
        let [ptx, log, ms, defined, foreign] = &parts[..] else {
            return None;
        };
        let text = |b: &[u8]| String::from_utf8(b.to_vec()).ok();
        let set = |b: &[u8]| -> Option<BTreeSet<String>> {
            Some(text(b)?.lines().map(str::to_string).collect())
        };
        Some(Entry {
            ptx: text(ptx)?,
            log: text(log)?,
            ms: text(ms)?.parse().ok()?,
            defined: set(defined)?,
            foreign: set(foreign)?,
        })
    }
}

/// One partition through libNVVM, its PTX in canonical form, stored.
pub fn compile(
    engine: &dyn lto::Engine,
    modules: &[IrModule],
    job: &Job,
    cache: &crate::cache::Cache,
) -> Result<Entry> {
    let started = Instant::now();
    if job.empty {
        let entry = Entry {
            ptx: String::new(),
            log: String::new(),
            ms: 0,
            defined: BTreeSet::new(),
            foreign: BTreeSet::new(),
        };
        cache.put(&job.key, &entry.pack(), started.elapsed());
        return Ok(entry);
    }
    let collected = crate::diag::Diagnostics::collector();
    let out = engine.compile(modules, &job.options, &collected)?;
    let text = String::from_utf8(out.ptx.concat()).map_err(|_| {
        Error::fatal("elfLink nvvm error").context("incremental LTO: libNVVM's PTX is not text")
    })?;
    let normal = ptx::normalize(&text)?;
    let entry = Entry {
        defined: ptx::defined_variables(&normal)?,
        foreign: ptx::foreign_kernels(&normal, &job.roots)?,
        ptx: normal,
        log: collected.infos().join("\n"),
        ms: started.elapsed().as_millis() as u64,
    };
    cache.put(&job.key, &entry.pack(), started.elapsed());
    Ok(entry)
}
