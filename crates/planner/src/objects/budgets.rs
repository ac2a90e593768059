//! The budgets, sorted and with their selectors parsed, and how to find those covering a pod:
//! worked out again only when a budget came, went, or changed its namespace, name or selector (a
//! large fleet has a budget per workload, and their statuses change every pass, but hardly ever
//! their selectors).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::{
    ClusterView, PdbView, PodView,
    objects::pod_facts::Covered,
    objects::selector::{self, Selector, SelectorError},
};

/// Keyed by hashes already seeded per process, or by addresses: a fast fixed-seed hasher.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

/// The budgets covering the pods of each namespace and label set, by their addresses, with the
/// namespace and label set held (so that their addresses are not reused while the answer is kept).
type Answers = FastMap<(usize, usize), Answer>;

struct Answer {
    held: (Arc<str>, Arc<BTreeMap<String, String>>),
    /// Its place in `KeptBudgets::by_id`.
    id: u32,
}

/// Answers kept beyond this many (or twice as many as at the last clean-up) are dropped: label sets
/// come and go. A few in tests, so that their passes clean up.
const MIN_ANSWERS_CLEANED: usize = if cfg!(test) { 4 } else { 1024 };

/// A budget with its parsed selector.
pub(crate) struct Pdb<'a> {
    pub(crate) view: &'a PdbView,
    /// `None`: a null selector (selects nothing) or an invalid one.
    pub(crate) selector: &'a Option<Result<Selector, SelectorError>>,
}

impl Pdb<'_> {
    pub(crate) fn covers(&self, pod: &PodView) -> bool {
        *pod.namespace == *self.view.namespace
            && matches!(self.selector, Some(Ok(selector)) if selector.matches(&pod.labels))
    }
}

/// What is kept of the budgets from pass to pass.
#[derive(Default)]
pub(crate) struct KeptBudgets {
    /// The namespace, name and selector of each budget, in the view's order, as last indexed.
    keys: Vec<(String, String, Option<LabelSelector>)>,
    /// The positions of the view's budgets, sorted by namespace and name.
    order: Vec<u32>,
    /// Per sorted position, the parsed selector.
    selectors: Vec<Option<Result<Selector, SelectorError>>>,
    /// The sorted positions of the budgets with a required label, by the hash of their namespace,
    /// label key and value, and of the others that can cover a pod (a selector with no such
    /// label, such as the empty one), by the hash of their namespace: a pod's budgets are
    /// looked for among a few, not among every budget of the cluster. A hash shared by two
    /// keys only adds candidates, which [`Pdb::covers`] rules out.
    by_label: FastMap<u64, Vec<u32>>,
    by_namespace: FastMap<u64, Vec<u32>>,
    /// Seeded per process: tenants name labels, and could otherwise pile their budgets under one
    /// hash.
    hasher: foldhash::fast::RandomState,
    /// Which budgets cover the pods of each namespace and label set, kept while the budgets do not
    /// change (the pods of one controller share both, so selectors are matched once per
    /// controller, not once per pod and pass).
    answers: RefCell<Answers>,
    /// The budgets of each answer, by its id: what a pod's facts refer to (see [`Covered`]).
    by_id: RefCell<Vec<Arc<[u32]>>>,
    /// How many answers were kept after the last clean-up.
    answers_cleaned: usize,
}

impl KeptBudgets {
    /// The budgets of `view`, sorted by namespace and name, how to find those covering a pod, and
    /// whether the answers kept before were dropped: the budgets changed (other than in their
    /// status) since the last call, or the answers were cleaned up and given new ids.
    pub(crate) fn index<'a>(
        &'a mut self,
        view: &'a ClusterView,
    ) -> (Vec<Pdb<'a>>, Cover<'a>, bool) {
        let same = view.pdbs.len() == self.keys.len()
            && view
                .pdbs
                .iter()
                .zip(&self.keys)
                .all(|(pdb, (namespace, name, selector))| {
                    pdb.name == *name && pdb.namespace == *namespace && pdb.selector == *selector
                });
        let mut dropped = false;
        if !same {
            self.rebuild(view);
            self.answers.get_mut().clear();
            self.by_id.get_mut().clear();
            dropped = true;
        }
        let answers = self.answers.get_mut();
        if answers.len() > (2 * self.answers_cleaned).max(MIN_ANSWERS_CLEANED) {
            // Those of label sets no pod has any more go, and the others are numbered again.
            answers.retain(|_, a| Arc::strong_count(&a.held.1) > 1);
            let by_id = self.by_id.get_mut();
            let mut kept = Vec::with_capacity(answers.len());
            for answer in answers.values_mut() {
                kept.push(Arc::clone(&by_id[answer.id as usize]));
                answer.id = slot_of(kept.len() - 1);
            }
            *by_id = kept;
            self.answers_cleaned = answers.len();
            dropped = true;
        }
        let this: &'a Self = self;
        let pdbs = this
            .order
            .iter()
            .zip(&this.selectors)
            .map(|(&i, selector)| Pdb {
                view: &view.pdbs[i as usize],
                selector,
            })
            .collect();
        let cover = Cover { kept: this };
        (pdbs, cover, dropped)
    }

    fn rebuild(&mut self, view: &ClusterView) {
        self.keys = view
            .pdbs
            .iter()
            .map(|p| (p.namespace.clone(), p.name.clone(), p.selector.clone()))
            .collect();
        let mut order: Vec<u32> = (0..view.pdbs.len()).map(slot_of).collect();
        let key = |&i: &u32| {
            let pdb = &view.pdbs[i as usize];
            (pdb.namespace.as_str(), pdb.name.as_str())
        };
        order.sort_by(|a, b| key(a).cmp(&key(b)));
        self.selectors = order
            .iter()
            .map(|&i| view.pdbs[i as usize].selector.as_ref().map(Selector::new))
            .collect();
        self.by_label.clear();
        self.by_namespace.clear();
        for (sorted, (&i, parsed)) in order.iter().zip(&self.selectors).enumerate() {
            let pdb = &view.pdbs[i as usize];
            let namespace = pdb.namespace.as_str();
            // A null or invalid selector covers nothing.
            if let (Some(Ok(_)), Some(selector)) = (parsed, &pdb.selector) {
                let slot = slot_of(sorted);
                match selector::required_label(selector) {
                    Some((key, value)) => self
                        .by_label
                        .entry(self.hasher.hash_one((namespace, key, value)))
                        .or_default()
                        .push(slot),
                    None => self
                        .by_namespace
                        .entry(self.hasher.hash_one(namespace))
                        .or_default()
                        .push(slot),
                }
            }
        }
        self.order = order;
    }
}

/// Which budgets cover which pods.
pub(crate) struct Cover<'a> {
    kept: &'a KeptBudgets,
}

impl Cover<'_> {
    /// Positions of the budgets among `pdbs` that cover `pod`, in ascending order.
    pub(crate) fn covering(&self, pdbs: &[Pdb], pod: &PodView) -> Arc<[u32]> {
        let covered = self.covered(pdbs, pod);
        self.answer(covered)
            .expect("an answer just worked out is kept")
    }

    /// The answer for `pod`: kept for its namespace and labels, or worked out now and kept.
    pub(crate) fn covered(&self, pdbs: &[Pdb], pod: &PodView) -> Covered {
        let key = (
            Arc::as_ptr(&pod.namespace).cast::<u8>().addr(),
            Arc::as_ptr(&pod.labels).addr(),
        );
        if let Some(known) = self.kept.answers.borrow().get(&key) {
            let several = self.kept.by_id.borrow()[known.id as usize].len() > 1;
            return Covered::new(known.id, several);
        }
        let found = {
            let kept = self.kept;
            let namespace = &*pod.namespace;
            let in_namespace = kept
                .by_namespace
                .get(&kept.hasher.hash_one(namespace))
                .into_iter()
                .flatten();
            let labelled = pod.labels.iter().flat_map(move |(key, value)| {
                kept.by_label
                    .get(
                        &kept
                            .hasher
                            .hash_one((namespace, key.as_str(), value.as_str())),
                    )
                    .into_iter()
                    .flatten()
            });
            let mut found: Vec<u32> = in_namespace
                .chain(labelled)
                .copied()
                .filter(|&i| pdbs[i as usize].covers(pod))
                .collect();
            found.sort_unstable();
            // Two of the pod's labels whose keys share a hash find the same budgets twice.
            found.dedup();
            Arc::<[u32]>::from(found)
        };
        let several = found.len() > 1;
        let mut by_id = self.kept.by_id.borrow_mut();
        let id = slot_of(by_id.len());
        by_id.push(found);
        let answer = Answer {
            held: (Arc::clone(&pod.namespace), Arc::clone(&pod.labels)),
            id,
        };
        self.kept.answers.borrow_mut().insert(key, answer);
        Covered::new(id, several)
    }

    /// The positions of the budgets that `covered` lists; `None` where it was not worked out.
    pub(crate) fn answer(&self, covered: Covered) -> Option<Arc<[u32]>> {
        let id = covered.answer()?;
        self.kept.by_id.borrow().get(id as usize).cloned()
    }
}

/// A position, as the `u32` the index stores.
fn slot_of(i: usize) -> u32 {
    u32::try_from(i).expect("fewer than 2^32 budgets in a view")
}
