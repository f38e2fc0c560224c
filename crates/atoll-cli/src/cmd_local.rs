//! Commands that need no daemon.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

pub fn topology(sysfs_root: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let topo = atoll_topology::read_topology(sysfs_root)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&topo)?);
    } else {
        print!("{}", atoll_topology::render_text(&topo));
    }
    Ok(ExitCode::SUCCESS)
}

pub fn check_config(file: &Path, sysfs_root: &Path) -> anyhow::Result<ExitCode> {
    let topo = atoll_topology::read_topology(sysfs_root)
        .with_context(|| format!("reading the machine from {}", sysfs_root.display()))?;
    let spec = if file == Path::new("-") {
        atoll_config::embedded_default(&topo)
    } else {
        atoll_config::load(file, &topo)
    };
    match spec {
        Ok(spec) => {
            println!("{}: ok", file.display());
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
