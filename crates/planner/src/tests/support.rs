//! What the two property suites (`props`: one plan over a random cluster; `sim`: plans over time in
//! a model cluster) share besides the oracle: the kinds of workload they generate, a random source
//! that replays from its seed, and a tally of the situations a sample of generated cases meets.

use std::{collections::BTreeMap, fmt::Debug};

use proptest::prelude::*;

use crate::OwnerKind;

/// The kind of a generated workload; `R` is the state of a Deployment's rollout, which each suite
/// models its own way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind<R> {
    Deployment(R),
    /// A kind k8sm knows whose object owns the pods itself and holds their `d`.
    Direct(Direct),
    /// A controller of a kind k8sm does not watch (absent from the view), owning its pods directly.
    Operator,
    /// ReplicaSets controlled by a kind k8sm does not watch (an Argo Rollout).
    OperatorReplicaSets,
}

/// The kinds k8sm knows that own their pods directly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Direct {
    /// A bare ReplicaSet: no controller of its own.
    ReplicaSet,
    ReplicationController,
    StatefulSet,
}

impl From<Direct> for OwnerKind {
    fn from(kind: Direct) -> Self {
        match kind {
            Direct::ReplicaSet => Self::ReplicaSet,
            Direct::ReplicationController => Self::ReplicationController,
            Direct::StatefulSet => Self::StatefulSet,
        }
    }
}

impl<R> Kind<R> {
    /// Known to k8sm, which reads its `d` from `spec.replicas`.
    pub(super) fn known(&self) -> bool {
        !matches!(self, Self::Operator | Self::OperatorReplicaSets)
    }
}

/// A kind of workload, Deployments (in a rollout state drawn from `rollout`) weighing most: they
/// are where judging a ReplicaSet alone goes wrong.
pub(super) fn arb_kind<R: Clone + Debug>(
    rollout: impl Strategy<Value = R>,
) -> impl Strategy<Value = Kind<R>> {
    prop_oneof![
        5 => rollout.prop_map(Kind::Deployment),
        1 => Just(Kind::Direct(Direct::ReplicaSet)),
        1 => Just(Kind::Direct(Direct::ReplicationController)),
        1 => Just(Kind::Direct(Direct::StatefulSet)),
        2 => Just(Kind::Operator),
        1 => Just(Kind::OperatorReplicaSets),
    ]
}

/// A tiny deterministic random source (xorshift), so a failing case replays from its seed.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub(super) fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n.max(1) as u64).unwrap()
    }

    /// True `percent` times in a hundred.
    pub(super) fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    /// Shuffles `items` (Fisher–Yates).
    pub(super) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// How often a sample of generated cases met each situation a suite's properties are about: the
/// properties are only as good as the cases they see.
#[derive(Debug, Default)]
pub(super) struct Tally(BTreeMap<&'static str, u32>);

impl Tally {
    /// Counts `what` when `hit`; names it either way, so that a situation never met is still
    /// listed.
    pub(super) fn saw(&mut self, what: &'static str, hit: bool) {
        *self.0.entry(what).or_default() += u32::from(hit);
    }

    /// How often `what` was met.
    pub(super) fn count(&self, what: &str) -> u32 {
        self.0.get(what).copied().unwrap_or(0)
    }

    /// Adds another tally's counts to this one.
    pub(super) fn add(&mut self, other: &Tally) {
        for (what, n) in &other.0 {
            *self.0.entry(what).or_default() += n;
        }
    }

    /// Panics unless `sample` met each of the `expected` situations at least once.
    pub(super) fn assert_all_met(&self, expected: usize, sample: &str) {
        let seen = &self.0;
        for (what, n) in seen {
            assert!(*n > 0, "never seen in {sample}: {what} ({seen:?})");
        }
        assert_eq!(
            seen.len(),
            expected,
            "situations named in {sample}: {seen:?}"
        );
    }
}
