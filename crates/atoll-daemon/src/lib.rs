//! atoll's daemon: the control loop and everything that talks to it.
//!
//! The API server ([`api`]) and the metrics endpoint ([`metrics`]) only turn
//! what they receive into a typed [`command::Command`] and send it to the
//! control loop over a channel; they never touch the backend. The
//! [`controller::Controller`] is the loop: it owns the components (one per
//! concern: [`adopt`], [`rt_guard`], [`coord`], [`isolation`], [`comm`],
//! [`apps`]), the [`registry`], and the [`compose`]r that alone computes
//! and writes every group's settings. [`run`] wires it all together for
//! `atoll daemon`.

pub mod adopt;
pub mod api;
pub mod apps;
pub mod clock;
pub mod comm;
pub mod command;
pub mod compose;
pub mod controller;
pub mod coord;
pub mod cpu_wait;
pub mod decisions;
pub mod frequency;
pub mod isolation;
pub mod load;
pub mod metrics;
pub mod netisland;
pub mod notify;
pub mod pace;
pub mod persist;
pub mod placement;
pub mod power;
pub mod powercap;
pub mod publish;
pub mod recover;
pub mod registry;
pub mod rt_guard;
pub mod run;
pub mod saver;
pub mod services;
pub mod setup;
pub mod slo;
pub mod state;
pub mod telemetry;
pub mod units;
pub mod wake;
