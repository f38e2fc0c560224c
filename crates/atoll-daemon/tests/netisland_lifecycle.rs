//! Network islands across a crash and a reload (issue 17): what a run
//! found on its interfaces is in the state file, so the run after a crash
//! adopts the interface its tree is still on and gives it back as the
//! first run found it; a reload adds, changes and gives back islands, each
//! a decision with the reload as reason. On the simulator and a fake
//! interface; `real_v1_netisland.rs` has the kernel's side.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use atoll_core::clock::ManualClock;
use atoll_net::FakeNet;
use atoll_sim::SimPlatform;

use crate::common::net::{self, daemon, root_of, spec, why};
use crate::common::sim::topo8;

const BASE: &str = r#"
[host]
cpus = "0"

[island.work]
cpus = "1-7"

[unit.api]
island = "work"

[unit.db]
island = "work"
"#;

const WIRE: &str = r#"
[network.wire]
interface = "v0"
rate_mbit = 10
tx_cpus = "1"

[network.wire.units.api]
share = 300
"#;

/// Fake interfaces `v0` and `v1`, each with one transmit queue.
fn fake_sysfs(root: &Path) {
    for i in ["v0", "v1"] {
        let dir = root.join("class/net").join(i).join("queues/tx-0");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("xps_cpus"), "00000000\n").unwrap();
    }
}

fn xps(root: &Path, iface: &str) -> String {
    std::fs::read_to_string(
        root.join("class/net")
            .join(iface)
            .join("queues/tx-0/xps_cpus"),
    )
    .unwrap()
}

fn fakes() -> Arc<Mutex<FakeNet>> {
    net::fakes(&[("v0", "noqueue"), ("v1", "pfifo_fast")])
}

#[test]
fn a_run_after_a_crash_adopts_the_interface_and_gives_it_back_as_first_found() {
    let (sys, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    fake_sysfs(sys.path());
    let fake = fakes();
    let sim = SimPlatform::new(topo8(), "atoll-netcrash1", ManualClock::new());
    let config = format!("{BASE}{WIRE}");
    let first = daemon(&sim, &config, &fake, sys.path(), state.path());
    assert_eq!(root_of(&fake, "v0"), ("htb".into(), "1:".into()));
    assert_eq!(xps(sys.path(), "v0"), "00000002");
    let saved = std::fs::read_to_string(state.path().join("state.json")).unwrap();
    assert!(saved.contains("\"network\""), "{saved}");
    // The crash: no teardown; the tree and the mask stay.
    drop(first);

    let mut second = daemon(&sim, &config, &fake, sys.path(), state.path());
    let warnings = second.status().warnings;
    assert!(!warnings.iter().any(|w| w.contains("wire")), "{warnings:?}");
    let log = why(&second, "wire");
    assert!(
        log.iter()
            .any(|d| d.contains("adopted from the run before") && d.contains("noqueue 0:")),
        "{log:?}"
    );
    // Written afresh: the old tree removed, a new one with its classes.
    assert_eq!(root_of(&fake, "v0"), ("htb".into(), "1:".into()));
    assert!(fake.lock().unwrap().plan("v0").is_some());
    second.teardown().unwrap();
    // As the first run found it, not as the crash left it.
    assert_eq!(root_of(&fake, "v0"), ("noqueue".into(), "0:".into()));
    assert_eq!(xps(sys.path(), "v0"), "00000000");
    assert!(!state.path().join("state.json").exists());
}

#[test]
fn without_the_state_file_a_run_after_a_crash_refuses_the_interface() {
    let (sys, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    fake_sysfs(sys.path());
    let fake = fakes();
    let sim = SimPlatform::new(topo8(), "atoll-netcrash2", ManualClock::new());
    let config = format!("{BASE}{WIRE}");
    drop(daemon(&sim, &config, &fake, sys.path(), state.path()));
    std::fs::remove_dir_all(state.path()).unwrap();
    std::fs::create_dir_all(state.path()).unwrap();
    let mut second = daemon(&sim, &config, &fake, sys.path(), state.path());
    let warnings = second.status().warnings;
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("wire") && w.contains("htb 1:")),
        "{warnings:?}"
    );
    // Left as it was: atoll does not know what was there before.
    assert_eq!(root_of(&fake, "v0"), ("htb".into(), "1:".into()));
    second.teardown().unwrap();
    assert_eq!(root_of(&fake, "v0"), ("htb".into(), "1:".into()));
}

#[test]
fn a_reload_adds_changes_and_gives_back_network_islands_with_decisions() {
    let (sys, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    fake_sysfs(sys.path());
    let fake = fakes();
    let sim = SimPlatform::new(topo8(), "atoll-netreload1", ManualClock::new());
    // No network island at start.
    let mut c = daemon(&sim, BASE, &fake, sys.path(), state.path());
    assert_eq!(root_of(&fake, "v0"), ("noqueue".into(), "0:".into()));

    // Added.
    let changes = c.reload(spec(&format!("{BASE}{WIRE}"))).unwrap();
    assert!(
        changes.iter().any(|l| l.contains("network wire")),
        "{changes:?}"
    );
    assert_eq!(root_of(&fake, "v0"), ("htb".into(), "1:".into()));
    assert_eq!(xps(sys.path(), "v0"), "00000002");
    let log = why(&c, "wire");
    assert!(
        log.iter()
            .any(|d| d.contains("taken over") && d.contains("network island wire added")),
        "{log:?}"
    );
    assert_eq!(c.status().network.len(), 1);

    // Changed: db gets a class, api's share and the tx CPUs change.
    let changed = WIRE
        .replace(
            "share = 300",
            "share = 100\n\n[network.wire.units.db]\nshare = 200",
        )
        .replace("tx_cpus = \"1\"", "tx_cpus = \"2\"");
    c.reload(spec(&format!("{BASE}{changed}"))).unwrap();
    {
        let f = fake.lock().unwrap();
        let rates: Vec<(u16, u64)> = f
            .plan("v0")
            .unwrap()
            .classes
            .iter()
            .map(|k| (k.minor, k.rate_bps))
            .collect();
        // Default 100, api 100, db 200 of 10 Mbit/s.
        assert_eq!(
            rates,
            vec![(2, 2_500_000), (0x10, 2_500_000), (0x11, 5_000_000)]
        );
    }
    assert_eq!(xps(sys.path(), "v0"), "00000004");
    let log = why(&c, "wire");
    assert!(
        log.iter()
            .any(|d| d.contains("1:11 (db)") && d.contains("network island wire changed")),
        "{log:?}"
    );

    // Moved to another interface: v0 given back exactly, v1 taken.
    let moved = changed.replace("interface = \"v0\"", "interface = \"v1\"");
    c.reload(spec(&format!("{BASE}{moved}"))).unwrap();
    assert_eq!(root_of(&fake, "v0"), ("noqueue".into(), "0:".into()));
    assert_eq!(xps(sys.path(), "v0"), "00000000");
    assert_eq!(root_of(&fake, "v1"), ("htb".into(), "1:".into()));
    let log = why(&c, "v0");
    assert!(
        log.iter()
            .any(|d| d.contains("restored as found") && d.contains("moved from v0 to v1")),
        "{log:?}"
    );

    // Removed: v1 given back.
    c.reload(spec(BASE)).unwrap();
    assert_eq!(root_of(&fake, "v1"), ("pfifo_fast".into(), "0:".into()));
    assert_eq!(xps(sys.path(), "v1"), "00000000");
    let log = why(&c, "v1");
    assert!(
        log.iter().any(|d| d.contains("restored as found")
            && d.contains("network island wire is no longer configured")),
        "{log:?}"
    );
    assert!(c.status().network.is_empty());
    c.teardown().unwrap();
}
