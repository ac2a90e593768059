//! `force NODE`: deletes the node's pods that only an operator can move, after confirmation, each
//! with a UID precondition (a new pod of the same name is never hit). The audit comes first: what
//! is forced is recorded on the node, then a `Forced` Event naming the user on each pod right
//! before its deletion; when a record cannot be written, nothing more is deleted.
//! With `--retry-kamikaze`, retries the kamikaze of a node that came back wrong instead (see
//! [`super::retry`]).

use chrono::Utc;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Preconditions};
use kube::runtime::events::Recorder;
use kube::{Api, Client};

use k8sm_planner::PodRef;
use k8sm_view::reference::pod_ref;

use crate::cli::ForceArgs;
use crate::connect::Connection;
use crate::error::Error;
use crate::fetch;
use crate::output::{Terminal, print};
use crate::screens::force::{ForceSelection, ForcedPod, Outcome, event_note};

use super::forcing::{annotate_forced, confirm, record_forced, recorder};

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
