//! One-value sysfs files.

use std::fs;
use std::io;
use std::path::Path;

use crate::PowerError;

/// Reads a file that may be absent; its content trimmed.
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>, PowerError> {
    match fs::read_to_string(path) {
        Ok(t) => Ok(Some(t.trim().to_string())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(PowerError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Reads a file that must exist.
pub(crate) fn read_required(path: &Path) -> Result<String, PowerError> {
    read_optional(path)?.ok_or_else(|| PowerError::Missing {
        path: path.to_path_buf(),
    })
}

/// Parses a non-negative integer.
pub(crate) fn parse_u64(path: &Path, text: &str) -> Result<u64, PowerError> {
    text.parse().map_err(|_| PowerError::Malformed {
        path: path.to_path_buf(),
        value: text.to_string(),
        reason: "expected a non-negative integer",
    })
}

/// Reads and parses a required integer file.
pub(crate) fn read_u64(path: &Path) -> Result<u64, PowerError> {
    parse_u64(path, &read_required(path)?)
}

/// Writes a value (no trailing newline needed by sysfs).
pub(crate) fn write(path: &Path, value: &str) -> Result<(), PowerError> {
    fs::write(path, value).map_err(|source| PowerError::Write {
        path: path.to_path_buf(),
        value: value.to_string(),
        source,
    })
}
