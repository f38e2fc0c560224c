//! Draws a [`Model`] on a ratatui frame: a header, the islands, the units,
//! overlays beside applications, the latest decisions and a line of keys;
//! the help and a unit's history open over them.

use atoll_core::decision::Decision;
use atoll_proto::apps::AppRunState;
use atoll_proto::coord::OverlayStatus;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Row, Table, TableState};
use ratatui::Frame;

use super::model::{working_mode, History, Model, SortKey, Usage};

/// The keys, as the help shows them.
pub const KEYS: [(&str, &str); 10] = [
    ("q", "quit"),
    ("?", "this help (any key closes it)"),
    ("s", "sort the units by the next column"),
    ("r", "reverse the sort"),
    (
        "/",
        "filter units and islands by name (Enter keeps it, Esc clears it)",
    ),
    ("Esc", "clear the filter; close the history"),
    ("Up/Down, j/k", "select a unit (PgUp/PgDn: ten at a time)"),
    (
        "Enter",
        "the selected unit's history (why UNIT); Enter or Esc closes it",
    ),
    ("Up/Down", "in the history: scroll"),
    ("", "refreshes every --interval; read-only, any user"),
];

const BOLD: Style = Style::new().add_modifier(Modifier::BOLD);

/// Draws the whole screen.
pub fn draw(frame: &mut Frame, model: &Model) {
    let area = frame.area();
    let islands = lines(model.visible_islands().len());
    let (overlays, apps) = model
        .snapshot()
        .map_or((0, 0), |s| (s.overlays.len(), s.apps.len()));
    // Each table: its rows, a header and two borders.
    let side = lines(overlays.max(apps)).saturating_add(3).clamp(4, 9);
    let units = lines(model.visible_units().len()).saturating_add(3).max(5);
    // The units take what they need (the rest scrolls); the decisions
    // take what is left.
    let [header, islands_area, units_area, side_area, decisions_area, footer] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(islands.saturating_add(3).min(10)),
        Constraint::Max(units),
        Constraint::Length(side),
        Constraint::Min(6),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_header(frame, header, model);
    draw_islands(frame, islands_area, model);
    draw_units(frame, units_area, model);
    let [overlays_area, apps_area] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
            .areas(side_area);
    draw_overlays(frame, overlays_area, model);
    draw_apps(frame, apps_area, model);
    draw_decisions(frame, decisions_area, model);
    draw_footer(frame, footer, model);
    if let Some(h) = model.history() {
        draw_history(frame, popup(area, 90, area.height * 7 / 10), h);
    }
    if model.help() {
        draw_help(frame, popup(area, 70, lines(KEYS.len()) + 2));
    }
}

/// A count of rows as screen lines (a screen has fewer than `u16::MAX`).
fn lines(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

fn popup(area: Rect, width_pct: u16, height: u16) -> Rect {
    let [v] = Layout::vertical([Constraint::Length(height.min(area.height))])
        .flex(Flex::Center)
        .areas(area);
    let [h] = Layout::horizontal([Constraint::Percentage(width_pct)])
        .flex(Flex::Center)
        .areas(v);
    h
}

fn draw_header(frame: &mut Frame, area: Rect, model: &Model) {
    let (sort, desc) = model.sort();
    let (filter, _) = model.filter();
    let mut first = vec![Span::styled("atoll top", BOLD)];
    let mut second = Vec::new();
    if let Some(s) = model.snapshot().map(|s| &s.status) {
        first.push(Span::raw(format!(
            "  {} on {}, root {}, up {:.1} s, {} epochs, refresh {} s",
            s.version,
            s.backend,
            s.root,
            s.uptime_ms as f64 / 1000.0,
            s.epochs,
            secs(model.interval().as_secs_f64()),
        )));
        if let Some(m) = &s.isolation_mode {
            second.push(Span::raw(format!("isolation {m:?}").to_lowercase()));
        }
        second.push(Span::raw(match &s.comm {
            Some(c) if c.boosted.is_empty() => format!("  comm ({}): no boost", c.mechanism),
            Some(c) => format!("  comm ({}): boosted {}", c.mechanism, c.boosted.join(", ")),
            None => "  comm off".into(),
        }));
        if !s.fallbacks.is_empty() {
            second.push(Span::raw(format!("  {} fallbacks", s.fallbacks.len())));
        }
        if !s.warnings.is_empty() {
            second.push(Span::styled(
                format!("  {} warnings", s.warnings.len()),
                Style::new().fg(Color::Yellow),
            ));
        }
    } else {
        first.push(Span::raw("  waiting for the daemon"));
    }
    first.push(Span::raw(format!(
        "   sort: {} ({})",
        sort.label(),
        if desc { "down" } else { "up" }
    )));
    if !filter.is_empty() {
        first.push(Span::raw(format!("   filter: {filter}")));
    }
    if let Some(e) = model.error() {
        second = vec![Span::styled(
            format!("error: {e}"),
            Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        )];
    }
    frame.render_widget(
        Paragraph::new(vec![Line::from(first), Line::from(second)]),
        area,
    );
}

fn secs(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `-` for a figure the backend cannot read (or, for rates, not yet).
fn opt<T>(x: Option<T>, f: impl Fn(T) -> String) -> String {
    x.map_or_else(|| "-".into(), f)
}

fn bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "K", "M", "G", "T"];
    let mut x = b as f64;
    let mut i = 0;
    while x >= 1024.0 && i + 1 < UNITS.len() {
        x /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b}B")
    } else {
        format!("{x:.1}{}", UNITS[i])
    }
}

fn usage_cells(u: &Usage) -> [String; 5] {
    [
        opt(u.cpus_used, |x| format!("{x:.2}")),
        opt(u.throttled_pct, |x| format!("{x:.1}%")),
        opt(u.cpu_pressure, |x| format!("{x:.1}%")),
        opt(u.mem_pressure, |x| format!("{x:.1}%")),
        opt(u.memory, bytes),
    ]
}

const USAGE_HEADERS: [&str; 5] = ["CPU", "THROTTLED", "CPU PSI", "MEM PSI", "MEMORY"];
const USAGE_WIDTHS: [Constraint; 5] = [
    Constraint::Length(6),
    Constraint::Length(9),
    Constraint::Length(8),
    Constraint::Length(8),
    Constraint::Length(8),
];

fn header_row(cells: Vec<String>) -> Row<'static> {
    Row::new(cells).style(BOLD)
}

fn draw_islands(frame: &mut Frame, area: Rect, model: &Model) {
    let rows: Vec<Row> = model
        .visible_islands()
        .into_iter()
        .map(|i| {
            let mut cells = vec![
                i.name.clone(),
                i.cpus.clone(),
                i.policy.clone(),
                i.units.to_string(),
            ];
            cells.extend(usage_cells(&i.usage));
            Row::new(cells)
        })
        .collect();
    let mut head: Vec<String> = ["ISLAND", "CPUS", "POLICY", "UNITS"]
        .map(String::from)
        .to_vec();
    head.extend(USAGE_HEADERS.map(String::from));
    let mut widths = vec![
        Constraint::Length(16),
        Constraint::Length(12),
        Constraint::Length(28),
        Constraint::Length(5),
    ];
    widths.extend(USAGE_WIDTHS);
    let table = Table::new(rows, widths)
        .header(header_row(head))
        .block(Block::bordered().title(" islands "));
    frame.render_widget(table, area);
}

/// The units table's columns: header, width, and the sort key it shows.
const UNIT_COLUMNS: [(&str, u16, Option<SortKey>); 13] = [
    ("UNIT", 18, Some(SortKey::Name)),
    ("ISLAND", 12, Some(SortKey::Island)),
    ("HOME", 10, None),
    ("LENT", 8, None),
    ("BORROWED", 9, None),
    ("PIDS", 5, None),
    ("CPU", 6, Some(SortKey::Cpu)),
    ("THROTTLED", 10, Some(SortKey::Throttled)),
    ("CPU PSI", 9, Some(SortKey::CpuPressure)),
    ("MEM PSI", 9, Some(SortKey::MemPressure)),
    ("MEMORY", 9, Some(SortKey::Memory)),
    ("BOOST", 5, None),
    ("MODE", 0, None),
];

fn draw_units(frame: &mut Frame, area: Rect, model: &Model) {
    let (sort, desc) = model.sort();
    let head: Vec<String> = UNIT_COLUMNS
        .iter()
        .map(|(name, _, key)| match key {
            Some(k) if *k == sort => format!("{name}{}", if desc { "v" } else { "^" }),
            _ => (*name).to_string(),
        })
        .collect();
    let widths: Vec<Constraint> = UNIT_COLUMNS
        .iter()
        .map(|(_, w, _)| match w {
            0 => Constraint::Fill(1),
            w => Constraint::Length(*w),
        })
        .collect();
    let units = model.visible_units();
    let count = units.len();
    let rows: Vec<Row> = units
        .into_iter()
        .map(|u| {
            let [cpu, thr, cpsi, mpsi, mem] = usage_cells(&u.usage);
            Row::new(vec![
                u.name.clone(),
                u.island.clone(),
                u.home.clone(),
                u.lent.clone().unwrap_or_else(|| "-".into()),
                u.borrowed.clone().unwrap_or_else(|| "-".into()),
                u.pids.to_string(),
                cpu,
                thr,
                cpsi,
                mpsi,
                mem,
                match u.boosted {
                    Some(true) => "yes".into(),
                    Some(false) => "no".into(),
                    None => "-".into(),
                },
                u.mode.clone().unwrap_or_else(|| "-".into()),
            ])
        })
        .collect();
    let total = model.snapshot().map_or(0, |s| s.status.units.len());
    let title = if count == total {
        format!(" units ({count}) ")
    } else {
        format!(" units ({count} of {total}) ")
    };
    let table = Table::new(rows, widths)
        .header(header_row(head))
        .block(Block::bordered().title(title))
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        .highlight_symbol("> ");
    let mut state = TableState::default().with_selected(model.selected_index());
    frame.render_stateful_widget(table, area, &mut state);
}

fn holds(o: &OverlayStatus) -> &'static str {
    match o.holds {
        Some(true) => "yes",
        Some(false) => "NO",
        None => "-",
    }
}

fn draw_overlays(frame: &mut Frame, area: Rect, model: &Model) {
    let overlays = model.snapshot().map_or(&[][..], |s| &s.overlays[..]);
    let rows: Vec<Row> = overlays
        .iter()
        .map(|o| {
            let loans: Vec<String> = o.loans.iter().map(|l| l.cpu.to_string()).collect();
            Row::new(vec![
                o.name.clone(),
                o.priority.to_string(),
                o.property.to_string(),
                opt(o.value, |v| format!("{v}")),
                holds(o).into(),
                if loans.is_empty() {
                    "-".into()
                } else {
                    loans.join(",")
                },
            ])
        })
        .collect();
    let head = ["OVERLAY", "PRIO", "PROPERTY", "VALUE", "HOLDS", "LOANS"].map(String::from);
    let widths = [
        Constraint::Length(12),
        Constraint::Length(4),
        Constraint::Fill(1),
        Constraint::Length(8),
        Constraint::Length(5),
        Constraint::Length(7),
    ];
    let table = Table::new(rows, widths)
        .header(header_row(head.to_vec()))
        .block(Block::bordered().title(format!(" overlays ({}) ", overlays.len())));
    frame.render_widget(table, area);
}

fn draw_apps(frame: &mut Frame, area: Rect, model: &Model) {
    let apps = model.snapshot().map_or(&[][..], |s| &s.apps[..]);
    let rows: Vec<Row> = apps
        .iter()
        .map(|a| {
            let cpus = match &a.assignment.state {
                AppRunState::Running {
                    cpus, cpu_quota, ..
                } => format!("{cpu_quota:.1} on {cpus}"),
                AppRunState::Waiting { reason } => reason.clone(),
            };
            Row::new(vec![
                a.app.to_string(),
                working_mode(a),
                a.unit.clone().unwrap_or_else(|| "-".into()),
                cpus,
                format!("{:+.2}", a.goal_gap),
            ])
        })
        .collect();
    let head = ["APP", "WORKING MODE", "UNIT", "CPUS", "GAP"].map(String::from);
    let widths = [
        Constraint::Length(4),
        Constraint::Length(20),
        Constraint::Length(18),
        Constraint::Fill(1),
        Constraint::Length(6),
    ];
    let table = Table::new(rows, widths)
        .header(header_row(head.to_vec()))
        .block(Block::bordered().title(format!(" applications ({}) ", apps.len())));
    frame.render_widget(table, area);
}

fn decision_line(d: &Decision) -> Line<'static> {
    Line::from(vec![
        Span::styled(
            format!("{:>10.3}s  ", d.at.as_secs_f64()),
            Style::new().fg(Color::DarkGray),
        ),
        Span::raw(d.to_string()),
    ])
}

/// The last lines that fit, `scroll` lines up from the newest.
fn tail(decisions: &[Decision], height: u16, scroll: usize) -> Vec<Line<'static>> {
    let end = decisions.len().saturating_sub(scroll);
    let start = end.saturating_sub(usize::from(height));
    decisions[start..end].iter().map(decision_line).collect()
}

fn draw_decisions(frame: &mut Frame, area: Rect, model: &Model) {
    let decisions = model.snapshot().map_or(&[][..], |s| &s.decisions[..]);
    let lines = tail(decisions, area.height.saturating_sub(2), 0);
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" latest decisions (why) ")),
        area,
    );
}

fn draw_footer(frame: &mut Frame, area: Rect, model: &Model) {
    let (filter, editing) = model.filter();
    let line = if editing {
        Line::from(vec![
            Span::styled("filter: ", BOLD),
            Span::raw(format!("{filter}_")),
            Span::raw("   (Enter keeps it, Esc clears it)"),
        ])
    } else {
        Line::from(
            "q quit  ? help  s sort  r reverse  / filter  Up/Down select  Enter history  Esc clear",
        )
    };
    frame.render_widget(Paragraph::new(line), area);
}

fn draw_history(frame: &mut Frame, area: Rect, h: &History) {
    frame.render_widget(Clear, area);
    let block = Block::bordered()
        .title(format!(" history of unit {} (why {}) ", h.unit, h.unit))
        .title_bottom(" Up/Down scroll, Enter or Esc closes ");
    let lines = match &h.decisions {
        None => vec![Line::from("asking the daemon...")],
        Some(d) if d.is_empty() => vec![Line::from("no decision about this unit")],
        Some(d) => tail(d, area.height.saturating_sub(2), h.scroll),
    };
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

fn draw_help(frame: &mut Frame, area: Rect) {
    frame.render_widget(Clear, area);
    let lines: Vec<Line> = KEYS
        .iter()
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(format!(" {k:<14}"), BOLD),
                Span::raw(*what),
            ])
        })
        .collect();
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" atoll top: keys ")),
        area,
    );
}
