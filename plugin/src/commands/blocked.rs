//! `blocked`: plans over the live cluster and lists the pods that hold their nodes.

use chrono::Utc;
use kube::Client;

use crate::cli::BlockedArgs;
use crate::error::Error;
use crate::fetch;
use crate::output::{Terminal, print, render};
use crate::views::blocked::{BlockedView, Namespaces};

pub async fn run(client: &Client, args: &BlockedArgs, terminal: Terminal) -> Result<(), Error> {
    let view = fetch::cluster_view(client).await?;
    let now = Utc::now();
    let plan = k8sm_planner::plan(&view, now);
    let namespaces = match &args.namespace {
        Some(ns) => Namespaces::One(ns.clone()),
        None => Namespaces::All,
    };
    let blocked = BlockedView::from_plan(&plan, &view, &namespaces);
    print(&render(&blocked, args.output, |wide| {
        blocked.render(wide, now, terminal.palette)
    })?)
}
