//! Units that come and go while the coordinator runs (units added and
//! removed at run time): a coordinator learns them as it learned the
//! configured ones, and forgets them only when no overlay holds them.

use super::super::types::UnitSetup;
use super::super::CoordError;
use super::{check_knobs, Coordinator, UnitState};
use crate::coord::UnitKnobs;
use crate::spec::SchedPolicy;
use crate::Name;

impl Coordinator {
    /// Learns a unit. On a realtime island its RT runtime is cut to what
    /// the island's budget has left.
    pub(crate) fn add_unit(&mut self, mut setup: UnitSetup) -> Result<(), CoordError> {
        if self.has_unit(&setup.name) {
            return Err(CoordError::DuplicateUnit { unit: setup.name });
        }
        if let SchedPolicy::Realtime(rt) = &self.policy {
            let used: u64 = self.units.iter().map(|u| u.base.rt_runtime_us).sum();
            setup.knobs.rt_runtime_us = setup
                .knobs
                .rt_runtime_us
                .min(rt.runtime_us.saturating_sub(used));
        }
        check_knobs(&setup.name, &setup.knobs, &self.policy)?;
        self.units.push(UnitState::new(setup.name, setup.knobs));
        Ok(())
    }

    /// Forgets a unit; `false` when it does not have it.
    pub(crate) fn remove_unit(&mut self, unit: &Name) -> bool {
        let before = self.units.len();
        self.units.retain(|u| &u.name != unit);
        before != self.units.len()
    }

    /// New configured knobs for a unit (its entitlement changed): the
    /// steady knobs start again from them.
    pub(crate) fn set_base(&mut self, unit: &Name, mut knobs: UnitKnobs) -> Result<(), CoordError> {
        let Some(i) = self.units.iter().position(|u| &u.name == unit) else {
            return Err(CoordError::UnknownUnit { unit: unit.clone() });
        };
        knobs.rt_runtime_us = self.units[i].base.rt_runtime_us;
        check_knobs(unit, &knobs, &self.policy)?;
        let u = &mut self.units[i];
        u.base = knobs;
        u.knobs = knobs;
        Ok(())
    }

    /// The overlay holding `unit`, if it has the unit.
    pub(crate) fn unit_overlay(&self, unit: &Name) -> Option<Option<&Name>> {
        self.units
            .iter()
            .find(|u| &u.name == unit)
            .map(|u| u.overlay.as_ref().map(|(o, _)| o))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::coord::{
        CoordConfig, CoordError, Message, NackReason, OverlaySpec, PlatformManager, Property,
        UnitSetup,
    };
    use crate::spec::tests::{n, spec16, topo16};
    use crate::spec::{Entitlement, UnitSpec};

    fn register(m: &mut PlatformManager, unit: &str) -> crate::coord::Reply {
        let overlay = OverlaySpec {
            name: n("o"),
            priority: 1,
            units: vec![(n("web"), n(unit))],
            property: Property::ThroughputFloor { per_s: 10.0 },
        };
        m.handle(Duration::ZERO, &n("web"), &Message::Register { overlay })
    }

    #[test]
    fn a_unit_learned_at_run_time_joins_overlays_and_leaves_when_free() {
        let spec = spec16();
        let topo = topo16();
        let mut m =
            PlatformManager::from_spec(&spec, &topo, Default::default(), CoordConfig::default())
                .unwrap();
        let reply = register(&mut m, "b");
        assert!(
            matches!(reply.reason(), Some(NackReason::UnknownUnit { .. })),
            "{reply}"
        );
        let b = UnitSpec {
            name: n("b"),
            island: n("web"),
            entitlement: Entitlement {
                cpus: Some(1.0),
                cpu_cap: Some(2.0),
                ..Default::default()
            },
            adopt: vec![],
            rt_priority: None,
        };
        let island = spec.island(&n("web")).unwrap();
        let knobs = PlatformManager::unit_knobs(island, &b, 2);
        assert_eq!((knobs.weight, knobs.cap), (100, Some(2.0)));
        let setup = |k| UnitSetup {
            name: n("b"),
            knobs: k,
        };
        m.add_unit(&n("web"), setup(knobs)).unwrap();
        assert!(matches!(
            m.add_unit(&n("rt"), setup(knobs)),
            Err(CoordError::DuplicateUnit { .. })
        ));
        assert!(register(&mut m, "b").is_ack());
        assert!(matches!(
            m.remove_unit(&n("b")),
            Err(CoordError::UnitInOverlay { .. })
        ));
        let mut more = knobs;
        more.weight = 300;
        m.set_unit_base(&n("b"), more).unwrap();
        assert_eq!(
            m.island(&n("web")).unwrap().knobs(&n("b")).unwrap().weight,
            300
        );
        let bye = Message::Deregister { overlay: n("o") };
        assert!(m.handle(Duration::ZERO, &n("web"), &bye).is_ack());
        assert!(m.remove_unit(&n("b")).unwrap());
        assert!(!m.remove_unit(&n("b")).unwrap(), "forgotten already");
        assert!(m.island(&n("web")).unwrap().knobs(&n("b")).is_none());
    }
}
