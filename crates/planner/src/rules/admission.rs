//! Drain slots: the orders that decide who holds one, who acts, and who is admitted next, and an
//! owner's chain of waves (docs/design.md §5.2; the pass applies them). A holder that cannot stop
//! keeps its slot, so a bad executor release stops at `maxConcurrentNodes` nodes; free slots go
//! first to nodes whose pods can move now, longest chain first, so that the upgrade's critical path
//! never waits on a queued node.

use chrono::{DateTime, Utc};

/// What kind of slot holder a node is. Holders that cannot stop come first.
///
/// Every admitted node that is Draining, Drained or KamikazeSent holds a slot, and so does a node
/// that came back from kamikaze with the wrong executor. A KamikazeSent node keeps its slot until
/// its executor comes back, even past `restartTimeout` (it is then reported `RestartOverdue`), and
/// so does one that came back wrong: an executor version that never comes back, or comes back
/// broken, stops at most `maxConcurrentNodes` nodes instead of taking down the fleet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Holding {
    /// Told to terminate: nothing can be undone.
    KamikazeSent,
    /// Empty: one step from done.
    Drained,
    /// Pods still moving.
    Draining,
}

/// Order of slot holders: by kind, then admission time (unknown last), then name.
pub(crate) fn holder_key(
    holding: Holding,
    since: Option<DateTime<Utc>>,
    name: &str,
) -> (Holding, bool, Option<DateTime<Utc>>, &str) {
    (holding, since.is_none(), since, name)
}

/// Order in which the holders that act decide their pods, and so take the owners' budgets: by kind,
/// then fewest pods left, then as [`holder_key`]. A node close to drained finishes, gives its slot
/// up and comes back without its cordon, where the replacements of pods evicted elsewhere can go:
/// an owner's eviction given to the node admitted first instead could leave its replacement with
/// every node cordoned while that node waits on another pod (one an admission policy refuses, say)
/// until it stalls. The slots themselves go by [`holder_key`], which pods moving do not change.
pub(crate) fn acting_key(
    holding: Holding,
    pods_left: u32,
    since: Option<DateTime<Utc>>,
    name: &str,
) -> (Holding, u32, bool, Option<DateTime<Utc>>, &str) {
    (holding, pods_left, since.is_none(), since, name)
}

/// The sort key of [`candidate_key`], with the node's name, or a key that orders nodes as their
/// names do.
pub(crate) type CandidateKey<N> = (
    bool,
    bool,
    Option<DateTime<Utc>>,
    bool,
    u32,
    bool,
    Option<DateTime<Utc>>,
    N,
);

/// Admission order: nodes that never stalled first (a stalled node waits on something that does not
/// resolve soon; stalled nodes among themselves by when they stalled, unknown last), then easiest
/// first: nodes without operator-only pods, then fewest pods to move, then marked earliest (unknown
/// last), then name.
///
/// Within each [`Group`] the pass admits first the nodes whose pods can move now (a pod that the
/// health rule and its budgets let go, given what the pass already evicted, or nothing an owner
/// decides on the node), longest [`chain`] first, and the others after them, each in this order.
/// Each admitted node is drained before the next is judged, so two nodes whose pods all belong to
/// an owner that may lose one pod take one slot, not two, while another owner's node waits: owners
/// whose pods are bunched on a few nodes drain side by side instead of in a convoy. The queue
/// (`admission_position`) is in the same order, judged after the pass's actions.
pub(crate) fn candidate_key<N: Ord>(
    stalled: Option<Option<DateTime<Utc>>>,
    need_operator: u32,
    pods_left: u32,
    incompatible_since: Option<DateTime<Utc>>,
    name: N,
) -> CandidateKey<N> {
    let stalled_at = stalled.flatten();
    (
        stalled.is_some(),
        stalled.is_some() && stalled_at.is_none(),
        stalled_at,
        need_operator > 0,
        pods_left,
        incompatible_since.is_none(),
        incompatible_since,
        name,
    )
}

/// A group of candidates that admission never reorders against another: the first fields of
/// [`candidate_key`] (never stalled before stalled, stalled ones by when they stalled, then no
/// operator-only pods before some).
pub(crate) type Group = (bool, bool, Option<DateTime<Utc>>, bool);

pub(crate) fn group(stalled: Option<Option<DateTime<Utc>>>, need_operator: u32) -> Group {
    let (stalled, unknown, at, operator, ..) = candidate_key(stalled, need_operator, 0, None, "");
    (stalled, unknown, at, operator)
}

/// A workload's remaining chain, in waves: `ceil(to_move / a)` with `a = d - sla_floor(t, d)` the
/// pods the health rule lets it lose at once (docs/design.md §5.3), `to_move` its pods still on
/// nodes to drain (`PodCounts::to_move`). Chains of one wave or less count as 0: a workload that
/// moves all it has in one wave gains nothing from an earlier slot over another such, and the key's
/// order (easiest first) decides among them. A workload scaled to zero has no chain.
///
/// The chain is the critical path: `m` pods to move, `a` at a time, take at least `ceil(m / a)`
/// waves one after the other, each as long as a replacement takes to become Ready, so the upgrade
/// ends no sooner than its longest chain, however many slots there are. A slot given to a node that
/// holds the next pod of the longest chain shortens that path; one given to a node of short chains
/// does not (those finish in time anyway), and would leave the long chain's next pod waiting on a
/// queued node while every slot held other owners' nodes. The chain only reorders the nodes whose
/// pods can move now within a group, which would be admitted anyway; ties keep [`candidate_key`]'s
/// order, so the order stays deterministic.
pub(crate) fn chain(to_move: u32, desired: u32, threshold: u8) -> u32 {
    let allowance = desired.saturating_sub(crate::rules::health::sla_floor(threshold, desired));
    if allowance == 0 {
        return 0;
    }
    match to_move.div_ceil(allowance) {
        0 | 1 => 0,
        waves => waves,
    }
}

/// Splits sorted holders into those that act (the first `slots`) and those that wait for a slot.
/// Slots are strict: when more nodes hold one than there are slots (after `maxConcurrentNodes` was
/// lowered, or when a Blocked node's operator problem went away while its slot was reused), the
/// rest wait (`WaitingForSlot`) without evicting anything, still admitted.
pub(crate) fn split<T>(mut holders: Vec<T>, slots: usize) -> (Vec<T>, Vec<T>) {
    let waiting = holders.split_off(slots.min(holders.len()));
    (holders, waiting)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(minute: u32) -> Option<DateTime<Utc>> {
        Some(Utc.with_ymd_and_hms(2026, 1, 1, 0, minute, 0).unwrap())
    }

    #[test]
    fn candidates_easiest_first() {
        let mut nodes = [
            (
                "stalled-late",
                candidate_key(Some(t(7)), 0, 0, t(0), "stalled-late"),
            ),
            (
                "stalled-unknown",
                candidate_key(Some(None), 0, 0, t(0), "stalled-unknown"),
            ),
            (
                "stalled-early",
                candidate_key(Some(t(6)), 1, 9, t(0), "stalled-early"),
            ),
            (
                "blocked-empty",
                candidate_key(None, 1, 1, t(0), "blocked-empty"),
            ),
            ("big-early", candidate_key(None, 0, 9, t(0), "big-early")),
            ("small-late", candidate_key(None, 0, 2, t(9), "small-late")),
            (
                "small-early",
                candidate_key(None, 0, 2, t(1), "small-early"),
            ),
            (
                "small-unknown",
                candidate_key(None, 0, 2, None, "small-unknown"),
            ),
            (
                "small-early-b",
                candidate_key(None, 0, 2, t(1), "small-early-b"),
            ),
            ("empty", candidate_key(None, 0, 0, t(5), "empty")),
        ];
        nodes.sort_by(|a, b| a.1.cmp(&b.1));
        let order: Vec<_> = nodes.iter().map(|n| n.0).collect();
        assert_eq!(
            order,
            [
                "empty",
                "small-early",
                "small-early-b",
                "small-late",
                "small-unknown",
                "big-early",
                "blocked-empty",
                "stalled-early",
                "stalled-late",
                "stalled-unknown"
            ]
        );
    }

    #[test]
    fn holders_that_cannot_stop_come_first() {
        let mut nodes = [
            (
                "draining-early",
                holder_key(Holding::Draining, t(0), "draining-early"),
            ),
            ("drained", holder_key(Holding::Drained, t(5), "drained")),
            (
                "kamikaze",
                holder_key(Holding::KamikazeSent, t(9), "kamikaze"),
            ),
            (
                "draining-unknown",
                holder_key(Holding::Draining, None, "draining-unknown"),
            ),
            (
                "draining-late",
                holder_key(Holding::Draining, t(3), "draining-late"),
            ),
        ];
        nodes.sort_by(|a, b| a.1.cmp(&b.1));
        let order: Vec<_> = nodes.iter().map(|n| n.0).collect();
        assert_eq!(
            order,
            [
                "kamikaze",
                "drained",
                "draining-early",
                "draining-late",
                "draining-unknown"
            ]
        );
    }

    #[test]
    fn chains_count_waves_of_what_the_rule_lets_go_at_once() {
        // d = 12 at 90%: floor min(11, 11) = 11, one pod at a time.
        assert_eq!(chain(11, 12, 90), 11);
        assert_eq!(chain(12, 12, 90), 12);
        // d = 100 at 90%: floor 90, ten at a time.
        assert_eq!(chain(25, 100, 90), 3);
        assert_eq!(chain(20, 100, 90), 2);
        // d = 6 at 50%: floor 3, three at a time.
        assert_eq!(chain(6, 6, 50), 2);
        // One wave or none: no chain.
        assert_eq!(chain(10, 100, 90), 0);
        assert_eq!(chain(1, 1, 90), 0);
        assert_eq!(chain(0, 12, 90), 0);
        // Scaled to zero.
        assert_eq!(chain(3, 0, 90), 0);
    }

    #[test]
    fn split_respects_slots() {
        assert_eq!(split(vec![1, 2, 3], 2), (vec![1, 2], vec![3]));
        assert_eq!(split(vec![1], 2), (vec![1], vec![]));
        assert_eq!(split::<u8>(vec![], 1), (vec![], vec![]));
    }
}
