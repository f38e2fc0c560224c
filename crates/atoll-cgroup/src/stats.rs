//! Parsers for the statistics files both backends read.
//!
//! They are total: any input gives a value or a [`BadValue`] naming the line
//! that did not fit, never a panic. Unknown keys and line kinds are skipped so
//! that newer kernels adding fields do not break monitoring; a known key with
//! a malformed value is an error.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use atoll_core::backend::{GroupStats, Psi, PsiLine};
use atoll_core::spec::DeviceId;

use crate::error::{BadValue, CgroupError};
use crate::fs::CgroupFs;
use crate::knobs::parse_device;

/// Parses a flat keyed file (`KEY VALUE` per line: `cpu.stat`, `memory.stat`).
pub fn parse_keyed(text: &str) -> Result<BTreeMap<String, u64>, BadValue> {
    let mut out = BTreeMap::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let mut it = line.split_whitespace();
        let (Some(k), Some(v), None) = (it.next(), it.next(), it.next()) else {
            return Err(BadValue::new(line, "expected \"KEY VALUE\""));
        };
        let v = v
            .parse::<u64>()
            .map_err(|_| BadValue::new(line, format!("{k}: value is not a number")))?;
        out.insert(k.to_string(), v);
    }
    Ok(out)
}

fn parse_psi_line(line: &str) -> Result<PsiLine, BadValue> {
    let mut l = PsiLine::default();
    let mut seen = 0u8;
    for tok in line.split_whitespace().skip(1) {
        let Some((k, v)) = tok.split_once('=') else {
            return Err(BadValue::new(line, format!("{tok:?} is not KEY=VALUE")));
        };
        let float = || {
            v.parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .ok_or_else(|| BadValue::new(line, format!("{k}={v:?} is not a number")))
        };
        match k {
            "avg10" => (l.avg10, seen) = (float()?, seen | 1),
            "avg60" => (l.avg60, seen) = (float()?, seen | 2),
            "avg300" => (l.avg300, seen) = (float()?, seen | 4),
            "total" => {
                l.total_us = v
                    .parse::<u64>()
                    .map_err(|_| BadValue::new(line, format!("total={v:?} is not a number")))?;
                seen |= 8;
            }
            _ => {}
        }
    }
    if seen != 15 {
        return Err(BadValue::new(
            line,
            "expected avg10=, avg60=, avg300= and total=",
        ));
    }
    Ok(l)
}

/// Parses a `*.pressure` file (a `some` line and an optional `full` line).
pub fn parse_psi(text: &str) -> Result<Psi, BadValue> {
    let mut some = None;
    let mut full = None;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        match line.split_whitespace().next() {
            Some("some") => some = Some(parse_psi_line(line)?),
            Some("full") => full = Some(parse_psi_line(line)?),
            _ => {}
        }
    }
    let some = some.ok_or_else(|| BadValue::new(text.trim(), "no \"some\" line"))?;
    Ok(Psi { some, full })
}

/// IO totals of a group and the devices they were done on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IoTotals {
    /// Bytes read.
    pub read: u64,
    /// Bytes written.
    pub write: u64,
    /// Devices with traffic.
    pub devices: Vec<DeviceId>,
}

/// Sums `rbytes` and `wbytes` over the devices of a v2 `io.stat`.
pub fn parse_io_stat(text: &str) -> Result<(u64, u64), BadValue> {
    parse_io_stat_full(text).map(|t| (t.read, t.write))
}

/// [`parse_io_stat`] with the devices.
pub fn parse_io_stat_full(text: &str) -> Result<IoTotals, BadValue> {
    let (mut r, mut w) = (0u64, 0u64);
    let mut devices = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(dev) = line
            .split_whitespace()
            .next()
            .and_then(|d| parse_device(d).ok())
        {
            devices.push(dev);
        }
        for tok in line.split_whitespace().skip(1) {
            let Some((k, v)) = tok.split_once('=') else {
                return Err(BadValue::new(line, format!("{tok:?} is not KEY=VALUE")));
            };
            let slot = match k {
                "rbytes" => &mut r,
                "wbytes" => &mut w,
                _ => continue,
            };
            let n = v
                .parse::<u64>()
                .map_err(|_| BadValue::new(line, format!("{k}={v:?} is not a number")))?;
            *slot = slot.saturating_add(n);
        }
    }
    Ok(IoTotals {
        read: r,
        write: w,
        devices,
    })
}

/// Sums the `Read` and `Write` lines over the devices of a v1
/// `blkio.throttle.io_service_bytes(_recursive)` file (`MAJ:MIN OP BYTES`
/// lines and a `Total BYTES` line).
pub fn parse_blkio_bytes(text: &str) -> Result<(u64, u64), BadValue> {
    parse_blkio_bytes_full(text).map(|t| (t.read, t.write))
}

/// [`parse_blkio_bytes`] with the devices.
pub fn parse_blkio_bytes_full(text: &str) -> Result<IoTotals, BadValue> {
    let (mut r, mut w) = (0u64, 0u64);
    let mut devices: Vec<DeviceId> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let (op, n) = match parts.as_slice() {
            ["Total", _] => continue,
            [dev, op, n] => {
                if let Ok(d) = parse_device(dev) {
                    if !devices.contains(&d) {
                        devices.push(d);
                    }
                }
                (*op, *n)
            }
            _ => return Err(BadValue::new(line, "expected \"MAJ:MIN OP BYTES\"")),
        };
        let slot = match op {
            "Read" => &mut r,
            "Write" => &mut w,
            _ => continue,
        };
        let n = n
            .parse::<u64>()
            .map_err(|_| BadValue::new(line, "byte count is not a number"))?;
        *slot = slot.saturating_add(n);
    }
    Ok(IoTotals {
        read: r,
        write: w,
        devices,
    })
}

/// Parses `cgroup.procs`: one pid per line.
pub fn parse_pids(text: &str) -> Result<Vec<u32>, BadValue> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| l.parse::<u32>().map_err(|_| BadValue::new(l, "not a pid")))
        .collect()
}

/// Whether any figure was read: then the group's directory exists (its
/// files were just read from it).
pub(crate) fn has_figures(st: &GroupStats) -> bool {
    let GroupStats {
        cpu_usage_us,
        nr_periods,
        nr_throttled,
        throttled_us,
        memory_current,
        io_read_bytes,
        io_write_bytes,
        io_devices,
        cpu_pressure,
        memory_pressure,
        io_pressure,
    } = st;
    [
        cpu_usage_us,
        nr_periods,
        nr_throttled,
        throttled_us,
        memory_current,
        io_read_bytes,
        io_write_bytes,
    ]
    .iter()
    .any(|f| f.is_some())
        || !io_devices.is_empty()
        || [cpu_pressure, memory_pressure, io_pressure]
            .iter()
            .any(|f| f.is_some())
}

/// Reads a file that may legitimately be absent (a controller not enabled, a
/// kernel without the feature): `Ok(None)` when it does not exist.
pub(crate) fn read_opt(fs: &dyn CgroupFs, path: &Path) -> Result<Option<String>, CgroupError> {
    match fs.read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CgroupError::io("read", path, None, e)),
    }
}

/// Reads and parses an optional file.
/// [`read_parsed`] if `on`, else `None` without reading.
pub(crate) fn read_parsed_if<T>(
    on: bool,
    fs: &dyn CgroupFs,
    path: &Path,
    parse: impl FnOnce(&str) -> Result<T, BadValue>,
) -> Result<Option<T>, CgroupError> {
    if on {
        read_parsed(fs, path, parse)
    } else {
        Ok(None)
    }
}

pub(crate) fn read_parsed<T>(
    fs: &dyn CgroupFs,
    path: &Path,
    parse: impl FnOnce(&str) -> Result<T, BadValue>,
) -> Result<Option<T>, CgroupError> {
    match read_opt(fs, path)? {
        None => Ok(None),
        Some(text) => parse(&text).map(Some).map_err(|e| e.at(path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_files() {
        let m = parse_keyed("usage_usec 120\nnr_periods 3\n\n").unwrap();
        assert_eq!(m["usage_usec"], 120);
        assert_eq!(m["nr_periods"], 3);
        for bad in ["usage_usec", "usage_usec x", "a 1 2", "a -1"] {
            assert_eq!(parse_keyed(bad).unwrap_err().value, bad);
        }
    }

    #[test]
    fn psi_with_and_without_full() {
        let p = parse_psi(
            "some avg10=2.83 avg60=1.21 avg300=0.93 total=6735296\n\
             full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        )
        .unwrap();
        assert_eq!(p.some.avg10, 2.83);
        assert_eq!(p.some.total_us, 6_735_296);
        assert_eq!(p.full.unwrap().total_us, 0);
        let p = parse_psi("some avg10=1.00 avg60=0.50 avg300=0.10 total=9 new=1\n").unwrap();
        assert_eq!(p.full, None);
        assert_eq!(p.some.avg300, 0.10);
    }

    #[test]
    fn psi_malformed_never_panics() {
        for bad in [
            "",
            "full avg10=0 avg60=0 avg300=0 total=0",
            "some",
            "some avg10",
            "some avg10=x avg60=0 avg300=0 total=0",
            "some avg10=0 avg60=0 avg300=0 total=-1",
            "some avg10=NaN avg60=0 avg300=0 total=1",
            "some avg10=inf avg60=0 avg300=0 total=1",
            "some avg10=0 avg60=0 total=1",
            "some = = =",
        ] {
            assert!(parse_psi(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn io_stat_sums_devices() {
        let (r, w) = parse_io_stat(
            "8:0 rbytes=100 wbytes=50 rios=1 wios=1 dbytes=0 dios=0\n\
             259:0 rbytes=7 wbytes=3 rios=1 wios=1\n",
        )
        .unwrap();
        assert_eq!((r, w), (107, 53));
        assert_eq!(parse_io_stat("").unwrap(), (0, 0));
        assert!(parse_io_stat("8:0 rbytes").is_err());
        assert!(parse_io_stat("8:0 rbytes=x").is_err());
        assert_eq!(parse_io_stat("8:0").unwrap(), (0, 0));
    }

    #[test]
    fn blkio_bytes_sums_read_and_write() {
        let text = "8:0 Read 4096\n8:0 Write 8192\n8:0 Sync 1\n8:0 Async 2\n8:0 Total 12288\n\
                    8:16 Read 1\n8:16 Write 2\nTotal 12291\n";
        assert_eq!(parse_blkio_bytes(text).unwrap(), (4097, 8194));
        assert_eq!(parse_blkio_bytes("Total 0\n").unwrap(), (0, 0));
        assert!(parse_blkio_bytes("8:0 Read").is_err());
        assert!(parse_blkio_bytes("8:0 Read x").is_err());
        assert!(parse_blkio_bytes("8:0 Read 1 2").is_err());
    }

    #[test]
    fn pids() {
        assert_eq!(parse_pids("12\n345\n").unwrap(), [12, 345]);
        assert_eq!(parse_pids("").unwrap(), Vec::<u32>::new());
        assert_eq!(parse_pids("12\nabc\n").unwrap_err().value, "abc");
    }
}

#[cfg(test)]
mod device_tests {
    use super::*;

    #[test]
    fn io_totals_name_the_devices_with_traffic() {
        let v2 =
            parse_io_stat_full("8:0 rbytes=10 wbytes=20 rios=1 wios=2\n259:1 rbytes=5 wbytes=0\n")
                .unwrap();
        assert_eq!((v2.read, v2.write), (15, 20));
        assert_eq!(
            v2.devices,
            [
                DeviceId { major: 8, minor: 0 },
                DeviceId {
                    major: 259,
                    minor: 1
                }
            ]
        );
        let v1 = parse_blkio_bytes_full("8:16 Read 100\n8:16 Write 50\n8:16 Sync 0\nTotal 150\n")
            .unwrap();
        assert_eq!((v1.read, v1.write), (100, 50));
        assert_eq!(
            v1.devices,
            [DeviceId {
                major: 8,
                minor: 16
            }]
        );
        assert!(parse_io_stat_full("").unwrap().devices.is_empty());
    }
}

/// Property tests: arbitrary text never panics, and files built from
/// arbitrary figures parse back to them. The fuzz target `cgroup_stats` runs
/// the same parsers coverage-guided.
#[cfg(test)]
mod props {
    use proptest::prelude::*;

    use super::*;

    fn all_parsers(text: &str) {
        let _ = parse_keyed(text);
        let _ = parse_psi(text);
        let _ = parse_io_stat_full(text);
        let _ = parse_blkio_bytes_full(text);
        let _ = parse_pids(text);
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(
            text in any::<String>(),
            tokens in proptest::collection::vec("[a-z0-9:.=]{0,14}|some|full|Total|Read", 0..20),
        ) {
            all_parsers(&text);
            all_parsers(&tokens.join(" "));
            all_parsers(&tokens.join("\n"));
            all_parsers(&format!("some {}", tokens.join(" ")));
        }

        #[test]
        fn keyed_files_parse_back(entries in proptest::collection::btree_map("[a-z_]{1,16}", any::<u64>(), 0..12)) {
            let text: String = entries.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
            prop_assert_eq!(parse_keyed(&text), Ok(entries));
        }

        #[test]
        fn psi_files_parse_back(
            some in (0u32..10_000, 0u32..10_000, 0u32..10_000, any::<u64>()),
            full in proptest::option::of((0u32..10_000, 0u32..10_000, 0u32..10_000, any::<u64>())),
        ) {
            let line = |kind: &str, (a, b, c, t): (u32, u32, u32, u64)| {
                let pct = |x: u32| format!("{}.{:02}", x / 100, x % 100);
                format!("{kind} avg10={} avg60={} avg300={} total={t}\n", pct(a), pct(b), pct(c))
            };
            let want = |(a, b, c, t): (u32, u32, u32, u64)| PsiLine {
                avg10: f64::from(a) / 100.0,
                avg60: f64::from(b) / 100.0,
                avg300: f64::from(c) / 100.0,
                total_us: t,
            };
            let mut text = line("some", some);
            if let Some(f) = full {
                text += &line("full", f);
            }
            let psi = parse_psi(&text).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
            let close = |x: f64, y: f64| (x - y).abs() < 1e-9;
            let same = |got: &PsiLine, w: PsiLine| {
                close(got.avg10, w.avg10) && close(got.avg60, w.avg60)
                    && close(got.avg300, w.avg300) && got.total_us == w.total_us
            };
            prop_assert!(same(&psi.some, want(some)), "{:?}", psi);
            prop_assert_eq!(psi.full.is_some(), full.is_some());
            if let (Some(got), Some(f)) = (psi.full.as_ref(), full) {
                prop_assert!(same(got, want(f)), "{:?}", psi);
            }
        }

        #[test]
        fn io_stat_sums_parse_back(
            devs in proptest::collection::vec((0u32..300, 0u32..300, any::<u64>(), any::<u64>()), 0..6),
        ) {
            let text: String = devs
                .iter()
                .map(|(ma, mi, r, w)| format!("{ma}:{mi} rbytes={r} wbytes={w} rios=1 wios=2 dbytes=0 dios=0\n"))
                .collect();
            let t = parse_io_stat_full(&text).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
            let sum = |f: fn(&(u32, u32, u64, u64)) -> u64| devs.iter().map(f).fold(0u64, u64::saturating_add);
            prop_assert_eq!(t.read, sum(|d| d.2));
            prop_assert_eq!(t.write, sum(|d| d.3));
            prop_assert_eq!(t.devices.len(), devs.len());
        }
    }
}
