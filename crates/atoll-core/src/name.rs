//! Names of islands and units.
//!
//! A name becomes a cgroup directory, so it is kept to a safe alphabet:
//! ASCII letters, digits, `_` and `-`, starting with a letter or digit, at most
//! 64 bytes. Dots are refused so that no name can collide with a cgroup
//! interface file such as `cpu.max`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

/// Names atoll keeps for itself.
pub const RESERVED: &[&str] = &["host"];

/// A validated island or unit name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Name(String);

/// Why a string is not a valid name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Empty or longer than 64 bytes.
    #[error("name {} must be 1 to 64 characters long", quoted(.0))]
    Length(String),
    /// A character outside the alphabet, or a bad first character.
    #[error("name {}: {ch:?} is not allowed (use letters, digits, '_' and '-', starting with a letter or digit)", quoted(.name))]
    Char {
        /// The name.
        name: String,
        /// The first bad character.
        ch: char,
    },
}

/// `s` quoted for a message: at most 64 characters of it (then `…`), so a
/// name of any length makes a short message.
fn quoted(s: &str) -> String {
    match s.char_indices().nth(64) {
        Some((i, _)) => format!("{:?}…", &s[..i]),
        None => format!("{s:?}"),
    }
}

impl Name {
    /// Validates `s` as a name.
    pub fn new(s: &str) -> Result<Self, NameError> {
        if s.is_empty() || s.len() > 64 {
            return Err(NameError::Length(s.to_string()));
        }
        for (i, ch) in s.chars().enumerate() {
            let ok = ch.is_ascii_alphanumeric() || (i > 0 && (ch == '_' || ch == '-'));
            if !ok {
                return Err(NameError::Char {
                    name: s.to_string(),
                    ch,
                });
            }
        }
        Ok(Self(s.to_string()))
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether atoll keeps this name for itself.
    pub fn is_reserved(&self) -> bool {
        RESERVED.contains(&self.0.as_str())
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::new(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_safe_names_and_refuses_others() {
        for ok in ["web", "db-1", "a_b", "X9"] {
            assert!(Name::new(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-a", "_a", "cpu.max", "a/b", "..", "é", &"x".repeat(65)] {
            assert!(Name::new(bad).is_err(), "{bad}");
        }
        assert!(Name::new("host").unwrap().is_reserved());
    }

    #[test]
    fn errors_quote_at_most_64_characters_of_the_name() {
        let long = "x".repeat(100_000);
        let e = Name::new(&long).unwrap_err().to_string();
        assert!(
            e.len() < 150,
            "{} bytes: {}",
            e.len(),
            &e[..200.min(e.len())]
        );
        assert!(e.contains(&format!("\"{}\"…", "x".repeat(64))), "{e}");
        assert_eq!(
            Name::new("a b").unwrap_err().to_string(),
            "name \"a b\": ' ' is not allowed (use letters, digits, '_' and '-', starting with a letter or digit)"
        );
    }
}
