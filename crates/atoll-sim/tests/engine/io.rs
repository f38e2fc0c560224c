use atoll_core::backend::{Actuator, Monitor};
use atoll_core::plan::GroupSettings;

use super::*;

/// A 4 Mbit/s stream in 50 KiB chunks (one per ~102 ms), 2 s long, to 2
/// clients; 10 ms of server CPU per chunk. `extra` is added to the server.
fn streams(server_extra: &str) -> String {
    format!(
        "[[apps]]\nname = \"tv\"\nunit = \"tv\"\n{server_extra}\n\
         program = {{ kind = \"stream_server\", clients = \"viewer\", rate_kbps = 4000, chunk_kb = 50, cpu_us = 10000, duration_ms = 2000 }}\n\
         [[apps]]\nname = \"viewer\"\nunit = \"viewer\"\ninstances = 2\n\
         program = {{ kind = \"stream_client\", prefill_ms = 150, cpu_us = 100 }}\n"
    )
}

#[test]
fn streams_play_without_under_runs_when_the_server_keeps_up() {
    let sim = machine(2);
    let mut e = engine(&sim, &streams(""), 1);
    let r = finish(&mut e, 10.0);
    let v = app(&r, "viewer");
    let s = v.stream.clone().unwrap();
    assert_eq!(s.underruns, 0, "{r:?}");
    assert_eq!(s.chunks, 2 * 20);
    // Playback starts once two chunks are in, and lasts 20 chunks' time.
    let startup = s.startup_s.unwrap();
    assert!(startup > 0.10 && startup < 0.12, "{startup}");
    assert!(v.finished_s.unwrap() > 2.0 && r.done);
}

#[test]
fn a_starved_server_makes_streams_under_run() {
    // The server runs SCHED_IDLE; from 0.5 s to 1.5 s a fair hog leaves it
    // 3/1027 of the CPU, far less than the 20% it needs.
    let sim = machine(1);
    let text = streams("policy = \"idle\"")
        + "[[apps]]\nname = \"hog\"\nunit = \"hog\"\nstart_ms = 500\n\
           program = { kind = \"hog\", cpu_ms = 1000 }\n";
    let mut e = engine(&sim, &text, 1);
    let r = finish(&mut e, 30.0);
    let s = app(&r, "viewer").stream.clone().unwrap();
    assert!(s.underruns >= 2, "{s:?}");
    assert!(s.stalled_s > 0.5, "{s:?}");
    assert_eq!(s.chunks, 40);
}

fn disk_app(pattern: &str, requests: u64) -> String {
    format!(
        "[disk]\n\n[[apps]]\nname = \"io\"\nunit = \"io\"\n\
         program = {{ kind = \"disk\", pattern = \"{pattern}\", request_kb = 64, requests = {requests} }}\n"
    )
}

#[test]
fn random_disk_requests_pay_seeks_sequential_ones_do_not() {
    let run = |pattern| {
        let sim = machine(1);
        let mut e = engine(&sim, &disk_app(pattern, 100), 5);
        finish(&mut e, 60.0)
    };
    let seq = run("sequential");
    let rnd = run("random");
    // 64 KiB at 200 MB/s is 0.328 ms; one seek to the start.
    let xfer = 65536.0 / 200e6;
    let t_seq = app(&seq, "io").finished_s.unwrap();
    let seek = seq.disk.as_ref().unwrap().seek_s;
    assert!(close(t_seq, 100.0 * xfer + seek, 1e-5), "{t_seq} {seq:?}");
    assert!(seek <= 0.012);
    // Random: every request seeks, 0.5 ms + 11.5 ms × distance (a third of
    // the disk on average).
    let t_rnd = app(&rnd, "io").finished_s.unwrap();
    assert!(t_rnd > 10.0 * t_seq, "{t_seq} {t_rnd}");
    let d = rnd.disk.clone().unwrap();
    assert_eq!(d.requests, 100);
    assert!(d.seek_s > 0.3 && d.seek_s < 0.6, "{d:?}");
    assert_eq!(app(&rnd, "io").io_bytes, 100 * 65536);
}

#[test]
fn the_weighted_disk_queue_follows_io_weights() {
    let mut sim = machine(2);
    ok(&mut sim, "", GroupSettings::default());
    for (p, w) in [("a", 100), ("b", 400)] {
        let s = GroupSettings {
            io_weight: Some(w),
            ..Default::default()
        };
        ok(&mut sim, p, s);
    }
    let text = "[disk]\nqueue = \"weighted\"\n\
        [[apps]]\nname = \"a\"\nunit = \"a\"\nthreads = 4\nprogram = { kind = \"disk\", pattern = \"random\", request_kb = 64 }\n\
        [[apps]]\nname = \"b\"\nunit = \"b\"\nthreads = 4\nprogram = { kind = \"disk\", pattern = \"random\", request_kb = 64 }\n";
    let mut e = engine(&sim, text, 2);
    e.run_until(secs(0.0));
    sim.move_process(e.pids("a")[0], &g("a")).unwrap();
    sim.move_process(e.pids("b")[0], &g("b")).unwrap();
    e.run_until(secs(5.0));
    let r = e.report();
    let (a, b) = (app(&r, "a").io_requests, app(&r, "b").io_requests);
    let ratio = b as f64 / a as f64;
    assert!(ratio > 3.0 && ratio < 5.0, "{a} {b}");
    // Bytes are charged to the groups the requests were issued from: all
    // but the first 8, issued before the moves.
    let sa = sim.stats(&g("a")).unwrap();
    assert!(sa.io_read_bytes.unwrap() >= (a - 4) * 65536, "{sa:?}");
    assert_eq!(
        sim.stats(&g("")).unwrap().io_read_bytes,
        Some(r.disk.unwrap().bytes - 8 * 65536)
    );
}

#[test]
fn memory_footprints_are_charged_to_the_group() {
    let mut sim = machine(1);
    ok(&mut sim, "", GroupSettings::default());
    ok(&mut sim, "m", GroupSettings::default());
    let text = "[[apps]]\nname = \"m\"\nunit = \"m\"\ninstances = 2\nmemory_mb = 3\nprogram = { kind = \"hog\" }\n";
    let mut e = engine(&sim, text, 1);
    e.run_until(secs(0.0));
    for pid in e.pids("m") {
        sim.move_process(pid, &g("m")).unwrap();
    }
    e.run_until(secs(0.5));
    let s = sim.stats(&g("m")).unwrap();
    assert_eq!(s.memory_current, Some(2 * 3 * 1024 * 1024));
    assert!(s.cpu_usage_us.unwrap().abs_diff(500_000) <= 1);
}
