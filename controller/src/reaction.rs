//! The controller's reaction time, from its own timestamps: how long after it observes a pod of a waiting workload
//! become Ready it sends that workload's next eviction (`k8sm_eviction_reaction_seconds`).
//!
//! Definition (one sample per eviction that ends a wait):
//! - a workload *waits* from the end of a pass whose plan has one of its pods waiting on the health rule
//!   (`WaitingForOwner`) or on a budget (`BlockedByPDB`), has one of its evictions planned but not sent (a full call
//!   pipeline, a backoff), or from an eviction of it that the apiserver refused, until its next eviction is sent, or
//!   until a pass plans neither a wait nor an eviction for it;
//! - while it waits, the first pod of it that the controller observes becoming Ready (a watch event that turns the
//!   pod's Ready condition True, stamped when the event is applied to the pod cache; pods seen in a relist are not
//!   stamped) starts the clock;
//! - the next eviction of the workload stops it when the call is launched (right before the request is sent).
//!
//! A workload whose eviction follows without a Ready pod in between (e.g. a budget that freed up) gives no sample,
//! and neither does one that stops waiting without an eviction. The first Ready pod is used, as the bench's own
//! recorder does: when a workload needs two pods back, the figure includes the wait for the second.
//!
//! Workloads are named by UID as the planner names them: a Deployment for a pod of one of its ReplicaSets.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::cached_pod::CachedPod;

#[derive(Debug, Default)]
struct State {
    /// Workloads waiting for a pod to become Ready.
    waiting: HashSet<String>,
    /// Waiting workloads → when the first pod of theirs was observed becoming Ready since they started waiting.
    ready_at: HashMap<String, Instant>,
}

/// Shared by the pod watch (which stamps Ready pods) and the loop (which says who waits, and sends evictions).
#[derive(Clone, Debug, Default)]
pub struct Reaction {
    state: Arc<Mutex<State>>,
}

impl Reaction {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means a panic elsewhere while holding it; the maps are always consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A pod of workload `workload` was observed becoming Ready at `at`.
    pub fn became_ready(&self, workload: &str, at: Instant) {
        let mut state = self.lock();
        if state.waiting.contains(workload) {
            state.ready_at.entry(workload.to_owned()).or_insert(at);
        }
    }

    /// An eviction of `workload` is sent at `at`: the reaction time, if the workload waited and a pod of it became
    /// Ready meanwhile.
    pub fn evicting(&self, workload: &str, at: Instant) -> Option<Duration> {
        let mut state = self.lock();
        state.waiting.remove(workload);
        let ready = state.ready_at.remove(workload)?;
        Some(at.saturating_duration_since(ready))
    }

    /// An eviction of `workload` was refused: it waits (until a pod of it becomes Ready, or the budget frees up).
    pub fn refused(&self, workload: &str) {
        self.lock().waiting.insert(workload.to_owned());
    }

    /// After a pass: the workloads that wait now (see the module's definition). The others stop waiting, except
    /// those refused since (`refused` is called after the pass that planned their eviction).
    pub fn waiting(&self, workloads: HashSet<String>) {
        let mut state = self.lock();
        state.ready_at.retain(|uid, _| workloads.contains(uid));
        state.waiting = workloads;
    }

    /// Stamps a pod watch event, before it is applied to `pods`: a pod whose Ready condition turns True.
    pub fn observe_pod(
        &self,
        pods: &Store<CachedPod>,
        replica_sets: &Store<ReplicaSet>,
        pod: &CachedPod,
    ) {
        if !is_ready(pod) {
            return;
        }
        let key = ObjectRef::from_obj(pod);
        if pods
            .get(&key)
            .is_some_and(|old| is_ready(&old) && old.uid() == pod.uid())
        {
            return;
        }
        let at = Instant::now();
        if let Some(workload) = workload_uid(pod, replica_sets) {
            self.became_ready(&workload, at);
        }
    }
}

/// Ready and not on its way out, as the planner counts a pod ready (`k8sm_view::pod`).
fn is_ready(pod: &CachedPod) -> bool {
    !pod.view.terminating && pod.view.ready
}

/// The workload a pod counts for, as the planner names it (`workload_uid` in the planner): its controller, or for a
/// ReplicaSet's pod that ReplicaSet's own controller (a Deployment).
fn workload_uid(pod: &CachedPod, replica_sets: &Store<ReplicaSet>) -> Option<String> {
    let controller = pod.view.controller.as_ref()?;
    if controller.kind == "ReplicaSet" {
        let key = ObjectRef::<ReplicaSet>::new(&controller.name).within(&pod.view.namespace);
        if let Some(rs) = replica_sets.get(&key)
            && rs.uid().as_deref() == Some(controller.uid.as_str())
            && let Some(owner) = rs
                .owner_references()
                .iter()
                .find(|r| r.controller == Some(true))
        {
            return Some(owner.uid.clone());
        }
    }
    Some(controller.uid.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(uids: &[&str]) -> HashSet<String> {
        uids.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_ready_pod_of_a_waiting_workload_starts_the_clock_and_its_next_eviction_stops_it() {
        let reaction = Reaction::default();
        let t0 = Instant::now();
        // Not waiting yet: nothing to measure.
        reaction.became_ready("web", t0);
        assert_eq!(reaction.evicting("web", t0 + Duration::from_secs(1)), None);
        reaction.waiting(set(&["web"]));
        reaction.became_ready("web", t0 + Duration::from_millis(100));
        // A second Ready pod does not move the start.
        reaction.became_ready("web", t0 + Duration::from_millis(300));
        // Still waiting after a pass (it needed two back): the first stamp stays.
        reaction.waiting(set(&["web", "db"]));
        assert_eq!(
            reaction.evicting("web", t0 + Duration::from_millis(350)),
            Some(Duration::from_millis(250))
        );
        // One sample per wait.
        assert_eq!(reaction.evicting("web", t0 + Duration::from_secs(2)), None);
    }

    #[test]
    fn a_workload_that_stops_waiting_without_an_eviction_gives_no_sample() {
        let reaction = Reaction::default();
        let t0 = Instant::now();
        reaction.waiting(set(&["web"]));
        reaction.became_ready("web", t0);
        reaction.waiting(set(&[]));
        reaction.became_ready("web", t0 + Duration::from_secs(1));
        assert_eq!(reaction.evicting("web", t0 + Duration::from_secs(2)), None);
    }

    #[test]
    fn a_refused_eviction_makes_its_workload_wait() {
        let reaction = Reaction::default();
        let t0 = Instant::now();
        reaction.refused("web");
        reaction.became_ready("web", t0);
        assert_eq!(
            reaction.evicting("web", t0 + Duration::from_millis(40)),
            Some(Duration::from_millis(40))
        );
    }
}
