//! Carrying out one action and reporting it: log, metrics, Event.

use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::ObjectRef;

use k8sm_planner::{Action, ActionKind, PodRef};

use crate::Error;
use crate::act::execute::{Cached, Executor, Outcome};
use crate::observe::stores::Stores;
use crate::report::events::EventSink;
use crate::report::metrics::Metrics;

/// What one action needs: the executor, and where to report it (Events, metrics; the stores for the
/// UIDs Events name). Borrowed from the controller for node writes, owned by the task of a launched
/// call.
pub(crate) type Crew<'a> = (&'a Executor, &'a EventSink, &'a Metrics, &'a Stores);

/// Executes `action` (about the cached `node`, if a node action) and, when done, reports it (log,
/// metrics, Event).
pub(crate) async fn carry_out(
    (executor, events, metrics, stores): Crew<'_>,
    action: &Action,
    node: Option<&Node>,
) -> Result<Outcome, Error> {
    let policy = stores.policies.get(&ObjectRef::new(&action.policy));
    let deployment = match &action.kind {
        ActionKind::Surge {
            pod, deployment, ..
        } => stores
            .deployments
            .get(&ObjectRef::new(&deployment.name).within(pod.namespace())),
        _ => None,
    };
    let cached = Cached {
        node,
        policy: policy.as_deref(),
        deployment: deployment.as_deref(),
    };
    let outcome = executor.execute(action, cached).await;
    if let Ok(Outcome::Done { .. }) = outcome {
        tracing::info!(
            node = action.kind.node(),
            reason = action.reason.as_str(),
            "{}",
            action.message
        );
        metrics.executed(action);
        events.action(action, stores).await;
    }
    outcome
}

/// The node a cached pod is bound to.
pub(crate) fn node_of(stores: &Stores, pod: &PodRef) -> Option<String> {
    stores
        .pods
        .view(pod.namespace(), pod.name())
        .and_then(|view| view.node_name.as_deref().map(str::to_owned))
}
