//! Coordination state across a daemon restart and a reload, on the
//! simulated backend: loans, tuned knobs and escalation counts come back
//! after a crash when the kernel agrees, are dropped (their CPUs given back)
//! when it does not or when the configuration no longer names what they
//! involve, and a damaged state file starts coordination clean.

mod common;

use atoll_core::backend::Actuator;
use atoll_core::clock::ManualClock;
use atoll_core::coord::{Direction, Message, Property, Reply as CoordReply, Resource};
use atoll_core::plan::{GroupPath, GroupSettings};
use atoll_core::spec::{OverlayConfig, PlatformSpec, ReactPolicy, DEFAULT_EPOCH};
use atoll_daemon::controller::Controller;
use atoll_proto::{Reply, Request};
use atoll_sim::SimPlatform;
use common::sim::{
    ask, controller_saving, n, reply, set, topo8 as topo, unit, web_and_batch, ROOT,
};

/// Host CPU 0; fair islands web (1-3: api, front) and batch (4-7: db,
/// crunch); overlay `shop` over api and db.
fn spec() -> PlatformSpec {
    web_and_batch(
        &[
            ("api", "web"),
            ("front", "web"),
            ("db", "batch"),
            ("crunch", "batch"),
        ],
        vec![OverlayConfig {
            name: n("shop"),
            priority: 5,
            units: vec![n("api"), n("db")],
            property: Property::LatencyPercentile {
                percentile: 99.0,
                bound_us: 1000,
            },
            slo: Default::default(),
            cap_timing: Default::default(),
            react: ReactPolicy::default(),
        }],
    )
}

struct Rig {
    sim: SimPlatform,
    state: tempfile::TempDir,
}

impl Rig {
    fn new() -> Self {
        Self {
            sim: SimPlatform::new(topo(), "atoll-cr", ManualClock::new()),
            state: tempfile::tempdir().unwrap(),
        }
    }

    /// A daemon with the state file in the rig's directory, started.
    fn start(&self, spec: PlatformSpec) -> Controller {
        let state = Some(self.state.path().to_path_buf());
        let mut c = controller_saving(&self.sim, spec, topo(), state);
        c.start().unwrap();
        c
    }

    fn epochs(&self, c: &mut Controller, k: usize) {
        for _ in 0..k {
            self.sim.advance(DEFAULT_EPOCH);
            c.epoch();
        }
    }

    fn cpus(&self, path: &str) -> String {
        self.sim
            .settings(&GroupPath::from_relative(path))
            .and_then(|s| s.cpus)
            .map(|c| c.to_string())
            .unwrap_or_default()
    }

    fn weight(&self, path: &str) -> Option<u32> {
        self.sim
            .settings(&GroupPath::from_relative(path))
            .and_then(|s| s.cpu_weight)
    }

    /// Writes an island's cpuset behind the daemon's back.
    fn write_cpus(&self, island: &str, cpus: &str) {
        let path = GroupPath::from_relative(island);
        let mut s: GroupSettings = self.sim.settings(&path).unwrap();
        s.cpus = Some(set(cpus));
        self.sim.clone().apply(&path, &s).unwrap();
    }

    fn state_file(&self) -> std::path::PathBuf {
        self.state.path().join("state.json")
    }
}

fn coordinate(c: &mut Controller, from: &str, msg: Message) -> (CoordReply, String) {
    let r = ask(
        c,
        ROOT,
        Request::Coordinate {
            from: Some(from.into()),
            message: msg,
        },
    );
    match reply(r) {
        Reply::Coordinated { reply, text } => (reply, text),
        other => panic!("expected Coordinated, got {other:?}"),
    }
}

fn why(c: &Controller, subject: &str) -> Vec<String> {
    c.decisions()
        .query(Some(subject), 1000)
        .iter()
        .map(|d| d.to_string())
        .collect()
}

fn loans(c: &mut Controller) -> Vec<(u32, String, String)> {
    match reply(ask(c, ROOT, Request::Overlays {})) {
        Reply::Overlays { overlays } => overlays
            .iter()
            .flat_map(|o| {
                o.loans
                    .iter()
                    .map(|l| (l.cpu, l.lender.to_string(), o.name.to_string()))
            })
            .collect(),
        other => panic!("expected Overlays, got {other:?}"),
    }
}

/// A daemon on `spec()` that borrowed CPU 5 from batch into web for shop,
/// tuned api up until its coordinator refused once (at capacity), and
/// crashed (no teardown). Returns api's weight then.
fn crashed_with_a_loan(rig: &Rig) -> u32 {
    let mut c = rig.start(spec());
    rig.epochs(&mut c, 3);
    let borrow = Message::BorrowPreferred {
        resource: Resource::Cores,
        overlay: n("shop"),
        island: n("batch"),
        amount: 1,
    };
    let (r, text) = coordinate(&mut c, "web", borrow);
    assert!(r.is_ack(), "{text}");
    assert_eq!(rig.cpus("web"), "1-3,5");
    let tune = Message::Tune {
        resource: Resource::CpuTime,
        dir: Direction::Up,
        overlay: n("shop"),
        unit: n("api"),
    };
    let mut refused = false;
    for _ in 0..40 {
        let (r, _) = coordinate(&mut c, "web", tune.clone());
        if !r.is_ack() {
            refused = true;
            break;
        }
    }
    assert!(refused, "api's weight never reached the top");
    let weight = rig.weight("web/api").unwrap();
    assert!(weight > 100, "{weight}");
    rig.epochs(&mut c, 2);
    weight
}

#[test]
fn a_restart_keeps_a_loan_the_kernel_agrees_with() {
    let rig = Rig::new();
    let weight = crashed_with_a_loan(&rig);

    let mut c = rig.start(spec());
    // Where they were, and never moved back on the way.
    assert_eq!(rig.cpus("web"), "1-3,5");
    assert_eq!(rig.cpus("batch"), "4,6-7");
    assert_eq!(rig.weight("web/api"), Some(weight));
    let d = why(&c, "web");
    assert!(
        !d.iter().any(|d| d.contains("set web: cpuset.cpus=1-3 ")),
        "{d:#?}"
    );
    assert_eq!(
        loans(&mut c),
        [(5, "batch".to_string(), "shop".to_string())]
    );
    let status = c.status();
    assert_eq!(
        status.coord_restored.as_deref(),
        Some("restored from state: 1 loan, 1 tuned unit, escalation level 1")
    );
    assert_eq!(status.islands[0].cpus, set("1-3,5"));
    let d = why(&c, "shop");
    assert!(
        d.iter()
            .any(|d| d.contains("loan of CPU 5 (batch -> web) kept")),
        "{d:#?}"
    );
    // The periodic reconcile keeps it; the restored loan is released as any.
    rig.epochs(&mut c, 40);
    assert_eq!(rig.cpus("web"), "1-3,5");
    let release = Message::Release {
        resource: Resource::Cores,
        overlay: n("shop"),
        island: n("batch"),
    };
    let (r, text) = coordinate(&mut c, "web", release);
    assert!(r.is_ack(), "{text}");
    assert_eq!(rig.cpus("web"), "1-3");
    assert_eq!(rig.cpus("batch"), "4-7");
    c.teardown().unwrap();
}

#[test]
fn a_restart_without_the_overlay_returns_the_loan() {
    let rig = Rig::new();
    crashed_with_a_loan(&rig);
    let mut gone = spec();
    gone.overlays.clear();
    let mut c = rig.start(gone);
    assert_eq!(rig.cpus("web"), "1-3");
    assert_eq!(rig.cpus("batch"), "4-7");
    assert_eq!(rig.weight("web/api").unwrap_or(100), 100);
    assert!(loans(&mut c).is_empty());
    let d = why(&c, "shop");
    assert!(
        d.iter().any(|d| d.contains(
            "overlay shop loan of CPU 5 (batch -> web, overlay shop) dropped, because recovered after restart: overlay shop is not registered"
        )),
        "{d:#?}"
    );
    let status = c.status().coord_restored.unwrap();
    assert!(status.contains("3 dropped"), "{status}");
    c.teardown().unwrap();
}

#[test]
fn a_restart_drops_a_loan_the_kernel_does_not_show() {
    let rig = Rig::new();
    crashed_with_a_loan(&rig);
    // While the daemon was down, CPU 5 went back to batch.
    rig.write_cpus("web", "1-3");
    rig.write_cpus("batch", "4-7");
    let mut c = rig.start(spec());
    assert_eq!(rig.cpus("web"), "1-3");
    assert_eq!(rig.cpus("batch"), "4-7");
    assert!(loans(&mut c).is_empty());
    let d = why(&c, "shop");
    assert!(
        d.iter()
            .any(|d| d.contains("CPU 5 is not in island web's CPUs (1-3) but in batch's")),
        "{d:#?}"
    );
    // The rest of the state is kept.
    assert!(c.status().coord_restored.unwrap().contains("1 tuned unit"));
    c.teardown().unwrap();
}

#[test]
fn a_tampered_coordination_part_starts_coordination_clean() {
    let rig = Rig::new();
    crashed_with_a_loan(&rig);
    // The coordination part edited, the file's own checksum made right: the
    // file loads, its coordination part fails its own checksum.
    let text = std::fs::read_to_string(rig.state_file()).unwrap();
    let start = text.find("\"state\":").unwrap() + "\"state\":".len();
    let end = text.trim_end().len() - 1;
    let state = text[start..end].replacen("\"cpu\":5", "\"cpu\":6", 1);
    assert_ne!(state, text[start..end]);
    let crc = format!("{:08x}", crc32fast::hash(state.as_bytes()));
    std::fs::write(
        rig.state_file(),
        format!("{{\"format\":2,\"crc32\":\"{crc}\",\"state\":{state}}}\n"),
    )
    .unwrap();
    let mut c = rig.start(spec());
    assert_eq!(rig.cpus("web"), "1-3");
    assert_eq!(rig.cpus("batch"), "4-7");
    assert_eq!(rig.weight("web/api").unwrap_or(100), 100);
    assert!(loans(&mut c).is_empty());
    let status = c.status().coord_restored.unwrap();
    assert!(
        status.starts_with("not restored (coordination state: checksum"),
        "{status}"
    );
    let d = why(&c, "platform");
    assert!(
        d.iter().any(|d| d.contains("coordination starts clean")),
        "{d:#?}"
    );
    // The rest of the state file still counted: no warning about it.
    assert!(c.status().warnings.is_empty(), "{:?}", c.status().warnings);
    c.teardown().unwrap();
}

#[test]
fn a_damaged_state_file_starts_coordination_clean() {
    let rig = Rig::new();
    crashed_with_a_loan(&rig);
    let text = std::fs::read_to_string(rig.state_file()).unwrap();
    std::fs::write(rig.state_file(), text.replacen("\"cpu\":5", "\"cpu\":6", 1)).unwrap();
    let mut c = rig.start(spec());
    assert_eq!(rig.cpus("web"), "1-3");
    assert!(loans(&mut c).is_empty());
    let status = c.status();
    assert!(
        status
            .coord_restored
            .as_deref()
            .is_some_and(|s| s.contains("the state file was damaged")),
        "{:?}",
        status.coord_restored
    );
    assert!(
        status.warnings.iter().any(|w| w.contains("damaged")),
        "{:?}",
        status.warnings
    );
    c.teardown().unwrap();
}

#[test]
fn a_reload_keeps_loans_knobs_and_escalation_of_what_stays() {
    let rig = Rig::new();
    let mut c = rig.start(spec());
    rig.epochs(&mut c, 3);
    let borrow = Message::BorrowPreferred {
        resource: Resource::Cores,
        overlay: n("shop"),
        island: n("batch"),
        amount: 1,
    };
    let (r, text) = coordinate(&mut c, "web", borrow);
    assert!(r.is_ack(), "{text}");
    let tune = Message::Tune {
        resource: Resource::CpuTime,
        dir: Direction::Up,
        overlay: n("shop"),
        unit: n("api"),
    };
    let mut refused = false;
    for _ in 0..40 {
        let (r, _) = coordinate(&mut c, "web", tune.clone());
        if !r.is_ack() {
            refused = true;
            break;
        }
    }
    assert!(refused);
    let weight = rig.weight("web/api").unwrap();

    // A reload that adds a unit keeps everything.
    let mut more = spec();
    more.units.push(unit("cache", "web"));
    c.reload(more.clone()).unwrap();
    assert_eq!(rig.cpus("web"), "1-3,5");
    assert_eq!(rig.cpus("batch"), "4,6-7");
    assert_eq!(rig.weight("web/api"), Some(weight));
    assert_eq!(loans(&mut c).len(), 1);
    assert_eq!(
        c.status().coord_restored.as_deref(),
        Some("kept across reload: 1 loan, 1 tuned unit, escalation level 1")
    );
    rig.epochs(&mut c, 40);
    assert_eq!(rig.cpus("web"), "1-3,5");

    // A reload that removes the lender island releases the loan.
    let mut fewer = more;
    fewer.islands.retain(|i| i.name.as_str() != "batch");
    fewer.units.retain(|u| u.island.as_str() != "batch");
    fewer.overlays[0].units = vec![n("api")];
    c.reload(fewer).unwrap();
    assert_eq!(rig.cpus("web"), "1-3");
    assert!(loans(&mut c).is_empty());
    let d = why(&c, "shop");
    assert!(
        d.iter().any(|d| d.contains(
            "loan of CPU 5 (batch -> web, overlay shop) dropped, because the configuration was reloaded: island batch is not configured"
        )),
        "{d:#?}"
    );
    // api's tune stays: its overlay, island and configured knobs are the same.
    assert_eq!(rig.weight("web/api"), Some(weight));
    c.teardown().unwrap();
}
