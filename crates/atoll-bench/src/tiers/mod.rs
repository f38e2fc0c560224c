//! The three-tier auction scenario of `atoll bench slo --scenario tiers`
//! (issue 16's RUBiS-like evidence, after seeds 000 inTune and 001
//! PutBid).
//!
//! - [`mix`]: the request types (`browse` light, `putbid` heavy), the mix
//!   offered, the generated schema and data and each request's SQL.
//! - [`mysql`]: a minimal MySQL/MariaDB client (handshake, `COM_QUERY`,
//!   text result sets) for the application tier.
//! - [`config`]: the layout of front/app/db/hogs and the daemon's config of
//!   each configuration (the overlay reads nginx's access log).
//! - [`stats`]: average, p99 and standard deviation per class, throughput,
//!   ratios to `linux`.
//! - [`run`]: the run (MariaDB, the `auction-app` worker, nginx, the hogs
//!   and `http-load --heavy`), [`table`]: its text.

pub mod config;
pub mod mix;
pub mod mysql;
pub mod run;
pub mod stats;
mod table;

pub use run::{run, TiersReport, TiersSettings};
pub use table::render_table;
