//! cgroup v2 classification with the real `nft` (issue 17): a rule in
//! atoll's own table gives the sockets of a v2 group its HTB class id as
//! priority, so UDP datagrams a process of the group sends are counted in
//! class `1:10`, and the same datagrams from a process outside the group
//! in the default class `1:2`.
//!
//! Everything lives in a network namespace of the test's own (nft tables
//! are per namespace, so the host's ruleset is never read or written): a
//! veth pair there, an HTB tree on one end, a permanent neighbour so that
//! no ARP is needed. The group is `atoll-nft-<pid>` under the v2 mount
//! (`/sys/fs/cgroup/unified` on this hybrid machine, `/sys/fs/cgroup` on a
//! pure v2 one) and holds only the child the test started. On drop: the
//! children are killed, the group removed, the namespace (with its table
//! and links) deleted. Runs only as root with `nft`, `ip`, `tc`,
//! `unshare`, `nsenter` and `/usr/bin/python3`; prints "skipped: ..."
//! otherwise.

#[path = "support/sender.rs"]
mod sender;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use atoll_net::nft::{table_name, NftClassifier, NftCommand, NftRule};
use atoll_net::{NetBackend, TcBackend};
use sender::{packets, Datagrams, Sender, PYTHON};

const SENT: u64 = 20;

fn sh(prog: &str, args: &[&str]) -> String {
    let out = Command::new(prog).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{prog} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn found(prog: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {prog}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The cgroup v2 mount, from /proc/self/mounts.
fn v2_root() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[2] == "cgroup2")
        .map(|f| PathBuf::from(f[1]))
}

fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    for prog in ["nft", "ip", "tc", "unshare", "nsenter"] {
        if !found(prog) {
            return Some(format!(
                "no `{prog}` (apt-get install nftables iproute2 util-linux)"
            ));
        }
    }
    if !Path::new(PYTHON).exists() {
        return Some(format!("no {PYTHON}"));
    }
    if v2_root().is_none() {
        return Some("no cgroup v2 hierarchy mounted".into());
    }
    None
}

/// The test's namespace, veth pair, HTB tree and v2 group; all removed on
/// drop (the table goes with the namespace, and is deleted first anyway).
struct World {
    ns: String,
    dev: String,
    group: PathBuf,
    v2: PathBuf,
}

impl World {
    fn new() -> Self {
        let pid = std::process::id();
        let v2 = v2_root().unwrap();
        let w = Self {
            ns: format!("atlnft{pid}"),
            dev: "nfta".to_string(),
            group: v2.join(format!("atoll-nft-{pid}")),
            v2,
        };
        sh("ip", &["netns", "add", &w.ns]);
        let ip = |args: &[&str]| {
            let mut all = vec!["-n", w.ns.as_str()];
            all.extend_from_slice(args);
            sh("ip", &all);
        };
        ip(&[
            "link", "add", "nfta", "type", "veth", "peer", "name", "nftb",
        ]);
        ip(&["link", "set", "nfta", "up"]);
        ip(&["link", "set", "nftb", "up"]);
        ip(&["addr", "add", "10.77.0.1/24", "dev", "nfta"]);
        ip(&[
            "neigh",
            "add",
            "10.77.0.2",
            "lladdr",
            "02:00:00:00:00:02",
            "dev",
            "nfta",
            "nud",
            "permanent",
        ]);
        let tc = "qdisc add dev nfta root handle 1: htb default 2\n\
                  class add dev nfta parent 1: classid 1:1 htb rate 1gbit quantum 1514\n\
                  class add dev nfta parent 1:1 classid 1:2 htb rate 100mbit ceil 1gbit quantum 1514\n\
                  class add dev nfta parent 1:1 classid 1:10 htb rate 100mbit ceil 1gbit quantum 1514\n\
                  qdisc add dev nfta parent 1:2 handle 2: pfifo\n\
                  qdisc add dev nfta parent 1:10 handle 10: pfifo\n";
        let mut child = Command::new("tc")
            .args(["-n", &w.ns, "-batch", "-"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(tc.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success(), "tc batch");
        std::fs::create_dir(&w.group).unwrap();
        w
    }

    fn packets(&self, minor: u16) -> u64 {
        packets(Some(&self.ns), &self.dev, minor)
    }

    fn ruleset(&self) -> String {
        sh("ip", &["netns", "exec", &self.ns, "nft", "list", "ruleset"])
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.group);
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

#[test]
fn a_v2_groups_datagrams_reach_its_class_through_atolls_nft_table() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let w = World::new();
    let root = format!("atoll-nft-test-{}", std::process::id());
    let mut nft = NftClassifier::new(&root, NftCommand::new().with_v2_root(&w.v2).in_netns(&w.ns));
    let table = table_name(&root);
    // A stale table of the same name (a crashed daemon's) is replaced.
    sh(
        "ip",
        &[
            "netns", "exec", &w.ns, "nft", "add", "table", "inet", &table,
        ],
    );
    let rule = NftRule::for_group(&w.v2, &w.group, 0x0001_0010).unwrap();
    assert!(nft.set(vec![rule]).unwrap());
    let listed = w.ruleset();
    assert!(listed.contains(&format!("table inet {table}")), "{listed}");
    assert!(listed.contains("meta priority set 1:10"), "{listed}");

    // Outside the group: the default class.
    Sender::start(&Datagrams::Udp("10.77.0.2"), SENT, Some(&w.ns)).send();
    assert_eq!(w.packets(0x10), 0);
    assert!(w.packets(0x2) >= SENT, "default class: {}", w.packets(0x2));

    // Inside: class 1:10.
    let inside = Sender::start(&Datagrams::Udp("10.77.0.2"), SENT, Some(&w.ns));
    std::fs::write(w.group.join("cgroup.procs"), inside.pid().to_string()).unwrap();
    inside.send();
    assert_eq!(w.packets(0x10), SENT);

    // Teardown deletes the table and nothing else of the namespace's.
    nft.remove().unwrap();
    assert_eq!(w.ruleset().trim(), "");
    let root_qdisc = TcBackend::new().in_netns(&w.ns).root_qdisc(&w.dev).unwrap();
    assert_eq!(root_qdisc.kind, "htb");
}
