//! The health rule of docs/design.md §5.3 ([`needed`], [`sla_floor`], [`judge`]) and the ledger
//! that applies it before each eviction of a pass. The ledger starts from the observed cluster and
//! counts every eviction planned in the same pass, so the SLA invariant holds however many pods of
//! one workload a single plan touches.

use crate::{
    Calls,
    index::{Index, PodCounts},
    model::collections::FastMap,
    objects::workload::Workload,
    rules::calls::CallCount,
};

/// `ceil(threshold * desired / 100)`: ready pods the workload must keep after an eviction.
pub fn needed(threshold: u8, desired: u32) -> u32 {
    let needed = (u64::from(threshold) * u64::from(desired)).div_ceil(100);
    u32::try_from(needed).unwrap_or(u32::MAX)
}

/// The SLA invariant's floor: `min(ceil(threshold * desired / 100), desired - 1)`. k8sm never takes
/// a workload's ready pods below it (failures that k8sm did not cause can).
pub fn sla_floor(threshold: u8, desired: u32) -> u32 {
    needed(threshold, desired).min(desired.saturating_sub(1))
}

/// A workload's health at one moment of a pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnerHealth {
    /// Desired replicas.
    pub desired: u32,
    /// Pods available (Ready, for `minReadySeconds` where the workload sets them) and neither
    /// terminating nor being evicted: what the bound is kept on.
    pub ready: u32,
    /// Pods Ready and not available yet, neither terminating nor being evicted.
    pub warming: u32,
    /// Pods terminating or being evicted (observed, in flight, or planned in this pass), and
    /// evicted pods that are gone but not replaced yet.
    pub going: u32,
    /// Its own controller is replacing pods (a Deployment's rollout under way:
    /// [`crate::OwnerView::replacing`]).
    pub replacing: bool,
}

/// How a pod stands for the rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodState {
    Ready,
    /// Not Ready for less than the bound after which it counts as broken: a replacement still
    /// starting, say.
    NotReady,
    /// Not Ready for longer than the bound (`nodeProgressDeadline`): crash-looping, or stuck on its
    /// image.
    Broken,
}

impl PodState {
    pub fn is_ready(self) -> bool {
        self == Self::Ready
    }
}

/// What the rule says about one pod of a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Evict; the workload keeps `ready_after` ready pods.
    Evict {
        /// Ready pods once the pod is gone.
        ready_after: u32,
        /// Allowed because the workload was fully ready, not because it has room above the
        /// threshold.
        fully_ready: bool,
    },
    /// The pod is not Ready and the workload is at or above its floor: moving the pod costs no
    /// readiness.
    EvictNotReady {
        /// Ready pods, before and after.
        ready: u32,
    },
    /// The pod is broken and the workload below its floor: moving it costs no readiness either, and
    /// holding it would hold its node for as long as the workload stays broken.
    EvictBroken {
        /// Ready pods, before and after.
        ready: u32,
    },
    /// The workload is scaled to zero: its controller removes the pod.
    ScaledToZero,
    /// Too few ready pods to lose one.
    Unhealthy,
    /// A Ready pod of a workload whose own controller is replacing pods (a rollout under way): two
    /// controllers removing Ready pods at once, neither seeing the other's deletion in time, is
    /// how a workload falls below its floor, so k8sm adds none while the rollout lasts.
    RollingOut,
}

/// The rule, exactly: for a Ready pod `r - 1 >= needed`, or `r >= d` with nothing going, and never
/// while the workload's own controller is replacing pods; for a pod that is not Ready, `r >=
/// min(needed, d - 1)` or the pod is broken, and while the workload's controller is replacing pods
/// `r - going - 1 >= min(needed, d - 1)`. A workload scaled to zero waits: its controller removes
/// its pods anyway, and an eviction would only race it. Owners that are not in the view are not
/// judged here: their pods wait (see `classify::Unmanaged::OwnerGone`).
pub fn judge(health: OwnerHealth, threshold: u8, pod: PodState) -> Verdict {
    if health.desired == 0 {
        return Verdict::ScaledToZero;
    }
    if !pod.is_ready() {
        let floor = sla_floor(threshold, health.desired);
        // During a rollout a pod that is not Ready may become Ready before its eviction lands, and
        // the rollout's controller, counting it available, removes a Ready pod of the old
        // version in exchange: each pod going may then cost one Ready pod
        // (docs/decisions/0008-defects-found-by-models-and-benchmarks.md).
        if health.replacing && health.ready < floor + health.going + 1 {
            return Verdict::RollingOut;
        }
        // Otherwise moving a pod that is not Ready costs no readiness.
        let ready = health.ready;
        return match pod {
            _ if ready >= floor => Verdict::EvictNotReady { ready },
            PodState::Broken => Verdict::EvictBroken { ready },
            _ => Verdict::Unhealthy,
        };
    }
    if health.replacing {
        return Verdict::RollingOut;
    }
    let needed = needed(threshold, health.desired);
    let ready_after = health.ready.saturating_sub(1);
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

/// Workload health and budget allowances, updated with every eviction planned in the pass. A
/// workload's health is computed from the view the first time the pass asks for it: only workloads
/// with pods on draining nodes are.
///
/// Looked up for every decided pod: by the workload's slot in the index, which numbers each
/// workload's key once, so that a lookup neither hashes nor compares its text; a workload asked for
/// without its slot is found by its key among the index's, and by the text itself only when the
/// index has no slot for it. Like the index, a ledger is for one pass over one view.
#[derive(Clone, Debug, Default)]
pub(crate) struct Ledger {
    /// Per workload, its health, at the slot its UID's copies point to.
    health: Vec<OwnerHealth>,
    /// Per workload (as `health`), evictions planned in this pass, and whether one of them was
    /// asked for against a budget that allows no disruption now: the API may refuse it, so no
    /// other pod of the workload goes in this pass (each eviction's count of Ready pods left
    /// would otherwise rest on one that may not happen).
    planned: Vec<(u32, bool)>,
    /// Per workload (as `health`), the Ready and warming pods the eviction asked for took from its
    /// health (see [`Self::health_beside_ask`]).
    ask_took: Vec<(u32, u32)>,
    /// Per UID of a workload the index has no slot for, its slot in `health`.
    by_uid: FastMap<String, u32>,
    /// Disruptions still allowed per budget, by its position in the index's budgets.
    pdbs: Vec<i64>,
    /// Per workload slot of the index, its slot in `health` (`u32::MAX`: not asked for yet): a
    /// pod's workload found without hashing anything (the index numbers each workload UID
    /// once).
    by_workload: Vec<u32>,
    /// The controller's calls the pass's evictions took.
    pub(crate) calls: CallCount,
}

impl Ledger {
    pub(crate) fn new(index: &Index) -> Self {
        let pdbs = index
            .pdbs
            .iter()
            .map(|p| i64::from(p.view.disruptions_allowed.max(0)))
            .collect();
        Self {
            pdbs,
            by_workload: vec![u32::MAX; index.workload_count()],
            ..Self::default()
        }
    }

    /// The ledger with the controller's `calls` to take.
    pub(crate) fn with_calls(self, calls: Option<&Calls>) -> Self {
        Self {
            calls: CallCount::new(calls),
            ..self
        }
    }

    /// The workload's health now, counting the evictions planned so far. `counts_for` is the slot
    /// of the workload in the index (`OnNode::counts_for`), or `u32::MAX` where not known.
    pub(crate) fn health(
        &mut self,
        workload: Workload,
        counts_for: u32,
        index: &Index,
    ) -> OwnerHealth {
        let slot = self.slot(workload, counts_for, index);
        self.health[slot]
    }

    /// The slot of the workload's health: by the workload's slot in the index (`counts_for`, or
    /// found by the workload's key where not known), else by its UID.
    fn slot(&mut self, workload: Workload, counts_for: u32, index: &Index) -> usize {
        let counts_for = if (counts_for as usize) < self.by_workload.len() {
            // Every test's pass checks that the index's slot stands for the workload's key.
            #[cfg(test)]
            assert_eq!(index.workload_slot(workload.key()), Some(counts_for));
            counts_for
        } else {
            index.workload_slot(workload.key()).unwrap_or(u32::MAX)
        };
        let Some(&known) = self.by_workload.get(counts_for as usize) else {
            return self.slot_by_uid(workload, counts_for, index);
        };
        if known != u32::MAX {
            return known as usize;
        }
        let slot = self.observe(workload, counts_for, index);
        self.by_workload[counts_for as usize] = slot;
        slot as usize
    }

    /// The slot of the health of a workload the index has no slot for, by its UID, observed from
    /// the view the first time it is asked for.
    fn slot_by_uid(&mut self, workload: Workload, counts_for: u32, index: &Index) -> usize {
        let uid = workload.key();
        let slot = match self.by_uid.get(uid) {
            Some(&slot) => slot,
            None => {
                let slot = self.observe(workload, counts_for, index);
                self.by_uid.insert(uid.to_owned(), slot);
                slot
            }
        };
        slot as usize
    }

    /// A new slot, with the workload's health observed from the view.
    fn observe(&mut self, workload: Workload, counts_for: u32, index: &Index) -> u32 {
        let slot = u32::try_from(self.health.len()).expect("fewer than 2^32 workloads");
        self.health.push(observe(workload, counts_for, index));
        self.planned.push((0, false));
        self.ask_took.push((0, 0));
        slot
    }

    /// Evictions of the workload planned so far in this pass, and whether one was asked for against
    /// an exhausted budget (see [`Self::record_ask`]).
    pub(crate) fn planned(
        &mut self,
        workload: Workload,
        counts_for: u32,
        index: &Index,
    ) -> (u32, bool) {
        let slot = self.slot(workload, counts_for, index);
        self.planned[slot]
    }

    /// The eviction just recorded for the workload was asked for against a budget that allows no
    /// disruption now; `before` is the workload's health before it was recorded.
    pub(crate) fn record_ask(
        &mut self,
        workload: Workload,
        counts_for: u32,
        index: &Index,
        before: OwnerHealth,
    ) {
        let slot = self.slot(workload, counts_for, index);
        self.planned[slot].1 = true;
        let now = self.health[slot];
        self.ask_took[slot] = (before.ready - now.ready, before.warming - now.warming);
    }

    /// The workload's health as a pod that is not Ready is judged on: counting the evictions
    /// planned so far but the one asked for against a budget that allows no disruption
    /// ([`Self::record_ask`]). The API may refuse that one, and such a pod's eviction does not
    /// wait for its answer: judged as if it were refused, the pod's eviction claims no more than
    /// it would alone (it takes no readiness either way).
    pub(crate) fn health_beside_ask(
        &mut self,
        workload: Workload,
        counts_for: u32,
        index: &Index,
    ) -> OwnerHealth {
        let slot = self.slot(workload, counts_for, index);
        let health = self.health[slot];
        if !self.planned[slot].1 {
            return health;
        }
        let (ready, warming) = self.ask_took[slot];
        OwnerHealth {
            ready: health.ready + ready,
            warming: health.warming + warming,
            going: health.going.saturating_sub(1),
            ..health
        }
    }

    /// Disruptions the budget still allows in this pass.
    pub(crate) fn pdb_allowance(&self, pdb: usize) -> i64 {
        self.pdbs.get(pdb).copied().unwrap_or(0)
    }

    /// Records a planned eviction of a pod of `workload` covered by `pdbs`, Ready or not, available
    /// or not.
    pub(crate) fn record_eviction(
        &mut self,
        workload: Workload,
        counts_for: u32,
        index: &Index,
        (pod_ready, pod_available): (bool, bool),
        pdbs: &[usize],
    ) {
        let slot = self.slot(workload, counts_for, index);
        self.planned[slot].0 += 1;
        let health = &mut self.health[slot];
        if pod_available {
            health.ready = health.ready.saturating_sub(1);
        } else if pod_ready {
            health.warming = health.warming.saturating_sub(1);
        }
        health.going += 1;
        for &pdb in pdbs {
            if let Some(allowed) = self.pdbs.get_mut(pdb) {
                *allowed -= 1;
            }
        }
    }
}

/// A workload's health as the view shows it (`counts_for`: as in [`Ledger::health`]).
fn observe(workload: Workload, counts_for: u32, index: &Index) -> OwnerHealth {
    // Neither looked up by UID when it can be helped: a large fleet's pass observes thousands of
    // workloads.
    let gone = if index.in_flight_gone.is_empty() {
        0
    } else {
        index
            .in_flight_gone
            .get(workload.key())
            .copied()
            .unwrap_or(0)
    };
    let pods = index.workload_counts(workload, counts_for);
    OwnerHealth {
        desired: desired_of(workload, pods, gone, index),
        ready: pods.ready,
        warming: pods.warming,
        // An eviction in flight whose pod already left the cache still means "not replaced yet".
        going: gone + pods.going,
        replacing: workload.replacing() && !pods.rollout_stalled,
    }
}

/// A workload's `d` as the view shows it (what [`Ledger::health`] starts from), given its pods from
/// the index: `spec.replicas` for a kind k8sm knows, without any lookup; for a controller of
/// another kind, its pods seen plus its evictions in flight whose pod is gone, or its remembered
/// size, whichever is larger.
pub(crate) fn desired(workload: Workload, pods: PodCounts, index: &Index) -> u32 {
    match workload.desired() {
        Some(d) => d,
        None => {
            let gone = index
                .in_flight_gone
                .get(workload.key())
                .copied()
                .unwrap_or(0);
            desired_of(workload, pods, gone, index)
        }
    }
}

fn desired_of(workload: Workload, pods: PodCounts, gone: u32, index: &Index) -> u32 {
    workload.desired().unwrap_or_else(|| {
        let remembered = index
            .observed_sizes
            .get(workload.key())
            .copied()
            .unwrap_or(0);
        (gone + pods.seen).max(remembered)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(ready: bool) -> PodState {
        if ready {
            PodState::Ready
        } else {
            PodState::NotReady
        }
    }

    fn health(desired: u32, ready: u32, going: u32) -> OwnerHealth {
        OwnerHealth {
            desired,
            ready,
            warming: 0,
            going,
            replacing: false,
        }
    }

    /// Two copies of one UID (controller references of an unknown kind that pods do not share) are
    /// one workload: an eviction recorded through one copy counts for a lookup through the
    /// other.
    #[test]
    fn ledger_shares_health_between_copies_of_a_uid() {
        use crate::{ClusterView, ControllerRef};
        let reference = |uid: &str| {
            ControllerRef::new("k", "kafka.strimzi.io/v1", "KafkaNodePool", "brokers", uid)
        };
        let (a, b, other) = (reference("uid-1"), reference("uid-1"), reference("uid-2"));
        let view = ClusterView::default();
        let mut pods = crate::objects::pod_cache::PodCache::default();
        let mut budgets = crate::objects::budgets::KeptBudgets::default();
        let mut tally = crate::index::tally::KeptTally::default();
        let index = Index::new(
            &view,
            &mut pods,
            &mut Default::default(),
            &mut budgets,
            &mut tally,
            crate::testing::t0(),
        );
        let mut ledger = Ledger::new(&index);
        let (wa, wb, wo) = (
            Workload::of_other(&a),
            Workload::of_other(&b),
            Workload::of_other(&other),
        );
        let start = ledger.health(wa, u32::MAX, &index);
        ledger.record_eviction(wb, u32::MAX, &index, (true, true), &[]);
        let after = ledger.health(wa, u32::MAX, &index);
        assert_eq!(after.going, start.going + 1);
        assert_eq!(ledger.health(wb, u32::MAX, &index), after);
        assert_eq!(ledger.health(wo, u32::MAX, &index), start);
        // A copy of the ledger goes on from where it was, apart from the original.
        let mut copy = ledger.clone();
        copy.record_eviction(wa, u32::MAX, &index, (false, false), &[]);
        assert_eq!(copy.health(wb, u32::MAX, &index).going, after.going + 1);
        assert_eq!(ledger.health(wb, u32::MAX, &index), after);
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
                "single replica, not ready: moving it costs nothing",
                90,
                health(1, 0, 0),
                false,
                EvictNotReady { ready: 0 },
            ),
            (
                "the only missing replica is the pod itself",
                90,
                health(10, 9, 0),
                false,
                EvictNotReady { ready: 9 },
            ),
            (
                "not ready, and another replica missing too: wait",
                90,
                health(10, 8, 0),
                false,
                Unhealthy,
            ),
            (
                "not ready, small workload at its floor while another pod terminates",
                90,
                health(3, 2, 1),
                false,
                EvictNotReady { ready: 2 },
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
                EvictNotReady { ready: 3 },
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
            assert_eq!(judge(h, t, state(pod_ready)), expected, "{name}");
        }
    }

    #[test]
    fn a_rollout_under_way_keeps_every_ready_pod_and_lets_the_others_go() {
        let rolling = OwnerHealth {
            replacing: true,
            ..health(4, 5, 0)
        };
        // 5 Ready of 4: by the count alone a Ready pod could go.
        assert!(matches!(
            judge(health(4, 5, 0), 90, PodState::Ready),
            Verdict::Evict { .. }
        ));
        assert_eq!(judge(rolling, 90, PodState::Ready), Verdict::RollingOut);
        assert_eq!(
            judge(rolling, 90, PodState::NotReady),
            Verdict::EvictNotReady { ready: 5 }
        );
        // Floor 3 of 4: with two pods going, a third that turned Ready meanwhile could leave 5 - 3
        // = 2.
        let two_going = OwnerHealth {
            going: 2,
            ..rolling
        };
        assert_eq!(
            judge(two_going, 90, PodState::NotReady),
            Verdict::RollingOut
        );
        assert_eq!(judge(two_going, 90, PodState::Broken), Verdict::RollingOut);
        let one_going = OwnerHealth {
            going: 1,
            ..rolling
        };
        assert_eq!(
            judge(one_going, 90, PodState::NotReady),
            Verdict::EvictNotReady { ready: 5 }
        );
    }

    /// While a rollout lasts, every pod that is going (and the one judged) may turn Ready and cost
    /// the workload a Ready pod in exchange: an allowed eviction of a pod that is not Ready
    /// keeps the floor even then.
    #[test]
    fn during_a_rollout_not_ready_pods_go_only_as_far_as_the_floor_allows_if_they_turn_ready() {
        for t in 1..=100u8 {
            for d in 1..=30 {
                for r in 0..=d + 2 {
                    for going in 0..=4 {
                        let rolling = OwnerHealth {
                            replacing: true,
                            ..health(d, r, going)
                        };
                        let verdicts =
                            [PodState::NotReady, PodState::Broken].map(|p| judge(rolling, t, p));
                        for verdict in verdicts {
                            let (Verdict::EvictNotReady { .. } | Verdict::EvictBroken { .. }) =
                                verdict
                            else {
                                continue;
                            };
                            let worst = r.checked_sub(going + 1);
                            assert!(
                                worst.is_some_and(|left| left >= sla_floor(t, d)),
                                "t={t} d={d} r={r} going={going}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn an_allowed_eviction_never_breaks_the_floor() {
        for t in 1..=100u8 {
            for d in 1..=30 {
                for r in 0..=d + 2 {
                    for going in 0..=2 {
                        for pod in [PodState::Ready, PodState::NotReady, PodState::Broken] {
                            // The oracle: the Ready pods left once the pod is gone, counted here.
                            let left = r - u32::from(pod.is_ready() && r > 0);
                            let why = format!("t={t} d={d} r={r} going={going} {pod:?}");
                            match judge(health(d, r, going), t, pod) {
                                Verdict::Evict { ready_after, .. } => {
                                    assert!(pod.is_ready());
                                    assert_eq!(ready_after, left);
                                }
                                Verdict::EvictNotReady { ready } => {
                                    assert!(!pod.is_ready());
                                    assert_eq!(ready, left);
                                }
                                // Below the floor already, and left there: moving it takes no Ready
                                // pod away.
                                Verdict::EvictBroken { ready } => {
                                    assert_eq!(pod, PodState::Broken, "{why}");
                                    assert_eq!((ready, left), (r, r), "{why}");
                                    assert!(r < sla_floor(t, d), "{why}");
                                    continue;
                                }
                                Verdict::Unhealthy
                                | Verdict::ScaledToZero
                                | Verdict::RollingOut => continue,
                            }
                            assert!(left >= sla_floor(t, d), "{why}");
                        }
                    }
                }
            }
        }
    }

    /// A broken pod goes whatever its workload's Ready count; a pod merely not Ready yet (a
    /// replacement starting) does not while the workload is below its floor.
    #[test]
    fn a_broken_pod_goes_below_the_floor_and_a_starting_one_does_not() {
        // A Deployment of 3 crash-looping: nothing Ready.
        assert_eq!(
            judge(health(3, 0, 0), 90, PodState::Broken),
            Verdict::EvictBroken { ready: 0 }
        );
        assert_eq!(
            judge(health(3, 0, 0), 90, PodState::NotReady),
            Verdict::Unhealthy
        );
        // At the floor, either may go.
        assert_eq!(
            judge(health(3, 2, 0), 90, PodState::NotReady),
            Verdict::EvictNotReady { ready: 2 }
        );
        assert_eq!(
            judge(health(3, 2, 0), 90, PodState::Broken),
            Verdict::EvictNotReady { ready: 2 }
        );
    }
}
