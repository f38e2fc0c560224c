//! Socket receive queues of a unit's processes (seed 001's buffer
//! monitoring, for `react_recv_queue`).
//!
//! [`ProcRecvQueues`] reads procfs under an injected root: the sockets a
//! process holds are the `socket:[INODE]` links in `/proc/<pid>/fd`, and
//! their queues are the `rx_queue` column (hex bytes not yet read by the
//! application) of the TCP and UDP tables of the process's network
//! namespace, `/proc/<pid>/net/{tcp,tcp6,udp,udp6}`. Each namespace's
//! tables are read once per call. Processes that exit meanwhile, or whose
//! fds the daemon may not read, count as holding nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Reads how many bytes wait in the receive queues of processes' sockets.
pub trait RecvQueues: Send {
    /// Bytes waiting in the receive queues of the sockets that `pids` hold,
    /// summed; `None` if none of them could be read.
    fn queued_bytes(&mut self, pids: &[u32]) -> Option<u64>;
}

/// [`RecvQueues`] from procfs.
#[derive(Clone, Debug)]
pub struct ProcRecvQueues {
    root: PathBuf,
}

/// The socket tables read per network namespace.
const TABLES: [&str; 4] = ["tcp", "tcp6", "udp", "udp6"];

impl ProcRecvQueues {
    /// A reader of the procfs at `root` (usually `/proc`).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    fn socket_inodes(&self, pid: u32) -> Option<BTreeSet<u64>> {
        let dir = self.root.join(pid.to_string()).join("fd");
        let mut out = BTreeSet::new();
        for entry in std::fs::read_dir(dir).ok()?.flatten() {
            if let Ok(target) = std::fs::read_link(entry.path()) {
                if let Some(inode) = socket_inode(&target) {
                    out.insert(inode);
                }
            }
        }
        Some(out)
    }

    /// inode → rx_queue of every socket in `pid`'s namespace.
    fn queues(&self, pid: u32) -> BTreeMap<u64, u64> {
        let net = self.root.join(pid.to_string()).join("net");
        let mut out = BTreeMap::new();
        for t in TABLES {
            if let Ok(text) = std::fs::read_to_string(net.join(t)) {
                parse_table(&text, &mut out);
            }
        }
        out
    }
}

impl RecvQueues for ProcRecvQueues {
    fn queued_bytes(&mut self, pids: &[u32]) -> Option<u64> {
        let mut by_ns: BTreeMap<PathBuf, (u32, BTreeSet<u64>)> = BTreeMap::new();
        let mut read_any = false;
        for &pid in pids {
            let Some(inodes) = self.socket_inodes(pid) else {
                continue;
            };
            read_any = true;
            let ns = std::fs::read_link(self.root.join(pid.to_string()).join("ns/net"))
                .unwrap_or_else(|_| PathBuf::from(format!("pid {pid}")));
            by_ns
                .entry(ns)
                .or_insert((pid, BTreeSet::new()))
                .1
                .extend(inodes);
        }
        if !read_any {
            return None;
        }
        let mut total = 0u64;
        for (pid, inodes) in by_ns.values() {
            let queues = self.queues(*pid);
            total += inodes.iter().filter_map(|i| queues.get(i)).sum::<u64>();
        }
        Some(total)
    }
}

/// The inode of a `socket:[N]` fd link.
fn socket_inode(target: &Path) -> Option<u64> {
    target
        .to_str()?
        .strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// Adds `inode → rx_queue` of each line of a `/proc/net/{tcp,udp}*` table.
fn parse_table(text: &str, out: &mut BTreeMap<u64, u64>) {
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(queues), Some(inode)) = (f.get(4), f.get(9)) else {
            continue;
        };
        let Some((_, rx)) = queues.split_once(':') else {
            continue;
        };
        if let (Ok(rx), Ok(inode)) = (u64::from_str_radix(rx, 16), inode.parse::<u64>()) {
            if inode != 0 {
                *out.entry(inode).or_default() += rx;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 0100007F:D2F0 01 00000000:00020000 00:00000000 00000000  1000        0 4243 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:0016 0100007F:D2F1 01 00000000:00000400 00:00000000 00000000     0        0 9999 1 0000000000000000 20 4 30 10 -1
";
    const UDP: &str = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  7: 00000000:1388 00000000:0000 07 00000000:00001000 00:00000000 00000000  1000        0 5151 2 0000000000000000 0
";

    fn fake_proc(root: &Path, pid: u32, fds: &[&str]) {
        let p = root.join(pid.to_string());
        std::fs::create_dir_all(p.join("fd")).unwrap();
        std::fs::create_dir_all(p.join("net")).unwrap();
        std::fs::create_dir_all(p.join("ns")).unwrap();
        for (i, t) in fds.iter().enumerate() {
            symlink(t, p.join("fd").join(i.to_string())).unwrap();
        }
        symlink("net:[4026531840]", p.join("ns/net")).unwrap();
        std::fs::write(p.join("net/tcp"), TCP).unwrap();
        std::fs::write(p.join("net/udp"), UDP).unwrap();
    }

    #[test]
    fn sums_the_receive_queues_of_the_processes_sockets_only() {
        let dir = tempfile::tempdir().unwrap();
        fake_proc(dir.path(), 10, &["socket:[4243]", "/dev/null", "pipe:[77]"]);
        fake_proc(dir.path(), 11, &["socket:[5151]", "socket:[4242]"]);
        let mut r = ProcRecvQueues::new(dir.path());
        // 0x20000 on 4243; 0x1000 on 5151; 4242 listens with nothing queued;
        // 9999 (0x400) is someone else's.
        assert_eq!(r.queued_bytes(&[10]), Some(0x20000));
        assert_eq!(r.queued_bytes(&[10, 11]), Some(0x20000 + 0x1000));
        assert_eq!(r.queued_bytes(&[12]), None, "a gone process reads nothing");
        assert_eq!(r.queued_bytes(&[11, 12]), Some(0x1000));
    }

    #[test]
    fn fd_links_and_table_lines() {
        assert_eq!(socket_inode(Path::new("socket:[123]")), Some(123));
        assert_eq!(socket_inode(Path::new("anon_inode:[eventfd]")), None);
        let mut m = BTreeMap::new();
        parse_table(TCP, &mut m);
        assert_eq!(m.get(&4243), Some(&0x20000));
        assert_eq!(m.get(&9999), Some(&0x400));
        assert_eq!(m.len(), 3);
    }
}
