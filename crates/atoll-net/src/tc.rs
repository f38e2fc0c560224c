//! [`TcBackend`]: the traffic-control tree through iproute2's `tc`.
//!
//! Why `tc` and not rtnetlink messages of our own: the tree is written
//! rarely (at start, on a tune, at teardown), never on the epoch's hot
//! path, so one process per change costs nothing that matters, while the
//! qdisc, class and rate attributes (HTB's rate tables, 64-bit rates,
//! quantum) are many and version-dependent; `tc` is the kernel's own
//! reference encoder. Every change is one `tc -batch -`, so a plan is
//! written in one process and stops at the first refusal; state is read
//! back with `tc -j` (JSON), never from text.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::backend::{LeafStats, NetBackend, RootQdisc};
use crate::plan::TcPlan;
use crate::NetError;

/// Drives `tc`, optionally in a named network namespace (`tc -n`).
#[derive(Clone, Debug)]
pub struct TcBackend {
    program: PathBuf,
    netns: Option<String>,
}

impl TcBackend {
    /// `tc` from `PATH`, in the daemon's own network namespace.
    pub fn new() -> Self {
        Self {
            program: PathBuf::from("tc"),
            netns: None,
        }
    }

    /// `tc` at `program`.
    pub fn with_program(mut self, program: PathBuf) -> Self {
        self.program = program;
        self
    }

    /// Works in the named network namespace (`ip netns add NAME`).
    pub fn in_netns(mut self, name: &str) -> Self {
        self.netns = Some(name.to_string());
        self
    }

    fn run(&self, args: &[&str], stdin: Option<&str>) -> Result<String, NetError> {
        let mut cmd = Command::new(&self.program);
        if let Some(ns) = &self.netns {
            cmd.args(["-n", ns]);
        }
        cmd.args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let spawn_err = |source| NetError::Spawn {
            program: self.program.clone(),
            source,
        };
        let mut child = cmd.spawn().map_err(spawn_err)?;
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(text.as_bytes()).map_err(spawn_err)?;
        }
        let out = child.wait_with_output().map_err(spawn_err)?;
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if !out.status.success() {
            let mut command = format!("tc {}", args.join(" "));
            if let Some(text) = stdin {
                command.push_str(" <<< ");
                command.push_str(&text.replace('\n', "; "));
            }
            if stderr.contains("Cannot find device") {
                if let Some(dev) = args.iter().position(|a| *a == "dev") {
                    if let Some(iface) = args.get(dev + 1) {
                        return Err(NetError::NoInterface {
                            iface: (*iface).to_string(),
                        });
                    }
                }
            }
            return Err(NetError::Command {
                command,
                status: out.status.to_string(),
                stderr,
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn json(&self, args: &[&str]) -> Result<Vec<Value>, NetError> {
        let text = self.run(args, None)?;
        let parse_err = |reason: String| NetError::Parse {
            command: format!("tc {}", args.join(" ")),
            reason,
        };
        match serde_json::from_str::<Value>(&text) {
            Ok(Value::Array(items)) => Ok(items),
            Ok(other) => Err(parse_err(format!("not a list: {other}"))),
            Err(e) => Err(parse_err(e.to_string())),
        }
    }
}

impl Default for TcBackend {
    fn default() -> Self {
        Self::new()
    }
}

/// A class minor from a handle or parent as `tc` prints it (`1:10` → 0x10).
fn minor_of(id: &str) -> Option<u16> {
    let (major, minor) = id.split_once(':')?;
    if major != "1" {
        return None;
    }
    u16::from_str_radix(minor, 16).ok()
}

fn field(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

impl NetBackend for TcBackend {
    fn root_qdisc(&mut self, iface: &str) -> Result<RootQdisc, NetError> {
        let args = ["-j", "qdisc", "show", "dev", iface, "root"];
        let items = self.json(&args)?;
        let root = items
            .iter()
            .find(|q| q.get("root").and_then(Value::as_bool) == Some(true))
            .ok_or_else(|| NetError::Parse {
                command: format!("tc {}", args.join(" ")),
                reason: "no root qdisc".to_string(),
            })?;
        let text = |key: &str| {
            root.get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Ok(RootQdisc {
            kind: text("kind"),
            handle: text("handle"),
        })
    }

    fn apply(
        &mut self,
        iface: &str,
        plan: &TcPlan,
        removed: &[u16],
        with_root: bool,
    ) -> Result<(), NetError> {
        self.run(
            &["-batch", "-"],
            Some(&plan.batch(iface, removed, with_root)),
        )
        .map(drop)
    }

    fn remove_root(&mut self, iface: &str) -> Result<(), NetError> {
        self.run(&["qdisc", "del", "dev", iface, "root"], None)
            .map(drop)
    }

    fn leaf_stats(&mut self, iface: &str) -> Result<Vec<LeafStats>, NetError> {
        let items = self.json(&["-j", "-s", "qdisc", "show", "dev", iface])?;
        Ok(items
            .iter()
            .filter_map(|q| {
                let minor = minor_of(q.get("parent")?.as_str()?)?;
                Some(LeafStats {
                    minor,
                    bytes: field(q, "bytes"),
                    packets: field(q, "packets"),
                    drops: field(q, "drops"),
                    backlog_bytes: field(q, "backlog"),
                    backlog_packets: field(q, "qlen"),
                })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minors_are_read_from_handles_of_the_root_qdisc_only() {
        assert_eq!(minor_of("1:10"), Some(0x10));
        assert_eq!(minor_of("1:2"), Some(2));
        assert_eq!(minor_of("2:10"), None);
        assert_eq!(minor_of("ffff:"), None);
    }

    #[test]
    fn a_missing_program_is_a_spawn_error_naming_it() {
        let mut tc = TcBackend::new().with_program(PathBuf::from("/nonexistent/tc"));
        match tc.root_qdisc("lo") {
            Err(NetError::Spawn { program, .. }) => {
                assert_eq!(program, PathBuf::from("/nonexistent/tc"));
            }
            other => panic!("{other:?}"),
        }
    }
}
