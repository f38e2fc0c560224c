//! The crash-safe state file: what atoll must remember across a restart to
//! find and undo what it did (runtime units, processes it moved and where
//! they came from, controllers it enabled in the parent).
//!
//! # On disk
//!
//! `DIR/state.json` holds one JSON envelope:
//!
//! ```text
//! {"format":2,"crc32":"1c291ca3","state":{
//!   "format": 2,
//!   "backend": "cgroup1",
//!   ...
//! }}
//! ```
//!
//! The state is serialized first; `crc32` is the CRC-32 (IEEE) of exactly
//! those bytes, as 8 lowercase hex digits; the envelope text is then built
//! around them, so the `state` value in the file *is* the checksummed bytes.
//! [`load`] takes the `state` value's raw text back out of the envelope
//! (without re-serializing it) and checks the sum over it.
//!
//! # Crash safety
//!
//! [`save`] writes `state.json.tmp`, fsyncs it, renames it over `state.json`
//! and fsyncs the directory, so a crash leaves either the old or the new file
//! whole. A leftover `state.json.tmp` is ignored by [`load`] and overwritten
//! by the next [`save`].
//!
//! # Strictness
//!
//! [`load`] refuses truncated or invalid JSON, a checksum mismatch, a format
//! it does not know, and any field it does not know anywhere inside the state
//! (including inside core types that themselves accept unknown fields): a
//! daemon must not act on a state it only half understands.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use atoll_core::backend::BackendKind;
use atoll_core::coord::CoordSnapshot;
use atoll_core::plan::GroupPath;
use atoll_core::process::CgroupMembership;
use atoll_core::spec::{OverlayConfig, UnitSpec};
use atoll_proto::UnitOrigin;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

/// The state format this build writes and reads.
pub const FORMAT: u32 = 2;
/// The formats this build reads: 1 (before coordination state was kept)
/// is read as a format 2 without a coordination part.
pub const READS: [u32; 2] = [1, 2];
/// The state file's name inside the state directory.
pub const FILE_NAME: &str = "state.json";
/// The temporary file [`save`] writes before renaming.
pub const TMP_NAME: &str = "state.json.tmp";
/// The state before the last save, kept in case the last is damaged.
pub const PREV_NAME: &str = "state.json.1";

/// Everything atoll needs after a restart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedState {
    /// Always [`FORMAT`].
    pub format: u32,
    /// The backend that made the groups.
    pub backend: BackendKind,
    /// Name of atoll's root group.
    pub root: String,
    /// Units atoll knows (config and runtime), so runtime units survive.
    pub units: Vec<SavedUnit>,
    /// Processes atoll moved, and where they came from.
    pub processes: Vec<SavedProcess>,
    /// Controllers atoll enabled in its root's parent (v2
    /// `cgroup.subtree_control`), to disable again at teardown.
    pub parent_controllers_added: Vec<String>,
    /// Overlays added at run time (`overlay add`), registered again on
    /// restart when all their units are back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overlays: Vec<OverlayConfig>,
    /// The coordination state (format 2 on), with a checksum of its own so
    /// that a part this build cannot trust costs only coordination, never
    /// the records of the processes to give back (see [`SavedCoord`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coordination: Option<SavedCoord>,
    /// The interfaces the network islands hold, each as it was found, so
    /// that a run after a crash adopts them and still gives them back
    /// exactly (same format: older files simply have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<crate::netisland::SavedNetwork>,
    /// What each CPU's cpufreq had before atoll first wrote to it (island
    /// frequency policies, power-cap limits): a daemon restarted after a
    /// crash gives these back at teardown, not what the crashed run wrote.
    /// Absent when atoll wrote no cpufreq file (and in files of earlier
    /// builds): no format change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_originals: Option<Vec<atoll_core::power::FreqOriginal>>,
}

/// The coordination state ([`CoordSnapshot`]) as saved: its JSON text kept
/// byte for byte, its CRC-32, and when it was taken.
///
/// The text is checked and decoded only when a restart restores it
/// ([`SavedCoord::open`]), not by [`load`]: a damaged or unknown
/// coordination part makes coordination start clean and leaves the rest of
/// the state in force.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedCoord {
    /// Wall-clock time the snapshot was taken, ms since the Unix epoch:
    /// the only clock that spans a restart (the snapshot's times are left
    /// and ages, see `atoll_core::coord::snapshot`).
    pub taken_at_unix_ms: u64,
    /// CRC-32 (IEEE) of `snapshot`'s exact bytes, 8 lowercase hex digits.
    pub crc32: String,
    /// The snapshot's JSON text.
    pub snapshot: Box<RawValue>,
}

impl PartialEq for SavedCoord {
    fn eq(&self, other: &Self) -> bool {
        self.taken_at_unix_ms == other.taken_at_unix_ms
            && self.crc32 == other.crc32
            && self.snapshot.get() == other.snapshot.get()
    }
}

/// Why the coordination part of a state file is not restored.
#[derive(Debug, thiserror::Error)]
pub enum CoordStateError {
    /// The checksum does not match the snapshot's bytes.
    #[error("coordination state: checksum {stored} recorded, {computed} computed")]
    Checksum {
        /// The checksum in the file.
        stored: String,
        /// The checksum of the snapshot's bytes.
        computed: String,
    },
    /// The snapshot does not fit its types.
    #[error("coordination state: invalid: {0}")]
    Invalid(#[source] serde_json::Error),
    /// The snapshot names a field this build does not know.
    #[error("coordination state: unknown field {0}")]
    UnknownField(String),
    /// The snapshot could not be serialized (a non-finite float).
    #[error("coordination state: cannot serialize: {0}")]
    Encode(#[source] serde_json::Error),
}

impl SavedCoord {
    /// `snap` as saved, taken at `taken_at_unix_ms`.
    pub fn new(snap: &CoordSnapshot, taken_at_unix_ms: u64) -> Result<Self, CoordStateError> {
        let text = serde_json::to_string(snap).map_err(CoordStateError::Encode)?;
        let crc32 = checksum(text.as_bytes());
        let snapshot = RawValue::from_string(text).map_err(CoordStateError::Encode)?;
        Ok(Self {
            taken_at_unix_ms,
            crc32,
            snapshot,
        })
    }

    /// The snapshot, if its checksum holds and every field is known.
    pub fn open(&self) -> Result<CoordSnapshot, CoordStateError> {
        let raw = self.snapshot.get();
        let computed = checksum(raw.as_bytes());
        if !computed.eq_ignore_ascii_case(&self.crc32) {
            return Err(CoordStateError::Checksum {
                stored: self.crc32.clone(),
                computed,
            });
        }
        let snap: CoordSnapshot = serde_json::from_str(raw).map_err(CoordStateError::Invalid)?;
        let input: Value = serde_json::from_str(raw).map_err(CoordStateError::Invalid)?;
        let output = serde_json::to_value(&snap).map_err(CoordStateError::Invalid)?;
        if let Some(field) = unknown_field(&input, &output, String::new()) {
            return Err(CoordStateError::UnknownField(field));
        }
        Ok(snap)
    }
}

/// A unit and where it came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedUnit {
    /// The unit.
    pub spec: UnitSpec,
    /// Config or runtime.
    pub origin: UnitOrigin,
    /// The user who created it, when not root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<u32>,
    /// Declared with `unit add`: kept while it holds no process.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kept: bool,
}

/// A process atoll moved.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedProcess {
    /// Its pid.
    pub pid: u32,
    /// Its start time (tells a reused pid apart).
    pub start_ticks: u64,
    /// The group atoll put it in.
    pub group: GroupPath,
    /// The cgroups it was in before.
    pub origin: CgroupMembership,
    /// The user who placed it, when not root (root's placements and the
    /// config's rules stand against every other user).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placed_by: Option<u32>,
}

/// Why the state could not be saved or loaded.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// A file operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// `read`, `write`, `fsync`, `rename`, `mkdir`, `remove`.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Not valid JSON, or truncated, or not the envelope's shape.
    #[error("state file {path} is corrupt: {source}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The parser's error, with line and column.
        #[source]
        source: serde_json::Error,
    },
    /// The checksum does not match the state's bytes.
    #[error("state file {path} is corrupt: checksum {stored} recorded, {computed} computed")]
    Checksum {
        /// The file.
        path: PathBuf,
        /// The checksum in the file.
        stored: String,
        /// The checksum of the state's bytes.
        computed: String,
    },
    /// A format this build does not know.
    #[error("state file {path} has format {found}; this atoll reads formats 1 and 2")]
    UnknownFormat {
        /// The file (or, for `save`, the directory).
        path: PathBuf,
        /// The format found.
        found: u32,
    },
    /// The state names a field this build does not know.
    #[error("state file {path}: unknown field {field}")]
    UnknownField {
        /// The file.
        path: PathBuf,
        /// Where, e.g. `units[0].spec.entitlement.burst`.
        field: String,
    },
    /// The state's values do not fit its types.
    #[error("state file {path}: invalid state: {source}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The deserializer's error.
        #[source]
        source: serde_json::Error,
    },
    /// The state could not be serialized (a non-finite float).
    #[error("cannot serialize state for {path}: {source}")]
    Encode {
        /// The file.
        path: PathBuf,
        /// The serializer's error.
        #[source]
        source: serde_json::Error,
    },
}

impl StateError {
    /// Whether the file exists but cannot be trusted (corrupt, checksum,
    /// unknown format or field, invalid): the caller may move it aside.
    pub fn is_corrupt(&self) -> bool {
        !matches!(self, Self::Io { .. } | Self::Encode { .. })
    }
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> StateError + 'a {
    move |source| StateError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// The CRC-32 of `bytes` as 8 lowercase hex digits.
fn checksum(bytes: &[u8]) -> String {
    format!("{:08x}", crc32fast::hash(bytes))
}

/// Writes `s` to `dir/state.json` atomically (see the module docs). Creates
/// `dir` (mode 0755) if missing.
pub fn save(dir: &Path, s: &SavedState) -> Result<(), StateError> {
    let file = dir.join(FILE_NAME);
    if s.format != FORMAT {
        return Err(StateError::UnknownFormat {
            path: file,
            found: s.format,
        });
    }
    if !dir.is_dir() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(io("mkdir", dir))?;
    }
    let state = serde_json::to_string_pretty(s).map_err(|source| StateError::Encode {
        path: file.clone(),
        source,
    })?;
    let text = format!(
        "{{\"format\":{FORMAT},\"crc32\":\"{}\",\"state\":{state}}}\n",
        checksum(state.as_bytes())
    );
    let tmp = dir.join(TMP_NAME);
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io("write", &tmp))?;
        f.write_all(text.as_bytes()).map_err(io("write", &tmp))?;
        f.sync_all().map_err(io("fsync", &tmp))?;
    }
    // The last good state stays one save longer: if this one is damaged
    // later (a disk error, a truncation), the one before it is still there.
    if file.exists() {
        let prev = dir.join(PREV_NAME);
        fs::rename(&file, &prev).map_err(io("rename", &prev))?;
    }
    fs::rename(&tmp, &file).map_err(io("rename", &file))?;
    sync_dir(dir)
}

fn sync_dir(dir: &Path) -> Result<(), StateError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("fsync", dir))
}

#[derive(Deserialize)]
struct FormatOnly {
    format: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope<'a> {
    #[allow(dead_code)] // checked through `FormatOnly` first
    format: u32,
    crc32: String,
    #[serde(borrow)]
    state: &'a RawValue,
}

/// Reads `dir/state.json`: `Ok(None)` when there is none.
pub fn load(dir: &Path) -> Result<Option<SavedState>, StateError> {
    load_file(&dir.join(FILE_NAME))
}

/// Reads the state file `file`: `Ok(None)` when there is none.
pub fn load_file(file: &Path) -> Result<Option<SavedState>, StateError> {
    let file = file.to_path_buf();
    let text = match fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(StateError::Io {
                op: "read",
                path: file,
                source,
            })
        }
    };
    decode(&text, &file).map(Some)
}

/// Decodes the text of a state file (the envelope of the module docs);
/// `path` names the file in errors and is not read. [`load`] reads the file
/// and calls this; the fuzz target `state` calls it directly.
pub fn decode(text: &str, path: &Path) -> Result<SavedState, StateError> {
    let corrupt = |source| StateError::Corrupt {
        path: path.to_path_buf(),
        source,
    };
    let FormatOnly { format } = serde_json::from_str(text).map_err(corrupt)?;
    if !READS.contains(&format) {
        return Err(StateError::UnknownFormat {
            path: path.to_path_buf(),
            found: format,
        });
    }
    let env: Envelope = serde_json::from_str(text).map_err(corrupt)?;
    let raw = env.state.get();
    let computed = checksum(raw.as_bytes());
    if !computed.eq_ignore_ascii_case(&env.crc32) {
        return Err(StateError::Checksum {
            path: path.to_path_buf(),
            stored: env.crc32,
            computed,
        });
    }
    let invalid = |source| StateError::Invalid {
        path: path.to_path_buf(),
        source,
    };
    let mut state: SavedState = serde_json::from_str(raw).map_err(invalid)?;
    let input: Value = serde_json::from_str(raw).map_err(invalid)?;
    let output = serde_json::to_value(&state).map_err(invalid)?;
    if let Some(field) = unknown_field(&input, &output, String::new()) {
        return Err(StateError::UnknownField {
            path: path.to_path_buf(),
            field,
        });
    }
    if state.format != format || (format == 1 && state.coordination.is_some()) {
        return Err(StateError::UnknownFormat {
            path: path.to_path_buf(),
            found: state.format,
        });
    }
    // Format 1 is format 2 without coordination state.
    state.format = FORMAT;
    Ok(state)
}

/// The first object key present in `input` but not in `output` (what the
/// typed state serializes back to), as a path. A key whose input value is
/// `null` may be missing from the output (a skipped `None`).
fn unknown_field(input: &Value, output: &Value, at: String) -> Option<String> {
    match (input, output) {
        (Value::Object(i), Value::Object(o)) => i.iter().find_map(|(k, v)| {
            let here = if at.is_empty() {
                k.clone()
            } else {
                format!("{at}.{k}")
            };
            match o.get(k) {
                Some(ov) => unknown_field(v, ov, here),
                None if v.is_null() => None,
                None => Some(here),
            }
        }),
        (Value::Array(i), Value::Array(o)) => i
            .iter()
            .zip(o)
            .enumerate()
            .find_map(|(n, (iv, ov))| unknown_field(iv, ov, format!("{at}[{n}]"))),
        _ => None,
    }
}

/// Removes the state file (and any leftover temporary file), for a clean
/// teardown. Missing files are fine.
pub fn remove(dir: &Path) -> Result<(), StateError> {
    for name in [FILE_NAME, TMP_NAME, PREV_NAME] {
        let p = dir.join(name);
        match fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(StateError::Io {
                    op: "remove",
                    path: p,
                    source,
                })
            }
        }
    }
    if dir.is_dir() {
        sync_dir(dir)?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
