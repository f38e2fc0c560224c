//! atoll's network island actuator (issue 17).
//!
//! A network island manages three things on the interfaces it names, and
//! gives every one of them back exactly as it found it:
//!
//! 1. **Which CPUs do receive and transmit processing** ([`steer`]): the
//!    affinity of the NIC's queue IRQs (`/proc/irq/N/smp_affinity_list`)
//!    where the device has MSI vectors, RPS masks otherwise
//!    (`queues/rx-N/rps_cpus`), and XPS masks (`queues/tx-N/xps_cpus`).
//!    Plain files under injected sysfs and procfs roots, so that tests run
//!    on fake trees.
//! 2. **The traffic-control tree** ([`plan`], [`backend`]): an HTB root
//!    qdisc `1:` with one class per unit under `1:1`, each with its own
//!    leaf qdisc (fq_codel, or pfifo where the kernel has no fq_codel).
//!    Written through a [`NetBackend`]: [`TcBackend`] drives iproute2's
//!    `tc` (one `-batch` per change, state read back with `tc -j`),
//!    [`FakeNet`] keeps it in memory for tests.
//! 3. **Classification**: HTB puts a packet whose `skb->priority` is one
//!    of its class ids in that class before any filter runs, so a unit's
//!    traffic is classified by giving its sockets the class id as priority
//!    (cgroup v1 `net_prio.ifpriomap`, [`classify`]; on cgroup v2,
//!    nftables `meta priority set` on `socket cgroupv2` in a table of
//!    atoll's own, [`nft`]; or `SO_PRIORITY`); see `docs/netisland.md`.
//!
//! [`Interfaces`] takes an interface over (snapshot first), applies plans,
//! reads the classes' backlogs and restores. It refuses an interface whose
//! root qdisc someone else configured.

pub mod backend;
pub mod classify;
pub mod fake;
pub mod island;
pub mod mask;
pub mod nft;
pub mod plan;
pub mod steer;
pub mod tc;

use std::io;
use std::path::PathBuf;

pub use backend::{LeafStats, NetBackend, RootQdisc};
pub use fake::FakeNet;
pub use island::{Interfaces, Snapshot};
pub use nft::{FakeNft, NftClassifier, NftCommand, NftRule, NftRunner};
pub use plan::{LeafQdisc, PlanError, TcClass, TcPlan};
pub use steer::{SteerSnapshot, Steering};
pub use tc::TcBackend;

/// What went wrong managing an interface.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// `tc` could not be started.
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// The program.
        program: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A `tc` command failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line (and its batch, if any).
        command: String,
        /// The exit status.
        status: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// The output of `tc -j` was not what was expected.
    #[error("cannot read the output of `{command}`: {reason}")]
    Parse {
        /// The command.
        command: String,
        /// What was wrong.
        reason: String,
    },
    /// The interface's root qdisc was configured by someone else.
    #[error(
        "interface {iface} has a root qdisc atoll did not create ({kind} {handle}); \
         not touching it"
    )]
    ForeignQdisc {
        /// The interface.
        iface: String,
        /// The qdisc's kind.
        kind: String,
        /// Its handle.
        handle: String,
    },
    /// The interface is not taken over.
    #[error("interface {iface} is not managed by this network island")]
    NotManaged {
        /// The interface.
        iface: String,
    },
    /// The interface does not exist.
    #[error("no interface {iface}")]
    NoInterface {
        /// The interface.
        iface: String,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A plan is not valid.
    #[error("interface {iface}: {source}")]
    Plan {
        /// The interface.
        iface: String,
        /// What is wrong.
        source: PlanError,
    },
    /// A group path nft cannot be given.
    #[error("cannot classify the group {value} with nftables: {reason}")]
    BadNftName {
        /// The group directory.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// After a restore, the interface is not as it was found.
    #[error("interface {iface}: after restoring, the root qdisc is {now}, it was {before}")]
    NotRestored {
        /// The interface.
        iface: String,
        /// What was found at the snapshot.
        before: String,
        /// What is there now.
        now: String,
    },
}
