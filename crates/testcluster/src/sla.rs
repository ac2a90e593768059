//! The SLA watcher: follows the pods and workload controllers of a namespace through watches and
//! checks, at every change, that no workload's Ready pods fall below `min(ceil(t·d/100), d−1)`
//! (docs/design.md §5.3), the invariant k8sm promises. It judges from the cluster's own objects
//! only, never from anything k8sm reports, so a test cannot pass on k8sm's word.

mod objects;
mod state;
mod watch;

pub use state::bound;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use kube::Client;
use tokio::task::JoinHandle;

use state::State;
pub use state::WorkloadRecord;

/// Watches a namespace and checks the SLA invariant of its workloads once armed.
///
/// Workloads are those of docs/design.md §2: a ReplicaSet's pods count for the Deployment that
/// controls it (`d` its `spec.replicas`, Ready pods summed over its ReplicaSets); `d` follows the
/// watched objects, so a scale or a rollout moves the bound at once. DaemonSet, Job and unmanaged
/// pods, and workloads whose controller is being deleted, are not judged. A violation is a
/// descent, a change that took the Ready count down and ended below the bound: after a scale-up
/// the Ready pods are below the new bound through no one's fault, but a further loss is not.
pub struct SlaWatcher {
    state: Arc<Mutex<State>>,
    tasks: Vec<JoinHandle<()>>,
}

impl SlaWatcher {
    /// Starts watching the pods, Deployments, ReplicaSets, ReplicationControllers and StatefulSets
    /// of `namespace`; the invariant is checked once [`SlaWatcher::arm`] is called.
    pub fn start(client: Client, namespace: &str, threshold_percent: u32) -> Self {
        let state = Arc::new(Mutex::new(State::new(threshold_percent)));
        let tasks = watch::spawn(&client, namespace, &state);
        Self { state, tasks }
    }

    /// Declares the desired replicas `d` of a controller of another kind than Deployment,
    /// ReplicaSet, ReplicationController and StatefulSet (say `expect("PodSet", "cache", 3)`),
    /// instead of inferring it from its pods. Call it before arming, and again before the test
    /// scales that controller. Without it, `d` is the most pods of that controller that existed
    /// at once (not terminating, not finished) since arming, and never falls: a generic reader
    /// cannot see its spec.
    ///
    /// # Panics
    /// For one of those four kinds: their `d` is read from the cluster.
    pub fn expect(&self, kind: &str, name: &str, desired: u32) {
        self.lock().expect(kind, name, desired);
    }

    /// Excuses a descent below the bound within `grace` after a scale-down of the workload (its
    /// `d`, or the replicas of one of its ReplicaSets); the records still count them. None by
    /// default: a ReplicaSet deletes its not-Ready pods first, so its own scale-down rarely takes
    /// the Ready pods below the lower bound, while a grace would hide any eviction of k8sm in the
    /// same moments. For tests that scale or roll out workloads while k8sm drains (a rollout's
    /// `maxUnavailable` may allow more than the threshold does). Watches of different kinds are
    /// not ordered: a pod's deletion seen before the scale-down that caused it is not covered.
    pub fn grace_after_scale_down(&self, grace: Duration) {
        self.lock().set_grace(grace);
    }

    /// From now on, every change is checked against the invariant, once every watch has listed
    /// once. A relisted watch replaces what it knew: objects deleted during a watch gap are
    /// forgotten.
    pub fn arm(&self) {
        self.lock().arm(Instant::now());
    }

    /// Every violation seen so far, as human-readable lines naming the workload, its Ready count,
    /// `d` and bound.
    pub fn violations(&self) -> Vec<String> {
        self.lock().violations().to_vec()
    }

    /// Per workload judged since arming: `d` and the bound now, the fewest Ready pods and the
    /// smallest margin seen.
    pub fn records(&self) -> Vec<WorkloadRecord> {
        self.lock().records()
    }

    /// Ready pods (not terminating) of the workload `kind`/`name` now, such as `("Deployment",
    /// "web")`. A ReplicaSet that a Deployment controls is not a workload: its pods count for
    /// the Deployment.
    pub fn ready(&self, kind: &str, name: &str) -> u32 {
        self.lock().ready(kind, name)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for SlaWatcher {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}
