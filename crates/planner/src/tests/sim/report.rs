//! The upgrade report against the model: every pass and every action of a run folded as the
//! controller folds them (`crate::report`, all actions taken as carried out), and beside it what
//! the model knows — the evictions and deletions it applied, and for each workload the fewest Ready
//! pods it had at the passes from its first disruption until whole again. The record must say
//! exactly that.

use std::collections::{BTreeMap, BTreeSet};

use super::world::World;
use crate::{ActionKind, Plan, report};

impl World {
    /// A pass, before its actions: the record observes it, and the model looks at the workloads it
    /// watches.
    pub(super) fn report_pass(&mut self, plan: &Plan) {
        report::observe(&mut self.truth.runs, &self.view, plan, self.now, |_, _| {
            true
        });
        for w in self.truth.recovering.clone() {
            let ready = self.ready(w);
            let min = self.truth.min_ready.get_mut(&w).expect("disrupted");
            *min = (*min).min(ready);
            if ready >= self.workloads[w].desired {
                self.truth.recovering.remove(&w);
            }
        }
    }

    /// The actions of a pass, once applied: recorded as carried out, and counted by the model.
    pub(super) fn report_actions(&mut self, plan: &Plan, nodes_of_pods: &BTreeMap<String, String>) {
        let mut disrupted = BTreeSet::new();
        for action in &plan.actions {
            let pod = action.kind.about_pod();
            let node = pod
                .and_then(|p| nodes_of_pods.get(p.uid()))
                .map(String::as_str);
            report::record(&mut self.truth.runs, action, node, self.now);
            match &action.kind {
                ActionKind::Evict { pod, .. } | ActionKind::Surge { pod, .. } => {
                    if matches!(action.kind, ActionKind::Evict { .. }) {
                        self.truth.evicted += 1;
                    }
                    if let Some(w) = self.workload_of(pod.uid()) {
                        *self.truth.disruptions.entry(w).or_default() += 1;
                        disrupted.insert(w);
                    }
                }
                ActionKind::DeletePod { pod, .. }
                    if self.workload_of(pod.uid()).is_none()
                        && action.reason == crate::Reason::DeletedUnmanagedPod =>
                {
                    self.truth.deleted_unmanaged += 1;
                }
                _ => {}
            }
        }
        // Its Ready pods once the pass's evictions are applied (evicted pods terminate).
        for w in disrupted {
            let ready = self.ready(w);
            let min = self.truth.min_ready.entry(w).or_insert(ready);
            *min = (*min).min(ready);
            self.truth.recovering.insert(w);
        }
    }

    /// The record says what the model knows.
    pub(super) fn check_report(&self) -> Result<(), String> {
        let nothing_done = self.truth.evicted == 0
            && self.truth.deleted_unmanaged == 0
            && self.truth.min_ready.is_empty();
        let Some(run) = self.truth.runs.get("p") else {
            // A run that ends before its first pass (every node but the stuck ones upgraded
            // already) has no record.
            return if nothing_done {
                Ok(())
            } else {
                Err("no record of the run".into())
            };
        };
        let counted = |reason: &str| run.count(reason);
        if counted("Evicted") != self.truth.evicted {
            return Err(format!(
                "{} evictions recorded, {} made",
                counted("Evicted"),
                self.truth.evicted
            ));
        }
        if counted("DeletedUnmanagedPod") != self.truth.deleted_unmanaged {
            return Err(format!(
                "{} unmanaged pods deleted by the record, {} by the model",
                counted("DeletedUnmanagedPod"),
                self.truth.deleted_unmanaged
            ));
        }
        for (&w, &min) in &self.truth.min_ready {
            let key = &self.workloads[w].key;
            let record = run
                .workloads
                .values()
                .find(|r| r.uid == *key)
                .ok_or_else(|| format!("no record of disrupted workload {key}"))?;
            // The model's workloads set no minReadySeconds: their available pods are their Ready
            // pods.
            if record.min_ready != min
                || record.min_available != Some(min)
                || record.disruptions != self.truth.disruptions[&w]
            {
                return Err(format!(
                    "{key}: recorded min Ready {} (available {:?}) and {} disruptions, the model saw {min} and {}",
                    record.min_ready,
                    record.min_available,
                    record.disruptions,
                    self.truth.disruptions[&w]
                ));
            }
        }
        Ok(())
    }
}
