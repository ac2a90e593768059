//! Where a selected node stands, read from its contract keys alone (docs/design.md §3.1): marking,
//! completion, and the stage that admission and the drain work from. Nothing here is remembered
//! between passes, so a restarted controller re-derives the same stage. A node that came back wrong
//! from kamikaze keeps its slot and is never told again until an operator acts (§5.2).

use chrono::{DateTime, Utc};
use k8sm_api::text::{MAX_QUOTED_VALUE, bounded, quoted};
use k8sm_api::{ExecutorUpgradePolicySpec, MAX_EXECUTOR_ID, NodePhase, keys};

use crate::{
    NodeView, Reason,
    model::output::{ActionKind, Blocker},
    model::stamp::Stamp,
};

/// What the rest of the pass does with a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Nothing to drain: reported with this phase (Compatible, or Incompatible until a re-mark next
    /// pass).
    Settled(NodePhase),
    /// Opted out: reported with this phase, never touched.
    OptedOut(NodePhase),
    /// Marked, waiting for a drain slot (again, when it stalled before: see `Assessment::stalled`).
    Candidate,
    /// Admitted: Draining, Drained or Blocked, depending on its pods.
    Admitted,
    /// Told to terminate; waits for its executor to come back.
    KamikazeSent,
    /// Came back from kamikaze with an executor that is neither the target nor new: keeps its slot,
    /// reported Blocked (`UnexpectedExecutor`), never told to terminate again until an operator
    /// acts. An executor obeys a given kamikaze once, so a broken executor build stops at
    /// `maxConcurrentNodes` nodes instead of spreading through the fleet.
    CameBackWrong,
}

/// A node action with its Event reason and message.
pub(crate) type NodeAction = (ActionKind, Reason, String);

/// The assessment of one node under one policy.
#[derive(Clone, Debug)]
pub(crate) struct Assessment {
    pub(crate) stage: Stage,
    /// When the node was marked, as far as known (a mark planned in this pass counts as `now`).
    pub(crate) incompatible_since: Option<DateTime<Utc>>,
    /// When the node was admitted, as far as known.
    pub(crate) draining_since: Option<DateTime<Utc>>,
    /// When kamikaze was sent, as far as known.
    pub(crate) kamikaze_at: Option<DateTime<Utc>>,
    /// The time at which the restart becomes overdue, while it is not yet.
    pub(crate) overdue_at: Option<DateTime<Utc>>,
    /// The node gave up its slot after making no progress (the stalled annotation), and when, if
    /// readable.
    pub(crate) stalled: Option<Option<DateTime<Utc>>>,
    /// This pass marks it: its pods are still to move, though the index, which reads the node's
    /// keys alone, does not count them yet.
    pub(crate) being_marked: bool,
    pub(crate) actions: Vec<NodeAction>,
    /// Node-level problems and waits.
    pub(crate) blockers: Vec<Blocker>,
}

impl Assessment {
    pub(crate) fn new(stage: Stage) -> Self {
        Self {
            stage,
            incompatible_since: None,
            draining_since: None,
            kamikaze_at: None,
            overdue_at: None,
            stalled: None,
            being_marked: false,
            actions: Vec::new(),
            blockers: Vec::new(),
        }
    }

    /// Told to terminate at `at` (a deleted node's record).
    pub(crate) fn waiting_since(stage: Stage, at: DateTime<Utc>) -> Self {
        Self {
            kamikaze_at: Some(at),
            ..Self::new(stage)
        }
    }

    pub(crate) fn block(&mut self, reason: Reason, message: String) {
        self.blockers.push(Blocker {
            reason,
            message: message.into(),
            pod: None,
        });
    }
}

/// Whether the node carries the opt-out label.
pub(crate) fn node_opted_out(node: &NodeView) -> bool {
    node.labels
        .get(keys::UPGRADE_OPT_OUT_LABEL)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(keys::UPGRADE_OPT_OUT_VALUE))
}

/// Marked: the incompatible-executor annotation (readable or not) or label.
fn is_marked(node: &NodeView) -> bool {
    node.incompatible_since.is_some() || node.incompatible_label
}

/// Told to terminate: the kamikaze annotation (readable or not) or the recorded kamikaze executor
/// ID.
fn is_kamikaze_sent(node: &NodeView) -> bool {
    node.kamikaze.is_some() || node.kamikaze_executor_id.is_some()
}

/// Whether `node`'s pods must still be moved, by its contract keys alone (no policy, no clock):
/// marked, not told to terminate yet, not opted out (`opted_out`: [`node_opted_out`], read once
/// per pass by the index). What `PodCounts::to_move` counts pods on.
pub(crate) fn still_to_drain(node: &NodeView, opted_out: bool) -> bool {
    is_marked(node) && !is_kamikaze_sent(node) && !opted_out
}

/// Why a marked node cannot be drained now, if it cannot: NotReady or unreachable (no kubelet to
/// confirm a pod gone), or no executor ID (no executor to obey a kamikaze, nor to say it came
/// back). Such a node is not admitted and holds no slot until it is back; a node told to restart
/// that is not back keeps its slot instead (`RestartOverdue`).
pub(crate) fn unavailable(node: &NodeView) -> Option<String> {
    if !node.ready {
        return Some(
            "NotReady: its kubelet does not report (down or unreachable); not admitted until it is Ready again"
                .to_owned(),
        );
    }
    if node
        .executor_id
        .as_deref()
        .is_none_or(|id| id.trim().is_empty())
    {
        return Some(format!(
            "{}: no executor would obey a kamikaze; not admitted until it reports one",
            reported_executor(node.executor_id.as_deref())
        ));
    }
    None
}

/// Assesses `node` under `spec` at `now`; `opted_out`: [`node_opted_out`].
pub(crate) fn assess(
    node: &NodeView,
    opted_out: bool,
    spec: &ExecutorUpgradePolicySpec,
    now: DateTime<Utc>,
) -> Assessment {
    let read = Read::of(node, spec);
    if opted_out {
        return assess_opted_out(&read);
    }
    if read.upgraded {
        return assess_upgraded(node, &read);
    }
    if read.on_earlier_target {
        return assess_on_earlier_target(node, &read);
    }
    let mut a = Assessment::new(Stage::Candidate);
    let planned_mark = !read.marked;
    if planned_mark {
        let Some(target) = read.target else {
            return assess_unmarked_without_target(node, &read);
        };
        a.actions.push(marking(node, target, now));
        a.being_marked = true;
    }
    record_marking(&mut a, node, read.incompatible, planned_mark, now);
    record_draining(&mut a, node, read.draining);
    set_stage(&mut a, node, &read, spec, now);
    a
}

/// What a node's contract keys and the policy's target say about it, read once by [`assess`].
struct Read<'a> {
    target: Option<&'a str>,
    incompatible: Stamp,
    draining: Stamp,
    kamikaze: Stamp,
    /// The executor ID recorded at kamikaze.
    recorded: Option<&'a str>,
    /// The executor ID the node reports, if not empty.
    current: Option<&'a str>,
    /// The incompatible-executor annotation (readable or not) or label.
    marked: bool,
    /// The draining annotation or `cordoned-by: k8sm`.
    admitted: bool,
    /// The kamikaze annotation (readable or not) or the recorded kamikaze-executor-id.
    kamikaze_sent: bool,
    at_target: bool,
    /// Reports the target executor ID, or, without a target, an executor ID other than the one
    /// recorded at kamikaze.
    upgraded: bool,
    /// Back on the target it was told to restart into, which is not the target any more (it moved
    /// mid-upgrade): it restarted as told, and is simply incompatible with the new target.
    on_earlier_target: bool,
    /// Told to terminate, and back with its old ID (it acknowledged the kamikaze by removing its
    /// annotation) or with a third one (neither its old one, the target, nor the target it was
    /// told to restart into).
    came_back_wrong: bool,
    has_state: bool,
}

impl<'a> Read<'a> {
    fn of(node: &'a NodeView, spec: &'a ExecutorUpgradePolicySpec) -> Self {
        let target = spec.target_executor_id.as_deref();
        let draining = Stamp::parse(node.draining_since.as_deref());
        let kamikaze = Stamp::parse(node.kamikaze.as_deref());
        let recorded = node.kamikaze_executor_id.as_deref();
        let marked = is_marked(node);
        let kamikaze_sent = is_kamikaze_sent(node);
        let current = node.executor_id.as_deref().filter(|id| !id.is_empty());
        let at_target = target.is_some() && current == target;
        // A restart is a new executor ID after kamikaze; with no ID recorded, any ID is new.
        let restarted = recorded.is_some_and(|rec| current.is_some_and(|id| id != rec));
        // An executor that came back with its old ID acknowledged the kamikaze by removing its
        // annotation.
        let came_back_unchanged = recorded.is_some() && !kamikaze.is_present() && !restarted;
        let upgraded = at_target || (target.is_none() && restarted);
        let on_earlier_target = kamikaze_sent
            && restarted
            && !upgraded
            && current.is_some()
            && current == node.kamikaze_target.as_deref();
        Self {
            target,
            incompatible: Stamp::parse(node.incompatible_since.as_deref()),
            draining,
            kamikaze,
            recorded,
            current,
            marked,
            admitted: draining.is_present() || node.cordoned_by_k8sm,
            kamikaze_sent,
            at_target,
            upgraded,
            on_earlier_target,
            came_back_wrong: kamikaze_sent
                && !upgraded
                && !on_earlier_target
                && (restarted || came_back_unchanged),
            has_state: marked || node.has_k8sm_taint || has_k8sm_state(node),
        }
    }
}

/// An opted-out node: reported with the phase it is in, blocked unless Compatible, never touched.
fn assess_opted_out(read: &Read) -> Assessment {
    let phase = if read.at_target || (read.target.is_none() && !read.marked && !read.kamikaze_sent)
    {
        NodePhase::Compatible
    } else if read.kamikaze_sent {
        NodePhase::KamikazeSent
    } else if read.admitted {
        NodePhase::Blocked
    } else {
        NodePhase::Incompatible
    };
    let mut a = Assessment::new(Stage::OptedOut(phase));
    a.incompatible_since = read.incompatible.time();
    if phase != NodePhase::Compatible {
        a.block(
            Reason::BlockedOptOut,
            format!(
                "node opted out ({}={}): k8sm never drains it; remove the label to upgrade it",
                keys::UPGRADE_OPT_OUT_LABEL,
                keys::UPGRADE_OPT_OUT_VALUE
            ),
        );
    }
    a
}

/// An upgraded node: Compatible, and its upgrade state (or an obsolete mark) removed.
fn assess_upgraded(node: &NodeView, read: &Read) -> Assessment {
    let mut a = Assessment::new(Stage::Settled(NodePhase::Compatible));
    if read.has_state {
        let id = bounded(read.current.unwrap_or("none"), MAX_EXECUTOR_ID);
        let message = if read.kamikaze_sent {
            format!("executor came back as {id}: upgrade state removed")
        } else {
            format!("already runs the target executor {id}: obsolete mark removed")
        };
        a.actions.push((complete(node), Reason::Upgraded, message));
    }
    a
}

/// A node back on the target it was told to restart into, which is not the target any more: its
/// upgrade state goes, mark included; the next pass marks it for the new target, and it goes round
/// again.
fn assess_on_earlier_target(node: &NodeView, read: &Read) -> Assessment {
    let mut a = Assessment::new(Stage::Settled(NodePhase::Incompatible));
    a.incompatible_since = read.incompatible.time();
    let id = bounded(read.current.unwrap_or_default(), MAX_EXECUTOR_ID);
    a.actions.push((
        complete(node),
        Reason::Upgraded,
        format!(
            "executor came back as {id}, the target it was told to restart into; the target is now {}: its \
             upgrade state was removed, and it is marked again for the new target",
            read.target.unwrap_or("(none)")
        ),
    ));
    a
}

/// A node not marked under a policy without a target: Compatible; whatever k8sm state it has left
/// (someone else removed the mark: the upgrade stopped) is removed.
fn assess_unmarked_without_target(node: &NodeView, read: &Read) -> Assessment {
    let mut a = Assessment::new(Stage::Settled(NodePhase::Compatible));
    if read.has_state {
        a.actions.push((
            complete(node),
            Reason::Released,
            "incompatible mark removed by someone else: upgrade stopped, k8sm state removed"
                .to_owned(),
        ));
    }
    a
}

/// The action that marks a node not marked yet as incompatible with `target`, at `now`.
fn marking(node: &NodeView, target: &str, now: DateTime<Utc>) -> NodeAction {
    (
        mark(node, Some(now), true),
        Reason::Marked,
        format!(
            "marked incompatible: {}, not the target {target}",
            reported_executor(node.executor_id.as_deref())
        ),
    )
}

/// Records when the node was marked (`now` for a mark planned in this pass, or for a label found
/// without its annotation, which is then added), blocking on an unreadable annotation; and
/// completes a mark that lacks its label or taint.
fn record_marking(
    a: &mut Assessment,
    node: &NodeView,
    incompatible: Stamp,
    planned_mark: bool,
    now: DateTime<Utc>,
) {
    a.incompatible_since = match incompatible {
        _ if planned_mark => Some(now),
        Stamp::At(t) => Some(t),
        Stamp::Absent => {
            a.actions.push((
                mark(node, Some(now), false),
                Reason::Marked,
                "incompatible label without the annotation: recording now as the time of marking"
                    .to_owned(),
            ));
            Some(now)
        }
        Stamp::Malformed => {
            a.block(
                Reason::MalformedAnnotation,
                malformed(
                    keys::INCOMPATIBLE_EXECUTOR_ANNOTATION,
                    node.incompatible_since.as_deref(),
                ),
            );
            None
        }
    };
    if !planned_mark
        && incompatible.is_present()
        && (!node.incompatible_label || !node.has_k8sm_taint)
    {
        let missing = match (node.incompatible_label, node.has_k8sm_taint) {
            (false, false) => "label and taint",
            (false, true) => "label",
            _ => "taint",
        };
        a.actions.push((
            mark(node, None, false),
            Reason::Marked,
            format!("completing the incompatible mark: adding the {missing}"),
        ));
    }
}

/// Records when the node was admitted, blocking on an unreadable annotation.
fn record_draining(a: &mut Assessment, node: &NodeView, draining: Stamp) {
    a.draining_since = draining.time();
    if draining == Stamp::Malformed {
        a.block(
            Reason::MalformedAnnotation,
            malformed(keys::DRAINING_ANNOTATION, node.draining_since.as_deref()),
        );
    }
}

/// The stage of a marked node: came back wrong, told to terminate (with how its restart is doing),
/// admitted, or a candidate (with when it stalled, if it did).
fn set_stage(
    a: &mut Assessment,
    node: &NodeView,
    read: &Read,
    spec: &ExecutorUpgradePolicySpec,
    now: DateTime<Utc>,
) {
    if read.came_back_wrong {
        a.stage = Stage::CameBackWrong;
        a.kamikaze_at = read.kamikaze.time();
        a.block(
            Reason::UnexpectedExecutor,
            came_back_wrong_message(node, read.current, read.recorded, read.target),
        );
    } else if read.kamikaze_sent {
        a.stage = Stage::KamikazeSent;
        kamikaze_progress(a, node, read.kamikaze, spec, now);
    } else if read.admitted {
        a.stage = Stage::Admitted;
    } else {
        let stalled = Stamp::parse(node.stalled_since.as_deref());
        if stalled.is_present() {
            a.stalled = Some(stalled.time());
            if stalled == Stamp::Malformed {
                a.block(
                    Reason::MalformedAnnotation,
                    malformed(keys::STALLED_ANNOTATION, node.stalled_since.as_deref()),
                );
            }
        }
    }
}

/// Any k8sm annotation besides the mark: k8sm admitted, cordoned, stalled, marked or told the node
/// something.
pub(crate) fn has_k8sm_state(node: &NodeView) -> bool {
    node.draining_since.is_some()
        || node.stalled_since.is_some()
        || node.drain_progress.is_some()
        || node.cordoned_by_k8sm
        || node.marked_by_k8sm
        || node.kamikaze.is_some()
        || node.kamikaze_executor_id.is_some()
        || node.kamikaze_target.is_some()
        || node.kamikaze_obeyed
}

/// What an operator reads about a node that came back from kamikaze with the wrong executor, and
/// what to do.
fn came_back_wrong_message(
    node: &NodeView,
    current: Option<&str>,
    recorded: Option<&str>,
    target: Option<&str>,
) -> String {
    let old = bounded(
        recorded.filter(|id| !id.is_empty()).unwrap_or("none"),
        MAX_EXECUTOR_ID,
    );
    let what = match current {
        Some(id) if Some(id) == recorded => {
            format!(
                "came back from kamikaze still running its old executor {}: the new executor did not start",
                bounded(id, MAX_EXECUTOR_ID)
            )
        }
        None => "came back from kamikaze reporting no executor ID".to_owned(),
        Some(id) => format!(
            "came back from kamikaze as {}, neither its old executor {old} nor the target {}",
            bounded(id, MAX_EXECUTOR_ID),
            target.unwrap_or("(none)")
        ),
    };
    format!(
        "{what}. k8sm will not tell it to terminate again: fix the node's executor so that it reports the target, \
         or retry once with `kubectl k8sm force {} --retry-kamikaze`",
        node.name
    )
}

/// Reports an overdue or unreadable kamikaze.
fn kamikaze_progress(
    a: &mut Assessment,
    node: &NodeView,
    kamikaze: Stamp,
    spec: &ExecutorUpgradePolicySpec,
    now: DateTime<Utc>,
) {
    let timeout = spec.restart_timeout.as_duration();
    match kamikaze {
        Stamp::At(at) => {
            a.kamikaze_at = Some(at);
            let deadline = chrono::Duration::from_std(timeout)
                .ok()
                .and_then(|d| at.checked_add_signed(d));
            match deadline {
                Some(deadline) if now <= deadline => a.overdue_at = Some(deadline),
                _ => a.block(
                    Reason::RestartOverdue,
                    format!(
                        "kamikaze sent at {} and the executor is not back after restartTimeout {}: check the node",
                        at.to_rfc3339(),
                        spec.restart_timeout
                    ),
                ),
            }
        }
        Stamp::Malformed => a.block(
            Reason::MalformedAnnotation,
            malformed(keys::KAMIKAZE_ANNOTATION, node.kamikaze.as_deref()),
        ),
        // Only the recorded ID is left, and the executor did not change: the node came back wrong
        // (see `assess`).
        Stamp::Absent => unreachable!("a kamikaze acknowledged without a restart came back wrong"),
    }
}

/// What the node's executor-id annotation says, quoted as found (escaped, and cut if long): a
/// garbage value is shown as it is, and a missing or empty one is named as such rather than passed
/// off as an executor called "none".
fn reported_executor(raw: Option<&str>) -> String {
    let key = keys::EXECUTOR_ID_ANNOTATION;
    match raw {
        None => format!("annotation {key} is missing (the node reports no executor)"),
        Some(id) if id.trim().is_empty() => {
            format!("annotation {key} is empty (the node reports no executor)")
        }
        Some(id) => format!("annotation {key} is {}", quoted(id, MAX_QUOTED_VALUE)),
    }
}

/// An annotation that should hold a time and does not, quoted as found (escaped, and cut if long).
fn malformed(key: &str, raw: Option<&str>) -> String {
    format!(
        "annotation {key} is {}, not an RFC 3339 time: fix or remove it",
        quoted(raw.unwrap_or_default(), MAX_QUOTED_VALUE)
    )
}

fn mark(node: &NodeView, incompatible_since: Option<DateTime<Utc>>, claim: bool) -> ActionKind {
    ActionKind::Mark {
        node: node.name.clone(),
        incompatible_since,
        claim,
    }
}

fn complete(node: &NodeView) -> ActionKind {
    ActionKind::Complete {
        node: node.name.clone(),
        uncordon: node.cordoned_by_k8sm && node.unschedulable,
    }
}

/// Hands back a node that no policy selects any more, if k8sm put anything on it (see
/// [`ActionKind::Release`]).
pub(crate) fn release(node: &NodeView) -> Option<ActionKind> {
    has_k8sm_state(node).then(|| ActionKind::Release {
        node: node.name.clone(),
        uncordon: node.cordoned_by_k8sm && node.unschedulable,
        remove_mark: node.marked_by_k8sm,
    })
}
