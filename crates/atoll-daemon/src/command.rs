//! What the API and metrics threads send to the control loop.

use std::sync::mpsc::Sender;

use atoll_proto::{Request, ResponseEnvelope, StatusReport};

/// Who is calling, from `SO_PEERCRED`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caller {
    /// Effective uid of the peer.
    pub uid: u32,
    /// Effective gid of the peer.
    pub gid: u32,
    /// Pid of the peer.
    pub pid: i32,
}

impl Caller {
    /// Whether the caller is root.
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }
}

/// A typed command for the control loop.
// `Api` (a request inline, ~220 bytes) is nearly every command sent; boxing
// it would allocate once per request to save room in the rare others.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Command {
    /// An API request; the loop sends exactly one reply.
    Api {
        /// Who asked.
        caller: Caller,
        /// The request id, echoed in the reply.
        id: u64,
        /// What was asked.
        request: Request,
        /// Where the reply goes.
        reply: Sender<ResponseEnvelope>,
    },
    /// A status snapshot for the metrics endpoint.
    Snapshot {
        /// Where the snapshot goes.
        reply: Sender<Box<StatusReport>>,
    },
    /// A reader wants a new status published (see [`crate::publish`]).
    Refresh,
    /// An input the loop waits on is ready (see [`crate::pace`]).
    Wake(crate::pace::Wake),
    /// Tear down and exit (from a signal).
    Shutdown,
    /// Read the configuration again and apply it (SIGHUP).
    Reload,
}
