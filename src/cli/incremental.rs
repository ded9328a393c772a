//! Whether a link is incremental (`lto::incremental`): `--incremental`, or `NVLINKRS_INCREMENTAL` for builds
//! whose command line cannot change (`1`, `on`, `true`, `yes`; `0`, `off`, `false`,
//! `no`, empty: off), and `NVLINKRS_INCREMENTAL=partitions`, which links as partitions
//! even with nothing cached (what the background build, the tests and the benchmark run
//! to get the partitioned image of a cold link). The variable is read from the link's
//! [`LinkEnv`] snapshot (`Plan::incremental`), which the whole-link key reads too.

use crate::diag::{Error, Result};
use crate::linkenv::LinkEnv;

pub const VAR: &str = "NVLINKRS_INCREMENTAL";

/// The environment mark of a background build (incremental LTO's partitions, the
/// finalizer's per-unit jobs), set by the daemon in its child.
pub const MARK: &str = crate::linkenv::BACKGROUND_MARK;

/// Whether a link in the environment `env` is a background build.
pub fn is_background(env: &LinkEnv) -> bool {
    env.get(MARK).is_some()
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Whole-program LTO, nvlink's bytes.
    #[default]
    Off,
    /// Partitions when some are cached or, when none is, when building them all is
    /// expected faster than the whole-program link; else that link now and the
    /// partitions built in the background.
    Auto,
    /// Partitions always.
    Partitions,
}

/// The mode of a link given `--incremental` (`flag`) or not, in the environment `env`.
pub fn choose(flag: bool, env: &LinkEnv) -> Result<Mode> {
    let value = match env.text(VAR) {
        Ok(v) => v.to_string(),
        Err(None) => String::new(),
        Err(Some(lossy)) => return Err(bad(&lossy)),
    };
    let from_env = match value.to_ascii_lowercase().as_str() {
        "" | "0" | "off" | "false" | "no" => Mode::Off,
        "1" | "on" | "true" | "yes" => Mode::Auto,
        "partitions" => Mode::Partitions,
        _ => return Err(bad(&value)),
    };
    Ok(match (flag, from_env) {
        (true, Mode::Off) => Mode::Auto,
        (_, m) => m,
    })
}

fn bad(value: &str) -> Error {
    Error::fatal(format!(
        "{VAR}='{value}': expected 1 or 0 (or 'partitions')"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(value: Option<&str>) -> LinkEnv {
        let mut env = LinkEnv::default();
        env.set(VAR, value);
        env
    }

    #[test]
    fn the_mode_comes_from_the_flag_and_the_snapshot() {
        assert_eq!(choose(false, &with(None)).unwrap(), Mode::Off);
        assert_eq!(choose(true, &with(None)).unwrap(), Mode::Auto);
        assert_eq!(choose(false, &with(Some("YES"))).unwrap(), Mode::Auto);
        assert_eq!(choose(true, &with(Some("0"))).unwrap(), Mode::Auto);
        assert_eq!(
            choose(true, &with(Some("partitions"))).unwrap(),
            Mode::Partitions
        );
        let e = choose(false, &with(Some("maybe"))).unwrap_err();
        assert_eq!(
            e.message(),
            "NVLINKRS_INCREMENTAL='maybe': expected 1 or 0 (or 'partitions')"
        );
    }
}
