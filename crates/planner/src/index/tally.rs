//! What the index counts of the pods — per node, per workload, and the pods waiting to be scheduled
//! — kept across passes and updated from what each pod adds: a pass counts again only the pods that
//! changed and those whose count depends on something that changed (an eviction in flight, a node
//! still to drain, the clock), not the whole fleet. Why and how:
//! docs/decisions/0003-fleet-scale.md.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::{
    PodView, Resources,
    model::collections::{FastMap, FastSet},
    objects::classify::{Class, Ignored, Seed},
    objects::pod_cache::PodCache,
    objects::pod_facts::{Covered, PodFacts},
    objects::workload,
};

/// How long counts are kept before they are counted from scratch again, whatever changed: what a
/// defect in keeping them would get wrong lasts no longer (every test's pass compares them with a
/// count from scratch), at the cost of one walk over the pods every so often.
const RECOUNT_EVERY: chrono::TimeDelta = chrono::TimeDelta::minutes(5);

/// A workload's pods as the view shows them (not finished), counted for every workload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PodCounts {
    /// Pods not finished, bound to a node or not.
    pub(crate) seen: u32,
    /// Of those, pods with an eviction in flight (a pod terminating on its own is gone, not
    /// going).
    pub(crate) going: u32,
    /// Of the others, available pods: Ready, for the workload's `minReadySeconds` where it sets
    /// them.
    pub(crate) ready: u32,
    /// Of the others, Ready pods not available yet: what the upgrade report counts as Ready beside
    /// `ready`.
    pub(crate) warming: u32,
    /// Pods this upgrade still has to move: workload or other-controller pods (so neither finished
    /// nor terminating nor with an eviction in flight) bound to a node that must still be
    /// drained, by its contract keys alone — one that carries the mark (annotation or label),
    /// was not told to terminate (no kamikaze annotation nor recorded kamikaze executor ID)
    /// and is not opted out — whether it drains now or queues for a slot. Counted from one flag
    /// per node: which policy selects the node is not known here, and a node marked in this
    /// very pass counts from the next one. See `admission::chain`.
    pub(crate) to_move: u32,
    /// Since when its pod that has been not Ready longest is not Ready (its Ready condition's last
    /// change, or its creation): with no pod Ready, the workload is broken as a whole once
    /// that is `nodeProgressDeadline` ago.
    pub(crate) not_ready_since: Option<DateTime<Utc>>,
    /// A Deployment whose controller is replacing pods: the last time its newest ReplicaSet
    /// started a pod or saw one become Ready, the rollout's own progress.
    pub(crate) rollout_progress: Option<DateTime<Utc>>,
    /// That was longer ago than its `progressDeadlineSeconds`: the rollout is stuck, and its pods
    /// move within the headroom of its Ready count. Its Progressing condition says so only
    /// until a replacement of an old pod becomes Ready, which the Deployment controller counts
    /// as progress (for `progressDeadlineSeconds` more).
    pub(crate) rollout_stalled: bool,
}

/// How many pods of a node are of the classes that its tally reads (see `drain::tally`): most of a
/// large fleet's nodes only queue for a slot, and their tally is then read from here rather than
/// from a walk over their pods.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct NodeClasses {
    /// Pods that keep the node from being drained ([`Class::holds_node`]).
    pub(crate) holding: u32,
    /// Workload and other-controller pods.
    pub(crate) workload: u32,
    /// Of those, pods that more than one budget covers (whose eviction the Eviction API refuses:
    /// see `drain::needs_operator`).
    pub(crate) multi_covered: u32,
    /// Opted-out, Job and unmanaged pods: those whose obstacle depends on the policy.
    pub(crate) judged_by_policy: u32,
    /// Pods terminating: whether one is stuck depends on the time.
    pub(crate) terminating: u32,
    /// Workload and other-controller pods whose spec may pin them to the node: whether one does
    /// depends on the node, the volumes and the policy.
    pub(crate) pinnable: u32,
}

/// A pod's class as far as the counts read it: kept from pass to pass, where a [`Class`] holds
/// the pass's objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Counted {
    kind: Kind,
    /// [`Class::holds_node`].
    holds_node: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A workload or other-controller pod, with its workload's `minReadySeconds`.
    Workload {
        min_ready_seconds: u32,
    },
    Job,
    /// Opted out, or without a controller.
    ByPolicy,
    Terminating,
    /// Finished, a mirror or DaemonSet pod, or one whose eviction is in flight.
    Other,
}

impl Counted {
    pub(crate) fn of(class: Class) -> Self {
        let kind = match class {
            Class::Owned(w) | Class::Other(w) => Kind::Workload {
                min_ready_seconds: w.min_ready_seconds(),
            },
            Class::Job(_) => Kind::Job,
            Class::OptedOut(_) | Class::Unmanaged(_) => Kind::ByPolicy,
            Class::Ignored(Ignored::Terminating) => Kind::Terminating,
            Class::Ignored(_) | Class::Finished => Kind::Other,
        };
        Self {
            kind,
            holds_node: class.holds_node(),
        }
    }

    /// The class of a pod with `seed`, as its [`Seed::class`] would be counted: `controller` is
    /// its controller's, for a pod whose class is its controller's.
    fn of_seed(seed: Seed, going: bool, controller: Option<Controlled>) -> Self {
        match (seed, controller) {
            (Seed::Controlled, Some(c)) if !going => c.counted,
            _ => Self::of(seed.class(going, || {
                unreachable!("a pod whose class is its controller's has one")
            })),
        }
    }
}

/// What the pods of one controller count as, worked out once per pass for every controller with
/// pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Controlled {
    /// The class its pods get when nothing about the pod decides it.
    pub(crate) counted: Counted,
    /// The slot of the workload they count for.
    pub(crate) workload: u32,
    /// It is the newest ReplicaSet of a Deployment whose controller is replacing pods.
    pub(crate) newest: bool,
}

/// What the pods are counted against in one pass.
pub(crate) struct Context {
    pub(crate) now: DateTime<Utc>,
    /// The view has budgets.
    pub(crate) budgets: bool,
    /// Per node slot, whether its pods must still move (`node_state::still_to_drain`).
    pub(crate) to_drain: Vec<bool>,
    /// Per controller slot with pods (a fact's `controller`), what its pods count as.
    pub(crate) controllers: Vec<Option<Controlled>>,
    /// The pods with an eviction in flight: the addresses of their UIDs, and their positions.
    pub(crate) in_flight: FastSet<usize>,
    pub(crate) in_flight_at: Vec<u32>,
}

impl Context {
    /// Whether the sums counted against `self` can be brought to `next` pod by pod: the same nodes
    /// and budgets' presence, a clock that did not go back, and every controller that had pods
    /// counting them as before (another would need a walk over its pods, which are not kept
    /// by controller).
    fn leads_to(&self, next: &Self) -> bool {
        self.to_drain.len() == next.to_drain.len()
            && self.budgets == next.budgets
            && self.now <= next.now
            && self
                .controllers
                .iter()
                .zip(&next.controllers)
                .all(|(before, now)| before.is_none() || now.is_none() || before == now)
            && self.controllers[next.controllers.len().min(self.controllers.len())..]
                .iter()
                .all(Option::is_none)
    }
}

/// What one pod adds to the sums.
#[derive(Clone, Copy, Default)]
struct Added {
    /// Its node slot (`u32::MAX`: none known).
    node: u32,
    requests: Resources,
    used: bool,
    moving: bool,
    pending: bool,
    holding: bool,
    workload_pod: bool,
    pinnable: bool,
    multi_covered: bool,
    by_policy: bool,
    terminating: bool,
    /// The slot of the workload it counts for (`u32::MAX`: none).
    workload: u32,
    seen: bool,
    going: bool,
    ready: bool,
    warming: bool,
    to_move: bool,
    not_ready_since: Option<DateTime<Utc>>,
    progress: Option<DateTime<Utc>>,
    /// Warming up until then.
    warming_until: Option<DateTime<Utc>>,
}

impl Added {
    /// What the pod `pod`, with the facts `f` and the budgets' answer `covered`, adds against
    /// `ctx`.
    fn of(f: &PodFacts, covered: Covered, pod: &PodView, ctx: &Context) -> Self {
        let going = !ctx.in_flight.is_empty() && ctx.in_flight.contains(&f.uid);
        let controller = (f.controller != u32::MAX).then(|| {
            ctx.controllers[f.controller as usize].expect("every controller with pods counted")
        });
        let counted = Counted::of_seed(f.seed, going, controller);
        let is_workload = matches!(counted.kind, Kind::Workload { .. });
        let mut added = Self {
            node: f.node,
            requests: f.requests.resources(),
            workload: u32::MAX,
            ..Self::default()
        };
        if let Some(&to_drain) = ctx.to_drain.get(f.node as usize) {
            added.used = !f.finished;
            added.moving = is_workload || counted.kind == Kind::Job;
            added.holding = counted.holds_node;
            added.workload_pod = is_workload;
            added.pinnable = is_workload && f.pinnable;
            added.multi_covered = is_workload && ctx.budgets && covered.several();
            added.by_policy = matches!(counted.kind, Kind::Job | Kind::ByPolicy);
            added.terminating = counted.kind == Kind::Terminating;
            added.to_move = to_drain && is_workload;
        } else {
            added.pending = f.node_name == 0 && !f.finished && !f.terminating;
        }
        let Some(controller) = controller else {
            added.to_move = false;
            return added;
        };
        added.workload = controller.workload;
        if controller.newest {
            let readied = pod.ready_changed.filter(|_| f.ready);
            added.progress = pod.created.max(readied);
        }
        if f.finished {
            return added;
        }
        added.seen = true;
        // A pod terminating is gone for its workload, as the disruption controller counts it (its
        // controller replaces it at once); only k8sm's own evictions not yet shown are still
        // going.
        if going {
            added.going = true;
        } else if !f.ready && !f.terminating {
            added.not_ready_since = pod.ready_changed.or(pod.created);
        } else if f.ready && !f.terminating {
            // Where its workload sets minReadySeconds, a Ready pod counts once available.
            let available_at = match counted.kind {
                Kind::Workload { min_ready_seconds } => {
                    workload::available_at(min_ready_seconds, pod)
                }
                _ => Some(None),
            };
            match available_at {
                Some(Some(at)) if at > ctx.now => {
                    added.warming = true;
                    added.warming_until = Some(at);
                }
                Some(_) => added.ready = true,
                None => added.warming = true,
            }
        }
        added
    }
}

/// The counts, as of the last pass.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Sums {
    /// Per node slot, the classes of its pods.
    pub(crate) node_classes: Vec<NodeClasses>,
    /// Per node slot, what its pods that have not finished reserve, and what its pods that need a
    /// place elsewhere once evicted (workload, other-controller and Job pods, not terminating)
    /// reserve.
    pub(crate) node_used: Vec<Resources>,
    pub(crate) node_moving: Vec<Resources>,
    /// Per node slot, the workload slot that each of its workload and other-controller pods counts
    /// for, in slot order (what admission reads of the many nodes that only queue, without a walk
    /// over their pods; 4 bytes a pod).
    pub(crate) node_workloads: Vec<Vec<u32>>,
    /// What the pods waiting to be scheduled (bound to no node, not finished nor terminating) will
    /// reserve.
    pub(crate) pending: Resources,
    /// Per workload slot, its pods, bound to a node or not.
    pub(crate) workload_pods: Vec<PodCounts>,
    /// Per workload slot, how many of its pods are not Ready since each time, and how many of its
    /// newest ReplicaSet's pods made progress at each time: the earliest and the latest are
    /// its counts' `not_ready_since` and `rollout_progress`.
    not_ready: FastMap<u32, BTreeMap<DateTime<Utc>, u32>>,
    progress: FastMap<u32, BTreeMap<DateTime<Utc>, u32>>,
    /// The pods warming up, by the time they become available, and their positions.
    warming: BTreeSet<(DateTime<Utc>, u32)>,
    /// The workload slots whose rollout was found stalled.
    stalled: Vec<u32>,
}

impl Sums {
    /// Sums sized for `nodes` node slots and `workloads` workload slots, with nothing counted.
    fn empty(nodes: usize, workloads: usize) -> Self {
        Self {
            node_classes: vec![NodeClasses::default(); nodes],
            node_used: vec![Resources::default(); nodes],
            node_moving: vec![Resources::default(); nodes],
            node_workloads: vec![Vec::new(); nodes],
            workload_pods: vec![PodCounts::default(); workloads],
            ..Self::default()
        }
    }

    /// Counts every pod of `pods` against `ctx`.
    fn walk(&mut self, pods: &PodCache, views: &[Arc<PodView>], ctx: &Context) {
        let pods = pods.facts.iter().zip(&pods.covered).zip(views);
        for (position, ((f, &covered), pod)) in pods.enumerate() {
            let position = u32::try_from(position).unwrap_or(u32::MAX);
            self.add(position, &Added::of(f, covered, pod, ctx));
        }
    }

    fn add(&mut self, position: u32, added: &Added) {
        let node = added.node as usize;
        if let Some(classes) = self.node_classes.get_mut(node) {
            if added.used {
                self.node_used[node] += added.requests;
            }
            if added.moving {
                self.node_moving[node] += added.requests;
            }
            classes.holding += u32::from(added.holding);
            classes.workload += u32::from(added.workload_pod);
            classes.pinnable += u32::from(added.pinnable);
            classes.multi_covered += u32::from(added.multi_covered);
            classes.judged_by_policy += u32::from(added.by_policy);
            classes.terminating += u32::from(added.terminating);
            if added.workload_pod && added.workload != u32::MAX {
                let workloads = &mut self.node_workloads[node];
                let at = workloads.partition_point(|&slot| slot <= added.workload);
                workloads.insert(at, added.workload);
            }
        } else if added.pending {
            self.pending += added.requests;
        }
        let Some(counts) = self.workload_pods.get_mut(added.workload as usize) else {
            return;
        };
        counts.seen += u32::from(added.seen);
        counts.going += u32::from(added.going);
        counts.ready += u32::from(added.ready);
        counts.warming += u32::from(added.warming);
        counts.to_move += u32::from(added.to_move);
        if let Some(since) = added.not_ready_since {
            let times = self.not_ready.entry(added.workload).or_default();
            *times.entry(since).or_default() += 1;
            counts.not_ready_since = times.first_key_value().map(|(&t, _)| t);
        }
        if let Some(at) = added.progress {
            let times = self.progress.entry(added.workload).or_default();
            *times.entry(at).or_default() += 1;
            counts.rollout_progress = times.last_key_value().map(|(&t, _)| t);
        }
        if let Some(until) = added.warming_until {
            self.warming.insert((until, position));
        }
    }

    /// Takes away what `added` added; `None` where it was not counted (never, unless these sums are
    /// not what the last pass counted).
    fn take(&mut self, position: u32, added: &Added) -> Option<()> {
        fn less(total: &mut u32, one: bool) -> Option<()> {
            *total = total.checked_sub(u32::from(one))?;
            Some(())
        }
        fn less_resources(total: &mut Resources, one: Resources) -> Option<()> {
            *total = total.checked_less(one)?;
            Some(())
        }
        fn less_time(
            times: &mut FastMap<u32, BTreeMap<DateTime<Utc>, u32>>,
            workload: u32,
            at: DateTime<Utc>,
        ) -> Option<&BTreeMap<DateTime<Utc>, u32>> {
            let all = times.get_mut(&workload)?;
            let count = all.get_mut(&at)?;
            *count -= 1;
            if *count == 0 {
                all.remove(&at);
            }
            if all.is_empty() {
                times.remove(&workload);
                return None;
            }
            times.get(&workload)
        }
        let node = added.node as usize;
        if let Some(classes) = self.node_classes.get_mut(node) {
            if added.used {
                less_resources(&mut self.node_used[node], added.requests)?;
            }
            if added.moving {
                less_resources(&mut self.node_moving[node], added.requests)?;
            }
            less(&mut classes.holding, added.holding)?;
            less(&mut classes.workload, added.workload_pod)?;
            less(&mut classes.pinnable, added.pinnable)?;
            less(&mut classes.multi_covered, added.multi_covered)?;
            less(&mut classes.judged_by_policy, added.by_policy)?;
            less(&mut classes.terminating, added.terminating)?;
            if added.workload_pod && added.workload != u32::MAX {
                let workloads = &mut self.node_workloads[node];
                let at = workloads.binary_search(&added.workload).ok()?;
                workloads.remove(at);
            }
        } else if added.pending {
            less_resources(&mut self.pending, added.requests)?;
        }
        let Some(counts) = self.workload_pods.get_mut(added.workload as usize) else {
            return (added.workload == u32::MAX).then_some(());
        };
        less(&mut counts.seen, added.seen)?;
        less(&mut counts.going, added.going)?;
        less(&mut counts.ready, added.ready)?;
        less(&mut counts.warming, added.warming)?;
        less(&mut counts.to_move, added.to_move)?;
        if let Some(since) = added.not_ready_since {
            self.not_ready.get(&added.workload)?.get(&since)?;
            let left = less_time(&mut self.not_ready, added.workload, since);
            counts.not_ready_since = left.and_then(|t| t.first_key_value()).map(|(&t, _)| t);
        }
        if let Some(at) = added.progress {
            self.progress.get(&added.workload)?.get(&at)?;
            let left = less_time(&mut self.progress, added.workload, at);
            counts.rollout_progress = left.and_then(|t| t.last_key_value()).map(|(&t, _)| t);
        }
        if let Some(until) = added.warming_until
            && !self.warming.remove(&(until, position))
        {
            return None;
        }
        Some(())
    }
}

/// The counts kept from the last pass, with what they were counted against.
#[derive(Default)]
pub(crate) struct KeptTally {
    sums: Sums,
    /// What the sums were counted against; `None`: nothing counted yet.
    context: Option<Context>,
    /// Per controller slot, how many of the view's pods it has.
    controller_pods: Vec<u32>,
    /// When the sums were last counted from scratch.
    counted_at: Option<DateTime<Utc>>,
}

impl KeptTally {
    /// Per controller slot (of `pods.controllers()`), how many of the pods have it: counted again
    /// from the facts unless they kept their positions, or when the counts are due to be counted
    /// from scratch at `now`.
    pub(crate) fn pods_per_controller(&mut self, pods: &PodCache, now: DateTime<Utc>) -> &[u32] {
        let slots = pods.controllers().len();
        let kept = self.context.is_some()
            && pods.positions_kept()
            && !self.due(now)
            && self.controller_pods.len() <= slots
            && Self::bring_controllers(&mut self.controller_pods, pods, slots).is_some();
        if !kept {
            self.controller_pods = Self::count_controllers(pods, slots);
        }
        // Every test's pass counts from scratch and compares.
        #[cfg(test)]
        assert_eq!(
            self.controller_pods,
            Self::count_controllers(pods, slots),
            "pods per controller kept across passes"
        );
        &self.controller_pods
    }

    /// Per controller slot, how many of the pods have it, counted from their facts.
    fn count_controllers(pods: &PodCache, slots: usize) -> Vec<u32> {
        let mut counts = vec![0u32; slots];
        for f in &pods.facts {
            if let Some(count) = counts.get_mut(f.controller as usize) {
                *count += 1;
            }
        }
        counts
    }

    /// Brings the pods per controller to the alignment's: `None` where one would go below zero
    /// (never, unless they are not the last pass's).
    fn bring_controllers(counts: &mut Vec<u32>, pods: &PodCache, slots: usize) -> Option<()> {
        counts.resize(slots, 0);
        for replaced in pods.replaced() {
            if let Some(before) = &replaced.before
                && let Some(count) = counts.get_mut(before.facts.controller as usize)
            {
                *count = count.checked_sub(1)?;
            }
            if let Some(f) = pods.facts.get(replaced.position as usize)
                && let Some(count) = counts.get_mut(f.controller as usize)
            {
                *count += 1;
            }
        }
        Some(())
    }

    /// Whether the counts are due to be counted from scratch at `now`: never counted, counted
    /// [`RECOUNT_EVERY`] ago or more, or the clock went back.
    fn due(&self, now: DateTime<Utc>) -> bool {
        self.counted_at
            .is_none_or(|at| now >= at + RECOUNT_EVERY || now < at)
    }

    /// Brings the sums to `ctx`, for the pods of `pods` (whose views are `views`) with `workloads`
    /// workload slots: pod by pod from the last pass's where they can be, counted again from
    /// scratch otherwise, where `recount` (the pods' facts changed beyond their positions
    /// replaced), or every [`RECOUNT_EVERY`].
    pub(crate) fn update(
        &mut self,
        pods: &PodCache,
        views: &[Arc<PodView>],
        ctx: Context,
        workloads: usize,
        recount: bool,
    ) -> &mut Sums {
        let before = self.context.take();
        let recount = recount || self.due(ctx.now);
        let kept = !recount
            && pods.positions_kept()
            && before.as_ref().is_some_and(|b| b.leads_to(&ctx))
            && self.sums.fits(workloads)
            && {
                let brought = self.sums.bring(before.as_ref(), &ctx, pods, views);
                // Sums that were not the last pass's are a defect, which a recount hides.
                #[cfg(test)]
                assert!(brought.is_some(), "counts kept across passes taken away");
                brought.is_some()
            };
        if !kept {
            self.sums = Sums::empty(ctx.to_drain.len(), workloads);
            self.sums.walk(pods, views, &ctx);
            self.counted_at = Some(ctx.now);
        }
        // Every test's pass counts from scratch and compares.
        #[cfg(test)]
        {
            let mut fresh = Sums::empty(ctx.to_drain.len(), workloads);
            fresh.walk(pods, views, &ctx);
            let mut kept = std::mem::take(&mut self.sums);
            kept.stalled.clear();
            for counts in &mut kept.workload_pods {
                counts.rollout_stalled = false;
            }
            assert_eq!(kept, fresh, "counts kept across passes");
            self.sums = kept;
        }
        self.context = Some(ctx);
        &mut self.sums
    }
}

impl Sums {
    /// Whether the sums can hold `workloads` workload slots: more than before are added empty;
    /// fewer, only if those dropped count nothing. The stalled rollouts are found again.
    fn fits(&mut self, workloads: usize) -> bool {
        for slot in self.stalled.drain(..) {
            if let Some(counts) = self.workload_pods.get_mut(slot as usize) {
                counts.rollout_stalled = false;
            }
        }
        if self.workload_pods.len() > workloads
            && self.workload_pods[workloads..]
                .iter()
                .any(|c| *c != PodCounts::default())
        {
            return false;
        }
        self.workload_pods.resize(workloads, PodCounts::default());
        true
    }

    /// Brings sums counted against `before` to `now`: the pods replaced in the alignment taken away
    /// as they were and added as they are, and the others whose count depends on what changed
    /// counted again (an eviction in flight that started or ended, a node whose pods must now
    /// move or no longer, a pod whose warm-up ended). `None` where the sums were not what
    /// `before` counted: then they are counted from scratch.
    fn bring(
        &mut self,
        before: Option<&Context>,
        now: &Context,
        pods: &PodCache,
        views: &[Arc<PodView>],
    ) -> Option<()> {
        let before = before?;
        let replaced = pods.replaced();
        let changed: FastSet<u32> = replaced.iter().map(|r| r.position).collect();
        for r in replaced {
            if let Some(b) = &r.before {
                self.take(r.position, &Added::of(&b.facts, b.covered, &b.pod, before))?;
            }
        }
        let at = |position: u32| {
            let i = position as usize;
            Some((pods.facts.get(i)?, *pods.covered.get(i)?, views.get(i)?))
        };
        for r in replaced {
            if let Some((f, covered, pod)) = at(r.position) {
                self.add(r.position, &Added::of(f, covered, pod, now));
            }
        }
        let mut again: Vec<u32> = Vec::new();
        let flipped = |at: &[u32], other: &FastSet<usize>| {
            at.iter()
                .copied()
                .filter(|&p| !other.contains(&pods.facts.get(p as usize).map_or(0, |f| f.uid)))
                .collect::<Vec<u32>>()
        };
        again.extend(flipped(&before.in_flight_at, &now.in_flight));
        again.extend(flipped(&now.in_flight_at, &before.in_flight));
        let groups = pods.groups();
        for (slot, (was, is)) in before.to_drain.iter().zip(&now.to_drain).enumerate() {
            if was != is {
                again.extend(groups.on(slot).iter().map(|m| m.position));
            }
        }
        again.extend(
            self.warming
                .range(..=(now.now, u32::MAX))
                .map(|&(_, position)| position),
        );
        again.sort_unstable();
        again.dedup();
        for position in again {
            if changed.contains(&position) {
                continue;
            }
            let (f, covered, pod) = at(position)?;
            self.take(position, &Added::of(f, covered, pod, before))?;
            self.add(position, &Added::of(f, covered, pod, now));
        }
        Some(())
    }

    /// Marks stalled the rollouts whose newest ReplicaSet made no progress for longer than their
    /// `deadlines` (each with its workload slot); returns the earliest time a rollout still
    /// making progress would stall, or a Ready pod not yet available becomes so: its workload's
    /// health changes then, whatever else does.
    pub(crate) fn stall_rollouts(
        &mut self,
        deadlines: impl Iterator<Item = (u32, chrono::Duration)>,
        now: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let mut next = self.warming.first().map(|&(at, _)| at);
        for (slot, deadline) in deadlines {
            let Some(counts) = self.workload_pods.get_mut(slot as usize) else {
                continue;
            };
            if let Some(stall) = counts.rollout_progress.map(|p| p + deadline) {
                if stall <= now {
                    counts.rollout_stalled = true;
                    self.stalled.push(slot);
                } else {
                    next = Some(next.map_or(stall, |n| n.min(stall)));
                }
            }
        }
        next
    }
}
