//! What earlier links of a program cost, kept in the cache so that an incremental link
//! can tell whether compiling its changed partitions would take longer than the
//! whole-program link: the whole link's libNVVM and ptxas time, and each partition's
//! (by its unit and kernels, which outlive an edit; its manifest does not). A program is
//! its input paths (nvcc's temporary files by the name they end with), target and
//! options, not their contents. A history that cannot be read is no history: it only
//! chooses which of the two images (whole-program or partitioned) an `Auto` link writes,
//! never a byte of either.

use std::collections::BTreeMap;

use crate::cache::{Cache, Key};
use crate::cli::LinkRequest;

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct History {
    /// The whole-program link's libNVVM and ptxas time, in milliseconds.
    pub whole_ms: Option<u64>,
    /// Each partition's libNVVM and ptxas time, by [`identity`].
    pub partitions: BTreeMap<String, u64>,
}

/// A partition as later links know it: its unit and its kernels.
pub fn identity(module: Option<&str>, kernels: &[String]) -> String {
    let mut k = kernels.to_vec();
    k.sort();
    let unit = module.map_or("<data>".into(), stable);
    format!("{unit}:{}", k.join(","))
}

/// A file's name as it outlives a build: nvcc's temporary files
/// (`TMPDIR/tmpxft_<process>_<count>-<n>_a.o`, another name on every build when nvcc
/// compiles and links in one command) by what follows their prefix, `nvcc:a.o`.
fn stable(name: &str) -> String {
    let file = name.rsplit('/').next().unwrap_or(name);
    let rest = file.strip_prefix("tmpxft_").and_then(|r| {
        let (_, after) = r.split_once('-')?;
        let (n, unit) = after.split_once('_')?;
        n.bytes().all(|b| b.is_ascii_digit()).then_some(unit)
    });
    match rest {
        Some(unit) => format!("nvcc:{unit}"),
        None => name.to_string(),
    }
}

/// The history's key: the program (`req`, less what changes no byte), whatever the
/// incremental mode (the background build, in partitions mode, records its partitions'
/// times for the `--incremental` links that come after it).
fn key(req: &LinkRequest) -> Key {
    let normalized = LinkRequest {
        output: Default::default(),
        register_link_binaries: None,
        report_json: None,
        options_files: Vec::new(),
        time: None,
        cache: crate::cache::place::Place {
            dir: None,
            default: false,
            remote: None,
        },
        verbose: false,
        verbose2: false,
        verbose_keep: false,
        incremental: false,
        // (what the link says and how it is observed is not the program: `--explain`, a
        // time trace, `-w` gave a program another history, whose links found no
        // partition measured)
        observe: Default::default(),
        dump_callgraph: None,
        recorded: crate::cli::Recorded {
            suppress_stack_size_warning: false,
            suppress_arch_warning: false,
            disable_warnings: false,
            warning_as_error: false,
            disable_infos: false,
            report_arch: false,
            extra_warnings: false,
            ..req.recorded.clone()
        },
        inputs: (req.inputs.iter())
            .map(|p| stable(&p.to_string_lossy()).into())
            .collect(),
        ..req.clone()
    };
    Key::new("inc-history").text(&format!("{normalized:?}"))
}

/// The program's history (empty when there is none).
pub fn load(cache: &Cache, req: &LinkRequest) -> History {
    cache
        .get(&key(req))
        .and_then(|e| serde_json::from_slice(&e).ok())
        .unwrap_or_default()
}

/// Stores the program's history (a store that fails is only a lost estimate).
pub fn store(cache: &Cache, req: &LinkRequest, h: &History) {
    if let Ok(bytes) = serde_json::to_vec(h) {
        // (an estimate, not the product of any work: no cold time)
        cache.put(&key(req), &bytes, std::time::Duration::ZERO);
    }
}

/// What compiling `misses` (partition identities) is expected to take side by side on
/// `workers` workers, from what each took when last measured (their sum over the
/// workers, or the longest), and the whole-program link's time: `None` unless every one
/// of them and the whole link were measured.
pub fn measured(h: &History, misses: &[String], workers: usize) -> Option<(u64, u64)> {
    let whole = h.whole_ms?;
    let (mut sum, mut longest) = (0u64, 0u64);
    for m in misses {
        let ms = *h.partitions.get(m)?;
        sum += ms;
        longest = longest.max(ms);
    }
    Some(((sum / workers.max(1) as u64).max(longest), whole))
}

/// Whether compiling `misses` on `workers` workers is expected to take longer than a
/// whole-program link, as measured.
pub fn whole_is_faster(h: &History, misses: &[String], workers: usize) -> bool {
    measured(h, misses, workers).is_some_and(|(wall, whole)| wall > whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvccs_temporary_files_are_known_by_the_unit_they_hold() {
        let a = stable("tmp/tmpxft_00007008_00000000-14_a.o");
        assert_eq!(a, "nvcc:a.o");
        assert_eq!(stable("tmp/tmpxft_00007189_00000000-14_a.o"), a);
        assert_eq!(stable("build/a.o"), "build/a.o");
        assert_eq!(stable("tmpxft_x.o"), "tmpxft_x.o");
        assert_eq!(
            identity(Some("tmp/tmpxft_1_2-3_b.o"), &["k".into()]),
            "nvcc:b.o:k"
        );
    }

    #[test]
    fn how_a_link_is_observed_is_the_same_program() {
        // (a new user's review: `--explain`, a time trace or `-w` gave the program another
        // history, so a relink whose partitions were all cached went whole-program)
        let request = |extra: &[&str]| {
            let mut args: Vec<String> = ["-arch=sm_90", "-dlto", "a.o", "b.o", "-o", "x.cubin"]
                .iter()
                .chain(extra)
                .map(|s| s.to_string())
                .collect();
            args.push("--incremental".into());
            crate::cli::parse(&args).unwrap().0.request().unwrap()
        };
        let plain = key(&request(&[]));
        for extra in [
            &["--explain"][..],
            &["--time-trace=t.json"],
            &["-w"],
            &["-v"],
            &["--report-json=r.json", "-o", "y.cubin"],
        ] {
            assert_eq!(key(&request(extra)).finish(), plain.finish(), "{extra:?}");
        }
        assert_ne!(
            key(&request(&["-maxrregcount=32"])).finish(),
            plain.finish()
        );
    }

    #[test]
    fn partitions_are_weighed_against_the_whole_link_only_when_all_were_measured() {
        let mut h = History::default();
        let (a, b) = (
            identity(Some("a.o"), &["k2".into(), "k1".into()]),
            identity(None, &[]),
        );
        assert_eq!((a.as_str(), b.as_str()), ("a.o:k1,k2", "<data>:"));
        h.partitions.insert(a.clone(), 600);
        h.partitions.insert(b.clone(), 300);
        // no whole link measured: partitions
        assert!(!whole_is_faster(&h, &[a.clone(), b.clone()], 1));
        h.whole_ms = Some(800);
        assert!(whole_is_faster(&h, &[a.clone(), b.clone()], 1));
        // (side by side on two workers: the longer of the two, or half the sum)
        assert!(!whole_is_faster(&h, &[a.clone(), b.clone()], 2));
        assert!(!whole_is_faster(&h, std::slice::from_ref(&a), 1));
        // a partition never measured (a new unit): partitions
        assert!(!whole_is_faster(&h, &[a, b, "c.o:k3".into()], 1));
    }
}
