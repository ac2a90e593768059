//! `Reason`: the bounded, machine-readable why of every decision. Events, status and the plugin all
//! reuse it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why the planner decided something. One-to-one with the Event reasons of docs/design.md §5.5,
/// plus a few that the design leaves implicit. The names are public API (Event reasons, condition
/// reasons, metric labels): never build one from an object name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Reason {
    /// A node was marked incompatible (or its mark was completed: annotation, label, taint).
    Marked,
    /// A node was admitted into a drain slot and cordoned.
    Cordoned,
    /// A node was admitted into a drain slot without cordoning (policy `cordon: false`, or already
    /// unschedulable).
    Admitted,
    /// A pod was evicted; the message carries the owner's ready count before and after, and the
    /// threshold.
    Evicted,
    /// A surge rollout of a single-replica Deployment was started to move its pod
    /// (`spec.workloads.surge`): the new pod starts elsewhere and the old one goes once it is
    /// available.
    Moved,
    /// A pod waits while the surge rollout that moves it brings up its replacement (at most
    /// `nodeProgressDeadline`, then it is evicted), or for its node's cordon before that
    /// rollout starts.
    Moving,
    /// A pod waits until its owner is healthy enough to lose it.
    WaitingForOwner,
    /// A Job pod waits for its Job to complete (or for the unmanaged-pod timeout).
    WaitingForJob,
    /// An unmanaged pod waits for the `DeleteAfterTimeout` timeout, or for owned pods of its node
    /// to move first.
    WaitingForTimeout,
    /// A terminating pod has not gone yet; the node is not drained before it has.
    WaitingForTermination,
    /// A draining node waits for a free drain slot (after `maxConcurrentNodes` was lowered, or
    /// after it was blocked).
    WaitingForSlot,
    /// A node to drain waits for room: the nodes k8sm will not drain cannot take its pods yet
    /// beside those of the nodes in progress (admission paced by room, so that replacements
    /// land once). On a pod: a broken pod leaves the room its node's Ready pods need to them
    /// first.
    WaitingForRoom,
    /// A pod could go now, and every call the controller may run at once is taken: it goes as
    /// one frees up (the controller's limit holds it, not its node).
    WaitingForCall,
    /// A PodDisruptionBudget allows no disruption now (or the Eviction API refused with 429).
    BlockedByPDB,
    /// An unmanaged pod blocks its node until an operator deletes it.
    BlockedUnmanagedPod,
    /// An opted-out pod, or an opted-out node.
    BlockedOptOut,
    /// An unmanaged pod was deleted.
    DeletedUnmanagedPod,
    /// A finished (Succeeded or Failed) pod was deleted.
    DeletedFinishedPod,
    /// The executor of a drained node was told to terminate.
    KamikazeSent,
    /// A node came back with the target executor: its upgrade state was removed.
    Upgraded,
    /// A node's mark was removed by someone else mid-upgrade: k8sm removed its own state and
    /// uncordoned it.
    Released,
    /// A node did not come back with a new executor within `restartTimeout`.
    RestartOverdue,
    /// The policy is paused: no eviction, deletion, cordon or kamikaze.
    Paused,
    /// The policy's maintenance window is closed: no node is admitted and no executor told to
    /// restart until it opens (nodes already draining finish, or wait with `inFlight: Hold`).
    OutsideWindow,
    /// An operator forced a pod deletion with the plugin (emitted by the plugin, never by the
    /// planner).
    Forced,
    /// Another policy selects the same node; neither acts on it.
    PolicyConflict,
    /// The policy selects no node.
    NoNodesSelected,
    /// The policy cannot be applied as written (a bad selector, a missing timeout or URL template).
    InvalidPolicy,
    /// The policy POSTs the Http kamikaze over plain http:// (`kamikaze.allowInsecureHttp`): the controller's token
    /// crosses the network unencrypted. A warning only; nothing waits for it.
    InsecureKamikaze,
    /// A k8sm annotation on a node cannot be read.
    MalformedAnnotation,
    /// The kamikaze URL needs the node's InternalIP address and the node has none.
    NodeAddressMissing,
    /// The kamikaze URL needs the node's InternalIP address and the node's is not an IP address a
    /// node can have (a host name, say): k8sm never POSTs to it.
    NodeAddressInvalid,
    /// A draining node made no progress for `nodeProgressDeadline`: it gave up its drain slot.
    Stalled,
    /// A node came back from kamikaze with an executor ID that is neither the target nor a new one
    /// (its old ID, or a third one): it is not told to terminate again until an operator acts.
    UnexpectedExecutor,
    /// A policy's finalizer was added, or removed once every node it held was handed back.
    Finalizer,
    /// A draining node's progress record was written (bookkeeping: no Event).
    DrainProgress,
    /// An action the controller carried out was refused or failed (an admission denial, a timeout,
    /// an error): it is retried with exponential backoff, and after a few failures in a row its
    /// pod or node is reported blocked. Reported by the controller, never planned.
    ActionFailed,
    /// A node is NotReady or unreachable, or reports no executor ID: it is not admitted and holds
    /// no drain slot until it is back (a node told to restart that does not come back is
    /// `RestartOverdue` instead, and keeps its slot).
    NodeNotReady,
    /// A pod has been terminating for longer than its grace period plus a minute: a finalizer holds
    /// it, or its kubelet is gone. Only its own node waits for it; an operator clears it
    /// (`kubectl k8sm force --terminating`).
    StuckTerminating,
    /// A pod whose replacement can only run on its node (a hostname node selector, a required node
    /// affinity or a local volume naming that node alone) keeps its node for an operator under
    /// `spec.workloads.pinnedPods: Block`.
    BlockedPinnedPod,
    /// A watch the planner depends on has been failing for longer than the controller's bound: it
    /// takes no action until the watch recovers (the policies' Degraded condition). Reported by
    /// the controller, never planned.
    WatchFailing,
}

impl Reason {
    /// Every reason.
    pub const ALL: [Self; 41] = [
        Self::Marked,
        Self::Cordoned,
        Self::Admitted,
        Self::Evicted,
        Self::Moved,
        Self::Moving,
        Self::WaitingForOwner,
        Self::WaitingForJob,
        Self::WaitingForTimeout,
        Self::WaitingForTermination,
        Self::WaitingForSlot,
        Self::WaitingForRoom,
        Self::WaitingForCall,
        Self::BlockedByPDB,
        Self::BlockedUnmanagedPod,
        Self::BlockedOptOut,
        Self::DeletedUnmanagedPod,
        Self::DeletedFinishedPod,
        Self::KamikazeSent,
        Self::Upgraded,
        Self::Released,
        Self::RestartOverdue,
        Self::Paused,
        Self::OutsideWindow,
        Self::Forced,
        Self::PolicyConflict,
        Self::NoNodesSelected,
        Self::InvalidPolicy,
        Self::InsecureKamikaze,
        Self::MalformedAnnotation,
        Self::NodeAddressMissing,
        Self::NodeAddressInvalid,
        Self::Stalled,
        Self::UnexpectedExecutor,
        Self::Finalizer,
        Self::DrainProgress,
        Self::ActionFailed,
        Self::NodeNotReady,
        Self::StuckTerminating,
        Self::BlockedPinnedPod,
        Self::WatchFailing,
    ];

    /// The name used in Events, conditions and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Marked => "Marked",
            Self::Cordoned => "Cordoned",
            Self::Admitted => "Admitted",
            Self::Evicted => "Evicted",
            Self::Moved => "Moved",
            Self::Moving => "Moving",
            Self::WaitingForOwner => "WaitingForOwner",
            Self::WaitingForJob => "WaitingForJob",
            Self::WaitingForTimeout => "WaitingForTimeout",
            Self::WaitingForTermination => "WaitingForTermination",
            Self::WaitingForSlot => "WaitingForSlot",
            Self::WaitingForRoom => "WaitingForRoom",
            Self::WaitingForCall => "WaitingForCall",
            Self::BlockedByPDB => "BlockedByPDB",
            Self::BlockedUnmanagedPod => "BlockedUnmanagedPod",
            Self::BlockedOptOut => "BlockedOptOut",
            Self::DeletedUnmanagedPod => "DeletedUnmanagedPod",
            Self::DeletedFinishedPod => "DeletedFinishedPod",
            Self::KamikazeSent => "KamikazeSent",
            Self::Upgraded => "Upgraded",
            Self::Released => "Released",
            Self::RestartOverdue => "RestartOverdue",
            Self::Paused => "Paused",
            Self::OutsideWindow => "OutsideWindow",
            Self::Forced => "Forced",
            Self::PolicyConflict => "PolicyConflict",
            Self::NoNodesSelected => "NoNodesSelected",
            Self::InvalidPolicy => "InvalidPolicy",
            Self::InsecureKamikaze => "InsecureKamikaze",
            Self::MalformedAnnotation => "MalformedAnnotation",
            Self::NodeAddressMissing => "NodeAddressMissing",
            Self::NodeAddressInvalid => "NodeAddressInvalid",
            Self::Stalled => "Stalled",
            Self::UnexpectedExecutor => "UnexpectedExecutor",
            Self::Finalizer => "Finalizer",
            Self::DrainProgress => "DrainProgress",
            Self::ActionFailed => "ActionFailed",
            Self::NodeNotReady => "NodeNotReady",
            Self::StuckTerminating => "StuckTerminating",
            Self::BlockedPinnedPod => "BlockedPinnedPod",
            Self::WatchFailing => "WatchFailing",
        }
    }

    /// Whether a node or pod that waits for this reason is *blocked*: it keeps its node from
    /// finishing and the wait does not end by itself within moments (unlike a pod terminating,
    /// a node waiting for a slot, or the pause). The one meaning of "blocked": status
    /// (`blockedPods`, the Blocked count), Events, metrics and `kubectl k8sm blocked` all ask
    /// this.
    pub fn blocks(self) -> bool {
        matches!(
            self,
            Self::WaitingForOwner
                | Self::WaitingForJob
                | Self::WaitingForTimeout
                | Self::BlockedByPDB
                | Self::BlockedUnmanagedPod
                | Self::BlockedOptOut
                | Self::RestartOverdue
                | Self::Stalled
                | Self::UnexpectedExecutor
                | Self::InvalidPolicy
                | Self::MalformedAnnotation
                | Self::NodeAddressMissing
                | Self::ActionFailed
                | Self::NodeAddressInvalid
                | Self::NodeNotReady
                | Self::StuckTerminating
                | Self::BlockedPinnedPod
        )
    }

    /// Whether only an operator can resolve it (shown in red by the plugin; a Warning Event).
    pub fn needs_operator(self) -> bool {
        matches!(
            self,
            Self::BlockedUnmanagedPod
                | Self::BlockedOptOut
                | Self::ActionFailed
                | Self::UnexpectedExecutor
                | Self::RestartOverdue
                | Self::InvalidPolicy
                | Self::MalformedAnnotation
                | Self::NodeAddressMissing
                | Self::NodeAddressInvalid
                | Self::NodeNotReady
                | Self::StuckTerminating
                | Self::BlockedPinnedPod
        )
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_serde_names_and_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for reason in Reason::ALL {
            assert_eq!(
                serde_json::to_string(&reason).unwrap(),
                format!("\"{reason}\"")
            );
            assert!(seen.insert(reason.as_str()), "{reason} twice");
            // Kubernetes requires CamelCase reasons of at most 128 characters.
            assert!(reason.as_str().chars().all(|c| c.is_ascii_alphanumeric()));
            assert!(
                reason
                    .as_str()
                    .starts_with(|c: char| c.is_ascii_uppercase())
            );
        }
    }

    #[test]
    fn the_design_event_reasons_are_all_there() {
        for name in [
            "Marked",
            "Cordoned",
            "Evicted",
            "WaitingForOwner",
            "BlockedByPDB",
            "BlockedUnmanagedPod",
            "BlockedOptOut",
            "DeletedUnmanagedPod",
            "KamikazeSent",
            "Upgraded",
            "RestartOverdue",
            "Paused",
            "Forced",
            "Stalled",
            "UnexpectedExecutor",
            "ActionFailed",
        ] {
            assert!(Reason::ALL.iter().any(|r| r.as_str() == name), "{name}");
        }
    }
}
