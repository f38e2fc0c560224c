//! Quiescent epochs (`atoll_daemon::pace`) through the controller on the
//! simulated backend: a loop with nothing to act on waits longer and
//! longer, up to its bound; load that appears with no event to announce it
//! is acted on at the next (late) epoch, which brings the loop back to
//! every epoch; a command or a process event does the same at once; and a
//! loan keeps the loop at every epoch.

mod common;

use atoll_core::clock::ManualClock;
use atoll_core::events::ProcEvent;
use atoll_core::plan::GroupPath;
use atoll_core::spec::IsolationMode;
use atoll_daemon::controller::Controller;
use atoll_daemon::pace::Wake;
use atoll_procfs::connector::FakeEvents;
use atoll_proto::{LoopPace, Reply, Request};
use atoll_sim::SimPlatform;
use common::sim::{ask, pool_of_two, topo8, ROOT};

/// The simulated machine, a started controller that may wait up to 8
/// epochs, with an idle `light` and an idle `heavy`, and the fake kernel's
/// process events.
struct Rig {
    sim: SimPlatform,
    c: Controller,
    kernel: atoll_procfs::connector::FakeEventsHandle,
    heavy: u32,
    /// The wait before the next epoch, in epochs.
    wait: u32,
}

impl Rig {
    fn new() -> Self {
        let sim = SimPlatform::new(topo8(), "atoll-q", ManualClock::new());
        let _light = sim.spawn("light", 0, None);
        let heavy = sim.spawn("heavy", 0, None);
        let mut c = common::sim::controller(&sim, pool_of_two(IsolationMode::Isolate), topo8());
        let (events, kernel) = FakeEvents::new();
        c.set_process_events(Box::new(events));
        c.set_idle_max_epochs(8);
        c.start().unwrap();
        Self {
            sim,
            c,
            kernel,
            heavy,
            wait: 1,
        }
    }

    /// What the driver does: waits the epochs it was told (on the fake
    /// clock), runs an epoch, and asks how long to wait next.
    fn epoch(&mut self) -> u32 {
        self.sim
            .advance(self.c.epoch_len().saturating_mul(self.wait));
        self.c.epoch();
        self.wait = self.c.after_epoch();
        self.wait
    }

    fn waits(&mut self, k: usize) -> Vec<u32> {
        (0..k).map(|_| self.epoch()).collect()
    }

    /// An input cut the wait short: the next epoch comes one epoch later.
    fn wake(&mut self, why: Wake) -> bool {
        let cut = self.c.wake(why);
        if cut {
            self.wait = 1;
        }
        cut
    }

    fn pace(&mut self) -> LoopPace {
        let Reply::Status(s) = ask(&mut self.c, ROOT, Request::Status {})
            .into_result()
            .unwrap()
        else {
            panic!("not a status")
        };
        s.pace.expect("the status has the loop's pace")
    }
}

#[test]
fn an_idle_machine_stretches_the_wait_to_its_bound() {
    let mut r = Rig::new();
    // The first epoch lists /proc once (the connector's start): not quiet.
    let waits = r.waits(6);
    assert_eq!(&waits[waits.len() - 3..], &[8, 8, 8], "{waits:?}");
    assert!(waits.contains(&2) && waits.contains(&4), "{waits:?}");
    let p = r.pace();
    assert_eq!(p.interval_ms, 240);
    assert_eq!(p.max_epochs, 8);
    assert!(p.quiescent_since_ms.is_some(), "{p:?}");
    assert!(p.stretched_epochs >= 3, "{p:?}");
}

#[test]
fn without_a_bound_the_loop_keeps_every_epoch() {
    let mut r = Rig::new();
    r.c.set_idle_max_epochs(1);
    assert_eq!(r.waits(10), vec![1; 10]);
    assert_eq!(r.pace().interval_ms, 30);
}

#[test]
fn load_that_appears_after_quiescence_is_isolated_at_the_next_epoch() {
    let mut r = Rig::new();
    let heavy_g = GroupPath::from_relative("pool/heavy");
    r.waits(8);
    assert_eq!(r.wait, 8);
    let before = r.sim.settings(&heavy_g).unwrap().cpus.unwrap();
    assert_eq!(before.len(), 2, "{before}");
    // heavy gets four busy threads; nothing announces it (no event, no
    // pressure trigger on the simulator): the next epoch, 8 epochs later,
    // sees the island busy, lends light's idle CPUs, and is not quiescent.
    r.sim.set_busy(r.heavy, true).unwrap();
    for _ in 0..3 {
        let t = r.sim.spawn_child(r.heavy).unwrap();
        r.sim.set_busy(t, true).unwrap();
    }
    assert_eq!(r.epoch(), 1, "busy: back to every epoch");
    let hs = r.sim.settings(&heavy_g).unwrap();
    assert!(hs.cpus.clone().unwrap().len() > 2, "{:?}", hs.cpus);
    // With CPUs on loan the loop stays at every epoch: light must get
    // them back within one epoch when it needs them.
    assert_eq!(r.waits(5), vec![1; 5]);
    let p = r.pace();
    assert_eq!(p.wakes.get("busy"), Some(&1), "{p:?}");
    assert_eq!(p.held_by.as_deref(), Some("isolation"), "{p:?}");
    assert_eq!(p.quiescent_since_ms, None);
}

#[test]
fn a_command_or_a_process_event_cuts_the_wait_at_once() {
    let mut r = Rig::new();
    r.waits(8);
    assert_eq!(r.wait, 8);
    assert!(r.wake(Wake::Command));
    assert_eq!(r.pace().interval_ms, 30);
    // Nothing changed: quiescent again, the doubling starts over.
    assert_eq!(r.epoch(), 2);
    r.waits(4);
    assert_eq!(r.wait, 8);
    // A process that matches a rule: its event wakes the loop, the next
    // epoch adopts it.
    let late = r.sim.spawn("light", 0, None);
    r.kernel.push(ProcEvent::Fork {
        parent: 1,
        child: late,
    });
    assert!(r.wake(Wake::ProcEvent));
    r.epoch();
    assert!(r.c.registry().managed(late).is_some(), "adopted");
    let p = r.pace();
    assert_eq!(p.wakes.get("command"), Some(&1), "{p:?}");
    assert_eq!(p.wakes.get("proc_event"), Some(&1), "{p:?}");
    // A pressure trigger the same way.
    r.waits(4);
    assert!(r.wake(Wake::Pressure));
    assert_eq!(r.pace().wakes.get("pressure"), Some(&1));
}
