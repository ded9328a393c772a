//! Whether a link is incremental (`lto::incremental`): `--incremental`, or `NVLINKRS_INCREMENTAL` for builds
//! whose command line cannot change (`1`, `on`, `true`, `yes`; `0`, `off`, `false`,
//! `no`, empty: off), and `NVLINKRS_INCREMENTAL=partitions`, which links as partitions
//! even with nothing cached (what the background build, the tests and the benchmark run
//! to get the partitioned image of a cold link).

use crate::diag::{Error, Result};

pub const VAR: &str = "NVLINKRS_INCREMENTAL";

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Whole-program LTO, nvlink's bytes.
    #[default]
    Off,
    /// Partitions when some are cached; else the whole-program link now and the
    /// partitions built in the background.
    Auto,
    /// Partitions always.
    Partitions,
}

/// The mode of a link given `--incremental` or not.
pub fn choose(flag: bool) -> Result<Mode> {
    let env = std::env::var(VAR).unwrap_or_default();
    let from_env = match env.to_ascii_lowercase().as_str() {
        "" | "0" | "off" | "false" | "no" => Mode::Off,
        "1" | "on" | "true" | "yes" => Mode::Auto,
        "partitions" => Mode::Partitions,
        _ => {
            return Err(Error::fatal(format!(
                "{VAR}='{env}': expected 1 or 0 (or 'partitions')"
            )));
        }
    };
    Ok(match (flag, from_env) {
        (true, Mode::Off) => Mode::Auto,
        (_, m) => m,
    })
}
