//! `k8sm-agent run`: the agent on a real node. It publishes the executor's ID on its Node and, on
//! kamikaze (by annotation or HTTP), records the kamikaze as obeyed, runs the command that restarts
//! the executor, then exits so that the service manager starts the agent of the new version, which
//! publishes the new ID. An agent that starts and finds the kamikaze its executor ID obeyed came
//! back with the old executor: it acknowledges the kamikaze and does not restart again (an executor
//! obeys a given kamikaze once).

mod decide;

use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8sm_api::keys::KAMIKAZE_ANNOTATION;
use kube::api::{Api, Patch};
use kube::runtime::{WatchStreamExt, watcher};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::sync::mpsc;
use tokio::task::{JoinError, JoinHandle};
use tokio::time::Instant;

use crate::cli::RunArgs;
use crate::client::{is_conflict, is_not_found};
use crate::contract::{
    acknowledge_patch, annotation, now_rfc3339, obey_patch, publish_patch, returned_from_kamikaze,
};
use crate::gate::TokenGate;
use crate::http::{self, Answer, KamikazeTarget};
use crate::retry::with_retries;
use crate::shutdown::Shutdown;
use crate::{Error, client};
use decide::{Decision, NotObeyed, Obedience, Told, decide, obedience};

/// How `run` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Asked to stop (SIGTERM/SIGINT).
    Shutdown,
    /// Obeyed a kamikaze; whether the command succeeded.
    Kamikaze { command_succeeded: bool },
}

/// How long the HTTP endpoint may take to answer the requests it accepted before the agent exits.
const HTTP_DRAIN: Duration = Duration::from_secs(5);

/// How long an HTTP kamikaze waits for the controller's kamikaze annotation of the same value
/// before the agent records it as obeyed on its own. The controller writes that annotation right
/// after its POST, conditional on the Node's resourceVersion: written first, the agent's record
/// would make the controller's write fail.
const HTTP_ANNOTATION_GRACE: Duration = Duration::from_secs(5);

/// After a failure to record a kamikaze as obeyed, when to try again if the Node does not change
/// first.
const RETRY_OBEDIENCE: Duration = Duration::from_secs(10);

/// Immediate re-reads after a conflicting write, before the retry's backoff.
const MAX_CONFLICTS: u32 = 5;

/// Runs until a kamikaze was obeyed or `shutdown`.
pub async fn run(args: RunArgs, mut shutdown: Shutdown) -> Result<Outcome, Error> {
    let client = client::client(args.kubeconfig.as_deref()).await?;
    let nodes: Api<Node> = Api::all(client.clone());
    let (requests, mut kamikaze_requests) = mpsc::channel(1);
    // The endpoint stops once this loop is done, signal or kamikaze, after answering what it
    // accepted.
    let (server_shutdown, stop_server) = Shutdown::new();
    let own = OwnNode {
        name: args.node.as_str().into(),
        requests,
    };
    let server = match args.http_addr {
        Some(addr) => {
            let gate = TokenGate::new(client, args.kamikaze_auth.expected());
            let router = http::router(own.clone(), gate, args.kamikaze_auth.obeyed_tokens()?);
            let tls = args.kamikaze_auth.tls()?;
            Some(http::serve(addr, router, server_shutdown, tls).await?)
        }
        None => None,
    };
    tracing::info!(node = %args.node, executor_id = %args.executor_id, "agent started");

    // Only this node's object, filtered by the apiserver.
    let config = watcher::Config::default().fields(&format!("metadata.name={}", args.node));
    let mut events = std::pin::pin!(watcher(nodes.clone(), config).default_backoff());
    let mut watch = Watch::new(nodes.clone(), &args);
    let outcome = loop {
        let due = watch.deferred.as_ref().map(|deferred| deferred.at);
        let told = tokio::select! {
            () = shutdown.wait() => break Outcome::Shutdown,
            Some(kamikaze) = kamikaze_requests.recv() => watch.on_http(kamikaze),
            () = sleep_until(due), if due.is_some() => watch.take_deferred(),
            result = join(&mut watch.publishing), if watch.publishing.is_some() => {
                watch.on_published(result);
                None
            }
            result = join(&mut watch.acknowledging), if watch.acknowledging.is_some() => {
                watch.on_acknowledged(result);
                None
            }
            event = events.next() => match event {
                Some(Ok(event)) => watch.on_event(event),
                // The watcher re-lists and re-watches by itself, with backoff.
                Some(Err(error)) => {
                    tracing::warn!(%error, "watching the Node");
                    None
                }
                None => break Outcome::Shutdown,
            },
        };
        let Some(told) = told else {
            continue;
        };
        // The record comes first: an executor that restarted without it would find the same
        // kamikaze when it comes back with the same ID, and restart again, forever.
        let recorded = tokio::select! {
            () = shutdown.wait() => break Outcome::Shutdown,
            recorded = record_obedience(&nodes, &args, &told) => recorded,
        };
        match recorded {
            Recorded::Obeyed(obedience) => break restart(&args, &told, &obedience).await?,
            Recorded::Not(NotObeyed::Withdrawn) => {
                tracing::info!(?told, "the kamikaze was withdrawn before it was obeyed");
            }
            Recorded::Not(NotObeyed::NotDrained(why)) => tracing::warn!(
                ?told,
                %why,
                "the HTTP kamikaze is not obeyed: the Node no longer shows it drained by k8sm"
            ),
            Recorded::Not(NotObeyed::AlreadyObeyed(kamikaze)) => tracing::warn!(
                %kamikaze,
                "this kamikaze is recorded as obeyed already (kamikaze-obeyed): an executor obeys a kamikaze once"
            ),
            Recorded::NodeGone => {
                tracing::warn!(
                    ?told,
                    "the Node is gone: no kamikaze to record, none obeyed"
                );
            }
            Recorded::Failed(error) => {
                tracing::error!(
                    %error,
                    ?told,
                    "could not record the kamikaze as obeyed; not restarting without the record (retrying in \
                     {RETRY_OBEDIENCE:?} or on the next change of the Node)"
                );
                watch.defer(told, RETRY_OBEDIENCE);
            }
        }
    };

    stop_server.fire();
    if let Some(server) = server
        && tokio::time::timeout(HTTP_DRAIN, server).await.is_err()
    {
        tracing::warn!("HTTP endpoint still busy; exiting anyway");
    }
    Ok(outcome)
}

/// Sleeps until `due`; never resolves without one.
async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

/// Waits for the task in flight; never resolves without one.
async fn join<T>(task: &mut Option<JoinHandle<T>>) -> Result<T, JoinError> {
    match task.as_mut() {
        Some(task) => task.await,
        None => std::future::pending().await,
    }
}

/// A kamikaze to obey at `at`, unless the watch shows it obeyable sooner.
struct Deferred {
    told: Told,
    at: Instant,
}

/// What the watch loop remembers between events of the Node.
struct Watch<'a> {
    nodes: Api<Node>,
    args: &'a RunArgs,
    /// This agent has published its ID (or found it published).
    published: bool,
    /// The publication in flight: it retries with backoff, which must not hold up the watch.
    publishing: Option<JoinHandle<Result<bool, String>>>,
    /// The acknowledgement in flight (see [`acknowledge`]).
    acknowledging: Option<JoinHandle<Result<Option<String>, String>>>,
    /// The other ID last warned about, so the warning is not repeated on every status update.
    foreign: Option<String>,
    /// The kamikaze annotation on the Node as last seen.
    kamikaze: Option<String>,
    /// An HTTP kamikaze waiting for the controller's annotation, or a kamikaze whose record
    /// failed.
    deferred: Option<Deferred>,
}

impl<'a> Watch<'a> {
    fn new(nodes: Api<Node>, args: &'a RunArgs) -> Self {
        Self {
            nodes,
            args,
            published: false,
            publishing: None,
            acknowledging: None,
            foreign: None,
            kamikaze: None,
            deferred: None,
        }
    }

    /// The value of the HTTP kamikaze waiting for its annotation.
    fn waiting(&self) -> Option<&str> {
        match &self.deferred {
            Some(Deferred {
                told: Told::Http(kamikaze),
                ..
            }) => Some(kamikaze),
            _ => None,
        }
    }

    fn defer(&mut self, told: Told, after: Duration) {
        self.deferred = Some(Deferred {
            told,
            at: Instant::now() + after,
        });
    }

    fn take_deferred(&mut self) -> Option<Told> {
        let told = self.deferred.take()?.told;
        if let Told::Http(kamikaze) = &told {
            tracing::info!(%kamikaze, "no kamikaze annotation of the HTTP kamikaze's value yet: obeying it now");
        }
        Some(told)
    }

    /// An HTTP kamikaze, with the body's value if it had one; returns the kamikaze to obey now, if
    /// any.
    fn on_http(&mut self, kamikaze: Option<String>) -> Option<Told> {
        let Some(kamikaze) = kamikaze else {
            // Nothing to match a later annotation with: record the time of the request.
            let now = now_rfc3339();
            tracing::info!(kamikaze = %now, "kamikaze over HTTP without a value: recording the current time as obeyed");
            return Some(Told::Http(now));
        };
        if self.kamikaze.as_ref() == Some(&kamikaze) {
            tracing::info!(%kamikaze, "kamikaze over HTTP, its annotation already there");
            return Some(Told::Http(kamikaze));
        }
        tracing::info!(
            %kamikaze,
            "kamikaze over HTTP: waiting up to {HTTP_ANNOTATION_GRACE:?} for the controller's annotation of this value"
        );
        self.defer(Told::Http(kamikaze), HTTP_ANNOTATION_GRACE);
        None
    }

    /// Acts on one watch event; returns the kamikaze to obey, if any.
    fn on_event(&mut self, event: watcher::Event<Node>) -> Option<Told> {
        let node = match event {
            watcher::Event::Apply(node) | watcher::Event::InitApply(node) => node,
            watcher::Event::Delete(_) => {
                tracing::warn!("Node deleted; publishing again once it re-registers");
                self.kamikaze = None;
                return None;
            }
            watcher::Event::Init | watcher::Event::InitDone => return None,
        };
        self.kamikaze = annotation(&node, KAMIKAZE_ANNOTATION).map(str::to_owned);
        let own_id = &self.args.executor_id;
        match decide(&node, own_id, self.published, self.waiting()) {
            Decision::Obey(told) => {
                self.deferred = None;
                return Some(told);
            }
            Decision::Acknowledge { .. } if self.acknowledging.is_none() => {
                let task = acknowledge(self.nodes.clone(), self.args.node.clone(), own_id.clone());
                self.acknowledging = Some(tokio::spawn(task));
            }
            Decision::Acknowledge { .. } => {}
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

    fn on_published(&mut self, result: Result<Result<bool, String>, JoinError>) {
        self.publishing = None;
        match result {
            Ok(Ok(true)) => {
                self.published = true;
                tracing::info!(executor_id = %self.args.executor_id, "published executor ID");
            }
            // The Node is not registered yet: its creation arrives through the watch and decides
            // again.
            Ok(Ok(false)) => tracing::info!("Node not found; publishing once it registers"),
            Ok(Err(error)) => {
                tracing::error!(%error, "could not publish executor ID; retrying on the next change");
            }
            Err(error) => tracing::error!(%error, "publishing task failed"),
        }
    }

    fn on_acknowledged(&mut self, result: Result<Result<Option<String>, String>, JoinError>) {
        self.acknowledging = None;
        match result {
            Ok(Ok(Some(kamikaze))) => tracing::warn!(
                %kamikaze,
                executor_id = %self.args.executor_id,
                "came back with the old executor ID after obeying this kamikaze: acknowledged it (removed the \
                 kamikaze annotation) and not restarting again; the controller reports the node to the operator"
            ),
            // Gone or changed meanwhile: the watch delivers the new state.
            Ok(Ok(None)) => {}
            Ok(Err(error)) => {
                tracing::error!(%error, "could not acknowledge the kamikaze; retrying on the next change");
            }
            Err(error) => tracing::error!(%error, "acknowledging task failed"),
        }
    }
}

/// Publishes the executor ID, unconditionally: this agent runs the executor, so its word is the
/// truth. `Ok(false)` when the Node does not exist (yet).
async fn publish(nodes: Api<Node>, node: String, executor_id: String) -> Result<bool, String> {
    let patch = publish_patch(&executor_id, None);
    with_retries("publishing the executor ID", || async {
        match nodes
            .patch(&node, &crate::client::patch_params(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(true),
            Err(error) if is_not_found(&error) => Ok(false),
            Err(error) => Err(error),
        }
    })
    .await
}

/// How recording a kamikaze as obeyed ended.
enum Recorded {
    /// Recorded: restart now.
    Obeyed(Obedience),
    /// Not to be obeyed after all.
    Not(NotObeyed),
    /// There is no Node to record it on.
    NodeGone,
    /// The apiserver did not take the record: the executor must not restart.
    Failed(String),
}

/// Records `told` as obeyed, decided again on a fresh read of the Node and written on condition
/// that the Node did not change since that read.
async fn record_obedience(nodes: &Api<Node>, args: &RunArgs, told: &Told) -> Recorded {
    let own_id = args.executor_id.as_str();
    let result = with_retries("recording the kamikaze as obeyed", || async {
        let mut conflicts = 0;
        loop {
            let Some(node) = nodes.get_opt(&args.node).await? else {
                return Ok(Recorded::NodeGone);
            };
            let obedience = match obedience(&node, own_id, told) {
                Ok(obedience) => obedience,
                Err(not) => return Ok(Recorded::Not(not)),
            };
            let patch = obey_patch(
                &obedience.kamikaze,
                obedience.record.then_some(own_id),
                node.metadata.resource_version.as_deref(),
            );
            match nodes
                .patch(
                    &args.node,
                    &crate::client::patch_params(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => return Ok(Recorded::Obeyed(obedience)),
                // The Node changed since it was read (a status update, the controller): read it
                // again at once.
                Err(error) if is_conflict(&error) && conflicts < MAX_CONFLICTS => conflicts += 1,
                Err(error) if is_not_found(&error) => return Ok(Recorded::NodeGone),
                Err(error) => return Err(error),
            }
        }
    })
    .await;
    result.unwrap_or_else(Recorded::Failed)
}

/// Runs the kamikaze command, once `told` is recorded as obeyed, and reports how it went.
async fn restart(args: &RunArgs, told: &Told, obedience: &Obedience) -> Result<Outcome, Error> {
    let how = match told {
        Told::Annotation(_) => "annotation",
        Told::Http(_) => "HTTP",
    };
    tracing::info!(
        kamikaze = %obedience.kamikaze,
        recorded_executor = obedience.record,
        how,
        "kamikaze recorded as obeyed: restarting the executor"
    );
    tracing::info!(
        command = %args.on_kamikaze,
        timeout = %args.on_kamikaze_timeout,
        "running the kamikaze command"
    );
    let Some(status) = run_command(&args.on_kamikaze, *args.on_kamikaze_timeout).await? else {
        tracing::error!(
            timeout = %args.on_kamikaze_timeout,
            "kamikaze command did not finish in time: killed it (its whole process group); the kamikaze stays \
             recorded as obeyed and is not obeyed again"
        );
        return Ok(Outcome::Kamikaze {
            command_succeeded: false,
        });
    };
    if status.success() {
        tracing::info!(%status, "kamikaze command finished; exiting for the new agent to start");
    } else {
        // The kamikaze stays recorded as obeyed: the command may have stopped the executor before
        // it failed, and running it again for the same kamikaze is the restart loop that
        // record prevents.
        tracing::error!(
            %status,
            "kamikaze command failed; the kamikaze stays recorded as obeyed and is not obeyed again"
        );
    }
    Ok(Outcome::Kamikaze {
        command_succeeded: status.success(),
    })
}

/// After the command's time is up, how long it has between SIGTERM and SIGKILL.
const COMMAND_KILL_GRACE: Duration = Duration::from_secs(5);

/// Runs `sh -c command` in a process group of its own; its exit status, or `None` when it did not
/// finish within `timeout` (then the whole group is sent SIGTERM and, after [`COMMAND_KILL_GRACE`],
/// SIGKILL: a hung restart must not hold the agent, and with it the node, forever).
async fn run_command(command: &str, timeout: Duration) -> Result<Option<ExitStatus>, Error> {
    let spawn_error = |source| Error::Command {
        command: command.to_owned(),
        source,
    };
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(spawn_error)?;
    if let Ok(status) = tokio::time::timeout(timeout, child.wait()).await {
        return status.map(Some).map_err(spawn_error);
    }
    if let Some(id) = child.id() {
        let group = Pid::from_raw(id as i32);
        let _ = killpg(group, Signal::SIGTERM);
        if tokio::time::timeout(COMMAND_KILL_GRACE, child.wait())
            .await
            .is_err()
        {
            let _ = killpg(group, Signal::SIGKILL);
        }
    }
    // Reaped, whatever the signals did; sh itself is killed on drop if it still lingers.
    let _ = child.wait().await;
    Ok(None)
}

/// Acknowledges a kamikaze that this executor ID obeyed before it came back: removes the kamikaze
/// annotation, on condition that the Node did not change since it was read. `Ok(Some(kamikaze))`
/// when acknowledged, `Ok(None)` when there was nothing (left) to acknowledge.
async fn acknowledge(
    nodes: Api<Node>,
    node: String,
    executor_id: String,
) -> Result<Option<String>, String> {
    with_retries("acknowledging the kamikaze", || async {
        let mut conflicts = 0;
        loop {
            let Some(current) = nodes.get_opt(&node).await? else {
                return Ok(None);
            };
            let Some(kamikaze) = returned_from_kamikaze(&current, Some(&executor_id)) else {
                return Ok(None);
            };
            let patch = acknowledge_patch(current.metadata.resource_version.as_deref());
            match nodes
                .patch(&node, &crate::client::patch_params(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return Ok(Some(kamikaze.to_owned())),
                Err(error) if is_conflict(&error) && conflicts < MAX_CONFLICTS => conflicts += 1,
                Err(error) if is_not_found(&error) => return Ok(None),
                Err(error) => return Err(error),
            }
        }
    })
    .await
}

/// The HTTP endpoint's view of this agent: one node.
#[derive(Clone)]
struct OwnNode {
    name: Arc<str>,
    /// The kamikaze of each request, if its body had one.
    requests: mpsc::Sender<Option<String>>,
}

impl KamikazeTarget for OwnNode {
    fn node_for(&self, path_node: Option<&str>) -> Option<String> {
        match path_node {
            Some(node) if node != &*self.name => None,
            _ => Some(self.name.to_string()),
        }
    }

    fn kamikaze(&self, _node: &str, kamikaze: Option<&str>) -> Answer {
        // A full channel means a request is already pending: the executor terminates once either
        // way.
        let _ = self.requests.try_send(kamikaze.map(str::to_owned));
        Answer::Accepted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_kamikaze_command_reports_its_exit_status() {
        let status = run_command("exit 3", Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(status.and_then(|s| s.code()), Some(3));
    }

    #[tokio::test]
    async fn a_hung_kamikaze_command_is_killed_with_everything_it_started() {
        let dir = std::env::temp_dir().join(format!("k8sm-agent-command-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pid_file = dir.join("child.pid");
        // A restart that hangs, and a process it started in the background that would outlive a
        // plain kill of sh.
        let command = format!("sleep 600 & echo $! > '{}'; wait", pid_file.display());
        let status = run_command(&command, Duration::from_millis(500))
            .await
            .unwrap();
        assert_eq!(status, None, "reported as not finished");
        let child: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // Killed and reaped by its parent's group kill: signal 0 finds no such process (a zombie
        // would still be found, but sh, its parent, is gone, so init reaps it).
        let alive = || nix::sys::signal::kill(Pid::from_raw(child), None).is_ok();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while alive() && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(!alive(), "the background child {child} survived");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
