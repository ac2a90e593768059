//! The sizes of controllers of unknown kinds that k8sm evicts from (docs/design.md §5.3): their
//! desired count cannot be read, and between an evicted pod's removal and its replacement's
//! creation the inferred one looks a pod smaller, and healthy. So the most live pods seen at once
//! are remembered from the first eviction on (the planner's `grow_observed_sizes`), stored before
//! any eviction counts on them ([`crate::memory::sizes_store`]) and read back before a new term
//! plans one ([`Stored`]): a restart or a new leader must not forget them.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use k8sm_planner::{ClusterView, grow_observed_sizes};

/// How long after k8sm's last eviction from a controller its size is remembered: operators recreate
/// pods within seconds to minutes.
const REMEMBER_FOR: Duration = Duration::from_secs(1800);

#[derive(Debug, Default)]
pub struct Sizes {
    sizes: BTreeMap<String, u32>,
    last_eviction: HashMap<String, DateTime<Utc>>,
}

impl Sizes {
    /// Grows the remembered sizes with what `view` shows, starting with `evicting` (UIDs of
    /// controllers whose pods a plan made on `view` evicts), and forgets those past the bound.
    /// Returns the sizes for the planner.
    pub fn observe(
        &mut self,
        view: &ClusterView,
        evicting: Vec<String>,
        now: DateTime<Utc>,
    ) -> BTreeMap<String, u32> {
        for uid in &evicting {
            self.last_eviction.insert(uid.clone(), now);
        }
        grow_observed_sizes(view, &mut self.sizes, evicting);
        let last = &mut self.last_eviction;
        last.retain(|_, at| (now - *at).to_std().is_ok_and(|age| age < REMEMBER_FOR));
        self.sizes.retain(|uid, _| last.contains_key(uid));
        self.sizes.clone()
    }

    /// What to store: every controller remembered now.
    pub fn stored(&self) -> Stored {
        Stored {
            controllers: self
                .sizes
                .iter()
                .filter_map(|(key, size)| {
                    let last_eviction = *self.last_eviction.get(key)?;
                    Some((
                        key.clone(),
                        StoredSize {
                            size: *size,
                            last_eviction,
                        },
                    ))
                })
                .collect(),
        }
    }

    /// Takes in what was stored (by this replica or an earlier leader): the larger size and the
    /// later eviction win.
    pub fn merge(&mut self, stored: Stored) {
        for (key, entry) in stored.controllers {
            let size = self.sizes.entry(key.clone()).or_default();
            *size = (*size).max(entry.size);
            let last = self.last_eviction.entry(key).or_insert(entry.last_eviction);
            *last = (*last).max(entry.last_eviction);
        }
    }
}

/// The remembered sizes as stored, by controller key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stored {
    pub controllers: BTreeMap<String, StoredSize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredSize {
    pub size: u32,
    pub last_eviction: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8sm_planner::OwnerKind;
    use k8sm_planner::testing::{at, owner};

    #[test]
    fn a_controller_is_remembered_from_its_first_eviction_until_long_after_its_last() {
        let kafka = owner(OwnerKind::Other("KafkaNodePool".into()), "k", "b", None);
        let view = |n: usize| ClusterView {
            pods: (0..n)
                .map(|i| kafka.pod(&format!("b{i}"), "n1").into())
                .collect(),
            ..ClusterView::default()
        };
        let key = kafka.unseen_key();
        let mut sizes = Sizes::default();
        assert!(sizes.observe(&view(3), vec![], at(0)).is_empty());
        assert_eq!(sizes.observe(&view(3), vec![key.clone()], at(1))[&key], 3);
        assert_eq!(
            sizes.observe(&view(2), vec![], at(2))[&key],
            3,
            "a pod gone"
        );
        assert_eq!(sizes.observe(&view(2), vec![], at(30))[&key], 3);
        assert!(
            sizes.observe(&view(2), vec![], at(31)).is_empty(),
            "forgotten"
        );
    }

    #[test]
    fn a_new_process_reads_back_what_the_last_one_stored_and_keeps_the_larger() {
        let kafka = owner(OwnerKind::Other("KafkaNodePool".into()), "k", "b", None);
        let view = |n: usize| ClusterView {
            pods: (0..n)
                .map(|i| kafka.pod(&format!("b{i}"), "n1").into())
                .collect(),
            ..ClusterView::default()
        };
        let key = kafka.unseen_key();
        let mut before = Sizes::default();
        before.observe(&view(3), vec![key.clone()], at(1));
        let stored = before.stored();
        let text = serde_json::to_string(&stored).unwrap();
        assert!(text.contains("\"size\":3"), "{text}");
        // Killed; the evicted pod is gone and not replaced yet: the next process sees 2 pods.
        let mut after = Sizes::default();
        after.merge(serde_json::from_str(&text).unwrap());
        assert_eq!(after.observe(&view(2), vec![], at(2))[&key], 3);
        // Forgotten as long after the stored eviction as in the process that made it.
        assert!(after.observe(&view(2), vec![], at(31)).is_empty());
        // A later eviction and a larger size stored elsewhere win; neither shrinks.
        let mut merged = Sizes::default();
        merged.observe(&view(4), vec![key.clone()], at(5));
        merged.merge(stored);
        assert_eq!(merged.stored().controllers[&key].size, 4);
        assert_eq!(merged.stored().controllers[&key].last_eviction, at(5));
    }
}
