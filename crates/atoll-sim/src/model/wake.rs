//! Wakeup latency: how long a thread that becomes runnable waits before it
//! runs, which the fluid shares alone would make zero.
//!
//! The model (an approximation of EEVDF wakeup placement):
//!
//! - A waking thread's CPU set `S` is *busy* with the runnable threads that
//!   can delay it: fair threads outside `cpu.idle` groups, and RT threads.
//!   Idle-policy threads and threads in `cpu.idle` groups never delay a
//!   waking thread (the kernel preempts them at once). Threads of every
//!   other CPU set `T` are spread evenly over `T`, so `S` holds
//!   `busy = Σ_T n_T · |S ∩ T| / |T|` of them.
//! - If `busy + 1 <= |S|`, a CPU is free: no delay.
//! - Otherwise each CPU has `q = busy / |S|` threads queued, and the waking
//!   thread, placed with a virtual deadline one slice ahead, waits for
//!   about half a slice per queued thread: `delay = q · slice / 2`, where
//!   `slice` is its own custom slice (`TaskControl::set_slice`) or the
//!   kernel's base slice (0.75 ms × (1 + log2(min(CPUs, 8))), 3 ms from 8
//!   CPUs on). So a short slice gets a woken request handler on a CPU
//!   sooner without changing anyone's share, as on Linux 6.12+.
//! - RT threads wake without delay.
//!
//! Throttling by `cpu.max` is not a wakeup delay here: the fluid rate
//! already spreads it.

use std::time::Duration;

use atoll_core::num::saturating_u64;

use super::{ClassId, Model, PolicyKind, Tree};

impl Tree {
    /// Runnable threads that can delay a waker on CPU set `s`: those of
    /// every set spread evenly over it (see the module docs).
    pub(crate) fn busy_in(&self, s: usize) -> f64 {
        self.set_busy
            .iter()
            .zip(&self.inter[s])
            .zip(&self.set_len)
            .filter(|((n, _), l)| **n > 0.0 && **l > 0.0)
            .map(|((n, i), l)| n * i / l)
            .sum()
    }
}

impl Model {
    /// The wakeup delay for a thread of class `c` with custom slice `slice`.
    /// The tree must be built.
    pub(crate) fn wake_delay_ns(&self, c: ClassId, slice: Option<Duration>) -> u64 {
        let (Some(tree), Some(class)) = (self.tree.as_ref(), self.classes.get(c)) else {
            return 0;
        };
        if matches!(class.kind, PolicyKind::Rt(_)) || class.node.is_none() {
            return 0;
        }
        let s = class.set;
        let len = tree.set_len[s];
        if len <= 0.0 {
            return 0;
        }
        let busy = tree.busy_in(s);
        if busy + 1.0 <= len + 1e-9 {
            return 0;
        }
        let slice_ns = slice.map_or(self.base_slice_ns as f64, |d| d.as_nanos() as f64);
        saturating_u64((busy / len * slice_ns / 2.0).round())
    }
}
