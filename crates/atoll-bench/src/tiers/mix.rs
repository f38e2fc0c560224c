//! The auction's request types, the mix the load generator offers, the
//! schema and data the benchmark generates, and the SQL each request runs
//! in the application tier.
//!
//! - `browse` (light): the item, its current best bid and its seller, two
//!   indexed reads.
//! - `putbid` (heavy, seed 001's PutBid): a transaction that reads the
//!   item (`FOR UPDATE`), its best bid, the bidder and the bidder's recent
//!   bids, inserts the bid and updates the item's bid count and maximum,
//!   with `work` rounds of CPU work (a hash loop) in the application tier.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// A request type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A light read.
    Browse,
    /// The heavy bid transaction.
    PutBid,
}

impl Kind {
    /// Both kinds.
    pub const ALL: [Self; 2] = [Self::Browse, Self::PutBid];

    /// The name in URLs and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Browse => "browse",
            Self::PutBid => "putbid",
        }
    }

    /// The kind of a request path (`/browse?...`, `/putbid?...`).
    pub fn of_path(path: &str) -> Option<Self> {
        let name = path.strip_prefix('/')?.split(['?', '/']).next()?;
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// The `i`-th request's kind when a share `heavy` (0..=1) of requests is
/// `putbid`: exactly `floor(n × heavy)` of the first `n` requests are, spread
/// evenly (request `i` is heavy when `floor((i+1)h) > floor(ih)`).
pub fn kind_at(i: u64, heavy: f64) -> Kind {
    let h = heavy.clamp(0.0, 1.0);
    let before = (i as f64 * h).floor();
    let after = ((i + 1) as f64 * h).floor();
    if after > before {
        Kind::PutBid
    } else {
        Kind::Browse
    }
}

/// How big the generated database is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataSize {
    /// Users.
    pub users: u64,
    /// Items.
    pub items: u64,
    /// Bids generated before the run.
    pub bids: u64,
}

impl Default for DataSize {
    fn default() -> Self {
        Self {
            users: 1_000,
            items: 2_000,
            bids: 5_000,
        }
    }
}

/// A small deterministic generator (SplitMix64), so that a run's data and
/// requests depend only on the seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `1..=n` (`n` > 0).
    pub fn id(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1) + 1
    }
}

/// The `i`-th request's path: its kind from the mix, the item, bidder and
/// bid from `rng`.
pub fn path_at(i: u64, heavy: f64, size: &DataSize, rng: &mut Rng) -> String {
    let item = rng.id(size.items);
    match kind_at(i, heavy) {
        Kind::Browse => format!("/browse?item={item}"),
        Kind::PutBid => {
            let user = rng.id(size.users);
            let bid = rng.id(1_000);
            format!("/putbid?item={item}&user={user}&bid={bid}")
        }
    }
}

/// The numeric query parameter `key` of `path`.
pub fn param(path: &str, key: &str) -> Option<u64> {
    let (_, q) = path.split_once('?')?;
    q.split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.parse().ok())
}

/// The database's name.
pub const DATABASE: &str = "auction";

/// The statements that create the schema (dropping an earlier one).
pub fn schema() -> Vec<String> {
    vec![
        format!("DROP DATABASE IF EXISTS {DATABASE}"),
        format!("CREATE DATABASE {DATABASE}"),
        format!(
            "CREATE TABLE {DATABASE}.users (id INT PRIMARY KEY, nickname VARCHAR(32) NOT NULL, \
             rating INT NOT NULL) ENGINE=InnoDB"
        ),
        format!(
            "CREATE TABLE {DATABASE}.items (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL, \
             seller INT NOT NULL, initial_price INT NOT NULL, max_bid INT NOT NULL, \
             nb_of_bids INT NOT NULL, INDEX (seller)) ENGINE=InnoDB"
        ),
        format!(
            "CREATE TABLE {DATABASE}.bids (id INT AUTO_INCREMENT PRIMARY KEY, user_id INT NOT \
             NULL, item_id INT NOT NULL, bid INT NOT NULL, INDEX (item_id), INDEX (user_id)) \
             ENGINE=InnoDB"
        ),
    ]
}

/// The `INSERT`s of the generated data, at most `batch` rows each.
pub fn data(size: &DataSize, seed: u64, batch: usize) -> Vec<String> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    let mut insert = |table: &str, cols: &str, rows: Vec<String>| {
        for chunk in rows.chunks(batch.max(1)) {
            out.push(format!(
                "INSERT INTO {DATABASE}.{table} ({cols}) VALUES {}",
                chunk.join(",")
            ));
        }
    };
    let users = (1..=size.users)
        .map(|u| format!("({u},'user{u}',{})", rng.next_u64() % 100))
        .collect();
    insert("users", "id,nickname,rating", users);
    let items = (1..=size.items)
        .map(|i| {
            let price = rng.id(100);
            format!("({i},'item {i}',{},{price},{price},0)", rng.id(size.users))
        })
        .collect();
    insert(
        "items",
        "id,name,seller,initial_price,max_bid,nb_of_bids",
        items,
    );
    let bids = (0..size.bids)
        .map(|_| {
            let (u, i) = (rng.id(size.users), rng.id(size.items));
            format!("({u},{i},{})", rng.id(1_000))
        })
        .collect();
    insert("bids", "user_id,item_id,bid", bids);
    out.push(format!(
        "UPDATE {DATABASE}.items i JOIN (SELECT item_id, COUNT(*) n, MAX(bid) m FROM \
         {DATABASE}.bids GROUP BY item_id) b ON b.item_id = i.id SET i.nb_of_bids = b.n, \
         i.max_bid = GREATEST(i.max_bid, b.m)"
    ));
    out
}

/// The queries of a `browse` of `item`.
pub fn browse_sql(item: u64) -> Vec<String> {
    vec![
        format!("SELECT name, max_bid, nb_of_bids, seller FROM {DATABASE}.items WHERE id = {item}"),
        format!(
            "SELECT u.nickname, u.rating FROM {DATABASE}.items i JOIN {DATABASE}.users u ON \
             u.id = i.seller WHERE i.id = {item}"
        ),
    ]
}

/// The transaction of a `putbid` of `bid` on `item` by `user`.
pub fn putbid_sql(item: u64, user: u64, bid: u64) -> Vec<String> {
    vec![
        "START TRANSACTION".into(),
        format!("SELECT max_bid, nb_of_bids FROM {DATABASE}.items WHERE id = {item} FOR UPDATE"),
        format!("SELECT MAX(bid), COUNT(*) FROM {DATABASE}.bids WHERE item_id = {item}"),
        format!("SELECT nickname, rating FROM {DATABASE}.users WHERE id = {user}"),
        format!(
            "SELECT COUNT(*), COALESCE(SUM(bid), 0) FROM {DATABASE}.bids WHERE user_id = {user}"
        ),
        format!("INSERT INTO {DATABASE}.bids (user_id, item_id, bid) VALUES ({user},{item},{bid})"),
        format!(
            "UPDATE {DATABASE}.items SET nb_of_bids = nb_of_bids + 1, max_bid = \
             GREATEST(max_bid, {bid}) WHERE id = {item}"
        ),
        "COMMIT".into(),
    ]
}

/// The application tier's CPU work of a `putbid`: `rounds` of a hash
/// loop over `seed`, returned so that it cannot be optimized away.
pub fn cpu_work(seed: u64, rounds: u64) -> u64 {
    let mut h = seed | 1;
    for i in 0..rounds {
        h ^= h << 13;
        h ^= h >> 7;
        h ^= h << 17;
        h = h.wrapping_add(i);
    }
    h
}

/// A short text of an answer's rows for a response body.
pub fn body(kind: Kind, values: &[String]) -> String {
    let mut s = String::new();
    let _ = write!(s, "{}:", kind.as_str());
    for v in values {
        let _ = write!(s, " {v}");
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_has_exactly_its_share_of_heavy_requests_spread_evenly() {
        let heavy = |n: u64, h: f64| (0..n).filter(|&i| kind_at(i, h) == Kind::PutBid).count();
        assert_eq!(heavy(1000, 0.15), 150);
        assert_eq!(heavy(100, 0.0), 0);
        assert_eq!(heavy(100, 1.0), 100);
        assert_eq!(heavy(7, 0.5), 3);
        // No run of more than ceil(1/h) light requests.
        let kinds: Vec<Kind> = (0..200).map(|i| kind_at(i, 0.2)).collect();
        let longest = kinds
            .split(|k| *k == Kind::PutBid)
            .map(<[Kind]>::len)
            .max()
            .unwrap();
        assert!(longest <= 5, "{longest}");
    }

    #[test]
    fn paths_carry_their_kind_and_parameters() {
        let size = DataSize::default();
        let mut rng = Rng::new(7);
        let paths: Vec<String> = (0..10).map(|i| path_at(i, 0.5, &size, &mut rng)).collect();
        for (i, p) in paths.iter().enumerate() {
            let k = Kind::of_path(p).unwrap();
            assert_eq!(k, kind_at(i as u64, 0.5), "{p}");
            let item = param(p, "item").unwrap();
            assert!((1..=size.items).contains(&item), "{p}");
            if k == Kind::PutBid {
                assert!((1..=size.users).contains(&param(p, "user").unwrap()), "{p}");
                assert!(param(p, "bid").is_some(), "{p}");
            }
        }
        // Deterministic from the seed.
        let mut again = Rng::new(7);
        assert_eq!(path_at(0, 0.5, &size, &mut again), paths[0]);
        assert_eq!(Kind::of_path("/other"), None);
        assert_eq!(param("/browse?item=x", "item"), None);
    }

    #[test]
    fn the_data_is_batched_and_sized() {
        let size = DataSize {
            users: 10,
            items: 25,
            bids: 7,
        };
        let d = data(&size, 1, 10);
        let count = |t: &str| {
            d.iter()
                .filter(|s| s.starts_with(&format!("INSERT INTO auction.{t} ")))
                .map(|s| s.matches("),(").count() + 1)
                .sum::<usize>()
        };
        assert_eq!((count("users"), count("items"), count("bids")), (10, 25, 7));
        assert_eq!(
            d.iter()
                .filter(|s| s.contains("INTO auction.items"))
                .count(),
            3
        );
        assert!(d.last().unwrap().starts_with("UPDATE"));
        assert_eq!(d, data(&size, 1, 10));
        assert_ne!(d, data(&size, 2, 10));
        assert_eq!(schema().len(), 5);
    }

    #[test]
    fn putbid_is_a_transaction_heavier_than_browse() {
        let p = putbid_sql(3, 4, 50);
        assert_eq!(p.first().unwrap(), "START TRANSACTION");
        assert_eq!(p.last().unwrap(), "COMMIT");
        assert!(p
            .iter()
            .any(|q| q.contains("FOR UPDATE") && q.contains("id = 3")));
        assert!(p.iter().any(|q| q.contains("VALUES (4,3,50)")));
        assert!(p.len() > 2 * browse_sql(3).len());
        assert_ne!(cpu_work(1, 1000), cpu_work(1, 1001));
        assert_eq!(body(Kind::Browse, &["a".into()]), "browse: a\n");
    }
}
