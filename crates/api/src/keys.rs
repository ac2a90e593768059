//! The well-known keys of the contract on Node and Pod objects (docs/design.md §3).
//!
//! All upgrade state lives in the cluster under these keys, so the controller stays stateless:
//! after a crash it re-derives everything from them. They are public API: renaming one strands
//! every cluster that already carries it.

/// API group of the `ExecutorUpgradePolicy` CRD and prefix of every k8sm key.
pub const GROUP: &str = "k8s.mesosphere.io";

/// API version of the `ExecutorUpgradePolicy` CRD.
pub const VERSION: &str = "v1alpha1";

/// Node annotation written by the executor (or agent): the ID of the executor that runs on the node
/// now.
pub const EXECUTOR_ID_ANNOTATION: &str = "k8s.mesosphere.io/executor-id";

/// Node annotation written by the marker: RFC 3339 time at which the node was marked incompatible.
pub const INCOMPATIBLE_EXECUTOR_ANNOTATION: &str = "k8s.mesosphere.io/incompatible-executor";

/// Node label written by the marker, next to the annotation of the same key, so that watches can
/// select marked nodes server-side (annotations cannot be selected).
pub const INCOMPATIBLE_EXECUTOR_LABEL: &str = "k8s.mesosphere.io/incompatible-executor";

/// The only value of [`INCOMPATIBLE_EXECUTOR_LABEL`].
pub const INCOMPATIBLE_EXECUTOR_LABEL_VALUE: &str = "true";

/// Node annotation written by the controller: RFC 3339 time at which the executor was told to
/// terminate now.
pub const KAMIKAZE_ANNOTATION: &str = "k8s.mesosphere.io/kamikaze";

/// Audience of the ServiceAccount token that the controller presents with the `Http` kamikaze and
/// the agent verifies (a TokenReview for this audience). A token for it is useless against the
/// apiserver, whose audiences differ.
pub const KAMIKAZE_TOKEN_AUDIENCE: &str = "k8s.mesosphere.io/kamikaze";

/// Node annotation, written by the controller: RFC 3339 time at which the node was admitted into
/// one of the policy's `maxConcurrentNodes` drain slots. It is the admission record that survives a
/// controller restart, whether or not the node is cordoned.
pub const DRAINING_ANNOTATION: &str = "k8s.mesosphere.io/draining";

/// Node annotation, written by the controller with the kamikaze: the executor ID the node reported
/// when it was told to terminate (empty when none). A restart is recognised by a changed executor
/// ID even after the executor clears the kamikaze annotation.
pub const KAMIKAZE_EXECUTOR_ID_ANNOTATION: &str = "k8s.mesosphere.io/kamikaze-executor-id";

/// Node annotation, written by the controller with the kamikaze when the policy has a target: the
/// executor ID the node was told to restart into. A node that comes back on it after the target
/// moved (a hotfix release) restarted as told: it is simply incompatible with the new target and
/// goes round again, where any other ID means it came back wrong.
pub const KAMIKAZE_TARGET_ANNOTATION: &str = "k8s.mesosphere.io/kamikaze-target";

/// Node annotation written by the executor (or agent) when it obeys a kamikaze, before it restarts:
/// the value of the [`KAMIKAZE_ANNOTATION`] it obeyed (for the `Http` mechanism, the value the
/// controller POSTed, which it then writes as the kamikaze annotation). Written with a merge patch
/// conditional on the resourceVersion the executor read.
///
/// An executor obeys a given kamikaze once: a kamikaze whose value equals this one is never obeyed
/// again. An executor that starts and finds the kamikaze it obeyed, recorded (in
/// [`KAMIKAZE_EXECUTOR_ID_ANNOTATION`]) for its own ID, came back with its old executor: it removes
/// the kamikaze annotation to say so and leaves this key and the record in place. The controller
/// reads "kamikaze gone, record present, node still reports the recorded ID" as a node that
/// came back with its old executor.
pub const KAMIKAZE_OBEYED_ANNOTATION: &str = "k8s.mesosphere.io/kamikaze-obeyed";

/// Node annotation written by the controller while a node drains: `<RFC 3339 time> <pods left>`,
/// the last time the count of pods left on the node went down, and that count. A node with no
/// progress for the policy's `nodeProgressDeadline` gives up its drain slot.
pub const DRAIN_PROGRESS_ANNOTATION: &str = "k8s.mesosphere.io/drain-progress";

/// Node annotation written by the controller when a draining node made no progress for
/// `nodeProgressDeadline` and gave up its drain slot: RFC 3339 time at which it did. Such a node is
/// admitted again after the nodes that never stalled.
pub const STALLED_ANNOTATION: &str = "k8s.mesosphere.io/stalled";

/// Node annotation written by the controller when it marked the node itself (its policy names a
/// target executor), so that handing the node back removes a mark k8sm set and never one that
/// another component set.
pub const MARKED_BY_ANNOTATION: &str = "k8s.mesosphere.io/marked-by";

/// The value of [`MARKED_BY_ANNOTATION`] (and of [`CORDONED_BY_ANNOTATION`]) that means "done by
/// k8sm".
pub const MARKED_BY_VALUE: &str = "k8sm";

/// Policy annotation that pauses the policy when `"true"`, beside `spec.paused`, set and removed by
/// `kubectl k8sm pause` and `resume`: an annotation that Helm or a GitOps tool does not own, so
/// they do not undo a pause on their next sync (`k8sm_api::PauseAnnotation`).
pub const PAUSE_ANNOTATION: &str = "k8s.mesosphere.io/paused";

/// Finalizer the controller puts on every `ExecutorUpgradePolicy`: deleting a policy first hands
/// its nodes back (removes the mark, taint, cordon and unobeyed kamikaze that k8sm put there), then
/// the controller removes it.
pub const POLICY_FINALIZER: &str = "k8s.mesosphere.io/release-nodes";

/// Node annotation written by the controller when it cordoned the node, so that it uncordons only
/// nodes it cordoned itself (never one an operator cordoned by hand).
pub const CORDONED_BY_ANNOTATION: &str = "k8s.mesosphere.io/cordoned-by";

/// The value of [`CORDONED_BY_ANNOTATION`] that means "cordoned by k8sm".
pub const CORDONED_BY_VALUE: &str = "k8sm";

/// Node or Pod label set by an operator: k8sm never drains this node / never deletes or evicts this
/// pod.
pub const UPGRADE_OPT_OUT_LABEL: &str = "k8s.mesosphere.io/upgrade-opt-out";

/// The value of [`UPGRADE_OPT_OUT_LABEL`] that opts out. Any other value does not.
pub const UPGRADE_OPT_OUT_VALUE: &str = "true";

/// Key of the taint that the marker puts on incompatible nodes, so that replacement pods prefer
/// upgraded nodes and a pod is disrupted once rather than once per old node.
pub const INCOMPATIBLE_EXECUTOR_TAINT_KEY: &str = "k8s.mesosphere.io/incompatible-executor";

/// Effect of the incompatible-executor taint: a preference, never a hard constraint, so scheduling
/// never stalls.
pub const INCOMPATIBLE_EXECUTOR_TAINT_EFFECT: &str = "PreferNoSchedule";

/// Pod annotation of Karpenter: a pod with value [`KARPENTER_DO_NOT_DISRUPT_VALUE`] counts as opted
/// out.
pub const KARPENTER_DO_NOT_DISRUPT_ANNOTATION: &str = "karpenter.sh/do-not-disrupt";

/// The value of [`KARPENTER_DO_NOT_DISRUPT_ANNOTATION`] that opts a pod out.
pub const KARPENTER_DO_NOT_DISRUPT_VALUE: &str = "true";

/// Pod annotation of the cluster autoscaler: a pod with value
/// [`CLUSTER_AUTOSCALER_SAFE_TO_EVICT_VALUE`] counts as opted out.
pub const CLUSTER_AUTOSCALER_SAFE_TO_EVICT_ANNOTATION: &str =
    "cluster-autoscaler.kubernetes.io/safe-to-evict";

/// The value of [`CLUSTER_AUTOSCALER_SAFE_TO_EVICT_ANNOTATION`] that opts a pod out.
pub const CLUSTER_AUTOSCALER_SAFE_TO_EVICT_VALUE: &str = "false";

/// Node annotation that `kubectl k8sm force` writes when an operator forces a node on: `<RFC 3339
/// time> <user>: <what>`. The controller copies it into the upgrade report (who forced what, when);
/// the node's completion removes it.
pub const FORCED_ANNOTATION: &str = "k8s.mesosphere.io/forced";

/// Deployment annotation by which a workload chooses how its single pod moves, whatever its policy
/// says: `SingleReplica` (a surge rollout) or `Never` (eviction); see `spec.workloads.surge`.
pub const SURGE_ANNOTATION: &str = "k8s.mesosphere.io/surge";

/// Deployment annotation that k8sm writes when it starts a surge rollout to move a pod: `<RFC 3339
/// time> <pod UID>`. It tells the next passes (of any replica, after any restart) that the move is
/// under way, and since when.
pub const SURGE_MOVE_ANNOTATION: &str = "k8s.mesosphere.io/surge-move";

/// Pod template annotation that k8sm changes to start a surge rollout, as `kubectl rollout restart`
/// changes `kubectl.kubernetes.io/restartedAt`: RFC 3339 time.
pub const RESTARTED_AT_ANNOTATION: &str = "k8s.mesosphere.io/restarted-at";

/// Keys (and the value that means "opted out") by which neighbouring tools opt a pod out of
/// disruption. k8sm honours them as if they were [`UPGRADE_OPT_OUT_LABEL`].
// Both tools define these keys as pod annotations.
pub const NEIGHBOUR_OPT_OUT_KEYS: [(&str, &str); 2] = [
    (
        KARPENTER_DO_NOT_DISRUPT_ANNOTATION,
        KARPENTER_DO_NOT_DISRUPT_VALUE,
    ),
    (
        CLUSTER_AUTOSCALER_SAFE_TO_EVICT_ANNOTATION,
        CLUSTER_AUTOSCALER_SAFE_TO_EVICT_VALUE,
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k8sm_keys_live_in_the_group() {
        for key in [
            EXECUTOR_ID_ANNOTATION,
            INCOMPATIBLE_EXECUTOR_ANNOTATION,
            INCOMPATIBLE_EXECUTOR_LABEL,
            KAMIKAZE_ANNOTATION,
            DRAINING_ANNOTATION,
            KAMIKAZE_EXECUTOR_ID_ANNOTATION,
            KAMIKAZE_TARGET_ANNOTATION,
            KAMIKAZE_OBEYED_ANNOTATION,
            DRAIN_PROGRESS_ANNOTATION,
            STALLED_ANNOTATION,
            MARKED_BY_ANNOTATION,
            POLICY_FINALIZER,
            CORDONED_BY_ANNOTATION,
            UPGRADE_OPT_OUT_LABEL,
            INCOMPATIBLE_EXECUTOR_TAINT_KEY,
        ] {
            let (prefix, name) = key.split_once('/').expect("qualified key");
            assert_eq!(prefix, GROUP, "{key}");
            // A label/annotation name is at most 63 characters of [A-Za-z0-9._-].
            assert!(name.len() <= 63, "{key}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)),
                "{key}"
            );
        }
    }

    #[test]
    fn the_kamikaze_keys_are_the_documented_ones() {
        // Public API: the controller, the agent and executors of other vendors all read and write
        // these names.
        assert_eq!(KAMIKAZE_ANNOTATION, "k8s.mesosphere.io/kamikaze");
        assert_eq!(
            KAMIKAZE_EXECUTOR_ID_ANNOTATION,
            "k8s.mesosphere.io/kamikaze-executor-id"
        );
        assert_eq!(
            KAMIKAZE_OBEYED_ANNOTATION,
            "k8s.mesosphere.io/kamikaze-obeyed"
        );
    }

    #[test]
    fn neighbour_opt_out_keys_are_the_documented_ones() {
        assert_eq!(
            NEIGHBOUR_OPT_OUT_KEYS,
            [
                ("karpenter.sh/do-not-disrupt", "true"),
                ("cluster-autoscaler.kubernetes.io/safe-to-evict", "false")
            ]
        );
    }
}
