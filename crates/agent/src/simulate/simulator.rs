//! Carries out the simulation's commands against the apiserver, each in its own task so that many
//! nodes restart at once and the watch loop never waits for a restart delay.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8sm_api::keys::{KAMIKAZE_ANNOTATION, KAMIKAZE_EXECUTOR_ID_ANNOTATION};
use kube::ResourceExt;
use kube::api::{Api, Patch};

use super::state::{Comeback, Command, HttpKamikaze, Simulation};
use crate::client::{is_conflict, is_not_found};
use crate::contract::{
    acknowledge_patch, annotation, executor_id, now_rfc3339, publish_patch, restart_patch,
    returned_from_kamikaze,
};
use crate::http::{Answer, KamikazeTarget};
use crate::retry::with_retries;

/// Shared by the watch loop, the HTTP endpoint and the tasks it spawns.
#[derive(Clone)]
pub struct Simulator {
    nodes: Api<Node>,
    state: Arc<Mutex<Simulation>>,
    new_executor_id: Arc<str>,
    restart_delay: Duration,
}

/// Immediate re-reads after a conflicting restart patch, before the retry's backoff.
const MAX_CONFLICTS: u32 = 5;

/// How a restart ended.
enum Restart {
    /// Patched: the executor reported `from` before and `to` now (`None`: it came back with
    /// `from`), the patch removed kamikaze annotation `removed` and recorded `obeyed` as
    /// obeyed.
    Done {
        from: Option<String>,
        to: Option<String>,
        removed: Option<String>,
        obeyed: String,
    },
    /// The node is gone; nothing to restart.
    Gone,
}

impl Simulator {
    pub fn new(
        nodes: Api<Node>,
        simulation: Simulation,
        new_executor_id: &str,
        restart_delay: Duration,
    ) -> Self {
        Self {
            nodes,
            state: Arc::new(Mutex::new(simulation)),
            new_executor_id: new_executor_id.into(),
            restart_delay,
        }
    }

    /// The simulation's state. Never held across an await, so a plain mutex suffices.
    pub fn state(&self) -> MutexGuard<'_, Simulation> {
        // A panic elsewhere while holding the lock leaves the bookkeeping usable: every update is a
        // single step.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts every command in its own task.
    pub fn spawn(&self, commands: Vec<Command>) {
        for command in commands {
            let this = self.clone();
            tokio::spawn(async move { this.execute(command).await });
        }
    }

    async fn execute(self, command: Command) {
        match command {
            Command::PublishInitial {
                node,
                executor_id,
                resource_version,
            } => {
                self.publish_initial(&node, &executor_id, resource_version.as_deref())
                    .await;
                self.state().publish_done(&node);
            }
            Command::Restart {
                node,
                told,
                comeback,
            } => {
                tracing::info!(node, delay = ?self.restart_delay, "kamikaze: restarting executor after the delay");
                tokio::time::sleep(self.restart_delay).await;
                let removed = self.restart(&node, told.as_deref(), &comeback).await;
                self.state().restart_done(&node, removed);
            }
            Command::Acknowledge { node } => {
                self.acknowledge(&node).await;
                self.state().acknowledge_done(&node);
            }
            Command::Hang { node } => {
                tracing::warn!(
                    node,
                    "kamikaze: this executor hangs and never restarts (--never-restart)"
                );
            }
            Command::Recreate(node) => {
                let name = node.name_any();
                tracing::info!(node = %name, delay = ?self.restart_delay, "node in an upgrade deleted: re-creating it after the delay");
                tokio::time::sleep(self.restart_delay).await;
                self.recreate(*node).await;
                self.state().recreate_done(&name);
            }
        }
    }

    async fn publish_initial(&self, name: &str, executor_id: &str, resource_version: Option<&str>) {
        let result = with_retries("publishing the initial executor ID", || async {
            // A conflict means the node changed after the watch showed it. The watch event of that
            // change may have arrived while this publication was in flight (and was
            // then not acted on), and a quiet node may not change again for minutes: so
            // read it again at once and decide on the fresh copy.
            let mut resource_version = resource_version.map(str::to_owned);
            let mut conflicts = 0;
            loop {
                let patch = publish_patch(executor_id, resource_version.as_deref());
                match self
                    .nodes
                    .patch(name, &crate::client::patch_params(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => return Ok(true),
                    Err(error) if is_not_found(&error) => return Ok(false),
                    Err(error) if is_conflict(&error) && conflicts < MAX_CONFLICTS => {
                        conflicts += 1;
                        let Some(node) = self.nodes.get_opt(name).await? else {
                            return Ok(false);
                        };
                        // Someone published an ID meanwhile, or a kamikaze came (its restart
                        // publishes the new ID).
                        if crate::contract::executor_id(&node).is_some()
                            || annotation(&node, KAMIKAZE_ANNOTATION).is_some()
                        {
                            return Ok(false);
                        }
                        resource_version = node.metadata.resource_version.clone();
                    }
                    // Still changing after several fresh reads: the watch delivers the new state,
                    // and the simulation decides again.
                    Err(error) if is_conflict(&error) => return Ok(false),
                    Err(error) => return Err(error),
                }
            }
        })
        .await;
        match result {
            Ok(true) => tracing::info!(
                node = name,
                executor_id,
                "published the initial executor ID"
            ),
            Ok(false) => tracing::debug!(
                node = name,
                "node changed before its initial ID was published"
            ),
            Err(error) => {
                tracing::error!(node = name, %error, "could not publish the initial executor ID")
            }
        }
    }

    /// Restarts the node's executor, which comes back as `comeback`: reads the node, then patches
    /// the ID it comes back with, removes the kamikaze and records it as obeyed (`told`, the
    /// HTTP kamikaze, or else the kamikaze annotation), on condition that the node did not
    /// change in between, so the kamikaze recorded as obeyed is exactly the one removed.
    /// Returns the kamikaze annotation that the patch removed.
    async fn restart(&self, name: &str, told: Option<&str>, comeback: &Comeback) -> Option<String> {
        // An HTTP kamikaze without a value, and no annotation: its time is the kamikaze.
        let now = now_rfc3339();
        let result = with_retries("restarting a node", || async {
            // A conflict means the node changed after it was read (a status update, the
            // controller): read again at once. Only a node that keeps changing falls
            // back to the backoff between attempts.
            let mut conflicts = 0;
            loop {
                let Some(node) = self.nodes.get_opt(name).await? else {
                    return Ok(Restart::Gone);
                };
                let from = executor_id(&node);
                let kamikaze = annotation(&node, KAMIKAZE_ANNOTATION);
                let obeyed = told.or(kamikaze).unwrap_or(&now);
                let to = match comeback {
                    Comeback::Id(id) if Some(id.as_str()) != from => Some(id.as_str()),
                    Comeback::Id(_) | Comeback::OldId => None,
                };
                // Back with the ID it had, the node is left as a real agent leaves it: that agent
                // recorded itself as the executor told when the kamikaze came
                // without the record.
                let record = (to.is_none()
                    && kamikaze.is_some()
                    && annotation(&node, KAMIKAZE_EXECUTOR_ID_ANNOTATION).is_none())
                .then(|| from.unwrap_or_default());
                let patch = restart_patch(
                    to,
                    obeyed,
                    record,
                    node.metadata.resource_version.as_deref(),
                );
                match self
                    .nodes
                    .patch(name, &crate::client::patch_params(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => {
                        return Ok(Restart::Done {
                            from: from.map(str::to_owned),
                            to: to.map(str::to_owned),
                            removed: kamikaze.map(str::to_owned),
                            obeyed: obeyed.to_owned(),
                        });
                    }
                    Err(error) if is_conflict(&error) && conflicts < MAX_CONFLICTS => {
                        conflicts += 1
                    }
                    Err(error) if is_not_found(&error) => return Ok(Restart::Gone),
                    Err(error) => return Err(error),
                }
            }
        })
        .await;
        match result {
            Ok(Restart::Done {
                from,
                to,
                removed,
                obeyed,
            }) => {
                let from = from.as_deref().unwrap_or("<none>");
                let how = if removed.is_some() {
                    "annotation"
                } else {
                    "HTTP"
                };
                match (&to, comeback) {
                    (Some(to), Comeback::Id(new)) if **new == *self.new_executor_id => {
                        tracing::info!(
                            node = name,
                            from,
                            to,
                            kamikaze = obeyed,
                            how,
                            "restarted executor"
                        )
                    }
                    (Some(to), _) => tracing::warn!(
                        node = name,
                        from,
                        to,
                        kamikaze = obeyed,
                        how,
                        "restarted executor came back with another ID than the new one (--come-back-as)"
                    ),
                    (None, _) => tracing::warn!(
                        node = name,
                        from,
                        kamikaze = obeyed,
                        how,
                        "restarted executor came back with its old ID (--come-back-as): kamikaze recorded as obeyed, annotation removed"
                    ),
                }
                removed
            }
            Ok(Restart::Gone) => {
                tracing::info!(node = name, "node gone before its executor restarted");
                None
            }
            Err(error) => {
                // The kamikaze stays on the node; the next change of the node schedules the restart
                // again.
                tracing::error!(node = name, %error, "could not restart executor");
                None
            }
        }
    }

    /// Acknowledges, as a real agent that came back with its old ID does, the kamikaze that the
    /// node's executor obeyed: removes it, on condition that the node did not change since it
    /// was read.
    async fn acknowledge(&self, name: &str) {
        let result = with_retries("acknowledging a kamikaze", || async {
            let mut conflicts = 0;
            loop {
                let Some(node) = self.nodes.get_opt(name).await? else {
                    return Ok(None);
                };
                let Some(kamikaze) = returned_from_kamikaze(&node, executor_id(&node)) else {
                    return Ok(None);
                };
                let patch = acknowledge_patch(node.metadata.resource_version.as_deref());
                match self
                    .nodes
                    .patch(name, &crate::client::patch_params(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => return Ok(Some(kamikaze.to_owned())),
                    Err(error) if is_conflict(&error) && conflicts < MAX_CONFLICTS => {
                        conflicts += 1
                    }
                    Err(error) if is_not_found(&error) => return Ok(None),
                    Err(error) => return Err(error),
                }
            }
        })
        .await;
        match result {
            Ok(Some(kamikaze)) => tracing::warn!(
                node = name,
                kamikaze,
                "executor back with its old ID acknowledged the kamikaze it obeyed (removed the annotation)"
            ),
            Ok(None) => {}
            Err(error) => {
                tracing::error!(node = name, %error, "could not acknowledge the kamikaze")
            }
        }
    }

    /// Re-creates a node deleted by the `DeleteNode` kamikaze, as it re-registers after its
    /// executor's restart.
    async fn recreate(&self, node: Node) {
        let name = node.name_any();
        let result = with_retries("re-creating a node", || async {
            match self
                .nodes
                .create(&crate::client::post_params(), &node)
                .await
            {
                Ok(_) => Ok(true),
                Err(error) if is_conflict(&error) => {
                    // Still there while finalizers run: wait for it to go. Otherwise someone
                    // re-created it.
                    match self.nodes.get_opt(&name).await? {
                        Some(existing) if existing.metadata.deletion_timestamp.is_some() => {
                            Err(error)
                        }
                        _ => Ok(false),
                    }
                }
                Err(error) => Err(error),
            }
        })
        .await;
        let to = executor_id(&node).unwrap_or("<none>");
        match result {
            Ok(true) if to == &*self.new_executor_id => tracing::info!(
                node = %name,
                to,
                "re-created deleted node with restarted executor"
            ),
            Ok(true) => tracing::warn!(
                node = %name,
                to,
                "re-created deleted node with restarted executor, back with another ID than the new one (--come-back-as)"
            ),
            Ok(false) => {
                tracing::warn!(node = %name, "deleted node exists again; not re-creating it")
            }
            Err(error) => tracing::error!(node = %name, %error, "could not re-create deleted node"),
        }
    }
}

impl KamikazeTarget for Simulator {
    fn node_for(&self, path_node: Option<&str>) -> Option<String> {
        // `simulate` plays many nodes: a request must name one.
        let node = path_node?;
        self.state().plays(node).then(|| node.to_owned())
    }

    fn kamikaze(&self, node: &str, kamikaze: Option<&str>) -> Answer {
        let decision = self.state().http_kamikaze(node, kamikaze);
        match decision {
            HttpKamikaze::UnknownNode => Answer::UnknownNode,
            HttpKamikaze::AlreadyRestarting => {
                tracing::info!(node, "kamikaze over HTTP: already restarting");
                Answer::Accepted
            }
            HttpKamikaze::AlreadyObeyed => {
                tracing::warn!(
                    node,
                    kamikaze,
                    "kamikaze over HTTP: already obeyed (kamikaze-obeyed); not restarting again"
                );
                Answer::Accepted
            }
            HttpKamikaze::Hangs => {
                tracing::warn!(
                    node,
                    "kamikaze over HTTP: this executor never restarts (--never-restart)"
                );
                Answer::Accepted
            }
            HttpKamikaze::Restart(command) => {
                tracing::info!(node, kamikaze, "kamikaze over HTTP");
                self.spawn(vec![command]);
                Answer::Accepted
            }
        }
    }
}
