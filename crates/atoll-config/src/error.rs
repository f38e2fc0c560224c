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

/// Most characters of user input (a key, a value, a name) a message quotes;
/// longer ones are cut and end in `…`.
pub const QUOTE_MAX: usize = 64;
/// Longest message of a [`Diagnostic`], bytes (then `…`).
pub const MESSAGE_MAX: usize = 400;
/// Longest key path of a [`Diagnostic`], bytes (then `…`).
pub const KEY_MAX: usize = 200;

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

/// `s` cut to at most `max` bytes at a character boundary, then `…`.
fn cap(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

/// A message with every run of user input cut to [`QUOTE_MAX`]
/// characters: the inside of `"…"` and `` `…` `` quotes, and any other run
/// of characters without a space (a value printed bare); then the whole to
/// [`MESSAGE_MAX`] bytes. Messages are built from templates around quoted
/// input, so this bounds them whatever the input, including the messages of
/// the TOML and serde layers.
pub(crate) fn clip_message(m: &str) -> String {
    let mut out = String::with_capacity(m.len().min(MESSAGE_MAX + 4));
    let mut quote: Option<char> = None;
    let mut run = 0usize;
    let mut cut = false;
    let mut escaped = false;
    for c in m.chars() {
        let closes = match quote {
            Some(q) if !escaped => c == q,
            _ => false,
        };
        if closes {
            quote = None;
            out.push(c);
            run = 0;
            cut = false;
            continue;
        }
        if quote.is_none() && (c == '"' || c == '`') {
            quote = Some(c);
            out.push(c);
            run = 0;
            cut = false;
            continue;
        }
        if quote.is_none() && c.is_whitespace() {
            out.push(c);
            run = 0;
            cut = false;
            continue;
        }
        escaped = quote == Some('"') && c == '\\' && !escaped;
        run += 1;
        if run <= QUOTE_MAX {
            out.push(c);
        } else if !cut {
            out.push('…');
            cut = true;
        }
    }
    cap(out, MESSAGE_MAX)
}

/// A dotted key path with each part cut to [`QUOTE_MAX`] characters, and
/// the whole to [`KEY_MAX`] bytes.
pub(crate) fn clip_key(k: &str) -> String {
    let parts: Vec<String> = k
        .split('.')
        .map(|p| match p.char_indices().nth(QUOTE_MAX) {
            Some((i, _)) => format!("{}…", &p[..i]),
            None => p.to_string(),
        })
        .collect();
    cap(parts.join("."), KEY_MAX)
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
    fn user_input_in_messages_and_keys_is_cut() {
        let long = "x".repeat(100_000);
        let m = clip_message(&format!("name {long:?} must be short"));
        assert_eq!(
            m,
            format!("name \"{}…\" must be short", "x".repeat(QUOTE_MAX))
        );
        let m = clip_message(&format!("unknown field `{long}`, expected `a`"));
        assert_eq!(
            m,
            format!("unknown field `{}…`, expected `a`", "x".repeat(QUOTE_MAX))
        );
        let m = clip_message(&format!("{long} is not an absolute path"));
        assert_eq!(
            m,
            format!("{}… is not an absolute path", "x".repeat(QUOTE_MAX))
        );
        // An escaped quote does not end the quote; an unclosed quote is cut.
        let m = clip_message(&format!("got \"a\\\"{long}\" and \"{long}"));
        assert!(m.starts_with("got \"a\\\"xxx"), "{m}");
        assert!(m.contains("…\" and \"xxx"), "{m}");
        assert!(m.len() < 2 * QUOTE_MAX + 30, "{m}");
        // Many short words still make a bounded message.
        let m = clip_message(&"ab \"c\" ".repeat(10_000));
        assert!(m.len() <= MESSAGE_MAX + '…'.len_utf8(), "{}", m.len());
        // Short messages are untouched, multi-byte characters counted as one.
        let e = "é".repeat(QUOTE_MAX);
        assert_eq!(clip_message(&format!("name {e:?}")), format!("name {e:?}"));
        assert_eq!(
            clip_key(&format!("island.{long}.cpus")),
            format!("island.{}….cpus", "x".repeat(QUOTE_MAX))
        );
        let deep = vec!["k"; 10_000].join(".");
        assert!(clip_key(&deep).len() <= KEY_MAX + 3);
        assert_eq!(clip_key("unit.api.adopt[1].comm"), "unit.api.adopt[1].comm");
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
