//! Energy and frequency: the pure parts.
//!
//! Reading RAPL counters and cpufreq files is the job of the `atoll-power`
//! crate (injected sysfs root); here are the values it hands over and the
//! arithmetic on them: the energy between two counter samples (with the
//! counter's wrap-around, [`energy_delta_uj`]), the power it means
//! ([`Meter`]), and a per-island frequency policy ([`FreqPolicy`]) checked
//! against what a CPU offers ([`FreqOffer`]), and the platform power cap
//! ([`PowerCap`]) that holds a budget through frequency limits and CPU
//! caps, sharing the cut by each island's draw and its overlays' priority
//! ([`split`]), and the watts of each working mode learned from RAPL
//! ([`learn::WattsLearner`]).

pub mod cap;
mod freq;
pub mod learn;
mod meter;
pub mod split;

pub use cap::{IslandKnobs, Knob, PowerCap, PowerCapError, PowerMove};
pub use freq::{FreqError, FreqOffer, FreqOriginal, FreqPolicy};
pub use meter::{energy_delta_uj, Meter, Sample};
