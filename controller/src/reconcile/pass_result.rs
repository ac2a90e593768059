//! What one pass leaves for the next, and why a node's actions wait.

use std::collections::HashMap;
use std::time::Instant;

use chrono::Utc;

/// What one pass leaves for the next.
#[derive(Default)]
pub(crate) struct PassResult {
    /// Node writes the caches must show before the next plan: name → resourceVersion before the
    /// write and, for a patch, after it (a patch that changed nothing leaves it equal, and
    /// there is nothing to wait for).
    pub(crate) written_nodes: HashMap<String, (String, Option<String>)>,
    /// Policy writes (status, deleted-node records) the caches must show before the next plan,
    /// likewise.
    pub(crate) written_policies: HashMap<String, (String, Option<String>)>,
    /// Deployment writes (surge moves), by namespace and name, likewise: a plan on a cache without
    /// the move's record would start the same move again.
    pub(crate) written_deployments: HashMap<(String, String), (String, Option<String>)>,
    /// Plan again then, even without a change.
    pub(crate) wake_at: Option<chrono::DateTime<Utc>>,
    /// Plan again soon (see [`RETRY_AFTER`]).
    pub(crate) retry_soon: bool,
    /// Plan again then: the earliest end of a backoff that withheld an action of this pass, or the
    /// moment a failing watch becomes stale.
    pub(crate) retry_at: Option<Instant>,
    /// Pod actions were not launched, or pods wait, for want of a free call: plan again when a call
    /// answers.
    pub(crate) deferred: bool,
}

impl PassResult {
    pub(crate) fn retry_at(&mut self, at: Instant) {
        self.retry_at = Some(self.retry_at.map_or(at, |earlier| earlier.min(at)));
    }
}

/// Why the actions of a node wait for a later pass.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Hold {
    /// The node was written once in this pass, or its write was overtaken by a change: plan again
    /// soon.
    Soon,
    /// Its action failed or backs off (until then), or the view is stale (`None`: until a watch
    /// recovers).
    Later(Option<Instant>),
    /// A write of the node is on its way (see [`writes`]): its answer wakes the loop.
    Writing,
}
