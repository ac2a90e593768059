//! Kubernetes Events, the operator's main interface: one per executed action, and one each time a
//! node, pod or policy starts waiting on something (not on every pass, so a long wait is one Event,
//! not thousands).

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::runtime::events::{Event, EventType, Reporter};
use tokio::sync::{Mutex, Notify, mpsc};

use k8sm_planner::{Action, ActionKind, Plan, Reason};
use k8sm_view::reference::{node_ref, pod_ref, policy_ref};

use crate::Error;
use crate::error::apiserver_busy;
use crate::leadership::leader::Leadership;
use crate::leadership::write_params::CONTROLLER_NAME;
use crate::report::event_series::EventWriter;

/// Events waiting to be written; when full, the pass that reports waits for room (backpressure,
/// nothing dropped).
const QUEUE: usize = 4096;
/// Events written at once.
const CONCURRENT_WRITES: usize = 8;

/// Records Events in the background: a pass hands its Events over and goes on, so that writing them
/// (one request each; a pass that admits a node reports dozens of new waits) never delays the next
/// eviction.
pub struct EventSink {
    queue: mpsc::Sender<(Event, ObjectReference)>,
    /// Events handed over and not written yet, and a signal each time one is written: for
    /// [`EventSink::flush`].
    pending: Arc<AtomicUsize>,
    written: Arc<Notify>,
    /// Waits already reported: (object, reason). A wait that ends and comes back is reported
    /// again.
    reported_waits: Mutex<HashSet<(String, Reason)>>,
}

impl EventSink {
    /// Starts the writer task (so it must be called within the Tokio runtime).
    pub fn new(client: Client, instance: String, leadership: Leadership) -> Self {
        let reporter = Reporter {
            controller: CONTROLLER_NAME.into(),
            instance: Some(instance),
        };
        let recorder = EventWriter::new(client, reporter);
        let (queue, mut receiver) = mpsc::channel::<(Event, ObjectReference)>(QUEUE);
        let pending = Arc::new(AtomicUsize::new(0));
        let written = Arc::new(Notify::new());
        let (left, signal) = (pending.clone(), written.clone());
        tokio::spawn(async move {
            futures::stream::poll_fn(|cx| receiver.poll_recv(cx))
                .for_each_concurrent(CONCURRENT_WRITES, |(event, reference)| {
                    let (recorder, left, signal) = (&recorder, &left, &signal);
                    let leadership = &leadership;
                    async move {
                        if let Err(error) = write(recorder, leadership, &event, &reference).await {
                            tracing::warn!(%error, reason = %event.reason, "could not record an Event");
                        }
                        left.fetch_sub(1, Ordering::SeqCst);
                        signal.notify_waiters();
                    }
                })
                .await;
        });
        Self {
            queue,
            pending,
            written,
            reported_waits: Mutex::new(HashSet::new()),
        }
    }

    /// Waits (at most `timeout`) until every Event handed over so far is written: before the
    /// process exits.
    pub async fn flush(&self, timeout: Duration) {
        let drained = async {
            loop {
                let signal = self.written.notified();
                if self.pending.load(Ordering::SeqCst) == 0 {
                    return;
                }
                signal.await;
            }
        };
        if tokio::time::timeout(timeout, drained).await.is_err() {
            let left = self.pending.load(Ordering::SeqCst);
            tracing::warn!(left, "stopping with Events not yet written");
        }
    }

    /// Reports an executed action on the object it changed (bookkeeping, such as a progress record,
    /// is not reported). A node that an action puts into a wait (a stall) is not reported again
    /// as that wait. `uids` gives the cached UID of the node or policy the action is about.
    pub async fn action(&self, action: &Action, uids: &impl Uids) {
        if !action.kind.is_reported() {
            return;
        }
        let (key, reference) = reference(&action.kind, uids);
        self.reported_waits
            .lock()
            .await
            .insert((key, action.reason));
        let type_ = if action.reason.blocks() {
            EventType::Warning
        } else {
            EventType::Normal
        };
        self.publish(type_, action.reason, &action.message, &reference)
            .await;
    }

    /// Reports a refusal or failure of an action as a Warning on its object.
    pub async fn action_failed(
        &self,
        action: &Action,
        reason: Reason,
        message: &str,
        uids: &impl Uids,
    ) {
        let (_, reference) = reference(&action.kind, uids);
        self.publish(EventType::Warning, reason, message, &reference)
            .await;
    }

    /// Reports on each of `policies` that the controller stopped acting: a watch has failed for too
    /// long.
    pub async fn stale_view(&self, policies: &[&str], message: &str, uids: &impl Uids) {
        for policy in policies {
            let reference = policy_ref(policy, uids.policy(policy));
            self.publish(
                EventType::Warning,
                Reason::WatchFailing,
                message,
                &reference,
            )
            .await;
        }
    }

    /// Reports every wait and blocker that is new since the last pass; forgets those that ended.
    pub async fn waits(&self, plan: &Plan, uids: &impl Uids) {
        let mut current: Vec<((String, Reason), ObjectReference, String)> = Vec::new();
        for node in &plan.nodes {
            for blocker in &node.blockers {
                if !blocker.reason.blocks() {
                    continue;
                }
                let (key, reference) = match &blocker.pod {
                    Some(pod) => (format!("pod/{}", pod.uid()), pod_ref(pod)),
                    None => (
                        format!("node/{}", node.node),
                        node_ref(&node.node, uids.node(&node.node)),
                    ),
                };
                current.push((
                    (key, blocker.reason),
                    reference,
                    blocker.message.to_string(),
                ));
            }
        }
        for policy in &plan.policies {
            for condition in &policy.conditions {
                let reference = policy_ref(&policy.policy, uids.policy(&policy.policy));
                current.push((
                    (format!("policy/{}", policy.policy), condition.reason),
                    reference,
                    condition.message.clone(),
                ));
            }
        }
        let fresh: Vec<_> = {
            let mut reported = self.reported_waits.lock().await;
            let keys: HashSet<(String, Reason)> =
                current.iter().map(|(key, _, _)| key.clone()).collect();
            reported.retain(|key| keys.contains(key));
            current
                .into_iter()
                .filter(|(key, _, _)| reported.insert(key.clone()))
                .collect()
        };
        for ((_, reason), reference, message) in fresh {
            // Waits that resolve by themselves are Normal; what needs an operator, or stalls, is a
            // Warning.
            let type_ = if matches!(
                reason,
                Reason::Paused
                    | Reason::OutsideWindow
                    | Reason::WaitingForOwner
                    | Reason::WaitingForJob
                    | Reason::WaitingForTimeout
            ) {
                EventType::Normal
            } else {
                EventType::Warning
            };
            self.publish(type_, reason, &message, &reference).await;
        }
    }

    async fn publish(
        &self,
        type_: EventType,
        reason: Reason,
        message: &str,
        reference: &ObjectReference,
    ) {
        let event = Event {
            type_,
            reason: reason.as_str().to_owned(),
            // The Events API caps notes at 1 kB.
            note: Some(k8sm_api::text::bounded(message, 1000).into_owned()),
            action: reason.as_str().to_owned(),
            secondary: None,
        };
        self.pending.fetch_add(1, Ordering::SeqCst);
        if self.queue.send((event, reference.clone())).await.is_err() {
            // Only after the writer task ended, i.e. the runtime is shutting down.
            self.pending.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!(
                reason = reason.as_str(),
                "could not record an Event: the writer stopped"
            );
        }
    }
}

/// Waits between tries of an Event write that failed because the apiserver was busy (like
/// client-go's recorder, which tries an Event up to 12 times): an apiserver that is busy,
/// restarting or slow to answer must not cost the operator the record of an eviction. About 15 s in
/// all, so that a lasting failure does not hold a writer for long.
const RETRY_DELAYS: [Duration; 5] = [
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(8),
];

/// Writes one Event, trying again after a failure while the apiserver was busy. Written in the
/// background, maybe after leadership ended: checked right before each try.
async fn write(
    recorder: &EventWriter,
    leadership: &Leadership,
    event: &Event,
    reference: &ObjectReference,
) -> Result<(), Error> {
    let mut delays = RETRY_DELAYS.iter();
    let at = Timestamp::now();
    loop {
        leadership.ensure()?;
        match recorder.publish(event, reference, at).await {
            Ok(()) => return Ok(()),
            Err(error) => match delays.next() {
                Some(delay) if apiserver_busy(&error) => {
                    tracing::debug!(%error, reason = %event.reason, "Event write failed; trying again");
                    tokio::time::sleep(*delay).await;
                }
                _ => return Err(error.into()),
            },
        }
    }
}

/// The UIDs of the objects Events are about, by name (from the controller's caches): Events whose
/// reference lacks the UID are not shown by `kubectl describe`.
pub trait Uids {
    fn node(&self, name: &str) -> Option<String>;
    fn policy(&self, name: &str) -> Option<String>;
}

/// The wait key and the object an action's Event is about: the pod, the policy, or the node.
fn reference(kind: &ActionKind, uids: &impl Uids) -> (String, ObjectReference) {
    match (kind, kind.policy()) {
        (
            ActionKind::Evict { pod, .. }
            | ActionKind::DeletePod { pod, .. }
            | ActionKind::Surge { pod, .. },
            _,
        ) => (format!("pod/{}", pod.uid()), pod_ref(pod)),
        (_, Some(policy)) => (
            format!("policy/{policy}"),
            policy_ref(policy, uids.policy(policy)),
        ),
        (kind, None) => {
            let node = kind.node().unwrap_or_default();
            (format!("node/{node}"), node_ref(node, uids.node(node)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(
            kube::core::Status::failure("no", "Whatever").with_code(code),
        ))
    }

    #[test]
    fn a_busy_or_failing_apiserver_is_tried_again_a_refusal_is_not() {
        for code in [429, 500, 503, 504] {
            assert!(apiserver_busy(&answer(code)), "{code}");
        }
        for code in [400, 403, 404, 409, 422] {
            assert!(!apiserver_busy(&answer(code)), "{code}");
        }
        let unreachable = kube::Error::Service("connection refused".into());
        assert!(apiserver_busy(&unreachable));
    }

    /// The Events an apiserver holds, by name, with the series count last written to each; the
    /// first write of each count is carried out and its answer lost (as when the fence abandons
    /// a slow write the apiserver then completes).
    #[derive(Default)]
    struct LosingFirstAnswers {
        events: std::sync::Mutex<std::collections::BTreeMap<String, i32>>,
        lost: std::sync::Mutex<HashSet<i32>>,
    }

    impl LosingFirstAnswers {
        fn client(self: &Arc<Self>) -> Client {
            use http_body_util::{BodyExt, Full};
            let apiserver = self.clone();
            let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
                let apiserver = apiserver.clone();
                async move {
                    let method = request.method().clone();
                    let path = request.uri().path().to_owned();
                    let body = request.into_body().collect().await?.to_bytes();
                    let body: serde_json::Value = serde_json::from_slice(&body)?;
                    let name = match method {
                        http::Method::POST => body["metadata"]["name"].as_str(),
                        _ => path.rsplit('/').next(),
                    }
                    .unwrap_or_default()
                    .to_owned();
                    let count = body["series"]["count"].as_i64().map_or(1, |c| c as i32);
                    let (code, answer) = {
                        let mut events = apiserver.events.lock().unwrap();
                        if method == http::Method::POST && events.contains_key(&name) {
                            (
                                409,
                                serde_json::json!({"kind": "Status", "apiVersion": "v1",
                                "status": "Failure", "reason": "AlreadyExists", "code": 409,
                                "message": format!("events \"{name}\" already exists")}),
                            )
                        } else {
                            events.insert(name.clone(), count);
                            (200, body)
                        }
                    };
                    if code == 200 && apiserver.lost.lock().unwrap().insert(count) {
                        return Err::<http::Response<Full<bytes::Bytes>>, tower::BoxError>(
                            "connection reset before the answer".into(),
                        );
                    }
                    Ok(http::Response::builder()
                        .status(code)
                        .body(Full::new(bytes::Bytes::from(answer.to_string())))?)
                }
            });
            Client::new(service, "default")
        }
    }

    #[tokio::test]
    async fn a_write_whose_answer_was_lost_is_written_once_and_its_repeat_counted_once() {
        let apiserver = Arc::new(LosingFirstAnswers::default());
        let recorder = EventWriter::new(
            apiserver.client(),
            Reporter {
                controller: CONTROLLER_NAME.into(),
                instance: None,
            },
        );
        let event = Event {
            type_: EventType::Normal,
            reason: "KamikazeSent".into(),
            note: Some("told to terminate".into()),
            action: "KamikazeSent".into(),
            secondary: None,
        };
        let node = node_ref("node-1", Some("uid-1".into()));
        let leadership = Leadership::always();
        write(&recorder, &leadership, &event, &node).await.unwrap();
        let events = apiserver.events.lock().unwrap().clone();
        assert_eq!(events.len(), 1, "one Event, however many tries: {events:?}");
        assert_eq!(events.values().next(), Some(&1));
        write(&recorder, &leadership, &event, &node).await.unwrap();
        let events = apiserver.events.lock().unwrap().clone();
        assert_eq!(events.len(), 1, "the repeat is the same Event: {events:?}");
        assert_eq!(events.values().next(), Some(&2), "counted once: {events:?}");
    }
}
