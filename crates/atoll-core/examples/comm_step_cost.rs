//! Cost of one `CommPolicy::step` for 8, 64 and 512 units, all three
//! features on, with pseudo-random traffic and CPU use (fixed seed).
//!
//! `cargo run --release -p atoll-core --example comm_step_cost`

use std::time::{Duration, Instant};

use atoll_core::comm::{CommPolicy, CommSpec, UnitInput, UnitNetSample};
use atoll_core::Name;

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn measure(units: usize, steps: usize) -> (u128, u128, usize) {
    let names: Vec<Name> = (0..units)
        .map(|i| Name::new(&format!("unit{i}")).unwrap())
        .collect();
    let spec = CommSpec {
        recipient: true,
        anticipate: true,
        netpath: vec![names[0].clone()],
        ..CommSpec::default()
    };
    let mut policy = CommPolicy::new(spec).unwrap();
    let capacity = 2.0;
    let share = capacity / units as f64;
    let mut inputs: Vec<UnitInput> = names
        .iter()
        .map(|u| UnitInput {
            unit: u.clone(),
            net: UnitNetSample::default(),
            cpu_usage_us: 0,
            reservation_cpus: share,
        })
        .collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let epoch = Duration::from_millis(30);
    let mut now = Duration::ZERO;
    let mut times = Vec::with_capacity(steps);
    let mut boosts = 0;
    for step in 0..steps + steps / 10 {
        now += epoch;
        for (i, inp) in inputs.iter_mut().enumerate() {
            // Every fourth unit talks; the others burn CPU.
            if i % 4 == 0 {
                inp.net.recv_queued = if rng.below(3) == 0 {
                    rng.below(8192)
                } else {
                    0
                };
                inp.net.bytes_received += rng.below(4096);
                if rng.below(4) == 0 {
                    inp.net.bytes_sent += rng.below(16_384);
                }
                inp.cpu_usage_us += rng.below(5_000);
            } else {
                inp.cpu_usage_us += rng.below(30_000);
            }
        }
        let t = Instant::now();
        let d = policy.step(now, &inputs).unwrap();
        let spent = t.elapsed().as_nanos();
        boosts += d.started.len();
        if step >= steps / 10 {
            times.push(spent);
        }
    }
    times.sort_unstable();
    let p = |q: f64| times[atoll_core::num::saturating_usize((times.len() - 1) as f64 * q)];
    (p(0.5), p(0.99), boosts)
}

fn main() {
    println!("units  steps    p50 ns/step   p99 ns/step   boosts started");
    for (units, steps) in [(8, 20_000), (64, 20_000), (512, 4_000)] {
        let (p50, p99, boosts) = measure(units, steps);
        println!("{units:>5}  {steps:>6}  {p50:>12}  {p99:>12}  {boosts:>15}");
    }
}
