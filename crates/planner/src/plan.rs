//! The entry point: `plan(view, now)`, one pass over every policy, selected node and pod.
//!
//! Policies are planned one after the other, by name, against one ledger of owner health and budget allowances, so
//! that evictions planned for one policy count for the next. Paused policies come last, each against a copy of the
//! ledger: what they would do is reported, and changes nothing for the others.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8sm_api::{
    ExecutorUpgradePolicySpec, KamikazeMechanism, NodeCounts, NodePhase, URL_PLACEHOLDER_NODE_IP,
};

use crate::{
    ClusterView, NodeView, PolicyView, Reason,
    admission::{self, Holding},
    conditions::{self, condition},
    drain::{self, NodeContext, Survey, earliest},
    health::Ledger,
    index::Index,
    nodes::{self, Assessment, Stage},
    output::{
        Action, ActionKind, Blocker, Decision, EtaInputs, NodePlan, Plan, PodPlan, PodRef,
        PolicyPlan,
    },
    selector::{self, Selector},
};

/// Plans one pass: what to do now, and where every selected node stands. Pure: the same view and `now` always give
/// the same plan, whatever the order of the view's vectors.
pub fn plan(view: &ClusterView, now: DateTime<Utc>) -> Plan {
    let index = Index::new(view);
    let mut policies: Vec<&PolicyView> = view.policies.iter().collect();
    policies.sort_by(|a, b| a.name.cmp(&b.name));

    // Selection first: a node claimed by two policies is acted on by neither.
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
    let mut claims: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (policy, selection) in policies.iter().zip(&selections) {
        for node in selection.iter().flatten() {
            claims.entry(&node.name).or_default().push(&policy.name);
        }
    }

    let mut plan = Plan::default();
    let mut ledger = Ledger::new(&index);
    // Policies that act first, in name order; then the paused ones, on copies of the ledger.
    let mut order: Vec<usize> = (0..policies.len()).collect();
    order.sort_by_key(|&i| policies[i].spec.paused);
    for i in order {
        let policy = policies[i];
        let mut scratch;
        let ledger = if policy.spec.paused {
            scratch = ledger.clone();
            &mut scratch
        } else {
            &mut ledger
        };
        let pass = PolicyPass {
            policy,
            index: &index,
            claims: &claims,
            now,
        };
        pass.run(&selections[i], ledger, &mut plan);
    }

    plan.actions
        .sort_by(|a, b| action_order(a).cmp(&action_order(b)));
    plan.nodes
        .sort_by(|a, b| (&a.policy, &a.node).cmp(&(&b.policy, &b.node)));
    plan.policies.sort_by(|a, b| a.policy.cmp(&b.policy));
    plan
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
        plan: &mut Plan,
    ) {
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

        let slots = spec.max_concurrent_nodes.resolve(own.len());
        let mut out = Output::default();
        let mut holders: Vec<(Holding, Entry)> = Vec::new();
        let mut blocked: Vec<Entry> = Vec::new();
        let mut candidates: Vec<Entry> = Vec::new();
        for node in own {
            let assessment = nodes::assess(node, spec, self.now);
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
                Stage::KamikazeSent => holders.push((Holding::KamikazeSent, entry)),
                Stage::Admitted => {
                    let survey = drain::survey(&self.context(&entry), self.index);
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
                    entry.survey = Some(drain::tally(&self.context(&entry), self.index));
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
        let (acting, waiting) = admission::split(holders, slots);
        candidates.sort_by(|a, b| candidate_key(a).cmp(&candidate_key(b)));
        let free = if spec.paused { 0 } else { slots - acting.len() };
        let (admitted, queued) = admission::split(candidates, free);
        let in_use = acting.len() + admitted.len();

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
        for entry in queued {
            let mut node_plan = self.node_plan(&entry, NodePhase::Incompatible);
            if spec.paused {
                node_plan.blockers.push(blocker(
                    Reason::Paused,
                    "paused: no node is admitted".into(),
                ));
            }
            out.report(node_plan);
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
        plan.policies.push(PolicyPlan {
            policy: self.policy.name.clone(),
            generation: self.policy.generation,
            counts,
            slots,
            slots_in_use: u32::try_from(in_use).unwrap_or(u32::MAX),
            paused: spec.paused,
            conditions,
            eta: EtaInputs {
                nodes_remaining: counts.total - counts.compatible,
                nodes_blocked: counts.blocked,
                slots,
                pods_left,
            },
        });
        plan.actions.extend(out.actions);
        plan.nodes.extend(out.nodes);
        plan.next_wake = earliest(plan.next_wake, out.wake);
    }

    /// A slot holder that acts: KamikazeSent waits for the executor; Drained gets kamikaze; Draining drains.
    fn act(&self, holding: Holding, entry: Entry, ledger: &mut Ledger, out: &mut Output) {
        match holding {
            Holding::KamikazeSent => out.report(self.node_plan(&entry, NodePhase::KamikazeSent)),
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
            cordon,
        };
        let message =
            format!("admitted into one of {slots} drain slots, {left} pods to move; {how}");
        out.action(&self.policy.name, kind, reason, message);
        let mut entry = entry;
        entry.assessment.draining_since = Some(self.now);
        // Candidates were only tallied; the node's pods are decided now.
        entry.survey = Some(drain::survey(&self.context(&entry), self.index));
        self.drain(entry, NodePhase::Draining, ledger, out);
    }

    /// Decides the pods of an admitted node and reports it; a Drained node that acts gets kamikaze.
    fn drain(&self, entry: Entry, phase: NodePhase, ledger: &mut Ledger, out: &mut Output) {
        let ctx = self.context(&entry);
        let Some(survey) = &entry.survey else {
            unreachable!("admitted nodes are surveyed")
        };
        let decided = drain::decide(survey, &ctx, self.index, ledger);
        for (kind, reason, message) in decided.actions {
            out.action(&self.policy.name, kind, reason, message);
        }
        out.wake = earliest(out.wake, decided.wake);
        let mut node_plan = self.node_plan(&entry, phase);
        if self.spec().paused {
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
        node_plan
            .blockers
            .extend(decided.pods.iter().filter_map(pod_blocker));
        node_plan.pods = decided.pods;
        out.report(node_plan);
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
        let message = format!("drained: executor told to terminate ({how})");
        out.action(&self.policy.name, kind, Reason::KamikazeSent, message);
        NodePhase::KamikazeSent
    }

    fn context(&self, entry: &Entry<'v>) -> NodeContext<'v> {
        let spec = self.spec();
        NodeContext {
            node: entry.node,
            spec,
            threshold: spec.owner_health_threshold.clamp(1, 100),
            incompatible_since: entry.assessment.incompatible_since,
            paused: spec.paused,
            now: self.now,
        }
    }

    fn holding_phase(&self, entry: &Entry) -> NodePhase {
        match (&entry.assessment.stage, &entry.survey) {
            (Stage::KamikazeSent, _) => NodePhase::KamikazeSent,
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
            pods: Vec::new(),
        }
    }
}

/// The order in which a pass's actions execute: by rank, then node, then pod.
fn action_order(a: &Action) -> (u8, Option<&str>, Option<&PodRef>) {
    (a.kind.rank(), a.kind.node(), a.kind.pod())
}

fn candidate_key<'a>(e: &'a Entry) -> (bool, u32, bool, Option<DateTime<Utc>>, &'a str) {
    let (need_operator, left) = e
        .survey
        .as_ref()
        .map_or((0, 0), |s| (s.need_operator, s.left));
    admission::candidate_key(
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
