//! What a platform description takes from the rest of the machine.
//!
//! atoll's default is to take nothing: islands share their CPUs with every
//! task atoll does not manage, and no process is moved unless a unit's
//! adopt rules name it. Three settings change that, and `atoll
//! check-config` and `atoll status` say so in one line each
//! ([`outside_effects`]):
//!
//! - `[island.X] exclusive = true`: the island becomes a partition (v2
//!   `cpuset.cpus.partition = root`, v1 `cpu_exclusive`), so its CPUs leave
//!   every cgroup outside it;
//! - `[host] adopt_all = true`: every task in no unit is moved into the host
//!   partition and confined to its CPUs;
//! - `atoll daemon --v1-exclusive` on cgroup v1, with an exclusive island:
//!   atoll's root becomes `cpu_exclusive`, so no cpuset outside atoll may
//!   use any of atoll's CPUs.

use crate::spec::PlatformSpec;
use crate::CpuSet;

/// One line per setting of `spec` that takes CPUs (or processes) away from
/// tasks atoll does not manage; empty when nothing does. `v1_exclusive_root`
/// is whether the backend may make atoll's root `cpu_exclusive` (cgroup v1
/// with `--v1-exclusive`).
pub fn outside_effects(spec: &PlatformSpec, v1_exclusive_root: bool) -> Vec<String> {
    let mut out = Vec::new();
    for i in spec.islands.iter().filter(|i| i.exclusive) {
        out.push(format!(
            "island {}: exclusive: CPUs {} are taken from every task atoll does not manage",
            i.name, i.cpus
        ));
    }
    if spec.host.adopt_all {
        out.push(format!(
            "host: adopt_all: every task in no unit is moved into the host partition and may run only on CPUs {}",
            spec.host.cpus
        ));
    }
    if v1_exclusive_root && spec.islands.iter().any(|i| i.exclusive) {
        let all = spec
            .islands
            .iter()
            .fold(spec.host.cpus.clone(), |acc: CpuSet, i| acc.union(&i.cpus));
        out.push(format!(
            "--v1-exclusive: atoll's root is cpu_exclusive: CPUs {all} are taken from every cpuset outside atoll"
        ));
    }
    out
}

/// The line to print when [`outside_effects`] is empty.
pub const NO_EFFECTS: &str = "nothing is taken from tasks atoll does not manage: islands share their CPUs, and only processes that units' adopt rules name are moved";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::tests::spec16;

    #[test]
    fn shared_islands_without_adopt_all_take_nothing() {
        let s = spec16();
        assert!(outside_effects(&s, false).is_empty());
        // --v1-exclusive alone changes nothing while no island is exclusive.
        assert!(outside_effects(&s, true).is_empty());
    }

    #[test]
    fn each_setting_that_takes_cpus_gets_a_line() {
        let mut s = spec16();
        s.islands[0].exclusive = true;
        s.host.adopt_all = true;
        assert_eq!(
            outside_effects(&s, true),
            [
                "island web: exclusive: CPUs 1-3,9-11 are taken from every task atoll does not manage",
                "host: adopt_all: every task in no unit is moved into the host partition and may run only on CPUs 0,8",
                "--v1-exclusive: atoll's root is cpu_exclusive: CPUs 0-15 are taken from every cpuset outside atoll",
            ]
        );
        assert_eq!(outside_effects(&s, false).len(), 2);
    }
}
