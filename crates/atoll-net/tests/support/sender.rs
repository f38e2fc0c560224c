//! What the real-kernel classification tests share (`real_nft.rs` here,
//! `atoll-daemon`'s `real_v1_netisland.rs` through `#[path]`): a child
//! `python3` that sends a number of datagrams or frames when told to, from
//! a socket made only then (so in whatever group the test moved it into
//! meanwhile), and the packets an HTB class's leaf counted.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};

use atoll_net::{NetBackend, TcBackend};

/// The interpreter the senders run in.
pub const PYTHON: &str = "/usr/bin/python3";

/// What a [`Sender`] sends.
pub enum Datagrams<'a> {
    /// UDP datagrams to this IPv4 address, port 9 (a namespace's address
    /// with a permanent neighbour: no ARP).
    Udp(&'a str),
    /// Raw Ethernet broadcast frames on this interface (AF_PACKET: no
    /// address or route needed).
    Raw(&'a str),
}

/// A child that says `ready`, waits for a line on its stdin, then sends
/// `count` datagrams or frames and exits; killed and reaped on drop.
pub struct Sender(Child);

impl Sender {
    /// Started in network namespace `netns` (`nsenter`) when given.
    pub fn start(what: &Datagrams<'_>, count: u64, netns: Option<&str>) -> Self {
        let send = match what {
            Datagrams::Udp(to) => format!(
                "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
                 for _ in range({count}):\n    s.sendto(b'atoll' * 10, ('{to}', 9))\n"
            ),
            Datagrams::Raw(iface) => format!(
                "s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n\
                 s.bind(('{iface}', 0))\n\
                 frame = b'\\xff' * 6 + b'\\x02\\x00\\x00\\x00\\x00\\x01' + b'\\x88\\xb5' + b'atoll' * 10\n\
                 for _ in range({count}):\n    s.send(frame)\n"
            ),
        };
        let script =
            format!("import socket, sys\nprint('ready', flush=True)\nsys.stdin.readline()\n{send}");
        let mut cmd = match netns {
            Some(ns) => {
                let mut c = Command::new("nsenter");
                c.args([&format!("--net=/run/netns/{ns}"), PYTHON]);
                c
            }
            None => Command::new(PYTHON),
        };
        let mut child = cmd
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready");
        Self(child)
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Lets it send and waits for it to exit.
    pub fn send(mut self) {
        self.0.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
        let status = self.0.wait().unwrap();
        assert!(status.success(), "sender: {status}");
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Packets counted in class `1:<minor>`'s leaf on `iface` (in `netns`
/// when given).
pub fn packets(netns: Option<&str>, iface: &str, minor: u16) -> u64 {
    let mut tc = match netns {
        Some(ns) => TcBackend::new().in_netns(ns),
        None => TcBackend::new(),
    };
    tc.leaf_stats(iface)
        .unwrap()
        .iter()
        .find(|s| s.minor == minor)
        .map_or(0, |s| s.packets)
}
