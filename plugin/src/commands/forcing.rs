//! What forcing a node and retrying its kamikaze share: the operator's confirmation, and the
//! records of what is forced (the node's annotation, then a `Forced` Event), each written before
//! the change it reports.

use std::io::{BufRead, Write};

use chrono::Utc;
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use kube::api::Patch;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Client};

use k8sm_api::keys;
use k8sm_api::report::ForcedRecord;
use k8sm_planner::Reason;

use crate::error::Error;
use crate::output::Terminal;

/// The reporting controller of the plugin's Events.
pub const REPORTER: &str = "kubectl-k8sm";

/// The Events API caps notes at 1 kB.
const NOTE_MAX: usize = 1000;

/// Records on the node what `user` forces on it
/// ([`k8s.mesosphere.io/forced`](k8sm_api::keys::FORCED_ANNOTATION)), for the controller's upgrade
/// report, which outlives the Forced Events. Written before the change: a failure refuses it
/// (`unchanged` says what was left alone, such as "nothing was deleted").
pub(super) async fn annotate_forced(
    client: &Client,
    node: &str,
    user: &str,
    what: &str,
    unchanged: &str,
) -> Result<(), Error> {
    let patch = serde_json::json!({"metadata": {"annotations": {keys::FORCED_ANNOTATION: forced_record(user, what)}}});
    Api::<Node>::all(client.clone())
        .patch(node, &crate::connect::patch_params(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|e| {
            Error::kube(
                format!("recording on node {node} what is forced, which comes first ({unchanged})"),
                e,
            )
        })
}

/// The value of the node's record of what `user` forces now.
pub(super) fn forced_record(user: &str, what: &str) -> String {
    ForcedRecord::annotation(Utc::now(), user, &k8sm_api::text::bounded(what, 512))
}

/// Asks `question` on the terminal; without one, refuses (a script must say `--yes`). `(act, done)`
/// word the refusals: ("delete pods", "deleted").
pub(super) fn confirm(
    question: &str,
    (act, done): (&'static str, &'static str),
    terminal: Terminal,
) -> Result<(), Error> {
    if !terminal.stdin_is_terminal {
        return Err(Error::NeedsConfirmation(act));
    }
    let mut stderr = std::io::stderr().lock();
    write!(stderr, "{question}")?;
    stderr.flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Ok(()),
        _ => Err(Error::Aborted(done)),
    }
}

/// The recorder of the plugin's Events.
pub(super) fn recorder(client: &Client) -> Recorder {
    Recorder::new(
        client.clone(),
        Reporter {
            controller: REPORTER.into(),
            instance: None,
        },
    )
}

/// Records a `Forced` Warning about `reference` with `note`, before the change it reports: a
/// failure refuses the change (`what`: what it is about, such as "pod ns/name"; `unchanged`: what
/// is left alone).
pub(super) async fn record_forced(
    recorder: &Recorder,
    note: &str,
    reference: &ObjectReference,
    what: &str,
    unchanged: &str,
) -> Result<(), Error> {
    let event = Event {
        type_: EventType::Warning,
        reason: Reason::Forced.as_str().to_owned(),
        note: Some(k8sm_api::text::bounded(note, NOTE_MAX).into_owned()),
        action: Reason::Forced.as_str().to_owned(),
        secondary: None,
    };
    recorder.publish(&event, reference).await.map_err(|e| {
        Error::kube(
            format!("recording the Forced event of {what}, which comes first ({unchanged})"),
            e,
        )
    })
}
