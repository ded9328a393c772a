//! Where a link's cache is, and whether there is one: the cache is on by default, in the
//! platform's cache directory, as Go's build cache is.
//!
//! In order: `--no-cache` turns it off; `--cache-dir DIR` puts it in DIR; `NVLINKRS_CACHE=0`
//! (or `off`, `false`, `no`) turns it off; `NVLINKRS_CACHE_DIR` puts it there; else it is
//! the default directory, `$XDG_CACHE_HOME/nvlinkrs/links`, else
//! `$HOME/.cache/nvlinkrs/links` (the `links` level keeps it apart from anything else
//! under `nvlinkrs/`, such as the toolkit the project's setup installs). A relative or
//! empty `XDG_CACHE_HOME` or `HOME` is ignored, as the XDG specification asks; with
//! neither there is no default cache.
//!
//! The shared tier behind it (`--remote-cache URL`, else `NVLINKRS_REMOTE_CACHE`) is
//! named here too, and used only when there is a local cache (a shared hit is copied
//! into it): see [`super::remote`].

use std::ffi::OsString;
use std::path::PathBuf;

/// The cache a link uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The directory, `None` when the cache is off or no default place exists.
    pub dir: Option<PathBuf>,
    /// The directory is the default one, not asked for: when it cannot be used the link
    /// runs uncached without a warning (said only under `-v`).
    pub default: bool,
    /// The shared tier, when one is named.
    pub remote: Option<super::remote::Spec>,
}

/// The default cache directory, from `XDG_CACHE_HOME` or `HOME` as given.
pub fn default_dir_from(
    xdg_cache_home: Option<OsString>,
    home: Option<OsString>,
) -> Option<PathBuf> {
    let absolute = |v: Option<OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    absolute(xdg_cache_home)
        .or_else(|| absolute(home).map(|h| h.join(".cache")))
        .map(|base| base.join("nvlinkrs").join("links"))
}

/// The default cache directory of this process's environment.
pub fn default_dir() -> Option<PathBuf> {
    default_dir_from(std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME"))
}

/// True when `NVLINKRS_CACHE`'s value turns the cache off.
pub fn off_value(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "0" | "off" | "false" | "no"
    )
}

/// The cache of a link given `--no-cache`, `--cache-dir` and `--remote-cache` (see the
/// module comment).
pub fn choose(no_cache: bool, cache_dir: Option<PathBuf>, remote: Option<&str>) -> Place {
    let nonempty = |p: PathBuf| Some(p).filter(|d| !d.as_os_str().is_empty());
    let remote = super::remote::Spec::choose(remote);
    let asked = |dir| Place {
        dir,
        default: false,
        remote: remote.clone(),
    };
    if no_cache {
        return asked(None);
    }
    if let Some(dir) = cache_dir.and_then(nonempty) {
        return asked(Some(dir));
    }
    if std::env::var("NVLINKRS_CACHE").is_ok_and(|v| off_value(&v)) {
        return asked(None);
    }
    if let Some(dir) = std::env::var_os("NVLINKRS_CACHE_DIR")
        .map(PathBuf::from)
        .and_then(nonempty)
    {
        return asked(Some(dir));
    }
    Place {
        dir: default_dir(),
        default: true,
        remote,
    }
}

/// The cache folder a command names (`--cache-dir`), else `NVLINKRS_CACHE_DIR`, else the
/// default directory links use.
pub fn command_dir(dir: Option<PathBuf>) -> crate::diag::Result<PathBuf> {
    dir.or_else(|| {
        std::env::var_os("NVLINKRS_CACHE_DIR")
            .map(PathBuf::from)
            .filter(|d| !d.as_os_str().is_empty())
    })
    .or_else(default_dir)
    .ok_or_else(|| {
        crate::diag::Error::fatal("cache: no --cache-dir, no NVLINKRS_CACHE_DIR, and neither XDG_CACHE_HOME nor HOME to find the default cache")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_directory_follows_xdg_then_home_and_ignores_relative_values() {
        let d = |x: Option<&str>, h: Option<&str>| {
            default_dir_from(x.map(OsString::from), h.map(OsString::from))
        };
        assert_eq!(
            d(Some("/x"), Some("/h")),
            Some(PathBuf::from("/x/nvlinkrs/links"))
        );
        assert_eq!(
            d(None, Some("/h")),
            Some(PathBuf::from("/h/.cache/nvlinkrs/links"))
        );
        assert_eq!(
            d(Some("rel"), Some("/h")),
            Some(PathBuf::from("/h/.cache/nvlinkrs/links"))
        );
        assert_eq!(d(Some(""), Some("")), None);
        assert_eq!(d(None, None), None);
    }

    #[test]
    fn cache_off_values() {
        for v in ["0", "off", "OFF", "false", "no", " 0 "] {
            assert!(off_value(v), "{v}");
        }
        for v in ["1", "on", "", "yes"] {
            assert!(!off_value(v), "{v}");
        }
    }
}
