//! `force NODE`: deletes the node's pods that only an operator can move, after confirmation, each with a UID
//! precondition (a new pod of the same name is never hit). The audit comes first: what is forced is recorded on the
//! node, then a `Forced` Event naming the user on each pod right before its deletion; when a record cannot be
//! written, nothing more is deleted.
//! With `--retry-kamikaze`, retries the kamikaze of a node that came back wrong instead (see [`super::retry`]).

use std::io::{BufRead, Write};

use chrono::Utc;
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use kube::api::{DeleteParams, Patch, Preconditions};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Client};

use k8sm_api::keys;
use k8sm_api::report::ForcedRecord;
use k8sm_planner::{PodRef, Reason};
use k8sm_view::reference::pod_ref;

use crate::cli::ForceArgs;
use crate::connect::Connection;
use crate::error::Error;
use crate::fetch;
use crate::output::{Terminal, print};
use crate::views::force::{ForceSelection, ForcedPod, Outcome, event_note};

/// The reporting controller of the plugin's Events.
pub const REPORTER: &str = "kubectl-k8sm";

/// The Events API caps notes at 1 kB.
const NOTE_MAX: usize = 1000;

pub async fn run(
    connection: &Connection,
    args: &ForceArgs,
    terminal: Terminal,
) -> Result<(), Error> {
    let client = &connection.client;
    if !fetch::node_exists(client, &args.node).await? {
        return Err(Error::NodeNotFound(args.node.clone()));
    }
    let view = fetch::cluster_view(client).await?;
    let plan = k8sm_planner::plan(&view, Utc::now());
    let node = plan
        .node(&args.node)
        .ok_or_else(|| Error::NodeNotManaged(args.node.clone()))?;
    if args.retry_kamikaze {
        return super::retry::run(connection, node, args, terminal).await;
    }
    let selection = ForceSelection::new(node, args.include_opted_out, args.terminating);
    print(&selection.render(terminal.palette))?;
    if selection.delete.is_empty() {
        return Ok(());
    }
    if args.dry_run {
        let lines: Vec<String> = selection
            .delete
            .iter()
            .map(|p| Outcome::WouldDelete { pod: name(p) }.line())
            .collect();
        return print(&format!("{}\n", lines.join("\n")));
    }
    if !args.yes {
        confirm(&selection.question(), ("delete pods", "deleted"), terminal)?;
    }
    let user = connection.user().await?;
    let recorder = recorder(client);
    let names: Vec<String> = selection.delete.iter().map(name).collect();
    annotate_forced(
        client,
        &args.node,
        &user,
        &format!("deleted {}", names.join(", ")),
        "nothing was deleted",
    )
    .await?;
    for pod in &selection.delete {
        let outcome = delete(client, pod, &recorder, &user, &args.node).await?;
        print(&format!("{}\n", outcome.line()))?;
    }
    Ok(())
}

/// Records on the node what `user` forces on it ([`k8s.mesosphere.io/forced`](k8sm_api::keys::FORCED_ANNOTATION)),
/// for the controller's upgrade report, which outlives the Forced Events. Written before the change: a failure
/// refuses it (`unchanged` says what was left alone, such as "nothing was deleted").
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

/// Asks `question` on the terminal; without one, refuses (a script must say `--yes`). `(act, done)` word the
/// refusals: ("delete pods", "deleted").
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

/// Records a `Forced` Warning about `reference` with `note`, before the change it reports: a failure refuses the
/// change (`what`: what it is about, such as "pod ns/name"; `unchanged`: what is left alone).
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

async fn delete(
    client: &Client,
    pod: &ForcedPod,
    recorder: &Recorder,
    user: &str,
    node: &str,
) -> Result<Outcome, Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(pod.uid.clone()),
            resource_version: None,
        }),
        grace_period_seconds: pod.at_once().then_some(0),
        ..DeleteParams::default()
    };
    let pod_name = name(pod);
    let reference = pod_ref(&PodRef::new(
        pod.namespace.as_str(),
        pod.name.as_str(),
        pod.uid.as_str(),
    ));
    let note = event_note(user, node, pod);
    record_forced(
        recorder,
        &note,
        &reference,
        &format!("pod {pod_name}"),
        &format!("pod {pod_name} and those after it were not deleted"),
    )
    .await?;
    match api.delete(&pod.name, &params).await {
        Ok(_) => Ok(Outcome::Deleted { pod: pod_name }),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Outcome::Gone { pod: pod_name }),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            Ok(Outcome::Replaced { pod: pod_name })
        }
        Err(e) => Err(Error::kube(format!("deleting pod {pod_name}"), e)),
    }
}

fn name(pod: &ForcedPod) -> String {
    format!("{}/{}", pod.namespace, pod.name)
}
