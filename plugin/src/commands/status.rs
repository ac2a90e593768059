//! `upgrade status`: the chosen policy's status, once or (`--watch`) on every change.

use chrono::Utc;
use k8s_openapi::api::core::v1::Node;
use kube::core::PartialObjectMeta;
use kube::{Client, ResourceExt};

use k8sm_api::{ExecutorUpgradePolicy, NodePhase};

use crate::cli::StatusArgs;
use crate::error::Error;
use crate::exit::Outcome;
use crate::fetch;
use crate::output::{NODES, Terminal, print, render};
use crate::screens::fleet::FleetNode;
use crate::screens::status::StatusScreen;

pub async fn run(client: &Client, args: &StatusArgs, terminal: Terminal) -> Result<Outcome, Error> {
    let policy = fetch::policy(client, args.policy.policy.as_deref()).await?;
    let fleet = match node_query(&policy, args)? {
        Some(selector) => Some(fetch::node_metadata(client, &selector).await?),
        None => None,
    };
    let view = status_view(&policy, fleet.as_deref(), args);
    let printing = &args.printing;
    print(&render(
        &view,
        &printing.output,
        printing.no_headers,
        NODES,
        |wide| view.render(wide, Utc::now(), terminal.palette),
    )?)?;
    Ok(if args.exit_code && any_blocked(&view, args) {
        Outcome::Blocked
    } else {
        Outcome::Ok
    })
}

/// A Blocked node among those the view covers: one of its rows or, without `-l`, one the policy
/// counts (the status has rows for at most 100 nodes).
fn any_blocked(view: &StatusScreen, args: &StatusArgs) -> bool {
    view.nodes.iter().any(|n| n.phase == NodePhase::Blocked)
        || (args.selector.is_none() && view.counts.blocked > 0)
}

/// The label query of the nodes the view needs besides the policy: `None` when the policy's status
/// says all it shows (no `--all`, no `-l`).
pub fn node_query(
    policy: &ExecutorUpgradePolicy,
    args: &StatusArgs,
) -> Result<Option<String>, Error> {
    if !args.all && args.selector.is_none() {
        return Ok(None);
    }
    fetch::policy_node_selector(policy, args.selector.as_deref()).map(Some)
}

/// The view of `policy`, restricted to `fleet` (the nodes of [`node_query`]) when there is one.
pub fn status_view<'a>(
    policy: &ExecutorUpgradePolicy,
    fleet: Option<impl IntoIterator<Item = &'a PartialObjectMeta<Node>>>,
    args: &StatusArgs,
) -> StatusScreen {
    let view = StatusScreen::from_policy(policy);
    let Some(fleet) = fleet else {
        return view;
    };
    let target = policy.spec.target_executor_id.as_deref();
    let fleet: Vec<FleetNode> = fleet
        .into_iter()
        .map(|node| {
            FleetNode::classify(&node.name_any(), node.labels(), node.annotations(), target)
        })
        .collect();
    view.restricted_to(&fleet, args.all, args.selector.as_deref())
}
