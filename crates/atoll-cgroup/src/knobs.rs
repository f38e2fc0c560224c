//! Formatting and parsing of the knob values atoll writes.
//!
//! Each knob is read back before it is written so an unchanged value costs
//! one read and no write; these functions turn both sides into comparable
//! values. The kernel normalises some values (CPU lists are printed as
//! ranges, memory limits are rounded down to whole pages), so comparisons are
//! made on parsed values, never on raw strings.

use std::collections::BTreeMap;

use atoll_core::plan::CpuMax;
use atoll_core::spec::{DeviceId, IoLimit};

use crate::error::BadValue;

/// Page size the kernel rounds memory limits to. A larger page size only
/// makes atoll rewrite an equal value, never skip a different one by more
/// than this.
pub const PAGE_SIZE: u64 = 4096;

/// Default v2 `cpu.max` period, µs.
pub const DEFAULT_PERIOD_US: u64 = 100_000;

/// The v2 `cpu.max` text: `"QUOTA PERIOD"`, or `"max PERIOD"` when `max` is
/// `None` (then `period_if_unset` is used).
pub fn format_cpu_max(max: Option<CpuMax>, period_if_unset: u64) -> String {
    match max {
        Some(m) => format!("{} {}", m.quota_us, m.period_us),
        None => format!("max {period_if_unset}"),
    }
}

/// Parses v2 `cpu.max`: `(quota, period)`, quota `None` for `max`. A lone
/// quota (as accepted on write) gets the default period.
pub fn parse_cpu_max(text: &str) -> Result<(Option<u64>, u64), BadValue> {
    let t = text.trim();
    let mut it = t.split_whitespace();
    let (Some(q), p, None) = (it.next(), it.next(), it.next()) else {
        return Err(BadValue::new(
            t,
            "expected \"QUOTA PERIOD\" or \"max PERIOD\"",
        ));
    };
    let quota = match q {
        "max" => None,
        q => Some(
            q.parse::<u64>()
                .map_err(|_| BadValue::new(t, format!("quota {q:?} is not a number or max")))?,
        ),
    };
    let period = match p {
        None => DEFAULT_PERIOD_US,
        Some(p) => p
            .parse::<u64>()
            .map_err(|_| BadValue::new(t, format!("period {p:?} is not a number")))?,
    };
    Ok((quota, period))
}

/// A memory knob: bytes, or `"max"` for `None`.
pub fn format_memory(v: Option<u64>) -> String {
    v.map_or_else(|| "max".to_string(), |b| b.to_string())
}

/// Parses a v2 memory knob (`"max"` is `None`).
pub fn parse_memory(text: &str) -> Result<Option<u64>, BadValue> {
    match text.trim() {
        "max" => Ok(None),
        t => t
            .parse::<u64>()
            .map(Some)
            .map_err(|_| BadValue::new(t, "expected a byte count or max")),
    }
}

/// Whether a memory value read back equals the one wanted, allowing for the
/// kernel rounding down to a page.
pub fn memory_matches(current: Option<u64>, want: Option<u64>) -> bool {
    match (current, want) {
        (None, None) => true,
        (Some(c), Some(w)) => c <= w && w - c < PAGE_SIZE,
        _ => false,
    }
}

/// v1 memory limits have no "max": an unlimited limit reads back as a huge
/// page-aligned number (`PAGE_COUNTER_MAX * PAGE_SIZE`). Anything at or above
/// 2^62 is treated as unlimited.
pub fn v1_memory(value: u64) -> Option<u64> {
    (value < 1 << 62).then_some(value)
}

/// Parses `MAJ:MIN`.
pub fn parse_device(text: &str) -> Result<DeviceId, BadValue> {
    let (ma, mi) = text
        .split_once(':')
        .ok_or_else(|| BadValue::new(text, "expected MAJ:MIN"))?;
    let num = |s: &str| {
        s.parse::<u32>()
            .map_err(|_| BadValue::new(text, format!("{s:?} is not a device number")))
    };
    Ok(DeviceId {
        major: num(ma)?,
        minor: num(mi)?,
    })
}

/// One `io.max` line: `"MAJ:MIN rbps=.. wbps=.. riops=.. wiops=.."`, `max` for
/// unset limits.
pub fn format_io_max(l: &IoLimit) -> String {
    let v = |x: Option<u64>| x.map_or_else(|| "max".to_string(), |n| n.to_string());
    format!(
        "{}:{} rbps={} wbps={} riops={} wiops={}",
        l.device.major,
        l.device.minor,
        v(l.rbps),
        v(l.wbps),
        v(l.riops),
        v(l.wiops)
    )
}

/// The `io.max` line that removes every limit on `device`.
pub fn io_max_clear(device: DeviceId) -> IoLimit {
    IoLimit {
        device,
        rbps: None,
        wbps: None,
        riops: None,
        wiops: None,
    }
}

/// Parses `io.max` (one line per limited device). Unknown keys are ignored
/// so newer kernels' additions do not break reading.
pub fn parse_io_max(text: &str) -> Result<Vec<IoLimit>, BadValue> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let mut it = line.split_whitespace();
        let dev = parse_device(it.next().unwrap_or_default())
            .map_err(|e| BadValue::new(line, e.reason))?;
        let mut l = io_max_clear(dev);
        for tok in it {
            let (k, v) = tok
                .split_once('=')
                .ok_or_else(|| BadValue::new(line, format!("{tok:?} is not KEY=VALUE")))?;
            let v = match v {
                "max" => None,
                n => Some(n.parse::<u64>().map_err(|_| {
                    BadValue::new(line, format!("{k}={n:?} is not a number or max"))
                })?),
            };
            match k {
                "rbps" => l.rbps = v,
                "wbps" => l.wbps = v,
                "riops" => l.riops = v,
                "wiops" => l.wiops = v,
                _ => {}
            }
        }
        out.push(l);
    }
    Ok(out)
}

/// Whether a limit is no limit at all.
pub fn io_limit_is_clear(l: &IoLimit) -> bool {
    l.rbps.is_none() && l.wbps.is_none() && l.riops.is_none() && l.wiops.is_none()
}

/// The `io.max` lines to write to turn `current` into `want`: changed or new
/// devices, and devices limited now but not wanted (cleared).
pub fn io_max_updates(current: &[IoLimit], want: &[IoLimit]) -> Vec<IoLimit> {
    let cur: BTreeMap<DeviceId, &IoLimit> = current.iter().map(|l| (l.device, l)).collect();
    let wanted: BTreeMap<DeviceId, &IoLimit> = want.iter().map(|l| (l.device, l)).collect();
    let mut out = Vec::new();
    for (dev, w) in &wanted {
        let now = cur.get(dev).copied().cloned().unwrap_or(io_max_clear(*dev));
        if now != **w {
            out.push((*w).clone());
        }
    }
    for (dev, c) in &cur {
        if !wanted.contains_key(dev) && !io_limit_is_clear(c) {
            out.push(io_max_clear(*dev));
        }
    }
    out
}

/// The v2 `io.weight` default line.
pub fn format_io_weight(w: u32) -> String {
    format!("default {w}")
}

/// The default weight in v2 `io.weight` (`"default N"` plus optional
/// per-device lines), or a bare number (as `io.bfq.weight` may print).
pub fn parse_io_weight(text: &str) -> Result<u32, BadValue> {
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let mut it = line.split_whitespace();
        match (it.next(), it.next()) {
            (Some("default"), Some(n)) | (Some(n), None) => {
                return n
                    .parse::<u32>()
                    .map_err(|_| BadValue::new(line, "weight is not a number"));
            }
            _ => {}
        }
    }
    Err(BadValue::new(text.trim(), "no default weight"))
}

/// Parses a v1 `blkio.throttle.*_device` file: `MAJ:MIN VALUE` lines.
pub fn parse_blkio_device_file(text: &str) -> Result<BTreeMap<DeviceId, u64>, BadValue> {
    let mut out = BTreeMap::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let mut it = line.split_whitespace();
        let (Some(d), Some(v), None) = (it.next(), it.next(), it.next()) else {
            return Err(BadValue::new(line, "expected \"MAJ:MIN VALUE\""));
        };
        let dev = parse_device(d).map_err(|e| BadValue::new(line, e.reason))?;
        let v = v
            .parse::<u64>()
            .map_err(|_| BadValue::new(line, "value is not a number"))?;
        out.insert(dev, v);
    }
    Ok(out)
}

/// A single integer file (`cpu.weight`, `cpu.shares`, `cpu.cfs_quota_us`...).
pub fn parse_i64(text: &str) -> Result<i64, BadValue> {
    let t = text.trim();
    t.parse::<i64>()
        .map_err(|_| BadValue::new(t, "expected an integer"))
}

/// A single unsigned integer file.
pub fn parse_u64(text: &str) -> Result<u64, BadValue> {
    let t = text.trim();
    t.parse::<u64>()
        .map_err(|_| BadValue::new(t, "expected an unsigned integer"))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn dev(major: u32, minor: u32) -> DeviceId {
        DeviceId { major, minor }
    }

    #[test]
    fn cpu_max_text() {
        let m = CpuMax {
            quota_us: 50_000,
            period_us: 100_000,
        };
        assert_eq!(format_cpu_max(Some(m), 1), "50000 100000");
        assert_eq!(format_cpu_max(None, 20_000), "max 20000");
        assert_eq!(parse_cpu_max("max 100000\n").unwrap(), (None, 100_000));
        assert_eq!(parse_cpu_max("max").unwrap(), (None, DEFAULT_PERIOD_US));
        assert_eq!(
            parse_cpu_max("400000 100000").unwrap(),
            (Some(400_000), 100_000)
        );
        for bad in ["", "a 1", "1 b", "1 2 3", "-5 100"] {
            let e = parse_cpu_max(bad).unwrap_err();
            assert_eq!(e.value, bad.trim(), "{bad:?}");
        }
    }

    #[test]
    fn memory_values_allow_page_rounding() {
        assert_eq!(format_memory(None), "max");
        assert_eq!(parse_memory("max\n").unwrap(), None);
        assert_eq!(parse_memory("8192").unwrap(), Some(8192));
        assert!(parse_memory("lots").is_err());
        assert!(memory_matches(Some(999_424), Some(1_000_000)));
        assert!(!memory_matches(
            Some(1_000_000 - PAGE_SIZE),
            Some(1_000_000)
        ));
        assert!(!memory_matches(Some(1_000_001), Some(1_000_000)));
        assert!(!memory_matches(None, Some(1)));
        assert!(memory_matches(None, None));
        assert_eq!(v1_memory(9_223_372_036_854_771_712), None);
        assert_eq!(v1_memory(1 << 30), Some(1 << 30));
    }

    #[test]
    fn io_max_lines_and_updates() {
        let l = IoLimit {
            device: dev(8, 0),
            rbps: Some(1 << 20),
            wbps: None,
            riops: Some(100),
            wiops: None,
        };
        assert_eq!(
            format_io_max(&l),
            "8:0 rbps=1048576 wbps=max riops=100 wiops=max"
        );
        let parsed =
            parse_io_max("8:0 rbps=1048576 wbps=max riops=100 wiops=max future=1\n").unwrap();
        assert_eq!(parsed, std::slice::from_ref(&l));
        assert!(parse_io_max("8:0 rbps").is_err());
        assert!(parse_io_max("x:0 rbps=1").is_err());
        assert!(parse_io_max("8:0 rbps=lots").is_err());
        assert_eq!(parse_io_max("\n").unwrap(), []);

        let other = IoLimit {
            device: dev(259, 0),
            ..io_max_clear(dev(259, 0))
        };
        let mut other_set = other.clone();
        other_set.wbps = Some(5);
        // Unchanged: nothing. Changed: the new line. Gone: a clearing line.
        assert!(io_max_updates(std::slice::from_ref(&l), std::slice::from_ref(&l)).is_empty());
        assert_eq!(
            io_max_updates(std::slice::from_ref(&l), &[l.clone(), other_set.clone()]),
            [other_set.clone()]
        );
        assert_eq!(
            io_max_updates(&[l.clone(), other_set], std::slice::from_ref(&l)),
            [other]
        );
    }

    #[test]
    fn io_weight_and_blkio_files() {
        assert_eq!(format_io_weight(250), "default 250");
        assert_eq!(parse_io_weight("default 100\n8:0 300\n").unwrap(), 100);
        assert_eq!(parse_io_weight("500\n").unwrap(), 500);
        assert!(parse_io_weight("").is_err());
        assert!(parse_io_weight("default x").is_err());
        let m = parse_blkio_device_file("8:0 1000\n8:16 2\n").unwrap();
        assert_eq!(m.get(&dev(8, 16)), Some(&2));
        assert!(parse_blkio_device_file("8:0").is_err());
        assert!(parse_blkio_device_file("8:0 x").is_err());
        assert_eq!(parse_i64("-1\n").unwrap(), -1);
        assert!(parse_u64("-1").is_err());
    }

    proptest! {
        #[test]
        fn cpu_max_roundtrips(q in proptest::option::of(1000u64..10_000_000), p in 1000u64..1_000_000) {
            let max = q.map(|quota_us| CpuMax { quota_us, period_us: p });
            let text = format_cpu_max(max, p);
            prop_assert_eq!(parse_cpu_max(&text).unwrap(), (q, p));
        }

        #[test]
        fn io_max_roundtrips(
            major in 0u32..4096, minor in 0u32..1_048_576,
            r in proptest::option::of(any::<u64>()), w in proptest::option::of(any::<u64>()),
            ri in proptest::option::of(any::<u64>()), wi in proptest::option::of(any::<u64>()),
        ) {
            let l = IoLimit { device: dev(major, minor), rbps: r, wbps: w, riops: ri, wiops: wi };
            let text = format!("{}\n", format_io_max(&l));
            prop_assert_eq!(parse_io_max(&text).unwrap(), vec![l]);
        }
    }
}
