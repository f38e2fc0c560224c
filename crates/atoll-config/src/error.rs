//! Config errors: every problem found, each with a file, line, column and key.
//!
//! Problems are first collected as [`Problem`]s that say *where* they are
//! either as a byte span (syntax and type errors from the TOML layer) or as a
//! dotted key path (`island.web.cpus`, from resolution and
//! [`PlatformSpec::validate`](atoll_core::spec::PlatformSpec::validate)).
//! [`crate::spans`] turns both into line and column once the whole document
//! has been examined, so that one [`ConfigError`] carries all of them.

use std::fmt;
use std::ops::Range;

/// One problem in a config file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file name given to [`crate::parse`] or the path given to
    /// [`crate::load`].
    pub source: String,
    /// 1-based line; 0 when the problem is with the file as a whole (it could
    /// not be read).
    pub line: usize,
    /// 1-based column in characters; 0 together with `line`.
    pub column: usize,
    /// Dotted key path of the offending value (`unit.api.memory_max`,
    /// `unit.api.adopt[1]`), when there is one.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    /// `FILE:LINE:COL: KEY: message` (the key part only when there is one;
    /// `FILE: message` when there is no position).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:", self.source)?;
        if self.line > 0 {
            write!(f, "{}:{}:", self.line, self.column)?;
        }
        if let Some(key) = &self.key {
            write!(f, " {key}:")?;
        }
        write!(f, " {}", self.message)
    }
}

/// A config that could not be read, parsed or validated.
///
/// Displays as one line per problem, in document order.
#[derive(Debug, thiserror::Error)]
pub struct ConfigError {
    /// Every problem found, sorted by position.
    pub diagnostics: Vec<Diagnostic>,
    /// The I/O error when the file could not be read.
    #[source]
    pub io: Option<std::io::Error>,
}

impl ConfigError {
    /// An error made of `diagnostics` (sorted by position here).
    pub fn new(mut diagnostics: Vec<Diagnostic>) -> Self {
        diagnostics.sort_by_key(|d| (d.line, d.column));
        Self {
            diagnostics,
            io: None,
        }
    }

    /// The file at `path` could not be read.
    pub fn read(path: &std::path::Path, err: std::io::Error) -> Self {
        Self {
            diagnostics: vec![Diagnostic {
                source: path.display().to_string(),
                line: 0,
                column: 0,
                key: None,
                message: format!("cannot read the config file: {err}"),
            }],
            io: Some(err),
        }
    }

    /// `"LINE:COL"` of every diagnostic, for tests and terse output.
    pub fn positions(&self) -> Vec<String> {
        self.diagnostics
            .iter()
            .map(|d| format!("{}:{}", d.line, d.column))
            .collect()
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.diagnostics.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

/// Where a problem is, before it is turned into a line and column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Pos {
    /// A byte span in the document.
    Span(Range<usize>),
    /// A dotted key path, looked up in the document (falling back to its
    /// parents, then 1:1).
    Key(String),
    /// Nowhere in particular: 1:1.
    Start,
}

/// A problem before positions are resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Problem {
    /// Where to point.
    pub pos: Pos,
    /// The key to print; `None` to derive it from the position.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl Problem {
    /// A problem at the key path `key` (also printed).
    pub fn at_key(key: impl Into<String>, message: impl Into<String>) -> Self {
        let key = key.into();
        Self {
            pos: Pos::Key(key.clone()),
            key: Some(key),
            message: message.into(),
        }
    }

    /// A problem at a byte span; the printed key is derived from the span.
    pub fn at_span(span: Range<usize>, message: impl Into<String>) -> Self {
        Self {
            pos: Pos::Span(span),
            key: None,
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diag(line: usize, column: usize, key: Option<&str>, message: &str) -> Diagnostic {
        Diagnostic {
            source: "a.toml".into(),
            line,
            column,
            key: key.map(str::to_string),
            message: message.into(),
        }
    }

    #[test]
    fn displays_one_line_per_problem_in_order() {
        let e = ConfigError::new(vec![
            diag(7, 1, Some("unit.api.foo"), "unknown field `foo`"),
            diag(2, 8, None, "expected `=`"),
        ]);
        assert_eq!(
            e.to_string(),
            "a.toml:2:8: expected `=`\na.toml:7:1: unit.api.foo: unknown field `foo`"
        );
        assert_eq!(e.positions(), ["2:8", "7:1"]);
    }

    #[test]
    fn read_errors_carry_the_path_and_the_io_error() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let e = ConfigError::read(std::path::Path::new("/etc/atoll.toml"), io);
        assert_eq!(
            e.to_string(),
            "/etc/atoll.toml: cannot read the config file: gone"
        );
        assert_eq!(
            e.io.as_ref().map(std::io::Error::kind),
            Some(std::io::ErrorKind::NotFound)
        );
    }
}
