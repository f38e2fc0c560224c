//! The `slo` step: measured latencies in, reported to coordination as an
//! application would report them, best-effort levels moved (see
//! [`crate::slo`]); and `overlay_show`.

use std::time::Duration;

use atoll_core::Name;
use atoll_proto::Reply;

use super::{monitor, Controller};
use crate::command::Caller;
use crate::slo::SloError;

/// Who reports a measured latency: the daemon itself.
const DAEMON: Caller = Caller {
    uid: 0,
    gid: 0,
    pid: 0,
};

impl Controller {
    /// One epoch of the `slo` component.
    pub(super) fn measure_slos(&mut self, now: Duration) {
        let coord = &self.coord;
        let due = self.slo.step(
            now,
            &self.reg,
            &|o: &Name| coord.reported(o),
            &mut self.compose,
        );
        for (overlay, value) in due {
            let inp = crate::coord::Inputs {
                now,
                reg: &self.reg,
                mon: monitor(&self.env),
                procs: &*self.env.procs,
                loads: self.loads.all(),
            };
            if let Err(e) =
                self.coord
                    .report(&inp, DAEMON, overlay.as_str(), value, &mut self.compose)
            {
                tracing::warn!("slo: reporting {value} us for overlay {overlay}: {e}");
            }
        }
        self.carry_out_priorities(now);
    }

    /// Every latency overlay's measurement, for `status` and the metrics.
    pub(super) fn slo_statuses(&self) -> Vec<atoll_proto::slo::SloStatus> {
        let now = self.now();
        self.reg
            .spec()
            .overlays
            .iter()
            .chain(self.reg.runtime_overlays())
            .filter_map(|o| self.slo.status(now, o, self.coord.reported(&o.name)))
            .collect()
    }

    /// `overlay_show`: an overlay's latency as measured, its SLO and slack,
    /// the source's cost, and its best-effort units.
    pub(super) fn overlay_show(&self, overlay: &str) -> Result<Reply, SloError> {
        let Some(o) = self
            .reg
            .spec()
            .overlays
            .iter()
            .chain(self.reg.runtime_overlays())
            .find(|o| o.name.as_str() == overlay)
        else {
            return Err(SloError::NoOverlay(overlay.to_string()));
        };
        let status = self
            .slo
            .status(self.now(), o, self.coord.reported(&o.name))
            .ok_or_else(|| SloError::NotLatency(overlay.to_string()))?;
        Ok(Reply::OverlayShown(Box::new(status)))
    }
}
