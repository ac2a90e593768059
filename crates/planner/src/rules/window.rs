//! The policy's maintenance window in one pass (`spec.window`, docs/design.md §5.1): whether nodes
//! may be admitted and executors told to restart now, whether draining nodes hold, and when that
//! changes next.

use chrono::{DateTime, Utc};
use k8sm_api::{ExecutorUpgradePolicySpec, InFlight, WindowState};

use crate::Reason;

/// What the window allows in this pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Gate {
    /// Nodes may be admitted and executors told to restart.
    pub(crate) open: bool,
    /// Nothing moves on draining nodes (closed, with `inFlight: Hold`).
    pub(crate) hold_in_flight: bool,
    /// Where the window stands, for the status; `None` without a window or with one that cannot be
    /// read.
    pub(crate) state: Option<WindowState>,
    /// The condition a closed or unreadable window puts on the policy.
    pub(crate) condition: Option<(Reason, String)>,
    /// What a node waiting for the window is told.
    pub(crate) waits: String,
}

impl Gate {
    /// When the window opens or closes next: the pass plans again then, even if nothing else
    /// changes.
    pub(crate) fn next_change(&self) -> Option<DateTime<Utc>> {
        match self.state? {
            WindowState::Open { closes } => Some(closes),
            WindowState::Closed { opens } => Some(opens),
        }
    }
}

/// The gate of `spec`'s window at `now`. A window that cannot be read (an unknown time zone) is
/// closed: k8sm does not disrupt at hours the operator may not have meant, and says what to fix.
pub(crate) fn gate(spec: &ExecutorUpgradePolicySpec, now: DateTime<Utc>) -> Gate {
    let Some(window) = &spec.window else {
        return Gate {
            open: true,
            hold_in_flight: false,
            state: None,
            condition: None,
            waits: String::new(),
        };
    };
    let hold_in_flight = window.in_flight == InFlight::Hold;
    let in_flight = match window.in_flight {
        InFlight::Finish => "nodes already draining finish draining",
        InFlight::Hold => "nothing moves on nodes already draining (inFlight Hold)",
    };
    match window.state(now) {
        Ok(state @ WindowState::Open { .. }) => Gate {
            open: true,
            hold_in_flight: false,
            state: Some(state),
            condition: None,
            waits: String::new(),
        },
        Ok(state @ WindowState::Closed { opens }) => {
            let opens = opens.to_rfc3339();
            Gate {
                open: false,
                hold_in_flight,
                state: Some(state),
                condition: Some((
                    Reason::OutsideWindow,
                    format!(
                        "outside the maintenance window ({window}): no node is admitted and no executor told to \
                         restart until it opens at {opens}; {in_flight}"
                    ),
                )),
                waits: format!(
                    "waits for the maintenance window ({window}), which opens at {opens}"
                ),
            }
        }
        Err(e) => Gate {
            open: false,
            hold_in_flight,
            state: None,
            condition: Some((
                Reason::InvalidPolicy,
                format!(
                    "{e}; until then the window counts as closed: no node is admitted and no executor told to \
                     restart; {in_flight}"
                ),
            )),
            waits: format!("waits for a maintenance window that can be read ({e})"),
        },
    }
}
