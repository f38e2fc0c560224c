//! Sets of small integer ids (CPUs, NUMA nodes) in the kernel's list format.
//!
//! The kernel writes CPU and node sets as comma-separated ranges: `0-3,8,10-11`.
//! [`IdSet`] parses and prints that format exactly, and is stored as a bitmap so
//! that set operations on a 1,024-CPU simulated machine stay cheap.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Largest id accepted by the parser. Linux's `NR_CPUS` tops out at 8192.
pub const MAX_ID: u32 = 8191;

/// A set of CPU ids.
pub type CpuSet = IdSet;
/// A set of NUMA node ids.
pub type NodeSet = IdSet;

/// The first id of word `i`. Words are only made for `u32` ids (by
/// `insert`, or by set operations on such words), so `i <= u32::MAX / 64`
/// and the id fits.
#[inline]
fn word_base(i: usize) -> u32 {
    u32::try_from(i * 64).expect("IdSet words hold u32 ids")
}

/// A set of ids, printed and parsed in the kernel's list format.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct IdSet {
    words: Vec<u64>,
}

/// Why a list string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdSetError {
    /// A piece between commas is not a number or a range.
    #[error("{input:?}: {piece:?} is not a number or a range like 0-3")]
    BadPiece {
        /// The whole input.
        input: String,
        /// The offending piece.
        piece: String,
    },
    /// A range whose end is below its start.
    #[error("{input:?}: range {start}-{end} runs backwards")]
    Backwards {
        /// The whole input.
        input: String,
        /// Range start.
        start: u32,
        /// Range end.
        end: u32,
    },
    /// An id above [`MAX_ID`].
    #[error("{input:?}: id {id} is above the limit {MAX_ID}")]
    TooLarge {
        /// The whole input.
        input: String,
        /// The id.
        id: u32,
    },
}

impl IdSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The set `{start, ..., end}` (inclusive). Empty when `end < start`.
    pub fn range(start: u32, end: u32) -> Self {
        let mut s = Self::new();
        for id in start..=end {
            s.insert(id);
        }
        s
    }

    /// Adds `id`; returns whether it was new.
    pub fn insert(&mut self, id: u32) -> bool {
        let (w, b) = (id as usize / 64, id % 64);
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        let new = self.words[w] & (1 << b) == 0;
        self.words[w] |= 1 << b;
        new
    }

    /// Removes `id`; returns whether it was present.
    pub fn remove(&mut self, id: u32) -> bool {
        let (w, b) = (id as usize / 64, id % 64);
        match self.words.get_mut(w) {
            Some(word) if *word & (1 << b) != 0 => {
                *word &= !(1 << b);
                self.trim();
                true
            }
            _ => false,
        }
    }

    /// Whether `id` is in the set.
    pub fn contains(&self, id: u32) -> bool {
        let (w, b) = (id as usize / 64, id % 64);
        self.words.get(w).is_some_and(|word| word & (1 << b) != 0)
    }

    /// Number of ids.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    /// The smallest id, if any.
    pub fn first(&self) -> Option<u32> {
        self.iter().next()
    }

    /// The largest id, if any.
    pub fn last(&self) -> Option<u32> {
        self.words
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, w)| (*w != 0).then(|| word_base(i) + 63 - w.leading_zeros()))
    }

    /// Ids in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            let mut word = w;
            std::iter::from_fn(move || {
                if word == 0 {
                    return None;
                }
                let b = word.trailing_zeros();
                word &= word - 1;
                Some(word_base(i) + b)
            })
        })
    }

    /// `self ∪ other`.
    pub fn union(&self, other: &Self) -> Self {
        let n = self.words.len().max(other.words.len());
        let words = (0..n)
            .map(|i| self.word(i) | other.word(i))
            .collect::<Vec<_>>();
        Self::from_words(words)
    }

    /// `self ∩ other`.
    pub fn intersection(&self, other: &Self) -> Self {
        let n = self.words.len().min(other.words.len());
        Self::from_words((0..n).map(|i| self.word(i) & other.word(i)).collect())
    }

    /// `self \ other`.
    pub fn difference(&self, other: &Self) -> Self {
        Self::from_words(
            (0..self.words.len())
                .map(|i| self.word(i) & !other.word(i))
                .collect(),
        )
    }

    /// Whether every id of `self` is in `other`.
    pub fn is_subset(&self, other: &Self) -> bool {
        (0..self.words.len()).all(|i| self.word(i) & !other.word(i) == 0)
    }

    /// Whether the sets share no id.
    pub fn is_disjoint(&self, other: &Self) -> bool {
        (0..self.words.len().min(other.words.len())).all(|i| self.word(i) & other.word(i) == 0)
    }

    /// Parses the kernel list format (`""`, `"3"`, `"0-3,8"`); white space
    /// around pieces and a trailing newline are accepted.
    pub fn parse(input: &str) -> Result<Self, IdSetError> {
        let mut set = Self::new();
        let trimmed = input.trim();
        if trimmed.is_empty() {
            return Ok(set);
        }
        let err_piece = |piece: &str| IdSetError::BadPiece {
            input: input.to_string(),
            piece: piece.to_string(),
        };
        for piece in trimmed.split(',') {
            let piece = piece.trim();
            let (start, end) = match piece.split_once('-') {
                Some((a, b)) => (
                    a.trim().parse::<u32>().map_err(|_| err_piece(piece))?,
                    b.trim().parse::<u32>().map_err(|_| err_piece(piece))?,
                ),
                None => {
                    let v = piece.parse::<u32>().map_err(|_| err_piece(piece))?;
                    (v, v)
                }
            };
            if end < start {
                return Err(IdSetError::Backwards {
                    input: input.to_string(),
                    start,
                    end,
                });
            }
            if end > MAX_ID {
                return Err(IdSetError::TooLarge {
                    input: input.to_string(),
                    id: end,
                });
            }
            for id in start..=end {
                set.insert(id);
            }
        }
        Ok(set)
    }

    fn word(&self, i: usize) -> u64 {
        self.words.get(i).copied().unwrap_or(0)
    }

    fn from_words(words: Vec<u64>) -> Self {
        let mut s = Self { words };
        s.trim();
        s
    }

    fn trim(&mut self) {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }
}

impl FromIterator<u32> for IdSet {
    fn from_iter<T: IntoIterator<Item = u32>>(iter: T) -> Self {
        let mut s = Self::new();
        for id in iter {
            s.insert(id);
        }
        s
    }
}

impl FromStr for IdSet {
    type Err = IdSetError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for IdSet {
    /// Prints the kernel list format, with ranges collapsed: `0-3,8`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut it = self.iter().peekable();
        while let Some(start) = it.next() {
            let mut end = start;
            while it.peek() == Some(&(end + 1)) {
                end = it.next().unwrap_or(end);
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for IdSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IdSet({self})")
    }
}

impl Serialize for IdSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for IdSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn parses_and_prints_kernel_lists() {
        for (input, printed, len) in [
            ("", "", 0),
            ("0", "0", 1),
            ("0-3", "0-3", 4),
            ("0-3,8,10-11\n", "0-3,8,10-11", 7),
            ("3,1,2", "1-3", 3),
            (" 64 - 65 , 127 ", "64-65,127", 3),
        ] {
            let s = IdSet::parse(input).unwrap();
            assert_eq!(s.to_string(), printed, "{input:?}");
            assert_eq!(s.len(), len, "{input:?}");
        }
    }

    #[test]
    fn rejects_bad_lists_naming_the_piece() {
        let e = IdSet::parse("0-3,x").unwrap_err();
        assert!(e.to_string().contains("\"x\""), "{e}");
        assert!(matches!(
            IdSet::parse("5-2"),
            Err(IdSetError::Backwards {
                start: 5,
                end: 2,
                ..
            })
        ));
        assert!(matches!(
            IdSet::parse("9000"),
            Err(IdSetError::TooLarge { id: 9000, .. })
        ));
        assert!(IdSet::parse("1,,2").is_err());
    }

    #[test]
    fn set_operations() {
        let a = IdSet::parse("0-7").unwrap();
        let b = IdSet::parse("4-11").unwrap();
        assert_eq!(a.union(&b).to_string(), "0-11");
        assert_eq!(a.intersection(&b).to_string(), "4-7");
        assert_eq!(a.difference(&b).to_string(), "0-3");
        assert!(!a.is_disjoint(&b));
        assert!(IdSet::parse("0-3").unwrap().is_subset(&a));
        assert!(!b.is_subset(&a));
        assert_eq!(b.first(), Some(4));
        assert_eq!(b.last(), Some(11));
        assert_eq!(IdSet::new().last(), None);
    }

    #[test]
    fn equality_ignores_trailing_empty_words() {
        let mut a = IdSet::parse("1,200").unwrap();
        a.remove(200);
        assert_eq!(a, IdSet::parse("1").unwrap());
        let d = IdSet::parse("1,200")
            .unwrap()
            .difference(&IdSet::parse("200").unwrap());
        assert_eq!(d, IdSet::parse("1").unwrap());
    }

    proptest! {
        #[test]
        fn print_parse_roundtrip(ids in proptest::collection::btree_set(0u32..2048, 0..64)) {
            let s: IdSet = ids.iter().copied().collect();
            let back = IdSet::parse(&s.to_string()).unwrap();
            prop_assert_eq!(&back, &s);
            prop_assert_eq!(back.iter().collect::<Vec<_>>(), ids.into_iter().collect::<Vec<_>>());
        }

        /// Arbitrary text (cpuset files are outside input) never panics, and
        /// whatever parses prints back to a list that parses to the same
        /// set. The fuzz target `cgroup_stats` runs the same check.
        #[test]
        fn arbitrary_text_parses_or_fails_cleanly(
            text in any::<String>(),
            list in "[0-9, \n-]{0,40}",
        ) {
            for t in [&text, &list] {
                if let Ok(set) = IdSet::parse(t) {
                    prop_assert!(set.last().is_none_or(|id| id <= MAX_ID));
                    prop_assert_eq!(IdSet::parse(&set.to_string()), Ok(set));
                }
            }
        }
    }
}
