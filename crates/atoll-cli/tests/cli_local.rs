//! The commands that need no daemon and no root: `check-config` says what a
//! platform description takes from the rest of the machine (from a file,
//! standard input or the embedded default, in words or JSON),
//! `completions` and `man` generate from the CLI itself.

use std::io::Write;
use std::process::{Command, Stdio};

fn atoll(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_atoll"))
        .args(args)
        .output()
        .expect("run atoll");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A fake sysfs of 4 CPUs in one node with 4 GiB, so the test is the same everywhere.
fn sysfs() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let cpus = dir.path().join("devices/system/cpu");
    std::fs::create_dir_all(&cpus).unwrap();
    std::fs::write(cpus.join("online"), "0-3\n").unwrap();
    let node = dir.path().join("devices/system/node");
    std::fs::create_dir_all(node.join("node0")).unwrap();
    std::fs::write(node.join("online"), "0\n").unwrap();
    std::fs::write(node.join("node0/cpulist"), "0-3\n").unwrap();
    std::fs::write(
        node.join("node0/meminfo"),
        "Node 0 MemTotal:        4194304 kB\n",
    )
    .unwrap();
    for c in 0..4 {
        let topo = cpus.join(format!("cpu{c}/topology"));
        std::fs::create_dir_all(&topo).unwrap();
        std::fs::write(topo.join("core_id"), format!("{c}\n")).unwrap();
        std::fs::write(topo.join("physical_package_id"), "0\n").unwrap();
        std::fs::write(topo.join("thread_siblings_list"), format!("{c}\n")).unwrap();
    }
    dir
}

/// `atoll ARGS` with `input` on standard input: (exit code, stdout, stderr).
fn atoll_stdin(args: &[&str], input: &str) -> (Option<i32>, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_atoll"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run atoll");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const TWO_ISLANDS: &str = "[host]\ncpus = \"0\"\n\n[island.web]\ncpus = \"1-2\"\n\n\
                           [island.batch]\ncpus = \"3\"\n\n[unit.api]\nisland = \"web\"\n";

#[test]
fn check_config_dash_reads_standard_input() {
    let sys = sysfs();
    let root = sys.path().to_str().unwrap();
    let (code, out, err) = atoll_stdin(&["check-config", "-", "--sysfs-root", root], TWO_ISLANDS);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("<stdin>: ok\n"), "{out}");
    assert!(out.contains("web") && out.contains("batch"), "{out}");
    assert!(out.contains("api"), "{out}");

    // A mistake is reported at its line and column of standard input.
    let (code, out, err) = atoll_stdin(
        &["check-config", "-", "--sysfs-root", root],
        "[island.web]\ncpus = 7\n",
    );
    assert_eq!(code, Some(1), "{out}");
    assert!(err.contains("<stdin>:2:"), "{err}");

    // The embedded default is --default now; both at once make no sense.
    let (code, _, _) = atoll_stdin(&["check-config", "-", "--default"], "");
    assert_eq!(code, Some(2));
}

#[test]
fn check_config_json_gives_the_spec_or_the_errors() {
    let sys = sysfs();
    let root = sys.path().to_str().unwrap();
    let (code, out, err) = atoll_stdin(
        &["check-config", "-", "--json", "--sysfs-root", root],
        TWO_ISLANDS,
    );
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["source"], "<stdin>");
    assert_eq!(v["ok"], true);
    let islands = v["spec"]["islands"].to_string();
    assert!(
        islands.contains("\"web\"") && islands.contains("\"batch\""),
        "{v}"
    );
    assert!(v["effects"].is_array(), "{v}");

    let (code, out, _) = atoll_stdin(
        &["check-config", "-", "--json", "--sysfs-root", root],
        "[island.web]\ncpus = 7\n",
    );
    assert_eq!(code, Some(1));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ok"], false);
    let e = &v["errors"][0];
    assert_eq!(
        (&e["source"], &e["line"]),
        (&"<stdin>".into(), &2.into()),
        "{v}"
    );
    assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
}

#[test]
fn the_embedded_default_takes_nothing_and_says_so() {
    let sys = sysfs();
    let (ok, out, err) = atoll(&[
        "check-config",
        "--default",
        "--sysfs-root",
        sys.path().to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("adopt_all no"), "{out}");
    assert!(
        out.contains("effects    nothing is taken from tasks atoll does not manage"),
        "{out}"
    );
    assert!(!out.contains("exclusive"), "{out}");
}

#[test]
fn settings_that_take_cpus_are_named() {
    let sys = sysfs();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.toml");
    std::fs::write(
        &file,
        "[host]\ncpus = \"0\"\nadopt_all = true\n\n\
         [island.web]\ncpus = \"1-2\"\nexclusive = true\n\n\
         [island.batch]\ncpus = \"3\"\n",
    )
    .unwrap();
    let (ok, out, err) = atoll(&[
        "check-config",
        file.to_str().unwrap(),
        "--sysfs-root",
        sys.path().to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(
        out.contains(
            "effects    island web: exclusive: CPUs 1-2 are taken from every task atoll does not manage\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("effects    host: adopt_all: every task in no unit is moved into the host partition and may run only on CPUs 0\n"),
        "{out}"
    );
    assert!(!out.contains("island batch: exclusive"), "{out}");
    assert!(!out.contains("nothing is taken"), "{out}");
}

#[test]
fn completions_and_man_pages_come_from_the_cli() {
    let (ok, out, err) = atoll(&["completions", "bash"]);
    assert!(ok, "{err}");
    assert!(out.contains("_atoll()"), "{out}");
    assert!(out.contains("check-config"), "no subcommand in the script");
    let (ok, out, _) = atoll(&["completions", "zsh"]);
    assert!(ok && out.starts_with("#compdef atoll"), "{out}");
    let (ok, _, _) = atoll(&["completions", "tcsh"]);
    assert!(!ok, "an unknown shell must be refused");

    let dir = tempfile::tempdir().unwrap();
    let man = dir.path().join("man1");
    let (ok, _, err) = atoll(&["man", man.to_str().unwrap()]);
    assert!(ok, "{err}");
    let page = std::fs::read_to_string(man.join("atoll.1")).unwrap();
    assert!(page.contains(".TH atoll 1"), "{page}");
    let daemon = std::fs::read_to_string(man.join("atoll-daemon.1")).unwrap();
    assert!(daemon.contains("cgroup\\-root"), "{daemon}");
    assert!(daemon.contains("/etc/atoll/atoll.toml"), "{daemon}");
    assert!(
        !man.join("atoll-__worker.1").exists(),
        "hidden commands get no page"
    );
}

#[test]
fn the_packaged_config_is_the_embedded_default() {
    let sys = sysfs();
    let root = sys.path().to_str().unwrap();
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../packaging/atoll.toml");
    let (ok, packaged, err) = atoll(&["check-config", file, "--sysfs-root", root]);
    assert!(ok, "{err}");
    let (ok, embedded, err) = atoll(&["check-config", "--default", "--sysfs-root", root]);
    assert!(ok, "{err}");
    // Everything but the first line, which names the file.
    let body = |s: &str| s.split_once('\n').map(|(_, b)| b.to_string()).unwrap();
    assert_eq!(body(&packaged), body(&embedded));
    assert!(packaged.contains("nothing is taken"), "{packaged}");
}
