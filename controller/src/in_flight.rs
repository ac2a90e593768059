//! Evictions and deletions the controller executed that its pod cache may not show yet, or whose pod is not
//! replaced yet.
//!
//! Between an eviction's 201 and the watch event that shows the pod terminating, the cache still counts the pod as
//! ready: the planner would then judge the workload healthier than it is. Each executed removal is remembered until
//! the cache catches up (or a bound passes), so the SLA rule always counts it.
//!
//! For a controller of a kind k8sm does not know (an operator's custom resource), the planner infers the size from
//! the pods it sees: once the evicted pod is gone and before its replacement exists, the controller would look one
//! pod smaller, and healthy. Such an eviction is remembered until the cache shows as many of the controller's pods
//! as there were before it (`Eviction::replaced_at`), or a longer bound passes.
//!
//! This is the only in-memory state, and it only ever makes the planner more careful; after a restart, the pods
//! themselves show what is terminating (only the brief gap between a pod gone and its replacement created is
//! forgotten).

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use k8sm_planner::{ClusterView, InFlightEviction, live_pods_by_workload};

/// How long an entry may wait for the cache: far longer than watch latency, short enough to never wedge a workload.
const MAX_AGE: Duration = Duration::from_secs(120);
/// How long an eviction of an unknown-kind controller's pod may wait for its replacement: operators recreate pods
/// within seconds to minutes; one that never does (it was scaled down) holds k8sm back no longer than this.
const MAX_UNREPLACED_AGE: Duration = Duration::from_secs(600);

#[derive(Debug)]
struct Entry {
    eviction: InFlightEviction,
    /// Keep until the workload has this many live pods again.
    replaced_at: Option<u32>,
}

#[derive(Debug, Default)]
pub struct InFlight {
    entries: HashMap<String, Entry>,
}

impl InFlight {
    /// Remembers an executed eviction or deletion of pod `pod_uid` of workload `owner_uid`.
    pub fn record(
        &mut self,
        pod_uid: &str,
        owner_uid: Option<String>,
        replaced_at: Option<u32>,
        at: DateTime<Utc>,
    ) {
        self.entries.insert(
            pod_uid.to_owned(),
            Entry {
                eviction: InFlightEviction {
                    pod_uid: pod_uid.to_owned(),
                    owner_uid,
                    at,
                },
                replaced_at,
            },
        );
    }

    /// Drops the entries that `view` (built from the caches, without in-flight entries) makes redundant, and those
    /// past their bound.
    pub fn prune(&mut self, view: &ClusterView, now: DateTime<Utc>) {
        let alive: HashMap<&str, bool> = view
            .pods
            .iter()
            .map(|p| (p.uid.as_str(), !p.terminating))
            .collect();
        let live = live_pods_by_workload(view);
        self.entries.retain(|uid, entry| {
            let age = (now - entry.eviction.at).to_std().unwrap_or_default();
            // The cache does not show the eviction yet: keep it, whatever kind of workload.
            if alive.get(uid.as_str()).copied().unwrap_or(false) {
                return age < MAX_AGE;
            }
            match (entry.replaced_at, &entry.eviction.owner_uid) {
                (Some(before), Some(owner)) => {
                    age < MAX_UNREPLACED_AGE && live.get(owner).copied().unwrap_or(0) < before
                }
                _ => false,
            }
        });
    }

    pub fn snapshot(&self) -> Vec<InFlightEviction> {
        self.entries.values().map(|e| e.eviction.clone()).collect()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8sm_planner::OwnerKind;
    use k8sm_planner::testing::{at, owner, replica_set};

    fn view(pods: Vec<k8sm_planner::PodView>) -> ClusterView {
        ClusterView {
            pods,
            ..ClusterView::default()
        }
    }

    #[test]
    fn a_known_workloads_eviction_is_kept_until_the_cache_shows_the_pod_going() {
        let rs = replica_set("shop", "web", 3);
        let mut in_flight = InFlight::default();
        in_flight.record("shop/web-1", Some(rs.uid.clone()), None, at(0));
        in_flight.prune(&view(vec![rs.pod("web-1", "n1")]), at(1));
        assert_eq!(in_flight.len(), 1, "not terminating in the cache yet");
        in_flight.prune(&view(vec![rs.pod("web-1", "n1").terminating()]), at(1));
        assert_eq!(in_flight.len(), 0);
        in_flight.record("shop/web-2", Some(rs.uid.clone()), None, at(0));
        in_flight.prune(&view(vec![rs.pod("web-2", "n1")]), at(3));
        assert_eq!(in_flight.len(), 0, "past the bound");
    }

    #[test]
    fn an_unknown_kinds_eviction_is_kept_until_the_pod_is_replaced() {
        let kafka = owner(
            OwnerKind::Other("KafkaNodePool".into()),
            "k",
            "brokers",
            None,
        );
        let mut in_flight = InFlight::default();
        // Three live brokers before the eviction of broker-0.
        in_flight.record("k/broker-0", Some(kafka.uid.clone()), Some(3), at(0));
        let others = || vec![kafka.pod("broker-1", "n1"), kafka.pod("broker-2", "n2")];
        let mut pods = others();
        pods.push(kafka.pod("broker-0", "n1").terminating());
        in_flight.prune(&view(pods), at(1));
        assert_eq!(in_flight.len(), 1, "terminating: not replaced");
        in_flight.prune(&view(others()), at(2));
        assert_eq!(in_flight.len(), 1, "gone: not replaced");
        let mut pods = others();
        pods.push(kafka.pod("broker-0-new", "n3").not_ready());
        in_flight.prune(&view(pods), at(3));
        assert_eq!(
            in_flight.len(),
            0,
            "replaced (Ready or not: it counts in the size)"
        );
        in_flight.record("k/broker-1", Some(kafka.uid.clone()), Some(3), at(0));
        in_flight.prune(&view(others()), at(11));
        assert_eq!(
            in_flight.len(),
            0,
            "never replaced: dropped after its bound"
        );
    }
}
