//! Option consensus across LTO modules: each IR module from a fatbin carries the NVVM
//! options it was compiled with (`-ftz=0 -prec_div=1 -prec_sqrt=1 -fmad=1 `, `-maxreg 32`,
//! `-generate-line-info`, ...). Before LTO they must agree, as nvlink decides: modules
//! that carry no option string (raw `.ltoir` files) take no part; a value some modules set
//! and others lack is taken for all, with an info; two different values are fatal. The
//! result also remembers which module set each value, for `-v`.

use crate::diag::{Error, Result};

/// The options tracked, in the order nvlink checks and reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opt {
    LineInfo,
    MaxReg,
    Ftz,
    PrecDiv,
    PrecSqrt,
    Fmad,
    SplitCompile,
    InlineInfo,
}

impl Opt {
    pub const ALL: [Opt; 8] = [
        Opt::LineInfo,
        Opt::MaxReg,
        Opt::Ftz,
        Opt::PrecDiv,
        Opt::PrecSqrt,
        Opt::Fmad,
        Opt::SplitCompile,
        Opt::InlineInfo,
    ];

    /// The name nvlink's messages use.
    pub fn name(self) -> &'static str {
        match self {
            Opt::LineInfo => "-lineinfo",
            Opt::MaxReg => "-maxrregcount",
            Opt::Ftz => "-ftz",
            Opt::PrecDiv => "-prec-div",
            Opt::PrecSqrt => "-prec-sqrt",
            Opt::Fmad => "-fmad",
            Opt::SplitCompile => "-split-compile",
            Opt::InlineInfo => "-inline-info",
        }
    }

    /// A flag (present or not) rather than an option with a value.
    pub fn is_flag(self) -> bool {
        matches!(self, Opt::LineInfo | Opt::InlineInfo)
    }

    fn index(self) -> usize {
        Opt::ALL.iter().position(|&o| o == self).unwrap_or(0)
    }
}

/// The tracked options found in one module's option string.
pub fn parse_module_options(s: &str) -> Vec<(Opt, u32)> {
    let mut out = Vec::new();
    let mut words = s.split_whitespace().peekable();
    while let Some(w) = words.next() {
        let (key, inline) = match w.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (w, None),
        };
        let opt = match key {
            "-ftz" => Opt::Ftz,
            "-prec_div" | "-prec-div" => Opt::PrecDiv,
            "-prec_sqrt" | "-prec-sqrt" => Opt::PrecSqrt,
            "-fmad" | "-fma" => Opt::Fmad,
            "-maxreg" => Opt::MaxReg,
            "-split-compile" => Opt::SplitCompile,
            "-generate-line-info" => {
                out.push((Opt::LineInfo, 1));
                continue;
            }
            "-inline-info" => {
                out.push((Opt::InlineInfo, 1));
                continue;
            }
            _ => continue,
        };
        let value = match inline {
            Some(v) => Some(v.to_string()),
            None => words.next_if(|n| !n.starts_with('-')).map(str::to_string),
        };
        if let Some(v) = value.and_then(|v| v.parse().ok()) {
            out.push((opt, v));
        }
    }
    out
}

#[derive(Clone, Debug, Default)]
struct Track {
    value: Option<u32>,
    /// The module that first set the value.
    set_by: Option<String>,
    /// Modules with an option string that lack the option.
    missing_in: Vec<String>,
    /// (module, value) of the first disagreement.
    conflict: Option<(String, u32)>,
}

/// The agreed values.
#[derive(Clone, Debug, Default)]
pub struct Consensus {
    tracks: [Track; 8],
    /// Modules that took part (had an option string).
    pub voters: usize,
}

/// What the check says before the link goes on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note(pub String);

impl Consensus {
    /// Records one module's options; `None` when the module carries no option string.
    pub fn add(&mut self, module: &str, options: Option<&str>) {
        let Some(options) = options else { return };
        self.voters += 1;
        let found = parse_module_options(options);
        for opt in Opt::ALL {
            let t = &mut self.tracks[opt.index()];
            match found.iter().rev().find(|(o, _)| *o == opt) {
                None => t.missing_in.push(module.to_string()),
                Some(&(_, v)) => match t.value {
                    None => {
                        t.value = Some(v);
                        t.set_by = Some(module.to_string());
                    }
                    Some(old) if old != v && t.conflict.is_none() => {
                        t.conflict = Some((module.to_string(), v));
                    }
                    Some(_) => {}
                },
            }
        }
    }

    /// nvlink's checks, in its order: an info (handed to `info` as it is found) for every
    /// option some modules lack, and a fatal error at the first option whose values differ.
    pub fn check(&self, info: &mut dyn FnMut(Note)) -> Result<()> {
        for opt in Opt::ALL {
            let t = &self.tracks[opt.index()];
            if let Some((by, v)) = &t.conflict {
                return Err(Error::fatal(format!(
                    "Cicc option values for '{}' do not match",
                    opt.name()
                ))
                .context(format!(
                    "'{}' has {}={}, '{}' has {}={v}",
                    t.set_by.as_deref().unwrap_or("?"),
                    opt.name(),
                    t.value.unwrap_or(0),
                    by,
                    opt.name()
                )));
            }
            if let (Some(v), false) = (t.value, t.missing_in.is_empty()) {
                let with = if opt.is_flag() {
                    opt.name().to_string()
                } else {
                    format!("{}={v}", opt.name())
                };
                info(Note(format!(
                    "Some objects do not have '{}' specified but others do; will build everything with '{with}'",
                    opt.name()
                )));
            }
        }
        Ok(())
    }

    /// The agreed value of an option, if any module set it.
    pub fn value(&self, opt: Opt) -> Option<u32> {
        self.tracks[opt.index()].value
    }

    /// Lines for `-v`: which module set which value, and which lacked it.
    pub fn explain(&self) -> Vec<String> {
        let mut out = Vec::new();
        for opt in Opt::ALL {
            let t = &self.tracks[opt.index()];
            let Some(v) = t.value else { continue };
            let shown = if opt.is_flag() {
                opt.name().to_string()
            } else {
                format!("{}={v}", opt.name())
            };
            let mut line = format!(
                "consensus: {shown} set by '{}'",
                t.set_by.as_deref().unwrap_or("?")
            );
            if !t.missing_in.is_empty() {
                line += &format!(", absent from {}", quoted(&t.missing_in));
            }
            out.push(line);
        }
        out
    }
}

fn quoted(v: &[String]) -> String {
    v.iter()
        .map(|s| format!("'{s}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT: &str = "-ftz=0 -prec_div=1 -prec_sqrt=1 -fmad=1 ";

    #[test]
    fn parses_module_strings() {
        assert_eq!(
            parse_module_options(
                "-maxreg 32 -generate-line-info -ftz=1 -prec_div=0 -prec_sqrt=0 -fmad=1 "
            ),
            vec![
                (Opt::MaxReg, 32),
                (Opt::LineInfo, 1),
                (Opt::Ftz, 1),
                (Opt::PrecDiv, 0),
                (Opt::PrecSqrt, 0),
                (Opt::Fmad, 1)
            ]
        );
    }

    #[test]
    fn agreement_and_missing() {
        let mut c = Consensus::default();
        c.add(
            "a.o",
            Some("-maxreg 32 -generate-line-info -ftz=0 -prec_div=1 -prec_sqrt=1 -fmad=1 "),
        );
        c.add("b.o", Some(DEFAULT));
        c.add("c.ltoir", None);
        let mut notes = Vec::new();
        c.check(&mut |n| notes.push(n)).unwrap();
        assert_eq!(
            notes,
            vec![
                Note("Some objects do not have '-lineinfo' specified but others do; will build everything with '-lineinfo'".into()),
                Note("Some objects do not have '-maxrregcount' specified but others do; will build everything with '-maxrregcount=32'".into()),
            ]
        );
        assert_eq!(c.value(Opt::MaxReg), Some(32));
        assert_eq!(c.voters, 2);
        assert!(c.explain()[0].contains("absent from 'b.o'"));
    }

    #[test]
    fn first_conflict_in_nvlink_order_is_fatal() {
        let mut c = Consensus::default();
        c.add("a.o", Some(DEFAULT));
        c.add("b.o", Some("-ftz=1 -prec_div=0 -prec_sqrt=0 -fmad=1 "));
        let e = c.check(&mut |_| {}).unwrap_err();
        assert_eq!(e.message(), "Cicc option values for '-ftz' do not match");
    }
}
