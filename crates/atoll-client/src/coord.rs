//! Coordination calls (inTune): overlays, the coordination messages and
//! application reports (`docs/api.md`, section *Coordination*).
//!
//! ```no_run
//! use atoll_client::coord::{Direction, Resource};
//!
//! let mut c = atoll_client::Client::connect_default()?;
//! let answer = c.tune("shop", "api", Resource::CpuTime, Direction::Up)?;
//! if answer.is_ack() {
//!     println!("done: {answer}");
//! } else {
//!     println!("refused: {answer}");
//! }
//! # Ok::<(), atoll_client::ClientError>(())
//! ```
//!
//! A refusal (*nack*) is an answer like an acknowledgement: the call returns
//! `Ok` with a [`Coordinated`] whose [`Coordinated::reason`] says why. Only a
//! message the daemon could not take at all (bad names, no permission, no
//! daemon) is an error.
//!
//! The convenience calls validate names before sending (an invalid one is an
//! error with [`ClientError::is_invalid_argument`]) and leave the sending
//! island to the daemon, except where they take it as `into`: the island
//! that receives borrowed CPUs, or gives them back.

use std::fmt;

use atoll_core::Name;
pub use atoll_proto::coord::{
    CoordReply, Direction, Effect, LoanStatus, Message, NackReason, OverlayOrigin, OverlaySpec,
    OverlayStatus, Property, Resource,
};
use atoll_proto::{Reply, Request};

use crate::{Client, ClientError, Repr};

/// The daemon's answer to a coordination message: an ack with the effects it
/// applied, or a nack with the reason. A nack is an answer, not an error.
#[derive(Clone, Debug, PartialEq)]
pub struct Coordinated {
    /// The coordinator's answer.
    pub reply: CoordReply,
    /// The same in words, as the daemon wrote it.
    pub text: String,
}

impl Coordinated {
    /// Whether the message was acknowledged.
    pub fn is_ack(&self) -> bool {
        self.reply.is_ack()
    }

    /// What an ack changed (empty for a nack).
    pub fn effects(&self) -> &[Effect] {
        self.reply.effects()
    }

    /// Why a nack refused (`None` for an ack).
    pub fn reason(&self) -> Option<&NackReason> {
        self.reply.reason()
    }
}

impl fmt::Display for Coordinated {
    /// The daemon's words, or the reply's own when the daemon sent none.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.text.trim().is_empty() {
            write!(f, "{}", self.reply)
        } else {
            f.write_str(&self.text)
        }
    }
}

/// The daemon's answer to a report.
#[derive(Clone, Debug, PartialEq)]
pub struct Reported {
    /// The overlay.
    pub overlay: String,
    /// Whether its property holds at the reported value.
    pub holds: bool,
    /// What the overlay's policy did about it, in words, if anything.
    pub action: Option<String>,
}

impl Client {
    fn name(&self, what: &'static str, s: &str) -> Result<Name, ClientError> {
        Name::new(s).map_err(|e| self.err(Repr::Argument(format!("{what}: {e}"))))
    }

    /// Every overlay, in name order: units, property, last value, loans,
    /// successive nacks.
    pub fn overlays(&mut self) -> Result<Vec<OverlayStatus>, ClientError> {
        match self.request(Request::Overlays {})? {
            Reply::Overlays { overlays } => Ok(overlays),
            other => Err(self.unexpected("overlays", &other)),
        }
    }

    /// One latency overlay as the daemon measures it: the percentile over
    /// its window, the SLO and the slack, the source and its CPU cost, its
    /// best-effort units' level.
    pub fn overlay_show(
        &mut self,
        overlay: &str,
    ) -> Result<atoll_proto::slo::SloStatus, ClientError> {
        match self.request(Request::OverlayShow {
            overlay: overlay.to_string(),
        })? {
            Reply::OverlayShown(s) => Ok(*s),
            other => Err(self.unexpected("overlay_shown", &other)),
        }
    }

    /// Sends one coordination message on behalf of island `from` (`None`:
    /// the daemon picks the island of the message's unit, or of the
    /// overlay's first unit).
    pub fn coordinate(
        &mut self,
        from: Option<&str>,
        message: Message,
    ) -> Result<Coordinated, ClientError> {
        let request = Request::Coordinate {
            from: from.map(str::to_string),
            message,
        };
        match self.request(request)? {
            Reply::Coordinated { reply, text } => Ok(Coordinated { reply, text }),
            other => Err(self.unexpected("coordinated", &other)),
        }
    }

    /// One tune step of `unit`'s share of `resource` (CPU time or memory),
    /// for `overlay`.
    pub fn tune(
        &mut self,
        overlay: &str,
        unit: &str,
        resource: Resource,
        dir: Direction,
    ) -> Result<Coordinated, ClientError> {
        let message = Message::Tune {
            resource,
            dir,
            overlay: self.name("overlay", overlay)?,
            unit: self.name("unit", unit)?,
        };
        self.coordinate(None, message)
    }

    /// Boosts `unit`'s CPU time at once, for a bounded time.
    pub fn trigger(&mut self, overlay: &str, unit: &str) -> Result<Coordinated, ClientError> {
        let message = Message::Trigger {
            resource: Resource::CpuTime,
            overlay: self.name("overlay", overlay)?,
            unit: self.name("unit", unit)?,
        };
        self.coordinate(None, message)
    }

    /// Boosts the CPU time of every unit of `overlay` at once, for the same
    /// bounded time (coscheduling): all of them, or none.
    pub fn trigger_overlay(&mut self, overlay: &str) -> Result<Coordinated, ClientError> {
        let message = Message::TriggerOverlay {
            resource: Resource::CpuTime,
            overlay: self.name("overlay", overlay)?,
        };
        self.coordinate(None, message)
    }

    /// Borrows up to `amount` CPUs for `overlay` from island `from_island`
    /// (`None`: from whichever island can lend) into island `into` (`None`:
    /// the overlay's first unit's island).
    pub fn borrow(
        &mut self,
        overlay: &str,
        amount: u32,
        from_island: Option<&str>,
        into: Option<&str>,
    ) -> Result<Coordinated, ClientError> {
        let overlay = self.name("overlay", overlay)?;
        let message = match from_island {
            Some(island) => Message::BorrowPreferred {
                resource: Resource::Cores,
                overlay,
                island: self.name("lender island", island)?,
                amount,
            },
            None => Message::BorrowAny {
                resource: Resource::Cores,
                overlay,
                amount,
            },
        };
        if let Some(i) = into {
            self.name("borrowing island", i)?;
        }
        self.coordinate(into, message)
    }

    /// Gives back to `lender_island` the CPUs island `into` (`None`: the
    /// overlay's first unit's island) borrowed from it for `overlay`.
    pub fn release(
        &mut self,
        overlay: &str,
        lender_island: &str,
        into: Option<&str>,
    ) -> Result<Coordinated, ClientError> {
        let message = Message::Release {
            resource: Resource::Cores,
            overlay: self.name("overlay", overlay)?,
            island: self.name("lender island", lender_island)?,
        };
        if let Some(i) = into {
            self.name("borrowing island", i)?;
        }
        self.coordinate(into, message)
    }

    /// Brings an overlay in.
    pub fn register(&mut self, spec: OverlaySpec) -> Result<Coordinated, ClientError> {
        self.coordinate(None, Message::Register { overlay: spec })
    }

    /// Takes an overlay out: its loans and boosts end, its units' knobs go
    /// back to their configured values.
    pub fn deregister(&mut self, overlay: &str) -> Result<Coordinated, ClientError> {
        let message = Message::Deregister {
            overlay: self.name("overlay", overlay)?,
        };
        self.coordinate(None, message)
    }

    /// Reports the current value of `overlay`'s property (its latency
    /// percentile in µs, or its throughput per second); the overlay's policy
    /// may act on it.
    pub fn report(&mut self, overlay: &str, value: f64) -> Result<Reported, ClientError> {
        self.name("overlay", overlay)?;
        if !value.is_finite() {
            return Err(self.err(Repr::Argument(format!(
                "value: {value} is not a finite number"
            ))));
        }
        let request = Request::Report {
            overlay: overlay.to_string(),
            value,
        };
        match self.request(request)? {
            Reply::Reported {
                overlay,
                holds,
                action,
            } => Ok(Reported {
                overlay,
                holds,
                action,
            }),
            other => Err(self.unexpected("reported", &other)),
        }
    }
}
