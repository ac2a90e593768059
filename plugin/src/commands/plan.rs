//! `plan`: the planner's next pass over the live cluster, for one policy, optionally with a new
//! target.

use std::collections::HashSet;

use chrono::Utc;
use kube::{Client, ResourceExt};

use crate::cli::PlanArgs;
use crate::error::Error;
use crate::fetch;
use crate::output::{NODES, Terminal, print, render};
use crate::screens::plan::PlanScreen;

pub async fn run(client: &Client, args: &PlanArgs, terminal: Terminal) -> Result<(), Error> {
    // The plan is that of every node (a node's place in the queue is among all of them); `-l` only
    // picks the rows, by the apiserver's own reading of the query.
    let (mut view, selected) = futures::try_join!(fetch::cluster_view(client), async {
        match &args.selector {
            Some(selector) => fetch::node_metadata(client, selector).await.map(|nodes| {
                Some(
                    nodes
                        .iter()
                        .map(ResourceExt::name_any)
                        .collect::<HashSet<String>>(),
                )
            }),
            None => Ok(None),
        }
    })?;
    let mut names: Vec<String> = view.policies.iter().map(|p| p.name.clone()).collect();
    names.sort();
    let name = fetch::choose(&names, args.policy.policy.as_deref())?;
    let Some(policy) = view.policies.iter_mut().find(|p| p.name == name) else {
        unreachable!("choose returns one of the names")
    };
    let mut simulated = false;
    if let Some(to) = &args.to {
        super::policy::validate_target(to)?;
        simulated = policy.spec.target_executor_id.as_deref() != Some(to.as_str());
        policy.spec.target_executor_id = Some(to.clone());
    }
    let target = policy.spec.target_executor_id.clone();
    let now = Utc::now();
    let mut plan = k8sm_planner::plan(&view, now);
    if let Some(selected) = &selected {
        plan.actions
            .retain(|a| a.kind.node().is_none_or(|node| selected.contains(node)));
    }
    let mut planned = PlanScreen::new(&plan, &name, (target, simulated), now);
    if let Some(selected) = &selected {
        planned.nodes.retain(|node| selected.contains(&node.name));
    }
    // `-n`: only the lists of pods; nodes keep their place and their blockers.
    if let Some(namespace) = &args.namespaces.namespace {
        for node in &mut planned.nodes {
            node.pods.retain(|pod| &pod.namespace == namespace);
        }
    }
    let printing = &args.printing;
    print(&render(
        &planned,
        &printing.output,
        printing.no_headers,
        NODES,
        |wide| planned.render(wide, terminal.palette),
    )?)
}
