//! `plan`: the planner's next pass over the live cluster, for one policy, optionally with a new target.

use chrono::Utc;
use kube::Client;

use crate::cli::PlanArgs;
use crate::error::Error;
use crate::fetch;
use crate::output::{Terminal, print, render};
use crate::views::plan::PlanView;

pub async fn run(client: &Client, args: &PlanArgs, terminal: Terminal) -> Result<(), Error> {
    let mut view = fetch::cluster_view(client).await?;
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
    let plan = k8sm_planner::plan(&view, now);
    let planned = PlanView::new(&plan, &name, (target, simulated), now);
    print(&render(&planned, args.output, |wide| {
        planned.render(wide, terminal.palette)
    })?)
}
