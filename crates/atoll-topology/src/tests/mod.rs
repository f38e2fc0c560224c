//! The crate's tests, on fake trees written by [`crate::testutils`].

mod docs;
mod errors;
mod fixtures;
mod real;
mod render;

use std::fs;
use std::path::Path;

use atoll_core::topology::Topology;
use atoll_core::CpuSet;

use crate::testutils::FakeRoot;

/// Parses a list, for assertions.
fn set(list: &str) -> CpuSet {
    CpuSet::parse(list).unwrap()
}

/// Reads a written fake back, panicking with the error.
fn read(root: &FakeRoot) -> Topology {
    root.read()
        .unwrap_or_else(|e| panic!("reading {}: {e}", root.path().display()))
}

/// Overwrites (or creates) a file under the fake root.
fn overwrite(root: &FakeRoot, rel: &str, value: &str) {
    let path = root.path().join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, value).unwrap();
}

/// Removes a file or directory under the fake root.
fn remove(root: &FakeRoot, rel: &str) {
    let path = root.path().join(rel);
    if path.is_dir() {
        fs::remove_dir_all(path).unwrap();
    } else {
        fs::remove_file(path).unwrap();
    }
}

/// Whether `path` ends with `rel`.
fn ends_with(path: &Path, rel: &str) -> bool {
    path.ends_with(rel)
}
