//! The options that show what a link did without changing what it writes: the time
//! trace (`--time-trace[=FILE]`, `--time-trace-granularity=N`, or
//! `NVLINKRS_TIME_TRACE`) and `--explain`. No cache key holds them.

use std::path::PathBuf;
use std::time::Duration;

use crate::diag::{Error, Result};

/// The setting that turns the time trace on for builds whose command lines cannot
/// change: `1` writes it where `--time-trace` would, another value is the file's path,
/// `0` or nothing is off.
pub const TRACE_VAR: &str = "NVLINKRS_TIME_TRACE";

/// The default granularity, in microseconds: every span (lld's is 500, for compilers'
/// millions of spans; a link has thousands at most, and a cache hit that takes 100 µs is
/// worth seeing).
const DEFAULT_GRANULARITY_US: u64 = 0;

#[derive(clap::Args, Debug, Default, Clone)]
pub struct ObserveArgs {
    /// Write a Chrome trace of the link (Perfetto, chrome://tracing, ninjatracing) to FILE
    /// given as --time-trace=FILE (with the `=`: a next word is an input), else beside the
    /// output as OUTPUT-without-extension.json (also NVLINKRS_TIME_TRACE=1).
    #[arg(
        long = "time-trace",
        value_name = "FILE",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = ""
    )]
    pub time_trace: Option<String>,
    /// The shortest span the trace keeps, in microseconds, as lld's (default 0: all).
    #[arg(long = "time-trace-granularity", value_name = "US")]
    pub time_trace_granularity: Option<String>,
    /// Say why a link was not a whole-link cache hit: what differs from the last link
    /// to the same output, and for each stage that missed, which of its inputs was new.
    #[arg(long = "explain")]
    pub explain: bool,
}

/// Where the trace goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceTo {
    /// Beside the output (`trace::file::place`).
    BesideOutput,
    File(PathBuf),
}

/// What the request asks to be shown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observe {
    pub time_trace: Option<TraceTo>,
    /// Spans shorter than this are left out of the trace.
    pub granularity: Duration,
    pub explain: bool,
}

impl ObserveArgs {
    /// The request's part, the environment's `NVLINKRS_TIME_TRACE` (`env`) where the
    /// command line names no trace.
    pub fn observe(&self, env: Option<&str>) -> Result<Observe> {
        let time_trace = match (self.time_trace.as_deref(), env.map(str::trim)) {
            (Some(""), _) => Some(TraceTo::BesideOutput),
            (Some(f), _) => Some(TraceTo::File(PathBuf::from(f))),
            (None, None | Some("" | "0" | "false" | "off" | "no")) => None,
            (None, Some("1" | "true" | "on" | "yes")) => Some(TraceTo::BesideOutput),
            (None, Some(f)) => Some(TraceTo::File(PathBuf::from(f))),
        };
        let granularity = match self.time_trace_granularity.as_deref() {
            None => DEFAULT_GRANULARITY_US,
            Some(v) => v.parse().map_err(|_| {
                Error::fatal(format!(
                    "Value '{v}' is not valid for option 'time-trace-granularity': expected a number of microseconds"
                ))
            })?,
        };
        Ok(Observe {
            time_trace,
            granularity: Duration::from_micros(granularity),
            explain: self.explain,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trace_is_asked_for_by_option_or_setting() {
        let args = |t: Option<&str>, g: Option<&str>| ObserveArgs {
            time_trace: t.map(String::from),
            time_trace_granularity: g.map(String::from),
            explain: false,
        };
        let to = |a: &ObserveArgs, env| a.observe(env).unwrap().time_trace;
        assert_eq!(to(&args(None, None), None), None);
        assert_eq!(to(&args(None, None), Some("0")), None);
        assert_eq!(
            to(&args(None, None), Some("1")),
            Some(TraceTo::BesideOutput)
        );
        assert_eq!(
            to(&args(None, None), Some("t.json")),
            Some(TraceTo::File("t.json".into()))
        );
        assert_eq!(
            to(&args(Some(""), None), Some("t.json")),
            Some(TraceTo::BesideOutput)
        );
        assert_eq!(
            to(&args(Some("x.json"), None), None),
            Some(TraceTo::File("x.json".into()))
        );
        let g = |v| args(None, Some(v)).observe(None);
        assert_eq!(g("500").unwrap().granularity, Duration::from_micros(500));
        assert_eq!(
            args(None, None).observe(None).unwrap().granularity,
            Duration::ZERO
        );
        assert_eq!(
            g("-1").unwrap_err().message(),
            "Value '-1' is not valid for option 'time-trace-granularity': expected a number of microseconds"
        );
    }
}
