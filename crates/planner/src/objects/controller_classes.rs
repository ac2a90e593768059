//! What the index works out once per controller reference (the class its pods get when nothing
//! about the pod decides it), kept across passes while the owners it was worked out from are at
//! the same places and classify alike (the same objects, or new versions that differ only in what
//! classifying does not read, such as a status), so that an owner's new version costs only its own
//! controllers' answers, and none when only its status changed. Every view held here is held so
//! that its address stays unique while its answer is kept. Why:
//! docs/decisions/0007-planner-keeps-what-it-derived.md.

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
    /// The workload slots those owners numbered (per owner, and how many), once remembered.
    slots: Option<(Vec<u32>, u32)>,
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
    /// Whether no two of `owners` share a UID, if they classify alike with the last pass's owners,
    /// position by position (remembered then in their place); `None` otherwise.
    pub(crate) fn owners_unchanged(&mut self, owners: &[Arc<OwnerView>]) -> Option<bool> {
        let same = owners.len() == self.owners.len()
            && owners
                .iter()
                .zip(&self.owners)
                .all(|(a, b)| classify_alike(a, b));
        if !same {
            return None;
        }
        for (held, owner) in self.owners.iter_mut().zip(owners) {
            if !Arc::ptr_eq(held, owner) {
                *held = Arc::clone(owner);
            }
        }
        Some(self.one_owner_per_uid)
    }

    /// Remembers this pass's owners, whether no two of them share a UID, what the pods of each
    /// count for, and the workload slots they numbered (per owner, and how many).
    pub(crate) fn remember_owners(
        &mut self,
        owners: &[Arc<OwnerView>],
        one_owner_per_uid: bool,
        counts_for: Vec<CountsFor>,
        (owner_counts, owner_slots): (&[u32], u32),
    ) {
        self.owners.clear();
        self.owners.extend(owners.iter().cloned());
        self.one_owner_per_uid = one_owner_per_uid;
        self.counts_for = counts_for;
        self.slots = Some((owner_counts.to_vec(), owner_slots));
    }

    /// The workload slots the remembered owners numbered, if remembered.
    pub(crate) fn slots(&self) -> Option<(&[u32], u32)> {
        self.slots
            .as_ref()
            .map(|(counts, n)| (counts.as_slice(), *n))
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
    /// the view's `owners` at the positions it was worked out from classify alike with the owners
    /// it was worked out from (then held in their place). Read from the view's owners, so that
    /// what classifying does not read (a status) is the view's.
    pub(crate) fn get<'a>(
        &mut self,
        slot: u32,
        controller: &'a Arc<ControllerRef>,
        owners: &'a [Arc<OwnerView>],
    ) -> Option<(Class<'a>, u32)> {
        let kept = self.by_controller.get_mut(slot as usize)?.as_mut()?;
        if !Arc::ptr_eq(&kept.controller, controller) {
            return None;
        }
        let alike = |(i, held): &mut (u32, Arc<OwnerView>)| {
            let owner = owners.get(*i as usize)?;
            if !Arc::ptr_eq(owner, held) {
                if !classify_alike(owner, held) {
                    return None;
                }
                *held = Arc::clone(owner);
            }
            Some(())
        };
        alike(&mut kept.owner)?;
        if let Some(top) = &mut kept.top {
            alike(top)?;
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

/// Whether two versions of an owner classify its pods alike: the same object, or the same in all
/// that classifying them and what they count for reads (what names it, its kind, its own
/// controller, whether it is being deleted).
fn classify_alike(a: &Arc<OwnerView>, b: &Arc<OwnerView>) -> bool {
    Arc::ptr_eq(a, b)
        || (a.uid == b.uid
            && a.kind == b.kind
            && a.namespace == b.namespace
            && a.name == b.name
            && a.exists == b.exists
            && a.controller == b.controller)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::ControllerClasses;
    use crate::{OwnerView, testing::deployment};

    fn remembered(owners: &[Arc<OwnerView>]) -> ControllerClasses {
        let mut classes = ControllerClasses::default();
        classes.remember_owners(owners, true, Vec::new(), (&[], 0));
        classes
    }

    #[test]
    fn owners_whose_status_alone_changed_are_the_same_owners() {
        let web = deployment("shop", "web", 3);
        let owners = vec![Arc::new(web.clone()), Arc::new(deployment("shop", "db", 1))];
        let mut classes = remembered(&owners);
        let mut scaled = web.clone();
        scaled.desired = Some(5);
        scaled.replacing = true;
        let next = vec![Arc::new(scaled), Arc::clone(&owners[1])];
        assert_eq!(classes.owners_unchanged(&next), Some(true));
        assert!(
            Arc::ptr_eq(&classes.owners()[0], &next[0]),
            "the new version is held"
        );
    }

    #[test]
    fn owners_that_classify_otherwise_are_new_owners() {
        let web = deployment("shop", "web", 3);
        let other = deployment("shop", "api", 2);
        type Change = fn(&mut OwnerView, &OwnerView);
        let changes: [(&str, Change); 4] = [
            ("being deleted", |o, _| o.exists = false),
            ("recreated", |o, _| o.uid = format!("{}-again", o.uid)),
            ("adopted", |o, other| o.controller = Some(other.reference())),
            ("another owner", |o, other| *o = other.clone()),
        ];
        for (what, change) in changes {
            let mut classes = remembered(&[Arc::new(web.clone())]);
            let mut changed = web.clone();
            change(&mut changed, &other);
            assert_eq!(
                classes.owners_unchanged(&[Arc::new(changed)]),
                None,
                "{what}"
            );
        }
    }
}
