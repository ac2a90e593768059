//! Evictions and deletions the controller executed that its pod cache may not show yet.
//!
//! Between an eviction's 201 and the watch event that shows the pod terminating, the cache still counts the pod as
//! ready: the planner would then judge the owner healthier than it is. Each executed removal is remembered until the
//! cache catches up (or a bound passes), so the SLA rule always counts it. This is the only in-memory state, and it
//! only ever makes the planner more careful; after a restart, the pods themselves show it.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::Store;

use k8sm_planner::InFlightEviction;

/// How long an entry may wait for the cache: far longer than watch latency, short enough to never wedge an owner.
const MAX_AGE: Duration = Duration::from_secs(120);

#[derive(Debug, Default)]
pub struct InFlight {
    entries: HashMap<String, InFlightEviction>,
}

impl InFlight {
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

    /// Drops entries whose pod the cache shows terminating or gone, and entries older than the bound.
    pub fn prune(&mut self, pods: &Store<Pod>, now: DateTime<Utc>) {
        let alive: HashMap<String, bool> = pods
            .state()
            .iter()
            .filter_map(|p| {
                Some((
                    p.metadata.uid.clone()?,
                    p.metadata.deletion_timestamp.is_none(),
                ))
            })
            .collect();
        self.entries.retain(|uid, entry| {
            let young = (now - entry.at).to_std().is_ok_and(|age| age < MAX_AGE);
            young && alive.get(uid).copied().unwrap_or(false)
        });
    }

    pub fn snapshot(&self) -> Vec<InFlightEviction> {
        self.entries.values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }
}
