//! Nodes deleted as their kamikaze (mechanism `DeleteNode`, docs/design.md §5.2, §5.4). The Node
//! object is gone, so its annotations cannot remember the kamikaze: the policy's
//! `status.deletedNodes` does, until a node of that name reports the target executor. Meanwhile the
//! node is counted (the policy is never Upgraded while one is missing), holds its drain slot, is
//! reported `RestartOverdue` after `restartTimeout`, and, if it comes back with its old executor or
//! a third one, is never drained and deleted again until an operator acts.

use chrono::{DateTime, Utc};
use k8sm_api::text::{bounded, recorded_id};
use k8sm_api::{ExecutorUpgradePolicySpec, KamikazeMechanism, MAX_EXECUTOR_ID, NodePhase};

use crate::{
    DeletedNodeRecord, NodeView, Reason,
    model::output::{ActionKind, Blocker},
    objects::node_state::{Assessment, Stage},
};

/// Where a selected node with a deletion record stands, and whether the record is kept.
pub(crate) fn assess(
    node: &NodeView,
    record: &DeletedNodeRecord,
    spec: &ExecutorUpgradePolicySpec,
    now: DateTime<Utc>,
) -> (Assessment, bool) {
    let mut a = Assessment::waiting_since(Stage::KamikazeSent, record.deleted_at);
    if node.uid == record.uid {
        // The deletion did not happen (or the cache does not show it yet): delete it again; a gone
        // node is a 404.
        a.actions.push((
            ActionKind::Kamikaze {
                node: node.name.clone(),
                mechanism: KamikazeMechanism::DeleteNode,
                url: None,
                executor_id: node.executor_id.clone(),
                at: now,
                target: spec.target_executor_id.clone(),
            },
            Reason::KamikazeSent,
            "the Node is still there after k8sm deleted it: deleting it again".to_owned(),
        ));
        overdue(&mut a, record, spec, now);
        return (a, true);
    }
    let target = spec.target_executor_id.as_deref();
    let current = node.executor_id.as_deref().filter(|id| !id.is_empty());
    // The record keeps a bounded stand-in of an oversized ID (see `recorded_id`): compare
    // stand-ins.
    let old_id = record.executor_id.as_deref().map(recorded_id);
    let unchanged = |id: &str| Some(recorded_id(id)) == old_id;
    let upgraded = match (target, current) {
        (Some(target), Some(id)) => id == target,
        (None, Some(id)) => !unchanged(id),
        (_, None) => false,
    };
    // Back on the target it was told to restart into, which the policy moved since: it restarted as
    // told.
    let on_earlier_target = current.is_some() && current == record.target.as_deref();
    match current {
        Some(id) if !upgraded && on_earlier_target => {
            a = Assessment::new(Stage::Settled(NodePhase::Incompatible));
            a.actions.push((
                complete(node),
                Reason::Upgraded,
                format!(
                    "the node came back as {} after k8sm deleted it, the target it was told to restart into; the \
                     target is now {}: it is marked again for the new target",
                    bounded(id, MAX_EXECUTOR_ID),
                    target.unwrap_or("(none)")
                ),
            ));
            (a, false)
        }
        _ if upgraded => {
            a = Assessment::new(Stage::Settled(NodePhase::Compatible));
            // Also on a clean node (a new Node object): the Event says the node came back.
            a.actions.push((
                complete(node),
                Reason::Upgraded,
                format!(
                    "the node came back as {} after k8sm deleted it: upgraded",
                    bounded(current.unwrap_or_default(), MAX_EXECUTOR_ID)
                ),
            ));
            (a, false)
        }
        None => {
            overdue(&mut a, record, spec, now);
            (a, true)
        }
        Some(id) => {
            a.stage = Stage::CameBackWrong;
            let old = bounded(
                record.executor_id.as_deref().unwrap_or("none"),
                MAX_EXECUTOR_ID,
            );
            let same = unchanged(id);
            let id = bounded(id, MAX_EXECUTOR_ID);
            let what = if same {
                format!("came back after k8sm deleted it still running its old executor {id}")
            } else {
                format!(
                    "came back after k8sm deleted it as {id}, neither its old executor {old} nor the target {}",
                    target.unwrap_or("(none)")
                )
            };
            a.block(
                Reason::UnexpectedExecutor,
                format!(
                    "{what}. k8sm will not drain and delete it again: fix the node's executor so that it reports the \
                     target, or retry once with `kubectl k8sm force {} --retry-kamikaze`",
                    node.name
                ),
            );
            (a, true)
        }
    }
}

/// The blockers of a deleted node that has not registered again, and when its restart becomes
/// overdue (if it is not yet).
pub(crate) fn missing(
    record: &DeletedNodeRecord,
    spec: &ExecutorUpgradePolicySpec,
    now: DateTime<Utc>,
) -> (Vec<Blocker>, Option<DateTime<Utc>>) {
    let mut a = Assessment::waiting_since(Stage::KamikazeSent, record.deleted_at);
    overdue(&mut a, record, spec, now);
    (a.blockers, a.overdue_at)
}

fn overdue(
    a: &mut Assessment,
    record: &DeletedNodeRecord,
    spec: &ExecutorUpgradePolicySpec,
    now: DateTime<Utc>,
) {
    let deadline = chrono::Duration::from_std(spec.restart_timeout.as_duration())
        .ok()
        .and_then(|d| record.deleted_at.checked_add_signed(d));
    match deadline {
        Some(deadline) if now <= deadline => a.overdue_at = Some(deadline),
        _ => a.block(
            Reason::RestartOverdue,
            format!(
                "k8sm deleted the Node at {} (kamikaze DeleteNode) and it has not come back with a new executor \
                 within restartTimeout {}: check the machine",
                record.deleted_at.to_rfc3339(),
                spec.restart_timeout
            ),
        ),
    }
}

/// Completes a node that came back: k8sm's state removed, uncordoned if k8sm cordoned it.
fn complete(node: &NodeView) -> ActionKind {
    ActionKind::Complete {
        node: node.name.clone(),
        uncordon: node.cordoned_by_k8sm && node.unschedulable,
    }
}
