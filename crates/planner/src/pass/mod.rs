//! One policy's part of a pass: its selected nodes assessed, the drain slots allocated (holders
//! that act, candidates admitted, the rest queued), and the policy's report. What happens to each
//! node is in `steps`.

pub(crate) mod claims;
pub(crate) mod conditions;
pub(crate) mod kept_decisions;
mod steps;

use std::{cell::RefCell, collections::BTreeMap, sync::Arc};

use chrono::{DateTime, Utc};
use k8sm_api::keys::PAUSE_ANNOTATION;
use k8sm_api::text::bounded;
use k8sm_api::{
    ExecutorUpgradePolicySpec, MAX_EXECUTOR_ID, NodeCounts, NodePhase, PauseAnnotation,
};

use crate::{
    DeletedNodeRecord, NodeView, PolicyCondition, PolicyView, Reason,
    index::Index,
    model::output::{
        Action, ActionKind, Blocker, Decision, EtaInputs, NodePlan, PodPlan, PolicyPlan,
    },
    objects::node_state::{self, Assessment, Stage},
    objects::selector,
    pass::claims::Claims,
    pass::conditions::condition,
    rules::admission::{self, Holding},
    rules::deleted,
    rules::drain::{self, Survey, earliest},
    rules::health::{self, Ledger},
    rules::node_context::NodeContext,
    rules::room::{self, Room},
    rules::window::Gate,
};

/// One policy's part of the pass.
pub(crate) struct PolicyPass<'v, 'i> {
    pub(crate) policy: &'v PolicyView,
    pub(crate) index: &'i Index<'v>,
    pub(crate) claims: &'i Claims<'i, 'v>,
    pub(crate) now: DateTime<Utc>,
    /// What the policy's maintenance window allows in this pass.
    pub(crate) gate: Gate,
    /// [`crate::ClusterView::pace_by_room`].
    pub(crate) pace_by_room: bool,
    /// The decisions of its draining nodes kept from the last pass, for a planner that plans pass
    /// after pass.
    pub(crate) kept: Option<&'i RefCell<kept_decisions::KeptPolicy>>,
}

/// Admission paced by room ([`room`]) in one pass.
struct Pacing {
    room: Room,
    /// Nodes draining that room never holds back.
    least: usize,
    /// Nodes in progress before this pass's admissions, but those waiting for an operator.
    draining: usize,
    /// A candidate was held back for want of room.
    short: bool,
}

/// A selected node on its way through the pass.
struct Entry<'v> {
    node: &'v NodeView,
    assessment: Assessment,
    survey: Option<Survey<'v>>,
    /// For a candidate, the longest remaining chain among the owners of its pods
    /// ([`admission::chain`]); 0 otherwise.
    chain: u32,
    /// A write of this pass to the node goes before its pods' calls
    /// ([`ActionKind::writes_node_first`]).
    written: bool,
}

/// The records of the nodes a policy deleted as their kamikaze, by name.
type Records<'v> = BTreeMap<&'v str, &'v DeletedNodeRecord>;

/// Slot holders, with how each holds its slot.
type Holders<'v> = Vec<(Holding, Entry<'v>)>;

/// The selected nodes not settled, by what the pass does with them next.
#[derive(Default)]
struct Assessed<'v> {
    /// Nodes that hold a slot and act, or wait for one: kamikaze sent, or admitted and not
    /// blocked.
    holders: Holders<'v>,
    /// Admitted nodes whose drain is blocked.
    blocked: Vec<Entry<'v>>,
    /// Candidates that may be admitted.
    candidates: Vec<Entry<'v>>,
    /// Candidates never started: down (with why), or holding a pod only an operator can clear.
    unavailable: Vec<(Entry<'v>, String)>,
    operator_only: Vec<Entry<'v>>,
}

impl<'v> PolicyPass<'v, '_> {
    fn spec(&self) -> &'v ExecutorUpgradePolicySpec {
        &self.policy.spec
    }

    /// By `spec.paused` or the pause annotation ([`PolicyView::paused`]).
    fn paused(&self) -> bool {
        self.policy.paused()
    }

    /// The policy's part of the pass, over the nodes its selector picked (`selection`): its nodes
    /// assessed, the slots allocated to those that hold one, candidates admitted into the free
    /// ones, the rest reported as they wait, and the policy's report.
    pub(crate) fn run(
        &self,
        selection: &Result<Vec<&'v NodeView>, String>,
        ledger: &mut Ledger,
    ) -> (Output, PolicyPlan) {
        let mut conditions = conditions::spec_conditions(self.spec());
        let own = self.own_nodes(selection, &mut conditions);
        let mut out = Output::default();
        let (records, missing) = self.deleted_nodes(&mut out);
        let slots = self
            .spec()
            .max_concurrent_nodes
            .resolve(own.len() + missing.len());
        let mut nodes = self.assess_all(own, &records, &mut out);
        let for_holders = slots.saturating_sub(missing.len());
        let (acting, waiting) = self.allocate(nodes.holders, for_holders);
        let acting_count = acting.len();
        self.chains(&mut nodes.candidates);
        let free = self.free_slots(for_holders, acting_count);
        let mut pacing = self.pacing(&acting, &waiting, &nodes.blocked, &nodes.candidates, slots);
        for (holding, entry) in acting {
            self.act(holding, entry, ledger, &mut out);
        }
        let (admitted, queued) =
            self.admit_all(nodes.candidates, free, slots, &mut pacing, ledger, &mut out);
        let in_use = missing.len() + acting_count + admitted;
        self.report_waiting(waiting, slots, &mut out);
        self.drain_blocked(nodes.blocked, ledger, &mut out);
        self.report_unadmitted(
            queued,
            nodes.unavailable,
            nodes.operator_only,
            &pacing,
            ledger,
            &mut out,
        );
        let policy_plan = self.policy_plan(conditions, slots, in_use, &mut out);
        (out, policy_plan)
    }

    /// The selected nodes that this policy alone claims; the conditions say why the selection is
    /// invalid or empty, and which selected nodes other policies claim too.
    fn own_nodes(
        &self,
        selection: &Result<Vec<&'v NodeView>, String>,
        conditions: &mut Vec<PolicyCondition>,
    ) -> Vec<&'v NodeView> {
        let selected: &[&NodeView] = match selection {
            Ok(nodes) => nodes,
            Err(e) => {
                conditions.push(condition(
                    Reason::InvalidPolicy,
                    format!("spec.nodeSelector: {e}"),
                    vec![],
                ));
                &[]
            }
        };
        if selection.is_ok() && selected.is_empty() {
            let message = match self.index.nodes.len() {
                0 => "the cluster has no nodes".to_owned(),
                all => format!(
                    "spec.nodeSelector \"{}\" selects none of the cluster's {all} nodes",
                    selector::describe(&self.spec().node_selector)
                ),
            };
            conditions.push(condition(Reason::NoNodesSelected, message, vec![]));
        }
        let (own, shared): (Vec<&NodeView>, Vec<&NodeView>) =
            selected.iter().partition(|n| self.claims.of(n).len() == 1);
        conditions.extend(conditions::conflicts(
            &self.policy.name,
            &shared,
            self.claims,
        ));
        own
    }

    /// The records of the nodes this policy deleted as their kamikaze, by name, and those of the
    /// nodes that have not registered again: these still hold a slot, and are kept and reported
    /// here.
    fn deleted_nodes(&self, out: &mut Output) -> (Records<'v>, Vec<&'v DeletedNodeRecord>) {
        let records: Records = self
            .policy
            .deleted_nodes
            .iter()
            .map(|r| (r.name.as_str(), r))
            .collect();
        let missing: Vec<&DeletedNodeRecord> = records
            .values()
            .copied()
            .filter(|r| !self.index.nodes.contains_key(r.name.as_str()))
            .collect();
        out.records.extend(missing.iter().map(|&r| r.clone()));
        for record in &missing {
            self.report_missing(record, out);
        }
        (records, missing)
    }

    /// Assesses each of `own` (a node with a record in `records` as one this policy deleted): those
    /// settled or opted out are reported at once, the others sorted by what the pass does with them
    /// next.
    fn assess_all(
        &self,
        own: Vec<&'v NodeView>,
        records: &Records<'v>,
        out: &mut Output,
    ) -> Assessed<'v> {
        let mut nodes = Assessed::default();
        for node in own {
            let entry = self.assess(node, records, out);
            self.sort_by_stage(entry, &mut nodes, out);
        }
        nodes
    }

    /// `node` assessed, with the actions its assessment asks for and the time it is overdue at.
    fn assess(&self, node: &'v NodeView, records: &Records<'v>, out: &mut Output) -> Entry<'v> {
        let spec = self.spec();
        let assessment = match records.get(node.name.as_str()) {
            Some(record) => {
                let (assessment, keep) = deleted::assess(node, record, spec, self.now);
                if keep {
                    out.records.push((*record).clone());
                }
                assessment
            }
            None => node_state::assess(node, self.index.opted_out(node), spec, self.now),
        };
        let mut written = false;
        for (kind, reason, message) in &assessment.actions {
            written |= kind.writes_node_first();
            out.action(&self.policy.name, kind.clone(), *reason, message.clone());
        }
        out.wake = earliest(out.wake, assessment.overdue_at);
        Entry {
            node,
            assessment,
            survey: None,
            chain: 0,
            written,
        }
    }

    /// Reports a node settled or opted out, and sorts the others into `nodes`: a slot holder
    /// surveyed (a blocked one apart), a candidate tallied (one down or held by a pod only an
    /// operator can clear apart).
    fn sort_by_stage(&self, mut entry: Entry<'v>, nodes: &mut Assessed<'v>, out: &mut Output) {
        match entry.assessment.stage {
            Stage::Settled(phase) | Stage::OptedOut(phase) => {
                out.report(self.node_plan(&entry, phase))
            }
            Stage::KamikazeSent | Stage::CameBackWrong => {
                nodes.holders.push((Holding::KamikazeSent, entry))
            }
            Stage::Admitted => {
                let survey = drain::survey(&self.context(&entry, None), self.index);
                let holding = if survey.drained() {
                    Holding::Drained
                } else {
                    Holding::Draining
                };
                let is_blocked = survey.blocked();
                entry.survey = Some(survey);
                if is_blocked {
                    nodes.blocked.push(entry);
                } else {
                    nodes.holders.push((holding, entry));
                }
            }
            Stage::Candidate => {
                let survey = drain::tally(&self.context(&entry, None), self.index);
                let need_operator = survey.need_operator;
                entry.survey = Some(survey);
                if let Some(why) = node_state::unavailable(entry.node) {
                    nodes.unavailable.push((entry, why));
                } else if need_operator > 0 {
                    nodes.operator_only.push(entry);
                } else {
                    nodes.candidates.push(entry);
                }
            }
        }
    }

    /// Allocates the `for_holders` slots to the holders, in [`admission::holder_key`] order: those
    /// that get one act (returned first, in [`admission::acting_key`] order), the others wait.
    fn allocate(&self, mut holders: Holders<'v>, for_holders: usize) -> (Holders<'v>, Holders<'v>) {
        let since = |e: &Entry| {
            e.assessment
                .draining_since
                .or(e.assessment.incompatible_since)
        };
        holders.sort_by(|(ha, a), (hb, b)| {
            admission::holder_key(*ha, since(a), &a.node.name).cmp(&admission::holder_key(
                *hb,
                since(b),
                &b.node.name,
            ))
        });
        let (mut acting, waiting) = admission::split(holders, for_holders);
        acting.sort_by(|(ha, a), (hb, b)| {
            let left = |e: &Entry| e.survey.as_ref().map_or(0, |s| s.left);
            admission::acting_key(*ha, left(a), since(a), &a.node.name).cmp(&admission::acting_key(
                *hb,
                left(b),
                since(b),
                &b.node.name,
            ))
        });
        (acting, waiting)
    }

    /// The slots left for candidates once `acting` holders use theirs: none while the policy is
    /// paused or its maintenance window closed.
    fn free_slots(&self, for_holders: usize, acting: usize) -> usize {
        if self.paused() || !self.gate.open {
            0
        } else {
            for_holders - acting
        }
    }

    /// Reports the holders that wait for one of the `slots`.
    fn report_waiting(&self, waiting: Holders<'v>, slots: usize, out: &mut Output) {
        for (_, entry) in waiting {
            let mut node_plan = self.node_plan(&entry, self.holding_phase(&entry));
            node_plan.blockers.push(blocker(
                Reason::WaitingForSlot,
                format!(
                    "waits for one of {slots} drain slots (maxConcurrentNodes {})",
                    self.spec().max_concurrent_nodes
                ),
            ));
            out.report(node_plan);
        }
    }

    /// Admitted nodes that are blocked give up their slot ([`Self::hand_back`]) and are drained,
    /// reported Blocked.
    fn drain_blocked(&self, blocked: Vec<Entry<'v>>, ledger: &mut Ledger, out: &mut Output) {
        for entry in blocked {
            self.hand_back(entry.node, out);
            self.drain(entry, NodePhase::Blocked, ledger, out);
        }
    }

    /// Reports the candidates not admitted: those queued, in the order of the queue (told what room
    /// holds them back for, where `pacing` held one back), those unavailable, and those held by a
    /// pod only an operator can clear.
    fn report_unadmitted(
        &self,
        queued: Vec<Entry<'v>>,
        unavailable: Vec<(Entry<'v>, String)>,
        operator_only: Vec<Entry<'v>>,
        pacing: &Pacing,
        ledger: &mut Ledger,
        out: &mut Output,
    ) {
        // Queued nodes that stalled before are reported with what their pods would wait on, decided
        // on one copy of the ledger for all of them (a copy each would cost a large fleet's whole
        // ledger per such node).
        let mut hypothetical: Option<Ledger> = None;
        // One message shared by every queued node (a large fleet queues thousands).
        let waits_for_room: Option<Arc<str>> = pacing
            .short
            .then(|| pacing.room.describe(pacing.least).into());
        for (position, entry) in self.queue(queued, ledger).into_iter().enumerate() {
            let position = u32::try_from(position + 1).unwrap_or(u32::MAX);
            self.report_queued(
                entry,
                position,
                waits_for_room.as_ref(),
                ledger,
                &mut hypothetical,
                out,
            );
        }
        for (entry, why) in unavailable {
            let mut node_plan = self.node_plan(&entry, NodePhase::Blocked);
            node_plan.blockers.push(blocker(Reason::NodeNotReady, why));
            out.report(node_plan);
        }
        for entry in operator_only {
            self.report_operator_only(entry, ledger, &mut hypothetical, out);
        }
    }

    /// The policy's report: its `conditions` with those of the pass, its nodes counted, its `slots`
    /// and how many are in use, and what its ETA is worked out from; the pass wakes when the
    /// maintenance window changes.
    fn policy_plan(
        &self,
        mut conditions: Vec<PolicyCondition>,
        slots: usize,
        in_use: usize,
        out: &mut Output,
    ) -> PolicyPlan {
        self.pass_conditions(&mut conditions, &out.nodes);
        out.wake = earliest(out.wake, self.gate.next_change());
        conditions.sort_by(|a, b| (a.reason, &a.message).cmp(&(b.reason, &b.message)));
        let mut counts = NodeCounts::default();
        for node in &out.nodes {
            counts.add(node.phase);
        }
        let slots = u32::try_from(slots).unwrap_or(u32::MAX);
        let mut deleted_nodes = std::mem::take(&mut out.records);
        deleted_nodes.sort();
        deleted_nodes.dedup_by(|a, b| a.name == b.name);
        PolicyPlan {
            policy: self.policy.name.clone(),
            generation: self.policy.generation,
            counts,
            slots,
            slots_in_use: u32::try_from(in_use).unwrap_or(u32::MAX),
            paused: self.paused(),
            conditions,
            eta: EtaInputs {
                nodes_remaining: counts.total - counts.compatible,
                nodes_blocked: u32::try_from(
                    out.nodes.iter().filter(|n| waits_for_operator(n)).count(),
                )
                .unwrap_or(u32::MAX),
                slots,
                pods_left: pods_left(&out.nodes),
            },
            deleting: false,
            deleted_nodes,
            window: self.gate.state,
        }
    }

    /// Adds to `conditions` those of the pass: raised by its `nodes`' reports, the pause, and the
    /// maintenance window.
    fn pass_conditions(&self, conditions: &mut Vec<PolicyCondition>, nodes: &[NodePlan]) {
        conditions.extend(conditions::node_conditions(nodes));
        if let Some(message) = pause_message(&self.policy.spec, &self.policy.pause_annotation) {
            conditions.push(condition(Reason::Paused, message, vec![]));
        }
        if let PauseAnnotation::Malformed(value) = &self.policy.pause_annotation {
            let message = format!(
                "annotation {PAUSE_ANNOTATION} is {value:?}, neither \"true\" nor \"false\": the \
                 policy stays paused until it is fixed or removed"
            );
            conditions.push(condition(Reason::MalformedAnnotation, message, vec![]));
        }
        if let Some((reason, message)) = &self.gate.condition {
            conditions.push(condition(*reason, message.clone(), vec![]));
        }
    }

    /// Sets the chain of every candidate: the longest [`admission::chain`] among the owners of its
    /// pods, each owner's worked out once, read from the workloads the index keeps per node (no
    /// walk over the candidates' pods).
    ///
    /// A candidate that does not carry the mark yet is marked by this pass: the first pass of an
    /// upgrade marks every old node and fills the free slots at once. Its pods are still to
    /// move, though the index, which reads the nodes' keys alone, does not count them
    /// (`PodCounts::to_move`): they are added here, or every chain would read as none in that
    /// pass and its slots would go by the key alone.
    fn chains(&self, candidates: &mut [Entry<'v>]) {
        let threshold = self.spec().owner_health_threshold.clamp(1, 100);
        let workloads = self.index.workloads();
        let mut being_marked = vec![0u32; workloads.len()];
        for entry in candidates.iter().filter(|e| e.assessment.being_marked) {
            for &slot in self.index.workloads_on(entry.node) {
                if let Some(count) = being_marked.get_mut(slot as usize) {
                    *count += 1;
                }
            }
        }
        let mut chains = vec![u32::MAX; workloads.len()];
        for entry in candidates {
            let mut longest = 0;
            for &slot in self.index.workloads_on(entry.node) {
                let (Some(known), Some(Some(workload))) =
                    (chains.get_mut(slot as usize), workloads.get(slot as usize))
                else {
                    continue;
                };
                if *known == u32::MAX {
                    let pods = self.index.workload_at(slot);
                    let desired = health::desired(*workload, pods, self.index);
                    let to_move = pods.to_move + being_marked[slot as usize];
                    *known = admission::chain(to_move, desired, threshold);
                }
                longest = longest.max(*known);
            }
            entry.chain = longest;
        }
    }

    /// Admits candidates, in [`admission_order`], into `free` slots, and drains each at once:
    /// within each group of [`admission::group`], first the nodes whose pods can move now,
    /// longest chain first then in key order, then the others in key order; a group is
    /// exhausted before the next is looked at. A node that stalled less than
    /// `nodeProgressDeadline` ago rests (is not admitted) unless one of its pods can go now.
    /// Returns how many were admitted, and the candidates left (in no particular order).
    fn admit_all(
        &self,
        mut candidates: Vec<Entry<'v>>,
        free: usize,
        slots: usize,
        pacing: &mut Pacing,
        ledger: &mut Ledger,
        out: &mut Output,
    ) -> (usize, Vec<Entry<'v>>) {
        // With no slot free (through most of a large fleet's upgrade) nothing is admitted, and the
        // queue sorts them.
        if free == 0 {
            return (0, candidates);
        }
        candidates.sort_by_cached_key(|e| admission_order(e, self.index));
        let mut admitted = 0;
        let mut left = Vec::new();
        let mut candidates = candidates.into_iter().peekable();
        while admitted < free {
            let Some(first) = candidates.next() else {
                break;
            };
            let group = group_of(&first);
            // Admitted in turn, each drained before the next is judged: what one admission evicts
            // may leave the next node's owners nothing to lose.
            let mut cannot_move = Vec::new();
            let mut next = Some(first);
            while let Some(entry) = next {
                if admitted == free {
                    left.push(entry);
                } else {
                    match self.readiness(&entry, ledger, None) {
                        Readiness::Moves if self.room_for(&entry, admitted, pacing) => {
                            self.admit(entry, slots, ledger, out);
                            admitted += 1;
                        }
                        Readiness::Moves => left.push(entry),
                        Readiness::Waits => cannot_move.push(entry),
                        Readiness::Rests { until } => {
                            out.wake = earliest(out.wake, Some(until));
                            left.push(entry);
                        }
                    }
                }
                next = candidates.next_if(|e| group_of(e) == group);
            }
            // Those whose pods cannot move now still go before the next group, in key order.
            cannot_move.sort_by_cached_key(|e| candidate_key(e, self.index));
            for entry in cannot_move {
                if admitted == free || !self.room_for(&entry, admitted, pacing) {
                    left.push(entry);
                    continue;
                }
                self.admit(entry, slots, ledger, out);
                admitted += 1;
            }
        }
        // In no particular order: the queue's order is decided in one place, `queue`.
        left.extend(candidates);
        (admitted, left)
    }

    /// The room of this pass, and how many nodes in progress it never holds back ([`room`]):
    /// `holders` and `waiting` hold a slot, `blocked` and `candidates` are still to drain.
    fn pacing(
        &self,
        holders: &[(Holding, Entry)],
        waiting: &[(Holding, Entry)],
        blocked: &[Entry],
        candidates: &[Entry],
        slots: usize,
    ) -> Pacing {
        let in_progress = || holders.iter().chain(waiting).map(|(_, e)| e.node);
        // By position among the index's nodes: a large fleet's nodes are nearly all to drain.
        let mut to_drain = vec![false; self.index.nodes.len()];
        let mut count = 0;
        for node in in_progress().chain(blocked.iter().chain(candidates).map(|e| e.node)) {
            let position = self.index.node_position(node);
            if let Some(known) = position.and_then(|p| to_drain.get_mut(p as usize))
                && !*known
            {
                *known = true;
                count += 1;
            }
        }
        let longest_chain = candidates.iter().map(|e| e.chain).max().unwrap_or(0);
        Pacing {
            room: Room::new(self.index, &to_drain, in_progress()),
            // Without pacing, room never holds a node back.
            least: if self.pace_by_room {
                room::least_in_progress(slots, longest_chain, count)
            } else {
                usize::MAX
            },
            // A node whose restart is overdue, or that came back wrong, waits for an operator: it
            // must not hold admission back as well as its slot.
            draining: holders
                .iter()
                .filter(|(_, e)| !e.assessment.blockers.iter().any(|b| b.reason.blocks()))
                .count(),
            short: false,
        }
    }

    /// Whether `entry` may be admitted as far as room goes ([`room`]), after `admitted` admissions
    /// in this pass; counts its pods as held if so. Once one candidate is held back, so are the
    /// ones after it: the queue's order stays the order of admission.
    fn room_for(&self, entry: &Entry, admitted: usize, pacing: &mut Pacing) -> bool {
        if pacing.short {
            return false;
        }
        let moving = self.index.moving_on(entry.node);
        if pacing.draining + admitted >= pacing.least && !pacing.room.admits(moving) {
            pacing.short = true;
            return false;
        }
        pacing.room.hold(moving);
        true
    }

    /// The admission queue: candidates sorted by [`candidate_key`], reordered within each group of
    /// [`admission::group`] so that nodes whose pods can move after this pass's actions come first,
    /// longest chain first (the order in which [`Self::admit_all`] would admit them if slots
    /// were free now).
    fn queue(&self, mut queued: Vec<Entry<'v>>, ledger: &mut Ledger) -> Vec<Entry<'v>> {
        // Keyed once per node, in order (a large fleet queues thousands, and a sort compares each
        // many times).
        let mut known = drain::ReadyVerdicts::new(self.index);
        queued.sort_by_cached_key(|e| {
            let later = self.readiness(e, ledger, Some(&mut known)) != Readiness::Moves;
            // Only among those that can move, longest chain first: the others stay in key order.
            let chain = if later { 0 } else { e.chain };
            (
                group_of(e),
                later,
                std::cmp::Reverse(chain),
                candidate_key(e, self.index),
            )
        });
        queued
    }

    /// How ready a candidate is to be admitted now: see [`drain::movement`]. A node that stalled
    /// rests for `nodeProgressDeadline` after its stall, so that a node stuck for good is not
    /// cordoned and uncordoned again every deadline while no other node waits; a pod able to go
    /// now ends the rest at once (what it waited on cleared). `known`: see [`drain::movement`].
    fn readiness(
        &self,
        entry: &Entry<'v>,
        ledger: &mut Ledger,
        known: Option<&mut drain::ReadyVerdicts>,
    ) -> Readiness {
        let ctx = self.context(entry, None);
        let movement = drain::movement(&ctx, self.index, ledger, known);
        // Every test's pass checks what was reused against the judgement of every pod.
        #[cfg(test)]
        assert_eq!(movement, drain::movement(&ctx, self.index, ledger, None));
        if let Some(until) = self.rests_until(entry)
            && movement != drain::Movement::Now
        {
            return Readiness::Rests { until };
        }
        if movement.can_move() {
            Readiness::Moves
        } else {
            Readiness::Waits
        }
    }

    /// When the rest of a node that stalled ends, if it has not yet (a stall of unknown time rests
    /// no more).
    fn rests_until(&self, entry: &Entry<'v>) -> Option<DateTime<Utc>> {
        let stalled_at = entry.assessment.stalled.flatten()?;
        let rest = self.spec().progress_deadline();
        let until = stalled_at.checked_add_signed(rest)?;
        (until > self.now).then_some(until)
    }

    fn context(&self, entry: &Entry<'v>, hold: Option<Reason>) -> NodeContext<'v> {
        let spec = self.spec();
        NodeContext {
            node: entry.node,
            spec,
            threshold: spec.owner_health_threshold.clamp(1, 100),
            incompatible_since: entry.assessment.incompatible_since,
            hold,
            written: entry.written,
            now: self.now,
            turns: Default::default(),
        }
    }

    fn holding_phase(&self, entry: &Entry) -> NodePhase {
        match (&entry.assessment.stage, &entry.survey) {
            (Stage::KamikazeSent, _) => NodePhase::KamikazeSent,
            (Stage::CameBackWrong, _) => NodePhase::Blocked,
            (_, Some(s)) if s.drained() => NodePhase::Drained,
            _ => NodePhase::Draining,
        }
    }

    /// The report of a node, without pod decisions.
    fn node_plan(&self, entry: &Entry, phase: NodePhase) -> NodePlan {
        let a = &entry.assessment;
        let since = match phase {
            NodePhase::Compatible => None,
            NodePhase::Incompatible => a.incompatible_since,
            NodePhase::Draining | NodePhase::Drained | NodePhase::Blocked => {
                a.draining_since.or(a.incompatible_since)
            }
            NodePhase::KamikazeSent => a.kamikaze_at,
        };
        NodePlan {
            node: entry.node.name.clone(),
            policy: self.policy.name.clone(),
            phase,
            since,
            pods_left: entry.survey.as_ref().map_or(0, |s| s.left),
            // A report, never compared: bounded like everything the status shows.
            executor_id: entry
                .node
                .executor_id
                .as_deref()
                .map(|id| bounded(id, MAX_EXECUTOR_ID).into_owned()),
            ready: entry.node.ready,
            blockers: a.blockers.clone(),
            admission_position: None,
            operator_pods: entry.survey.as_ref().map_or(0, |s| s.need_operator),
            pods: Arc::default(),
        }
    }
}

/// The order in which admission looks at candidates: by group, then longest chain, then
/// [`candidate_key`]. Only the nodes whose pods can move now are admitted in this order; the others
/// in key order (see [`PolicyPass::admit_all`]). A key worked out once per candidate (a large fleet
/// queues thousands, and a sort compares each many times).
fn admission_order<'v>(
    e: &Entry<'v>,
    index: &Index,
) -> (
    admission::Group,
    std::cmp::Reverse<u32>,
    admission::CandidateKey<NameOrder<'v>>,
) {
    (
        group_of(e),
        std::cmp::Reverse(e.chain),
        candidate_key(e, index),
    )
}

/// A node's name as a sort key: its position among the index's nodes, which are in name order,
/// compared as an integer (a large fleet's queue sorts thousands of nodes that differ only by
/// name); the name itself decides only between nodes not among them.
type NameOrder<'v> = (u32, &'v str);

fn candidate_key<'v>(e: &Entry<'v>, index: &Index) -> admission::CandidateKey<NameOrder<'v>> {
    let (need_operator, left) = e
        .survey
        .as_ref()
        .map_or((0, 0), |s| (s.need_operator, s.left));
    let name = e.node.name.as_str();
    admission::candidate_key(
        e.assessment.stalled,
        need_operator,
        left,
        e.assessment.incompatible_since,
        (index.node_position(e.node).unwrap_or(u32::MAX), name),
    )
}

/// See [`PolicyPass::readiness`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Readiness {
    /// Something on it would move now.
    Moves,
    /// Admitted only after the nodes whose pods can move.
    Waits,
    /// Stalled recently and nothing owned would move: not admitted before `until`.
    Rests { until: DateTime<Utc> },
}

fn group_of(e: &Entry) -> admission::Group {
    admission::group(
        e.assessment.stalled,
        e.survey.as_ref().map_or(0, |s| s.need_operator),
    )
}

/// What one policy's pass produces.
#[derive(Default)]
pub(crate) struct Output {
    pub(crate) actions: Vec<Action>,
    pub(crate) nodes: Vec<NodePlan>,
    pub(crate) wake: Option<DateTime<Utc>>,
    /// Deleted-node records the policy keeps, and those added by this pass's DeleteNode kamikaze.
    records: Vec<DeletedNodeRecord>,
}

impl Output {
    pub(crate) fn action(
        &mut self,
        policy: &str,
        kind: ActionKind,
        reason: Reason,
        message: String,
    ) {
        self.actions.push(Action {
            policy: policy.to_owned(),
            reason,
            message,
            kind,
        });
    }

    fn report(&mut self, node: NodePlan) {
        self.nodes.push(node);
    }
}

fn blocker(reason: Reason, message: impl Into<Arc<str>>) -> Blocker {
    Blocker {
        reason,
        message: message.into(),
        pod: None,
    }
}

/// The pods left on the nodes in progress: Draining, Drained or Blocked.
fn pods_left(nodes: &[NodePlan]) -> u32 {
    nodes
        .iter()
        .filter(|n| {
            matches!(
                n.phase,
                NodePhase::Draining | NodePhase::Drained | NodePhase::Blocked
            )
        })
        .map(|n| n.pods_left)
        .sum()
}

/// Whether a node is Blocked, or waits on something only an operator resolves (a restart overdue):
/// while any does, no ETA is honest.
/// What the Paused condition says: who paused the policy, and how to resume it; `None` when it
/// is not paused.
fn pause_message(spec: &ExecutorUpgradePolicySpec, annotation: &PauseAnnotation) -> Option<String> {
    let by = match (spec.paused, annotation.pauses()) {
        (false, false) => return None,
        (true, false) => "spec.paused".to_owned(),
        (false, true) => format!("annotation {PAUSE_ANNOTATION}"),
        (true, true) => format!("spec.paused and annotation {PAUSE_ANNOTATION}"),
    };
    Some(format!(
        "paused by {by}: no eviction, deletion, cordon or kamikaze; kubectl k8sm resume resumes it"
    ))
}

fn waits_for_operator(node: &NodePlan) -> bool {
    node.phase == NodePhase::Blocked
        || node
            .blockers
            .iter()
            .any(|b| b.pod.is_none() && b.reason.needs_operator())
}

/// A pod that the node waits for, as a blocker.
fn pod_blocker(pod: &PodPlan) -> Option<Blocker> {
    match (pod.decision, pod.reason) {
        (Decision::Wait | Decision::Block, Some(reason)) => Some(Blocker {
            reason,
            message: pod.message.clone(),
            pod: Some(pod.pod.clone()),
        }),
        _ => None,
    }
}
