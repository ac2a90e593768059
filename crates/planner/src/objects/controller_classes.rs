//! What the index works out once per controller reference (the class its pods get when nothing
//! about the pod decides it), kept across passes while the owners it was worked out from are the
//! same objects (`Arc::ptr_eq`) at the same places, so that an owner's new version costs only its
//! own controllers' answers. Every view held here is held so that its address stays unique while
//! its answer is kept. Why: docs/decisions/0007-planner-keeps-what-it-derived.md.

use std::sync::Arc;

use crate::{
    ControllerRef, OwnerView,
    objects::classify::Class,
    objects::workload::{CountsFor, Workload},
};

/// The kept answers, by the slot of the controller reference (a fact's `controller`). The answer
/// depends only on the reference and on the owners it names, directly or through a ReplicaSet;
/// kept as positions among the view's owners, it is rebuilt into references when the view has
/// those very owners at those positions, and worked out again otherwise.
#[derive(Default)]
pub(crate) struct ControllerClasses {
    by_controller: Vec<Option<Kept>>,
    /// The last pass's owners (held, so that the next pass can tell them by address), and whether
    /// no two of them share a UID.
    owners: Vec<Arc<OwnerView>>,
    one_owner_per_uid: bool,
    /// What the pods of each of those owners count for.
    counts_for: Vec<CountsFor>,
}

/// One controller's class, as positions among the view's owners, with what it was worked out from.
struct Kept {
    /// The reference (held, so that no other reference takes its slot unnoticed).
    controller: Arc<ControllerRef>,
    /// The owner with the reference's UID, and where it was.
    owner: (u32, Arc<OwnerView>),
    /// For a ReplicaSet's pod, the controller of the ReplicaSet found among the owners, and where
    /// it was.
    top: Option<(u32, Arc<OwnerView>)>,
    class: KeptClass,
}

/// A [`Class`], by positions among the view's owners.
#[derive(Clone, Copy)]
enum KeptClass {
    /// A workload pod of the owner at this position.
    Owned(u32),
    /// A Job pod of the owner at this position.
    Job(u32),
    /// A pod of the controller (of another kind) of the owner at this position.
    OtherOfOwner(u32),
    /// A pod of the reference itself, a controller of another kind.
    OtherSelf,
}

impl ControllerClasses {
    /// Whether no two of `owners` share a UID, if they are the last pass's owners in the same order
    /// (told without reading them); `None` otherwise.
    pub(crate) fn owners_unchanged(&self, owners: &[Arc<OwnerView>]) -> Option<bool> {
        let same = owners.len() == self.owners.len()
            && owners
                .iter()
                .zip(&self.owners)
                .all(|(a, b)| Arc::ptr_eq(a, b));
        same.then_some(self.one_owner_per_uid)
    }

    /// Remembers this pass's owners, whether no two of them share a UID, and what the pods of each
    /// count for.
    pub(crate) fn remember_owners(
        &mut self,
        owners: &[Arc<OwnerView>],
        one_owner_per_uid: bool,
        counts_for: Vec<CountsFor>,
    ) {
        self.owners.clear();
        self.owners.extend(owners.iter().cloned());
        self.one_owner_per_uid = one_owner_per_uid;
        self.counts_for = counts_for;
    }

    /// The remembered owners: the last pass's.
    pub(crate) fn owners(&self) -> &[Arc<OwnerView>] {
        &self.owners
    }

    /// What the pods of each of the remembered owners count for: the view's, when
    /// [`Self::owners_unchanged`] says they are the same.
    pub(crate) fn counts_for(&self) -> &[CountsFor] {
        &self.counts_for
    }

    /// One entry per slot of the `controllers` there are: those of slots given up are let go.
    pub(crate) fn fit(&mut self, controllers: usize) {
        self.by_controller.resize_with(controllers, || None);
    }

    /// The class kept for `controller` in `slot`, and the position of the owner with its UID, if
    /// the view's `owners` are still the ones it was worked out from, at the same positions.
    pub(crate) fn get<'a>(
        &self,
        slot: u32,
        controller: &'a Arc<ControllerRef>,
        owners: &'a [Arc<OwnerView>],
    ) -> Option<(Class<'a>, u32)> {
        let kept = self.by_controller.get(slot as usize)?.as_ref()?;
        if !Arc::ptr_eq(&kept.controller, controller) {
            return None;
        }
        let at = |(i, held): &(u32, Arc<OwnerView>)| {
            owners
                .get(*i as usize)
                .filter(|owner| Arc::ptr_eq(owner, held))
        };
        at(&kept.owner)?;
        if let Some(top) = &kept.top {
            at(top)?;
        }
        let owner = |i: u32| &*owners[i as usize];
        let class = match kept.class {
            KeptClass::Owned(i) => Class::Owned(Workload::of_owner(owner(i))),
            KeptClass::Job(i) => Class::Job(owner(i)),
            KeptClass::OtherOfOwner(i) => {
                Class::Other(Workload::of_other(owner(i).controller.as_ref()?))
            }
            KeptClass::OtherSelf => Class::Other(Workload::of_other(controller)),
        };
        Some((class, kept.owner.0))
    }

    /// Keeps `class`, worked out for `controller` from the owner at position `owner` (the one with
    /// its UID) and, for a ReplicaSet's pod, the ReplicaSet's controller at position `top`, if
    /// it is of a kind kept. Only the common answers are kept (a workload's pod, a Job's pod, a pod
    /// of a controller of another kind); the others (an owner missing or being deleted, a kind
    /// k8sm does not watch) are worked out every pass.
    pub(crate) fn keep(
        &mut self,
        slot: u32,
        controller: &Arc<ControllerRef>,
        class: Class,
        owner: u32,
        top: Option<u32>,
        owners: &[Arc<OwnerView>],
    ) {
        let Some(held) = owners.get(owner as usize) else {
            return;
        };
        let top = top.and_then(|i| Some((i, Arc::clone(owners.get(i as usize)?))));
        let position_of = |o: &OwnerView| {
            [Some((owner, held)), top.as_ref().map(|(i, o)| (*i, o))]
                .into_iter()
                .flatten()
                .find(|(_, candidate)| std::ptr::eq(&***candidate, o))
                .map(|(i, _)| i)
        };
        let kept = match class {
            Class::Owned(Workload::Owner(o)) => position_of(o).map(KeptClass::Owned),
            Class::Job(o) => position_of(o).map(KeptClass::Job),
            Class::Other(Workload::Other(c)) if std::ptr::eq(c, &**controller) => {
                Some(KeptClass::OtherSelf)
            }
            Class::Other(Workload::Other(c))
                if held
                    .controller
                    .as_ref()
                    .is_some_and(|top| std::ptr::eq(top, c)) =>
            {
                Some(KeptClass::OtherOfOwner(owner))
            }
            _ => None,
        };
        if let (Some(class), Some(entry)) = (kept, self.by_controller.get_mut(slot as usize)) {
            *entry = Some(Kept {
                controller: Arc::clone(controller),
                owner: (owner, Arc::clone(held)),
                top,
                class,
            });
        }
    }
}
