//! `atoll top` in a real terminal: tmux runs it against a daemon on the
//! simulated backend (no root, no cgroups) of a fake 8-CPU machine; the
//! screen is read with `capture-pane` and checked against `atoll status
//! --json` and `atoll why`, then keys sort, filter, open a unit's history
//! and quit.
//!
//! tmux runs on a socket of its own in the test's temporary directory
//! (`tmux -S`, removed with it), so no other session is touched. Without tmux (and when it cannot be installed) the test says so
//! and passes; `scripts/test.sh` installs it.
//!
//! `ATOLL_TOP_CAPTURE=FILE cargo test -p atoll-cli --test top_tmux` also
//! writes the first full screen to FILE (docs/top.md shows one).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_atoll");
const DEADLINE: Duration = Duration::from_secs(30);

const CONFIG: &str = r#"
[isolation]
mode = "isolate"

[host]
cpus = "0"

[island.web]
cpus = "1-3"

[island.batch]
cpus = "4-7"
policy = "batch"

[unit.api]
island = "web"
cpus = 2

[unit.cache]
island = "web"
cpus = 1

[unit.jobs]
island = "batch"
cpus = 3

[unit.zeta]
island = "batch"
cpus = 1

[overlay.shop]
priority = 5
units = ["api", "cache"]
latency_us = 5000
"#;

/// A fake sysfs of 8 CPUs, one core each, in one node with 8 GiB.
fn sysfs(dir: &Path) -> PathBuf {
    let root = dir.join("sys");
    let cpus = root.join("devices/system/cpu");
    std::fs::create_dir_all(&cpus).unwrap();
    std::fs::write(cpus.join("online"), "0-7\n").unwrap();
    let node = root.join("devices/system/node");
    std::fs::create_dir_all(node.join("node0")).unwrap();
    std::fs::write(node.join("online"), "0\n").unwrap();
    std::fs::write(node.join("node0/cpulist"), "0-7\n").unwrap();
    std::fs::write(
        node.join("node0/meminfo"),
        "Node 0 MemTotal:        8388608 kB\n",
    )
    .unwrap();
    for c in 0..8 {
        let topo = cpus.join(format!("cpu{c}/topology"));
        std::fs::create_dir_all(&topo).unwrap();
        std::fs::write(topo.join("core_id"), format!("{c}\n")).unwrap();
        std::fs::write(topo.join("physical_package_id"), "0\n").unwrap();
        std::fs::write(topo.join("thread_siblings_list"), format!("{c}\n")).unwrap();
    }
    root
}

/// tmux, installed with apt-get when missing and possible; `None` (with
/// the reason) when it cannot be had.
fn tmux_available() -> Result<(), String> {
    let works = || {
        Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if works() {
        return Ok(());
    }
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("tmux is missing and only root may install it".into());
    }
    let installed = Command::new("apt-get")
        .args(["install", "-y", "-q", "tmux"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if installed && works() {
        Ok(())
    } else {
        Err("tmux is missing and `apt-get install -y tmux` failed".into())
    }
}

/// The daemon and the tmux server, ended however the test ends.
struct Rig {
    daemon: Child,
    tmux_socket: PathBuf,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.tmux_socket)
            .arg("kill-server")
            .output();
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}

impl Rig {
    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.tmux_socket)
            .args(args)
            .output()
            .unwrap()
    }

    fn screen(&self) -> String {
        let out = self.tmux(&["capture-pane", "-p", "-t", "top"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "top"];
        args.extend(keys);
        assert!(self.tmux(&args).status.success());
    }

    /// Waits until the screen passes `check`; returns it.
    fn wait_screen(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        let t = Instant::now();
        loop {
            let s = self.screen();
            if check(&s) {
                return s;
            }
            assert!(
                t.elapsed() < DEADLINE,
                "{what} within {DEADLINE:?}; the screen:\n{s}"
            );
            sleep(Duration::from_millis(50));
        }
    }

    fn atoll(&self, args: &[&str]) -> String {
        let out = Command::new(BIN)
            .args(args)
            .arg("--socket")
            .arg(&self.socket)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "atoll {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

fn start() -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("atoll.sock");
    let config = dir.path().join("atoll.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let unique = format!(
        "atoll-top-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    let daemon = Command::new(BIN)
        .args(["daemon", "--backend", "sim", "--config"])
        .arg(&config)
        .arg("--socket")
        .arg(&socket)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .args(["--cgroup-root", &unique, "--sysfs-root"])
        .arg(sysfs(dir.path()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("daemon.log")).unwrap())
        .spawn()
        .unwrap();
    let rig = Rig {
        daemon,
        tmux_socket: dir.path().join("tmux.sock"),
        socket,
        _dir: dir,
    };
    let t = Instant::now();
    while !rig.socket.exists() {
        assert!(t.elapsed() < DEADLINE, "the daemon's socket");
        sleep(Duration::from_millis(20));
    }
    rig
}

/// The cells of the first line whose first cell (after borders and the
/// selection mark) is `first`, within the columns `from..to`.
fn row(screen: &str, first: &str, from: usize, to: usize) -> Option<Vec<String>> {
    screen.lines().find_map(|l| {
        let part: String = l.chars().skip(from).take(to - from).collect();
        let cells: Vec<String> = part
            .split(['│', ' '])
            .filter(|c| !c.is_empty() && *c != ">")
            .map(String::from)
            .collect();
        (cells.first().map(String::as_str) == Some(first)).then_some(cells)
    })
}

/// The unit names in the order the units table shows them.
fn unit_order(screen: &str, units: &[String]) -> Vec<String> {
    let mut seen: Vec<(usize, String)> = units
        .iter()
        .filter_map(|u| {
            screen
                .lines()
                .position(|l| {
                    let cells: Vec<&str> = l
                        .split(['│', ' '])
                        .filter(|c| !c.is_empty() && *c != ">")
                        .collect();
                    cells.first() == Some(&u.as_str()) && cells.len() > 5
                })
                .map(|at| (at, u.clone()))
        })
        .collect();
    seen.sort();
    seen.into_iter().map(|(_, u)| u).collect()
}

fn set(v: &Value) -> String {
    match v.as_str() {
        Some("") | None => "-".into(),
        Some(s) => s.to_string(),
    }
}

#[test]
fn top_shows_the_status_and_answers_its_keys() {
    if let Err(why) = tmux_available() {
        eprintln!("SKIPPED top_shows_the_status_and_answers_its_keys: {why}");
        return;
    }
    let rig = start();
    // The shell tmux runs the command with writes how it exited to a file
    // (what a program prints just before its pane dies may never reach
    // the pane, and tmux may mark a pane dead before it knows the status).
    let exit_file = rig.tmux_socket.with_file_name("top.exit");
    let command = format!(
        "{BIN} top --socket {} --interval 0.2; echo $? > {}",
        rig.socket.to_str().unwrap(),
        exit_file.to_str().unwrap()
    );
    let conf = rig.tmux_socket.with_file_name("tmux.conf");
    // The pane stays after atoll top exits, to be read if it did not.
    std::fs::write(&conf, "set-option -g remain-on-exit on\n").unwrap();
    let out = rig.tmux(&[
        "-u",
        "-f",
        conf.to_str().unwrap(),
        "new-session",
        "-d",
        "-x",
        "160",
        "-y",
        "50",
        "-s",
        "top",
        &command,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A second reading (rates), and isolation in force (zeta's home CPU):
    // the daemon changes nothing after that, as nothing runs.
    let screen = rig.wait_screen("a full screen", |s| {
        s.contains("units (4)")
            && s.contains("set batch/zeta: cpuset.cpus=7")
            && row(s, "api", 0, 160).is_some_and(|r| r[6] != "-")
            && row(s, "zeta", 0, 160).is_some_and(|r| r[2] == "7")
    });
    let status: Value = serde_json::from_str(&rig.atoll(&["status", "--json"])).unwrap();
    let islands = status["islands"].as_array().unwrap();
    let units = status["units"].as_array().unwrap();
    assert_eq!((islands.len(), units.len()), (2, 4));
    let names: Vec<String> = units
        .iter()
        .map(|u| u["name"].as_str().unwrap().to_string())
        .collect();
    if let Some(file) = std::env::var_os("ATOLL_TOP_CAPTURE") {
        std::fs::write(&file, &screen).unwrap();
    }
    assert!(screen.contains("on sim, root atoll-top-"), "{screen}");
    for i in islands {
        let name = i["name"].as_str().unwrap();
        let r = row(&screen, name, 0, 160).unwrap_or_else(|| panic!("island {name}:\n{screen}"));
        assert_eq!(r[1], set(&i["cpus"]), "island {name}'s CPUs:\n{screen}");
        assert_eq!(r[3], i["units"].as_array().unwrap().len().to_string());
    }
    for u in units {
        let name = u["name"].as_str().unwrap();
        let r = row(&screen, name, 0, 160).unwrap_or_else(|| panic!("unit {name}:\n{screen}"));
        let iso = &u["isolation"];
        assert_eq!(
            r[1..6],
            [
                u["island"].as_str().unwrap().to_string(),
                set(&iso["home_cpus"]),
                set(&iso["lent_cpus"]),
                set(&iso["borrowed_cpus"]),
                u["pids"].as_array().unwrap().len().to_string(),
            ],
            "unit {name}: island, home, lent, borrowed CPUs, processes:\n{screen}"
        );
    }
    let shop = row(&screen, "shop", 0, 80).unwrap_or_else(|| panic!("{screen}"));
    assert_eq!(shop[..2], ["shop", "5"], "{screen}");
    assert_eq!(
        unit_order(&screen, &names),
        ["api", "cache", "jobs", "zeta"],
        "by name:\n{screen}"
    );

    // `s`: by island (batch before web), then name.
    rig.keys(&["s"]);
    let screen = rig.wait_screen("sorted by island", |s| s.contains("sort: island (up)"));
    let mut by_island: Vec<(String, String)> = units
        .iter()
        .map(|u| {
            (
                u["island"].as_str().unwrap().to_string(),
                u["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    by_island.sort();
    let expected: Vec<String> = by_island.into_iter().map(|(_, u)| u).collect();
    assert_eq!(unit_order(&screen, &names), expected, "{screen}");

    // `/ze Enter`: only zeta, and only its island.
    rig.keys(&["/", "z", "e", "Enter"]);
    let screen = rig.wait_screen("the filter", |s| {
        s.lines()
            .next()
            .is_some_and(|h| h.trim_end().ends_with("filter: ze"))
            && s.trim_end()
                .lines()
                .last()
                .is_some_and(|l| l.starts_with("q quit"))
    });
    assert!(screen.contains("units (1 of 4)"), "{screen}");
    assert_eq!(unit_order(&screen, &names), ["zeta"], "{screen}");
    assert!(row(&screen, "batch", 0, 160).is_some(), "{screen}");
    assert!(row(&screen, "web", 0, 160).is_none(), "{screen}");

    // Enter: zeta's history, as `atoll why zeta` tells it.
    rig.keys(&["Enter"]);
    let screen = rig.wait_screen("the history", |s| {
        s.contains("history of unit zeta (why zeta)") && !s.contains("asking the daemon")
    });
    let why = rig.atoll(&["why", "zeta"]);
    assert!(!why.trim().is_empty());
    for line in why.lines() {
        let start: String = line.trim().chars().take(100).collect();
        assert!(
            screen.contains(&start),
            "{start:?} from `atoll why zeta` on the screen:\n{screen}"
        );
    }
    rig.keys(&["Escape"]);
    rig.wait_screen("the history closed", |s| !s.contains("history of unit"));

    rig.keys(&["q"]);
    let t = Instant::now();
    let code = loop {
        match std::fs::read_to_string(&exit_file) {
            Ok(c) if c.ends_with('\n') => break c,
            _ => {}
        }
        assert!(
            t.elapsed() < DEADLINE,
            "atoll top still runs {DEADLINE:?} after q:\n{}",
            rig.screen()
        );
        sleep(Duration::from_millis(50));
    };
    assert_eq!(code.trim(), "0", "q exits with 0");
}

#[test]
fn top_without_a_terminal_says_so() {
    let rig = start();
    let out = Command::new(BIN)
        .args(["top", "--socket"])
        .arg(&rig.socket)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("atoll top needs a terminal"), "{err}");
    let out = Command::new(BIN)
        .args(["top", "--interval", "0", "--socket"])
        .arg(&rig.socket)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "a bad interval is a usage error"
    );
}
