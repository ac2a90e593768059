//! Fuzzes the pure planner, `k8sm_planner::plan(&ClusterView, now)`, over small clusters built with
//! its own test builders (feature `testing`), for the properties of one plan (docs/design.md §5):
//! nothing panics; each eviction meets the health rule and no owner goes below its SLA floor; pods
//! opted out or on opted-out nodes or nodes of two policies, and unmanaged pods under `Never`, are
//! never evicted or deleted; paused policies only mark and complete; budgets are not overdrawn; no
//! pod is hit twice; and the plan does not depend on the order of the view's vectors.
#![no_main]
// `..Default::default()` on view structs whose fields are all set today: the target keeps compiling
// when the view gains a field (this crate is outside the workspace, so nothing else would notice).
#![allow(clippy::needless_update)]

use std::collections::{BTreeMap, BTreeSet};

use arbitrary::{Arbitrary, Unstructured};
use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use k8sm_api::{DurationString, KamikazeMechanism, MaxConcurrentNodes, UnmanagedPodPolicy, keys};
use k8sm_planner::{
    ActionKind, ClusterView, ControllerRef, InFlightEviction, NodeView, OwnerKind, PdbView, Plan,
    PodPhase, PolicyView, Selector, plan, sla_floor,
    testing::{NEW, OLD, at, node, owner, policy, unmanaged_pod},
};
use libfuzzer_sys::fuzz_target;

const MAX_NODES: usize = 8;
const MAX_OWNERS: usize = 8;
const MAX_PODS: usize = 40;
const MAX_PDBS: usize = 4;
const MAX_POLICIES: usize = 3;
const MAX_IN_FLIGHT: usize = 6;
const POOLS: [&str; 3] = ["a", "b", "c"];
const NAMESPACES: [&str; 2] = ["ns", "other"];

/// A dense description the view is built from, not the view itself (deriving `Arbitrary` on it), so
/// that names, UIDs and references stay consistent (a random view would almost never select a node
/// or match a pod to its owner) while the values decisions turn on (readiness, counts, thresholds,
/// times, opt-out values, malformed annotations) range freely. Its zero value (what `arbitrary`
/// gives when the input runs out) is the busy case: admitted nodes on the old executor, ready pods
/// of healthy ReplicaSets, one default policy; so short inputs already evict, and the fuzzer spends
/// its time on decisions rather than on finding a cluster that has any.
#[derive(Arbitrary, Debug)]
struct Input {
    /// Minutes after the test epoch at which to plan, past the marks of [`Stage`] (at minute
    /// 0..=255).
    now: u16,
    /// Owners with their pods.
    owners: Vec<OwnerGen>,
    /// How many of `nodes` the cluster has: 1 + this modulo [`MAX_NODES`]. A fixed array rather
    /// than a vector, so that a mutation of one node does not shift the rest of the input.
    node_count: u8,
    nodes: [NodeGen; MAX_NODES],
    /// None: one policy with every default but the target, selecting all nodes.
    policies: Vec<PolicyGen>,
    /// Pods without a controller, or whose reference is odd (another kind, an owner not in the
    /// view).
    loose: Vec<(LooseController, PodGen)>,
    pdbs: Vec<PdbGen>,
    in_flight: Vec<InFlightGen>,
}

/// Something that only one input byte in 16 turns on: an opt-out, a gone owner, a pod that is not
/// simply ready. Most generated clusters are then healthy enough to evict, as real ones are.
#[derive(Debug)]
struct Rare<T>(Option<T>);

impl<'a, T: Arbitrary<'a>> Arbitrary<'a> for Rare<T> {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(Self(if u8::arbitrary(u)? >= 240 {
            Some(T::arbitrary(u)?)
        } else {
            None
        }))
    }
}

#[derive(Arbitrary, Debug)]
struct NodeGen {
    stage: Stage,
    pool: u8,
    /// The opt-out label, with some value.
    opt_out: Rare<Value>,
}

/// Where a node stands, as the builders make it, or as raw annotations.
#[derive(Arbitrary, Debug)]
enum Stage {
    /// Marked and admitted (cordoned) at this minute, running the old executor.
    Admitted(u8),
    /// Marked at this minute, waiting for a slot.
    Marked(u8),
    /// Unmarked, running the old executor.
    Old,
    /// Running the target executor (with leftover marks, or not).
    Upgraded(bool),
    /// Kamikaze sent at this minute; the executor is back (with the target), or not.
    Kamikazed(u8, Option<Executor>),
    /// Admitted by the draining annotation only: not cordoned.
    AdmittedUncordoned(u8),
    /// Anything, annotation by annotation.
    Raw(Box<RawNode>),
}

#[derive(Arbitrary, Debug)]
struct RawNode {
    executor: Executor,
    incompatible_since: Stamp,
    incompatible_label: bool,
    taint: bool,
    draining_since: Stamp,
    kamikaze: Stamp,
    kamikaze_executor: Option<Executor>,
    cordoned_by_k8sm: bool,
    unschedulable: bool,
    no_internal_ip: bool,
    not_ready: bool,
}

#[derive(Arbitrary, Debug, Clone)]
enum Executor {
    Old,
    New,
    None,
    Empty,
    Other(u8),
}

impl Executor {
    fn id(&self) -> Option<String> {
        match self {
            Self::None => None,
            Self::Empty => Some(String::new()),
            Self::Old => Some(OLD.to_owned()),
            Self::New => Some(NEW.to_owned()),
            Self::Other(n) => Some(format!("sha256:other{n}")),
        }
    }
}

/// A time annotation as found on a node.
#[derive(Arbitrary, Debug)]
enum Stamp {
    Absent,
    /// Minutes after the test epoch, possibly after `now`.
    At(u16),
    /// With an offset and surrounding spaces: still RFC 3339.
    Offset(u16, i8),
    Malformed(String),
}

impl Stamp {
    fn text(&self) -> Option<String> {
        match self {
            Self::Absent => None,
            Self::At(m) => Some(at(i64::from(*m)).to_rfc3339()),
            Self::Offset(m, hours) => {
                let offset = chrono::FixedOffset::east_opt(i32::from(*hours % 24) * 3600)?;
                Some(format!(
                    " {} ",
                    at(i64::from(*m)).with_timezone(&offset).to_rfc3339()
                ))
            }
            Self::Malformed(text) => Some(text.clone()),
        }
    }
}

/// A label or annotation value where an opt-out may be.
#[derive(Arbitrary, Debug)]
enum Value {
    True,
    /// `" TRUE "` and the like: opts out too.
    TrueSpaced,
    False,
    Any(String),
}

impl Value {
    fn text(&self, yes: &str) -> String {
        match self {
            Self::True => yes.to_owned(),
            Self::TrueSpaced => format!(" {} ", yes.to_ascii_uppercase()),
            Self::False => if yes == "true" { "false" } else { "true" }.to_owned(),
            Self::Any(text) => text.clone(),
        }
    }
}

#[derive(Arbitrary, Debug)]
struct OwnerGen {
    /// A ReplicaSet, or rarely another kind.
    kind: Rare<Kind>,
    /// `replicas`, modulo 8; `None` is the apiserver default (1) for replicated kinds.
    desired: Option<u8>,
    gone: Rare<()>,
    other_namespace: bool,
    pods: Vec<PodGen>,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Kind {
    ReplicaSet,
    StatefulSet,
    ReplicationController,
    Job,
    DaemonSet,
    Other,
}

impl Kind {
    fn owner_kind(self) -> OwnerKind {
        match self {
            Self::ReplicaSet => OwnerKind::ReplicaSet,
            Self::ReplicationController => OwnerKind::ReplicationController,
            Self::StatefulSet => OwnerKind::StatefulSet,
            Self::Job => OwnerKind::Job,
            Self::DaemonSet => OwnerKind::DaemonSet,
            Self::Other => OwnerKind::Other("Rollout".into()),
        }
    }
}

#[derive(Arbitrary, Debug)]
struct PodGen {
    /// The node at this index (modulo the nodes), or, past them, a node not in the view or none.
    node: u8,
    /// Ready and running, or rarely something else.
    state: Rare<PodState>,
    mirror: Rare<Mirror>,
    /// Opt-out by one of the keys that k8sm honours, as a label (`true`) or an annotation.
    opt_out: Rare<(OptOutKey, Value, bool)>,
    /// An `app` label (modulo 4), which budgets select on.
    app: Option<u8>,
    /// Namespace of a loose pod (an owned pod's is its owner's).
    other_namespace: bool,
}

#[derive(Arbitrary, Debug)]
enum LooseController {
    None,
    /// The owner at this index (modulo the owners), but the reference names another kind.
    OwnerAs(u8, Kind),
    /// An owner that is not in the view.
    Missing(u8, Kind),
}

#[derive(Arbitrary, Debug)]
enum PodState {
    NotReady,
    Terminating { ready: bool },
    Phase { phase: Phase, ready: bool },
}

#[derive(Arbitrary, Debug)]
enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

#[derive(Arbitrary, Debug)]
enum Mirror {
    Field,
    Annotation,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum OptOutKey {
    K8sm,
    Karpenter,
    ClusterAutoscaler,
}

impl OptOutKey {
    fn key_and_value(self) -> (&'static str, &'static str) {
        match self {
            Self::K8sm => (keys::UPGRADE_OPT_OUT_LABEL, keys::UPGRADE_OPT_OUT_VALUE),
            Self::Karpenter => keys::NEIGHBOUR_OPT_OUT_KEYS[0],
            Self::ClusterAutoscaler => keys::NEIGHBOUR_OPT_OUT_KEYS[1],
        }
    }
}

#[derive(Arbitrary, Debug)]
struct PdbGen {
    /// `None`: a null selector (selects nothing).
    selector: Option<SelectorGen>,
    allowed: i8,
    other_namespace: bool,
}

#[derive(Arbitrary, Debug)]
enum SelectorGen {
    /// The empty selector: everything.
    All,
    /// `key = value`, on `pool` for nodes and `app` for pods.
    Is(u8),
    /// `key NotIn (value)`.
    IsNot(u8),
    /// `key Exists`.
    Exists,
    /// An unknown operator: the selector is invalid.
    Invalid,
}

impl SelectorGen {
    fn build(&self, key: &str, value: impl Fn(u8) -> String) -> LabelSelector {
        let expression = |operator: &str, values: Option<Vec<String>>| LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: key.to_owned(),
                operator: operator.to_owned(),
                values,
            }]),
        };
        match self {
            Self::All => LabelSelector::default(),
            Self::Is(v) => LabelSelector {
                match_labels: Some([(key.to_owned(), value(*v))].into()),
                match_expressions: None,
            },
            Self::IsNot(v) => expression("NotIn", Some(vec![value(*v)])),
            Self::Exists => expression("Exists", None),
            Self::Invalid => expression("Near", Some(vec![value(0)])),
        }
    }
}

#[derive(Arbitrary, Debug)]
struct PolicyGen {
    selector: SelectorGen,
    /// Any u8: the CRD keeps it in 1..=100, the planner clamps whatever it gets (0 here: the
    /// default, 90).
    threshold: u8,
    max_concurrent: MaxGen,
    unmanaged: Unmanaged,
    timeout: Option<DurationGen>,
    /// `None`: the target [`NEW`].
    target: Option<Option<Executor>>,
    ignore_pdbs: bool,
    no_cordon: bool,
    kamikaze: Kamikaze,
    restart_timeout: Option<DurationGen>,
    paused: Rare<()>,
}

#[derive(Arbitrary, Debug)]
enum MaxGen {
    /// Modulo 16; 0 is the default, 1.
    Count(u8),
    Percent(u8),
}

#[derive(Arbitrary, Debug)]
enum Unmanaged {
    Never,
    Delete,
    DeleteAfterTimeout,
}

#[derive(Arbitrary, Debug)]
enum Kamikaze {
    Annotation,
    Http(Option<bool>),
    DeleteNode,
}

/// A duration string of one or two parts.
#[derive(Arbitrary, Debug)]
struct DurationGen {
    parts: Vec<(u32, u8)>,
}

impl DurationGen {
    fn build(&self) -> DurationString {
        let text: String = self
            .parts
            .iter()
            .take(2)
            .map(|(n, unit)| {
                format!(
                    "{}{}",
                    n % 1_000_000_000,
                    ["m", "s", "h", "ms"][usize::from(unit % 4)]
                )
            })
            .collect();
        text.parse()
            .unwrap_or_else(|_| "10m".parse().expect("a valid duration"))
    }
}

#[derive(Arbitrary, Debug)]
struct InFlightGen {
    /// A pod of the view, or (for indices past the pods) one that is gone.
    pod: u8,
    /// Record the pod's owner, or not, or some other owner.
    owner: Option<Option<u8>>,
    /// Minutes after the test epoch.
    at: u16,
}

fn build_node(i: usize, g: &NodeGen) -> NodeView {
    let name = format!("n{i}");
    let mark = |m: &u8| at(i64::from(*m));
    let mut n = match &g.stage {
        Stage::Admitted(m) => node(&name).marked(mark(m)).admitted(mark(m)),
        Stage::Marked(m) => node(&name).marked(mark(m)),
        Stage::Old => node(&name),
        Stage::Upgraded(leftover) => {
            let n = node(&name).executor(NEW);
            if *leftover { n.marked(at(0)) } else { n }
        }
        Stage::Kamikazed(m, back) => {
            let mut n = node(&name)
                .marked(mark(m))
                .admitted(mark(m))
                .kamikazed(mark(m));
            if let Some(e) = back {
                n.executor_id = e.id();
            }
            n
        }
        Stage::AdmittedUncordoned(m) => {
            let mut n = node(&name).marked(mark(m));
            n.draining_since = Some(mark(m).to_rfc3339());
            n
        }
        Stage::Raw(raw) => NodeView {
            executor_id: raw.executor.id(),
            incompatible_since: raw.incompatible_since.text(),
            incompatible_label: raw.incompatible_label,
            has_k8sm_taint: raw.taint,
            draining_since: raw.draining_since.text(),
            kamikaze: raw.kamikaze.text(),
            kamikaze_executor_id: raw
                .kamikaze_executor
                .as_ref()
                .map(|e| e.id().unwrap_or_default()),
            cordoned_by_k8sm: raw.cordoned_by_k8sm,
            unschedulable: raw.unschedulable,
            internal_ip: (!raw.no_internal_ip).then(|| "10.0.0.1".to_owned()),
            ready: !raw.not_ready,
            ..node(&name)
        },
    }
    .label("pool", POOLS[usize::from(g.pool) % POOLS.len()]);
    if let Some(v) = &g.opt_out.0 {
        n = n.label(
            keys::UPGRADE_OPT_OUT_LABEL,
            &v.text(keys::UPGRADE_OPT_OUT_VALUE),
        );
    }
    n
}

fn build_policy(i: usize, g: &PolicyGen) -> PolicyView {
    policy(&format!("policy{i}")).with(|s| {
        s.node_selector = g
            .selector
            .build("pool", |v| POOLS[usize::from(v) % POOLS.len()].to_owned());
        if let Some(target) = &g.target {
            s.target_executor_id = target.as_ref().and_then(Executor::id);
        }
        if let Some(m) = match g.max_concurrent {
            MaxGen::Count(n) => MaxConcurrentNodes::count(u32::from(n % 16)),
            MaxGen::Percent(p) => MaxConcurrentNodes::percent(p),
        } {
            s.max_concurrent_nodes = m;
        }
        if g.threshold != 0 {
            s.owner_health_threshold = g.threshold;
        }
        s.unmanaged_pods.policy = match g.unmanaged {
            Unmanaged::Delete => UnmanagedPodPolicy::Delete,
            Unmanaged::DeleteAfterTimeout => UnmanagedPodPolicy::DeleteAfterTimeout,
            Unmanaged::Never => UnmanagedPodPolicy::Never,
        };
        s.unmanaged_pods.timeout = g.timeout.as_ref().map(DurationGen::build);
        s.respect_pod_disruption_budgets = !g.ignore_pdbs;
        s.cordon = !g.no_cordon;
        (s.kamikaze.mechanism, s.kamikaze.url_template) = match g.kamikaze {
            Kamikaze::Annotation => (KamikazeMechanism::Annotation, None),
            Kamikaze::Http(None) => (KamikazeMechanism::Http, None),
            Kamikaze::Http(Some(by_ip)) => (
                KamikazeMechanism::Http,
                Some(
                    if by_ip {
                        "http://{nodeIP}:10260/kamikaze"
                    } else {
                        "https://{nodeName}/kamikaze"
                    }
                    .to_owned(),
                ),
            ),
            Kamikaze::DeleteNode => (KamikazeMechanism::DeleteNode, None),
        };
        if let Some(d) = &g.restart_timeout {
            s.restart_timeout = d.build();
        }
        s.paused = g.paused.0.is_some();
    })
}

fn build(input: &Input) -> (ClusterView, DateTime<Utc>) {
    let now = at(256 + i64::from(input.now));
    let namespace = |other: bool| NAMESPACES[usize::from(other)];
    let mut policies: Vec<PolicyView> = input
        .policies
        .iter()
        .take(MAX_POLICIES)
        .enumerate()
        .map(|(i, g)| build_policy(i, g))
        .collect();
    if policies.is_empty() {
        policies.push(policy("policy0"));
    }
    let nodes = input
        .nodes
        .iter()
        .take(1 + usize::from(input.node_count) % MAX_NODES)
        .enumerate()
        .map(|(i, g)| build_node(i, g))
        .collect();
    let mut view = ClusterView {
        nodes,
        policies,
        ..ClusterView::default()
    };

    let mut pods = Vec::new();
    for (i, g) in input.owners.iter().take(MAX_OWNERS).enumerate() {
        let desired = g.desired.map(|d| u32::from(d % 8));
        let kind = g.kind.0.unwrap_or(Kind::ReplicaSet);
        let mut o = owner(
            kind.owner_kind(),
            namespace(g.other_namespace),
            &format!("o{i}"),
            desired,
        );
        o.exists = g.gone.0.is_none();
        for p in &g.pods {
            pods.push((o.pod("", ""), p));
        }
        view.owners.push(o);
    }
    for (controller, p) in &input.loose {
        let mut pod = unmanaged_pod(namespace(p.other_namespace), "", "");
        let owner_at = |k: u8| {
            (!view.owners.is_empty()).then(|| &view.owners[usize::from(k) % view.owners.len()])
        };
        match controller {
            LooseController::None => {}
            LooseController::OwnerAs(k, kind) => {
                if let Some(o) = owner_at(*k) {
                    pod = o.pod("", "");
                    if let Some(c) = &mut pod.controller {
                        c.kind = kind.owner_kind().to_string();
                    }
                }
            }
            LooseController::Missing(k, kind) => {
                pod.controller = Some(Arc::new(ControllerRef::new(
                    &pod.namespace,
                    "apps/v1",
                    kind.owner_kind().as_str(),
                    &format!("gone{k}"),
                    &format!("gone/{k}"),
                )));
            }
        }
        pods.push((pod, p));
    }

    let node_count = view.nodes.len();
    for (i, (mut pod, g)) in pods.into_iter().take(MAX_PODS).enumerate() {
        pod.name = format!("p{i}");
        pod.uid = format!("{}/p{i}", pod.namespace);
        // Mostly on a node of the view; past them on a node it does not hold, or unscheduled.
        let n = usize::from(g.node) % (node_count + 2);
        pod.node_name = match n {
            _ if n < node_count => Some(format!("n{n}")),
            _ if n == node_count => Some("elsewhere".to_owned()),
            _ => None,
        };
        (pod.phase, pod.ready, pod.terminating) = match &g.state.0 {
            None => (PodPhase::Running, true, false),
            Some(PodState::NotReady) => (PodPhase::Running, false, false),
            Some(PodState::Terminating { ready }) => (PodPhase::Running, *ready, true),
            Some(PodState::Phase { phase, ready }) => (
                match phase {
                    Phase::Pending => PodPhase::Pending,
                    Phase::Running => PodPhase::Running,
                    Phase::Succeeded => PodPhase::Succeeded,
                    Phase::Failed => PodPhase::Failed,
                    Phase::Unknown => PodPhase::Unknown,
                },
                *ready,
                false,
            ),
        };
        match g.mirror.0 {
            None => {}
            Some(Mirror::Field) => pod = pod.mirror(),
            Some(Mirror::Annotation) => pod = pod.annotation("kubernetes.io/config.mirror", "hash"),
        }
        if let Some((key, value, as_label)) = &g.opt_out.0 {
            let (key, yes) = key.key_and_value();
            let value = value.text(yes);
            pod = if *as_label {
                pod.label(key, &value)
            } else {
                pod.annotation(key, &value)
            };
        }
        if let Some(app) = g.app {
            pod = pod.label("app", &format!("app{}", app % 4));
        }
        view.pods.push(pod.into());
    }

    for (i, g) in input.pdbs.iter().take(MAX_PDBS).enumerate() {
        view.pdbs.push(PdbView {
            namespace: namespace(g.other_namespace).to_owned(),
            name: format!("pdb{i}"),
            selector: g
                .selector
                .as_ref()
                .map(|s| s.build("app", |v| format!("app{}", v % 4))),
            disruptions_allowed: i32::from(g.allowed),
            ..PdbView::default()
        });
    }

    let pod_count = view.pods.len();
    for g in input.in_flight.iter().take(MAX_IN_FLIGHT) {
        let pod = view.pods.get(usize::from(g.pod) % (pod_count + 1));
        let pod_uid = pod.map_or_else(|| format!("gone/{}", g.pod), |p| p.uid.clone());
        let owner_uid = match g.owner {
            None => None,
            Some(None) => pod
                .and_then(|p| p.controller.as_ref())
                .map(|c| c.uid.clone()),
            Some(Some(k)) => view
                .owners
                .get(usize::from(k) % (view.owners.len() + 1))
                .map(|o| o.uid.clone()),
        };
        view.in_flight.push(InFlightEviction {
            pod_uid,
            owner_uid,
            at: at(i64::from(g.at)),
            ..InFlightEviction::default()
        });
    }
    (view, now)
}

/// The opt-out rule for a value: `true` (or `false` for safe-to-evict), any case, surrounding
/// spaces ignored.
fn opts_out(value: Option<&String>, yes: &str) -> bool {
    value.is_some_and(|v| v.trim().eq_ignore_ascii_case(yes))
}

fn pod_opted_out(pod: &k8sm_planner::PodView) -> bool {
    [
        OptOutKey::K8sm,
        OptOutKey::Karpenter,
        OptOutKey::ClusterAutoscaler,
    ]
    .into_iter()
    .map(OptOutKey::key_and_value)
    .any(|(key, yes)| opts_out(pod.labels.get(key), yes) || opts_out(pod.annotations.get(key), yes))
}

fn node_opted_out(node: &NodeView) -> bool {
    opts_out(
        node.labels.get(keys::UPGRADE_OPT_OUT_LABEL),
        keys::UPGRADE_OPT_OUT_VALUE,
    )
}

/// Checks one plan against the view it was made from.
fn check(view: &ClusterView, plan: &Plan) {
    let policies: BTreeMap<&str, &PolicyView> =
        view.policies.iter().map(|p| (p.name.as_str(), p)).collect();
    let nodes: BTreeMap<&str, &NodeView> =
        view.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let pods: BTreeMap<&str, &k8sm_planner::PodView> =
        view.pods.iter().map(|p| (p.uid.as_str(), &**p)).collect();
    let in_flight: BTreeSet<&str> = view.in_flight.iter().map(|e| e.pod_uid.as_str()).collect();
    // Which policies select each node (a policy with an invalid selector selects nothing).
    let mut claims: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for p in &view.policies {
        if let Ok(selector) = Selector::new(&p.spec.node_selector) {
            for n in &view.nodes {
                if selector.matches(&n.labels) {
                    claims
                        .entry(n.name.as_str())
                        .or_default()
                        .push(p.name.as_str());
                }
            }
        }
    }
    let only_claimant = |node: &str| match claims.get(node).map(Vec::as_slice) {
        Some([policy]) => Some(*policy),
        _ => None,
    };

    let mut hit = BTreeSet::new();
    for action in &plan.actions {
        let policy = policies
            .get(action.policy.as_str())
            .unwrap_or_else(|| panic!("unknown policy: {action:?}"));
        if policy.spec.paused {
            assert!(
                matches!(
                    action.kind,
                    ActionKind::Mark { .. } | ActionKind::Complete { .. }
                ),
                "paused policy acts: {action:?}"
            );
        }
        let node_name = match (&action.kind, action.kind.pod()) {
            (_, Some(pod_ref)) => {
                let pod = pods
                    .get(pod_ref.uid.as_str())
                    .unwrap_or_else(|| panic!("unknown pod: {action:?}"));
                assert!(
                    hit.insert(pod_ref.uid.as_str()),
                    "pod hit twice: {action:?}"
                );
                assert!(!pod_opted_out(pod), "opted-out pod: {action:?}\n{pod:?}");
                assert!(
                    !pod.terminating && !in_flight.contains(pod.uid.as_str()),
                    "pod already going: {action:?}"
                );
                assert!(
                    !pod.mirror && !pod.annotations.contains_key("kubernetes.io/config.mirror"),
                    "mirror pod: {action:?}"
                );
                let daemon = pod
                    .controller
                    .as_ref()
                    .is_some_and(|c| c.kind == "DaemonSet");
                assert!(!daemon, "DaemonSet pod: {action:?}");
                if matches!(action.kind, ActionKind::DeletePod { .. })
                    && policy.spec.unmanaged_pods.policy == UnmanagedPodPolicy::Never
                {
                    assert!(
                        pod.phase.is_finished(),
                        "policy Never deletes a running pod: {action:?}\n{pod:?}"
                    );
                }
                pod.node_name
                    .as_deref()
                    .unwrap_or_else(|| panic!("pod on no node: {action:?}"))
            }
            (kind, None) => kind.node().expect("node actions name their node"),
        };
        let node = nodes
            .get(node_name)
            .unwrap_or_else(|| panic!("node not in the view: {action:?}"));
        assert!(!node_opted_out(node), "opted-out node: {action:?}");
        assert_eq!(
            only_claimant(node_name),
            Some(action.policy.as_str()),
            "node not selected by this policy alone: {action:?}"
        );
    }

    check_sla(view, plan, &policies);
    check_budgets(view, plan, &policies);

    for p in &plan.policies {
        assert!(p.slots_in_use <= p.slots, "{p:?}");
        assert!(p.slots >= 1, "{p:?}");
    }
}

/// The SLA invariant of one plan (as in the planner's property test
/// `a_single_plan_never_breaks_the_sla`).
fn check_sla(view: &ClusterView, plan: &Plan, policies: &BTreeMap<&str, &PolicyView>) {
    let going: BTreeSet<&str> = view.in_flight.iter().map(|e| e.pod_uid.as_str()).collect();
    let owners: BTreeMap<&str, &k8sm_planner::OwnerView> = view
        .owners
        .iter()
        .filter(|o| o.exists)
        .map(|o| (o.uid.as_str(), o))
        .collect();
    // Ready pods of each owner that are neither terminating nor being evicted.
    let mut before: BTreeMap<&str, u32> = BTreeMap::new();
    for pod in &view.pods {
        if let Some(c) = &pod.controller {
            let count = before.entry(c.uid.as_str()).or_default();
            if pod.ready && !pod.terminating && !going.contains(pod.uid.as_str()) {
                *count += 1;
            }
        }
    }
    let mut evicted_ready: BTreeMap<&str, u32> = BTreeMap::new();
    let mut floor: BTreeMap<&str, u32> = BTreeMap::new();
    for action in &plan.actions {
        let ActionKind::Evict {
            pod: pod_ref,
            eviction: e,
        } = &action.kind
        else {
            continue;
        };
        let pod = view
            .pods
            .iter()
            .find(|p| p.uid == pod_ref.uid)
            .expect("checked before");
        let controller = pod
            .controller
            .as_ref()
            .unwrap_or_else(|| panic!("evicts a pod without controller: {action:?}"));
        let owner = owners
            .get(controller.uid.as_str())
            .unwrap_or_else(|| panic!("evicts a pod whose owner is missing: {action:?}"));
        assert!(
            owner.kind.is_replicated(),
            "evicts a pod of a {}: {action:?}",
            owner.kind
        );
        assert_eq!(e.owner.uid, owner.uid, "{action:?}");
        let desired = owner.desired.unwrap_or(1);
        let threshold = policies[action.policy.as_str()]
            .spec
            .owner_health_threshold
            .clamp(1, 100);
        assert_eq!((e.desired, e.threshold), (desired, threshold), "{action:?}");
        assert!(
            e.ready_before > e.needed || e.ready_before >= e.desired,
            "health rule broken: {action:?}"
        );
        assert!(
            e.ready_after >= sla_floor(e.threshold, e.desired),
            "below the floor: {action:?}"
        );
        *evicted_ready.entry(owner.uid.as_str()).or_default() += u32::from(pod.ready);
        let f = floor.entry(owner.uid.as_str()).or_insert(u32::MAX);
        *f = (*f).min(sla_floor(threshold, desired));
    }
    for (owner, evicted) in evicted_ready {
        let ready = before.get(owner).copied().unwrap_or(0);
        assert!(
            ready >= evicted && ready - evicted >= floor[owner],
            "owner {owner}: {ready} ready, {evicted} evicted, floor {}",
            floor[owner]
        );
    }
}

/// Evictions go through the Eviction API exactly when the policy respects budgets, and those never
/// exceed what a budget allows.
fn check_budgets(view: &ClusterView, plan: &Plan, policies: &BTreeMap<&str, &PolicyView>) {
    let mut through_api = Vec::new();
    for action in &plan.actions {
        if let ActionKind::Evict { pod, eviction } = &action.kind {
            let respect = policies[action.policy.as_str()]
                .spec
                .respect_pod_disruption_budgets;
            assert_eq!(eviction.use_eviction_api, respect, "{action:?}");
            if respect {
                through_api.push(
                    view.pods
                        .iter()
                        .find(|p| p.uid == pod.uid)
                        .expect("checked before"),
                );
            }
        }
    }
    for pdb in &view.pdbs {
        let Some(Ok(selector)) = pdb.selector.as_ref().map(Selector::new) else {
            continue;
        };
        let covered = through_api
            .iter()
            .filter(|p| p.namespace == pdb.namespace && selector.matches(&p.labels))
            .count();
        let allowed = usize::try_from(pdb.disruptions_allowed.max(0)).expect("non-negative");
        assert!(
            covered <= allowed,
            "budget {} allows {allowed}, {covered} planned",
            pdb.name
        );
    }
}

fuzz_target!(|input: Input| {
    let (view, now) = build(&input);
    let first = plan(&view, now);
    check(&view, &first);

    // The same plan for the vectors in reverse order.
    let mut reversed = view.clone();
    reversed.nodes.reverse();
    reversed.pods.reverse();
    reversed.owners.reverse();
    reversed.pdbs.reverse();
    reversed.policies.reverse();
    reversed.in_flight.reverse();
    assert_eq!(
        plan(&reversed, now),
        first,
        "the order of the view changed the plan"
    );
});
