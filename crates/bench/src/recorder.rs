//! Feeds a [`Timeline`] from two watches (the pods of one namespace, all nodes), stamping each
//! event with the seconds since the recorder's clock started.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use tokio::task::JoinHandle;

use k8sm_api::keys;
use k8sm_e2e::scenario::{is_ready, is_upgraded};

use crate::timeline::{NodeObs, PodObs, Timeline};

pub struct Recorder {
    timeline: Arc<Mutex<Timeline>>,
    clock: Instant,
    tasks: Vec<JoinHandle<()>>,
}

impl Recorder {
    /// Starts watching the pods of `namespace` and every node; `new_executor_id` tells upgraded
    /// nodes.
    pub fn start(
        client: &Client,
        namespace: &str,
        new_executor_id: &str,
        timeline: Timeline,
    ) -> Self {
        let timeline = Arc::new(Mutex::new(timeline));
        let clock = Instant::now();
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let nodes: Api<Node> = Api::all(client.clone());
        let shared = timeline.clone();
        let pod_task = tokio::spawn(async move {
            let mut events = watcher(pods, watcher::Config::default()).boxed();
            let mut relist = Relist::default();
            while let Some(event) = events.next().await {
                let Ok(event) = event else {
                    // The watcher re-lists on its own; a short pause keeps a broken apiserver from
                    // spinning us.
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                    continue;
                };
                let t = clock.elapsed().as_secs_f64();
                let mut timeline = lock(&shared);
                match event {
                    watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) => {
                        relist.saw(pod.uid().unwrap_or_default());
                        if let Some(obs) = pod_obs(&pod) {
                            timeline.pod_applied(t, obs);
                        }
                    }
                    watcher::Event::Delete(pod) => {
                        timeline.pod_deleted(t, &pod.uid().unwrap_or_default());
                    }
                    watcher::Event::Init => relist.start(),
                    watcher::Event::InitDone => {
                        let (listed, first) = relist.done();
                        timeline.pods_relisted(t, &listed, first);
                    }
                }
            }
        });
        let shared = timeline.clone();
        let new_id = new_executor_id.to_owned();
        let node_task = tokio::spawn(async move {
            let mut events = watcher(nodes, watcher::Config::default()).boxed();
            let mut relist = Relist::default();
            while let Some(event) = events.next().await {
                let Ok(event) = event else {
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                    continue;
                };
                let t = clock.elapsed().as_secs_f64();
                let mut timeline = lock(&shared);
                match event {
                    watcher::Event::Apply(node) | watcher::Event::InitApply(node) => {
                        relist.saw(node.name_any());
                        timeline.node_applied(t, node_obs(&node, &new_id));
                    }
                    watcher::Event::Delete(node) => timeline.node_deleted(&node.name_any()),
                    watcher::Event::Init => relist.start(),
                    watcher::Event::InitDone => {
                        let (listed, first) = relist.done();
                        timeline.nodes_relisted(&listed, first);
                    }
                }
            }
        });
        Self {
            timeline,
            clock,
            tasks: vec![pod_task, node_task],
        }
    }

    /// Seconds on the recorder's clock.
    pub fn now(&self) -> f64 {
        self.clock.elapsed().as_secs_f64()
    }

    pub fn timeline(&self) -> MutexGuard<'_, Timeline> {
        lock(&self.timeline)
    }

    /// Polls `check` on the timeline every 100 ms until it holds, failing after `timeout` with
    /// `what`.
    pub async fn wait_for(
        &self,
        what: &str,
        timeout: std::time::Duration,
        mut check: impl FnMut(&Timeline) -> bool,
        mut alive: impl FnMut() -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if check(&self.timeline()) {
                return Ok(());
            }
            alive()?;
            if Instant::now() > deadline {
                anyhow::bail!("timed out after {timeout:?} waiting until {what}");
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// The objects one (re)list of a watch returned, between its `Init` and `InitDone` events: the
/// whole set, which replaces what the timeline held (as the project's own SLA watcher does).
#[derive(Default)]
struct Relist {
    listing: Option<HashSet<String>>,
    lists: u64,
}

impl Relist {
    fn start(&mut self) {
        self.listing = Some(HashSet::new());
    }

    fn saw(&mut self, key: String) {
        if let Some(listing) = &mut self.listing {
            listing.insert(key);
        }
    }

    /// The keys listed, and whether this was the watch's first list.
    fn done(&mut self) -> (HashSet<String>, bool) {
        self.lists += 1;
        (self.listing.take().unwrap_or_default(), self.lists == 1)
    }
}

fn lock(timeline: &Mutex<Timeline>) -> MutexGuard<'_, Timeline> {
    // Every update is a single step: a panic elsewhere leaves the timeline usable.
    timeline.lock().unwrap_or_else(|e| e.into_inner())
}

fn pod_obs(pod: &Pod) -> Option<PodObs> {
    Some(PodObs {
        uid: pod.uid()?,
        app: pod.labels().get("app")?.clone(),
        node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        ready: is_ready(pod),
        terminating: pod.metadata.deletion_timestamp.is_some(),
        evicted: pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|conditions| {
                conditions.iter().any(|c| {
                    c.type_ == "DisruptionTarget"
                        && c.status == "True"
                        && c.reason.as_deref() == Some("EvictionByEvictionAPI")
                })
            }),
        requests: k8sm_view::requests_of(pod),
    })
}

fn node_obs(node: &Node, new_id: &str) -> NodeObs {
    NodeObs {
        name: node.name_any(),
        marked: node
            .labels()
            .contains_key(keys::INCOMPATIBLE_EXECUTOR_LABEL),
        draining: node.annotations().contains_key(keys::DRAINING_ANNOTATION)
            || node
                .spec
                .as_ref()
                .and_then(|s| s.unschedulable)
                .unwrap_or(false),
        upgraded: is_upgraded(node, new_id),
        // Whoever wrote it: k8sm, or the baselines' operator (runs.rs), both with this annotation.
        kamikaze: node.annotations().contains_key(keys::KAMIKAZE_ANNOTATION),
        // The ID part of `is_upgraded`.
        executor_new: node
            .annotations()
            .get(keys::EXECUTOR_ID_ANNOTATION)
            .is_some_and(|id| id == new_id),
        allocatable: node
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .map(k8sm_view::allocatable),
        schedulable: schedulable(node),
    }
}

/// Whether kube-scheduler may bind the fleet's pods to `node`: not cordoned, and no taint that
/// keeps them off (they tolerate none; PreferNoSchedule only scores).
fn schedulable(node: &Node) -> bool {
    let Some(spec) = node.spec.as_ref() else {
        return true;
    };
    !spec.unschedulable.unwrap_or(false)
        && spec
            .taints
            .iter()
            .flatten()
            .all(|taint| taint.effect == "PreferNoSchedule")
}
