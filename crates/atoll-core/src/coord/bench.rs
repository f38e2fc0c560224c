//! A ready-made platform for timing [`PlatformManager::handle`], the way the
//! paper times inTune's messages (null, tune, trigger, borrow across 2 and 6
//! islands).
//!
//! ```
//! use atoll_core::coord::bench::{BenchKind, BenchRig};
//!
//! let mut rig = BenchRig::new(6, 2).unwrap();
//! for _ in 0..3 {
//!     // time this call:
//!     let reply = rig.step(BenchKind::Borrow);
//!     assert!(reply.is_ack(), "{reply}");
//!     // not this one:
//!     rig.reset(BenchKind::Borrow);
//! }
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::effect::Change;
use super::message::{Message, Reply};
use super::platform::PlatformManager;
use super::types::{
    ArbitrationPolicy, Direction, IslandSetup, OverlaySpec, Property, Resource, UnitKnobs,
    UnitSetup,
};
use super::{CoordConfig, CoordError};
use crate::spec::SchedPolicy;
use crate::{CpuSet, Name};

/// Which message a benchmark step sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BenchKind {
    /// [`Message::Null`].
    Null,
    /// A tune of CPU time up.
    Tune,
    /// A trigger.
    Trigger,
    /// A `borrow_any` of one CPU (the overlay spans every island, so every
    /// other island is queried).
    Borrow,
}

/// A platform of fair islands with one overlay over all of them, and the
/// messages to time. Its clock is its own: each [`reset`](Self::reset)
/// moves it past boosts, cool-downs, damping and backoff, so every step
/// takes the same path.
#[derive(Clone, Debug)]
pub struct BenchRig {
    platform: PlatformManager,
    now: Duration,
    from: Name,
    gap: Duration,
    null: Message,
    tune_up: Message,
    tune_down: Message,
    trigger: Message,
    borrow: Message,
    /// Where the last borrow came from.
    lender: Option<Name>,
}

fn name(s: &str) -> Result<Name, CoordError> {
    Name::new(s).map_err(|_| CoordError::BadConfig {
        field: "bench name",
        value: 0.0,
        range: "a valid name",
    })
}

impl BenchRig {
    /// `islands` fair islands (2..=64) of `cpus_per_island` CPUs (2..=64)
    /// each, two units per island, every island idle, all units in overlay
    /// `bench`; messages come from the first island.
    pub fn new(islands: usize, cpus_per_island: u32) -> Result<Self, CoordError> {
        if !(2..=64).contains(&islands) {
            return Err(CoordError::BadConfig {
                field: "bench islands",
                value: islands as f64,
                range: "2..=64",
            });
        }
        if !(2..=64).contains(&cpus_per_island) {
            return Err(CoordError::BadConfig {
                field: "bench cpus_per_island",
                value: f64::from(cpus_per_island),
                range: "2..=64",
            });
        }
        let config = CoordConfig::default();
        let mut setups = Vec::with_capacity(islands);
        let mut units = Vec::new();
        for i in 0..islands {
            let island = name(&format!("i{i}"))?;
            let first = u32::try_from(i).expect("i < islands <= 64") * cpus_per_island;
            let mut us = Vec::new();
            for s in ["a", "b"] {
                let unit = name(&format!("u{i}{s}"))?;
                units.push((island.clone(), unit.clone()));
                us.push(UnitSetup {
                    name: unit,
                    knobs: UnitKnobs::default(),
                });
            }
            setups.push(IslandSetup {
                name: island,
                cpus: CpuSet::range(first, first + cpus_per_island - 1),
                policy: SchedPolicy::Fair,
                arbitration: ArbitrationPolicy::RoundRobin,
                memory_bytes: 0,
                units: us,
            });
        }
        let mut platform = PlatformManager::new(config, setups)?;
        for c in platform.islands.iter_mut() {
            c.observe(0.0)?;
        }
        let overlay = name("bench")?;
        let from = platform.islands[0].name().clone();
        let reply = platform.handle(
            Duration::ZERO,
            &from,
            &Message::Register {
                overlay: OverlaySpec {
                    name: overlay.clone(),
                    priority: 1,
                    units,
                    property: Property::ThroughputFloor { per_s: 1.0 },
                },
            },
        );
        debug_assert!(reply.is_ack(), "{reply}");
        let unit = name("u0a")?;
        let tune = |dir| Message::Tune {
            resource: Resource::CpuTime,
            dir,
            overlay: overlay.clone(),
            unit: unit.clone(),
        };
        let gap = [
            config.damping,
            config.boost_len + config.trigger_cooldown,
            config.backoff_max,
        ]
        .into_iter()
        .max()
        .unwrap_or_default()
            + Duration::from_millis(1);
        Ok(Self {
            now: Duration::from_secs(1),
            from,
            gap,
            null: Message::Null,
            tune_up: tune(Direction::Up),
            tune_down: tune(Direction::Down),
            trigger: Message::Trigger {
                resource: Resource::CpuTime,
                overlay: overlay.clone(),
                unit: unit.clone(),
            },
            borrow: Message::BorrowAny {
                resource: Resource::Cores,
                overlay,
                amount: 1,
            },
            lender: None,
            platform,
        })
    }

    /// The platform, to inspect.
    pub fn platform(&self) -> &PlatformManager {
        &self.platform
    }

    /// Sends one message of `kind` through [`PlatformManager::handle`]: the
    /// call to time. Each kind is acked at steady state as long as every
    /// step is followed by [`reset`](Self::reset).
    pub fn step(&mut self, kind: BenchKind) -> Reply {
        let msg = match kind {
            BenchKind::Null => &self.null,
            BenchKind::Tune => &self.tune_up,
            BenchKind::Trigger => &self.trigger,
            BenchKind::Borrow => &self.borrow,
        };
        let reply = self.platform.handle(self.now, &self.from, msg);
        if kind == BenchKind::Borrow {
            self.lender = reply.effects().iter().find_map(|e| match &e.change {
                Change::MoveCores { from_island, .. } => Some(from_island.clone()),
                _ => None,
            });
        }
        reply
    }

    /// Undoes the last step of `kind` (tune down, boost expiry, release) and
    /// moves the rig's clock on: not to be timed.
    pub fn reset(&mut self, kind: BenchKind) {
        match kind {
            BenchKind::Null => {}
            BenchKind::Tune => {
                self.platform.handle(self.now, &self.from, &self.tune_down);
            }
            BenchKind::Trigger => {}
            BenchKind::Borrow => {
                if let (Some(island), Message::BorrowAny { overlay, .. }) =
                    (self.lender.take(), &self.borrow)
                {
                    let release = Message::Release {
                        resource: Resource::Cores,
                        overlay: overlay.clone(),
                        island,
                    };
                    self.platform.handle(self.now, &self.from, &release);
                }
            }
        }
        self.now += self.gap;
        self.platform.tick(self.now);
    }
}
