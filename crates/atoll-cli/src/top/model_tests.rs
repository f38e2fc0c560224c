use std::time::Duration;

use super::fixtures::{decisions, snapshot};
use super::model::{Command, Key, Model, SortKey};

/// Two readings 1 s apart: in the second, api used 3 CPUs, cache 0.5,
/// jobs 1.
fn model() -> Model {
    let mut m = Model::new(Duration::from_secs(1));
    m.update(snapshot(1000, 0));
    m.update(snapshot(2000, 1_000_000));
    m
}

fn names(m: &Model) -> Vec<&str> {
    m.visible_units().iter().map(|u| u.name.as_str()).collect()
}

fn type_keys(m: &mut Model, keys: &str) {
    for c in keys.chars() {
        m.key(Key::Char(c));
    }
}

#[test]
fn rows_carry_cpus_usage_boosts_and_working_modes() {
    let m = model();
    let u = m.visible_units();
    let api = u.iter().find(|u| u.name == "api").unwrap();
    assert_eq!(api.island, "web");
    assert_eq!(api.home, "1-2");
    assert_eq!(api.lent.as_deref(), Some("-"));
    assert_eq!(api.borrowed.as_deref(), Some("4"));
    assert_eq!(api.pids, 2);
    assert_eq!(api.boosted, Some(true));
    assert_eq!(api.usage.cpus_used, Some(3.0));
    // 50 of the 100 periods of the interval were throttled.
    assert_eq!(api.usage.throttled_pct, Some(50.0));
    assert_eq!(api.usage.cpu_pressure, Some(7.5));
    assert_eq!(api.usage.mem_pressure, Some(3.75));
    let cache = u.iter().find(|u| u.name == "cache").unwrap();
    assert_eq!(cache.lent.as_deref(), Some("3"));
    assert_eq!(cache.boosted, None);
    // Outside the isolation model a unit's CPUs are its island's.
    let jobs = u.iter().find(|u| u.name == "jobs").unwrap();
    assert_eq!(jobs.home, "4-7");
    assert_eq!(jobs.lent, None);
    assert_eq!(jobs.mode.as_deref(), Some("bodytrack high"));
    assert_eq!(api.mode, None);
    let islands = m.visible_islands();
    assert_eq!(islands.len(), 2);
    assert_eq!(
        (islands[0].name.as_str(), islands[0].cpus.as_str()),
        ("web", "1-3")
    );
    assert_eq!(islands[0].usage.cpus_used, Some(2.0));
}

#[test]
fn the_first_reading_has_no_rates_and_throttling_since_the_start() {
    let mut m = Model::new(Duration::from_secs(1));
    m.update(snapshot(1000, 0));
    let api = m.visible_units()[0].clone();
    assert_eq!(api.name, "api");
    assert_eq!(api.usage.cpus_used, None);
    assert_eq!(api.usage.throttled_pct, Some(10.0));
    // A daemon that restarted (uptime went back) starts over.
    m.update(snapshot(500, 0));
    assert_eq!(m.visible_units()[0].usage.cpus_used, None);
}

#[test]
fn s_cycles_the_sort_column_and_r_reverses_it() {
    let mut m = model();
    assert_eq!(m.sort(), (SortKey::Name, false));
    assert_eq!(names(&m), ["api", "cache", "jobs"]);
    m.key(Key::Char('s'));
    assert_eq!(m.sort(), (SortKey::Island, false));
    assert_eq!(names(&m), ["jobs", "api", "cache"]);
    m.key(Key::Char('s'));
    assert_eq!(m.sort(), (SortKey::Cpu, true));
    assert_eq!(names(&m), ["api", "jobs", "cache"]);
    m.key(Key::Char('r'));
    assert_eq!(names(&m), ["cache", "jobs", "api"]);
    m.key(Key::Char('s'));
    assert_eq!(m.sort().0, SortKey::Throttled);
    // api is throttled, the others tie at 0 and keep name order.
    assert_eq!(names(&m), ["api", "cache", "jobs"]);
    m.key(Key::Char('s'));
    assert_eq!(names(&m), ["api", "jobs", "cache"], "cpu pressure");
    m.key(Key::Char('s'));
    assert_eq!(m.sort().0, SortKey::MemPressure);
    m.key(Key::Char('s'));
    assert_eq!(m.sort().0, SortKey::Memory);
    assert_eq!(names(&m), ["jobs", "cache", "api"]);
    m.key(Key::Char('s'));
    assert_eq!(m.sort(), (SortKey::Name, false), "the cycle closes");
}

#[test]
fn the_filter_matches_unit_and_island_names() {
    let mut m = model();
    assert_eq!(m.key(Key::Char('/')), Command::Redraw);
    type_keys(&mut m, "ca");
    assert_eq!(m.filter(), ("ca", true));
    assert_eq!(names(&m), ["cache"]);
    let islands: Vec<&str> = m
        .visible_islands()
        .iter()
        .map(|i| i.name.as_str())
        .collect();
    assert_eq!(islands, ["web"], "the island of a unit that matches");
    // While typing, `q` and `s` are text.
    m.key(Key::Backspace);
    m.key(Key::Backspace);
    type_keys(&mut m, "BAT");
    assert_eq!(m.key(Key::Enter), Command::Redraw);
    assert_eq!(m.filter(), ("BAT", false));
    assert_eq!(names(&m), ["jobs"], "an island's name, any case");
    assert_eq!(
        m.selected_unit().unwrap().name,
        "jobs",
        "the selection follows"
    );
    m.key(Key::Esc);
    assert_eq!(m.filter(), ("", false));
    assert_eq!(names(&m).len(), 3);
    m.key(Key::Char('/'));
    type_keys(&mut m, "qs");
    assert_eq!(m.filter(), ("qs", true));
    assert!(names(&m).is_empty());
    assert!(m.visible_islands().is_empty());
    assert_eq!(m.key(Key::Enter), Command::Redraw);
    assert_eq!(m.key(Key::Enter), Command::Redraw, "no unit: no history");
    assert!(m.history().is_none());
}

#[test]
fn enter_asks_for_the_selected_units_history() {
    let mut m = model();
    assert_eq!(m.selected_unit().unwrap().name, "api");
    m.key(Key::Down);
    m.key(Key::Down);
    m.key(Key::Down);
    assert_eq!(m.selected_unit().unwrap().name, "jobs", "stops at the end");
    m.key(Key::Char('k'));
    assert_eq!(m.key(Key::Enter), Command::History("cache".into()));
    assert_eq!(m.history_unit(), Some("cache"));
    assert_eq!(m.history().unwrap().decisions, None);
    // An answer about another unit (a late one) is not this history.
    m.set_history("api", decisions("x", 2));
    assert_eq!(m.history().unwrap().decisions, None);
    m.set_history("cache", decisions("c", 30));
    assert_eq!(m.history().unwrap().decisions.as_ref().unwrap().len(), 30);
    // In the history, arrows scroll and `s` sorts nothing.
    m.key(Key::Up);
    m.key(Key::Char('s'));
    assert_eq!(m.history().unwrap().scroll, 1);
    assert_eq!(m.sort().0, SortKey::Name);
    m.key(Key::PageDown);
    assert_eq!(m.history().unwrap().scroll, 0);
    // The selection stays on the unit across a refresh that resorts.
    m.key(Key::Esc);
    assert!(m.history().is_none());
    m.key(Key::Char('s'));
    m.update(snapshot(3000, 2_000_000));
    assert_eq!(m.selected_unit().unwrap().name, "cache");
    assert_eq!(m.selected_index(), Some(2));
    assert_eq!(m.key(Key::Char('q')), Command::Quit);
}

#[test]
fn help_opens_and_any_key_closes_it_but_q_quits() {
    let mut m = model();
    m.key(Key::Char('?'));
    assert!(m.help());
    m.key(Key::Char('s'));
    assert!(!m.help());
    assert_eq!(
        m.sort().0,
        SortKey::Name,
        "the key that closes it does nothing else"
    );
    m.key(Key::Char('?'));
    assert_eq!(m.key(Key::Char('q')), Command::Quit);
}

#[test]
fn an_error_keeps_the_last_reading_until_the_next() {
    let mut m = model();
    m.set_error("the atoll daemon at /x closed the connection".into());
    assert!(m.error().unwrap().contains("closed"));
    assert_eq!(names(&m).len(), 3);
    m.update(snapshot(3000, 0));
    assert_eq!(m.error(), None);
}
