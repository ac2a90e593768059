//! Evictions and deletions the controller executed that its pod cache may not show yet.
//!
//! Between an eviction's 201 and the watch event that shows the pod terminating, the cache still counts the pod as
//! ready: the planner would then judge the workload healthier than it is. Each executed removal is remembered until
//! the cache catches up (or a bound passes while the pod watch works), so the SLA rule always counts it. With [`crate::sizes`], this is the
//! only in-memory state, and it only ever makes the planner more careful; after a restart, the pods themselves show
//! it.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use k8sm_planner::{ClusterView, InFlightEviction};

/// How long an entry may wait for the cache: far longer than watch latency, short enough to never wedge a workload.
/// Only while the pod watch works: a failing watch keeps the cache as it was, with the evicted pods Ready in it, so
/// an entry must stay until the cache really shows its pod going.
const MAX_AGE: Duration = Duration::from_secs(120);

#[derive(Debug, Default)]
pub struct InFlight {
    entries: HashMap<String, InFlightEviction>,
}

impl InFlight {
    /// Remembers an executed eviction or deletion of pod `pod_uid` of workload `owner_uid`.
    pub fn record(&mut self, pod_uid: &str, owner_uid: Option<String>, at: DateTime<Utc>) {
        self.entries.insert(
            pod_uid.to_owned(),
            InFlightEviction {
                pod_uid: pod_uid.to_owned(),
                owner_uid,
                at,
            },
        );
    }

    /// Drops the entries whose pod `view` (built from the caches, without in-flight entries) shows terminating or
    /// gone, and, unless `pod_watch_failing`, those past the bound.
    pub fn prune(&mut self, view: &ClusterView, now: DateTime<Utc>, pod_watch_failing: bool) {
        let alive: HashMap<&str, bool> = view
            .pods
            .iter()
            .map(|p| (p.uid.as_str(), !p.terminating))
            .collect();
        self.entries.retain(|uid, entry| {
            let young =
                pod_watch_failing || (now - entry.at).to_std().is_ok_and(|age| age < MAX_AGE);
            young && alive.get(uid.as_str()).copied().unwrap_or(false)
        });
    }

    pub fn snapshot(&self) -> Vec<InFlightEviction> {
        self.entries.values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8sm_planner::testing::{at, replica_set};

    fn view(pods: Vec<k8sm_planner::PodView>) -> ClusterView {
        ClusterView {
            pods,
            ..ClusterView::default()
        }
    }

    #[test]
    fn an_eviction_is_kept_until_the_cache_shows_the_pod_going() {
        let rs = replica_set("shop", "web", 3);
        let mut in_flight = InFlight::default();
        in_flight.record("shop/web-1", Some(rs.uid.clone()), at(0));
        in_flight.prune(&view(vec![rs.pod("web-1", "n1")]), at(1), false);
        assert_eq!(in_flight.len(), 1, "not terminating in the cache yet");
        in_flight.prune(
            &view(vec![rs.pod("web-1", "n1").terminating()]),
            at(1),
            false,
        );
        assert_eq!(in_flight.len(), 0);
        in_flight.record("shop/web-2", Some(rs.uid.clone()), at(0));
        in_flight.prune(&view(vec![]), at(1), false);
        assert_eq!(in_flight.len(), 0, "gone");
        in_flight.record("shop/web-3", Some(rs.uid.clone()), at(0));
        in_flight.prune(&view(vec![rs.pod("web-3", "n1")]), at(3), false);
        assert_eq!(in_flight.len(), 0, "past the bound");
    }

    #[test]
    fn an_eviction_is_kept_past_the_bound_while_the_pod_watch_fails() {
        let rs = replica_set("shop", "web", 3);
        let mut in_flight = InFlight::default();
        in_flight.record("shop/web-1", Some(rs.uid.clone()), at(0));
        // The frozen cache still shows the pod Ready, an hour later: it still counts as evicted.
        let frozen = view(vec![rs.pod("web-1", "n1")]);
        in_flight.prune(&frozen, at(60), true);
        assert_eq!(in_flight.len(), 1);
        // Once the watch works again, the fresh cache decides (here it shows the pod gone).
        in_flight.prune(&view(vec![]), at(61), false);
        assert_eq!(in_flight.len(), 0);
    }
}
