//! The controller's loop: wait for a change (or a timer), then observe → plan → execute → report, as the leader.
//!
//! Event-driven: every watch event wakes the loop; a burst is handled in one pass. Timers only cover what no watch
//! event announces (a DeleteAfterTimeout or restart timeout expiring, a refused eviction to retry) plus a slow
//! resync as a safety net. The pass never branches on why it woke.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chrono::Utc;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};

use k8sm_planner::{Action, ActionKind, PodRef, Reason};

use crate::Error;
use crate::events::EventSink;
use crate::execute::{Executor, Outcome};
use crate::in_flight::InFlight;
use crate::kamikaze_token::{KamikazeTokens, ServiceAccountRef};
use crate::leader::{self, Leadership, LeaseConfig};
use crate::metrics::Metrics;
use crate::server::{self, Health};
use crate::sizes::Sizes;
use crate::status::{CachedPolicy, StatusWriter};
use crate::stores::{Changes, Stores};
use crate::{Args, view};

/// After a pass, how long to wait at most for the caches to show the node writes it made.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(5);
/// How soon to retry when an action failed or was refused.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// How often a refused eviction of the same pod is reported again.
const REFUSAL_REPORT_EVERY: Duration = Duration::from_secs(60);
/// At most this many evictions or deletions of one pass are in flight at once.
const MAX_CONCURRENT_CALLS: usize = 16;
/// How long a stopping controller waits for its last Events to be written.
const EVENT_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

pub async fn run(args: Args) -> anyhow::Result<()> {
    // kube and the kamikaze HTTP client share rustls; pick its crypto provider once for the process.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = config(&args).await?;
    let client = Client::try_from(config.clone())?;
    let lease_namespace = args
        .leader_elect
        .then_some(args.leader_elect_namespace.as_str());
    let kamikaze_account =
        ServiceAccountRef::or_in_cluster_default(args.kamikaze_service_account.clone());
    crate::permissions::check(&client, lease_namespace, kamikaze_account.as_ref()).await?;
    let identity = args.identity.clone().unwrap_or_else(default_identity);
    let metrics = Arc::new(Metrics::new());
    let ready = Arc::new(AtomicBool::new(false));
    let addr = server::serve(
        args.metrics_addr,
        Health {
            metrics: metrics.clone(),
            ready: ready.clone(),
        },
    )
    .await?;
    tracing::info!(%addr, %identity, "serving /metrics, /healthz and /readyz");

    let (stores, mut changes) = Stores::start(&client);
    {
        let synced = stores.wait_until_ready();
        tokio::pin!(synced);
        loop {
            tokio::select! {
                _ = &mut synced => break,
                next = changes.next() => if next.is_none() { anyhow::bail!("the watches ended before syncing") },
            }
        }
    }
    ready.store(true, Ordering::Relaxed);
    tracing::info!("caches synced");

    let leadership = if args.leader_elect {
        leader::start(
            client.clone(),
            LeaseConfig {
                namespace: args.leader_elect_namespace.clone(),
                name: args.leader_elect_lease.clone(),
                identity: identity.clone(),
                lease_duration: args.leader_elect_lease_duration,
            },
        )
    } else {
        Leadership::always()
    };
    let mut controller = Controller {
        executor: Executor::new(
            action_client(config)?,
            KamikazeTokens::new(
                client.clone(),
                kamikaze_account,
                args.kamikaze_audience.clone(),
            ),
        )?,
        events: EventSink::new(client.clone(), identity),
        status: StatusWriter::new(client),
        in_flight: InFlight::default(),
        sizes: Sizes::default(),
        refusals: HashMap::new(),
        metrics,
        stores,
        leadership,
    };
    controller.run(&mut changes, args.resync).await
}

struct Controller {
    executor: Executor,
    events: EventSink,
    status: StatusWriter,
    in_flight: InFlight,
    sizes: Sizes,
    /// When a refused eviction of a pod was last reported.
    refusals: HashMap<String, Instant>,
    metrics: Arc<Metrics>,
    stores: Stores,
    leadership: Leadership,
}

/// What one pass leaves for the next.
#[derive(Default)]
struct PassResult {
    /// Node writes the caches must show before the next plan: name → resourceVersion before the write and, for a
    /// patch, after it (a patch that changed nothing leaves it equal, and there is nothing to wait for).
    written_nodes: HashMap<String, (String, Option<String>)>,
    /// Policy writes (status, deleted-node records) the caches must show before the next plan, likewise.
    written_policies: HashMap<String, (String, Option<String>)>,
    /// Plan again then, even without a change.
    wake_at: Option<chrono::DateTime<Utc>>,
    retry_soon: bool,
    /// Evictions the Eviction API refused in this pass because of a PodDisruptionBudget: pod UID → why. The plan
    /// still says "evict" (the budget's cached status allowed it), so the status reports them from here.
    refused: HashMap<String, String>,
}

impl Controller {
    async fn run(&mut self, changes: &mut Changes, resync: Duration) -> anyhow::Result<()> {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        // The first pass runs at once: the caches just synced, and in a quiet cluster (e.g. after a restart, when
        // everything waits on this controller) no change may come to wake it before the resync.
        let mut last = PassResult {
            wake_at: Some(Utc::now()),
            ..PassResult::default()
        };
        loop {
            let mut sleep_for = resync;
            if let Some(wake_at) = last.wake_at {
                let until = (wake_at - Utc::now()).to_std().unwrap_or(Duration::ZERO);
                sleep_for = sleep_for.min(until + Duration::from_millis(50));
            }
            if last.retry_soon {
                sleep_for = sleep_for.min(RETRY_AFTER);
            }
            let mut leadership = self.leadership.clone();
            tokio::select! {
                next = changes.next() => if next.is_none() { anyhow::bail!("the watches ended") },
                _ = tokio::time::sleep(sleep_for) => {}
                _ = leadership.changed() => {}
                _ = terminate.recv() => { tracing::info!("SIGTERM: stopping"); break; }
                _ = tokio::signal::ctrl_c() => { tracing::info!("interrupted: stopping"); break; }
            }
            self.settle(changes, &last).await;
            self.metrics.set_leader(self.leadership.is_leader());
            if !self.leadership.is_leader() {
                last = PassResult::default();
                continue;
            }
            last = self.pass().await;
        }
        // Events are written in the background: the operator should still see those of the last actions.
        self.events.flush(EVENT_FLUSH_TIMEOUT).await;
        Ok(())
    }

    /// Takes in the changes signalled so far, and waits (bounded) until the caches show this controller's own node
    /// and policy writes: planning on a cache that misses an admission could over-fill the drain slots, and one that
    /// misses a deleted-node record would lose that node.
    async fn settle(&self, changes: &mut Changes, last: &PassResult) {
        let deadline = tokio::time::Instant::now() + SETTLE_TIMEOUT;
        loop {
            while let Some(Some(())) = changes.next().now_or_never() {}
            let stale =
                |cached: Option<String>, (old_version, new_version): &(String, Option<String>)| {
                    new_version.as_ref() != Some(old_version)
                        && cached.as_deref() == Some(old_version.as_str())
                };
            let pending = last.written_nodes.iter().any(|(name, versions)| {
                let cached = self.stores.nodes.get(&ObjectRef::<Node>::new(name));
                cached.is_some() && stale(cached.and_then(|n| n.resource_version()), versions)
            }) || last.written_policies.iter().any(|(name, versions)| {
                let cached = self.stores.policies.get(&ObjectRef::new(name));
                cached.is_some() && stale(cached.and_then(|p| p.resource_version()), versions)
            });
            if !pending {
                return;
            }
            tokio::select! {
                _ = changes.next() => {}
                _ = tokio::time::sleep_until(deadline) => {
                    tracing::warn!("the node cache did not show this controller's writes within {SETTLE_TIMEOUT:?}");
                    return;
                }
            }
        }
    }

    async fn pass(&mut self) -> PassResult {
        let started = Instant::now();
        let now = Utc::now();
        let mut view = view::build(&self.stores, Vec::new());
        self.in_flight.prune(&view, now);
        view.in_flight = self.in_flight.snapshot();
        view.observed_sizes = self.sizes.observe(&view, Vec::new(), now);
        let planning = Instant::now();
        let plan = k8sm_planner::plan(&view, now);
        // A controller of an unknown kind is remembered from its first eviction on. The plan counted its size from
        // the pods it sees, as the remembered size starts: planning again would change nothing.
        let evicting: Vec<String> = plan
            .evictions()
            .filter(|(_, e)| e.size_inferred)
            .map(|(_, e)| e.owner.uid.clone())
            .collect();
        if !evicting.is_empty() {
            self.sizes.observe(&view, evicting, now);
        }
        self.metrics.plan_took(planning.elapsed().as_secs_f64());
        self.metrics.observe_plan(&plan);
        tracing::debug!(
            actions = plan.actions.len(),
            in_flight = self.in_flight.len(),
            "planned"
        );

        let mut result = PassResult {
            wake_at: plan.next_wake,
            ..PassResult::default()
        };
        // The planner accounts for every action of a pass together (an owner's evictions in one pass never take it
        // below its threshold), so the actions of one kind run concurrently: evictions, deletions, and node writes
        // to different nodes (marking a fleet at the start of an upgrade, admissions). The kinds keep their order
        // (see `batch_len`).
        //
        // A node written once in a pass is not written again in it (the second patch would carry a stale
        // resourceVersion), and the pods of a node whose write did not happen stay: e.g. when a node is marked and
        // admitted in one pass, the admission waits for the next pass, and so do its pods, which must not move
        // before their node is admitted and cordoned.
        let mut written: HashSet<&str> = HashSet::new();
        let mut held_back: HashSet<String> = HashSet::new();
        let mut rest = plan.actions.as_slice();
        while !rest.is_empty() {
            if !self.leadership.is_leader() {
                tracing::warn!("lost leadership mid-pass: stopping before the next action");
                break;
            }
            let batch_len = batch_len(rest);
            let (batch, after) = rest.split_at(batch_len);
            rest = after;
            let batch: Vec<&Action> = batch
                .iter()
                .filter(|action| {
                    let node = match (action.kind.node(), action.kind.pod()) {
                        (Some(node), _) if written.contains(node) => {
                            held_back.insert(node.to_owned());
                            return false;
                        }
                        (Some(node), _) => node.to_owned(),
                        (None, Some(pod)) => match self.node_of(pod) {
                            Some(node) => node,
                            None => return true,
                        },
                        (None, None) => return true,
                    };
                    !held_back.contains(&node)
                })
                .collect();
            if batch.len() < batch_len {
                result.retry_soon = true;
            }
            // Unordered: one slow call must not keep the next ones from starting; the outcomes are put back in
            // the plan's order below.
            let mut outcomes: Vec<_> = futures::stream::iter(
                batch
                    .iter()
                    .enumerate()
                    .map(|(i, a)| self.carry_out(a).map(move |outcome| (i, outcome))),
            )
            .buffer_unordered(MAX_CONCURRENT_CALLS)
            .collect()
            .await;
            outcomes.sort_by_key(|(i, _)| *i);
            let outcomes = outcomes.into_iter().map(|(_, outcome)| outcome);
            for (action, (node, outcome)) in batch.into_iter().zip(outcomes) {
                if let Some(name) = action.kind.node() {
                    match outcome {
                        Ok(Outcome::Done { .. }) => written.insert(name),
                        _ => held_back.insert(name.to_owned()),
                    };
                }
                self.follow_up(action, node, outcome, &mut result).await;
            }
        }
        let stores = &self.stores;
        self.events
            .waits(&plan, |name| {
                stores
                    .nodes
                    .get(&ObjectRef::new(name))
                    .and_then(|n| n.uid())
            })
            .await;
        let current = self
            .stores
            .policies
            .state()
            .iter()
            .map(|p| {
                let cached = CachedPolicy {
                    resource_version: p.resource_version(),
                    status: p.status.clone(),
                };
                (p.name_any(), cached)
            })
            .collect();
        match self
            .status
            .write(&plan, &current, &result.refused, &held_back, now)
            .await
        {
            Ok(written) => {
                result.retry_soon |= written.conflicts > 0;
                for (name, before, after) in written.versions {
                    result
                        .written_policies
                        .insert(name, (before.unwrap_or_default(), after));
                }
            }
            Err(error) => {
                tracing::warn!(%error, "could not write policy status");
                result.retry_soon = true;
            }
        }
        self.metrics.observe_plan(&plan);
        self.refusals
            .retain(|_, at| at.elapsed() < REFUSAL_REPORT_EVERY * 10);
        self.metrics.reconcile_took(started.elapsed().as_secs_f64());
        result
    }

    /// The node a cached pod is bound to.
    fn node_of(&self, pod: &PodRef) -> Option<String> {
        let key = ObjectRef::<Pod>::new(&pod.name).within(&pod.namespace);
        self.stores
            .pods
            .get(&key)
            .and_then(|p| p.spec.as_ref()?.node_name.clone())
    }

    /// Executes one action and, when done, reports it (log, metrics, Event). Returns the cached node it was about.
    async fn carry_out(&self, action: &Action) -> (Option<Arc<Node>>, Result<Outcome, Error>) {
        let node = action
            .kind
            .node()
            .and_then(|name| self.stores.nodes.get(&ObjectRef::new(name)));
        let policy = self.stores.policies.get(&ObjectRef::new(&action.policy));
        let outcome = self
            .executor
            .execute(action, node.as_deref(), policy.as_deref())
            .await;
        if let Ok(Outcome::Done { .. }) = outcome {
            tracing::info!(
                node = action.kind.node(),
                reason = action.reason.as_str(),
                "{}",
                action.message
            );
            self.metrics.executed(&action.kind, action.reason);
            self.events
                .action(action, node.as_ref().and_then(|n| n.uid()))
                .await;
        }
        (node, outcome)
    }

    /// Records what an action's outcome means for the next passes.
    async fn follow_up(
        &mut self,
        action: &Action,
        node: Option<Arc<Node>>,
        outcome: Result<Outcome, Error>,
        result: &mut PassResult,
    ) {
        match outcome {
            Ok(Outcome::Done {
                node_version,
                policy_version,
            }) => {
                if let (Some(node), Some(name)) = (node.as_ref(), action.kind.node()) {
                    let before = node.resource_version().unwrap_or_default();
                    result
                        .written_nodes
                        .insert(name.to_owned(), (before, node_version));
                }
                if policy_version.is_some() {
                    let before = self
                        .stores
                        .policies
                        .get(&ObjectRef::new(&action.policy))
                        .and_then(|p| p.resource_version())
                        .unwrap_or_default();
                    result
                        .written_policies
                        .insert(action.policy.clone(), (before, policy_version));
                }
                match &action.kind {
                    ActionKind::Evict { pod, eviction } => {
                        self.in_flight.record(
                            &pod.uid,
                            Some(eviction.owner.uid.clone()),
                            Utc::now(),
                        );
                    }
                    ActionKind::DeletePod { pod } => {
                        self.in_flight.record(&pod.uid, None, Utc::now())
                    }
                    _ => {}
                }
            }
            Ok(Outcome::Stale(why)) => {
                tracing::debug!(%why, "action overtaken by a change; planning again");
                result.retry_soon = true;
            }
            Ok(Outcome::DisruptionBudget(message)) => {
                result.retry_soon = true;
                self.metrics.failed(Reason::BlockedByPDB);
                let pod_uid = action.kind.pod().map(|p| p.uid.clone()).unwrap_or_default();
                let text = format!("eviction refused by a PodDisruptionBudget: {message}");
                result.refused.insert(pod_uid.clone(), text.clone());
                let due = self
                    .refusals
                    .get(&pod_uid)
                    .is_none_or(|at| at.elapsed() >= REFUSAL_REPORT_EVERY);
                if due {
                    self.refusals.insert(pod_uid, Instant::now());
                    let node_uid = node.as_ref().and_then(|n| n.uid());
                    self.events
                        .action_failed(action, Reason::BlockedByPDB, &text, node_uid)
                        .await;
                }
            }
            Err(error) => {
                tracing::warn!(%error, reason = action.reason.as_str(), "action failed");
                self.metrics.failed(action.reason);
                result.retry_soon = true;
            }
        }
    }
}

/// How many of the next actions run together: the next actions of one kind, each on a distinct node for node
/// writes. Kinds keep their order: a node is admitted before its pods move, unmanaged pods are deleted after the
/// evictions of the same pass (DESIGN.md §5.3: they go once no owned pod waits), kamikaze comes last.
fn batch_len(actions: &[Action]) -> usize {
    let Some(first) = actions.first() else {
        return 0;
    };
    let kind = std::mem::discriminant(&first.kind);
    let mut nodes = HashSet::new();
    actions
        .iter()
        .take_while(|a| {
            std::mem::discriminant(&a.kind) == kind
                && (a.kind.pod().is_some() || a.kind.node().is_none_or(|node| nodes.insert(node)))
        })
        .count()
}

async fn config(args: &Args) -> anyhow::Result<kube::Config> {
    let config = match &args.kubeconfig {
        Some(path) => {
            kube::Config::from_custom_kubeconfig(
                kube::config::Kubeconfig::read_from(path)?,
                &kube::config::KubeConfigOptions::default(),
            )
            .await?
        }
        None => kube::Config::infer().await?,
    };
    Ok(config)
}

/// The client that carries out the planner's actions, without kube's hidden retries. By default kube retries 429 and
/// 503 answers itself, honouring Retry-After; an eviction that a PodDisruptionBudget refuses answers 429 with
/// Retry-After 10 s, so the pass would sit in that retry until the action's timeout (15 s), holding up every other
/// node, and the refusal would never be reported as BlockedByPDB. The loop retries a failed or refused action itself,
/// a second later, on fresh data.
fn action_client(mut config: kube::Config) -> anyhow::Result<Client> {
    config.default_retry = false;
    Ok(Client::try_from(config)?)
}

fn default_identity() -> String {
    let host =
        std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_else(|_| "k8sm".into());
    format!("{}-{}", host.trim(), std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8sm_planner::{Eviction, OwnerKind, OwnerRef};

    fn action(kind: ActionKind) -> Action {
        Action {
            policy: "p".into(),
            reason: Reason::Marked,
            message: String::new(),
            kind,
        }
    }

    fn mark(node: &str) -> Action {
        action(ActionKind::Mark {
            node: node.into(),
            incompatible_since: None,
            claim: false,
        })
    }

    fn admit(node: &str) -> Action {
        action(ActionKind::Admit {
            node: node.into(),
            at: Utc::now(),
            pods_left: 1,
            cordon: true,
        })
    }

    fn pod_ref(name: &str) -> PodRef {
        PodRef {
            namespace: "ns".into(),
            name: name.into(),
            uid: name.into(),
        }
    }

    fn evict(pod: &str) -> Action {
        action(ActionKind::Evict {
            pod: pod_ref(pod),
            eviction: Eviction {
                owner: OwnerRef {
                    kind: OwnerKind::ReplicaSet,
                    name: "web".into(),
                    uid: "web".into(),
                },
                ready_before: 10,
                ready_after: 9,
                desired: 10,
                needed: 9,
                threshold: 90,
                use_eviction_api: true,
                size_inferred: false,
            },
        })
    }

    fn delete(pod: &str) -> Action {
        action(ActionKind::DeletePod { pod: pod_ref(pod) })
    }

    /// Lengths of the batches `actions` is cut into.
    fn batches(actions: &[Action]) -> Vec<usize> {
        let mut rest = actions;
        let mut lengths = Vec::new();
        while !rest.is_empty() {
            let n = batch_len(rest);
            lengths.push(n);
            rest = &rest[n..];
        }
        lengths
    }

    #[test]
    fn node_writes_of_one_kind_to_distinct_nodes_run_together() {
        let actions = [mark("a"), mark("b"), mark("c"), admit("a"), admit("b")];
        assert_eq!(batches(&actions), [3, 2]);
    }

    #[test]
    fn a_node_written_twice_splits_the_batch() {
        let actions = [mark("a"), mark("b"), mark("a"), mark("c")];
        assert_eq!(batches(&actions), [2, 2]);
    }

    #[test]
    fn pod_actions_of_one_kind_run_together() {
        let actions = [
            admit("a"),
            evict("p1"),
            evict("p2"),
            delete("p3"),
            delete("p4"),
            mark("b"),
            delete("p5"),
        ];
        assert_eq!(batches(&actions), [1, 2, 2, 1, 1]);
        assert_eq!(batch_len(&[]), 0);
    }
}
