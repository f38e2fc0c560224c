//! Wire types of coordination: overlays, their messages and what the
//! daemon answers (inTune, seeds 000 and 001).
//!
//! A coordination message travels inside a [`crate::Request::Coordinate`]
//! as the core's [`Message`] (tagged by `msg`), and its answer comes back
//! as [`crate::Reply::Coordinated`] with the core's [`CoordReply`] (tagged
//! by `reply`: `ack` with the effects applied, or `nack` with the reason)
//! and the same in words.
//!
//! ```text
//! → {"v":1,"id":9,"op":"coordinate","message":{"msg":"tune","resource":"cpu_time",
//!    "dir":"up","overlay":"shop","unit":"api"}}
//! ← {"v":1,"id":9,"ok":{"kind":"coordinated","reply":{"reply":"ack","effects":[...]},
//!    "text":"set weight of web/api to 125: ..."}}
//! ```

pub use atoll_core::coord::{
    Direction, Effect, Message, NackReason, OverlaySpec, Property, Reply as CoordReply, Resource,
};
use serde::{Deserialize, Serialize};

/// One overlay as the daemon sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OverlayStatus {
    /// Its name.
    pub name: String,
    /// Arbitration priority (higher wins).
    pub priority: u8,
    /// Its units as `island/unit`.
    pub units: Vec<String>,
    /// The property it holds.
    pub property: Property,
    /// Where it came from: the platform description or the API.
    pub origin: OverlayOrigin,
    /// The last value of its property: reported by the application
    /// ([`crate::Request::Report`]) or observed by a monitor; `None` before
    /// the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// Whether the property held at the last value (`None`: no value yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holds: Option<bool>,
    /// CPUs it borrows now.
    #[serde(default)]
    pub loans: Vec<LoanStatus>,
    /// Successive shortage nacks per resource (escalation after 5).
    #[serde(default)]
    pub nacks: Vec<(Resource, u32)>,
    /// Messages acknowledged and refused so far.
    #[serde(default)]
    pub acked: u64,
    /// See `acked`.
    #[serde(default)]
    pub nacked: u64,
}

/// Where an overlay came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverlayOrigin {
    /// The platform description (`[overlay.NAME]`).
    Config,
    /// A `register` message through the API.
    Api,
}

/// One borrowed CPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoanStatus {
    /// The CPU.
    pub cpu: u32,
    /// The island it belongs to.
    pub owner: String,
    /// The island that lent it (the owner, or a borrower lending onward).
    pub lender: String,
    /// The island that has it now.
    pub borrower: String,
}

/// How the daemon follows the CPU pressure of the units that overlays
/// watch (`react_pressure`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PressureSource {
    /// `triggers`: a unit that is not tuned up waits on a PSI trigger on
    /// its group's `cpu.pressure` and is read only after it fires;
    /// `averages`: every watched unit's pressure is read every epoch.
    pub source: String,
    /// Why averages are read: for every unit (`source` is `averages`), or
    /// for some of them.
    #[serde(default)]
    pub reason: Option<String>,
    /// Units waiting on a trigger now.
    #[serde(default)]
    pub armed: u64,
    /// Watched units whose pressure is read every epoch now (tuned up,
    /// after their trigger fired, or without a trigger).
    #[serde(default)]
    pub read: u64,
    /// Triggers fired so far.
    #[serde(default)]
    pub fired: u64,
}
