//! `diskwriter`: writes a file of M MiB in 1 MiB blocks, `fsync`s it,
//! removes it and starts over, so the device sees a steady stream of
//! writes that the page cache cannot absorb. Reports MB/s (10^6 bytes).
//!
//! The file is `DIR/atoll-diskwriter-<pid>.dat`, created new (an existing
//! file of that name is an error) and removed on exit.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::json;

use super::stopping;

/// Removes the file when dropped, also on an error.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn create(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().write(true).create_new(true).open(path)
}

/// Writes rounds of `mib` MiB until stopped (or `rounds` are done).
pub(crate) fn diskwriter(
    dir: &Path,
    mib: usize,
    rounds: Option<u64>,
) -> std::io::Result<serde_json::Value> {
    let path = dir.join(format!("atoll-diskwriter-{}.dat", std::process::id()));
    let block: Vec<u8> = (0..=250u8).cycle().take(1 << 20).collect();
    let t0 = Instant::now();
    let mut bytes = 0u64;
    let mut done = 0u64;
    'outer: while rounds.is_none_or(|r| done < r) {
        let guard = TempFile(path.clone());
        let mut f = create(&guard.0)?;
        for _ in 0..mib {
            if stopping() {
                break 'outer;
            }
            f.write_all(&block)?;
            bytes += block.len() as u64;
        }
        f.sync_all()?;
        done += 1;
    }
    let elapsed = t0.elapsed().as_secs_f64();
    Ok(json!({
        "kind": "diskwriter",
        "mib": mib,
        "rounds": done,
        "bytes": bytes,
        "elapsed_s": elapsed,
        "mb_per_s": bytes as f64 / 1e6 / elapsed.max(1e-9),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_rounds_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let r = diskwriter(dir.path(), 1, Some(2)).unwrap();
        assert_eq!(r["rounds"], 2);
        assert_eq!(r["bytes"], 2 << 20);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
