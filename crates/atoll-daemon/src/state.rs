//! The crash-safe state file: what atoll must remember across a restart to
//! find and undo what it did (runtime units, processes it moved and where
//! they came from, controllers it enabled in the parent).
//!
//! # On disk
//!
//! `DIR/state.json` holds one JSON envelope:
//!
//! ```text
//! {"format":1,"crc32":"1c291ca3","state":{
//!   "format": 1,
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
use atoll_core::plan::GroupPath;
use atoll_core::process::CgroupMembership;
use atoll_core::spec::{OverlayConfig, UnitSpec};
use atoll_proto::UnitOrigin;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

/// The state format this build writes and reads.
pub const FORMAT: u32 = 1;
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
    #[error("state file {path} has format {found}; this atoll reads format {FORMAT}")]
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
    if format != FORMAT {
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
    let state: SavedState = serde_json::from_str(raw).map_err(invalid)?;
    let input: Value = serde_json::from_str(raw).map_err(invalid)?;
    let output = serde_json::to_value(&state).map_err(invalid)?;
    if let Some(field) = unknown_field(&input, &output, String::new()) {
        return Err(StateError::UnknownField {
            path: path.to_path_buf(),
            field,
        });
    }
    if state.format != FORMAT {
        return Err(StateError::UnknownFormat {
            path: path.to_path_buf(),
            found: state.format,
        });
    }
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
mod tests {
    use atoll_core::spec::{AdoptRule, Entitlement};
    use atoll_core::Name;

    use super::*;

    fn sample() -> SavedState {
        let n = |s: &str| Name::new(s).unwrap();
        SavedState {
            format: FORMAT,
            backend: BackendKind::Cgroup1,
            root: "atoll".into(),
            units: vec![
                SavedUnit {
                    spec: UnitSpec {
                        name: n("api"),
                        island: n("web"),
                        entitlement: Entitlement {
                            cpus: Some(1.5),
                            ..Default::default()
                        },
                        adopt: vec![AdoptRule::Comm("nginx".into())],
                        rt_priority: None,
                    },
                    origin: UnitOrigin::Config,
                    owner: None,
                    kept: false,
                },
                SavedUnit {
                    spec: UnitSpec {
                        name: n("batch"),
                        island: n("web"),
                        entitlement: Entitlement::default(),
                        adopt: vec![],
                        rt_priority: Some(20),
                    },
                    origin: UnitOrigin::Runtime,
                    owner: Some(1000),
                    kept: true,
                },
            ],
            processes: vec![SavedProcess {
                pid: 4242,
                start_ticks: 987_654,
                group: GroupPath::from_relative("web/batch"),
                origin: CgroupMembership::parse("4:memory:/user.slice\n2:cpu,cpuacct:/\n").unwrap(),
                placed_by: Some(1000),
            }],
            parent_controllers_added: vec!["cpuset".into()],
            overlays: vec![atoll_core::spec::OverlayConfig {
                name: n("shop"),
                priority: 3,
                units: vec![n("batch")],
                property: atoll_core::coord::Property::LatencyPercentile {
                    percentile: 99.5,
                    bound_us: 800,
                },
                slo: Default::default(),
                react: atoll_core::spec::ReactPolicy {
                    pressure: Some(20.0),
                    ..Default::default()
                },
            }],
        }
    }

    fn read(dir: &Path) -> String {
        fs::read_to_string(dir.join(FILE_NAME)).unwrap()
    }

    fn write(dir: &Path, text: &str) {
        fs::write(dir.join(FILE_NAME), text).unwrap();
    }

    /// Rewrites the file with `edit` applied to the state text and the
    /// checksum recomputed, so only the edit itself can fail the load.
    fn rewrite_state(dir: &Path, edit: impl Fn(&str) -> String) {
        let text = read(dir);
        let start = text.find("\"state\":").unwrap() + "\"state\":".len();
        let end = text.trim_end().len() - 1; // the envelope's closing brace
        let state = edit(&text[start..end]);
        write(
            dir,
            &format!(
                "{{\"format\":1,\"crc32\":\"{}\",\"state\":{state}}}\n",
                checksum(state.as_bytes())
            ),
        );
    }

    #[test]
    fn roundtrips_and_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = sample();
        save(dir.path(), &s).unwrap();
        assert_eq!(load(dir.path()).unwrap(), Some(s.clone()));
        s.processes.clear();
        s.root = "atoll2".into();
        save(dir.path(), &s).unwrap();
        assert_eq!(load(dir.path()).unwrap(), Some(s));
        assert!(!dir.path().join(TMP_NAME).exists());
    }

    #[test]
    fn the_checksum_covers_exactly_the_state_bytes() {
        let dir = tempfile::tempdir().unwrap();
        save(dir.path(), &sample()).unwrap();
        let text = read(dir.path());
        let v: Value = serde_json::from_str(&text).unwrap();
        let state = serde_json::to_string_pretty(&sample()).unwrap();
        assert_eq!(v["crc32"], checksum(state.as_bytes()));
        assert!(text.contains(&state));
    }

    #[test]
    fn a_missing_file_is_none_and_a_missing_dir_is_created() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()).unwrap(), None);
        let sub = dir.path().join("a/b");
        assert_eq!(load(&sub).unwrap(), None);
        save(&sub, &sample()).unwrap();
        assert!(load(&sub).unwrap().is_some());
    }

    #[test]
    fn a_truncated_file_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        save(dir.path(), &sample()).unwrap();
        let text = read(dir.path());
        for cut in [0, 1, text.len() / 2, text.len() - 3] {
            write(dir.path(), &text[..cut]);
            let e = load(dir.path()).unwrap_err();
            assert!(matches!(e, StateError::Corrupt { .. }), "cut {cut}: {e}");
            assert!(e.is_corrupt());
            assert!(e.to_string().contains("state.json"), "{e}");
        }
    }

    #[test]
    fn a_flipped_byte_in_the_state_fails_the_checksum() {
        let dir = tempfile::tempdir().unwrap();
        save(dir.path(), &sample()).unwrap();
        let text = read(dir.path());
        // Change the pid 4242 to 4243: still valid JSON of the right shape.
        write(dir.path(), &text.replacen("4242", "4243", 1));
        match load(dir.path()).unwrap_err() {
            StateError::Checksum {
                stored, computed, ..
            } => assert_ne!(stored, computed),
            e => panic!("expected a checksum error, got {e}"),
        }
        // Whitespace inside the state counts too: the sum is over bytes.
        write(dir.path(), &text.replacen("\"root\": ", "\"root\":  ", 1));
        assert!(matches!(load(dir.path()), Err(StateError::Checksum { .. })));
    }

    #[test]
    fn an_unknown_format_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        save(dir.path(), &sample()).unwrap();
        write(
            dir.path(),
            &read(dir.path()).replacen("{\"format\":1,", "{\"format\":2,", 1),
        );
        assert!(matches!(
            load(dir.path()),
            Err(StateError::UnknownFormat { found: 2, .. })
        ));
        // The inner format must agree as well.
        save(dir.path(), &sample()).unwrap();
        rewrite_state(dir.path(), |s| {
            s.replacen("\"format\": 1", "\"format\": 7", 1)
        });
        assert!(matches!(
            load(dir.path()),
            Err(StateError::UnknownFormat { found: 7, .. })
        ));
        let mut s = sample();
        s.format = 2;
        assert!(matches!(
            save(dir.path(), &s),
            Err(StateError::UnknownFormat { found: 2, .. })
        ));
    }

    #[test]
    fn a_leftover_tmp_file_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(TMP_NAME), "{\"format\":1,\"crc32\":\"0\"").unwrap();
        assert_eq!(load(dir.path()).unwrap(), None);
        save(dir.path(), &sample()).unwrap();
        fs::write(dir.path().join(TMP_NAME), "garbage").unwrap();
        assert_eq!(load(dir.path()).unwrap(), Some(sample()));
    }

    #[test]
    fn unknown_fields_are_refused_at_any_depth() {
        let dir = tempfile::tempdir().unwrap();
        save(dir.path(), &sample()).unwrap();
        rewrite_state(dir.path(), |s| s.replacen("{", "{\"extra\": true,", 1));
        match load(dir.path()).unwrap_err() {
            StateError::Invalid { source, .. } => {
                assert!(source.to_string().contains("extra"), "{source}")
            }
            e => panic!("expected an invalid-state error, got {e}"),
        }
        // Inside a core type that does not deny unknown fields itself.
        save(dir.path(), &sample()).unwrap();
        rewrite_state(dir.path(), |s| {
            s.replacen("\"cpus\": 1.5", "\"cpus\": 1.5, \"burst\": 3", 1)
        });
        match load(dir.path()).unwrap_err() {
            StateError::UnknownField { field, .. } => {
                assert_eq!(field, "units[0].spec.entitlement.burst")
            }
            e => panic!("expected an unknown-field error, got {e}"),
        }
        // An unknown envelope field.
        save(dir.path(), &sample()).unwrap();
        write(
            dir.path(),
            &read(dir.path()).replacen("{\"format\":1,", "{\"format\":1,\"x\":0,", 1),
        );
        assert!(matches!(load(dir.path()), Err(StateError::Corrupt { .. })));
    }

    #[test]
    fn remove_deletes_the_file_and_tolerates_absence() {
        let dir = tempfile::tempdir().unwrap();
        remove(dir.path()).unwrap();
        save(dir.path(), &sample()).unwrap();
        fs::write(dir.path().join(TMP_NAME), "x").unwrap();
        remove(dir.path()).unwrap();
        assert_eq!(load(dir.path()).unwrap(), None);
        assert!(!dir.path().join(TMP_NAME).exists());
    }

    #[test]
    fn an_unreadable_file_is_an_io_error_with_the_path() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join(FILE_NAME)).unwrap(); // a directory
        let e = load(dir.path()).unwrap_err();
        assert!(matches!(e, StateError::Io { op: "read", .. }), "{e}");
        assert!(!e.is_corrupt());
        assert!(e.to_string().contains(FILE_NAME), "{e}");
    }

    /// The text `save` writes for `s`, built the same way.
    fn encode(s: &SavedState) -> String {
        let state = serde_json::to_string_pretty(s).unwrap();
        format!(
            "{{\"format\":{FORMAT},\"crc32\":\"{}\",\"state\":{state}}}\n",
            checksum(state.as_bytes())
        )
    }

    /// A small deterministic generator (xorshift64*): property cases without
    /// a proptest dependency in this crate.
    struct Gen(u64);

    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        /// The low half of the next number (what `as u32` kept).
        fn half(&mut self) -> u32 {
            u32::try_from(self.next() & 0xffff_ffff).unwrap()
        }

        /// The low byte of the next number (what `as u8` kept).
        fn byte(&mut self) -> u8 {
            u8::try_from(self.next() & 0xff).unwrap()
        }

        fn below(&mut self, n: usize) -> usize {
            usize::try_from(self.next() % n as u64).unwrap()
        }

        fn bytes(&mut self, max: usize) -> Vec<u8> {
            let n = self.below(max + 1);
            (0..n).map(|_| self.byte()).collect()
        }

        /// `text` with a few bytes flipped, inserted, deleted or cut off.
        fn mutate(&mut self, text: &str) -> Vec<u8> {
            const JSON: &[u8] = b"{}[]\":,0123456789-.eE \ntruefalsn\\u";
            let mut b = text.as_bytes().to_vec();
            for _ in 0..1 + self.below(4) {
                let at = self.below(b.len() + 1);
                match self.below(4) {
                    0 if at < b.len() => b[at] = JSON[self.below(JSON.len())],
                    1 => b.insert(at, JSON[self.below(JSON.len())]),
                    2 if at < b.len() => {
                        b.remove(at);
                    }
                    _ => b.truncate(at),
                }
            }
            b
        }
    }

    /// `decode` must give a value or an error for any text, never panic;
    /// what it accepts must encode back to the same state. Run on arbitrary
    /// bytes and on edits of a valid file, each once as a whole file and once
    /// as the state inside an envelope with the right checksum (to get past
    /// the CRC). The fuzz target `state` runs the same checks
    /// coverage-guided.
    #[test]
    fn decode_never_panics_on_arbitrary_or_edited_text() {
        let path = Path::new("/x/state.json");
        let valid = encode(&sample());
        let state_json = serde_json::to_string_pretty(&sample()).unwrap();
        let mut g = Gen(0x9e37_79b9_7f4a_7c15);
        let mut accepted = 0;
        for case in 0..768 {
            let bytes = match case % 3 {
                0 => g.bytes(300),
                1 => g.mutate(&valid),
                _ => g.mutate(&state_json),
            };
            let text = String::from_utf8_lossy(&bytes);
            let wrapped = format!(
                "{{\"format\":1,\"crc32\":\"{}\",\"state\":{}}}",
                checksum(text.trim().as_bytes()),
                text.trim()
            );
            for t in [text.as_ref(), wrapped.as_str()] {
                if let Ok(s) = decode(t, path) {
                    accepted += 1;
                    assert_eq!(decode(&encode(&s), path).unwrap(), s, "{t}");
                }
            }
        }
        // Some edits (in white space, in a string, a digit) stay valid.
        assert!(accepted > 0);
    }

    #[test]
    fn generated_states_roundtrip_through_decode() {
        let n = |s: &str| atoll_core::Name::new(s).unwrap();
        let mut g = Gen(42);
        for _ in 0..256 {
            let mut s = sample();
            s.backend = [BackendKind::Cgroup1, BackendKind::Cgroup2, BackendKind::Sim][g.below(3)];
            s.root = format!("atoll-{}\u{e9}\"\\{}", g.next(), g.below(10));
            s.units.truncate(g.below(3));
            for u in &mut s.units {
                u.spec.entitlement.cpus = Some(g.below(64_000) as f64 / 1000.0);
                u.spec.entitlement.memory.max = Some(g.next());
                u.spec.rt_priority = Some(g.byte());
                u.spec.adopt.push(AdoptRule::Pid(g.half()));
                u.spec.island = n(["web", "batch", "rt"][g.below(3)]);
            }
            for p in &mut s.processes {
                p.pid = g.half();
                p.start_ticks = g.next();
                p.group = GroupPath::from_relative(&format!("web/u{}", g.below(100)));
            }
            s.parent_controllers_added = (0..g.below(4)).map(|i| format!("c{i}")).collect();
            let text = encode(&s);
            assert_eq!(decode(&text, Path::new("s")).unwrap(), s, "{text}");
        }
    }
}
