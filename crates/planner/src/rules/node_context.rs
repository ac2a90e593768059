//! What deciding the pods of one node reads besides the index: the node, its policy and the time.

use std::cell::Cell;

use chrono::{DateTime, Utc};
use k8sm_api::ExecutorUpgradePolicySpec;

use crate::{NodeView, Reason};

/// What a pod decision needs to know about its node and policy.
pub(crate) struct NodeContext<'a> {
    pub(crate) node: &'a NodeView,
    pub(crate) spec: &'a ExecutorUpgradePolicySpec,
    /// The policy's threshold, clamped to 1..=100.
    pub(crate) threshold: u8,
    /// When the node was marked, if known: the start of the unmanaged-pod and Job timeouts.
    pub(crate) incompatible_since: Option<DateTime<Utc>>,
    /// Decide, but act on nothing: each action becomes a wait for this reason (the policy is
    /// paused, or the node waits for a drain slot and is only reported).
    pub(crate) hold: Option<Reason>,
    /// A write of this pass to the node goes before its pods' calls, which wait for it: its
    /// evictions take none of the controller's calls in this pass ([`crate::Calls`]).
    pub(crate) written: bool,
    pub(crate) now: DateTime<Utc>,
    /// The earliest time after `now` at which a comparison made through [`Self::reached`] turns:
    /// until then, decisions made with this context read the clock the same way.
    pub(crate) turns: Cell<Option<DateTime<Utc>>>,
}

impl NodeContext<'_> {
    /// Whether `at` has come; if not, notes it among the times at which the decisions turn.
    pub(crate) fn reached(&self, at: DateTime<Utc>) -> bool {
        if self.now >= at {
            return true;
        }
        if self.turns.get().is_none_or(|turns| at < turns) {
            self.turns.set(Some(at));
        }
        false
    }

    /// When the unmanaged-pod timeout of this node expires (plus
    /// [`k8sm_api::CLOCK_SKEW_ALLOWANCE`]): `None` without a timeout or a known mark time.
    pub(crate) fn timeout_deadline(&self) -> Option<DateTime<Utc>> {
        let timeout =
            chrono::Duration::from_std(self.spec.unmanaged_pods.timeout.as_ref()?.as_duration())
                .ok()?;
        self.incompatible_since?
            .checked_add_signed(timeout)?
            .checked_add_signed(chrono::Duration::from_std(k8sm_api::CLOCK_SKEW_ALLOWANCE).ok()?)
    }
}
