//! The network islands' simulator rig: a daemon on the simulator whose
//! network islands write to a shared `FakeNet` (its interfaces outlive a
//! daemon, as a real interface outlives a crash), with fake sysfs and a
//! state directory; the decisions about a subject as text.

use std::path::Path;
use std::sync::{Arc, Mutex};

use atoll_core::spec::PlatformSpec;
use atoll_daemon::controller::Controller;
use atoll_daemon::netisland::NetIslands;
use atoll_net::{FakeNet, NetBackend, Steering};
use atoll_sim::SimPlatform;

use super::sim::{controller_saving, topo8};

/// `config` parsed for [`topo8`].
pub fn spec(config: &str) -> PlatformSpec {
    atoll_config::parse(config, "test.toml", &topo8()).unwrap()
}

/// A daemon on `sim` over the shared fake interfaces, its sysfs in `sys`
/// and its state in `state`, started.
pub fn daemon(
    sim: &SimPlatform,
    config: &str,
    fake: &Arc<Mutex<FakeNet>>,
    sys: &Path,
    state: &Path,
) -> Controller {
    let spec = spec(config);
    let net = NetIslands::new(
        Box::new(Arc::clone(fake)),
        Steering::new(sys, sys),
        &spec,
        1.25,
    )
    .unwrap();
    let mut c = controller_saving(sim, spec, topo8(), Some(state.to_path_buf()));
    c.set_network(net);
    c.start().unwrap();
    c
}

/// Fake interfaces, each `(name, root qdisc kind)`.
pub fn fakes(ifaces: &[(&str, &str)]) -> Arc<Mutex<FakeNet>> {
    let mut fake = FakeNet::new();
    for (name, root) in ifaces {
        fake.add_iface(name, root);
    }
    Arc::new(Mutex::new(fake))
}

/// The root qdisc of `iface` on the fake: (kind, handle).
pub fn root_of(fake: &Arc<Mutex<FakeNet>>, iface: &str) -> (String, String) {
    let r = fake.lock().unwrap().root_qdisc(iface).unwrap();
    (r.kind, r.handle)
}

/// The decisions about `key`, as text.
pub fn why(c: &Controller, key: &str) -> Vec<String> {
    c.decisions()
        .query(Some(key), 200)
        .iter()
        .map(ToString::to_string)
        .collect()
}
