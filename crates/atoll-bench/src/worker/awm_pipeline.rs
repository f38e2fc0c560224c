//! `awm-pipeline`: the pipeline reconfigurable worker of `atoll bench awm`
//! (Ferret-like, the paper's mixed workload).
//!
//! Four stages connected by bounded queues (`--queue` items each):
//!
//! ```text
//! load (1 thread) -> extract (T threads) -> rank (T threads) -> out (main thread)
//! ```
//!
//! A cycle is a batch of `--items` items: the main thread asks `load` for
//! them, which makes them (a seed each) and queues them; every item costs
//! `--work` units in `extract` and again in `rank`, each thread on its own
//! working set (`--ws-kib`); the main thread collects the batch. T, the
//! threads of each compute stage, is `--threads` unmanaged and the working
//! mode's thread count managed. The pipeline is empty between cycles, so a
//! new T ends every stage thread (closing the queues from the front) and
//! starts new ones.

use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use serde_json::Value;

use super::awm::{drive, thread_exits, AwmArgs, Engine, WorkingSet};

/// The recipe used without `--recipe`.
pub const RECIPE: &str = include_str!("../../../../clients/recipes/awm_bench_pipeline.toml");

/// One item on its way through the stages.
struct Item {
    seed: u64,
    sum: u64,
}

/// The running stages.
struct Stages {
    threads: usize,
    /// Batches asked of `load`: (first item number, items).
    load: Sender<(u64, u64)>,
    /// What `rank` hands to the main thread.
    out: Receiver<Item>,
    handles: Vec<JoinHandle<()>>,
}

/// The engine.
struct Pipeline {
    work: u64,
    ws_kib: usize,
    batch: u64,
    queue: usize,
    stages: Option<Stages>,
    done: u64,
    checksum: u64,
}

/// `t` threads that take items from `rx`, do `work` units each and pass
/// them on to `tx`.
fn compute_stage(
    t: usize,
    work: u64,
    ws_kib: usize,
    rx: Receiver<Item>,
    tx: &SyncSender<Item>,
    handles: &mut Vec<JoinHandle<()>>,
) {
    let rx = Arc::new(Mutex::new(rx));
    for _ in 0..t {
        let (rx, tx) = (rx.clone(), tx.clone());
        handles.push(std::thread::spawn(move || {
            let mut ws = WorkingSet::new(ws_kib);
            loop {
                let next = rx.lock().map(|r| r.recv());
                let Ok(Ok(mut item)) = next else { break };
                item.sum = item.sum.wrapping_add(ws.work(work, item.seed) & 0xffff);
                if tx.send(item).is_err() {
                    break;
                }
            }
            thread_exits();
        }));
    }
}

impl Pipeline {
    fn start(&self, t: usize) -> Stages {
        let (load_tx, load_rx) = channel::<(u64, u64)>();
        let (q1_tx, q1_rx) = sync_channel::<Item>(self.queue);
        let (q2_tx, q2_rx) = sync_channel::<Item>(self.queue);
        let (q3_tx, q3_rx) = sync_channel::<Item>(self.queue);
        let mut handles = Vec::with_capacity(2 * t + 1);
        handles.push(std::thread::spawn(move || {
            while let Ok((first, n)) = load_rx.recv() {
                for i in first..first + n {
                    let seed = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                    if q1_tx.send(Item { seed, sum: 0 }).is_err() {
                        break;
                    }
                }
            }
            thread_exits();
        }));
        compute_stage(t, self.work, self.ws_kib, q1_rx, &q2_tx, &mut handles);
        compute_stage(t, self.work, self.ws_kib, q2_rx, &q3_tx, &mut handles);
        Stages {
            threads: t,
            load: load_tx,
            out: q3_rx,
            handles,
        }
    }

    fn stop(&mut self) {
        if let Some(s) = self.stages.take() {
            // Closing the first queue ends `load`, which closes the next...
            drop(s.load);
            // ...and draining the last lets no sender block.
            while s.out.recv().is_ok() {}
            for h in s.handles {
                let _ = h.join();
            }
        }
    }
}

impl Engine for Pipeline {
    fn configure(&mut self, threads: usize) {
        if self.threads() != threads {
            self.stop();
            self.stages = Some(self.start(threads.max(1)));
        }
    }

    fn threads(&self) -> usize {
        self.stages.as_ref().map_or(0, |s| s.threads)
    }

    fn cycle(&mut self, n: u64) {
        let Some(s) = &self.stages else { return };
        if s.load.send((n * self.batch, self.batch)).is_err() {
            return;
        }
        for _ in 0..self.batch {
            match s.out.recv() {
                Ok(item) => {
                    self.checksum = self.checksum.wrapping_add(item.sum);
                    self.done += 1;
                }
                Err(_) => return,
            }
        }
    }

    fn shutdown(&mut self) {
        self.stop();
    }

    fn checksum(&self) -> u64 {
        self.checksum
    }

    fn items(&self) -> u64 {
        self.done
    }
}

/// Runs `awm-pipeline` and returns its report.
pub fn awm_pipeline(a: &AwmArgs) -> std::io::Result<Value> {
    let e = Pipeline {
        work: a.work,
        ws_kib: a.ws_kib,
        batch: a.items,
        queue: a.queue,
        stages: None,
        done: 0,
        checksum: 0,
    };
    drive("awm-pipeline", a, e, RECIPE)
}
