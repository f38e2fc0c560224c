//! Every `examples/*.toml` parses on the machine it describes.

mod common;

use std::path::PathBuf;

use atoll_core::spec::SchedPolicy;
use atoll_core::topology::Topology;
use common::*;

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// The machine each example is written for. A new example needs an entry.
fn topology_for(file: &str) -> Option<Topology> {
    Some(match file {
        "minimal.toml" => smt2(),
        "web-batch.toml" => shape(1, 1, 1, 8, 2),
        "realtime.toml" => shape(2, 1, 1, 4, 1),
        "vm-8cpu.toml" => vm8(),
        _ => return None,
    })
}

fn load(file: &str) -> atoll_core::spec::PlatformSpec {
    let topo = topology_for(file).expect("known example");
    atoll_config::load(&examples_dir().join(file), &topo).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_example_parses() {
    let mut seen = 0;
    for entry in std::fs::read_dir(examples_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let file = path.file_name().unwrap().to_str().unwrap().to_string();
        let topo = topology_for(&file)
            .unwrap_or_else(|| panic!("{file}: add its machine to topology_for"));
        if let Err(e) = atoll_config::load(&path, &topo) {
            panic!("{e}");
        }
        seen += 1;
    }
    assert!(seen >= 4, "only {seen} examples found");
}

#[test]
fn vm_example_is_what_the_vm_tests_expect() {
    let spec = load("vm-8cpu.toml");
    assert_eq!(spec.host.cpus, set("0"));
    assert_eq!(spec.host.mems, set("0"));
    assert!(spec.host.adopt_all);
    assert_eq!(
        islands(&spec),
        triples(&[("web", "1-3", "0"), ("batch", "4-7", "1")])
    );
    assert_eq!(spec.units.len(), 2);
    let api = &spec.units[0];
    assert_eq!((api.name.as_str(), api.island.as_str()), ("api", "web"));
    assert_eq!(api.entitlement.cpus, Some(1.5));
    assert_eq!(api.entitlement.cpu_cap, Some(2.0));
    let crunch = &spec.units[1];
    assert_eq!(
        (crunch.name.as_str(), crunch.island.as_str()),
        ("crunch", "batch")
    );
    assert_eq!(crunch.entitlement.weight, Some(50));
}

#[test]
fn the_other_examples_say_what_their_comments_say() {
    let spec = load("minimal.toml");
    assert_eq!(islands(&spec), triples(&[("main", "1", "0")]));

    let spec = load("web-batch.toml");
    assert_eq!(spec.host.cpus, set("0,8"));
    assert_eq!(
        islands(&spec),
        triples(&[("web", "1-4,9-12", "0"), ("batch", "5-7,13-15", "0")])
    );
    assert_eq!(spec.islands[1].policy, SchedPolicy::Batch);
    assert_eq!(spec.units.len(), 4);
    assert_eq!(spec.units[3].entitlement.io.limits[0].rbps, Some(50 << 20));

    let spec = load("realtime.toml");
    assert_eq!(
        islands(&spec),
        triples(&[("ctl", "4-7", "1"), ("node0", "1-3", "0")])
    );
    assert!(matches!(spec.islands[0].policy, SchedPolicy::Realtime(_)));
    assert_eq!(spec.units[2].island, n("node0"));
}

/// The fenced blocks of `docs/config.md` whose opening line is `opening`.
fn doc_blocks(opening: &str) -> Vec<String> {
    let doc = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/config.md"),
    )
    .unwrap();
    let mut blocks = Vec::new();
    // The block we are in, and whether it is one of those wanted.
    let mut current: Option<(String, bool)> = None;
    for line in doc.lines() {
        match &mut current {
            None if line.starts_with("```") => {
                current = Some((String::new(), line == opening));
            }
            Some((text, wanted)) if line == "```" => {
                if *wanted {
                    blocks.push(std::mem::take(text));
                }
                current = None;
            }
            Some((text, _)) => {
                text.push_str(line);
                text.push('\n');
            }
            None => {}
        }
    }
    blocks
}

#[test]
fn the_documented_example_and_its_summary_are_real() {
    let toml = doc_blocks("```toml");
    let spec = atoll_config::parse(&toml[0], "config.md", &vm8()).unwrap_or_else(|e| panic!("{e}"));
    let summaries: Vec<String> = doc_blocks("```")
        .into_iter()
        .filter(|b| b.starts_with("host: "))
        .collect();
    assert_eq!(summaries, [atoll_config::summary(&spec)]);
    // The embedded default is documented verbatim (without its comments).
    let stripped: String = atoll_config::DEFAULT_CONFIG
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        toml.iter().any(|b| b.trim() == stripped.trim()),
        "{stripped}"
    );
}

/// The TOML example in the README parses on the VM's 8-CPU machine, so the
/// first thing a reader copies works.
#[test]
fn the_readme_example_parses() {
    let readme = include_str!("../../../README.md");
    let start = readme.find("```toml\n").expect("README has a toml block") + 8;
    let len = readme[start..].find("```").expect("toml block is closed");
    let spec = atoll_config::parse(&readme[start..start + len], "README.md", &vm8())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(spec.islands.len(), 2);
    assert_eq!(spec.units[0].entitlement.cpu_cap, Some(2.0));
}
