//! A replayed fleet's compact truth, and the cluster around the controller reduced to the watch
//! events it sends: each step carries out the controller's last plan (its evictions, up to the
//! calls it may have at once, and its node writes) and moves on what earlier steps started, as the
//! apiserver, kube-controller-manager, the scheduler and the kubelets would. An evicted pod
//! terminates for one step, is gone at the next, when its ReplicaSet creates a replacement, which
//! is scheduled (on an upgraded node while there is one) at the next and Ready at the one after;
//! a node told to restart runs the new executor one step later.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;
use kube::runtime::watcher::Event;

use k8sm_api::MaxConcurrentNodes;
use k8sm_controller::CachedPod;
use k8sm_controller::Feeds;
use k8sm_planner::{ActionKind, Plan};

use super::objects::{self, NodeShape, NodeStage, OwnerShape, PodShape, PodStage};

/// Owner sizes, cycled until every pod has an owner (as in the cluster benchmark).
const SIZES: [u32; 13] = [1, 2, 3, 5, 8, 10, 12, 15, 20, 25, 30, 40, 50];
/// Owners per namespace.
const OWNERS_PER_NAMESPACE: usize = 100;
const NO_NODE: u32 = u32::MAX;

struct Owner {
    namespace: String,
    name: String,
    replicas: u32,
    ready: u32,
    min_available: u32,
}

impl Owner {
    fn shape(&self) -> OwnerShape<'_> {
        OwnerShape {
            namespace: &self.namespace,
            name: &self.name,
            replicas: self.replicas,
            ready: self.ready,
            min_available: self.min_available,
        }
    }
}

#[derive(Clone, Copy)]
struct Pod {
    owner: u32,
    serial: u32,
    node: u32,
    stage: PodStage,
}

#[derive(Default)]
struct NodeState {
    stage: Option<NodeStage>,
    draining_since: Option<DateTime<Utc>>,
    cordoned: bool,
    progress: Option<String>,
    kamikaze_at: Option<DateTime<Utc>>,
}

pub struct Fleet {
    owners: Vec<Owner>,
    /// Live pods; a gone pod's slot is taken by its replacement.
    pods: Vec<Pod>,
    node_names: Vec<String>,
    nodes: Vec<NodeState>,
    /// Each node's pods (slots in `pods`).
    on_node: Vec<Vec<u32>>,
    max_concurrent_nodes: MaxConcurrentNodes,
    /// Nodes running the new executor, where replacements land (in turn).
    upgraded: Vec<u32>,
    next_landing: usize,
    next_serial: u32,
    resource_version: u64,
    /// What moves on at the next step.
    terminating: Vec<u32>,
    pending: Vec<u32>,
    starting: Vec<u32>,
    kamikaze: Vec<u32>,
    marked_at: DateTime<Utc>,
}

/// What one step delivered and carried out.
#[derive(Clone, Copy, Debug, Default)]
pub struct Delivered {
    pub events: usize,
    pub evictions: usize,
    /// Node writes carried out.
    pub node_writes: usize,
    /// Nodes upgraded by the end of the step.
    pub upgraded: usize,
    /// Owners with fewer Ready pods than their budget's `minAvailable` at the end of the step.
    pub below_bound: usize,
}

impl Fleet {
    /// `nodes` nodes of `pods_per_node` pods each, owned by Deployments of the cycled sizes (each
    /// with a budget at the SLA bound), every node marked incompatible.
    pub fn new(
        nodes: usize,
        pods_per_node: usize,
        max_concurrent_nodes: MaxConcurrentNodes,
        now: DateTime<Utc>,
    ) -> Self {
        let total = nodes * pods_per_node;
        let mut owners = Vec::new();
        let mut pods = Vec::with_capacity(total);
        let mut on_node = vec![Vec::with_capacity(pods_per_node); nodes];
        let mut placed = 0;
        while placed < total {
            let index = owners.len();
            let replicas = SIZES[index % SIZES.len()].min((total - placed) as u32);
            // The benchmark's SLA bound at 90%: min(ceil(0.9·n), n−1).
            let min_available = (replicas * 9).div_ceil(10).min(replicas.saturating_sub(1));
            owners.push(Owner {
                namespace: format!("team-{:03}", index / OWNERS_PER_NAMESPACE),
                name: format!("app-{index:05}"),
                replicas,
                ready: replicas,
                min_available,
            });
            for serial in 0..replicas {
                // Each owner's pods spread over the fleet, as the scheduler's spreading does.
                let node = (placed + serial as usize * 7919) % nodes;
                on_node[node].push(pods.len() as u32);
                pods.push(Pod {
                    owner: index as u32,
                    serial,
                    node: node as u32,
                    stage: PodStage::Ready,
                });
            }
            placed += replicas as usize;
        }
        Self {
            owners,
            pods,
            node_names: (0..nodes).map(objects::node_name).collect(),
            nodes: (0..nodes)
                .map(|_| NodeState {
                    stage: Some(NodeStage::Old),
                    ..NodeState::default()
                })
                .collect(),
            on_node,
            max_concurrent_nodes,
            upgraded: Vec::new(),
            next_landing: 0,
            next_serial: SIZES[SIZES.len() - 1],
            resource_version: 1,
            terminating: Vec::new(),
            pending: Vec::new(),
            starting: Vec::new(),
            kamikaze: Vec::new(),
            marked_at: now,
        }
    }

    pub fn pods(&self) -> usize {
        self.pods.len()
    }

    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Every object, as the watches' first lists deliver them.
    pub fn list(&mut self, feeds: &mut Feeds, now: DateTime<Utc>) {
        let version = self.version();
        feeds.policy(Event::InitApply(objects::policy(
            self.max_concurrent_nodes,
            version,
        )));
        for node in 0..self.nodes.len() as u32 {
            let object = self.node_object(node);
            feeds.node(Event::InitApply(object));
        }
        for owner in 0..self.owners.len() {
            let version = self.version();
            let shape = self.owners[owner].shape();
            feeds.deployment(Event::InitApply(objects::deployment(&shape, version)));
            feeds.replica_set(Event::InitApply(objects::replica_set(&shape, version)));
            feeds.pdb(Event::InitApply(objects::pdb(&shape, version)));
        }
        for slot in 0..self.pods.len() as u32 {
            let pod = self.pod_object(slot, now);
            feeds.pod(Event::InitApply(pod));
        }
        feeds.listed();
    }

    /// One step: what earlier steps started moves on, then `plan` is carried out, with at most
    /// `calls` evictions.
    pub fn step(
        &mut self,
        feeds: &mut Feeds,
        plan: &Plan,
        calls: usize,
        now: DateTime<Utc>,
    ) -> Delivered {
        let mut delivered = Delivered::default();
        self.move_on(feeds, now, &mut delivered);
        for action in &plan.actions {
            self.carry_out(feeds, &action.kind, calls, now, &mut delivered);
        }
        delivered.upgraded = self
            .nodes
            .iter()
            .filter(|n| n.stage == Some(NodeStage::Upgraded))
            .count();
        delivered.below_bound = self
            .owners
            .iter()
            .filter(|o| o.ready < o.min_available)
            .count();
        delivered
    }

    fn move_on(&mut self, feeds: &mut Feeds, now: DateTime<Utc>, delivered: &mut Delivered) {
        for slot in std::mem::take(&mut self.starting) {
            self.pods[slot as usize].stage = PodStage::Ready;
            self.apply_pod(feeds, slot, now, delivered);
            let owner = self.pods[slot as usize].owner;
            self.owners[owner as usize].ready += 1;
            self.apply_owner(feeds, owner, delivered);
        }
        for slot in std::mem::take(&mut self.pending) {
            let node = self.landing();
            let pod = &mut self.pods[slot as usize];
            pod.node = node;
            pod.stage = PodStage::Starting;
            self.on_node[node as usize].push(slot);
            self.starting.push(slot);
            self.apply_pod(feeds, slot, now, delivered);
        }
        for slot in std::mem::take(&mut self.terminating) {
            let gone = self.pod_object(slot, now);
            feeds.pod(Event::Delete(gone));
            delivered.events += 1;
            let node = self.pods[slot as usize].node;
            self.on_node[node as usize].retain(|&s| s != slot);
            self.next_serial += 1;
            let pod = &mut self.pods[slot as usize];
            pod.serial = self.next_serial;
            pod.node = NO_NODE;
            pod.stage = PodStage::Pending;
            self.pending.push(slot);
            self.apply_pod(feeds, slot, now, delivered);
        }
        for node in std::mem::take(&mut self.kamikaze) {
            self.nodes[node as usize].stage = Some(NodeStage::Restarted);
            self.upgraded.push(node);
            self.apply_node(feeds, node, delivered);
        }
    }

    fn carry_out(
        &mut self,
        feeds: &mut Feeds,
        action: &ActionKind,
        calls: usize,
        now: DateTime<Utc>,
        delivered: &mut Delivered,
    ) {
        let node = action.node().and_then(|name| self.node_index(name));
        let state = node.map(|n| &mut self.nodes[n as usize]);
        match (action, state) {
            (ActionKind::Evict { pod, .. }, _) => {
                let Some((slot, serial)) = objects::pod_of_uid(pod.uid()) else {
                    return;
                };
                let Some(found) = self.pods.get(slot as usize).copied() else {
                    return;
                };
                if delivered.evictions == calls
                    || found.serial != serial
                    || found.stage == PodStage::Terminating
                {
                    return;
                }
                self.pods[slot as usize].stage = PodStage::Terminating;
                self.terminating.push(slot);
                delivered.evictions += 1;
                self.apply_pod(feeds, slot, now, delivered);
                if found.stage == PodStage::Ready {
                    self.owners[found.owner as usize].ready -= 1;
                    self.apply_owner(feeds, found.owner, delivered);
                }
            }
            (
                ActionKind::Admit {
                    at,
                    pods_left,
                    cordon,
                    ..
                },
                Some(state),
            ) => {
                state.stage = Some(NodeStage::Draining);
                state.draining_since = Some(*at);
                state.progress = Some(k8sm_planner::drain_progress(*at, *pods_left));
                state.cordoned |= *cordon;
                self.wrote(feeds, node, delivered);
            }
            (ActionKind::Progress { at, pods_left, .. }, Some(state)) => {
                state.progress = Some(k8sm_planner::drain_progress(*at, *pods_left));
                self.wrote(feeds, node, delivered);
            }
            (ActionKind::Cordon { .. }, Some(state)) => {
                state.cordoned = true;
                self.wrote(feeds, node, delivered);
            }
            (ActionKind::Kamikaze { at, .. }, Some(state)) => {
                state.stage = Some(NodeStage::Kamikaze);
                state.kamikaze_at = Some(*at);
                self.kamikaze.extend(node);
                self.wrote(feeds, node, delivered);
            }
            (ActionKind::Complete { .. } | ActionKind::Release { .. }, Some(state)) => {
                *state = NodeState {
                    stage: Some(NodeStage::Upgraded),
                    ..NodeState::default()
                };
                self.wrote(feeds, node, delivered);
            }
            // Marks are on from the start; a replayed node never stalls within a replay, and no
            // surge is asked.
            _ => {}
        }
    }

    fn wrote(&mut self, feeds: &mut Feeds, node: Option<u32>, delivered: &mut Delivered) {
        if let Some(node) = node {
            delivered.node_writes += 1;
            self.apply_node(feeds, node, delivered);
        }
    }

    fn node_index(&self, name: &str) -> Option<u32> {
        let index: u32 = name.strip_prefix("node-")?.parse().ok()?;
        (self.node_names.get(index as usize)? == name).then_some(index)
    }

    /// Where the next replacement lands: nodes running the new executor in turn, or while there is
    /// none, a node not admitted yet (whose pods must then move again).
    fn landing(&mut self) -> u32 {
        if self.upgraded.is_empty() {
            let count = self.nodes.len();
            for offset in 0..count {
                let node = (self.next_landing + offset) % count;
                if self.nodes[node].stage == Some(NodeStage::Old) {
                    self.next_landing = node + 1;
                    return node as u32;
                }
            }
            return 0;
        }
        self.next_landing = (self.next_landing + 1) % self.upgraded.len();
        self.upgraded[self.next_landing]
    }

    fn version(&mut self) -> u64 {
        self.resource_version += 1;
        self.resource_version
    }

    fn node_object(&mut self, node: u32) -> Node {
        let version = self.version();
        let state = &self.nodes[node as usize];
        objects::node(
            &NodeShape {
                index: node as usize,
                stage: state.stage.unwrap_or(NodeStage::Old),
                marked_at: self.marked_at,
                draining_since: state.draining_since,
                cordoned: state.cordoned,
                progress: state.progress.as_deref(),
                kamikaze_at: state.kamikaze_at,
            },
            version,
        )
    }

    fn pod_object(&mut self, slot: u32, now: DateTime<Utc>) -> CachedPod {
        let version = self.version();
        let pod = self.pods[slot as usize];
        let owner = self.owners[pod.owner as usize].shape();
        let node = (pod.node != NO_NODE).then(|| self.node_names[pod.node as usize].as_str());
        objects::pod(
            &PodShape {
                owner: &owner,
                slot,
                serial: pod.serial,
                node,
                stage: pod.stage,
            },
            version,
            now,
        )
    }

    fn apply_pod(
        &mut self,
        feeds: &mut Feeds,
        slot: u32,
        now: DateTime<Utc>,
        delivered: &mut Delivered,
    ) {
        let pod = self.pod_object(slot, now);
        feeds.pod(Event::Apply(pod));
        delivered.events += 1;
    }

    fn apply_node(&mut self, feeds: &mut Feeds, node: u32, delivered: &mut Delivered) {
        let object = self.node_object(node);
        feeds.node(Event::Apply(object));
        delivered.events += 1;
    }

    /// The owner's ReplicaSet, Deployment and budget statuses, as their controllers update them.
    fn apply_owner(&mut self, feeds: &mut Feeds, owner: u32, delivered: &mut Delivered) {
        let version = self.version();
        let shape = self.owners[owner as usize].shape();
        feeds.replica_set(Event::Apply(objects::replica_set(&shape, version)));
        feeds.deployment(Event::Apply(objects::deployment(&shape, version + 1)));
        feeds.pdb(Event::Apply(objects::pdb(&shape, version + 2)));
        self.resource_version += 2;
        delivered.events += 3;
    }
}
