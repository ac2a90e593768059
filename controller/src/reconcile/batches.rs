//! Which of a plan's actions run together, in which order, and whether a call is free for one.

use std::collections::HashSet;

use k8sm_planner::{Action, ActionKind};

/// Calls beyond the [`CallLimit`] kept for the evictions that continue a workload (a pod of it
/// became Ready while it waited, see `crate::memory::reaction`): the owners' waves are an upgrade's
/// critical path, and with every call busy with the first evictions of newly admitted nodes (the
/// apiserver answering each in about half a second under load) such an eviction waited for a call
/// half of the times it was late.
pub(crate) const CONTINUATION_CALLS: usize = 4;

/// How many of the next actions run together: the next actions of one kind, each on a distinct node
/// for node writes. Kinds keep their order: a node is admitted before its pods move, unmanaged pods
/// are deleted after the evictions of the same pass (docs/design.md §5.3: they go once no owned pod
/// waits), kamikaze comes last.
pub(crate) fn batch_len<A: AsAction>(actions: &[A]) -> usize {
    let Some(first) = actions.first() else {
        return 0;
    };
    let kind = std::mem::discriminant(&first.action().kind);
    let mut nodes = HashSet::new();
    actions
        .iter()
        .map(AsAction::action)
        .take_while(|a| {
            std::mem::discriminant(&a.kind) == kind
                && (a.kind.pod().is_some() || a.kind.node().is_none_or(|node| nodes.insert(node)))
        })
        .count()
}

/// What a batch is made of: an action, or an action with what it needs besides.
pub(crate) trait AsAction {
    fn action(&self) -> &Action;
}

impl AsAction for Action {
    fn action(&self) -> &Action {
        self
    }
}

/// The order in which a batch's actions are tried: evictions of the `continuing` workloads first (a
/// pod of the workload became Ready while it waited for one, see `crate::memory::reaction`), then
/// the plan's order. Evictions are the only batch that may not find a call for each action (see
/// [`CallLimit`]); those left wait for a later pass. The plan counted all of a pass's evictions
/// together, so any of them may go without the others. When calls are scarce (the apiserver is the
/// bottleneck), finishing what is started keeps each workload's upgrade short and few workloads in
/// the middle of one at a time, and a workload whose replacement is Ready does not wait behind the
/// first evictions of workloads not started yet.
pub(crate) fn continuations_first<'a>(
    batch: &'a [Action],
    continuing: &HashSet<String>,
) -> Vec<&'a Action> {
    let mut ordered: Vec<&Action> = batch.iter().collect();
    if !continuing.is_empty() {
        // Stable: the plan's order within each group.
        ordered.sort_by_key(|a| !continues(a, continuing));
    }
    ordered
}

/// Whether `action` is an eviction that continues one of the `continuing` workloads.
pub(crate) fn continues(action: &Action, continuing: &HashSet<String>) -> bool {
    matches!(&action.kind, ActionKind::Evict { eviction, .. } if continuing.contains(&*eviction.owner.uid))
}

/// Whether a call may start with `calls` running: `limit` for any, and [`CONTINUATION_CALLS`] more
/// for an eviction that continues a workload.
pub(crate) fn call_free(calls: usize, limit: usize, continues: bool) -> bool {
    calls < limit + if continues { CONTINUATION_CALLS } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use k8sm_planner::{Eviction, OwnerKind, OwnerRef, PodRef, Reason};

    fn action(kind: ActionKind) -> Action {
        Action {
            policy: "p".into(),
            reason: Reason::Marked,
            message: String::new(),
            kind,
        }
    }

    fn mark(node: &str) -> Action {
        action(ActionKind::Mark {
            node: node.into(),
            incompatible_since: None,
            claim: false,
        })
    }

    fn admit(node: &str) -> Action {
        action(ActionKind::Admit {
            node: node.into(),
            at: Utc::now(),
            pods_left: 1,
            cordon: true,
        })
    }

    fn pod_ref(name: &str) -> PodRef {
        PodRef::new("ns", name, name)
    }

    fn evict(pod: &str) -> Action {
        evict_of(pod, "web")
    }

    fn evict_of(pod: &str, owner: &str) -> Action {
        action(ActionKind::Evict {
            pod: pod_ref(pod),
            eviction: Eviction {
                owner: OwnerRef {
                    kind: OwnerKind::ReplicaSet,
                    name: owner.into(),
                    uid: owner.into(),
                },
                ready_before: 10,
                ready_after: 9,
                warming_after: 0,
                desired: 10,
                needed: 9,
                threshold: 90,
                use_eviction_api: true,
                size_inferred: false,
            },
        })
    }

    fn delete(pod: &str) -> Action {
        action(ActionKind::DeletePod {
            pod: pod_ref(pod),
            eviction_api: false,
        })
    }

    /// Lengths of the batches `actions` is cut into.
    fn batches(actions: &[Action]) -> Vec<usize> {
        let mut rest = actions;
        let mut lengths = Vec::new();
        while !rest.is_empty() {
            let n = batch_len(rest);
            lengths.push(n);
            rest = &rest[n..];
        }
        lengths
    }

    #[test]
    fn node_writes_of_one_kind_to_distinct_nodes_run_together() {
        let actions = [mark("a"), mark("b"), mark("c"), admit("a"), admit("b")];
        assert_eq!(batches(&actions), [3, 2]);
    }

    #[test]
    fn a_node_written_twice_splits_the_batch() {
        let actions = [mark("a"), mark("b"), mark("a"), mark("c")];
        assert_eq!(batches(&actions), [2, 2]);
    }

    #[test]
    fn pod_actions_of_one_kind_run_together() {
        let actions = [
            admit("a"),
            evict("p1"),
            evict("p2"),
            delete("p3"),
            delete("p4"),
            mark("b"),
            delete("p5"),
        ];
        assert_eq!(batches(&actions), [1, 2, 2, 1, 1]);
        assert_eq!(batch_len::<Action>(&[]), 0);
    }

    #[test]
    fn evictions_that_continue_a_workload_go_first_in_plan_order() {
        let batch = [
            evict_of("a1", "a"),
            evict_of("b1", "b"),
            evict_of("c1", "c"),
            evict_of("b2", "b"),
            evict_of("d1", "d"),
        ];
        let names = |continuing: &[&str]| -> Vec<String> {
            let continuing = continuing.iter().map(|s| (*s).to_owned()).collect();
            continuations_first(&batch, &continuing)
                .into_iter()
                .map(|a| a.kind.pod().expect("evictions").name().to_owned())
                .collect()
        };
        assert_eq!(names(&[]), ["a1", "b1", "c1", "b2", "d1"]);
        assert_eq!(names(&["b", "d"]), ["b1", "b2", "d1", "a1", "c1"]);
        assert_eq!(names(&["x"]), ["a1", "b1", "c1", "b2", "d1"]);
    }

    #[test]
    fn evictions_that_continue_a_workload_have_calls_of_their_own() {
        let continuing: HashSet<String> = ["b".to_owned()].into();
        assert!(continues(&evict_of("b1", "b"), &continuing));
        assert!(!continues(&evict_of("a1", "a"), &continuing));
        assert!(!continues(&mark("b"), &continuing));
        let limit = 16;
        for calls in 0..limit {
            assert!(
                call_free(calls, limit, false) && call_free(calls, limit, true),
                "{calls}"
            );
        }
        // Every ordinary call busy: continuations still start, up to their own calls.
        for calls in limit..limit + CONTINUATION_CALLS {
            assert!(
                !call_free(calls, limit, false) && call_free(calls, limit, true),
                "{calls}"
            );
        }
        let all = limit + CONTINUATION_CALLS;
        assert!(!call_free(all, limit, false) && !call_free(all, limit, true));
    }
}
