//! cgroup v2 classification in the daemon's network islands, with a fake
//! `nft` (issue 17): a unit group in a v2 hierarchy gets a rule in atoll's
//! own table, written in one transaction and only when the rules change;
//! the first write replaces a crashed run's table; a refusal is one
//! warning and is tried again; teardown deletes the table; the status says
//! which route classifies, or why none does (no `nft`).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use atoll_core::decision::Reason;
use atoll_core::Name;
use atoll_daemon::decisions::DecisionLog;
use atoll_daemon::netisland::{GroupDir, NetIslands};
use atoll_net::nft::{script, NftClassifier, NftRule, NftRunner};
use atoll_net::{FakeNet, NetError, Steering};

mod common;
use crate::common::sim::topo8;

const CONFIG: &str = r#"
[host]
cpus = "0"

[island.work]
cpus = "1-7"

[unit.api]
island = "work"

[unit.web]
island = "work"

[network.wire]
interface = "v0"
rate_mbit = 10

[network.wire.units.api]
share = 300
"#;

/// A runner whose scripts the test reads; refuses while `refuse` is set.
#[derive(Debug, Default, Clone)]
struct Shared {
    scripts: Arc<Mutex<Vec<String>>>,
    refuse: Arc<Mutex<bool>>,
}

impl NftRunner for Shared {
    fn run(&mut self, script: &str) -> Result<(), NetError> {
        if *self.refuse.lock().unwrap() {
            return Err(NetError::Command {
                command: "nft -f -".into(),
                status: "exit status: 1".into(),
                stderr: "refused".into(),
            });
        }
        self.scripts.lock().unwrap().push(script.to_string());
        Ok(())
    }
}

fn islands(spec: &atoll_core::spec::PlatformSpec, sysfs: &Path) -> NetIslands {
    std::fs::create_dir_all(sysfs.join("class/net/v0/queues")).unwrap();
    let mut fake = FakeNet::new();
    fake.add_iface("v0", "noqueue");
    NetIslands::new(Box::new(fake), Steering::new(sysfs, sysfs), spec, 1.25).unwrap()
}

#[test]
fn v2_unit_groups_get_rules_in_atolls_table_written_only_on_change() {
    let spec = atoll_config::parse(CONFIG, "test.toml", &topo8()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("v2");
    let api = mount.join("atoll-t/work/api");
    let mut net = islands(&spec, dir.path());
    let runner = Shared::default();
    net.set_nft(NftClassifier::new("atoll-t", Box::new(runner.clone())));
    let mut log = DecisionLog::default();
    let t = Duration::from_secs(1);
    let started = net.start(t, &mut log);
    assert!(started.is_empty(), "{started:?}");
    let dirs = |unit: &Name| {
        (unit.as_str() == "api").then(|| GroupDir::Cgroup2 {
            mount: mount.clone(),
            dir: api.clone(),
        })
    };
    // The group is not made yet: the table is still written (empty), which
    // replaces whatever a crashed run left under the same name.
    assert!(net.classify(t, &dirs, &Reason::Config, &mut log).is_empty());
    assert_eq!(
        *runner.scripts.lock().unwrap(),
        vec![script("atoll_atoll_t", &[])]
    );
    std::fs::create_dir_all(&api).unwrap();
    assert!(net.classify(t, &dirs, &Reason::Config, &mut log).is_empty());
    let rule = NftRule::for_group(&mount, &api, 0x0001_0010).unwrap();
    assert_eq!(rule.level, 3);
    {
        let scripts = runner.scripts.lock().unwrap();
        assert_eq!(scripts.len(), 2);
        assert_eq!(scripts[1], script("atoll_atoll_t", &[rule]));
        assert!(scripts[1]
            .contains("socket cgroupv2 level 3 \"atoll-t/work/api\" meta priority set 1:10"));
    }
    // Nothing changed: no transaction.
    assert!(net.classify(t, &dirs, &Reason::Config, &mut log).is_empty());
    assert_eq!(runner.scripts.lock().unwrap().len(), 2);
    let why: Vec<String> = log
        .query(Some("wire"), 50)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        why.iter().any(|d| d.contains("unit api")
            && d.contains("class 1:10")
            && d.contains("nftables table inet atoll_atoll_t")),
        "{why:?}"
    );
    let status = net.status();
    assert!(
        status[0].classification.contains("nftables"),
        "{}",
        status[0].classification
    );
    assert!(status[0].classification.contains("the groups of api"));

    let left = net.teardown(t, &mut log);
    assert!(left.is_empty(), "{left:?}");
    let scripts = runner.scripts.lock().unwrap();
    assert_eq!(scripts.last().unwrap(), &script("atoll_atoll_t", &[]));
    let why: Vec<String> = log
        .query(Some("wire"), 50)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        why.iter()
            .any(|d| d.contains("table inet atoll_atoll_t deleted")),
        "{why:?}"
    );
}

#[test]
fn a_refused_write_is_one_warning_and_is_tried_again() {
    let spec = atoll_config::parse(CONFIG, "test.toml", &topo8()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("v2");
    let api = mount.join("r/api");
    std::fs::create_dir_all(&api).unwrap();
    let mut net = islands(&spec, dir.path());
    let runner = Shared::default();
    *runner.refuse.lock().unwrap() = true;
    net.set_nft(NftClassifier::new("r", Box::new(runner.clone())));
    let mut log = DecisionLog::default();
    let t = Duration::from_secs(1);
    net.start(t, &mut log);
    let dirs = |_: &Name| {
        Some(GroupDir::Cgroup2 {
            mount: mount.clone(),
            dir: api.clone(),
        })
    };
    let first = net.classify(t, &dirs, &Reason::Config, &mut log);
    assert_eq!(first.len(), 1, "{first:?}");
    assert!(first[0].contains("refused"));
    assert!(net.classify(t, &dirs, &Reason::Config, &mut log).is_empty());
    assert!(net.status()[0]
        .classification
        .contains("last write refused"));
    *runner.refuse.lock().unwrap() = false;
    assert!(net.classify(t, &dirs, &Reason::Config, &mut log).is_empty());
    assert_eq!(runner.scripts.lock().unwrap().len(), 1);
    assert!(!net.status()[0].classification.contains("refused"));
}

#[test]
fn without_nft_the_status_says_why_nothing_classifies() {
    let spec = atoll_config::parse(CONFIG, "test.toml", &topo8()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut net = islands(&spec, dir.path());
    net.set_nft_missing("no `nft` in PATH; install nftables");
    let mut log = DecisionLog::default();
    net.start(Duration::ZERO, &mut log);
    let text = &net.status()[0].classification;
    assert!(
        text.contains("none by cgroup") && text.contains("no `nft` in PATH"),
        "{text}"
    );
}

/// A class given to a run-time unit gets its rule in atoll's table like a
/// configured unit's (class 1:11, api having 1:10), and the rule goes with
/// the class.
#[test]
fn a_run_time_units_class_gets_a_rule_and_loses_it_with_the_class() {
    use atoll_core::netisland::NetUnitSetup;
    use atoll_daemon::netisland::RuntimeClass;

    let spec = atoll_config::parse(CONFIG, "test.toml", &topo8()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("v2");
    let (api, job) = (
        mount.join("atoll-t/work/api"),
        mount.join("atoll-t/work/job"),
    );
    std::fs::create_dir_all(&api).unwrap();
    std::fs::create_dir_all(&job).unwrap();
    let mut net = islands(&spec, dir.path());
    let runner = Shared::default();
    net.set_nft(NftClassifier::new("atoll-t", Box::new(runner.clone())));
    let mut log = DecisionLog::default();
    let t = Duration::from_secs(1);
    assert!(net.start(t, &mut log).is_empty());
    let dirs = |unit: &Name| {
        let dir = match unit.as_str() {
            "api" => api.clone(),
            "job" => job.clone(),
            _ => return None,
        };
        Some(GroupDir::Cgroup2 {
            mount: mount.clone(),
            dir,
        })
    };
    assert!(net.classify(t, &dirs, &Reason::Config, &mut log).is_empty());
    let api_rule = NftRule::for_group(&mount, &api, 0x0001_0010).unwrap();
    let job_rule = NftRule::for_group(&mount, &job, 0x0001_0011).unwrap();
    let class = RuntimeClass {
        island: Name::new("wire").unwrap(),
        class: NetUnitSetup {
            name: Name::new("job").unwrap(),
            share: 200,
            ceil_bps: None,
            prio: 3,
        },
    };
    let job_name = Name::new("job").unwrap();
    let both = script("atoll_atoll_t", &[api_rule.clone(), job_rule]);
    let w = net
        .set_runtime_class(&job_name, Some(class.clone()), t, &Reason::Config, &mut log)
        .unwrap();
    assert!(w.is_empty(), "{w:?}");
    assert!(net.classify(t, &dirs, &Reason::Config, &mut log).is_empty());
    assert_eq!(runner.scripts.lock().unwrap().last().unwrap(), &both);
    // Taken off a unit that stays (`unit set --no-net-class`): the rule
    // goes at once, in one transaction; given again, it comes back.
    let w = net
        .set_runtime_class(&job_name, None, t, &Reason::Config, &mut log)
        .unwrap();
    assert!(w.is_empty(), "{w:?}");
    assert!(net.classify(t, &dirs, &Reason::Config, &mut log).is_empty());
    assert_eq!(
        runner.scripts.lock().unwrap().last().unwrap(),
        &script("atoll_atoll_t", std::slice::from_ref(&api_rule))
    );
    let w = net
        .set_runtime_class(&job_name, Some(class), t, &Reason::Config, &mut log)
        .unwrap();
    assert!(w.is_empty(), "{w:?}");
    assert!(net.classify(t, &dirs, &Reason::Config, &mut log).is_empty());
    assert_eq!(runner.scripts.lock().unwrap().last().unwrap(), &both);
    // The unit is gone: its class and then its rule.
    let (dropped, w) = net.drop_gone_classes(|u| u.as_str() != "job", t, &mut log);
    assert!(dropped && w.is_empty(), "{w:?}");
    assert!(net.classify(t, &dirs, &Reason::Config, &mut log).is_empty());
    assert_eq!(
        runner.scripts.lock().unwrap().last().unwrap(),
        &script("atoll_atoll_t", &[api_rule])
    );
    assert!(net.runtime_classes().next().is_none());
    assert!(net.teardown(t, &mut log).is_empty());
}
