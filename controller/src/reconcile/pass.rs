//! One pass: observe → plan → act → report, each a step of its own. The pass launches its calls and
//! returns without waiting for their answers (see the loop's module).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use kube::{Resource, ResourceExt};

use k8sm_api::ExecutorUpgradePolicy;
use k8sm_planner::{ActionKind, Decision, Plan, Reason};

use crate::memory::backoff;
use crate::memory::in_flight::PodWatch;
use crate::observe::cached_pod::CachedPod;
use crate::observe::watches::{self, Failing};
use crate::reconcile::planning::Planned;
use crate::report::metrics::Stage;

use super::Controller;
use super::batches::{batch_len, continuations_first, continues};
use super::pass_result::{Hold, PassResult};
use super::writes::{self, NodeWrite, PlannedVersions, WriteCrew, planned_versions};

/// The watches as the pass found them.
struct Observed {
    started: Instant,
    now: DateTime<Utc>,
    /// The watches failing now, and those failing for longer than the bound: the view is stale,
    /// nothing is done.
    failing: BTreeMap<String, Failing>,
    stale: BTreeMap<String, Failing>,
    pods: PodWatch,
}

/// The plan, whether the remembered sizes its evictions count on are stored, and the version of
/// each node it writes as the plan saw it.
struct Thought {
    plan: Plan,
    sizes_stored: bool,
    planned_versions: PlannedVersions,
    /// The workloads whose evictions continue them, as the plan counted their calls: the loop
    /// launches theirs first.
    continuing: HashSet<String>,
}

/// What acting leaves for the report: the nodes written in this pass, and the nodes whose actions
/// wait.
struct Acted<'p> {
    written: HashSet<&'p str>,
    held: HashMap<String, Hold>,
}

impl Controller {
    pub(super) async fn pass(&mut self) -> PassResult {
        let seen = self.observe();
        let Thought {
            plan,
            sizes_stored,
            planned_versions,
            continuing,
        } = self.think(&seen).await;
        let acting = Instant::now();
        let mut result = PassResult {
            wake_at: plan.next_wake,
            retry_at: watches::next_stale(&seen.failing, self.max_staleness, seen.started),
            ..PassResult::default()
        };
        self.report_stale(&plan, &seen.stale).await;
        self.forget_gone();
        let acted = self.act(
            &plan,
            &seen,
            sizes_stored,
            &continuing,
            planned_versions,
            &mut result,
        );
        let eventing = Instant::now();
        self.metrics
            .stage_took(Stage::Act, (eventing - acting).as_secs_f64());
        self.events.waits(&plan, &self.stores).await;
        let reporting = Instant::now();
        self.metrics
            .stage_took(Stage::Events, (reporting - eventing).as_secs_f64());
        self.report(&plan, &seen, acted, &mut result).await;
        self.metrics
            .stage_took(Stage::Status, reporting.elapsed().as_secs_f64());
        self.metrics.observe_failures(
            self.backoff.len(),
            seen.failing.len(),
            !seen.stale.is_empty(),
        );
        self.metrics
            .observe_silences(&self.stores.health.silences());
        self.reports.flush(false).await;
        self.metrics
            .reconcile_took(seen.started.elapsed().as_secs_f64());
        result
    }

    /// How the watches are doing, read before the view: what the pod watch delivered by then is in
    /// the caches the view is built from.
    fn observe(&self) -> Observed {
        let started = Instant::now();
        let failing = self.stores.health.failing();
        let stale = watches::stale(&failing, self.max_staleness, started);
        let pods = PodWatch {
            failing: failing.contains_key(<CachedPod as k8s_openapi::Resource>::KIND),
            delivered: self
                .stores
                .deliveries
                .last_data(&self.stores.pods_path)
                .map(|d| d.wall),
        };
        Observed {
            started,
            now: Utc::now(),
            failing,
            stale,
            pods,
        }
    }

    /// Builds the view and plans; the run records observe the plan, and the sizes of controllers of
    /// unknown kinds evicted from are stored before their evictions go.
    async fn think(&mut self, seen: &Observed) -> Thought {
        self.read_sizes().await;
        let continuing = self.reaction.continuing();
        let calls = self.calls_now(&continuing);
        let Planned {
            view,
            plan,
            planned_in,
            ..
        } = self.planning.plan_with(
            &self.stores,
            &mut self.in_flight,
            seen.pods,
            Some(calls),
            seen.now,
        );
        let planning = Instant::now() - planned_in;
        self.metrics
            .stage_took(Stage::Observe, (planning - seen.started).as_secs_f64());
        // The planner's call alone (the stage below also counts the report's and the sizes'
        // observation).
        self.metrics.plan_took(planned_in.as_secs_f64());
        self.reports.look_up(&view);
        self.reports.observe(&view, &plan, seen.now);
        // A controller of an unknown kind is remembered from its first eviction on. The plan
        // counted its size from the pods it sees, as the remembered size starts: planning
        // again would change nothing.
        let evicting: Vec<String> = plan
            .evictions()
            .filter(|(_, e)| e.size_inferred)
            .map(|(_, e)| e.owner.uid.to_string())
            .collect();
        let mut sizes_stored = true;
        if !evicting.is_empty() {
            self.planning.sizes.observe(&view, evicting, seen.now);
            sizes_stored = self.store_sizes().await;
        }
        self.metrics.observe_plan(&plan);
        self.metrics
            .stage_took(Stage::Plan, planning.elapsed().as_secs_f64());
        tracing::debug!(
            actions = plan.actions.len(),
            in_flight = self.in_flight.len(),
            "planned"
        );
        let planned_versions = planned_versions(&view, &plan);
        Thought {
            plan,
            sizes_stored,
            planned_versions,
            continuing,
        }
    }

    /// Carries out the plan, batch by batch.
    ///
    /// The planner accounts for every action of a pass together (an owner's evictions in one pass
    /// never take it below its threshold), so the actions of one kind run concurrently:
    /// evictions, deletions, and node writes to different nodes (marking a fleet at the start
    /// of an upgrade, admissions). The kinds keep their order (see `batch_len`). Evictions and
    /// deletions are launched as calls of their own; the node, policy and Deployment
    /// writes go together as one background job, and while a job is on its way a pass writes
    /// nothing (see `writes`). Either way the pass returns without waiting for answers.
    ///
    /// A node written once in a pass is not written again in it (the second patch would carry a
    /// stale resourceVersion), and the pods of a node whose write is on its way or did not
    /// happen stay: e.g. when a node is marked and admitted in one pass, the admission waits
    /// for the next pass, and so do its pods, which must not move before the cache shows their
    /// node admitted and cordoned.
    fn act<'p>(
        &mut self,
        plan: &'p Plan,
        seen: &Observed,
        sizes_stored: bool,
        continuing: &HashSet<String>,
        mut planned_versions: PlannedVersions,
        result: &mut PassResult,
    ) -> Acted<'p> {
        let mut written: HashSet<&str> = HashSet::new();
        let mut held: HashMap<String, Hold> = self.writes.holding();
        let writing = self.writes.busy();
        let mut job: Vec<NodeWrite> = Vec::new();
        // Workloads with an eviction planned and not launched: they wait (see
        // `crate::memory::reaction`).
        let mut unsent: HashSet<String> = HashSet::new();
        let mut rest = plan.actions.as_slice();
        while !rest.is_empty() {
            if let Err(not_leader) = self.leadership.ensure() {
                tracing::warn!("stopping mid-pass before the next action: {not_leader}");
                break;
            }
            if *self.stopping.borrow() {
                tracing::info!("stopping mid-pass before the next action: told to stop");
                break;
            }
            let (batch, after) = rest.split_at(batch_len(rest));
            rest = after;
            for action in continuations_first(batch, continuing) {
                if action.kind.pod().is_none() {
                    let node = action.kind.node();
                    if writing {
                        if let Some(node) = node.filter(|_| writes::holds_pods(&action.kind)) {
                            held.entry(node.to_owned()).or_insert(Hold::Writing);
                        }
                    } else if self.may_attempt(action, &seen.stale, &written, &mut held, result) {
                        if let Some(node) = node {
                            written.insert(node);
                            if writes::holds_pods(&action.kind) {
                                held.insert(node.to_owned(), Hold::Writing);
                            }
                        }
                        job.push(NodeWrite {
                            action: action.clone(),
                            planned_version: node.and_then(|n| planned_versions.remove(n)),
                        });
                    }
                    continue;
                }
                if let ActionKind::Evict { eviction, .. } = &action.kind
                    && eviction.size_inferred
                    && !sizes_stored
                {
                    result.retry_soon = true;
                    unsent.insert(eviction.owner.uid.to_string());
                    continue;
                }
                let continuation = continues(action, continuing);
                let launched = self.may_attempt(action, &seen.stale, &written, &mut held, result)
                    && self.launch(action, continuation, result);
                if let (false, ActionKind::Evict { eviction, .. }) = (launched, &action.kind) {
                    unsent.insert(eviction.owner.uid.to_string());
                }
            }
        }
        if !job.is_empty() {
            self.writes.launch(
                job,
                self.call_limit.current(),
                WriteCrew {
                    executor: self.executor.clone(),
                    events: self.events.clone(),
                    metrics: self.metrics.clone(),
                    stores: self.stores.clone(),
                    leadership: self.leadership.clone(),
                    stopping: self.stopping.clone(),
                },
            );
        }
        tracing::debug!(
            workloads_not_sent = unsent.len(),
            calls = self.in_flight.calls(),
            "acted"
        );
        let (waiting, for_calls) = waiting_workloads(plan);
        // A call that frees up lets a pod waiting for one go: its answer plans again.
        result.deferred |= for_calls;
        self.reaction.waiting(waiting, unsent, seen.started);
        Acted { written, held }
    }

    /// Writes the policies' status from the plan, naming the nodes whose actions wait.
    async fn report(
        &mut self,
        plan: &Plan,
        seen: &Observed,
        acted: Acted<'_>,
        result: &mut PassResult,
    ) {
        let Acted { written, mut held } = acted;
        // Shared, not copied: a policy's status holds a row per node.
        let current: HashMap<String, Arc<ExecutorUpgradePolicy>> = self
            .stores
            .policies
            .state()
            .into_iter()
            .map(|p| (p.name_any(), p))
            .collect();
        // A deleted-node record the plan adds or drops is written only once its node's action
        // happened (see `executed_records`): when that action is in this pass's job, the
        // status waits for the job (rare: once per node deleted by its kamikaze, and once
        // when it comes back).
        if records_wait_for(plan, &current, &written)
            && let Some(answers) = self.writes.answered().await
        {
            let not_done = self.written(answers, result).await;
            for node in &written {
                held.remove(*node);
            }
            held.extend(not_done);
        }
        let troubles = self.troubles(&seen.stale);
        let unfinished: HashSet<String> = held.into_keys().collect();
        match self
            .status
            .write(plan, &current, &troubles, &unfinished, seen.now)
            .await
        {
            Ok(written) => {
                self.status_failures = 0;
                // A conflict resolves once the cache shows the policy's newer version: soon, unless
                // the policies' watch is failing (then its recovery wakes the
                // loop).
                let policies_failing = seen
                    .failing
                    .contains_key(ExecutorUpgradePolicy::kind(&()).as_ref());
                result.retry_soon |= written.conflicts > 0 && !policies_failing;
                if let Some(at) = written.postponed {
                    result.retry_at(at);
                }
                for (name, before, after) in written.versions {
                    result
                        .written_policies
                        .insert(name, (before.unwrap_or_default(), after));
                }
            }
            Err(error) => {
                // Not every second for ever (an oversized status would fail each time): the next
                // pass that any change brings tries again, and without one the loop
                // backs off.
                self.status_failures += 1;
                let delay = backoff::delay(self.status_failures, backoff::random_fraction());
                tracing::warn!(%error, attempt = self.status_failures, retry_in = ?delay, "could not write policy status");
                result.retry_at(Instant::now() + delay);
            }
        }
    }

    /// Reads the stored sizes once per term (a standby's copy is behind its leader's), before
    /// anything is planned.
    async fn read_sizes(&mut self) {
        let term = self.leadership.term();
        if term.is_none() || self.sizes_read == term {
            return;
        }
        match self.sizes_store.load().await {
            Ok(stored) => {
                self.planning.sizes.merge(stored);
                self.sizes_read = term;
            }
            Err(error) => tracing::warn!(
                %error,
                "could not read the remembered sizes of unknown kinds: their evictions wait"
            ),
        }
    }

    /// Stores the remembered sizes before the evictions that count on them; whether they may go.
    async fn store_sizes(&mut self) -> bool {
        if self.sizes_read.is_none() || self.sizes_read != self.leadership.term() {
            return false;
        }
        match self.sizes_store.save(&self.planning.sizes.stored()).await {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(
                    %error,
                    "could not store the remembered sizes of unknown kinds: their evictions wait"
                );
                false
            }
        }
    }
}

/// Whether the status write of a pass decides on a deleted-node record of a node `written` by the
/// pass's job: a record the plan adds or drops (compared with what the cache holds).
fn records_wait_for(
    plan: &k8sm_planner::Plan,
    current: &HashMap<String, Arc<ExecutorUpgradePolicy>>,
    written: &HashSet<&str>,
) -> bool {
    if written.is_empty() {
        return false;
    }
    plan.policies.iter().any(|policy| {
        let cached: HashSet<&str> = current
            .get(&policy.policy)
            .and_then(|p| p.status.as_ref())
            .map(|s| s.deleted_nodes.iter().map(|r| r.name.as_str()).collect())
            .unwrap_or_default();
        let planned: HashSet<&str> = policy
            .deleted_nodes
            .iter()
            .map(|r| r.name.as_str())
            .collect();
        cached
            .symmetric_difference(&planned)
            .any(|name| written.contains(name))
    })
}

/// The workloads with a pod that waits on the health rule, a budget or a call after a pass (see
/// `crate::memory::reaction`), and whether any pod waits for a call.
fn waiting_workloads(plan: &k8sm_planner::Plan) -> (HashSet<String>, bool) {
    let mut for_calls = false;
    let waiting = plan
        .nodes
        .iter()
        .flat_map(|n| n.pods.iter())
        .filter(|p| {
            for_calls |= p.reason == Some(Reason::WaitingForCall);
            p.decision == Decision::Wait
                && matches!(
                    p.reason,
                    Some(Reason::WaitingForOwner | Reason::BlockedByPDB | Reason::WaitingForCall)
                )
        })
        .filter_map(|p| p.owner.as_ref().map(|o| o.uid.to_string()))
        .collect();
    (waiting, for_calls)
}
