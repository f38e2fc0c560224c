use atoll_core::spec::{HostSpec, IslandSpec, SchedPolicy};
use atoll_power::cpufreq;
use atoll_power::testutils::{FakeCpuFreq, FakePower};

use super::*;

fn n(s: &str) -> Name {
    Name::new(s).unwrap()
}

fn island(name: &str, cpus: &str) -> IslandSpec {
    IslandSpec {
        name: n(name),
        cpus: CpuSet::parse(cpus).unwrap(),
        mems: CpuSet::parse("0").unwrap(),
        policy: SchedPolicy::Fair,
        arbitration: Default::default(),
        exclusive: false,
        access: Default::default(),
    }
}

/// Islands `web` (CPUs 1-2) and `batch` (CPU 3); `batch` has `policy`.
fn spec(policy: Option<FreqPolicy>) -> PlatformSpec {
    PlatformSpec {
        host: HostSpec {
            cpus: CpuSet::parse("0").unwrap(),
            mems: CpuSet::parse("0").unwrap(),
            adopt_all: false,
        },
        islands: vec![island("web", "1-2"), island("batch", "3")],
        units: Vec::new(),
        default_island: None,
        epoch: atoll_core::spec::DEFAULT_EPOCH,
        isolation: Default::default(),
        overlays: Vec::new(),
        comm: None,
        apps: Default::default(),
        network: Vec::new(),
        frequency: policy.into_iter().map(|p| (n("batch"), p)).collect(),
    }
}

fn powersave(max: u64) -> FreqPolicy {
    FreqPolicy {
        governor: Some("powersave".into()),
        min_khz: None,
        max_khz: Some(max),
    }
}

fn machine() -> tempfile::TempDir {
    (0..4)
        .fold(FakePower::new(), |p, c| p.cpufreq(FakeCpuFreq::new(c)))
        .write_temp()
        .unwrap()
}

#[test]
fn start_writes_the_island_and_teardown_gives_it_back() {
    let root = machine();
    let before = cpufreq::read_all(root.path()).unwrap();
    let mut f = Frequencies::new(root.path(), &spec(Some(powersave(1_200_000)))).unwrap();
    let mut log = DecisionLog::default();
    assert!(f.start(Duration::from_secs(1), &mut log).is_empty());
    let now = cpufreq::read_all(root.path()).unwrap();
    assert_eq!(now[3].governor, "powersave");
    assert_eq!(now[3].scaling_max_khz, 1_200_000);
    assert_eq!(now[..3], before[..3], "CPUs of no policy are not written");
    let d = log.query(Some("batch"), 10);
    assert_eq!(d.len(), 1);
    assert_eq!(
        d[0].action.to_string(),
        "frequency of island batch (CPUs 3): governor powersave, max 1200000 kHz"
    );
    assert_eq!(
        f.lines(),
        ["island batch (CPUs 3): governor powersave, max 1200000 kHz"]
    );
    assert!(f.teardown(Duration::from_secs(2), &mut log).is_empty());
    assert_eq!(cpufreq::read_all(root.path()).unwrap(), before);
    let d = log.query(Some("batch"), 10);
    assert_eq!(d.len(), 2);
    assert!(
        d[1].action.to_string().ends_with("restored as found"),
        "{}",
        d[1].action
    );
    assert_eq!(d[1].why, Reason::Teardown);
    // A second teardown has nothing left to give back.
    assert!(f.teardown(Duration::from_secs(3), &mut log).is_empty());
    assert_eq!(log.query(Some("batch"), 10).len(), 2);
}

#[test]
fn a_machine_without_cpufreq_or_a_policy_it_cannot_follow_is_refused() {
    let vm = FakePower::new()
        .cpu_without_cpufreq(0)
        .cpu_without_cpufreq(3)
        .write_temp()
        .unwrap();
    let e = Frequencies::new(vm.path(), &spec(Some(powersave(1_200_000)))).unwrap_err();
    let text = e.to_string();
    assert!(text.starts_with("island.batch.frequency: "), "{text}");
    assert!(text.contains("cpu3 has no cpufreq"), "{text}");
    // Without a policy, nothing is asked of cpufreq.
    assert!(Frequencies::new(vm.path(), &spec(None))
        .unwrap()
        .lines()
        .is_empty());
    let root = machine();
    let e = Frequencies::new(root.path(), &spec(Some(powersave(9_000_000)))).unwrap_err();
    assert!(
        e.to_string().contains("cpu3 runs at 800000..=3600000 kHz"),
        "{e}"
    );
}

#[test]
fn reload_rewrites_changed_policies_and_refuses_bad_ones() {
    let root = machine();
    let before = cpufreq::read_all(root.path()).unwrap();
    let mut f = Frequencies::new(root.path(), &spec(Some(powersave(1_200_000)))).unwrap();
    let mut log = DecisionLog::default();
    f.start(Duration::from_secs(1), &mut log);
    // Same policy: nothing written.
    let w = f
        .reload(
            &spec(Some(powersave(1_200_000))),
            Duration::from_secs(2),
            &mut log,
        )
        .unwrap();
    assert!(w.is_empty());
    assert_eq!(log.query(Some("batch"), 10).len(), 1);
    // A refused policy changes nothing.
    let bad = FreqPolicy {
        governor: Some("turbo".into()),
        ..FreqPolicy::default()
    };
    assert!(f
        .reload(&spec(Some(bad)), Duration::from_secs(3), &mut log)
        .is_err());
    assert_eq!(
        cpufreq::read_all(root.path()).unwrap()[3].scaling_max_khz,
        1_200_000
    );
    // A new maximum: given back, then written.
    f.reload(
        &spec(Some(powersave(2_000_000))),
        Duration::from_secs(4),
        &mut log,
    )
    .unwrap();
    assert_eq!(
        cpufreq::read_all(root.path()).unwrap()[3].scaling_max_khz,
        2_000_000
    );
    assert_eq!(log.query(Some("batch"), 10).len(), 3);
    // The policy removed: the CPU as it was before the daemon.
    f.reload(&spec(None), Duration::from_secs(5), &mut log)
        .unwrap();
    assert_eq!(cpufreq::read_all(root.path()).unwrap(), before);
    f.teardown(Duration::from_secs(6), &mut log);
    assert_eq!(cpufreq::read_all(root.path()).unwrap(), before);
}

#[test]
fn a_power_cap_limit_outlives_a_reload_and_goes_back_at_teardown() {
    let root = machine();
    let before = cpufreq::read_all(root.path()).unwrap();
    let mut f = Frequencies::new(root.path(), &spec(None)).unwrap();
    assert_eq!(
        f.ranges().get(&n("batch")),
        Some(&(800_000, 3_600_000)),
        "{:?}",
        f.ranges()
    );
    let mut log = DecisionLog::default();
    f.start(Duration::from_secs(1), &mut log);
    f.limit(
        &n("web"),
        Some(1_000_000),
        Duration::from_secs(2),
        &mut log,
        Reason::Config,
    )
    .unwrap();
    let max = |cpu: usize| cpufreq::read_all(root.path()).unwrap()[cpu].scaling_max_khz;
    assert_eq!((max(1), max(2), max(3)), (1_000_000, 1_000_000, 3_600_000));
    assert_eq!(
        f.lines(),
        ["island web (CPUs 1-2): power cap max 1000000 kHz"]
    );
    assert!(log.query(Some("web"), 10)[0]
        .action
        .to_string()
        .ends_with("power cap: max 1000000 kHz"));
    // A policy on batch: everything given back and written again, the
    // limit on web with it.
    f.reload(
        &spec(Some(powersave(1_200_000))),
        Duration::from_secs(3),
        &mut log,
    )
    .unwrap();
    assert_eq!((max(1), max(3)), (1_000_000, 1_200_000));
    assert_eq!(f.limit_of(&n("web")), Some(1_000_000));
    f.teardown(Duration::from_secs(4), &mut log);
    assert_eq!(cpufreq::read_all(root.path()).unwrap(), before);
    assert_eq!(f.limit_of(&n("web")), None);
}
