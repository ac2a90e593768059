//! What a pass writes once and shares among the pods it reports: the wait messages of the pods that
//! wait for the same thing, and the reference to each workload. A large fleet mid-upgrade has tens
//! of thousands of pods on its draining nodes, a few thousand workloads and distinct reasons to
//! wait; each is written once per pass.

use std::sync::Arc;

use crate::{
    OwnerKind,
    model::output::OwnerRef,
    model::pass_cache::{Memo, Text},
    objects::workload::Workload,
};

/// What a shared wait message says, in full: two waits with equal keys have equal messages.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) enum MessageKey {
    /// A pod waiting on its workload: the workload (its UID, kind and name), the policy whose
    /// threshold and deadline the message quotes (by the address of its spec), why, and the
    /// numbers the message quotes.
    Workload {
        uid: Text,
        kind: Text,
        name: Text,
        spec: usize,
        why: WaitsOn,
        ready: u32,
        desired: u32,
        going: u32,
    },
    /// A pod held back behind others on its node, saying what it waits for first.
    HeldBack(Text),
    /// A pod waiting on the budget at this position in the index's budgets.
    Budget(usize),
    /// A pod waiting for one of the controller's calls.
    Call,
}

/// Why a pod waits on its workload.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) enum WaitsOn {
    RollingOut,
    ScaledToZero,
    /// The workload is at or below what it needs, and the pod is Ready.
    Unhealthy,
    /// The workload is below its floor, and the pod is not Ready.
    BelowFloor,
    /// The pod moves by a surge rollout once the workload's last rollout is complete.
    SurgeAfterRollout,
}

/// What a pass has written so far.
#[derive(Default)]
pub(crate) struct SharedOutput {
    messages: Memo<MessageKey, Arc<str>>,
    /// By the workload's UID, kind and name.
    owners: Memo<(Text, Text, Text), OwnerRef>,
}

impl SharedOutput {
    /// The message for `key`: written before, or by `write` now and kept.
    pub(crate) fn message(&self, key: MessageKey, write: impl FnOnce() -> String) -> Arc<str> {
        // Every test's pass checks that the key says all the message does: a message kept is the
        // one its waiter would write.
        #[cfg(test)]
        {
            let written = write();
            let kept = self.messages.get_or(key, || written.as_str().into());
            assert_eq!(*kept, *written, "the message kept for {key:?}");
            kept
        }
        #[cfg(not(test))]
        self.messages.get_or(key, || write().into())
    }

    /// The reference to `workload`, sharing its name and UID with every other.
    pub(crate) fn owner(&self, workload: Workload) -> OwnerRef {
        let key = (
            Text::of(workload.key()),
            Text::of(workload.kind()),
            Text::of(workload.name()),
        );
        self.owners.get_or(key, || OwnerRef {
            kind: OwnerKind::from(workload.kind()),
            name: workload.name().into(),
            uid: workload.key().into(),
        })
    }
}
