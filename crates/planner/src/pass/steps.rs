//! What happens to one node in a policy's pass: a slot holder acts (waits for its executor, gets
//! kamikaze, or drains), a candidate is admitted, a draining node records its progress or gives up
//! its slot, and the nodes that wait are reported.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use k8sm_api::{KamikazeMechanism, KamikazeUrlError, NodePhase};

use super::{Entry, Output, PolicyPass, blocker, pod_blocker};
use crate::{
    Decision, DeletedNodeRecord, NodeView, Reason,
    model::output::{ActionKind, Blocker, NodePlan},
    objects::node_state::Stage,
    rules::admission::Holding,
    rules::deleted,
    rules::drain::{self, Survey, earliest},
    rules::health::Ledger,
    rules::node_context::NodeContext,
    rules::progress,
};

impl PolicyPass<'_, '_> {
    /// A slot holder that acts: KamikazeSent waits for the executor; Drained gets kamikaze;
    /// Draining drains.
    pub(super) fn act(
        &self,
        holding: Holding,
        mut entry: Entry,
        ledger: &mut Ledger,
        out: &mut Output,
    ) {
        match holding {
            Holding::KamikazeSent => {
                let phase = match entry.assessment.stage {
                    Stage::CameBackWrong => NodePhase::Blocked,
                    _ => NodePhase::KamikazeSent,
                };
                out.report(self.node_plan(&entry, phase))
            }
            Holding::Drained | Holding::Draining => {
                let spec = self.spec();
                if spec.cordon
                    && !self.paused()
                    && !entry.node.unschedulable
                    && !entry.node.cordoned_by_k8sm
                {
                    let node = entry.node.name.clone();
                    let message = "cordoned: the policy cordons draining nodes".to_owned();
                    out.action(
                        &self.policy.name,
                        ActionKind::Cordon { node },
                        Reason::Cordoned,
                        message,
                    );
                    entry.written = true;
                }
                let phase = if holding == Holding::Drained {
                    NodePhase::Drained
                } else {
                    NodePhase::Draining
                };
                self.drain(entry, phase, ledger, out);
            }
        }
    }

    /// Admits a candidate into a free slot, then drains it in the same pass (the admission executes
    /// first).
    pub(super) fn admit(&self, entry: Entry, slots: usize, ledger: &mut Ledger, out: &mut Output) {
        let spec = self.spec();
        let cordon = spec.cordon && !entry.node.unschedulable;
        let left = entry.survey.as_ref().map_or(0, |s| s.left);
        let (reason, how) = if cordon {
            (Reason::Cordoned, "cordoned")
        } else {
            (Reason::Admitted, "not cordoned")
        };
        let kind = ActionKind::Admit {
            node: entry.node.name.clone(),
            at: self.now,
            pods_left: left,
            cordon,
        };
        let again = match entry.assessment.stalled {
            Some(_) => " again, after it stalled",
            None => "",
        };
        let message =
            format!("admitted{again} into one of {slots} drain slots, {left} pods to move; {how}");
        out.action(&self.policy.name, kind, reason, message);
        let mut entry = entry;
        entry.written = true;
        entry.assessment.draining_since = Some(self.now);
        entry.assessment.stalled = None;
        // Candidates were only tallied; the node's pods are decided now.
        entry.survey = Some(drain::survey(&self.context(&entry, None), self.index));
        // Just recorded by the admission: its progress deadline starts now.
        self.drain_recorded(entry, NodePhase::Draining, ledger, out);
    }

    /// Decides the pods of an admitted node and reports it; a Drained node that acts gets kamikaze,
    /// and a Draining one records its progress or, without any for `nodeProgressDeadline`,
    /// gives up its slot.
    pub(super) fn drain(
        &self,
        entry: Entry,
        phase: NodePhase,
        ledger: &mut Ledger,
        out: &mut Output,
    ) {
        self.drain_with(entry, phase, ledger, out, true);
    }

    /// [`Self::drain`] for a node whose progress record was written in this pass.
    fn drain_recorded(
        &self,
        entry: Entry,
        phase: NodePhase,
        ledger: &mut Ledger,
        out: &mut Output,
    ) {
        self.drain_with(entry, phase, ledger, out, false);
    }

    fn drain_with(
        &self,
        entry: Entry,
        phase: NodePhase,
        ledger: &mut Ledger,
        out: &mut Output,
        check_progress: bool,
    ) {
        let spec = self.spec();
        let hold = if self.paused() {
            Some(Reason::Paused)
        } else {
            self.gate.hold_in_flight.then_some(Reason::OutsideWindow)
        };
        let ctx = self.context(&entry, hold);
        let Some(survey) = &entry.survey else {
            unreachable!("admitted nodes are surveyed")
        };
        let decided = self.decide(survey, &ctx, ledger);
        // An eviction asked for against a budget at zero is likely refused: not progress by itself,
        // or a node whose pod the API keeps refusing would never give its slot up. A pod that
        // waits for a call is held by the controller's limit, not by its node.
        let moving = decided.actions.len() > decided.asked || decided.waiting_for_call > 0;
        // A surge rollout under way is progress on its way, bounded by its own deadline (the pod is
        // evicted then): the node keeps its slot meanwhile, as while held.
        let held = hold.is_some() || decided.moving;
        for (kind, reason, message) in decided.actions {
            out.action(&self.policy.name, kind, reason, message);
        }
        out.wake = earliest(out.wake, decided.wake);
        let mut node_plan = self.node_plan(&entry, phase);
        if self.paused() {
            node_plan
                .blockers
                .push(blocker(Reason::Paused, "paused: nothing moves"));
        } else if self.gate.hold_in_flight {
            let message = format!("nothing moves: it {}", self.gate.waits);
            node_plan
                .blockers
                .push(blocker(Reason::OutsideWindow, message));
        }
        if phase == NodePhase::Drained {
            node_plan.phase = self.kamikaze(entry.node, &mut node_plan.blockers, out);
            if node_plan.phase == NodePhase::KamikazeSent {
                node_plan.since = Some(self.now);
            }
        }
        let pod_blockers: Vec<Blocker> = decided.pods.iter().filter_map(pod_blocker).collect();
        if phase == NodePhase::Draining && !check_progress {
            // Admitted in this pass, its progress recorded now: plan again when that record would
            // make it stall, even if nothing else changes by then (the last node of a
            // fleet has no other event to wake on).
            let just_recorded = progress::Record {
                at: self.now,
                pods_left: survey.left,
            };
            let deadline = spec.progress_deadline();
            if let progress::Verdict::Wait { wake } =
                progress::judge(Some(just_recorded), survey.left, deadline, held, self.now)
            {
                out.wake = earliest(out.wake, Some(wake));
            }
        }
        if phase == NodePhase::Draining && check_progress {
            let record = progress::Record::parse(entry.node.drain_progress.as_deref());
            let deadline = spec.progress_deadline();
            match progress::judge(record, survey.left, deadline, held, self.now) {
                progress::Verdict::Record => out.action(
                    &self.policy.name,
                    ActionKind::Progress {
                        node: entry.node.name.clone(),
                        at: self.now,
                        pods_left: survey.left,
                    },
                    Reason::DrainProgress,
                    format!("{} pods left", survey.left),
                ),
                progress::Verdict::Wait { wake } => out.wake = earliest(out.wake, Some(wake)),
                // A pod that moves in this pass is progress: the next pass records it.
                progress::Verdict::Stall { .. } if moving => {}
                progress::Verdict::Stall { since } => {
                    node_plan.phase = NodePhase::Blocked;
                    self.stall(entry.node, since, &pod_blockers, &mut node_plan, out);
                }
            }
        }
        node_plan.blockers.extend(pod_blockers);
        node_plan.pods = decided.pods;
        out.report(node_plan);
    }

    /// Decides the pods of a slot holder, or replays its decisions kept from the last pass while
    /// everything they read holds ([`super::kept_decisions`]).
    fn decide(&self, survey: &Survey, ctx: &NodeContext, ledger: &mut Ledger) -> drain::Drain {
        let Some(kept) = self.kept.as_ref().filter(|_| ctx.hold.is_none()) else {
            return drain::decide(survey, ctx, self.index, ledger);
        };
        let mut kept = kept.borrow_mut();
        if let Some(replayed) = kept.replay(survey, ctx, self.index, ledger) {
            // Every test's pass checks what was replayed against deciding again.
            #[cfg(test)]
            {
                let again = drain::decide(survey, ctx, self.index, &mut ledger.clone());
                assert!(
                    again.actions.is_empty(),
                    "{}: replayed, and acts",
                    ctx.node.name
                );
                assert_eq!(
                    (
                        &replayed.pods,
                        replayed.wake,
                        replayed.moving,
                        replayed.waiting_for_call
                    ),
                    (
                        &again.pods,
                        again.wake,
                        again.moving,
                        again.waiting_for_call
                    ),
                    "the decisions replayed on {}",
                    ctx.node.name
                );
            }
            return replayed;
        }
        let decided = drain::decide(survey, ctx, self.index, ledger);
        kept.keep(survey, ctx, &decided);
        decided
    }

    /// Gives up the slot of a draining node that made no progress since `since`.
    fn stall(
        &self,
        node: &NodeView,
        since: DateTime<Utc>,
        waits: &[Blocker],
        node_plan: &mut NodePlan,
        out: &mut Output,
    ) {
        let spec = self.spec();
        let uncordon = node.cordoned_by_k8sm && node.unschedulable;
        let on = match waits.first() {
            Some(first) => {
                let more = match waits.len() - 1 {
                    0 => String::new(),
                    n => format!(" (and {n} more)"),
                };
                format!("; it waits on {}{more}", first.message)
            }
            None => String::new(),
        };
        let message = format!(
            "no pod left the node since {} (nodeProgressDeadline {}): it gave up its drain slot{}, and is admitted \
             again after the nodes that never stalled, once one of its pods can move or it rested as long{on}",
            since.to_rfc3339(),
            spec.node_progress_deadline,
            if uncordon { " and was uncordoned" } else { "" },
        );
        node_plan
            .blockers
            .insert(0, blocker(Reason::Stalled, message.clone()));
        out.action(
            &self.policy.name,
            ActionKind::Stall {
                node: node.name.clone(),
                at: self.now,
                uncordon,
            },
            Reason::Stalled,
            message,
        );
    }

    /// Reports a candidate that waits for a slot, or for room (`waits_for_room`: what it is told).
    /// One that stalled before is Blocked, with what its pods wait on, decided on
    /// `hypothetical`, a copy of `ledger` made for the first such node and shared by the next
    /// ones: what they would do if admitted in queue order, acting on nothing.
    pub(super) fn report_queued(
        &self,
        entry: Entry,
        position: u32,
        waits_for_room: Option<&Arc<str>>,
        ledger: &Ledger,
        hypothetical: &mut Option<Ledger>,
        out: &mut Output,
    ) {
        let spec = self.spec();
        let Some(stalled) = entry.assessment.stalled else {
            let mut node_plan = self.node_plan(&entry, NodePhase::Incompatible);
            node_plan.admission_position = Some(position);
            if let Some(message) = waits_for_room {
                node_plan
                    .blockers
                    .push(blocker(Reason::WaitingForRoom, Arc::clone(message)));
            } else if self.paused() {
                node_plan
                    .blockers
                    .push(blocker(Reason::Paused, "paused: no node is admitted"));
            } else if !self.gate.open {
                let message = format!("not admitted: it {}", self.gate.waits);
                node_plan
                    .blockers
                    .push(blocker(Reason::OutsideWindow, message));
            }
            out.report(node_plan);
            return;
        };
        let (survey, decided) = self.decide_unadmitted(&entry, ledger, hypothetical);
        let mut node_plan = self.node_plan(&entry, NodePhase::Blocked);
        node_plan.since = stalled.or(node_plan.since);
        node_plan.pods_left = survey.left;
        node_plan.operator_pods = survey.need_operator;
        node_plan.admission_position = Some(position);
        let when = stalled.map_or_else(
            || "earlier".to_owned(),
            |t| format!("at {}", t.to_rfc3339()),
        );
        let again = match self.rests_until(&entry) {
            Some(until) => format!(
                "admitted again when one of its pods can move, or from {} on, when a slot is free",
                until.to_rfc3339()
            ),
            None => "admitted again when a slot is free".to_owned(),
        };
        node_plan.blockers.push(blocker(
            Reason::Stalled,
            format!(
                "stalled {when}: no pod left it for nodeProgressDeadline {}; {again} (place {position} in the queue)",
                spec.node_progress_deadline
            ),
        ));
        node_plan
            .blockers
            .extend(decided.pods.iter().filter_map(pod_blocker));
        node_plan.pods = decided.pods;
        out.report(node_plan);
    }

    /// Gives up the slot of an admitted node whose every pod left needs an operator, and uncordons
    /// it if k8sm cordoned it: it waits for the operator at no cost to anyone, and is admitted
    /// again like any node once they are cleared. Not while the policy is paused (nothing
    /// changes then).
    pub(super) fn hand_back(&self, node: &NodeView, out: &mut Output) {
        if self.paused() {
            return;
        }
        let uncordon = node.cordoned_by_k8sm && node.unschedulable;
        let message = format!(
            "every pod left on it needs an operator: it gave up its drain slot{}, and is admitted again once they are \
             cleared",
            if uncordon { " and was uncordoned" } else { "" }
        );
        let kind = ActionKind::Stall {
            node: node.name.clone(),
            at: self.now,
            uncordon,
        };
        out.action(&self.policy.name, kind, Reason::Stalled, message);
    }

    /// Reports a candidate that is never started while a pod on it needs an operator (not admitted,
    /// not cordoned, nothing on it evicted): Blocked, naming those pods and what clears each,
    /// decided on `hypothetical` as in [`Self::report_queued`].
    pub(super) fn report_operator_only(
        &self,
        entry: Entry,
        ledger: &Ledger,
        hypothetical: &mut Option<Ledger>,
        out: &mut Output,
    ) {
        let (survey, decided) = self.decide_unadmitted(&entry, ledger, hypothetical);
        let mut node_plan = self.node_plan(&entry, NodePhase::Blocked);
        node_plan.pods_left = survey.left;
        node_plan.operator_pods = survey.need_operator;
        let operator_pods: Vec<Blocker> = decided
            .pods
            .iter()
            .filter(|p| p.decision == Decision::Block)
            .filter_map(pod_blocker)
            .collect();
        let reason = operator_pods
            .first()
            .map_or(Reason::BlockedUnmanagedPod, |b| b.reason);
        node_plan.blockers.push(blocker(
            reason,
            format!(
                "not started while a pod on it needs an operator ({} in all): not cordoned, nothing evicted; admitted \
                 like any other node once they are cleared",
                survey.need_operator
            ),
        ));
        node_plan.blockers.extend(operator_pods);
        // The other pods wait for nothing but the node's start: reported so, not as waits of their
        // own.
        node_plan.pods = decided
            .pods
            .iter()
            .cloned()
            .map(|mut pod| {
                if pod.decision == Decision::Wait && pod.reason != Some(Reason::WaitingForSlot) {
                    pod.reason = Some(Reason::WaitingForSlot);
                    pod.message =
                        format!("its node is not started yet; then: {}", pod.message).into();
                }
                pod
            })
            .collect();
        out.report(node_plan);
    }

    /// Reports a node this policy deleted that has not registered again: it holds a slot.
    pub(super) fn report_missing(&self, record: &DeletedNodeRecord, out: &mut Output) {
        let (blockers, overdue_at) = deleted::missing(record, self.spec(), self.now);
        out.wake = earliest(out.wake, overdue_at);
        out.report(NodePlan {
            node: record.name.clone(),
            policy: self.policy.name.clone(),
            phase: NodePhase::KamikazeSent,
            since: Some(record.deleted_at),
            pods_left: 0,
            executor_id: record
                .executor_id
                .as_deref()
                .map(|id| k8sm_api::text::bounded(id, k8sm_api::MAX_EXECUTOR_ID).into_owned()),
            ready: false,
            blockers,
            admission_position: None,
            operator_pods: 0,
            pods: Arc::default(),
        });
    }

    /// Sends kamikaze to a drained node if nothing stands in the way; returns the node's phase
    /// afterwards.
    fn kamikaze(
        &self,
        node: &NodeView,
        blockers: &mut Vec<Blocker>,
        out: &mut Output,
    ) -> NodePhase {
        let spec = self.spec();
        let mechanism = spec.kamikaze.mechanism;
        let url = match mechanism {
            KamikazeMechanism::Http => {
                match spec
                    .kamikaze
                    .url_for(&node.name, node.internal_ip.as_deref())
                {
                    Ok(url) => Some(url),
                    Err(error) => {
                        let reason = match error {
                            KamikazeUrlError::NoTemplate
                            | KamikazeUrlError::Template(_)
                            | KamikazeUrlError::InsecureHttp => Reason::InvalidPolicy,
                            KamikazeUrlError::AddressMissing => Reason::NodeAddressMissing,
                            KamikazeUrlError::AddressNotIp(_)
                            | KamikazeUrlError::AddressNotUnicast(..) => Reason::NodeAddressInvalid,
                        };
                        blockers.push(blocker(reason, error.to_string()));
                        return NodePhase::Drained;
                    }
                }
            }
            KamikazeMechanism::Annotation | KamikazeMechanism::DeleteNode => None,
        };
        if self.paused() {
            return NodePhase::Drained;
        }
        if !self.gate.open {
            blockers.push(blocker(
                Reason::OutsideWindow,
                format!("drained; its executor {}", self.gate.waits),
            ));
            return NodePhase::Drained;
        }
        let max_deleted = k8sm_api::MAX_DELETED_NODES;
        if mechanism == KamikazeMechanism::DeleteNode && out.records.len() >= max_deleted {
            // Each deleted node is remembered in the policy's status until it comes back: their
            // number is bounded so that the status is.
            let message = format!(
                "waits to be deleted: {} nodes k8sm deleted have not come back yet, and at most {max_deleted} are \
                 deleted at once",
                out.records.len()
            );
            blockers.push(blocker(Reason::WaitingForSlot, message));
            return NodePhase::Drained;
        }
        let how = match (&url, mechanism) {
            (Some(url), _) => format!("POST {url}"),
            (None, KamikazeMechanism::DeleteNode) => "deleting the Node".to_owned(),
            (None, _) => "kamikaze annotation".to_owned(),
        };
        let kind = ActionKind::Kamikaze {
            node: node.name.clone(),
            mechanism,
            url,
            executor_id: node.executor_id.clone(),
            at: self.now,
            target: spec.target_executor_id.clone(),
        };
        if mechanism == KamikazeMechanism::DeleteNode {
            out.records.push(DeletedNodeRecord {
                name: node.name.clone(),
                uid: node.uid.clone(),
                executor_id: node
                    .executor_id
                    .as_deref()
                    .map(|id| k8sm_api::text::recorded_id(id).into_owned()),
                deleted_at: self.now,
                target: spec.target_executor_id.clone(),
            });
        }
        let message = format!("drained: executor told to terminate ({how})");
        out.action(&self.policy.name, kind, Reason::KamikazeSent, message);
        NodePhase::KamikazeSent
    }
}

impl<'v> PolicyPass<'v, '_> {
    /// What the pods of a node that is not admitted would do if it were, acting on nothing: decided
    /// on `hypothetical`, a copy of `ledger` made for the first such node and shared by the
    /// next ones (a copy each would cost a large fleet's whole ledger per node).
    fn decide_unadmitted(
        &self,
        entry: &Entry<'v>,
        ledger: &Ledger,
        hypothetical: &mut Option<Ledger>,
    ) -> (drain::Survey<'v>, drain::Drain) {
        let ctx = self.context(entry, Some(Reason::WaitingForSlot));
        let survey = drain::survey(&ctx, self.index);
        let scratch = hypothetical.get_or_insert_with(|| ledger.clone());
        let decided = drain::decide(&survey, &ctx, self.index, scratch);
        (survey, decided)
    }
}
