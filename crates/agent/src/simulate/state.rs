//! The simulation's memory and decisions, fed by watch events and finished work; pure, so every rule is unit-tested.
//!
//! It decides *what* to do ([`Command`]); the shell ([`super::run`]) decides *when* and does the I/O.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::runtime::watcher;

use k8sm_api::keys::KAMIKAZE_OBEYED_ANNOTATION;

use crate::contract::{KamikazeFor, annotation, executor_id, kamikaze_for};
use crate::template::{NodeTemplate, in_upgrade};

/// The executor ID that a node's executor reports after a restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Comeback {
    /// The ID it reported before: its new package was missing (`--come-back-as NODE=old`).
    OldId,
    /// This ID: the new one, or for fault injection any other (`--come-back-as NODE=ID`).
    Id(String),
}

/// Work for the shell.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Publish the initial executor ID on a node that reports none, unless it changed since `resource_version`.
    PublishInitial {
        node: String,
        executor_id: String,
        resource_version: Option<String>,
    },
    /// After the restart delay, restart the node's executor (see [`crate::contract::restart_patch`]) so that it comes
    /// back as `comeback`, then report [`Simulation::restart_done`]. `told`: the kamikaze of an HTTP POST's body.
    Restart {
        node: String,
        told: Option<String>,
        comeback: Comeback,
    },
    /// The node's executor came back with the ID it obeyed a kamikaze with, which is still there: remove the
    /// kamikaze, as a real agent acknowledges it (see [`crate::contract::acknowledge_patch`]), then report
    /// [`Simulation::acknowledge_done`].
    Acknowledge { node: String },
    /// After the restart delay, create this upgraded node, then report [`Simulation::recreate_done`].
    Recreate(Box<Node>),
    /// Nothing but a log line: the node got a kamikaze and its executor hangs (`--never-restart`).
    Hang { node: String },
}

/// The answer to `POST /kamikaze/{nodeName}`.
#[derive(Debug, Clone, PartialEq)]
pub enum HttpKamikaze {
    /// Not a selected node: 404.
    UnknownNode,
    /// Accepted (202); run this command.
    Restart(Command),
    /// Accepted (202); the node is already restarting, and restarts once.
    AlreadyRestarting,
    /// Accepted (202); the node's executor obeyed this kamikaze already (`kamikaze-obeyed`) and obeys it once.
    AlreadyObeyed,
    /// Accepted (202), but the node's executor hangs and never comes back (`--never-restart`).
    Hangs,
}

/// What the simulation knows.
#[derive(Debug, Default)]
pub struct Simulation {
    new_executor_id: String,
    initial_executor_id: Option<String>,
    /// Last-seen state of every selected node, and whether it was in an upgrade then.
    nodes: BTreeMap<String, Seen>,
    /// Nodes whose restart is scheduled or running: each kamikaze is handled once, however often it is seen or
    /// POSTed meanwhile.
    restarting: BTreeSet<String>,
    /// Deleted nodes whose re-creation is scheduled or running.
    recreating: BTreeSet<String>,
    /// Nodes whose initial ID is being published.
    publishing: BTreeSet<String>,
    /// Nodes whose returned executor's acknowledgement is being written.
    acknowledging: BTreeSet<String>,
    /// The kamikaze value that each node's last restart removed. A watch may still deliver the node as it was before
    /// that restart; this tells such a stale kamikaze from a new one.
    obeyed: BTreeMap<String, String>,
    /// Names listed since the watch (re)started, when it is re-listing.
    relisted: Option<BTreeSet<String>>,
    /// Fault injection: nodes whose executor never comes back after a kamikaze.
    never_restart: BTreeSet<String>,
    /// Never-restarting nodes whose pending kamikaze was already reported as a hang, so each is reported once.
    hung: BTreeSet<String>,
    /// Fault injection: the ID that a node's executor reports after a restart, instead of the new one.
    come_back_as: BTreeMap<String, Comeback>,
}

#[derive(Debug)]
struct Seen {
    template: NodeTemplate,
    in_upgrade: bool,
    executor_id: Option<String>,
    /// The node's `kamikaze-obeyed`.
    obeyed: Option<String>,
}

impl Simulation {
    pub fn new(new_executor_id: String, initial_executor_id: Option<String>) -> Self {
        Self {
            new_executor_id,
            initial_executor_id,
            ..Self::default()
        }
    }

    /// Makes these nodes' executors hang on kamikaze: they never restart (nor come back after a `DeleteNode`).
    pub fn never_restarting(mut self, nodes: impl IntoIterator<Item = String>) -> Self {
        self.never_restart.extend(nodes);
        self
    }

    /// Makes these nodes' executors come back with the given ID after a kamikaze instead of the new one.
    pub fn coming_back_as(mut self, nodes: impl IntoIterator<Item = (String, Comeback)>) -> Self {
        self.come_back_as.extend(nodes);
        self
    }

    /// What the node's executor comes back as after a restart.
    fn comeback(&self, node: &str) -> Comeback {
        self.come_back_as
            .get(node)
            .cloned()
            .unwrap_or_else(|| Comeback::Id(self.new_executor_id.clone()))
    }

    /// One event of the node watch.
    pub fn on_event(&mut self, event: &watcher::Event<Node>) -> Vec<Command> {
        match event {
            watcher::Event::Apply(node) | watcher::Event::InitApply(node) => self.applied(node),
            watcher::Event::Delete(node) => self.deleted(&node.name_any()),
            watcher::Event::Init => {
                self.relist_started();
                Vec::new()
            }
            watcher::Event::InitDone => self.relist_done(),
        }
    }

    /// A selected node was added or changed.
    pub fn applied(&mut self, node: &Node) -> Vec<Command> {
        let Some(template) = NodeTemplate::of(node) else {
            return Vec::new();
        };
        let name = template.name.clone();
        if let Some(relisted) = &mut self.relisted {
            relisted.insert(name.clone());
        }
        let reported = executor_id(node);
        self.nodes.insert(
            name.clone(),
            Seen {
                template,
                in_upgrade: in_upgrade(node),
                executor_id: reported.map(str::to_owned),
                obeyed: annotation(node, KAMIKAZE_OBEYED_ANNOTATION).map(str::to_owned),
            },
        );

        let mut commands = Vec::new();
        match kamikaze_for(node, reported) {
            KamikazeFor::Pending(_) if self.never_restart.contains(&name) => {
                if self.hung.insert(name.clone()) {
                    commands.push(Command::Hang { node: name.clone() });
                }
            }
            KamikazeFor::Pending(kamikaze) => {
                let stale = self.obeyed.get(&name).is_some_and(|k| k == kamikaze);
                if !stale && self.restarting.insert(name.clone()) {
                    commands.push(Command::Restart {
                        node: name.clone(),
                        told: None,
                        comeback: self.comeback(&name),
                    });
                }
            }
            // Came back with the ID that obeyed this kamikaze (an HTTP kamikaze whose annotation the controller
            // wrote after the restart): acknowledged as a real agent does. A hung executor is not running to do so.
            KamikazeFor::Returned(_) => {
                if !self.never_restart.contains(&name)
                    && !self.restarting.contains(&name)
                    && self.acknowledging.insert(name.clone())
                {
                    commands.push(Command::Acknowledge { node: name.clone() });
                }
            }
            // The kamikaze is gone, so the next one is new even if it carries the same value.
            KamikazeFor::Ignored | KamikazeFor::None => {
                self.obeyed.remove(&name);
                self.hung.remove(&name);
            }
        }
        if let Some(initial) = &self.initial_executor_id
            && reported.is_none()
            // A restart publishes the new ID anyway.
            && !self.restarting.contains(&name)
            && self.publishing.insert(name.clone())
        {
            commands.push(Command::PublishInitial {
                node: name,
                executor_id: initial.clone(),
                resource_version: node.metadata.resource_version.clone(),
            });
        }
        commands
    }

    /// A selected node was deleted (or no longer matches the selector). With the `DeleteNode` mechanism the
    /// controller deletes a drained node: if it was in an upgrade, it comes back upgraded.
    pub fn deleted(&mut self, name: &str) -> Vec<Command> {
        self.obeyed.remove(name);
        let Some(seen) = self.nodes.remove(name) else {
            return Vec::new();
        };
        if self.never_restart.contains(name) {
            return Vec::new();
        }
        if !seen.in_upgrade || !self.recreating.insert(name.to_owned()) {
            return Vec::new();
        }
        let reports = match self.comeback(name) {
            Comeback::OldId => seen.executor_id,
            Comeback::Id(id) => Some(id),
        };
        let node = seen.template.upgraded(reports.as_deref());
        vec![Command::Recreate(Box::new(node))]
    }

    /// The watch (re)starts listing every selected node.
    pub fn relist_started(&mut self) {
        self.relisted = Some(BTreeSet::new());
    }

    /// The listing is complete: nodes known before and not listed were deleted while the watch was down.
    pub fn relist_done(&mut self) -> Vec<Command> {
        let Some(listed) = self.relisted.take() else {
            return Vec::new();
        };
        let gone: Vec<String> = self
            .nodes
            .keys()
            .filter(|name| !listed.contains(*name))
            .cloned()
            .collect();
        gone.iter().flat_map(|name| self.deleted(name)).collect()
    }

    /// `POST /kamikaze/{node}`; `told`: the kamikaze of its body, if it had one.
    /// Whether `node` is a node this simulation plays (a selected node, or a deleted one it re-creates).
    pub fn plays(&self, node: &str) -> bool {
        self.nodes.contains_key(node) || self.recreating.contains(node)
    }

    pub fn http_kamikaze(&mut self, node: &str, told: Option<&str>) -> HttpKamikaze {
        if self.recreating.contains(node) {
            return HttpKamikaze::AlreadyRestarting;
        }
        let Some(seen) = self.nodes.get(node) else {
            return HttpKamikaze::UnknownNode;
        };
        if self.never_restart.contains(node) {
            return HttpKamikaze::Hangs;
        }
        if told.is_some() && seen.obeyed.as_deref() == told {
            return HttpKamikaze::AlreadyObeyed;
        }
        if !self.restarting.insert(node.to_owned()) {
            return HttpKamikaze::AlreadyRestarting;
        }
        HttpKamikaze::Restart(Command::Restart {
            node: node.to_owned(),
            told: told.map(str::to_owned),
            comeback: self.comeback(node),
        })
    }

    /// A restart finished (or gave up); `removed_kamikaze` is the kamikaze value its patch removed, if any.
    pub fn restart_done(&mut self, node: &str, removed_kamikaze: Option<String>) {
        self.restarting.remove(node);
        match removed_kamikaze {
            Some(kamikaze) => {
                self.obeyed.insert(node.to_owned(), kamikaze);
            }
            None => {
                self.obeyed.remove(node);
            }
        }
    }

    /// A re-creation finished (or gave up).
    pub fn recreate_done(&mut self, node: &str) {
        self.recreating.remove(node);
    }

    /// An acknowledgement finished (or gave up: the next change of the node decides again).
    pub fn acknowledge_done(&mut self, node: &str) {
        self.acknowledging.remove(node);
    }

    /// Publishing an initial ID finished (or gave up: the next change of the node decides again).
    pub fn publish_done(&mut self, node: &str) {
        self.publishing.remove(node);
    }

    /// Restarts and re-creations scheduled or running, for the log at shutdown.
    pub fn pending(&self) -> usize {
        self.restarting.len() + self.recreating.len()
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
