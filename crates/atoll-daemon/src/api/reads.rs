//! Reads answered by the API threads from what the loop published
//! ([`crate::publish`]), without the loop: `status`, `why`, `overlays`,
//! `apps` and `app_poll`. Who may read what is as the loop would decide:
//! anyone may read the first four; an application's assignment only its
//! owner and root.

use atoll_proto::{ErrorCode, Reply, Request};

use crate::command::Caller;
use crate::publish::Board;

/// The answer to `request` from `board`, or `None` when it is not a read
/// (the loop answers it). `wake` asks the loop for a new status.
pub(super) fn answer(
    board: &Board,
    wake: &dyn Fn(),
    caller: Caller,
    request: &Request,
) -> Option<Result<Reply, (ErrorCode, String)>> {
    Some(match request {
        Request::Status {} => match board.status(wake) {
            Some(s) => Ok(Reply::Status(Box::new((*s).clone()))),
            None => Err((
                ErrorCode::Backend,
                "the control loop did not publish a status in time".into(),
            )),
        },
        Request::Why { subject, limit } => Ok(Reply::Decisions {
            decisions: board
                .decisions()
                .query(subject.as_deref(), limit.unwrap_or(50)),
        }),
        Request::Overlays {} => match &board.view().overlays {
            Some(Ok(overlays)) => Ok(Reply::Overlays {
                overlays: overlays.clone(),
            }),
            Some(Err(why)) => Err((ErrorCode::BadRequest, format!("coordination is off: {why}"))),
            None => return None,
        },
        Request::Apps {} => Ok(Reply::Apps {
            apps: board.view().apps.iter().map(|a| a.status.clone()).collect(),
        }),
        Request::AppPoll { app, after: _ } => {
            let view = board.view();
            let Some(a) = view.apps.iter().find(|a| a.status.app == *app) else {
                return Some(Err((ErrorCode::NotFound, format!("no application {app}"))));
            };
            if !caller.is_root() && caller.uid != a.uid {
                return Some(Err((
                    ErrorCode::PermissionDenied,
                    format!(
                        "application {app} (pid {}) belongs to uid {}, not to the caller (uid {})",
                        a.status.pid, a.uid, caller.uid
                    ),
                )));
            }
            Ok(Reply::AppAssignment(a.status.assignment.clone()))
        }
        _ => return None,
    })
}
