//! Proc connector datagrams: `atoll_procfs::connector::wire::{parse_datagram,
//! classify, SeqTracker}` on raw bytes, and what the connector makes of them
//! (`atoll_core::events::ProcChanges`).
//!
//! Input: one received datagram, as the socket hands it over.
//!
//! Properties: no panic, no out-of-bounds read; an accepted datagram
//! reports as many messages as it appended; the messages parsed (also
//! before an error) re-encode (`encode_message`) to a datagram that parses
//! whole to the same messages; any prefix of the input parses to a prefix
//! of them; sorting and sequence checks never panic, a process event names
//! the thread group of a main thread (or the new process of a fork), and
//! the folded changes never list a pid both as changed and as exited.
#![no_main]

use atoll_core::events::{ProcChanges, ProcEvent, ProcEventBatch};
use atoll_procfs::connector::wire::{
    classify, encode_message, parse_datagram, Kind, RawEvent, SeqTracker,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut out = Vec::new();
    let result = parse_datagram(data, &mut out);
    if let Ok(d) = &result {
        assert_eq!(d.messages, out.len());
    }

    // Round trip through the encoder.
    let mut again = Vec::new();
    for m in &out {
        encode_message(m, &mut again);
    }
    let mut back = Vec::new();
    let d = parse_datagram(&again, &mut back).expect("re-encoded messages parse");
    assert_eq!(d.messages, out.len());
    assert_eq!(back, out);

    // A prefix (cut where the first byte says) gives a prefix.
    if let Some(&b) = data.first() {
        let cut = usize::from(b) * data.len() / 255;
        let mut part = Vec::new();
        let _ = parse_datagram(&data[..cut], &mut part);
        assert!(part.len() <= out.len());
        assert_eq!(part[..], out[..part.len()]);
    }

    // What the connector does with them.
    let mut seqs = SeqTracker::default();
    let mut batch = ProcEventBatch::default();
    for m in &out {
        let _ = seqs.observe(m.cpu, m.seq);
        match (classify(&m.event), &m.event) {
            (Kind::Process(e), raw) => {
                match (&e, raw) {
                    (ProcEvent::Fork { child, .. }, RawEvent::Fork { child_pid, .. }) => {
                        assert_eq!(child, child_pid)
                    }
                    (ProcEvent::Exec { .. }, RawEvent::Exec { .. }) => {}
                    (
                        ProcEvent::Exit { pid } | ProcEvent::Comm { pid, .. } | ProcEvent::Id { pid, .. },
                        RawEvent::Exit { pid: thread, .. }
                        | RawEvent::Comm { pid: thread, .. }
                        | RawEvent::Id { pid: thread, .. },
                    ) => assert_eq!(pid, thread, "a main thread's event"),
                    other => panic!("classified as the wrong kind: {other:?}"),
                }
                batch.events.push(e);
            }
            (Kind::Ack { err }, RawEvent::Ack { err: raw }) => assert_eq!(err, *raw),
            (Kind::Ack { .. }, raw) => panic!("an ack from {raw:?}"),
            (Kind::Thread | Kind::Other, _) => {}
        }
    }
    batch.overflowed = result.is_err();
    let changes = ProcChanges::from_batch(&batch);
    assert!(changes.changed.is_disjoint(&changes.exited));
    assert_eq!(changes.rescan, result.is_err());
});
