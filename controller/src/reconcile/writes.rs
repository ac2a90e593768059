//! A pass's writes to nodes, policies and Deployments, carried out in the background as one job
//! (docs/design.md §8), so that the loop goes on planning and launching evictions while they are on
//! their way (docs/decisions/0005-loop-under-load.md). One job at a time: a later pass plans on a
//! cache that does not show the job's writes yet (it would admit again, or into the slot the job
//! fills), so its writes, and the pods of a node the job writes ([`holds_pods`]), wait until the
//! job has answered and the cache shows them.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8sm_planner::{Action, ActionKind, ClusterView, Plan};
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::watch;
use tokio::task::{JoinError, JoinSet};

use super::batches::{AsAction, batch_len};
use super::carry_out::{carry_out, node_of};
use super::pass_result::Hold;
use crate::Error;
use crate::act::execute::{Executor, Outcome};
use crate::leadership::leader::Leadership;
use crate::observe::stores::Stores;
use crate::report::events::EventSink;
use crate::report::metrics::Metrics;

/// What one write needs, owned by the job: the executor, where to report it, and the caches.
pub(super) struct WriteCrew {
    pub executor: Executor,
    pub events: Arc<EventSink>,
    pub metrics: Arc<Metrics>,
    pub stores: Stores,
    /// Checked before each batch: a controller that lost its Lease, or was told to stop, writes no
    /// more.
    pub leadership: Leadership,
    pub stopping: watch::Receiver<bool>,
}

/// A node's resourceVersion as the plan saw it, by node name.
pub(super) type PlannedVersions = HashMap<String, String>;

/// The version of each node `plan` writes, as `view` (the plan's) holds it.
pub(super) fn planned_versions(view: &ClusterView, plan: &Plan) -> PlannedVersions {
    let written: HashSet<&str> = plan
        .actions
        .iter()
        .filter(|a| a.kind.pod().is_none())
        .filter_map(|a| a.kind.node())
        .collect();
    if written.is_empty() {
        return PlannedVersions::new();
    }
    view.nodes
        .iter()
        .filter(|n| written.contains(n.name.as_str()))
        .filter_map(|n| Some((n.name.clone(), n.resource_version.clone()?)))
        .collect()
}

/// One write of the job, with the version of its node that the plan saw.
#[derive(Clone)]
pub(super) struct NodeWrite {
    pub action: Action,
    pub planned_version: Option<String>,
}

impl AsAction for NodeWrite {
    fn action(&self) -> &Action {
        &self.action
    }
}

/// One write's answer.
pub(super) struct WriteAnswer {
    pub action: Action,
    /// The cached node it was about, as it was when the write started.
    pub node: Option<Arc<Node>>,
    /// For a surge move, the node its pod was on.
    pub pod_node: Option<String>,
    pub outcome: Result<Outcome, Error>,
    /// How long the write took, for the call limit.
    pub took: Duration,
}

/// The job on its way, if any.
#[derive(Default)]
pub(super) struct Writes {
    /// At most one job.
    job: JoinSet<Vec<WriteAnswer>>,
    /// The nodes the job writes → whether their pods wait for it.
    nodes: HashMap<String, bool>,
    /// When the job started.
    started: Option<Instant>,
}

/// Whether the pods of a node wait while the node is written: all but behind a progress record,
/// which only notes how many pods are left.
pub(super) fn holds_pods(kind: &ActionKind) -> bool {
    !matches!(kind, ActionKind::Progress { .. })
}

impl Writes {
    /// Whether a job is on its way.
    pub fn busy(&self) -> bool {
        !self.job.is_empty()
    }

    /// The nodes whose pods wait for the job on its way.
    pub fn holding(&self) -> HashMap<String, Hold> {
        self.nodes
            .iter()
            .filter(|(_, holds)| **holds)
            .map(|(node, _)| (node.clone(), Hold::Writing))
            .collect()
    }

    /// Starts the job of `actions`, in their order (the plan's order of kinds, see `batch_len`; one
    /// action per node), each batch's writes at once, at most `width` at a time (the call limit
    /// when the job starts).
    pub fn launch(&mut self, actions: Vec<NodeWrite>, width: usize, crew: WriteCrew) {
        debug_assert!(!self.busy(), "one job at a time");
        self.nodes = actions
            .iter()
            .filter_map(|w| {
                let kind = &w.action.kind;
                kind.node().map(|n| (n.to_owned(), holds_pods(kind)))
            })
            .collect();
        let crew = Arc::new(crew);
        self.job.spawn(async move {
            let mut answers = Vec::with_capacity(actions.len());
            let mut rest = actions.as_slice();
            while !rest.is_empty() {
                if let Err(not_leader) = crew.leadership.ensure() {
                    tracing::warn!(
                        "stopping the pass's writes before the next batch: {not_leader}"
                    );
                    break;
                }
                if *crew.stopping.borrow() {
                    tracing::info!(
                        "stopping the pass's writes before the next batch: told to stop"
                    );
                    break;
                }
                let (batch, after) = rest.split_at(batch_len(rest));
                rest = after;
                // Unordered: one slow call must not keep the next ones from starting; the answers
                // are put back in the plan's order.
                let mut batch_answers: Vec<(usize, WriteAnswer)> =
                    futures::stream::iter(batch.iter().cloned().enumerate().map(|(i, planned)| {
                        let crew = crew.clone();
                        async move { (i, write(&crew, planned).await) }
                    }))
                    .buffer_unordered(width.max(1))
                    .collect()
                    .await;
                batch_answers.sort_by_key(|(i, _)| *i);
                answers.extend(batch_answers.into_iter().map(|(_, answer)| answer));
            }
            answers
        });
    }

    /// The job's answers, once it has answered (pending while none is on its way: poll it only when
    /// busy).
    pub async fn answered(&mut self) -> Option<Result<Vec<WriteAnswer>, JoinError>> {
        let answers = self.job.join_next().await;
        if answers.is_some() {
            tracing::debug!(
                nodes = self.nodes.len(),
                took_ms = self.started.take().map(|at| at.elapsed().as_millis()),
                "the pass's writes answered"
            );
            self.nodes.clear();
        }
        answers
    }
}

/// Carries out one write, on the node as the plan saw it: the patch carries the cached
/// resourceVersion, and a cache that moved on since the plan (the job runs after it, and may
/// follow another write) would make a decision taken on an older node pass that precondition.
async fn write(crew: &WriteCrew, planned: NodeWrite) -> WriteAnswer {
    let NodeWrite {
        action,
        planned_version,
    } = planned;
    let node = action
        .kind
        .node()
        .and_then(|name| crew.stores.nodes.get(&ObjectRef::new(name)));
    let pod_node = action
        .kind
        .about_pod()
        .and_then(|pod| node_of(&crew.stores, pod));
    let borrowed = (&crew.executor, &*crew.events, &*crew.metrics, &crew.stores);
    let started = Instant::now();
    let outcome = match overtaken(node.as_deref(), planned_version.as_deref()) {
        Some(why) => Ok(Outcome::Stale(why)),
        None => carry_out(borrowed, &action, node.as_deref()).await,
    };
    WriteAnswer {
        action,
        node,
        pod_node,
        outcome,
        took: started.elapsed(),
    }
}

/// Why a write planned on `planned` (the node's resourceVersion in the plan's view) must not go on
/// the `cached` node, if it must not: the cache moved on since the plan.
fn overtaken(cached: Option<&Node>, planned: Option<&str>) -> Option<String> {
    let (cached, planned) = (cached?, planned?);
    let version = cached.resource_version().unwrap_or_default();
    (version != planned).then(|| {
        format!(
            "node {} changed since the plan (resourceVersion {planned} planned, {version} cached)",
            cached.name_any()
        )
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn node(version: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                resource_version: Some(version.into()),
                ..ObjectMeta::default()
            },
            ..Node::default()
        }
    }

    /// A kamikaze planned on a view that missed the last one must not be written on the cached node
    /// that shows it: its resourceVersion would pass the patch's precondition.
    #[test]
    fn a_write_goes_only_on_the_node_version_it_was_planned_on() {
        assert_eq!(overtaken(Some(&node("7")), Some("7")), None);
        let why = overtaken(Some(&node("8")), Some("7")).expect("overtaken");
        assert!(
            why.contains("n1") && why.contains('7') && why.contains('8'),
            "{why}"
        );
        // Nothing to compare: the write decides (a node gone is its own answer).
        assert_eq!(overtaken(Some(&node("8")), None), None);
        assert_eq!(overtaken(None, Some("7")), None);
    }
}
