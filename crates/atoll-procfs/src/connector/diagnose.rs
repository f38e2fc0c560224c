//! Why the kernel did not answer a subscription: pure checks on the text of
//! `/proc/self/status` and `/proc/self/uid_map`.
//!
//! The kernel answers a `PROC_CN_MCAST_LISTEN` with an acknowledgement,
//! except in three cases where it stays silent: the caller is outside the
//! initial user or pid namespace (the request is ignored), the kernel was
//! built without `CONFIG_PROC_EVENTS` (nothing handles the request), or
//! the caller lacks `CAP_NET_ADMIN` on a kernel that requires it and no
//! other process listens (the refusal is multicast to the listeners only,
//! and there are none).

/// `CAP_NET_ADMIN`'s bit in the capability sets.
pub const CAP_NET_ADMIN: u32 = 12;

/// Whether the `CapEff:` line of a `status` text has capability `bit`;
/// `None` without a readable line.
pub fn has_capability(status: &str, bit: u32) -> Option<bool> {
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    let set = u64::from_str_radix(hex.trim(), 16).ok()?;
    Some(bit < 64 && set & (1 << bit) != 0)
}

/// How many pid namespaces deep the process is, from the `NSpid:` line of
/// a `status` text (1: the initial one); `None` without the line (kernels
/// before 4.1).
pub fn pid_ns_depth(status: &str) -> Option<usize> {
    let ids = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    Some(ids.split_whitespace().count())
}

/// Whether a `uid_map` text is the initial user namespace's identity map
/// (`0 0 4294967295`).
pub fn is_initial_uid_map(uid_map: &str) -> bool {
    let lines: Vec<Vec<&str>> = uid_map
        .lines()
        .map(|l| l.split_whitespace().collect())
        .filter(|f: &Vec<&str>| !f.is_empty())
        .collect();
    lines.len() == 1 && lines[0] == ["0", "0", "4294967295"]
}

/// Whether `/proc/net/connector` lists the proc events callback
/// (`cn_proc`), which exists only with `CONFIG_PROC_EVENTS`.
pub fn lists_cn_proc(connector: &str) -> bool {
    connector
        .lines()
        .any(|l| l.split_whitespace().next() == Some("cn_proc"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tatoll\nNSpid:\t4242\nCapPrm:\t000001ffffffffff\n\
                          CapEff:\t000001ffffffffff\n";

    #[test]
    fn capabilities_come_from_the_effective_set() {
        assert_eq!(has_capability(STATUS, CAP_NET_ADMIN), Some(true));
        let none = "CapPrm:\t000001ffffffffff\nCapEff:\t0000000000000000\n";
        assert_eq!(has_capability(none, CAP_NET_ADMIN), Some(false));
        assert_eq!(
            has_capability("CapEff:\t0000000000001000\n", 12),
            Some(true)
        );
        assert_eq!(has_capability("CapEff:\tzz\n", 12), None);
        assert_eq!(has_capability("Name:\tx\n", 12), None);
        assert_eq!(
            has_capability("CapEff:\tffffffffffffffff\n", 64),
            Some(false)
        );
    }

    #[test]
    fn namespace_depth_and_uid_map() {
        assert_eq!(pid_ns_depth(STATUS), Some(1));
        assert_eq!(pid_ns_depth("NSpid:\t4242\t17\n"), Some(2));
        assert_eq!(pid_ns_depth("Name:\tx\n"), None);
        assert!(is_initial_uid_map("         0          0 4294967295\n"));
        assert!(!is_initial_uid_map("         0     100000      65536\n"));
        assert!(!is_initial_uid_map(""));
    }

    #[test]
    fn cn_proc_registration() {
        assert!(lists_cn_proc("Name            ID\ncn_proc         1:1\n"));
        assert!(!lists_cn_proc("Name            ID\nw1              3:1\n"));
    }
}
