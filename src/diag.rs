//! Diagnostics: the one error type (a message with a context chain and the exit status
//! nvlink would give), and the sink that prints warnings and infos the way nvlink does
//! (`<tool> <level padded to 8> : <message>` on stderr).

use std::fmt;
use std::sync::Mutex;

/// Writes `text` to standard error. A stderr that cannot be written (`2>/dev/full`, a
/// pipe whose reader has gone) is ignored, as nvlink ignores it: the link goes on and
/// writes its output. (SIGPIPE stays ignored, as Rust's runtime sets it: a write to a
/// closed pipe fails with EPIPE instead of ending the process.)
pub fn to_stderr(text: &str) {
    use std::io::Write;
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Writes `text` to standard output, ignoring a failure as [`to_stderr`] does.
pub fn to_stdout(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}

/// How a failed run ends, in nvlink's terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// Stops at once; exit status 1.
    Fatal,
    /// Accumulated errors; the run ends with exit status 255 and no output.
    Error,
}

impl Severity {
    pub fn exit_code(self) -> u8 {
        match self {
            Severity::Fatal => 1,
            Severity::Error => 255,
        }
    }
}

/// The error type of the whole crate: nvlink's message first (so that tools comparing
/// messages see the same text), then what we know about where it happened.
#[derive(Debug, Clone)]
pub struct Error {
    severity: Severity,
    message: String,
    /// Innermost first: "in 'a.o'", "while reading archive 'lib.a'" ...
    context: Vec<String>,
    /// Another tool's lines that come before this error's (a failed ptxas's messages).
    tool_output: String,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn fatal(message: impl Into<String>) -> Error {
        Error {
            severity: Severity::Fatal,
            message: message.into(),
            context: Vec::new(),
            tool_output: String::new(),
        }
    }

    /// Errors that nvlink reports and keeps going (several may be printed), then exits 255.
    pub fn error(message: impl Into<String>) -> Error {
        Error {
            severity: Severity::Error,
            message: message.into(),
            context: Vec::new(),
            tool_output: String::new(),
        }
    }

    pub fn context(mut self, ctx: impl Into<String>) -> Error {
        self.context.push(ctx.into());
        self
    }

    /// Another tool's messages, printed (through [`Diagnostics::tool_output`]) before this
    /// error's line when it is reported: what a failed ptxas said, then nvlink's words.
    pub fn after_tool_output(mut self, text: impl Into<String>) -> Error {
        self.tool_output = text.into();
        self
    }

    /// The same error in other words (nvlink words one failure differently by phase).
    pub fn reworded(mut self, message: impl Into<String>) -> Error {
        self.message = message.into();
        self
    }

    pub fn severity(&self) -> Severity {
        self.severity
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The other tool's lines printed before this error's ([`Error::after_tool_output`]).
    pub fn tool_output(&self) -> &str {
        &self.tool_output
    }

    pub fn context_chain(&self) -> &[String] {
        &self.context
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        for c in &self.context {
            write!(f, "\n  {c}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// Adds context to any fallible result.
pub trait Context<T> {
    fn context(self, ctx: impl Into<String>) -> Result<T>;
    fn with_context<S: Into<String>>(self, f: impl FnOnce() -> S) -> Result<T>;
}

impl<T> Context<T> for Result<T> {
    fn context(self, ctx: impl Into<String>) -> Result<T> {
        self.map_err(|e| e.context(ctx))
    }
    fn with_context<S: Into<String>>(self, f: impl FnOnce() -> S) -> Result<T> {
        self.map_err(|e| e.context(f()))
    }
}

/// "1 stand-in", "2 stand-ins": a count and its noun, for messages.
pub fn counted(n: usize, what: &str) -> String {
    match n {
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    }
}

/// A malformed-input error: which file, where in it, what was expected.
/// Every parser builds its errors through this so the messages look alike.
pub fn malformed(origin: &str, offset: u64, what: impl fmt::Display) -> Error {
    Error::fatal(format!("'{origin}' at offset {offset:#x}: {what}"))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Info,
    Warning,
    Error,
    Fatal,
    /// Another tool's lines (ptxas's warnings and `-v` report), printed as they came.
    Tool,
}

impl Level {
    pub fn word(self) -> &'static str {
        match self {
            Level::Info => "info",
            Level::Warning => "warning",
            Level::Error => "error",
            Level::Fatal => "fatal",
            Level::Tool => "",
        }
    }
}

/// Collects and prints non-fatal diagnostics. Shared by every phase (it is `Sync`).
pub struct Diagnostics {
    tool: String,
    disable_warnings: bool,
    disable_infos: bool,
    warnings_as_errors: bool,
    /// Suffix appended to every message (`-report-arch`).
    suffix: String,
    /// False for a collector whose messages another process prints.
    print: bool,
    state: Mutex<DiagState>,
}

#[derive(Default)]
struct DiagState {
    errors: usize,
    printed: Vec<(Level, String)>,
}

impl Diagnostics {
    /// `-tool-name NAME`: the name messages start with.
    pub fn set_tool(&mut self, tool: &str) {
        self.tool = tool.to_string();
    }

    pub fn new(tool: &str) -> Diagnostics {
        Diagnostics {
            tool: tool.to_string(),
            disable_warnings: false,
            disable_infos: false,
            warnings_as_errors: false,
            suffix: String::new(),
            print: true,
            state: Mutex::new(DiagState::default()),
        }
    }

    /// Records messages without printing them (see [`Diagnostics::printed`]).
    pub fn collector() -> Diagnostics {
        Diagnostics {
            print: false,
            ..Diagnostics::new("")
        }
    }

    pub fn configure(&mut self, no_warnings: bool, no_infos: bool, werror: bool, suffix: String) {
        self.disable_warnings = no_warnings;
        self.disable_infos = no_infos;
        self.warnings_as_errors = werror;
        self.suffix = suffix;
    }

    /// nvlink's line, then any detail lines of ours (after a newline in the message,
    /// indented) below it.
    pub fn format(&self, level: Level, message: &str) -> String {
        let (first, detail) = match message.split_once('\n') {
            Some((first, detail)) => (first, format!("\n{detail}")),
            None => (message, String::new()),
        };
        format!(
            "{} {:<8}: {}{}{detail}",
            self.tool,
            level.word(),
            first,
            self.suffix
        )
    }

    fn emit(&self, level: Level, message: &str) {
        if self.print {
            to_stderr(&(self.format(level, message) + "\n"));
        }
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if level == Level::Error {
            st.errors += 1;
        }
        st.printed.push((level, message.to_string()));
    }

    pub fn info(&self, message: &str) {
        if !self.disable_infos {
            self.emit(Level::Info, message);
        }
    }

    /// An info line `-disable-infos` does not silence (nvlink's `-v` resource report
    /// and its note on inputs without host code).
    pub fn info_always(&self, message: &str) {
        self.emit(Level::Info, message);
    }

    pub fn warning(&self, message: &str) {
        if self.warnings_as_errors {
            self.emit(Level::Error, message);
        } else if !self.disable_warnings {
            self.emit(Level::Warning, message);
        }
    }

    /// A warning about the link's surroundings, not its inputs (a shared cache that
    /// failed): `-Werror` does not make it an error, as it must never fail a link.
    pub fn warning_never_error(&self, message: &str) {
        if !self.disable_warnings {
            self.emit(Level::Warning, message);
        }
    }

    /// Several warnings at once, printed with one write (a link may have thousands).
    pub fn warnings(&self, messages: &[String]) {
        if self.warnings_as_errors {
            messages.iter().for_each(|m| self.emit(Level::Error, m));
            return;
        }
        if self.disable_warnings || messages.is_empty() {
            return;
        }
        if self.print {
            let mut text = String::new();
            for m in messages {
                text.push_str(&self.format(Level::Warning, m));
                text.push('\n');
            }
            to_stderr(&text);
        }
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.printed
            .extend(messages.iter().map(|m| (Level::Warning, m.clone())));
    }

    pub fn error(&self, message: &str) {
        self.emit(Level::Error, message);
    }

    /// A line of `--explain` (`<tool> explain : ...`): printed whatever silences
    /// messages, and not recorded (a cached link never repeats it).
    pub fn explain(&self, message: &str) {
        if self.print {
            to_stderr(&format!("{} {:<8}: {message}\n", self.tool, "explain"));
        }
    }

    /// Another tool's messages, printed as they are and recorded (so that a cached link
    /// repeats them).
    pub fn tool_output(&self, text: &str) {
        if text.is_empty() {
            return;
        }
        if self.print {
            to_stderr(text);
        }
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.printed.push((Level::Tool, text.to_string()));
    }

    pub fn error_count(&self) -> usize {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).errors
    }

    /// The info messages so far, in order (what a collector hands on).
    pub fn infos(&self) -> Vec<String> {
        self.printed()
            .into_iter()
            .filter(|(l, _)| *l == Level::Info)
            .map(|(_, m)| m)
            .collect()
    }

    /// Prints what the collector `held` recorded, in order, as this link's own messages
    /// (a compile run before it was known to be wanted, `lto::phase`).
    pub fn replay(&self, held: &Diagnostics) {
        for (level, m) in held.printed() {
            match level {
                Level::Info => self.info(&m),
                Level::Warning => self.warning(&m),
                Level::Error | Level::Fatal => self.error(&m),
                Level::Tool => self.tool_output(&m),
            }
        }
    }

    /// Every message printed so far, in order (for reports and tests).
    pub fn printed(&self) -> Vec<(Level, String)> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .printed
            .clone()
    }

    /// Prints a terminal error and returns the exit status to use.
    pub fn report(&self, err: &Error) -> u8 {
        self.tool_output(&err.tool_output);
        let level = match err.severity() {
            Severity::Fatal => Level::Fatal,
            Severity::Error => Level::Error,
        };
        if !err.message().is_empty() {
            to_stderr(&(self.format(level, &err.to_string()) + "\n"));
        }
        err.severity().exit_code()
    }

    /// After a phase: accumulated errors end the run with nvlink's 255.
    pub fn check(&self) -> Result<()> {
        let n = self.error_count();
        if n > 0 {
            return Err(Error::error(format!("{n} error(s); no output written")));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    /// libloading's message is "dlopen failed"; the loader's reason is its source.
    #[test]
    fn a_library_load_error_says_the_loaders_reason() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libx.so");
        std::fs::write(&lib, b"hello").unwrap();
        // SAFETY: the file is no library: the loader refuses it before running anything.
        let e = unsafe { libloading::Library::new(&lib) }.unwrap_err();
        assert_eq!(
            super::with_sources(&e),
            format!("dlopen failed: {}: file too short", lib.display())
        );
    }

    use super::*;

    #[test]
    fn nvlink_line_format() {
        let d = Diagnostics::new("nvlink");
        assert_eq!(d.format(Level::Fatal, "x"), "nvlink fatal   : x");
        assert_eq!(d.format(Level::Warning, "x"), "nvlink warning : x");
        assert_eq!(d.format(Level::Info, "x"), "nvlink info    : x");
        assert_eq!(d.format(Level::Error, "x"), "nvlink error   : x");
    }

    #[test]
    fn werror_counts_warnings_as_errors() {
        let mut d = Diagnostics::new("nvlinkrs");
        d.configure(false, false, true, String::new());
        d.warning("w");
        assert_eq!(d.error_count(), 1);
        assert!(d.check().is_err());
    }

    #[test]
    fn context_chain_is_printed_innermost_first() {
        let e = Error::fatal("cubin not an elf?")
            .context("in 'a.cubin'")
            .context("outer");
        assert_eq!(e.to_string(), "cubin not an elf?\n  in 'a.cubin'\n  outer");
        assert_eq!(e.severity().exit_code(), 1);
    }
}

/// An error's message followed by its sources' (`dlopen failed: … invalid ELF header`):
/// libloading puts the loader's own reason in the source.
pub fn with_sources(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        text.push_str(": ");
        text.push_str(&s.to_string());
        next = s.source();
    }
    text
}
