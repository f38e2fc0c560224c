//! Classification on cgroup v2 through nftables: cgroup v2 has no
//! `net_prio`, so a unit's sockets get their class id as priority from a
//! rule in a table of atoll's own,
//! `socket cgroupv2 level L "PATH" meta priority set 1:10`, in a chain on
//! the output hook. HTB then puts the packet in class `1:10` before any
//! filter runs (as with `net_prio`, see [`crate::classify`]).
//!
//! The table is named after the daemon's root (`atoll_<root>`), so two
//! daemons (or two tests) never share one, and a table of that name found
//! at start is a crashed predecessor's own: every write is one `nft -f -`
//! transaction that creates the table (a no-op if it exists), deletes it
//! and writes it whole, so a stale table is replaced and a change is
//! atomic. Teardown deletes it. Nothing outside that table is touched.
//!
//! `nft` resolves a `cgroupv2` path relative to `/sys/fs/cgroup` (it reads
//! the group directory's inode there); nft 1.0.6 takes no numeric id. Where
//! the v2 hierarchy is mounted elsewhere (`/sys/fs/cgroup/unified` on a
//! hybrid system), [`NftCommand::with_v2_root`] runs `nft` in a private
//! mount namespace of its own (`unshare --mount`) where the v2 root is
//! bound on `/sys/fs/cgroup`; the kernel keeps the id, not the path, so the
//! rule holds after that namespace is gone.

use std::io::Write;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};

use crate::NetError;

/// Where `nft` looks for `cgroupv2` paths.
pub const NFT_CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The chain of atoll's table.
pub const CHAIN: &str = "classify";

/// One rule: the sockets of the group at `path` (below the v2 root, at
/// depth `level`) get `classid` as priority.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct NftRule {
    /// Depth of the group below the v2 root (`a/b` is 2).
    pub level: usize,
    /// The group's path below the v2 root, `/`-separated.
    pub path: String,
    /// The class id (`0x0001_0010` for `1:10`).
    pub classid: u32,
}

impl NftRule {
    /// The rule for the group directory `group_dir` of the v2 hierarchy
    /// mounted at `v2_root`.
    pub fn for_group(v2_root: &Path, group_dir: &Path, classid: u32) -> Result<Self, NetError> {
        let bad = |reason: &str| NetError::BadNftName {
            value: group_dir.display().to_string(),
            reason: reason.to_string(),
        };
        let rel = group_dir
            .strip_prefix(v2_root)
            .map_err(|_| bad(&format!("not below the v2 root {}", v2_root.display())))?;
        let mut parts = Vec::new();
        for c in rel.components() {
            match c {
                Component::Normal(p) => {
                    let p = p.to_str().ok_or_else(|| bad("not UTF-8"))?;
                    if p.contains(['"', '\\', '\n']) || p.chars().any(char::is_control) {
                        return Err(bad("a quote, backslash or control character"));
                    }
                    parts.push(p);
                }
                _ => return Err(bad("not a plain path")),
            }
        }
        if parts.is_empty() {
            return Err(bad("the v2 root itself"));
        }
        Ok(Self {
            level: parts.len(),
            path: parts.join("/"),
            classid,
        })
    }

    /// The rule as nft writes it.
    pub fn line(&self) -> String {
        format!(
            "socket cgroupv2 level {} \"{}\" meta priority set {:x}:{:x}",
            self.level,
            self.path,
            self.classid >> 16,
            self.classid & 0xffff
        )
    }
}

/// The table name for a daemon whose root is `root`: `atoll_` and the
/// root's letters and digits, anything else as `_`.
pub fn table_name(root: &str) -> String {
    let tail: String = root
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("atoll_{tail}")
}

/// The `nft -f` transaction that leaves table `table` holding exactly
/// `rules` (none: the table deleted). The first line makes the `delete`
/// valid when no such table exists.
pub fn script(table: &str, rules: &[NftRule]) -> String {
    let mut s = format!("table inet {table} {{}}\ndelete table inet {table}\n");
    if !rules.is_empty() {
        s.push_str(&format!(
            "table inet {table} {{\n  chain {CHAIN} {{\n    type filter hook output priority 0; policy accept;\n"
        ));
        for r in rules {
            s.push_str("    ");
            s.push_str(&r.line());
            s.push('\n');
        }
        s.push_str("  }\n}\n");
    }
    s
}

/// Something that runs an `nft -f -` script.
pub trait NftRunner: std::fmt::Debug {
    /// Runs `script` as one transaction.
    fn run(&mut self, script: &str) -> Result<(), NetError>;
}

impl<R: NftRunner + ?Sized> NftRunner for Box<R> {
    fn run(&mut self, script: &str) -> Result<(), NetError> {
        (**self).run(script)
    }
}

/// Runs the real `nft`, optionally in a named network namespace and with
/// the v2 hierarchy mounted somewhere other than `/sys/fs/cgroup`.
#[derive(Clone, Debug)]
pub struct NftCommand {
    program: PathBuf,
    v2_root: Option<PathBuf>,
    netns: Option<String>,
}

impl NftCommand {
    /// `nft` from `PATH`, in the daemon's namespaces.
    pub fn new() -> Self {
        Self {
            program: PathBuf::from("nft"),
            v2_root: None,
            netns: None,
        }
    }

    /// `nft` at `program`.
    pub fn with_program(mut self, program: PathBuf) -> Self {
        self.program = program;
        self
    }

    /// The v2 hierarchy is mounted at `root`; if that is not
    /// `/sys/fs/cgroup`, `nft` runs in a private mount namespace where it
    /// is.
    pub fn with_v2_root(mut self, root: &Path) -> Self {
        self.v2_root = (root != Path::new(NFT_CGROUP_ROOT)).then(|| root.to_path_buf());
        self
    }

    /// Works in the named network namespace (`ip netns add NAME`), entered
    /// with `nsenter --net` (`ip netns exec` would mount a new `/sys`).
    pub fn in_netns(mut self, name: &str) -> Self {
        self.netns = Some(name.to_string());
        self
    }

    /// The program and arguments that run `nft -f -`.
    pub fn argv(&self) -> Vec<String> {
        let mut argv = Vec::new();
        if let Some(root) = &self.v2_root {
            argv.extend(
                [
                    "unshare",
                    "--mount",
                    "--propagation",
                    "private",
                    "sh",
                    "-c",
                    "mount --bind \"$1\" /sys/fs/cgroup && shift && exec \"$@\"",
                    "sh",
                ]
                .map(String::from),
            );
            argv.push(root.display().to_string());
        }
        if let Some(ns) = &self.netns {
            argv.push("nsenter".to_string());
            argv.push(format!("--net=/run/netns/{ns}"));
        }
        argv.push(self.program.display().to_string());
        argv.push("-f".to_string());
        argv.push("-".to_string());
        argv
    }
}

impl Default for NftCommand {
    fn default() -> Self {
        Self::new()
    }
}

impl NftRunner for NftCommand {
    fn run(&mut self, script: &str) -> Result<(), NetError> {
        let argv = self.argv();
        let spawn_err = |source| NetError::Spawn {
            program: PathBuf::from(&argv[0]),
            source,
        };
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(spawn_err)?;
        if let Some(mut pipe) = child.stdin.take() {
            pipe.write_all(script.as_bytes()).map_err(spawn_err)?;
        }
        let out = child.wait_with_output().map_err(spawn_err)?;
        if !out.status.success() {
            return Err(NetError::Command {
                command: format!("{} <<< {}", argv.join(" "), script.replace('\n', " ")),
                status: out.status.to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(())
    }
}

/// Scripts kept in memory, for tests.
#[derive(Clone, Debug, Default)]
pub struct FakeNft {
    /// Each script run, in order.
    pub scripts: Vec<String>,
    /// The next run fails (and changes nothing).
    pub fail_next: bool,
}

impl NftRunner for FakeNft {
    fn run(&mut self, script: &str) -> Result<(), NetError> {
        if std::mem::take(&mut self.fail_next) {
            return Err(NetError::Command {
                command: "nft -f -".to_string(),
                status: "exit status: 1".to_string(),
                stderr: "refused (fake)".to_string(),
            });
        }
        self.scripts.push(script.to_string());
        Ok(())
    }
}

/// atoll's nftables table: the rules it holds, written only on change.
#[derive(Debug)]
pub struct NftClassifier<R> {
    table: String,
    runner: R,
    /// What the table holds; `None` before the first write (a stale table
    /// of the same name may exist: the first write replaces it).
    rules: Option<Vec<NftRule>>,
}

impl<R: NftRunner> NftClassifier<R> {
    /// The table of the daemon whose root is `root`; nothing written yet.
    pub fn new(root: &str, runner: R) -> Self {
        Self {
            table: table_name(root),
            runner,
            rules: None,
        }
    }

    /// The table's name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The rules the table holds (none before the first write).
    pub fn rules(&self) -> &[NftRule] {
        self.rules.as_deref().unwrap_or_default()
    }

    /// Whether this classifier wrote the table (then it holds
    /// [`Self::rules`]).
    pub fn written(&self) -> bool {
        self.rules.is_some()
    }

    /// The runner.
    pub fn runner(&self) -> &R {
        &self.runner
    }

    /// Makes the table hold exactly `rules` (sorted), in one transaction;
    /// `Ok(false)` when it already did. The first call always writes, so a
    /// table left by a crash is replaced. On failure nothing changed (nft
    /// transactions are all or nothing) and the next call tries again.
    pub fn set(&mut self, mut rules: Vec<NftRule>) -> Result<bool, NetError> {
        rules.sort();
        rules.dedup();
        if self.rules.as_ref() == Some(&rules) {
            return Ok(false);
        }
        self.runner.run(&script(&self.table, &rules))?;
        self.rules = Some(rules);
        Ok(true)
    }

    /// Deletes the table (whether this classifier wrote it or a crashed
    /// predecessor did).
    pub fn remove(&mut self) -> Result<(), NetError> {
        self.runner.run(&script(&self.table, &[]))?;
        self.rules = Some(Vec::new());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(path: &str, minor: u32) -> NftRule {
        NftRule::for_group(
            Path::new("/sys/fs/cgroup/unified"),
            &Path::new("/sys/fs/cgroup/unified").join(path),
            0x0001_0000 | minor,
        )
        .unwrap()
    }

    #[test]
    fn a_rule_names_the_groups_depth_path_and_class() {
        let r = rule("atoll-x/main/api", 0x10);
        assert_eq!(r.level, 3);
        assert_eq!(
            r.line(),
            "socket cgroupv2 level 3 \"atoll-x/main/api\" meta priority set 1:10"
        );
        assert_eq!(rule("a", 0x1f).line().rsplit(' ').next(), Some("1:1f"));
    }

    #[test]
    fn groups_outside_the_root_or_with_quotes_are_refused_by_name() {
        let root = Path::new("/sys/fs/cgroup/unified");
        for dir in [
            "/sys/fs/cgroup/cpu/a",
            "/sys/fs/cgroup/unified",
            "/sys/fs/cgroup/unified/a\"b",
            "/sys/fs/cgroup/unified/a/../b",
        ] {
            match NftRule::for_group(root, Path::new(dir), 0x0001_0010) {
                Err(NetError::BadNftName { value, .. }) => assert_eq!(value, dir),
                other => panic!("{dir}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_table_is_named_after_the_root() {
        assert_eq!(table_name("atoll-test-12-3"), "atoll_atoll_test_12_3");
        assert_eq!(table_name("atoll"), "atoll_atoll");
    }

    #[test]
    fn a_write_replaces_the_whole_table_in_one_transaction() {
        let s = script("atoll_t", &[rule("r/a", 0x10), rule("r/b", 0x11)]);
        assert_eq!(
            s,
            "table inet atoll_t {}\n\
             delete table inet atoll_t\n\
             table inet atoll_t {\n  chain classify {\n    type filter hook output priority 0; policy accept;\n    \
             socket cgroupv2 level 2 \"r/a\" meta priority set 1:10\n    \
             socket cgroupv2 level 2 \"r/b\" meta priority set 1:11\n  }\n}\n"
        );
        assert_eq!(
            script("atoll_t", &[]),
            "table inet atoll_t {}\ndelete table inet atoll_t\n"
        );
    }

    #[test]
    fn the_first_set_always_writes_and_later_ones_only_on_change() {
        let mut c = NftClassifier::new("r", FakeNft::default());
        // Even with no rules: a crashed predecessor's table goes.
        assert!(c.set(Vec::new()).unwrap());
        assert!(!c.set(Vec::new()).unwrap());
        assert!(c.set(vec![rule("r/b", 0x11), rule("r/a", 0x10)]).unwrap());
        assert!(!c.set(vec![rule("r/a", 0x10), rule("r/b", 0x11)]).unwrap());
        assert_eq!(c.rules()[0].path, "r/a");
        assert!(c.set(vec![rule("r/a", 0x12)]).unwrap());
        c.remove().unwrap();
        let scripts = &c.runner().scripts;
        assert_eq!(scripts.len(), 4);
        assert_eq!(scripts[0], script("atoll_r", &[]));
        assert!(scripts[2].contains("\"r/a\" meta priority set 1:12"));
        assert!(!scripts[2].contains("r/b"));
        assert_eq!(scripts[3], script("atoll_r", &[]));
        assert!(c.rules().is_empty());
    }

    #[test]
    fn a_refused_write_keeps_the_old_rules_and_is_tried_again() {
        let mut c = NftClassifier::new("r", FakeNft::default());
        c.set(vec![rule("r/a", 0x10)]).unwrap();
        c.runner.fail_next = true;
        match c.set(vec![rule("r/a", 0x11)]) {
            Err(NetError::Command { stderr, .. }) => assert!(stderr.contains("refused")),
            other => panic!("{other:?}"),
        }
        assert_eq!(c.rules(), &[rule("r/a", 0x10)]);
        assert!(c.set(vec![rule("r/a", 0x11)]).unwrap());
        assert_eq!(c.runner().scripts.len(), 2);
    }

    #[test]
    fn nft_runs_in_a_private_mount_namespace_only_where_v2_is_elsewhere() {
        let plain = NftCommand::new().with_v2_root(Path::new(NFT_CGROUP_ROOT));
        assert_eq!(plain.argv(), ["nft", "-f", "-"]);
        let hybrid = NftCommand::new()
            .with_v2_root(Path::new("/sys/fs/cgroup/unified"))
            .in_netns("t1");
        let argv = hybrid.argv();
        assert_eq!(argv[0], "unshare");
        let at = argv
            .iter()
            .position(|a| a == "/sys/fs/cgroup/unified")
            .unwrap();
        assert_eq!(
            argv[at + 1..],
            ["nsenter", "--net=/run/netns/t1", "nft", "-f", "-"]
        );
    }

    #[test]
    fn a_missing_program_is_a_spawn_error_naming_it() {
        let mut nft = NftCommand::new().with_program(PathBuf::from("/nonexistent/nft"));
        match nft.run("list tables\n") {
            Err(NetError::Spawn { program, .. }) => {
                assert_eq!(program, PathBuf::from("/nonexistent/nft"));
            }
            other => panic!("{other:?}"),
        }
    }
}
