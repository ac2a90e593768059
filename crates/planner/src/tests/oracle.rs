//! The SLA rule of docs/design.md §5.3, restated for the property tests and judged against a
//! workload's *generated* truth (its desired count, Ready pods and pods going). Nothing here reads
//! what the plan reports about an eviction: a planner that judges the wrong workload reports
//! consistently wrong numbers, and an oracle built on them would agree with it. The arithmetic is
//! written out again rather than taken from `health`, so that a broken `needed` or `sla_floor`
//! cannot vouch for itself.

/// `ceil(t * d / 100)`: the Ready pods a workload keeps after evicting a Ready pod on room alone.
pub(super) fn needed(threshold: u8, desired: u32) -> u32 {
    (u32::from(threshold) * desired).div_ceil(100)
}

/// The SLA bound `min(ceil(t * d / 100), d - 1)`: k8sm never takes a workload's Ready pods below
/// it.
pub(super) fn bound(threshold: u8, desired: u32) -> u32 {
    needed(threshold, desired).min(desired.saturating_sub(1))
}

/// A workload as the test's world knows it before a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Truth {
    /// `d`: `spec.replicas` of the top-level workload (a Deployment for the pods of its
    /// ReplicaSets); for a controller of a kind k8sm does not know, the pods of it that are
    /// not finished plus its evictions in flight whose pod is gone (docs/design.md §5.3).
    pub(super) desired: u32,
    /// Pods Ready, not finished, neither terminating nor with an eviction in flight.
    pub(super) ready: u32,
    /// Pods with an eviction in flight, plus evictions in flight whose pod is gone (not replaced
    /// yet). A pod terminating on its own is gone, as the disruption controller counts it.
    pub(super) going: u32,
}

/// One eviction a plan makes of a workload's pod: whether the pod was Ready, and the threshold of
/// the policy of the node it is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Evicted {
    pub(super) ready: bool,
    /// Not Ready for longer than its policy's `nodeProgressDeadline`: it may go whatever the
    /// workload's Ready count.
    pub(super) broken: bool,
    pub(super) threshold: u8,
}

/// Whether a plan's evictions of one workload can be made one after the other so that each one is
/// allowed by the rule at its moment: a Ready pod when `r - 1 >= ceil(t * d)`, or as the very first
/// when the workload is fully ready (`r >= d`, nothing going); a pod that is not Ready when `r >=
/// min(ceil(t * d), d - 1)`, or at any time when it is broken (moving it costs no Ready pod). The
/// planner makes them in one such order; which one does not matter here, so any order is tried (in
/// effect: the best one).
///
/// The best order: not-Ready pods as early as they may go (first, or right after a fully-ready
/// first eviction, as evicting one makes the workload no longer fully ready), Ready pods with the
/// strictest threshold first.
pub(super) fn check(w: Truth, evicted: &[Evicted]) -> Result<(), String> {
    if evicted.is_empty() {
        return Ok(());
    }
    if w.desired == 0 {
        return Err(format!(
            "{} pods evicted of a workload scaled to 0 ({w:?})",
            evicted.len()
        ));
    }
    let d = w.desired;
    let r = i64::from(w.ready);
    let mut ready_needs: Vec<i64> = evicted
        .iter()
        .filter(|e| e.ready)
        .map(|e| i64::from(needed(e.threshold, d)))
        .collect();
    ready_needs.sort_unstable_by(|a, b| b.cmp(a));
    let not_ready_floor = evicted
        .iter()
        .filter(|e| !e.ready && !e.broken)
        .map(|e| i64::from(bound(e.threshold, d)))
        .max();
    // The k-th Ready eviction (from 1) leaves r - k Ready pods; on room alone that must be at least
    // its `needed`.
    let on_room = |needs: &[i64], already: i64| {
        needs
            .iter()
            .enumerate()
            .all(|(k, need)| r - already - 1 - k as i64 >= *need)
    };
    // Not-Ready pods first, then every Ready one on room.
    let plain = not_ready_floor.is_none_or(|f| r >= f) && on_room(&ready_needs, 0);
    // A Ready pod first because the workload is fully ready, then the rest.
    let fully_ready_first = !ready_needs.is_empty()
        && w.ready >= d
        && w.going == 0
        // Judged at r - 1: `r - 1 >= f`.
        && not_ready_floor.is_none_or(|f| r > f)
        && on_room(&ready_needs[1..], 1);
    if plain || fully_ready_first {
        return Ok(());
    }
    let ready_evicted = ready_needs.len();
    let thresholds: Vec<u8> = evicted.iter().map(|e| e.threshold).collect();
    Err(format!(
        "{} pods evicted ({ready_evicted} Ready) from a workload with d={d}, {} Ready, {} going: no order of them \
         keeps the rule (thresholds {thresholds:?}; it ends with {} Ready, bound {} at the lowest threshold)",
        evicted.len(),
        w.ready,
        w.going,
        r - ready_evicted as i64,
        thresholds.iter().map(|&t| bound(t, d)).min().unwrap_or(0),
    ))
}

/// The most pods a controller may lose in one plan at threshold `t` (for a controller of a kind
/// k8sm does not know: one at a time unless the threshold allows more): Ready pods on room (`r -
/// needed`), or one when it is fully ready; and its pods that are not Ready only while `r >=
/// bound`.
pub(super) fn most_evictions(w: Truth, threshold: u8) -> (u32, bool) {
    if w.desired == 0 {
        return (0, false);
    }
    let room = w.ready.saturating_sub(needed(threshold, w.desired));
    let fully_ready = w.ready >= w.desired && w.going == 0;
    let ready = if fully_ready { room.max(1) } else { room };
    (ready, w.ready >= bound(threshold, w.desired))
}

fn w(desired: u32, ready: u32, going: u32) -> Truth {
    Truth {
        desired,
        ready,
        going,
    }
}

fn ev(ready: bool, threshold: u8) -> Evicted {
    Evicted {
        ready,
        broken: false,
        threshold,
    }
}

#[test]
fn the_oracle_accepts_what_the_rule_allows_and_nothing_more() {
    // Paused 2+2 rollout of a Deployment of 4: one Ready pod may go (fully ready), not two.
    assert!(check(w(4, 4, 0), &[ev(true, 90)]).is_ok());
    assert!(check(w(4, 4, 0), &[ev(true, 90), ev(true, 90)]).is_err());
    // At threshold 50 the second has room: 4 - 2 >= 2.
    assert!(check(w(4, 4, 0), &[ev(true, 50), ev(true, 50)]).is_ok());
    // Stuck rollout: 3 of 4 Ready, bound 3.
    assert!(check(w(4, 3, 0), &[ev(true, 90)]).is_err());
    assert!(check(w(4, 3, 0), &[ev(false, 90)]).is_ok());
    assert!(check(w(4, 2, 0), &[ev(false, 90)]).is_err());
    // Broken pods go whatever the count: a Deployment of 3 crash-looping.
    let broken = Evicted {
        broken: true,
        ..ev(false, 90)
    };
    assert!(check(w(3, 0, 0), &[broken, broken, broken]).is_ok());
    assert!(check(w(3, 0, 0), &[broken, ev(false, 90)]).is_err());
    // Something going: not fully ready.
    assert!(check(w(3, 3, 1), &[ev(true, 90)]).is_err());
    // A not-Ready pod after a fully-ready first eviction judges at r - 1.
    assert!(check(w(3, 3, 0), &[ev(true, 90), ev(false, 90)]).is_ok());
    assert!(check(w(10, 10, 0), &[ev(true, 90), ev(false, 100)]).is_ok());
    assert!(check(w(10, 10, 0), &[ev(true, 90), ev(true, 90), ev(false, 100)]).is_err());
    // Mixed thresholds: the strictest goes first.
    assert!(check(w(10, 10, 0), &[ev(true, 10), ev(true, 90)]).is_ok());
    assert!(check(w(10, 10, 0), &[ev(true, 90), ev(true, 80)]).is_ok());
    assert!(check(w(10, 10, 0), &[ev(true, 90), ev(true, 85)]).is_err());
    assert!(check(w(0, 1, 0), &[ev(true, 1)]).is_err());
    assert_eq!(most_evictions(w(3, 3, 0), 90), (1, true));
    assert_eq!(most_evictions(w(3, 2, 1), 90), (0, true));
    assert_eq!(most_evictions(w(10, 10, 0), 50), (5, true));
}
