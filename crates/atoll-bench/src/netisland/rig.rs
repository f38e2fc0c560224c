//! The bench's own network: a namespace and a veth pair whose host end
//! carries the link, and (when none is mounted) a v1 `net_prio` hierarchy
//! for the daemon's classification. Everything is the bench's own and is
//! removed on drop; nothing else is touched.
//!
//! Names: namespace `atlb<pid>n`, host end `atlb<pid>h` (`10.213.<k>.1/30`,
//! `k` = pid mod 250), peer `atlb<pid>p` in the namespace (`.2/30`).
//! [`Rig::shape`] puts a one-class HTB (handle `9:`, the link rate, a FIFO
//! leaf) on the host end for the configurations without a network island;
//! [`Rig::unshape`] deletes it so the island finds the kernel's default.

use std::path::Path;
use std::process::Command;

use crate::error::BenchError;

/// What the rig needs: root, `ip` and `tc`; `None` when all is there.
pub fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (the rig makes a network namespace and a veth pair)".into());
    }
    for prog in ["tc", "ip"] {
        if Command::new(prog).arg("-V").output().is_err() {
            return Some(format!("`{prog}` is not installed (iproute2)"));
        }
    }
    None
}

fn run(prog: &str, args: &[&str]) -> Result<String, BenchError> {
    let out = Command::new(prog)
        .args(args)
        .output()
        .map_err(|e| BenchError::Setup {
            what: format!("{prog} {}", args.join(" ")),
            reason: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(BenchError::Setup {
            what: format!("{prog} {}", args.join(" ")),
            reason: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The rig's names and addresses for process `pid`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Names {
    /// The namespace.
    pub ns: String,
    /// The host end (the shaped link).
    pub host: String,
    /// The peer, in the namespace.
    pub peer: String,
    /// The host end's address.
    pub host_ip: String,
    /// The peer's address (where the receivers listen).
    pub peer_ip: String,
}

impl Names {
    /// The names for `pid`.
    pub fn for_pid(pid: u32) -> Self {
        let k = pid % 250;
        Self {
            ns: format!("atlb{pid}n"),
            host: format!("atlb{pid}h"),
            peer: format!("atlb{pid}p"),
            host_ip: format!("10.213.{k}.1"),
            peer_ip: format!("10.213.{k}.2"),
        }
    }
}

/// The namespace and the veth pair, deleted on drop.
#[derive(Debug)]
pub struct Rig {
    /// Names and addresses.
    pub names: Names,
    shaped: bool,
    net_prio: Option<tempfile::TempDir>,
}

impl Rig {
    /// Creates the namespace and the pair, addresses them, brings them up.
    pub fn new() -> Result<Self, BenchError> {
        let names = Names::for_pid(std::process::id());
        let n = &names;
        run("ip", &["netns", "add", &n.ns])?;
        // From here on, drop removes whatever was made.
        let mut rig = Self {
            names: names.clone(),
            shaped: false,
            net_prio: None,
        };
        run(
            "ip",
            &[
                "link", "add", &n.host, "type", "veth", "peer", "name", &n.peer, "netns", &n.ns,
            ],
        )?;
        run(
            "ip",
            &["addr", "add", &format!("{}/30", n.host_ip), "dev", &n.host],
        )?;
        run("ip", &["link", "set", &n.host, "up"])?;
        let inns = |args: &[&str]| {
            let mut a = vec!["-n", n.ns.as_str()];
            a.extend_from_slice(args);
            run("ip", &a)
        };
        inns(&["addr", "add", &format!("{}/30", n.peer_ip), "dev", &n.peer])?;
        inns(&["link", "set", &n.peer, "up"])?;
        inns(&["link", "set", "lo", "up"])?;
        rig.net_prio = mount_net_prio()?;
        Ok(rig)
    }

    /// The link shaped by one FIFO class at `rate_mbit` (no network
    /// island); nothing when it already is.
    pub fn shape(&mut self, rate_mbit: u32) -> Result<(), BenchError> {
        if self.shaped {
            return Ok(());
        }
        let h = self.names.host.clone();
        let rate = format!("{rate_mbit}mbit");
        run(
            "tc",
            &[
                "qdisc", "add", "dev", &h, "root", "handle", "9:", "htb", "default", "1",
            ],
        )?;
        self.shaped = true;
        run(
            "tc",
            &[
                "class", "add", "dev", &h, "parent", "9:", "classid", "9:1", "htb", "rate", &rate,
                "ceil", &rate,
            ],
        )?;
        Ok(())
    }

    /// Removes [`shape`](Self::shape)'s tree.
    pub fn unshape(&mut self) -> Result<(), BenchError> {
        if self.shaped {
            self.shaped = false;
            run(
                "tc",
                &[
                    "qdisc",
                    "del",
                    "dev",
                    &self.names.host,
                    "root",
                    "handle",
                    "9:",
                ],
            )?;
        }
        Ok(())
    }

    /// `ip netns exec NS` before `program`.
    pub fn in_ns(&self) -> Vec<String> {
        ["netns", "exec", &self.names.ns].map(String::from).into()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = self.unshape();
        let _ = Command::new("ip")
            .args(["link", "del", &self.names.host])
            .output();
        let _ = Command::new("ip")
            .args(["netns", "del", &self.names.ns])
            .output();
        if let Some(dir) = self.net_prio.take() {
            umount(dir.path());
        }
    }
}

/// Mounts a v1 `net_prio` hierarchy on a temporary directory when none is
/// mounted (so that the daemon classifies by cgroup); `None` when one is,
/// or on a machine where it cannot be (the network island then warns and
/// the senders' traffic goes to its default class).
fn mount_net_prio() -> Result<Option<tempfile::TempDir>, BenchError> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mounted = info.lines().any(|l| {
        l.split_once(" - ").is_some_and(|(_, fs)| {
            fs.starts_with("cgroup ") && fs.split(',').any(|o| o == "net_prio")
        })
    });
    if mounted || !info.lines().any(|l| l.contains(" - cgroup ")) {
        return Ok(None);
    }
    let dir = crate::temp_dir("netprio")?;
    let Ok(target) = std::ffi::CString::new(dir.path().as_os_str().as_encoded_bytes()) else {
        return Ok(None);
    };
    // SAFETY: valid NUL-terminated strings; undone by `umount` on drop.
    let rc = unsafe {
        libc::mount(
            c"cgroup".as_ptr(),
            target.as_ptr(),
            c"cgroup".as_ptr(),
            0,
            c"net_prio".as_ptr().cast(),
        )
    };
    Ok((rc == 0).then_some(dir))
}

fn umount(path: &Path) {
    if let Ok(target) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) {
        // SAFETY: a valid path string; our own mount.
        if unsafe { libc::umount2(target.as_ptr(), 0) } != 0 {
            // SAFETY: as above.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_bench_own_and_fit_an_interface_name() {
        let n = Names::for_pid(4_194_303);
        assert_eq!(n.ns, "atlb4194303n");
        assert!(n.host.len() <= 15 && n.peer.len() <= 15, "{n:?}");
        assert!(n.host.starts_with("atlb") && n.peer.starts_with("atlb"));
        assert_eq!(n.host_ip, "10.213.53.1");
        assert_eq!(n.peer_ip, "10.213.53.2");
        assert_ne!(Names::for_pid(1), Names::for_pid(2));
    }
}
