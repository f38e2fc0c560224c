use std::path::PathBuf;

use atoll_core::process::{ProcessError, ProcessTable};

use crate::fake::{FakeProc, FakeProcess};
use crate::PF_KTHREAD;

fn fake() -> FakeProc {
    FakeProc::new().expect("temp dir")
}

#[test]
fn lists_numeric_dirs_only_sorted() {
    let f = fake();
    for pid in [300, 12, 1] {
        f.add(&FakeProcess::new(pid, "p")).unwrap();
    }
    std::fs::create_dir(f.root().join("sys")).unwrap();
    std::fs::write(f.root().join("uptime"), "1.0 1.0\n").unwrap();
    std::os::unix::fs::symlink("12", f.root().join("self")).unwrap();
    assert_eq!(f.proc_fs().pids().unwrap(), [1, 12, 300]);
}

#[test]
fn reads_a_process_with_a_hostile_comm() {
    let f = fake();
    let p = FakeProcess::new(4321, "(a) b)")
        .ppid(77)
        .uid(1000)
        .start_ticks(98765)
        .exe(Some("/opt/app/bin/a b"))
        .cgroup("12:cpu,cpuacct:/x\n0::/user.slice/app.scope\n")
        .threads([4323, 4321, 4322]);
    f.add(&p).unwrap();
    let t = f.proc_fs();
    let info = t.info(4321).unwrap();
    assert_eq!(info.pid, 4321);
    assert_eq!(info.comm, "(a) b)");
    assert_eq!(info.ppid, 77);
    assert_eq!(info.uid, 1000);
    assert_eq!(info.start_ticks, 98765);
    assert_eq!(info.exe, Some(PathBuf::from("/opt/app/bin/a b")));
    assert!(!info.kernel_thread);
    assert_eq!(info.cgroups.unified(), Some("/user.slice/app.scope"));
    assert_eq!(info.cgroups.controller("cpu"), Some("/x"));
    assert_eq!(t.read_start_ticks(4321).unwrap(), 98765);
    assert_eq!(t.threads(4321).unwrap(), [4321, 4322, 4323]);
}

#[test]
fn kernel_threads_are_flagged() {
    let f = fake();
    f.add(&FakeProcess::kernel_thread(40, "kworker/0:1-events"))
        .unwrap();
    // kthreadd itself: no PF_KTHREAD needed, pid 2 is enough.
    f.add(&FakeProcess::new(2, "kthreadd").ppid(0).flags(0).exe(None))
        .unwrap();
    // A child of kthreadd whose flags were lost still counts.
    f.add(&FakeProcess::new(41, "odd").ppid(2).flags(0))
        .unwrap();
    f.add(&FakeProcess::new(42, "user").flags(0x40)).unwrap();
    let t = f.proc_fs();
    let k = t.info(40).unwrap();
    assert!(k.kernel_thread);
    assert_eq!(k.exe, None);
    assert_eq!(t.stat(40).unwrap().flags & PF_KTHREAD, PF_KTHREAD);
    assert!(t.info(2).unwrap().kernel_thread);
    assert!(t.info(41).unwrap().kernel_thread);
    assert!(!t.info(42).unwrap().kernel_thread);
}

#[test]
fn missing_exe_of_a_live_process_is_none() {
    let f = fake();
    f.add(&FakeProcess::new(10, "p").exe(None)).unwrap();
    let info = f.proc_fs().info(10).unwrap();
    assert_eq!(info.exe, None);
    assert_eq!(info.comm, "p");
}

#[test]
fn vanished_pids_are_gone_at_every_step() {
    let f = fake();
    let t = f.proc_fs();
    assert!(matches!(t.info(55), Err(ProcessError::Gone(55))));
    assert!(matches!(t.threads(55), Err(ProcessError::Gone(55))));
    assert!(matches!(
        t.read_start_ticks(55),
        Err(ProcessError::Gone(55))
    ));
    for file in ["stat", "status", "cgroup"] {
        f.add(&FakeProcess::new(56, "p")).unwrap();
        t.info(56).unwrap();
        f.remove_file(56, file).unwrap();
        assert!(
            matches!(t.info(56), Err(ProcessError::Gone(56))),
            "without {file}: {:?}",
            t.info(56)
        );
    }
    f.add(&FakeProcess::new(57, "p")).unwrap();
    f.remove(57).unwrap();
    assert!(matches!(t.info(57), Err(ProcessError::Gone(57))));
    assert!(matches!(t.exe(57), Err(ProcessError::Gone(57))));
    assert!(!t.pids().unwrap().contains(&57));
}

#[test]
fn malformed_files_report_path_and_value() {
    let f = fake();
    f.add(&FakeProcess::new(60, "p")).unwrap();
    f.write_file(60, "stat", "60 (p) S notanumber 1 1\n")
        .unwrap();
    let e = f.proc_fs().info(60).unwrap_err();
    match &e {
        ProcessError::Parse {
            path,
            value,
            reason,
        } => {
            assert_eq!(path, &f.root().join("60/stat"));
            assert_eq!(value, "60 (p) S notanumber 1 1");
            assert!(reason.contains("ppid"), "{reason}");
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
    assert!(e.to_string().contains("notanumber"), "{e}");

    f.add(&FakeProcess::new(61, "p").cgroup("garbage\n"))
        .unwrap();
    let e = f.proc_fs().info(61).unwrap_err();
    assert!(
        matches!(&e, ProcessError::Parse { path, value, .. }
            if path.ends_with("61/cgroup") && value == "garbage"),
        "{e:?}"
    );

    f.add(&FakeProcess::new(62, "p")).unwrap();
    f.write_file(62, "status", "Name:\tp\nUid:\t-\n").unwrap();
    let e = f.proc_fs().info(62).unwrap_err();
    assert!(
        matches!(&e, ProcessError::Parse { path, .. } if path.ends_with("62/status")),
        "{e:?}"
    );
}

#[test]
fn an_unreadable_root_is_an_io_error_naming_it() {
    let t = crate::ProcFs::new("/nonexistent/atoll/proc");
    let e = t.pids().unwrap_err();
    assert!(
        matches!(&e, ProcessError::Io { path, .. } if path == &PathBuf::from("/nonexistent/atoll/proc")),
        "{e:?}"
    );
}
