//! `blocked`: plans over the live cluster and lists the pods that hold their nodes.

use chrono::Utc;
use kube::Client;

use crate::cli::BlockedArgs;
use crate::error::Error;
use crate::exit::Outcome;
use crate::fetch;
use crate::output::{PODS, Terminal, print, render};
use crate::screens::blocked::{BlockedScreen, Namespaces};

pub async fn run(
    client: &Client,
    args: &BlockedArgs,
    terminal: Terminal,
) -> Result<Outcome, Error> {
    // The plan weighs every pod (a pod waits on its workload's others); `-l` only picks the rows,
    // by the apiserver's own reading of the query.
    let (view, selected) = futures::try_join!(fetch::cluster_view(client), async {
        match &args.selector {
            Some(selector) => fetch::pod_uids(client, selector).await.map(Some),
            None => Ok(None),
        }
    })?;
    let now = Utc::now();
    let plan = k8sm_planner::plan(&view, now);
    let namespaces = match &args.namespaces.namespace {
        Some(ns) => Namespaces::One(ns.clone()),
        None => Namespaces::All,
    };
    let mut blocked = BlockedScreen::from_plan(&plan, &view, &namespaces);
    if let Some(selected) = &selected {
        blocked.pods.retain(|pod| selected.contains(&pod.uid));
    }
    let printing = &args.printing;
    print(&render(
        &blocked,
        &printing.output,
        printing.no_headers,
        PODS,
        |wide| blocked.render_table(wide, !printing.no_headers, now, terminal.palette),
    )?)?;
    Ok(if blocked.pods.is_empty() {
        Outcome::Ok
    } else {
        Outcome::Blocked
    })
}
