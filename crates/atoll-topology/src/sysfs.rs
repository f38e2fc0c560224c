//! Small readers for sysfs attribute files.
//!
//! sysfs files hold one short value followed by a newline. These helpers read
//! a file, trim it and parse it, turning every failure into a
//! [`TopologyError`] that names the file and quotes what was in it.

use std::fs;
use std::io;
use std::path::Path;

use atoll_core::CpuSet;

use crate::error::TopologyError;

/// Reads a file that must exist; returns its content trimmed.
pub(crate) fn read_required(path: &Path) -> Result<String, TopologyError> {
    match read_optional(path)? {
        Some(text) => Ok(text),
        None => Err(TopologyError::Missing {
            path: path.to_path_buf(),
        }),
    }
}

/// Reads a file that may be absent; returns its content trimmed.
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>, TopologyError> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text.trim().to_string())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(TopologyError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Builds a [`TopologyError::Malformed`].
pub(crate) fn malformed(path: &Path, value: &str, reason: impl Into<String>) -> TopologyError {
    TopologyError::Malformed {
        path: path.to_path_buf(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// Builds a [`TopologyError::Inconsistent`].
pub(crate) fn inconsistent(path: &Path, value: &str, reason: impl Into<String>) -> TopologyError {
    TopologyError::Inconsistent {
        path: path.to_path_buf(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// Parses a kernel list (`0-3,8`).
pub(crate) fn parse_list(path: &Path, text: &str) -> Result<CpuSet, TopologyError> {
    CpuSet::parse(text).map_err(|e| malformed(path, text, e.to_string()))
}

/// Parses a non-negative decimal number.
pub(crate) fn parse_u32(path: &Path, text: &str) -> Result<u32, TopologyError> {
    text.parse::<u32>()
        .map_err(|_| malformed(path, text, "expected a non-negative integer"))
}

/// Parses an id that the kernel prints as `-1` when unknown (some arm
/// machines do so for `physical_package_id`); `-1` gives `None`.
pub(crate) fn parse_id(path: &Path, text: &str) -> Result<Option<u32>, TopologyError> {
    if text == "-1" {
        return Ok(None);
    }
    text.parse::<u32>()
        .map(Some)
        .map_err(|_| malformed(path, text, "expected a non-negative integer or -1"))
}

/// Parses a cache `size` (`32K`, `1M`, `2G`) into KiB.
pub(crate) fn parse_size_kib(path: &Path, text: &str) -> Result<u64, TopologyError> {
    let bad = || malformed(path, text, "expected a size like 32K, 1M or 2G");
    let (digits, unit) = text.split_at(text.len().saturating_sub(1));
    let factor = match unit {
        "K" => 1,
        "M" => 1024,
        "G" => 1024 * 1024,
        _ => return Err(bad()),
    };
    let n = digits.parse::<u64>().map_err(|_| bad())?;
    n.checked_mul(factor).ok_or_else(bad)
}

/// Extracts `MemTotal` from a node's `meminfo`
/// (`Node 0 MemTotal:  4679896 kB`), in bytes.
pub(crate) fn parse_node_memtotal(
    path: &Path,
    text: &str,
    node: u32,
) -> Result<u64, TopologyError> {
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.get(2) != Some(&"MemTotal:") {
            continue;
        }
        let line = line.trim();
        return match words.as_slice() {
            ["Node", n, _, kb, "kB"] if n.parse::<u32>() == Ok(node) => kb
                .parse::<u64>()
                .ok()
                .and_then(|kb| kb.checked_mul(1024))
                .ok_or_else(|| malformed(path, line, "MemTotal is not a number of kB")),
            _ => Err(malformed(
                path,
                line,
                format!("expected \"Node {node} MemTotal: <n> kB\""),
            )),
        };
    }
    Err(malformed(path, text, "no MemTotal line"))
}

/// The numeric suffixes of the entries of `dir` named `<prefix><n>`, sorted;
/// `None` if `dir` does not exist.
pub(crate) fn numbered_entries(
    dir: &Path,
    prefix: &str,
) -> Result<Option<Vec<u32>>, TopologyError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(TopologyError::Io {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| TopologyError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(n) = name
            .strip_prefix(prefix)
            .and_then(|s| s.parse::<u32>().ok())
        {
            out.push(n);
        }
    }
    out.sort_unstable();
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sizes_ids_and_memtotal() {
        let p = Path::new("x");
        assert_eq!(parse_size_kib(p, "32768K").unwrap(), 32768);
        assert_eq!(parse_size_kib(p, "2M").unwrap(), 2048);
        assert!(parse_size_kib(p, "32768").is_err());
        assert!(parse_size_kib(p, "K").is_err());
        assert_eq!(parse_id(p, "-1").unwrap(), None);
        assert_eq!(parse_id(p, "7").unwrap(), Some(7));
        assert!(parse_id(p, "-2").is_err());
        let meminfo = "Node 1 MemTotal:        4679896 kB\nNode 1 MemFree: 1 kB\n";
        assert_eq!(parse_node_memtotal(p, meminfo, 1).unwrap(), 4679896 * 1024);
        assert!(parse_node_memtotal(p, meminfo, 0).is_err());
        assert!(parse_node_memtotal(p, "Node 1 MemFree: 1 kB", 1).is_err());
        assert!(parse_node_memtotal(p, "Node 1 MemTotal: lots kB", 1).is_err());
    }
}
