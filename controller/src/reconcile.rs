//! The controller's loop: wait for a change (or a timer), then observe → plan → execute → report, as the leader.
//!
//! Event-driven: every watch event wakes the loop; a burst is handled in one pass. Timers only cover what no watch
//! event announces (a DeleteAfterTimeout or restart timeout expiring, a refused eviction to retry) plus a slow
//! resync as a safety net. The pass never branches on why it woke.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chrono::Utc;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};

use k8sm_planner::{ActionKind, Reason};

use crate::events::EventSink;
use crate::execute::{Executor, Outcome};
use crate::in_flight::InFlight;
use crate::leader::{self, Leadership, LeaseConfig};
use crate::metrics::Metrics;
use crate::server::{self, Health};
use crate::status::StatusWriter;
use crate::stores::{Changes, Stores};
use crate::{Args, view};

/// After a pass, how long to wait at most for the caches to show the node writes it made.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(5);
/// How soon to retry when an action failed or was refused.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// How often a refused eviction of the same pod is reported again.
const REFUSAL_REPORT_EVERY: Duration = Duration::from_secs(60);

pub async fn run(args: Args) -> anyhow::Result<()> {
    // kube and the kamikaze HTTP client share rustls; pick its crypto provider once for the process.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = client(&args).await?;
    let lease_namespace = args
        .leader_elect
        .then_some(args.leader_elect_namespace.as_str());
    crate::permissions::check(&client, lease_namespace).await?;
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
        executor: Executor::new(client.clone())?,
        events: EventSink::new(client.clone(), identity),
        status: StatusWriter::new(client),
        in_flight: InFlight::default(),
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
    /// Plan again then, even without a change.
    wake_at: Option<chrono::DateTime<Utc>>,
    retry_soon: bool,
}

impl Controller {
    async fn run(&mut self, changes: &mut Changes, resync: Duration) -> anyhow::Result<()> {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let mut last = PassResult::default();
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
                _ = terminate.recv() => { tracing::info!("SIGTERM: stopping"); return Ok(()); }
                _ = tokio::signal::ctrl_c() => { tracing::info!("interrupted: stopping"); return Ok(()); }
            }
            self.settle(changes, &last.written_nodes).await;
            self.metrics.set_leader(self.leadership.is_leader());
            if !self.leadership.is_leader() {
                last = PassResult::default();
                continue;
            }
            last = self.pass().await;
        }
    }

    /// Lets every event that has already arrived reach the caches, and waits (bounded) until they show this
    /// controller's own node writes: planning on a cache that misses an admission could over-fill the drain slots.
    async fn settle(
        &self,
        changes: &mut Changes,
        written: &HashMap<String, (String, Option<String>)>,
    ) {
        let deadline = tokio::time::Instant::now() + SETTLE_TIMEOUT;
        loop {
            while let Some(Some(())) = changes.next().now_or_never() {}
            let pending = written.iter().any(|(name, (old_version, new_version))| {
                new_version.as_ref() != Some(old_version)
                    && self
                        .stores
                        .nodes
                        .get(&ObjectRef::<Node>::new(name))
                        .is_some_and(|node| {
                            node.resource_version().as_deref() == Some(old_version.as_str())
                        })
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
        self.in_flight.prune(&self.stores.pods, now);
        let view = view::build(&self.stores, self.in_flight.snapshot());
        let planning = Instant::now();
        let plan = k8sm_planner::plan(&view, now);
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
        for action in &plan.actions {
            if !self.leadership.is_leader() {
                tracing::warn!("lost leadership mid-pass: stopping before the next action");
                break;
            }
            let node = action
                .kind
                .node()
                .and_then(|name| self.stores.nodes.get(&ObjectRef::new(name)));
            let node_uid = node.as_ref().and_then(|n| n.uid());
            match self.executor.execute(action, node.as_deref()).await {
                Ok(Outcome::Done { node_version }) => {
                    tracing::info!(reason = action.reason.as_str(), "{}", action.message);
                    self.metrics.executed(&action.kind, action.reason);
                    if let (Some(node), Some(name)) = (node.as_ref(), action.kind.node()) {
                        let before = node.resource_version().unwrap_or_default();
                        result
                            .written_nodes
                            .insert(name.to_owned(), (before, node_version));
                    }
                    if let ActionKind::Evict { pod, eviction } = &action.kind {
                        self.in_flight.record(
                            &pod.uid,
                            Some(eviction.owner.uid.clone()),
                            Utc::now(),
                        );
                    }
                    if let ActionKind::DeletePod { pod } = &action.kind {
                        self.in_flight.record(&pod.uid, None, Utc::now());
                    }
                    self.events.action(action, node_uid).await;
                }
                Ok(Outcome::Stale(why)) => {
                    tracing::debug!(%why, "action overtaken by a change; planning again");
                    result.retry_soon = true;
                }
                Ok(Outcome::DisruptionBudget(message)) => {
                    result.retry_soon = true;
                    self.metrics.failed(Reason::BlockedByPDB);
                    let pod_uid = action.kind.pod().map(|p| p.uid.clone()).unwrap_or_default();
                    let due = self
                        .refusals
                        .get(&pod_uid)
                        .is_none_or(|at| at.elapsed() >= REFUSAL_REPORT_EVERY);
                    if due {
                        self.refusals.insert(pod_uid, Instant::now());
                        let text = format!("eviction refused by a PodDisruptionBudget: {message}");
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
            .map(|p| (p.name_any(), p.status.clone()))
            .collect();
        if let Err(error) = self.status.write(&plan, &current, now).await {
            tracing::warn!(%error, "could not write policy status");
            result.retry_soon = true;
        }
        self.metrics.observe_plan(&plan);
        self.refusals
            .retain(|_, at| at.elapsed() < REFUSAL_REPORT_EVERY * 10);
        self.metrics.reconcile_took(started.elapsed().as_secs_f64());
        result
    }
}

async fn client(args: &Args) -> anyhow::Result<Client> {
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
    Ok(Client::try_from(config)?)
}

fn default_identity() -> String {
    let host =
        std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_else(|_| "k8sm".into());
    format!("{}-{}", host.trim(), std::process::id())
}
