//! The decisions of draining nodes, kept from pass to pass (docs/design.md §8, the planner): a node
//! whose pods were decided with no action is decided again only when something its decisions read
//! changed. Through most of a large fleet's upgrade, nearly every pod of the draining nodes waits,
//! for the same reason and with the same message as in the last pass.
//!
//! What the decisions read, and how each is known unchanged:
//! - the policy's spec, compared once per pass;
//! - the node's mark time, cordon, and whether a write of this pass to it comes first;
//! - its pods, each the same version (the `Arc` held), with the same class (its owner the same
//!   version: the planner's `ControllerClasses` holds the last pass's owners until the next
//!   pass's index is built, so that no new owner takes an old one's address), readiness,
//!   budgets' answer and workload slot, and as many unanswered evictions;
//! - the ledger's entries, the workloads' counts and the budgets, each read again and compared
//!   (`rules/reads.rs`), the budgets' names in the same order as in the last pass;
//! - the clock: every comparison with it notes when it turns (`NodeContext::reached`), and the
//!   decisions are kept until the earliest of those.

use std::cell::RefCell;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use k8sm_api::ExecutorUpgradePolicySpec;

use crate::{
    ControllerRef, PodView,
    index::{Index, OnNode},
    model::collections::FastMap,
    model::output::PodPlan,
    objects::classify::{Class, Ignored, Unmanaged},
    objects::pod_facts::Covered,
    objects::workload::Workload,
    rules::drain::{Drain, Survey},
    rules::health::Ledger,
    rules::node_context::NodeContext,
    rules::reads::{self, Read, Reads},
};

/// Every policy's kept decisions.
#[derive(Default)]
pub(crate) struct KeptDecisions {
    policies: FastMap<String, RefCell<KeptPolicy>>,
    /// The namespace and name of each of the index's budgets, in order: reads name budgets by
    /// position.
    budgets: Vec<(String, String)>,
    /// Numbers the passes.
    pass: u64,
}

/// One policy's kept decisions, by node name.
#[derive(Default)]
pub(crate) struct KeptPolicy {
    spec: Option<ExecutorUpgradePolicySpec>,
    nodes: FastMap<String, KeptNode>,
    pass: u64,
}

struct KeptNode {
    inputs: NodeInputs,
    pods: Box<[KeptPod]>,
    reads: Box<[Read]>,
    /// When a comparison with the clock made deciding turns.
    turns: Option<DateTime<Utc>>,
    decided: Arc<[PodPlan]>,
    wake: Option<DateTime<Utc>>,
    moving: bool,
    waiting_for_call: usize,
    /// The last pass that decided or kept it.
    pass: u64,
}

/// What the decisions read of the node and of this pass's writes to it.
#[derive(PartialEq)]
struct NodeInputs {
    incompatible_since: Option<DateTime<Utc>>,
    unschedulable: bool,
    written: bool,
    unanswered: u32,
}

impl NodeInputs {
    fn of(survey: &Survey, ctx: &NodeContext) -> Self {
        Self {
            incompatible_since: ctx.incompatible_since,
            unschedulable: ctx.node.unschedulable,
            written: ctx.written,
            unanswered: survey.unanswered,
        }
    }
}

/// A pod as it was decided: what the survey read of it.
struct KeptPod {
    pod: Arc<PodView>,
    class: ClassKey,
    ready: bool,
    pinnable: bool,
    covered: Covered,
    counts_for: u32,
}

/// A [`Class`] without its references: an owner by its address, a controller reference by value.
#[derive(PartialEq)]
enum ClassKey {
    Ignored(Ignored),
    Finished,
    OptedOut(&'static str),
    Owned(WorkloadKey),
    Other(WorkloadKey),
    Job(usize),
    NoController,
    OwnerGone(Box<ControllerRef>),
    OwnerDeleting(Box<ControllerRef>),
}

/// Controller references boxed: few pods have one here, and every kept pod has a key.
#[derive(PartialEq)]
enum WorkloadKey {
    Owner(usize),
    Other(Box<ControllerRef>),
}

impl ClassKey {
    fn of(class: Class) -> Self {
        let workload = |w: Workload| match w {
            Workload::Owner(o) => WorkloadKey::Owner(std::ptr::from_ref(o).addr()),
            Workload::Other(c) => WorkloadKey::Other(Box::new(c.clone())),
        };
        match class {
            Class::Ignored(why) => Self::Ignored(why),
            Class::Finished => Self::Finished,
            Class::OptedOut(key) => Self::OptedOut(key),
            Class::Owned(w) => Self::Owned(workload(w)),
            Class::Other(w) => Self::Other(workload(w)),
            Class::Job(o) => Self::Job(std::ptr::from_ref(o).addr()),
            Class::Unmanaged(Unmanaged::NoController) => Self::NoController,
            Class::Unmanaged(Unmanaged::OwnerGone(c)) => Self::OwnerGone(Box::new(c.clone())),
            Class::Unmanaged(Unmanaged::OwnerDeleting(c)) => {
                Self::OwnerDeleting(Box::new(c.clone()))
            }
        }
    }

    /// Whether `class` is this one: compared without allocating.
    fn is(&self, class: Class) -> bool {
        let workload = |key: &WorkloadKey, w: Workload| match (key, w) {
            (WorkloadKey::Owner(at), Workload::Owner(o)) => *at == std::ptr::from_ref(o).addr(),
            (WorkloadKey::Other(kept), Workload::Other(c)) => **kept == *c,
            _ => false,
        };
        match (self, class) {
            (Self::Ignored(a), Class::Ignored(b)) => *a == b,
            (Self::Finished, Class::Finished) => true,
            (Self::OptedOut(a), Class::OptedOut(b)) => *a == b,
            (Self::Owned(key), Class::Owned(w)) | (Self::Other(key), Class::Other(w)) => {
                workload(key, w)
            }
            (Self::Job(at), Class::Job(o)) => *at == std::ptr::from_ref(o).addr(),
            (Self::NoController, Class::Unmanaged(Unmanaged::NoController)) => true,
            (Self::OwnerGone(a), Class::Unmanaged(Unmanaged::OwnerGone(b)))
            | (Self::OwnerDeleting(a), Class::Unmanaged(Unmanaged::OwnerDeleting(b))) => **a == *b,
            _ => false,
        }
    }
}

impl KeptPod {
    fn of(on: &OnNode) -> Self {
        Self {
            pod: Arc::clone(on.pod),
            class: ClassKey::of(on.class),
            ready: on.ready,
            pinnable: on.pinnable,
            covered: on.covered,
            counts_for: on.counts_for,
        }
    }

    fn is(&self, on: &OnNode) -> bool {
        Arc::ptr_eq(&self.pod, on.pod)
            && self.ready == on.ready
            && self.pinnable == on.pinnable
            && self.covered == on.covered
            && self.counts_for == on.counts_for
            && self.class.is(on.class)
    }
}

impl KeptDecisions {
    /// Starts a pass over `index`: a change of the budgets' names or order lets every decision
    /// go.
    pub(crate) fn begin(&mut self, index: &Index) {
        self.pass += 1;
        let same = self.budgets.len() == index.pdbs.len()
            && self
                .budgets
                .iter()
                .zip(&index.pdbs)
                .all(|((ns, name), p)| *ns == p.view.namespace && *name == p.view.name);
        if !same {
            self.policies.clear();
            self.budgets = index
                .pdbs
                .iter()
                .map(|p| (p.view.namespace.clone(), p.view.name.clone()))
                .collect();
        }
    }

    /// The kept decisions of `policy`, whose spec is `spec`: none if the spec changed.
    pub(crate) fn policy(
        &mut self,
        name: &str,
        spec: &ExecutorUpgradePolicySpec,
    ) -> &RefCell<KeptPolicy> {
        let pass = self.pass;
        let entry = self.policies.entry(name.to_owned()).or_default();
        let kept = entry.get_mut();
        if kept.spec.as_ref() != Some(spec) {
            kept.nodes.clear();
            kept.spec = Some(spec.clone());
        }
        kept.pass = pass;
        entry
    }

    /// Ends the pass: what was not decided or kept in it goes (its owners may be let go).
    pub(crate) fn finish(&mut self) {
        let pass = self.pass;
        self.policies.retain(|_, kept| {
            let kept = kept.get_mut();
            kept.nodes.retain(|_, node| node.pass == pass);
            kept.pass == pass && !kept.nodes.is_empty()
        });
    }
}

impl KeptPolicy {
    /// The decisions kept for the node of `ctx`, if everything they read is what it was.
    pub(crate) fn replay(
        &mut self,
        survey: &Survey,
        ctx: &NodeContext,
        index: &Index,
        ledger: &mut Ledger,
    ) -> Option<Drain> {
        let pass = self.pass;
        let kept = self.nodes.get_mut(&*ctx.node.name)?;
        let holds = kept.turns.is_none_or(|turns| ctx.now < turns)
            && kept.inputs == NodeInputs::of(survey, ctx)
            && kept.pods.len() == survey.pods.len()
            && kept.pods.iter().zip(&survey.pods).all(|(k, on)| k.is(on))
            && reads::hold(&kept.reads, &survey.pods, ctx, index, ledger);
        if !holds {
            self.nodes.remove(&*ctx.node.name);
            return None;
        }
        kept.pass = pass;
        Some(Drain {
            pods: Arc::clone(&kept.decided),
            actions: Vec::new(),
            wake: kept.wake,
            moving: kept.moving,
            asked: 0,
            broken_taken: Default::default(),
            waiting_for_call: kept.waiting_for_call,
            reads: Reads::default(),
        })
    }

    /// Keeps `decided`, the decisions of the node of `ctx` just made, if they act on nothing (so
    /// that they recorded nothing in the ledger) and every read was recorded.
    pub(crate) fn keep(&mut self, survey: &Survey, ctx: &NodeContext, decided: &Drain) {
        if !decided.actions.is_empty() || !decided.reads.tracked() {
            return;
        }
        let node = KeptNode {
            inputs: NodeInputs::of(survey, ctx),
            pods: survey.pods.iter().map(KeptPod::of).collect(),
            reads: decided.reads.list.as_slice().into(),
            turns: ctx.turns.get(),
            decided: Arc::clone(&decided.pods),
            wake: decided.wake,
            moving: decided.moving,
            waiting_for_call: decided.waiting_for_call,
            pass: self.pass,
        };
        self.nodes.insert(ctx.node.name.to_string(), node);
    }
}
