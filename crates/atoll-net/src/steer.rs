//! Which CPUs do an interface's receive and transmit processing.
//!
//! - A device with MSI vectors (`/sys/class/net/IF/device/msi_irqs/N`) has
//!   real queue interrupts: receive processing follows their affinity,
//!   `/proc/irq/N/smp_affinity_list`.
//! - Otherwise (virtual devices, single-queue NICs) receive processing is
//!   steered with RPS: `/sys/class/net/IF/queues/rx-N/rps_cpus`.
//! - Transmit queues are picked with XPS: `queues/tx-N/xps_cpus`.
//!
//! Every file is read before the first write ([`SteerSnapshot`]) and its
//! exact text written back at restore, so the kernel sees its own format.

use std::fs;
use std::path::{Path, PathBuf};

use atoll_core::IdSet;

use crate::mask::format_mask;
use crate::NetError;

/// The steering files of interfaces, under injected roots.
#[derive(Clone, Debug)]
pub struct Steering {
    sysfs: PathBuf,
    procfs: PathBuf,
}

/// What the steering files held before the first change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SteerSnapshot {
    /// Each file and its text, in the order read.
    pub files: Vec<(PathBuf, String)>,
}

/// The files of one interface.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SteerFiles {
    /// `smp_affinity_list` of the device's queue IRQs (empty for a device
    /// without MSI vectors).
    pub irqs: Vec<PathBuf>,
    /// `rps_cpus` of each receive queue.
    pub rps: Vec<PathBuf>,
    /// `xps_cpus` of each transmit queue.
    pub xps: Vec<PathBuf>,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> NetError + '_ {
    move |source| NetError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The names of the entries of `dir` that start with `prefix` and are
/// followed by a number, sorted by that number.
fn numbered(dir: &Path, prefix: &str) -> Result<Vec<(u32, String)>, NetError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(dir)(e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let name = entry.map_err(io_err(dir))?.file_name();
        let name = name.to_string_lossy();
        if let Some(n) = name.strip_prefix(prefix).and_then(|n| n.parse().ok()) {
            out.push((n, name.into_owned()));
        }
    }
    out.sort();
    Ok(out)
}

impl Steering {
    /// Over `sysfs` (normally `/sys`) and `procfs` (normally `/proc`).
    pub fn new(sysfs: impl Into<PathBuf>, procfs: impl Into<PathBuf>) -> Self {
        Self {
            sysfs: sysfs.into(),
            procfs: procfs.into(),
        }
    }

    /// The steering files of `iface`.
    pub fn files(&self, iface: &str) -> Result<SteerFiles, NetError> {
        let dev = self.sysfs.join("class/net").join(iface);
        if !dev.exists() {
            return Err(NetError::NoInterface {
                iface: iface.to_string(),
            });
        }
        let queues = dev.join("queues");
        let irqs = numbered(&dev.join("device/msi_irqs"), "")?
            .into_iter()
            .map(|(n, _)| self.procfs.join(format!("irq/{n}/smp_affinity_list")))
            .filter(|p| p.exists())
            .collect();
        let in_queues = |prefix: &str, file: &str| -> Result<Vec<PathBuf>, NetError> {
            Ok(numbered(&queues, prefix)?
                .into_iter()
                .map(|(_, name)| queues.join(name).join(file))
                .filter(|p| p.exists())
                .collect())
        };
        Ok(SteerFiles {
            irqs,
            rps: in_queues("rx-", "rps_cpus")?,
            xps: in_queues("tx-", "xps_cpus")?,
        })
    }

    /// Reads every steering file of `iface`. A file the kernel will not
    /// let us read (XPS on some drivers) is left out, and so never written.
    pub fn snapshot(&self, iface: &str) -> Result<SteerSnapshot, NetError> {
        let f = self.files(iface)?;
        let files = f
            .irqs
            .iter()
            .chain(&f.rps)
            .chain(&f.xps)
            .filter_map(|p| {
                fs::read_to_string(p)
                    .ok()
                    .map(|t| (p.clone(), t.trim().to_string()))
            })
            .collect();
        Ok(SteerSnapshot { files })
    }

    /// Steers `iface`'s receive processing to `rx` (its IRQs' affinity, or
    /// RPS) and transmit queue selection to `tx` (XPS); `None` leaves that
    /// side alone. Only files in `snapshot` are written. Returns the files
    /// written, each with its new text.
    pub fn apply(
        &self,
        iface: &str,
        snapshot: &SteerSnapshot,
        rx: Option<&IdSet>,
        tx: Option<&IdSet>,
    ) -> Result<Vec<(PathBuf, String)>, NetError> {
        let f = self.files(iface)?;
        let saved = |p: &PathBuf| snapshot.files.iter().any(|(s, _)| s == p);
        let mut writes = Vec::new();
        if let Some(rx) = rx {
            if f.irqs.is_empty() {
                writes.extend(f.rps.iter().map(|p| (p.clone(), format_mask(rx))));
            } else {
                writes.extend(f.irqs.iter().map(|p| (p.clone(), rx.to_string())));
            }
        }
        if let Some(tx) = tx {
            writes.extend(f.xps.iter().map(|p| (p.clone(), format_mask(tx))));
        }
        writes.retain(|(p, _)| saved(p));
        for (path, text) in &writes {
            fs::write(path, text).map_err(io_err(path))?;
        }
        Ok(writes)
    }

    /// Writes every file of `snapshot` back. Tries all of them; the first
    /// failure is returned.
    pub fn restore(&self, snapshot: &SteerSnapshot) -> Result<(), NetError> {
        let mut first = None;
        for (path, text) in &snapshot.files {
            if let Err(e) = fs::write(path, text) {
                first.get_or_insert(io_err(path)(e));
            }
        }
        first.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
#[path = "steer_tests.rs"]
mod tests;
