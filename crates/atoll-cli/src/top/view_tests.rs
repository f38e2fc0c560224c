use std::time::Duration;

use ratatui::backend::TestBackend;
use ratatui::Terminal;

use super::fixtures::{decisions, snapshot};
use super::model::{Key, Model};
use super::view;

/// The screen as text, one line per row.
fn screen(m: &Model, width: u16, height: u16) -> Vec<String> {
    let mut t = Terminal::new(TestBackend::new(width, height)).unwrap();
    t.draw(|f| view::draw(f, m)).unwrap();
    let buf = t.backend().buffer();
    (0..height)
        .map(|y| (0..width).map(|x| buf[(x, y)].symbol()).collect::<String>())
        .collect()
}

fn model() -> Model {
    let mut m = Model::new(Duration::from_millis(500));
    m.update(snapshot(1000, 0));
    m.update(snapshot(2000, 1_000_000));
    m
}

/// The row that starts with `cell` (after the border and the selection
/// mark), split into cells.
fn row(lines: &[String], cell: &str) -> Vec<String> {
    row_in(lines, cell, 0, usize::MAX)
}

/// The same within the columns `from..to` (panes side by side).
fn row_in(lines: &[String], cell: &str, from: usize, to: usize) -> Vec<String> {
    let part = |l: &String| -> String { l.chars().skip(from).take(to - from).collect() };
    let line = lines
        .iter()
        .map(part)
        .find(|l| {
            l.trim_start_matches(['│', '>', ' '])
                .starts_with(&format!("{cell} "))
        })
        .unwrap_or_else(|| panic!("no row {cell}:\n{}", lines.join("\n")));
    line.split(['│', ' '])
        .filter(|c| !c.is_empty() && *c != ">")
        .map(String::from)
        .collect()
}

#[test]
fn the_screen_shows_islands_units_overlays_apps_and_decisions() {
    let s = screen(&model(), 160, 40);
    let all = s.join("\n");
    assert!(
        s[0].contains("0.1.0 on sim, root atoll-test, up 2.0 s"),
        "{all}"
    );
    assert!(
        s[0].contains("refresh 0.5 s") && s[0].contains("sort: name (up)"),
        "{all}"
    );
    assert!(
        s[1].contains("isolation isolate") && s[1].contains("boosted api"),
        "{all}"
    );
    assert_eq!(row(&s, "web")[..4], ["web", "1-3", "fair", "2"]);
    assert_eq!(row(&s, "batch")[..4], ["batch", "4-7", "batch", "1"]);
    // UNIT ISLAND HOME LENT BORROWED PIDS CPU THROTTLED CPU-PSI MEM-PSI MEMORY BOOST MODE
    assert_eq!(
        row(&s, "api"),
        ["api", "web", "1-2", "-", "4", "2", "3.00", "50.0%", "7.5%", "3.8%", "2.0M", "yes", "-"]
    );
    assert_eq!(row(&s, "cache")[..5], ["cache", "web", "3", "3", "-"]);
    assert_eq!(row(&s, "jobs")[10..], ["1.0G", "-", "bodytrack", "high"]);
    assert!(all.contains("> api "), "the first unit is selected:\n{all}");
    let shop = row_in(&s, "shop", 0, 80);
    assert_eq!(shop[..2], ["shop", "5"]);
    assert_eq!(
        shop[shop.len() - 3..],
        ["7300", "NO", "4"],
        "value, holds, loans"
    );
    assert!(all.contains("p99 latency within 5000 us"), "{all}");
    assert_eq!(
        row_in(&s, "7", 80, 160)[..5],
        ["7", "bodytrack", "high", "batch/jobs", "3.0"]
    );
    assert!(all.contains("+0.25"), "goal gap:\n{all}");
    assert!(
        all.contains("3.000s  create unit d3 in island web, because the platform"),
        "{all}"
    );
    assert!(s[39].starts_with("q quit  ? help  s sort"), "{all}");
}

#[test]
fn decisions_scroll_the_newest_stays_at_the_bottom() {
    let mut m = model();
    let mut snap = snapshot(3000, 0);
    snap.decisions = decisions("n", 60);
    m.update(snap);
    let s = screen(&m, 160, 40);
    let all = s.join("\n");
    assert!(all.contains("create unit n60 in"), "{all}");
    assert!(
        !all.contains("create unit n1 in"),
        "the oldest scrolled away:\n{all}"
    );
    let newest = s.iter().position(|l| l.contains("unit n60 ")).unwrap();
    let older = s.iter().position(|l| l.contains("unit n59 ")).unwrap();
    assert_eq!(older + 1, newest);
}

#[test]
fn sorting_and_filtering_change_the_header_and_the_rows() {
    let mut m = model();
    let order = |s: &[String]| -> Vec<usize> {
        ["api", "cache", "jobs"]
            .iter()
            .map(|u| {
                s.iter()
                    .position(|l| l.contains(&format!(" {u} ")))
                    .unwrap()
            })
            .collect()
    };
    let s = screen(&m, 160, 40);
    assert!(s.iter().any(|l| l.contains("UNIT^")), "{}", s.join("\n"));
    let by_name = order(&s);
    assert!(by_name[0] < by_name[1] && by_name[1] < by_name[2]);
    m.key(Key::Char('s'));
    m.key(Key::Char('s'));
    let s = screen(&m, 160, 40);
    assert!(s[0].contains("sort: cpu (down)"), "{}", s[0]);
    assert!(s.iter().any(|l| l.contains("CPUv")), "{}", s.join("\n"));
    let by_cpu = order(&s);
    assert!(
        by_cpu[0] < by_cpu[2] && by_cpu[2] < by_cpu[1],
        "api, jobs, cache"
    );
    m.key(Key::Char('/'));
    m.key(Key::Char('j'));
    let s = screen(&m, 160, 40);
    assert!(s[39].starts_with("filter: j_"), "{}", s[39]);
    m.key(Key::Enter);
    let s = screen(&m, 160, 40);
    let all = s.join("\n");
    assert!(s[0].contains("filter: j"), "{}", s[0]);
    assert!(all.contains("units (1 of 3)"), "{all}");
    let units: Vec<&String> = s
        .iter()
        .skip_while(|l| !l.contains("units (1 of 3)"))
        .take_while(|l| !l.starts_with('└'))
        .collect();
    assert_eq!(units.len(), 4, "title, header, jobs, an empty line:\n{all}");
    assert!(units[2].contains("> jobs "), "{all}");
    assert!(!all.contains("│web "), "{all}");
    assert!(all.contains("> jobs "), "{all}");
}

#[test]
fn enter_opens_the_units_history_over_the_rest() {
    let mut m = model();
    m.key(Key::Down);
    m.key(Key::Enter);
    let all = screen(&m, 160, 40).join("\n");
    assert!(all.contains("history of unit cache (why cache)"), "{all}");
    assert!(all.contains("asking the daemon..."), "{all}");
    m.set_history("cache", decisions("h", 40));
    let s = screen(&m, 160, 40);
    let all = s.join("\n");
    assert!(all.contains("create unit h40 in"), "{all}");
    assert!(!all.contains("create unit h1 in"), "{all}");
    m.key(Key::PageUp);
    let all = screen(&m, 160, 40).join("\n");
    assert!(!all.contains("create unit h40 in"), "scrolled up:\n{all}");
    assert!(all.contains("create unit h30 in"), "{all}");
    m.set_history("cache", Vec::new());
    let all = screen(&m, 160, 40).join("\n");
    assert!(all.contains("no decision about this unit"), "{all}");
    m.key(Key::Enter);
    let all = screen(&m, 160, 40).join("\n");
    assert!(!all.contains("history of unit"), "{all}");
}

#[test]
fn help_and_errors_are_shown() {
    let mut m = model();
    m.key(Key::Char('?'));
    let all = screen(&m, 160, 40).join("\n");
    assert!(all.contains("atoll top: keys"), "{all}");
    assert!(all.contains("sort the units by the next column"), "{all}");
    m.key(Key::Esc);
    m.set_error("the atoll daemon at /x closed the connection".into());
    let s = screen(&m, 160, 40);
    assert!(
        s[1].starts_with("error: the atoll daemon at /x closed"),
        "{}",
        s[1]
    );
    assert!(s.join("\n").contains(" api "), "the last reading stays");
}

#[test]
fn a_small_terminal_still_draws() {
    let s = screen(&model(), 40, 12);
    assert!(s[0].starts_with("atoll top"), "{}", s.join("\n"));
    let s = screen(&Model::new(Duration::from_secs(1)), 80, 24);
    assert!(s[0].contains("waiting for the daemon"), "{}", s[0]);
}
