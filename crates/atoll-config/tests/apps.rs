//! `[recipe.NAME]` and `[apps]`: parsing, defaults, strictness with
//! positions, validation at the key, and the summary.

mod common;

use std::time::Duration;

use atoll_config::summary;
use atoll_core::spec::AppsSpec;
use common::*;

/// vm8 (9 lines): host CPU 0; web 1-3 (node 0), batch 4-7 (node 1); unit api in web
/// is entitled to 1 CPU.
const BASE: &str = r#"[host]
cpus = "0"
[island.web]
cpus = "1-3"
[island.batch]
cpus = "4-7"
[unit.api]
island = "web"
cpus = 1.0
"#;

fn with(extra: &str) -> String {
    format!("{BASE}{extra}")
}

const BODYTRACK: &str = r#"[recipe.bodytrack]
priority = 1
[[recipe.bodytrack.mode]]
id = 0
name = "low"
value = 0.25
cpu_quota = 0.5
threads = 1
[[recipe.bodytrack.mode]]
id = 3
name = "full"
value = 1.0
cpu_quota = 4.0
threads = 5
power_watts = 45.5
memory = "1G"
exclusive_cpus = true
islands = ["batch"]
"#;

#[test]
fn no_section_means_no_recipes_and_the_default_policy() {
    let spec = ok(BASE, &vm8());
    assert_eq!(spec.apps, AppsSpec::default());
    assert!(!summary(&spec).contains("recipes"));
}

#[test]
fn recipes_and_the_policy_are_read_in_their_units() {
    let spec = ok(
        &with(&format!(
            r#"{BODYTRACK}
[apps]
islands = ["web", "batch"]
batch_quiet_ms = 10
batch_max_ms = 50
gap_deadband = 0.1
weights = {{ value = 2.0, migration = 1.0, power = 0.5 }}
params = {{ knee = 0.8 }}
"#
        )),
        &vm8(),
    );
    assert_eq!(spec.apps.weights.power, 0.5);
    assert_eq!(
        spec.apps.recipes[0].mode(3).unwrap().power_watts,
        Some(45.5)
    );
    assert_eq!(spec.apps.recipes[0].mode(0).unwrap().power_watts, None);
    // Dumped and read back: the same recipes and weights.
    let dumped = atoll_config::to_toml(&spec).unwrap();
    assert!(dumped.contains("power_watts = 45.5"), "{dumped}");
    let again = ok(&dumped, &vm8());
    assert_eq!(again.apps, spec.apps);
    let a = &spec.apps;
    assert_eq!(a.recipes.len(), 1);
    let r = &a.recipes[0];
    assert_eq!((r.name.as_str(), r.priority), ("bodytrack", 1));
    assert_eq!(r.modes.len(), 2);
    assert_eq!(r.modes[0].name, "low");
    assert_eq!(r.modes[0].needs.cpu_quota, 0.5);
    assert_eq!(r.modes[0].needs.memory_bytes, 0);
    let full = r.mode(3).unwrap();
    assert_eq!(full.needs.threads, Some(5));
    assert_eq!(full.needs.memory_bytes, GIB);
    assert!(full.needs.exclusive_cpus);
    assert_eq!(full.needs.islands, Some(vec![n("batch")]));
    assert_eq!(a.islands, Some(vec![n("web"), n("batch")]));
    assert_eq!(a.batch_quiet, Duration::from_millis(10));
    assert_eq!(a.batch_max, Duration::from_millis(50));
    assert_eq!(a.gap_deadband, 0.1);
    assert_eq!(a.weights.value, 2.0);
    assert_eq!(a.weights.migration, 1.0);
    // Keys left out keep their defaults.
    assert_eq!(a.weights.fairness, AppsSpec::default().weights.fairness);
    assert_eq!(a.params.knee, 0.8);
    assert_eq!(a.params.hysteresis, AppsSpec::default().params.hysteresis);
}

#[test]
fn unknown_keys_are_refused_where_they_are() {
    // Line 15 is `cpus = 2` inside the mode table.
    let text =
        with("[recipe.x]\n[[recipe.x.mode]]\nid = 0\nvalue = 0.5\ncpu_quota = 1.0\ncpus = 2\n");
    let e = err(&text, &vm8());
    assert!(e.to_string().contains("cpus"), "{e}");
    assert!(
        where_(&e).iter().any(|w| w.starts_with("15:")),
        "{:?}",
        where_(&e)
    );

    let e = err(&with("[apps]\nbatch_ms = 3\n"), &vm8());
    assert!(e.to_string().contains("batch_ms"), "{e}");
    assert!(
        where_(&e).iter().any(|w| w.starts_with("11:")),
        "{:?}",
        where_(&e)
    );

    let e = err(
        &with("[apps]\nweights = { value = 1.0, speed = 2.0 }\n"),
        &vm8(),
    );
    assert!(e.to_string().contains("speed"), "{e}");
    assert!(
        where_(&e).iter().any(|w| w.starts_with("11:")),
        "{:?}",
        where_(&e)
    );

    let e = err(&with("[recipe.x]\npriority = 300\n"), &vm8());
    assert!(
        where_(&e).iter().any(|w| w.starts_with("11:")),
        "{:?}",
        where_(&e)
    );

    // A mode without its value.
    let e = err(
        &with("[recipe.x]\n[[recipe.x.mode]]\nid = 0\ncpu_quota = 1.0\n"),
        &vm8(),
    );
    assert!(e.to_string().contains("value"), "{e}");
}

/// The diagnostic whose key is `key`: its `LINE:COL` and message.
fn at(e: &atoll_config::ConfigError, key: &str) -> (String, String) {
    let d = e
        .diagnostics
        .iter()
        .find(|d| d.key.as_deref() == Some(key))
        .unwrap_or_else(|| panic!("no problem at {key}: {e}"));
    (format!("{}:{}", d.line, d.column), d.message.clone())
}

#[test]
fn bad_values_are_reported_at_their_key() {
    let mode = |body: &str| {
        with(&format!(
            "[recipe.x]\n[[recipe.x.mode]]\nid = 0\nvalue = 0.5\ncpu_quota = 1.0\n[[recipe.x.mode]]\n{body}\n"
        ))
    };
    // The second mode's table starts at line 15, its keys on 16 and after.
    let e = err(&mode("id = 1\nvalue = 1.5\ncpu_quota = 1.0"), &vm8());
    let (pos, msg) = at(&e, "recipe.x.mode[1].value");
    assert_eq!(pos, "17:1");
    assert!(msg.contains("1.5"), "{msg}");

    let e = err(&mode("id = 1\nvalue = 0.5\ncpu_quota = 0.0"), &vm8());
    assert_eq!(at(&e, "recipe.x.mode[1].cpu_quota").0, "18:1");

    let e = err(&mode("id = 0\nvalue = 0.5\ncpu_quota = 1.0"), &vm8());
    let (pos, msg) = at(&e, "recipe.x.mode[1].id");
    assert_eq!(pos, "16:1");
    assert!(msg.contains("already"), "{msg}");

    let e = err(
        &mode("id = 1\nvalue = 0.5\ncpu_quota = 1.0\nislands = [\"gpu\"]"),
        &vm8(),
    );
    assert!(at(&e, "recipe.x.mode[1].islands").1.contains("gpu"));

    let e = err(
        &mode("id = 1\nvalue = 0.5\ncpu_quota = 1.0\nthreads = 0"),
        &vm8(),
    );
    at(&e, "recipe.x.mode[1].threads");

    let e = err(
        &mode("id = 1\nvalue = 0.5\ncpu_quota = 1.0\npower_watts = -3.0"),
        &vm8(),
    );
    let (pos, msg) = at(&e, "recipe.x.mode[1].power_watts");
    assert_eq!(pos, "19:1");
    assert!(msg.contains("watts"), "{msg}");

    // web offers applications 3 - 1 = 2 CPUs; batch 4.
    let e = err(
        &mode("id = 1\nvalue = 0.5\ncpu_quota = 3.0\nislands = [\"web\"]"),
        &vm8(),
    );
    let (pos, msg) = at(&e, "recipe.x.mode[1]");
    assert_eq!(pos, "15:1");
    assert!(msg.contains("3 CPUs"), "{msg}");
    ok(
        &mode("id = 1\nvalue = 0.5\ncpu_quota = 2.0\nislands = [\"web\"]"),
        &vm8(),
    );

    let e = err(&with("[recipe.x]\npriority = 2\n"), &vm8());
    assert!(at(&e, "recipe.x").1.contains("at least one working mode"));
}

#[test]
fn bad_policy_settings_are_reported_at_their_key() {
    let e = err(
        &with("[apps]\nweights = { value = -1.0 }\nparams = { knee = 2.0 }\nbatch_quiet_ms = 50\nbatch_max_ms = 20\ngap_deadband = -0.1\nislands = [\"web\", \"gpu\"]\n"),
        &vm8(),
    );
    assert_eq!(at(&e, "apps.weights.value").0, "11:13");
    assert_eq!(at(&e, "apps.params.knee").0, "12:12");
    assert!(at(&e, "apps.batch_max_ms").1.contains("batch_quiet_ms"));
    assert_eq!(at(&e, "apps.gap_deadband").0, "15:1");
    assert!(at(&e, "apps.islands").1.contains("gpu"));
    assert_eq!(e.diagnostics.len(), 5, "{e}");

    // A mode on an island applications may not use.
    let e = err(
        &with("[apps]\nislands = [\"batch\"]\n[recipe.x]\n[[recipe.x.mode]]\nid = 0\nvalue = 0.5\ncpu_quota = 1.0\nislands = [\"web\"]\n"),
        &vm8(),
    );
    assert!(at(&e, "recipe.x.mode[0].islands").1.contains("not open"));
}

#[test]
fn app_unit_names_are_kept_for_applications() {
    let e = err(&with("[unit.app-3]\nisland = \"web\"\n"), &vm8());
    assert!(at(&e, "unit.app-3").1.contains("reconfigurable"));
    ok(&with("[unit.app-x]\nisland = \"web\"\n"), &vm8());
}

#[test]
fn summary_lists_the_policy_and_every_mode() {
    let spec = ok(&with(BODYTRACK), &vm8());
    let s = summary(&spec);
    assert!(s.contains("apps: islands all"), "{s}");
    assert!(s.contains("recipes: 1"), "{s}");
    assert!(s.contains("bodytrack  priority 1, 2 working modes"), "{s}");
    assert!(
        s.contains("mode 0 (low): value 0.25, 0.5 CPUs, 1 thread"),
        "{s}"
    );
    assert!(
        s.contains(
            "mode 3 (full): value 1, 4 CPUs of its own, 5 threads, memory 1G, islands batch"
        ),
        "{s}"
    );
}
