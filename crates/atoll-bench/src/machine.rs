//! A description of the machine a benchmark ran on, for its report.

use std::path::Path;

use atoll_core::CpuSet;
use serde::{Deserialize, Serialize};

use crate::cgroups::choose_here;
use crate::error::BenchError;

/// What the numbers of a run depend on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Online CPUs (kernel list).
    pub online: String,
    /// How many.
    pub cpus: usize,
    /// Physical cores.
    pub cores: usize,
    /// Whether cores have SMT siblings.
    pub smt: bool,
    /// CPU model (`/proc/cpuinfo`).
    pub model: String,
    /// Kernel release.
    pub kernel: String,
    /// Memory, MiB.
    pub memory_mib: u64,
    /// The cgroup backend atoll uses here.
    pub backend: String,
    /// `/proc/loadavg` when the run started (other load on the machine).
    pub loadavg: String,
}

fn read(p: &str) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// For a benchmark that starts the daemon on this machine's real cgroups:
/// refuses without root, and describes the machine with the backend atoll
/// would use here, with its online CPUs parsed.
pub fn for_real_cgroups() -> Result<(Machine, CpuSet), BenchError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(BenchError::Unusable(
            "needs root: it starts the daemon on real cgroups".into(),
        ));
    }
    let backend = choose_here()?.kind().as_str().to_string();
    let machine = describe(&backend);
    let online = CpuSet::parse(&machine.online)
        .map_err(|e| BenchError::Unusable(format!("online CPUs {:?}: {e}", machine.online)))?;
    Ok((machine, online))
}

/// Describes this machine; `backend` is the cgroup backend in use.
pub fn describe(backend: &str) -> Machine {
    let topo = atoll_topology::read_topology(Path::new(atoll_topology::DEFAULT_SYSFS_ROOT)).ok();
    let cpuinfo = read("/proc/cpuinfo");
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default();
    let memory_mib = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib / 1024);
    Machine {
        online: topo
            .as_ref()
            .map(|t| t.online().to_string())
            .unwrap_or_default(),
        cpus: topo.as_ref().map_or(0, |t| t.cpus.len()),
        cores: topo.as_ref().map_or(0, |t| t.cores.len()),
        smt: topo.as_ref().is_some_and(|t| t.has_smt()),
        model,
        kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
        memory_mib,
        backend: backend.to_string(),
        loadavg: read("/proc/loadavg")
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    }
}

impl std::fmt::Display for Machine {
    /// `2 CPUs (0-1; 1 core, SMT), AMD EPYC, kernel 6.18, 23 GiB, cgroup1,
    /// load 0.50 0.40 0.30`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} CPUs ({}; {} core{}{}), {}, kernel {}, {} MiB, {}, load {}",
            self.cpus,
            self.online,
            self.cores,
            if self.cores == 1 { "" } else { "s" },
            if self.smt { ", SMT" } else { "" },
            if self.model.is_empty() {
                "unknown CPU"
            } else {
                &self.model
            },
            self.kernel,
            self.memory_mib,
            self.backend,
            self.loadavg
        )
    }
}
