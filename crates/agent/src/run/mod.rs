//! `k8sm-agent run`: the agent on a real node. It publishes the executor's ID on its Node and, on kamikaze (by
//! annotation or HTTP), runs the command that restarts the executor, then exits so that the service manager starts
//! the agent of the new version, which publishes the new ID.

mod decide;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc;
use tokio::task::{JoinError, JoinHandle};

use crate::cli::RunArgs;
use crate::client::{REQUEST_TIMEOUT, is_not_found};
use crate::contract::{publish_patch, record_kamikaze_patch};
use crate::http::{self, Answer, KamikazeTarget};
use crate::retry::with_retries;
use crate::shutdown::Shutdown;
use crate::{Error, client};
use decide::{Decision, decide};

/// How `run` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Asked to stop (SIGTERM/SIGINT).
    Shutdown,
    /// Obeyed a kamikaze; whether the command succeeded.
    Kamikaze { command_succeeded: bool },
}

/// Why the executor must terminate.
enum Kamikaze {
    Annotation {
        value: String,
        record: bool,
        resource_version: Option<String>,
    },
    Http,
}

/// How long the HTTP endpoint may take to answer the requests it accepted before the agent exits.
const HTTP_DRAIN: Duration = Duration::from_secs(5);

/// Runs until a kamikaze was obeyed or `shutdown`.
pub async fn run(args: RunArgs, mut shutdown: Shutdown) -> Result<Outcome, Error> {
    let client = client::client(args.kubeconfig.as_deref()).await?;
    let nodes: Api<Node> = Api::all(client);
    let (requests, mut kamikaze_requests) = mpsc::channel(1);
    // The endpoint stops once this loop is done, signal or kamikaze, after answering what it accepted.
    let (server_shutdown, stop_server) = Shutdown::new();
    let own = OwnNode {
        name: args.node.as_str().into(),
        requests,
    };
    let server = match args.http_addr {
        Some(addr) => Some(http::serve(addr, http::router(own.clone()), server_shutdown).await?),
        None => None,
    };
    tracing::info!(node = %args.node, executor_id = %args.executor_id, "agent started");

    // Only this node's object, filtered by the apiserver.
    let config = watcher::Config::default().fields(&format!("metadata.name={}", args.node));
    let mut events = std::pin::pin!(watcher(nodes.clone(), config).default_backoff());
    let mut watch = Watch::new(nodes.clone(), &args);
    let kamikaze = loop {
        tokio::select! {
            () = shutdown.wait() => break None,
            Some(()) = kamikaze_requests.recv() => break Some(Kamikaze::Http),
            result = watch.published(), if watch.publishing.is_some() => watch.on_published(result),
            event = events.next() => match event {
                Some(Ok(event)) => {
                    if let Some(kamikaze) = watch.on_event(event) {
                        break Some(kamikaze);
                    }
                }
                // The watcher re-lists and re-watches by itself, with backoff.
                Some(Err(error)) => tracing::warn!(%error, "watching the Node"),
                None => break None,
            },
        }
    };

    let outcome = match kamikaze {
        Some(kamikaze) => obey(&nodes, &args, kamikaze).await?,
        None => Outcome::Shutdown,
    };
    stop_server.fire();
    if let Some(server) = server
        && tokio::time::timeout(HTTP_DRAIN, server).await.is_err()
    {
        tracing::warn!("HTTP endpoint still busy; exiting anyway");
    }
    Ok(outcome)
}

/// What the watch loop remembers between events of the Node.
struct Watch<'a> {
    nodes: Api<Node>,
    args: &'a RunArgs,
    /// This agent has published its ID (or found it published).
    published: bool,
    /// The publication in flight: it retries with backoff, which must not hold up the watch.
    publishing: Option<JoinHandle<Result<bool, String>>>,
    /// The other ID last warned about, so the warning is not repeated on every status update.
    foreign: Option<String>,
}

impl<'a> Watch<'a> {
    fn new(nodes: Api<Node>, args: &'a RunArgs) -> Self {
        Self {
            nodes,
            args,
            published: false,
            publishing: None,
            foreign: None,
        }
    }

    /// Acts on one watch event; returns the kamikaze to obey, if any.
    fn on_event(&mut self, event: watcher::Event<Node>) -> Option<Kamikaze> {
        let node = match event {
            watcher::Event::Apply(node) | watcher::Event::InitApply(node) => node,
            watcher::Event::Delete(_) => {
                tracing::warn!("Node deleted; publishing again once it re-registers");
                return None;
            }
            watcher::Event::Init | watcher::Event::InitDone => return None,
        };
        let own_id = &self.args.executor_id;
        match decide(&node, own_id, self.published) {
            Decision::Obey { kamikaze, record } => {
                return Some(Kamikaze::Annotation {
                    value: kamikaze,
                    record,
                    resource_version: node.metadata.resource_version.clone(),
                });
            }
            Decision::Publish if self.publishing.is_none() => {
                let task = publish(self.nodes.clone(), self.args.node.clone(), own_id.clone());
                self.publishing = Some(tokio::spawn(task));
            }
            Decision::Publish => {}
            Decision::Foreign { reported } => {
                if self.foreign.as_ref() != Some(&reported) {
                    tracing::warn!(%reported, own = %own_id, "the Node reports another executor ID: something else writes the key");
                    self.foreign = Some(reported);
                }
            }
            Decision::Nothing => self.published = true,
        }
        None
    }

    /// Waits for the publication in flight; only polled while there is one.
    async fn published(&mut self) -> Result<Result<bool, String>, JoinError> {
        match self.publishing.as_mut() {
            Some(task) => task.await,
            None => std::future::pending().await,
        }
    }

    fn on_published(&mut self, result: Result<Result<bool, String>, JoinError>) {
        self.publishing = None;
        match result {
            Ok(Ok(true)) => {
                self.published = true;
                tracing::info!(executor_id = %self.args.executor_id, "published executor ID");
            }
            // The Node is not registered yet: its creation arrives through the watch and decides again.
            Ok(Ok(false)) => tracing::info!("Node not found; publishing once it registers"),
            Ok(Err(error)) => {
                tracing::error!(%error, "could not publish executor ID; retrying on the next change");
            }
            Err(error) => tracing::error!(%error, "publishing task failed"),
        }
    }
}

/// Publishes the executor ID, unconditionally: this agent runs the executor, so its word is the truth. `Ok(false)`
/// when the Node does not exist (yet).
async fn publish(nodes: Api<Node>, node: String, executor_id: String) -> Result<bool, String> {
    let patch = publish_patch(&executor_id, None);
    with_retries("publishing the executor ID", || async {
        match nodes
            .patch(&node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(true),
            Err(error) if is_not_found(&error) => Ok(false),
            Err(error) => Err(error),
        }
    })
    .await
}

/// Runs the kamikaze command and reports how it went.
async fn obey(nodes: &Api<Node>, args: &RunArgs, kamikaze: Kamikaze) -> Result<Outcome, Error> {
    match kamikaze {
        Kamikaze::Annotation {
            value,
            record,
            resource_version,
        } => {
            tracing::info!(kamikaze = %value, "kamikaze annotation: restarting the executor");
            if record {
                record_self(nodes, args, resource_version.as_deref()).await;
            }
        }
        Kamikaze::Http => tracing::info!("kamikaze over HTTP: restarting the executor"),
    }
    tracing::info!(command = %args.on_kamikaze, "running the kamikaze command");
    let status = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&args.on_kamikaze)
        .status()
        .await
        .map_err(|source| Error::Command {
            command: args.on_kamikaze.clone(),
            source,
        })?;
    if status.success() {
        tracing::info!(%status, "kamikaze command finished; exiting for the new agent to start");
    } else {
        tracing::error!(%status, "kamikaze command failed");
    }
    Ok(Outcome::Kamikaze {
        command_succeeded: status.success(),
    })
}

/// Records this executor as the one told to terminate, so the agent after the restart knows the kamikaze was
/// obeyed. Best effort: the kamikaze is obeyed whether or not the record is written.
async fn record_self(nodes: &Api<Node>, args: &RunArgs, resource_version: Option<&str>) {
    let patch = record_kamikaze_patch(&args.executor_id, resource_version);
    let params = PatchParams::default();
    let patch = Patch::Merge(&patch);
    let request = nodes.patch(&args.node, &params, &patch);
    match tokio::time::timeout(REQUEST_TIMEOUT, request).await {
        Ok(Ok(_)) => tracing::info!("recorded this executor as told to terminate"),
        Ok(Err(error)) => {
            tracing::warn!(%error, "could not record this executor as told to terminate")
        }
        Err(_) => tracing::warn!("recording this executor as told to terminate timed out"),
    }
}

/// The HTTP endpoint's view of this agent: one node.
#[derive(Clone)]
struct OwnNode {
    name: Arc<str>,
    requests: mpsc::Sender<()>,
}

impl KamikazeTarget for OwnNode {
    fn kamikaze(&self, node: Option<&str>) -> Answer {
        if node.is_some_and(|node| node != &*self.name) {
            return Answer::UnknownNode;
        }
        // A full channel means a request is already pending: the executor terminates once either way.
        let _ = self.requests.try_send(());
        Answer::Accepted
    }
}
