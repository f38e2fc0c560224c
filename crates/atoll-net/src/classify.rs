//! Classification of a unit's traffic by its cgroup, through HTB's own
//! rule: a packet whose `skb->priority` is one of the HTB qdisc's class ids
//! goes to that class before any filter runs. cgroup v1 `net_prio` gives
//! every socket of a cgroup a priority per interface
//! (`net_prio.ifpriomap`, `"IF PRIO"`), so writing a unit's class id there
//! classifies its traffic with no tc filter at all (a socket that sets
//! `SO_PRIORITY` itself keeps its own). Only the unit groups atoll created
//! are written; what each held for the interface is kept to be written
//! back.

use std::fs;
use std::path::{Path, PathBuf};

use crate::NetError;

/// The `net_prio` file of a group.
pub const IFPRIOMAP: &str = "net_prio.ifpriomap";

/// The priority `iface` has in the `ifpriomap` text `map` (0 when not
/// listed, as the kernel lists only interfaces it knows).
pub fn prio_of(map: &str, iface: &str) -> u32 {
    map.lines()
        .filter_map(|l| l.split_once(' '))
        .find(|(i, _)| *i == iface)
        .and_then(|(_, p)| p.trim().parse().ok())
        .unwrap_or(0)
}

/// A group's priority for an interface, as it was before atoll set it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedPrio {
    /// The group's `net_prio.ifpriomap`.
    pub path: PathBuf,
    /// The interface.
    pub iface: String,
    /// The priority it had.
    pub prio: u32,
}

fn io_err(path: &Path, source: std::io::Error) -> NetError {
    NetError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Gives the sockets of the group at `group_dir` (a `net_prio` hierarchy
/// directory) priority `classid` on `iface`; returns what it had.
pub fn set_class(group_dir: &Path, iface: &str, classid: u32) -> Result<SavedPrio, NetError> {
    let path = group_dir.join(IFPRIOMAP);
    let before = fs::read_to_string(&path).map_err(|e| io_err(&path, e))?;
    fs::write(&path, format!("{iface} {classid}")).map_err(|e| io_err(&path, e))?;
    Ok(SavedPrio {
        prio: prio_of(&before, iface),
        iface: iface.to_string(),
        path,
    })
}

/// Writes a saved priority back. A group that is gone (the unit was
/// removed) has nothing left to restore.
pub fn restore(saved: &SavedPrio) -> Result<(), NetError> {
    match fs::write(&saved.path, format!("{} {}", saved.iface, saved.prio)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(&saved.path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_priority_of_one_interface() {
        let map = "lo 0\neth0 5\nv0 65552\n";
        assert_eq!(prio_of(map, "v0"), 0x0001_0010);
        assert_eq!(prio_of(map, "eth0"), 5);
        assert_eq!(prio_of(map, "eth1"), 0);
    }

    #[test]
    fn sets_a_class_and_writes_the_old_priority_back() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(IFPRIOMAP);
        // A fake file: the kernel's is a map, a plain file keeps the last write.
        fs::write(&file, "lo 0\nv0 3\n").unwrap();
        let saved = set_class(dir.path(), "v0", 0x0001_0011).unwrap();
        assert_eq!(saved.prio, 3);
        assert_eq!(fs::read_to_string(&file).unwrap(), "v0 65553");
        restore(&saved).unwrap();
        assert_eq!(fs::read_to_string(&file).unwrap(), "v0 3");
    }

    #[test]
    fn a_group_without_net_prio_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        match set_class(dir.path(), "v0", 1) {
            Err(NetError::Io { path, .. }) => assert!(path.ends_with(IFPRIOMAP)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn restoring_into_a_removed_group_is_nothing_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let saved = SavedPrio {
            path: dir.path().join("gone").join(IFPRIOMAP),
            iface: "v0".to_string(),
            prio: 0,
        };
        restore(&saved).unwrap();
    }
}
