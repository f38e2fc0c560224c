//! Commands that ask a running daemon.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use atoll_client::Client;

use crate::render;

pub fn status(socket: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let report = Client::connect(socket)?.status()?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render::status(&report));
    }
    Ok(ExitCode::SUCCESS)
}

pub fn adopt(
    socket: &Path,
    unit: &str,
    pid: u32,
    island: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let a = Client::connect(socket)?.adopt(unit, pid, island)?;
    println!(
        "pid {pid} is in unit {} (island {}){}",
        a.unit,
        a.island,
        if a.created { ", created" } else { "" }
    );
    Ok(ExitCode::SUCCESS)
}

pub fn why(
    socket: &Path,
    subject: Option<&str>,
    limit: usize,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let decisions = Client::connect(socket)?.why(subject, Some(limit))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&decisions)?);
    } else {
        for d in &decisions {
            println!("{:>10.3}s  {d}", d.at.as_secs_f64());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// How long `atoll stop` waits for teardown to finish.
const STOP_WAIT: Duration = Duration::from_secs(60);

/// `atoll reload`: the daemon reads its configuration again; prints what
/// changed. A bad configuration is the error (and changes nothing).
pub fn reload(socket: &Path) -> anyhow::Result<ExitCode> {
    let mut client = Client::connect(socket)?;
    let changes = client.reload()?;
    if changes.is_empty() {
        println!("atoll reloaded: the configuration is unchanged");
    } else {
        println!("atoll reloaded:");
        for c in &changes {
            println!("  {c}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn stop(socket: &Path) -> anyhow::Result<ExitCode> {
    let mut client = Client::connect(socket)?;
    client.set_timeout(Some(STOP_WAIT))?;
    let left = client.stop_and_wait()?;
    // The daemon removes its socket once it has answered.
    let t = Instant::now();
    while socket.exists() && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if left.is_empty() {
        println!("atoll stopped: processes returned, cgroups removed");
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("atoll stopped, but teardown left:");
    for l in &left {
        eprintln!("  {l}");
    }
    Ok(ExitCode::FAILURE)
}
