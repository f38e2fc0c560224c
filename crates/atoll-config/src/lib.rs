//! atoll's config file: a platform description in TOML, turned into a
//! validated [`PlatformSpec`].
//!
//! Parsing is strict and reports every problem it can, each with the file,
//! line, column and dotted key (`FILE:LINE:COL: KEY: message`):
//!
//! 1. the TOML syntax ([`toml_edit`], which keeps the byte span of every key
//!    and value);
//! 2. the shape: each section is deserialized on its own into the serde
//!    structs of `raw` (unknown keys refused at every level), so a bad
//!    section does not hide problems in the others;
//! 3. resolution against the machine (`resolve`): `"auto"` host CPUs,
//!    default memory nodes, policies, `[auto]` layouts, overlays
//!    (`overlay`);
//! 4. [`PlatformSpec::validate`], whose dotted key paths are mapped back to
//!    the place in the file where that key is written (or its table).
//!
//! [`to_toml`] goes the other way: a spec as a file that parses back to
//! it (`atoll config dump`).
//!
//! Everything here is a pure function of the text and the [`Topology`]:
//! nothing is read except by [`load`], nothing is written. The file format is
//! described in `docs/config.md`.

mod apps;
mod comm;
mod dump;
mod error;
mod network;
mod overlay;
mod raw;
mod resolve;
mod size;
mod slo;
mod spans;
mod summary;

use std::path::Path;

use atoll_core::spec::{PlatformSpec, SpecError};
use atoll_core::topology::Topology;
pub use dump::{to_toml, DumpError};
pub use error::{ConfigError, Diagnostic, KEY_MAX, MESSAGE_MAX, QUOTE_MAX};
use error::{Pos, Problem};
pub use overlay::DEFAULT_PERCENTILE;
use resolve::Outcome;
pub use resolve::{DEFAULT_RT_PERIOD_US, DEFAULT_RT_PRIORITY, DEFAULT_RT_RUNTIME_US};
pub use size::{format_size, parse_size, SizeError};
pub use slo::{slo_config, SloKeys};
use spans::{KeyIndex, LineIndex};
pub use summary::{entitlement_parts, summary};

/// The built-in platform description, used when no config file is given: the
/// host partition from [`atoll_core::layout::default_host`] and islands laid
/// out from the topology, all with the fair policy, no units.
pub const DEFAULT_CONFIG: &str = r#"# atoll's built-in platform description (used when no config file is given).

# The host partition keeps the first core (or, on a one-core machine, the
# first CPU) for tasks atoll does not manage. Nothing is moved there unless
# adopt_all = true.
[host]
cpus = "auto"

# Islands from the topology over the remaining CPUs: one per NUMA node when
# there are several, else one per last-level cache when there are several,
# else a single island "main".
[auto]
layout = "topology"
policy = "fair"
"#;

/// Parses and validates a config. `source` names the text in messages
/// (usually the file name).
pub fn parse(text: &str, source: &str, topo: &Topology) -> Result<PlatformSpec, ConfigError> {
    let lines = LineIndex::new(text);
    let doc = match toml_edit::ImDocument::parse(text) {
        Ok(doc) => doc,
        Err(e) => {
            let pos = e.span().map_or(Pos::Start, Pos::Span);
            let problem = Problem {
                pos,
                key: None,
                message: resolve::tidy(e.message()),
            };
            let keys = KeyIndex::default();
            return Err(ConfigError::new(vec![diagnose(
                problem, source, &lines, &keys,
            )]));
        }
    };
    let keys = KeyIndex::build(doc.as_table());
    let out = resolve::resolve(doc.as_table(), topo);
    let mut problems = out.problems.clone();
    if !out.host_failed {
        if let Err(errs) = out.spec.validate(topo) {
            problems.extend(
                errs.into_iter()
                    .filter(|e| !is_consequence(e, &out))
                    .map(|e| spec_problem(e, &out)),
            );
        }
    }
    if problems.is_empty() {
        Ok(out.spec)
    } else {
        Err(ConfigError::new(
            problems
                .into_iter()
                .map(|p| diagnose(p, source, &lines, &keys))
                .collect(),
        ))
    }
}

/// Reads and parses the config at `path`; read errors carry the path.
pub fn load(path: &Path, topo: &Topology) -> Result<PlatformSpec, ConfigError> {
    let bytes = std::fs::read(path).map_err(|e| ConfigError::read(path, e))?;
    parse_bytes(&bytes, &path.display().to_string(), topo)
}

/// [`parse`] for text that may not be UTF-8: the first invalid byte is an
/// error at its line and column (and byte offset).
pub fn parse_bytes(
    bytes: &[u8],
    source: &str,
    topo: &Topology,
) -> Result<PlatformSpec, ConfigError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => parse(text, source, topo),
        Err(e) => Err(ConfigError::new(vec![not_utf8(bytes, &e, source)])),
    }
}

/// Where the first byte that is not UTF-8 is: line and column from the
/// valid text before it.
fn not_utf8(bytes: &[u8], e: &std::str::Utf8Error, source: &str) -> Diagnostic {
    let at = e.valid_up_to();
    let before = std::str::from_utf8(&bytes[..at]).unwrap_or_default();
    let (line, column) = LineIndex::new(before).position(at);
    let bad: Vec<String> = bytes[at..]
        .iter()
        .take(e.error_len().unwrap_or(bytes.len() - at).min(4))
        .map(|b| format!("0x{b:02x}"))
        .collect();
    Diagnostic {
        source: source.to_string(),
        line,
        column,
        key: None,
        message: format!(
            "not UTF-8: byte {} at offset {at} is not valid UTF-8 (a config file must be UTF-8 text)",
            bad.join(" ")
        ),
    }
}

/// The spec of [`DEFAULT_CONFIG`] on `topo`.
pub fn embedded_default(topo: &Topology) -> Result<PlatformSpec, ConfigError> {
    parse(DEFAULT_CONFIG, "<embedded default>", topo)
}

/// Whether a validation error only restates a problem already reported: a
/// reference to an island whose table was broken, or to any island when
/// `[auto]` made none.
fn is_consequence(e: &SpecError, out: &Outcome) -> bool {
    if let Some(rest) = e.key.strip_prefix("overlay.") {
        // An overlay naming a unit whose table was broken.
        let unit = rest.split_once(".units[").and_then(|(o, i)| {
            let i: usize = i.strip_suffix(']')?.parse().ok()?;
            out.spec
                .overlays
                .iter()
                .find(|x| x.name.as_str() == o)?
                .units
                .get(i)
        });
        return unit.is_some_and(|u| out.failed_units.contains(u));
    }
    if out.failed_islands.is_empty() && !out.auto_failed {
        return false;
    }
    if e.key.starts_with("recipe.") || e.key == "apps.islands" {
        // Island lists, and whether a mode fits, are moot while islands
        // are broken.
        return e.key.ends_with(".islands") || e.key.ends_with(']');
    }
    let target = if e.key == "default_island" {
        out.spec.default_island.as_ref()
    } else if let Some(unit) = e
        .key
        .strip_prefix("unit.")
        .and_then(|k| k.strip_suffix(".island"))
    {
        out.spec
            .units
            .iter()
            .find(|u| u.name.as_str() == unit)
            .map(|u| &u.island)
    } else {
        None
    };
    target.is_some_and(|t| out.auto_failed || out.failed_islands.contains(t))
}

/// A validation error as a problem; errors about generated islands point at
/// `[auto]`, the others at their key.
fn spec_problem(e: SpecError, out: &Outcome) -> Problem {
    let mut pos_key = e.key.clone();
    for name in &out.generated {
        let island = format!("island.{name}");
        if let Some(rest) = e.key.strip_prefix(&island) {
            if rest.is_empty() || rest.starts_with('.') {
                pos_key = format!("auto{rest}");
            }
        }
    }
    Problem {
        pos: Pos::Key(pos_key),
        key: Some(e.key),
        message: e.problem,
    }
}

fn diagnose(p: Problem, source: &str, lines: &LineIndex<'_>, keys: &KeyIndex) -> Diagnostic {
    let (offset, key) = match p.pos {
        Pos::Span(span) => (
            Some(span.start),
            p.key
                .or_else(|| keys.path_at(span.start).map(str::to_string)),
        ),
        Pos::Key(k) => (keys.locate(&k), p.key),
        Pos::Start => (None, p.key),
    };
    let (line, column) = offset.map_or((1, 1), |o| lines.position(o));
    Diagnostic {
        source: source.to_string(),
        line,
        column,
        key: key.as_deref().map(error::clip_key),
        message: error::clip_message(&p.message),
    }
}
