//! The slot of each workload the pods count for: per owner, by its position among the view's
//! owners, and by key (a workload's UID, or the whole reference of a controller not in the view)
//! through a map built only for a pass that looks keys up (one with a controller not in the view,
//! or a rollout's deadline). Owners whose classes are kept number their workloads as in the last
//! pass, so a pass over them hashes no key: a map of every owner's UID cost more than the rest of
//! the owners' step, and a pass rarely looks a key up.

use std::sync::Arc;

use crate::{
    ClusterView, OwnerView, model::collections::FastMap, objects::lookups::slot_of,
    objects::workload::CountsFor,
};

/// The workload slots of one pass (docs/design.md §2: a Deployment's ReplicaSets count for it).
pub(crate) struct WorkloadSlots<'a> {
    owners: &'a [Arc<OwnerView>],
    /// What each owner's pods count for, owner by owner.
    counts_for: Vec<CountsFor>,
    /// Per position among the owners, the slot of the workload its pods count for.
    owner_counts: Vec<u32>,
    /// How many slots the owners number (`0..owner_slots`).
    owner_slots: u32,
    /// How many controllers not in the view have a slot of their own, from `owner_slots` on.
    missing: u32,
    /// Every key with its slot, where built (see [`Self::index_keys`]).
    by_key: Option<FastMap<&'a str, u32>>,
}

impl<'a> WorkloadSlots<'a> {
    /// The slots of `view`'s owners, whose pods count for `counts_for`, numbered in owner order
    /// (the first owner of each key gives it the next slot).
    pub(crate) fn number(view: &'a ClusterView, counts_for: Vec<CountsFor>) -> Self {
        let mut by_key: FastMap<&str, u32> =
            FastMap::with_capacity_and_hasher(view.owners.len(), Default::default());
        let mut owner_counts: Vec<u32> = Vec::with_capacity(view.owners.len());
        for (owner, counts) in view.owners.iter().zip(&counts_for) {
            let next = slot_of(by_key.len());
            owner_counts.push(
                *by_key
                    .entry((*counts).key(owner, &view.owners))
                    .or_insert(next),
            );
        }
        Self {
            owners: &view.owners,
            counts_for,
            owner_slots: slot_of(by_key.len()),
            owner_counts,
            missing: 0,
            by_key: Some(by_key),
        }
    }

    /// The slots of `view`'s owners as [`Self::number`] numbered them in the last pass
    /// (`owner_counts`, `owner_slots`), where every owner counts for what it counted for then.
    pub(crate) fn kept(
        view: &'a ClusterView,
        counts_for: Vec<CountsFor>,
        owner_counts: Vec<u32>,
        owner_slots: u32,
    ) -> Self {
        let kept = Self {
            owners: &view.owners,
            counts_for,
            owner_counts,
            owner_slots,
            missing: 0,
            by_key: None,
        };
        // Every test's pass checks the kept numbering against numbering the owners again.
        #[cfg(test)]
        {
            let fresh = Self::number(view, kept.counts_for.clone());
            assert_eq!(
                (&kept.owner_counts, kept.owner_slots),
                (&fresh.owner_counts, fresh.owner_slots),
                "the owners' kept workload slots"
            );
        }
        kept
    }

    /// Per position among the owners, the slot of the workload its pods count for.
    pub(crate) fn owner_counts(&self) -> &[u32] {
        &self.owner_counts
    }

    /// Per owner, the slot of its workload, and how many slots the owners number.
    pub(crate) fn owners(&self) -> (&[u32], u32) {
        (&self.owner_counts, self.owner_slots)
    }

    /// How many slots there are: slots are `0..len()`.
    pub(crate) fn len(&self) -> usize {
        (self.owner_slots + self.missing) as usize
    }

    /// The slot of `key` (a workload's UID, or a controller's whole reference), if any: found in
    /// the map where built, otherwise by reading every owner's key (a lookup that a pass makes
    /// only for a pod without a controller's slot).
    pub(crate) fn get(&self, key: &str) -> Option<u32> {
        match &self.by_key {
            Some(by_key) => by_key.get(key).copied(),
            // No controller outside the view has a slot then: the owners' keys are all.
            None => self.keys().find(|&(k, _)| k == key).map(|(_, slot)| slot),
        }
    }

    /// The slot of the controller not in the view whose whole reference is `key`: a new slot when
    /// no owner and no controller before it counts for that key.
    pub(crate) fn of_missing(&mut self, key: &'a str) -> u32 {
        let next = slot_of(self.len());
        let slot = *self.index_keys().entry(key).or_insert(next);
        if slot == next {
            self.missing += 1;
        }
        slot
    }

    /// The map of every key to its slot, built if it was not (before any controller not in the
    /// view has a slot: [`Self::of_missing`] builds it first).
    pub(crate) fn index_keys(&mut self) -> &mut FastMap<&'a str, u32> {
        if self.by_key.is_none() {
            let mut by_key: FastMap<&str, u32> =
                FastMap::with_capacity_and_hasher(self.len(), Default::default());
            for (key, slot) in self.keys() {
                by_key.entry(key).or_insert(slot);
            }
            self.by_key = Some(by_key);
        }
        self.by_key.as_mut().expect("built just above")
    }

    /// Every owner's key with its slot, in owner order.
    fn keys(&self) -> impl Iterator<Item = (&'a str, u32)> + '_ {
        let owners = self.owners;
        owners
            .iter()
            .zip(&self.counts_for)
            .zip(&self.owner_counts)
            .map(move |((owner, &counts), &slot)| (counts.key(owner, owners), slot))
    }
}
