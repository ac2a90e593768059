//! The entry point: `plan(view, now)`, one pass over every policy, selected node and pod.
//!
//! Policies are planned one after the other, by name, against one ledger of workload health and budget allowances,
//! so that evictions planned for one policy count for the next. Paused policies, and policies that do not carry
//! their finalizer yet, come last, each against a copy of the ledger: what they would do is reported, and changes
//! nothing for the others. A policy being deleted plans nothing: it only waits until every node it held is handed
//! back. Nodes that no live policy selects and that carry k8sm's state are handed back (DESIGN.md §5.2).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8sm_api::{
    ExecutorUpgradePolicySpec, KamikazeMechanism, NodeCounts, NodePhase, URL_PLACEHOLDER_NODE_IP,
};

use crate::{
    ClusterView, DeletedNodeRecord, NodeView, PolicyView, Reason,
    admission::{self, Holding},
    conditions::{self, condition},
    deleted,
    drain::{self, NodeContext, Survey, earliest},
    health::Ledger,
    index::Index,
    nodes::{self, Assessment, Stage},
    output::{
        Action, ActionKind, Blocker, Decision, EtaInputs, NodePlan, Plan, PodPlan, PodRef,
        PolicyPlan,
    },
    progress,
    selector::{self, Selector},
};

/// Plans one pass: what to do now, and where every selected node stands. Pure: the same view and `now` always give
/// the same plan, whatever the order of the view's vectors.
pub fn plan(view: &ClusterView, now: DateTime<Utc>) -> Plan {
    let index = Index::new(view);
    let mut policies: Vec<&PolicyView> = view.policies.iter().collect();
    policies.sort_by(|a, b| a.name.cmp(&b.name));

    let selections: Vec<Result<Vec<&NodeView>, String>> = policies
        .iter()
        .map(|p| {
            Selector::new(&p.spec.node_selector)
                .map(|s| {
                    index
                        .nodes
                        .values()
                        .copied()
                        .filter(|n| s.matches(&n.labels))
                        .collect()
                })
                .map_err(|e| e.to_string())
        })
        .collect();
    // Selection first: a node claimed by two live policies is acted on by neither. A policy being deleted claims
    // nothing: it hands its nodes back.
    let mut claims: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (policy, selection) in policies.iter().zip(&selections) {
        if policy.deleting {
            continue;
        }
        for node in selection.iter().flatten() {
            claims.entry(&node.name).or_default().push(&policy.name);
        }
    }

    let mut plan = Plan::default();
    let mut ledger = Ledger::new(&index);
    // Policies that act first, in name order; then the ones that only report, on copies of the ledger.
    let acts = |p: &PolicyView| !p.spec.paused && p.has_finalizer;
    let mut order: Vec<usize> = (0..policies.len())
        .filter(|&i| !policies[i].deleting)
        .collect();
    order.sort_by_key(|&i| !acts(policies[i]));
    for i in order {
        let policy = policies[i];
        let mut scratch;
        let ledger = if acts(policy) {
            &mut ledger
        } else {
            scratch = ledger.clone();
            &mut scratch
        };
        let pass = PolicyPass {
            policy,
            index: &index,
            claims: &claims,
            now,
        };
        let (mut out, policy_plan) = pass.run(&selections[i], ledger);
        if !policy.has_finalizer {
            // Nothing is done on behalf of a policy that could be deleted without handing its nodes back.
            out.actions.clear();
            out.action(
                &policy.name,
                ActionKind::AddFinalizer {
                    policy: policy.name.clone(),
                },
                Reason::Finalizer,
                "finalizer added: deleting this policy first hands its nodes back".to_owned(),
            );
        }
        plan.actions.extend(out.actions);
        plan.nodes.extend(out.nodes);
        plan.next_wake = earliest(plan.next_wake, out.wake);
        plan.policies.push(policy_plan);
    }
    hand_back(&policies, &selections, &claims, &index, &mut plan);

    plan.actions
        .sort_by(|a, b| action_order(a).cmp(&action_order(b)));
    plan.nodes
        .sort_by(|a, b| (&a.policy, &a.node).cmp(&(&b.policy, &b.node)));
    plan.policies.sort_by(|a, b| a.policy.cmp(&b.policy));
    plan
}

/// Hands back every node that no live policy selects and that carries k8sm's state, and lets a policy being deleted
/// go once none of its nodes needs it any more.
fn hand_back(
    policies: &[&PolicyView],
    selections: &[Result<Vec<&NodeView>, String>],
    claims: &BTreeMap<&str, Vec<&str>>,
    index: &Index,
    plan: &mut Plan,
) {
    let deleting: Vec<(&PolicyView, &[&NodeView])> = policies
        .iter()
        .zip(selections)
        .filter(|(p, _)| p.deleting)
        .map(|(p, s)| (*p, s.as_deref().unwrap_or_default()))
        .collect();
    for node in index.nodes.values() {
        if claims.contains_key(node.name.as_str()) {
            continue;
        }
        let Some(kind) = nodes::release(node) else {
            continue;
        };
        let by = deleting
            .iter()
            .find(|(_, selected)| selected.iter().any(|n| n.name == node.name))
            .map(|(p, _)| p.name.as_str());
        let why = match by {
            Some(policy) => format!("policy {policy} is being deleted"),
            None => "no policy selects the node any more".to_owned(),
        };
        plan.actions.push(Action {
            policy: by.unwrap_or_default().to_owned(),
            reason: Reason::Released,
            message: format!(
                "{why}: k8sm removed what it had put on the node (its cordon, mark, taint and kamikaze keys); the \
                 node is left as it was otherwise"
            ),
            kind,
        });
    }
    for (policy, selected) in deleting {
        let pending: Vec<String> = selected
            .iter()
            .filter(|n| !claims.contains_key(n.name.as_str()) && nodes::release(n).is_some())
            .map(|n| n.name.clone())
            .collect();
        if pending.is_empty() && policy.has_finalizer {
            plan.actions.push(Action {
                policy: policy.name.clone(),
                reason: Reason::Finalizer,
                message: "every node handed back: finalizer removed".to_owned(),
                kind: ActionKind::RemoveFinalizer {
                    policy: policy.name.clone(),
                },
            });
        }
        let message = format!(
            "being deleted: handing {} node(s) back ({})",
            pending.len(),
            conditions::name_list(&pending)
        );
        plan.policies.push(PolicyPlan {
            policy: policy.name.clone(),
            generation: policy.generation,
            counts: NodeCounts::default(),
            slots: 0,
            slots_in_use: 0,
            paused: policy.spec.paused,
            conditions: vec![condition(Reason::Released, message, pending)],
            eta: EtaInputs::default(),
            deleting: true,
            deleted_nodes: Vec::new(),
        });
    }
}

/// One policy's part of the pass.
struct PolicyPass<'v, 'i> {
    policy: &'v PolicyView,
    index: &'i Index<'v>,
    claims: &'i BTreeMap<&'v str, Vec<&'v str>>,
    now: DateTime<Utc>,
}

/// A selected node on its way through the pass.
struct Entry<'v> {
    node: &'v NodeView,
    assessment: Assessment,
    survey: Option<Survey<'v>>,
}

impl<'v> PolicyPass<'v, '_> {
    fn spec(&self) -> &'v ExecutorUpgradePolicySpec {
        &self.policy.spec
    }

    fn run(
        &self,
        selection: &Result<Vec<&'v NodeView>, String>,
        ledger: &mut Ledger,
    ) -> (Output, PolicyPlan) {
        let spec = self.spec();
        let mut conditions = conditions::spec_conditions(spec);
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
                    selector::describe(&spec.node_selector)
                ),
            };
            conditions.push(condition(Reason::NoNodesSelected, message, vec![]));
        }
        let (own, shared): (Vec<&NodeView>, Vec<&NodeView>) = selected.iter().partition(|n| {
            self.claims
                .get(n.name.as_str())
                .is_some_and(|c| c.len() == 1)
        });
        conditions.extend(conditions::conflicts(
            &self.policy.name,
            &shared,
            self.claims,
        ));

        let mut out = Output::default();
        // Nodes this policy deleted as their kamikaze: those that have not registered again still hold a slot.
        let records: BTreeMap<&str, &DeletedNodeRecord> = self
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
        let slots = spec.max_concurrent_nodes.resolve(own.len() + missing.len());
        for record in &missing {
            self.report_missing(record, &mut out);
        }

        let mut holders: Vec<(Holding, Entry)> = Vec::new();
        let mut blocked: Vec<Entry> = Vec::new();
        let mut candidates: Vec<Entry> = Vec::new();
        for node in own {
            let assessment = match records.get(node.name.as_str()) {
                Some(record) => {
                    let (assessment, keep) = deleted::assess(node, record, spec, self.now);
                    if keep {
                        out.records.push((*record).clone());
                    }
                    assessment
                }
                None => nodes::assess(node, spec, self.now),
            };
            for (kind, reason, message) in &assessment.actions {
                out.action(&self.policy.name, kind.clone(), *reason, message.clone());
            }
            out.wake = earliest(out.wake, assessment.overdue_at);
            let mut entry = Entry {
                node,
                assessment,
                survey: None,
            };
            match entry.assessment.stage {
                Stage::Settled(phase) | Stage::OptedOut(phase) => {
                    out.report(self.node_plan(&entry, phase))
                }
                Stage::KamikazeSent | Stage::CameBackWrong => {
                    holders.push((Holding::KamikazeSent, entry))
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
                        blocked.push(entry);
                    } else {
                        holders.push((holding, entry));
                    }
                }
                Stage::Candidate => {
                    entry.survey = Some(drain::tally(&self.context(&entry, None), self.index));
                    candidates.push(entry);
                }
            }
        }

        holders.sort_by(|(ha, a), (hb, b)| {
            let since = |e: &Entry| {
                e.assessment
                    .draining_since
                    .or(e.assessment.incompatible_since)
            };
            admission::holder_key(*ha, since(a), &a.node.name).cmp(&admission::holder_key(
                *hb,
                since(b),
                &b.node.name,
            ))
        });
        let for_holders = slots.saturating_sub(missing.len());
        let (acting, waiting) = admission::split(holders, for_holders);
        candidates.sort_by(|a, b| candidate_key(a).cmp(&candidate_key(b)));
        let free = if spec.paused {
            0
        } else {
            for_holders - acting.len()
        };
        let (admitted, queued) = admission::split(candidates, free);
        let in_use = missing.len() + acting.len() + admitted.len();

        for (holding, entry) in acting {
            self.act(holding, entry, ledger, &mut out);
        }
        for entry in admitted {
            self.admit(entry, slots, ledger, &mut out);
        }
        for (_, entry) in waiting {
            let mut node_plan = self.node_plan(&entry, self.holding_phase(&entry));
            node_plan.blockers.push(blocker(
                Reason::WaitingForSlot,
                format!(
                    "waits for one of {slots} drain slots (maxConcurrentNodes {})",
                    spec.max_concurrent_nodes
                ),
            ));
            out.report(node_plan);
        }
        for entry in blocked {
            self.drain(entry, NodePhase::Blocked, ledger, &mut out);
        }
        for (position, entry) in queued.into_iter().enumerate() {
            let position = u32::try_from(position + 1).unwrap_or(u32::MAX);
            self.report_queued(entry, position, ledger, &mut out);
        }

        conditions.extend(conditions::node_conditions(&out.nodes));
        if spec.paused {
            conditions.push(condition(
                Reason::Paused,
                "paused: no eviction, deletion, cordon or kamikaze".into(),
                vec![],
            ));
        }
        conditions.sort_by(|a, b| (a.reason, &a.message).cmp(&(b.reason, &b.message)));
        let mut counts = NodeCounts::default();
        for node in &out.nodes {
            counts.add(node.phase);
        }
        let pods_left = out
            .nodes
            .iter()
            .filter(|n| {
                matches!(
                    n.phase,
                    NodePhase::Draining | NodePhase::Drained | NodePhase::Blocked
                )
            })
            .map(|n| n.pods_left)
            .sum();
        let slots = u32::try_from(slots).unwrap_or(u32::MAX);
        let mut deleted_nodes = std::mem::take(&mut out.records);
        deleted_nodes.sort();
        deleted_nodes.dedup_by(|a, b| a.name == b.name);
        let policy_plan = PolicyPlan {
            policy: self.policy.name.clone(),
            generation: self.policy.generation,
            counts,
            slots,
            slots_in_use: u32::try_from(in_use).unwrap_or(u32::MAX),
            paused: spec.paused,
            conditions,
            eta: EtaInputs {
                nodes_remaining: counts.total - counts.compatible,
                nodes_blocked: u32::try_from(
                    out.nodes.iter().filter(|n| waits_for_operator(n)).count(),
                )
                .unwrap_or(u32::MAX),
                slots,
                pods_left,
            },
            deleting: false,
            deleted_nodes,
        };
        (out, policy_plan)
    }

    /// A slot holder that acts: KamikazeSent waits for the executor; Drained gets kamikaze; Draining drains.
    fn act(&self, holding: Holding, entry: Entry, ledger: &mut Ledger, out: &mut Output) {
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
                    && !spec.paused
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

    /// Admits a candidate into a free slot, then drains it in the same pass (the admission executes first).
    fn admit(&self, entry: Entry, slots: usize, ledger: &mut Ledger, out: &mut Output) {
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
        entry.assessment.draining_since = Some(self.now);
        entry.assessment.stalled = None;
        // Candidates were only tallied; the node's pods are decided now.
        entry.survey = Some(drain::survey(&self.context(&entry, None), self.index));
        // Just recorded by the admission: its progress deadline starts now.
        self.drain_recorded(entry, NodePhase::Draining, ledger, out);
    }

    /// Decides the pods of an admitted node and reports it; a Drained node that acts gets kamikaze, and a Draining
    /// one records its progress or, without any for `nodeProgressDeadline`, gives up its slot.
    fn drain(&self, entry: Entry, phase: NodePhase, ledger: &mut Ledger, out: &mut Output) {
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
        let hold = spec.paused.then_some(Reason::Paused);
        let ctx = self.context(&entry, hold);
        let Some(survey) = &entry.survey else {
            unreachable!("admitted nodes are surveyed")
        };
        let decided = drain::decide(survey, &ctx, self.index, ledger);
        let moving = !decided.actions.is_empty();
        for (kind, reason, message) in decided.actions {
            out.action(&self.policy.name, kind, reason, message);
        }
        out.wake = earliest(out.wake, decided.wake);
        let mut node_plan = self.node_plan(&entry, phase);
        if spec.paused {
            node_plan
                .blockers
                .push(blocker(Reason::Paused, "paused: nothing moves".into()));
        }
        if phase == NodePhase::Drained {
            node_plan.phase = self.kamikaze(entry.node, &mut node_plan.blockers, out);
            if node_plan.phase == NodePhase::KamikazeSent {
                node_plan.since = Some(self.now);
            }
        }
        let pod_blockers: Vec<Blocker> = decided.pods.iter().filter_map(pod_blocker).collect();
        if phase == NodePhase::Draining && check_progress {
            let record = progress::Record::parse(entry.node.drain_progress.as_deref());
            let deadline = spec.node_progress_deadline.as_duration();
            match progress::judge(record, survey.left, deadline, spec.paused, self.now) {
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
             again after the nodes that never stalled{on}",
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

    /// Reports a candidate that waits for a slot. One that stalled before is Blocked, with what its pods wait on
    /// (decided on a copy of the ledger, acting on nothing).
    fn report_queued(&self, entry: Entry, position: u32, ledger: &Ledger, out: &mut Output) {
        let spec = self.spec();
        let Some(stalled) = entry.assessment.stalled else {
            let mut node_plan = self.node_plan(&entry, NodePhase::Incompatible);
            node_plan.admission_position = Some(position);
            if spec.paused {
                node_plan.blockers.push(blocker(
                    Reason::Paused,
                    "paused: no node is admitted".into(),
                ));
            }
            out.report(node_plan);
            return;
        };
        let ctx = self.context(&entry, Some(Reason::WaitingForSlot));
        let survey = drain::survey(&ctx, self.index);
        let decided = drain::decide(&survey, &ctx, self.index, &mut ledger.clone());
        let mut node_plan = self.node_plan(&entry, NodePhase::Blocked);
        node_plan.since = stalled.or(node_plan.since);
        node_plan.pods_left = survey.left;
        node_plan.operator_pods = survey.need_operator;
        node_plan.admission_position = Some(position);
        let when = stalled.map_or_else(
            || "earlier".to_owned(),
            |t| format!("at {}", t.to_rfc3339()),
        );
        node_plan.blockers.push(blocker(
            Reason::Stalled,
            format!(
                "stalled {when}: no pod left it for nodeProgressDeadline {}; admitted again when a slot is free \
                 (place {position} in the queue)",
                spec.node_progress_deadline
            ),
        ));
        node_plan
            .blockers
            .extend(decided.pods.iter().filter_map(pod_blocker));
        node_plan.pods = decided.pods;
        out.report(node_plan);
    }

    /// Reports a node this policy deleted that has not registered again: it holds a slot.
    fn report_missing(&self, record: &DeletedNodeRecord, out: &mut Output) {
        let (blockers, overdue_at) = deleted::missing(record, self.spec(), self.now);
        out.wake = earliest(out.wake, overdue_at);
        out.report(NodePlan {
            node: record.name.clone(),
            policy: self.policy.name.clone(),
            phase: NodePhase::KamikazeSent,
            since: Some(record.deleted_at),
            pods_left: 0,
            executor_id: record.executor_id.clone(),
            ready: false,
            blockers,
            admission_position: None,
            operator_pods: 0,
            pods: Vec::new(),
        });
    }

    /// Sends kamikaze to a drained node if nothing stands in the way; returns the node's phase afterwards.
    fn kamikaze(
        &self,
        node: &NodeView,
        blockers: &mut Vec<Blocker>,
        out: &mut Output,
    ) -> NodePhase {
        let spec = self.spec();
        let mechanism = spec.kamikaze.mechanism;
        let url = match (mechanism, spec.kamikaze.url_template.as_deref()) {
            (KamikazeMechanism::Http, None) => {
                let message =
                    "kamikaze mechanism Http without kamikaze.urlTemplate: set one".to_owned();
                blockers.push(blocker(Reason::InvalidPolicy, message));
                return NodePhase::Drained;
            }
            (KamikazeMechanism::Http, Some(template))
                if template.contains(URL_PLACEHOLDER_NODE_IP) && node.internal_ip.is_none() =>
            {
                let message = "the kamikaze URL needs the node's InternalIP address, and the node reports none";
                blockers.push(blocker(Reason::NodeAddressMissing, message.into()));
                return NodePhase::Drained;
            }
            (KamikazeMechanism::Http, Some(_)) => spec
                .kamikaze
                .url_for(&node.name, node.internal_ip.as_deref().unwrap_or_default()),
            (KamikazeMechanism::Annotation | KamikazeMechanism::DeleteNode, _) => None,
        };
        if spec.paused {
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
        };
        if mechanism == KamikazeMechanism::DeleteNode {
            out.records.push(DeletedNodeRecord {
                name: node.name.clone(),
                uid: node.uid.clone(),
                executor_id: node.executor_id.clone(),
                deleted_at: self.now,
            });
        }
        let message = format!("drained: executor told to terminate ({how})");
        out.action(&self.policy.name, kind, Reason::KamikazeSent, message);
        NodePhase::KamikazeSent
    }

    fn context(&self, entry: &Entry<'v>, hold: Option<Reason>) -> NodeContext<'v> {
        let spec = self.spec();
        NodeContext {
            node: entry.node,
            spec,
            threshold: spec.owner_health_threshold.clamp(1, 100),
            incompatible_since: entry.assessment.incompatible_since,
            hold,
            now: self.now,
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
            executor_id: entry.node.executor_id.clone(),
            ready: entry.node.ready,
            blockers: a.blockers.clone(),
            admission_position: None,
            operator_pods: entry.survey.as_ref().map_or(0, |s| s.need_operator),
            pods: Vec::new(),
        }
    }
}

/// The order in which a pass's actions execute: by rank, then policy, node and pod.
fn action_order(a: &Action) -> (u8, Option<&str>, Option<&str>, Option<&PodRef>) {
    (a.kind.rank(), a.kind.policy(), a.kind.node(), a.kind.pod())
}

fn candidate_key<'a>(e: &'a Entry) -> admission::CandidateKey<'a> {
    let (need_operator, left) = e
        .survey
        .as_ref()
        .map_or((0, 0), |s| (s.need_operator, s.left));
    admission::candidate_key(
        e.assessment.stalled,
        need_operator,
        left,
        e.assessment.incompatible_since,
        &e.node.name,
    )
}

/// What one policy's pass produces.
#[derive(Default)]
struct Output {
    actions: Vec<Action>,
    nodes: Vec<NodePlan>,
    wake: Option<DateTime<Utc>>,
    /// Deleted-node records the policy keeps, and those added by this pass's DeleteNode kamikaze.
    records: Vec<DeletedNodeRecord>,
}

impl Output {
    fn action(&mut self, policy: &str, kind: ActionKind, reason: Reason, message: String) {
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

fn blocker(reason: Reason, message: String) -> Blocker {
    Blocker {
        reason,
        message,
        pod: None,
    }
}

/// Whether a node is Blocked, or waits on something only an operator resolves (a restart overdue): while any does,
/// no ETA is honest.
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
