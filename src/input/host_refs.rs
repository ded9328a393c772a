//! The host-reference lists: which kernels and device variables the host code can
//! reach, from the host objects' `.nvHR*` tables or from `-kernels-used` /
//! `-variables-used`. LTO hands them to libNVVM (or the LLVM engine) to keep what the host
//! uses; the merge keeps the kernels they name.

/// The host-reference lists libNVVM uses to keep what the host can reach:
/// kernels, device variables and constants, each external and internal.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostRefs {
    pub ek: Vec<String>,
    pub ik: Vec<String>,
    pub ec: Vec<String>,
    pub ic: Vec<String>,
    pub eg: Vec<String>,
    pub ig: Vec<String>,
    /// Read from the host objects' tables (not `-kernels-used`): nvlink still makes the
    /// `.nv.shared.<k>` of a kernel they leave out (`merge::creation`).
    pub tables: bool,
}

impl HostRefs {
    /// From the `.nvHR*` tables of the host objects, in input order. nvlink pushes every
    /// entry onto the front of its lists, so the option lists come out reversed, each
    /// name once, where it last appears in the tables (read off nvlink 13.5: a kernel
    /// two host objects launch is listed once).
    pub fn from_tables<'a>(tables: impl IntoIterator<Item = (&'a str, &'a [String])>) -> HostRefs {
        let mut r = HostRefs::default();
        for (section, entries) in tables {
            let list = match section {
                ".nvHRKE" => &mut r.ek,
                ".nvHRKI" => &mut r.ik,
                ".nvHRDE" => &mut r.eg,
                ".nvHRDI" => &mut r.ig,
                ".nvHRCE" => &mut r.ec,
                ".nvHRCI" => &mut r.ic,
                _ => continue,
            };
            list.extend(entries.iter().cloned());
        }
        for l in [
            &mut r.ek, &mut r.ik, &mut r.ec, &mut r.ic, &mut r.eg, &mut r.ig,
        ] {
            l.reverse();
            let mut seen = std::collections::HashSet::new();
            l.retain(|e| seen.insert(e.clone()));
        }
        r.tables = true;
        r
    }

    /// From `-kernels-used` / `-variables-used` names: each becomes the pattern `*name*`,
    /// kernels in both kernel lists, variables in all four others.
    pub fn from_used(kernels: &[String], variables: &[String]) -> HostRefs {
        let pats = |v: &[String]| -> Vec<String> { v.iter().map(|s| format!("*{s}*")).collect() };
        let k = pats(kernels);
        let v = pats(variables);
        HostRefs {
            ek: k.clone(),
            ik: k,
            ec: v.clone(),
            ic: v.clone(),
            eg: v.clone(),
            ig: v,
            tables: false,
        }
    }

    /// Whether a kernel named `name` is in the kernel lists (`*` matches any run of
    /// characters, as in the tables and `-kernels-used`).
    pub fn keeps_kernel(&self, name: &str) -> bool {
        self.ek.iter().chain(&self.ik).any(|p| glob(p, name))
    }
}

/// `pattern` with `*` standing for any run of characters matches all of `name`.
pub fn glob(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for p in middle {
        match rest.find(p) {
            Some(at) => rest = &rest[at + p.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_patterns_match_as_globs() {
        let tables = ["_Z5saxpy*".to_string(), "exact".to_string()];
        let r = HostRefs::from_tables([(".nvHRKE", &tables[..])]);
        assert!(r.keeps_kernel("_Z5saxpyfPKfPfi"));
        assert!(r.keeps_kernel("exact"));
        assert!(!r.keeps_kernel("exactly"));
        assert!(!r.keeps_kernel("_Z7doublerPfi"));
        let used = HostRefs::from_used(&["axp".to_string()], &[]);
        assert!(used.keeps_kernel("_Z5saxpyfPKfPfi"));
        assert!(!used.keeps_kernel("_Z7doublerPfi"));
        assert!(glob("a*b*c", "a-b-c") && glob("a*b*c", "abc") && !glob("a*b*c", "ab"));
        assert!(!glob("ab*ba", "aba"));
    }
}
