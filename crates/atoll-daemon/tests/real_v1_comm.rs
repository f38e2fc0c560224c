//! Communication-aware scheduling on this machine's real kernel: sock_diag
//! sees unread bytes on a socket a unit's process holds, the daemon boosts
//! the unit with a custom EEVDF slice on its thread, and takes it back.
//!
//! Runs only as root with writable v1 `cpuset` and `cpu` hierarchies and at
//! least two CPUs; prints "skipped: ..." otherwise. The unit's only process
//! is a `sleep` this test starts, holding (by inheritance) the server end
//! of a loopback TCP connection; the test writes to the client end. The
//! groups live under `atoll-test-<pid>-<nanos>`, removed by a guard. Time is
//! a manual clock: the only waits are for the kernel to queue the bytes.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use atoll_core::clock::ManualClock;
use atoll_core::comm::{CommSpec, Mechanism};
use atoll_core::spec::{
    AdoptRule, Entitlement, HostSpec, IslandSpec, PlatformSpec, SchedPolicy, UnitSpec,
    DEFAULT_EPOCH,
};
use atoll_core::{CpuSet, Name};
use atoll_netdiag::{DiagMonitor, MonitorOptions};

fn n(s: &str) -> Name {
    Name::new(s).unwrap()
}

/// Kills the child even when an assertion fails.
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_unit_with_unread_bytes_gets_the_boost_slice_on_the_real_kernel() {
    let real = match common::real_v1() {
        Ok(r) => r,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    // Kernels before 6.12 accept custom slices and ignore them.
    let me = std::process::id();
    if atoll_procfs::set_slice(me, Duration::from_millis(1)).is_err()
        || atoll_procfs::slice(me).ok().flatten() != Some(Duration::from_millis(1))
    {
        let _ = atoll_procfs::set_slice(me, Duration::ZERO);
        println!("skipped: this kernel has no custom slices");
        return;
    }
    atoll_procfs::set_slice(me, Duration::ZERO).unwrap();

    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (mut server, _) = listener.accept().unwrap();
    // The child inherits the server end as fd 3 (std sets CLOEXEC on it).
    let fd = server.as_raw_fd();
    let mut cmd = Command::new("sleep");
    cmd.arg("60").stdin(Stdio::null());
    // SAFETY: between fork and exec the closure only calls dup2(2), which
    // is async-signal-safe, on descriptors that exist in the child.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = Kill(cmd.spawn().unwrap());
    let pid = child.0.id();
    // A busy process in another unit of the island: an island none of
    // whose tasks runs is not contended, and its sockets are not read.
    let spinner = Kill(
        Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );

    let online = real.topo.online();
    let first = online.first().unwrap();
    let island_cpus = online.difference(&CpuSet::range(first, first));
    let spec = PlatformSpec {
        host: HostSpec {
            cpus: CpuSet::new(),
            mems: Default::default(),
            adopt_all: false,
        },
        islands: vec![IslandSpec {
            name: n("web"),
            cpus: island_cpus,
            mems: real.topo.all_nodes(),
            policy: SchedPolicy::Fair,
            arbitration: Default::default(),
            exclusive: false,
            access: Default::default(),
        }],
        units: vec![
            UnitSpec {
                name: n("front"),
                island: n("web"),
                entitlement: Entitlement::default(),
                adopt: vec![AdoptRule::Pid(pid)],
                rt_priority: None,
            },
            UnitSpec {
                name: n("hog"),
                island: n("web"),
                entitlement: Entitlement::default(),
                adopt: vec![AdoptRule::Pid(spinner.0.id())],
                rt_priority: None,
            },
        ],
        default_island: None,
        epoch: DEFAULT_EPOCH,
        isolation: Default::default(),
        overlays: Vec::new(),
        comm: Some(CommSpec {
            recipient: true,
            mechanism: Mechanism::Slice,
            units: Some(vec![n("front")]),
            ..CommSpec::default()
        }),
        apps: Default::default(),
        network: Vec::new(),
        frequency: Default::default(),
    };
    let clock = ManualClock::new();
    let mut c = real.start(spec, &clock);
    c.set_net_monitor(
        Box::new(DiagMonitor::new(MonitorOptions::default())),
        "sock_diag",
    );
    let epoch = |c: &mut atoll_daemon::controller::Controller| {
        clock.advance(DEFAULT_EPOCH);
        c.epoch();
    };
    epoch(&mut c);
    let status = c.status();
    let front = status.units.iter().find(|u| u.name == "front").unwrap();
    assert_eq!(front.pids, vec![pid], "the child is in the unit");
    // The kernel reports the slice in force: the default one for now.
    let default = atoll_procfs::slice(pid).unwrap();
    let boost = Some(CommSpec::default().boost_slice);
    assert_ne!(default, boost, "nothing waits yet");

    client.write_all(&[7u8; 8192]).unwrap();
    // Loopback delivers at once; give the kernel a moment all the same.
    std::thread::sleep(Duration::from_millis(50));
    epoch(&mut c);
    assert_eq!(atoll_procfs::slice(pid).unwrap(), boost);
    let uc = c
        .status()
        .units
        .into_iter()
        .find(|u| u.name == "front")
        .and_then(|u| u.comm)
        .unwrap();
    assert!(uc.boosted, "{uc:?}");
    assert!(uc.recv_queued >= 8192, "{uc:?}");

    // Read it all: one more epoch counts the bytes read, then it is quiet.
    let mut buf = vec![0u8; 8192];
    server.read_exact(&mut buf).unwrap();
    epoch(&mut c);
    epoch(&mut c);
    assert_eq!(
        atoll_procfs::slice(pid).unwrap(),
        default,
        "the boost ended"
    );
    let why: Vec<String> = c
        .decisions()
        .query(Some("front"), 20)
        .iter()
        .map(|d| d.to_string())
        .collect();
    assert!(
        why.iter()
            .any(|d| d.contains("boost unit front") && d.contains("bytes wait")),
        "{why:#?}"
    );
    c.teardown().unwrap();
    assert!(!real.paths().cpuset.join(&real.root).exists());
}
