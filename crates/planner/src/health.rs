//! The owner health rule of DESIGN.md §5.3, and the ledger that applies it before each eviction of a pass.
//!
//! With `d` desired replicas, `r` pods ready and not terminating (nor being evicted), and threshold `t` percent, a
//! pod may be evicted iff `r - 1 >= ceil(t * d / 100)`, or the owner is fully ready (`r >= d` and none of its pods
//! terminating or being evicted). The ledger starts from the observed cluster and counts each eviction planned in the
//! same pass, so the rule holds however many pods of one owner a single plan touches. Consequence (the SLA
//! invariant): k8sm never takes an owner below `min(ceil(t * d / 100), d - 1)` ready pods.
//!
//! Owners scaled to zero (`d = 0`): their pods are being removed by their controller anyway, so they wait (evicting
//! them would only race the controller). Owners that are not in the view are not judged here: their pods wait (see
//! `classify::Unmanaged::OwnerGone`).

use std::collections::BTreeMap;

use crate::{
    OwnerView,
    index::{FastMap, Index},
};

/// `ceil(threshold * desired / 100)`: ready pods the owner must keep after an eviction.
pub fn needed(threshold: u8, desired: u32) -> u32 {
    let needed = (u64::from(threshold) * u64::from(desired)).div_ceil(100);
    u32::try_from(needed).unwrap_or(u32::MAX)
}

/// The SLA invariant's floor: `min(ceil(threshold * desired / 100), desired - 1)`. k8sm never takes an owner's
/// ready pods below it (failures that k8sm did not cause can).
pub fn sla_floor(threshold: u8, desired: u32) -> u32 {
    needed(threshold, desired).min(desired.saturating_sub(1))
}

/// An owner's health at one moment of a pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnerHealth {
    /// Desired replicas.
    pub desired: u32,
    /// Pods ready and neither terminating nor being evicted.
    pub ready: u32,
    /// Pods terminating or being evicted (observed, in flight, or planned in this pass). For in-flight evictions
    /// whose pod is no longer in the view this is a lower bound: at least one.
    pub going: u32,
}

/// What the rule says about one pod of an owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Evict; the owner keeps `ready_after` ready pods.
    Evict {
        /// Ready pods once the pod is gone.
        ready_after: u32,
        /// Allowed because the owner was fully ready, not because it has room above the threshold.
        fully_ready: bool,
    },
    /// The owner is scaled to zero: its controller removes the pod.
    ScaledToZero,
    /// Too few ready pods to lose one.
    Unhealthy,
}

/// The rule, exactly: `r - 1 >= needed`, or `r >= d` with nothing terminating.
pub fn judge(health: OwnerHealth, threshold: u8, pod_ready: bool) -> Verdict {
    if health.desired == 0 {
        return Verdict::ScaledToZero;
    }
    let needed = needed(threshold, health.desired);
    let ready_after = health.ready - u32::from(pod_ready && health.ready > 0);
    // `r - 1 >= needed`, written without the subtraction.
    if health.ready > needed {
        Verdict::Evict {
            ready_after,
            fully_ready: false,
        }
    } else if health.ready >= health.desired && health.going == 0 {
        Verdict::Evict {
            ready_after,
            fully_ready: true,
        }
    } else {
        Verdict::Unhealthy
    }
}

/// Owner health and budget allowances, updated with every eviction planned in the pass.
#[derive(Clone, Debug, Default)]
pub(crate) struct Ledger {
    owners: FastMap<String, OwnerHealth>,
    /// Disruptions still allowed per budget (namespace, name).
    pdbs: BTreeMap<(String, String), i64>,
}

impl Ledger {
    pub(crate) fn new(index: &Index) -> Self {
        let owners = index
            .owners
            .values()
            .filter(|o| o.kind.is_replicated())
            .map(|&owner| {
                let mut health = OwnerHealth {
                    desired: desired(owner),
                    ready: 0,
                    going: 0,
                };
                for pod in index
                    .pods_by_owner
                    .get(owner.uid.as_str())
                    .into_iter()
                    .flatten()
                {
                    if index.is_going(pod) {
                        health.going += 1;
                    } else if pod.ready {
                        health.ready += 1;
                    }
                }
                // An eviction in flight whose pod already left the cache still means "not replaced yet".
                if health.going == 0 && index.in_flight_owners.contains(owner.uid.as_str()) {
                    health.going = 1;
                }
                (owner.uid.clone(), health)
            })
            .collect();
        let pdbs = index
            .pdbs
            .iter()
            .map(|p| (p.key(), i64::from(p.view.disruptions_allowed.max(0))))
            .collect();
        Self { owners, pdbs }
    }

    /// The owner's health now, counting the evictions planned so far.
    pub(crate) fn health(&self, owner: &OwnerView) -> OwnerHealth {
        self.owners.get(&owner.uid).copied().unwrap_or(OwnerHealth {
            desired: desired(owner),
            ready: 0,
            going: 0,
        })
    }

    /// Disruptions the budget still allows in this pass.
    pub(crate) fn pdb_allowance(&self, key: &(String, String)) -> i64 {
        self.pdbs.get(key).copied().unwrap_or(0)
    }

    /// Records a planned eviction of a pod of `owner` covered by `pdbs`.
    pub(crate) fn record_eviction(
        &mut self,
        owner: &OwnerView,
        pod_ready: bool,
        pdbs: &[(String, String)],
    ) {
        let mut health = self.health(owner);
        if pod_ready {
            health.ready = health.ready.saturating_sub(1);
        }
        health.going += 1;
        self.owners.insert(owner.uid.clone(), health);
        for key in pdbs {
            *self.pdbs.entry(key.clone()).or_default() -= 1;
        }
    }
}

/// Desired replicas of a replicated owner; an unset `replicas` is the apiserver default, 1.
fn desired(owner: &OwnerView) -> u32 {
    owner.desired.unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn health(desired: u32, ready: u32, going: u32) -> OwnerHealth {
        OwnerHealth {
            desired,
            ready,
            going,
        }
    }

    #[test]
    fn needed_rounds_up() {
        let cases = [
            (90, 10, 9),
            (90, 3, 3),
            (90, 1, 1),
            (50, 3, 2),
            (1, 1, 1),
            (100, 7, 7),
            (34, 3, 2),
            (90, 0, 0),
        ];
        for (t, d, expected) in cases {
            assert_eq!(needed(t, d), expected, "t={t} d={d}");
        }
    }

    #[test]
    fn sla_floor_is_min_of_needed_and_one_less_than_desired() {
        assert_eq!(sla_floor(90, 10), 9);
        assert_eq!(sla_floor(90, 3), 2);
        assert_eq!(sla_floor(100, 1), 0);
        assert_eq!(sla_floor(50, 4), 2);
        assert_eq!(sla_floor(90, 0), 0);
    }

    #[test]
    fn rule_table() {
        use Verdict::*;
        let evict = |ready_after, fully_ready| Evict {
            ready_after,
            fully_ready,
        };
        // (name, threshold, health, pod ready, verdict)
        let cases = [
            (
                "room above the threshold",
                90,
                health(20, 20, 1),
                true,
                evict(19, false),
            ),
            (
                "exactly one above",
                90,
                health(10, 10, 0),
                true,
                evict(9, false),
            ),
            (
                "at the threshold: wait",
                90,
                health(10, 9, 0),
                true,
                Unhealthy,
            ),
            (
                "below the threshold: wait",
                90,
                health(10, 8, 0),
                true,
                Unhealthy,
            ),
            (
                "small owner, fully ready: one at a time",
                90,
                health(3, 3, 0),
                true,
                evict(2, true),
            ),
            (
                "small owner, one terminating: wait",
                90,
                health(3, 3, 1),
                true,
                Unhealthy,
            ),
            (
                "small owner, one missing: wait",
                90,
                health(3, 2, 0),
                true,
                Unhealthy,
            ),
            (
                "single replica, fully ready",
                90,
                health(1, 1, 0),
                true,
                evict(0, true),
            ),
            (
                "single replica, not ready",
                90,
                health(1, 0, 0),
                false,
                Unhealthy,
            ),
            (
                "surge above desired",
                100,
                health(3, 4, 0),
                true,
                evict(3, false),
            ),
            ("low threshold", 50, health(4, 3, 1), true, evict(2, false)),
            (
                "not-ready pod keeps ready count",
                50,
                health(4, 3, 1),
                false,
                evict(3, false),
            ),
            (
                "threshold 100, fully ready",
                100,
                health(5, 5, 0),
                true,
                evict(4, true),
            ),
            (
                "threshold 100, one down",
                100,
                health(5, 4, 0),
                true,
                Unhealthy,
            ),
            ("scaled to zero", 90, health(0, 1, 0), true, ScaledToZero),
            ("nothing ready", 1, health(5, 0, 0), false, Unhealthy),
        ];
        for (name, t, h, pod_ready, expected) in cases {
            assert_eq!(judge(h, t, pod_ready), expected, "{name}");
        }
    }

    #[test]
    fn an_allowed_eviction_never_breaks_the_floor() {
        for t in 1..=100u8 {
            for d in 1..=30 {
                for r in 0..=d + 2 {
                    for going in 0..=2 {
                        if let Verdict::Evict { ready_after, .. } =
                            judge(health(d, r, going), t, true)
                        {
                            assert!(
                                ready_after >= sla_floor(t, d),
                                "t={t} d={d} r={r} going={going}"
                            );
                        }
                    }
                }
            }
        }
    }
}
