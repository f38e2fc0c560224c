//! Weighted shares → HTB rates and ceilings.

use crate::Name;

/// The class minor of the default class (traffic of no unit).
pub const DEFAULT_MINOR: u16 = 2;

/// The first minor given to a unit's class.
pub const FIRST_UNIT_MINOR: u16 = 0x10;

/// One class's rates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassRate {
    /// The unit; `None` for the default class.
    pub unit: Option<Name>,
    /// The class minor (class id `1:<minor>`).
    pub minor: u16,
    /// Guaranteed, bits per second.
    pub rate_bps: u64,
    /// Most it may use, bits per second.
    pub ceil_bps: u64,
    /// Priority for spare bandwidth.
    pub prio: u8,
}

/// One class's inputs for [`class_rates`].
#[derive(Clone, Copy, Debug)]
pub struct ClassInput<'a> {
    /// The unit; `None` for the default class.
    pub unit: Option<&'a Name>,
    /// The class minor.
    pub minor: u16,
    /// Its share.
    pub share: u32,
    /// Its ceiling, bits per second; `None`: the link rate.
    pub ceil_bps: Option<u64>,
    /// Its priority.
    pub prio: u8,
}

/// The classes' rates for a link of `rate_bps`: each class is guaranteed
/// `rate_bps × share / Σ shares` (rounded down, at least 1 bit/s), never
/// above its ceiling, which is the link rate unless given. The sum of the
/// rates never exceeds the link rate (rounding down), unless there are more
/// classes than bits per second.
pub fn class_rates(rate_bps: u64, inputs: &[ClassInput<'_>]) -> Vec<ClassRate> {
    let total: u128 = inputs
        .iter()
        .map(|c| u128::from(c.share))
        .sum::<u128>()
        .max(1);
    inputs
        .iter()
        .map(|c| {
            let fair = u128::from(rate_bps) * u128::from(c.share) / total;
            let fair = u64::try_from(fair).unwrap_or(rate_bps).max(1);
            let ceil_bps = c.ceil_bps.unwrap_or(rate_bps).min(rate_bps).max(1);
            ClassRate {
                unit: c.unit.cloned(),
                minor: c.minor,
                rate_bps: fair.min(ceil_bps),
                ceil_bps,
                prio: c.prio,
            }
        })
        .collect()
}
