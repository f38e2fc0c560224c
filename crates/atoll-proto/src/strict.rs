//! What `serde_json` lets through and a strict protocol must not: a key
//! written twice in one object (serde_json keeps the last one, so
//! `{"op":"status","op":"stop"}` would be a `stop`), and fields of any size.
//!
//! [`check`] walks a line once, before it is decoded, with a visitor that
//! builds nothing: it remembers the keys of each object it is in and stops
//! at the first key seen twice, at any depth. For requests it also stops at
//! the first string, key or array over its limit. A request line is walked
//! once: the same visitor builds its JSON value (`parse`), which is then
//! decoded into the typed request.
//!
//! | what | limit |
//! |------|-------|
//! | a string: names (`unit`, `island`, `overlay`, `from`, a recipe's `name`, `named`), `subject`, enum tags | [`MAX_NAME`] bytes |
//! | a free-text label: a working mode's `name` | [`MAX_TEXT`] bytes |
//! | an object's key | [`MAX_NAME`] bytes |
//! | an array: a recipe's `modes`, an overlay's `units`, a mode's `islands` | [`MAX_ITEMS`] items |
//!
//! Limits are on bytes after JSON unescaping. A line that is not JSON is
//! left to the decoder, whose message says where it went wrong.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Longest string in a request (names, subjects, enum tags) and longest
/// key, bytes. Names are at most 64 bytes; a group path is two names.
pub const MAX_NAME: usize = 255;
/// Longest free-text string in a request (a working mode's label), bytes.
pub const MAX_TEXT: usize = 4096;
/// Most items of an array in a request.
pub const MAX_ITEMS: usize = 1024;
/// Most characters of a key or field path quoted in a message.
const QUOTE: usize = 64;

/// What [`check`] refused, with the field's dotted path (`message.overlay`,
/// `recipe.inline.modes[3].name`; empty for the line's top object).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// `key` appears twice in the object at `object`.
    DuplicateKey {
        /// The object's path.
        object: String,
        /// The key (cut to 64 characters).
        key: String,
    },
    /// The string at `field` is `len` bytes, over `limit`.
    TooLong {
        /// The field's path.
        field: String,
        /// Its length, bytes.
        len: usize,
        /// The limit, bytes.
        limit: usize,
    },
    /// The array at `field` has more than `limit` items.
    TooManyItems {
        /// The field's path.
        field: String,
        /// The limit.
        limit: usize,
    },
    /// A key of `len` bytes in the object at `object`, over `limit`.
    KeyTooLong {
        /// The object's path.
        object: String,
        /// The key's length, bytes.
        len: usize,
        /// The limit, bytes.
        limit: usize,
    },
}

/// `the top-level object`, else `field PATH`.
fn object_name(path: &str) -> String {
    if path.is_empty() {
        "the top-level object".into()
    } else {
        format!("field {path}")
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DuplicateKey { object, key } => write!(
                f,
                "duplicate key {key:?} in {}: a key may appear only once per object",
                object_name(object)
            ),
            Self::TooLong { field, len, limit } => write!(
                f,
                "field {field} is {len} bytes long, over the limit of {limit} bytes"
            ),
            Self::TooManyItems { field, limit } => {
                write!(f, "field {field} has more than {limit} items, the limit")
            }
            Self::KeyTooLong { object, len, limit } => write!(
                f,
                "a key of {len} bytes in {}, over the limit of {limit} bytes",
                object_name(object)
            ),
        }
    }
}

/// Checks `line` for duplicate keys and, with `limits`, for over-long
/// fields. `Ok` also when the line is not JSON at all: the decoder reports
/// that. On a violation, also the 1-based column where the parser stopped.
pub fn check(line: &str, limits: bool) -> Result<(), (Violation, usize)> {
    match walk(line, limits, false) {
        Err(Refused::Strict(v, column)) => Err((v, column)),
        _ => Ok(()),
    }
}

/// What [`parse`] refused.
#[derive(Debug)]
pub(crate) enum Refused {
    /// A rule of this module, and the 1-based column where the parser
    /// stopped.
    Strict(Violation, usize),
    /// Not JSON, or more after it: the parser's error, with its place.
    Json(serde_json::Error),
}

/// `line` as a JSON value, built in the same pass that checks it as
/// [`check`] does (a request is read once: this value is then taken
/// apart into the envelope and the typed request).
pub(crate) fn parse(line: &str, limits: bool) -> Result<Value, Refused> {
    walk(line, limits, true)
}

/// One pass over `line`; the value is built only with `build` (else
/// `Null`).
fn walk(line: &str, limits: bool, build: bool) -> Result<Value, Refused> {
    let found = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_str(line);
    let seed = Node {
        at: &At::Top,
        limits,
        build,
        found: &found,
    };
    let walked = seed.deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    walked.map_err(|e| match found.into_inner() {
        Some(v) => Refused::Strict(v, e.column()),
        None => Refused::Json(e),
    })
}

/// Where the visitor is: a path kept on the stack, turned into text only
/// for a message.
enum At<'a> {
    Top,
    Key(&'a At<'a>, &'a str),
    Index(&'a At<'a>, usize),
}

impl At<'_> {
    fn path(&self) -> String {
        let mut parts = Vec::new();
        let mut at = self;
        loop {
            match at {
                At::Top => break,
                At::Key(p, k) => {
                    parts.push(clip(k));
                    at = p;
                }
                At::Index(p, i) => {
                    parts.push(format!("[{i}]"));
                    at = p;
                }
            }
        }
        let mut out = String::new();
        for p in parts.iter().rev() {
            if !out.is_empty() && !p.starts_with('[') {
                out.push('.');
            }
            out.push_str(p);
        }
        out
    }

    /// The limit of a string here: free text for a working mode's label.
    fn string_limit(&self) -> usize {
        match self {
            At::Key(At::Index(At::Key(_, "modes"), _), "name") => MAX_TEXT,
            _ => MAX_NAME,
        }
    }
}

/// At most [`QUOTE`] characters of `s`, then `…`.
fn clip(s: &str) -> String {
    match s.char_indices().nth(QUOTE) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

struct Node<'a> {
    at: &'a At<'a>,
    limits: bool,
    /// Whether to build the value (else every node is `Null`).
    build: bool,
    found: &'a RefCell<Option<Violation>>,
}

impl Node<'_> {
    fn refuse<E: de::Error>(&self, v: Violation) -> E {
        let text = v.to_string();
        *self.found.borrow_mut() = Some(v);
        E::custom(text)
    }

    fn child<'b>(&'b self, at: &'b At<'b>) -> Node<'b> {
        Node {
            at,
            limits: self.limits,
            build: self.build,
            found: self.found,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Value, E> {
        Ok(Value::from(n))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Value, E> {
        Ok(Value::from(n))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Value, E> {
        Ok(Number::from_f64(n).map_or(Value::Null, Value::Number))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Value, E> {
        let limit = self.at.string_limit();
        if self.limits && s.len() > limit {
            return Err(self.refuse(Violation::TooLong {
                field: self.at.path(),
                len: s.len(),
                limit,
            }));
        }
        Ok(if self.build {
            Value::String(s.to_owned())
        } else {
            Value::Null
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        let mut i = 0;
        loop {
            let at = At::Index(self.at, i);
            let Some(item) = seq.next_element_seed(self.child(&at))? else {
                break;
            };
            if self.build {
                items.push(item);
            }
            i += 1;
            if self.limits && i > MAX_ITEMS {
                return Err(self.refuse(Violation::TooManyItems {
                    field: self.at.path(),
                    limit: MAX_ITEMS,
                }));
            }
        }
        Ok(if self.build {
            Value::Array(items)
        } else {
            Value::Null
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        // Built, the object itself knows its keys; else a set of them.
        let mut object = Map::new();
        let mut keys = BTreeSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if self.limits && key.len() > MAX_NAME {
                return Err(self.refuse(Violation::KeyTooLong {
                    object: self.at.path(),
                    len: key.len(),
                    limit: MAX_NAME,
                }));
            }
            let seen = if self.build {
                object.contains_key(&key)
            } else {
                keys.contains(&key)
            };
            if seen {
                return Err(self.refuse(Violation::DuplicateKey {
                    object: self.at.path(),
                    key: clip(&key),
                }));
            }
            let at = At::Key(self.at, &key);
            let value = map.next_value_seed(self.child(&at))?;
            if self.build {
                object.insert(key, value);
            } else {
                keys.insert(key);
            }
        }
        Ok(if self.build {
            Value::Object(object)
        } else {
            Value::Null
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(line: &str) -> Violation {
        check(line, true).expect_err(line).0
    }

    #[test]
    fn a_key_twice_is_refused_at_any_depth() {
        assert_eq!(
            refused(r#"{"v":1,"id":1,"op":"status","op":"stop"}"#),
            Violation::DuplicateKey {
                object: String::new(),
                key: "op".into()
            }
        );
        assert_eq!(
            refused(r#"{"a":[{"b":{"c":1,"c":2}}]}"#),
            Violation::DuplicateKey {
                object: "a[0].b".into(),
                key: "c".into()
            }
        );
        // The same key in different objects is fine; so is an escape that
        // spells a different key.
        assert!(check(r#"{"a":{"k":1},"b":{"k":1},"k":[{"k":1},{"k":2}]}"#, true).is_ok());
        assert!(check(r#"{"k":1,"K":2,"k\u0031":3}"#, true).is_ok());
        // An escape that spells the same key is the same key.
        assert!(matches!(
            refused(r#"{"op":"status","\u006fp":"stop"}"#),
            Violation::DuplicateKey { .. }
        ));
        // Without limits, duplicates are still refused.
        assert!(check(r#"{"x":1,"x":1}"#, false).is_err());
    }

    #[test]
    fn the_column_is_where_the_parser_stopped() {
        let line = r#"{"v":1,"id":1,"op":"status","op":"stop"}"#;
        let (_, col) = check(line, true).unwrap_err();
        assert!(col > line.find(",\"op\":\"stop").unwrap(), "{col}");
    }

    #[test]
    fn strings_keys_and_arrays_have_limits() {
        let name = |n: usize| format!(r#"{{"unit":"{}"}}"#, "u".repeat(n));
        assert!(check(&name(MAX_NAME), true).is_ok());
        assert_eq!(
            refused(&name(MAX_NAME + 1)),
            Violation::TooLong {
                field: "unit".into(),
                len: MAX_NAME + 1,
                limit: MAX_NAME
            }
        );
        // Bytes, not characters.
        let e = "é".repeat(MAX_NAME / 2 + 1);
        assert!(matches!(
            refused(&format!(r#"{{"island":"{e}"}}"#)),
            Violation::TooLong { len, .. } if len == e.len()
        ));
        // A working mode's label is free text.
        let label = |n: usize| {
            format!(
                r#"{{"recipe":{{"inline":{{"modes":[{{"name":"{}"}}]}}}}}}"#,
                "l".repeat(n)
            )
        };
        assert!(check(&label(MAX_TEXT), true).is_ok());
        assert_eq!(
            refused(&label(MAX_TEXT + 1)),
            Violation::TooLong {
                field: "recipe.inline.modes[0].name".into(),
                len: MAX_TEXT + 1,
                limit: MAX_TEXT
            }
        );
        let items = |n: usize| format!(r#"{{"units":[{}]}}"#, vec!["1"; n].join(","));
        assert!(check(&items(MAX_ITEMS), true).is_ok());
        assert_eq!(
            refused(&items(MAX_ITEMS + 1)),
            Violation::TooManyItems {
                field: "units".into(),
                limit: MAX_ITEMS
            }
        );
        let key = format!(r#"{{"message":{{"{}":1}}}}"#, "k".repeat(MAX_NAME + 1));
        assert_eq!(
            refused(&key),
            Violation::KeyTooLong {
                object: "message".into(),
                len: MAX_NAME + 1,
                limit: MAX_NAME
            }
        );
        // Replies have no field limits.
        assert!(check(&name(MAX_NAME + 1), false).is_ok());
        assert!(check(&items(MAX_ITEMS + 1), false).is_ok());
    }

    #[test]
    fn messages_quote_little_of_the_input() {
        let long = "k".repeat(200);
        let v = refused(&format!(r#"{{"{long}":{{"{long}":1,"{long}":2}}}}"#));
        let text = v.to_string();
        assert!(text.len() < 250, "{text}");
        assert!(!text.contains(&"k".repeat(QUOTE + 1)), "{text}");
        assert!(text.contains('…'), "{text}");
    }

    #[test]
    fn the_value_built_is_serde_jsons() {
        for line in [
            r#"{"a":[1,-2,3.5,1e3,null,true,false,"x\u00e9\n"],"b":{"c":{}},"d":[]}"#,
            r#"[18446744073709551615,-9223372036854775808,0.1]"#,
            r#""just a string""#,
            "12",
        ] {
            let want: Value = serde_json::from_str(line).unwrap();
            assert_eq!(parse(line, true).unwrap(), want, "{line}");
        }
        assert!(matches!(parse("[1] 2", true), Err(Refused::Json(_))));
        assert!(matches!(
            parse(r#"{"k":1,"k":2}"#, false),
            Err(Refused::Strict(Violation::DuplicateKey { .. }, _))
        ));
    }

    #[test]
    fn what_is_not_json_is_left_to_the_decoder() {
        assert!(check("hello", true).is_ok());
        assert!(check(r#"{"v":1,"id":"#, true).is_ok());
        assert!(check("", true).is_ok());
    }
}
