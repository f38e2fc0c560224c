//! The simulated machine's power: idle and busy watts per CPU, with
//! frequency scaling. Used by the lab to turn a run's time and CPU time
//! into joules; the engine itself runs every CPU at `f_max`.
//!
//! # The model
//!
//! A linear utilization model (power grows linearly with the CPUs busy,
//! from the idle power), per CPU:
//!
//! ```text
//! P(cpu) = idle + busy · u · s(f)        u: busy fraction, 0..=1
//! s(f)   = (f / f_max) · (V(f) / V_max)²   (dynamic power α·C·V²·f)
//! ```
//!
//! With `voltage_follows_frequency = false` the voltage is fixed and
//! `s(f) = f / f_max` (the linear-in-frequency approximation); with it,
//! `V` is proportional to `f` over the operating range and `s(f) =
//! (f / f_max)³` (the cubic dependence of power on frequency under DVFS,
//! as in the Cambridge System-on-Chip lecture notes,
//! <https://www.cl.cam.ac.uk/teaching/1011/SysOnChip/slides/sp7tte/zhpcf408a016.html>).
//! Static (leakage) power and the platform (disks, fans, memory) are in
//! `idle`, which does not scale.
//!
//! Over a run of `T` seconds on `N` CPUs whose busy CPU time is `B`
//! CPU-seconds, all at frequency `f`:
//!
//! ```text
//! E = N · idle · T + busy · s(f) · B
//! ```
//!
//! # The parameters: [`PowerModel::SEED002`]
//!
//! From the seed paper's own measurements (BarbequeRTRM, seed 002, §5.2):
//! the whole machine (four quad-core AMD Opteron 8378, 16 CPUs) drew
//! 287.233 W with 1.007 CPUs busy (Table V, unmanaged) and 392.000 W with
//! 11.940 busy (Table VI, unmanaged), measured over IPMI with the
//! `ondemand` governor (about 2.3-2.4 GHz on average). The line through
//! both: 9.58 W per busy CPU, and 277.58 W with none busy, 17.35 W per
//! CPU. The managed columns give a close slope (286.533 W at 1.015 busy,
//! 363.767 W at 9.202: 9.43 W). The paper's footnote 4: the figure is the
//! whole system's, mostly disks and fans; here that share is spread over
//! the CPUs, so a bigger simulated machine brings its platform with it.

use serde::{Deserialize, Serialize};

/// Power per CPU and its frequency scaling.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PowerModel {
    /// Watts a CPU draws when idle (its share of the platform included).
    pub idle_watts: f64,
    /// Watts a CPU adds when busy at `f_max_ghz`.
    pub busy_watts: f64,
    /// The highest frequency, GHz.
    pub f_max_ghz: f64,
    /// Whether the voltage scales with the frequency (cubic) or stays
    /// fixed (linear).
    pub voltage_follows_frequency: bool,
}

impl Default for PowerModel {
    fn default() -> Self {
        Self::SEED002
    }
}

impl PowerModel {
    /// The seed paper's machine (see the module docs for the derivation).
    pub const SEED002: Self = Self {
        idle_watts: 277.583 / 16.0,
        busy_watts: 9.5826,
        f_max_ghz: 2.4,
        voltage_follows_frequency: false,
    };

    /// `s(f)`: the busy power at `f_ghz` relative to `f_max` (clamped to
    /// `0..=1`).
    pub fn scale(&self, f_ghz: f64) -> f64 {
        if self.f_max_ghz <= 0.0 {
            return 1.0;
        }
        let r = (f_ghz / self.f_max_ghz).clamp(0.0, 1.0);
        if self.voltage_follows_frequency {
            r * r * r
        } else {
            r
        }
    }

    /// Machine power with `cpus` CPUs of which `busy` (CPUs' worth) are
    /// busy, at `f_ghz`, W.
    pub fn watts(&self, cpus: f64, busy: f64, f_ghz: f64) -> f64 {
        cpus * self.idle_watts + busy.clamp(0.0, cpus) * self.busy_watts * self.scale(f_ghz)
    }

    /// Energy of a run of `seconds` on `cpus` CPUs that used
    /// `busy_cpu_s` CPU-seconds, at `f_ghz`, J.
    pub fn energy_j(&self, cpus: f64, seconds: f64, busy_cpu_s: f64, f_ghz: f64) -> f64 {
        cpus * self.idle_watts * seconds + self.busy_watts * self.scale(f_ghz) * busy_cpu_s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed002_reproduces_the_papers_two_points() {
        let m = PowerModel::SEED002;
        let f = m.f_max_ghz;
        assert!((m.watts(16.0, 1.007, f) - 287.233).abs() < 0.05);
        assert!((m.watts(16.0, 11.940, f) - 392.000).abs() < 0.05);
    }

    #[test]
    fn frequency_scales_the_busy_part_only() {
        let lin = PowerModel::SEED002;
        let cub = PowerModel {
            voltage_follows_frequency: true,
            ..lin
        };
        assert_eq!(lin.scale(2.4), 1.0);
        assert!((lin.scale(1.2) - 0.5).abs() < 1e-12);
        assert!((cub.scale(1.2) - 0.125).abs() < 1e-12);
        assert_eq!(lin.scale(9.9), 1.0);
        let idle = lin.watts(4.0, 0.0, 2.4);
        assert_eq!(lin.watts(4.0, 0.0, 1.2), idle);
        assert!(lin.watts(4.0, 4.0, 1.2) < lin.watts(4.0, 4.0, 2.4));
        assert!(cub.watts(4.0, 4.0, 1.2) < lin.watts(4.0, 4.0, 1.2));
        // Energy: idle power over the time plus busy power over CPU time.
        let e = lin.energy_j(12.0, 10.0, 30.0, 2.4);
        assert!((e - (12.0 * lin.idle_watts * 10.0 + lin.busy_watts * 30.0)).abs() < 1e-9);
    }

    #[test]
    fn config_is_strict() {
        let m: PowerModel = toml::from_str("busy_watts = 5.0").unwrap();
        assert_eq!(m.busy_watts, 5.0);
        assert_eq!(m.idle_watts, PowerModel::SEED002.idle_watts);
        assert!(toml::from_str::<PowerModel>("busy_wats = 5.0").is_err());
    }
}
