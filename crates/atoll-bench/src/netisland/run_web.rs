//! One configuration of the web scenario once (see [`super::super::web`]).
//!
//! Order: the bulk sink (namespace), the back end and the hog (host side,
//! island CPUs), half a second, then the front end (namespace) and the
//! bulk sender together; the reports once they finish.

use std::time::Duration;

use atoll_core::coord::Resource;

use super::super::web::{parse_front, WebSample, BACK, FRONT, OVERLAY};
use super::super::{Config, Settings};
use super::{Bench, GRACE, TAIL_S};
use crate::error::BenchError;
use crate::interrupt;
use crate::isolation::daemon::Daemon;
use crate::netisland::rig::Rig;
use crate::procs::Proc;

/// `web-front`'s `--tune` value for `tunes`.
pub(super) fn tune_arg(tunes: &[Resource]) -> String {
    tunes
        .iter()
        .map(|r| crate::worker::tune_name(*r))
        .collect::<Vec<_>>()
        .join(",")
}

/// The back end's TCP port on the host end.
const WEB_PORT: u16 = 47_003;

impl Bench<'_> {
    /// The web tier once under `daemon` (none for `none`).
    pub(super) fn once_web(
        &self,
        rig: &Rig,
        daemon: Option<&Daemon>,
        config: Config,
        s: &Settings,
    ) -> Result<WebSample, BenchError> {
        let n = |v: f64| format!("{v}");
        let listen = s.seconds + 0.5 + TAIL_S;
        let sink = self.bulk_sink(rig, listen)?;
        let back = Proc::spawn(
            "web-back (back)",
            self.worker(
                daemon,
                Some(BACK),
                None,
                "web-back",
                &[
                    "--port".into(),
                    WEB_PORT.to_string(),
                    "--seconds".into(),
                    n(listen),
                ],
            ),
        )?;
        let hog = self.hog(daemon, listen)?;
        interrupt::sleep(Duration::from_millis(500))?;
        let mut args = vec![
            "--addr".into(),
            format!("{}:{WEB_PORT}", rig.names.host_ip),
            "--seconds".into(),
            n(s.seconds),
        ];
        args.extend(s.web.front_args());
        if let (true, Some(d)) = (config.coordinated(), daemon) {
            args.extend([
                "--overlay".into(),
                OVERLAY.into(),
                "--unit".into(),
                BACK.into(),
                "--socket".into(),
                d.socket().display().to_string(),
                "--tune".into(),
                tune_arg(config.tunes()),
            ]);
        }
        let front = Proc::spawn(
            "web-front (front)",
            self.worker(daemon, Some(FRONT), Some(rig), "web-front", &args),
        )?;
        let blast = self.bulk_blast(daemon, rig, s.seconds)?;
        let wait = GRACE + Duration::from_secs_f64(listen);
        let front = front.wait(wait)?.report("web-front")?;
        blast.wait(wait)?.report("udp-blast")?;
        back.wait(wait)?.report("web-back")?;
        let sink = sink.wait(wait)?.report("udp-sink")?;
        let hog = hog.wait(wait)?.report("spin (hog)")?;
        let mut sample = parse_front(&front).map_err(|reason| BenchError::Setup {
            what: "reading the web-front report".into(),
            reason,
        })?;
        sample.bulk_bytes = sink["bytes"].as_u64().unwrap_or(0);
        sample.hog_chunks_per_s = hog["chunks_per_s"].as_f64().unwrap_or(0.0);
        Ok(sample)
    }
}
