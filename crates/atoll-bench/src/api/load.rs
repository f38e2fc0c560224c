//! What the API clients of `atoll bench api` send, and what one client
//! process (`atoll __worker api-load`) reports.
//!
//! Every client follows a fixed plan, so runs are comparable: in the `read`
//! mix only `status`; in `mixed`, nine reads (`status` five times, `why`
//! twice, `overlays`, `apps`) then one changing request; in `write`, only
//! changing requests. The changing requests rotate through what the
//! client may do: root `adopt`s one of its own processes into a unit of its
//! own, sends `coordinate` `null`, `tune`s a unit of the config's overlay
//! up and down, and `report`s a value for that overlay (alternately
//! missing and meeting its bound); a user other than root only `adopt`s
//! (its own process, into units of its own), which is all it may do.
//! Adopts alternate between two units, so each one moves the process.

use std::collections::BTreeMap;

use atoll_client::atoll_proto::{self, Request, RequestEnvelope, PROTOCOL_VERSION};
use atoll_core::coord::{Direction, Message, Resource};
use atoll_core::Name;
use serde::{Deserialize, Serialize};

use super::hist::Histogram;

/// A kind of request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `status`.
    Status,
    /// `why`.
    Why,
    /// `overlays`.
    Overlays,
    /// `apps`.
    Apps,
    /// `adopt` (changes).
    Adopt,
    /// `coordinate` with `null` (changes nothing, but goes to the loop).
    CoordNull,
    /// `coordinate` with `tune`.
    Tune,
    /// `report`.
    Report,
}

impl Kind {
    /// Every kind, reads first.
    pub const ALL: [Kind; 8] = [
        Kind::Status,
        Kind::Why,
        Kind::Overlays,
        Kind::Apps,
        Kind::Adopt,
        Kind::CoordNull,
        Kind::Tune,
        Kind::Report,
    ];

    /// Its name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Status => "status",
            Self::Why => "why",
            Self::Overlays => "overlays",
            Self::Apps => "apps",
            Self::Adopt => "adopt",
            Self::CoordNull => "coordinate_null",
            Self::Tune => "tune",
            Self::Report => "report",
        }
    }

    /// Whether the daemon answers it without changing anything.
    pub fn is_read(self) -> bool {
        matches!(self, Self::Status | Self::Why | Self::Overlays | Self::Apps)
    }
}

/// Which requests the clients send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mix {
    /// `status` only.
    Read,
    /// Nine reads, then one changing request.
    Mixed,
    /// Changing requests only.
    Write,
}

impl Mix {
    /// Every mix, in the order they run.
    pub const ALL: [Mix; 3] = [Mix::Read, Mix::Mixed, Mix::Write];

    /// `read` / `mixed` / `write`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Mixed => "mixed",
            Self::Write => "write",
        }
    }

    /// Whether its clients send changing requests.
    pub fn writes(self) -> bool {
        self != Self::Read
    }
}

impl std::str::FromStr for Mix {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "read" => Ok(Self::Read),
            "mixed" => Ok(Self::Mixed),
            "write" => Ok(Self::Write),
            _ => Err(format!("mix {s:?}: expected read, mixed or write")),
        }
    }
}

/// The reads of the `mixed` plan, before its one changing request.
const MIXED_READS: [Kind; 9] = [
    Kind::Status,
    Kind::Why,
    Kind::Status,
    Kind::Overlays,
    Kind::Status,
    Kind::Apps,
    Kind::Status,
    Kind::Why,
    Kind::Status,
];

/// The changing requests a client may send: root with an overlay to work
/// on all four, root without one `adopt` and `null`, others `adopt`.
pub fn writes_for(root: bool, overlay: bool) -> Vec<Kind> {
    match (root, overlay) {
        (true, true) => vec![Kind::Adopt, Kind::CoordNull, Kind::Tune, Kind::Report],
        (true, false) => vec![Kind::Adopt, Kind::CoordNull],
        (false, _) => vec![Kind::Adopt],
    }
}

/// The next kind a client sends, round and round its plan.
#[derive(Clone, Debug)]
pub struct Planner {
    mix: Mix,
    writes: Vec<Kind>,
    step: usize,
    write: usize,
}

impl Planner {
    /// The plan of `mix` with the changing requests `writes` (none: reads
    /// only, `status` in place of each write).
    pub fn new(mix: Mix, writes: Vec<Kind>) -> Self {
        Self {
            mix,
            writes,
            step: 0,
            write: 0,
        }
    }

    fn next_write(&mut self) -> Kind {
        if self.writes.is_empty() {
            return Kind::Status;
        }
        let k = self.writes[self.write % self.writes.len()];
        self.write += 1;
        k
    }

    /// The next kind.
    pub fn next_kind(&mut self) -> Kind {
        let step = self.step;
        self.step += 1;
        match self.mix {
            Mix::Read => Kind::Status,
            Mix::Write => self.next_write(),
            Mix::Mixed => match MIXED_READS.get(step % (MIXED_READS.len() + 1)) {
                Some(&k) => k,
                None => self.next_write(),
            },
        }
    }
}

/// What a client needs to build its changing requests.
#[derive(Clone, Debug, Default)]
pub struct Writer {
    /// Its own process, for `adopt`.
    pub pid: Option<u32>,
    /// The two units it adopts into, alternately.
    pub units: [String; 2],
    /// The config's overlay and one of its units, for `tune` and `report`.
    pub overlay: Option<(String, String)>,
    /// The latency bound of that overlay, µs (reports alternate above and
    /// below it).
    pub bound_us: f64,
    adopts: u64,
    tunes: u64,
    reports: u64,
}

impl Writer {
    /// A writer adopting `pid` into `units`, tuning in `overlay`.
    pub fn new(pid: Option<u32>, units: [String; 2], overlay: Option<(String, String)>) -> Self {
        Self {
            pid,
            units,
            overlay,
            bound_us: 5000.0,
            ..Self::default()
        }
    }

    /// The request of `kind`, or `None` when this client cannot send it
    /// (no process to adopt, no overlay).
    pub fn request(&mut self, kind: Kind) -> Option<Request> {
        let name = |s: &str| Name::new(s).ok();
        Some(match kind {
            Kind::Status => Request::Status {},
            Kind::Why => Request::Why {
                subject: None,
                limit: None,
            },
            Kind::Overlays => Request::Overlays {},
            Kind::Apps => Request::Apps {},
            Kind::Adopt => {
                let unit = self.units[(self.adopts % 2) as usize].clone();
                self.adopts += 1;
                Request::Adopt {
                    unit,
                    pid: self.pid?,
                    island: None,
                    network: None,
                }
            }
            Kind::CoordNull => Request::Coordinate {
                from: None,
                message: Message::Null,
            },
            Kind::Tune => {
                let (overlay, unit) = self.overlay.as_ref()?;
                let dir = if self.tunes.is_multiple_of(2) {
                    Direction::Up
                } else {
                    Direction::Down
                };
                self.tunes += 1;
                Request::Coordinate {
                    from: None,
                    message: Message::Tune {
                        resource: Resource::CpuTime,
                        dir,
                        overlay: name(overlay)?,
                        unit: name(unit)?,
                    },
                }
            }
            Kind::Report => {
                let (overlay, _) = self.overlay.as_ref()?;
                let value = if self.reports.is_multiple_of(2) {
                    self.bound_us * 1.5
                } else {
                    self.bound_us * 0.5
                };
                self.reports += 1;
                Request::Report {
                    overlay: overlay.clone(),
                    value,
                }
            }
        })
    }
}

/// One request line with `id`.
pub fn encode(id: u64, request: Request) -> String {
    atoll_proto::encode(&RequestEnvelope {
        v: PROTOCOL_VERSION,
        id,
        request,
    })
}

/// A reply line: its id, and `Ok` or the error code. Cheap for the common
/// shape `{"v":1,"id":N,"ok":...}` / `{"v":1,"id":N,"err":{"code":"C",...`
/// (the daemon's field order), which needs no parse of the (long) rest;
/// anything else is parsed as JSON. `None`: not a reply.
pub fn parse_reply(line: &[u8]) -> Option<(u64, Result<(), String>)> {
    fast_reply(line).or_else(|| {
        let v: serde_json::Value = serde_json::from_slice(line).ok()?;
        let id = v.get("id")?.as_u64()?;
        if v.get("ok").is_some() {
            return Some((id, Ok(())));
        }
        let code = v.get("err")?.get("code")?.as_str()?.to_string();
        Some((id, Err(code)))
    })
}

fn fast_reply(line: &[u8]) -> Option<(u64, Result<(), String>)> {
    let rest = line.strip_prefix(b"{\"v\":")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    let rest = rest[digits..].strip_prefix(b",\"id\":")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    let id: u64 = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
    let rest = &rest[digits..];
    if rest.starts_with(b",\"ok\":") {
        return Some((id, Ok(())));
    }
    let rest = rest.strip_prefix(b",\"err\":{\"code\":\"")?;
    let end = rest.iter().position(|&b| b == b'"')?;
    let code = std::str::from_utf8(&rest[..end]).ok()?.to_string();
    Some((id, Err(code)))
}

/// The figures of one kind of request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KindStats {
    /// Requests sent (on connections the daemon admitted).
    pub sent: u64,
    /// Replies received.
    pub answered: u64,
    /// Replies with `ok`.
    pub ok: u64,
    /// Replies with `err`, by code.
    pub errors: BTreeMap<String, u64>,
    /// Request to reply, µs (every reply).
    pub latency: Histogram,
}

impl KindStats {
    /// Adds `other`.
    pub fn merge(&mut self, other: &KindStats) {
        self.sent += other.sent;
        self.answered += other.answered;
        self.ok += other.ok;
        for (code, n) in &other.errors {
            *self.errors.entry(code.clone()).or_insert(0) += n;
        }
        self.latency.merge(&other.latency);
    }

    /// Errors with `code`.
    pub fn errors_of(&self, code: &str) -> u64 {
        self.errors.get(code).copied().unwrap_or(0)
    }

    /// Errors other than `busy`: failures.
    pub fn failures(&self) -> u64 {
        self.errors
            .iter()
            .filter(|(c, _)| c.as_str() != "busy")
            .map(|(_, n)| n)
            .sum()
    }
}

/// What one `api-load` process reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// The uid it ran as.
    pub uid: u32,
    /// Its clients (one connection each at a time).
    pub clients: usize,
    /// The mix, or `raw` for a fixed request line.
    pub mix: String,
    /// Requests each client keeps in flight.
    pub depth: usize,
    /// The window it sent requests in, s.
    pub window_s: f64,
    /// Per kind of request (`Kind::as_str`).
    pub kinds: BTreeMap<String, KindStats>,
    /// Requests sent on an admitted connection and never answered: the
    /// connection closed under them, or no reply came within the drain
    /// time after the window.
    pub lost: u64,
    /// Of those, lost when the daemon closed the connection.
    pub lost_at_close: u64,
    /// Replies whose id was not the oldest request in flight (replies come
    /// in order: 0 expected).
    pub mismatched: u64,
    /// Replies to no request in flight.
    pub unmatched: u64,
    /// Connections the daemon refused (one `busy` line with id 0).
    pub refused: u64,
    /// Connections that could not be made at all.
    pub connect_failures: u64,
    /// Connections made after the first of each client.
    pub reconnects: u64,
    /// The first few unexpected things, in words.
    pub notes: Vec<String>,
}

/// At most this many notes per report.
pub const MAX_NOTES: usize = 8;

impl LoadReport {
    /// Adds `other` (its window counts as the longer of the two).
    pub fn merge(&mut self, other: &LoadReport) {
        self.clients += other.clients;
        self.window_s = self.window_s.max(other.window_s);
        for (k, s) in &other.kinds {
            self.kinds.entry(k.clone()).or_default().merge(s);
        }
        self.lost += other.lost;
        self.lost_at_close += other.lost_at_close;
        self.mismatched += other.mismatched;
        self.unmatched += other.unmatched;
        self.refused += other.refused;
        self.connect_failures += other.connect_failures;
        self.reconnects += other.reconnects;
        for n in &other.notes {
            if self.notes.len() < MAX_NOTES {
                self.notes.push(n.clone());
            }
        }
    }

    /// Notes `what` if there is room.
    pub fn note(&mut self, what: String) {
        if self.notes.len() < MAX_NOTES {
            self.notes.push(what);
        }
    }

    /// Replies of every kind.
    pub fn answered(&self) -> u64 {
        self.kinds.values().map(|k| k.answered).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_go_round() {
        let mut p = Planner::new(Mix::Read, writes_for(true, true));
        assert!((0..5).all(|_| p.next_kind() == Kind::Status));
        let mut p = Planner::new(Mix::Write, writes_for(true, true));
        let kinds: Vec<Kind> = (0..5).map(|_| p.next_kind()).collect();
        assert_eq!(
            kinds,
            [
                Kind::Adopt,
                Kind::CoordNull,
                Kind::Tune,
                Kind::Report,
                Kind::Adopt
            ]
        );
        let mut p = Planner::new(Mix::Mixed, writes_for(false, true));
        let kinds: Vec<Kind> = (0..20).map(|_| p.next_kind()).collect();
        assert_eq!(kinds.iter().filter(|k| !k.is_read()).count(), 2);
        assert_eq!(kinds[9], Kind::Adopt);
        assert_eq!(kinds.iter().filter(|&&k| k == Kind::Status).count(), 10);
        assert_eq!(kinds.iter().filter(|&&k| k == Kind::Why).count(), 4);
        // Without writes, reads stand in for them.
        let mut p = Planner::new(Mix::Write, vec![]);
        assert_eq!(p.next_kind(), Kind::Status);
        assert_eq!("mixed".parse::<Mix>(), Ok(Mix::Mixed));
        assert!("both".parse::<Mix>().is_err());
    }

    #[test]
    fn requests_are_valid_protocol() {
        let mut w = Writer::new(
            Some(42),
            ["wa".into(), "wb".into()],
            Some(("bench".into(), "u001".into())),
        );
        let mut lines = Vec::new();
        for (id, k) in Kind::ALL.iter().chain(&Kind::ALL).enumerate() {
            let r = w.request(*k).unwrap();
            lines.push(encode(id as u64 + 1, r));
        }
        for l in &lines {
            assert!(l.ends_with('\n'));
            atoll_proto::decode_request(l.trim_end()).unwrap();
        }
        assert!(lines[4].contains("\"unit\":\"wa\"") && lines[12].contains("\"unit\":\"wb\""));
        assert!(lines[6].contains("\"up\"") && lines[14].contains("\"down\""));
        assert!(lines[7].contains("7500") && lines[15].contains("2500"));
        // Without a process or an overlay those cannot be sent.
        let mut w = Writer::new(None, ["a".into(), "b".into()], None);
        assert!(w.request(Kind::Adopt).is_none());
        assert!(w.request(Kind::Tune).is_none());
        assert!(w.request(Kind::Report).is_none());
        assert!(w.request(Kind::CoordNull).is_some());
    }

    #[test]
    fn replies_are_read_fast_or_parsed() {
        assert_eq!(
            parse_reply(br#"{"v":1,"id":17,"ok":{"kind":"status","x":[1,2]}}"#),
            Some((17, Ok(())))
        );
        assert_eq!(
            parse_reply(br#"{"v":1,"id":0,"err":{"code":"busy","message":"m"}}"#),
            Some((0, Err("busy".into())))
        );
        // Another field order still parses.
        assert_eq!(
            parse_reply(br#"{"id":3,"err":{"message":"m","code":"not_found"},"v":1}"#),
            Some((3, Err("not_found".into())))
        );
        assert_eq!(parse_reply(b"hello"), None);
        assert_eq!(parse_reply(br#"{"v":1}"#), None);
    }

    #[test]
    fn reports_add_up() {
        let mut a = LoadReport {
            clients: 2,
            window_s: 1.0,
            lost: 1,
            ..Default::default()
        };
        let mut s = KindStats {
            sent: 3,
            answered: 3,
            ok: 2,
            ..Default::default()
        };
        s.errors.insert("busy".into(), 1);
        s.latency.record(10);
        a.kinds.insert("status".into(), s.clone());
        let mut b = a.clone();
        b.window_s = 1.5;
        s.errors.insert("backend".into(), 2);
        b.kinds.insert("status".into(), s);
        a.merge(&b);
        let st = &a.kinds["status"];
        assert_eq!((st.sent, st.answered, st.ok), (6, 6, 4));
        assert_eq!((st.errors_of("busy"), st.failures()), (2, 2));
        assert_eq!(st.latency.count, 2);
        assert_eq!((a.clients, a.lost, a.window_s), (4, 2, 1.5));
        assert_eq!(a.answered(), 6);
    }
}
