//! The benchmark's workload: owners of mixed sizes (1 to 50 replicas), a few StatefulSets, a few
//! unmanaged pods and a DaemonSet, derived deterministically from the node and pod counts (and, for
//! the realistic shape, a seed). The fleet model only: `crate::fleet_on_cluster` creates it in a
//! namespace. Either [`Shape`] may be made messy ([`Realism::messy`], `--messy`; made real by
//! `crate::mess`) with what real clusters have that no upgrade tool can wish away: crash loops,
//! dead nodes, zombies, a stuck rollout, bare pods, pinned pods ([`Workload::unfinishable`]).

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Serialize};

use k8sm_e2e::rng::SplitMix64;

use crate::stats::{BoundInput, BoundOwner};
use k8sm_api::UnmanagedPodPolicy;

/// Replica counts of the owners, in the order they are created, repeated until the pods are placed.
/// Sizes that are not multiples of 10 matter: at 90% an owner of 15 replicas may lose only one pod
/// at a time.
pub const SIZES: [u32; 13] = [1, 2, 3, 5, 8, 10, 12, 15, 20, 25, 30, 40, 50];

/// How many of the first owners are StatefulSets instead of Deployments ("a few"): positions in
/// [`SIZES`].
const STATEFUL_POSITIONS: [usize; 3] = [2, 5, 8];

/// Name of the DaemonSet (its pods are ignored by every drain and by the measurements).
pub const DAEMON_SET: &str = "node-logs";

/// The realistic shape's StatefulSet that starts (and replaces) its pods one at a time, each after
/// the previous is Ready, and its size.
pub const ORDERED_STATEFUL_SET: &str = "sts-ordered-x10";
const ORDERED_REPLICAS: u32 = 10;

/// The realistic shape's Deployment whose pod template changes just before the tool starts, and its
/// size (not a multiple of 4, so that its 25% surge rounds).
pub const ROLLING_DEPLOYMENT: &str = "dep-rollout-x14";
const ROLLING_REPLICAS: u32 = 14;
/// The rolling Deployment's `maxSurge`, percent of its replicas (its `maxUnavailable` is 0).
pub const ROLLING_MAX_SURGE_PERCENT: u32 = 25;

/// Requests drawn per owner (millicores, MiB): a spread, so that some pods fit where others do not.
const CPU_MILLIS: [u32; 7] = [100, 150, 200, 250, 300, 400, 500];
const MEMORY_MIB: [u32; 6] = [128, 192, 256, 384, 512, 768];
/// Requests of the DaemonSet's pods and of the unmanaged pods.
pub(crate) const DAEMON_REQUESTS: (u32, u32) = (50, 64);
pub(crate) const UNMANAGED_REQUESTS: (u32, u32) = (100, 128);
/// One owner in this many (of 2 replicas or more) prefers a few nodes instead of spreading.
const BUNCHED_ONE_IN: u64 = 4;
/// How many nodes a bunched owner prefers.
const BUNCH_NODES: usize = 3;
/// How long before the upgrade the grace period of a messy fleet's zombies ended (but the fresh
/// ones').
const STALE_ZOMBIE_S: u32 = 600;
/// The finalizer that holds a messy fleet's zombies.
pub const ZOMBIE_FINALIZER: &str = "bench.k8sm.io/never-released";
/// Salt of the messy draws: a separate stream, so that a messy fleet's owners draw what the same
/// seed's tidy fleet draws.
const MESSY_SALT: u64 = 0x6d65_7373_7921;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    Deployment,
    StatefulSet,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deployment => "Deployment",
            Self::StatefulSet => "StatefulSet",
        }
    }
}

/// Which fleet to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    /// The earlier reports' fleet: one readiness delay for every pod, no grace period, no requests.
    Simple,
    /// Per-owner readiness delays, requests, grace periods, bunched owners, a rollout, an ordered
    /// StatefulSet.
    #[default]
    Realistic,
}

/// The realistic shape's parameters (the simple shape ignores them, but `messy`): each owner its
/// own readiness delay, CPU and memory requests that fill the nodes to a target, a termination
/// grace period, some owners bunched on a few nodes, one Deployment rolling out when the tool
/// starts and a StatefulSet of 10 with `OrderedReady`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Realism {
    /// Same seed, same fleet.
    pub seed: u64,
    /// Each owner's pods become Ready this long after scheduling, drawn uniformly in `[min, max]`
    /// per owner.
    pub ready_delay_min: Duration,
    pub ready_delay_max: Duration,
    /// Every pod's `terminationGracePeriodSeconds` (whole seconds: what the API takes).
    pub grace_period_s: u32,
    /// How full the nodes are on average, percent of their allocatable CPU and memory.
    pub fill_percent: u8,
    /// Add the shapes of real clusters that only the model knows how to play (see [`Messy`]), this
    /// often: off by default, so that the presets' fleets stay what they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messy: Option<MessRates>,
}

/// How often a messy fleet has each of its shapes (see [`Workload::mess_up`]): each a chance of one
/// in so many.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessRates {
    /// A node dead (NotReady since before the upgrade).
    pub dead_node_one_in: u64,
    /// An owner crash-looping (its pods never become Ready).
    pub crash_looping_one_in: u64,
    /// A Deployment of 2 replicas or more with a rollout stuck past its progress deadline.
    pub stuck_rollout_one_in: u64,
    /// A 1-replica Deployment pinned to its node, and a StatefulSet of 3 or fewer pinned by
    /// ordinal.
    pub pinned_one_in: u64,
    /// At most this many pods stuck terminating on live nodes, drawn from 0.
    pub max_zombies: u64,
    /// At most this many more whose grace period ended less than a minute before the upgrade
    /// ([`Zombie`]).
    pub max_fresh_zombies: u64,
    /// Whether more than one StatefulSet may be pinned (two such sets on the same nodes can wait
    /// on each other).
    pub pinned_sets: bool,
}

impl Default for MessRates {
    /// What real clusters have: about one node in a hundred dead, one owner in twenty
    /// crash-looping, a stuck rollout in one Deployment in twenty, half the 1-replica
    /// Deployments and one small StatefulSet pinned, up to two zombies.
    fn default() -> Self {
        Self {
            dead_node_one_in: 100,
            crash_looping_one_in: 20,
            stuck_rollout_one_in: 20,
            pinned_one_in: 2,
            max_zombies: 2,
            max_fresh_zombies: 0,
            pinned_sets: false,
        }
    }
}

impl MessRates {
    /// Far messier than any cluster should be, to press the planner: a node in eight dead, an owner
    /// in four crash-looping, a Deployment in three stuck, every small owner pinned, up to four
    /// zombies and two fresh ones.
    pub fn harsh() -> Self {
        Self {
            dead_node_one_in: 8,
            crash_looping_one_in: 4,
            stuck_rollout_one_in: 3,
            pinned_one_in: 1,
            max_zombies: 4,
            max_fresh_zombies: 2,
            pinned_sets: true,
        }
    }
}

impl Default for Realism {
    fn default() -> Self {
        Self {
            seed: 1,
            ready_delay_min: Duration::from_secs(2),
            ready_delay_max: Duration::from_secs(20),
            grace_period_s: 3,
            fill_percent: 75,
            messy: None,
        }
    }
}

/// One replicated owner; its pods carry the label `app=<name>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub name: String,
    pub kind: Kind,
    pub replicas: u32,
    /// Its pods become Ready this long after scheduling (milliseconds); 0: the cluster's pod-ready
    /// delay.
    #[serde(default)]
    pub ready_delay_ms: u64,
    /// CPU (millicores) and memory (MiB) each pod requests; 0: none.
    #[serde(default)]
    pub cpu_millis: u32,
    #[serde(default)]
    pub memory_mib: u32,
    /// Indices of the few nodes its pods prefer (bunched); empty: spread by the scheduler.
    #[serde(default)]
    pub preferred_nodes: Vec<usize>,
    /// A StatefulSet with `podManagementPolicy: OrderedReady` (else `Parallel`).
    #[serde(default)]
    pub ordered: bool,
    /// A Deployment whose template changes just before the tool starts (`maxSurge: 25%`,
    /// `maxUnavailable: 0`).
    #[serde(default)]
    pub rolling: bool,
    /// Messy fleets: its pods never become Ready (CrashLoopBackOff, a bad image), those of before
    /// the upgrade as its replacements.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub crash_looping: bool,
    /// Messy fleets: a Deployment whose rollout is past its progress deadline
    /// (`ProgressDeadlineExceeded`, so not replacing anything), with this many pods of its new
    /// ReplicaSet that never become Ready, on top of its replicas (all Ready, of the old
    /// ReplicaSet).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stuck_rollout: u32,
    /// Messy fleets: the nodes its pods can only run on (a `kubernetes.io/hostname` selector, a
    /// local volume): a Deployment's single node, or a StatefulSet's node per ordinal. A
    /// replacement waits Pending until its node is back and schedulable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pinned_nodes: Vec<usize>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Owner {
    fn simple(name: String, kind: Kind, replicas: u32) -> Self {
        Self {
            name,
            kind,
            replicas,
            ready_delay_ms: 0,
            cpu_millis: 0,
            memory_mib: 0,
            preferred_nodes: Vec::new(),
            ordered: false,
            rolling: false,
            crash_looping: false,
            stuck_rollout: 0,
            pinned_nodes: Vec::new(),
        }
    }

    /// The node the pod of this name can only run on, if it is pinned: a Deployment's one node, a
    /// StatefulSet's by the ordinal its name ends with.
    pub fn pinned_node(&self, pod_name: &str) -> Option<usize> {
        match self.kind {
            Kind::Deployment => self.pinned_nodes.first().copied(),
            Kind::StatefulSet => {
                let ordinal: usize = pod_name.rsplit('-').next()?.parse().ok()?;
                self.pinned_nodes.get(ordinal).copied()
            }
        }
    }

    /// Its pods' readiness delay, or `default` when the cluster's applies.
    pub fn ready_delay(&self, default: Duration) -> Duration {
        if self.ready_delay_ms == 0 {
            default
        } else {
            Duration::from_millis(self.ready_delay_ms)
        }
    }
}

/// What a messy fleet has besides its owners' traits ([`Owner::crash_looping`],
/// [`Owner::stuck_rollout`], [`Owner::pinned_nodes`]): the truth the model plays and that
/// [`Workload::unfinishable`] reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Messy {
    /// Nodes NotReady since before the upgrade (their kubelet down), on the old executor: no pod
    /// is scheduled there.
    pub dead_nodes: Vec<usize>,
    /// Pods stuck terminating, past their grace period, that never go: on live nodes held by a
    /// finalizer nobody removes, on dead nodes because no kubelet confirms them gone. Their
    /// owner's controller replaced them.
    pub zombies: Vec<Zombie>,
    /// The policy's `unmanagedPods.policy` for the fleet's bare pods ([`Workload::unmanaged`]):
    /// `Never` leaves their nodes to an operator.
    pub unmanaged_policy: UnmanagedPodPolicy,
}

/// A pod of a Deployment stuck terminating on a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Zombie {
    pub name: String,
    /// The Deployment's name.
    pub owner: String,
    pub node_index: usize,
    /// Held by [`ZOMBIE_FINALIZER`] (on a live node); without one on a dead node.
    pub finalizer: bool,
    /// How long before the upgrade starts its grace period ended (its `deletionTimestamp`): a
    /// minute or more, and it is stuck from the start; less ("fresh"), and it looks like any
    /// terminating pod until that minute is up, so a tool may start its node before it knows.
    pub deleted_before_s: u32,
}

/// An unmanaged pod bound to the node of this index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unmanaged {
    pub name: String,
    pub node_index: usize,
}

/// Allocatable CPU (millicores) and memory (MiB) of every node, sized so that the fleet's requests
/// fill them to the target on average.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSize {
    pub cpu_millis: u64,
    pub memory_mib: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    pub owners: Vec<Owner>,
    pub unmanaged: Vec<Unmanaged>,
    /// Every pod's termination grace period, seconds (0 in the simple shape: gone at once).
    #[serde(default)]
    pub grace_period_s: u32,
    /// The nodes' allocatable resources when pods request some (realistic shape).
    #[serde(default)]
    pub node_size: Option<NodeSize>,
    /// A messy fleet's dead nodes, zombies and unmanaged-pod policy; `None`: a tidy fleet (every
    /// node Ready, no zombie, unmanaged pods deleted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messy: Option<Messy>,
}

impl Workload {
    /// The simple shape: `pods` pods on `nodes` nodes, one unmanaged pod per 20 nodes (at least
    /// one), the rest in owners whose sizes cycle through [`SIZES`]; the last owner takes what
    /// is left.
    pub fn plan(nodes: usize, pods: usize) -> Self {
        let unmanaged = unmanaged_pods(nodes, pods);
        let left = u32::try_from(pods - unmanaged.len()).unwrap_or(u32::MAX);
        Self {
            owners: cycled_owners(left),
            unmanaged,
            grace_period_s: 0,
            node_size: None,
            messy: None,
        }
    }

    /// The fleet of `shape`: [`Workload::plan`] for the simple one; for the realistic one, the same
    /// pod count with the ordered StatefulSet and the rolling Deployment first, then owners
    /// cycling through [`SIZES`], each with its readiness delay and requests drawn from
    /// `realism.seed`, and nodes sized to `realism.fill_percent`. With `realism.messy`, either
    /// shape gets the messy traits too (see [`Workload::mess_up`]), drawn from a stream
    /// of its own: the owners draw what the tidy fleet of the same seed draws.
    pub fn generate(nodes: usize, pods: usize, shape: Shape, realism: &Realism) -> Self {
        if shape == Shape::Simple {
            let mut workload = Self::plan(nodes, pods);
            if let Some(rates) = &realism.messy {
                workload.mess_up(nodes, realism.seed, rates);
            }
            return workload;
        }
        let unmanaged = unmanaged_pods(nodes, pods);
        let mut left = u32::try_from(pods - unmanaged.len()).unwrap_or(u32::MAX);
        let mut owners = Vec::new();
        for (name, kind, replicas) in [
            (ORDERED_STATEFUL_SET, Kind::StatefulSet, ORDERED_REPLICAS),
            (ROLLING_DEPLOYMENT, Kind::Deployment, ROLLING_REPLICAS),
        ] {
            // Only whole: a fleet too small for them goes without.
            if left >= replicas {
                let mut owner = Owner::simple(name.to_owned(), kind, replicas);
                owner.ordered = kind == Kind::StatefulSet;
                owner.rolling = kind == Kind::Deployment;
                owners.push(owner);
                left -= replicas;
            }
        }
        owners.extend(cycled_owners(left));
        let mut rng = SplitMix64(realism.seed);
        let min_ms = realism.ready_delay_min.as_millis() as u64;
        let max_ms = (realism.ready_delay_max.as_millis() as u64).max(min_ms);
        for owner in &mut owners {
            // Tenths of a second: readable in the annotations and the report.
            let span = (max_ms - min_ms) / 100;
            owner.ready_delay_ms = (min_ms + rng.below(span + 1) * 100).max(1);
            owner.cpu_millis = rng.pick(&CPU_MILLIS);
            owner.memory_mib = rng.pick(&MEMORY_MIB);
            // Drawn for every owner, so that one owner's bunching does not shift the others' draws.
            let bunched = rng.below(BUNCHED_ONE_IN) == 0;
            let first = rng.below(nodes as u64) as usize;
            if bunched && owner.replicas >= 2 && !owner.rolling && nodes > BUNCH_NODES {
                // Consecutive nodes from a drawn one: few, distinct, deterministic.
                owner.preferred_nodes = (0..BUNCH_NODES).map(|k| (first + k) % nodes).collect();
            }
        }
        let mut workload = Self {
            owners,
            unmanaged,
            grace_period_s: realism.grace_period_s,
            node_size: None,
            messy: None,
        };
        if let Some(rates) = &realism.messy {
            workload.mess_up(nodes, realism.seed, rates);
        }
        workload.node_size = Some(workload.size_nodes(nodes, realism.fill_percent));
        workload
    }

    /// Makes the fleet messy, deterministically from `seed` (a stream apart from the owners'
    /// draws), at `rates`:
    /// - dead nodes, each with one pod of a Deployment stuck terminating (no kubelet to confirm it
    ///   gone; its Deployment replaced it);
    /// - crash-looping owners (not the rolling Deployment);
    /// - up to `rates.max_zombies` pods of Deployments stuck terminating on live nodes, held by a
    ///   finalizer, their grace period over 10 minutes before the upgrade; up to
    ///   `rates.max_fresh_zombies` more over 0 to 50 seconds before;
    /// - Deployments of 2 replicas or more with a rollout stuck past its progress deadline, a
    ///   quarter of their replicas (rounded up) of not-Ready new pods on top;
    /// - 1-replica Deployments pinned to a live node, and StatefulSets of at most 3 (the first
    ///   only, unless `rates.pinned_sets`) each ordinal to a node of its own (local volumes);
    /// - the bare pods on drawn live nodes, under `unmanagedPods.policy: Never`.
    pub fn mess_up(&mut self, nodes: usize, seed: u64, rates: &MessRates) {
        let mut rng = SplitMix64(seed ^ MESSY_SALT);
        let mut dead_nodes: Vec<usize> = (0..nodes)
            .filter(|_| rng.below(rates.dead_node_one_in.max(1)) == 0)
            .collect();
        // Never every node: the fleet's pods must run somewhere.
        dead_nodes.truncate(nodes.saturating_sub(1));
        let live: Vec<usize> = (0..nodes).filter(|i| !dead_nodes.contains(i)).collect();
        let draw_live = |rng: &mut SplitMix64| live[rng.below(live.len() as u64) as usize];
        for owner in &mut self.owners {
            // Drawn for every owner, so that one owner's trait does not shift the others' draws.
            let crash = rng.below(rates.crash_looping_one_in.max(1)) == 0;
            owner.crash_looping = crash && !owner.rolling;
            let stuck = rng.below(rates.stuck_rollout_one_in.max(1)) == 0;
            let steady = owner.kind == Kind::Deployment
                && !owner.rolling
                && !owner.crash_looping
                && owner.replicas >= 2;
            if stuck && steady {
                owner.stuck_rollout = owner.replicas.div_ceil(4);
            }
        }
        let mut pinned_set = false;
        for owner in &mut self.owners {
            let pin = rng.below(rates.pinned_one_in.max(1)) == 0;
            let free = !owner.rolling && !owner.crash_looping && owner.stuck_rollout == 0;
            if !pin || !free {
                continue;
            }
            if owner.kind == Kind::Deployment && owner.replicas == 1 {
                owner.pinned_nodes = vec![draw_live(&mut rng)];
            } else if owner.kind == Kind::StatefulSet
                && owner.replicas <= 3
                && (!pinned_set || rates.pinned_sets)
                && live.len() >= owner.replicas as usize
            {
                pinned_set = true;
                let mut picked: Vec<usize> = Vec::new();
                while picked.len() < owner.replicas as usize {
                    let node = draw_live(&mut rng);
                    if !picked.contains(&node) {
                        picked.push(node);
                    }
                }
                owner.pinned_nodes = picked;
            } else {
                continue;
            }
            // Required, so no preference besides.
            owner.preferred_nodes.clear();
        }
        let deployments: Vec<String> = self
            .owners
            .iter()
            .filter(|o| o.kind == Kind::Deployment && !o.rolling)
            .map(|o| o.name.clone())
            .collect();
        let mut zombies = Vec::new();
        if !deployments.is_empty() {
            let on_live = rng.below(rates.max_zombies + 1) as usize;
            let mut places = dead_nodes
                .iter()
                .map(|&n| (n, false, STALE_ZOMBIE_S))
                .chain((0..on_live).map(|_| (draw_live(&mut rng), true, STALE_ZOMBIE_S)))
                .collect::<Vec<_>>();
            let fresh = rng.below(rates.max_fresh_zombies + 1) as usize;
            for _ in 0..fresh {
                let node = draw_live(&mut rng);
                places.push((node, true, rng.below(51) as u32));
            }
            for (i, (node_index, finalizer, deleted_before_s)) in places.into_iter().enumerate() {
                let owner = deployments[rng.below(deployments.len() as u64) as usize].clone();
                zombies.push(Zombie {
                    name: format!("{owner}-zombie-{i}"),
                    owner,
                    node_index,
                    finalizer,
                    deleted_before_s,
                });
            }
        }
        for pod in &mut self.unmanaged {
            pod.node_index = draw_live(&mut rng);
        }
        self.messy = Some(Messy {
            dead_nodes,
            zombies,
            unmanaged_policy: UnmanagedPodPolicy::Never,
        });
    }

    /// A messy fleet's shapes, counted for the report.
    pub fn mess_summary(&self, nodes: usize) -> Option<String> {
        let messy = self.messy.as_ref()?;
        let count = |f: fn(&Owner) -> bool| self.owners.iter().filter(|o| f(o)).count();
        Some(format!(
            "{} of {} owners crash-looping for an hour, {} dead nodes, {} Deployments with a rollout stuck past its \
             progress deadline, {} pinned owners (1-replica Deployments by hostname selector, StatefulSets by local \
             volumes), {} pods stuck terminating, {} bare pods under `unmanagedPods.policy: {:?}`; {} of {nodes} nodes only \
             an operator can clear",
            count(|o| o.crash_looping),
            self.owners.len(),
            messy.dead_nodes.len(),
            count(|o| o.stuck_rollout > 0),
            count(|o| !o.pinned_nodes.is_empty()),
            messy.zombies.len(),
            self.unmanaged.len(),
            messy.unmanaged_policy,
            self.unfinishable().len(),
        ))
    }

    /// The nodes that no upgrade tool can finish without an operator, from the fleet's truth alone:
    /// dead nodes, nodes holding a zombie, nodes holding a bare pod under
    /// `unmanagedPods.policy: Never`, and nodes holding a pod pinned there (whose eviction is
    /// downtime until the node is back: `pinnedPods: Block`, the default). Empty for
    /// a tidy fleet.
    pub fn unfinishable(&self) -> BTreeSet<usize> {
        let Some(messy) = &self.messy else {
            return BTreeSet::new();
        };
        let mut nodes: BTreeSet<usize> = messy.dead_nodes.iter().copied().collect();
        nodes.extend(messy.zombies.iter().map(|z| z.node_index));
        if messy.unmanaged_policy == UnmanagedPodPolicy::Never {
            nodes.extend(self.unmanaged.iter().map(|u| u.node_index));
        }
        nodes.extend(
            self.owners
                .iter()
                .flat_map(|o| o.pinned_nodes.iter().copied()),
        );
        nodes
    }

    /// Nodes whose allocatable is the fleet's total requests over `fill_percent` of the node count,
    /// in whole tenths of a core and whole 64 MiB, and at least four of the largest pod (light
    /// fleets: a pod must always fit somewhere, whatever the fragmentation).
    /// A messy fleet's are sized over its live nodes only (its dead nodes run nothing), and no
    /// fuller than lets the other live nodes take one node's pods with a fifth to spare (where
    /// few nodes are left alive, two say, 60 % full would leave the other 40 % free: no tool
    /// could drain either).
    fn size_nodes(&self, nodes: usize, fill_percent: u8) -> NodeSize {
        let (cpu, memory) = self.requested(nodes);
        let live = nodes - self.messy.as_ref().map_or(0, |m| m.dead_nodes.len());
        let mut fill = u64::from(fill_percent.clamp(1, 100));
        if self.messy.is_some() && live >= 2 {
            fill = fill.min(80 * (live as u64 - 1) / live as u64);
        }
        let share = |total: u64| (total * 100).div_ceil(live.max(1) as u64 * fill);
        let largest_cpu = self.owners.iter().map(|o| o.cpu_millis).max().unwrap_or(0);
        let largest_memory = self.owners.iter().map(|o| o.memory_mib).max().unwrap_or(0);
        NodeSize {
            cpu_millis: share(cpu).max(4 * u64::from(largest_cpu)).div_ceil(100) * 100,
            memory_mib: share(memory)
                .max(4 * u64::from(largest_memory))
                .div_ceil(64)
                * 64,
        }
    }

    /// Total CPU (millicores) and memory (MiB) the realistic fleet's pods request once every pod
    /// runs (before the rollout's surge): owners (with a stuck rollout's new pods and zombies),
    /// unmanaged pods and one DaemonSet pod on each of `nodes`.
    fn requested(&self, nodes: usize) -> (u64, u64) {
        let zombies = |o: &Owner| {
            self.messy.as_ref().map_or(0, |m| {
                m.zombies.iter().filter(|z| z.owner == o.name).count() as u32
            })
        };
        let owned = self.owners.iter().fold((0, 0), |(c, m), o| {
            let pods = u64::from(o.replicas + o.stuck_rollout + zombies(o));
            (
                c + pods * u64::from(o.cpu_millis),
                m + pods * u64::from(o.memory_mib),
            )
        });
        let unmanaged = self.unmanaged.len() as u64;
        let nodes = nodes as u64;
        (
            owned.0
                + unmanaged * u64::from(UNMANAGED_REQUESTS.0)
                + nodes * u64::from(DAEMON_REQUESTS.0),
            owned.1
                + unmanaged * u64::from(UNMANAGED_REQUESTS.1)
                + nodes * u64::from(DAEMON_REQUESTS.1),
        )
    }

    /// How full `nodes` nodes are on average once every pod runs: requested over allocatable, CPU
    /// and memory; `None` for the simple shape (no requests).
    pub fn fill(&self, nodes: usize) -> Option<(f64, f64)> {
        let size = self.node_size?;
        let (cpu, memory) = self.requested(nodes);
        let nodes = nodes as f64;
        Some((
            cpu as f64 / (nodes * size.cpu_millis as f64),
            memory as f64 / (nodes * size.memory_mib as f64),
        ))
    }

    /// What the concurrency-aware lower bound needs: every owner that must be evicted pod by pod
    /// (not the rolling Deployment, whose old pods its own rollout may replace), with its
    /// readiness delay (`default_ready_delay` for the simple shape), and the evictions that
    /// takes.
    pub fn bound_input(
        &self,
        nodes: usize,
        max_concurrent_nodes: usize,
        threshold_percent: u8,
        default_ready_delay: Duration,
        restart_delay: Duration,
        evictions_per_second: Option<f64>,
    ) -> BoundInput {
        let owners: Vec<BoundOwner> = self
            .owners
            .iter()
            .filter(|o| !o.rolling)
            .map(|o| BoundOwner {
                name: o.name.clone(),
                replicas: o.replicas,
                ready_delay: o.ready_delay(default_ready_delay),
                replaced_after_removal: o.kind == Kind::StatefulSet,
            })
            .collect();
        let evictions = owners.iter().map(|o| o.replicas as usize).sum();
        BoundInput {
            owners,
            nodes,
            max_concurrent_nodes,
            threshold_percent,
            restart_delay,
            grace_period: Duration::from_secs(u64::from(self.grace_period_s)),
            every_node_hosts_pods: self.pods() >= nodes,
            evictions,
            evictions_per_second,
        }
    }

    /// Pods of owners and unmanaged pods (not the DaemonSet's).
    pub fn pods(&self) -> usize {
        self.owners
            .iter()
            .map(|o| o.replicas as usize)
            .sum::<usize>()
            + self.unmanaged.len()
    }

    /// The pods that become Ready when the fleet is created: all but the crash-looping owners'.
    pub fn pods_ready_when_created(&self) -> usize {
        self.pods()
            - self
                .owners
                .iter()
                .filter(|o| o.crash_looping)
                .map(|o| o.replicas as usize)
                .sum::<usize>()
    }

    pub fn replicas(&self) -> Vec<u32> {
        self.owners.iter().map(|o| o.replicas).collect()
    }

    /// A few owners worth charting: the largest Deployment, the first owner of the size that needs
    /// the most waves, the first StatefulSet and a small Deployment.
    pub fn charted(&self, critical_replicas: u32) -> Vec<&Owner> {
        let deployments = || self.owners.iter().filter(|o| o.kind == Kind::Deployment);
        let candidates = [
            deployments().min_by_key(|o| std::cmp::Reverse(o.replicas)),
            deployments().find(|o| o.replicas == critical_replicas),
            self.owners.iter().find(|o| o.kind == Kind::StatefulSet),
            deployments().find(|o| o.replicas == 3),
        ];
        let mut picks: Vec<&Owner> = Vec::new();
        for owner in candidates.into_iter().flatten() {
            if !picks.iter().any(|p| p.name == owner.name) {
                picks.push(owner);
            }
        }
        picks
    }
}

/// One unmanaged pod per 20 nodes (at least one, at most `pods`), spread over the fleet.
fn unmanaged_pods(nodes: usize, pods: usize) -> Vec<Unmanaged> {
    let count = (nodes / 20).max(1).min(pods);
    (0..count)
        .map(|i| Unmanaged {
            name: format!("debug-{i:02}"),
            node_index: i * nodes / count,
        })
        .collect()
}

/// Owners holding `left` pods, sizes cycling through [`SIZES`]; the last takes what is left.
fn cycled_owners(mut left: u32) -> Vec<Owner> {
    let mut owners = Vec::new();
    let mut i = 0;
    while left > 0 {
        let position = i % SIZES.len();
        let replicas = SIZES[position].min(left);
        let kind = if i < SIZES.len() && STATEFUL_POSITIONS.contains(&position) {
            Kind::StatefulSet
        } else {
            Kind::Deployment
        };
        let prefix = match kind {
            Kind::Deployment => "dep",
            Kind::StatefulSet => "sts",
        };
        owners.push(Owner::simple(
            format!("{prefix}-{i:03}-x{replicas}"),
            kind,
            replicas,
        ));
        left -= replicas;
        i += 1;
    }
    owners
}

/// The `minAvailable` that holds an owner of `replicas` to exactly the guarantee k8sm gives at
/// `threshold`: its SLA bound `min(ceil(t·d), d−1)`. A percentage (`90%`) is stricter for every
/// owner under 10 replicas (it allows no disruption at all, so drain waits for its timeout and the
/// baseline measured that timeout, not the tool); the bound is computed by the test cluster's
/// oracle, apart from the planner under test.
pub fn budget_at_bound(replicas: u32, threshold: u8) -> IntOrString {
    let bound = k8sm_testcluster::sla::bound(replicas, u32::from(threshold));
    IntOrString::Int(i32::try_from(bound).unwrap_or(i32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_places_exactly_the_pods_asked_for() {
        for (nodes, pods) in [(100, 3000), (20, 300), (3, 7), (500, 15_000), (1, 1)] {
            let workload = Workload::plan(nodes, pods);
            assert_eq!(workload.pods(), pods, "{nodes} nodes, {pods} pods");
            assert!(
                workload
                    .owners
                    .iter()
                    .all(|o| (1..=50).contains(&o.replicas))
            );
        }
    }

    #[test]
    fn a_hundred_nodes_get_mixed_owners_a_few_stateful_sets_and_unmanaged_pods() {
        let workload = Workload::plan(100, 3000);
        assert_eq!(workload.unmanaged.len(), 5);
        let stateful: Vec<_> = workload
            .owners
            .iter()
            .filter(|o| o.kind == Kind::StatefulSet)
            .map(|o| o.replicas)
            .collect();
        assert_eq!(stateful, [3, 10, 20]);
        let sizes: std::collections::BTreeSet<u32> =
            workload.owners.iter().map(|o| o.replicas).collect();
        assert!(sizes.contains(&1) && sizes.contains(&50));
        assert_eq!(workload.owners[0].name, "dep-000-x1");
        assert_eq!(workload.owners[2].name, "sts-002-x3");
        // Unmanaged pods are spread over the fleet.
        let nodes: Vec<usize> = workload.unmanaged.iter().map(|u| u.node_index).collect();
        assert_eq!(nodes, [0, 20, 40, 60, 80]);
    }

    #[test]
    fn charted_owners_are_distinct_and_include_the_critical_size() {
        let workload = Workload::plan(100, 3000);
        let names: Vec<&str> = workload
            .charted(15)
            .iter()
            .map(|o| o.name.as_str())
            .collect();
        assert_eq!(
            names,
            ["dep-012-x50", "dep-007-x15", "sts-002-x3", "dep-015-x3"]
        );
    }

    #[test]
    fn budgets_sit_at_the_sla_bound_not_at_a_percentage() {
        // min(ceil(0.9·d), d−1), worked out by hand: a percentage would allow nothing under 10
        // replicas.
        for (replicas, min_available) in [(1, 0), (2, 1), (3, 2), (10, 9), (15, 14), (50, 45)] {
            assert_eq!(
                budget_at_bound(replicas, 90),
                IntOrString::Int(min_available),
                "{replicas} replicas"
            );
        }
        assert_eq!(budget_at_bound(4, 50), IntOrString::Int(2));
    }

    fn realistic(nodes: usize, pods: usize) -> Workload {
        Workload::generate(nodes, pods, Shape::Realistic, &Realism::default())
    }

    #[test]
    fn the_same_seed_gives_the_same_fleet_and_another_seed_another() {
        let a = realistic(100, 3000);
        assert_eq!(a, realistic(100, 3000));
        let other = Workload::generate(
            100,
            3000,
            Shape::Realistic,
            &Realism {
                seed: 2,
                ..Realism::default()
            },
        );
        assert_ne!(a, other);
        // Only the draws differ: the owners are the same.
        let names = |w: &Workload| w.owners.iter().map(|o| o.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&a), names(&other));
    }

    fn messy(nodes: usize, pods: usize, seed: u64, rates: MessRates) -> Workload {
        let realism = Realism {
            seed,
            messy: Some(rates),
            ..Realism::default()
        };
        Workload::generate(nodes, pods, Shape::Realistic, &realism)
    }

    #[test]
    fn messy_is_off_by_default_and_a_tidy_fleet_serializes_as_before() {
        assert_eq!(Realism::default().messy, None);
        let tidy = realistic(20, 600);
        assert!(tidy.messy.is_none() && tidy.unfinishable().is_empty());
        assert!(
            tidy.owners
                .iter()
                .all(|o| { !o.crash_looping && o.stuck_rollout == 0 && o.pinned_nodes.is_empty() })
        );
        // No key of the messy shapes in a tidy fleet's JSON: its summaries and reports read as they
        // did.
        let json = serde_json::to_string(&tidy).unwrap();
        for key in ["messy", "crash_looping", "stuck_rollout", "pinned_nodes"] {
            assert!(!json.contains(key), "{key}");
        }
        assert_eq!(serde_json::from_str::<Workload>(&json).unwrap(), tidy);
    }

    #[test]
    fn a_messy_fleet_is_the_tidy_fleet_of_its_seed_with_the_messy_shapes_on_top() {
        for seed in 1..=20 {
            let tidy = Workload::generate(
                20,
                600,
                Shape::Realistic,
                &Realism {
                    seed,
                    ..Realism::default()
                },
            );
            let w = messy(20, 600, seed, MessRates::default());
            assert_eq!(w, messy(20, 600, seed, MessRates::default()));
            // The same owners, sizes, delays and requests; the bare pods as many (moved to drawn
            // live nodes).
            assert_eq!(w.owners.len(), tidy.owners.len());
            for (a, b) in w.owners.iter().zip(&tidy.owners) {
                assert_eq!(
                    (
                        &a.name,
                        a.replicas,
                        a.ready_delay_ms,
                        a.cpu_millis,
                        a.memory_mib
                    ),
                    (
                        &b.name,
                        b.replicas,
                        b.ready_delay_ms,
                        b.cpu_millis,
                        b.memory_mib
                    )
                );
            }
            assert_eq!(w.pods(), 600);
            assert_eq!(w.unmanaged.len(), tidy.unmanaged.len());
            let m = w.messy.as_ref().unwrap();
            assert_eq!(m.unmanaged_policy, UnmanagedPodPolicy::Never);
            // Nothing placed on a dead node but the zombies no kubelet confirms gone.
            let dead: BTreeSet<usize> = m.dead_nodes.iter().copied().collect();
            assert!(w.unmanaged.iter().all(|u| !dead.contains(&u.node_index)));
            assert!(
                w.owners
                    .iter()
                    .flat_map(|o| &o.pinned_nodes)
                    .all(|n| !dead.contains(n))
            );
            for z in &m.zombies {
                assert_eq!(z.finalizer, !dead.contains(&z.node_index), "{z:?}");
                let owner = w.owners.iter().find(|o| o.name == z.owner).unwrap();
                assert_eq!(owner.kind, Kind::Deployment);
            }
            // The oracle: dead nodes, zombies' nodes, bare pods' nodes, pinned pods' nodes.
            let mut expected = dead.clone();
            expected.extend(m.zombies.iter().map(|z| z.node_index));
            expected.extend(w.unmanaged.iter().map(|u| u.node_index));
            expected.extend(w.owners.iter().flat_map(|o| o.pinned_nodes.iter().copied()));
            assert_eq!(w.unfinishable(), expected);
            // Pinned owners: a 1-replica Deployment on one node, a StatefulSet on a node of its own
            // per ordinal.
            for o in w.owners.iter().filter(|o| !o.pinned_nodes.is_empty()) {
                assert!(o.preferred_nodes.is_empty() && !o.crash_looping && o.stuck_rollout == 0);
                match o.kind {
                    Kind::Deployment => assert_eq!((o.replicas, o.pinned_nodes.len()), (1, 1)),
                    Kind::StatefulSet => {
                        let distinct: BTreeSet<usize> = o.pinned_nodes.iter().copied().collect();
                        assert_eq!(distinct.len(), o.replicas as usize);
                        assert_eq!(
                            o.pinned_node(&format!("{}-1", o.name)),
                            Some(o.pinned_nodes[1])
                        );
                    }
                }
            }
            for o in w.owners.iter().filter(|o| o.stuck_rollout > 0) {
                assert!(o.kind == Kind::Deployment && o.replicas >= 2 && !o.rolling);
                assert_eq!(o.stuck_rollout, o.replicas.div_ceil(4));
            }
        }
    }

    #[test]
    fn messy_fleets_have_every_shape_at_their_rates() {
        let count = |rates: &MessRates| {
            let mut seen = [0usize; 7];
            for seed in 1..=50 {
                let w = messy(20, 600, seed, rates.clone());
                let m = w.messy.as_ref().unwrap();
                seen[0] += m.dead_nodes.len();
                seen[1] += w.owners.iter().filter(|o| o.crash_looping).count();
                seen[2] += w.owners.iter().filter(|o| o.stuck_rollout > 0).count();
                seen[3] += w
                    .owners
                    .iter()
                    .filter(|o| !o.pinned_nodes.is_empty() && o.kind == Kind::Deployment)
                    .count();
                seen[4] += w
                    .owners
                    .iter()
                    .filter(|o| !o.pinned_nodes.is_empty() && o.kind == Kind::StatefulSet)
                    .count();
                seen[5] += m.zombies.iter().filter(|z| z.finalizer).count();
                seen[6] += m.zombies.iter().filter(|z| z.deleted_before_s < 60).count();
            }
            seen
        };
        // 50 fleets of 20 nodes and about 50 owners: ~10 dead nodes, ~125 crash-looping owners, ...
        let [dead, crash, stuck, pinned, pinned_sets, zombies, fresh] =
            count(&MessRates::default());
        assert!((3..=25).contains(&dead), "{dead}");
        assert!((50..=250).contains(&crash), "{crash}");
        assert!(
            stuck > 50 && pinned > 20 && pinned_sets > 10 && zombies > 20,
            "{stuck} {pinned} {pinned_sets} {zombies}"
        );
        assert_eq!(fresh, 0);
        let [dead, crash, .., fresh] = count(&MessRates::harsh());
        assert!(
            dead > 80 && crash > 400 && fresh > 20,
            "{dead} {crash} {fresh}"
        );
    }

    #[test]
    fn the_simple_shape_is_the_earlier_reports_fleet() {
        let simple = Workload::generate(100, 3000, Shape::Simple, &Realism::default());
        assert_eq!(simple, Workload::plan(100, 3000));
        assert!(simple.node_size.is_none() && simple.fill(100).is_none());
        assert!(
            simple
                .owners
                .iter()
                .all(|o| o.ready_delay_ms == 0 && o.cpu_millis == 0)
        );
    }

    #[test]
    fn the_realistic_fleet_has_a_rollout_an_ordered_stateful_set_bunched_owners_and_spread_delays()
    {
        for (nodes, pods) in [(10, 300), (20, 600), (100, 3000)] {
            let w = realistic(nodes, pods);
            assert_eq!(w.pods(), pods, "{nodes} nodes");
            let rolling: Vec<&Owner> = w.owners.iter().filter(|o| o.rolling).collect();
            assert_eq!(rolling.len(), 1);
            assert_eq!(
                (rolling[0].kind, rolling[0].replicas),
                (Kind::Deployment, 14)
            );
            let ordered: Vec<&Owner> = w.owners.iter().filter(|o| o.ordered).collect();
            assert_eq!(ordered.len(), 1);
            assert_eq!(
                (ordered[0].kind, ordered[0].replicas),
                (Kind::StatefulSet, 10)
            );
            assert_eq!(w.grace_period_s, 3);
            // Delays within 2–20 s in tenths, and spread.
            let delays: std::collections::BTreeSet<u64> =
                w.owners.iter().map(|o| o.ready_delay_ms).collect();
            assert!(
                delays
                    .iter()
                    .all(|d| (2000..=20_000).contains(d) && d % 100 == 0)
            );
            assert!(delays.len() > w.owners.len() / 2, "{delays:?}");
            // Some owners bunched on 3 distinct nodes of the fleet, most spread.
            let bunched: Vec<&Owner> = w
                .owners
                .iter()
                .filter(|o| !o.preferred_nodes.is_empty())
                .collect();
            assert!(!bunched.is_empty() && bunched.len() < w.owners.len() / 2);
            for owner in bunched {
                let distinct: std::collections::BTreeSet<usize> =
                    owner.preferred_nodes.iter().copied().collect();
                assert_eq!(distinct.len(), 3);
                assert!(distinct.iter().all(|i| *i < nodes));
            }
        }
        // A fleet too small for them goes without, and still places exactly its pods.
        let tiny = realistic(3, 12);
        assert!(tiny.owners.iter().all(|o| !o.rolling));
        assert_eq!(tiny.pods(), 12);
    }

    #[test]
    fn nodes_are_three_quarters_full_so_a_drained_nodes_pods_fit_elsewhere_but_not_everywhere() {
        for (nodes, pods) in [(10, 300), (20, 600), (100, 3000), (500, 15_000)] {
            let w = realistic(nodes, pods);
            let size = w.node_size.unwrap();
            // The requests, summed here from the generated owners: pods × their request, 100m/128Mi
            // per unmanaged pod, 50m/64Mi of the DaemonSet per node.
            let total = |per_pod: fn(&Owner) -> u32, unmanaged: u64, daemon: u64| {
                w.owners
                    .iter()
                    .map(|o| u64::from(o.replicas * per_pod(o)))
                    .sum::<u64>()
                    + unmanaged * w.unmanaged.len() as u64
                    + daemon * nodes as u64
            };
            let cpu = total(|o| o.cpu_millis, 100, 50);
            let memory = total(|o| o.memory_mib, 128, 64);
            let n = nodes as f64;
            let cpu_fill = cpu as f64 / (n * size.cpu_millis as f64);
            let memory_fill = memory as f64 / (n * size.memory_mib as f64);
            assert!((0.70..=0.85).contains(&cpu_fill), "{nodes}: CPU {cpu_fill}");
            assert!(
                (0.70..=0.85).contains(&memory_fill),
                "{nodes}: memory {memory_fill}"
            );
            assert_eq!(w.fill(nodes), Some((cpu_fill, memory_fill)));
            // With a fifth of the nodes drained at once, the others have room for their pods (on
            // average)…
            let drained = n * 0.2;
            assert!((n - drained) * (1.0 - cpu_fill) >= drained * cpu_fill);
            // …but one node cannot take another's on top of its own.
            assert!(2.0 * cpu_fill > 1.0);
        }
    }

    #[test]
    fn light_nodes_still_fit_four_of_the_largest_pods() {
        let w = realistic(30, 90);
        let size = w.node_size.unwrap();
        let largest = w.owners.iter().map(|o| o.cpu_millis).max().unwrap();
        assert!(size.cpu_millis >= 4 * u64::from(largest));
    }

    #[test]
    fn the_bound_leaves_out_the_rolling_deployment_and_counts_every_other_owned_pod() {
        let w = realistic(20, 600);
        let input = w.bound_input(
            20,
            4,
            90,
            Duration::from_secs(2),
            Duration::from_secs(2),
            None,
        );
        assert!(input.owners.iter().all(|o| o.name != ROLLING_DEPLOYMENT));
        // 600 pods: 1 unmanaged, 14 in the rollout.
        assert_eq!(input.evictions, 600 - 1 - 14);
        assert_eq!(input.grace_period, Duration::from_secs(3));
        let ordered = input
            .owners
            .iter()
            .find(|o| o.name == ORDERED_STATEFUL_SET)
            .unwrap();
        assert!(ordered.replaced_after_removal);
    }
}
