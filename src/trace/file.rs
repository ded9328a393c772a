//! Where a link's trace goes, and writing it. Asked for by name (`--time-trace=FILE`), it
//! goes there; else beside the output with the output's extension replaced by `.json`
//! (`app.cubin` → `app.json`, `dlink.o` → `dlink.json`), the file ninjatracing looks for
//! beside each build output (it takes the output's name without its extension and adds
//! `.json`), or beside nvcc's output when nvcc runs the link on a temporary file of its
//! own ([`super::nvcc`]). nvcc links once per architecture into one output: the links of
//! one nvcc run are joined in one file, each on its own process row, placed in time from
//! the first one's start.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Trace;
use crate::diag::{Error, Result};

/// The most of an earlier trace read to join this link's to it.
const MAX_EARLIER: u64 = 16 << 20;

/// Where the trace of a link to `output` goes (`asked`: the file named), and the pid of
/// the nvcc whose output it is beside, if it is.
pub fn place(output: &Path, asked: Option<&Path>) -> (PathBuf, Option<u32>) {
    if let Some(f) = asked {
        return (f.to_path_buf(), None);
    }
    if let Some((pid, out)) = super::nvcc::output_of_parent(output) {
        return (beside(&out), Some(pid));
    }
    (beside(output), None)
}

/// The output's name with its extension replaced by `.json` (a `.json` output gets
/// `.trace.json` added, never its own name).
fn beside(output: &Path) -> PathBuf {
    let p = output.with_extension("json");
    if p == output {
        let mut s = output.as_os_str().to_owned();
        s.push(".trace.json");
        return PathBuf::from(s);
    }
    p
}

/// What to write to `path` for `trace` (as [`super::to_json`] makes it, `link`
/// describing the link in `otherData.links`), joined to the trace already there when both
/// are links of the nvcc run `nvcc`. (The caller writes it: the trace imports nothing of
/// the link's files.)
pub fn contents(trace: &Trace, path: &Path, nvcc: Option<u32>, link: Value) -> Result<Vec<u8>> {
    let origin = super::origin_unix_us(trace);
    let other = serde_json::json!({
        "nvlinkrs": env!("CARGO_PKG_VERSION"),
        "origin_unix_us": origin,
        "nvcc_pid": nvcc,
        "links": [link],
    });
    let pid = std::process::id();
    let name = format!("nvlinkrs {}", link_output(&other));
    let mut doc = super::to_json(trace, pid, &name, other);
    if let Some(earlier) = nvcc.and_then(|n| earlier_of(path, n)) {
        doc = joined(earlier, doc);
    }
    serde_json::to_vec(&doc).map_err(|e| Error::fatal(e.to_string()))
}

/// [`contents`] written to `path` (the tests' writer; a link's goes through its atomic
/// output).
#[cfg(test)]
fn write(trace: &Trace, path: &Path, nvcc: Option<u32>, link: Value) -> Result<()> {
    let text = contents(trace, path, nvcc, link)?;
    std::fs::write(path, text).map_err(|e| Error::fatal(e.to_string()))
}

fn link_output(other: &Value) -> String {
    other["links"][0]["output"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The trace at `path` when it holds links of the nvcc run `nvcc`: read only from a
/// regular file, opened without waiting (a FIFO put there is passed over, not waited on).
fn earlier_of(path: &Path, nvcc: u32) -> Option<Value> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = (std::fs::OpenOptions::new().read(true))
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = f.metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX_EARLIER {
        return None;
    }
    let mut bytes = Vec::new();
    f.take(MAX_EARLIER).read_to_end(&mut bytes).ok()?;
    let doc: Value = serde_json::from_slice(&bytes).ok()?;
    (doc["otherData"]["nvcc_pid"].as_u64() == Some(nvcc as u64)
        && doc["traceEvents"].is_array()
        && doc["otherData"]["links"].is_array())
    .then_some(doc)
}

/// `earlier` with `new`'s events and links added, `new`'s times moved to count from
/// `earlier`'s start.
fn joined(mut earlier: Value, new: Value) -> Value {
    let start = |d: &Value| d["otherData"]["origin_unix_us"].as_u64().unwrap_or(0);
    let shift = start(&new).saturating_sub(start(&earlier));
    if let (Some(events), Some(more)) = (
        earlier["traceEvents"].as_array_mut(),
        new["traceEvents"].as_array(),
    ) {
        for e in more {
            let mut e = e.clone();
            if e["ph"] == "X" {
                e["ts"] = (e["ts"].as_u64().unwrap_or(0) + shift).into();
            }
            events.push(e);
        }
    }
    if let (Some(links), Some(more)) = (
        earlier["otherData"]["links"].as_array_mut(),
        new["otherData"]["links"].as_array(),
    ) {
        links.extend(more.iter().cloned());
    }
    earlier
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An earlier trace that is a FIFO (put where nvcc's joined trace goes, mid-link) is
    /// passed over at once, not waited on (attacker review, 2026-12-02: a link hung). The
    /// code before passed this too (its `metadata` check saw the FIFO): what hung was a
    /// FIFO swapped in between that check and the read, a race this test cannot make; it
    /// guards that the read never blocks on one. (`cache::guard::read_regular` reads the
    /// same way but does not follow a link at the last component, which this read does.)
    #[test]
    fn an_earlier_trace_that_is_a_fifo_is_passed_over() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("app.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        assert!(earlier_of(&fifo, 1).is_none());
    }

    #[test]
    fn the_trace_goes_where_ninjatracing_looks() {
        let p = |s: &str| PathBuf::from(s);
        assert_eq!(beside(&p("out/app.cubin")), p("out/app.json"));
        assert_eq!(beside(&p("dlink.o")), p("dlink.json"));
        assert_eq!(beside(&p("app")), p("app.json"));
        assert_eq!(beside(&p("a.out.o")), p("a.out.json"));
        assert_eq!(beside(&p("x.json")), p("x.json.trace.json"));
        assert_eq!(
            place(&p("app.cubin"), Some(&p("t.json"))),
            (p("t.json"), None)
        );
        assert_eq!(place(&p("app.cubin"), None), (p("app.json"), None));
    }

    #[test]
    fn links_of_one_nvcc_run_are_joined_in_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.json");
        let link = |arch: &str| serde_json::json!({"output": format!("d.{arch}.cubin")});
        let first = Trace::new(std::time::Duration::ZERO);
        {
            let _i = super::super::install(first.clone());
            let _s = super::super::span("phase", "read");
        }
        write(&first, &path, Some(77), link("sm_80")).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let second = Trace::new(std::time::Duration::ZERO);
        {
            let _i = super::super::install(second.clone());
            let _s = super::super::span("phase", "merge");
        }
        write(&second, &path, Some(77), link("sm_90")).unwrap();
        let doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let links = doc["otherData"]["links"].as_array().unwrap();
        assert_eq!(links.len(), 2);
        let ts = |name: &str| {
            doc["traceEvents"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["name"] == name)
                .unwrap()["ts"]
                .as_u64()
                .unwrap()
        };
        assert!(ts("merge") >= ts("read") + 5000, "{doc:#}");
        // another nvcc run's trace is replaced, not joined
        write(&second, &path, Some(78), link("sm_90")).unwrap();
        let doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(doc["otherData"]["links"].as_array().unwrap().len(), 1);
    }
}
