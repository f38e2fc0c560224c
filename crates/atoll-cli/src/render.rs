//! Human-readable status.

use std::fmt::Write;

use atoll_core::backend::GroupStats;
use atoll_proto::StatusReport;

fn usage(s: &GroupStats) -> String {
    let mut parts = Vec::new();
    if let Some(u) = s.cpu_usage_us {
        parts.push(format!("cpu {:.1}s", u as f64 / 1e6));
    }
    if let Some(t) = s.nr_throttled.filter(|t| *t > 0) {
        parts.push(format!("throttled {t}x"));
    }
    if let Some(m) = s.memory_current {
        parts.push(format!("mem {:.1}MiB", m as f64 / (1 << 20) as f64));
    }
    if let Some(p) = &s.cpu_pressure {
        parts.push(format!("cpu psi {:.1}%", p.some.avg10));
    }
    parts.join(", ")
}

/// What atoll takes from tasks it does not manage: one line per setting,
/// or one line saying nothing is taken.
pub fn effects(o: &mut String, lines: &[String]) {
    if lines.is_empty() {
        let _ = writeln!(o, "effects    {}", atoll_core::effects::NO_EFFECTS);
    }
    for l in lines {
        let _ = writeln!(o, "effects    {l}");
    }
}

/// The status as a few aligned lines.
pub fn status(r: &StatusReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "atoll {} on {}{} (root {:?}), epoch {} ms, up {:.1}s, {} epochs",
        r.version,
        r.backend,
        r.service_manager
            .as_ref()
            .map(|m| format!(" via {m}"))
            .unwrap_or_default(),
        r.root,
        r.epoch_ms,
        r.uptime_ms as f64 / 1000.0,
        r.epochs
    );
    if let Some(info) = &r.root_info {
        let _ = writeln!(o, "root       {}", info.location);
        effects(&mut o, &info.effects);
    }
    for w in &r.warnings {
        let _ = writeln!(o, "warning    {w}");
    }
    if let Some(d) = &r.discovery {
        let _ = match &d.reason {
            Some(why) => writeln!(
                o,
                "processes  found by scanning /proc every epoch ({why}); {} scans",
                d.rescans
            ),
            None => writeln!(
                o,
                "processes  found by {} events ({} so far, {} full scans)",
                d.source, d.events, d.rescans
            ),
        };
    }
    if let Some(p) = r.pace.as_ref().filter(|p| p.max_epochs > 1) {
        let wakes: Vec<String> = p.wakes.iter().map(|(w, n)| format!("{w} {n}")).collect();
        let _ = writeln!(
            o,
            "loop       next epoch in {} ms (up to {} epochs while quiescent{}); wakes: {}",
            p.interval_ms,
            p.max_epochs,
            match (p.quiescent_since_ms, &p.held_by) {
                (Some(t), _) => format!(", quiescent since {:.1} s", t as f64 / 1000.0),
                (None, Some(who)) => format!(", {who} needs every epoch"),
                (None, None) => String::new(),
            },
            if wakes.is_empty() {
                "none".to_string()
            } else {
                wakes.join(", ")
            }
        );
    }
    if let Some(p) = r.pressure.as_ref().filter(|p| p.armed + p.read > 0) {
        let why = p
            .reason
            .as_ref()
            .map_or(String::new(), |r| format!(" ({r})"));
        let _ = writeln!(
            o,
            "pressure   {}: {} units wait on a trigger, {} read every epoch, {} triggers fired{why}",
            p.source, p.armed, p.read, p.fired
        );
    }
    if let Some(c) = &r.coord_restored {
        let _ = writeln!(o, "coord      {c}");
    }
    if let Some(e) = &r.energy {
        let _ = writeln!(o, "energy     {}", e.energy_text());
        let _ = writeln!(o, "cpufreq    {}", e.cpufreq_text());
        for f in &e.frequency {
            let _ = writeln!(o, "frequency  {f}");
        }
        if let Some(p) = &e.power_cap {
            let _ = writeln!(o, "power cap  {}", p.text());
        }
        if let Some(l) = &e.learned {
            let _ = writeln!(o, "watts      {}", l.per_cpu_text());
            for m in l.mode_lines() {
                let _ = writeln!(o, "watts      {m}");
            }
        }
        if let Some(err) = &e.error {
            let _ = writeln!(o, "warning    energy: {err}");
        }
    }
    for n in &r.network {
        let held = if n.managed { "managed" } else { "not managed" };
        let _ = writeln!(
            o,
            "network    {} on {} ({held}), {} bit/s; classification {}",
            n.island, n.interface, n.rate_bps, n.classification
        );
        for c in &n.classes {
            let figures = c.stats.map_or_else(
                || "no figures yet".to_string(),
                |s| {
                    format!(
                        "{} bytes, {} packets, {} drops, backlog {} bytes / {} packets",
                        s.bytes, s.packets, s.drops, s.backlog_bytes, s.backlog_packets
                    )
                },
            );
            let _ = writeln!(
                o,
                "  class {} ({}) share {} rate {} ceil {} bit/s: {figures}",
                c.class,
                c.unit.as_deref().unwrap_or("default"),
                c.share,
                c.rate_bps,
                c.ceil_bps
            );
        }
    }
    if r.host.cpus.is_empty() {
        let _ = writeln!(o, "host       (no host partition)");
    } else {
        let _ = writeln!(
            o,
            "host       cpus {:<10} mems {:<4} {} processes{}  {}",
            r.host.cpus.to_string(),
            r.host.mems.to_string(),
            r.host.processes,
            if r.host.adopt_all {
                " (adopts all)"
            } else {
                ""
            },
            usage(&r.host.stats)
        );
    }
    for i in &r.islands {
        let _ = writeln!(
            o,
            "island {:<8} cpus {:<10} mems {:<4} {}  {}",
            i.name,
            i.cpus.to_string(),
            i.mems.to_string(),
            i.policy,
            usage(&i.stats)
        );
        for u in r.units.iter().filter(|u| u.island == i.name) {
            let mut ent = atoll_config::entitlement_parts(&u.entitlement);
            if ent.is_empty() {
                ent.push("default entitlement".into());
            }
            let pids: Vec<String> = u.pids.iter().map(|p| p.to_string()).collect();
            let _ = writeln!(
                o,
                "  unit {:<10} {:<8} [{}] pids [{}]  {}",
                u.name,
                format!("{:?}", u.origin).to_lowercase(),
                ent.join(", "),
                pids.join(" "),
                usage(&u.stats)
            );
            if let Some(s) = &u.service {
                let _ = match (&s.problem, s.bound) {
                    (None, _) => writeln!(o, "       through {}", s.external),
                    (Some(p), true) => writeln!(
                        o,
                        "       through {}, which REFUSED the last change (none of it made): {p}",
                        s.external
                    ),
                    (Some(p), false) => writeln!(o, "       NOT through {}: {p}", s.external),
                };
            }
            if let Some(c) = &u.comm {
                let _ = writeln!(
                    o,
                    "       comm: {}reservation {:.2} cpus, {} boosts ({} recipient, {} sender, {} netpath) for {:.2}s, {} over reservation, {} B queued",
                    if c.boosted { "BOOSTED, " } else { "" },
                    c.reservation_cpus,
                    c.boosts,
                    c.recipient,
                    c.sender,
                    c.netpath,
                    c.boosted_us as f64 / 1e6,
                    c.over_reservation,
                    c.recv_queued
                );
            }
        }
    }
    if let Some(c) = &r.comm {
        let _ = writeln!(
            o,
            "comm       {} by {}, sockets from {}, {} epochs, last {} us, {} sample errors",
            if c.features.is_empty() {
                "no feature on".to_string()
            } else {
                c.features.join("+")
            },
            c.mechanism,
            c.source,
            c.epochs,
            c.last_cost_us,
            c.sample_errors
        );
    }
    for s in r.slo.iter().filter(|s| s.source != "report") {
        let _ = writeln!(
            o,
            "slo        overlay {}: {} thread {:.3}s CPU, {:.2}% of a CPU, {} samples, {} timed out{}{}",
            s.overlay,
            s.source,
            s.probe_cpu_us as f64 / 1e6,
            s.source_cpu_share() * 100.0,
            s.samples_total,
            s.timeouts,
            if s.stale {
                ", stale: latency unknown"
            } else {
                ""
            },
            s.error
                .as_ref()
                .map_or(String::new(), |e| format!(" (last try: {e})"))
        );
    }
    if let Some(a) = &r.accounts {
        let _ = writeln!(
            o,
            "kernel     cpu {:.1}s, mem {:.1}MiB   shared  mem {:.1}MiB",
            a.kernel_cpu_us as f64 / 1e6,
            a.kernel_memory_bytes as f64 / (1 << 20) as f64,
            a.shared_memory_bytes as f64 / (1 << 20) as f64
        );
    }
    for f in &r.fallbacks {
        let _ = writeln!(
            o,
            "fallback {} {}: wanted {}, in force {} ({})",
            f.path, f.knob, f.wanted, f.got, f.reason
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use atoll_proto::slo::SloStatus;

    #[test]
    fn a_measured_slo_says_its_cost_and_when_its_window_is_stale() {
        let mut r = crate::top::fixtures::snapshot(1000, 0).status;
        let mut s = SloStatus {
            overlay: "shop".into(),
            source: "probe".into(),
            percentile: 99.0,
            slo_us: 1000,
            measured_us: Some(500.0),
            slack: Some(0.5),
            samples: 10,
            samples_total: 40,
            timeouts: 1,
            probe_cpu_us: 25_000,
            source_running_us: 5_000_000,
            error: None,
            stale: false,
            sample_age_ms: Some(10),
            stale_after_ms: Some(3300),
            best_effort: vec![],
            be_level: None,
            be_steps: 8,
        };
        r.slo = vec![s.clone()];
        let fresh = super::status(&r);
        assert!(
            fresh.contains(
                "slo        overlay shop: probe thread 0.025s CPU, 0.50% of a CPU, 40 samples, 1 timed out\n"
            ),
            "{fresh}"
        );
        s.stale = true;
        r.slo = vec![s];
        let stale = super::status(&r);
        assert!(
            stale.contains("1 timed out, stale: latency unknown\n"),
            "{stale}"
        );
    }

    #[test]
    fn the_status_shows_learned_watts_only_once_learned() {
        use atoll_proto::energy::{EnergyStatus, LearnedWatts, ModeWatts, WattsFrom};
        let mut r = crate::top::fixtures::snapshot(1000, 0).status;
        r.energy = Some(EnergyStatus::default());
        assert!(!super::status(&r).contains("watts "), "nothing learned");
        r.energy = Some(EnergyStatus {
            learned: Some(LearnedWatts {
                watts_per_cpu: Some(20.0),
                modes: vec![
                    ModeWatts {
                        recipe: "bt".into(),
                        mode: 0,
                        watts: 10.0,
                        from: WattsFrom::Learned,
                    },
                    ModeWatts {
                        recipe: "bt".into(),
                        mode: 2,
                        watts: 7.5,
                        from: WattsFrom::Recipe,
                    },
                ],
            }),
            ..EnergyStatus::default()
        });
        let text = super::status(&r);
        assert!(
            text.contains(
                "watts      20.0 W per busy CPU\nwatts      recipe bt mode 0: 10.0 W (learned)\nwatts      recipe bt mode 2: 7.5 W (recipe)\n"
            ),
            "{text}"
        );
    }
}
