//! A fake cgroup filesystem for tests (feature `testutils`).
//!
//! [`FakeCgroupFs`] is a real directory tree in a temp dir plus the parts of
//! the kernel's behaviour the backends rely on:
//! - `mkdir` populates the interface files a new group gets, per version and
//!   controller (v2: from the parent's `cgroup.subtree_control`; v1: from the
//!   hierarchy's controllers, with the v1 quirks: empty `cpuset.cpus`/`mems`,
//!   `cpu.rt_runtime_us` 0);
//! - writes go to existing files only and are normalised as the kernel does
//!   (CPU lists, page-rounded memory limits, `cpu.max`, `io.max` merging);
//! - `cgroup.procs` moves a pid out of every other group of its hierarchy;
//!   `cgroup.subtree_control` adds and removes controller files in children;
//!   the v1 cpuset rules (subset of parent, exclusive siblings, tasks need
//!   CPUs) and the v1 RT budget rule are checked;
//! - the freezer: v2 `cgroup.freeze` updates the `frozen` line of
//!   `cgroup.events` in the group and its descendants, v1 `freezer.state`
//!   updates `freezer.self_freezing`, `freezer.parent_freezing` and the state
//!   of the subtree (freezing completes at once; a test that wants
//!   `FREEZING` sets the file);
//! - tests can make particular writes or rmdirs fail with an errno, or make a
//!   write "succeed" while the file shows something else (e.g. a partition
//!   that reads back `root invalid (...)`).
//!
//! Every attempted write is logged so tests can check that unchanged knobs
//! are not rewritten, and every read (and directory listing) so they can
//! check what a change looked at. Clones share the same tree and state.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use atoll_core::CpuSet;

use crate::fs::CgroupFs;
use crate::mounts::V1Paths;

/// How a refused operation fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Fail with this errno (e.g. `libc::EINVAL`).
    Errno(i32),
    /// Accept the write but make the file read back this text.
    Show(String),
}

/// Kernel features the fake imitates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeKernel {
    /// Online CPUs (the roots' cpusets).
    pub cpus: String,
    /// Memory nodes.
    pub mems: String,
    /// v2 groups have `cpu.rt_runtime_us` (RT group scheduling on v2).
    pub v2_rt_groups: bool,
    /// v2 groups have `cpuset.cpus.exclusive` (6.7+).
    pub v2_cpus_exclusive: bool,
    /// Groups have `cpu.idle` (5.15+).
    pub cpu_idle: bool,
    /// v1 groups have `*.pressure` files.
    pub v1_psi: bool,
    /// Which v1 blkio weight file groups get: `"bfq"`, `"cfq"` or `""`.
    pub blkio_weight: &'static str,
    /// Switching cpuset in a v2 `cgroup.subtree_control` resets the CPU
    /// mask of every task below to all CPUs (Linux before 6.2).
    pub resets_affinity: bool,
}

impl Default for FakeKernel {
    fn default() -> Self {
        Self {
            cpus: "0-3".into(),
            mems: "0".into(),
            v2_rt_groups: false,
            v2_cpus_exclusive: true,
            cpu_idle: true,
            v1_psi: false,
            blkio_weight: "bfq",
            resets_affinity: false,
        }
    }
}

#[derive(Clone, Debug)]
struct FakeMount {
    path: PathBuf,
    v2: bool,
    controllers: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Write,
    Rmdir,
    Mkdir,
}

#[derive(Clone, Debug)]
struct Rule {
    op: Op,
    suffix: String,
    value: Option<String>,
    refusal: Refusal,
    times: Option<usize>,
}

#[derive(Debug)]
struct Inner {
    kernel: FakeKernel,
    mounts: Vec<FakeMount>,
    rules: Vec<Rule>,
    log: Vec<(PathBuf, String)>,
    /// Files read and directories listed, in order.
    reads: Vec<PathBuf>,
    dead: BTreeSet<u32>,
    delegated: BTreeSet<PathBuf>,
    affinity: BTreeMap<u32, CpuSet>,
}

/// A fake cgroup filesystem in a temp dir. See the module docs.
#[derive(Clone, Debug)]
pub struct FakeCgroupFs {
    dir: Arc<tempfile::TempDir>,
    inner: Arc<Mutex<Inner>>,
}

/// Canonical order the kernel prints controllers in.
const ORDER: &[&str] = &[
    "cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma", "misc",
];
/// What v1 prints for an unlimited memory limit.
pub const V1_UNLIMITED: u64 = 9_223_372_036_854_771_712;

fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

fn put(path: &Path, text: &str) {
    let text = if text.is_empty() || text.ends_with('\n') {
        text.to_string()
    } else {
        format!("{text}\n")
    };
    fs::write(path, text).expect("fake cgroup fs: write file");
}

fn get(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_default()
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    out.push(dir.to_path_buf());
    for d in subdirs(dir) {
        walk(&d, out);
    }
}

fn cpuset_of(path: &Path) -> CpuSet {
    CpuSet::parse(get(path).trim()).unwrap_or_default()
}

fn parse_num(v: &str) -> io::Result<i64> {
    v.trim().parse::<i64>().map_err(|_| errno(libc::EINVAL))
}

impl Default for FakeCgroupFs {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeCgroupFs {
    /// An empty fake with the default [`FakeKernel`].
    pub fn new() -> Self {
        Self::with_kernel(FakeKernel::default())
    }

    /// An empty fake imitating `kernel`.
    pub fn with_kernel(kernel: FakeKernel) -> Self {
        Self {
            dir: Arc::new(tempfile::tempdir().expect("fake cgroup fs: tempdir")),
            inner: Arc::new(Mutex::new(Inner {
                kernel,
                mounts: Vec::new(),
                rules: Vec::new(),
                log: Vec::new(),
                reads: Vec::new(),
                dead: BTreeSet::new(),
                delegated: BTreeSet::new(),
                affinity: BTreeMap::new(),
            })),
        }
    }

    /// A fake with one cgroup2 mount (at `<tmp>/cgroup2`) offering
    /// `controllers`; returns the mount path.
    pub fn v2_machine(controllers: &[&str]) -> (Self, PathBuf) {
        let f = Self::new();
        let m = f.add_v2_mount("cgroup2", controllers);
        (f, m)
    }

    /// A fake laid out like a v1 machine: `cpuset`, `cpu` and `cpuacct`
    /// (co-mounted as `cpu,cpuacct` if asked), `memory`, `blkio`.
    pub fn v1_machine(kernel: FakeKernel, comounted: bool) -> (Self, V1Paths) {
        let f = Self::with_kernel(kernel);
        let cpuset = f.add_v1_mount("cpuset", &["cpuset"]);
        let (cpu, cpuacct) = if comounted {
            let p = f.add_v1_mount("cpu,cpuacct", &["cpu", "cpuacct"]);
            (p.clone(), p)
        } else {
            (
                f.add_v1_mount("cpu", &["cpu"]),
                f.add_v1_mount("cpuacct", &["cpuacct"]),
            )
        };
        let paths = V1Paths {
            cpuset,
            cpu,
            cpuacct: Some(cpuacct),
            memory: Some(f.add_v1_mount("memory", &["memory"])),
            blkio: Some(f.add_v1_mount("blkio", &["blkio"])),
            freezer: None,
            net_prio: None,
        };
        (f, paths)
    }

    /// [`Self::v1_machine`] with a `freezer` hierarchy too.
    pub fn v1_machine_with_freezer(kernel: FakeKernel, comounted: bool) -> (Self, V1Paths) {
        let (f, mut paths) = Self::v1_machine(kernel, comounted);
        paths.freezer = Some(f.add_v1_mount("freezer", &["freezer"]));
        (f, paths)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The temp dir everything lives in.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Adds a cgroup2 mount at `<tmp>/rel` whose root offers `controllers`.
    pub fn add_v2_mount(&self, rel: &str, controllers: &[&str]) -> PathBuf {
        let path = self.root().join(rel);
        fs::create_dir_all(&path).expect("fake cgroup fs: mount dir");
        let k = self.lock().kernel.clone();
        let ctl: Vec<String> = ORDER
            .iter()
            .filter(|c| controllers.contains(c))
            .map(|c| c.to_string())
            .collect();
        put(&path.join("cgroup.controllers"), &ctl.join(" "));
        for f in ["cgroup.subtree_control", "cgroup.procs", "cgroup.threads"] {
            put(&path.join(f), "");
        }
        put(
            &path.join("cpu.stat"),
            "usage_usec 0\nuser_usec 0\nsystem_usec 0\n",
        );
        for f in ["cpu.pressure", "memory.pressure", "io.pressure"] {
            put(&path.join(f), PSI_ZERO);
        }
        if controllers.contains(&"cpuset") {
            put(&path.join("cpuset.cpus.effective"), &k.cpus);
            put(&path.join("cpuset.mems.effective"), &k.mems);
        }
        self.lock().mounts.push(FakeMount {
            path: path.clone(),
            v2: true,
            controllers: ctl,
        });
        path
    }

    /// Adds a v1 hierarchy at `<tmp>/rel` with `controllers`.
    pub fn add_v1_mount(&self, rel: &str, controllers: &[&str]) -> PathBuf {
        let path = self.root().join(rel);
        fs::create_dir_all(&path).expect("fake cgroup fs: mount dir");
        let m = FakeMount {
            path: path.clone(),
            v2: false,
            controllers: controllers.iter().map(|c| c.to_string()).collect(),
        };
        let k = self.lock().kernel.clone();
        v1_files(&m, &path, &k);
        put(&path.join("cgroup.sane_behavior"), "0");
        if controllers.contains(&"cpuset") {
            put(&path.join("cpuset.cpus"), &k.cpus);
            put(&path.join("cpuset.mems"), &k.mems);
            put(&path.join("cpuset.cpu_exclusive"), "1");
            put(&path.join("cpuset.effective_cpus"), &k.cpus);
            put(&path.join("cpuset.effective_mems"), &k.mems);
        }
        if controllers.contains(&"cpu") {
            put(&path.join("cpu.rt_runtime_us"), "950000");
        }
        self.lock().mounts.push(m);
        path
    }

    /// `/proc/self/mountinfo` text describing the fake's mounts.
    pub fn mountinfo(&self) -> String {
        let inner = self.lock();
        let mut s = String::new();
        for (i, m) in inner.mounts.iter().enumerate() {
            let (fstype, opts) = if m.v2 {
                ("cgroup2", "rw".to_string())
            } else {
                ("cgroup", format!("rw,{}", m.controllers.join(",")))
            };
            s += &format!(
                "{} 31 0:{} / {} rw,relatime - {fstype} cgroup {opts}\n",
                40 + i,
                29 + i,
                m.path.display()
            );
        }
        s
    }

    /// Writes [`Self::mountinfo`] to `<tmp>/mountinfo` and returns its path.
    pub fn write_mountinfo(&self) -> PathBuf {
        let p = self.root().join("mountinfo");
        fs::write(&p, self.mountinfo()).expect("fake cgroup fs: mountinfo");
        p
    }

    /// Makes writes of `value` (any value if `None`) to paths ending in
    /// `suffix` fail as `refusal`, every time.
    pub fn refuse_write(&self, suffix: &str, value: Option<&str>, refusal: Refusal) {
        self.add_rule(Op::Write, suffix, value, refusal, None);
    }

    /// Like [`Self::refuse_write`] for the next `times` matching writes only.
    pub fn refuse_write_times(
        &self,
        suffix: &str,
        value: Option<&str>,
        refusal: Refusal,
        times: usize,
    ) {
        self.add_rule(Op::Write, suffix, value, refusal, Some(times));
    }

    /// Makes the next `times` rmdirs of paths ending in `suffix` fail with
    /// `errno` (`None`: always).
    pub fn refuse_rmdir(&self, suffix: &str, errno: i32, times: Option<usize>) {
        self.add_rule(Op::Rmdir, suffix, None, Refusal::Errno(errno), times);
    }

    /// Makes mkdirs of paths ending in `suffix` fail with `errno`.
    pub fn refuse_mkdir(&self, suffix: &str, errno: i32) {
        self.add_rule(Op::Mkdir, suffix, None, Refusal::Errno(errno), None);
    }

    fn add_rule(
        &self,
        op: Op,
        suffix: &str,
        value: Option<&str>,
        refusal: Refusal,
        times: Option<usize>,
    ) {
        self.lock().rules.push(Rule {
            op,
            suffix: suffix.to_string(),
            value: value.map(str::to_string),
            refusal,
            times,
        });
    }

    /// Drops every refusal rule.
    pub fn clear_refusals(&self) {
        self.lock().rules.clear();
    }

    /// Every write attempted so far (path, value), refused ones included.
    pub fn writes(&self) -> Vec<(PathBuf, String)> {
        self.lock().log.clone()
    }

    /// Returns and forgets the write log.
    pub fn take_writes(&self) -> Vec<(PathBuf, String)> {
        std::mem::take(&mut self.lock().log)
    }

    /// Returns and forgets the files read and directories listed so far.
    pub fn take_reads(&self) -> Vec<PathBuf> {
        std::mem::take(&mut self.lock().reads)
    }

    /// Sets a file's content directly, as the kernel would update a
    /// statistics file (creates it if missing).
    pub fn set(&self, path: &Path, content: &str) {
        put(path, content);
    }

    /// A file's content (empty if missing).
    pub fn get(&self, path: &Path) -> String {
        get(path)
    }

    /// Removes a file (e.g. to imitate an older kernel).
    pub fn remove_file(&self, path: &Path) {
        let _ = fs::remove_file(path);
    }

    /// Marks a cgroup directory as systemd marks a unit's with `Delegate=`
    /// (`CgroupFs::is_delegated`).
    pub fn mark_delegated(&self, path: &Path) {
        self.lock().delegated.insert(path.to_path_buf());
    }

    /// Resets the mask of every task with one in the groups below `dir`,
    /// as Linux before 6.2 does when cpuset is switched in `dir`.
    pub(crate) fn reset_affinity_below(&self, dir: &Path) {
        let mut below = Vec::new();
        for d in subdirs(dir) {
            walk(&d, &mut below);
        }
        let mut inner = self.lock();
        let all = CpuSet::parse(&inner.kernel.cpus).unwrap_or_default();
        for d in below {
            for pid in get(&d.join("cgroup.procs"))
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
            {
                if let Some(m) = inner.affinity.get_mut(&pid) {
                    *m = all.clone();
                }
            }
        }
    }

    /// Makes `pid` exit: it leaves every group and later moves fail with
    /// `ESRCH`.
    pub fn kill(&self, pid: u32) {
        let mut inner = self.lock();
        inner.dead.insert(pid);
        let mounts: Vec<PathBuf> = inner.mounts.iter().map(|m| m.path.clone()).collect();
        drop(inner);
        for m in mounts {
            remove_pid(&m, pid);
        }
    }

    fn take_rule(&self, op: Op, path: &Path, value: &str) -> Option<Refusal> {
        let mut inner = self.lock();
        let p = path.to_string_lossy().into_owned();
        let i = inner.rules.iter().position(|r| {
            r.op == op
                && p.ends_with(&r.suffix)
                && r.value.as_deref().is_none_or(|v| v == value.trim())
                && r.times != Some(0)
        })?;
        let r = &mut inner.rules[i];
        if let Some(t) = &mut r.times {
            *t -= 1;
        }
        Some(r.refusal.clone())
    }

    fn mount_of(&self, path: &Path) -> Option<FakeMount> {
        self.lock()
            .mounts
            .iter()
            .filter(|m| path.starts_with(&m.path))
            .max_by_key(|m| m.path.as_os_str().len())
            .cloned()
    }
}

const PSI_ZERO: &str = "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n\
                        full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";

/// The files of a v1 group in hierarchy `m` (the root gets them too).
fn v1_files(m: &FakeMount, dir: &Path, k: &FakeKernel) {
    let has = |c: &str| m.controllers.iter().any(|x| x == c);
    let w = |f: &str, v: &str| put(&dir.join(f), v);
    for f in ["cgroup.procs", "tasks"] {
        w(f, "");
    }
    w("cgroup.clone_children", "0");
    w("notify_on_release", "0");
    if k.v1_psi {
        for f in ["cpu.pressure", "memory.pressure", "io.pressure"] {
            w(f, PSI_ZERO);
        }
    }
    if has("cpuset") {
        for f in ["cpuset.cpus", "cpuset.mems", "cpuset.effective_cpus"] {
            w(f, "");
        }
        w("cpuset.effective_mems", "");
        w("cpuset.cpu_exclusive", "0");
        w("cpuset.mem_exclusive", "0");
        w("cpuset.sched_load_balance", "1");
    }
    if has("cpu") {
        w("cpu.shares", "1024");
        w("cpu.cfs_period_us", "100000");
        w("cpu.cfs_quota_us", "-1");
        w("cpu.rt_period_us", "1000000");
        w("cpu.rt_runtime_us", "0");
        w(
            "cpu.stat",
            "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n",
        );
        if k.cpu_idle {
            w("cpu.idle", "0");
        }
    }
    if has("cpuacct") {
        w("cpuacct.usage", "0");
        w("cpuacct.stat", "user 0\nsystem 0\n");
    }
    if has("memory") {
        let u = V1_UNLIMITED.to_string();
        w("memory.limit_in_bytes", &u);
        w("memory.soft_limit_in_bytes", &u);
        w("memory.usage_in_bytes", "0");
        w("memory.use_hierarchy", "1");
    }
    // Not on the hierarchy's root, as in the kernel.
    if has("freezer") && dir != m.path {
        let parent = dir.parent().map(|p| get(&p.join("freezer.state")));
        let above = parent.is_some_and(|s| matches!(s.trim(), "FROZEN" | "FREEZING"));
        w("freezer.state", if above { "FROZEN" } else { "THAWED" });
        w("freezer.self_freezing", "0");
        w("freezer.parent_freezing", if above { "1" } else { "0" });
    }
    if has("blkio") {
        match k.blkio_weight {
            "bfq" => w("blkio.bfq.weight", "100"),
            "cfq" => w("blkio.weight", "500"),
            _ => {}
        }
        for f in ["read_bps", "write_bps", "read_iops", "write_iops"] {
            w(&format!("blkio.throttle.{f}_device"), "");
        }
        w("blkio.throttle.io_service_bytes", "Total 0");
        w("blkio.throttle.io_service_bytes_recursive", "Total 0");
    }
}

/// The files controller `c` adds to a non-root v2 group.
fn v2_controller_files(c: &str, dir: &Path, k: &FakeKernel, parent: &Path) {
    let w = |f: &str, v: &str| put(&dir.join(f), v);
    match c {
        "cpuset" => {
            w("cpuset.cpus", "");
            w("cpuset.mems", "");
            w("cpuset.cpus.partition", "member");
            let eff = |f: &str| {
                let v = get(&parent.join(f));
                if v.trim().is_empty() {
                    k.cpus.clone()
                } else {
                    v
                }
            };
            w("cpuset.cpus.effective", &eff("cpuset.cpus.effective"));
            w("cpuset.mems.effective", &k.mems);
            if k.v2_cpus_exclusive {
                w("cpuset.cpus.exclusive", "");
                w("cpuset.cpus.exclusive.effective", "");
            }
        }
        "cpu" => {
            w("cpu.weight", "100");
            w("cpu.weight.nice", "0");
            w("cpu.max", "max 100000");
            w("cpu.max.burst", "0");
            if k.cpu_idle {
                w("cpu.idle", "0");
            }
            if k.v2_rt_groups {
                w("cpu.rt_runtime_us", "0");
                w("cpu.rt_period_us", "1000000");
            }
            let stat = get(&dir.join("cpu.stat"));
            if !stat.contains("nr_periods") {
                w(
                    "cpu.stat",
                    &format!("{stat}nr_periods 0\nnr_throttled 0\nthrottled_usec 0\n"),
                );
            }
        }
        "memory" => {
            for (f, v) in [
                ("memory.min", "0"),
                ("memory.low", "0"),
                ("memory.high", "max"),
                ("memory.max", "max"),
                ("memory.current", "0"),
                ("memory.swap.max", "max"),
            ] {
                w(f, v);
            }
        }
        "io" => {
            w("io.weight", "default 100");
            w("io.max", "");
            w("io.stat", "");
        }
        _ => {}
    }
}

fn remove_v2_controller_files(c: &str, dir: &Path) {
    let prefix = format!("{c}.");
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.filter_map(Result::ok) {
            let name = e.file_name().to_string_lossy().into_owned();
            let keep = name == "cpu.stat" || name.ends_with(".pressure");
            if name.starts_with(&prefix) && !keep && e.path().is_file() {
                let _ = fs::remove_file(e.path());
            }
        }
    }
}

fn remove_pid(mount: &Path, pid: u32) {
    let mut dirs = Vec::new();
    walk(mount, &mut dirs);
    for d in dirs {
        // A fake process has one thread, its pid: cgroup.threads mirrors
        // cgroup.procs.
        for name in ["cgroup.procs", "cgroup.threads"] {
            let f = d.join(name);
            let text = get(&f);
            if text.lines().any(|l| l.trim() == pid.to_string()) {
                let rest: String = text
                    .lines()
                    .filter(|l| l.trim() != pid.to_string())
                    .map(|l| format!("{l}\n"))
                    .collect();
                put(&f, &rest);
            }
        }
    }
}

#[path = "testutils_write.rs"]
mod write;

impl CgroupFs for FakeCgroupFs {
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        if let Some(Refusal::Errno(e)) = self.take_rule(Op::Mkdir, path, "") {
            return Err(errno(e));
        }
        let parent = path.parent().ok_or_else(|| errno(libc::EINVAL))?;
        if !parent.is_dir() {
            return Err(errno(libc::ENOENT));
        }
        fs::create_dir(path)?;
        let Some(m) = self.mount_of(path) else {
            return Ok(());
        };
        let k = self.lock().kernel.clone();
        if m.v2 {
            let ctl = get(&parent.join("cgroup.subtree_control"));
            put(&path.join("cgroup.controllers"), ctl.trim());
            for f in ["cgroup.subtree_control", "cgroup.procs", "cgroup.threads"] {
                put(&path.join(f), "");
            }
            put(&path.join("cgroup.type"), "domain");
            put(&path.join("cgroup.events"), "populated 0\nfrozen 0\n");
            let frozen = get(&parent.join("cgroup.events")).contains("frozen 1");
            if frozen {
                put(&path.join("cgroup.events"), "populated 0\nfrozen 1\n");
            }
            put(&path.join("cgroup.freeze"), "0");
            put(
                &path.join("cpu.stat"),
                "usage_usec 0\nuser_usec 0\nsystem_usec 0\n",
            );
            for f in ["cpu.pressure", "memory.pressure", "io.pressure"] {
                put(&path.join(f), PSI_ZERO);
            }
            for c in ctl.split_whitespace() {
                v2_controller_files(c, path, &k, parent);
            }
        } else {
            v1_files(&m, path, &k);
        }
        Ok(())
    }

    fn rmdir(&self, path: &Path) -> io::Result<()> {
        if let Some(Refusal::Errno(e)) = self.take_rule(Op::Rmdir, path, "") {
            return Err(errno(e));
        }
        if !path.is_dir() {
            return Err(errno(libc::ENOENT));
        }
        if !subdirs(path).is_empty() || !get(&path.join("cgroup.procs")).trim().is_empty() {
            return Err(errno(libc::EBUSY));
        }
        fs::remove_dir_all(path)
    }

    fn read_to_string(&self, path: &Path) -> io::Result<String> {
        self.lock().reads.push(path.to_path_buf());
        fs::read_to_string(path)
    }

    fn write(&self, path: &Path, value: &str) -> io::Result<()> {
        self.lock()
            .log
            .push((path.to_path_buf(), value.to_string()));
        if !path.is_file() {
            return Err(errno(libc::ENOENT));
        }
        match self.take_rule(Op::Write, path, value) {
            Some(Refusal::Errno(e)) => return Err(errno(e)),
            Some(Refusal::Show(s)) => {
                put(path, &s);
                return Ok(());
            }
            None => {}
        }
        write::kernel_write(self, path, value.trim())
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn is_delegated(&self, path: &Path) -> bool {
        self.lock().delegated.contains(path)
    }

    fn affinity(&self, tid: u32) -> Option<CpuSet> {
        self.lock().affinity.get(&tid).cloned()
    }

    fn set_affinity(&self, tid: u32, cpus: &CpuSet) -> io::Result<()> {
        self.lock().affinity.insert(tid, cpus.clone());
        Ok(())
    }

    fn child_dirs(&self, path: &Path) -> io::Result<Vec<String>> {
        self.lock().reads.push(path.to_path_buf());
        if !path.is_dir() {
            return Err(errno(libc::ENOENT));
        }
        Ok(subdirs(path)
            .iter()
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect())
    }
}
