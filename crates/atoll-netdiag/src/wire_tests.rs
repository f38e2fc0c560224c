//! Parser tests on hand-built netlink buffers.

use super::*;

const SEQ: u32 = 77;

/// Appends one netlink message (header + payload, padded to 4).
fn msg(buf: &mut Vec<u8>, kind: u16, seq: u32, payload: &[u8]) {
    let len = NLMSG_HDRLEN + payload.len();
    buf.extend_from_slice(&u32::try_from(len).unwrap().to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(&2u16.to_ne_bytes()); // NLM_F_MULTI
    buf.extend_from_slice(&seq.to_ne_bytes());
    buf.extend_from_slice(&4242u32.to_ne_bytes());
    buf.extend_from_slice(payload);
    while buf.len() & 3 != 0 {
        buf.push(0);
    }
}

fn rtattr(buf: &mut Vec<u8>, kind: u16, data: &[u8]) {
    let len = 4 + data.len();
    buf.extend_from_slice(&u16::try_from(len).unwrap().to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(data);
    while buf.len() & 3 != 0 {
        buf.push(0);
    }
}

/// A `tcp_info` of `len` bytes with the two counters set (when it is long
/// enough to hold them).
fn tcp_info(len: usize, acked: u64, received: u64) -> Vec<u8> {
    let mut v = vec![0u8; len];
    if len >= 136 {
        v[120..128].copy_from_slice(&acked.to_ne_bytes());
        v[128..136].copy_from_slice(&received.to_ne_bytes());
    }
    v
}

fn inet_payload(family: u8, st: u8, rq: u32, wq: u32, inode: u32, info: Option<&[u8]>) -> Vec<u8> {
    let mut p = vec![0u8; INET_DIAG_MSG_LEN];
    p[0] = family;
    p[1] = st;
    p[56..60].copy_from_slice(&rq.to_ne_bytes());
    p[60..64].copy_from_slice(&wq.to_ne_bytes());
    p[64..68].copy_from_slice(&1000u32.to_ne_bytes());
    p[68..72].copy_from_slice(&inode.to_ne_bytes());
    // Another attribute first, to show that unknown ones are skipped.
    rtattr(&mut p, 4, b"cubic\0");
    if let Some(info) = info {
        rtattr(&mut p, INET_DIAG_INFO, info);
    }
    p
}

fn unix_payload(st: u8, inode: u32, rq: Option<(u32, u32)>) -> Vec<u8> {
    let mut p = vec![0u8; UNIX_DIAG_MSG_LEN];
    p[0] = AF_UNIX;
    p[1] = 1; // SOCK_STREAM
    p[2] = st;
    p[4..8].copy_from_slice(&inode.to_ne_bytes());
    if let Some((r, w)) = rq {
        let mut d = r.to_ne_bytes().to_vec();
        d.extend_from_slice(&w.to_ne_bytes());
        rtattr(&mut p, UNIX_DIAG_RQLEN, &d);
    }
    p
}

fn done(buf: &mut Vec<u8>, seq: u32, status: i32) {
    msg(buf, NLMSG_DONE, seq, &status.to_ne_bytes());
}

fn tcp_dump() -> Vec<u8> {
    let mut b = Vec::new();
    let long = tcp_info(248, 5000, 9000);
    let old = tcp_info(104, 0, 0);
    msg(
        &mut b,
        SOCK_DIAG_BY_FAMILY,
        SEQ,
        &inet_payload(AF_INET, 1, 300, 40, 11, Some(&long)),
    );
    msg(
        &mut b,
        SOCK_DIAG_BY_FAMILY,
        SEQ,
        &inet_payload(AF_INET, 1, 0, 0, 12, Some(&old)),
    );
    msg(
        &mut b,
        SOCK_DIAG_BY_FAMILY,
        SEQ,
        &inet_payload(AF_INET, state::LISTEN, 3, 128, 13, Some(&long)),
    );
    msg(
        &mut b,
        SOCK_DIAG_BY_FAMILY,
        SEQ,
        &inet_payload(AF_INET, state::TIME_WAIT, 0, 0, 0, None),
    );
    done(&mut b, SEQ, 0);
    b
}

#[test]
fn requests_have_the_kernel_layout() {
    let mut b = Vec::new();
    Request::tcp(AF_INET6).encode(9, &mut b);
    assert_eq!(b.len(), 16 + 56);
    assert_eq!(get_u32(&b, 0), 72);
    assert_eq!(get_u16(&b, 4), SOCK_DIAG_BY_FAMILY);
    assert_eq!(get_u16(&b, 6), NLM_F_REQUEST | NLM_F_DUMP);
    assert_eq!(get_u32(&b, 8), 9);
    assert_eq!((b[16], b[17], b[18]), (AF_INET6, IPPROTO_TCP, 2));
    assert_eq!(get_u32(&b, 20), TCP_STATES);
    assert_eq!(TCP_STATES & (1 << state::LISTEN), 0);
    assert_eq!(TCP_STATES & (1 << state::TIME_WAIT), 0);
    assert_ne!(TCP_STATES & (1 << state::ESTABLISHED), 0);

    Request::unix().encode(10, &mut b);
    assert_eq!(b.len(), 16 + 24);
    assert_eq!(get_u32(&b, 0), 40);
    assert_eq!(b[16], AF_UNIX);
    assert_eq!(get_u32(&b, 20), DGRAM_STATES);
    assert_eq!(get_u32(&b, 28), UDIAG_SHOW_RQLEN);

    Request::tcp_any().encode(12, &mut b);
    assert_eq!(b.len(), 16 + 60);
    assert_eq!(get_u16(&b, 4), TCPDIAG_GETSOCK);
    assert_eq!(b[16 + 3], 2, "tcp_info asked for");
    assert_eq!(get_u32(&b, 16 + 52), TCP_STATES);
    assert_eq!(Request::tcp_any().name(), "tcp");

    Request::udp(AF_INET).encode(11, &mut b);
    assert_eq!((b[16], b[17], b[18]), (AF_INET, IPPROTO_UDP, 0));
    assert_eq!(Request::udp(AF_INET6).name(), "udp6");
    assert_eq!(Request::udp(AF_INET6).proto(), SockProto::Udp);
}

#[test]
fn tcp_answers_give_queues_and_application_counters() {
    let mut out = Vec::new();
    let p = parse_answers(&Request::tcp(AF_INET), SEQ, &tcp_dump(), &mut out).unwrap();
    assert_eq!(p, Progress::Done);
    assert_eq!(
        out.len(),
        2,
        "listening and time-wait sockets are left out: {out:?}"
    );
    assert_eq!(
        out[0],
        SocketFigures {
            inode: 11,
            proto: SockProto::Tcp,
            rqueue: 300,
            wqueue: 40,
            bytes_read: Some(9000 - 300),
            bytes_written: Some(5000 + 40),
        }
    );
    // A tcp_info from before Linux 4.1 has no counters: no error, no counts.
    assert_eq!(out[1].inode, 12);
    assert_eq!((out[1].bytes_read, out[1].bytes_written), (None, None));
}

#[test]
fn a_dump_spans_buffers_until_done() {
    let whole = tcp_dump();
    // Split after the second message (each is 16 + 72 + attrs, aligned).
    let first = get_u32(&whole, 0) as usize;
    let second = get_u32(&whole, first) as usize;
    let cut = align4(first) + align4(second);
    let mut out = Vec::new();
    let req = Request::tcp(AF_INET);
    assert_eq!(
        parse_answers(&req, SEQ, &whole[..cut], &mut out),
        Ok(Progress::More)
    );
    assert_eq!(out.len(), 2);
    assert_eq!(
        parse_answers(&req, SEQ, &whole[cut..], &mut out),
        Ok(Progress::Done)
    );
    assert_eq!(out.len(), 2);
}

#[test]
fn the_v1_tcp_request_takes_both_families_in_its_own_message_type() {
    let info = tcp_info(232, 10, 20);
    let mut b = Vec::new();
    msg(
        &mut b,
        TCPDIAG_GETSOCK,
        SEQ,
        &inet_payload(AF_INET, 1, 1, 0, 31, Some(&info)),
    );
    msg(
        &mut b,
        TCPDIAG_GETSOCK,
        SEQ,
        &inet_payload(AF_INET6, 1, 2, 0, 32, Some(&info)),
    );
    done(&mut b, SEQ, 0);
    let mut out = Vec::new();
    assert_eq!(
        parse_answers(&Request::tcp_any(), SEQ, &b, &mut out),
        Ok(Progress::Done)
    );
    assert_eq!(
        out.iter().map(|f| f.inode).collect::<Vec<_>>(),
        vec![31, 32]
    );
    assert_eq!(out[1].bytes_read, Some(18));
    // Answers of the v2 type, or of a family that is not IP, are refused.
    let mut b = Vec::new();
    msg(
        &mut b,
        SOCK_DIAG_BY_FAMILY,
        SEQ,
        &inet_payload(AF_INET, 1, 1, 0, 31, None),
    );
    assert!(parse_answers(&Request::tcp_any(), SEQ, &b, &mut out).is_err());
    let mut b = Vec::new();
    msg(
        &mut b,
        TCPDIAG_GETSOCK,
        SEQ,
        &inet_payload(AF_UNIX, 1, 1, 0, 31, None),
    );
    assert!(parse_answers(&Request::tcp_any(), SEQ, &b, &mut out).is_err());
}

#[test]
fn unix_answers_give_queue_lengths() {
    let mut b = Vec::new();
    msg(
        &mut b,
        SOCK_DIAG_BY_FAMILY,
        SEQ,
        &unix_payload(1, 501, Some((4096, 4352))),
    );
    msg(
        &mut b,
        SOCK_DIAG_BY_FAMILY,
        SEQ,
        &unix_payload(7, 502, None),
    );
    msg(
        &mut b,
        SOCK_DIAG_BY_FAMILY,
        SEQ,
        &unix_payload(state::LISTEN, 503, Some((2, 128))),
    );
    done(&mut b, SEQ, 0);
    let mut out = Vec::new();
    assert_eq!(
        parse_answers(&Request::unix(), SEQ, &b, &mut out),
        Ok(Progress::Done)
    );
    assert_eq!(out.len(), 2);
    assert_eq!(
        (out[0].inode, out[0].rqueue, out[0].wqueue),
        (501, 4096, 4352)
    );
    assert_eq!(out[0].proto, SockProto::Unix);
    assert_eq!((out[1].inode, out[1].rqueue, out[1].wqueue), (502, 0, 0));
}

#[test]
fn udp_answers_ignore_tcp_info() {
    let mut b = Vec::new();
    let info = tcp_info(248, 1, 2);
    msg(
        &mut b,
        SOCK_DIAG_BY_FAMILY,
        SEQ,
        &inet_payload(AF_INET6, 7, 768, 0, 90, Some(&info)),
    );
    let mut out = Vec::new();
    assert_eq!(
        parse_answers(&Request::udp(AF_INET6), SEQ, &b, &mut out),
        Ok(Progress::More)
    );
    assert_eq!(out[0].proto, SockProto::Udp);
    assert_eq!((out[0].rqueue, out[0].bytes_read), (768, None));
}

#[test]
fn stale_messages_are_skipped_and_status_is_checked() {
    let mut b = Vec::new();
    msg(
        &mut b,
        SOCK_DIAG_BY_FAMILY,
        SEQ - 1,
        &inet_payload(AF_INET, 1, 1, 1, 5, None),
    );
    done(&mut b, SEQ - 1, 0);
    msg(&mut b, NLMSG_NOOP, SEQ, &[]);
    msg(
        &mut b,
        SOCK_DIAG_BY_FAMILY,
        SEQ,
        &inet_payload(AF_INET, 1, 1, 1, 6, None),
    );
    done(&mut b, SEQ, 0);
    let mut out = Vec::new();
    assert_eq!(
        parse_answers(&Request::tcp(AF_INET), SEQ, &b, &mut out),
        Ok(Progress::Done)
    );
    assert_eq!(out.iter().map(|f| f.inode).collect::<Vec<_>>(), vec![6]);

    // A DONE without payload (older kernels) ends the dump too.
    let mut b = Vec::new();
    msg(&mut b, NLMSG_DONE, SEQ, &[]);
    assert_eq!(
        parse_answers(&Request::unix(), SEQ, &b, &mut out),
        Ok(Progress::Done)
    );

    let mut b = Vec::new();
    done(&mut b, SEQ, -4);
    assert_eq!(
        parse_answers(&Request::unix(), SEQ, &b, &mut out),
        Err(WireError::Kernel {
            request: "unix",
            errno: 4
        })
    );
}

#[test]
fn kernel_errors_and_acks() {
    let mut b = Vec::new();
    let mut e = (-2i32).to_ne_bytes().to_vec();
    e.extend_from_slice(&[0u8; 16]); // the offending request's header
    msg(&mut b, NLMSG_ERROR, SEQ, &e);
    let mut out = Vec::new();
    let err = parse_answers(&Request::udp(AF_INET), SEQ, &b, &mut out).unwrap_err();
    assert_eq!(
        err,
        WireError::Kernel {
            request: "udp4",
            errno: 2
        }
    );
    assert!(err.to_string().contains("udp4"), "{err}");

    let mut b = Vec::new();
    msg(&mut b, NLMSG_ERROR, SEQ, &0i32.to_ne_bytes());
    assert_eq!(
        parse_answers(&Request::udp(AF_INET), SEQ, &b, &mut out),
        Ok(Progress::Done)
    );

    let mut b = Vec::new();
    msg(&mut b, NLMSG_ERROR, SEQ, &[0u8; 2]);
    assert!(matches!(
        parse_answers(&Request::udp(AF_INET), SEQ, &b, &mut out),
        Err(WireError::Truncated {
            what: "nlmsgerr",
            ..
        })
    ));
}

#[test]
fn malformed_messages_are_errors() {
    let req = Request::tcp(AF_INET);
    let mut out = Vec::new();
    let mut check = |b: &[u8], what: &str| {
        let e = parse_answers(&req, SEQ, b, &mut out).unwrap_err();
        assert!(e.to_string().contains(what), "{what}: {e}");
    };

    // Fewer bytes than a header.
    check(&[1, 2, 3], "nlmsghdr");
    // A length beyond the buffer, and one shorter than the header.
    let mut b = Vec::new();
    msg(
        &mut b,
        SOCK_DIAG_BY_FAMILY,
        SEQ,
        &inet_payload(AF_INET, 1, 1, 1, 5, None),
    );
    let mut long = b.clone();
    long[0..4].copy_from_slice(&(u32::try_from(b.len()).unwrap() + 4).to_ne_bytes());
    check(&long, "netlink message");
    let mut short = b.clone();
    short[0..4].copy_from_slice(&8u32.to_ne_bytes());
    check(&short, "netlink message");
    // An inet_diag_msg cut short.
    let mut b = Vec::new();
    msg(&mut b, SOCK_DIAG_BY_FAMILY, SEQ, &[AF_INET; 40]);
    check(&b, "inet_diag_msg");
    // An attribute longer than what is left, and one shorter than its header.
    let mut p = inet_payload(AF_INET, 1, 1, 1, 5, None);
    p.extend_from_slice(&200u16.to_ne_bytes());
    p.extend_from_slice(&INET_DIAG_INFO.to_ne_bytes());
    let mut b = Vec::new();
    msg(&mut b, SOCK_DIAG_BY_FAMILY, SEQ, &p);
    check(&b, "rtattr");
    let mut p = inet_payload(AF_INET, 1, 1, 1, 5, None);
    p.extend_from_slice(&2u16.to_ne_bytes());
    p.extend_from_slice(&INET_DIAG_INFO.to_ne_bytes());
    let mut b = Vec::new();
    msg(&mut b, SOCK_DIAG_BY_FAMILY, SEQ, &p);
    check(&b, "rtattr");
    // Answers for another family, and a type that has no place here.
    let mut b = Vec::new();
    msg(
        &mut b,
        SOCK_DIAG_BY_FAMILY,
        SEQ,
        &inet_payload(AF_INET6, 1, 1, 1, 5, None),
    );
    check(&b, "family 10");
    let mut b = Vec::new();
    msg(&mut b, 16, SEQ, &[0; 8]);
    check(&b, "type 16");
    let mut b = Vec::new();
    msg(&mut b, NLMSG_OVERRUN, SEQ, &[]);
    check(&b, "type 4");

    // Unix: a short message and a short queue attribute.
    let mut b = Vec::new();
    msg(&mut b, SOCK_DIAG_BY_FAMILY, SEQ, &[AF_UNIX; 10]);
    let e = parse_answers(&Request::unix(), SEQ, &b, &mut Vec::new()).unwrap_err();
    assert!(e.to_string().contains("unix_diag_msg"), "{e}");
    let mut p = unix_payload(1, 9, None);
    rtattr(&mut p, UNIX_DIAG_RQLEN, &[1, 2, 3, 4]);
    let mut b = Vec::new();
    msg(&mut b, SOCK_DIAG_BY_FAMILY, SEQ, &p);
    let e = parse_answers(&Request::unix(), SEQ, &b, &mut Vec::new()).unwrap_err();
    assert!(e.to_string().contains("unix_diag_rqlen"), "{e}");
}

/// Every truncation and every single-byte corruption of valid dumps: the
/// parser answers (Ok or Err) and never panics.
#[test]
fn never_panics_on_cut_or_corrupted_buffers() {
    let mut unix = Vec::new();
    msg(
        &mut unix,
        SOCK_DIAG_BY_FAMILY,
        SEQ,
        &unix_payload(1, 501, Some((1, 2))),
    );
    done(&mut unix, SEQ, 0);
    let mut any = Vec::new();
    msg(
        &mut any,
        TCPDIAG_GETSOCK,
        SEQ,
        &inet_payload(AF_INET6, 1, 2, 0, 32, Some(&tcp_info(248, 1, 2))),
    );
    done(&mut any, SEQ, 0);
    let cases = [
        (Request::tcp(AF_INET), tcp_dump()),
        (Request::unix(), unix),
        (Request::tcp_any(), any),
    ];
    let mut errors = 0;
    for (req, good) in &cases {
        for cut in 0..good.len() {
            let mut out = Vec::new();
            if parse_answers(req, SEQ, &good[..cut], &mut out).is_err() {
                errors += 1;
            }
        }
        for at in 0..good.len() {
            for v in [0u8, 1, 3, 0x7f, 0xff] {
                let mut bad = good.clone();
                bad[at] = v;
                let mut out = Vec::new();
                let _ = parse_answers(req, SEQ, &bad, &mut out);
            }
        }
    }
    assert!(errors > 0, "cut buffers must be refused somewhere");
}

#[test]
fn tcp_info_by_length() {
    assert_eq!(tcp_counters(&tcp_info(135, 1, 2)), None);
    assert_eq!(tcp_counters(&tcp_info(136, 1, 2)), Some((1, 2)));
    assert_eq!(tcp_counters(&tcp_info(300, 7, 8)), Some((7, 8)));
    assert_eq!(tcp_counters(&[]), None);
}

#[test]
fn the_end_of_an_abandoned_dump_is_found_from_headers() {
    let mut b = Vec::new();
    msg(&mut b, SOCK_DIAG_BY_FAMILY, SEQ, &[0xff; 10]);
    assert!(!ends_dump(&b, SEQ));
    done(&mut b, SEQ - 1, 0);
    assert!(!ends_dump(&b, SEQ), "another dump's end");
    done(&mut b, SEQ, 0);
    assert!(ends_dump(&b, SEQ));
    let mut e = Vec::new();
    msg(&mut e, NLMSG_ERROR, SEQ, &(-16i32).to_ne_bytes());
    assert!(ends_dump(&e, SEQ));
    assert!(!ends_dump(&e[..10], SEQ));
    for cut in 0..b.len() {
        let _ = ends_dump(&b[..cut], SEQ);
    }
}

/// Property tests: arbitrary and corrupted buffers, and answers built from
/// arbitrary fields (the fuzz target `netdiag_wire` runs the same checks
/// coverage-guided).
mod props {
    use proptest::prelude::*;

    use super::*;

    fn requests() -> impl Strategy<Value = Request> {
        prop_oneof![
            Just(Request::tcp_any()),
            Just(Request::tcp(AF_INET)),
            Just(Request::tcp(AF_INET6)),
            Just(Request::udp(AF_INET)),
            Just(Request::udp(AF_INET6)),
            Just(Request::unix()),
        ]
    }

    /// What holds for any buffer, whatever `parse_answers` made of it.
    fn check_any(req: &Request, seq: u32, buf: &[u8]) -> Result<(), TestCaseError> {
        let mut out = Vec::new();
        let result = parse_answers(req, seq, buf, &mut out);
        prop_assert!(out.iter().all(|s| s.inode != 0 && s.proto == req.proto()));
        if matches!(result, Ok(Progress::Done) | Err(WireError::Kernel { .. })) {
            prop_assert!(
                ends_dump(buf, seq),
                "parse_answers ended the dump, ends_dump did not"
            );
        }
        prop_assert_eq!(
            tcp_counters(buf).is_some(),
            buf.len() >= TCPI_BYTES_RECEIVED + 8
        );
        Ok(())
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(
            req in requests(),
            seq in prop_oneof![Just(SEQ), any::<u32>()],
            buf in proptest::collection::vec(any::<u8>(), 0..600),
        ) {
            check_any(&req, seq, &buf)?;
        }

        #[test]
        fn corrupted_dumps_never_panic(
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut b = tcp_dump();
            let i = at.index(b.len());
            b[i] = byte;
            let end = cut.index(b.len() + 1);
            check_any(&Request::tcp(AF_INET), SEQ, &b[..end])?;
        }

        #[test]
        fn inet_answers_carry_their_fields(
            family in prop_oneof![Just(AF_INET), Just(AF_INET6)],
            tcp in any::<bool>(),
            st in 1u8..12,
            rq in any::<u32>(),
            wq in any::<u32>(),
            inode in 1u32..,
            info_len in 0usize..300,
            acked in any::<u64>(),
            received in any::<u64>(),
        ) {
            let req = if tcp { Request::tcp(family) } else { Request::udp(family) };
            let info = tcp_info(info_len, acked, received);
            let mut b = Vec::new();
            msg(&mut b, SOCK_DIAG_BY_FAMILY, SEQ,
                &inet_payload(family, st, rq, wq, inode, Some(&info)));
            done(&mut b, SEQ, 0);
            let mut out = Vec::new();
            prop_assert_eq!(parse_answers(&req, SEQ, &b, &mut out), Ok(Progress::Done));
            if tcp && st == state::LISTEN {
                prop_assert!(out.is_empty());
            } else {
                let counted = tcp && info_len >= TCPI_BYTES_RECEIVED + 8;
                prop_assert_eq!(out, vec![SocketFigures {
                    inode: u64::from(inode),
                    proto: req.proto(),
                    rqueue: u64::from(rq),
                    wqueue: u64::from(wq),
                    bytes_read: counted.then(|| received.saturating_sub(u64::from(rq))),
                    bytes_written: counted.then(|| acked.saturating_add(u64::from(wq))),
                }]);
            }
        }

        #[test]
        fn unix_answers_carry_their_fields(
            st in 1u8..12,
            inode in 1u32..,
            queues in proptest::option::of((any::<u32>(), any::<u32>())),
        ) {
            let mut b = Vec::new();
            msg(&mut b, SOCK_DIAG_BY_FAMILY, SEQ, &unix_payload(st, inode, queues));
            let mut out = Vec::new();
            prop_assert_eq!(parse_answers(&Request::unix(), SEQ, &b, &mut out), Ok(Progress::More));
            if st == state::LISTEN {
                prop_assert!(out.is_empty());
            } else {
                let (r, w) = queues.unwrap_or((0, 0));
                prop_assert_eq!(out, vec![SocketFigures {
                    inode: u64::from(inode),
                    proto: SockProto::Unix,
                    rqueue: u64::from(r),
                    wqueue: u64::from(w),
                    bytes_read: None,
                    bytes_written: None,
                }]);
            }
        }
    }
}
