//! The controller's reaction time (`k8sm_eviction_reaction_seconds`, defined in docs/design.md §8),
//! from its own timestamps: how long after it observes a pod of a waiting workload become Ready it
//! sends that workload's next eviction. Workloads are named by UID as the planner names them: a
//! Deployment for a pod of one of its ReplicaSets.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use k8sm_planner::PodView;

use crate::observe::cached_pod::CachedPod;
use crate::observe::pod_store::PodStore;

#[derive(Debug, Default)]
struct State {
    /// Workloads waiting for a pod to become Ready.
    waiting: HashSet<String>,
    /// Waiting workloads → when pods of theirs were observed becoming Ready since the last pass
    /// that saw them and still planned the workload waiting, earliest first.
    ready_at: HashMap<String, Vec<Instant>>,
    /// Workloads whose eviction was planned and not sent (no free call) → when the first pass that
    /// planned it read its view: the part of a reaction spent waiting for a call.
    unsent_since: HashMap<String, Instant>,
}

/// One reaction sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reacted {
    /// From the Ready pod to the eviction sent.
    pub took: Duration,
    /// Of which the eviction waited, planned, for a free call (from the view of the first pass
    /// that planned it).
    pub queued: Option<Duration>,
}

/// Shared by the pod watch (which stamps Ready pods) and the loop (which says who waits, and sends
/// evictions). Ready pods are stamped when their watch event is applied to the pod cache (a relist
/// stamps none); the clock starts at the first stamp a later pass did not find insufficient and
/// stops when the next eviction that costs a Ready pod is launched, so a sample includes the wait
/// for a free call. A pass's view is read right after its start is taken: a stamp microseconds
/// before that start whose pod reaches the cache after the view was read is dropped, starting the
/// clock at a later Ready pod (or giving no sample) in that rare case.
#[derive(Clone, Debug, Default)]
pub struct Reaction {
    state: Arc<Mutex<State>>,
}

impl Reaction {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means a panic elsewhere while holding it; the maps are always
        // consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A pod of workload `workload` was observed becoming Ready at `at`.
    pub fn became_ready(&self, workload: &str, at: Instant) {
        let mut state = self.lock();
        if state.waiting.contains(workload) {
            state
                .ready_at
                .entry(workload.to_owned())
                .or_default()
                .push(at);
        }
    }

    /// An eviction of `workload` is sent at `at`, costing it a Ready pod when `costs_ready`: the
    /// reaction, if the workload waited and a pod of it became Ready meanwhile. An eviction of
    /// a pod that is not Ready changes nothing here.
    pub fn evicting(&self, workload: &str, at: Instant, costs_ready: bool) -> Option<Reacted> {
        if !costs_ready {
            return None;
        }
        let mut state = self.lock();
        state.waiting.remove(workload);
        let unsent_since = state.unsent_since.remove(workload);
        let ready = *state.ready_at.remove(workload)?.first()?;
        Some(Reacted {
            took: at.saturating_duration_since(ready),
            queued: unsent_since.map(|since| at.saturating_duration_since(since.max(ready))),
        })
    }

    /// The waiting workloads with a pod observed becoming Ready since they started waiting (or
    /// since the last pass that still planned them waiting): their next eviction continues
    /// their upgrade.
    pub fn continuing(&self) -> HashSet<String> {
        self.lock().ready_at.keys().cloned().collect()
    }

    /// An eviction of `workload` was refused: it waits (until a pod of it becomes Ready, or the
    /// budget frees up).
    pub fn refused(&self, workload: &str) {
        self.lock().waiting.insert(workload.to_owned());
    }

    /// After a pass whose view was read from the caches after `observed`: the workloads that wait
    /// now, with a pod waiting on the health rule or a budget (`waits`) or an eviction planned
    /// and not sent (`unsent`); see docs/design.md §8. The others stop waiting, except
    /// those refused since (`refused` is called after the pass that planned their eviction). A
    /// workload in `waits` and not in `unsent` needs more than the Ready pods that
    /// pass saw: its stamps from before `observed` go.
    pub fn waiting(&self, waits: HashSet<String>, unsent: HashSet<String>, observed: Instant) {
        let mut state = self.lock();
        state.ready_at.retain(|uid, stamps| {
            if unsent.contains(uid) {
                return true;
            }
            if !waits.contains(uid) {
                return false;
            }
            stamps.retain(|&at| at >= observed);
            !stamps.is_empty()
        });
        state.unsent_since.retain(|uid, _| unsent.contains(uid));
        for uid in &unsent {
            if !state.unsent_since.contains_key(uid) {
                state.unsent_since.insert(uid.clone(), observed);
            }
        }
        let mut waiting = waits;
        waiting.extend(unsent);
        state.waiting = waiting;
    }

    /// Stamps a pod watch event, before it is applied to `pods`: a pod whose Ready condition turns
    /// True.
    pub fn observe_pod(&self, pods: &PodStore, replica_sets: &Store<ReplicaSet>, pod: &CachedPod) {
        if !is_ready(&pod.view) {
            return;
        }
        if pods
            .view(&pod.view.namespace, &pod.view.name)
            .is_some_and(|old| is_ready(&old) && old.uid == pod.view.uid)
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
fn is_ready(pod: &PodView) -> bool {
    !pod.terminating && pod.ready
}

/// The workload a pod counts for, as the planner names it (`workload_uid` in the planner): its
/// controller, or for a ReplicaSet's pod that ReplicaSet's own controller (a Deployment).
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
        assert_eq!(
            reaction.evicting("web", t0 + Duration::from_secs(1), true),
            None
        );
        reaction.waiting(set(&["web"]), set(&[]), t0);
        reaction.became_ready("web", t0 + Duration::from_millis(100));
        // A second Ready pod does not move the start.
        reaction.became_ready("web", t0 + Duration::from_millis(300));
        // Its eviction planned and not sent (no free call): the stamps stay.
        reaction.waiting(set(&["db"]), set(&["web"]), t0 + Duration::from_millis(310));
        assert_eq!(
            reaction.evicting("web", t0 + Duration::from_millis(350), true),
            Some(Reacted {
                took: Duration::from_millis(250),
                queued: Some(Duration::from_millis(40)),
            })
        );
        // One sample per wait.
        assert_eq!(
            reaction.evicting("web", t0 + Duration::from_secs(2), true),
            None
        );
    }

    #[test]
    fn ready_pods_a_pass_saw_while_it_still_planned_the_wait_do_not_start_the_clock() {
        let reaction = Reaction::default();
        let t0 = Instant::now();
        reaction.waiting(set(&["web"]), set(&[]), t0);
        // The first replacement is Ready, but the workload needs two back: the next pass (its view
        // read at +150 ms) still plans it waiting.
        reaction.became_ready("web", t0 + Duration::from_millis(100));
        reaction.waiting(set(&["web"]), set(&[]), t0 + Duration::from_millis(150));
        // A stamp after that pass's view stays through it.
        reaction.became_ready("web", t0 + Duration::from_millis(160));
        reaction.waiting(set(&["web"]), set(&[]), t0 + Duration::from_millis(155));
        reaction.became_ready("web", t0 + Duration::from_millis(170));
        assert_eq!(
            reaction.evicting("web", t0 + Duration::from_millis(200), true),
            Some(Reacted {
                took: Duration::from_millis(40),
                queued: None,
            })
        );
    }

    #[test]
    fn the_eviction_of_a_pod_that_is_not_ready_gives_no_sample_and_keeps_the_clock() {
        let reaction = Reaction::default();
        let t0 = Instant::now();
        reaction.waiting(set(&["web"]), set(&[]), t0);
        reaction.became_ready("web", t0 + Duration::from_millis(100));
        assert_eq!(
            reaction.evicting("web", t0 + Duration::from_secs(60), false),
            None
        );
        assert_eq!(
            reaction
                .evicting("web", t0 + Duration::from_millis(400), true)
                .map(|r| r.took),
            Some(Duration::from_millis(300))
        );
    }

    #[test]
    fn a_workload_that_stops_waiting_without_an_eviction_gives_no_sample() {
        let reaction = Reaction::default();
        let t0 = Instant::now();
        reaction.waiting(set(&["web"]), set(&[]), t0);
        reaction.became_ready("web", t0);
        reaction.waiting(set(&[]), set(&[]), t0);
        reaction.became_ready("web", t0 + Duration::from_secs(1));
        assert_eq!(
            reaction.evicting("web", t0 + Duration::from_secs(2), true),
            None
        );
    }

    #[test]
    fn a_refused_eviction_makes_its_workload_wait() {
        let reaction = Reaction::default();
        let t0 = Instant::now();
        reaction.refused("web");
        reaction.became_ready("web", t0);
        assert_eq!(
            reaction
                .evicting("web", t0 + Duration::from_millis(40), true)
                .map(|r| r.took),
            Some(Duration::from_millis(40))
        );
    }
}
