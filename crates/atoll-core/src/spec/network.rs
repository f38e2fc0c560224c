//! `[network.NAME]`: network islands (issue 17; `crate::netisland`).

use super::{check_set, PlatformSpec, SpecError};
use crate::netisland::NetIslandError;
use crate::topology::Topology;

/// Each network island's own checks (at the key of the value), plus: names
/// distinct from every island's and each other's, one island per
/// interface, units declared, steering CPUs online.
pub(super) fn validate_network(spec: &PlatformSpec, topo: &Topology, errs: &mut Vec<SpecError>) {
    let online = topo.online();
    for (i, net) in spec.network.iter().enumerate() {
        let key = format!("network.{}", net.name);
        if spec.islands.iter().any(|is| is.name == net.name)
            || spec.network[..i].iter().any(|n| n.name == net.name)
        {
            errs.push(SpecError::new(
                key.clone(),
                format!("the name {} is taken by another island", net.name),
            ));
        }
        if net.interface.is_empty()
            || net.interface.len() > 15
            || net.interface.contains(['/', ' ', '\0'])
        {
            errs.push(SpecError::new(
                format!("{key}.interface"),
                format!("{:?} is not an interface name", net.interface),
            ));
        }
        if let Some(other) = spec.network[..i]
            .iter()
            .find(|n| n.interface == net.interface)
        {
            errs.push(SpecError::new(
                format!("{key}.interface"),
                format!(
                    "interface {} is network island {}'s already",
                    net.interface, other.name
                ),
            ));
        }
        if let Err(e) = net.validate() {
            errs.push(SpecError::new(error_key(&key, &e), e.to_string()));
        }
        for u in &net.units {
            if !spec.units.iter().any(|d| d.name == u.name) {
                errs.push(SpecError::new(
                    format!("{key}.units.{}", u.name),
                    format!("unit {} is not declared ([unit.{}])", u.name, u.name),
                ));
            }
        }
        for (field, set) in [("rx_cpus", &net.rx_cpus), ("tx_cpus", &net.tx_cpus)] {
            if let Some(set) = set {
                check_set(errs, &format!("{key}.{field}"), set, &online, "online CPUs");
            }
        }
        if net.triggers.cooldown.is_zero() {
            errs.push(SpecError::new(
                format!("{key}.trigger_cooldown_ms"),
                "must be above 0",
            ));
        }
    }
}

/// The key of the value a setup error is about.
fn error_key(key: &str, e: &NetIslandError) -> String {
    match e {
        NetIslandError::ZeroRate { .. } => format!("{key}.rate_mbit"),
        NetIslandError::BadShare { what, .. } => match what.strip_prefix("unit ") {
            Some(unit) => format!("{key}.units.{unit}.share"),
            None => format!("{key}.default_share"),
        },
        NetIslandError::BadCeil { unit, .. } => format!("{key}.units.{unit}.ceil_mbit"),
        NetIslandError::BadPrio { unit, .. } => format!("{key}.units.{unit}.prio"),
        NetIslandError::DuplicateUnit { unit, .. } | NetIslandError::NoClassLeft { unit, .. } => {
            format!("{key}.units.{unit}")
        }
    }
}
