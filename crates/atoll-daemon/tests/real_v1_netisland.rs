//! Network islands on this machine's real cgroup v1 and `tc` (issue 17):
//!
//! - classification by cgroup: a network island writes its unit's group's
//!   `net_prio.ifpriomap`, so that frames a process of the unit sends, with
//!   no `SO_PRIORITY` of its own, are counted in the unit's HTB class; the
//!   same frames from a process outside the unit are not; a unit added at
//!   run time with `settings.network` gets the next class (1:11) the same
//!   way, and `unit rm` takes it away; teardown gives the interface back;
//! - crash safety: a daemon dropped without teardown leaves its tree and
//!   XPS mask; the next one, on the same state directory, adopts the
//!   interface, and its teardown leaves the qdiscs and the mask exactly as
//!   the first one found them.
//!
//! `net_prio` knows only the interfaces of the initial network namespace
//! (the kernel answers ENODEV for others), so the interface is the host end
//! of a veth pair this test creates (`atl<pid>h`, no address, its peer in a
//! namespace of the test's own) and deletes on drop. If no v1 `net_prio`
//! hierarchy is mounted, the test mounts one on a temporary directory and
//! unmounts it at the end. The sender is a child `python3` writing raw
//! frames on the interface (an AF_PACKET socket: no address or route on
//! the host). Runs only as root with `tc`, `ip`, `/usr/bin/python3` and
//! writable v1 `cpuset` and `cpu` hierarchies; prints "skipped: ..."
//! otherwise. Unit groups live under a root named `atoll-test-<pid>-...`.

mod common;
#[path = "../../atoll-net/tests/support/sender.rs"]
mod sender;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use atoll_core::clock::ManualClock;
use atoll_daemon::command::{Caller, Command as DaemonCommand};
use atoll_daemon::controller::Controller;
use atoll_daemon::netisland::NetIslands;
use atoll_net::{NetBackend, Steering, TcBackend};
use atoll_proto::Request;
use sender::{packets, Datagrams, Sender, PYTHON};

const SENT: u64 = 25;

/// One test at a time: a `net_prio` hierarchy one mounts must not hold the
/// other's groups when it is unmounted.
static SERIAL: Mutex<()> = Mutex::new(());
static SEQ: AtomicU32 = AtomicU32::new(0);

fn sh(prog: &str, args: &[&str]) -> String {
    let out = Command::new(prog).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{prog} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".to_string());
    }
    for prog in ["tc", "ip"] {
        if Command::new(prog).arg("-V").output().is_err() {
            return Some(format!("`{prog}` is not installed"));
        }
    }
    if !Path::new(PYTHON).exists() {
        return Some(format!("no {PYTHON}"));
    }
    None
}

/// A v1 `net_prio` hierarchy: the machine's, or one mounted on a
/// temporary directory by this test (unmounted on drop).
struct NetPrioMount {
    ours: Option<tempfile::TempDir>,
}

impl NetPrioMount {
    fn ensure() -> Result<Self, String> {
        let info = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
        let mounted = info.lines().any(|l| {
            l.split_once(" - ").is_some_and(|(_, fs)| {
                fs.starts_with("cgroup ") && fs.split(',').any(|o| o == "net_prio")
            })
        });
        if mounted {
            return Ok(Self { ours: None });
        }
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let target = std::ffi::CString::new(dir.path().as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: valid NUL-terminated strings; the mount is undone by Drop.
        let rc = unsafe {
            libc::mount(
                c"cgroup".as_ptr(),
                target.as_ptr(),
                c"cgroup".as_ptr(),
                0,
                c"net_prio".as_ptr().cast(),
            )
        };
        if rc != 0 {
            return Err(format!(
                "cannot mount a net_prio hierarchy: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Self { ours: Some(dir) })
    }
}

impl Drop for NetPrioMount {
    fn drop(&mut self) {
        if let Some(dir) = &self.ours {
            let target = std::ffi::CString::new(dir.path().as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid path string; our own mount.
            if unsafe { libc::umount2(target.as_ptr(), 0) } != 0 {
                // SAFETY: as above.
                unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
            }
        }
    }
}

/// A veth pair: `atl<pid>h<k>` in the host's namespace (up, no address),
/// its peer in namespace `atl<pid>p<k>`; both deleted on drop.
struct Veth {
    ns: String,
    host: String,
}

impl Veth {
    fn new() -> Self {
        let pid = std::process::id();
        let k = SEQ.fetch_add(1, Ordering::Relaxed);
        let v = Self {
            ns: format!("atl{pid}p{k}"),
            host: format!("atl{pid}h{k}"),
        };
        sh("ip", &["netns", "add", &v.ns]);
        let peer = format!("atl{pid}q{k}");
        sh(
            "ip",
            &[
                "link", "add", &v.host, "type", "veth", "peer", "name", &peer, "netns", &v.ns,
            ],
        );
        sh("ip", &["-n", &v.ns, "link", "set", &peer, "up"]);
        sh("ip", &["link", "set", &v.host, "up"]);
        v
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.host])
            .status();
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

fn adopt(c: &mut Controller, unit: &str, pid: u32) {
    root_asks(
        c,
        Request::Adopt {
            unit: unit.into(),
            pid,
            island: None,
            network: None,
        },
    );
}

fn root_asks(c: &mut Controller, request: Request) {
    let (tx, rx) = std::sync::mpsc::channel();
    c.handle(DaemonCommand::Api {
        caller: Caller {
            uid: 0,
            gid: 0,
            pid: 1,
        },
        id: 1,
        request,
        reply: tx,
    });
    rx.recv_timeout(Duration::from_secs(5))
        .unwrap()
        .into_result()
        .unwrap();
}

/// Island `main` on every CPU but the first (the host's), unit `api`
/// with a class on `iface`; `extra` goes into `[network.wire]`.
fn spec(real: &common::RealV1, iface: &str, extra: &str) -> atoll_core::spec::PlatformSpec {
    let cpus: Vec<u32> = real.topo.online().iter().collect();
    let config = format!(
        r#"
[host]
cpus = "{host}"

[island.main]
cpus = "{rest}"

[unit.api]
island = "main"

[network.wire]
interface = "{iface}"
rate_mbit = 100
leaf = "pfifo"
{extra}
[network.wire.units.api]
share = 300
"#,
        host = cpus[0],
        rest = cpus[1..]
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(","),
    );
    atoll_config::parse(&config, "test.toml", &real.topo).unwrap()
}

fn islands(spec: &atoll_core::spec::PlatformSpec) -> NetIslands {
    NetIslands::new(
        Box::new(TcBackend::new()),
        Steering::new("/sys", "/proc"),
        spec,
        1.25,
    )
    .unwrap()
}

#[test]
fn a_units_frames_reach_its_class_through_its_groups_net_prio() {
    let _one = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let mount = match NetPrioMount::ensure() {
        Ok(m) => m,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let real = match common::real_v1() {
        Ok(r) => r,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let Some(np) = real.paths().net_prio.clone() else {
        println!("skipped: the v1 net_prio hierarchy is not writable");
        return;
    };
    let veth = Veth::new();
    let spec = spec(&real, &veth.host, "");
    let net = islands(&spec);
    let clock = ManualClock::new();
    let mut c = real.start_with_network(spec, &clock, None, net);
    let warnings = c.status().warnings;
    assert!(!warnings.iter().any(|w| w.contains("wire")), "{warnings:?}");
    let group: PathBuf = np.join(&real.root).join("main/api");
    let map = std::fs::read_to_string(group.join("net_prio.ifpriomap")).unwrap();
    assert!(
        map.lines()
            .any(|l| l == format!("{} {}", veth.host, 0x0001_0010)),
        "{map}"
    );
    let status = c.status();
    assert!(
        status.network[0].classification.contains("api"),
        "{:?}",
        status.network[0]
    );

    // A process outside the unit: its frames go to the default class.
    Sender::start(&Datagrams::Raw(&veth.host), SENT, None).send();
    assert_eq!(packets(None, &veth.host, 0x10), 0);
    assert!(packets(None, &veth.host, 0x2) >= SENT);

    // The same frames from a process of the unit reach its class.
    let sender = Sender::start(&Datagrams::Raw(&veth.host), SENT, None);
    adopt(&mut c, "api", sender.pid());
    let cg = std::fs::read_to_string(format!("/proc/{}/cgroup", sender.pid())).unwrap();
    assert!(
        cg.lines()
            .any(|l| l.contains("net_prio") && l.ends_with("/main/api")),
        "{cg}"
    );
    sender.send();
    assert_eq!(packets(None, &veth.host, 0x10), SENT);

    // A unit made at run time with a class: its group gets class 1:11,
    // its process's frames reach it; `unit rm` takes the class away.
    root_asks(
        &mut c,
        Request::UnitAdd {
            unit: "job".into(),
            island: Some("main".into()),
            settings: atoll_proto::runtime::UnitSettings {
                network: Some(atoll_proto::runtime::NetClassSettings {
                    island: "wire".into(),
                    share: Some(200),
                    ..Default::default()
                }),
                ..Default::default()
            },
        },
    );
    let job: PathBuf = np.join(&real.root).join("main/job");
    let map = std::fs::read_to_string(job.join("net_prio.ifpriomap")).unwrap();
    assert!(
        map.lines()
            .any(|l| l == format!("{} {}", veth.host, 0x0001_0011)),
        "{map}"
    );
    let sender = Sender::start(&Datagrams::Raw(&veth.host), SENT, None);
    adopt(&mut c, "job", sender.pid());
    sender.send();
    assert_eq!(packets(None, &veth.host, 0x11), SENT);
    root_asks(&mut c, Request::UnitRm { unit: "job".into() });
    assert!(!job.exists());
    assert!(TcBackend::new()
        .leaf_stats(&veth.host)
        .unwrap()
        .iter()
        .all(|s| s.minor != 0x11));

    // `atoll run --unit ran --net-island wire`: the adopt that makes the
    // unit gives it the class (1:11 again, free since); `unit set
    // --no-net-class` takes it off the unit, which stays: the group's
    // priority written back, its frames in the default class.
    let sender = Sender::start(&Datagrams::Raw(&veth.host), SENT, None);
    root_asks(
        &mut c,
        Request::Adopt {
            unit: "ran".into(),
            pid: sender.pid(),
            island: Some("main".into()),
            network: Some(atoll_proto::runtime::NetClassSettings {
                island: "wire".into(),
                ..Default::default()
            }),
        },
    );
    let ran: PathBuf = np.join(&real.root).join("main/ran");
    let prio = |dir: &Path| {
        let map = std::fs::read_to_string(dir.join("net_prio.ifpriomap")).unwrap();
        map.lines().find_map(|l| {
            l.strip_prefix(&format!("{} ", veth.host))
                .map(str::to_string)
        })
    };
    assert_eq!(prio(&ran).as_deref(), Some("65553"));
    sender.send();
    assert_eq!(packets(None, &veth.host, 0x11), SENT);
    root_asks(
        &mut c,
        Request::UnitSet {
            unit: "ran".into(),
            settings: atoll_proto::runtime::UnitSettings {
                clear_network: true,
                ..Default::default()
            },
        },
    );
    assert_eq!(prio(&ran).as_deref(), Some("0"));
    let before = packets(None, &veth.host, 0x2);
    let sender = Sender::start(&Datagrams::Raw(&veth.host), SENT, None);
    adopt(&mut c, "ran", sender.pid());
    sender.send();
    assert!(packets(None, &veth.host, 0x2) >= before + SENT);
    assert!(TcBackend::new()
        .leaf_stats(&veth.host)
        .unwrap()
        .iter()
        .all(|s| s.minor != 0x11));
    root_asks(&mut c, Request::UnitRm { unit: "ran".into() });

    c.teardown().unwrap();
    let log: Vec<String> = c
        .decisions()
        .query(Some("wire"), 100)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        log.iter()
            .any(|d| d.contains("unit api: the sockets of its group get class 1:10")),
        "{log:?}"
    );
    assert!(
        log.iter()
            .any(|d| d.contains("unit job: the sockets of its group get class 1:11")),
        "{log:?}"
    );
    assert!(
        log.iter()
            .any(|d| d.contains("unit job: its group's priority on")),
        "{log:?}"
    );
    let root = TcBackend::new().root_qdisc(&veth.host).unwrap();
    assert!(root.is_kernel_default(), "{root}");
    assert!(!group.exists());
    drop(real);
    drop(veth);
    drop(mount);
}

#[test]
fn after_a_crash_the_next_daemon_adopts_the_interface_and_restores_it_exactly() {
    let _one = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let real = match common::real_v1() {
        Ok(r) => r,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let veth = Veth::new();
    let xps = PathBuf::from("/sys/class/net")
        .join(&veth.host)
        .join("queues/tx-0/xps_cpus");
    let qdiscs = || sh("tc", &["-j", "qdisc", "show", "dev", &veth.host]);
    let (qdiscs_before, xps_before) = (qdiscs(), std::fs::read_to_string(&xps).unwrap());
    let cpus: Vec<u32> = real.topo.online().iter().collect();
    let tx = cpus[cpus.len() - 1];
    let spec = spec(&real, &veth.host, &format!("tx_cpus = \"{tx}\"\n"));
    let state = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let first = real.start_with_network(
        spec.clone(),
        &clock,
        Some(state.path().to_path_buf()),
        islands(&spec),
    );
    let root = TcBackend::new().root_qdisc(&veth.host).unwrap();
    assert!(root.is_atolls_tree(), "{root}");
    assert_ne!(std::fs::read_to_string(&xps).unwrap(), xps_before);
    // The crash: no teardown.
    drop(first);

    let mut second = real.start_with_network(
        spec.clone(),
        &clock,
        Some(state.path().to_path_buf()),
        islands(&spec),
    );
    let warnings = second.status().warnings;
    assert!(!warnings.iter().any(|w| w.contains("wire")), "{warnings:?}");
    assert!(TcBackend::new()
        .root_qdisc(&veth.host)
        .unwrap()
        .is_atolls_tree());
    second.teardown().unwrap();
    assert_eq!(qdiscs(), qdiscs_before);
    assert_eq!(std::fs::read_to_string(&xps).unwrap(), xps_before);
    let log: Vec<String> = second
        .decisions()
        .query(Some("wire"), 100)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        log.iter()
            .any(|d| d.contains("adopted from the run before")),
        "{log:?}"
    );
}
