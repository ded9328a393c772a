//! GPU architecture names: `sm_90`, `sm_90a`, `sm_120f`, `compute_90`, `lto_90`, the
//! parsing of nvlink's `-arch` values, and which code (IR, PTX, SASS) built for one
//! architecture a link for another can take.

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

/// Whether IR built for `ir` can be linked for `target`: plain IR for any newer or equal
/// SM; `a` IR only for itself; `f` IR within its family.
pub fn ir_compatible(ir: Arch, target: Arch) -> bool {
    match ir.variant {
        Variant::Plain => ir.sm <= target.sm,
        Variant::Accelerated => ir == target,
        Variant::Family => ir.sm / 10 == target.sm / 10 && ir.sm <= target.sm,
    }
}

/// Whether SASS built for `code` runs on `target`: plain SASS of the same SM, or of an
/// older SM of the same major; `f` SASS as plain within its family (nvlink 13.5 links
/// `sm_100f` code for sm_100, sm_103 and sm_103f, `sm_120f` for sm_121); `a` SASS only
/// for itself.
pub fn sass_compatible(code: Arch, target: Arch) -> bool {
    match code.variant {
        Variant::Plain | Variant::Family => {
            code.sm == target.sm || (code.sm / 10 == target.sm / 10 && code.sm <= target.sm)
        }
        Variant::Accelerated => code == target,
    }
}

/// Whether PTX written for `ptx` can be assembled for `target`: any older or equal SM.
pub fn ptx_compatible(ptx: Arch, target: Arch) -> bool {
    ptx.sm <= target.sm
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

    #[test]
    fn ir_compatibility() {
        let p = |s| Arch::plain(s);
        assert!(ir_compatible(p(90), p(100)));
        assert!(ir_compatible(p(90), p(90)));
        assert!(!ir_compatible(p(100), p(90)));
        let a90 = Arch::new(90, Variant::Accelerated);
        assert!(ir_compatible(a90, a90));
        assert!(!ir_compatible(a90, p(90)));
        assert!(ir_compatible(p(90), a90));
        let f100 = Arch::new(100, Variant::Family);
        assert!(ir_compatible(f100, p(103)));
        assert!(!ir_compatible(f100, p(120)));
    }

    #[test]
    fn sass_and_ptx_compatibility() {
        let p = |s| Arch::plain(s);
        assert!(sass_compatible(p(80), p(86)));
        assert!(!sass_compatible(p(86), p(80)));
        assert!(!sass_compatible(p(89), p(90)));
        let a90 = Arch::new(90, Variant::Accelerated);
        assert!(sass_compatible(a90, a90));
        assert!(!sass_compatible(a90, p(90)));
        assert!(sass_compatible(p(90), a90));
        assert!(ptx_compatible(p(75), p(120)));
        assert!(!ptx_compatible(p(100), p(90)));
    }
}
