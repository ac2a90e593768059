//! The SLA watcher: follows every pod of a namespace through a watch and checks, at every change, that each owner
//! keeps at least `min(ceil(t·d), d−1)` ready pods (DESIGN.md §5.3) — the invariant k8sm promises.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::task::JoinHandle;

/// What was observed of one owner while the watcher was armed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRecord {
    pub kind: String,
    pub name: String,
    pub desired: u32,
    /// `min(ceil(t·d), d−1)`.
    pub bound: u32,
    pub min_ready: u32,
    pub samples: u64,
}

#[derive(Default)]
struct State {
    armed: bool,
    threshold: u32,
    /// pod uid → (owner key, ready and not terminating)
    pods: HashMap<String, ((String, String), bool)>,
    desired: HashMap<(String, String), u32>,
    records: BTreeMap<(String, String), OwnerRecord>,
    violations: Vec<String>,
}

pub struct SlaWatcher {
    state: Arc<Mutex<State>>,
    task: JoinHandle<()>,
}

impl SlaWatcher {
    /// Starts watching the pods of `namespace`; the invariant is checked once [`SlaWatcher::arm`] is called.
    pub fn start(client: Client, namespace: &str, threshold_percent: u32) -> Self {
        let state = Arc::new(Mutex::new(State {
            threshold: threshold_percent,
            ..State::default()
        }));
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), namespace);
        let stateful_sets: Api<StatefulSet> = Api::namespaced(client, namespace);
        let shared = state.clone();
        let task = tokio::spawn(async move {
            let mut events = watcher(pods, watcher::Config::default())
                .default_backoff()
                .boxed();
            // Pods listed since the watch (re)started: after a re-list (an expired watch, a restarted apiserver)
            // the listing replaces what was known, so pods deleted while the watch was down are forgotten too.
            let mut relisted: Option<HashSet<String>> = None;
            while let Some(event) = events.next().await {
                let Ok(event) = event else { continue };
                let (changed, deleted): (Vec<Pod>, Vec<Pod>) = match event {
                    watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) => {
                        (vec![pod], vec![])
                    }
                    watcher::Event::Delete(pod) => (vec![], vec![pod]),
                    watcher::Event::Init => {
                        relisted = Some(HashSet::new());
                        (vec![], vec![])
                    }
                    watcher::Event::InitDone => {
                        if let Some(listed) = relisted.take() {
                            let mut state = shared.lock().unwrap();
                            state.pods.retain(|uid, _| listed.contains(uid));
                            state.check();
                        }
                        (vec![], vec![])
                    }
                };
                for pod in &changed {
                    let Some(owner) = owner_of(pod) else { continue };
                    if let Some(listed) = relisted.as_mut() {
                        listed.insert(pod.uid().unwrap_or_default());
                    }
                    let known = shared.lock().unwrap().desired.contains_key(&owner);
                    if !known {
                        let desired = match owner.0.as_str() {
                            "ReplicaSet" => replica_sets
                                .get_opt(&owner.1)
                                .await
                                .ok()
                                .flatten()
                                .and_then(|rs| rs.spec.and_then(|s| s.replicas)),
                            "StatefulSet" => stateful_sets
                                .get_opt(&owner.1)
                                .await
                                .ok()
                                .flatten()
                                .and_then(|s| s.spec.and_then(|s| s.replicas)),
                            _ => None,
                        };
                        if let Some(desired) = desired {
                            shared
                                .lock()
                                .unwrap()
                                .desired
                                .insert(owner.clone(), desired.max(0) as u32);
                        }
                    }
                }
                let mut state = shared.lock().unwrap();
                for pod in deleted {
                    state.pods.remove(&pod.uid().unwrap_or_default());
                }
                for pod in changed {
                    if let Some(owner) = owner_of(&pod) {
                        state
                            .pods
                            .insert(pod.uid().unwrap_or_default(), (owner, available(&pod)));
                    }
                }
                state.check();
            }
        });
        Self { state, task }
    }

    /// From now on, every change is checked against the invariant.
    pub fn arm(&self) {
        let mut state = self.state.lock().unwrap();
        state.armed = true;
        state.check();
    }

    /// Every violation seen so far, as human-readable lines.
    pub fn violations(&self) -> Vec<String> {
        self.state.lock().unwrap().violations.clone()
    }

    /// Per-owner minimum ready counts against their bounds.
    pub fn records(&self) -> Vec<OwnerRecord> {
        self.state
            .lock()
            .unwrap()
            .records
            .values()
            .cloned()
            .collect()
    }

    /// Ready, not terminating pods of an owner now.
    pub fn ready(&self, kind: &str, name: &str) -> u32 {
        let state = self.state.lock().unwrap();
        let key = (kind.to_owned(), name.to_owned());
        state
            .pods
            .values()
            .filter(|(owner, ready)| *owner == key && *ready)
            .count() as u32
    }
}

impl Drop for SlaWatcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl State {
    fn check(&mut self) {
        if !self.armed {
            return;
        }
        let mut ready: HashMap<&(String, String), u32> = HashMap::new();
        for (owner, is_ready) in self.pods.values() {
            *ready.entry(owner).or_default() += u32::from(*is_ready);
        }
        for (owner, desired) in &self.desired {
            let now = ready.get(owner).copied().unwrap_or(0);
            let bound = bound(*desired, self.threshold);
            let record = self
                .records
                .entry(owner.clone())
                .or_insert_with(|| OwnerRecord {
                    kind: owner.0.clone(),
                    name: owner.1.clone(),
                    desired: *desired,
                    bound,
                    min_ready: now,
                    samples: 0,
                });
            record.samples += 1;
            record.min_ready = record.min_ready.min(now);
            if now < bound {
                self.violations.push(format!(
                    "{} {}: {now} ready of {desired}, below the bound {bound}",
                    owner.0, owner.1
                ));
            }
        }
    }
}

/// `min(ceil(t·d/100), d−1)`.
pub fn bound(desired: u32, threshold_percent: u32) -> u32 {
    (desired * threshold_percent)
        .div_ceil(100)
        .min(desired.saturating_sub(1))
}

fn owner_of(pod: &Pod) -> Option<(String, String)> {
    pod.owner_references()
        .iter()
        .find(|r| r.controller == Some(true))
        .filter(|r| r.kind == "ReplicaSet" || r.kind == "StatefulSet")
        .map(|r| (r.kind.clone(), r.name.clone()))
}

fn available(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[cfg(test)]
mod tests {
    use super::bound;

    #[test]
    fn bound_matches_the_design() {
        assert_eq!(bound(10, 90), 9);
        assert_eq!(bound(25, 90), 23);
        assert_eq!(bound(3, 90), 2);
        assert_eq!(bound(1, 90), 0);
        assert_eq!(bound(100, 90), 90);
    }
}
