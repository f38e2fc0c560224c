//! Parser tests on hand-built proc connector datagrams.

use proptest::prelude::*;

use super::*;

/// Appends one netlink message (header + payload, padded to 4 unless
/// `pad` is false).
fn nlmsg(buf: &mut Vec<u8>, kind: u16, payload: &[u8], pad: bool) {
    let len = NLMSG_HDRLEN + payload.len();
    buf.extend_from_slice(&u32::try_from(len).unwrap().to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(&0u16.to_ne_bytes());
    buf.extend_from_slice(&0u32.to_ne_bytes());
    buf.extend_from_slice(&0u32.to_ne_bytes());
    buf.extend_from_slice(payload);
    while pad && buf.len() & 3 != 0 {
        buf.push(0);
    }
}

/// A `cn_msg` carrying `data`, with `len` saying `data.len()`.
fn cn(idx: u32, seq: u32, ack: u32, data: &[u8]) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&idx.to_ne_bytes());
    p.extend_from_slice(&1u32.to_ne_bytes());
    p.extend_from_slice(&seq.to_ne_bytes());
    p.extend_from_slice(&ack.to_ne_bytes());
    p.extend_from_slice(&u16::try_from(data.len()).unwrap().to_ne_bytes());
    p.extend_from_slice(&0u16.to_ne_bytes());
    p.extend_from_slice(data);
    p
}

/// A 40-byte `proc_event` (the 6.x size) with `fields` as the first words
/// of its union.
fn event(kind: u32, cpu: u32, fields: &[u32]) -> Vec<u8> {
    let mut e = Vec::new();
    e.extend_from_slice(&kind.to_ne_bytes());
    e.extend_from_slice(&cpu.to_ne_bytes());
    e.extend_from_slice(&123_456_789u64.to_ne_bytes());
    for f in fields {
        e.extend_from_slice(&f.to_ne_bytes());
    }
    e.resize(40, 0);
    e
}

fn comm_event(pid: u32, tgid: u32, name: &[u8]) -> Vec<u8> {
    let mut e = event(what::COMM, 0, &[pid, tgid]);
    e[24..24 + name.len()].copy_from_slice(name);
    e
}

/// One datagram holding one proc message.
fn datagram(seq: u32, ev: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    nlmsg(&mut b, NLMSG_DONE, &cn(CN_IDX_PROC, seq, 0, ev), true);
    b
}

fn parse(buf: &[u8]) -> (Result<Datagram, WireError>, Vec<Message>) {
    let mut out = Vec::new();
    let r = parse_datagram(buf, &mut out);
    (r, out)
}

fn only_event(buf: &[u8]) -> RawEvent {
    let (r, out) = parse(buf);
    assert_eq!(r.unwrap().messages, 1);
    assert_eq!(out.len(), 1);
    out.into_iter().next().unwrap().event
}

#[test]
fn every_event_type_parses() {
    let fork = event(what::FORK, 1, &[100, 100, 201, 201]);
    assert_eq!(
        only_event(&datagram(7, &fork)),
        RawEvent::Fork {
            parent_pid: 100,
            parent_tgid: 100,
            child_pid: 201,
            child_tgid: 201
        }
    );
    let exec = event(what::EXEC, 0, &[201, 201]);
    assert_eq!(
        only_event(&datagram(8, &exec)),
        RawEvent::Exec {
            pid: 201,
            tgid: 201
        }
    );
    let uid = event(what::UID, 0, &[201, 201, 1000, 0]);
    assert_eq!(
        only_event(&datagram(9, &uid)),
        RawEvent::Id {
            pid: 201,
            tgid: 201,
            change: IdChange::Uid {
                real: 1000,
                effective: 0
            }
        }
    );
    let gid = event(what::GID, 0, &[201, 201, 5, 6]);
    assert_eq!(
        only_event(&datagram(10, &gid)),
        RawEvent::Id {
            pid: 201,
            tgid: 201,
            change: IdChange::Gid {
                real: 5,
                effective: 6
            }
        }
    );
    let mut name = [0u8; 16];
    name[..5].copy_from_slice(b"nginx");
    assert_eq!(
        only_event(&datagram(11, &comm_event(201, 201, b"nginx"))),
        RawEvent::Comm {
            pid: 201,
            tgid: 201,
            comm: name
        }
    );
    let exit = event(what::EXIT, 0, &[201, 201, 256, 17, 100, 100]);
    assert_eq!(
        only_event(&datagram(12, &exit)),
        RawEvent::Exit {
            pid: 201,
            tgid: 201,
            code: 256
        }
    );
    let ack = event(what::NONE, NO_CPU, &[1]);
    assert_eq!(only_event(&datagram(0, &ack)), RawEvent::Ack { err: 1 });
    for w in [what::SID, what::PTRACE, what::COREDUMP, 0x0000_0800] {
        assert_eq!(
            only_event(&datagram(1, &event(w, 0, &[1, 1]))),
            RawEvent::Other { what: w }
        );
    }
}

#[test]
fn sequence_ack_and_cpu_are_kept() {
    let mut b = Vec::new();
    let ev = event(what::NONE, 3, &[0]);
    nlmsg(&mut b, NLMSG_DONE, &cn(CN_IDX_PROC, 41, 77, &ev), true);
    let (_, out) = parse(&b);
    assert_eq!(
        out,
        vec![Message {
            seq: 41,
            ack: 77,
            cpu: 3,
            event: RawEvent::Ack { err: 0 }
        }]
    );
}

#[test]
fn several_messages_in_one_datagram_and_an_unpadded_last_one() {
    let mut b = Vec::new();
    nlmsg(
        &mut b,
        NLMSG_DONE,
        &cn(CN_IDX_PROC, 1, 0, &event(what::EXEC, 0, &[5, 5])),
        true,
    );
    nlmsg(&mut b, NLMSG_NOOP, &[], true);
    // Another connector's message (index 4, e.g. uvesafb) is skipped.
    nlmsg(&mut b, NLMSG_DONE, &cn(4, 9, 0, &[1, 2, 3]), true);
    nlmsg(&mut b, NLMSG_OVERRUN, &[], true);
    // A 37-byte payload: the last message ends off the 4-byte grid.
    let mut short_exit = event(what::EXIT, 1, &[6, 6, 0, 17]);
    short_exit.truncate(32);
    let mut last = cn(CN_IDX_PROC, 2, 0, &short_exit);
    last.push(0xee);
    nlmsg(&mut b, NLMSG_DONE, &last, false);
    assert_ne!(b.len() % 4, 0);
    let (r, out) = parse(&b);
    assert_eq!(
        r.unwrap(),
        Datagram {
            messages: 2,
            overrun: true,
            skipped: 2
        }
    );
    let events: Vec<_> = out.into_iter().map(|m| m.event).collect();
    assert_eq!(
        events,
        vec![
            RawEvent::Exec { pid: 5, tgid: 5 },
            // The pre-5.x 16-byte exit_proc_event still parses.
            RawEvent::Exit {
                pid: 6,
                tgid: 6,
                code: 0
            }
        ]
    );
}

#[test]
fn truncated_headers_and_lengths_are_errors() {
    let good = datagram(1, &event(what::EXEC, 0, &[5, 5]));
    // A header cut short.
    let (r, out) = parse(&good[..10]);
    assert!(matches!(
        r,
        Err(WireError::Truncated {
            what: "nlmsghdr",
            available: 10,
            ..
        })
    ));
    assert!(out.is_empty());
    // nlmsg_len larger than the datagram, and smaller than a header.
    for len in [u32::try_from(good.len()).unwrap() + 4, 8] {
        let mut b = good.clone();
        b[0..4].copy_from_slice(&len.to_ne_bytes());
        let (r, _) = parse(&b);
        let Err(WireError::Truncated { what, len: l, .. }) = r else {
            panic!("{r:?}")
        };
        assert_eq!((what, l), ("netlink message", len as usize));
    }
    // A netlink message too short for its cn_msg.
    let mut b = Vec::new();
    nlmsg(&mut b, NLMSG_DONE, &[0u8; 12], true);
    let (r, _) = parse(&b);
    assert!(matches!(
        r,
        Err(WireError::Truncated {
            what: "cn_msg",
            offset: 16,
            len: 20,
            available: 12
        })
    ));
    // cn_msg.len claiming more than the message holds.
    let mut payload = cn(CN_IDX_PROC, 1, 0, &event(what::EXEC, 0, &[5, 5]));
    payload[16..18].copy_from_slice(&41u16.to_ne_bytes());
    let mut b = Vec::new();
    nlmsg(&mut b, NLMSG_DONE, &payload, true);
    let (r, _) = parse(&b);
    assert!(matches!(
        r,
        Err(WireError::Truncated {
            what: "cn_msg data",
            offset: 36,
            len: 41,
            available: 40
        })
    ));
}

#[test]
fn an_event_shorter_than_its_type_needs_is_an_error() {
    let cases = [
        (what::FORK, 32, "fork_proc_event"),
        (what::EXEC, 24, "exec_proc_event"),
        (what::UID, 32, "id_proc_event"),
        (what::GID, 32, "id_proc_event"),
        (what::COMM, 40, "comm_proc_event"),
        (what::EXIT, 32, "exit_proc_event"),
        (what::NONE, 20, "proc_event ack"),
    ];
    for (kind, need, name) in cases {
        let mut ev = event(kind, 0, &[1, 1, 1, 1]);
        // Exactly long enough parses...
        ev.truncate(need);
        assert!(parse(&datagram(1, &ev)).0.is_ok(), "{name}");
        // ...one byte less does not.
        ev.truncate(need - 1);
        let (r, out) = parse(&datagram(1, &ev));
        assert_eq!(
            r,
            Err(WireError::Truncated {
                what: name,
                offset: 36,
                len: need,
                available: need - 1
            })
        );
        assert!(out.is_empty());
    }
    // Not even the proc_event header.
    let (r, _) = parse(&datagram(1, &[0u8; 15]));
    assert!(matches!(
        r,
        Err(WireError::Truncated {
            what: "proc_event",
            ..
        })
    ));
}

#[test]
fn messages_before_an_error_are_kept_and_unknown_types_refused() {
    let mut b = datagram(1, &event(what::EXEC, 0, &[5, 5]));
    nlmsg(&mut b, 0x10, &[0u8; 4], true);
    let (r, out) = parse(&b);
    assert_eq!(
        r,
        Err(WireError::UnexpectedType {
            kind: 0x10,
            offset: 76
        })
    );
    assert_eq!(out.len(), 1);
    let e = r.unwrap_err().to_string();
    assert!(e.contains("type 16 at byte 76"), "{e}");
}

#[test]
fn the_error_message_says_what_did_not_fit() {
    let e = WireError::Truncated {
        what: "cn_msg",
        offset: 16,
        len: 20,
        available: 12,
    };
    assert_eq!(
        e.to_string(),
        "proc connector: cn_msg at byte 16: length 20 does not fit (12 bytes available)"
    );
}

#[test]
fn the_empty_datagram_holds_nothing() {
    assert_eq!(parse(&[]), (Ok(Datagram::default()), vec![]));
}

#[test]
fn subscription_request_layout() {
    let b = mcast_request(PROC_CN_MCAST_LISTEN, 9, 1234, 555);
    assert_eq!(b.len(), 40);
    let u32_at = |at: usize| u32::from_ne_bytes(b[at..at + 4].try_into().unwrap());
    let u16_at = |at: usize| u16::from_ne_bytes(b[at..at + 2].try_into().unwrap());
    assert_eq!(u32_at(0), 40);
    assert_eq!(u16_at(4), NLMSG_DONE);
    assert_eq!((u32_at(8), u32_at(12)), (9, 555));
    assert_eq!((u32_at(16), u32_at(20)), (CN_IDX_PROC, CN_VAL_PROC));
    assert_eq!((u32_at(24), u32_at(28)), (9, 1234));
    assert_eq!(u16_at(32), 4);
    assert_eq!(u32_at(36), PROC_CN_MCAST_LISTEN);
    let ignore = mcast_request(PROC_CN_MCAST_IGNORE, 9, 1234, 555);
    assert_eq!(u32::from_ne_bytes(ignore[36..40].try_into().unwrap()), 2);
}

#[test]
fn classify_keeps_process_events_and_drops_thread_events() {
    // fork(): child is its own process; the parent is reported by process,
    // even when a non-main thread (101) forked.
    assert_eq!(
        classify(&RawEvent::Fork {
            parent_pid: 101,
            parent_tgid: 100,
            child_pid: 300,
            child_tgid: 300
        }),
        Kind::Process(ProcEvent::Fork {
            parent: 100,
            child: 300
        })
    );
    // pthread_create(): the child is a thread of 100 (the kernel reports
    // the process's parent, 1, as the parent).
    assert_eq!(
        classify(&RawEvent::Fork {
            parent_pid: 1,
            parent_tgid: 1,
            child_pid: 301,
            child_tgid: 100
        }),
        Kind::Thread
    );
    assert_eq!(
        classify(&RawEvent::Exit {
            pid: 301,
            tgid: 100,
            code: 0
        }),
        Kind::Thread
    );
    assert_eq!(
        classify(&RawEvent::Exit {
            pid: 100,
            tgid: 100,
            code: 9
        }),
        Kind::Process(ProcEvent::Exit { pid: 100 })
    );
    // An exec is reported for the process whichever thread ran it.
    assert_eq!(
        classify(&RawEvent::Exec {
            pid: 301,
            tgid: 100
        }),
        Kind::Process(ProcEvent::Exec { pid: 100 })
    );
    let mut name = [0u8; 16];
    name[..6].copy_from_slice(b"worker");
    assert_eq!(
        classify(&RawEvent::Comm {
            pid: 301,
            tgid: 100,
            comm: name
        }),
        Kind::Thread
    );
    assert_eq!(
        classify(&RawEvent::Comm {
            pid: 100,
            tgid: 100,
            comm: name
        }),
        Kind::Process(ProcEvent::Comm {
            pid: 100,
            comm: "worker".into()
        })
    );
    let change = IdChange::Uid {
        real: 5,
        effective: 5,
    };
    assert_eq!(
        classify(&RawEvent::Id {
            pid: 301,
            tgid: 100,
            change
        }),
        Kind::Thread
    );
    assert_eq!(
        classify(&RawEvent::Id {
            pid: 100,
            tgid: 100,
            change
        }),
        Kind::Process(ProcEvent::Id { pid: 100, change })
    );
    assert_eq!(classify(&RawEvent::Ack { err: 1 }), Kind::Ack { err: 1 });
    assert_eq!(classify(&RawEvent::Other { what: 0x80 }), Kind::Other);
}

#[test]
fn comm_is_cut_at_the_first_nul_and_decoded_lossily() {
    let full = *b"0123456789abcdef";
    let Kind::Process(ProcEvent::Comm { comm, .. }) = classify(&RawEvent::Comm {
        pid: 1,
        tgid: 1,
        comm: full,
    }) else {
        panic!()
    };
    assert_eq!(comm, "0123456789abcdef");
    let mut odd = [0u8; 16];
    odd[..3].copy_from_slice(&[b'a', 0xff, b'b']);
    odd[4] = b'z';
    let Kind::Process(ProcEvent::Comm { comm, .. }) = classify(&RawEvent::Comm {
        pid: 1,
        tgid: 1,
        comm: odd,
    }) else {
        panic!()
    };
    assert_eq!(comm, "a\u{fffd}b");
}

#[test]
fn sequence_numbers_are_checked_per_cpu() {
    let mut t = SeqTracker::default();
    assert_eq!(t.observe(0, 10), SeqCheck::First);
    assert_eq!(t.observe(1, 500), SeqCheck::First);
    assert_eq!(t.observe(0, 11), SeqCheck::InOrder);
    assert_eq!(t.observe(1, 501), SeqCheck::InOrder);
    // Three messages of CPU 0 (12, 13, 14) never came.
    assert_eq!(t.observe(0, 15), SeqCheck::Gap(3));
    assert_eq!(t.observe(0, 16), SeqCheck::InOrder);
    // A late message is not a loss and does not move the expectation.
    assert_eq!(t.observe(0, 14), SeqCheck::Behind);
    assert_eq!(t.observe(0, 17), SeqCheck::InOrder);
    assert_eq!(t.observe(NO_CPU, 3), SeqCheck::Unnumbered);
    // The counter wraps.
    assert_eq!(t.observe(2, u32::MAX), SeqCheck::First);
    assert_eq!(t.observe(2, 0), SeqCheck::InOrder);
    assert_eq!(t.observe(2, 2), SeqCheck::Gap(1));
}

/// A valid datagram of several random events, for mutation.
fn valid_datagram(kinds: &[u32]) -> Vec<u8> {
    let mut b = Vec::new();
    for (i, k) in kinds.iter().enumerate() {
        let i = u32::try_from(i).unwrap();
        let ev = event(*k, i, &[7, 7, 8, 8, 9, 9]);
        nlmsg(&mut b, NLMSG_DONE, &cn(CN_IDX_PROC, i, 0, &ev), true);
    }
    b
}

fn any_kind() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(what::NONE),
        Just(what::FORK),
        Just(what::EXEC),
        Just(what::UID),
        Just(what::GID),
        Just(what::COMM),
        Just(what::EXIT),
        any::<u32>(),
    ]
}

/// Any event the parser can make: every known type with arbitrary fields,
/// and `Other` of an unknown type.
fn any_raw_event() -> impl Strategy<Value = RawEvent> {
    let known = [
        what::NONE,
        what::FORK,
        what::EXEC,
        what::UID,
        what::GID,
        what::COMM,
        what::EXIT,
    ];
    prop_oneof![
        any::<u32>().prop_map(|err| RawEvent::Ack { err }),
        any::<[u32; 4]>().prop_map(|w| RawEvent::Fork {
            parent_pid: w[0],
            parent_tgid: w[1],
            child_pid: w[2],
            child_tgid: w[3],
        }),
        any::<(u32, u32)>().prop_map(|(pid, tgid)| RawEvent::Exec { pid, tgid }),
        (any::<[u32; 4]>(), any::<bool>()).prop_map(|(w, uid)| RawEvent::Id {
            pid: w[0],
            tgid: w[1],
            change: if uid {
                IdChange::Uid {
                    real: w[2],
                    effective: w[3],
                }
            } else {
                IdChange::Gid {
                    real: w[2],
                    effective: w[3],
                }
            },
        }),
        (any::<(u32, u32)>(), any::<[u8; 16]>()).prop_map(|((pid, tgid), comm)| RawEvent::Comm {
            pid,
            tgid,
            comm
        }),
        any::<[u32; 3]>().prop_map(|w| RawEvent::Exit {
            pid: w[0],
            tgid: w[1],
            code: w[2],
        }),
        any::<u32>()
            .prop_filter("an unknown type", move |w| !known.contains(w))
            .prop_map(|what| RawEvent::Other { what }),
    ]
}

fn any_message() -> impl Strategy<Value = Message> {
    (any::<u32>(), any::<u32>(), any::<u32>(), any_raw_event()).prop_map(
        |(seq, ack, cpu, event)| Message {
            seq,
            ack,
            cpu,
            event,
        },
    )
}

#[test]
fn encoded_messages_are_what_the_kernel_sends() {
    let m = Message {
        seq: 7,
        ack: 0,
        cpu: 1,
        event: RawEvent::Fork {
            parent_pid: 100,
            parent_tgid: 100,
            child_pid: 201,
            child_tgid: 201,
        },
    };
    let mut b = Vec::new();
    encode_message(&m, &mut b);
    let mut want = datagram(7, &event(what::FORK, 1, &[100, 100, 201, 201]));
    // The hand-built event has a timestamp; the encoder writes none.
    want[NLMSG_HDRLEN + CN_MSG_LEN + 8..NLMSG_HDRLEN + CN_MSG_LEN + 16].fill(0);
    // And its netlink header has no sequence number.
    want[8..12].copy_from_slice(&7u32.to_ne_bytes());
    assert_eq!(b, want);
}

proptest! {
    /// Any bytes: an answer or an error, never a panic; messages reported
    /// match those appended.
    #[test]
    fn arbitrary_bytes_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut out = Vec::new();
        if let Ok(d) = parse_datagram(&buf, &mut out) {
            prop_assert_eq!(d.messages, out.len());
        }
        for m in &out {
            let _ = classify(&m.event);
        }
    }

    /// Valid datagrams with some bytes overwritten (lengths, types, ids):
    /// reaches the deeper paths that random bytes rarely get to.
    #[test]
    fn mutated_datagrams_never_panic(
        kinds in proptest::collection::vec(any_kind(), 1..4),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
        cut in any::<usize>(),
    ) {
        let mut b = valid_datagram(&kinds);
        for (at, v) in edits {
            let i = at % b.len();
            b[i] = v;
        }
        let keep = cut % (b.len() + 1);
        let mut out = Vec::new();
        let _ = parse_datagram(&b[..keep], &mut out);
        for m in &out {
            let _ = classify(&m.event);
        }
    }

    /// Unmodified valid datagrams parse whole.
    #[test]
    fn valid_datagrams_parse_whole(kinds in proptest::collection::vec(any_kind(), 1..6)) {
        let b = valid_datagram(&kinds);
        let mut out = Vec::new();
        let d = parse_datagram(&b, &mut out).unwrap();
        prop_assert_eq!(d.messages, kinds.len());
        for (i, m) in out.iter().enumerate() {
            let i = u32::try_from(i).unwrap();
            prop_assert_eq!(m.seq, i);
            prop_assert_eq!(m.cpu, i);
        }
    }

    /// Sequence tracking never panics and reports a gap exactly when a
    /// number was skipped ahead.
    #[test]
    fn seq_tracker_gaps(start in any::<u32>(), steps in proptest::collection::vec(0u32..4, 1..50)) {
        let mut t = SeqTracker::default();
        prop_assert_eq!(t.observe(0, start), SeqCheck::First);
        let mut seq = start;
        for s in steps {
            seq = seq.wrapping_add(s + 1);
            let want = if s == 0 { SeqCheck::InOrder } else { SeqCheck::Gap(s) };
            prop_assert_eq!(t.observe(0, seq), want);
        }
    }

    /// Messages encoded one after another in a datagram parse back to the
    /// same messages, whole, and any cut of it to a prefix of them.
    #[test]
    fn encoded_messages_parse_back(
        msgs in proptest::collection::vec(any_message(), 0..6),
        cut in any::<usize>(),
    ) {
        let mut b = Vec::new();
        for m in &msgs {
            encode_message(m, &mut b);
        }
        let mut out = Vec::new();
        let d = parse_datagram(&b, &mut out).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(d.messages, msgs.len());
        prop_assert_eq!(&out, &msgs);
        let keep = cut % (b.len() + 1);
        let mut part = Vec::new();
        let r = parse_datagram(&b[..keep], &mut part);
        prop_assert!(part.len() <= msgs.len());
        prop_assert_eq!(&part[..], &msgs[..part.len()]);
        if keep % (b.len() / msgs.len().max(1)).max(1) == 0 {
            prop_assert!(r.is_ok(), "a cut between messages parses: {:?}", r);
        }
    }
}
