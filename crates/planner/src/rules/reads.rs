//! What deciding a node's pods reads besides the pods, their node, their policy and the clock: the
//! ledger's entries (each workload's health and evictions planned in this pass, each budget's
//! allowance, whether a call is free) and the workloads' counts. Recorded as the pods are decided,
//! so that a later pass can tell whether each read still gives what it gave
//! (`crates/planner/src/pass/kept_decisions.rs`).

use chrono::{DateTime, Utc};

use crate::{
    index::{Index, OnNode, PodCounts},
    objects::budgets::Pdb,
    rules::health::{Ledger, OwnerHealth},
    rules::node_context::NodeContext,
};

/// One read, of the pod at position `at` of the node's survey where it is about a pod.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Read {
    /// [`Ledger::health`], or [`Ledger::health_beside_ask`] (`beside_ask`), of the pod's workload.
    Health {
        at: u32,
        beside_ask: bool,
        value: OwnerHealth,
    },
    /// [`Ledger::planned`] of the pod's workload: recorded apart from its health, as the health a
    /// pod not Ready is judged on leaves out an eviction asked for against a budget.
    Planned { at: u32, value: (u32, bool) },
    /// What the pod's workload's counts in the index tell of its readiness.
    Readiness { at: u32, value: WorkloadReadiness },
    /// The budgets of the pod ([`Index::budgets_of`]): `count` [`Read::Budget`]s follow.
    Budgets { at: u32, count: u32 },
    /// A budget, by its position among the index's budgets: its allowance in the ledger, and, for
    /// a pod not Ready, whether such a pod leaves it freely (deciding never reads that for a Ready
    /// pod, and each budget's view read is a cache miss).
    Budget {
        position: u32,
        allowance: i64,
        frees_not_ready: Option<bool>,
    },
    /// No call was free for the pod's eviction.
    CallRefused { at: u32 },
}

/// What deciding a pod reads of its workload's counts: whether the workload as a whole is broken
/// (none of its pods Ready, one not Ready for long enough). Kept small: a kept node records one
/// per pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WorkloadReadiness {
    pub(crate) ready: u32,
    pub(crate) warming: u32,
    pub(crate) not_ready_since: Option<DateTime<Utc>>,
}

impl WorkloadReadiness {
    pub(crate) fn of(counts: PodCounts) -> Self {
        Self {
            ready: counts.ready,
            warming: counts.warming,
            not_ready_since: counts.not_ready_since,
        }
    }
}

/// The reads of one node's decisions, in the order they were made.
#[derive(Clone, Debug, Default)]
pub(crate) struct Reads {
    pub(crate) list: Vec<Read>,
    /// The position of the pod being decided.
    at: u32,
    /// Something was read that is not recorded (a pod's volumes, the room of the schedulable
    /// nodes, the names of several budgets): the decisions cannot be kept.
    untracked: bool,
}

impl Reads {
    /// The pod at position `at` of the survey is decided next.
    pub(crate) fn pod(&mut self, at: usize) {
        self.at = u32::try_from(at).unwrap_or(u32::MAX);
    }

    /// Whether every read was recorded.
    pub(crate) fn tracked(&self) -> bool {
        !self.untracked
    }

    pub(crate) fn untracked(&mut self) {
        self.untracked = true;
    }

    pub(crate) fn health(&mut self, beside_ask: bool, value: OwnerHealth) {
        let at = self.at;
        self.list.push(Read::Health {
            at,
            beside_ask,
            value,
        });
    }

    pub(crate) fn planned(&mut self, value: (u32, bool)) -> (u32, bool) {
        let at = self.at;
        self.list.push(Read::Planned { at, value });
        value
    }

    pub(crate) fn readiness(&mut self, value: WorkloadReadiness) -> WorkloadReadiness {
        let at = self.at;
        self.list.push(Read::Readiness { at, value });
        value
    }

    /// Records the budgets of the pod being decided (Ready or not), each with what the decision
    /// reads of it.
    pub(crate) fn budgets(&mut self, budgets: &[(usize, &Pdb)], ready: bool, ledger: &Ledger) {
        let at = self.at;
        let count = u32::try_from(budgets.len()).unwrap_or(u32::MAX);
        self.list.push(Read::Budgets { at, count });
        self.list.extend(
            budgets
                .iter()
                .map(|&(i, pdb)| budget_read(i, pdb, ready, ledger)),
        );
    }

    pub(crate) fn call_refused(&mut self) {
        let at = self.at;
        self.list.push(Read::CallRefused { at });
    }
}

/// What deciding a pod reads of one of its budgets: the budget's view only for a pod not Ready
/// (`uses_budget`), as each view is a cache miss.
fn budget_read(i: usize, pdb: &Pdb, ready: bool, ledger: &Ledger) -> Read {
    Read::Budget {
        position: u32::try_from(i).unwrap_or(u32::MAX),
        allowance: ledger.pdb_allowance(i),
        frees_not_ready: (!ready).then(|| pdb.view.admits_not_ready_freely()),
    }
}

/// Whether each of `reads`, made deciding `pods` (the node's survey) in `ctx`, gives now what it
/// gave then, read again from `index` and `ledger`. The pods must be the same pods with the same
/// classes, readiness and budgets' answers as then: a read names its pod by position.
pub(crate) fn hold(
    reads: &[Read],
    pods: &[OnNode],
    ctx: &NodeContext,
    index: &Index,
    ledger: &mut Ledger,
) -> bool {
    // Worked out once for the node, and only if a pod was refused a call.
    let mut refuses_all = None;
    let mut reads = reads.iter();
    while let Some(read) = reads.next() {
        let same = match *read {
            Read::Health {
                at,
                beside_ask,
                value,
            } => workload_of(pods, at).is_some_and(|(w, slot)| {
                let now = if beside_ask {
                    ledger.health_beside_ask(w, slot, index)
                } else {
                    ledger.health(w, slot, index)
                };
                now == value
            }),
            Read::Planned { at, value } => workload_of(pods, at)
                .is_some_and(|(w, slot)| ledger.planned(w, slot, index) == value),
            Read::Readiness { at, value } => workload_of(pods, at).is_some_and(|(w, slot)| {
                WorkloadReadiness::of(index.workload_counts(w, slot)) == value
            }),
            Read::Budgets { at, count } => {
                let Some(on) = pods.get(at as usize) else {
                    return false;
                };
                let now = index.budgets_of(on);
                now.len() == count as usize
                    && now.iter().all(|&(i, pdb)| {
                        reads.next() == Some(&budget_read(i, pdb, on.ready, ledger))
                    })
            }
            // Read as part of the `Budgets` before it.
            Read::Budget { .. } => false,
            Read::CallRefused { at } => {
                let Some(on) = pods.get(at as usize) else {
                    return false;
                };
                *refuses_all
                    .get_or_insert_with(|| ledger.calls.refuses_all(&ctx.node.name, ctx.written))
                    || on.class.workload().is_some_and(|w| {
                        !ledger
                            .calls
                            .would_take(w.key(), &on.pod.uid, &ctx.node.name, ctx.written)
                    })
            }
        };
        if !same {
            return false;
        }
    }
    true
}

fn workload_of<'a>(
    pods: &[OnNode<'a>],
    at: u32,
) -> Option<(crate::objects::workload::Workload<'a>, u32)> {
    let on = pods.get(at as usize)?;
    Some((on.class.workload()?, on.counts_for))
}
