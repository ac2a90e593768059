//! Events as an operator reads them (`kubectl get events`): by reason and by the object they are
//! about, counted by occurrence, with their times and notes; and the controller's own Events, for a
//! fingerprint of what it did.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::{Api, Client};

/// The `reportingController` of the controller's Events.
pub const CONTROLLER: &str = "k8sm-controller";

/// Reasons of the controller's Events that record an executed action (as opposed to a wait or a
/// blocker).
pub const ACTIONS: [&str; 8] = [
    "Marked",
    "Cordoned",
    "Admitted",
    "Evicted",
    "DeletedUnmanagedPod",
    "KamikazeSent",
    "Upgraded",
    "Released",
];

/// Every Event of the cluster, whoever reported it.
async fn all_events(client: &Client) -> Vec<Event> {
    Api::<Event>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("events can be listed")
        .items
}

/// Events with `reason`, in any namespace, whoever reported them.
pub async fn with_reason(client: &Client, reason: &str) -> Vec<Event> {
    all_events(client)
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

/// The Event is about the object named `name`.
pub fn regards(event: &Event, name: &str) -> bool {
    event
        .regarding
        .as_ref()
        .is_some_and(|r| r.name.as_deref() == Some(name))
}

/// The Event is about an object named one of `names`.
pub fn regards_one_of(event: &Event, names: &BTreeSet<String>) -> bool {
    event
        .regarding
        .as_ref()
        .and_then(|r| r.name.as_ref())
        .is_some_and(|name| names.contains(name))
}

/// Events with `reason` about the object named `name`: a Node, a policy or a Pod of any namespace
/// (names of the three never collide in these tests).
pub async fn events_about(client: &Client, reason: &str, name: &str) -> Vec<Event> {
    with_reason(client, reason)
        .await
        .into_iter()
        .filter(|e| regards(e, name))
        .collect()
}

/// Every Event the controller reported, oldest first.
pub async fn k8sm_events(client: &Client) -> Vec<Event> {
    let mut events: Vec<Event> = all_events(client)
        .await
        .into_iter()
        .filter(|e| e.reporting_controller.as_deref() == Some(CONTROLLER))
        .collect();
    events.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
    events
}

/// The controller's Events about the object of `kind` named `name` (a Node, a Pod in any namespace,
/// or a policy), with `reason` if given, oldest first.
pub async fn k8sm_events_about(
    client: &Client,
    kind: &str,
    name: &str,
    reason: Option<&str>,
) -> Vec<Event> {
    k8sm_events(client)
        .await
        .into_iter()
        .filter(|e| reason.is_none_or(|r| e.reason.as_deref() == Some(r)))
        .filter(|e| {
            e.regarding
                .as_ref()
                .is_some_and(|r| r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name))
        })
        .collect()
}

/// How many times an Event happened: the Events API folds repeats of one Event (same object,
/// reason, note and type, within minutes) into one object with a `series`, so counting objects
/// would undercount a repeat.
pub fn occurrences(event: &Event) -> u32 {
    event
        .series
        .as_ref()
        .map_or(1, |s| u32::try_from(s.count.max(1)).unwrap_or(1))
}

/// How many times the controller reported `reason` about a Node, Pod or policy (see
/// [`occurrences`]).
pub async fn times(client: &Client, kind: &str, name: &str, reason: &str) -> u32 {
    k8sm_events_about(client, kind, name, Some(reason))
        .await
        .iter()
        .map(occurrences)
        .sum()
}

/// Every reason the controller reported about an object, with how many times: a fingerprint of
/// everything it did to the object and every wait it reported.
pub async fn event_history(client: &Client, kind: &str, name: &str) -> BTreeMap<String, u32> {
    let mut history = BTreeMap::new();
    for event in k8sm_events_about(client, kind, name, None).await {
        *history
            .entry(event.reason.clone().unwrap_or_default())
            .or_default() += occurrences(&event);
    }
    history
}

/// Prints every Event of the controller, oldest first, for the log of a run.
pub async fn print_k8sm_events(client: &Client) {
    for e in k8sm_events(client).await {
        let r = e.regarding.clone().unwrap_or_default();
        println!(
            "{:<22} {}/{}{}: {}",
            e.reason.unwrap_or_default(),
            r.kind.unwrap_or_default(),
            r.namespace.map(|n| format!("{n}/")).unwrap_or_default(),
            r.name.unwrap_or_default(),
            e.note.unwrap_or_default()
        );
    }
}

/// A Kubernetes time (an Event's, a condition's, a status record's) as a chrono time.
pub fn utc(ts: &Timestamp) -> DateTime<Utc> {
    DateTime::from_timestamp(ts.as_second(), ts.subsec_nanosecond().max(0) as u32)
        .expect("a representable time")
}

/// When an Event first happened: its eventTime (microseconds), else its creation.
pub fn first_seen(event: &Event) -> DateTime<Utc> {
    let ts = event
        .event_time
        .as_ref()
        .map(|t| t.0)
        .or_else(|| event.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .expect("an Event has a time");
    utc(&ts)
}

/// When an Event last happened: its series' last observation, else when it first happened.
pub fn last_seen(event: &Event) -> DateTime<Utc> {
    event
        .series
        .as_ref()
        .map_or_else(|| first_seen(event), |s| utc(&s.last_observed_time.0))
}

/// What the Event says.
pub fn note(event: &Event) -> &str {
    event.note.as_deref().unwrap_or_default()
}
