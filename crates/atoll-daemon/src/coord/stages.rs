//! Escalation of the proactive policy: from `tune` to `borrow_preferred`
//! to `borrow_any` when tuning has reached the island's capacity, and back
//! down (`release`) when the property holds with room to spare (see
//! [`policy::Stage`]).
//!
//! Every message goes through the platform manager like any other (backoff,
//! arbitration, escalation); the stage only chooses which one a report
//! sends. Each change of stage is said in the report's answer and logged;
//! the CPUs it moves are decisions whose reason names the stage.

use std::time::Duration;

use atoll_core::coord::{Message, OverlaySpec, Resource};
use atoll_core::Name;

use super::policy::Stage;
use super::Coordination;
use crate::compose::Composer;

/// `context` (` (p99 1500 us > 1000 us)`) with what the stage adds.
fn with_stage(context: &str, stage: Stage) -> String {
    let inner = context.trim().trim_start_matches('(').trim_end_matches(')');
    if inner.is_empty() {
        format!(
            " ({} after tuning reached the island's capacity)",
            stage.as_str()
        )
    } else {
        format!(
            " ({inner}; {} after tuning reached the island's capacity)",
            stage.as_str()
        )
    }
}

impl Coordination {
    /// The overlay's stage.
    pub(crate) fn stage(&self, overlay: &Name) -> Stage {
        self.overlays
            .get(overlay)
            .map_or_else(Stage::default, |s| s.stage)
    }

    fn set_stage(&mut self, overlay: &Name, stage: Stage, why: &str, said: &mut Vec<String>) {
        let Some(st) = self.overlays.get_mut(overlay) else {
            return;
        };
        if st.stage == stage {
            return;
        }
        tracing::info!(
            "overlay {overlay}: {} -> {}: {why}",
            st.stage.as_str(),
            stage.as_str()
        );
        said.push(format!(
            "{} -> {}: {why}",
            st.stage.as_str(),
            stage.as_str()
        ));
        st.stage = stage;
    }

    /// Another island of the overlay that has a CPU to lend now (the most
    /// lendable first, then configuration order).
    pub(crate) fn preferred_lender(
        &self,
        now: Duration,
        spec: &OverlaySpec,
        borrower: &Name,
    ) -> Option<Name> {
        let m = self.manager()?;
        let mut best: Option<(u32, &Name)> = None;
        for c in m.islands() {
            let own = spec.units.iter().any(|(i, _)| i == c.name());
            if !own || c.name() == borrower {
                continue;
            }
            let lendable = c.idle(now).lendable;
            if lendable > 0 && best.is_none_or(|(l, _)| lendable > l) {
                best = Some((lendable, c.name()));
            }
        }
        best.map(|(_, n)| n.clone())
    }

    /// Every unit's tune was refused at capacity: borrow a CPU into
    /// `borrower` (the most pressured unit's island) at the overlay's stage,
    /// escalating it. `None`: coordination is off.
    pub(super) fn borrow_stage(
        &mut self,
        now: Duration,
        spec: &OverlaySpec,
        borrower: &Name,
        context: &str,
        compose: &mut Composer,
        said: &mut Vec<String>,
    ) -> Option<()> {
        let overlay = &spec.name;
        if self.stage(overlay) == Stage::Tune {
            self.set_stage(
                overlay,
                Stage::BorrowPreferred,
                "every unit's tune was refused at its island's capacity",
                said,
            );
        }
        let msg = match self.stage(overlay) {
            Stage::Tune | Stage::BorrowPreferred => {
                match self.preferred_lender(now, spec, borrower) {
                    Some(island) => Message::BorrowPreferred {
                        resource: Resource::Cores,
                        overlay: overlay.clone(),
                        island,
                        amount: 1,
                    },
                    None => {
                        self.set_stage(
                            overlay,
                            Stage::BorrowAny,
                            "no other island of the overlay has a CPU to lend",
                            said,
                        );
                        Message::BorrowAny {
                            resource: Resource::Cores,
                            overlay: overlay.clone(),
                            amount: 1,
                        }
                    }
                }
            }
            Stage::BorrowAny => Message::BorrowAny {
                resource: Resource::Cores,
                overlay: overlay.clone(),
                amount: 1,
            },
        };
        let stage = self.stage(overlay);
        let reply = self.send(now, borrower, &msg, &with_stage(context, stage), compose)?;
        said.push(format!("{msg}: {reply}"));
        if let (Some(r), Some(next)) = (reply.reason(), stage.escalated()) {
            // The next report asks at the next stage (this sender backs
            // off now, so asking again at once would be refused).
            self.set_stage(
                overlay,
                next,
                &format!("{} refused: {r}", stage.as_str()),
                said,
            );
        }
        Some(())
    }

    /// The property holds with room to spare: give back the CPUs most
    /// recently borrowed for the overlay (one lender's) and step the stage
    /// down. `None` when nothing is borrowed (the stage is back at `tune`).
    pub(super) fn relax_stage(
        &mut self,
        now: Duration,
        overlay: &Name,
        context: &str,
        compose: &mut Composer,
    ) -> Option<String> {
        let mut said = Vec::new();
        let latest = self.manager().and_then(|m| {
            m.loans()
                .into_iter()
                .filter(|l| &l.overlay == overlay)
                .max_by_key(|l| (l.since, l.cpu))
        });
        let Some(loan) = latest else {
            self.set_stage(overlay, Stage::Tune, "nothing borrowed", &mut said);
            return None;
        };
        let msg = Message::Release {
            resource: Resource::Cores,
            overlay: overlay.clone(),
            island: loan.lender.clone(),
        };
        let reply = self.send(now, &loan.borrower, &msg, context, compose)?;
        said.push(format!("{msg}: {reply}"));
        let down = self.stage(overlay).relaxed();
        self.set_stage(
            overlay,
            down,
            "the property holds with room to spare",
            &mut said,
        );
        Some(said.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stage_joins_the_context() {
        assert_eq!(
            with_stage(" (p99 1500 us > 1000 us)", Stage::BorrowAny),
            " (p99 1500 us > 1000 us; borrow_any after tuning reached the island's capacity)"
        );
        assert_eq!(
            with_stage("", Stage::BorrowPreferred),
            " (borrow_preferred after tuning reached the island's capacity)"
        );
    }
}
