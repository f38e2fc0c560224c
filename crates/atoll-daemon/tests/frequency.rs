//! `[island.NAME.frequency]` on the simulated backend with a fake cpufreq
//! tree: the daemon writes the island's policy at start (a decision `atoll
//! why ISLAND` shows, a status line), rewrites it on reload, refuses a
//! reload the CPUs cannot follow without changing anything, and gives
//! every CPU back at teardown. CPUs of other islands are never written.

mod common;

use atoll_core::clock::ManualClock;
use atoll_core::decision::Action;
use atoll_core::power::FreqPolicy;
use atoll_core::spec::{HostSpec, IslandSpec, PlatformSpec, SchedPolicy, DEFAULT_EPOCH};
use atoll_daemon::controller::{Controller, ReloadError};
use atoll_daemon::frequency::Frequencies;
use atoll_power::cpufreq;
use atoll_power::testutils::{FakeCpuFreq, FakePower};
use atoll_proto::{Reply, Request};
use atoll_sim::SimPlatform;
use common::sim::{ask, controller, controller_saving, epochs, n, reply, set, topo8, ROOT};

fn island(name: &str, cpus: &str) -> IslandSpec {
    IslandSpec {
        name: n(name),
        cpus: set(cpus),
        mems: set("0"),
        policy: SchedPolicy::Fair,
        arbitration: Default::default(),
        exclusive: false,
        access: Default::default(),
    }
}

/// Islands `web` (1-3) and `batch` (4-7); `batch` has `policy`.
fn spec(policy: Option<FreqPolicy>) -> PlatformSpec {
    PlatformSpec {
        host: HostSpec {
            cpus: set("0"),
            mems: set("0"),
            adopt_all: false,
        },
        islands: vec![island("web", "1-3"), island("batch", "4-7")],
        units: Vec::new(),
        default_island: None,
        epoch: DEFAULT_EPOCH,
        isolation: Default::default(),
        overlays: Vec::new(),
        comm: None,
        apps: Default::default(),
        network: Vec::new(),
        frequency: policy.into_iter().map(|p| (n("batch"), p)).collect(),
    }
}

fn max(khz: u64) -> FreqPolicy {
    FreqPolicy {
        governor: Some("powersave".into()),
        min_khz: None,
        max_khz: Some(khz),
    }
}

fn why(c: &mut Controller, subject: &str) -> Vec<String> {
    match reply(ask(
        c,
        ROOT,
        Request::Why {
            subject: Some(subject.into()),
            limit: None,
        },
    )) {
        Reply::Decisions { decisions } => decisions
            .iter()
            .filter(|d| matches!(d.action, Action::SetFrequency { .. }))
            .map(|d| d.action.to_string())
            .collect(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_daemon_writes_reloads_and_gives_back_an_islands_frequency() {
    let root = (0..8)
        .fold(FakePower::new(), |p, c| p.cpufreq(FakeCpuFreq::new(c)))
        .write_temp()
        .unwrap();
    let before = cpufreq::read_all(root.path()).unwrap();
    let sim = SimPlatform::new(topo8(), "atoll-freq", ManualClock::new());
    let first = spec(Some(max(1_200_000)));
    let mut c = controller(&sim, first.clone(), topo8());
    c.set_frequencies(Frequencies::new(root.path(), &first).unwrap());
    c.start().unwrap();
    epochs(&sim, &mut c, 2);

    let now = cpufreq::read_all(root.path()).unwrap();
    for f in &now[4..] {
        assert_eq!(
            (f.governor.as_str(), f.scaling_max_khz),
            ("powersave", 1_200_000)
        );
    }
    assert_eq!(now[..4], before[..4], "CPUs of island web and the host");
    assert_eq!(
        why(&mut c, "batch"),
        ["frequency of island batch (CPUs 4-7): governor powersave, max 1200000 kHz"]
    );
    assert!(why(&mut c, "web").is_empty());
    let energy = c.status().energy.expect("frequency lines in the status");
    assert_eq!(
        energy.frequency,
        ["island batch (CPUs 4-7): governor powersave, max 1200000 kHz"]
    );

    // A policy the CPUs cannot follow: refused, nothing changes.
    let e = c.reload(spec(Some(max(9_000_000)))).unwrap_err();
    assert!(matches!(e, ReloadError::Frequency(_)), "{e}");
    assert!(
        e.to_string().contains("cpu4 runs at 800000..=3600000 kHz"),
        "{e}"
    );
    assert_eq!(cpufreq::read_all(root.path()).unwrap(), now);

    // A new maximum: given back, then written.
    let changes = c.reload(spec(Some(max(2_000_000)))).unwrap();
    assert_eq!(changes, ["island.batch.frequency changed"]);
    let after = cpufreq::read_all(root.path()).unwrap();
    assert!(after[4..].iter().all(|f| f.scaling_max_khz == 2_000_000));
    assert_eq!(why(&mut c, "batch").len(), 3);

    c.teardown().unwrap();
    assert_eq!(cpufreq::read_all(root.path()).unwrap(), before);
    let last = why(&mut c, "batch");
    assert!(
        last.last().unwrap().ends_with("restored as found"),
        "{last:?}"
    );
}

#[test]
fn without_an_actuator_a_policy_is_named_in_a_warning() {
    let sim = SimPlatform::new(topo8(), "atoll-freq", ManualClock::new());
    let mut c = controller(&sim, spec(Some(max(1_200_000))), topo8());
    c.start().unwrap();
    let s = c.status();
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("frequency policies of islands batch")),
        "{:?}",
        s.warnings
    );
    assert!(s.energy.is_none());
    c.teardown().unwrap();
}

/// The daemon writes a policy, crashes (no teardown), and a new daemon on
/// the same machine and state directory writes another one: teardown gives
/// back what the machine had before the first run, read from the state
/// file, not what the crashed run left written.
#[test]
fn after_a_crash_teardown_restores_the_first_originals() {
    let root = (0..8)
        .fold(FakePower::new(), |p, c| {
            p.cpufreq(
                FakeCpuFreq::new(c)
                    .governor("powersave")
                    .scaling(1_000_000, 3_000_000),
            )
        })
        .write_temp()
        .unwrap();
    let state = tempfile::tempdir().unwrap();
    let before = cpufreq::read_all(root.path()).unwrap();
    let sim = SimPlatform::new(topo8(), "atoll-freq-crash", ManualClock::new());
    let performance = |khz| FreqPolicy {
        governor: Some("performance".into()),
        min_khz: Some(800_000),
        max_khz: Some(khz),
    };
    let first = spec(Some(performance(1_200_000)));
    let mut c = controller_saving(&sim, first.clone(), topo8(), Some(state.path().into()));
    c.set_frequencies(Frequencies::new(root.path(), &first).unwrap());
    c.start().unwrap();
    epochs(&sim, &mut c, 2);
    let written = cpufreq::read_all(root.path()).unwrap();
    assert_eq!(written[4].governor, "performance");
    assert_eq!(written[4].scaling_max_khz, 1_200_000);
    // The crash: the controller is gone without a teardown.
    drop(c);

    let second = spec(Some(performance(2_000_000)));
    let mut c = controller_saving(&sim, second.clone(), topo8(), Some(state.path().into()));
    c.set_frequencies(Frequencies::new(root.path(), &second).unwrap());
    c.start().unwrap();
    epochs(&sim, &mut c, 2);
    let now = cpufreq::read_all(root.path()).unwrap();
    assert_eq!(now[4].scaling_max_khz, 2_000_000);
    c.teardown().unwrap();
    let after = cpufreq::read_all(root.path()).unwrap();
    assert_eq!(after, before, "the originals of before the first run");
    assert_eq!(after[4].governor, "powersave");
    assert_eq!(after[4].scaling_min_khz, 1_000_000);
}
