//! How the model cluster moves on between plans: pods that were terminating go; the Deployment,
//! ReplicaSet and disruption controllers scale, replace and recompute budgets; an operator
//! recreates a deleted pod after a delay; the scheduler places new pods; executors told to
//! terminate come back with the target; failures k8sm does not cause; and the controller's memory
//! of unknown kinds' sizes.

use std::sync::Arc;

use chrono::Duration;

use super::{
    scenarios::{Kind, Rollout, surge_and_unavailable},
    world::World,
};
use crate::{NodeView, testing::NEW};

impl World {
    /// The disruption controller: `currentHealthy` = Ready pods, `desiredHealthy` = minAvailable,
    /// `disruptionsAllowed` = their difference (at least 0).
    pub(super) fn update_budgets(&mut self) {
        let counts: Vec<(i32, i32)> = self
            .view
            .pdbs
            .iter()
            .map(|b| {
                let w = self
                    .workloads
                    .iter()
                    .position(|w| w.name == b.name)
                    .unwrap();
                let min = self.workloads[w].min_available.unwrap();
                (
                    i32::try_from(self.ready(w)).unwrap(),
                    i32::try_from(min).unwrap(),
                )
            })
            .collect();
        for (budget, (current, desired)) in self.view.pdbs.iter_mut().zip(counts) {
            budget.disruptions_allowed = (current - desired).max(0);
            budget.current_healthy = current;
            budget.desired_healthy = desired;
        }
    }

    /// The Eviction API: of the plan's evictions through it, those its budgets let go, in the
    /// plan's order (a budget refuses once its disruptions are used up; a pod that is not Ready
    /// goes freely under a healthy budget), and the plan with the refused ones taken out (the
    /// controller backs off and plans again).
    pub(super) fn eviction_api(&mut self, plan: &crate::Plan) -> crate::Plan {
        let mut allowed: Vec<i32> = self
            .view
            .pdbs
            .iter()
            .map(|b| b.disruptions_allowed)
            .collect();
        let mut admitted = plan.clone();
        admitted.actions.retain(|action| {
            let crate::ActionKind::Evict { pod, eviction } = &action.kind else {
                return true;
            };
            if !eviction.use_eviction_api {
                return true;
            }
            let Some(view) = self.view.pods.iter().find(|p| *p.uid == *pod.uid()) else {
                return true;
            };
            let app = view.labels.get("app");
            let Some(i) = self.view.pdbs.iter().position(|b| Some(&b.name) == app) else {
                return true;
            };
            if !view.ready && self.view.pdbs[i].admits_not_ready_freely() {
                return true;
            }
            if allowed[i] <= 0 {
                self.seen.saw("the Eviction API refused an eviction", true);
                return false;
            }
            allowed[i] -= 1;
            true
        });
        admitted
    }

    /// The controller's memory of unknown kinds' sizes (`crate::grow_observed_sizes`): grown with
    /// what the cache shows, started by this plan's evictions (`evicting`), forgotten 30
    /// minutes after the last one with `Scenario::age_out`; then handed to the planner.
    pub(super) fn remember_sizes(&mut self, evicting: Vec<String>) {
        for uid in &evicting {
            self.last_eviction.insert(uid.clone(), self.now);
        }
        crate::grow_observed_sizes(&self.view, &mut self.sizes, evicting);
        if self.age_out {
            let now = self.now;
            let last = &self.last_eviction;
            self.sizes.retain(|uid, _| {
                last.get(uid)
                    .is_some_and(|&t| now - t < Duration::minutes(30))
            });
        }
        self.view.observed_sizes = self.sizes.clone();
    }

    /// Moves the cluster on by one step; `gone` are the pods that were terminating when planning.
    pub(super) fn advance(
        &mut self,
        step: usize,
        gone: &[String],
        failures: bool,
    ) -> Result<(), String> {
        for uid in gone {
            let delay = 1 + self.rng.below(3);
            self.remove_pod(uid, step, delay);
        }
        if failures {
            self.fail(step);
        }
        self.restart_executors(step)?;
        self.deployment_controllers(step);
        self.replica_set_controllers(step);
        let due: Vec<usize> = self
            .recreate
            .iter()
            .filter(|&&(at, _)| at <= step)
            .map(|&(_, set)| set)
            .collect();
        self.recreate.retain(|&(at, _)| at > step);
        for set in due {
            self.seen.saw("an operator recreated a pod", true);
            self.create_pod(set, step, None);
        }
        for pod in &mut self.view.pods {
            if self
                .ready_at
                .get(&*pod.uid)
                .is_some_and(|&at| at <= step + 1)
            {
                let pod = std::sync::Arc::make_mut(pod);
                pod.ready = true;
                pod.ready_changed = Some(self.now);
                self.ready_at.remove(&*pod.uid);
            }
        }
        self.update_budgets();
        Ok(())
    }

    /// Removes a pod; an operator recreates it `delay` steps later.
    fn remove_pod(&mut self, uid: &str, step: usize, delay: usize) {
        self.view.pods.retain(|p| *p.uid != *uid);
        self.ready_at.remove(uid);
        if let Some(set) = self.pod_set.remove(uid)
            && self.sets[set].operator
        {
            self.recreate.push((step + delay, set));
        }
    }

    /// Executors told to terminate come back with the target after a while; their node must be
    /// empty then.
    fn restart_executors(&mut self, step: usize) -> Result<(), String> {
        for n in &self.view.nodes {
            if n.kamikaze.is_some() && !self.restart_at.contains_key(&*n.name) {
                let delay = 1 + self.rng.below(3);
                self.restart_at.insert(n.name.clone(), step + delay);
            }
        }
        let due: Vec<String> = self
            .restart_at
            .iter()
            .filter(|&(_, &at)| at <= step)
            .map(|(n, _)| n.clone())
            .collect();
        for name in due {
            self.restart_at.remove(&name);
            if let Some(left) = self
                .view
                .pods
                .iter()
                .find(|p| p.node_name.as_deref() == Some(&name))
            {
                return Err(format!(
                    "step {step}: kamikaze of {name} killed pod {}",
                    left.name
                ));
            }
            let n = self.view.nodes.iter_mut().find(|n| n.name == name).unwrap();
            n.executor_id = Some(NEW.into());
            n.kamikaze = None;
        }
        Ok(())
    }

    /// Rolling updates: a new ReplicaSet scaled up within maxSurge, old ones scaled down while the
    /// Ready pods stay at `d - maxUnavailable` at least (kube-controller-manager's
    /// `rolloutRolling`, simplified).
    fn deployment_controllers(&mut self, step: usize) {
        for w in 0..self.workloads.len() {
            let Kind::Deployment(rollout) = self.workloads[w].kind else {
                continue;
            };
            if rollout == Rollout::Paused {
                continue;
            }
            // A surge move k8sm started changed the pod template: a new rollout, as `kubectl
            // rollout restart` starts one.
            let key = self.workloads[w].key.clone();
            let record = self
                .view
                .owners
                .iter()
                .find(|o| o.uid == key)
                .and_then(|o| o.rollout.as_ref()?.surge_move.clone());
            let surged = record.is_some()
                && record.as_deref()
                    != self.workloads[w]
                        .surge_seen
                        .as_ref()
                        .map(|(r, _)| r.as_str());
            if surged {
                self.seen.saw("a surge move started a rollout", true);
                self.workloads[w].surge_seen = record.map(|r| (r, self.now));
            }
            if rollout == Rollout::StartsAt(step) || surged {
                let i = self.workloads[w].sets.len();
                self.add_set(w, i, 0, false, None);
            }
            let d = self.workloads[w].desired;
            let (surge, unavailable) = surge_and_unavailable(d);
            let sets = self.workloads[w].sets.clone();
            let (new, olds) = sets.split_last().unwrap();
            let total: u32 = sets.iter().map(|&s| self.sets[s].replicas).sum();
            if self.sets[*new].replicas < d && total < d + surge {
                let up = (d + surge - total).min(d - self.sets[*new].replicas);
                self.sets[*new].replicas += up;
            }
            let total: u32 = sets.iter().map(|&s| self.sets[s].replicas).sum();
            let ready_in = |s: usize| {
                self.view
                    .pods
                    .iter()
                    .filter(|p| p.ready && !p.terminating && self.pod_set.get(&*p.uid) == Some(&s))
                    .count() as i64
            };
            let available: i64 = sets.iter().map(|&s| ready_in(s)).sum();
            let min_available = i64::from(d - unavailable);
            let new_unavailable = i64::from(self.sets[*new].replicas) - ready_in(*new);
            let mut down = (i64::from(total) - min_available - new_unavailable.max(0))
                .min(available - min_available);
            for &old in olds {
                if down <= 0 {
                    break;
                }
                self.seen.saw(
                    "a rollout scaled an old ReplicaSet down",
                    self.sets[old].replicas > 0,
                );
                let by = down.min(i64::from(self.sets[old].replicas));
                self.sets[old].replicas -= u32::try_from(by).unwrap();
                down -= by;
            }
            for &s in &sets {
                let reference = &self.sets[s].reference;
                if let Some(rs) = self.view.owners.iter_mut().find(|o| o.uid == reference.uid) {
                    Arc::make_mut(rs).desired = Some(self.sets[s].replicas);
                }
            }
            // `kubectl rollout status`: the new ReplicaSet has every replica, available, and the
            // old ones none.
            let complete = olds.iter().all(|&s| self.sets[s].replicas == 0)
                && self.sets[*new].replicas == d
                && ready_in(*new) == i64::from(d);
            let surged = self.workloads[w].surge_seen.is_some();
            if let Some(o) = self.view.owners.iter_mut().find(|o| o.uid == key) {
                let o = Arc::make_mut(o);
                // A move's rollout replaces pods until it is complete (`testing::apply` starts it
                // replacing); the model's other rollouts keep the planner's view of
                // them as the scenarios set it.
                if surged {
                    o.replacing = !complete;
                }
                if let Some(r) = o.rollout.as_mut() {
                    r.complete = complete;
                }
            }
        }
    }

    /// ReplicaSet, ReplicationController and StatefulSet controllers: create missing pods, delete
    /// extra ones (those not scheduled or not Ready first).
    fn replica_set_controllers(&mut self, step: usize) {
        for set in 0..self.sets.len() {
            if self.sets[set].operator {
                continue;
            }
            let mut live: Vec<(bool, bool, String)> = self
                .view
                .pods
                .iter()
                .filter(|p| !p.terminating && self.pod_set.get(&*p.uid) == Some(&set))
                .map(|p| (p.node_name.is_some(), p.ready, p.uid.to_string()))
                .collect();
            let replicas = self.sets[set].replicas as usize;
            for _ in live.len()..replicas {
                self.create_pod(set, step, None);
            }
            if live.len() > replicas {
                // Unscheduled pods first, then those not Ready (false sorts first).
                live.sort();
                let extra = live.len() - replicas;
                for (_, _, uid) in live.into_iter().take(extra) {
                    let pod = self.view.pods.iter_mut().find(|p| *p.uid == *uid).unwrap();
                    std::sync::Arc::make_mut(pod).terminating = true;
                }
            }
        }
    }

    /// Picks a node for a new pod: schedulable, not restarting, untainted if possible.
    pub(super) fn schedule(&mut self) -> String {
        let schedulable: Vec<&NodeView> = self
            .view
            .nodes
            .iter()
            .filter(|n| {
                !n.unschedulable && n.kamikaze.is_none() && !self.restart_at.contains_key(&*n.name)
            })
            .collect();
        let untainted: Vec<&NodeView> = schedulable
            .iter()
            .copied()
            .filter(|n| !n.has_k8sm_taint)
            .collect();
        let pool = if untainted.is_empty() {
            schedulable
        } else {
            untainted
        };
        pool[self.rng.below(pool.len())].name.clone()
    }

    /// Failures k8sm does not cause: a Ready pod stops being Ready for a while, or a pod is deleted
    /// (and recreated by its controller at once: an operator that took a while would shrink
    /// what k8sm can see of it, which docs/design.md §5.3 accepts for deletions k8sm did not
    /// make).
    fn fail(&mut self, step: usize) {
        if self.view.pods.is_empty() || !self.rng.chance(30) {
            return;
        }
        let i = self.rng.below(self.view.pods.len());
        let uid = self.view.pods[i].uid.to_string();
        if self.rng.chance(50) {
            if self.view.pods[i].ready {
                let pod = std::sync::Arc::make_mut(&mut self.view.pods[i]);
                pod.ready = false;
                pod.ready_changed = Some(self.now);
                self.ready_at
                    .insert(uid.clone(), step + 1 + self.rng.below(4));
            }
        } else if self.pod_set.contains_key(&uid) {
            self.remove_pod(&uid, step, 0);
        }
    }
}
