//! Pods that crash-loop, as a kubelet reports them: phase Running, the container waiting in
//! `CrashLoopBackOff`, never Ready. KWOK has no such stage: it makes a pod Running and Ready, or,
//! with a [`READY_DELAY_ANNOTATION`] of `100h` in its template, leaves it Pending (as an image that
//! cannot be pulled). [`CrashLoop`] turns each such pod, once scheduled, into a crash-looping one;
//! the difference matters to the Eviction API, which checks no budget for a Pending pod but applies
//! `unhealthyPodEvictionPolicy` to a Running pod that is not Ready.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tokio::task::JoinHandle;

pub use k8sm_testcluster::READY_DELAY_ANNOTATION;

/// A ready delay that no test outlives: KWOK never makes the pod Ready.
pub const NEVER: &str = "100h";

/// Makes the scheduled, Pending pods of a namespace that match a label selector crash-loop, until
/// dropped.
pub struct CrashLoop {
    task: JoinHandle<()>,
}

impl CrashLoop {
    /// Watches (by polling) the pods of `namespace` that match `selector`, such as `app=crashing`;
    /// their template must carry the [`READY_DELAY_ANNOTATION`] [`NEVER`], else KWOK makes them
    /// Ready first.
    pub fn start(client: &Client, namespace: &str, selector: &str) -> Self {
        Self::spawn(client, namespace, selector, None)
    }

    /// [`CrashLoop::start`], for pods that have been crash-looping since `since` (long before the
    /// test: their Ready condition changed then), as in a cluster where a broken app has been
    /// left alone for hours.
    pub fn start_since(
        client: &Client,
        namespace: &str,
        selector: &str,
        since: chrono::DateTime<chrono::Utc>,
    ) -> Self {
        Self::spawn(client, namespace, selector, Some(since))
    }

    fn spawn(
        client: &Client,
        namespace: &str,
        selector: &str,
        since: Option<chrono::DateTime<chrono::Utc>>,
    ) -> Self {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let params = ListParams::default().labels(selector);
        let task = tokio::spawn(async move {
            loop {
                if let Ok(list) = pods.list(&params).await {
                    for pod in list.items.iter().filter(|p| needs_crash(p)) {
                        // A failure (the pod went meanwhile) is retried on the next round.
                        let _ = pods
                            .patch_status(
                                &pod.name_any(),
                                &PatchParams::default(),
                                &Patch::Merge(crash_status(pod, since)),
                            )
                            .await;
                    }
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
        Self { task }
    }
}

impl Drop for CrashLoop {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Scheduled, not terminating, and still Pending.
fn needs_crash(pod: &Pod) -> bool {
    let scheduled = pod.spec.as_ref().is_some_and(|s| s.node_name.is_some());
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    scheduled && pod.metadata.deletion_timestamp.is_none() && phase.is_none_or(|p| p == "Pending")
}

/// The status a kubelet reports of a pod whose container keeps crashing: Running, not Ready since
/// it was created (or since `since`).
fn crash_status(pod: &Pod, since: Option<chrono::DateTime<chrono::Utc>>) -> serde_json::Value {
    let created = json!(pod.metadata.creation_timestamp);
    let changed = since.map_or_else(|| created.clone(), |t| json!(t));
    let containers: Vec<serde_json::Value> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| {
            json!({
                "name": c.name,
                "image": c.image,
                "imageID": "",
                "ready": false,
                "started": false,
                "restartCount": 5,
                "state": { "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": "back-off 5m0s restarting failed container",
                } },
            })
        })
        .collect();
    let not_ready = |type_: &str| {
        json!({
            "type": type_,
            "status": "False",
            "reason": "ContainersNotReady",
            "message": "containers with unready status: [app]",
            "lastTransitionTime": changed,
        })
    };
    json!({ "status": {
        "phase": "Running",
        "startTime": created,
        "conditions": [
            { "type": "PodScheduled", "status": "True", "lastTransitionTime": created },
            { "type": "Initialized", "status": "True", "lastTransitionTime": created },
            not_ready("Ready"),
            not_ready("ContainersReady"),
        ],
        "containerStatuses": containers,
    } })
}
