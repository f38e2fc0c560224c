//! Commands that need no daemon.

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use atoll_config::ConfigError;
use atoll_core::spec::PlatformSpec;

pub fn topology(sysfs_root: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let topo = atoll_topology::read_topology(sysfs_root)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&topo)?);
    } else {
        print!("{}", atoll_topology::render_text(&topo));
    }
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `atoll check-config`.
#[derive(Debug, clap::Args)]
pub struct CheckConfigArgs {
    /// The TOML file; `-` reads it from standard input. Without FILE: what
    /// `atoll daemon` reads without --config (/etc/atoll/atoll.toml if it
    /// exists, else the embedded default).
    #[arg(conflicts_with = "default")]
    file: Option<PathBuf>,
    /// Check the embedded default: the host partition on the first core,
    /// the rest as islands by topology.
    #[arg(long)]
    default: bool,
    /// Validate against the machine read from this sysfs root.
    #[arg(long, default_value = atoll_topology::DEFAULT_SYSFS_ROOT)]
    sysfs_root: PathBuf,
    /// Print JSON: `{"source", "ok": true, "spec", "effects"}`, or
    /// `{"source", "ok": false, "errors": [{"source", "line", "column",
    /// "key", "message"}]}` (exit status 1).
    #[arg(long)]
    json: bool,
}

/// Where the platform description comes from.
enum Source {
    Embedded,
    Stdin,
    File(PathBuf),
}

impl Source {
    fn of(a: &CheckConfigArgs) -> Self {
        match &a.file {
            _ if a.default => Self::Embedded,
            Some(f) if f == Path::new("-") => Self::Stdin,
            Some(f) => Self::File(f.clone()),
            None => {
                let f = PathBuf::from(crate::cmd_daemon::DEFAULT_CONFIG);
                if f.exists() {
                    Self::File(f)
                } else {
                    Self::Embedded
                }
            }
        }
    }

    /// How messages name it.
    fn name(&self) -> String {
        match self {
            Self::Embedded => "<embedded default>".into(),
            Self::Stdin => "<stdin>".into(),
            Self::File(f) => f.display().to_string(),
        }
    }
}

pub fn check_config(a: &CheckConfigArgs) -> anyhow::Result<ExitCode> {
    let topo = atoll_topology::read_topology(&a.sysfs_root)
        .with_context(|| format!("reading the machine from {}", a.sysfs_root.display()))?;
    let source = Source::of(a);
    let spec = match &source {
        Source::Embedded => atoll_config::embedded_default(&topo),
        Source::File(f) => atoll_config::load(f, &topo),
        Source::Stdin => {
            if std::io::stdin().is_terminal() {
                eprintln!(
                    "atoll: reading the platform description from standard input \
                     (end with Ctrl-D; the embedded default is --default)"
                );
            }
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .context("reading standard input")?;
            atoll_config::parse_bytes(&bytes, &source.name(), &topo)
        }
    };
    if a.json {
        let (doc, code) = json(&source.name(), &spec);
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(code);
    }
    match spec {
        Ok(spec) => {
            println!("{}: ok", source.name());
            print!("{}", atoll_config::summary(&spec));
            let mut effects = String::new();
            crate::render::effects(
                &mut effects,
                &atoll_core::effects::outside_effects(&spec, false),
            );
            print!("{effects}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprint!("{e}");
            if !e.to_string().ends_with('\n') {
                eprintln!();
            }
            Ok(ExitCode::from(1))
        }
    }
}

/// The `--json` document and the exit status.
fn json(source: &str, spec: &Result<PlatformSpec, ConfigError>) -> (serde_json::Value, ExitCode) {
    match spec {
        Ok(spec) => (
            serde_json::json!({
                "source": source,
                "ok": true,
                "spec": spec,
                "effects": atoll_core::effects::outside_effects(spec, false),
            }),
            ExitCode::SUCCESS,
        ),
        Err(e) => {
            let errors: Vec<serde_json::Value> = e
                .diagnostics
                .iter()
                .map(|d| {
                    serde_json::json!({
                        "source": d.source,
                        "line": d.line,
                        "column": d.column,
                        "key": d.key,
                        "message": d.message,
                    })
                })
                .collect();
            (
                serde_json::json!({ "source": source, "ok": false, "errors": errors }),
                ExitCode::from(1),
            )
        }
    }
}
