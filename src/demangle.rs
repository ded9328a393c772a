//! C++ (Itanium ABI) name demangling for the messages and dumps that show device function
//! names the way nvlink does (`-dump-callgraph`): nvlink prints them in the style of
//! NVIDIA's demangler (EDG's), which differs from GNU's c++filt in its spacing and
//! literals: `saxpy(float, const float *, float *, int)`, `int tw<(int)1>(int)`,
//! `float *const`, `int (*)(int, int)`.
//!
//! The grammar covered is what device code uses: plain, nested (`N…E`) and internal
//! (`L`) names, templates with type and literal arguments, the builtin types, pointers,
//! references, cv-qualifiers, arrays, function types, substitutions (`S_`, `S0_`, the
//! `St`/`Sa`/`Ss` abbreviations) and template parameters (`T_`). A name outside it comes
//! back as it was given (never an error: a dump still shows the symbol).

/// The demangled form of `name`, or `name` itself when it is not a mangled C++ name this
/// demangler reads.
pub fn demangle(name: &str) -> String {
    // nvcc's name for a file-scope static kernel or function under -rdc:
    // `__nv_static_<n>__` and n characters (the file's tag and a `_`), then its own name
    if let Some(own) = static_name(name) {
        // (an own name it cannot read: the whole name comes back as given)
        let d = demangle(own);
        return if d == own { name.to_string() } else { d };
    }
    let Some(rest) = name.strip_prefix("_Z") else {
        return name.to_string();
    };
    let mut p = Parser {
        s: rest.as_bytes(),
        at: 0,
        subs: Vec::new(),
        template_args: Vec::new(),
        depth: 0,
        deleting: false,
    };
    match p.encoding() {
        // (a name that reads as nothing, `_ZC0` alone, comes back as given)
        Some(text) if text.is_empty() => name.to_string(),
        // (a deleting destructor, `D0`, as NVIDIA's demangler marks it)
        Some(text) if p.at == p.s.len() && p.deleting => format!("{text} [deleting]"),
        Some(text) if p.at == p.s.len() => text,
        _ => name.to_string(),
    }
}

#[derive(Clone, Debug)]
enum Ty {
    /// A builtin or named type, printed as it is.
    Name(String),
    Ptr(Box<Ty>),
    Ref(Box<Ty>),
    RRef(Box<Ty>),
    /// `const`/`volatile` (in that order) on a type.
    Cv(Box<Ty>, String),
    Func(Box<Ty>, Vec<Ty>),
    Array(String, Box<Ty>),
}

/// `t` declaring `inner` (a declarator: `*`, `(*)`, a name, …), C style with NVIDIA's
/// spacing: a space between the type and the declarator, none between stars.
fn declare(t: &Ty, inner: &str) -> String {
    let join = |base: &str| {
        if inner.is_empty() {
            base.to_string()
        } else {
            format!("{base} {inner}")
        }
    };
    let wrap = |t: &Ty, sigil: &str| match t {
        Ty::Func(..) | Ty::Array(..) => declare(t, &format!("({sigil}{inner})")),
        _ => declare(t, &format!("{sigil}{inner}")),
    };
    match t {
        Ty::Name(n) => join(n),
        Ty::Ptr(t) => wrap(t, "*"),
        Ty::Ref(t) => wrap(t, "&"),
        Ty::RRef(t) => wrap(t, "&&"),
        Ty::Cv(t, q) => match &**t {
            Ty::Name(n) => join(&format!("{q} {n}")),
            Ty::Ptr(_) | Ty::Ref(_) | Ty::RRef(_) => {
                let inner = if inner.is_empty() {
                    q.clone()
                } else {
                    format!("{q} {inner}")
                };
                declare(t, &inner)
            }
            other => declare(other, inner),
        },
        Ty::Func(ret, params) => declare(ret, &format!("{inner}({})", params_text(params))),
        Ty::Array(n, t) => declare(t, &format!("{inner}[{n}]")),
    }
}

fn params_text(params: &[Ty]) -> String {
    if matches!(params, [Ty::Name(v)] if v == "void") {
        return String::new();
    }
    params
        .iter()
        .map(|t| declare(t, ""))
        .collect::<Vec<_>>()
        .join(", ")
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
    /// Substitution candidates, in the order the ABI numbers them.
    subs: Vec<Ty>,
    /// The innermost template arguments, for `T_`.
    template_args: Vec<Ty>,
    depth: u32,
    /// A deleting destructor's name (`D0`) was read.
    deleting: bool,
}

/// A parsed name: its text, whether it ends in template arguments (a template function's
/// encoding then starts with its return type), and trailing cv-qualifiers of a member.
struct Name {
    text: String,
    template: bool,
    cv: String,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn encoding(&mut self) -> Option<String> {
        self.depth += 1;
        if self.depth > 64 {
            return None;
        }
        let name = self.name()?;
        if self.at == self.s.len() || self.peek() == Some(b'E') {
            return Some(name.text); // a variable, or a name inside a local name
        }
        let ret = if name.template {
            Some(self.ty()?)
        } else {
            None
        };
        let mut params = Vec::new();
        while self.at < self.s.len() && self.peek() != Some(b'E') {
            params.push(self.ty()?);
        }
        let mut text = format!("{}({})", name.text, params_text(&params));
        if !name.cv.is_empty() {
            text = format!("{text} {}", name.cv);
        }
        Some(match ret {
            Some(r) => format!("{} {text}", declare(&r, "")),
            None => text,
        })
    }

    fn number(&mut self) -> Option<usize> {
        let start = self.at;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.at += 1;
        }
        std::str::from_utf8(&self.s[start..self.at])
            .ok()?
            .parse()
            .ok()
    }

    fn source_name(&mut self) -> Option<String> {
        // (a name of no characters is none: `_Z0` came back empty)
        let n = self.number().filter(|&n| n > 0)?;
        let end = self.at.checked_add(n).filter(|&e| e <= self.s.len())?;
        let text = std::str::from_utf8(&self.s[self.at..end]).ok()?.to_string();
        self.at = end;
        Some(if text.starts_with("_GLOBAL__N") {
            "<unnamed>".to_string()
        } else {
            text
        })
    }

    /// `S_`, `S<seq-id>_` and the standard abbreviations.
    fn substitution(&mut self) -> Option<Ty> {
        if !self.eat(b'S') {
            return None;
        }
        let abbreviation = match self.peek()? {
            b't' => Some("std"),
            b'a' => Some("std::allocator"),
            b'b' => Some("std::basic_string"),
            b's' => Some("std::string"),
            b'i' => Some("std::istream"),
            b'o' => Some("std::ostream"),
            b'd' => Some("std::iostream"),
            _ => None,
        };
        if let Some(a) = abbreviation {
            self.at += 1;
            return Some(Ty::Name(a.to_string()));
        }
        let index = if self.eat(b'_') {
            0
        } else {
            let start = self.at;
            while self
                .peek()
                .is_some_and(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
            {
                self.at += 1;
            }
            let digits = std::str::from_utf8(&self.s[start..self.at]).ok()?;
            if !self.eat(b'_') {
                return None;
            }
            usize::from_str_radix(digits, 36).ok()? + 1
        };
        self.subs.get(index).cloned()
    }

    fn template_param(&mut self) -> Option<Ty> {
        if !self.eat(b'T') {
            return None;
        }
        let index = if self.eat(b'_') {
            0
        } else {
            let n = self.number()? + 1;
            if !self.eat(b'_') {
                return None;
            }
            n
        };
        // (nvlink prints a reference to the function's template parameter by position,
        // as EDG's demangler does: `void g<float>(T1, T1 *)`)
        self.template_args
            .get(index)
            .map(|_| Ty::Name(format!("T{}", index + 1)))
    }

    fn template_args(&mut self) -> Option<(String, Vec<Ty>)> {
        if !self.eat(b'I') {
            return None;
        }
        let mut texts = Vec::new();
        let mut args = Vec::new();
        while !self.eat(b'E') {
            if self.eat(b'L') {
                let t = self.ty()?;
                let neg = self.eat(b'n');
                let start = self.at;
                while self.peek().is_some_and(|c| c != b'E') {
                    self.at += 1;
                }
                let value = std::str::from_utf8(&self.s[start..self.at])
                    .ok()?
                    .to_string();
                if !self.eat(b'E') {
                    return None;
                }
                let text = format!("({}){}{value}", declare(&t, ""), if neg { "-" } else { "" });
                args.push(Ty::Name(text.clone()));
                texts.push(text);
            } else {
                let t = self.ty()?;
                texts.push(declare(&t, ""));
                args.push(t);
            }
        }
        let mut text = format!("<{}", texts.join(", "));
        text.push_str(if text.ends_with('>') { " >" } else { ">" });
        Some((text, args))
    }

    fn unqualified(&mut self, enclosing: &str) -> Option<String> {
        self.eat(b'L'); // internal linkage (GCC's mark)
        match self.peek()? {
            b'0'..=b'9' => self.source_name(),
            b'C' => {
                self.at += 1;
                self.peek()?;
                self.at += 1;
                Some(last_component(enclosing).to_string())
            }
            b'D' if matches!(self.s.get(self.at + 1), Some(b'0'..=b'2')) => {
                self.deleting |= self.s[self.at + 1] == b'0';
                self.at += 2;
                Some(format!("~{}", last_component(enclosing)))
            }
            _ => None,
        }
    }

    fn name(&mut self) -> Option<Name> {
        if self.eat(b'N') {
            let mut cv = Vec::new();
            if self.eat(b'r') {
                cv.push("restrict");
            }
            if self.eat(b'V') {
                cv.push("volatile");
            }
            if self.eat(b'K') {
                cv.push("const");
            }
            cv.reverse();
            let mut text = String::new();
            let mut template = false;
            while !self.eat(b'E') {
                template = false;
                if self.peek() == Some(b'S') {
                    let t = self.substitution()?;
                    text = declare(&t, "");
                    continue;
                }
                if self.peek() == Some(b'T') {
                    let t = self.template_param()?;
                    text = declare(&t, "");
                    self.subs.push(Ty::Name(text.clone()));
                    continue;
                }
                if self.peek() == Some(b'I') {
                    let (args_text, args) = self.template_args()?;
                    text.push_str(&args_text);
                    self.template_args = args;
                    template = true;
                } else {
                    let part = self.unqualified(&text)?;
                    // (nvcc's per-file namespace for internal-linkage names under -rdc;
                    // nvlink prints the names without it)
                    if text.is_empty() && part.starts_with("_INTERNAL_") {
                        if self.peek() != Some(b'E') {
                            self.subs.push(Ty::Name(part));
                        }
                        continue;
                    }
                    text = if text.is_empty() {
                        part
                    } else {
                        format!("{text}::{part}")
                    };
                }
                if self.peek() != Some(b'E') {
                    self.subs.push(Ty::Name(text.clone()));
                }
            }
            return Some(Name {
                text,
                template,
                cv: cv.join(" "),
            });
        }
        let mut text = if self.peek() == Some(b'S') {
            let t = self.substitution()?;
            let base = declare(&t, "");
            if base == "std" {
                format!("std::{}", self.unqualified("")?)
            } else {
                base
            }
        } else {
            self.unqualified("")?
        };
        let mut template = false;
        if self.peek() == Some(b'I') {
            self.subs.push(Ty::Name(text.clone()));
            let (args_text, args) = self.template_args()?;
            text.push_str(&args_text);
            self.template_args = args;
            template = true;
        }
        Some(Name {
            text,
            template,
            cv: String::new(),
        })
    }

    fn ty(&mut self) -> Option<Ty> {
        self.depth += 1;
        if self.depth > 256 {
            return None;
        }
        let c = self.peek()?;
        let builtin = match c {
            b'v' => Some("void"),
            b'w' => Some("wchar_t"),
            b'b' => Some("bool"),
            b'c' => Some("char"),
            b'a' => Some("signed char"),
            b'h' => Some("unsigned char"),
            b's' => Some("short"),
            b't' => Some("unsigned short"),
            b'i' => Some("int"),
            b'j' => Some("unsigned int"),
            b'l' => Some("long"),
            b'm' => Some("unsigned long"),
            b'x' => Some("long long"),
            b'y' => Some("unsigned long long"),
            b'n' => Some("__int128"),
            b'o' => Some("unsigned __int128"),
            b'f' => Some("float"),
            b'd' => Some("double"),
            b'e' => Some("long double"),
            b'g' => Some("__float128"),
            b'z' => Some("..."),
            _ => None,
        };
        if let Some(b) = builtin {
            self.at += 1;
            return Some(Ty::Name(b.to_string()));
        }
        let t = match c {
            b'P' | b'R' | b'O' => {
                self.at += 1;
                let inner = Box::new(self.ty()?);
                match c {
                    b'P' => Ty::Ptr(inner),
                    b'R' => Ty::Ref(inner),
                    _ => Ty::RRef(inner),
                }
            }
            b'K' | b'V' | b'r' => {
                let mut q = Vec::new();
                while let Some(c @ (b'r' | b'V' | b'K')) = self.peek() {
                    self.at += 1;
                    q.push(match c {
                        b'K' => "const",
                        b'V' => "volatile",
                        _ => "restrict",
                    });
                }
                q.reverse();
                Ty::Cv(Box::new(self.ty()?), q.join(" "))
            }
            b'F' => {
                self.at += 1;
                self.eat(b'Y');
                let ret = self.ty()?;
                let mut params = Vec::new();
                while !self.eat(b'E') {
                    params.push(self.ty()?);
                }
                Ty::Func(Box::new(ret), params)
            }
            b'A' => {
                self.at += 1;
                let n = self.number()?;
                if !self.eat(b'_') {
                    return None;
                }
                Ty::Array(n.to_string(), Box::new(self.ty()?))
            }
            b'D' => {
                let t = match self.s.get(self.at + 1)? {
                    b'n' => "std::nullptr_t",
                    b'h' => "__half",
                    b'i' => "char32_t",
                    b's' => "char16_t",
                    b'u' => "char8_t",
                    _ => return None,
                };
                self.at += 2;
                return Some(Ty::Name(t.to_string()));
            }
            b'S' => {
                let t = self.substitution()?;
                if declare(&t, "") == "std" {
                    let name = format!("std::{}", self.unqualified("")?);
                    let t = Ty::Name(name);
                    self.subs.push(t.clone());
                    return self.maybe_template(t);
                }
                // a substituted template name may take arguments of its own
                return self.maybe_template(t);
            }
            b'T' => {
                let t = self.template_param()?;
                self.subs.push(t.clone());
                return self.maybe_template(t);
            }
            _ => {
                let name = self.name()?;
                let t = Ty::Name(name.text);
                self.subs.push(t.clone());
                return Some(t);
            }
        };
        self.subs.push(t.clone());
        Some(t)
    }

    /// A type followed by template arguments (`S_IiE`): the instantiation.
    fn maybe_template(&mut self, t: Ty) -> Option<Ty> {
        if self.peek() != Some(b'I') {
            return Some(t);
        }
        let (args, _) = self.template_args()?;
        let t = Ty::Name(format!("{}{args}", declare(&t, "")));
        self.subs.push(t.clone());
        Some(t)
    }
}

/// The mangled name inside nvcc's `__nv_static_<n>__<n characters><name>`, when
/// `name` is one and what follows is a mangled name.
fn static_name(name: &str) -> Option<&str> {
    let rest = name.strip_prefix("__nv_static_")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let n: usize = rest[..digits].parse().ok()?;
    let tagged = rest[digits..].strip_prefix("__")?;
    tagged.get(n..).filter(|own| own.starts_with("_Z"))
}

fn last_component(name: &str) -> &str {
    let base = name.split('<').next().unwrap_or(name);
    base.rsplit("::").next().unwrap_or(base)
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn names_read_as_nvlink_prints_them() {
        // each pair as nvlink 13.5 prints it in -dump-callgraph (fixtures and generated
        // programs)
        for (mangled, want) in [
            (
                "_Z5saxpyfPKfPfi",
                "saxpy(float, const float *, float *, int)",
            ),
            ("_Z7doublerPfi", "doubler(float *, int)"),
            ("_Z5scalef", "scale(float)"),
            ("_Z4f0_0ii", "f0_0(int, int)"),
            ("_Z4k0_1Pii", "k0_1(int *, int)"),
            ("_Z2twILi1EEii", "int tw<(int)1>(int)"),
            ("_Z1hIiEv1WIT_EPS1_", "void h<int>(W<T1>, T1 *)"),
            ("_Z1gIfEvT_PS0_", "void g<float>(T1, T1 *)"),
            // internal-linkage names under -rdc (libcudadevrt's and a fixture's)
            (
                "_ZN60_INTERNAL_0afad4c0_22_cuda_device_runtime_cu_f78b5b52_73589224cnprtCnpv2TranslateErrorE13CNPerror_enum",
                "cnprtCnpv2TranslateError(CNPerror_enum)",
            ),
            (
                "__nv_static_51__0afad4c0_22_cuda_device_runtime_cu_f78b5b52_735892__Z16memset_3d_deviceIjLi0ELi0ELi1EEv12MemsetParamsIT_E",
                "void memset_3d_device<unsigned int, (int)0, (int)0, (int)1>(MemsetParams<T1>)",
            ),
            (
                "__nv_static_26__a7d7f646_5_st_cu_4536d6f1__Z2tkILi3EEvPi",
                "void tk<(int)3>(int *)",
            ),
            (
                "_ZN35_INTERNAL_a7d7f646_5_st_cu_4536d6f137_GLOBAL__N__a7d7f646_5_st_cu_4536d6f14anonEi",
                "<unnamed>::anon(int)",
            ),
            // virtual destructors (a program nobody here wrote: shapes with vtables)
            ("_ZN4RectD0Ev", "Rect::~Rect() [deleting]"),
            ("_ZN4RectD1Ev", "Rect::~Rect()"),
            ("_ZNK6Circle5perimEv", "Circle::perim() const"),
        ] {
            assert_eq!(demangle(mangled), want, "{mangled}");
        }
    }

    #[test]
    fn the_rest_of_the_grammar_reads_in_the_same_style() {
        for (mangled, want) in [
            ("_ZL4treefi", "tree(float, int)"),
            ("_Z1fv", "f()"),
            ("_Z1fPPc", "f(char **)"),
            ("_Z1fKPf", "f(float *const)"),
            ("_Z1fPFiiiE", "f(int (*)(int, int))"),
            ("_Z1fRKi", "f(const int &)"),
            ("_ZN2ns1fEi", "ns::f(int)"),
            ("_ZN2ns1S1gEv", "ns::S::g()"),
            ("_ZNK2ns1S1gEv", "ns::S::g() const"),
            ("_Z1fN2ns1SES0_", "f(ns::S, ns::S)"),
            ("_Z1fPiS_", "f(int *, int *)"),
            ("_Z1fILj3EEvv", "void f<(unsigned int)3>()"),
            ("_Z1fILin2EEvv", "void f<(int)-2>()"),
            ("_Z1fIfEvT_", "void f<float>(T1)"),
        ] {
            assert_eq!(demangle(mangled), want, "{mangled}");
        }
    }

    #[test]
    fn what_it_cannot_read_comes_back_unchanged() {
        for name in [
            "main",
            "_Z",
            "_Z99f",
            "_ZN2ns1f",
            "_Z1fS9_",
            "$__internal",
            "_Z1fA9999999999999999999999_i",
            "_Z0",
            "__nv_static_000___Z0",
            "__nv_static_",
            "__nv_static_99__x_Z1fv",
            "__nv_static_1__xfoo",
            // (names that read as nothing: a constructor of no class)
            "_ZC0",
            "__nv_static_0011___Z\0\0\0\0nstat_ZC0",
        ] {
            assert_eq!(demangle(name), name);
        }
    }
}
