//! Planning cost of the working-mode allocation policy (`atoll_core::awm`).
//!
//! Target: 1,000 applications × 8 working modes × 64 islands in under 2 ms.
//! Cases:
//! - `cold/1000x8x64`: a burst of 1,000 starts on 64 equal islands;
//! - `replan/1000x8x64`: the same applications running where the cold plan
//!   put them, 10 % reporting a goal gap (the steady-state re-plan);
//! - `hetero/1000x8x64`: cold, islands of 4 different sizes;
//! - `cold/100x4x8`: the small case.
//!
//! Each case is measured twice: `awm_plan/*` in wall-clock time (criterion's
//! default), `awm_plan_cpu/*` in the planning thread's CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`), which leaves out the time the thread waits
//! for a CPU on a busy machine.
//!
//! Run: `cargo bench -p atoll-core --bench awm_plan`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use atoll_core::awm::{
    AppId, AppState, Current, IslandCapacity, Needs, Planner, Recipe, WorkingMode,
};
use atoll_core::Name;
use criterion::{criterion_group, criterion_main, Criterion};

/// A small deterministic generator (no dependency on `rand`).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn islands(count: usize, sizes: &[f64]) -> Vec<IslandCapacity> {
    (0..count)
        .map(|i| IslandCapacity {
            name: Name::new(&format!("i{i}")).unwrap(),
            cpus: sizes[i % sizes.len()],
            memory_bytes: 64 << 30,
        })
        .collect()
}

/// `apps` applications, each with its own recipe of `modes` modes (no
/// sharing, the worst case for any per-recipe caching); 10 % constrained to
/// 8 islands; priorities 0 to 3.
fn apps(count: usize, modes: usize, islands: &[IslandCapacity], seed: u64) -> Vec<AppState> {
    let mut rng = Lcg(seed);
    (0..count)
        .map(|i| {
            let base = 0.25 * (1 + rng.below(4)) as f64;
            let constrained = rng.below(10) == 0;
            let allowed: Option<Vec<Name>> = constrained.then(|| {
                (0..8)
                    .map(|_| {
                        islands[usize::try_from(rng.below(islands.len() as u64)).unwrap()]
                            .name
                            .clone()
                    })
                    .collect()
            });
            let modes = (0..modes)
                .map(|k| WorkingMode {
                    power_watts: None,
                    id: u8::try_from(k).unwrap(),
                    name: String::new(),
                    value: (k + 1) as f64 / modes as f64,
                    needs: Needs {
                        cpu_quota: base * (1.0 + k as f64 * 0.5),
                        threads: Some(u32::try_from(k).unwrap() + 1),
                        exclusive_cpus: false,
                        memory_bytes: (128 + 64 * k as u64 + rng.below(128)) << 20,
                        islands: allowed.clone(),
                    },
                })
                .collect();
            let recipe = Recipe {
                name: Name::new(&format!("app{i}")).unwrap(),
                priority: u8::try_from(rng.below(4)).unwrap(),
                modes,
            };
            AppState::new(AppId(i as u64 + 1), Arc::new(recipe))
        })
        .collect()
}

/// The applications running where `planner` puts them, 10 % with a gap.
fn running(planner: &Planner, islands: &[IslandCapacity], apps: &[AppState]) -> Vec<AppState> {
    let s = planner.plan(islands, apps).unwrap();
    let mut rng = Lcg(7);
    apps.iter()
        .map(|a| {
            let mut a = a.clone();
            a.current = s.grant(a.app).map(|g| Current {
                mode: g.mode,
                island: g.island.clone(),
            });
            if a.current.is_none() {
                a.waiting = 1;
            }
            if rng.below(10) == 0 {
                a.goal_gap = if rng.below(2) == 0 { 0.4 } else { -0.4 };
            }
            a
        })
        .collect()
}

/// CPU time consumed by the calling thread.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and the clock id is a
    // constant the kernel knows.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(
        u64::try_from(ts.tv_sec).expect("a CPU-time clock is never negative"),
        u32::try_from(ts.tv_nsec).expect("tv_nsec is below 1e9"),
    )
}

/// The benchmark cases: name, islands, applications.
fn cases(planner: &Planner) -> Vec<(&'static str, Vec<IslandCapacity>, Vec<AppState>)> {
    let big = islands(64, &[16.0]);
    let cold = apps(1000, 8, &big, 1);
    let warm = running(planner, &big, &cold);
    let mixed = islands(64, &[8.0, 12.0, 16.0, 24.0]);
    let hetero = apps(1000, 8, &mixed, 2);
    let small = islands(8, &[8.0]);
    let few = apps(100, 4, &small, 3);
    vec![
        ("cold/1000x8x64", big.clone(), cold),
        ("replan/1000x8x64", big, warm),
        ("hetero/1000x8x64", mixed, hetero),
        ("cold/100x4x8", small, few),
    ]
}

fn bench(c: &mut Criterion) {
    let planner = Planner::default();
    let cases = cases(&planner);
    for (name, islands, apps) in &cases {
        let s = planner.plan(islands, apps).unwrap();
        eprintln!(
            "{name}: {} granted, {} blocked, {} changes",
            s.grants.len(),
            s.blocked.len(),
            s.changes.len()
        );
    }

    // Wall-clock time: what criterion measures by default. On a machine
    // shared with other work this includes the time the thread waits for a
    // CPU.
    let mut g = c.benchmark_group("awm_plan");
    g.sample_size(50);
    for (name, islands, apps) in &cases {
        g.bench_function(*name, |b| {
            b.iter(|| planner.plan(black_box(islands), black_box(apps)).unwrap())
        });
    }
    g.finish();

    // CPU time of the planning thread: the planning cost itself, without
    // the time spent preempted.
    let mut g = c.benchmark_group("awm_plan_cpu");
    g.sample_size(50);
    for (name, islands, apps) in &cases {
        g.bench_function(*name, |b| {
            b.iter_custom(|iters| {
                let t0 = thread_cpu();
                for _ in 0..iters {
                    black_box(planner.plan(black_box(islands), black_box(apps)).unwrap());
                }
                thread_cpu() - t0
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
