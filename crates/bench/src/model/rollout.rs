//! The rolling Deployment's rollout as kube-controller-manager plays it: the Deployment controller
//! sizes the new and the old ReplicaSet (`rolloutRolling`: scale the new one up within
//! `maxSurge`, the old ones down while `replicas − maxUnavailable` stay available), and each
//! ReplicaSet creates or deletes pods to its size. On the cluster the rollout keeps the
//! Deployment's Ready pods out of k8sm's reach until its old pods are gone (docs/design.md
//! §5.3), and a node that holds one waits: the model plays it so that its timings are the
//! cluster's.

/// A Deployment's `progressDeadlineSeconds` by default (the bench's rolling one keeps it).
pub const PROGRESS_DEADLINE: f64 = 600.0;

/// The sizes (`spec.replicas`) of a rolling Deployment's old and new ReplicaSet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rollout {
    pub old: u32,
    pub new: u32,
    /// What the planner's view last said: the Deployment's controller replaces pods itself.
    pub replacing: bool,
    /// When it last progressed (a ReplicaSet resized, a new pod available), seconds from the
    /// start: [`PROGRESS_DEADLINE`] later without progress, it is past its deadline.
    pub progressed_at: f64,
    /// The new ReplicaSet's available pods at the last sync.
    new_available: u32,
    max_surge: u32,
    max_unavailable: u32,
}

impl Rollout {
    /// A rollout of `desired` replicas starting: every pod is the old ReplicaSet's.
    /// `workload::ROLLING_MAX_SURGE_PERCENT` rounded up, `maxUnavailable` 0, as the bench's
    /// rolling Deployment has them.
    pub fn start(desired: u32) -> Self {
        Self {
            old: desired,
            new: 0,
            replacing: true,
            progressed_at: 0.0,
            new_available: 0,
            max_surge: (desired * crate::workload::ROLLING_MAX_SURGE_PERCENT).div_ceil(100),
            max_unavailable: 0,
        }
    }

    /// The Deployment controller's syncs until the sizes settle (each resize of a ReplicaSet
    /// triggers another sync within milliseconds), given the available pods of each ReplicaSet;
    /// whether the sizes changed.
    pub fn settle(&mut self, desired: u32, old_available: u32, new_available: u32) -> bool {
        let before = (self.old, self.new);
        loop {
            let last = (self.old, self.new);
            self.sync(desired, old_available.min(self.old), new_available);
            if (self.old, self.new) == last {
                return (self.old, self.new) != before;
            }
        }
    }

    /// Records a sync at `now` that `resized` a ReplicaSet, with `new_available` pods of the new
    /// one available; whether the Deployment's controller still replaces pods itself: old pods
    /// left, and progress within [`PROGRESS_DEADLINE`] (past it, k8sm no longer guards the
    /// rollout).
    pub fn progress(&mut self, now: f64, resized: bool, new_available: u32) -> bool {
        if resized || new_available > self.new_available {
            self.progressed_at = now;
        }
        self.new_available = new_available;
        self.old > 0 && now - self.progressed_at <= PROGRESS_DEADLINE
    }

    /// One sync of the Deployment controller, given the available (Ready, not terminating) pods
    /// of each ReplicaSet: the new one scaled up as far as `desired + maxSurge` allows, then the
    /// old one scaled down, its unavailable pods first, as far as `desired − maxUnavailable` stay
    /// available.
    fn sync(&mut self, desired: u32, old_available: u32, new_available: u32) {
        let max_total = desired + self.max_surge;
        let total = self.old + self.new;
        if self.new < desired && total < max_total {
            self.new += (max_total - total).min(desired - self.new);
        }
        if self.old == 0 {
            return;
        }
        let min_available = desired.saturating_sub(self.max_unavailable);
        let new_unavailable = self.new.saturating_sub(new_available);
        let mut room =
            i64::from(self.old + self.new) - i64::from(min_available) - i64::from(new_unavailable);
        if room <= 0 {
            return;
        }
        // Old pods that are not available go first: scaling them down costs no availability.
        let unhealthy = self.old.saturating_sub(old_available);
        let old_available = old_available.min(self.old);
        let cleaned = unhealthy.min(u32::try_from(room).unwrap_or(u32::MAX));
        self.old -= cleaned;
        room -= i64::from(cleaned);
        if room <= 0 || self.old == 0 {
            return;
        }
        let available = old_available + new_available;
        if available <= min_available {
            return;
        }
        self.old -= (available - min_available).min(self.old);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 14 replicas, maxSurge 25 % (4), maxUnavailable 0, as `kubectl rollout` shows it: four new
    /// pods at a time, and four old ones go each time four new ones are available.
    #[test]
    fn fourteen_replicas_roll_four_at_a_time() {
        let mut r = Rollout::start(14);
        assert_eq!(r.max_surge, 4);
        r.sync(14, 14, 0);
        assert_eq!((r.old, r.new), (14, 4));
        // Nothing new available yet: every old pod stays.
        r.sync(14, 14, 0);
        assert_eq!((r.old, r.new), (14, 4));
        // Four available: four old ones go; the next sync grows the new one to 18 in all again.
        r.sync(14, 14, 4);
        assert_eq!((r.old, r.new), (10, 4));
        r.sync(14, 10, 4);
        assert_eq!((r.old, r.new), (10, 8));
        r.sync(14, 10, 8);
        assert_eq!((r.old, r.new), (6, 8));
        r.sync(14, 6, 8);
        assert_eq!((r.old, r.new), (6, 12));
        r.sync(14, 6, 12);
        assert_eq!((r.old, r.new), (2, 12));
        r.sync(14, 2, 12);
        assert_eq!((r.old, r.new), (2, 14));
        r.sync(14, 2, 14);
        assert_eq!((r.old, r.new), (0, 14));
    }

    /// Settled, one step of the rollout per change of availability.
    #[test]
    fn a_settled_rollout_scales_the_new_set_up_as_soon_as_old_pods_go() {
        let mut r = Rollout::start(14);
        assert!(r.settle(14, 14, 0));
        assert_eq!((r.old, r.new), (14, 4));
        assert!(!r.settle(14, 14, 0));
        assert!(r.settle(14, 14, 4));
        assert_eq!((r.old, r.new), (10, 8));
        assert!(r.settle(14, 10, 8));
        assert_eq!((r.old, r.new), (6, 12));
        assert!(r.settle(14, 6, 12));
        assert_eq!((r.old, r.new), (2, 14));
        assert!(r.settle(14, 2, 14));
        assert_eq!((r.old, r.new), (0, 14));
    }

    /// Past its progress deadline with old pods left, the Deployment is no longer guarded; any
    /// progress restarts the clock, and with no old pod left it replaces nothing.
    #[test]
    fn a_rollout_stuck_past_its_deadline_no_longer_replaces_pods() {
        let mut r = Rollout::start(14);
        let resized = r.settle(14, 14, 0);
        assert!(r.progress(0.0, resized, 0));
        assert!(r.progress(PROGRESS_DEADLINE, false, 0));
        assert!(!r.progress(PROGRESS_DEADLINE + 1.0, false, 0));
        // A new pod available is progress.
        assert!(r.progress(PROGRESS_DEADLINE + 2.0, false, 1));
        r.old = 0;
        assert!(!r.progress(PROGRESS_DEADLINE + 3.0, true, 14));
    }

    /// An old pod evicted (not available while its replacement starts) is scaled away first, and
    /// no available pod goes while the Deployment is at `desired` available.
    #[test]
    fn unavailable_old_pods_go_first_and_availability_never_drops() {
        let mut r = Rollout {
            old: 14,
            new: 4,
            replacing: true,
            progressed_at: 0.0,
            new_available: 0,
            max_surge: 4,
            max_unavailable: 0,
        };
        // 13 old available (one evicted), 1 new available: 14 available, room 18 − 14 − 3 = 1,
        // taken by the unavailable old pod.
        r.sync(14, 13, 1);
        assert_eq!((r.old, r.new), (13, 4));
        // One under the surge's total: the new one grows by one; then 13 old and 2 new available,
        // one more than needed, so one old one goes.
        r.sync(14, 13, 2);
        assert_eq!((r.old, r.new), (12, 5));
        // 12 old and 2 new available: exactly 14, so nothing old goes.
        r.sync(14, 12, 2);
        assert_eq!((r.old, r.new), (12, 6));
    }
}
