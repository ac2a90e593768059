//! Launching the pass's evictions and pod deletions as calls of their own, and taking in their
//! answers and those of the pass's write job.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use futures::FutureExt;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use tokio::task::JoinError;

use k8sm_planner::{Action, ActionKind, Calls, PodRef, Reason};

use crate::Error;
use crate::act::call_limit::{self};
use crate::act::execute::Outcome;
use crate::memory::backoff::{self, Subject};

use super::batches::{CONTINUATION_CALLS, call_free};
use super::carry_out::{carry_out, node_of};
use super::pass_result::{Hold, PassResult};
use super::writes::WriteAnswer;
use super::{Answer, Controller};

impl Controller {
    /// The node a cached pod is bound to.
    pub(super) fn node_of(&self, pod: &PodRef) -> Option<String> {
        node_of(&self.stores, pod)
    }

    /// The calls as this pass finds them ([`Calls`]): the limit, those running, the workloads whose
    /// evictions continue (`continuing`, as the loop launches them first), and what no call
    /// launches in this pass (pods backing off, nodes whose write is on its way).
    pub(super) fn calls_now(&mut self, continuing: &HashSet<String>) -> Calls {
        let now = Instant::now();
        let pods: Vec<Subject> = self
            .backoff
            .subjects()
            .filter(|s| matches!(s, Subject::Pod(_)))
            .cloned()
            .collect();
        let mut backing_off = BTreeSet::new();
        for subject in pods {
            let version = self.version_of(&subject);
            if self
                .backoff
                .retry_at(&subject, version.as_deref(), now)
                .is_some()
                && let Subject::Pod(pod) = subject
            {
                backing_off.insert(pod.uid().to_owned());
            }
        }
        Calls {
            limit: self.call_limit.current(),
            running: self.in_flight.calls(),
            for_continuations: CONTINUATION_CALLS,
            continuing: continuing.iter().cloned().collect(),
            backing_off,
            held_nodes: self.writes.holding().into_keys().collect(),
        }
    }

    /// Launches the eviction or deletion `action` as a call of its own, in flight from now on (see
    /// the module's comment). False when it is not launched: no call is free for it (a later
    /// pass launches it; see [`call_free`]), or a call on its pod is still running (a plan
    /// never repeats an action in flight; this is the loop's own guard).
    pub(super) fn launch(
        &mut self,
        action: &Action,
        continuation: bool,
        result: &mut PassResult,
    ) -> bool {
        let Some(pod) = action.kind.pod() else {
            return false;
        };
        if !call_free(
            self.in_flight.calls(),
            self.call_limit.current(),
            continuation,
        ) {
            result.deferred = true;
            return false;
        }
        let (owner, costs_ready) = match &action.kind {
            ActionKind::Evict { eviction, .. } => (
                Some(eviction.owner.uid.to_string()),
                eviction.ready_after < eviction.ready_before,
            ),
            _ => (None, false),
        };
        if !self.in_flight.launch(pod.uid(), owner.clone(), Utc::now()) {
            tracing::warn!(%pod, "a call on this pod is still running: not repeated");
            return false;
        }
        if let Some(owner) = &owner
            && let Some(reacted) = self.reaction.evicting(owner, Instant::now(), costs_ready)
        {
            self.metrics.reaction_took(reacted.took.as_secs_f64());
            tracing::debug!(
                workload = owner,
                took_ms = reacted.took.as_millis(),
                queued_ms = reacted.queued.map(|q| q.as_millis()),
                calls = self.in_flight.calls(),
                "eviction sent after a pod of its waiting workload became Ready"
            );
        }
        let action = action.clone();
        let pod_node = self.node_of(pod);
        let (executor, events, metrics, stores) = (
            self.executor.clone(),
            self.events.clone(),
            self.metrics.clone(),
            self.stores.clone(),
        );
        self.calls.spawn(async move {
            let started = Instant::now();
            let crew = (&executor, &*events, &*metrics, &stores);
            // A panic must still answer: the pod's entry would otherwise hold its budget for ever.
            let outcome = std::panic::AssertUnwindSafe(carry_out(crew, &action, None))
                .catch_unwind()
                .await
                .unwrap_or_else(|_| Err(Error::Other("the call panicked".into())));
            Answer {
                action,
                outcome,
                pod_node,
                took: started.elapsed(),
            }
        });
        true
    }

    /// Takes in a launched call's answer (see [`Controller::follow_up`]). Whether to plan again
    /// now: the answer freed a budget (a refusal, a failure, a pod already gone), or a call for
    /// the actions a pass could not launch.
    pub(super) async fn answered(
        &mut self,
        answer: Result<Answer, JoinError>,
        last: &mut PassResult,
    ) -> bool {
        let Answer {
            action,
            outcome,
            pod_node,
            took,
        } = match answer {
            Ok(answer) => answer,
            // Only when the runtime shuts down: the calls are never aborted, and a panic answers as
            // a failure.
            Err(error) => {
                tracing::error!(%error, "a call ended without an answer");
                return true;
            }
        };
        self.answered_in(call_limit::Answer::of(&outcome, took));
        let done = matches!(outcome, Ok(Outcome::Done { .. }));
        self.follow_up(&action, None, pod_node, outcome, last).await;
        !done || last.deferred
    }

    /// Takes in what one call's answer says of the apiserver's load.
    pub(super) fn answered_in(&mut self, load: call_limit::Answer) {
        self.call_limit.answered(load, Instant::now());
        self.metrics.set_call_limit(self.call_limit.current());
    }

    /// Takes in the answers of a pass's writes (see [`writes`]): the next pass plans once the cache
    /// shows them. The nodes whose write did not happen, and why their other actions wait.
    pub(super) async fn written(
        &mut self,
        answers: Result<Vec<WriteAnswer>, JoinError>,
        last: &mut PassResult,
    ) -> HashMap<String, Hold> {
        let mut not_done = HashMap::new();
        match answers {
            Ok(answers) => {
                for answer in answers {
                    let WriteAnswer {
                        action,
                        node,
                        pod_node,
                        outcome,
                        took,
                    } = answer;
                    // A kamikaze's time is also the executor's, which answers its POST: not the
                    // apiserver's load.
                    if !matches!(action.kind, ActionKind::Kamikaze { .. }) {
                        self.answered_in(call_limit::Answer::of(&outcome, took));
                    }
                    let hold = self.follow_up(&action, node, pod_node, outcome, last).await;
                    if let (Some(hold), Some(name)) = (hold, action.kind.node()) {
                        not_done.insert(name.to_owned(), hold);
                    }
                }
            }
            // Only when a write panicked (or the runtime shuts down): the next pass plans them
            // again.
            Err(error) => tracing::error!(%error, "a pass's writes ended without an answer"),
        }
        not_done
    }

    /// Records what an action's outcome means for the next passes. For a node action that did not
    /// happen: why its node's other actions wait.
    pub(super) async fn follow_up(
        &mut self,
        action: &Action,
        node: Option<Arc<Node>>,
        pod_node: Option<String>,
        outcome: Result<Outcome, Error>,
        result: &mut PassResult,
    ) -> Option<Hold> {
        if let Some(pod) = action.kind.pod() {
            self.in_flight.answered(pod.uid(), &outcome, Utc::now());
        }
        match outcome {
            Ok(Outcome::Done {
                node_version,
                policy_version,
                deployment_version,
            }) => {
                self.backoff.succeeded(&Subject::of(&action.kind));
                self.reports.record(action, pod_node.as_deref(), Utc::now());
                if let (Some(node), Some(name)) = (node.as_ref(), action.kind.node()) {
                    let before = node.resource_version().unwrap_or_default();
                    result
                        .written_nodes
                        .insert(name.to_owned(), (before, node_version));
                }
                if policy_version.is_some() {
                    let before = self
                        .stores
                        .policies
                        .get(&ObjectRef::new(&action.policy))
                        .and_then(|p| p.resource_version())
                        .unwrap_or_default();
                    result
                        .written_policies
                        .insert(action.policy.clone(), (before, policy_version));
                }
                if let ActionKind::Surge {
                    pod, deployment, ..
                } = &action.kind
                {
                    let (namespace, name) =
                        (pod.namespace().to_string(), deployment.name.to_string());
                    let before = self
                        .stores
                        .deployments
                        .get(&ObjectRef::new(&name).within(&namespace))
                        .and_then(|d| d.resource_version())
                        .unwrap_or_default();
                    result
                        .written_deployments
                        .insert((namespace, name), (before, deployment_version));
                }
                None
            }
            Ok(Outcome::Stale(why)) => {
                // The object changed: not a failure, and the next plan decides again from the fresh
                // object.
                tracing::debug!(%why, "action overtaken by a change; planning again");
                self.backoff.succeeded(&Subject::of(&action.kind));
                result.retry_soon = true;
                Some(Hold::Soon)
            }
            Ok(Outcome::Throttled(why)) => {
                // The apiserver is overloaded: the call limit came down; not a failure of the
                // pod's.
                tracing::debug!(%why, "call throttled by the apiserver; trying again soon");
                self.metrics.throttled();
                result.retry_soon = true;
                Some(Hold::Soon)
            }
            Ok(Outcome::DisruptionBudget(message)) => {
                if let ActionKind::Evict { eviction, .. } = &action.kind {
                    self.reaction.refused(&eviction.owner.uid);
                }
                self.metrics.failed(&action.policy, Reason::BlockedByPDB);
                let text = format!("eviction refused by a PodDisruptionBudget: {message}");
                let at = self
                    .failed(action, Reason::BlockedByPDB, text, Some(429))
                    .await;
                result.retry_at(at);
                Some(Hold::Later(Some(at)))
            }
            Err(error) => {
                self.metrics.failed(&action.policy, action.reason);
                let code = error.status_code();
                let answer = backoff::answer(&error);
                let at = self
                    .failed(action, Reason::ActionFailed, answer, code)
                    .await;
                result.retry_at(at);
                Some(Hold::Later(Some(at)))
            }
        }
    }
}
