//! The simulation's memory and decisions, fed by watch events and finished work; pure, so every
//! rule is unit-tested.
//!
//! It decides *what* to do ([`Command`]); the shell ([`super::run`]) decides *when* and does the
//! I/O.

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
    /// Publish the initial executor ID on a node that reports none, unless it changed since
    /// `resource_version`.
    PublishInitial {
        node: String,
        executor_id: String,
        resource_version: Option<String>,
    },
    /// After the restart delay, restart the node's executor (see
    /// [`crate::contract::restart_patch`]) so that it comes back as `comeback`, then report
    /// [`Simulation::restart_done`]. `told`: the kamikaze of an HTTP POST's body.
    Restart {
        node: String,
        told: Option<String>,
        comeback: Comeback,
    },
    /// The node's executor came back with the ID it obeyed a kamikaze with, which is still there:
    /// remove the kamikaze, as a real agent acknowledges it (see
    /// [`crate::contract::acknowledge_patch`]), then report [`Simulation::acknowledge_done`].
    Acknowledge { node: String },
    /// After the restart delay, create this upgraded node, then report
    /// [`Simulation::recreate_done`].
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
    /// Accepted (202); the node's executor obeyed this kamikaze already (`kamikaze-obeyed`) and
    /// obeys it once.
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
    /// Nodes whose restart is scheduled or running: each kamikaze is handled once, however often
    /// it is seen or POSTed meanwhile.
    restarting: BTreeSet<String>,
    /// Deleted nodes whose re-creation is scheduled or running.
    recreating: BTreeSet<String>,
    /// Nodes whose initial ID is being published.
    publishing: BTreeSet<String>,
    /// Nodes whose returned executor's acknowledgement is being written.
    acknowledging: BTreeSet<String>,
    /// The kamikaze value that each node's last restart removed. A watch may still deliver the
    /// node as it was before that restart; this tells such a stale kamikaze from a new one.
    obeyed: BTreeMap<String, String>,
    /// Names listed since the watch (re)started, when it is re-listing.
    relisted: Option<BTreeSet<String>>,
    /// Fault injection: nodes whose executor never comes back after a kamikaze.
    never_restart: BTreeSet<String>,
    /// Never-restarting nodes whose pending kamikaze was already reported as a hang, so each is
    /// reported once.
    hung: BTreeSet<String>,
    /// Fault injection: the ID that a node's executor reports after a restart, instead of the new
    /// one.
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

    /// Makes these nodes' executors hang on kamikaze: they never restart (nor come back after a
    /// `DeleteNode`).
    pub fn never_restarting(mut self, nodes: impl IntoIterator<Item = String>) -> Self {
        self.never_restart.extend(nodes);
        self
    }

    /// Makes these nodes' executors come back with the given ID after a kamikaze instead of the new
    /// one.
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
            // Came back with the ID that obeyed this kamikaze (an HTTP kamikaze whose annotation
            // the controller wrote after the restart): acknowledged as a real agent
            // does. A hung executor is not running to do so.
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

    /// A selected node was deleted (or no longer matches the selector). With the `DeleteNode`
    /// mechanism the controller deletes a drained node: if it was in an upgrade, it comes back
    /// upgraded.
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

    /// The listing is complete: nodes known before and not listed were deleted while the watch was
    /// down.
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
    /// Whether `node` is a node this simulation plays (a selected node, or a deleted one it
    /// re-creates).
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

    /// A restart finished (or gave up); `removed_kamikaze` is the kamikaze value its patch removed,
    /// if any.
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
mod tests {
    //! Table-like tests of the simulation's decisions, one rule each.

    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8sm_api::keys::{
        EXECUTOR_ID_ANNOTATION, INCOMPATIBLE_EXECUTOR_ANNOTATION, INCOMPATIBLE_EXECUTOR_LABEL,
        KAMIKAZE_ANNOTATION, KAMIKAZE_EXECUTOR_ID_ANNOTATION, KAMIKAZE_OBEYED_ANNOTATION,
    };

    use super::*;

    const T1: &str = "2025-01-01T00:00:01Z";
    const T2: &str = "2025-01-01T00:00:02Z";

    fn node(name: &str, labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> Node {
        let map = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>()
        };
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                resource_version: Some("5".into()),
                labels: Some(map(labels)),
                annotations: Some(map(annotations)),
                ..ObjectMeta::default()
            },
            ..Node::default()
        }
    }

    fn old(name: &str) -> Node {
        node(name, &[], &[(EXECUTOR_ID_ANNOTATION, "old")])
    }

    fn kamikazed(name: &str, at: &str) -> Node {
        node(
            name,
            &[],
            &[(EXECUTOR_ID_ANNOTATION, "old"), (KAMIKAZE_ANNOTATION, at)],
        )
    }

    fn restart(name: &str) -> Command {
        Command::Restart {
            node: name.into(),
            told: None,
            comeback: Comeback::Id("new".into()),
        }
    }

    fn http_restart(name: &str, told: &str) -> Command {
        Command::Restart {
            node: name.into(),
            told: Some(told.into()),
            comeback: Comeback::Id("new".into()),
        }
    }

    fn sim() -> Simulation {
        Simulation::new("new".into(), None)
    }

    #[test]
    fn a_node_without_an_id_gets_the_initial_id_once() {
        let mut s = Simulation::new("new".into(), Some("old".into()));
        let bare = node("n1", &[], &[]);
        assert_eq!(
            s.applied(&bare),
            [Command::PublishInitial {
                node: "n1".into(),
                executor_id: "old".into(),
                resource_version: Some("5".into()),
            }]
        );
        assert_eq!(s.applied(&bare), [], "already publishing");
        s.publish_done("n1");
        assert_eq!(s.applied(&old("n1")), [], "published");
    }

    #[test]
    fn without_an_initial_id_nothing_is_published() {
        assert_eq!(sim().applied(&node("n1", &[], &[])), []);
    }

    #[test]
    fn a_node_with_an_id_keeps_it() {
        let mut s = Simulation::new("new".into(), Some("old".into()));
        let other = node("n1", &[], &[(EXECUTOR_ID_ANNOTATION, "other")]);
        assert_eq!(s.applied(&other), []);
    }

    #[test]
    fn a_kamikaze_restarts_the_node_once() {
        let mut s = sim();
        assert_eq!(s.applied(&old("n1")), []);
        assert_eq!(s.applied(&kamikazed("n1", T1)), [restart("n1")]);
        assert_eq!(s.applied(&kamikazed("n1", T1)), [], "restart in flight");
        assert_eq!(
            s.applied(&kamikazed("n1", T2)),
            [],
            "a new kamikaze during the restart is obeyed by that restart"
        );
        assert_eq!(s.pending(), 1);
        s.restart_done("n1", Some(T2.into()));
        assert_eq!(s.pending(), 0);
        assert_eq!(
            s.applied(&kamikazed("n1", T2)),
            [],
            "a stale event from before the restart"
        );
    }

    #[test]
    fn a_node_kamikazed_again_later_restarts_again() {
        let mut s = sim();
        assert_eq!(s.applied(&kamikazed("n1", T1)), [restart("n1")]);
        s.restart_done("n1", Some(T1.into()));
        assert_eq!(
            s.applied(&node("n1", &[], &[(EXECUTOR_ID_ANNOTATION, "new")])),
            []
        );
        assert_eq!(
            s.applied(&kamikazed("n1", T1)),
            [restart("n1")],
            "seen without kamikaze in between: a new kamikaze, even with the same value"
        );
    }

    #[test]
    fn a_kamikaze_recorded_for_an_earlier_executor_is_not_obeyed() {
        let mut s = sim();
        let already_restarted = node(
            "n1",
            &[],
            &[
                (EXECUTOR_ID_ANNOTATION, "new"),
                (KAMIKAZE_ANNOTATION, T1),
                (KAMIKAZE_EXECUTOR_ID_ANNOTATION, "old"),
            ],
        );
        assert_eq!(s.applied(&already_restarted), []);
    }

    #[test]
    fn restarting_nodes_do_not_get_the_initial_id() {
        let mut s = Simulation::new("new".into(), Some("old".into()));
        let told = node("n1", &[], &[(KAMIKAZE_ANNOTATION, T1)]);
        assert_eq!(s.applied(&told), [restart("n1")]);
    }

    #[test]
    fn each_node_restarts_independently() {
        let mut s = sim();
        assert_eq!(s.applied(&kamikazed("n1", T1)), [restart("n1")]);
        assert_eq!(s.applied(&kamikazed("n2", T1)), [restart("n2")]);
        assert_eq!(s.pending(), 2);
    }

    #[test]
    fn http_kamikaze_restarts_known_nodes_once() {
        let mut s = sim();
        assert_eq!(s.http_kamikaze("n1", None), HttpKamikaze::UnknownNode);
        s.applied(&old("n1"));
        assert_eq!(
            s.http_kamikaze("n1", None),
            HttpKamikaze::Restart(restart("n1"))
        );
        assert_eq!(s.http_kamikaze("n1", None), HttpKamikaze::AlreadyRestarting);
        assert_eq!(
            s.applied(&kamikazed("n1", T1)),
            [],
            "the controller's annotation of the same kamikaze"
        );
        s.restart_done("n1", None);
        assert_eq!(
            s.http_kamikaze("n1", None),
            HttpKamikaze::Restart(restart("n1"))
        );
    }

    fn marked(name: &str) -> Node {
        node(
            name,
            &[("type", "kwok"), (INCOMPATIBLE_EXECUTOR_LABEL, "true")],
            &[
                (EXECUTOR_ID_ANNOTATION, "old"),
                (INCOMPATIBLE_EXECUTOR_ANNOTATION, T1),
            ],
        )
    }

    fn recreated(name: &str) -> Node {
        let mut node = node(
            name,
            &[("type", "kwok")],
            &[(EXECUTOR_ID_ANNOTATION, "new")],
        );
        node.metadata.resource_version = None;
        node.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
            unschedulable: Some(false),
            ..Default::default()
        });
        node.status = Some(Default::default());
        node
    }

    #[test]
    fn a_deleted_node_in_an_upgrade_is_recreated_upgraded_once() {
        let mut s = sim();
        s.applied(&marked("n1"));
        assert_eq!(
            s.deleted("n1"),
            [Command::Recreate(Box::new(recreated("n1")))]
        );
        assert_eq!(s.deleted("n1"), [], "forgotten once deleted");
        assert_eq!(s.pending(), 1);
        assert_eq!(
            s.http_kamikaze("n1", None),
            HttpKamikaze::AlreadyRestarting,
            "coming back already"
        );
        s.recreate_done("n1");
        assert_eq!(s.pending(), 0);
    }

    #[test]
    fn a_deleted_node_told_kamikaze_is_recreated() {
        let mut s = sim();
        s.applied(&kamikazed("n1", T1));
        assert!(matches!(s.deleted("n1")[..], [Command::Recreate(_)]));
    }

    #[test]
    fn a_deleted_node_not_in_an_upgrade_stays_deleted() {
        let mut s = sim();
        s.applied(&old("n1"));
        assert_eq!(s.deleted("n1"), []);
        assert_eq!(s.deleted("never-seen"), []);
    }

    #[test]
    fn the_last_seen_state_counts() {
        let mut s = sim();
        s.applied(&marked("n1"));
        s.applied(&node("n1", &[], &[(EXECUTOR_ID_ANNOTATION, "new")]));
        assert_eq!(s.deleted("n1"), [], "upgraded and unmarked before deletion");
    }

    #[test]
    fn nodes_missing_from_a_relist_were_deleted() {
        let mut s = sim();
        s.applied(&marked("n1"));
        s.applied(&old("n2"));
        s.applied(&marked("n3"));
        s.relist_started();
        s.applied(&old("n2"));
        s.applied(&marked("n3"));
        assert_eq!(
            s.relist_done(),
            [Command::Recreate(Box::new(recreated("n1")))]
        );
        assert_eq!(s.relist_done(), [], "only once per relist");
    }

    #[test]
    fn watch_events_drive_the_same_rules() {
        use kube::runtime::watcher::Event;
        let mut s = sim();
        assert_eq!(s.on_event(&Event::Init), []);
        assert_eq!(s.on_event(&Event::InitApply(marked("n1"))), []);
        assert_eq!(s.on_event(&Event::InitApply(old("n2"))), []);
        assert_eq!(s.on_event(&Event::InitDone), []);
        assert_eq!(
            s.on_event(&Event::Apply(kamikazed("n2", T1))),
            [restart("n2")]
        );
        assert_eq!(
            s.on_event(&Event::Delete(marked("n1"))),
            [Command::Recreate(Box::new(recreated("n1")))]
        );
    }

    #[test]
    fn a_never_restarting_node_hangs_on_every_mechanism() {
        let mut s = sim().never_restarting(["n1".to_owned()]);
        let hang = || Command::Hang { node: "n1".into() };
        assert_eq!(s.applied(&old("n1")), []);
        assert_eq!(s.applied(&kamikazed("n1", T1)), [hang()]);
        assert_eq!(s.applied(&kamikazed("n1", T2)), [], "reported once");
        assert_eq!(s.pending(), 0, "no restart scheduled");
        assert_eq!(s.http_kamikaze("n1", None), HttpKamikaze::Hangs);
        assert_eq!(s.applied(&old("n1")), [], "kamikaze removed by hand");
        assert_eq!(s.applied(&kamikazed("n1", T2)), [hang()], "a new kamikaze");
        s.applied(&marked("n1"));
        assert_eq!(s.deleted("n1"), [], "a deleted node never comes back");
        assert_eq!(
            s.applied(&kamikazed("n2", T1)),
            [restart("n2")],
            "other nodes restart as usual"
        );
    }

    #[test]
    fn http_kamikaze_carries_its_value_and_is_obeyed_once() {
        let mut s = sim();
        s.applied(&old("n1"));
        assert_eq!(
            s.http_kamikaze("n1", Some(T1)),
            HttpKamikaze::Restart(http_restart("n1", T1))
        );
        s.restart_done("n1", None);
        // After the restart (old ID kept here to isolate the rule): the node records T1 as obeyed.
        let obeyed = node(
            "n1",
            &[],
            &[
                (EXECUTOR_ID_ANNOTATION, "new"),
                (KAMIKAZE_OBEYED_ANNOTATION, T1),
            ],
        );
        assert_eq!(s.applied(&obeyed), []);
        assert_eq!(
            s.http_kamikaze("n1", Some(T1)),
            HttpKamikaze::AlreadyObeyed,
            "the same kamikaze again"
        );
        assert_eq!(
            s.http_kamikaze("n1", Some(T2)),
            HttpKamikaze::Restart(http_restart("n1", T2)),
            "a new kamikaze"
        );
    }

    #[test]
    fn a_kamikaze_recorded_as_obeyed_is_never_obeyed_again() {
        let mut s = sim();
        // The controller's annotation of an HTTP kamikaze, written after the node restarted with
        // the new ID.
        let late = node(
            "n1",
            &[],
            &[
                (EXECUTOR_ID_ANNOTATION, "new"),
                (KAMIKAZE_ANNOTATION, T1),
                (KAMIKAZE_EXECUTOR_ID_ANNOTATION, "old"),
                (KAMIKAZE_OBEYED_ANNOTATION, T1),
            ],
        );
        assert_eq!(s.applied(&late), []);
        // A hand-set kamikaze (no record) that the node obeyed already.
        let by_hand = node(
            "n2",
            &[],
            &[
                (EXECUTOR_ID_ANNOTATION, "new"),
                (KAMIKAZE_ANNOTATION, T1),
                (KAMIKAZE_OBEYED_ANNOTATION, T1),
            ],
        );
        assert_eq!(s.applied(&by_hand), []);
        let newer = node(
            "n2",
            &[],
            &[
                (EXECUTOR_ID_ANNOTATION, "new"),
                (KAMIKAZE_ANNOTATION, T2),
                (KAMIKAZE_OBEYED_ANNOTATION, T1),
            ],
        );
        assert_eq!(
            s.applied(&newer),
            [restart("n2")],
            "a new value is a new kamikaze"
        );
    }

    fn coming_back(name: &str, comeback: Comeback) -> Simulation {
        sim().coming_back_as([(name.to_owned(), comeback)])
    }

    #[test]
    fn a_node_coming_back_as_another_id_restarts_with_it() {
        let mut s = coming_back("n1", Comeback::OldId)
            .coming_back_as([("n2".to_owned(), Comeback::Id("third".into()))]);
        let with = |name: &str, comeback: Comeback| Command::Restart {
            node: name.into(),
            told: None,
            comeback,
        };
        assert_eq!(
            s.applied(&kamikazed("n1", T1)),
            [with("n1", Comeback::OldId)]
        );
        assert_eq!(
            s.applied(&kamikazed("n2", T1)),
            [with("n2", Comeback::Id("third".into()))]
        );
        assert_eq!(
            s.applied(&kamikazed("n3", T1)),
            [restart("n3")],
            "others as usual"
        );
        s.applied(&old("n4"));
        assert_eq!(
            s.http_kamikaze("n1", Some(T1)),
            HttpKamikaze::AlreadyRestarting
        );
    }

    /// The node as a real agent leaves it when its executor came back with its old ID: kamikaze
    /// gone, record and kamikaze-obeyed kept, the old ID.
    fn returned_and_acknowledged(name: &str, kamikaze: &str) -> Node {
        node(
            name,
            &[],
            &[
                (EXECUTOR_ID_ANNOTATION, "old"),
                (KAMIKAZE_EXECUTOR_ID_ANNOTATION, "old"),
                (KAMIKAZE_OBEYED_ANNOTATION, kamikaze),
            ],
        )
    }

    #[test]
    fn a_node_back_with_its_old_id_never_restarts_again_for_the_same_kamikaze() {
        let mut s = coming_back("n1", Comeback::OldId);
        assert_eq!(s.applied(&kamikazed("n1", T1)).len(), 1);
        s.restart_done("n1", Some(T1.into()));
        assert_eq!(s.applied(&kamikazed("n1", T1)), [], "a stale event");
        assert_eq!(s.applied(&returned_and_acknowledged("n1", T1)), []);
        // The same kamikaze seen again (say, restored by hand from a backup) is not obeyed again:
        // the executor that obeyed it is running, so it acknowledges it once more.
        let restored = node(
            "n1",
            &[],
            &[
                (EXECUTOR_ID_ANNOTATION, "old"),
                (KAMIKAZE_ANNOTATION, T1),
                (KAMIKAZE_EXECUTOR_ID_ANNOTATION, "old"),
                (KAMIKAZE_OBEYED_ANNOTATION, T1),
            ],
        );
        assert_eq!(
            s.applied(&restored),
            [Command::Acknowledge { node: "n1".into() }],
            "acknowledged as a real agent does"
        );
        assert_eq!(s.applied(&restored), [], "acknowledging already");
        s.acknowledge_done("n1");
        assert_eq!(s.applied(&returned_and_acknowledged("n1", T1)), []);
        assert_eq!(s.pending(), 0);
        let told_again = node(
            "n1",
            &[],
            &[
                (EXECUTOR_ID_ANNOTATION, "old"),
                (KAMIKAZE_ANNOTATION, T2),
                (KAMIKAZE_EXECUTOR_ID_ANNOTATION, "old"),
                (KAMIKAZE_OBEYED_ANNOTATION, T1),
            ],
        );
        assert_eq!(
            s.applied(&told_again),
            [Command::Restart {
                node: "n1".into(),
                told: None,
                comeback: Comeback::OldId
            }],
            "a new kamikaze, once the operator acts"
        );
    }

    #[test]
    fn the_controllers_late_annotation_of_an_http_kamikaze_is_acknowledged_by_a_node_back_with_its_old_id()
     {
        let mut s = coming_back("n1", Comeback::OldId);
        s.applied(&old("n1"));
        assert!(matches!(
            s.http_kamikaze("n1", Some(T1)),
            HttpKamikaze::Restart(_)
        ));
        s.restart_done("n1", None);
        let restarted = node(
            "n1",
            &[],
            &[
                (EXECUTOR_ID_ANNOTATION, "old"),
                (KAMIKAZE_OBEYED_ANNOTATION, T1),
            ],
        );
        assert_eq!(s.applied(&restarted), []);
        let annotated = node(
            "n1",
            &[],
            &[
                (EXECUTOR_ID_ANNOTATION, "old"),
                (KAMIKAZE_ANNOTATION, T1),
                (KAMIKAZE_EXECUTOR_ID_ANNOTATION, "old"),
                (KAMIKAZE_OBEYED_ANNOTATION, T1),
            ],
        );
        assert_eq!(
            s.applied(&annotated),
            [Command::Acknowledge { node: "n1".into() }]
        );
    }

    #[test]
    fn a_hung_node_does_not_acknowledge() {
        let mut s = sim().never_restarting(["n1".to_owned()]);
        let returned = node(
            "n1",
            &[],
            &[
                (EXECUTOR_ID_ANNOTATION, "old"),
                (KAMIKAZE_ANNOTATION, T1),
                (KAMIKAZE_EXECUTOR_ID_ANNOTATION, "old"),
                (KAMIKAZE_OBEYED_ANNOTATION, T1),
            ],
        );
        assert_eq!(s.applied(&returned), []);
    }

    #[test]
    fn a_deleted_node_comes_back_with_the_injected_id() {
        let mut s = coming_back("n1", Comeback::OldId)
            .coming_back_as([("n2".to_owned(), Comeback::Id("third".into()))]);
        s.applied(&marked("n1"));
        s.applied(&marked("n2"));
        let reports = |commands: Vec<Command>| match &commands[..] {
            [Command::Recreate(node)] => crate::contract::executor_id(node).map(str::to_owned),
            other => panic!("not one re-creation: {other:?}"),
        };
        assert_eq!(reports(s.deleted("n1")).as_deref(), Some("old"));
        assert_eq!(reports(s.deleted("n2")).as_deref(), Some("third"));
    }
}
