//! One disk with a head, and a queue in front of it.
//!
//! The model:
//!
//! - Addresses are bytes in `[0, capacity)`. Serving a request at offset
//!   `p` of `b` bytes with the head at `h` takes a seek, `0` if `p = h`
//!   else `seek_min + (seek_full − seek_min) · |p − h| / capacity`
//!   (proportional to distance, with a settle time), plus the transfer,
//!   `b / bandwidth`; the head ends at `p + b`. No rotational latency, no
//!   cache, no read-ahead, no write-back: every request goes to the
//!   platter, one at a time.
//! - A *sequential* thread starts at a random offset (aligned to its
//!   request size) and continues where its previous request ended
//!   (wrapping at the end); a *random* one draws an aligned offset each
//!   time. Two sequential streams served in turn seek between each other,
//!   as on a real disk without an anticipatory scheduler.
//! - The queue is FIFO, or *weighted*: start-time fair queuing across
//!   flows, a flow being the requester's group (all processes outside
//!   atoll are one flow), weighted by the group's `io.weight` (100 when
//!   unset). A request's start tag is `max(virtual time, its flow's last
//!   finish tag)`, its finish tag `start + bytes / weight`; the disk
//!   serves the smallest finish tag, and the virtual time is the start
//!   tag of the request in service. `io.max` is not enforced.
//! - Bytes are charged to the requester's group when the request
//!   completes (`io_read_bytes`, `io_write_bytes` in its stats).

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, VecDeque};

use atoll_core::num::saturating_u64;
use atoll_core::plan::GroupPath;

use super::{Engine, Ev, Next};
use crate::state::{Location, SimState};
use crate::workload::{DiskQueue, DiskSpec, Pattern, Program};

/// A request.
#[derive(Clone, Debug)]
pub(super) struct Io {
    th: usize,
    pos: u64,
    bytes: u64,
    write: bool,
    issued: u64,
    group: Option<GroupPath>,
    start_tag: f64,
    finish_tag: f64,
    seq: u64,
}

impl PartialEq for Io {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Io {}
impl PartialOrd for Io {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Io {
    fn cmp(&self, o: &Self) -> Ordering {
        self.finish_tag
            .total_cmp(&o.finish_tag)
            .then(self.seq.cmp(&o.seq))
    }
}

/// The disk's state and totals.
#[derive(Debug)]
pub(super) struct Disk {
    spec: DiskSpec,
    capacity: u64,
    ns_per_byte: f64,
    head: u64,
    current: Option<Io>,
    fifo: VecDeque<Io>,
    weighted: BinaryHeap<Reverse<Io>>,
    flows: HashMap<Option<GroupPath>, f64>,
    vtime: f64,
    seq: u64,
    /// Requests served, bytes, time busy and seeking, ns.
    pub served: u64,
    pub bytes: u64,
    pub busy_ns: u64,
    pub seek_ns: u64,
}

impl Disk {
    pub(super) fn new(spec: DiskSpec) -> Self {
        Self {
            capacity: saturating_u64(spec.capacity_gb * 1e9),
            ns_per_byte: 1e9 / (spec.bandwidth_mb_s * 1e6),
            spec,
            head: 0,
            current: None,
            fifo: VecDeque::new(),
            weighted: BinaryHeap::new(),
            flows: HashMap::new(),
            vtime: 0.0,
            seq: 0,
            served: 0,
            bytes: 0,
            busy_ns: 0,
            seek_ns: 0,
        }
    }

    /// Seek time from the head to `pos`, ns.
    fn seek(&self, pos: u64) -> u64 {
        let d = pos.abs_diff(self.head);
        if d == 0 {
            return 0;
        }
        let s = &self.spec;
        let ms = s.seek_min_ms + (s.seek_full_ms - s.seek_min_ms) * d as f64 / self.capacity as f64;
        saturating_u64((ms * 1e6).round())
    }

    fn push(&mut self, mut io: Io, weight: f64) {
        self.seq += 1;
        io.seq = self.seq;
        match self.spec.queue {
            DiskQueue::Fifo => self.fifo.push_back(io),
            DiskQueue::Weighted => {
                let last = self.flows.get(&io.group).copied().unwrap_or(0.0);
                io.start_tag = self.vtime.max(last);
                io.finish_tag = io.start_tag + io.bytes as f64 / weight.max(1.0);
                self.flows.insert(io.group.clone(), io.finish_tag);
                self.weighted.push(Reverse(io));
            }
        }
    }

    fn pop(&mut self) -> Option<Io> {
        match self.spec.queue {
            DiskQueue::Fifo => self.fifo.pop_front(),
            DiskQueue::Weighted => self.weighted.pop().map(|Reverse(io)| {
                self.vtime = io.start_tag;
                io
            }),
        }
    }
}

impl Engine {
    /// A disk thread's first sequential offset.
    pub(super) fn disk_thread_start(&mut self, th: usize, app: usize) {
        let (Some(d), Program::Disk { request_kb, .. }) =
            (&self.disk, &self.spec.apps[app].program)
        else {
            return;
        };
        let size = saturating_u64((request_kb * 1024.0).round()).max(1);
        let slots = (d.capacity / size).max(1);
        self.threads[th].pos = self.apps[app].rng.below(slots) * size;
    }

    /// A disk thread issues its next request, or finishes.
    pub(super) fn disk_issue(&mut self, st: &mut SimState, th: usize) {
        let app = self.threads[th].app;
        let Program::Disk {
            pattern,
            request_kb,
            requests,
            write,
            ..
        } = self.spec.apps[app].program
        else {
            return;
        };
        let Some(capacity) = self.disk.as_ref().map(|d| d.capacity) else {
            return;
        };
        if requests.is_some_and(|n| self.threads[th].count >= n) {
            self.finish_thread(st, th);
            return;
        }
        self.threads[th].count += 1;
        let bytes = saturating_u64((request_kb * 1024.0).round()).max(1);
        let slots = (capacity / bytes).max(1);
        let pos = match pattern {
            Pattern::Sequential => {
                let p = self.threads[th].pos;
                let p = if p + bytes > capacity { 0 } else { p };
                self.threads[th].pos = p + bytes;
                p
            }
            Pattern::Random => self.apps[app].rng.below(slots) * bytes,
        };
        let pid = self.pid_of(th);
        let group = match st.procs.get(&pid).map(|p| &p.location) {
            Some(Location::Group(g)) => Some(g.clone()),
            _ => None,
        };
        let weight = group
            .as_ref()
            .and_then(|g| st.groups.get(g))
            .and_then(|g| g.settings.io_weight)
            .unwrap_or(100);
        self.block(st, th);
        let io = Io {
            th,
            pos,
            bytes,
            write,
            issued: self.now,
            group,
            start_tag: 0.0,
            finish_tag: 0.0,
            seq: 0,
        };
        if let Some(d) = self.disk.as_mut() {
            d.push(io, f64::from(weight));
        }
        self.disk_dispatch();
    }

    /// Starts the next request if the disk is idle.
    fn disk_dispatch(&mut self) {
        let now = self.now;
        let Some(d) = self.disk.as_mut() else { return };
        if d.current.is_some() {
            return;
        }
        let Some(io) = d.pop() else { return };
        let seek = d.seek(io.pos);
        let xfer = saturating_u64((io.bytes as f64 * d.ns_per_byte).ceil());
        d.head = (io.pos + io.bytes).min(d.capacity);
        d.busy_ns += seek + xfer;
        d.seek_ns += seek;
        d.current = Some(io);
        self.at(now + seek + xfer, Ev::DiskDone);
    }

    /// The request in service is done.
    pub(super) fn disk_done(&mut self, st: &mut SimState) {
        let Some(io) = self.disk.as_mut().and_then(|d| d.current.take()) else {
            return;
        };
        if let Some(d) = self.disk.as_mut() {
            d.served += 1;
            d.bytes += io.bytes;
        }
        if let Some(g) = io.group.as_ref().and_then(|g| st.groups.get_mut(g)) {
            if io.write {
                g.io_write += io.bytes;
            } else {
                g.io_read += io.bytes;
            }
        }
        let app = self.threads[io.th].app;
        let rt = &mut self.apps[app];
        rt.io_done += 1;
        rt.io_bytes += io.bytes;
        rt.io_latency_ns += self.now.saturating_sub(io.issued);
        self.wake(st, io.th, Next::DiskDone);
        self.disk_dispatch();
    }

    /// Back from the disk: spend the CPU, then issue the next.
    pub(super) fn disk_after(&mut self, st: &mut SimState, th: usize) {
        let app = self.threads[th].app;
        let cpu = match self.spec.apps[app].program {
            Program::Disk { cpu_us, .. } => cpu_us * 1e3,
            _ => 0.0,
        };
        self.compute(st, th, cpu, Next::DiskIssue);
    }

    /// The disk's totals.
    pub(super) fn disk_totals(&self) -> Option<(u64, u64, u64, u64)> {
        self.disk
            .as_ref()
            .map(|d| (d.served, d.bytes, d.busy_ns, d.seek_ns))
    }
}
