//! Tests of the saver thread: real writes to a temporary directory, a
//! fake writer that blocks or fails.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::sync_channel;

use atoll_core::backend::BackendKind;

use super::*;

fn state(root: &str) -> SavedState {
    SavedState {
        format: state::FORMAT,
        backend: BackendKind::Sim,
        root: root.into(),
        units: vec![],
        processes: vec![],
        parent_controllers_added: vec![],
        overlays: vec![],
        coordination: None,
        network: None,
        frequency_originals: None,
    }
}

/// A `Done` that counts its successes in `ok` and its failures in `err`.
fn counter(ok: &Arc<AtomicUsize>, err: &Arc<AtomicUsize>) -> Done {
    let (ok, err) = (ok.clone(), err.clone());
    Box::new(move |r| {
        match r {
            Ok(()) => ok.fetch_add(1, Ordering::SeqCst),
            Err(_) => err.fetch_add(1, Ordering::SeqCst),
        };
    })
}

#[test]
fn dropping_the_saver_leaves_the_last_state_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Saver::new(dir.path().to_path_buf());
    s.submit(state("first"), vec![]);
    s.submit(state("last"), vec![]);
    drop(s);
    let saved = state::load(dir.path()).unwrap().expect("a state file");
    assert_eq!(saved.root, "last");
}

#[test]
fn queued_states_coalesce_to_the_newest_and_every_ticket_is_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let written = Arc::new(Mutex::new(Vec::<String>::new()));
    // The first write blocks until `go` says so, while three more queue.
    let (go, gate) = sync_channel::<()>(0);
    let (started, is_started) = sync_channel::<()>(1);
    let gate = Mutex::new(gate);
    let log = written.clone();
    let mut s = Saver::with_writer(dir.path().to_path_buf(), move |d, st| {
        if st.root == "s1" {
            started.send(()).unwrap();
            gate.lock().unwrap().recv().unwrap();
        }
        log.lock().unwrap().push(st.root.clone());
        state::save(d, st)
    });
    let (ok, err) = (Arc::default(), Arc::default());
    let t1 = s.submit(state("s1"), vec![counter(&ok, &err)]);
    is_started.recv().unwrap();
    let t2 = s.submit(state("s2"), vec![counter(&ok, &err)]);
    let t3 = s.submit(state("s3"), vec![counter(&ok, &err), counter(&ok, &err)]);
    let t4 = s.submit(state("s4"), vec![]);
    assert_eq!((t1, t2, t3, t4), (1, 2, 3, 4));
    go.send(()).unwrap();
    // s2 and s3 are never written themselves, but s4 holds them.
    s.wait(t2).unwrap();
    s.flush().unwrap();
    assert_eq!(*written.lock().unwrap(), ["s1", "s4"]);
    assert_eq!(s.saves(), 2);
    drop(s);
    assert_eq!(ok.load(Ordering::SeqCst), 4, "every reply ran once");
    assert_eq!(err.load(Ordering::SeqCst), 0);
    assert_eq!(state::load(dir.path()).unwrap().unwrap().root, "s4");
}

#[test]
fn a_failed_write_is_reported_with_its_path_until_one_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    let fail = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let (f, p) = (fail.clone(), path.clone());
    let mut s = Saver::with_writer(dir.path().to_path_buf(), move |d, st| {
        if f.load(Ordering::SeqCst) {
            Err(StateError::Io {
                op: "fsync",
                path: p.clone(),
                source: std::io::Error::other("disk gone"),
            })
        } else {
            state::save(d, st)
        }
    });
    let (ok, err) = (Arc::default(), Arc::default());
    let t = s.submit(state("a"), vec![counter(&ok, &err)]);
    let e = s.wait(t).expect_err("the write failed");
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    assert!(matches!(&e, SaveError::Write(w) if matches!(**w, StateError::Io { op: "fsync", .. })));
    assert!(s.failed().is_some());
    assert_eq!(s.saves(), 0);
    fail.store(false, Ordering::SeqCst);
    let t = s.submit(state("b"), vec![counter(&ok, &err)]);
    s.wait(t).unwrap();
    assert!(s.failed().is_none(), "a success clears the error");
    drop(s);
    assert_eq!(
        (ok.load(Ordering::SeqCst), err.load(Ordering::SeqCst)),
        (1, 1)
    );
    assert_eq!(state::load(dir.path()).unwrap().unwrap().root, "b");
}

#[test]
fn a_ticket_waits_for_its_own_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Saver::new(dir.path().to_path_buf());
    assert!(
        s.flush().is_ok(),
        "nothing handed over: nothing to wait for"
    );
    for i in 0..20 {
        let t = s.submit(state(&format!("r{i}")), vec![]);
        s.wait(t).unwrap();
        // Once the ticket is acknowledged its state (or a newer) is on disk.
        let on_disk = state::load(dir.path()).unwrap().unwrap().root;
        assert_eq!(on_disk, format!("r{i}"));
    }
}
