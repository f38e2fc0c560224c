//! Tests of the `http-load` worker: responses, the open and the closed loop,
//! the wall-time limit, the options.

use std::io::Cursor;
use std::net::TcpListener;
use std::time::Duration;

use super::*;

fn parse(s: &str) -> io::Result<Response> {
    read_response(&mut Cursor::new(s.as_bytes().to_vec()))
}

#[test]
fn reads_content_length_chunked_and_close_delimited_bodies() {
    let r = parse("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello").unwrap();
    assert_eq!((r.status, r.body_bytes, r.keep_alive), (200, 5, true));
    let r = parse(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Encoding: gzip\r\n\r\n\
         4\r\nabcd\r\na;ext=1\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n",
    )
    .unwrap();
    assert_eq!((r.status, r.body_bytes, r.keep_alive), (200, 14, true));
    let r = parse("HTTP/1.0 200 OK\r\nServer: x\r\n\r\nuntil the end").unwrap();
    assert_eq!((r.body_bytes, r.keep_alive), (13, false));
    let r = parse("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 3\r\nConnection: close\r\n\r\nbad")
        .unwrap();
    assert_eq!((r.status, r.keep_alive), (502, false));
    let r = parse("HTTP/1.0 204 No Content\r\nConnection: keep-alive\r\n\r\n").unwrap();
    assert_eq!((r.status, r.body_bytes, r.keep_alive), (204, 0, true));
}

#[test]
fn refuses_broken_responses() {
    assert!(parse("SSH-2.0\r\n\r\n").is_err());
    assert!(parse("HTTP/1.1 OK\r\n\r\n").is_err());
    assert!(parse("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort").is_err());
    assert!(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err());
    assert!(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n").is_err());
    assert!(parse("HTTP/1.1 200 OK\r\nno colon\r\n\r\n").is_err());
    assert!(parse("").is_err());
}

/// A keep-alive server answering `n` requests on one connection, the
/// second one with a 500.
fn server(n: usize) -> (String, std::thread::JoinHandle<usize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let h = std::thread::spawn(move || {
        let mut served = 0;
        while served < n {
            let (s, _) = l.accept().unwrap();
            let mut r = BufReader::new(s);
            loop {
                let mut head = String::new();
                while !head.ends_with("\r\n\r\n") {
                    if r.read_line(&mut head).unwrap_or(0) == 0 {
                        break;
                    }
                }
                if head.is_empty() {
                    break;
                }
                served += 1;
                let reply: &[u8] = if served == 2 {
                    b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n"
                } else {
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                };
                r.get_mut().write_all(reply).unwrap();
                if served >= n {
                    break;
                }
            }
        }
        served
    });
    (addr, h)
}

#[test]
fn load_records_after_warmup_and_counts_errors() {
    let (addr, h) = server(8);
    let a = HttpLoadArgs {
        addr,
        path: "/x".into(),
        pace: Pace::Open(100.0),
        seconds: 0.075,
        warmup: 0.0,
        limit: None,
        connections: 1,
        heavy: None,
    };
    let r = http_load(&a).unwrap();
    assert_eq!(r["sent"], 8);
    assert_eq!(r["recorded"], 8);
    assert_eq!(r["completed"], 7);
    assert_eq!(r["errors"], 1);
    assert_eq!(r["last_error"], "status 500");
    assert_eq!(r["rt_ms"]["count"], 7);
    assert!(r["rt_ms"]["p95"].as_f64().unwrap() <= r["rt_ms"]["max"].as_f64().unwrap());
    assert_eq!(h.join().unwrap(), 8);
}

#[test]
fn nothing_listening_is_an_error_per_request_not_a_crash() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    drop(l);
    let a = HttpLoadArgs {
        addr,
        path: "/".into(),
        pace: Pace::Open(100.0),
        seconds: 0.045,
        warmup: 0.025,
        limit: None,
        connections: 2,
        heavy: None,
    };
    let r = http_load(&a).unwrap();
    assert_eq!(r["sent"], 5);
    assert_eq!(r["recorded"], 2);
    assert_eq!(r["errors"], 2);
    assert!(r["rt_ms"].is_null());
}

fn p(s: &str) -> Result<super::super::Worker, ArgError> {
    super::super::Worker::parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
}

#[test]
fn parses_its_options() {
    assert_eq!(
        p("http-load --addr 127.0.0.1:80 --rate 50 --seconds 3").unwrap(),
        super::super::Worker::HttpLoad(HttpLoadArgs {
            addr: "127.0.0.1:80".into(),
            path: "/".into(),
            pace: Pace::Open(50.0),
            seconds: 3.0,
            warmup: 0.0,
            limit: None,
            connections: 32,
            heavy: None,
        })
    );
    let w = p("http-load --addr h:1 --rate 1.5 --seconds 3 --warmup=1 --path /p --connections 4")
        .unwrap();
    let super::super::Worker::HttpLoad(a) = w else {
        panic!("{w:?}")
    };
    assert_eq!((a.pace, a.warmup, a.connections), (Pace::Open(1.5), 1.0, 4));
    assert_eq!(a.path, "/p");
    let e = p("http-load --addr h:1 --rate 1 --seconds 3 --warmup 3").unwrap_err();
    assert!(e.to_string().contains("below --seconds"), "{e}");
    assert!(matches!(
        p("http-load --rate 1 --seconds 1"),
        Err(ArgError::Required {
            option: "--addr",
            ..
        })
    ));
    assert!(p("http-load --addr h:1 --rate 0 --seconds 1").is_err());
    let w = p("http-load --addr h:1 --rate 1 --seconds 3 --heavy 0.15").unwrap();
    let super::super::Worker::HttpLoad(a) = w else {
        panic!("{w:?}")
    };
    assert_eq!(a.heavy, Some(0.15));
    let e = p("http-load --addr h:1 --rate 1 --seconds 3 --heavy 1.5").unwrap_err();
    assert!(e.to_string().contains("0..=1"), "{e}");
    let w = p("http-load --addr h:1 --closed --seconds 3 --limit 3").unwrap();
    let super::super::Worker::HttpLoad(a) = w else {
        panic!("{w:?}")
    };
    assert_eq!((a.pace, a.limit), (Pace::Closed, Some(3.0)));
    let e = p("http-load --addr h:1 --closed --rate 5 --seconds 3").unwrap_err();
    assert!(e.to_string().contains("not with --closed"), "{e}");
    let e = p("http-load --addr h:1 --rate 5 --seconds 3 --limit 2.5").unwrap_err();
    assert!(e.to_string().contains("at least --seconds"), "{e}");
    assert!(matches!(
        p("http-load --addr h:1 --seconds 3"),
        Err(ArgError::Required {
            option: "--rate",
            ..
        })
    ));
}

#[test]
fn the_auction_mix_reports_its_heavy_class_apart() {
    // One connection keeps the order: requests 1, 3, 5, 7 are `putbid`
    // (a share of 0.5), and the server fails the second request.
    let (addr, h) = server(8);
    let a = HttpLoadArgs {
        addr,
        path: "/unused".into(),
        pace: Pace::Open(100.0),
        seconds: 0.075,
        warmup: 0.0,
        limit: None,
        connections: 1,
        heavy: Some(0.5),
    };
    let r = http_load(&a).unwrap();
    assert_eq!(r["completed"], 7);
    assert_eq!(r["heavy_rt_ms"]["count"], 3);
    assert!(r["rt_ms"]["stddev"].as_f64().unwrap() >= 0.0);
    assert_eq!(h.join().unwrap(), 8);
}

#[test]
fn the_request_asks_for_gzip_on_a_kept_connection() {
    let t = String::from_utf8(request("/page.txt")).unwrap();
    assert!(t.starts_with("GET /page.txt HTTP/1.1\r\n"), "{t}");
    assert!(t.contains("Accept-Encoding: gzip\r\n") && t.ends_with("\r\n\r\n"));
    assert!(!t.contains("close"));
}

/// A server answering every request with a 200, on every connection, until
/// the test ends; with `slow`, every answer but the first waits that long.
fn answering(slow: Option<Duration>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for (i, s) in l.incoming().enumerate() {
            let Ok(s) = s else { return };
            std::thread::spawn(move || {
                let mut r = BufReader::new(s);
                for served in 0.. {
                    let mut head = String::new();
                    while !head.ends_with("\r\n\r\n") {
                        if r.read_line(&mut head).unwrap_or(0) == 0 {
                            return;
                        }
                    }
                    if let Some(d) = slow.filter(|_| i > 0 || served > 0) {
                        std::thread::sleep(d);
                    }
                    let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                    if r.get_mut().write_all(reply).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn past_the_limit_nothing_is_sent_or_counted() {
    // Five requests released in 50 ms on one connection; the server answers
    // the first at once and every later one after 1.5 s, past the 1 s
    // limit: the second's answer comes too late and the three queued
    // behind it are never sent. Without the limit all five would complete.
    let a = HttpLoadArgs {
        addr: answering(Some(Duration::from_millis(1500))),
        path: "/".into(),
        pace: Pace::Open(100.0),
        seconds: 0.05,
        warmup: 0.0,
        limit: Some(1.0),
        connections: 1,
        heavy: None,
    };
    let r = http_load(&a).unwrap();
    assert_eq!(
        (r["sent"].as_u64(), r["recorded"].as_u64()),
        (Some(5), Some(5))
    );
    let completed = r["completed"].as_u64().unwrap();
    assert!(completed <= 1, "{r}");
    assert_eq!(r["errors"], 0, "a late answer is not a failure: {r}");
    assert_eq!(r["unserved"].as_u64(), Some(5 - completed), "{r}");
    assert_eq!(r["limit_s"], 1.0);
}

#[test]
fn the_closed_loop_sends_only_when_a_connection_is_free() {
    // No queue: every request taken is answered before the next on its
    // connection, so nothing is left unserved without a limit, and the
    // mix is the open loop's (a share of 0.5: every second request heavy).
    let a = HttpLoadArgs {
        addr: answering(None),
        path: "/unused".into(),
        pace: Pace::Closed,
        seconds: 1.0,
        warmup: 0.0,
        limit: None,
        connections: 2,
        heavy: Some(0.5),
    };
    let r = http_load(&a).unwrap();
    assert_eq!(
        (r["pace"].as_str(), r["rate"].is_null()),
        (Some("closed"), true)
    );
    let sent = r["sent"].as_u64().unwrap();
    assert!(sent >= 1, "{r}");
    assert_eq!(r["recorded"].as_u64(), Some(sent), "no warm-up: {r}");
    assert_eq!(r["completed"].as_u64(), Some(sent), "{r}");
    assert_eq!(
        (r["errors"].as_u64(), r["unserved"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(r["heavy_rt_ms"]["count"].as_u64(), Some(sent / 2), "{r}");
    assert_eq!(r["window_s"], 1.0);
}

#[test]
fn throughput_counts_the_responses_that_ended_in_the_window() {
    let done = [0.2, 1.0, 1.5, 1.99, 2.0, 2.5];
    assert_eq!(rate_within(&done, 1.0, 2.0), 3.0);
    assert_eq!(rate_within(&done, 0.0, 4.0), 1.5);
    assert_eq!(rate_within(&done, 2.0, 2.0), 0.0);
    assert_eq!(rate_within(&[], 0.0, 1.0), 0.0);
}
