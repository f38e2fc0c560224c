//! Commands that ask a running daemon.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use atoll_client::Client;

use crate::render;

/// `--watch`'s interval when given without a value, seconds.
pub const WATCH_DEFAULT: &str = "2";

/// Seconds between two `status --watch` redraws: 0.05 to a day.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.05..=86_400.0).contains(&v) => Ok(Duration::from_secs_f64(v)),
        _ => Err(format!("{s:?}: expected seconds between 0.05 and 86400")),
    }
}

/// `atoll status [--json] [--watch [SECONDS]]`. With `--watch`, asks again
/// every interval until interrupted (or until standard output is closed):
/// on a terminal each report replaces the last; with `--json`, one compact
/// JSON document per line.
pub fn status(socket: &Path, json: bool, watch: Option<Duration>) -> anyhow::Result<ExitCode> {
    let Some(every) = watch else {
        let report = Client::connect(socket)?.status()?;
        if json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            print!("{}", render::status(&report));
        }
        return Ok(ExitCode::SUCCESS);
    };
    let tty = std::io::stdout().is_terminal();
    loop {
        // A connection per report: an idle one would be closed by the
        // daemon between long intervals.
        let report = Client::connect(socket)?.status()?;
        let text = if json {
            serde_json::to_string(&report)? + "\n"
        } else if tty {
            format!(
                "\x1b[H\x1b[2Jevery {:.2}s: atoll status (Ctrl-C to stop)\n\n{}",
                every.as_secs_f64(),
                render::status(&report)
            )
        } else {
            render::status(&report) + "\n"
        };
        let mut out = std::io::stdout().lock();
        match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(ExitCode::SUCCESS),
            Err(e) => return Err(e.into()),
        }
        drop(out);
        std::thread::sleep(every);
    }
}

/// Prints `value` as pretty JSON.
fn print_json(value: &serde_json::Value) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// What `adopt` did, as `adopt --json` and `run --json` print it.
pub fn adopted_json(pid: u32, a: &atoll_client::Adopted) -> serde_json::Value {
    serde_json::json!({
        "pid": pid,
        "unit": a.unit,
        "island": a.island,
        "created": a.created,
    })
}

pub fn adopt(
    socket: &Path,
    unit: &str,
    pid: u32,
    island: Option<&str>,
    network: Option<atoll_proto::runtime::NetClassSettings>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let a = Client::connect(socket)?.adopt_with_class(unit, pid, island, network)?;
    if json {
        print_json(&adopted_json(pid, &a))?;
        return Ok(ExitCode::SUCCESS);
    }
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
/// changed (`--json`: `{"changes": [...]}`). A bad configuration is the
/// error (and changes nothing).
pub fn reload(socket: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let mut client = Client::connect(socket)?;
    let changes = client.reload()?;
    if json {
        print_json(&serde_json::json!({ "changes": changes }))?;
    } else if changes.is_empty() {
        println!("atoll reloaded: the configuration is unchanged");
    } else {
        println!("atoll reloaded:");
        for c in &changes {
            println!("  {c}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `atoll stop`: exit status 1 when teardown left something (`--json`:
/// `{"stopped": true, "left": [...]}`).
pub fn stop(socket: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let mut client = Client::connect(socket)?;
    client.set_timeout(Some(STOP_WAIT))?;
    let left = client.stop_and_wait()?;
    // The daemon removes its socket once it has answered.
    let t = Instant::now();
    while socket.exists() && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let code = if left.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    };
    if json {
        print_json(&serde_json::json!({ "stopped": true, "left": left }))?;
    } else if left.is_empty() {
        println!("atoll stopped: processes returned, cgroups removed");
    } else {
        eprintln!("atoll stopped, but teardown left:");
        for l in &left {
            eprintln!("  {l}");
        }
    }
    Ok(code)
}
