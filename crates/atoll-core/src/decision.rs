//! Every action that moves resources, with its reason.
//!
//! The daemon records a [`Decision`] for each group it creates or changes,
//! each process it moves, each policy it sets and each fallback the kernel
//! forced, and logs it. `atoll why` and the status call read them back, so a
//! user can ask why a process is where it is.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::backend::Fallback;
use crate::plan::{GroupPath, TaskPolicy};
use crate::spec::AdoptRule;

/// What was done.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// A group was created or its knobs changed.
    ApplyGroup {
        /// The group.
        path: GroupPath,
        /// The knobs written, `file=value`.
        knobs: Vec<String>,
        /// The layers whose settings the group's effective settings hold
        /// (`plan`, `isolation`, `coordination`, `comm`, `apps`), in the
        /// order they are laid.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        layers: Vec<String>,
    },
    /// A group was removed.
    RemoveGroup {
        /// The group.
        path: GroupPath,
    },
    /// A process was moved into a group.
    MoveProcess {
        /// The process.
        pid: u32,
        /// Its name.
        comm: String,
        /// Where to.
        to: GroupPath,
    },
    /// A process was given back to the cgroups it came from.
    RestoreProcess {
        /// The process.
        pid: u32,
        /// Where to (the v2 path, or the v1 `cpu` hierarchy path).
        to: String,
    },
    /// A scheduling policy was set on a process's threads.
    SetPolicy {
        /// The process.
        pid: u32,
        /// The policy.
        policy: TaskPolicy,
        /// Threads changed.
        threads: usize,
    },
    /// The kernel refused a knob and a fallback is in force.
    Fallback(Fallback),
    /// A unit was created at run time.
    CreateUnit {
        /// The unit.
        unit: String,
        /// Its island.
        island: String,
    },
    /// A unit was removed.
    RemoveUnit {
        /// The unit.
        unit: String,
    },
    /// A unit's entitlement was changed at run time.
    SetUnit {
        /// The unit.
        unit: String,
        /// What changed (`cpus 1 -> 2`).
        change: String,
    },
    /// An overlay was added, changed or removed at run time.
    SetOverlay {
        /// The overlay.
        overlay: String,
        /// What happened (`added over units a b`, `removed`).
        change: String,
    },
    /// A unit's boost under communication-aware scheduling starts or ends.
    Boost {
        /// The unit.
        unit: String,
        /// How (`slice 100us on 4 threads`, `weight x8`, `others idle`).
        how: String,
        /// Started (true) or ended.
        start: bool,
    },
    /// A network island's interface was written or given back (its HTB
    /// tree, its steering masks).
    SetNetwork {
        /// The network island.
        island: String,
        /// The interface.
        interface: String,
        /// What (`HTB tree: ...`, `rx CPUs 1`, `restored as found`).
        change: String,
    },
    /// An island's CPU frequency policy was written or given back
    /// (`[island.NAME.frequency]`, the platform power cap).
    SetFrequency {
        /// The island.
        island: String,
        /// Its CPUs.
        cpus: String,
        /// What (`governor powersave, max 1200000 kHz`, `restored as found`).
        change: String,
    },
}

/// Why it was done.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Reason {
    /// The platform description asks for it.
    Config,
    /// An adoption rule of a unit matched.
    Rule {
        /// The unit.
        unit: String,
        /// The rule.
        rule: AdoptRule,
    },
    /// `[host] adopt_all` moves every unmanaged task to the host partition.
    HostAdoptAll,
    /// A caller asked through the API.
    Api {
        /// Caller's uid (from SO_PEERCRED).
        uid: u32,
        /// The request, short form.
        request: String,
    },
    /// The daemon is shutting down.
    Teardown,
    /// Restart: the saved state was checked against the kernel.
    Recover {
        /// What was found.
        detail: String,
    },
    /// A realtime unit's RT budget, enforced by atoll where the kernel has no
    /// RT group scheduling: exhausted (demote) or renewed (restore).
    RtBudget {
        /// The unit.
        unit: String,
        /// CPU time used in this period, µs.
        used_us: u64,
        /// The budget per period, µs.
        runtime_us: u64,
        /// The period, µs.
        period_us: u64,
        /// `true`: the budget ran out; `false`: a new period began.
        exhausted: bool,
    },
    /// The isolation policy (seed 004) lent or took back a resource.
    Isolation {
        /// The policy's event, e.g. `lend CPUs 3 from web to batch`.
        detail: String,
    },
    /// A management overlay's coordination (inTune, seeds 000 and 001): a
    /// coordination message was acknowledged, a boost ended, or the platform
    /// CPU cap moved.
    Coordination {
        /// The overlay (`platform` for the platform manager's own steps).
        overlay: String,
        /// What was done and what led to it, e.g. `tune CPU time up (p99
        /// 2100 us > 1000 us)`.
        detail: String,
    },
    /// A latency overlay's best-effort units moved with the slack of its
    /// SLO (Heracles; `atoll_core::slo::lcbe`), or got their configured
    /// settings back.
    Slo {
        /// The latency overlay.
        overlay: String,
        /// The slack `(SLO - measured) / SLO` that caused the move (`None`
        /// when none did: the units start at the floor, or go back to their
        /// configured settings).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        slack: Option<f64>,
        /// The measured latency at the SLO's percentile, µs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        measured_us: Option<u64>,
        /// The SLO, µs.
        slo_us: u64,
        /// The move in words, e.g. `best effort cut 8 -> 4/8: slack 0.05 <
        /// 0.1 (p99 950 us, SLO 1000 us)`.
        detail: String,
    },
    /// The kernel would not take the value.
    KernelRefused {
        /// The error.
        error: String,
    },
    /// Communication-aware scheduling (seed 003).
    Comm {
        /// What the figures showed.
        detail: String,
    },
    /// Reconfigurable applications (seed 002): the allocation policy's
    /// schedule, or an application registering, leaving or exiting.
    Apps {
        /// The change and its score, e.g. `app 7 (bodytrack): mode 0 → 1 on
        /// island b (0.5 → 1 CPUs, 0 B → 0 B): score 0.71 (...)`.
        detail: String,
    },
    /// The daemon keeping its own house: a unit created at run time that
    /// stayed empty is removed, a group someone changed behind atoll's back
    /// is put back, a process someone moved out of its unit is let go.
    Housekeeping {
        /// What was found, e.g. `unit x has had no process for 30 s`.
        detail: String,
    },
    /// The configuration was reloaded (`atoll reload`, SIGHUP).
    Reload {
        /// What changed, e.g. `unit api is no longer configured`.
        detail: String,
    },
    /// Several steps changed the same group within one epoch; it was
    /// written once, for all of these reasons.
    Combined {
        /// Each step's reason, in the order the steps ran.
        causes: Vec<Reason>,
    },
}

impl Action {
    /// The action's kind as its wire tag names it (`apply_group`,
    /// `move_process`, ...): a label for counting decisions.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::ApplyGroup { .. } => "apply_group",
            Self::RemoveGroup { .. } => "remove_group",
            Self::MoveProcess { .. } => "move_process",
            Self::RestoreProcess { .. } => "restore_process",
            Self::SetPolicy { .. } => "set_policy",
            Self::Fallback(_) => "fallback",
            Self::CreateUnit { .. } => "create_unit",
            Self::RemoveUnit { .. } => "remove_unit",
            Self::SetUnit { .. } => "set_unit",
            Self::SetOverlay { .. } => "set_overlay",
            Self::Boost { .. } => "boost",
            Self::SetNetwork { .. } => "set_network",
            Self::SetFrequency { .. } => "set_frequency",
        }
    }
}

impl Reason {
    /// The reason's kind as its wire tag names it (`config`, `rule`,
    /// `isolation`, ..., `combined`): a label for counting decisions.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Config => "config",
            Self::Rule { .. } => "rule",
            Self::HostAdoptAll => "host_adopt_all",
            Self::Api { .. } => "api",
            Self::Teardown => "teardown",
            Self::Recover { .. } => "recover",
            Self::RtBudget { .. } => "rt_budget",
            Self::Isolation { .. } => "isolation",
            Self::Coordination { .. } => "coordination",
            Self::Slo { .. } => "slo",
            Self::KernelRefused { .. } => "kernel_refused",
            Self::Comm { .. } => "comm",
            Self::Apps { .. } => "apps",
            Self::Housekeeping { .. } => "housekeeping",
            Self::Reload { .. } => "reload",
            Self::Combined { .. } => "combined",
        }
    }

    /// One reason for all of `causes` (duplicates dropped): the cause
    /// itself when there is one, [`Reason::Combined`] when there are more,
    /// `None` when there is none.
    pub fn combine(causes: impl IntoIterator<Item = Reason>) -> Option<Reason> {
        let mut out: Vec<Reason> = Vec::new();
        for c in causes {
            let parts = match c {
                Reason::Combined { causes } => causes,
                other => vec![other],
            };
            for p in parts {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        match out.len() {
            0 => None,
            1 => out.pop(),
            _ => Some(Reason::Combined { causes: out }),
        }
    }
}

/// One decision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Control-loop clock time.
    #[serde(with = "millis")]
    pub at: Duration,
    /// What.
    #[serde(flatten)]
    pub action: Action,
    /// Why.
    pub why: Reason,
}

impl Decision {
    /// The group or unit the decision is about, for filtering (`atoll why`).
    pub fn subject(&self) -> String {
        match &self.action {
            Action::ApplyGroup { path, .. } | Action::RemoveGroup { path } => path.to_string(),
            Action::MoveProcess { pid, .. }
            | Action::RestoreProcess { pid, .. }
            | Action::SetPolicy { pid, .. } => format!("pid {pid}"),
            Action::Fallback(f) => f.path.to_string(),
            Action::CreateUnit { unit, .. }
            | Action::RemoveUnit { unit }
            | Action::SetUnit { unit, .. }
            | Action::Boost { unit, .. } => unit.clone(),
            Action::SetOverlay { overlay, .. } => format!("overlay {overlay}"),
            Action::SetNetwork { island, .. } | Action::SetFrequency { island, .. } => {
                island.clone()
            }
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ApplyGroup { path, knobs, .. } if knobs.is_empty() => {
                write!(f, "set {path}: kernel defaults")?;
                write_layers(f, self)
            }
            Self::ApplyGroup { path, knobs, .. } => {
                write!(f, "set {path}: {}", knobs.join(" "))?;
                write_layers(f, self)
            }
            Self::RemoveGroup { path } => write!(f, "remove group {path}"),
            Self::MoveProcess { pid, comm, to } => write!(f, "move pid {pid} ({comm}) to {to}"),
            Self::RestoreProcess { pid, to } => write!(f, "return pid {pid} to {to}"),
            Self::SetPolicy {
                pid,
                policy,
                threads,
            } => {
                write!(f, "set {policy:?} on pid {pid} ({threads} threads)")
            }
            Self::Fallback(fb) => write!(
                f,
                "fallback on {} {}: wanted {}, in force {}",
                fb.path, fb.knob, fb.wanted, fb.got
            ),
            Self::CreateUnit { unit, island } => write!(f, "create unit {unit} in island {island}"),
            Self::RemoveUnit { unit } => write!(f, "remove unit {unit}"),
            Self::SetUnit { unit, change } => write!(f, "set unit {unit}: {change}"),
            Self::SetOverlay { overlay, change } => write!(f, "overlay {overlay} {change}"),
            Self::Boost {
                unit,
                how,
                start: true,
            } => write!(f, "boost unit {unit} ({how})"),
            Self::Boost { unit, how, .. } => write!(f, "end the boost of unit {unit} ({how})"),
            Self::SetNetwork {
                island,
                interface,
                change,
            } => write!(f, "network island {island} on {interface}: {change}"),
            Self::SetFrequency {
                island,
                cpus,
                change,
            } => write!(f, "frequency of island {island} (CPUs {cpus}): {change}"),
        }
    }
}

/// ` [plan + isolation]` after a group's knobs, when layers are known.
fn write_layers(f: &mut fmt::Formatter<'_>, a: &Action) -> fmt::Result {
    match a {
        Action::ApplyGroup { layers, .. } if !layers.is_empty() => {
            write!(f, " [{}]", layers.join(" + "))
        }
        _ => Ok(()),
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config => f.write_str("the platform description asks for it"),
            Self::Rule { unit, rule } => write!(f, "unit {unit}'s adoption rule {rule:?} matched"),
            Self::HostAdoptAll => {
                f.write_str("host.adopt_all moves unmanaged tasks to the host partition")
            }
            Self::Api { uid, request } => write!(f, "uid {uid} asked: {request}"),
            Self::Teardown => f.write_str("atoll is shutting down"),
            Self::Recover { detail } => write!(f, "recovered after restart: {detail}"),
            Self::RtBudget {
                unit,
                used_us,
                runtime_us,
                period_us,
                exhausted: true,
            } => write!(
                f,
                "unit {unit} used {used_us} us of its RT budget of {runtime_us} us per {period_us} us"
            ),
            Self::RtBudget {
                unit,
                runtime_us,
                period_us,
                ..
            } => write!(
                f,
                "a new RT period began for unit {unit} (budget {runtime_us} us per {period_us} us)"
            ),
            Self::Isolation { detail } => write!(f, "isolation: {detail}"),
            Self::Coordination { overlay, detail } => write!(f, "overlay {overlay}: {detail}"),
            Self::Slo {
                overlay, detail, ..
            } => write!(f, "overlay {overlay} (latency SLO): {detail}"),
            Self::KernelRefused { error } => write!(f, "the kernel refused: {error}"),
            Self::Comm { detail } => write!(f, "communication: {detail}"),
            Self::Apps { detail } => write!(f, "application policy: {detail}"),
            Self::Housekeeping { detail } => write!(f, "housekeeping: {detail}"),
            Self::Reload { detail } => write!(f, "the configuration was reloaded: {detail}"),
            Self::Combined { causes } => {
                for (i, c) in causes.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; and ")?;
                    }
                    c.fmt(f)?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, because {}", self.action, self.why)
    }
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_the_wire_tags() {
        let actions = [
            Action::MoveProcess {
                pid: 1,
                comm: "x".into(),
                to: GroupPath::from_relative("a/b"),
            },
            Action::RemoveGroup {
                path: GroupPath::from_relative("a"),
            },
            Action::RemoveUnit { unit: "b".into() },
            Action::SetUnit {
                unit: "b".into(),
                change: "cpus 1 -> 2".into(),
            },
            Action::SetOverlay {
                overlay: "o".into(),
                change: "removed".into(),
            },
        ];
        let reasons = [
            Reason::Config,
            Reason::HostAdoptAll,
            Reason::Isolation { detail: "d".into() },
            Reason::KernelRefused { error: "e".into() },
            Reason::Combined {
                causes: vec![Reason::Config, Reason::Teardown],
            },
        ];
        for action in &actions {
            for why in &reasons {
                let d = Decision {
                    at: Duration::ZERO,
                    action: action.clone(),
                    why: why.clone(),
                };
                let json = serde_json::to_value(&d).unwrap();
                assert_eq!(json["action"], d.action.kind(), "{json}");
                assert_eq!(json["why"]["reason"], d.why.kind(), "{json}");
            }
        }
    }

    #[test]
    fn decisions_read_as_sentences_and_roundtrip_as_json() {
        let d = Decision {
            at: Duration::from_millis(1500),
            action: Action::MoveProcess {
                pid: 42,
                comm: "nginx".into(),
                to: GroupPath::from_relative("web/api"),
            },
            why: Reason::Rule {
                unit: "api".into(),
                rule: AdoptRule::Comm("nginx".into()),
            },
        };
        assert_eq!(
            d.to_string(),
            "move pid 42 (nginx) to web/api, because unit api's adoption rule Comm(\"nginx\") matched"
        );
        assert_eq!(d.subject(), "pid 42");
        let json = serde_json::to_string(&d).unwrap();
        assert!(json.contains("\"at\":1500"), "{json}");
        assert!(json.contains("\"action\":\"move_process\""), "{json}");
        let back: Decision = serde_json::from_str(&json).unwrap();
        assert_eq!(back, d);
    }

    #[test]
    fn coordination_reasons_name_the_overlay() {
        let d = Decision {
            at: Duration::ZERO,
            action: Action::ApplyGroup {
                path: GroupPath::from_relative("web/api"),
                knobs: vec!["cpu.weight=125".into()],
                layers: vec![],
            },
            why: Reason::Coordination {
                overlay: "shop".into(),
                detail: "tune CPU time up (p99 2100 us > 1000 us)".into(),
            },
        };
        assert_eq!(
            d.to_string(),
            "set web/api: cpu.weight=125, because overlay shop: tune CPU time up (p99 2100 us > 1000 us)"
        );
        let json = serde_json::to_string(&d).unwrap();
        assert!(json.contains("\"reason\":\"coordination\""), "{json}");
        assert_eq!(serde_json::from_str::<Decision>(&json).unwrap(), d);
    }

    #[test]
    fn slo_reasons_carry_the_slack_that_caused_them() {
        let d = Decision {
            at: Duration::ZERO,
            action: Action::ApplyGroup {
                path: GroupPath::from_relative("web/batch"),
                knobs: vec!["cpu.weight=100".into()],
                layers: vec![],
            },
            why: Reason::Slo {
                overlay: "shop".into(),
                slack: Some(0.05),
                measured_us: Some(950),
                slo_us: 1000,
                detail: "best effort cut 8 -> 4/8: slack 0.05 < 0.1 (p99 950 us, SLO 1000 us)"
                    .into(),
            },
        };
        assert_eq!(
            d.to_string(),
            "set web/batch: cpu.weight=100, because overlay shop (latency SLO): best effort cut 8 -> 4/8: slack 0.05 < 0.1 (p99 950 us, SLO 1000 us)"
        );
        assert_eq!(d.why.kind(), "slo");
        let json = serde_json::to_string(&d).unwrap();
        assert!(json.contains("\"reason\":\"slo\""), "{json}");
        assert!(json.contains("\"slack\":0.05"), "{json}");
        assert_eq!(serde_json::from_str::<Decision>(&json).unwrap(), d);
    }

    #[test]
    fn combined_reasons_drop_duplicates_and_name_every_layer() {
        assert_eq!(Reason::combine([]), None);
        assert_eq!(Reason::combine([Reason::Config]), Some(Reason::Config));
        let iso = Reason::Isolation {
            detail: "lend CPUs 3 from a to b".into(),
        };
        let comm = Reason::Comm {
            detail: "intensity 4096 bytes".into(),
        };
        let both = Reason::combine([iso.clone(), comm.clone(), iso.clone()]).unwrap();
        assert_eq!(
            both,
            Reason::Combined {
                causes: vec![iso.clone(), comm.clone()]
            }
        );
        // Nested combinations flatten.
        assert_eq!(Reason::combine([both.clone(), comm]), Some(both.clone()));
        let d = Decision {
            at: Duration::ZERO,
            action: Action::ApplyGroup {
                path: GroupPath::from_relative("web/api"),
                knobs: vec!["cpuset.cpus=1-3".into()],
                layers: vec!["plan".into(), "isolation".into(), "comm".into()],
            },
            why: both,
        };
        assert_eq!(
            d.to_string(),
            "set web/api: cpuset.cpus=1-3 [plan + isolation + comm], because isolation: lend CPUs 3 from a to b; and communication: intensity 4096 bytes"
        );
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(serde_json::from_str::<Decision>(&json).unwrap(), d);
    }
}
