//! Where the replacements of an upgrade land, as the benchmark's watches see it: on a node still
//! to drain (each such pod is moved again), and whether the fleet had room for it elsewhere when
//! it was bound. Those that had none set the least disruptions per pod any tool can reach on that
//! run's placements (issue 43 item 2; the model counts the same, `ModelRun::disruptions_floor`).

use std::collections::HashMap;

use k8sm_planner::Resources;
use serde::{Deserialize, Serialize};

/// What a pod takes of its node's pod count.
const ONE_POD: Resources = Resources {
    cpu_millis: 0,
    memory_bytes: 0,
    pods: 1,
};

/// A node as the scheduler weighs it for a replacement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeRoom {
    /// `status.allocatable`; `None` where the node reports none (room unknown: taken as enough).
    pub allocatable: Option<Resources>,
    /// Not cordoned, and no taint that keeps the fleet's pods off.
    pub schedulable: bool,
}

/// Where a run's replacements landed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Landed {
    /// Replacements bound to a node still to drain.
    pub to_drain: u64,
    /// Of those, the ones no schedulable node that is not to drain had room for when they were
    /// bound.
    pub forced: u64,
}

/// The counts, and what the scheduler reserves on each node.
#[derive(Clone, Debug, Default)]
pub struct Landings {
    /// Every pod bound to a node, with what it reserves there (the DaemonSet's too).
    bound: HashMap<String, (String, Resources)>,
    used: HashMap<String, Resources>,
    pub counts: Landed,
}

impl Landings {
    /// Pod `uid` is bound to `node` (`None`: not bound) and reserves `requests` there.
    pub fn pod_seen(&mut self, uid: &str, node: Option<&str>, requests: Resources) {
        let now = node.map(|n| (n.to_owned(), requests + ONE_POD));
        if self.bound.get(uid) == now.as_ref() {
            return;
        }
        self.pod_gone(uid);
        if let Some((node, reserved)) = now {
            *self.used.entry(node.clone()).or_default() += reserved;
            self.bound.insert(uid.to_owned(), (node, reserved));
        }
    }

    pub fn pod_gone(&mut self, uid: &str) {
        if let Some((node, reserved)) = self.bound.remove(uid)
            && let Some(used) = self.used.get_mut(&node)
        {
            *used = used.less(reserved);
        }
    }

    /// A replacement was just bound to `node`, asking for `requests` (already counted there by
    /// [`Self::pod_seen`]), among the cluster's `nodes`. `to_drain` tells a node some tool is still
    /// to drain.
    pub fn replacement_bound<'a>(
        &mut self,
        node: &str,
        requests: Resources,
        nodes: impl IntoIterator<Item = (&'a str, NodeRoom)>,
        to_drain: impl Fn(&str) -> bool,
    ) {
        if !to_drain(node) {
            return;
        }
        self.counts.to_drain += 1;
        let ask = requests + ONE_POD;
        let elsewhere = nodes.into_iter().any(|(name, room)| {
            room.schedulable
                && !to_drain(name)
                && room.allocatable.is_none_or(|allocatable| {
                    allocatable
                        .less(self.used.get(name).copied().unwrap_or_default())
                        .covers(ask)
                })
        });
        self.counts.forced += u64::from(!elsewhere);
    }

    /// Forgets every pod bound but those in `listed` (a relist: the others went unseen).
    pub fn keep_pods(&mut self, listed: impl Fn(&str) -> bool) {
        let gone: Vec<String> = self
            .bound
            .keys()
            .filter(|uid| !listed(uid))
            .cloned()
            .collect();
        for uid in gone {
            self.pod_gone(&uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(millis: u64) -> Resources {
        Resources {
            cpu_millis: millis,
            ..Resources::default()
        }
    }

    fn node(allocatable: u64, schedulable: bool) -> NodeRoom {
        NodeRoom {
            allocatable: Some(Resources {
                pods: 110,
                ..cpu(allocatable)
            }),
            schedulable,
        }
    }

    /// Two old nodes and one upgraded node of 1000m; the upgraded one holds `on_new` millicores.
    struct Fleet {
        landings: Landings,
        nodes: HashMap<&'static str, NodeRoom>,
    }

    fn fleet(on_new: u64) -> Fleet {
        let mut landings = Landings::default();
        landings.pod_seen("p-new", Some("new"), cpu(on_new));
        let nodes = ["old-a", "old-b", "new"]
            .into_iter()
            .map(|name| (name, node(1000, true)))
            .collect();
        Fleet { landings, nodes }
    }

    /// A replacement `uid` bound to `node`; the nodes whose names start with "old" are to drain.
    fn bind(fleet: &mut Fleet, uid: &str, node: &str, requests: Resources) {
        let nodes = fleet.nodes.iter().map(|(name, room)| (*name, *room));
        fleet.landings.pod_seen(uid, Some(node), requests);
        fleet
            .landings
            .replacement_bound(node, requests, nodes, |name| name.starts_with("old"));
    }

    #[test]
    fn a_replacement_on_an_old_node_is_forced_only_when_no_upgraded_node_has_room() {
        let mut fleet = fleet(600);
        // 400m free on the upgraded node: a 300m replacement could have gone there.
        bind(&mut fleet, "r1", "old-a", cpu(300));
        assert_eq!(
            (fleet.landings.counts.to_drain, fleet.landings.counts.forced),
            (1, 0)
        );
        // A 500m one could not.
        bind(&mut fleet, "r2", "old-b", cpu(500));
        assert_eq!(
            (fleet.landings.counts.to_drain, fleet.landings.counts.forced),
            (2, 1)
        );
        // On the upgraded node: nothing to count, and its room shrinks.
        bind(&mut fleet, "r3", "new", cpu(300));
        assert_eq!(
            (fleet.landings.counts.to_drain, fleet.landings.counts.forced),
            (2, 1)
        );
        bind(&mut fleet, "r4", "old-a", cpu(200));
        assert_eq!(
            (fleet.landings.counts.to_drain, fleet.landings.counts.forced),
            (3, 2)
        );
    }

    #[test]
    fn room_comes_back_when_a_pod_goes_or_moves_and_a_cordoned_node_has_none() {
        let mut fleet = fleet(900);
        bind(&mut fleet, "r1", "old-a", cpu(300));
        assert_eq!(fleet.landings.counts.forced, 1);
        fleet.landings.pod_gone("p-new");
        bind(&mut fleet, "r2", "old-a", cpu(300));
        assert_eq!(
            fleet.landings.counts.forced, 1,
            "the upgraded node is empty again"
        );
        fleet.landings.pod_seen("p-new", Some("new"), cpu(900));
        fleet.landings.pod_seen("p-new", Some("old-b"), cpu(900));
        bind(&mut fleet, "r3", "old-a", cpu(300));
        assert_eq!(
            fleet.landings.counts.forced, 1,
            "the pod moved off the upgraded node"
        );
        fleet.nodes.insert("new", node(1000, false));
        bind(&mut fleet, "r4", "old-a", cpu(300));
        assert_eq!(
            fleet.landings.counts.forced, 2,
            "a cordoned node takes nothing"
        );
    }

    #[test]
    fn a_full_pod_count_leaves_no_room_and_an_unknown_allocatable_leaves_enough() {
        let mut fleet = fleet(0);
        fleet.nodes.insert(
            "new",
            NodeRoom {
                allocatable: Some(Resources {
                    pods: 1,
                    ..cpu(1000)
                }),
                ..node(1000, true)
            },
        );
        bind(&mut fleet, "r1", "old-a", Resources::default());
        assert_eq!(
            fleet.landings.counts.forced, 1,
            "the one pod the node allows is taken"
        );
        fleet.nodes.insert(
            "new",
            NodeRoom {
                allocatable: None,
                ..node(0, true)
            },
        );
        bind(&mut fleet, "r2", "old-a", Resources::default());
        assert_eq!(fleet.landings.counts.forced, 1);
    }

    #[test]
    fn a_relist_forgets_the_pods_it_did_not_return() {
        let mut fleet = fleet(900);
        fleet.landings.keep_pods(|uid| uid != "p-new");
        bind(&mut fleet, "r1", "old-a", cpu(300));
        assert_eq!(fleet.landings.counts.forced, 0);
    }
}
