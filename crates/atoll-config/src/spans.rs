//! From byte offsets and key paths to lines and columns.
//!
//! [`LineIndex`] maps a byte offset to a 1-based line and a 1-based column
//! counted in characters. [`KeyIndex`] walks the parsed document once and
//! records, for every key path (`island.web.cpus`, `unit.api.adopt[1].comm`),
//! where it is written: the `[` of a table header, else the key, else the
//! value. Problems found by key path are looked up there, falling back to the
//! nearest parent that is written in the file (a value filled in by a default
//! points at its table); problems found by span get the deepest key path that
//! contains them.

use std::ops::Range;

use toml_edit::{Array, Item, TableLike, Value};

/// Line starts of a text.
#[derive(Clone, Debug)]
pub(crate) struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    /// Indexes `text`.
    pub fn new(text: &'a str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Self { text, starts }
    }

    /// 1-based (line, column) of byte `offset`; offsets past the end point
    /// just after the last character.
    pub fn position(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.starts.partition_point(|&s| s <= offset) - 1;
        let start = self.starts[line];
        // Count characters, stepping back to a char boundary if needed.
        let mut end = offset;
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        let column = self.text[start..end].chars().count() + 1;
        (line + 1, column)
    }
}

/// One key path written in the document.
#[derive(Clone, Debug)]
struct Entry {
    path: String,
    /// Where to point for this path.
    anchor: Option<usize>,
    /// Spans that belong to this path (key and value).
    spans: Vec<Range<usize>>,
}

/// Every key path of a document and where it is written.
#[derive(Clone, Debug, Default)]
pub(crate) struct KeyIndex {
    entries: Vec<Entry>,
}

impl KeyIndex {
    /// Walks `root`, the document's root table.
    pub fn build(root: &dyn TableLike) -> Self {
        let mut index = Self::default();
        index.table("", root);
        index
    }

    /// Byte offset of `path`, or of its nearest written parent.
    pub fn locate(&self, path: &str) -> Option<usize> {
        let mut p = path;
        loop {
            if let Some(at) = self.exact(p) {
                return Some(at);
            }
            p = parent(p)?;
        }
    }

    /// The deepest key path whose key or value covers `offset`.
    pub fn path_at(&self, offset: usize) -> Option<&str> {
        self.entries
            .iter()
            .filter(|e| {
                e.spans
                    .iter()
                    .any(|s| s.contains(&offset) || s.start == offset)
            })
            .max_by_key(|e| depth(&e.path))
            .map(|e| e.path.as_str())
    }

    fn exact(&self, path: &str) -> Option<usize> {
        self.entries
            .iter()
            .find(|e| e.path == path)
            .and_then(|e| e.anchor)
    }

    fn table(&mut self, prefix: &str, t: &dyn TableLike) {
        for (k, item) in t.iter() {
            let path = join(prefix, k);
            let key_span = t.key(k).and_then(|key| key.span());
            let header = match item {
                Item::Table(table) if !table.is_dotted() && !table.is_implicit() => {
                    table.span().map(|s| s.start)
                }
                _ => None,
            };
            let value_span = item.span();
            let anchor = header
                .or(key_span.as_ref().map(|s| s.start))
                .or(value_span.as_ref().map(|s| s.start));
            self.entries.push(Entry {
                path: path.clone(),
                anchor,
                spans: key_span.into_iter().chain(value_span).collect(),
            });
            self.item(&path, item);
        }
    }

    fn item(&mut self, path: &str, item: &Item) {
        match item {
            Item::Table(t) => self.table(path, t),
            Item::ArrayOfTables(a) => {
                for (i, t) in a.iter().enumerate() {
                    let p = format!("{path}[{i}]");
                    let span = t.span();
                    self.entries.push(Entry {
                        path: p.clone(),
                        anchor: span.as_ref().map(|s| s.start),
                        spans: span.into_iter().collect(),
                    });
                    self.table(&p, t);
                }
            }
            Item::Value(v) => self.value(path, v),
            Item::None => {}
        }
    }

    fn value(&mut self, path: &str, v: &Value) {
        match v {
            Value::InlineTable(t) => self.table(path, t),
            Value::Array(a) => self.array(path, a),
            _ => {}
        }
    }

    fn array(&mut self, path: &str, a: &Array) {
        for (i, v) in a.iter().enumerate() {
            let p = format!("{path}[{i}]");
            let span = v.span();
            self.entries.push(Entry {
                path: p.clone(),
                anchor: span.as_ref().map(|s| s.start),
                spans: span.into_iter().collect(),
            });
            self.value(&p, v);
        }
    }
}

/// `prefix.key`, or `key` at the root.
pub(crate) fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// The parent of a key path: `a.b[2]` -> `a.b` -> `a` -> none.
pub(crate) fn parent(path: &str) -> Option<&str> {
    if path.ends_with(']') {
        return path.rfind('[').map(|i| &path[..i]);
    }
    path.rfind('.').map(|i| &path[..i])
}

fn depth(path: &str) -> usize {
    path.matches(['.', '[']).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_to_lines_and_character_columns() {
        let text = "a = 1\n# é comment\nbé = 2\n";
        let idx = LineIndex::new(text);
        assert_eq!(idx.position(0), (1, 1));
        assert_eq!(idx.position(4), (1, 5));
        assert_eq!(idx.position(6), (2, 1));
        let b = text.find("= 2").unwrap();
        assert_eq!(idx.position(b), (3, 4), "é counts as one column");
        assert_eq!(idx.position(text.len()), (4, 1));
        assert_eq!(idx.position(10_000), (4, 1));
    }

    #[test]
    fn parents_of_key_paths() {
        assert_eq!(
            parent("unit.api.io_limits[0].rbps"),
            Some("unit.api.io_limits[0]")
        );
        assert_eq!(parent("unit.api.io_limits[0]"), Some("unit.api.io_limits"));
        assert_eq!(parent("unit.api"), Some("unit"));
        assert_eq!(parent("unit"), None);
    }

    fn index(text: &str) -> (KeyIndex, LineIndex<'_>) {
        let doc = toml_edit::ImDocument::parse(text.to_string()).unwrap();
        (KeyIndex::build(doc.as_table()), LineIndex::new(text))
    }

    #[test]
    fn finds_keys_headers_arrays_and_parents() {
        let text = "\
epoch_ms = 30
host.cpus = \"0\"

[island.web]
cpus = \"1-3\"

[unit.api]
  adopt = [{ comm = \"a\" }, { uid = 3 }]

[[unit.api.io_limits]]
device = \"8:0\"
";
        let (keys, lines) = index(text);
        let at = |p: &str| keys.locate(p).map(|o| lines.position(o));
        assert_eq!(at("epoch_ms"), Some((1, 1)));
        assert_eq!(at("host.cpus"), Some((2, 6)));
        assert_eq!(at("host"), Some((2, 1)));
        assert_eq!(at("island.web"), Some((4, 1)));
        assert_eq!(at("island.web.cpus"), Some((5, 1)));
        assert_eq!(
            at("island.web.mems"),
            Some((4, 1)),
            "falls back to the table"
        );
        assert_eq!(at("unit.api.adopt"), Some((8, 3)));
        assert_eq!(at("unit.api.adopt[1]"), Some((8, 28)));
        assert_eq!(at("unit.api.adopt[1].uid"), Some((8, 30)));
        assert_eq!(at("unit.api.io_limits[0]"), Some((10, 1)));
        assert_eq!(at("unit.api.io_limits[0].device"), Some((11, 1)));
        assert_eq!(at("unit.api.io_limits[0].rbps"), Some((10, 1)));
        assert_eq!(at("nothing.here"), None);
        let uid = text.find("3 }").unwrap();
        assert_eq!(keys.path_at(uid), Some("unit.api.adopt[1].uid"));
        assert_eq!(
            keys.path_at(text.find("\"1-3\"").unwrap()),
            Some("island.web.cpus")
        );
    }
}
