//! Which sockets the units' processes hold: pid → socket inodes, from the
//! `socket:[INODE]` links of `<root>/<pid>/fd`, kept across epochs and
//! refreshed incrementally.
//!
//! Reading a process's fds costs one `readlink` per fd, so reading them all
//! every 30 ms epoch would cost more than the socket dump itself. The map
//! is refreshed by these rules instead:
//!
//! 1. **New pid**: a pid seen for the first time is scanned (this is the
//!    whole cost of a cold sample). A pid no longer asked for is forgotten.
//! 2. **New sockets nobody is known to hold**: after each dump the monitor
//!    passes the dump's inodes to [`OwnerMap::reconcile`]. Inodes that were
//!    not in the previous dump and that no tracked pid holds are new sockets
//!    of someone: a unit's process that accepted or connected, or a process
//!    outside every unit. Only then are pids looked at:
//!    - **fd count changed**: on Linux 6.2 and later, `stat` of
//!      `/proc/<pid>/fd` gives the number of open fds as its size, one cheap
//!      call per pid. A pid whose count changed is rescanned.
//!    - **blind rescan**: a server with connection churn closes and accepts
//!      between two samples, so its count may not change. A pid whose count
//!      did not change (or is not known: older kernels, fake trees) is
//!      rescanned anyway once its blind timer expires. The timer is
//!      `churn_rescan_every` epochs (default 4, about 120 ms) after a scan
//!      that found sockets new to that pid, 1 epoch where counts are not
//!      known, and doubles after each blind rescan that found nothing, up to
//!      the full-rescan period: pids that merely sit next to other
//!      processes' churn cost less and less.
//!
//!    Each new inode triggers this once (it is then in the previous dump).
//!    A socket opened by a unit's process is thus counted in the same
//!    sample when its fd count shows it, and at most `churn_rescan_every`
//!    epochs late for a churning server whose count stays level.
//! 3. **Periodic rescan**: every pid is rescanned once every
//!    `full_rescan_every` epochs (default 33, about 1 s at 30 ms), in the
//!    epoch where `epoch % full_rescan_every == pid % full_rescan_every`, so
//!    that the pids' rescans are spread over the period instead of falling
//!    into one slow epoch. This bounds what rule 2 can miss: a socket
//!    passed over `SCM_RIGHTS` into a unit (not new in the dump), a pid
//!    reused by a new process. Such a socket is counted at most one period
//!    late.
//!
//! Sockets that closed need no rule: their inodes leave the dump and stop
//! counting even while the map still lists them.
//!
//! The namespace of each pid (`<root>/<pid>/ns/net`) is read at the same
//! time as its fds. A pid whose fds cannot be read (it exited, or the
//! monitor lacks permission) holds nothing and is retried at the next full
//! rescan.

use std::collections::{HashMap, HashSet};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::NetNs;

/// Counters of the work the map did, since it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OwnerStats {
    /// Reads of a pid's fd directory.
    pub fd_scans: u64,
    /// `readlink`s of fds done by those reads.
    pub fd_links: u64,
    /// Periodic rescans of a pid (rule 3).
    pub periodic_rescans: u64,
    /// Samples in which new sockets nobody was known to hold were seen
    /// (rule 2).
    pub unknown_rounds: u64,
    /// `stat`s of fd directories done by rule 2.
    pub size_checks: u64,
    /// Rescans by rule 2 of pids whose fd count had not changed.
    pub blind_rescans: u64,
    /// Scans that failed (process exited or unreadable).
    pub unreadable: u64,
}

#[derive(Clone, Debug)]
struct PidEntry {
    /// Socket inodes held, sorted, without duplicates.
    inodes: Vec<u64>,
    ns: NetNs,
    /// Size of the fd directory at the scan, when it equalled the number of
    /// fds read (procfs reports the fd count there).
    fd_count: Option<u64>,
    readable: bool,
    /// Last epoch in which the pid was asked for.
    wanted: u64,
    /// Epoch of the last scan.
    scanned: u64,
    /// Epochs between blind rescans (rule 2), and the epoch of the next.
    blind_gap: u32,
    next_blind: u64,
}

/// pid → socket inodes, refreshed incrementally (see the module docs).
#[derive(Debug)]
pub struct OwnerMap {
    root: PathBuf,
    full_rescan_every: u32,
    churn_rescan_every: u32,
    epoch: u64,
    pids: HashMap<u32, PidEntry>,
    /// Inodes of the previous dump.
    seen: HashSet<u64>,
    /// Scratch set for the current dump's inodes.
    next: HashSet<u64>,
    stats: OwnerStats,
}

impl OwnerMap {
    /// A map over the procfs at `root` (usually `/proc`), rescanning every
    /// pid every `full_rescan_every` epochs (0: never), with blind rescans
    /// of churning pids every 4 epochs at most (see
    /// [`OwnerMap::with_churn_rescan_every`]).
    pub fn new(root: impl Into<PathBuf>, full_rescan_every: u32) -> Self {
        Self {
            root: root.into(),
            full_rescan_every,
            churn_rescan_every: 4,
            epoch: 0,
            pids: HashMap::new(),
            seen: HashSet::new(),
            next: HashSet::new(),
            stats: OwnerStats::default(),
        }
    }

    /// Starts an epoch tracking exactly `pids`: scans the new ones (rule 1)
    /// and those whose periodic rescan falls in this epoch (rule 3), and
    /// forgets the others. Returns whether this epoch ends a period (every
    /// `full_rescan_every` epochs: the time for per-namespace housekeeping).
    pub fn begin(&mut self, pids: &[u32]) -> bool {
        self.epoch += 1;
        let period = u64::from(self.full_rescan_every);
        for &pid in pids {
            let periodic = period > 0 && self.epoch % period == u64::from(pid) % period;
            let stale = match self.pids.get(&pid) {
                None => true,
                Some(e) => periodic && e.scanned != self.epoch,
            };
            if stale {
                if periodic && self.pids.contains_key(&pid) {
                    self.stats.periodic_rescans += 1;
                }
                self.scan(pid);
            }
            if let Some(e) = self.pids.get_mut(&pid) {
                e.wanted = self.epoch;
            }
        }
        let epoch = self.epoch;
        self.pids.retain(|_, e| e.wanted == epoch);
        epoch.checked_rem(period) == Some(0)
    }

    /// Sets the shortest gap, in epochs, between two blind rescans of a pid
    /// (rule 2; at least 1).
    pub fn with_churn_rescan_every(mut self, epochs: u32) -> Self {
        self.churn_rescan_every = epochs.max(1);
        self
    }

    /// The socket inodes `pid` holds (sorted), empty if unknown.
    pub fn inodes(&self, pid: u32) -> &[u64] {
        self.pids.get(&pid).map_or(&[], |e| &e.inodes)
    }

    /// The network namespace of `pid`, `None` if unknown.
    pub fn namespace(&self, pid: u32) -> NetNs {
        self.pids.get(&pid).and_then(|e| e.ns)
    }

    /// Whether `pid`'s fds could be read at its last scan.
    pub fn readable(&self, pid: u32) -> bool {
        self.pids.get(&pid).is_some_and(|e| e.readable)
    }

    /// Whether rule 2 can check `pid`'s fd count with one `stat` (procfs
    /// reported the count as the fd directory's size at the last scan).
    pub fn counts_fds(&self, pid: u32) -> bool {
        self.pids.get(&pid).is_some_and(|e| e.fd_count.is_some())
    }

    /// Work counters.
    pub fn stats(&self) -> &OwnerStats {
        &self.stats
    }

    /// After the dumps of an epoch, whose sockets are `current`: finds the
    /// holders of new sockets (rule 2). Returns the number of pids
    /// rescanned.
    pub fn reconcile(&mut self, current: impl IntoIterator<Item = u64>) -> usize {
        self.next.clear();
        self.next.extend(current);
        let new: Vec<u64> = self
            .next
            .iter()
            .filter(|i| !self.seen.contains(i))
            .copied()
            .collect();
        std::mem::swap(&mut self.seen, &mut self.next);
        if new.is_empty() {
            return 0;
        }
        let owned: HashSet<u64> = self
            .pids
            .values()
            .flat_map(|e| e.inodes.iter().copied())
            .collect();
        if new.iter().all(|i| owned.contains(i)) {
            return 0;
        }
        self.stats.unknown_rounds += 1;
        let epoch = self.epoch;
        let candidates: Vec<(u32, Option<u64>, bool)> = self
            .pids
            .iter()
            .filter(|(_, e)| e.readable && e.scanned != epoch)
            .map(|(&pid, e)| (pid, e.fd_count, epoch >= e.next_blind))
            .collect();
        let mut rescanned = 0;
        for (pid, count, blind_due) in candidates {
            let changed = match count {
                Some(count) => {
                    self.stats.size_checks += 1;
                    self.fd_dir_size(pid) != Some(count)
                }
                None => false,
            };
            if changed || blind_due {
                if !changed {
                    self.stats.blind_rescans += 1;
                }
                self.scan(pid);
                rescanned += 1;
            }
        }
        rescanned
    }

    fn fd_dir_size(&self, pid: u32) -> Option<u64> {
        let path = self.root.join(pid.to_string()).join("fd");
        std::fs::metadata(path).ok().map(|m| m.len())
    }

    /// Reads `pid`'s fds and namespace into the map, and sets its blind
    /// timer.
    fn scan(&mut self, pid: u32) {
        self.stats.fd_scans += 1;
        let dir = self.root.join(pid.to_string());
        let fd_dir = dir.join("fd");
        let size_before = std::fs::metadata(&fd_dir).ok().map(|m| m.len());
        let mut inodes = Vec::new();
        let (readable, fd_count) = match read_socket_links(&fd_dir, &mut inodes) {
            Ok(fds) => {
                self.stats.fd_links += fds;
                // Reading our own fd directory lists the two fds that read
                // it, which the `stat` before did not count.
                let extra = if pid == std::process::id() { 2 } else { 0 };
                (true, size_before.filter(|&s| s + extra == fds))
            }
            Err(_) => {
                self.stats.unreadable += 1;
                (false, None)
            }
        };
        inodes.sort_unstable();
        inodes.dedup();
        let ns = std::fs::read_link(dir.join("ns/net"))
            .ok()
            .and_then(|t| crate::parse_ns_or_socket(t.as_os_str().as_encoded_bytes(), b"net:["));
        let cap = if self.full_rescan_every > 0 {
            self.full_rescan_every
        } else {
            64
        };
        let old = self.pids.get(&pid);
        let found_new =
            old.is_none_or(|o| inodes.iter().any(|i| o.inodes.binary_search(i).is_err()));
        let base = if fd_count.is_some() {
            self.churn_rescan_every
        } else {
            1
        };
        let blind_gap = match old {
            Some(o) if !found_new => o.blind_gap.saturating_mul(2).clamp(base, cap.max(base)),
            _ => base,
        };
        let entry = PidEntry {
            inodes,
            ns,
            fd_count,
            readable,
            wanted: self.epoch,
            scanned: self.epoch,
            blind_gap,
            next_blind: self.epoch + u64::from(blind_gap),
        };
        self.pids.insert(pid, entry);
    }
}

/// Appends the inodes of the `socket:[N]` links in `fd_dir` to `out`;
/// returns the number of entries read. `readlinkat` on the open directory
/// saves the path walk of `readlink` on each fd (about a third of the cost
/// per fd on procfs).
fn read_socket_links(fd_dir: &Path, out: &mut Vec<u64>) -> std::io::Result<u64> {
    let dir = std::fs::File::open(fd_dir)?;
    let mut fds = 0u64;
    let mut name = [0u8; 64];
    let mut target = [0u8; 64];
    for entry in std::fs::read_dir(fd_dir)?.flatten() {
        fds += 1;
        let file_name = entry.file_name();
        let bytes = file_name.as_encoded_bytes();
        if bytes.len() >= name.len() || bytes.contains(&0) {
            continue;
        }
        name[..bytes.len()].copy_from_slice(bytes);
        name[bytes.len()] = 0;
        // SAFETY: `dir` is an open directory; `name` holds a NUL-terminated
        // string; `target` is writable for `target.len()` bytes. readlinkat
        // writes at most that many bytes and returns how many it wrote.
        let n = unsafe {
            libc::readlinkat(
                dir.as_raw_fd(),
                name.as_ptr().cast(),
                target.as_mut_ptr().cast(),
                target.len(),
            )
        };
        // Negative: an error; 0: an empty target.
        if let Some(n) = usize::try_from(n).ok().filter(|&n| n > 0) {
            let t = &target[..n.min(target.len())];
            if let Some(inode) = crate::parse_ns_or_socket(t, b"socket:[") {
                out.push(inode);
            }
        }
    }
    Ok(fds)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;
    use std::path::Path;

    use super::*;

    /// A fake `/proc/<pid>` with fds linking to `targets` and a namespace.
    fn fake_pid(root: &Path, pid: u32, targets: &[&str], ns: u64) {
        let p = root.join(pid.to_string());
        std::fs::create_dir_all(p.join("fd")).unwrap();
        std::fs::create_dir_all(p.join("ns")).unwrap();
        for (i, t) in targets.iter().enumerate() {
            symlink(t, p.join("fd").join(i.to_string())).unwrap();
        }
        let _ = std::fs::remove_file(p.join("ns/net"));
        symlink(format!("net:[{ns}]"), p.join("ns/net")).unwrap();
    }

    fn add_fd(root: &Path, pid: u32, fd: u32, target: &str) {
        symlink(target, root.join(format!("{pid}/fd/{fd}"))).unwrap();
    }

    #[test]
    fn scans_new_pids_once_and_forgets_departed_ones() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        fake_pid(
            r,
            10,
            &[
                "socket:[5]",
                "/dev/null",
                "pipe:[7]",
                "socket:[3]",
                "socket:[5]",
            ],
            1,
        );
        fake_pid(r, 11, &["socket:[9]"], 2);
        let mut m = OwnerMap::new(r, 0);
        assert!(!m.begin(&[10, 11, 12]));
        assert_eq!(m.inodes(10), &[3, 5]);
        assert_eq!(m.inodes(11), &[9]);
        assert_eq!(m.inodes(12), &[] as &[u64], "pid 12 does not exist");
        assert!(!m.readable(12));
        assert_eq!(
            (m.namespace(10), m.namespace(11), m.namespace(12)),
            (Some(1), Some(2), None)
        );
        assert_eq!(m.stats().fd_scans, 3);
        assert_eq!(m.stats().fd_links, 6);
        assert_eq!(m.stats().unreadable, 1);

        // Steady state: nothing is read again.
        m.reconcile([3, 5, 9, 100]);
        for _ in 0..5 {
            m.begin(&[10, 11, 12]);
            assert_eq!(m.reconcile([3, 5, 9, 100]), 0);
        }
        assert_eq!(m.stats().fd_scans, 3);

        // pid 11 leaves: forgotten, and scanned anew when it comes back.
        m.begin(&[10]);
        assert_eq!(m.inodes(11), &[] as &[u64]);
        m.begin(&[10, 11]);
        assert_eq!(m.inodes(11), &[9]);
        assert_eq!(m.stats().fd_scans, 4);
    }

    #[test]
    fn new_unknown_sockets_trigger_a_rescan() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        fake_pid(r, 20, &["socket:[1]"], 1);
        fake_pid(r, 21, &["socket:[2]"], 1);
        let mut m = OwnerMap::new(r, 0);
        m.begin(&[20, 21]);
        // The first dump: every inode is new, but the pids were just scanned.
        assert_eq!(m.reconcile([1, 2, 50]), 0);
        let scans = m.stats().fd_scans;

        // pid 20 accepts a connection: inode 3 appears in the dump.
        add_fd(r, 20, 1, "socket:[3]");
        m.begin(&[20, 21]);
        assert!(m.reconcile([1, 2, 3, 50]) >= 1);
        assert_eq!(m.inodes(20), &[1, 3]);
        assert!(m.stats().fd_scans > scans);
        // Rounds: the first dump's inode 50, then inode 3.
        assert_eq!(m.stats().unknown_rounds, 2);

        // Inode 60 belongs to nobody tracked: looked for once, then ignored.
        m.begin(&[20, 21]);
        m.reconcile([1, 2, 3, 50, 60]);
        let scans = m.stats().fd_scans;
        m.begin(&[20, 21]);
        assert_eq!(m.reconcile([1, 2, 3, 50, 60]), 0);
        assert_eq!(m.stats().fd_scans, scans);
        assert_eq!(m.stats().unknown_rounds, 3);
    }

    #[test]
    fn blind_rescans_back_off_when_they_find_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        fake_pid(r, 50, &["socket:[1]"], 1);
        let mut m = OwnerMap::new(r, 0);
        m.begin(&[50]);
        m.reconcile([1]);
        // Someone else's churn: a new unknown socket every epoch. Fake trees
        // give no fd count, so pid 50 is rescanned blind, with gaps 1, 2, 4,
        // 8 (epochs 2, 4, 8, 16; the next is 32): 4 rescans in 30 epochs.
        for e in 0..30u64 {
            m.begin(&[50]);
            m.reconcile([1, 1000 + e]);
        }
        assert_eq!(m.stats().blind_rescans, 4);
        // Its own churn (a new socket in place of an old one) resets the gap.
        std::fs::remove_file(r.join("50/fd/0")).unwrap();
        add_fd(r, 50, 0, "socket:[2]");
        let mut epochs = 0;
        while !m.inodes(50).contains(&2) {
            m.begin(&[50]);
            m.reconcile([2, 2000 + epochs]);
            epochs += 1;
        }
        assert!(epochs <= 16, "found after {epochs} epochs");
        let before = m.stats().blind_rescans;
        std::fs::remove_file(r.join("50/fd/0")).unwrap();
        add_fd(r, 50, 0, "socket:[3]");
        m.begin(&[50]);
        m.reconcile([3]);
        assert_eq!(m.inodes(50), &[3], "gap back to 1 epoch after finding one");
        assert_eq!(m.stats().blind_rescans, before + 1);
    }

    #[test]
    fn periodic_rescans_catch_what_rule_two_misses_spread_over_the_period() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        fake_pid(r, 30, &["socket:[1]"], 1);
        fake_pid(r, 31, &["socket:[2]"], 1);
        let mut m = OwnerMap::new(r, 3);
        m.begin(&[30, 31]);
        m.reconcile([1, 2, 7, 8]);
        // Sockets 7 and 8 existed (someone else's) and are now passed to
        // pids 30 and 31: not new in the dump, so only rule 3 sees them, in
        // epoch 3 for pid 30 (30 % 3 == 0) and epoch 4 for pid 31.
        add_fd(r, 30, 1, "socket:[7]");
        add_fd(r, 31, 1, "socket:[8]");
        let mut boundaries = 0;
        let mut seen = Vec::new();
        for _ in 0..3 {
            if m.begin(&[30, 31]) {
                boundaries += 1;
            }
            m.reconcile([1, 2, 7, 8]);
            seen.push((m.inodes(30).to_vec(), m.inodes(31).to_vec()));
        }
        assert_eq!(boundaries, 1, "epoch 3 ends a period");
        assert_eq!(seen[0], (vec![1], vec![2]), "epoch 2");
        assert_eq!(seen[1], (vec![1, 7], vec![2]), "epoch 3");
        assert_eq!(seen[2], (vec![1, 7], vec![2, 8]), "epoch 4");
        assert_eq!(m.stats().periodic_rescans, 2);
    }

    #[test]
    fn unreadable_pids_wait_for_their_periodic_rescan() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        let mut m = OwnerMap::new(r, 4);
        m.begin(&[40]);
        assert!(!m.readable(40));
        // The process appears (its fd dir becomes readable) and a new socket
        // shows: rule 2 does not retry unreadable pids, rule 3 does (epoch
        // 4 for pid 40).
        fake_pid(r, 40, &["socket:[8]"], 1);
        m.begin(&[40]);
        m.reconcile([8]);
        assert_eq!(m.inodes(40), &[] as &[u64]);
        for _ in 0..4 {
            m.begin(&[40]);
        }
        assert_eq!(m.inodes(40), &[8]);
        assert_eq!(m.stats().periodic_rescans, 1);
    }
}
