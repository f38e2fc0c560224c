//! Following an access log across rotation without losing or repeating a
//! line.
//!
//! The file is followed by inode. Each poll reads what was appended since
//! the last one, then looks at the path:
//!
//! - **rename + create** (the path names another inode, or nothing yet):
//!   the old file, still open, is read to its end first, then the new one
//!   from its start;
//! - **copytruncate** (the same inode, now shorter than what was read):
//!   the lines appended between the last read and the copy are in the copy,
//!   `<path>.1`; they are read from there, from the same offset, then the
//!   file again from its start.
//!
//! A line is handed out once it ends with a newline; a last line without
//! one waits for the rest (or is handed out when its file is rotated away).
//! The log's existing content is skipped when the tail starts: only what
//! is written after counts.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Why a poll read nothing.
#[derive(Debug, thiserror::Error)]
pub enum TailError {
    /// The log could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// A followed log file.
#[derive(Debug)]
pub struct LogTail {
    path: PathBuf,
    /// The file open now, its inode and how far it was read.
    open: Option<Open>,
    /// Bytes of a line not ended yet.
    partial: Vec<u8>,
    /// Whether the next file opened is read from its start (every file
    /// but the one there when the tail started).
    from_start: bool,
}

#[derive(Debug)]
struct Open {
    file: File,
    ino: u64,
    offset: u64,
}

impl LogTail {
    /// Follows `path` from its current end (or from the start of the file
    /// when it appears).
    pub fn new(path: &Path) -> Self {
        let mut t = Self {
            path: path.to_path_buf(),
            open: None,
            partial: Vec::new(),
            from_start: false,
        };
        if t.reopen().is_err() {
            t.from_start = true;
        }
        t
    }

    fn err(&self, path: &Path, source: std::io::Error) -> TailError {
        let _ = self;
        TailError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// Opens the path again (at its end the first time, else at its start).
    fn reopen(&mut self) -> Result<(), TailError> {
        let file = File::open(&self.path).map_err(|e| self.err(&self.path, e))?;
        let meta = file.metadata().map_err(|e| self.err(&self.path, e))?;
        let offset = if self.from_start { 0 } else { meta.len() };
        self.open = Some(Open {
            file,
            ino: meta.ino(),
            offset,
        });
        self.from_start = true;
        Ok(())
    }

    /// The complete lines written since the last poll, in order.
    pub fn poll(&mut self) -> Result<Vec<String>, TailError> {
        let mut lines = Vec::new();
        if self.open.is_none() {
            self.reopen()?;
        }
        self.drain(&mut lines)?;
        let Some(open) = &self.open else {
            return Ok(lines);
        };
        match std::fs::metadata(&self.path) {
            Ok(m) if m.ino() != open.ino => {
                // Renamed away and created anew: the old file is read to its
                // end (a writer may have added to it since), then the new.
                self.drain(&mut lines)?;
                self.end_partial(&mut lines);
                self.open = None;
                self.reopen()?;
                self.drain(&mut lines)?;
            }
            Ok(m) if m.len() < open.offset => {
                // Copied and truncated: what was not read yet is in the copy.
                let offset = open.offset;
                let copy = rotated(&self.path);
                if let Ok(mut f) = File::open(&copy) {
                    let mut rest = Vec::new();
                    f.seek(SeekFrom::Start(offset))
                        .and_then(|_| f.read_to_end(&mut rest))
                        .map_err(|e| self.err(&copy, e))?;
                    self.split(&rest, &mut lines);
                }
                self.end_partial(&mut lines);
                if let Some(o) = &mut self.open {
                    o.offset = 0;
                }
                self.drain(&mut lines)?;
            }
            // Renamed, not created again yet: the old file was read; wait.
            Ok(_) | Err(_) => {}
        }
        Ok(lines)
    }

    /// Reads the open file from its offset to its end.
    fn drain(&mut self, lines: &mut Vec<String>) -> Result<(), TailError> {
        let Some(open) = &mut self.open else {
            return Ok(());
        };
        let mut buf = Vec::new();
        let read = open
            .file
            .seek(SeekFrom::Start(open.offset))
            .and_then(|_| open.file.read_to_end(&mut buf));
        match read {
            Ok(n) => open.offset += n as u64,
            Err(e) => return Err(self.err(&self.path.clone(), e)),
        }
        self.split(&buf, lines);
        Ok(())
    }

    /// Splits `bytes` into lines after the partial one; keeps the unended
    /// rest.
    fn split(&mut self, bytes: &[u8], lines: &mut Vec<String>) {
        for &b in bytes {
            if b == b'\n' {
                let line = std::mem::take(&mut self.partial);
                lines.push(String::from_utf8_lossy(&line).into_owned());
            } else {
                self.partial.push(b);
            }
        }
    }

    /// The unended last line of a file rotated away, as a line.
    fn end_partial(&mut self, lines: &mut Vec<String>) {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            lines.push(String::from_utf8_lossy(&line).into_owned());
        }
    }
}

/// Where copytruncate puts the copy: `<path>.1`.
fn rotated(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(".1");
    PathBuf::from(s)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn append(path: &Path, from: usize, to: usize) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        for i in from..to {
            writeln!(f, "line {i} 0.00{}", i % 10).unwrap();
        }
    }

    fn numbers(lines: &[String]) -> Vec<usize> {
        lines
            .iter()
            .map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
            .collect()
    }

    #[test]
    fn rename_and_create_loses_and_repeats_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("access.log");
        append(&log, 0, 3);
        let mut t = LogTail::new(&log);
        let mut seen = Vec::new();
        append(&log, 3, 10);
        seen.extend(numbers(&t.poll().unwrap()));
        append(&log, 10, 20);
        std::fs::rename(&log, dir.path().join("access.log.1")).unwrap();
        // The writer still has the old file open: these land in it.
        append(&dir.path().join("access.log.1"), 20, 25);
        seen.extend(numbers(&t.poll().unwrap()));
        append(&log, 25, 40);
        seen.extend(numbers(&t.poll().unwrap()));
        append(&log, 40, 41);
        seen.extend(numbers(&t.poll().unwrap()));
        assert_eq!(
            seen,
            (3..41).collect::<Vec<_>>(),
            "what came before the tail is skipped"
        );
    }

    #[test]
    fn copytruncate_loses_and_repeats_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("access.log");
        std::fs::write(&log, "").unwrap();
        let mut t = LogTail::new(&log);
        let mut seen = Vec::new();
        append(&log, 0, 10);
        seen.extend(numbers(&t.poll().unwrap()));
        append(&log, 10, 20);
        std::fs::copy(&log, dir.path().join("access.log.1")).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&log)
            .unwrap()
            .set_len(0)
            .unwrap();
        append(&log, 20, 23);
        seen.extend(numbers(&t.poll().unwrap()));
        append(&log, 23, 30);
        seen.extend(numbers(&t.poll().unwrap()));
        assert_eq!(seen, (0..30).collect::<Vec<_>>());
    }

    #[test]
    fn a_line_waits_for_its_end_and_a_missing_log_for_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("later.log");
        let mut t = LogTail::new(&log);
        assert!(t.poll().is_err(), "not there yet");
        std::fs::write(&log, "a 1\nb 2").unwrap();
        assert_eq!(t.poll().unwrap(), ["a 1"]);
        std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .unwrap()
            .write_all(b"2\n")
            .unwrap();
        assert_eq!(t.poll().unwrap(), ["b 22"]);
        assert!(t.poll().unwrap().is_empty());
    }
}
