//! `awm-parallel`: the data-parallel reconfigurable worker of `atoll bench
//! awm` (the paper's burst workload).
//!
//! Every cycle is `--work` units of work split evenly among T threads; each
//! thread works on its own working set (`--ws-kib`, allocated and first
//! written on that thread), and the threads meet the main thread at a
//! barrier to start a cycle and at another when it is done. A new thread
//! count ends the pool and starts a new one (with fresh working sets, as a
//! real application that repartitions its data). Managed or unmanaged: see
//! [`super::awm`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;

use serde_json::Value;

use super::awm::{drive, thread_exits, AwmArgs, Engine, WorkingSet};

/// The recipe used without `--recipe`.
pub const RECIPE: &str = include_str!("../../../../clients/recipes/awm_bench_parallel.toml");

struct Shared {
    quit: AtomicBool,
    cycle: AtomicU64,
    checksum: AtomicU64,
}

struct Pool {
    threads: usize,
    start: Arc<Barrier>,
    end: Arc<Barrier>,
    handles: Vec<JoinHandle<()>>,
}

/// The engine: a pool of threads, rebuilt on every new thread count.
struct Parallel {
    work: u64,
    ws_kib: usize,
    shared: Arc<Shared>,
    pool: Option<Pool>,
    cycles: u64,
}

impl Parallel {
    fn start_pool(&self, threads: usize) -> Pool {
        let start = Arc::new(Barrier::new(threads + 1));
        let end = Arc::new(Barrier::new(threads + 1));
        let n = threads as u64;
        let handles = (0..n)
            .map(|i| {
                let (start, end, shared) = (start.clone(), end.clone(), self.shared.clone());
                let (work, ws_kib) = (self.work, self.ws_kib);
                let (from, to) = (work * i / n, work * (i + 1) / n);
                std::thread::spawn(move || {
                    let mut ws = WorkingSet::new(ws_kib);
                    loop {
                        start.wait();
                        if shared.quit.load(Ordering::SeqCst) {
                            break;
                        }
                        let c = shared.cycle.load(Ordering::SeqCst);
                        // Summed so the work is not optimized away.
                        let sum = ws.work(to - from, c.wrapping_mul(work).wrapping_add(from));
                        shared.checksum.fetch_add(sum & 0xffff, Ordering::SeqCst);
                        end.wait();
                    }
                    thread_exits();
                })
            })
            .collect();
        Pool {
            threads,
            start,
            end,
            handles,
        }
    }

    fn stop_pool(&mut self) {
        if let Some(p) = self.pool.take() {
            self.shared.quit.store(true, Ordering::SeqCst);
            p.start.wait();
            for h in p.handles {
                let _ = h.join();
            }
            self.shared.quit.store(false, Ordering::SeqCst);
        }
    }
}

impl Engine for Parallel {
    fn configure(&mut self, threads: usize) {
        if self.threads() != threads {
            self.stop_pool();
            self.pool = Some(self.start_pool(threads.max(1)));
        }
    }

    fn threads(&self) -> usize {
        self.pool.as_ref().map_or(0, |p| p.threads)
    }

    fn cycle(&mut self, n: u64) {
        let Some(p) = &self.pool else { return };
        self.shared.cycle.store(n, Ordering::SeqCst);
        p.start.wait();
        p.end.wait();
        self.cycles += 1;
    }

    fn shutdown(&mut self) {
        self.stop_pool();
    }

    fn checksum(&self) -> u64 {
        self.shared.checksum.load(Ordering::SeqCst)
    }

    fn items(&self) -> u64 {
        self.cycles
    }
}

/// Runs `awm-parallel` and returns its report.
pub fn awm_parallel(a: &AwmArgs) -> std::io::Result<Value> {
    let e = Parallel {
        work: a.work,
        ws_kib: a.ws_kib,
        shared: Arc::new(Shared {
            quit: AtomicBool::new(false),
            cycle: AtomicU64::new(0),
            checksum: AtomicU64::new(0),
        }),
        pool: None,
        cycles: 0,
    };
    drive("awm-parallel", a, e, RECIPE)
}
