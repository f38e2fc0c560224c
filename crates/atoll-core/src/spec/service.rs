//! Units whose processes a service manager owns (systemd units named by
//! `adopt = [{ systemd_unit = "nginx.service" }]`).
//!
//! Such a unit is enforced by setting the systemd unit's properties, not by
//! moving its processes: its cgroup stays where systemd put it. So the
//! unit names exactly one systemd unit (several services share an
//! entitlement through a slice), has no process rules beside it, and lives
//! in an island that is not a partition (a partition's CPUs are outside
//! every cgroup but atoll's).

use super::{AdoptRule, PlatformSpec, SpecError};

/// The systemd unit types that have a cgroup.
pub const CGROUP_UNIT_TYPES: [&str; 6] = ["service", "scope", "slice", "socket", "mount", "swap"];

/// Whether `name` is a systemd unit name atoll can manage: at most 255
/// bytes of ASCII letters, digits and `:-_.\@`, ending in a unit type that
/// has a cgroup. The error says what is wrong.
pub fn check_unit_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 255 {
        return Err(format!("{name:?}: a unit name has 1 to 255 bytes"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || ":-_.\\@".contains(*c)))
    {
        return Err(format!("{name:?}: {c:?} cannot appear in a unit name"));
    }
    let Some((prefix, kind)) = name.rsplit_once('.') else {
        return Err(format!(
            "{name:?} has no type: name the unit in full, e.g. \"{name}.service\""
        ));
    };
    if prefix.is_empty() {
        return Err(format!("{name:?}: the name before .{kind} is empty"));
    }
    if !CGROUP_UNIT_TYPES.contains(&kind) {
        return Err(format!(
            "{name:?}: .{kind} units have no cgroup; atoll manages {}",
            CGROUP_UNIT_TYPES.map(|t| format!(".{t}")).join(", ")
        ));
    }
    if name == "-.slice" || name == "init.scope" {
        return Err(format!(
            "{name:?} is the root of the machine or init; atoll never takes it"
        ));
    }
    Ok(())
}

/// Checks the units that name a systemd unit (see the module docs).
pub(super) fn validate_services(spec: &PlatformSpec, errs: &mut Vec<SpecError>) {
    let mut owner: Vec<(&str, &str)> = Vec::new();
    for unit in &spec.units {
        let key = format!("unit.{}.adopt", unit.name);
        let named: Vec<(usize, &str)> = unit
            .adopt
            .iter()
            .enumerate()
            .filter_map(|(i, r)| match r {
                AdoptRule::SystemdUnit(n) => Some((i, n.as_str())),
                _ => None,
            })
            .collect();
        let Some(&(first, name)) = named.first() else {
            continue;
        };
        for &(i, n) in &named {
            if let Err(problem) = check_unit_name(n) {
                errs.push(SpecError::new(format!("{key}[{i}].systemd_unit"), problem));
            }
        }
        if named.len() > 1 {
            errs.push(SpecError::new(
                format!("{key}[{}].systemd_unit", named[1].0),
                format!(
                    "a unit names one systemd unit ({name:?} already); put several services in a slice and name the slice"
                ),
            ));
        }
        if unit.adopt.len() > named.len() {
            errs.push(SpecError::new(
                key.clone(),
                format!(
                    "{name:?} is placed by systemd: no other adopt rule can join it (make another unit for those processes)"
                ),
            ));
        }
        if let Some(island) = spec.island(&unit.island) {
            if island.exclusive {
                errs.push(SpecError::new(
                    format!("unit.{}.island", unit.name),
                    format!(
                        "island {} is exclusive (a partition): {name:?} stays in systemd's cgroup, outside it; use an island that is not exclusive",
                        island.name
                    ),
                ));
            }
        }
        if let Some((other, _)) = owner.iter().find(|(_, n)| *n == name) {
            errs.push(SpecError::new(
                format!("{key}[{first}].systemd_unit"),
                format!("{name:?} is already managed by unit {other}"),
            ));
        }
        owner.push((unit.name.as_str(), name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_names() {
        for ok in [
            "nginx.service",
            "web.slice",
            "getty@tty1.service",
            "a-b\\x2d.scope",
        ] {
            assert_eq!(check_unit_name(ok), Ok(()), "{ok}");
        }
        for (bad, says) in [
            ("nginx", "has no type"),
            ("nginx.timer", "no cgroup"),
            ("-.slice", "root of the machine"),
            ("init.scope", "root of the machine"),
            ("ng inx.service", "cannot appear"),
            (".service", "empty"),
            ("", "1 to 255"),
        ] {
            let e = check_unit_name(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert!(check_unit_name(&format!("{}.service", "a".repeat(250))).is_err());
    }
}
