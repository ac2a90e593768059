//! The per-pod decisions of docs/design.md §5.3 on one node: what moves now, what waits, and what
//! needs an operator.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use k8sm_api::UnmanagedPodPolicy;
use k8sm_api::text::{MAX_QUOTED_VALUE, quoted};

use crate::{
    PodPhase, PodView, Reason, Resources,
    index::shared_output::{MessageKey, WaitsOn},
    index::{Index, OnNode},
    model::output::{ActionKind, Decision, Eviction, PodPlan, PodRef},
    model::pass_cache::Text,
    objects::budgets::Pdb,
    objects::classify::{Class, Ignored, Unmanaged, ignored_message, unmanaged_message},
    objects::pin,
    objects::workload::Workload,
    rules::health::{self, Ledger, PodState, Verdict},
    rules::node_context::NodeContext,
    rules::reads::{Reads, WorkloadReadiness},
    rules::surge::{self, Move},
};

/// A node's pods, classified, without deciding anything yet: enough to order admission and to tell
/// a Blocked node.
pub(crate) struct Survey<'a> {
    /// Sorted by namespace, name and UID, so that decisions consume owner health in a fixed order.
    /// Empty in a [`tally`], which only counts.
    pub(crate) pods: Vec<OnNode<'a>>,
    /// Pods that keep the node from being drained.
    pub(crate) left: u32,
    /// Of those, pods that wait for an operator whatever the rest of the cluster does.
    pub(crate) need_operator: u32,
    /// Pods whose eviction was launched and not answered yet: not surely gone, so they hold back
    /// what follows them.
    pub(crate) unanswered: u32,
}

impl Survey<'_> {
    /// Only DaemonSet, mirror and finished pods are left.
    pub(crate) fn drained(&self) -> bool {
        self.left == 0
    }

    /// Pods are left, and every one of them waits for an operator.
    pub(crate) fn blocked(&self) -> bool {
        self.left > 0 && self.need_operator == self.left
    }
}

/// Classifies every pod of the node, in pod order: the survey of a node whose pods are decided in
/// this pass.
pub(crate) fn survey<'a>(ctx: &NodeContext, index: &Index<'a>) -> Survey<'a> {
    let pods: Vec<_> = index.pods_on(ctx.node).collect();
    let mut survey = count(pods.iter().copied(), ctx, index);
    survey.pods = pods;
    survey
}

/// Only the counts of a survey: all that admission needs of the many nodes that only queue for a
/// slot, without keeping or sorting their pods (most of a large fleet's pods are on such nodes).
/// Read from the classes the index counted on the node when none of its pods can need an operator,
/// nor has an eviction unanswered: [`needs_operator`] answers `None` for every pod but opted-out,
/// Job and unmanaged ones, and workload or other-controller pods that more than one budget covers
/// or whose spec may pin them to the node (counted by the index too). Otherwise the pods are
/// counted one by one.
pub(crate) fn tally<'a>(ctx: &NodeContext, index: &Index<'a>) -> Survey<'a> {
    let classes = index.classes_on(ctx.node);
    let from_classes = classes.judged_by_policy == 0
        && classes.multi_covered == 0
        && classes.terminating == 0
        && classes.pinnable == 0
        && index.unanswered_pods.is_empty();
    if !from_classes {
        return count(index.pods_on(ctx.node), ctx, index);
    }
    let survey = Survey {
        pods: Vec::new(),
        left: classes.holding,
        need_operator: 0,
        unanswered: 0,
    };
    // Every test's pass checks the shortcut against the count.
    #[cfg(test)]
    {
        let counted = count(index.pods_on(ctx.node), ctx, index);
        assert_eq!(
            (survey.left, survey.need_operator, survey.unanswered),
            (counted.left, counted.need_operator, counted.unanswered),
            "the tally of {} read from its classes",
            ctx.node.name
        );
    }
    survey
}

fn count<'a>(
    pods: impl Iterator<Item = OnNode<'a>>,
    ctx: &NodeContext,
    index: &Index,
) -> Survey<'a> {
    let (mut left, mut need_operator, mut unanswered) = (0u32, 0u32, 0u32);
    let any_unanswered = !index.unanswered_pods.is_empty();
    for OnNode {
        pod,
        class,
        covered,
        pinnable,
        ..
    } in pods
    {
        left += u32::from(class.holds_node());
        let multi_covered = covered.several();
        need_operator +=
            u32::from(needs_operator(pod, class, (multi_covered, pinnable), ctx, index).is_some());
        unanswered += u32::from(any_unanswered && index.unanswered_pods.contains(&*pod.uid));
    }
    Survey {
        pods: Vec::new(),
        left,
        need_operator,
        unanswered,
    }
}

/// The operator-only obstacle of a pod, if it has one: decided by the pod, its node and policy,
/// never by other nodes' decisions, so that Blocked is known before any slot is handed out.
/// `multi_covered`: a workload or other-controller pod that more than one budget covers
/// ([`OnNode::multi_covered`]); `pinnable`: its spec may pin it ([`OnNode::pinnable`]).
fn needs_operator(
    pod: &PodView,
    class: Class,
    (multi_covered, pinnable): (bool, bool),
    ctx: &NodeContext,
    index: &Index,
) -> Option<(Reason, String)> {
    // Every test's pass checks the index's answers against the pod's budgets and spec.
    #[cfg(test)]
    {
        if matches!(class, Class::Owned(_) | Class::Other(_)) {
            assert_eq!(
                multi_covered,
                index.pdbs_covering(pod).nth(1).is_some(),
                "budgets covering {}",
                pod.name
            );
        }
        assert_eq!(pinnable, pod.pins.is_some(), "pins of {}", pod.name);
    }
    let found = match class {
        Class::Ignored(Ignored::Terminating) => stuck_terminating(pod, ctx),
        Class::OptedOut(key) => Some((
            Reason::BlockedOptOut,
            format!(
                "opted out by {key}: remove it, or `kubectl k8sm force {} --include-opted-out`",
                ctx.node.name
            ),
        )),
        // Waits for the garbage collector, whatever the unmanaged-pod policy.
        Class::Unmanaged(Unmanaged::OwnerGone(_)) => None,
        Class::Unmanaged(why) => unmanaged_needs_operator(&unmanaged_message(why), ctx),
        Class::Job(owner) if job_expired(ctx) => unmanaged_needs_operator(
            &format!("Job {} pod past the unmanaged-pod timeout", owner.name),
            ctx,
        ),
        // Counted before any name is formatted: this runs for every pod of every surveyed node.
        Class::Owned(_) | Class::Other(_) if multi_covered && uses_eviction_api(class, ctx) => {
            let names: Vec<String> = index
                .pdbs_for(pod)
                .into_iter()
                .map(|(_, p)| format!("{}/{}", p.view.namespace, p.view.name))
                .collect();
            Some((
                Reason::BlockedByPDB,
                format!(
                    "covered by {} PodDisruptionBudgets ({}): the Eviction API refuses such pods; fix the budgets",
                    names.len(),
                    names.join(", ")
                ),
            ))
        }
        _ => None,
    };
    found.or_else(|| {
        pinnable
            .then(|| {
                pin::needs_operator(
                    pod,
                    class,
                    ctx.node,
                    ctx.spec.workloads.pinned_pods,
                    &index.volumes,
                )
            })
            .flatten()
    })
}

/// How long past the end of its grace period a terminating pod may take before it counts as stuck:
/// a kubelet confirms a pod gone within seconds of its containers stopping.
const TERMINATION_OVERDUE: chrono::TimeDelta = chrono::TimeDelta::minutes(1);

/// When a terminating pod counts as stuck: [`TERMINATION_OVERDUE`] after its `deletionTimestamp`
/// (the end of its grace period). `None`: not known to be terminating, or its time is not known.
fn stuck_at(pod: &PodView) -> Option<DateTime<Utc>> {
    pod.deletion?.checked_add_signed(TERMINATION_OVERDUE)
}

/// The obstacle of a pod stuck terminating: a finalizer holds it, or its kubelet never confirms it
/// stopped. It holds its own node only (its workload counts it as gone), and only an operator
/// clears it.
fn stuck_terminating(pod: &PodView, ctx: &NodeContext) -> Option<(Reason, String)> {
    let at = stuck_at(pod).filter(|&at| ctx.reached(at))?;
    let held_by = match pod.finalizers.as_slice() {
        [] => "no finalizer: its kubelet has not confirmed that it stopped (is the node down?)"
            .to_owned(),
        finalizers => {
            let shown: Vec<String> = finalizers
                .iter()
                .take(3)
                .map(|f| quoted(f, MAX_QUOTED_VALUE))
                .collect();
            let more = finalizers.len().saturating_sub(shown.len());
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            format!("the finalizers {}{more}", shown.join(", "))
        }
    };
    let since = at - TERMINATION_OVERDUE;
    Some((
        Reason::StuckTerminating,
        format!(
            "stuck terminating: its grace period ended at {}, and it is held by {held_by}; remove what holds it, or \
             `kubectl k8sm force {} --terminating`",
            since.to_rfc3339(),
            ctx.node.name
        ),
    ))
}

/// Whether the pod goes through the Eviction API: always for a pod of a controller of another kind
/// (its budget is often all that guards a quorum), else as the policy says.
fn uses_eviction_api(class: Class, ctx: &NodeContext) -> bool {
    matches!(class, Class::Other(_)) || ctx.spec.respect_pod_disruption_budgets
}

/// Whether a Ready `pod` of `workload` is available (Ready for its `minReadySeconds`), read
/// through the context's clock.
fn available(workload: Workload, pod: &PodView, ctx: &NodeContext) -> bool {
    match workload.available_at(pod) {
        Some(None) => true,
        Some(Some(at)) => ctx.reached(at),
        None => false,
    }
}

/// Whether evicting the pod uses up one of `pdb`'s disruptions, as the Eviction API decides: a
/// Pending pod's eviction is a plain deletion, and a Running pod that is not Ready goes freely
/// where the budget's `unhealthyPodEvictionPolicy` lets it
/// (pkg/registry/core/pod/storage/eviction.go).
fn uses_budget(pod: &PodView, ready: bool, pdb: &Pdb) -> bool {
    ready || !(pod.phase == PodPhase::Pending || pdb.view.admits_not_ready_freely())
}

/// How the pod stands for the health rule, and, for a pod not Ready that is not broken yet, when it
/// will be: a pod not Ready (since its Ready condition last changed, or since its creation) for
/// `nodeProgressDeadline` is broken. The same bound after which a node that made no progress gives
/// up its slot: a wait that long does not end by itself, and a replacement still starting within it
/// is not churned. A workload with no pod Ready, one of which is broken, is broken as a whole: its
/// other pods, replacements of broken ones, run the same template and are broken too (a rollout
/// that may fix it is guarded apart, see `health::judge`). So is one with no pod Ready whose
/// Deployment has been unavailable that long: a replacement of its last broken pod, say.
fn pod_state(
    pod: &PodView,
    ready: bool,
    (workload, counts): (Workload, WorkloadReadiness),
    ctx: &NodeContext,
) -> (PodState, Option<DateTime<Utc>>) {
    if ready {
        return (PodState::Ready, None);
    }
    let bound = ctx.spec.progress_deadline();
    let broken_at = |since: Option<DateTime<Utc>>| since.and_then(|s| s.checked_add_signed(bound));
    let own = broken_at(pod.ready_changed.or(pod.created));
    let unavailable_since = workload.rollout().and_then(|r| r.unavailable_since);
    let whole = [counts.not_ready_since, unavailable_since]
        .into_iter()
        .filter_map(broken_at)
        .min()
        .filter(|_| counts.ready == 0 && counts.warming == 0);
    match [own, whole].into_iter().flatten().min() {
        Some(at) if ctx.reached(at) => (PodState::Broken, None),
        at => (PodState::NotReady, at),
    }
}

fn unmanaged_needs_operator(what: &str, ctx: &NodeContext) -> Option<(Reason, String)> {
    match ctx.spec.unmanaged_pods.policy {
        UnmanagedPodPolicy::Never => Some((
            Reason::BlockedUnmanagedPod,
            format!(
                "{what}: policy Never; delete it, or `kubectl k8sm force {}`",
                ctx.node.name
            ),
        )),
        UnmanagedPodPolicy::DeleteAfterTimeout if ctx.spec.unmanaged_pods.timeout.is_none() => {
            Some((
                Reason::InvalidPolicy,
                format!("{what}: policy DeleteAfterTimeout without unmanagedPods.timeout; set one"),
            ))
        }
        UnmanagedPodPolicy::DeleteAfterTimeout if ctx.incompatible_since.is_none() => Some((
            Reason::MalformedAnnotation,
            format!(
                "{what}: the node's incompatible-executor time is unreadable, so the timeout never starts"
            ),
        )),
        UnmanagedPodPolicy::Delete | UnmanagedPodPolicy::DeleteAfterTimeout => None,
    }
}

/// A Job pod is handled like an unmanaged pod once the unmanaged-pod timeout has passed since the
/// node was marked.
fn job_expired(ctx: &NodeContext) -> bool {
    ctx.timeout_deadline()
        .is_some_and(|deadline| ctx.reached(deadline))
}

/// What would move if a node were admitted now (see [`movement`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Movement {
    /// A pod would go now: a workload or other-controller pod passes the health rule and its
    /// budgets, or, with no such pod on the node, a pod would be deleted; or nothing on the
    /// node holds it any more (it is drained).
    Now,
    /// No pod on it belongs to an owner, and what is left waits on a timeout, a Job or a
    /// termination: nothing an owner decides.
    NothingOwned,
    /// Every owned pod waits on its owner, a budget or the operator.
    Nothing,
}

impl Movement {
    /// Whether admitting the node now would let something go.
    pub(crate) fn can_move(self) -> bool {
        self != Movement::Nothing
    }
}

/// Whether some pod of the node would move now if the node were admitted: it has no workload or
/// other-controller pod (what is left waits on nothing an owner decides), or one of them passes the
/// health rule and its budgets on `ledger` as [`decide`] would judge it (a Ready pod of another
/// controller only once no workload pod is on the node). Admission prefers such nodes, so that
/// owners whose pods are bunched on a few nodes do not queue behind each other. Judges without
/// recording anything.
///
/// With `known`, what it worked out of each workload for a Ready pod is reused: only while the
/// ledger does not change.
pub(crate) fn movement(
    ctx: &NodeContext,
    index: &Index,
    ledger: &mut Ledger,
    mut known: Option<&mut ReadyVerdicts>,
) -> Movement {
    let mut managed = false;
    // Other-controller pods are judged in a second round over the node's pods, which most nodes
    // (those without any) skip.
    let mut any_other = false;
    for other in [false, true] {
        if other && !any_other {
            break;
        }
        let workload_pods_left = other && managed;
        for on in index.pods_on(ctx.node) {
            let OnNode {
                pod,
                class,
                ready,
                pinnable,
                covered,
                counts_for,
            } = on;
            let workload = match (class, other) {
                (Class::Owned(w), false) | (Class::Other(w), true) => w,
                (Class::Other(_), false) => {
                    any_other = true;
                    continue;
                }
                _ => continue,
            };
            let known_verdict = match known.as_deref_mut() {
                Some(known) if ready => known.of(workload, counts_for, ctx, index, ledger),
                _ => ReadyVerdict::Judged,
            };
            if known_verdict == ReadyVerdict::Stays {
                managed = true;
                continue;
            }
            let goes = known_verdict == ReadyVerdict::Goes;
            // Ready but not yet available counts as not Ready (its workload's minReadySeconds);
            // budgets count it Ready.
            let (pod_ready, ready) = (ready, ready && (goes || available(workload, pod, ctx)));
            // Held back behind the node's workload pods (see `decide_workload`).
            let held_back = workload_pods_left && ready;
            managed = true;
            if held_back
                || needs_operator(pod, class, (covered.several(), pinnable), ctx, index).is_some()
            {
                continue;
            }
            if !goes {
                let health = ledger.health(workload, counts_for, index);
                let counts = WorkloadReadiness::of(index.workload_counts(workload, counts_for));
                let (state, _) = pod_state(pod, ready, (workload, counts), ctx);
                match health::judge(health, ctx.threshold, state) {
                    Verdict::Evict { .. } | Verdict::EvictNotReady { .. } => {}
                    Verdict::EvictBroken { .. }
                        if broken_waits_for_room(
                            pod,
                            counts_for,
                            ctx,
                            index,
                            Resources::default(),
                        )
                        .is_none() => {}
                    _ => continue,
                }
            }
            let budgets_allow = !uses_eviction_api(class, ctx)
                || index
                    .budgets_of(&on)
                    .into_iter()
                    .all(|(i, p)| ledger.pdb_allowance(i) > 0 || !uses_budget(pod, pod_ready, p));
            if budgets_allow {
                return Movement::Now;
            }
        }
    }
    if managed {
        Movement::Nothing
    } else if index.pods_on(ctx.node).all(|on| !on.class.holds_node())
        || index
            .pods_on(ctx.node)
            .any(|on| deletable_now(on.pod, on.class, ctx, index))
    {
        // Nothing left that holds the node (what it waited on is gone): admitted, it is drained at
        // once and its executor told to restart, so it never waits for anything.
        Movement::Now
    } else {
        Movement::NothingOwned
    }
}

/// What [`movement`] makes of a Ready pod as far as its workload decides, worked out once per
/// workload slot against a ledger that does not change: the queue judges thousands of nodes' pods,
/// most of them Ready, and each judgement read the pod's workload and health.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReadyVerdict {
    /// Its workload has no `minReadySeconds` (a Ready pod is available) and its health lets no
    /// Ready pod go: it stays whatever else is read of it.
    Stays,
    /// Its workload has no `minReadySeconds` and its health lets a Ready pod go: whether it goes
    /// is up to the pod itself (an operator's obstacle, a budget).
    Goes,
    /// Its workload has `minReadySeconds`, or it was not worked out: judged pod by pod.
    Judged,
}

/// [`ReadyVerdict`] per workload slot of the index.
pub(crate) struct ReadyVerdicts(Vec<Option<ReadyVerdict>>);

impl ReadyVerdicts {
    pub(crate) fn new(index: &Index) -> Self {
        Self(vec![None; index.workload_count()])
    }

    fn of(
        &mut self,
        workload: Workload,
        counts_for: u32,
        ctx: &NodeContext,
        index: &Index,
        ledger: &mut Ledger,
    ) -> ReadyVerdict {
        let Some(known) = self.0.get_mut(counts_for as usize) else {
            return ReadyVerdict::Judged;
        };
        *known.get_or_insert_with(|| {
            if workload.min_ready_seconds() != 0 {
                return ReadyVerdict::Judged;
            }
            let health = ledger.health(workload, counts_for, index);
            match health::judge(health, ctx.threshold, PodState::Ready) {
                Verdict::Evict { .. } => ReadyVerdict::Goes,
                _ => ReadyVerdict::Stays,
            }
        })
    }
}

/// Whether [`decide_other`] would delete a pod now on a node without workload or other-controller
/// pods (judged by the same rules, without building the decision).
fn deletable_now(pod: &PodView, class: Class, ctx: &NodeContext, index: &Index) -> bool {
    if needs_operator(pod, class, (false, pod.pins.is_some()), ctx, index).is_some() {
        return false;
    }
    match class {
        Class::Finished => true,
        Class::Job(_) => job_expired(ctx),
        Class::Unmanaged(Unmanaged::OwnerGone(_)) => false,
        Class::Unmanaged(_) => !matches!(
            (ctx.spec.unmanaged_pods.policy, ctx.timeout_deadline()),
            (UnmanagedPodPolicy::DeleteAfterTimeout, Some(deadline)) if !ctx.reached(deadline)
        ),
        Class::Ignored(_) | Class::OptedOut(_) | Class::Owned(_) | Class::Other(_) => false,
    }
}

/// The decisions for one node's pods, and the actions they imply.
pub(crate) struct Drain {
    /// In pod order.
    pub(crate) pods: Arc<[PodPlan]>,
    pub(crate) actions: Vec<(ActionKind, Reason, String)>,
    /// Earliest time at which a wait of this node ends by itself.
    pub(crate) wake: Option<DateTime<Utc>>,
    /// A surge rollout moves a pod of the node: progress under way, bounded by its own deadline.
    pub(crate) moving: bool,
    /// Of `actions`, evictions asked for against a budget that allows no disruption now (the
    /// Eviction API decides): likely refused, so not progress by themselves.
    pub(crate) asked: usize,
    /// What the replacements of the broken pods evicted in this pass will reserve
    /// ([`broken_waits_for_room`]).
    pub(crate) broken_taken: Resources,
    /// Pods that could go now and wait for one of the controller's calls: progress that the
    /// controller's limit holds, not the node.
    pub(crate) waiting_for_call: usize,
    /// What the decisions read of the ledger and the index.
    pub(crate) reads: Reads,
}

/// Decides every pod of a surveyed node, recording evictions in `ledger`, in the order of
/// docs/design.md §5.3: workload pods first (in pod order), then pods of other controllers once no
/// workload pod is left on the node (those that are not Ready at once), then unmanaged pods (and
/// Job pods past their timeout) once no pod of either kind is left. A pod "has left" once it is
/// terminating or its eviction is in flight and accepted: an eviction planned in this pass,
/// or launched and not answered yet, may still be refused (a budget, a webhook), so what comes
/// after it waits.
pub(crate) fn decide(
    survey: &Survey,
    ctx: &NodeContext,
    index: &Index,
    ledger: &mut Ledger,
) -> Drain {
    // Each decision refers to its pod's view, a cache miss each (the views are scattered over the
    // heap), and a decision takes long enough that the processor never reaches the next pod's
    // view while waiting for one. Touched here first, in a loop of independent reads, the
    // misses of the node's pods overlap instead of adding up.
    std::hint::black_box(
        survey
            .pods
            .iter()
            .map(|on| Arc::strong_count(on.pod))
            .sum::<usize>(),
    );
    let mut pods = Vec::with_capacity(survey.pods.len());
    let mut drain = Drain {
        pods: Arc::default(),
        actions: Vec::new(),
        wake: None,
        moving: false,
        asked: 0,
        broken_taken: Resources::default(),
        waiting_for_call: 0,
        reads: Reads::default(),
    };
    let is_of = |class: &Class, other: bool| {
        matches!(
            (class, other),
            (Class::Owned(_), false) | (Class::Other(_), true)
        )
    };
    // An eviction still unanswered may yet be refused: its pod holds back the classes after it, as
    // if it were here.
    let workload_pods_left =
        survey.pods.iter().any(|on| is_of(&on.class, false)) || survey.unanswered > 0;
    let held_back = workload_pods_left.then_some("the node's workload pods have left");
    let managed_pods_left =
        workload_pods_left || survey.pods.iter().any(|on| is_of(&on.class, true));
    // The decisions are reported in pod order (the survey's order, as the plan's pods are sorted).
    // Workload pods are decided before other-controller pods (the evictions of the former count
    // in the ledger and budgets the latter are judged on); the other pods' decisions read
    // neither. So when no workload pod comes after an other-controller pod (most nodes have no
    // other-controller pod), deciding in pod order is deciding in the rule's order, and each
    // decision goes straight to its place, with no copy.
    let in_pod_order = survey
        .pods
        .iter()
        .skip_while(|on| !is_of(&on.class, true))
        .all(|on| !is_of(&on.class, false));
    if in_pod_order {
        // The other pods' actions follow the workload pods' ones, as in the rule's order.
        let mut rest = Drain {
            pods: Arc::default(),
            actions: Vec::new(),
            wake: None,
            moving: false,
            asked: 0,
            broken_taken: Resources::default(),
            waiting_for_call: 0,
            reads: Reads::default(),
        };
        for (i, &on) in survey.pods.iter().enumerate() {
            drain.reads.pod(i);
            let decided = match on.class {
                Class::Owned(_) => decide_workload(on, ctx, index, ledger, None, &mut drain),
                Class::Other(_) => decide_workload(on, ctx, index, ledger, held_back, &mut drain),
                _ => decide_other(on, ctx, index, managed_pods_left, &mut rest),
            };
            pods.push(decided);
        }
        drain.pods = pods.into();
        drain.actions.append(&mut rest.actions);
        drain.wake = earliest(drain.wake, rest.wake);
        drain.moving |= rest.moving;
        // The other pods' decisions read nothing of the ledger, but may read what is not recorded.
        if !rest.reads.tracked() {
            drain.reads.untracked();
        }
        return drain;
    }
    // Decided in the order of the rule, reported in pod order: each decision goes to its pod's
    // place in the survey.
    let mut decided: Vec<Option<PodPlan>> = vec![None; survey.pods.len()];
    let of_class = |other: bool| {
        survey
            .pods
            .iter()
            .enumerate()
            .filter(move |(_, on)| is_of(&on.class, other))
    };
    for (i, &on) in of_class(false) {
        drain.reads.pod(i);
        decided[i] = Some(decide_workload(on, ctx, index, ledger, None, &mut drain));
    }
    for (i, &on) in of_class(true) {
        drain.reads.pod(i);
        decided[i] = Some(decide_workload(
            on, ctx, index, ledger, held_back, &mut drain,
        ));
    }
    for (i, &on) in survey.pods.iter().enumerate() {
        if on.class.workload().is_none() {
            drain.reads.pod(i);
            decided[i] = Some(decide_other(on, ctx, index, managed_pods_left, &mut drain));
        }
    }
    pods.extend(decided.into_iter().flatten());
    drain.pods = pods.into();
    drain
}

fn pod_plan(
    index: &Index,
    on: &OnNode,
    decision: Decision,
    reason: Option<Reason>,
    message: impl Into<Arc<str>>,
) -> PodPlan {
    let owner = match on.class {
        Class::Owned(w) | Class::Other(w) => Some(index.shared.owner(w)),
        Class::Job(o) => Some(index.shared.owner(Workload::of_owner(o))),
        _ => None,
    };
    PodPlan {
        pod: PodRef::of(on.pod),
        owner,
        class: on.class.public(),
        decision,
        reason,
        message: message.into(),
        until: None,
    }
}

/// Turns an action decision (the action, its reason and what it does) into a wait while the node's
/// actions are held (the pause, or a report of a node that waits for a slot).
fn act(
    index: &Index,
    on: &OnNode,
    ctx: &NodeContext,
    drain: &mut Drain,
    (action, reason, message): (ActionKind, Reason, String),
) -> PodPlan {
    let pod = on.pod;
    let decision = match action {
        ActionKind::Evict { .. } => Decision::Evict,
        ActionKind::Surge { .. } => Decision::Move,
        _ => Decision::Delete,
    };
    if let Some(hold) = ctx.hold {
        let why = match hold {
            Reason::Paused => "paused",
            Reason::OutsideWindow => "outside the maintenance window",
            _ => "waits for a drain slot",
        };
        return pod_plan(
            index,
            on,
            Decision::Wait,
            Some(hold),
            format!("{why}; would {message}"),
        );
    }
    // `{namespace}/{name} on {node}: {message}`, put together without the formatting machinery
    // (written for every eviction a pass plans).
    let node = &ctx.node.name;
    let mut text = String::with_capacity(
        pod.namespace.len() + pod.name.len() + node.len() + message.len() + 7,
    );
    for part in [
        &*pod.namespace,
        "/",
        &*pod.name,
        " on ",
        node,
        ": ",
        &message,
    ] {
        text.push_str(part);
    }
    drain.actions.push((action, reason, text));
    pod_plan(index, on, decision, Some(reason), message)
}

/// A workload pod, or (`held_back` tells what it waits for first) a pod of a controller of another
/// kind.
fn decide_workload(
    on: OnNode,
    ctx: &NodeContext,
    index: &Index,
    ledger: &mut Ledger,
    held_back: Option<&'static str>,
    drain: &mut Drain,
) -> PodPlan {
    let OnNode {
        pod,
        class,
        ready,
        pinnable,
        covered,
        counts_for,
    } = on;
    let Some(workload) = class.workload() else {
        unreachable!("decide_workload is called for workload and other-controller pods only")
    };
    // Ready but not yet available (its workload's minReadySeconds) counts as not Ready: its
    // controller does not count it either, and moving it takes no available pod away. Budgets
    // count it Ready, as the Eviction API does.
    let (pod_ready, ready) = (ready, ready && available(workload, pod, ctx));
    if pinnable || covered.several() {
        // Its volumes, or several budgets' names, are read: not recorded.
        drain.reads.untracked();
    }
    if let Some((reason, message)) =
        needs_operator(pod, class, (covered.several(), pinnable), ctx, index)
    {
        return pod_plan(index, &on, Decision::Block, Some(reason), message);
    }
    // Waits are written once per pass for all the pods that wait for the same thing (this runs for
    // every pod of every draining node).
    let wait = |key: MessageKey, write: &dyn Fn() -> String| {
        pod_plan(
            index,
            &on,
            Decision::Wait,
            Some(Reason::WaitingForOwner),
            index.shared.message(key, write),
        )
    };
    // A pod that is not Ready costs no readiness to move: holding it back behind the node's
    // workload pods would only keep its controller below its floor, and the controller's pods
    // on other nodes waiting.
    if let Some(first) = held_back.filter(|_| ready) {
        return wait(MessageKey::HeldBack(Text::of(first)), &|| {
            format!("wait: goes once {first}")
        });
    }
    let surge = surge::judge(pod, workload, ctx);
    let mut health = if pod_ready {
        ledger.health(workload, counts_for, index)
    } else {
        ledger.health_beside_ask(workload, counts_for, index)
    };
    drain.reads.health(!pod_ready, health);
    let t = ctx.threshold;
    let needed = health::needed(t, health.desired);
    let floor = health::sla_floor(t, health.desired);
    let who = Who(workload, health.desired);
    let going = Going(health.going);
    let key = |why| MessageKey::Workload {
        uid: Text::of(workload.key()),
        kind: Text::of(workload.kind()),
        name: Text::of(workload.name()),
        spec: std::ptr::from_ref(ctx.spec).addr(),
        why,
        ready: health.ready,
        desired: health.desired,
        going: health.going,
    };
    let mut note = String::new();
    match surge {
        Move::Ordinary { why_not: None } => {}
        Move::Ordinary { why_not: Some(why) } => note = format!(" (no surge move: {why})"),
        Move::Start => {
            let action = ActionKind::Surge {
                pod: PodRef::of(pod),
                deployment: index.shared.owner(workload),
                at: ctx.now,
            };
            let message = format!(
                "move: {who} has one replica: a rollout of it starts the new pod on another node, and the old one \
                 goes once the new one is available (surge), so it keeps {}/1 ready",
                health.ready
            );
            return act(index, &on, ctx, drain, (action, Reason::Moved, message));
        }
        Move::UnderWay { since, until } => {
            drain.wake = earliest(drain.wake, Some(until));
            drain.moving = true;
            let mut plan = pod_plan(
                index,
                &on,
                Decision::Wait,
                Some(Reason::Moving),
                format!(
                    "wait: moving by a rollout of {who} started at {}: goes once its new pod is available, or is \
                     evicted at {} (nodeProgressDeadline {})",
                    since.to_rfc3339(),
                    until.to_rfc3339(),
                    ctx.spec.node_progress_deadline
                ),
            );
            plan.until = Some(until);
            return plan;
        }
        Move::NotYet => {
            return pod_plan(
                index,
                &on,
                Decision::Wait,
                Some(Reason::Moving),
                format!("wait: moves by a rollout of {who} once the node is cordoned (surge)"),
            );
        }
        Move::AfterRollout => {
            return wait(key(WaitsOn::SurgeAfterRollout), &|| {
                format!(
                    "wait: moves by a rollout of {workload} once its last rollout is complete (surge; kubectl \
                     rollout status)"
                )
            });
        }
        Move::Overdue { since } => {
            // Its rollout waits for the new pod and takes nothing away meanwhile: the ordinary
            // rule, as if it did not run.
            health.replacing = false;
            note = format!(
                " (the rollout started at {} to move it made no new pod available within nodeProgressDeadline {})",
                since.to_rfc3339(),
                ctx.spec.node_progress_deadline
            );
        }
    }
    // A pod not Ready is judged on: the answer to the ask changes no count its eviction rests on
    // (it takes no readiness, and where the API would charge it to a budget, it waits for that
    // budget below). Held back, it would wait for as long as the API refuses the ask: for ever
    // where its own replacement is what the budget waits for.
    if pod_ready
        && drain
            .reads
            .planned(ledger.planned(workload, counts_for, index))
            .1
    {
        // Another pod of the workload is asked for against a budget at zero: the budget is what
        // this one waits on.
        if let Some((i, pdb)) = exhausted_budget(&on, pod_ready, ctx, index, ledger, drain) {
            return budget_wait(index, &on, i, pdb);
        }
        return pod_plan(
            index,
            &on,
            Decision::Wait,
            Some(Reason::WaitingForOwner),
            format!(
                "wait: an eviction of another pod of {who} is asked for against its PodDisruptionBudget in this \
                 pass; the next pass goes on from its answer"
            ),
        );
    }
    let counts = drain.reads.readiness(WorkloadReadiness::of(
        index.workload_counts(workload, counts_for),
    ));
    let (state, broken_at) = pod_state(pod, ready, (workload, counts), ctx);
    let verdict = health::judge(health, t, state);
    match verdict {
        Verdict::RollingOut => {
            return wait(key(WaitsOn::RollingOut), &|| {
                format!(
                    "wait: {workload} is rolling out (its controller is replacing pods itself); goes once the \
                     rollout is complete"
                )
            });
        }
        Verdict::ScaledToZero => {
            return wait(key(WaitsOn::ScaledToZero), &|| {
                format!("wait: {who} is scaled to 0; its controller removes the pod")
            });
        }
        Verdict::Unhealthy if ready => {
            return wait(key(WaitsOn::Unhealthy), &|| {
                format!(
                    "wait: {who} {}/{} ready{going}, needs {needed} (threshold {t}%)",
                    health.ready, health.desired
                )
            });
        }
        Verdict::Unhealthy => {
            // Nothing else may change before it counts as broken: plan again then.
            drain.wake = earliest(drain.wake, broken_at);
            return wait(key(WaitsOn::BelowFloor), &|| {
                format!(
                    "wait: pod not Ready, and {who} has {}/{} ready{going}, below its floor {floor} (threshold \
                     {t}%); goes once not Ready for nodeProgressDeadline {}",
                    health.ready, health.desired, ctx.spec.node_progress_deadline
                )
            });
        }
        Verdict::EvictBroken { .. }
            if let Some(message) = {
                // The room of the schedulable nodes is read: not recorded.
                drain.reads.untracked();
                broken_waits_for_room(pod, counts_for, ctx, index, drain.broken_taken)
            } =>
        {
            return pod_plan(
                index,
                &on,
                Decision::Wait,
                Some(Reason::WaitingForRoom),
                message,
            );
        }
        Verdict::Evict { .. } | Verdict::EvictNotReady { .. } | Verdict::EvictBroken { .. } => {}
    }
    let use_eviction_api = uses_eviction_api(class, ctx);
    let pdbs: Vec<(usize, &Pdb)> = if use_eviction_api {
        let pdbs = index.budgets_of(&on);
        drain.reads.budgets(&pdbs, pod_ready, ledger);
        pdbs
    } else {
        Vec::new()
    };
    // A pod that is not Ready uses up no disruption where the budget's `unhealthyPodEvictionPolicy`
    // lets it go freely. A pod of another controller is asked for whatever the count: its
    // eviction webhook may be what moves it (a VM's live migration), and the API's answer
    // decides (a refusal backs off and is reported). One such ask of a workload per pass,
    // alone: the other evictions' counts of Ready pods left would rest on it. Not for a node
    // that is only reported (queued, paused): nothing is asked for there.
    let exhausted = pdbs
        .iter()
        .find(|(i, p)| ledger.pdb_allowance(*i) <= 0 && uses_budget(pod, pod_ready, p));
    let asks = matches!(class, Class::Other(_))
        && ctx.hold.is_none()
        && exhausted.is_some()
        && drain
            .reads
            .planned(ledger.planned(workload, counts_for, index))
            == (0, false);
    if let Some(&(i, pdb)) = exhausted.filter(|_| !asks) {
        return budget_wait(index, &on, i, pdb);
    }
    // Only a node whose actions are carried out takes calls (a held one's evictions are reported).
    if ctx.hold.is_none()
        && !ledger
            .calls
            .take(workload.key(), &pod.uid, &ctx.node.name, ctx.written)
    {
        drain.reads.call_refused();
        drain.waiting_for_call += 1;
        return pod_plan(
            index,
            &on,
            Decision::Wait,
            Some(Reason::WaitingForCall),
            index.shared.message(MessageKey::Call, || {
                "wait: could go now, and every call the controller may run at once is taken: goes as one \
                 frees up"
                    .to_owned()
            }),
        );
    }
    let mut message = match verdict {
        Verdict::Evict { ready_after, .. } => format!(
            "evict: {who} ready {}/{} → {ready_after} (threshold {t}% needs {needed}){note}",
            health.ready, health.desired
        ),
        Verdict::EvictNotReady { ready } => format!(
            "evict: pod not Ready, so moving it costs no readiness; {who} keeps {ready}/{} ready (floor {floor} at threshold {t}%){note}",
            health.desired
        ),
        Verdict::EvictBroken { ready } => format!(
            "evict: pod broken (not Ready for nodeProgressDeadline {}), so moving it costs no readiness; {who} \
             stays at {ready}/{} ready, below its floor {floor} (threshold {t}%){note}",
            ctx.spec.node_progress_deadline, health.desired
        ),
        Verdict::RollingOut | Verdict::ScaledToZero | Verdict::Unhealthy => {
            unreachable!("the verdicts that keep the pod returned above")
        }
    };
    if let Some((_, pdb)) = exhausted {
        let (ns, name) = (&pdb.view.namespace, &pdb.view.name);
        message.push_str(&format!(
            " (PodDisruptionBudget {ns}/{name} allows no disruption now: the Eviction API decides)"
        ));
        if ctx.hold.is_none() {
            drain.asked += 1;
        }
    }
    let asked = exhausted.is_some();
    let pdbs: Vec<usize> = pdbs
        .into_iter()
        .filter(|(_, p)| uses_budget(pod, pod_ready, p))
        .map(|(i, _)| i)
        .collect();
    ledger.record_eviction(workload, counts_for, index, (pod_ready, ready), &pdbs);
    if state == PodState::Broken && !ready && ctx.hold.is_none() {
        drain.broken_taken += place_for(pod);
    }
    if asked {
        ledger.record_ask(workload, counts_for, index, health);
    }
    let eviction = Eviction {
        owner: index.shared.owner(workload),
        ready_before: health.ready,
        ready_after: health.ready - u32::from(ready && health.ready > 0),
        warming_after: health.warming - u32::from(pod_ready && !ready && health.warming > 0),
        desired: health.desired,
        needed,
        threshold: t,
        use_eviction_api,
        size_inferred: !workload.is_known(),
    };
    let action = ActionKind::Evict {
        pod: PodRef::of(pod),
        eviction,
    };
    act(index, &on, ctx, drain, (action, Reason::Evicted, message))
}

/// Why a broken pod of the workload in slot `counts_for` waits, if it does: its replacement is as
/// broken as it is, and must not take the room the replacements of the node's Ready pods of other
/// workloads need (a crash-looping StatefulSet's pods landing first would leave a healthy
/// workload's pods nowhere to go, and the node would never finish). It goes once the schedulable
/// nodes have room for those pods, for the replacements still to come of the node's pods already
/// going, for `taken` (the broken pods evicted before it in this pass) and for its own; or once
/// those Ready pods have left. Never waits where room is unknown, nor for its own workload's Ready
/// pods: they wait for the workload's health, which its move may restore.
fn broken_waits_for_room(
    pod: &PodView,
    counts_for: u32,
    ctx: &NodeContext,
    index: &Index,
    taken: Resources,
) -> Option<String> {
    let free = index.free_beside(ctx.node)?;
    let (mut needed, mut coming) = (Resources::default(), Resources::default());
    for on in index.pods_on(ctx.node) {
        match on.class {
            Class::Owned(_) | Class::Other(_) if on.ready && on.counts_for != counts_for => {
                needed += place_for(on.pod);
            }
            Class::Ignored(Ignored::EvictionInFlight) => coming += place_for(on.pod),
            Class::Ignored(Ignored::Terminating) if replaced_once_gone(on.pod) => {
                coming += place_for(on.pod);
            }
            _ => {}
        }
    }
    if needed.is_zero() || free.covers(needed + coming + taken + place_for(pod)) {
        return None;
    }
    Some(format!(
        "wait: pod broken, and its replacement would be too; the schedulable nodes have {free} free, and the node's \
         Ready pods need {needed} of it first (pods already going, {coming} more): goes once they have left or room \
         frees up"
    ))
}

/// What a pod takes of a node's room: its requests, and one pod.
fn place_for(pod: &PodView) -> Resources {
    Resources {
        pods: 1,
        ..pod.requests
    }
}

/// Whether a terminating pod's controller creates its replacement only once it is gone (a
/// StatefulSet, and any kind k8sm does not know), so that the replacement is not yet among the pods
/// waiting to be scheduled. A ReplicaSet's is created at once; DaemonSet and Job pods are not
/// replaced elsewhere.
fn replaced_once_gone(pod: &PodView) -> bool {
    pod.controller.as_ref().is_some_and(|c| {
        !matches!(
            c.kind.as_str(),
            "ReplicaSet" | "ReplicationController" | "DaemonSet" | "Job"
        )
    })
}

/// The first budget covering the pod that allows no disruption its eviction would use, if the pod
/// goes through the Eviction API.
fn exhausted_budget<'i>(
    on: &OnNode<'i>,
    ready: bool,
    ctx: &NodeContext,
    index: &'i Index,
    ledger: &Ledger,
    drain: &mut Drain,
) -> Option<(usize, &'i Pdb<'i>)> {
    if !uses_eviction_api(on.class, ctx) {
        return None;
    }
    let budgets = index.budgets_of(on);
    drain.reads.budgets(&budgets, ready, ledger);
    budgets
        .into_iter()
        .find(|(i, p)| ledger.pdb_allowance(*i) <= 0 && uses_budget(on.pod, ready, p))
}

/// A pod that waits for a budget that allows no disruption now.
fn budget_wait(index: &Index, on: &OnNode, i: usize, pdb: &Pdb) -> PodPlan {
    let message = index.shared.message(MessageKey::Budget(i), || {
        let (ns, name) = (&pdb.view.namespace, &pdb.view.name);
        format!("wait: PodDisruptionBudget {ns}/{name} allows no disruption now")
    });
    pod_plan(
        index,
        on,
        Decision::Wait,
        Some(Reason::BlockedByPDB),
        message,
    )
}

/// The workload a message is about: `workload Deployment web`, or for a controller of another kind
/// `controller KafkaNodePool brokers (3 pods seen)`.
struct Who<'a>(Workload<'a>, u32);

impl std::fmt::Display for Who<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self(workload, desired) = self;
        match workload.is_known() {
            true => write!(f, "workload {workload}"),
            false => write!(f, "controller {workload} ({desired} pods seen)"),
        }
    }
}

/// `, N terminating or not replaced`, or nothing.
struct Going(u32);

impl std::fmt::Display for Going {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            0 => Ok(()),
            n => write!(f, ", {n} terminating or not replaced"),
        }
    }
}

/// Every pod that is not a workload or other-controller pod. Unmanaged pods (and Job pods past
/// their timeout) go only once `managed_pods_left` is false.
fn decide_other(
    on: OnNode,
    ctx: &NodeContext,
    index: &Index,
    managed_pods_left: bool,
    drain: &mut Drain,
) -> PodPlan {
    let OnNode { pod, class, .. } = on;
    if pod.pins.is_some() {
        // Its volumes are read: not recorded.
        drain.reads.untracked();
    }
    // Not a workload pod: whether budgets cover it does not matter.
    if let Some((reason, message)) =
        needs_operator(pod, class, (false, pod.pins.is_some()), ctx, index)
    {
        return pod_plan(index, &on, Decision::Block, Some(reason), message);
    }
    let unmanaged = match class {
        Class::Ignored(why) => {
            let (decision, reason) = if class.holds_node() {
                (Decision::Wait, Some(Reason::WaitingForTermination))
            } else {
                (Decision::Ignore, None)
            };
            if why == Ignored::Terminating {
                // Plan again when it would count as stuck, though nothing else changes by then.
                drain.wake = earliest(drain.wake, stuck_at(pod));
            }
            return pod_plan(
                index,
                &on,
                decision,
                reason,
                ignored_message(why).to_owned(),
            );
        }
        Class::Finished => {
            let message = format!("delete finished pod ({:?})", pod.phase);
            return act(
                index,
                &on,
                ctx,
                drain,
                (delete(pod, false), Reason::DeletedFinishedPod, message),
            );
        }
        Class::Job(owner) if !job_expired(ctx) => {
            let deadline = ctx.timeout_deadline();
            let message = match deadline {
                Some(d) => format!(
                    "wait: Job {} to complete, or until {}",
                    owner.name,
                    d.to_rfc3339()
                ),
                None => format!("wait: Job {} to complete", owner.name),
            };
            let mut plan = pod_plan(
                index,
                &on,
                Decision::Wait,
                Some(Reason::WaitingForJob),
                message,
            );
            plan.until = deadline;
            drain.wake = earliest(drain.wake, deadline);
            return plan;
        }
        Class::Job(owner) => format!("Job {} pod past the unmanaged-pod timeout", owner.name),
        Class::Unmanaged(why @ Unmanaged::OwnerGone(_)) => {
            let message = format!(
                "wait: {}: the garbage collector deletes or orphans the pod; if it stays, delete it by hand",
                unmanaged_message(why)
            );
            return pod_plan(
                index,
                &on,
                Decision::Wait,
                Some(Reason::WaitingForOwner),
                message,
            );
        }
        Class::Unmanaged(why) => unmanaged_message(why),
        Class::OptedOut(_) | Class::Owned(_) | Class::Other(_) => {
            unreachable!(
                "opted-out pods need an operator; workload pods are decided by decide_workload"
            )
        }
    };
    // Policy Never (and unusable DeleteAfterTimeout settings) answered above, in needs_operator.
    if let (UnmanagedPodPolicy::DeleteAfterTimeout, Some(deadline)) =
        (ctx.spec.unmanaged_pods.policy, ctx.timeout_deadline())
        && !ctx.reached(deadline)
    {
        let message = format!(
            "wait: {unmanaged}; deletable from {}",
            deadline.to_rfc3339()
        );
        let mut plan = pod_plan(
            index,
            &on,
            Decision::Wait,
            Some(Reason::WaitingForTimeout),
            message,
        );
        plan.until = Some(deadline);
        drain.wake = earliest(drain.wake, Some(deadline));
        return plan;
    }
    if managed_pods_left {
        let message = format!(
            "wait: {unmanaged}; deleted once the node's workload and other-controller pods have left"
        );
        return pod_plan(
            index,
            &on,
            Decision::Wait,
            Some(Reason::WaitingForOwner),
            message,
        );
    }
    // Through the Eviction API where the policy respects budgets: the API marks the pod
    // `DisruptionTarget`, so a Job's `podFailurePolicy` can tell the kill from a failure, and a
    // budget or webhook has its say.
    let eviction_api = ctx.spec.respect_pod_disruption_budgets;
    let how = if eviction_api {
        "by eviction"
    } else {
        "by a plain DELETE: respectPodDisruptionBudgets is false"
    };
    let message = format!("delete {unmanaged} ({how})");
    act(
        index,
        &on,
        ctx,
        drain,
        (
            delete(pod, eviction_api),
            Reason::DeletedUnmanagedPod,
            message,
        ),
    )
}

fn delete(pod: &Arc<PodView>, eviction_api: bool) -> ActionKind {
    ActionKind::DeletePod {
        pod: PodRef::of(pod),
        eviction_api,
    }
}

pub(crate) fn earliest(
    a: Option<DateTime<Utc>>,
    b: Option<DateTime<Utc>>,
) -> Option<DateTime<Utc>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A survey lists the node's pods as comparing their texts orders them, where `text_order`
    /// reads past the first eight bytes (names and namespaces alike there, pods of one name in
    /// one namespace) as elsewhere.
    #[test]
    fn a_survey_lists_pods_in_text_order() {
        use crate::testing::{node, policy, unmanaged_pod};
        let mut pods = Vec::new();
        for namespace in ["shop-europe", "shop-eu", "shop", "a"] {
            for name in [
                "web-frontend-10",
                "web-frontend-9",
                "web-frontend-1",
                "web-fron",
                "web",
                "db-0",
            ] {
                pods.push(unmanaged_pod(namespace, name, "n1"));
            }
        }
        // Two versions of one pod name, told apart by their UIDs.
        let mut twin = unmanaged_pod("shop", "web", "n1");
        twin.uid = "shop/web-0".into();
        pods.push(twin);
        pods.reverse();
        let view = crate::ClusterView {
            nodes: vec![node("n1")],
            pods: crate::testing::shared_pods(pods),
            ..crate::ClusterView::default()
        };
        let mut cache = crate::objects::pod_cache::PodCache::default();
        let mut budgets = crate::objects::budgets::KeptBudgets::default();
        let mut tally = crate::index::tally::KeptTally::default();
        let index = Index::new(
            &view,
            &mut cache,
            &mut Default::default(),
            &mut budgets,
            &mut tally,
            crate::testing::t0(),
        );
        let policy = policy("p");
        let ctx = NodeContext {
            node: &view.nodes[0],
            spec: &policy.spec,
            threshold: 90,
            incompatible_since: None,
            hold: None,
            written: false,
            now: crate::testing::t0(),
            turns: Default::default(),
        };
        let listed: Vec<(&str, &str, &str)> = survey(&ctx, &index)
            .pods
            .iter()
            .map(|on| (&*on.pod.namespace, &*on.pod.name, &*on.pod.uid))
            .collect();
        let mut sorted = listed.clone();
        sorted.sort();
        assert_eq!(listed.len(), 25);
        assert_eq!(listed, sorted);
    }
}
