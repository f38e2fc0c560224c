//! sock_diag netlink answers: `atoll_netdiag::wire::{parse_answers,
//! ends_dump, tcp_counters}` on raw bytes.
//!
//! Input: byte 0 picks the request the answers belong to (TCP over both
//! families, tcp4, tcp6, udp4, udp6, unix), bytes 1..5 the sequence number
//! (host order), the rest is one received buffer.
//!
//! Properties: no panic, no out-of-bounds read; every socket reported has an
//! inode and the request's protocol; a buffer that ends the dump for
//! `parse_answers` (done, or a kernel error) ends it for `ends_dump` too;
//! `tcp_counters` reads exactly the buffers long enough to hold both
//! counters.
#![no_main]

use atoll_netdiag::wire::{
    ends_dump, parse_answers, tcp_counters, Progress, Request, WireError, AF_INET, AF_INET6,
    TCPI_BYTES_RECEIVED,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 5 {
        return;
    }
    let req = match data[0] % 6 {
        0 => Request::tcp_any(),
        1 => Request::tcp(AF_INET),
        2 => Request::tcp(AF_INET6),
        3 => Request::udp(AF_INET),
        4 => Request::udp(AF_INET6),
        _ => Request::unix(),
    };
    let seq = u32::from_ne_bytes([data[1], data[2], data[3], data[4]]);
    let buf = &data[5..];
    let mut out = Vec::new();
    let result = parse_answers(&req, seq, buf, &mut out);
    for s in &out {
        assert_ne!(s.inode, 0);
        assert_eq!(s.proto, req.proto());
    }
    let ended = matches!(result, Ok(Progress::Done) | Err(WireError::Kernel { .. }));
    if ended {
        assert!(
            ends_dump(buf, seq),
            "parse_answers ended the dump, ends_dump did not"
        );
    }
    let counters = tcp_counters(buf);
    assert_eq!(counters.is_some(), buf.len() >= TCPI_BYTES_RECEIVED + 8);
});
