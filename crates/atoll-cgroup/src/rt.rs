//! RT budgets: `cpu.rt_runtime_us` / `cpu.rt_period_us` (cgroup v1, and v2
//! kernels built with RT group scheduling).
//!
//! The kernel keeps, for every group, its children's runtime/period ratios
//! summed within its own, and its own within its parent's; a write that
//! would break that is refused (`EINVAL`), and a group with runtime 0 admits
//! no SCHED_FIFO/RR task (`sched_setscheduler` fails with `EPERM`, moving
//! an RT task in with `EINVAL`). So [`sync_rt`]:
//!
//! - writes runtime and period in the order that keeps runtime <= period;
//! - when a group shrinks below what its children hold, shrinks the
//!   children first (in proportion, deepest first), then itself; the
//!   children get their own budgets back when they are applied;
//! - when a group grows past what its parent has left, gives it what is
//!   left (RT tasks keep a budget) and reports the budget in a fallback:
//!   the group, what it wanted, what the parent has and its other children
//!   hold, and what it got;
//! - leaves an optional budget (room for RT programs in a non-realtime
//!   group) out without a fallback where the kernel has no RT group
//!   scheduling.

use std::io;
use std::path::Path;

use atoll_core::num::saturating_i64;
use atoll_core::plan::RtBudget;

use crate::common::{write, Outcome, Report};
use crate::error::CgroupError;
use crate::fs::CgroupFs;
use crate::knobs::parse_i64;

const RUNTIME: &str = "cpu.rt_runtime_us";
const PERIOD: &str = "cpu.rt_period_us";

/// A group's budget as the kernel has it: runtime (-1: unlimited) and
/// period, µs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Have {
    runtime: i64,
    period: i64,
}

impl Have {
    /// The share of a CPU it may use.
    fn ratio(self) -> f64 {
        if self.runtime < 0 {
            1.0
        } else {
            self.runtime as f64 / self.period.max(1) as f64
        }
    }
}

fn read_num(fs: &dyn CgroupFs, p: &Path) -> Result<Option<i64>, CgroupError> {
    match fs.read_to_string(p) {
        Ok(s) => Ok(parse_i64(&s).ok()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CgroupError::io("read", p, None, e)),
    }
}

fn have(fs: &dyn CgroupFs, dir: &Path) -> Result<Option<Have>, CgroupError> {
    Ok(
        match (
            read_num(fs, &dir.join(RUNTIME))?,
            read_num(fs, &dir.join(PERIOD))?,
        ) {
            (Some(runtime), Some(period)) => Some(Have { runtime, period }),
            _ => None,
        },
    )
}

/// What the children of `dir` hold together, as a share of a CPU.
fn children_ratio(fs: &dyn CgroupFs, dir: &Path) -> Result<f64, CgroupError> {
    let mut sum = 0.0;
    for c in fs.child_dirs(dir).unwrap_or_default() {
        if let Some(h) = have(fs, &dir.join(c))? {
            sum += h.ratio();
        }
    }
    Ok(sum)
}

/// Writes `runtime`/`period` to `dir` (which has `cur`) in a safe order;
/// the refusal's reason, if the kernel refused a step.
fn write_budget(
    fs: &dyn CgroupFs,
    dir: &Path,
    runtime: i64,
    period: i64,
    cur: Have,
) -> Result<Option<String>, CgroupError> {
    let rt_file = dir.join(RUNTIME);
    let period_file = dir.join(PERIOD);
    let steps: Vec<(&Path, i64)> = if period == cur.period {
        vec![(&rt_file, runtime)]
    } else if cur.runtime > period {
        vec![(&rt_file, runtime), (&period_file, period)]
    } else {
        vec![(&period_file, period), (&rt_file, runtime)]
    };
    for (file, v) in steps {
        if let Outcome::Refused { reason, .. } = write(fs, file, &v.to_string(), "")? {
            return Ok(Some(reason));
        }
    }
    Ok(None)
}

/// Shrinks the budgets of `dir`'s descendants, deepest first and in
/// proportion, so that its children hold at most `ratio` of a CPU (best
/// effort: the retry of `dir` itself reports what did not work).
fn shrink_children(fs: &dyn CgroupFs, dir: &Path, ratio: f64) -> Result<(), CgroupError> {
    let held = children_ratio(fs, dir)?;
    if held <= ratio {
        return Ok(());
    }
    let scale = ratio / held;
    for c in fs.child_dirs(dir).unwrap_or_default() {
        let c = dir.join(c);
        let Some(h) = have(fs, &c)? else { continue };
        if h.runtime <= 0 {
            continue;
        }
        let runtime = saturating_i64((h.runtime as f64 * scale).floor());
        shrink_children(fs, &c, runtime as f64 / h.period.max(1) as f64)?;
        write_budget(fs, &c, runtime, h.period, h)?;
    }
    Ok(())
}

/// What `dir`'s parent has and its other children hold, and what that
/// leaves at `period`, µs; `None` when the parent has no RT files.
struct Left {
    parent: Have,
    siblings: f64,
    left_us: i64,
}

fn left_in_parent(fs: &dyn CgroupFs, dir: &Path, period: i64) -> Result<Option<Left>, CgroupError> {
    let Some(parent_dir) = dir.parent() else {
        return Ok(None);
    };
    let Some(parent) = have(fs, parent_dir)? else {
        return Ok(None);
    };
    let me = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let mut siblings = 0.0;
    for s in fs.child_dirs(parent_dir).unwrap_or_default() {
        if s != me {
            if let Some(h) = have(fs, &parent_dir.join(s))? {
                siblings += h.ratio();
            }
        }
    }
    let left = (parent.ratio() - siblings).max(0.0);
    Ok(Some(Left {
        parent,
        siblings,
        left_us: saturating_i64((left * period as f64).floor()).min(period),
    }))
}

/// Makes `cpu.rt_period_us`/`cpu.rt_runtime_us` of `dir` match `want`
/// (`None`: runtime 0, the kernel's default for a new group); see the
/// module docs. `optional`: a missing file is no fallback.
pub(crate) fn sync_rt(
    fs: &dyn CgroupFs,
    dir: &Path,
    want: Option<RtBudget>,
    optional: bool,
    rep: &mut Report<'_>,
) -> Result<(), CgroupError> {
    let Some(cur) = have(fs, dir)? else {
        if let (Some(b), false) = (want, optional) {
            rep.push(
                RUNTIME,
                &b.runtime_us.to_string(),
                "n/a",
                format!(
                    "{} does not exist: no RT group scheduling here; RT tasks run under the global sched_rt_runtime_us limit",
                    dir.join(RUNTIME).display()
                ),
            );
        }
        return Ok(());
    };
    let (runtime, period) = match want {
        Some(b) => (b.runtime_us as i64, b.period_us as i64),
        None => (0, cur.period),
    };
    if (cur.runtime, cur.period) == (runtime, period) {
        return Ok(());
    }
    let Some(mut reason) = write_budget(fs, dir, runtime, period, cur)? else {
        return Ok(());
    };
    let wanted_ratio = runtime as f64 / period.max(1) as f64;
    // Children first when shrinking.
    if children_ratio(fs, dir)? > wanted_ratio {
        shrink_children(fs, dir, wanted_ratio)?;
        let now = have(fs, dir)?.unwrap_or(cur);
        match write_budget(fs, dir, runtime, period, now)? {
            None => return Ok(()),
            Some(r) => reason = r,
        }
    }
    // Growing past what the parent has left: take what is left.
    let left = left_in_parent(fs, dir, period)?;
    let mut gave = None;
    if let Some(l) = &left {
        let now = have(fs, dir)?.unwrap_or(cur);
        let kids_us = saturating_i64((children_ratio(fs, dir)? * period as f64).ceil());
        let fits = l.left_us < runtime && l.left_us > now.runtime.max(0) && l.left_us >= kids_us;
        if fits && write_budget(fs, dir, l.left_us, period, now)?.is_none() {
            gave = Some(l.left_us);
        }
    }
    let now = have(fs, dir)?.unwrap_or(cur);
    let mut why = format!("{reason}: {} wants {runtime}/{period} µs", dir.display());
    match &left {
        Some(l) => why.push_str(&format!(
            "; its parent has {}/{} µs, of which its other children hold {:.0} µs per {period}, leaving {} µs",
            l.parent.runtime,
            l.parent.period,
            l.siblings * period as f64,
            l.left_us
        )),
        None => why.push_str("; the parent's RT budget must cover its children's"),
    }
    if children_ratio(fs, dir)? > wanted_ratio {
        why.push_str(&format!(
            "; its children hold {:.0} µs per {period}",
            children_ratio(fs, dir)? * period as f64
        ));
    }
    match gave {
        Some(g) => why.push_str(&format!("; it has {g} µs of it until more is free")),
        None => why.push_str(&format!(
            "; it keeps {}/{} µs (parents are applied first)",
            now.runtime, now.period
        )),
    }
    rep.push(
        RUNTIME,
        &format!("{runtime}/{period}"),
        &format!("{}/{}", now.runtime, now.period),
        why,
    );
    Ok(())
}
