//! `upgrade status --watch`: re-renders whenever the policy or a node changes, until every node is upgraded or the
//! operator presses Ctrl-C. On a terminal each frame replaces the last (and ages tick every second); in a pipe each
//! distinct frame is printed once, after a blank line.

use std::time::Duration;

use chrono::Utc;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};

use k8sm_api::ExecutorUpgradePolicy;

use crate::cli::Output;
use crate::error::{Error, KubeContext};
use crate::output::{Terminal, print, render};
use crate::views::status::StatusView;

/// Bursts of changes (a node drained, its pods evicted) are rendered once.
const SETTLE: Duration = Duration::from_millis(200);

/// Moves the cursor home and clears the screen.
const CLEAR: &str = "\x1b[H\x1b[2J";

pub async fn run(
    client: &Client,
    name: &str,
    format: Output,
    terminal: Terminal,
) -> Result<(), Error> {
    let policies: Api<ExecutorUpgradePolicy> = Api::all(client.clone());
    // Only metadata: enough to notice a node changing, at a fraction of the traffic.
    let nodes: Api<PartialObjectMeta<Node>> = Api::all(client.clone());
    let policy_changes = watcher(
        policies.clone(),
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .default_backoff()
    .map(|_| ());
    let node_changes = watcher(nodes, watcher::Config::default())
        .default_backoff()
        .map(|_| ());
    let mut changes = futures::stream::select(policy_changes, node_changes).boxed();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut last: Option<StatusView> = None;
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        let policy = policies
            .get_opt(name)
            .await
            .kube_context(format!("reading ExecutorUpgradePolicy {name}"))?
            .ok_or_else(|| Error::PolicyDeleted(name.to_owned()))?;
        let view = StatusView::from_policy(&policy);
        if terminal.stdout_is_terminal || last.as_ref() != Some(&view) {
            let text = render(&view, format, |wide| {
                view.render(wide, Utc::now(), terminal.palette)
            })?;
            let frame = match (terminal.stdout_is_terminal, &last) {
                (true, _) => format!(
                    "{CLEAR}{text}\n{}\n",
                    terminal.palette.dim("watching; Ctrl-C to stop")
                ),
                (false, None) => text,
                (false, Some(_)) => format!("\n{text}"),
            };
            print(&frame)?;
        }
        if view.done {
            return Ok(());
        }
        last = Some(view);
        tokio::select! {
            change = changes.next() => {
                if change.is_none() {
                    return Ok(());
                }
                tokio::time::sleep(SETTLE).await;
                while let Some(Some(())) = changes.next().now_or_never() {}
            }
            _ = tick.tick(), if terminal.stdout_is_terminal => {}
            _ = &mut interrupted => return Ok(()),
        }
    }
}
