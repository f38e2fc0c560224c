//! atoll's daemon: the control loop and everything that talks to it.
//!
//! The API server ([`api`]) and the metrics endpoint ([`metrics`]) only turn
//! what they receive into a typed [`command::Command`] and send it to the
//! control loop over a channel; they never touch the backend.

pub mod api;
pub mod command;
pub mod metrics;
pub mod state;
