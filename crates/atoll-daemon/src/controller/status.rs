//! The status report: islands, units, processes and usage, read fresh from
//! the backend, with what each component knows.

use atoll_core::plan::{GroupPath, TaskPolicy};
use atoll_proto::{HostStatus, IslandStatus, RootInfo, StatusReport, UnitStatus};

use super::Controller;

impl Controller {
    /// A snapshot for `atoll status` and the metrics endpoint.
    pub fn status(&self) -> StatusReport {
        let b = &self.env.backend;
        let spec = self.reg.spec();
        let stats = |g: &GroupPath| b.stats(g).unwrap_or_default();
        let host = GroupPath::host();
        let island_cpus = self.island_cpus();
        let units: Vec<UnitStatus> = spec
            .islands
            .iter()
            .flat_map(|i| {
                let mut us: Vec<_> = self
                    .reg
                    .units()
                    .filter(|(u, _)| u.island == i.name)
                    .collect();
                us.sort_by(|a, b| a.0.name.cmp(&b.0.name));
                us
            })
            .map(|(u, origin)| {
                let g = GroupPath::unit(&u.island, &u.name);
                UnitStatus {
                    name: u.name.to_string(),
                    island: u.island.to_string(),
                    origin,
                    entitlement: u.entitlement.clone(),
                    task_policy: self
                        .reg
                        .planned(&g)
                        .and_then(|p| p.task_policy)
                        .unwrap_or(TaskPolicy::Other),
                    pids: b.processes(&g).unwrap_or_default(),
                    stats: stats(&g),
                    isolation: self.iso.accounts().get(u.name.as_str()).cloned(),
                    comm: self.comm.unit_status(&u.name),
                    service: self.unit_service(&g),
                }
            })
            .collect();
        StatusReport {
            version: env!("CARGO_PKG_VERSION").to_string(),
            backend: b.kind().as_str().to_string(),
            service_manager: b.service_manager(),
            root: b.root_name().to_string(),
            root_info: Some(RootInfo {
                location: b.root_location(),
                effects: atoll_core::effects::outside_effects(spec, b.exclusive_root()),
            }),
            epoch_ms: u64::try_from(spec.epoch.as_millis()).unwrap_or(u64::MAX),
            uptime_ms: u64::try_from(self.now().saturating_sub(self.started_at).as_millis())
                .unwrap_or(u64::MAX),
            epochs: self.epochs,
            host: HostStatus {
                cpus: spec.host.cpus.clone(),
                mems: spec.host.mems.clone(),
                adopt_all: spec.host.adopt_all,
                processes: b.processes(&host).map(|p| p.len()).unwrap_or(0),
                stats: stats(&host),
            },
            islands: spec
                .islands
                .iter()
                .map(|i| IslandStatus {
                    name: i.name.to_string(),
                    cpus: island_cpus
                        .get(&i.name)
                        .cloned()
                        .unwrap_or_else(|| i.cpus.clone()),
                    mems: i.mems.clone(),
                    policy: i.policy.clone(),
                    units: units
                        .iter()
                        .filter(|u| u.island == i.name.as_str())
                        .map(|u| u.name.clone())
                        .collect(),
                    stats: stats(&GroupPath::island(&i.name)),
                })
                .collect(),
            units,
            fallbacks: self.compose.fallbacks().cloned().collect(),
            isolation_mode: Some(spec.isolation.mode),
            accounts: self.env.system.accounts().ok(),
            comm: self.comm.status(spec.comm.as_ref()),
            discovery: Some(self.adoption.discovery()),
            pressure: Some(self.coord.pressure_source()),
            pace: Some(self.pace.status(self.epoch_len(), self.started_at)),
            coord_restored: self.coord.restored().map(str::to_string),
            energy: self.energy_status(),
            network: self
                .net
                .as_ref()
                .map(crate::netisland::NetIslands::status)
                .unwrap_or_default(),
            slo: self.slo_statuses(),
            warnings: self
                .warnings
                .iter()
                .cloned()
                .chain(self.services.warnings())
                .collect(),
        }
    }

    /// RAPL and cpufreq as measured (a real machine), and the frequency
    /// policies written.
    fn energy_status(&self) -> Option<atoll_proto::energy::EnergyStatus> {
        let mut e = self.power.as_ref().map(crate::power::Power::status);
        if let Some(freq) = &self.freq {
            e.get_or_insert_with(Default::default).frequency = freq.lines();
        }
        if let Some(p) = self.powercap.status() {
            e.get_or_insert_with(Default::default).power_cap = Some(p);
        }
        if let Some(l) = self.apps.watts_status() {
            e.get_or_insert_with(Default::default).learned = Some(l);
        }
        e
    }

    /// How unit group `g` is bound to a service manager, if it should be,
    /// and what is wrong: why it is not bound, or what the manager refused
    /// of its settings (none of them was made).
    fn unit_service(&self, g: &GroupPath) -> Option<atoll_proto::UnitService> {
        if let Some(external) = self.services.bound(g) {
            return Some(atoll_proto::UnitService {
                external: external.clone(),
                bound: true,
                problem: self.compose.refused(g).map(str::to_string),
            });
        }
        self.services.unbound(g).map(|u| atoll_proto::UnitService {
            external: u.to.clone(),
            bound: false,
            problem: Some(u.why.clone()),
        })
    }
}

impl Controller {
    /// The daemon's own figures: what epochs cost, the decisions made, the
    /// process (read now, when a reader is set). Built with each status the
    /// metrics ask for, never in an epoch.
    pub fn telemetry(&self) -> crate::telemetry::Telemetry {
        self.meter.telemetry(self.log.counts())
    }

    /// Times epochs with `clock` (by default the injected clock, which in
    /// the simulator does not move within an epoch; the daemon gives a
    /// monotonic one).
    pub fn set_stopwatch(&mut self, clock: std::sync::Arc<dyn atoll_core::clock::Clock>) {
        self.meter.set_clock(clock);
    }

    /// Reads the daemon's own process figures (`process_*` metrics) under
    /// `proc_root`.
    pub fn set_self_reader(&mut self, proc_root: &std::path::Path) {
        self.meter
            .set_process(crate::telemetry::process::SelfReader::new(proc_root));
    }
}
