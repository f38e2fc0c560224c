//! Tests of the state file: format, checksum, strictness, crash safety,
//! the coordination part, and generated and edited texts.

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
            cap_timing: Default::default(),
            react: atoll_core::spec::ReactPolicy {
                pressure: Some(20.0),
                ..Default::default()
            },
        }],
        coordination: None,
        network: None,
        frequency_originals: None,
    }
}

/// A coordination snapshot with one loan and one backoff.
fn snapshot() -> CoordSnapshot {
    use atoll_core::coord::snapshot::{
        BackoffSnapshot, HopSnapshot, LoanSnapshot, OverlaySnapshot,
    };
    use atoll_core::coord::Resource;
    let n = |s: &str| Name::new(s).unwrap();
    CoordSnapshot {
        overlays: vec![OverlaySnapshot {
            name: n("shop"),
            escalation: vec![],
            backoff: vec![BackoffSnapshot {
                island: n("web"),
                resource: Resource::Cores,
                nacks: 2,
                left: std::time::Duration::from_millis(45),
            }],
        }],
        units: vec![],
        loans: vec![LoanSnapshot {
            cpu: 5,
            hops: vec![HopSnapshot {
                lender: n("batch"),
                borrower: n("web"),
                overlay: n("shop"),
                age: std::time::Duration::from_millis(1500),
            }],
        }],
    }
}

fn with_coord() -> SavedState {
    SavedState {
        coordination: Some(SavedCoord::new(&snapshot(), 1_700_000_000_000).unwrap()),
        network: None,
        ..sample()
    }
}

#[test]
fn a_format_1_file_loads_as_format_2_without_coordination() {
    let dir = tempfile::tempdir().unwrap();
    // A format 1 file as the previous atoll wrote it.
    let state = serde_json::to_string_pretty(&sample()).unwrap().replacen(
        "\"format\": 2",
        "\"format\": 1",
        1,
    );
    assert!(state.contains("\"format\": 1"));
    write(
        dir.path(),
        &format!(
            "{{\"format\":1,\"crc32\":\"{}\",\"state\":{state}}}\n",
            checksum(state.as_bytes())
        ),
    );
    assert_eq!(load(dir.path()).unwrap(), Some(sample()));
    // A format 1 file has no coordination part.
    let state = serde_json::to_string_pretty(&with_coord())
        .unwrap()
        .replacen("\"format\": 2", "\"format\": 1", 1);
    write(
        dir.path(),
        &format!(
            "{{\"format\":1,\"crc32\":\"{}\",\"state\":{state}}}\n",
            checksum(state.as_bytes())
        ),
    );
    assert!(matches!(
        load(dir.path()),
        Err(StateError::UnknownFormat { found: 1, .. })
    ));
}

#[test]
fn the_coordination_part_roundtrips_and_opens() {
    let dir = tempfile::tempdir().unwrap();
    save(dir.path(), &with_coord()).unwrap();
    let back = load(dir.path()).unwrap().unwrap();
    assert_eq!(back, with_coord());
    let c = back.coordination.unwrap();
    assert_eq!(c.open().unwrap(), snapshot());
    assert_eq!(c.taken_at_unix_ms, 1_700_000_000_000);
}

#[test]
fn the_fuzz_seed_with_a_coordination_part_decodes_and_opens() {
    let text = include_str!("../../../fuzz/seeds/state/state-coord.json");
    let s = decode(text, Path::new("state-coord.json")).unwrap();
    let snap = s.coordination.unwrap().open().unwrap();
    assert_eq!(snap.loans.len(), 1);
    assert_eq!(snap.units[0].knobs.weight, 156);
}

#[test]
fn a_damaged_coordination_part_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    save(dir.path(), &with_coord()).unwrap();
    // CPU 5 made 6 inside the snapshot, the file's own sum made right:
    // the file loads, the coordination part does not open.
    rewrite_state(dir.path(), |s| s.replacen("\"cpu\":5", "\"cpu\":6", 1));
    let s = load(dir.path()).unwrap().unwrap();
    assert_eq!(s.units, sample().units);
    match s.coordination.unwrap().open().unwrap_err() {
        CoordStateError::Checksum { stored, computed } => assert_ne!(stored, computed),
        e => panic!("expected a checksum error, got {e}"),
    }
    // An unknown field, both sums made right.
    let mut c = SavedCoord::new(&snapshot(), 1).unwrap();
    let text = c
        .snapshot
        .get()
        .replacen("\"nacks\":2", "\"nacks\":2,\"extra\":1", 1);
    c.crc32 = checksum(text.as_bytes());
    c.snapshot = RawValue::from_string(text).unwrap();
    assert!(matches!(c.open(), Err(CoordStateError::Invalid(_))));
    let mut c = SavedCoord::new(&snapshot(), 1).unwrap();
    let text = c.snapshot.get().replacen(
        "\"left\":{\"secs\":0,\"nanos\":45000000}",
        "\"left\":{\"secs\":0,\"nanos\":45000000,\"x\":1}",
        1,
    );
    assert_ne!(text, c.snapshot.get());
    c.crc32 = checksum(text.as_bytes());
    c.snapshot = RawValue::from_string(text).unwrap();
    assert!(c.open().is_err());
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
            "{{\"format\":2,\"crc32\":\"{}\",\"state\":{state}}}\n",
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
fn the_network_part_roundtrips_and_is_left_out_when_there_is_none() {
    use crate::netisland::{SavedFile, SavedInterface, SavedNetwork};
    let dir = tempfile::tempdir().unwrap();
    let s = sample();
    save(dir.path(), &s).unwrap();
    assert!(!read(dir.path()).contains("\"network\""));
    let mut s = sample();
    s.network = Some(SavedNetwork {
        interfaces: vec![SavedInterface {
            interface: "v0".into(),
            root_kind: "noqueue".into(),
            root_handle: "0:".into(),
            steering: vec![SavedFile {
                path: "/sys/class/net/v0/queues/tx-0/xps_cpus".into(),
                text: "00000000".into(),
            }],
        }],
        classes: vec![crate::netisland::RuntimeClass {
            island: Name::new("wire").unwrap(),
            class: atoll_core::netisland::NetUnitSetup {
                name: Name::new("job").unwrap(),
                share: 300,
                ceil_bps: Some(50_000_000),
                prio: 1,
            },
        }],
    });
    save(dir.path(), &s).unwrap();
    assert_eq!(load(dir.path()).unwrap(), Some(s));
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
        &read(dir.path()).replacen("{\"format\":2,", "{\"format\":3,", 1),
    );
    assert!(matches!(
        load(dir.path()),
        Err(StateError::UnknownFormat { found: 3, .. })
    ));
    // The inner format must agree as well.
    save(dir.path(), &sample()).unwrap();
    rewrite_state(dir.path(), |s| {
        s.replacen("\"format\": 2", "\"format\": 7", 1)
    });
    assert!(matches!(
        load(dir.path()),
        Err(StateError::UnknownFormat { found: 7, .. })
    ));
    let mut s = sample();
    s.format = 1;
    assert!(matches!(
        save(dir.path(), &s),
        Err(StateError::UnknownFormat { found: 1, .. })
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
        &read(dir.path()).replacen("{\"format\":2,", "{\"format\":2,\"x\":0,", 1),
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
            "{{\"format\":2,\"crc32\":\"{}\",\"state\":{}}}",
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
