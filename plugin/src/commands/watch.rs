//! `upgrade status --watch`: re-renders whenever what it renders changes, until every node is
//! upgraded or Ctrl-C; on a terminal each frame replaces the last (ages tick every second), in a
//! pipe each distinct frame is printed once, after a blank line. It watches only what it renders:
//! the policy, whose status sums up every node, and with `--all` or `-l` those nodes' metadata,
//! selected server-side; a watch of every node or pod would stream the whole fleet's heartbeats to
//! redraw a screen that shows none of them. Frames read local caches: no request per frame.

use std::time::Duration;

use chrono::Utc;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};

use k8sm_api::ExecutorUpgradePolicy;

use crate::cli::StatusArgs;
use crate::error::Error;
use crate::output::{NODES, Terminal, print, render};
use crate::screens::status::StatusScreen;

/// Bursts of changes (a node drained, its pods evicted) are rendered once.
const SETTLE: Duration = Duration::from_millis(200);

/// Moves the cursor home and clears the screen.
const CLEAR: &str = "\x1b[H\x1b[2J";

pub async fn run(
    client: &Client,
    policy: &ExecutorUpgradePolicy,
    args: &StatusArgs,
    terminal: Terminal,
) -> Result<(), Error> {
    let name = policy.name_any();
    let (policy_cache, policy_writer) = reflector::store::<ExecutorUpgradePolicy>();
    let policy_changes = reflector::reflector(
        policy_writer,
        watcher(
            Api::all(client.clone()),
            watcher::Config::default().fields(&format!("metadata.name={name}")),
        ),
    )
    .default_backoff()
    .map(|event| {
        event
            .map(|_| ())
            .map_err(|e| watch_error("watching the policy", e))
    })
    .boxed();
    // The node query is that of the policy as the watch starts: a changed spec.nodeSelector needs a
    // new watch.
    let (node_cache, node_changes) = match super::status::node_query(policy, args)? {
        Some(selector) => {
            let (cache, writer) = reflector::store::<PartialObjectMeta<Node>>();
            let api: Api<PartialObjectMeta<Node>> = Api::all(client.clone());
            let changes = reflector::reflector(
                writer,
                watcher(api, watcher::Config::default().labels(&selector)),
            )
            .default_backoff()
            .map(|event| {
                event
                    .map(|_| ())
                    .map_err(|e| watch_error("watching nodes", e))
            })
            .boxed();
            (Some(cache), changes)
        }
        None => (None, futures::stream::pending().boxed()),
    };
    let mut changes = futures::stream::select(policy_changes, node_changes);
    // The first frame waits for both caches to hold what the cluster holds.
    wait_for(&mut changes, &policy_cache).await?;
    if let Some(cache) = &node_cache {
        wait_for(&mut changes, cache).await?;
    }
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut last: Option<StatusScreen> = None;
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        let policy = policy_cache
            .state()
            .into_iter()
            .find(|p| p.name_any() == name)
            .ok_or_else(|| Error::PolicyDeleted(name.clone()))?;
        let nodes = node_cache.as_ref().map(Store::state);
        let view = super::status::status_view(
            &policy,
            nodes.as_ref().map(|nodes| nodes.iter().map(AsRef::as_ref)),
            args,
        );
        if terminal.stdout_is_terminal || last.as_ref() != Some(&view) {
            let printing = &args.printing;
            let text = render(
                &view,
                &printing.output,
                printing.no_headers,
                NODES,
                |wide| view.render(wide, Utc::now(), terminal.palette),
            )?;
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
                // Once the watches ran, a failure is retried with backoff (meanwhile the frame
                // stands).
                tokio::time::sleep(SETTLE).await;
                while let Some(Some(_)) = changes.next().now_or_never() {}
            }
            _ = tick.tick(), if terminal.stdout_is_terminal => {}
            _ = &mut interrupted => return Ok(()),
        }
    }
}

/// Drives `changes` (which feed the caches) until `cache` has had its first complete list. A watch
/// that fails before (no right to watch, no such resource) is an error to show, not a wait without
/// end.
async fn wait_for<K, S>(changes: &mut S, cache: &Store<K>) -> Result<(), Error>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
    S: futures::Stream<Item = Result<(), Error>> + Unpin,
{
    let ready = cache.wait_until_ready();
    tokio::pin!(ready);
    loop {
        tokio::select! {
            _ = &mut ready => return Ok(()),
            change = changes.next() => match change {
                Some(Err(error)) => return Err(error),
                Some(Ok(())) => {}
                None => return Ok(()),
            },
        }
    }
}

/// A watch's failure, as the plugin reports a request's.
fn watch_error(what: &str, error: watcher::Error) -> Error {
    match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => Error::kube(what, e),
        watcher::Error::WatchError(status) => Error::kube(what, kube::Error::Api(status)),
        watcher::Error::NoResourceVersion => Error::Api {
            what: what.to_owned(),
            code: 0,
            message: "the apiserver's answer has no resourceVersion".to_owned(),
        },
    }
}
