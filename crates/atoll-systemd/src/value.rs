//! systemd's resource properties as atoll handles them: their names, the
//! values they carry over D-Bus, how they are written in messages, and the
//! systemd versions that have them.
//!
//! Values are plain data ([`PropValue`]) rather than D-Bus types, so the
//! translation, the driver's records and the fake manager need no bus.
//! Per-device IO limits are kept one entry per property and device (the
//! key [`io_key`] builds), so a change to one device's limit is one entry
//! of the diff; [`assemble`] groups them back into one `a(st)` per
//! property for the call.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use atoll_core::CpuSet;
use serde::{Deserialize, Serialize};

/// `AllowedCPUs` (`ay`, a CPU bitmask; empty = not set).
pub const ALLOWED_CPUS: &str = "AllowedCPUs";
/// `AllowedMemoryNodes` (`ay`).
pub const ALLOWED_MEMORY_NODES: &str = "AllowedMemoryNodes";
/// `CPUWeight` (`t`; 1..=10000, 0 = idle from systemd 252, `u64::MAX` = not set).
pub const CPU_WEIGHT: &str = "CPUWeight";
/// `CPUQuotaPerSecUSec` (`t`; CPU time per second, µs; `u64::MAX` = no quota).
pub const CPU_QUOTA: &str = "CPUQuotaPerSecUSec";
/// `CPUQuotaPeriodUSec` (`t`; `u64::MAX` = systemd's default, 100 ms).
pub const CPU_QUOTA_PERIOD: &str = "CPUQuotaPeriodUSec";
/// `MemoryMin` (`t`, bytes).
pub const MEMORY_MIN: &str = "MemoryMin";
/// `MemoryLow` (`t`, bytes).
pub const MEMORY_LOW: &str = "MemoryLow";
/// `MemoryHigh` (`t`, bytes; `u64::MAX` = infinity).
pub const MEMORY_HIGH: &str = "MemoryHigh";
/// `MemoryMax` (`t`, bytes; `u64::MAX` = infinity).
pub const MEMORY_MAX: &str = "MemoryMax";
/// `IOWeight` (`t`; 1..=10000, `u64::MAX` = not set).
pub const IO_WEIGHT: &str = "IOWeight";
/// `IOReadBandwidthMax` (`a(st)`: device path, bytes per second).
pub const IO_READ_BPS: &str = "IOReadBandwidthMax";
/// `IOWriteBandwidthMax` (`a(st)`).
pub const IO_WRITE_BPS: &str = "IOWriteBandwidthMax";
/// `IOReadIOPSMax` (`a(st)`).
pub const IO_READ_IOPS: &str = "IOReadIOPSMax";
/// `IOWriteIOPSMax` (`a(st)`).
pub const IO_WRITE_IOPS: &str = "IOWriteIOPSMax";
/// The four per-device IO limit properties.
pub const IO_LIMITS: [&str; 4] = [IO_READ_BPS, IO_WRITE_BPS, IO_READ_IOPS, IO_WRITE_IOPS];
/// Every property the driver may set on a unit.
pub const ALL: [&str; 14] = [
    ALLOWED_CPUS,
    ALLOWED_MEMORY_NODES,
    CPU_WEIGHT,
    CPU_QUOTA,
    CPU_QUOTA_PERIOD,
    MEMORY_MIN,
    MEMORY_LOW,
    MEMORY_HIGH,
    MEMORY_MAX,
    IO_WEIGHT,
    IO_READ_BPS,
    IO_WRITE_BPS,
    IO_READ_IOPS,
    IO_WRITE_IOPS,
];

/// The oldest systemd the driver works with: `AttachProcessesToUnit`
/// (which moves later processes into atoll's scopes) came in 238.
pub const MIN_VERSION: u32 = 238;
/// `FreezeUnit` and `ThawUnit` came in 246.
pub const FREEZE_SINCE: u32 = 246;
/// `CPUWeight` 0 (`idle`, the group's `cpu.idle`) is accepted from 252.
pub const IDLE_WEIGHT_SINCE: u32 = 252;

/// The systemd version that introduced a property (those not listed are
/// older than [`MIN_VERSION`]).
pub fn since(property: &str) -> u32 {
    match property {
        MEMORY_MIN => 240,
        CPU_QUOTA_PERIOD => 242,
        ALLOWED_CPUS | ALLOWED_MEMORY_NODES => 244,
        _ => 0,
    }
}

/// A property value as it travels over D-Bus.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PropValue {
    /// `t`.
    U64(u64),
    /// `ay` (CPU and memory node bitmasks).
    Bytes(Vec<u8>),
    /// `a(st)`: (device path, limit) pairs.
    DeviceLimits(Vec<(String, u64)>),
    /// `s`.
    Str(String),
    /// `b`.
    Bool(bool),
    /// `au` (process ids).
    Pids(Vec<u32>),
}

/// The key of one device's limit in the driver's maps:
/// `"IOReadBandwidthMax /dev/block/8:0"`.
pub fn io_key(property: &str, device: &str) -> String {
    format!("{property} {device}")
}

/// The property and device of an [`io_key`], `None` for a plain property.
pub fn split_io_key(key: &str) -> Option<(&str, &str)> {
    key.split_once(' ').filter(|(p, _)| IO_LIMITS.contains(p))
}

/// The property a key belongs to (`IOReadBandwidthMax` for an IO key).
pub fn property_of(key: &str) -> &str {
    split_io_key(key).map_or(key, |(p, _)| p)
}

/// `/dev/block/MAJ:MIN`, the device path systemd resolves for a limit.
pub fn device_path(major: u32, minor: u32) -> String {
    format!("/dev/block/{major}:{minor}")
}

/// Turns per-key values into the properties of one `SetUnitProperties`
/// call: plain keys as they are, IO keys grouped into one `a(st)` per
/// property (devices in key order).
pub fn assemble(values: &BTreeMap<String, PropValue>) -> Vec<(String, PropValue)> {
    let mut out: Vec<(String, PropValue)> = Vec::new();
    let mut io: BTreeMap<&str, Vec<(String, u64)>> = BTreeMap::new();
    for (key, v) in values {
        match (split_io_key(key), v) {
            (Some((p, dev)), PropValue::U64(n)) => io.entry(p).or_default().push((dev.into(), *n)),
            _ => out.push((key.clone(), v.clone())),
        }
    }
    out.extend(
        io.into_iter()
            .map(|(p, l)| (p.to_string(), PropValue::DeviceLimits(l))),
    );
    out
}

/// The value a key has in a property as read from systemd: the property
/// itself, or for an IO key the device's limit (no entry: `u64::MAX`, no
/// limit).
pub fn value_of_key(key: &str, read: &PropValue) -> PropValue {
    match (split_io_key(key), read) {
        (Some((_, dev)), PropValue::DeviceLimits(l)) => PropValue::U64(
            l.iter()
                .rev()
                .find(|(d, _)| d == dev)
                .map_or(u64::MAX, |(_, n)| *n),
        ),
        (Some(_), _) => PropValue::U64(u64::MAX),
        (None, v) => v.clone(),
    }
}

/// The `ay` bitmask systemd uses for CPU and node sets: bit `i % 8` of
/// byte `i / 8` is id `i`.
pub fn to_mask(set: &CpuSet) -> Vec<u8> {
    let mut out = vec![0u8; set.last().map_or(0, |l| l as usize / 8 + 1)];
    for id in set.iter() {
        out[id as usize / 8] |= 1 << (id % 8);
    }
    out
}

/// The set a bitmask holds.
pub fn from_mask(mask: &[u8]) -> CpuSet {
    let mut set = CpuSet::new();
    for (i, byte) in mask.iter().enumerate() {
        // Ids above u32::MAX cannot be CPUs or nodes.
        let Some(base) = u32::try_from(i).ok().and_then(|i| i.checked_mul(8)) else {
            break;
        };
        for bit in 0..8u32 {
            if byte & (1 << bit) != 0 {
                set.insert(base + bit);
            }
        }
    }
    set
}

/// A value as `systemctl show` would write it for `key`'s property.
pub fn show(key: &str, v: &PropValue) -> String {
    let property = property_of(key);
    match v {
        PropValue::U64(u64::MAX) => match property {
            CPU_WEIGHT | IO_WEIGHT | CPU_QUOTA_PERIOD => "[not set]".into(),
            _ => "infinity".into(),
        },
        PropValue::U64(0) if property == CPU_WEIGHT => "idle".into(),
        PropValue::U64(n) => match split_io_key(key) {
            Some((_, dev)) => format!("{dev} {n}"),
            None => n.to_string(),
        },
        PropValue::Bytes(b) => from_mask(b).to_string(),
        PropValue::DeviceLimits(l) => l
            .iter()
            .map(|(d, n)| format!("{d} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        PropValue::Str(s) => s.clone(),
        PropValue::Bool(b) => if *b { "yes" } else { "no" }.into(),
        PropValue::Pids(p) => p.iter().map(u32::to_string).collect::<Vec<_>>().join(" "),
    }
}

/// `Name=value` for each entry, separated by spaces, as
/// [`BackendError::Refused`](atoll_core::backend::BackendError::Refused)
/// carries them.
pub fn describe<'a>(entries: impl IntoIterator<Item = (&'a String, &'a PropValue)>) -> String {
    let mut s = String::new();
    for (key, v) in entries {
        if !s.is_empty() {
            s.push(' ');
        }
        let _ = write!(s, "{}={}", property_of(key), show(key, v));
    }
    s
}

/// The major version in systemd's `Version` property (`"252.39-1~deb12u2"`,
/// `"v256.7"`, `"255"`), `None` if it has none.
pub fn parse_version(text: &str) -> Option<u32> {
    let t = text.trim().trim_start_matches(['v', 'V']);
    let digits: String = t.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(s: &str) -> CpuSet {
        CpuSet::parse(s).unwrap()
    }

    #[test]
    fn masks_round_trip_in_systemds_bit_order() {
        assert_eq!(to_mask(&set("0-3")), [0x0f]);
        assert_eq!(to_mask(&set("1,8,15")), [0x02, 0x81]);
        assert_eq!(to_mask(&CpuSet::new()), Vec::<u8>::new());
        for s in ["0", "7", "8", "0-63", "3,17,40-47,100"] {
            assert_eq!(from_mask(&to_mask(&set(s))), set(s), "{s}");
        }
    }

    #[test]
    fn io_keys_group_into_one_array_per_property() {
        let mut m = BTreeMap::new();
        m.insert(io_key(IO_READ_BPS, "/dev/block/8:0"), PropValue::U64(10));
        m.insert(io_key(IO_READ_BPS, "/dev/block/8:16"), PropValue::U64(20));
        m.insert(io_key(IO_WRITE_IOPS, "/dev/block/8:0"), PropValue::U64(5));
        m.insert(CPU_WEIGHT.to_string(), PropValue::U64(200));
        let call = assemble(&m);
        assert_eq!(
            call,
            [
                (CPU_WEIGHT.to_string(), PropValue::U64(200)),
                (
                    IO_READ_BPS.to_string(),
                    PropValue::DeviceLimits(vec![
                        ("/dev/block/8:0".into(), 10),
                        ("/dev/block/8:16".into(), 20)
                    ])
                ),
                (
                    IO_WRITE_IOPS.to_string(),
                    PropValue::DeviceLimits(vec![("/dev/block/8:0".into(), 5)])
                ),
            ]
        );
        let read = PropValue::DeviceLimits(vec![("/dev/block/8:16".into(), 7)]);
        assert_eq!(
            value_of_key(&io_key(IO_READ_BPS, "/dev/block/8:16"), &read),
            PropValue::U64(7)
        );
        assert_eq!(
            value_of_key(&io_key(IO_READ_BPS, "/dev/block/8:0"), &read),
            PropValue::U64(u64::MAX)
        );
        assert_eq!(split_io_key("CPUWeight"), None);
        assert_eq!(split_io_key("Foo bar"), None);
    }

    #[test]
    fn values_are_shown_as_systemctl_shows_them() {
        let m: Vec<(String, PropValue)> = vec![
            (CPU_WEIGHT.into(), PropValue::U64(0)),
            (IO_WEIGHT.into(), PropValue::U64(u64::MAX)),
            (MEMORY_MAX.into(), PropValue::U64(u64::MAX)),
            (ALLOWED_CPUS.into(), PropValue::Bytes(vec![0x0f, 0x01])),
            (
                io_key(IO_READ_BPS, "/dev/block/8:0"),
                PropValue::U64(1_048_576),
            ),
        ];
        assert_eq!(
            describe(m.iter().map(|(k, v)| (k, v))),
            "CPUWeight=idle IOWeight=[not set] MemoryMax=infinity AllowedCPUs=0-3,8 \
             IOReadBandwidthMax=/dev/block/8:0 1048576"
        );
    }

    #[test]
    fn versions() {
        assert_eq!(parse_version("252.39-1~deb12u2"), Some(252));
        assert_eq!(parse_version("v256.7-arch1"), Some(256));
        assert_eq!(parse_version("245"), Some(245));
        assert_eq!(parse_version("unknown"), None);
        assert!(since(ALLOWED_CPUS) > MIN_VERSION && since(CPU_WEIGHT) < MIN_VERSION);
    }
}
