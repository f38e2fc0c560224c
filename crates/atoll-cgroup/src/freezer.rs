//! The cgroup freezer: stopping a group's tasks and letting them run again.
//!
//! [`GroupSettings::frozen`](atoll_core::plan::GroupSettings::frozen) is one
//! knob in both versions:
//! - v2: `cgroup.freeze` (`1`/`0`), in every group but the mount's root;
//!   `cgroup.events` shows `frozen 1` once every task has stopped (also when
//!   an ancestor is frozen).
//! - v1: `freezer.state` in the `freezer` hierarchy (`FROZEN`/`THAWED` are
//!   written; it reads `FREEZING` while tasks are still stopping, and
//!   `FROZEN` when an ancestor is frozen). `freezer.self_freezing` says
//!   whether the group itself asked, which is what the knob is compared
//!   with; kernels without that file are compared on `freezer.state`.
//!   Without a writable freezer hierarchy a `frozen = true` request is a
//!   [`Fallback`](atoll_core::backend::Fallback), never a silent no-op.
//!
//! As for every knob, the value is read first and written only when it
//! differs. Freezing is asynchronous: `apply` returns once the kernel took the
//! request, and [`FreezeState::Freezing`] may be read for a while.
//!
//! Removing a group thaws it first (`thaw_v2`, `thaw_v1`): a task still
//! in a frozen group (one that could not be moved out, or is exiting) would
//! otherwise stay stopped, and the group busy.

use std::io;
use std::path::Path;

use atoll_core::backend::FreezeState;

use crate::common::{sync, write, Outcome, Report};
use crate::error::{BadValue, CgroupError};
use crate::fs::CgroupFs;
use crate::stats::{parse_keyed, read_opt, read_parsed};

/// v2 knob: `1` freezes the group, `0` thaws it.
pub const V2_FREEZE: &str = "cgroup.freeze";
/// v2 status file whose `frozen` key says whether the group is frozen.
pub const V2_EVENTS: &str = "cgroup.events";
/// v1 knob and state: `THAWED`, `FREEZING`, `FROZEN`.
pub const V1_STATE: &str = "freezer.state";
/// v1: `1` if the group itself (not an ancestor) is asked to freeze.
pub const V1_SELF: &str = "freezer.self_freezing";

/// The value written to `freezer.state` for `frozen`.
pub fn v1_word(frozen: bool) -> &'static str {
    if frozen {
        "FROZEN"
    } else {
        "THAWED"
    }
}

/// Parses v1 `freezer.state`.
pub fn parse_v1_state(text: &str) -> Result<FreezeState, BadValue> {
    match text.trim() {
        "THAWED" => Ok(FreezeState::Thawed),
        "FREEZING" => Ok(FreezeState::Freezing),
        "FROZEN" => Ok(FreezeState::Frozen),
        t => Err(BadValue::new(t, "expected THAWED, FREEZING or FROZEN")),
    }
}

/// Parses a `0`/`1` file (`cgroup.freeze`, `freezer.self_freezing`).
pub fn parse_flag(text: &str) -> Result<bool, BadValue> {
    match text.trim() {
        "0" => Ok(false),
        "1" => Ok(true),
        t => Err(BadValue::new(t, "expected 0 or 1")),
    }
}

/// The v2 state from `cgroup.freeze` (what the group asked) and the
/// `frozen` key of `cgroup.events` (what the kernel achieved).
pub fn v2_state(asked: bool, events_frozen: bool) -> FreezeState {
    match (asked, events_frozen) {
        (_, true) => FreezeState::Frozen,
        (true, false) => FreezeState::Freezing,
        (false, false) => FreezeState::Thawed,
    }
}

fn read_flag(fs: &dyn CgroupFs, path: &Path) -> Result<Option<bool>, CgroupError> {
    read_parsed(fs, path, parse_flag)
}

/// Makes the group's `cgroup.freeze` say `frozen`.
pub(crate) fn apply_v2(
    fs: &dyn CgroupFs,
    dir: &Path,
    frozen: bool,
    rep: &mut Report<'_>,
) -> Result<(), CgroupError> {
    let want = if frozen { "1" } else { "0" };
    match sync(fs, dir, V2_FREEZE, want, |c| c.trim() == want)? {
        Outcome::Missing if frozen => rep.push(
            V2_FREEZE,
            want,
            "n/a",
            format!(
                "{} does not exist (the v2 freezer needs Linux 5.2); the group's tasks keep running",
                dir.join(V2_FREEZE).display()
            ),
        ),
        o => rep.outcome(V2_FREEZE, want, frozen, o, dir),
    }
    Ok(())
}

/// Whether a v1 freezer group asked to be frozen itself, and the
/// `freezer.state` text; `None` if it has no `freezer.state`.
fn v1_self(fs: &dyn CgroupFs, dir: &Path) -> Result<Option<(bool, String)>, CgroupError> {
    let state_file = dir.join(V1_STATE);
    let Some(text) = read_opt(fs, &state_file)? else {
        return Ok(None);
    };
    let shown = text.trim().to_string();
    let own = match read_flag(fs, &dir.join(V1_SELF))? {
        Some(f) => f,
        None => parse_v1_state(&shown).map_err(|e| e.at(&state_file))? != FreezeState::Thawed,
    };
    Ok(Some((own, shown)))
}

/// Makes the group's v1 `freezer.state` agree with `frozen`; `dir` is the
/// group in the freezer hierarchy, `None` when none is mounted.
pub(crate) fn apply_v1(
    fs: &dyn CgroupFs,
    dir: Option<&Path>,
    frozen: bool,
    rep: &mut Report<'_>,
) -> Result<(), CgroupError> {
    let want = v1_word(frozen);
    let Some(dir) = dir else {
        if frozen {
            rep.push(
                V1_STATE,
                want,
                "n/a",
                "no writable freezer hierarchy is mounted; the group's tasks keep running",
            );
        }
        return Ok(());
    };
    match v1_self(fs, dir)? {
        None => rep.outcome(V1_STATE, want, frozen, Outcome::Missing, dir),
        Some((own, _)) if own == frozen => {}
        Some((_, shown)) => {
            let o = write(fs, &dir.join(V1_STATE), want, &shown)?;
            rep.outcome(V1_STATE, want, true, o, dir);
        }
    }
    Ok(())
}

/// Writes `value` to `file`; a missing file (the group is gone) is fine.
fn write_thaw(fs: &dyn CgroupFs, file: &Path, value: &str) -> Result<(), CgroupError> {
    match fs.write(file, value) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(CgroupError::io("write", file, Some(value), e)),
    }
}

/// Thaws a v2 group that asked to be frozen (before removing it).
pub(crate) fn thaw_v2(fs: &dyn CgroupFs, dir: &Path) -> Result<(), CgroupError> {
    let file = dir.join(V2_FREEZE);
    if read_flag(fs, &file)? == Some(true) {
        write_thaw(fs, &file, "0")?;
    }
    Ok(())
}

/// Thaws a v1 freezer group that asked to be frozen (before removing it).
pub(crate) fn thaw_v1(fs: &dyn CgroupFs, dir: &Path) -> Result<(), CgroupError> {
    if let Some((true, _)) = v1_self(fs, dir)? {
        write_thaw(fs, &dir.join(V1_STATE), v1_word(false))?;
    }
    Ok(())
}

/// The v2 state of the group at `dir`; `None` without `cgroup.freeze`.
pub(crate) fn read_v2(fs: &dyn CgroupFs, dir: &Path) -> Result<Option<FreezeState>, CgroupError> {
    let Some(asked) = read_flag(fs, &dir.join(V2_FREEZE))? else {
        return Ok(None);
    };
    let events = read_parsed(fs, &dir.join(V2_EVENTS), parse_keyed)?.unwrap_or_default();
    let frozen = events.get("frozen").is_some_and(|v| *v == 1);
    Ok(Some(v2_state(asked, frozen)))
}

/// The v1 state of the freezer group at `dir`; `None` without
/// `freezer.state`.
pub(crate) fn read_v1(fs: &dyn CgroupFs, dir: &Path) -> Result<Option<FreezeState>, CgroupError> {
    read_parsed(fs, &dir.join(V1_STATE), parse_v1_state)
}

#[cfg(test)]
#[path = "freezer_tests.rs"]
mod tests;
