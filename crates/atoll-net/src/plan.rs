//! The traffic-control tree of a network island's interface: what to write,
//! independent of how ([`crate::NetBackend`]).
//!
//! ```text
//! 1:  htb (default 1:<default>)
//! └── 1:1   rate = link rate
//!     ├── 1:<minor>  rate, ceil, prio   ── <minor>: fq_codel
//!     └── ...
//! ```
//! Minors are hexadecimal in `tc`'s notation; minor 1 is the parent class,
//! so units' minors start at 2.

/// The leaf qdisc of every class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeafQdisc {
    /// fq_codel: per-flow fairness and short queues (the default).
    FqCodel,
    /// pfifo: for kernels built without fq_codel.
    Pfifo,
}

impl LeafQdisc {
    /// The `tc` kind.
    pub fn kind(self) -> &'static str {
        match self {
            Self::FqCodel => "fq_codel",
            Self::Pfifo => "pfifo",
        }
    }
}

impl From<atoll_core::netisland::Leaf> for LeafQdisc {
    fn from(leaf: atoll_core::netisland::Leaf) -> Self {
        match leaf {
            atoll_core::netisland::Leaf::FqCodel => Self::FqCodel,
            atoll_core::netisland::Leaf::Pfifo => Self::Pfifo,
        }
    }
}

/// One unit's class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcClass {
    /// The class minor (class id `1:<minor>`), at least 2.
    pub minor: u16,
    /// The guaranteed rate, bits per second.
    pub rate_bps: u64,
    /// The most it may borrow up to, bits per second.
    pub ceil_bps: u64,
    /// The priority for spare bandwidth, 0 (first) to 7.
    pub prio: u8,
}

impl TcClass {
    /// The class id as `skb->priority` carries it (`0x0001_<minor>`).
    pub fn classid(&self) -> u32 {
        classid(self.minor)
    }
}

/// The class id `1:<minor>` as a 32-bit value (major in the high half).
pub fn classid(minor: u16) -> u32 {
    0x0001_0000 | u32::from(minor)
}

/// The bytes a class may send per round when it borrows: a tenth of a
/// second's worth of its rate (HTB's `r2q` of 10), kept between one
/// full-size frame and 200 000 bytes, the bounds HTB warns outside of.
fn quantum(rate_bps: u64) -> u64 {
    (rate_bps / 8 / 10).clamp(1514, 200_000)
}

/// The whole tree of an interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcPlan {
    /// The interface's rate, bits per second (the parent class).
    pub rate_bps: u64,
    /// The class unclassified traffic goes to.
    pub default_minor: u16,
    /// The leaf qdisc.
    pub leaf: LeafQdisc,
    /// The classes.
    pub classes: Vec<TcClass>,
}

/// What is wrong with a plan.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The interface rate is zero.
    #[error("the rate is zero")]
    ZeroRate,
    /// A class has minor 0 or 1.
    #[error("class minor {minor:x} is reserved (0 and 1)")]
    ReservedMinor {
        /// The minor.
        minor: u16,
    },
    /// Two classes have the same minor.
    #[error("class minor {minor:x} appears twice")]
    DuplicateMinor {
        /// The minor.
        minor: u16,
    },
    /// The default class is not in the plan.
    #[error("the default class {minor:x} is not one of the classes")]
    NoDefault {
        /// The minor.
        minor: u16,
    },
    /// A class's rate is zero, above its ceiling, or its ceiling above the
    /// interface rate.
    #[error("class {minor:x}: rate {rate_bps} and ceil {ceil_bps} must satisfy 0 < rate <= ceil <= {link_bps}")]
    BadRate {
        /// The minor.
        minor: u16,
        /// Its rate.
        rate_bps: u64,
        /// Its ceiling.
        ceil_bps: u64,
        /// The interface rate.
        link_bps: u64,
    },
    /// A priority above 7.
    #[error("class {minor:x}: prio {prio} is above 7")]
    BadPrio {
        /// The minor.
        minor: u16,
        /// The priority.
        prio: u8,
    },
}

impl TcPlan {
    /// The plan of a network island's class rates
    /// ([`atoll_core::netisland::NetCoordinator::rates`]): the default
    /// class is the one without a unit.
    pub fn from_rates(
        rate_bps: u64,
        leaf: LeafQdisc,
        rates: &[atoll_core::netisland::ClassRate],
    ) -> Self {
        Self {
            rate_bps,
            default_minor: rates
                .iter()
                .find(|r| r.unit.is_none())
                .map_or(atoll_core::netisland::DEFAULT_MINOR, |r| r.minor),
            leaf,
            classes: rates
                .iter()
                .map(|r| TcClass {
                    minor: r.minor,
                    rate_bps: r.rate_bps,
                    ceil_bps: r.ceil_bps,
                    prio: r.prio,
                })
                .collect(),
        }
    }

    /// Checks the plan.
    pub fn validate(&self) -> Result<(), PlanError> {
        if self.rate_bps == 0 {
            return Err(PlanError::ZeroRate);
        }
        let mut seen = std::collections::BTreeSet::new();
        for c in &self.classes {
            if c.minor < 2 {
                return Err(PlanError::ReservedMinor { minor: c.minor });
            }
            if !seen.insert(c.minor) {
                return Err(PlanError::DuplicateMinor { minor: c.minor });
            }
            if c.rate_bps == 0 || c.rate_bps > c.ceil_bps || c.ceil_bps > self.rate_bps {
                return Err(PlanError::BadRate {
                    minor: c.minor,
                    rate_bps: c.rate_bps,
                    ceil_bps: c.ceil_bps,
                    link_bps: self.rate_bps,
                });
            }
            if c.prio > 7 {
                return Err(PlanError::BadPrio {
                    minor: c.minor,
                    prio: c.prio,
                });
            }
        }
        if !seen.contains(&self.default_minor) {
            return Err(PlanError::NoDefault {
                minor: self.default_minor,
            });
        }
        Ok(())
    }

    /// Whether going from `self` to `next` needs the tree built again:
    /// HTB cannot change its default class in place, nor can a leaf change
    /// its kind.
    pub fn needs_rebuild(&self, next: &TcPlan) -> bool {
        self.default_minor != next.default_minor || self.leaf != next.leaf
    }

    /// The `tc -batch` lines that bring `iface` to this plan, deleting the
    /// classes of `removed` first. `with_root` writes the root qdisc (for a
    /// new tree: HTB has no change operation, so an existing root is
    /// left). Classes and leaves are `replace`d, so it is idempotent.
    pub fn batch(&self, iface: &str, removed: &[u16], with_root: bool) -> String {
        let mut out = String::new();
        for minor in removed {
            out.push_str(&format!("class del dev {iface} classid 1:{minor:x}\n"));
        }
        if with_root {
            out.push_str(&format!(
                "qdisc replace dev {iface} root handle 1: htb default {:x}\n",
                self.default_minor
            ));
        }
        out.push_str(&format!(
            "class replace dev {iface} parent 1: classid 1:1 htb rate {r}bit ceil {r}bit quantum {}\n",
            quantum(self.rate_bps),
            r = self.rate_bps
        ));
        for c in &self.classes {
            out.push_str(&format!(
                "class replace dev {iface} parent 1:1 classid 1:{m:x} htb rate {}bit ceil {}bit prio {} quantum {}\n",
                c.rate_bps,
                c.ceil_bps,
                c.prio,
                quantum(c.rate_bps),
                m = c.minor
            ));
            out.push_str(&format!(
                "qdisc replace dev {iface} parent 1:{m:x} handle {m:x}: {}\n",
                self.leaf.kind(),
                m = c.minor
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> TcPlan {
        TcPlan {
            rate_bps: 100_000_000,
            default_minor: 2,
            leaf: LeafQdisc::FqCodel,
            classes: vec![
                TcClass {
                    minor: 2,
                    rate_bps: 10_000_000,
                    ceil_bps: 100_000_000,
                    prio: 7,
                },
                TcClass {
                    minor: 0x10,
                    rate_bps: 90_000_000,
                    ceil_bps: 100_000_000,
                    prio: 0,
                },
            ],
        }
    }

    #[test]
    fn a_valid_plan_renders_one_class_and_leaf_per_unit() {
        let p = plan();
        p.validate().unwrap();
        let b = p.batch("v0", &[3], true);
        assert!(!p.batch("v0", &[], false).contains("root"));
        let lines: Vec<&str> = b.lines().collect();
        assert_eq!(lines[0], "class del dev v0 classid 1:3");
        assert_eq!(
            lines[1],
            "qdisc replace dev v0 root handle 1: htb default 2"
        );
        assert!(lines[5]
            .starts_with("class replace dev v0 parent 1:1 classid 1:10 htb rate 90000000bit"));
        assert_eq!(
            lines[6],
            "qdisc replace dev v0 parent 1:10 handle 10: fq_codel"
        );
        assert_eq!(lines.len(), 7);
        assert_eq!(p.classes[1].classid(), 0x0001_0010);
    }

    #[test]
    fn invalid_plans_are_refused_with_the_value() {
        let mut p = plan();
        p.classes[0].minor = 1;
        assert_eq!(p.validate(), Err(PlanError::ReservedMinor { minor: 1 }));
        let mut p = plan();
        p.classes[1].minor = 2;
        assert_eq!(p.validate(), Err(PlanError::DuplicateMinor { minor: 2 }));
        let mut p = plan();
        p.default_minor = 9;
        assert_eq!(p.validate(), Err(PlanError::NoDefault { minor: 9 }));
        let mut p = plan();
        p.classes[0].ceil_bps = 200_000_000;
        assert!(matches!(
            p.validate(),
            Err(PlanError::BadRate { minor: 2, .. })
        ));
        let mut p = plan();
        p.classes[0].prio = 8;
        assert_eq!(p.validate(), Err(PlanError::BadPrio { minor: 2, prio: 8 }));
        let mut p = plan();
        p.rate_bps = 0;
        assert_eq!(p.validate(), Err(PlanError::ZeroRate));
    }
}
