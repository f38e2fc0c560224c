//! What `atoll top` shows and how keys change it, without a terminal.
//!
//! The I/O loop ([`super::run`]) feeds a [`Model`] with [`Snapshot`]s read
//! from the daemon and with [`Key`]s read from the terminal; the model
//! answers each key with a [`Command`] (quit, fetch a unit's history) and
//! [`super::view`] draws it. Everything here is plain data, so tests build
//! a model from status structs and check what it holds and draws.

use std::collections::HashMap;
use std::time::Duration;

use atoll_core::backend::GroupStats;
use atoll_core::decision::Decision;
use atoll_proto::apps::{AppRunState, AppStatus};
use atoll_proto::coord::OverlayStatus;
use atoll_proto::StatusReport;

/// One reading of the daemon: what `status`, `overlays`, `apps` and `why`
/// answered.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// `status`.
    pub status: StatusReport,
    /// `overlays`.
    pub overlays: Vec<OverlayStatus>,
    /// `apps`.
    pub apps: Vec<AppStatus>,
    /// `why` with a limit: the latest decisions, oldest first.
    pub decisions: Vec<Decision>,
}

/// A key the model understands (the I/O loop translates terminal events).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    /// A printable character.
    Char(char),
    /// Enter.
    Enter,
    /// Escape.
    Esc,
    /// Backspace.
    Backspace,
    /// Arrow up.
    Up,
    /// Arrow down.
    Down,
    /// Page up.
    PageUp,
    /// Page down.
    PageDown,
}

/// What the I/O loop must do after a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Nothing beyond drawing again.
    Redraw,
    /// Leave.
    Quit,
    /// Ask `why UNIT` and hand the answer to [`Model::set_history`].
    History(String),
}

/// The column the units are sorted by; `s` cycles through them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortKey {
    /// Unit name.
    Name,
    /// Island, then unit name.
    Island,
    /// CPUs used over the last interval.
    Cpu,
    /// Share of periods throttled.
    Throttled,
    /// CPU pressure (PSI some, avg10).
    CpuPressure,
    /// Memory pressure (PSI some, avg10).
    MemPressure,
    /// Memory in use.
    Memory,
}

impl SortKey {
    /// Every key, in the order `s` cycles through them.
    pub const ALL: [SortKey; 7] = [
        Self::Name,
        Self::Island,
        Self::Cpu,
        Self::Throttled,
        Self::CpuPressure,
        Self::MemPressure,
        Self::Memory,
    ];

    /// The next key in the cycle.
    pub fn next(self) -> Self {
        let i = Self::ALL.iter().position(|k| *k == self).unwrap_or(0);
        Self::ALL[(i + 1) % Self::ALL.len()]
    }

    /// Its name on screen.
    pub fn label(self) -> &'static str {
        match self {
            Self::Name => "name",
            Self::Island => "island",
            Self::Cpu => "cpu",
            Self::Throttled => "throttled",
            Self::CpuPressure => "cpu pressure",
            Self::MemPressure => "memory pressure",
            Self::Memory => "memory",
        }
    }

    /// Names sort up (a to z), figures down (the biggest first).
    fn descending_by_default(self) -> bool {
        !matches!(self, Self::Name | Self::Island)
    }
}

/// Usage figures of one group, as rates where two readings allow.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Usage {
    /// CPUs' worth of time used over the last interval (before a second
    /// reading: `None`).
    pub cpus_used: Option<f64>,
    /// Percent of enforcement periods throttled over the last interval
    /// (before a second reading: since the group was made).
    pub throttled_pct: Option<f64>,
    /// CPU pressure, PSI `some` avg10, percent.
    pub cpu_pressure: Option<f64>,
    /// Memory pressure, PSI `some` avg10, percent.
    pub mem_pressure: Option<f64>,
    /// Memory in use, bytes.
    pub memory: Option<u64>,
}

/// One island as a row.
#[derive(Clone, Debug, PartialEq)]
pub struct IslandRow {
    /// Name.
    pub name: String,
    /// Its CPUs.
    pub cpus: String,
    /// Scheduler policy.
    pub policy: String,
    /// Number of units.
    pub units: usize,
    /// Usage.
    pub usage: Usage,
}

/// One unit as a row.
#[derive(Clone, Debug, PartialEq)]
pub struct UnitRow {
    /// Name.
    pub name: String,
    /// Its island.
    pub island: String,
    /// Its home CPUs (under `quota`/`isolate`), else its island's.
    pub home: String,
    /// Home CPUs lent to others now (`None` outside `isolate`/`quota`).
    pub lent: Option<String>,
    /// Others' CPUs it borrows now (as `lent`).
    pub borrowed: Option<String>,
    /// Its processes.
    pub pids: usize,
    /// Usage.
    pub usage: Usage,
    /// Boosted now by communication-aware scheduling (`None`: not watched).
    pub boosted: Option<bool>,
    /// The working mode of the application it holds, if any.
    pub mode: Option<String>,
}

/// A unit's decisions (`why UNIT`), shown over the rest.
#[derive(Clone, Debug, PartialEq)]
pub struct History {
    /// The unit.
    pub unit: String,
    /// Its decisions, oldest first (`None` until the answer comes).
    pub decisions: Option<Vec<Decision>>,
    /// Lines scrolled up from the newest.
    pub scroll: usize,
}

/// Counters of one group at one reading, for rates.
#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    cpu_usage_us: Option<u64>,
    nr_periods: Option<u64>,
    nr_throttled: Option<u64>,
}

impl Counters {
    fn of(s: &GroupStats) -> Self {
        Self {
            cpu_usage_us: s.cpu_usage_us,
            nr_periods: s.nr_periods,
            nr_throttled: s.nr_throttled,
        }
    }
}

/// The state of the screen.
#[derive(Clone, Debug)]
pub struct Model {
    interval: Duration,
    snapshot: Option<Snapshot>,
    islands: Vec<IslandRow>,
    units: Vec<UnitRow>,
    /// Counters at the previous reading, by `island` or `island/unit`,
    /// and the daemon's uptime then (ms).
    previous: Option<(u64, HashMap<String, Counters>)>,
    sort: SortKey,
    descending: bool,
    filter: String,
    editing: bool,
    /// The selected unit, as `island/unit` (kept across refreshes).
    selected: Option<String>,
    history: Option<History>,
    help: bool,
    error: Option<String>,
}

impl Model {
    /// An empty model that refreshes every `interval` (shown in the header).
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            snapshot: None,
            islands: Vec::new(),
            units: Vec::new(),
            previous: None,
            sort: SortKey::Name,
            descending: false,
            filter: String::new(),
            editing: false,
            selected: None,
            history: None,
            help: false,
            error: None,
        }
    }

    /// Takes a new reading: rows, rates against the previous reading, and
    /// no error.
    pub fn update(&mut self, snap: Snapshot) {
        let s = &snap.status;
        let now: HashMap<String, Counters> = s
            .islands
            .iter()
            .map(|i| (i.name.clone(), Counters::of(&i.stats)))
            .chain(
                s.units
                    .iter()
                    .map(|u| (format!("{}/{}", u.island, u.name), Counters::of(&u.stats))),
            )
            .collect();
        let prev = self
            .previous
            .as_ref()
            .filter(|(at, _)| *at < s.uptime_ms)
            .map(|(at, c)| (s.uptime_ms - at, c));
        let usage = |key: &str, stats: &GroupStats| -> Usage {
            let before = prev.and_then(|(dt, c)| c.get(key).map(|c| (dt, *c)));
            usage_of(stats, before)
        };
        self.islands = s
            .islands
            .iter()
            .map(|i| IslandRow {
                name: i.name.clone(),
                cpus: set_or_dash(&i.cpus.to_string()),
                policy: i.policy.to_string(),
                units: i.units.len(),
                usage: usage(&i.name, &i.stats),
            })
            .collect();
        self.units = s
            .units
            .iter()
            .map(|u| {
                let key = format!("{}/{}", u.island, u.name);
                let island_cpus = s
                    .islands
                    .iter()
                    .find(|i| i.name == u.island)
                    .map(|i| i.cpus.to_string())
                    .unwrap_or_default();
                let mode = snap
                    .apps
                    .iter()
                    .find(|a| a.unit.as_deref() == Some(key.as_str()))
                    .map(working_mode);
                UnitRow {
                    name: u.name.clone(),
                    island: u.island.clone(),
                    home: set_or_dash(
                        &u.isolation
                            .as_ref()
                            .map_or(island_cpus, |iso| iso.home_cpus.to_string()),
                    ),
                    lent: u
                        .isolation
                        .as_ref()
                        .map(|i| set_or_dash(&i.lent_cpus.to_string())),
                    borrowed: u
                        .isolation
                        .as_ref()
                        .map(|i| set_or_dash(&i.borrowed_cpus.to_string())),
                    pids: u.pids.len(),
                    usage: usage(&key, &u.stats),
                    boosted: u.comm.as_ref().map(|c| c.boosted),
                    mode,
                }
            })
            .collect();
        self.previous = Some((s.uptime_ms, now));
        self.snapshot = Some(snap);
        self.error = None;
        self.keep_selection();
    }

    /// The daemon could not be read: the last reading stays, with the
    /// error over it.
    pub fn set_error(&mut self, error: String) {
        self.error = Some(error);
    }

    /// The answer to [`Command::History`] (or to a refresh of it).
    pub fn set_history(&mut self, unit: &str, decisions: Vec<Decision>) {
        if let Some(h) = self.history.as_mut().filter(|h| h.unit == unit) {
            h.decisions = Some(decisions);
        }
    }

    /// The unit whose history is open, to refresh it with the rest.
    pub fn history_unit(&self) -> Option<&str> {
        self.history.as_ref().map(|h| h.unit.as_str())
    }

    /// Reacts to a key.
    pub fn key(&mut self, key: Key) -> Command {
        if self.editing {
            match key {
                Key::Char(c) => self.filter.push(c),
                Key::Backspace => {
                    self.filter.pop();
                }
                Key::Enter => self.editing = false,
                Key::Esc => {
                    self.filter.clear();
                    self.editing = false;
                }
                Key::Up => self.move_selection(-1),
                Key::Down => self.move_selection(1),
                Key::PageUp | Key::PageDown => {}
            }
            self.keep_selection();
            return Command::Redraw;
        }
        if key == Key::Char('q') {
            return Command::Quit;
        }
        if self.help {
            self.help = false;
            return Command::Redraw;
        }
        if let Some(h) = self.history.as_mut() {
            let len = h.decisions.as_ref().map_or(0, Vec::len);
            match key {
                Key::Up | Key::Char('k') => h.scroll = (h.scroll + 1).min(len.saturating_sub(1)),
                Key::Down | Key::Char('j') => h.scroll = h.scroll.saturating_sub(1),
                Key::PageUp => h.scroll = (h.scroll + 10).min(len.saturating_sub(1)),
                Key::PageDown => h.scroll = h.scroll.saturating_sub(10),
                Key::Esc | Key::Enter | Key::Backspace => self.history = None,
                Key::Char('?') => self.help = true,
                Key::Char(_) => {}
            }
            return Command::Redraw;
        }
        match key {
            Key::Char('?') => self.help = true,
            Key::Char('s') => {
                self.sort = self.sort.next();
                self.descending = self.sort.descending_by_default();
            }
            Key::Char('r') => self.descending = !self.descending,
            Key::Char('/') => self.editing = true,
            Key::Esc => self.filter.clear(),
            Key::Up | Key::Char('k') => self.move_selection(-1),
            Key::Down | Key::Char('j') => self.move_selection(1),
            Key::PageUp => self.move_selection(-10),
            Key::PageDown => self.move_selection(10),
            Key::Enter => {
                if let Some(u) = self.selected_unit() {
                    let unit = u.name.clone();
                    self.history = Some(History {
                        unit: unit.clone(),
                        decisions: None,
                        scroll: 0,
                    });
                    return Command::History(unit);
                }
            }
            Key::Char(_) | Key::Backspace => {}
        }
        self.keep_selection();
        Command::Redraw
    }

    /// The units that pass the filter, in the sort order.
    pub fn visible_units(&self) -> Vec<&UnitRow> {
        let mut rows: Vec<&UnitRow> = self.units.iter().filter(|u| self.passes(u)).collect();
        rows.sort_by(|a, b| {
            let by = match self.sort {
                SortKey::Name => a.name.cmp(&b.name),
                SortKey::Island => a.island.cmp(&b.island),
                SortKey::Cpu => cmp_opt(a.usage.cpus_used, b.usage.cpus_used),
                SortKey::Throttled => cmp_opt(a.usage.throttled_pct, b.usage.throttled_pct),
                SortKey::CpuPressure => cmp_opt(a.usage.cpu_pressure, b.usage.cpu_pressure),
                SortKey::MemPressure => cmp_opt(a.usage.mem_pressure, b.usage.mem_pressure),
                // `None` below every figure, as in `cmp_opt`.
                SortKey::Memory => a.usage.memory.cmp(&b.usage.memory),
            };
            let by = if self.descending { by.reverse() } else { by };
            by.then_with(|| a.name.cmp(&b.name))
                .then_with(|| a.island.cmp(&b.island))
        });
        rows
    }

    /// The islands whose name passes the filter or that hold a unit that
    /// does, in config order.
    pub fn visible_islands(&self) -> Vec<&IslandRow> {
        let f = self.filter.to_lowercase();
        self.islands
            .iter()
            .filter(|i| {
                f.is_empty()
                    || i.name.to_lowercase().contains(&f)
                    || self
                        .units
                        .iter()
                        .any(|u| u.island == i.name && self.passes(u))
            })
            .collect()
    }

    fn passes(&self, u: &UnitRow) -> bool {
        let f = self.filter.to_lowercase();
        f.is_empty() || u.name.to_lowercase().contains(&f) || u.island.to_lowercase().contains(&f)
    }

    /// The selected unit, if any row is visible.
    pub fn selected_unit(&self) -> Option<&UnitRow> {
        let key = self.selected.as_deref()?;
        self.visible_units()
            .into_iter()
            .find(|u| unit_key(u) == key)
    }

    /// Its index among [`Model::visible_units`].
    pub fn selected_index(&self) -> Option<usize> {
        let key = self.selected.as_deref()?;
        self.visible_units().iter().position(|u| unit_key(u) == key)
    }

    fn move_selection(&mut self, by: isize) {
        let rows = self.visible_units();
        if rows.is_empty() {
            return;
        }
        let at = self
            .selected
            .as_deref()
            .and_then(|k| rows.iter().position(|u| unit_key(u) == k))
            .unwrap_or(0);
        let to = at.saturating_add_signed(by).min(rows.len() - 1);
        self.selected = Some(unit_key(rows[to]));
    }

    /// A selection that is gone (filtered out, removed) moves to the
    /// first visible row.
    fn keep_selection(&mut self) {
        if self.selected_unit().is_none() {
            self.selected = self.visible_units().first().map(|u| unit_key(u));
        }
    }

    /// The last reading.
    pub fn snapshot(&self) -> Option<&Snapshot> {
        self.snapshot.as_ref()
    }

    /// The refresh interval.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The sort column and whether it is descending.
    pub fn sort(&self) -> (SortKey, bool) {
        (self.sort, self.descending)
    }

    /// The filter text and whether it is being typed.
    pub fn filter(&self) -> (&str, bool) {
        (&self.filter, self.editing)
    }

    /// The open history, if any.
    pub fn history(&self) -> Option<&History> {
        self.history.as_ref()
    }

    /// Whether the help is shown.
    pub fn help(&self) -> bool {
        self.help
    }

    /// The last error reading the daemon, until the next reading.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }
}

fn unit_key(u: &UnitRow) -> String {
    format!("{}/{}", u.island, u.name)
}

/// `None` sorts below every figure.
fn cmp_opt(a: Option<f64>, b: Option<f64>) -> std::cmp::Ordering {
    match (a, b) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Greater,
        (None, Some(_)) => std::cmp::Ordering::Less,
        (None, None) => std::cmp::Ordering::Equal,
    }
}

fn set_or_dash(s: &str) -> String {
    if s.is_empty() {
        "-".into()
    } else {
        s.to_string()
    }
}

/// Usage of a group now, with rates against `before` (ms elapsed, counters
/// then) when there is one.
fn usage_of(s: &GroupStats, before: Option<(u64, Counters)>) -> Usage {
    let cpus_used = before.and_then(|(dt_ms, c)| {
        let used = s.cpu_usage_us?.checked_sub(c.cpu_usage_us?)?;
        Some(used as f64 / (dt_ms as f64 * 1000.0))
    });
    // Over the interval when both readings have the counters (no period
    // elapsed: not throttled); else since the group was made.
    let throttled_pct = s.nr_periods.zip(s.nr_throttled).and_then(|(p, t)| {
        let since = before.and_then(|(_, c)| {
            Some((
                p.checked_sub(c.nr_periods?)?,
                t.checked_sub(c.nr_throttled?)?,
            ))
        });
        match since {
            Some((0, _)) => Some(0.0),
            Some((dp, dt)) => Some(100.0 * dt as f64 / dp as f64),
            None => (p > 0).then(|| 100.0 * t as f64 / p as f64),
        }
    });
    Usage {
        cpus_used,
        throttled_pct,
        cpu_pressure: s.cpu_pressure.map(|p| p.some.avg10),
        mem_pressure: s.memory_pressure.map(|p| p.some.avg10),
        memory: s.memory_current,
    }
}

/// An application's working mode in a few words.
pub fn working_mode(a: &AppStatus) -> String {
    match &a.assignment.state {
        AppRunState::Running {
            mode, mode_name, ..
        } if mode_name.is_empty() => format!("{} mode {mode}", a.name),
        AppRunState::Running { mode_name, .. } => format!("{} {mode_name}", a.name),
        AppRunState::Waiting { .. } => format!("{} waiting", a.name),
    }
}
