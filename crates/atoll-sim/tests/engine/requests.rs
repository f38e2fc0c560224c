use std::collections::BTreeMap;

use atoll_core::comm::NetMonitor;
use atoll_core::Name;

use super::*;

fn tiers(rate: f64, requests: u64) -> String {
    format!(
        "[[apps]]\nname = \"front\"\nunit = \"front\"\n\
         program = {{ kind = \"service\", cpu_us = 500, next = \"db\", response_bytes = 2000 }}\n\
         [[apps]]\nname = \"db\"\nunit = \"db\"\nthreads = 2\n\
         program = {{ kind = \"service\", cpu_us = 1000, exponential = true }}\n\
         [[apps]]\nname = \"users\"\nunit = \"users\"\n\
         program = {{ kind = \"client\", target = \"front\", rate_per_s = {rate}, requests = {requests} }}\n"
    )
}

#[test]
fn request_latency_grows_with_load() {
    let run = |rate| {
        let sim = machine(4);
        let mut e = engine(&sim, &tiers(rate, 2000), 11);
        let r = finish(&mut e, 60.0);
        assert!(r.done, "{r:?}");
        app(&r, "users").latency.clone().unwrap()
    };
    let light = run(100.0);
    let heavy = run(900.0);
    // Unloaded: 0.5 ms + 1 ms (mean) + four network hops.
    assert!(light.mean_ms > 1.5 && light.mean_ms < 2.5, "{light:?}");
    assert!(heavy.mean_ms > 1.5 * light.mean_ms, "{light:?} {heavy:?}");
    assert!(heavy.p99_ms > light.p99_ms);
    assert_eq!(heavy.count, 2000);
}

#[test]
fn a_closed_loop_client_waits_for_each_reply() {
    let sim = machine(2);
    let text =
        "[[apps]]\nname = \"s\"\nunit = \"s\"\nprogram = { kind = \"service\", cpu_us = 1000 }\n\
                [[apps]]\nname = \"c\"\nunit = \"c\"\nthreads = 3\n\
                program = { kind = \"client\", target = \"s\", requests = 30 }\n";
    let mut e = engine(&sim, text, 1);
    let r = finish(&mut e, 10.0);
    // One server thread: requests are served one at a time, 1 ms each.
    let t = app(&r, "c").finished_s.unwrap();
    assert!(t > 0.030 && t < 0.032, "{t}");
    let l = app(&r, "c").latency.clone().unwrap();
    // Three clients share one server: each waits for the others'.
    assert!(l.mean_ms > 2.9 && l.mean_ms < 3.2, "{l:?}");
    assert!(close(app(&r, "s").cpu_s, 0.030, 1e-6));
}

#[test]
fn the_net_monitor_sees_queued_request_bytes() {
    let sim = machine(2);
    let text = "[[apps]]\nname = \"slow\"\nunit = \"slow\"\nprogram = { kind = \"service\", cpu_us = 100000 }\n\
                [[apps]]\nname = \"cli\"\nunit = \"cli\"\n\
                program = { kind = \"client\", target = \"slow\", rate_per_s = 1000, poisson = false, request_bytes = 700 }\n";
    let mut e = engine(&sim, text, 1);
    e.run_until(secs(0.0505));
    let units = BTreeMap::from([
        (Name::new("slow").unwrap(), e.pids("slow")),
        (Name::new("cli").unwrap(), e.pids("cli")),
    ]);
    let mut net = sim.clone();
    let s = net.sample(&units).unwrap();
    let slow = s[&Name::new("slow").unwrap()];
    let cli = s[&Name::new("cli").unwrap()];
    // 51 requests sent (one per ms from 0), the first read at once; the
    // rest (minus any on the wire) wait in the server's socket.
    assert_eq!(slow.bytes_received, 700);
    assert!(
        slow.recv_queued >= 49 * 700 && slow.recv_queued <= 50 * 700,
        "{slow:?}"
    );
    assert_eq!(cli.bytes_sent + cli.send_queued, 51 * 700, "{cli:?}");
    assert_eq!(slow.sockets, 1);
    assert_eq!(e.sample().apps[0].recv_queued, slow.recv_queued);
}
