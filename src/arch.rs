//! GPU architecture names: `sm_90`, `sm_90a`, `sm_120f`, `compute_90`, `lto_90`, and the
//! parsing of nvlink's `-arch` values.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Variant {
    Plain,
    /// `a`: architecture-specific (accelerated) features; links only with itself.
    Accelerated,
    /// `f`: family-portable.
    Family,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Arch {
    pub sm: u32,
    pub variant: Variant,
}

impl Arch {
    pub fn new(sm: u32, variant: Variant) -> Arch {
        Arch { sm, variant }
    }

    pub fn plain(sm: u32) -> Arch {
        Arch::new(sm, Variant::Plain)
    }

    fn suffix(self) -> &'static str {
        match self.variant {
            Variant::Plain => "",
            Variant::Accelerated => "a",
            Variant::Family => "f",
        }
    }

    /// Parses `sm_90a`, `compute_90`, `lto_120f`, or a bare `90a`. Returns the kind of
    /// target named and the architecture.
    pub fn parse_target(s: &str) -> Option<(TargetKind, Arch)> {
        let (kind, rest) = if let Some(r) = s.strip_prefix("sm_") {
            (TargetKind::Sass, r)
        } else if let Some(r) = s.strip_prefix("compute_") {
            (TargetKind::Virtual, r)
        } else if let Some(r) = s.strip_prefix("lto_") {
            (TargetKind::Lto, r)
        } else {
            return None;
        };
        let (digits, variant) = match rest.as_bytes().last()? {
            b'a' => (&rest[..rest.len() - 1], Variant::Accelerated),
            b'f' => (&rest[..rest.len() - 1], Variant::Family),
            _ => (rest, Variant::Plain),
        };
        if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some((kind, Arch::new(digits.parse().ok()?, variant)))
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sm_{}{}", self.sm, self.suffix())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetKind {
    Sass,
    Virtual,
    Lto,
}

/// The architectures nvlink 13.5 accepts for `-arch` (from `nvlink --help`).
pub const KNOWN_SM: &[u32] = &[75, 80, 86, 87, 88, 89, 90, 100, 103, 107, 110, 120, 121];

/// True when nvlink 13.5 knows this target (variants as its `--help` lists them).
pub fn is_known_target(a: Arch) -> bool {
    if !KNOWN_SM.contains(&a.sm) {
        return false;
    }
    match a.variant {
        Variant::Plain => true,
        Variant::Accelerated => a.sm >= 90,
        Variant::Family => a.sm >= 100,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_spelling() {
        assert_eq!(
            Arch::parse_target("sm_90"),
            Some((TargetKind::Sass, Arch::plain(90)))
        );
        assert_eq!(
            Arch::parse_target("sm_90a"),
            Some((TargetKind::Sass, Arch::new(90, Variant::Accelerated)))
        );
        assert_eq!(
            Arch::parse_target("lto_120f"),
            Some((TargetKind::Lto, Arch::new(120, Variant::Family)))
        );
        assert_eq!(
            Arch::parse_target("compute_75"),
            Some((TargetKind::Virtual, Arch::plain(75)))
        );
        for bad in ["sm_", "sm_9x", "90", "sm_a", "sm_123456", "gfx90a"] {
            assert_eq!(Arch::parse_target(bad), None, "{bad}");
        }
        assert_eq!(Arch::new(100, Variant::Accelerated).to_string(), "sm_100a");
    }

    #[test]
    fn known_targets_match_nvlink_help() {
        assert!(is_known_target(Arch::plain(75)));
        assert!(is_known_target(Arch::new(90, Variant::Accelerated)));
        assert!(!is_known_target(Arch::new(90, Variant::Family)));
        assert!(!is_known_target(Arch::plain(70)));
    }
}
