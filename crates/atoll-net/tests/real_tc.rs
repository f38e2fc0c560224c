//! Real `tc` on veth pairs, in network namespaces these tests create and
//! delete (`atl<pid>...`). Skipped, saying why, without root or `tc`/`ip`.
//! Nothing outside the namespaces is touched: the only host-side object is
//! a sysfs mount of the namespace on a temporary directory, unmounted by a
//! guard.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use atoll_core::IdSet;
use atoll_net::{
    Interfaces, LeafQdisc, NetBackend, NetError, Steering, TcBackend, TcClass, TcPlan,
};

static SEQ: AtomicU32 = AtomicU32::new(0);

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
    None
}

fn sh(prog: &str, args: &[&str]) -> String {
    let out = Command::new(prog).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{prog} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A network namespace with a veth pair `<ns>a`/`<ns>b`, both up, `a`
/// with address 10.213.0.1/24 and 10.213.0.2 a permanent neighbour on it
/// at `b`'s address (so packets to .2 leave through `a`'s qdisc, with no
/// ARP); deleted (with the pair) on drop.
struct Netns {
    name: String,
}

impl Netns {
    fn new() -> Self {
        let name = format!(
            "atl{}n{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        sh("ip", &["netns", "add", &name]);
        let ns = Self { name };
        let (a, b) = (ns.a(), ns.b());
        let ip = |args: &[&str]| {
            let mut v = vec!["-n", ns.name.as_str()];
            v.extend_from_slice(args);
            sh("ip", &v)
        };
        ip(&["link", "add", &a, "type", "veth", "peer", "name", &b]);
        ip(&["addr", "add", "10.213.0.1/24", "dev", &a]);
        ip(&["link", "set", &a, "up"]);
        ip(&["link", "set", &b, "up"]);
        // A permanent neighbour, so that no packet waits for ARP.
        let link = ip(&["-j", "link", "show", &b]);
        let v: serde_json::Value = serde_json::from_str(&link).unwrap();
        let mac = v[0]["address"].as_str().unwrap().to_string();
        ip(&[
            "neigh",
            "replace",
            "10.213.0.2",
            "lladdr",
            &mac,
            "dev",
            &a,
            "nud",
            "permanent",
        ]);
        ns
    }

    fn a(&self) -> String {
        format!("{}a", self.name)
    }

    fn b(&self) -> String {
        format!("{}b", self.name)
    }

    fn path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.name)
    }

    fn tc_json(&self, what: &str, dev: &str) -> String {
        sh("tc", &["-n", &self.name, "-j", what, "show", "dev", dev])
    }

    /// Runs `f` on a thread inside the namespace.
    fn within<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let ns = File::open(self.path()).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: `ns` is an open namespace file; setns changes only
                // this short-lived thread's network namespace.
                let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
                f()
            })
            .join()
            .unwrap()
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// The namespace's own sysfs, mounted on a temporary directory (sysfs shows
/// the network devices of the namespace of whoever mounts it).
struct NsSysfs {
    dir: tempfile::TempDir,
}

impl NsSysfs {
    fn mount(ns: &Netns) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let target = std::ffi::CString::new(dir.path().as_os_str().as_encoded_bytes()).unwrap();
        ns.within(|| {
            // SAFETY: all pointers are valid NUL-terminated strings for the
            // call; the mount is undone by Drop.
            let rc = unsafe {
                libc::mount(
                    c"sysfs".as_ptr(),
                    target.as_ptr(),
                    c"sysfs".as_ptr(),
                    0,
                    std::ptr::null(),
                )
            };
            assert_eq!(rc, 0, "mount sysfs: {}", std::io::Error::last_os_error());
        });
        Self { dir }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for NsSysfs {
    fn drop(&mut self) {
        let target =
            std::ffi::CString::new(self.dir.path().as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid path string; detaching our own mount.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

fn plan(leaf: LeafQdisc) -> TcPlan {
    let class = |minor, rate_bps, prio| TcClass {
        minor,
        rate_bps,
        ceil_bps: 100_000_000,
        prio,
    };
    TcPlan {
        rate_bps: 100_000_000,
        default_minor: 2,
        leaf,
        classes: vec![
            class(2, 10_000_000, 7),
            class(0x10, 60_000_000, 0),
            class(0x20, 30_000_000, 3),
        ],
    }
}

/// Applies the plan with fq_codel leaves, or pfifo where the kernel has no
/// fq_codel (said on stderr); the leaf used.
fn apply(ifs: &mut Interfaces<TcBackend>, iface: &str) -> LeafQdisc {
    match ifs.apply(iface, &plan(LeafQdisc::FqCodel)) {
        Ok(()) => LeafQdisc::FqCodel,
        Err(NetError::Command { stderr, .. }) if stderr.contains("unknown") => {
            eprintln!("this kernel has no fq_codel ({stderr}); pfifo leaves");
            ifs.take(iface).unwrap();
            ifs.apply(iface, &plan(LeafQdisc::Pfifo)).unwrap();
            LeafQdisc::Pfifo
        }
        Err(e) => panic!("{e}"),
    }
}

fn read_steer(sys: &Path, iface: &str) -> (String, String) {
    let q = sys.join("class/net").join(iface).join("queues");
    let r = |p: PathBuf| std::fs::read_to_string(p).unwrap().trim().to_string();
    (r(q.join("rx-0/rps_cpus")), r(q.join("tx-0/xps_cpus")))
}

#[test]
fn htb_tree_and_masks_are_applied_then_the_interface_is_restored_exactly() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let ns = Netns::new();
    let sys = NsSysfs::mount(&ns);
    let a = ns.a();
    let before = (
        ns.tc_json("qdisc", &a),
        ns.tc_json("class", &a),
        ns.tc_json("filter", &a),
        read_steer(sys.root(), &a),
    );
    let mut ifs = Interfaces::new(
        TcBackend::new().in_netns(&ns.name),
        Steering::new(sys.root(), "/proc"),
    );
    let snap = ifs.take(&a).unwrap().clone();
    assert!(snap.root.is_kernel_default(), "{:?}", snap.root);
    let leaf = apply(&mut ifs, &a);
    let root = TcBackend::new().in_netns(&ns.name).root_qdisc(&a).unwrap();
    assert_eq!((root.kind.as_str(), root.handle.as_str()), ("htb", "1:"));
    let mut minors: Vec<u16> = ifs
        .leaf_stats(&a)
        .unwrap()
        .iter()
        .map(|s| s.minor)
        .collect();
    minors.sort_unstable();
    assert_eq!(minors, vec![2, 0x10, 0x20]);
    assert!(ns.tc_json("qdisc", &a).contains(leaf.kind()));
    // CPU 1 does receive processing, CPU 0 transmit queue selection.
    let written = ifs
        .steer(
            &a,
            Some(&IdSet::parse("1").unwrap()),
            Some(&IdSet::parse("0").unwrap()),
        )
        .unwrap();
    assert!(!written.is_empty());
    let (rps, xps) = read_steer(sys.root(), &a);
    assert_eq!(
        atoll_net::mask::parse_mask(&rps),
        Some(IdSet::parse("1").unwrap())
    );
    assert_eq!(
        atoll_net::mask::parse_mask(&xps),
        Some(IdSet::parse("0").unwrap())
    );
    // A unit leaves: its class goes, the others stay.
    let mut smaller = plan(leaf);
    smaller.classes.retain(|c| c.minor != 0x20);
    ifs.apply(&a, &smaller).unwrap();
    let classes = ns.tc_json("class", &a);
    assert!(
        classes.contains("1:10") && !classes.contains("1:20"),
        "{classes}"
    );

    ifs.restore(&a).unwrap();
    let after = (
        ns.tc_json("qdisc", &a),
        ns.tc_json("class", &a),
        ns.tc_json("filter", &a),
        read_steer(sys.root(), &a),
    );
    assert_eq!(before, after);
    // The peer was never touched.
    assert!(ns.tc_json("qdisc", &ns.b()).contains("\"handle\":\"0:\""));
}

#[test]
fn a_sockets_priority_set_to_a_class_id_puts_its_packets_in_that_class() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let ns = Netns::new();
    let a = ns.a();
    let mut ifs = Interfaces::new(
        TcBackend::new().in_netns(&ns.name),
        Steering::new("/nonexistent-sysfs", "/proc"),
    );
    // No sysfs of the namespace here: steering is not used in this test.
    match ifs.take(&a) {
        Err(NetError::NoInterface { .. }) => {}
        other => panic!("{other:?}"),
    }
    let sys = NsSysfs::mount(&ns);
    let mut ifs = Interfaces::new(
        TcBackend::new().in_netns(&ns.name),
        Steering::new(sys.root(), "/proc"),
    );
    ifs.take(&a).unwrap();
    apply(&mut ifs, &a);
    let classid = plan(LeafQdisc::Pfifo).classes[1].classid();
    const SENT: u64 = 25;
    ns.within(|| {
        let sock = std::net::UdpSocket::bind("10.213.0.1:0").unwrap();
        let prio = i32::try_from(classid).unwrap();
        // SAFETY: a valid socket and a pointer to an int of the size given.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PRIORITY,
                std::ptr::from_ref(&prio).cast(),
                libc::socklen_t::try_from(std::mem::size_of::<i32>()).unwrap(),
            )
        };
        assert_eq!(rc, 0, "SO_PRIORITY: {}", std::io::Error::last_os_error());
        for _ in 0..SENT {
            sock.send_to(b"atoll", "10.213.0.2:9").unwrap();
        }
    });
    let stats = ifs.leaf_stats(&a).unwrap();
    let of = |minor| stats.iter().find(|s| s.minor == minor).unwrap().packets;
    assert_eq!(of(0x10), SENT, "{stats:?}");
    assert_eq!(of(0x20), 0, "{stats:?}");
    ifs.restore(&a).unwrap();
}

#[test]
fn an_interface_someone_configured_is_refused_and_left_as_it_is() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let ns = Netns::new();
    let sys = NsSysfs::mount(&ns);
    let a = ns.a();
    sh(
        "tc",
        &[
            "-n", &ns.name, "qdisc", "add", "dev", &a, "root", "handle", "8001:", "tbf", "rate",
            "1mbit", "burst", "32kbit", "latency", "400ms",
        ],
    );
    let before = ns.tc_json("qdisc", &a);
    let mut ifs = Interfaces::new(
        TcBackend::new().in_netns(&ns.name),
        Steering::new(sys.root(), "/proc"),
    );
    match ifs.take(&a) {
        Err(NetError::ForeignQdisc { kind, handle, .. }) => {
            assert_eq!((kind.as_str(), handle.as_str()), ("tbf", "8001:"));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        ifs.apply(&a, &plan(LeafQdisc::Pfifo)),
        Err(NetError::NotManaged { .. })
    ));
    assert_eq!(ns.tc_json("qdisc", &a), before);
}

#[test]
fn a_missing_interface_is_an_error_naming_it() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let ns = Netns::new();
    let mut tc = TcBackend::new().in_netns(&ns.name);
    match tc.root_qdisc("atlnothere0") {
        Err(NetError::NoInterface { iface }) => assert_eq!(iface, "atlnothere0"),
        other => panic!("{other:?}"),
    }
}
