//! The owners by UID, which classifying a pod looks up.

use crate::{ClusterView, ControllerRef, OwnerView, model::collections::FastMap};

/// What classifying a pod looks up: the owners and the evictions in flight.
pub(crate) struct Lookups<'a> {
    /// Owners by UID, those that exist and those being deleted (looked up; iterated only where
    /// order does not matter). Found for a reference only through [`Self::owner`], which
    /// checks the rest of its identity.
    owners: FastMap<&'a str, OwnerEntry<'a>>,
    /// UIDs of pods with an eviction in flight (the index finds them by the addresses of their
    /// UIDs; this is for tests that classify one pod).
    #[cfg(test)]
    pub(crate) in_flight_pods: crate::model::collections::FastSet<&'a str>,
}

impl<'a> Lookups<'a> {
    /// The lookups of `view`, whose owners' pods count for the workload slots `owner_counts`,
    /// position by position.
    pub(crate) fn new(view: &'a ClusterView, owner_counts: &[u32]) -> Self {
        let mut owners: FastMap<&str, OwnerEntry> =
            FastMap::with_capacity_and_hasher(view.owners.len(), Default::default());
        for (position, (owner, &counts)) in view.owners.iter().zip(owner_counts).enumerate() {
            let entry = OwnerEntry {
                owner,
                counts,
                position: slot_of(position),
            };
            owners.insert(&owner.uid, entry);
        }
        Self {
            owners,
            #[cfg(test)]
            in_flight_pods: view.in_flight.iter().map(|e| e.pod_uid.as_str()).collect(),
        }
    }

    /// The owner that `reference` names (its UID, kind, API group and namespace), existing or being
    /// deleted.
    pub(crate) fn owner(&self, reference: &ControllerRef) -> Option<OwnerEntry<'a>> {
        self.owners
            .get(reference.uid.as_str())
            .filter(|e| reference.names(e.owner))
            .copied()
    }

    /// How many owners have a UID of their own (fewer than the owners when two share one).
    pub(crate) fn distinct_uids(&self) -> usize {
        self.owners.len()
    }
}

/// An owner, with the slot of the workload its pods count for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OwnerEntry<'a> {
    pub(crate) owner: &'a OwnerView,
    /// Where its pods are counted: the slot of the workload they count for (docs/design.md §2).
    pub(crate) counts: u32,
    /// Its position among the view's owners.
    pub(crate) position: u32,
}

/// A position, as the `u32` the index stores (a view holds far fewer than 4 billion objects).
pub(crate) fn slot_of(i: usize) -> u32 {
    u32::try_from(i).expect("fewer than 2^32 objects in a view")
}
