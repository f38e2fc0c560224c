//! The text summary.

use super::read;
use crate::render_text;
use crate::testutils::fixtures;

#[test]
fn renders_this_machine_exactly() {
    let t = read(&fixtures::this_machine().write_temp().unwrap());
    let expected = "\
Machine: 2 CPUs online (0-1), 2 cores, SMT off, 1 package, 1 NUMA node, 1 LLC group, memory 4.5 GiB
Packages:
  package 0: 2 CPUs 0-1
NUMA nodes:
  node 0: 2 CPUs 0-1, memory 4.5 GiB
LLC groups:
  llc 0: L3 32 MiB, 2 CPUs 0-1
CPU capacity:
  1024: 2 CPUs 0-1
Cores:
  core 0: package 0, core_id 0, capacity 1024, CPU 0
  core 1: package 0, core_id 1, capacity 1024, CPU 1
";
    assert_eq!(render_text(&t), expected);
}

#[test]
fn renders_hybrid_kinds_capacities_and_siblings() {
    let t = read(&fixtures::hybrid().write_temp().unwrap());
    let text = render_text(&t);
    for line in [
        "Machine: 16 CPUs online (0-15), 12 cores, SMT on (up to 2 threads per core), 1 package, 1 NUMA node, 1 LLC group, memory 32.0 GiB",
        "  llc 0: L3 25 MiB, 16 CPUs 0-15",
        "Core kinds:\n  atom: 8 cores, 8 CPUs 8-15\n  core: 4 cores, 8 CPUs 0-7\n",
        "CPU capacity:\n  1024: 8 CPUs 0-7\n  600: 8 CPUs 8-15\n",
        "  core 1: package 0, core_id 4, kind core, capacity 1024, siblings 2-3\n",
        "  core 11: package 0, core_id 23, kind atom, capacity 600, CPU 15\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    assert_eq!(
        text.lines().filter(|l| l.starts_with("  core ")).count(),
        12
    );
}

#[test]
fn renders_two_sockets_without_capacity_or_kind_sections() {
    let t = read(&fixtures::two_socket_smt().write_temp().unwrap());
    let text = render_text(&t);
    assert!(
        text.contains("  node 1: 16 CPUs 8-15,24-31, memory 64.0 GiB\n"),
        "{text}"
    );
    assert!(text.contains("  package 1: 16 CPUs 8-15,24-31\n"), "{text}");
    assert!(
        text.contains("  core 3: package 0, core_id 3, siblings 3,19\n"),
        "{text}"
    );
    assert!(!text.contains("Core kinds"), "{text}");
    assert!(!text.contains("CPU capacity"), "{text}");
    let no_numa = read(&fixtures::smt_pair().without_numa().write_temp().unwrap());
    assert!(render_text(&no_numa).contains("  node 0: 2 CPUs 0-1, memory unknown\n"));
}
