//! Monitor tests on a fake procfs tree and a canned socket source.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::*;
use crate::SockProto;

/// What the fake source was asked.
type Calls = Arc<Mutex<Vec<(NetNs, Vec<u32>)>>>;

/// A source answering canned socket lists per namespace; a namespace
/// listed in `fail` answers the given error.
struct Fake {
    sockets: Arc<Mutex<HashMap<NetNs, Vec<SocketFigures>>>>,
    fail: HashMap<NetNs, fn() -> SourceError>,
    calls: Calls,
}

impl SocketSource for Fake {
    fn kind(&self) -> SourceKind {
        SourceKind::Fake
    }

    fn dump(
        &mut self,
        ns: NetNs,
        pids: &[u32],
        out: &mut Vec<SocketFigures>,
    ) -> Result<(), SourceError> {
        self.calls.lock().unwrap().push((ns, pids.to_vec()));
        if let Some(f) = self.fail.get(&ns) {
            return Err(f());
        }
        out.extend(
            self.sockets
                .lock()
                .unwrap()
                .get(&ns)
                .into_iter()
                .flatten()
                .copied(),
        );
        Ok(())
    }
}

fn tcp(inode: u64, rq: u64, wq: u64, read: u64, written: u64) -> SocketFigures {
    SocketFigures {
        inode,
        proto: SockProto::Tcp,
        rqueue: rq,
        wqueue: wq,
        bytes_read: Some(read),
        bytes_written: Some(written),
    }
}

fn unix(inode: u64, rq: u64) -> SocketFigures {
    SocketFigures {
        inode,
        proto: SockProto::Unix,
        rqueue: rq,
        wqueue: 0,
        bytes_read: None,
        bytes_written: None,
    }
}

fn fake_pid(root: &Path, pid: u32, sockets: &[u64], ns: u64) {
    let p = root.join(pid.to_string());
    std::fs::create_dir_all(p.join("fd")).unwrap();
    std::fs::create_dir_all(p.join("ns")).unwrap();
    symlink("/dev/null", p.join("fd/0")).unwrap();
    for (i, s) in sockets.iter().enumerate() {
        symlink(
            format!("socket:[{s}]"),
            p.join("fd").join((i + 3).to_string()),
        )
        .unwrap();
    }
    symlink(format!("net:[{ns}]"), p.join("ns/net")).unwrap();
}

fn units(spec: &[(&str, &[u32])]) -> BTreeMap<Name, Vec<u32>> {
    spec.iter()
        .map(|(n, p)| (Name::new(n).unwrap(), p.to_vec()))
        .collect()
}

struct Rig {
    dir: tempfile::TempDir,
    sockets: Arc<Mutex<HashMap<NetNs, Vec<SocketFigures>>>>,
    calls: Calls,
}

impl Rig {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            sockets: Arc::default(),
            calls: Arc::default(),
        }
    }

    fn monitor(&self, fail: HashMap<NetNs, fn() -> SourceError>) -> DiagMonitor {
        let options = MonitorOptions {
            proc_root: self.dir.path().to_path_buf(),
            full_rescan_every: 0,
            ..MonitorOptions::default()
        };
        let fake = Fake {
            sockets: self.sockets.clone(),
            fail,
            calls: self.calls.clone(),
        };
        DiagMonitor::with_source(options, Box::new(fake))
    }

    fn set(&self, ns: u64, figures: Vec<SocketFigures>) {
        self.sockets.lock().unwrap().insert(Some(ns), figures);
    }
}

fn get<'a>(m: &'a BTreeMap<Name, UnitNetSample>, n: &str) -> &'a UnitNetSample {
    &m[&Name::new(n).unwrap()]
}

#[test]
fn sums_each_units_sockets_once() {
    let rig = Rig::new();
    let r = rig.dir.path();
    // web: two processes sharing socket 5 (inherited over fork), and 6.
    fake_pid(r, 10, &[5, 6], 1);
    fake_pid(r, 11, &[5], 1);
    // db: its own socket 7, plus 5 (passed to it): counted for both units.
    fake_pid(r, 12, &[7, 5], 1);
    // idle holds a socket not in the dump (a listening one): nothing.
    fake_pid(r, 13, &[99], 1);
    rig.set(
        1,
        vec![
            tcp(5, 100, 10, 1000, 2000),
            tcp(6, 1, 2, 3, 4),
            unix(7, 50),
            tcp(8, 9, 9, 9, 9),
        ],
    );
    let mut m = rig.monitor(HashMap::new());
    assert_eq!(m.source_kind(), SourceKind::Fake);
    let u = units(&[
        ("web", &[10, 11]),
        ("db", &[12]),
        ("idle", &[13]),
        ("gone", &[14]),
    ]);
    let s = m.sample(&u).unwrap();
    assert_eq!(
        *get(&s, "web"),
        UnitNetSample {
            recv_queued: 101,
            send_queued: 12,
            bytes_received: 1003,
            bytes_sent: 2004,
            sockets: 2,
        }
    );
    assert_eq!(
        *get(&s, "db"),
        UnitNetSample {
            recv_queued: 150,
            send_queued: 10,
            bytes_received: 1000,
            bytes_sent: 2000,
            sockets: 2,
        }
    );
    assert_eq!(*get(&s, "idle"), UnitNetSample::default());
    assert_eq!(*get(&s, "gone"), UnitNetSample::default());
    assert_eq!(s.len(), 4);
    // One dump for the one namespace, through its readable pids.
    assert_eq!(
        *rig.calls.lock().unwrap(),
        vec![(Some(1), vec![10, 11, 12, 13])]
    );
    assert_eq!(m.stats().last_sockets, 4);
}

#[test]
fn a_new_connection_counts_in_the_sample_that_first_shows_it() {
    let rig = Rig::new();
    let r = rig.dir.path();
    fake_pid(r, 20, &[1], 1);
    rig.set(1, vec![tcp(1, 0, 0, 10, 10), tcp(50, 7, 7, 7, 7)]);
    let mut m = rig.monitor(HashMap::new());
    let u = units(&[("srv", &[20])]);
    assert_eq!(get(&m.sample(&u).unwrap(), "srv").sockets, 1);
    let scans = m.stats().owners.fd_scans;
    // Quiet epochs read no fds.
    m.sample(&u).unwrap();
    assert_eq!(m.stats().owners.fd_scans, scans);

    // The server accepts: a new fd and a new socket in the dump.
    symlink("socket:[2]", r.join("20/fd/9")).unwrap();
    rig.set(
        1,
        vec![
            tcp(1, 0, 0, 10, 10),
            tcp(2, 300, 0, 0, 0),
            tcp(50, 7, 7, 7, 7),
        ],
    );
    let s = m.sample(&u).unwrap();
    assert_eq!(get(&s, "srv").sockets, 2);
    assert_eq!(get(&s, "srv").recv_queued, 300);
    assert!(m.stats().owners.fd_scans > scans);

    // The connection closes: gone from the dump, gone from the sums, even
    // though the map still lists the inode.
    rig.set(1, vec![tcp(1, 0, 0, 10, 10), tcp(50, 7, 7, 7, 7)]);
    assert_eq!(get(&m.sample(&u).unwrap(), "srv").sockets, 1);
}

fn skip_err() -> SourceError {
    SourceError::Netlink(NetlinkError::Netns {
        path: "/proc/31/ns/net".into(),
        source: std::io::Error::from_raw_os_error(libc::EPERM),
    })
}

fn hard_err() -> SourceError {
    SourceError::ProcNet(ProcNetError::Parse {
        path: "/proc/30/net/tcp".into(),
        line: 3,
        value: "garbage".into(),
        reason: "at least 10 columns",
    })
}

#[test]
fn namespaces_are_dumped_apart_and_skipped_when_they_cannot_be() {
    let rig = Rig::new();
    let r = rig.dir.path();
    fake_pid(r, 30, &[1], 1);
    fake_pid(r, 31, &[2], 2);
    fake_pid(r, 32, &[3], 3);
    rig.set(1, vec![unix(1, 11)]);
    rig.set(2, vec![unix(2, 22)]);
    rig.set(3, vec![unix(3, 33)]);
    let mut fail: HashMap<NetNs, fn() -> SourceError> = HashMap::new();
    fail.insert(Some(2), skip_err);
    let mut m = rig.monitor(fail);
    let u = units(&[("a", &[30]), ("b", &[31]), ("c", &[32])]);
    let s = m.sample(&u).unwrap();
    assert_eq!(get(&s, "a").recv_queued, 11);
    assert_eq!(*get(&s, "b"), UnitNetSample::default(), "skipped namespace");
    assert_eq!(get(&s, "c").recv_queued, 33);
    let st = m.stats();
    assert_eq!((st.dumps, st.namespaces_skipped), (3, 1));
    assert!(st.last_skip.unwrap().contains("net:[2]"));

    let mut fail: HashMap<NetNs, fn() -> SourceError> = HashMap::new();
    fail.insert(Some(3), hard_err);
    let mut m = rig.monitor(fail);
    let e = m.sample(&u).unwrap_err();
    match e {
        NetError::Parse { what, value, .. } => {
            assert_eq!(what, "/proc/30/net/tcp:3");
            assert_eq!(value, "garbage");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn errors_keep_what_failed_at_the_trait_boundary() {
    let io = NetError::from(MonitorError::Source {
        ns: Some(5),
        source: SourceError::Netlink(NetlinkError::Io {
            op: "recv tcp4".into(),
            source: std::io::Error::from_raw_os_error(libc::EAGAIN),
        }),
    });
    assert!(
        matches!(&io, NetError::Io { what, .. } if what == "sock_diag recv tcp4 (net:[5])"),
        "{io:?}"
    );
    let wire = NetError::from(MonitorError::Source {
        ns: None,
        source: SourceError::Netlink(NetlinkError::Wire(WireError::Kernel {
            request: "unix",
            errno: libc::EPERM,
        })),
    });
    match wire {
        NetError::Parse {
            what,
            value,
            reason,
        } => {
            assert_eq!(
                (what.as_str(), value.as_str()),
                ("sock_diag ((own))", "unix")
            );
            assert!(reason.contains("errno 1"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let read = NetError::from(MonitorError::Source {
        ns: None,
        source: SourceError::ProcNet(ProcNetError::Read {
            path: "/proc/1/net/tcp6".into(),
            source: std::io::Error::from_raw_os_error(libc::EACCES),
        }),
    });
    assert!(
        matches!(&read, NetError::Io { what, .. } if what == "/proc/1/net/tcp6"),
        "{read:?}"
    );
}

#[test]
fn the_proc_net_fallback_reads_a_fake_tree() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    fake_pid(r, 40, &[4243, 702], 1);
    std::fs::create_dir_all(r.join("40/net")).unwrap();
    std::fs::write(
        r.join("40/net/tcp"),
        "hdr\n   1: 0100007F:1F90 0100007F:D2F0 01 00000010:00020000 00:00000000 00000000  1000        0 4243 1 0\n",
    )
    .unwrap();
    std::fs::write(
        r.join("40/net/unix"),
        "hdr\n0000000000000000: 00000003 00000000 00000000 0001 03 702\n",
    )
    .unwrap();
    let mut m = DiagMonitor::proc_net(MonitorOptions {
        proc_root: r.to_path_buf(),
        ..MonitorOptions::default()
    });
    assert_eq!(m.source_kind(), SourceKind::ProcNet);
    let s = m.sample(&units(&[("u", &[40])])).unwrap();
    assert_eq!(
        *get(&s, "u"),
        UnitNetSample {
            recv_queued: 0x20000,
            send_queued: 0x10,
            bytes_received: 0,
            bytes_sent: 0,
            sockets: 2,
        }
    );
}
