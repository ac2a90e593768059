//! Lookups over the view, built once per plan, and the parsing of the time annotations.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use chrono::{DateTime, Utc};

use crate::{
    ClusterView, NodeView, OwnerView, PdbView, PodView,
    selector::{Selector, SelectorError},
    workload::workload_uid,
};

/// The hash maps and sets of a pass: lookups by UID or name, rebuilt every pass and never iterated where order
/// matters, so a fast fixed-seed hasher (no DoS concern: the keys come from the apiserver, and a pass is short-lived).
pub(crate) type FastMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;
pub(crate) type FastSet<T> = HashSet<T, foldhash::fast::FixedState>;

/// A time annotation as read from a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stamp {
    /// Absent.
    Absent,
    /// Present and RFC 3339.
    At(DateTime<Utc>),
    /// Present but unreadable.
    Malformed,
}

impl Stamp {
    pub(crate) fn parse(raw: Option<&str>) -> Self {
        match raw {
            None => Self::Absent,
            Some(text) => DateTime::parse_from_rfc3339(text.trim())
                .map(|t| Self::At(t.with_timezone(&Utc)))
                .unwrap_or(Self::Malformed),
        }
    }

    pub(crate) fn time(self) -> Option<DateTime<Utc>> {
        match self {
            Self::At(t) => Some(t),
            _ => None,
        }
    }

    pub(crate) fn is_present(self) -> bool {
        self != Self::Absent
    }
}

/// A budget with its parsed selector.
pub(crate) struct Pdb<'a> {
    pub(crate) view: &'a PdbView,
    /// `None`: a null selector (selects nothing) or an invalid one.
    pub(crate) selector: Option<Result<Selector, SelectorError>>,
}

impl Pdb<'_> {
    pub(crate) fn covers(&self, pod: &PodView) -> bool {
        pod.namespace == self.view.namespace
            && matches!(&self.selector, Some(Ok(selector)) if selector.matches(&pod.labels))
    }

    pub(crate) fn key(&self) -> (String, String) {
        (self.view.namespace.clone(), self.view.name.clone())
    }
}

/// The view, indexed. Every collection iterates in a fixed order, whatever the order of the view's vectors.
pub(crate) struct Index<'a> {
    /// Nodes by name.
    pub(crate) nodes: BTreeMap<&'a str, &'a NodeView>,
    /// Pods by node name, in the view's order (looked up, never iterated where order matters).
    pub(crate) pods_by_node: FastMap<&'a str, Vec<&'a PodView>>,
    /// Pods by the UID of the workload they count for (DESIGN.md §2: a Deployment for the pods of its ReplicaSets),
    /// bound to a node or not, in no particular order (looked up and counted).
    pub(crate) pods_by_workload: FastMap<&'a str, Vec<&'a PodView>>,
    /// Owners by UID, only those that exist (looked up; iterated only where order does not matter).
    pub(crate) owners: FastMap<&'a str, &'a OwnerView>,
    /// UIDs of owners that are still in the view but being deleted (`exists: false`).
    pub(crate) deleting_owners: BTreeSet<&'a str>,
    /// Budgets, sorted by namespace and name.
    pub(crate) pdbs: Vec<Pdb<'a>>,
    /// UIDs of pods with an eviction in flight.
    pub(crate) in_flight_pods: FastSet<&'a str>,
    /// Per workload UID, evictions in flight whose pod is no longer in the view: gone, and not replaced yet.
    pub(crate) in_flight_gone: FastMap<&'a str, u32>,
    /// The remembered sizes of controllers of unknown kinds.
    pub(crate) observed_sizes: &'a BTreeMap<String, u32>,
}

impl<'a> Index<'a> {
    pub(crate) fn new(view: &'a ClusterView) -> Self {
        let nodes = view.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
        let all_owners: FastMap<&str, &OwnerView> =
            view.owners.iter().map(|o| (o.uid.as_str(), o)).collect();
        // Grouped without sorting: only the nodes whose pods are decided in this pass need their pods in order, and
        // `drain::survey` sorts those. Sized up front: growing maps of a large fleet's pods costs rehashing.
        let mut pods_by_node: FastMap<&str, Vec<&PodView>> =
            FastMap::with_capacity_and_hasher(view.nodes.len(), Default::default());
        let mut pods_by_workload: FastMap<&str, Vec<&PodView>> =
            FastMap::with_capacity_and_hasher(view.owners.len(), Default::default());
        let in_flight_pods: FastSet<&str> =
            view.in_flight.iter().map(|e| e.pod_uid.as_str()).collect();
        // Which pods with an eviction in flight are still in the view (a few; not a set of every pod).
        let mut in_flight_seen: FastSet<&str> = FastSet::default();
        for pod in &view.pods {
            if !in_flight_pods.is_empty() && in_flight_pods.contains(pod.uid.as_str()) {
                in_flight_seen.insert(&pod.uid);
            }
            if let Some(node) = &pod.node_name {
                pods_by_node.entry(node).or_default().push(pod);
            }
            if let Some(controller) = &pod.controller {
                let owner = all_owners.get(controller.uid.as_str()).copied();
                pods_by_workload
                    .entry(workload_uid(&controller.uid, owner))
                    .or_default()
                    .push(pod);
            }
        }
        let owners = all_owners
            .iter()
            .filter(|(_, o)| o.exists)
            .map(|(&uid, &o)| (uid, o))
            .collect();
        let deleting_owners = view
            .owners
            .iter()
            .filter(|o| !o.exists)
            .map(|o| o.uid.as_str())
            .collect();
        let mut pdbs: Vec<Pdb> = view
            .pdbs
            .iter()
            .map(|view| Pdb {
                view,
                selector: view.selector.as_ref().map(Selector::new),
            })
            .collect();
        pdbs.sort_by(|a, b| {
            (&a.view.namespace, &a.view.name).cmp(&(&b.view.namespace, &b.view.name))
        });
        let mut in_flight_gone: FastMap<&str, u32> = FastMap::default();
        for eviction in &view.in_flight {
            if let Some(owner) = &eviction.owner_uid
                && !in_flight_seen.contains(eviction.pod_uid.as_str())
            {
                *in_flight_gone.entry(owner).or_default() += 1;
            }
        }
        Self {
            nodes,
            pods_by_node,
            pods_by_workload,
            owners,
            deleting_owners,
            pdbs,
            in_flight_pods,
            in_flight_gone,
            observed_sizes: &view.observed_sizes,
        }
    }

    /// Pods bound to `node`.
    pub(crate) fn pods_on(&self, node: &str) -> &[&'a PodView] {
        self.pods_by_node.get(node).map_or(&[], Vec::as_slice)
    }

    /// Whether `pod` is being evicted or deleted (by anyone): it is on its way out.
    pub(crate) fn is_going(&self, pod: &PodView) -> bool {
        pod.terminating || self.in_flight_pods.contains(pod.uid.as_str())
    }

    /// Budgets that cover `pod`.
    pub(crate) fn pdbs_for<'s>(
        &'s self,
        pod: &'s PodView,
    ) -> impl Iterator<Item = &'s Pdb<'a>> + 's {
        self.pdbs.iter().filter(move |p| p.covers(pod))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps() {
        assert_eq!(Stamp::parse(None), Stamp::Absent);
        let t = Stamp::parse(Some("2026-01-02T03:04:05Z")).time().unwrap();
        assert_eq!(t.to_rfc3339(), "2026-01-02T03:04:05+00:00");
        // Offsets are normalised to UTC.
        assert_eq!(
            Stamp::parse(Some("2026-01-02T04:04:05+01:00")).time(),
            Some(t)
        );
        for bad in [
            "",
            "yesterday",
            "2026-01-02",
            "1767323045",
            "2026-13-02T03:04:05Z",
        ] {
            assert_eq!(Stamp::parse(Some(bad)), Stamp::Malformed, "{bad}");
        }
    }
}
