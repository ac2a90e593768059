//! `force NODE --retry-kamikaze`: removes the kamikaze record of a node that came back from
//! kamikaze with the wrong executor, after confirmation, with a JSON merge patch conditional on the
//! resourceVersion read. A `Forced` Event naming the user on the Node and the node's record of what
//! was forced come first: when either cannot be written, nothing is removed. k8sm then drains the
//! node and tells it to terminate once more.

use k8s_openapi::api::core::v1::Node;
use kube::api::Patch;
use kube::{Api, Client, ResourceExt};

use k8sm_api::ExecutorUpgradePolicy;
use k8sm_planner::NodePlan;
use k8sm_view::reference::node_ref;

use crate::cli::ForceArgs;
use crate::connect::Connection;
use crate::error::{Error, KubeContext};
use crate::fetch;
use crate::output::{Terminal, print};
use crate::screens::retry::{Change, RetryKamikaze, RetryOutcome};

use super::forcing::{annotate_forced, confirm, forced_record, record_forced, recorder};

pub async fn run(
    connection: &Connection,
    plan: &NodePlan,
    args: &ForceArgs,
    terminal: Terminal,
) -> Result<(), Error> {
    let client = &connection.client;
    let node: Node = Api::all(client.clone())
        .get(&plan.node)
        .await
        .kube_context(format!("reading node {}", plan.node))?;
    let policy = fetch::policy(client, Some(&plan.policy)).await?;
    let retry = RetryKamikaze::decide(plan, &node, &policy)?;
    print(&retry.render(terminal.palette))?;
    if args.dry_run {
        let dry = RetryOutcome::WouldRemove {
            node: retry.node.clone(),
        };
        return print(&format!("{}\n", dry.line()));
    }
    if !args.yes {
        confirm(&retry.question(), ("retry a kamikaze", "removed"), terminal)?;
    }
    let user = connection.user().await?;
    let name = retry.node.clone();
    let reference = node_ref(&name, node.uid());
    let unchanged = "nothing was removed";
    record_forced(
        &recorder(client),
        &retry.event_note(&user),
        &reference,
        &format!("node {name}"),
        unchanged,
    )
    .await?;
    let what = "removed the record of its kamikaze, to tell it once more";
    // On the Node, the record goes in the removal's own patch (a separate write first would change
    // the resourceVersion that patch is conditional on); for a record in the policy's status,
    // it is written first.
    if let Change::DeletedNode { .. } = retry.change {
        annotate_forced(client, &name, &user, what, unchanged).await?;
    }
    let outcome = remove(client, &retry, &forced_record(&user, what)).await?;
    print(&format!("{}\n", outcome.line()))
}

/// Applies the merge patch; a 409 means the object changed since it was read, and nothing was
/// removed.
async fn remove(
    client: &Client,
    retry: &RetryKamikaze,
    forced: &str,
) -> Result<RetryOutcome, Error> {
    let patch = Patch::Merge(retry.patch(forced));
    let params = crate::connect::patch_params();
    let result = match &retry.change {
        Change::NodeAnnotations { .. } => Api::<Node>::all(client.clone())
            .patch(&retry.node, &params, &patch)
            .await
            .map(|_| ()),
        Change::DeletedNode { .. } => Api::<ExecutorUpgradePolicy>::all(client.clone())
            .patch_status(&retry.policy, &params, &patch)
            .await
            .map(|_| ()),
    };
    let node = retry.node.clone();
    match result {
        Ok(()) => Ok(RetryOutcome::Removed { node }),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(RetryOutcome::Changed { node }),
        Err(e) => Err(Error::kube(
            format!("removing the kamikaze record of node {node}"),
            e,
        )),
    }
}
