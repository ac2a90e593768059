//! The controller's loop: wait for a change (or a timer), then observe → plan → execute → report, as the leader.
//!
//! Event-driven: every watch event (and every watch failure) wakes the loop; a burst is handled in one pass, and a
//! wake too soon after the last pass waits so that passes take at most `--max-busy-share` of the time ([`BusyShare`]). Timers
//! only cover what no watch event announces (a DeleteAfterTimeout or restart timeout expiring, the backoff of a
//! failed action ending, a failing watch becoming stale) plus a slow resync as a safety net. The pass never branches
//! on why it woke.
//!
//! Pipelined: a pass only launches its evictions and pod deletions, each as a call of its own, and its node, policy
//! and Deployment writes as one background job (see `writes`), and returns without waiting for their answers. A
//! launched call is in flight from that moment ([`InFlight`]): the next passes count its pod as going (its owner's
//! budget stays held) and never act on it again, while they plan other nodes and owners on every watch event. An answer wakes the loop:
//! a definite refusal releases the pod (its budget is free again) and backs it off; an accepted call, and one whose
//! outcome is unknown (a timeout, a 5xx: the eviction may have happened), keeps its entry until the cache shows the
//! pod going (or a bound passes), the latter backed off too. At most [`CallLimit::current`] calls run at once (it
//! adapts to the apiserver's latency and overload), and [`CONTINUATION_CALLS`] more for the evictions that continue a workload whose replacement is Ready; what a pass
//! cannot launch waits for a later pass, which the next answer brings.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chrono::Utc;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::ObjectRef;
use kube::{Client, Resource, ResourceExt};
use tokio::sync::watch;
use tokio::task::{JoinError, JoinSet};

use k8sm_api::ExecutorUpgradePolicy;
use k8sm_planner::{Action, ActionKind, Decision, PodRef, Reason};

use crate::Args;
use crate::Error;
use crate::act::call_limit::{self, CallLimit};
use crate::act::execute::{Cached, Executor, Outcome};
use crate::act::kamikaze_client::KamikazeClient;
use crate::act::kamikaze_token::{KamikazeTokens, ServiceAccountRef};
use crate::leadership::fence::FenceLayer;
use crate::leadership::leader::{self, Leadership, LeaseConfig};
use crate::memory::backoff::{self, Backoff, Subject};
use crate::memory::in_flight::{InFlight, PodWatch};
use crate::memory::reaction::Reaction;
use crate::memory::sizes_store::SizesStore;
use crate::observe::cached_pod::CachedPod;
use crate::observe::deliveries::Deliveries;
use crate::observe::stores::{Changes, Stores};
use crate::observe::watches;
use crate::reconcile::busy_share::BusyShare;
use crate::reconcile::planning::{Planned, Planning};
use crate::report::events::EventSink;
use crate::report::metrics::{Metrics, Stage};
use crate::report::run_records::Reports;
use crate::report::status_writer::StatusWriter;
use crate::startup::server::{self, Health};

pub(crate) mod busy_share;
mod failures;
pub(crate) mod planning;
mod writes;

use writes::{WriteAnswer, WriteCrew, Writes};

/// After a pass, how long to wait at most for the caches to show the node writes it made.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(5);
/// A wait for the caches worth a debug line.
const SLOW_SETTLE: Duration = Duration::from_millis(100);
/// How soon to plan again when an action was overtaken by a change (a conflict), or held back to the next pass.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// How late after a backoff ends the loop wakes, so that the backoff has ended when the pass checks it.
const WAKE_MARGIN: Duration = Duration::from_millis(20);
/// Calls beyond the [`CallLimit`] kept for the evictions that continue a workload (a pod of it became Ready
/// while it waited, see `crate::memory::reaction`): the owners' waves are an upgrade's critical path, and with every call
/// busy with the first evictions of newly admitted nodes (the apiserver answering each in about half a second under
/// load) such an eviction waited for a call half of the times it was late.
const CONTINUATION_CALLS: usize = 4;
/// How long connecting to the apiserver may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a call's request may wait on the connection (a read or a write) before it fails.
const CALL_IO_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a stopping controller waits for its last Events to be written: the standby waits for it too, as the Lease
/// is released only afterwards.
const EVENT_FLUSH_TIMEOUT: Duration = Duration::from_secs(1);

pub async fn run(args: Args) -> anyhow::Result<()> {
    // kube and the kamikaze HTTP client share rustls; pick its crypto provider once for the process.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let identity = args.identity.clone().unwrap_or_else(default_identity);
    let lease = args
        .leader_elect
        .then(|| {
            LeaseConfig::new(
                args.leader_elect_namespace.clone(),
                args.leader_elect_lease.clone(),
                identity.clone(),
                args.leader_elect_lease_duration,
                args.leader_elect_renew_deadline,
            )
        })
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let mut config = config(&args).await?;
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    // The watches' client keeps kube's read timeout (295 s), sets each watch's server-side timeout, and records what
    // each watch delivers (`stores::WATCH_SILENCE`); every other call goes through `calls`, bounded much tighter.
    let deliveries = Deliveries::default();
    let client = kube::client::ClientBuilder::try_from(config.clone())?
        .with_layer(&tower::util::MapRequestLayer::new(
            crate::observe::stores::with_watch_timeout,
        ))
        .with_layer(&deliveries.layer())
        .build();
    let calls = calls_client(config.clone(), None)?;
    let lease_name = args.leader_elect.then_some((
        args.leader_elect_namespace.as_str(),
        args.leader_elect_lease.as_str(),
    ));
    let kamikaze_account =
        ServiceAccountRef::or_in_cluster_default(args.kamikaze_service_account.clone());
    let report_namespace = args
        .report_namespace
        .clone()
        .unwrap_or_else(|| args.leader_elect_namespace.clone());
    crate::startup::permissions::check(
        &calls,
        lease_name,
        &report_namespace,
        kamikaze_account.as_ref(),
    )
    .await?;
    let metrics = Arc::new(Metrics::new());
    // Reported from the start, not from the first answer: a scrape before any call reads the limit in force.
    metrics.set_call_limit(CallLimit::default().current());
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

    let reaction = Reaction::default();
    let (stores, mut changes) = Stores::start(&client, deliveries, reaction.clone());
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

    let leadership = match lease {
        Some(lease) => leader::start(calls.clone(), lease),
        None => Leadership::always(),
    };
    // Every write but the Lease's own goes through the fence.
    let writes = calls_client(config, Some(FenceLayer::new(leadership.clone())))?;
    let mut controller = Controller {
        executor: Executor::new(
            writes.clone(),
            leadership.clone(),
            KamikazeClient::new(args.kamikaze_ca_file.clone()),
            KamikazeTokens::new(
                calls.clone(),
                kamikaze_account,
                args.kamikaze_audience.clone(),
            ),
        ),
        events: Arc::new(EventSink::new(writes.clone(), identity, leadership.clone())),
        status: StatusWriter::new(writes.clone(), leadership.clone()),
        reports: Reports::new(writes.clone(), report_namespace.clone(), leadership.clone()),
        in_flight: InFlight::default(),
        writes: Writes::default(),
        planning: Planning::new(args.pace_by_room),
        calls: JoinSet::new(),
        call_limit: CallLimit::default(),
        reaction,
        sizes_store: SizesStore::new(writes.clone(), &report_namespace),
        sizes_read: None,
        backoff: Backoff::default(),
        status_failures: 0,
        stale_reported: BTreeSet::new(),
        max_staleness: args.max_watch_staleness,
        pacer: BusyShare::new(args.max_busy_share, args.resync),
        metrics,
        stores,
        leadership,
        stopping: on_stop_signal()?,
    };
    controller.run(&mut changes, args.resync).await
}

/// Becomes true on SIGTERM or Ctrl-C: the loop then stops acting (a pass stops before its next batch of actions),
/// and the Lease is released.
fn on_stop_signal() -> anyhow::Result<watch::Receiver<bool>> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let (sender, receiver) = watch::channel(false);
    tokio::spawn(async move {
        tokio::select! {
            _ = terminate.recv() => tracing::info!("SIGTERM: stopping"),
            _ = tokio::signal::ctrl_c() => tracing::info!("interrupted: stopping"),
        }
        sender.send_replace(true);
        // Keep the sender (and so the stop) until the process exits.
        std::future::pending::<()>().await;
    });
    Ok(receiver)
}

struct Controller {
    executor: Executor,
    events: Arc<EventSink>,
    status: StatusWriter,
    /// The upgrade runs' durable records.
    reports: Reports,
    in_flight: InFlight,
    /// The node, policy and Deployment writes of a pass, on their way.
    writes: Writes,
    /// Builds the view and plans every pass, keeping what it can for the next.
    planning: Planning,
    /// The evictions and pod deletions launched and not answered yet (their pods are in `in_flight`).
    calls: JoinSet<Answer>,
    /// How many of them may run at once.
    call_limit: CallLimit,
    reaction: Reaction,
    sizes_store: SizesStore,
    /// The term ([`Leadership::term`]) in which the stored sizes were last read: until they are read in the current
    /// one, and when storing them before an eviction that counts on them fails, such evictions wait.
    sizes_read: Option<u64>,
    /// Objects whose last action failed, backing off.
    backoff: Backoff,
    /// Status writes that failed in a row (the next one backs off too).
    status_failures: u32,
    /// The stale watches an Event already reported, so that an episode is reported once.
    stale_reported: BTreeSet<String>,
    /// How long a watch may fail before its cache counts as stale (`--max-watch-staleness`).
    max_staleness: Duration,
    /// When the next pass may start (`--max-busy-share`).
    pacer: BusyShare,
    metrics: Arc<Metrics>,
    stores: Stores,
    leadership: Leadership,
    stopping: watch::Receiver<bool>,
}

/// What one pass leaves for the next.
#[derive(Default)]
struct PassResult {
    /// Node writes the caches must show before the next plan: name → resourceVersion before the write and, for a
    /// patch, after it (a patch that changed nothing leaves it equal, and there is nothing to wait for).
    written_nodes: HashMap<String, (String, Option<String>)>,
    /// Policy writes (status, deleted-node records) the caches must show before the next plan, likewise.
    written_policies: HashMap<String, (String, Option<String>)>,
    /// Deployment writes (surge moves), by namespace and name, likewise: a plan on a cache without the move's
    /// record would start the same move again.
    written_deployments: HashMap<(String, String), (String, Option<String>)>,
    /// Plan again then, even without a change.
    wake_at: Option<chrono::DateTime<Utc>>,
    /// Plan again soon (see [`RETRY_AFTER`]).
    retry_soon: bool,
    /// Plan again then: the earliest end of a backoff that withheld an action of this pass, or the moment a failing
    /// watch becomes stale.
    retry_at: Option<Instant>,
    /// Pod actions were not launched for want of a free call: plan again when a call answers.
    deferred: bool,
}

/// A launched call's answer.
struct Answer {
    action: Action,
    outcome: Result<Outcome, Error>,
    /// The node the pod was on when the call was launched (the report counts the pod there: once it is gone, the
    /// cache no longer tells).
    pod_node: Option<String>,
    /// How long the call took.
    took: Duration,
}

/// What woke the loop.
enum Wake {
    Stop,
    /// A change, a timer, or a change of leadership.
    Plan,
    /// Boxed: an answer carries its action, far larger than the other variants.
    Answer(Box<Result<Answer, JoinError>>),
    /// The answers of a pass's writes.
    Written(Result<Vec<WriteAnswer>, JoinError>),
}

impl PassResult {
    fn retry_at(&mut self, at: Instant) {
        self.retry_at = Some(self.retry_at.map_or(at, |earlier| earlier.min(at)));
    }
}

/// Why the actions of a node wait for a later pass.
#[derive(Debug, Clone, Copy)]
enum Hold {
    /// The node was written once in this pass, or its write was overtaken by a change: plan again soon.
    Soon,
    /// Its action failed or backs off (until then), or the view is stale (`None`: until a watch recovers).
    Later(Option<Instant>),
    /// A write of the node is on its way (see [`writes`]): its answer wakes the loop.
    Writing,
}

impl Controller {
    async fn run(&mut self, changes: &mut Changes, resync: Duration) -> anyhow::Result<()> {
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
            if let Some(at) = last.retry_at {
                sleep_for =
                    sleep_for.min(at.saturating_duration_since(Instant::now()) + WAKE_MARGIN);
            }
            if let Some(at) = self.pacer.waiting_until() {
                sleep_for = sleep_for.min(at.saturating_duration_since(Instant::now()));
            }
            let mut stopping = self.stopping.clone();
            let wake = tokio::select! {
                biased;
                _ = stopping.wait_for(|stop| *stop) => Wake::Stop,
                Some(answer) = self.calls.join_next(), if !self.calls.is_empty() => Wake::Answer(Box::new(answer)),
                Some(answers) = self.writes.answered(), if self.writes.busy() => Wake::Written(answers),
                next = changes.next() => match next {
                    Some(()) => Wake::Plan,
                    None => anyhow::bail!("the watches ended"),
                },
                _ = tokio::time::sleep(sleep_for) => Wake::Plan,
                _ = self.leadership.changed() => Wake::Plan,
            };
            match wake {
                Wake::Stop => break,
                Wake::Plan => {}
                // The writes held back meanwhile, and the pods of their nodes, wait for the next pass.
                Wake::Written(answers) => {
                    self.written(answers, &mut last).await;
                }
                Wake::Answer(answer) => {
                    let mut replan = self.answered(*answer, &mut last).await;
                    while let Some(answer) = self.calls.try_join_next() {
                        replan |= self.answered(answer, &mut last).await;
                    }
                    // An accepted call changes nothing the plan counts (its pod was counted as going from its
                    // launch); the watch event that shows the pod terminating brings the next pass.
                    if !replan {
                        continue;
                    }
                }
            }
            // A wake that would plan too soon after the last pass waits, taking in what comes meanwhile; the sleep
            // above ends at once the hold does.
            let now = Instant::now();
            if self.pacer.hold(now).is_some() {
                continue;
            }
            self.metrics
                .stage_took(Stage::Pace, self.pacer.start(now).as_secs_f64());
            let settling = Instant::now();
            self.settle(changes, &last).await;
            let settled = settling.elapsed();
            self.metrics
                .stage_took(Stage::Settle, settled.as_secs_f64());
            if settled > SLOW_SETTLE {
                tracing::debug!(
                    waited_ms = settled.as_millis(),
                    nodes = last.written_nodes.len(),
                    policies = last.written_policies.len(),
                    deployments = last.written_deployments.len(),
                    "waited for the caches to show this controller's writes"
                );
            }
            self.metrics.set_leader(self.leadership.is_leader());
            if !self.leadership.is_leader() {
                last = PassResult::default();
                continue;
            }
            let passing = Instant::now();
            last = self.pass().await;
            self.pacer.passed(Instant::now(), passing.elapsed());
        }
        // The calls in flight end first (each within its own timeout): a standby must not plan on a cache that
        // misses an eviction still on its way. Events are written in the background: the operator should still see
        // those of the last actions. Then the Lease goes, so that a standby takes over at once instead of after the
        // lease duration.
        while let Some(answer) = self.calls.join_next().await {
            self.answered(answer, &mut last).await;
        }
        while let Some(answers) = self.writes.answered().await {
            self.written(answers, &mut last).await;
        }
        self.status.flush().await;
        self.reports.flush(true).await;
        self.events.flush(EVENT_FLUSH_TIMEOUT).await;
        self.leadership.release().await;
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
            }) || last.written_deployments.iter().any(
                |((namespace, name), versions)| {
                    let cached = self
                        .stores
                        .deployments
                        .get(&ObjectRef::new(name).within(namespace));
                    cached.is_some() && stale(cached.and_then(|d| d.resource_version()), versions)
                },
            );
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

    /// Reads the stored sizes once per term (a standby's copy is behind its leader's), before anything is planned.
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

    async fn pass(&mut self) -> PassResult {
        let started = Instant::now();
        let now = Utc::now();
        let failing = self.stores.health.failing();
        let stale = watches::stale(&failing, self.max_staleness, started);
        // Read before the view: what the pod watch delivered by then is in the caches the view is built from.
        let pods = PodWatch {
            failing: failing.contains_key(<CachedPod as k8s_openapi::Resource>::KIND),
            delivered: self
                .stores
                .deliveries
                .last_data(&self.stores.pods_path)
                .map(|d| d.wall),
        };
        self.read_sizes().await;
        let Planned {
            view,
            plan,
            planned_in,
            ..
        } = self
            .planning
            .plan_with(&self.stores, &mut self.in_flight, pods, now);
        let planning = Instant::now() - planned_in;
        self.metrics
            .stage_took(Stage::Observe, (planning - started).as_secs_f64());
        // The planner's call alone (the stage below also counts the report's and the sizes' observation).
        self.metrics.plan_took(planned_in.as_secs_f64());
        self.reports.look_up(&view);
        self.reports.observe(&view, &plan, now);
        // A controller of an unknown kind is remembered from its first eviction on. The plan counted its size from
        // the pods it sees, as the remembered size starts: planning again would change nothing.
        let evicting: Vec<String> = plan
            .evictions()
            .filter(|(_, e)| e.size_inferred)
            .map(|(_, e)| e.owner.uid.to_string())
            .collect();
        let mut sizes_stored = true;
        if !evicting.is_empty() {
            self.planning.sizes.observe(&view, evicting, now);
            sizes_stored = self.store_sizes().await;
        }
        self.metrics.observe_plan(&plan);
        self.metrics
            .stage_took(Stage::Plan, planning.elapsed().as_secs_f64());
        let acting = Instant::now();
        tracing::debug!(
            actions = plan.actions.len(),
            in_flight = self.in_flight.len(),
            "planned"
        );

        let mut result = PassResult {
            wake_at: plan.next_wake,
            retry_at: watches::next_stale(&failing, self.max_staleness, started),
            ..PassResult::default()
        };
        self.report_stale(&plan, &stale).await;
        self.forget_gone();
        // The planner accounts for every action of a pass together (an owner's evictions in one pass never take it
        // below its threshold), so the actions of one kind run concurrently: evictions, deletions, and node writes
        // to different nodes (marking a fleet at the start of an upgrade, admissions). The kinds keep their order
        // (see `batch_len`). Evictions and deletions are launched as calls of their own; the node, policy and
        // Deployment writes go together as one background job, and while a job is on its way a pass writes nothing
        // (see `writes`). Either way the pass returns without waiting for answers (see the module's comment).
        //
        // A node written once in a pass is not written again in it (the second patch would carry a stale
        // resourceVersion), and the pods of a node whose write is on its way or did not happen stay: e.g. when a
        // node is marked and admitted in one pass, the admission waits for the next pass, and so do its pods, which
        // must not move before the cache shows their node admitted and cordoned.
        let mut written: HashSet<&str> = HashSet::new();
        let mut held: HashMap<String, Hold> = self.writes.holding();
        let writing = self.writes.busy();
        let mut job: Vec<Action> = Vec::new();
        // Workloads with an eviction planned and not launched: they wait (see `crate::memory::reaction`).
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
            let continuing = match batch.first().map(|a| &a.kind) {
                Some(ActionKind::Evict { .. }) => self.reaction.continuing(),
                _ => HashSet::new(),
            };
            for action in continuations_first(batch, &continuing) {
                if action.kind.pod().is_none() {
                    let node = action.kind.node();
                    if writing {
                        if let Some(node) = node.filter(|_| writes::holds_pods(&action.kind)) {
                            held.entry(node.to_owned()).or_insert(Hold::Writing);
                        }
                    } else if self.may_attempt(action, &stale, &written, &mut held, &mut result) {
                        if let Some(node) = node {
                            written.insert(node);
                            if writes::holds_pods(&action.kind) {
                                held.insert(node.to_owned(), Hold::Writing);
                            }
                        }
                        job.push(action.clone());
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
                let continuation = continues(action, &continuing);
                let launched = self.may_attempt(action, &stale, &written, &mut held, &mut result)
                    && self.launch(action, continuation, &mut result);
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
        self.reaction
            .waiting(waiting_workloads(&plan), unsent, started);
        let eventing = Instant::now();
        self.metrics
            .stage_took(Stage::Act, (eventing - acting).as_secs_f64());
        self.events.waits(&plan, &self.stores).await;
        let reporting = Instant::now();
        self.metrics
            .stage_took(Stage::Events, (reporting - eventing).as_secs_f64());
        // Shared, not copied: a policy's status holds a row per node.
        let current: HashMap<String, Arc<ExecutorUpgradePolicy>> = self
            .stores
            .policies
            .state()
            .into_iter()
            .map(|p| (p.name_any(), p))
            .collect();
        // A deleted-node record the plan adds or drops is written only once its node's action happened (see
        // `executed_records`): when that action is in this pass's job, the status waits for the job (rare: once per
        // node deleted by its kamikaze, and once when it comes back).
        if records_wait_for(&plan, &current, &written)
            && let Some(answers) = self.writes.answered().await
        {
            let not_done = self.written(answers, &mut result).await;
            for node in &written {
                held.remove(*node);
            }
            held.extend(not_done);
        }
        let troubles = self.troubles(&stale);
        let unfinished: HashSet<String> = held.into_keys().collect();
        match self
            .status
            .write(&plan, &current, &troubles, &unfinished, now)
            .await
        {
            Ok(written) => {
                self.status_failures = 0;
                // A conflict resolves once the cache shows the policy's newer version: soon, unless the policies'
                // watch is failing (then its recovery wakes the loop).
                let policies_failing =
                    failing.contains_key(ExecutorUpgradePolicy::kind(&()).as_ref());
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
                // Not every second for ever (an oversized status would fail each time): the next pass that any
                // change brings tries again, and without one the loop backs off.
                self.status_failures += 1;
                let delay = backoff::delay(self.status_failures, backoff::random_fraction());
                tracing::warn!(%error, attempt = self.status_failures, retry_in = ?delay, "could not write policy status");
                result.retry_at(Instant::now() + delay);
            }
        }
        self.metrics
            .stage_took(Stage::Status, reporting.elapsed().as_secs_f64());
        self.metrics
            .observe_failures(self.backoff.len(), failing.len(), !stale.is_empty());
        self.metrics
            .observe_silences(&self.stores.health.silences());
        self.reports.flush(false).await;
        self.metrics.reconcile_took(started.elapsed().as_secs_f64());
        result
    }

    /// The node a cached pod is bound to.
    fn node_of(&self, pod: &PodRef) -> Option<String> {
        node_of(&self.stores, pod)
    }

    /// Launches the eviction or deletion `action` as a call of its own, in flight from now on (see the module's
    /// comment). False when it is not launched: no call is free for it (a later pass launches it; see
    /// [`call_free`]), or a call on its pod is still running (a plan never repeats an action in flight; this is the
    /// loop's own guard).
    fn launch(&mut self, action: &Action, continuation: bool, result: &mut PassResult) -> bool {
        let Some(pod) = action.kind.pod() else {
            return false;
        };
        if !call_free(
            self.in_flight.calls(),
            self.call_limit.current(),
            continuation,
        ) {
            result.deferred = true;
            return false;
        }
        let (owner, costs_ready) = match &action.kind {
            ActionKind::Evict { eviction, .. } => (
                Some(eviction.owner.uid.to_string()),
                eviction.ready_after < eviction.ready_before,
            ),
            _ => (None, false),
        };
        if !self.in_flight.launch(pod.uid(), owner.clone(), Utc::now()) {
            tracing::warn!(%pod, "a call on this pod is still running: not repeated");
            return false;
        }
        if let Some(owner) = &owner
            && let Some(reacted) = self.reaction.evicting(owner, Instant::now(), costs_ready)
        {
            self.metrics.reaction_took(reacted.took.as_secs_f64());
            tracing::debug!(
                workload = owner,
                took_ms = reacted.took.as_millis(),
                queued_ms = reacted.queued.map(|q| q.as_millis()),
                calls = self.in_flight.calls(),
                "eviction sent after a pod of its waiting workload became Ready"
            );
        }
        let action = action.clone();
        let pod_node = self.node_of(pod);
        let (executor, events, metrics, stores) = (
            self.executor.clone(),
            self.events.clone(),
            self.metrics.clone(),
            self.stores.clone(),
        );
        self.calls.spawn(async move {
            let started = Instant::now();
            let crew = (&executor, &*events, &*metrics, &stores);
            // A panic must still answer: the pod's entry would otherwise hold its budget for ever.
            let outcome = std::panic::AssertUnwindSafe(carry_out(crew, &action, None))
                .catch_unwind()
                .await
                .unwrap_or_else(|_| Err(Error::Other("the call panicked".into())));
            Answer {
                action,
                outcome,
                pod_node,
                took: started.elapsed(),
            }
        });
        true
    }

    /// Takes in a launched call's answer (see [`Controller::follow_up`]). Whether to plan again now: the answer
    /// freed a budget (a refusal, a failure, a pod already gone), or a call for the actions a pass could not
    /// launch.
    async fn answered(&mut self, answer: Result<Answer, JoinError>, last: &mut PassResult) -> bool {
        let Answer {
            action,
            outcome,
            pod_node,
            took,
        } = match answer {
            Ok(answer) => answer,
            // Only when the runtime shuts down: the calls are never aborted, and a panic answers as a failure.
            Err(error) => {
                tracing::error!(%error, "a call ended without an answer");
                return true;
            }
        };
        self.answered_in(call_limit::Answer::of(&outcome, took));
        let done = matches!(outcome, Ok(Outcome::Done { .. }));
        self.follow_up(&action, None, pod_node, outcome, last).await;
        !done || last.deferred
    }

    /// Takes in what one call's answer says of the apiserver's load.
    fn answered_in(&mut self, load: call_limit::Answer) {
        self.call_limit.answered(load, Instant::now());
        self.metrics.set_call_limit(self.call_limit.current());
    }

    /// Takes in the answers of a pass's writes (see [`writes`]): the next pass plans once the cache shows them.
    /// The nodes whose write did not happen, and why their other actions wait.
    async fn written(
        &mut self,
        answers: Result<Vec<WriteAnswer>, JoinError>,
        last: &mut PassResult,
    ) -> HashMap<String, Hold> {
        let mut not_done = HashMap::new();
        match answers {
            Ok(answers) => {
                for answer in answers {
                    let WriteAnswer {
                        action,
                        node,
                        pod_node,
                        outcome,
                        took,
                    } = answer;
                    // A kamikaze's time is also the executor's, which answers its POST: not the apiserver's load.
                    if !matches!(action.kind, ActionKind::Kamikaze { .. }) {
                        self.answered_in(call_limit::Answer::of(&outcome, took));
                    }
                    let hold = self.follow_up(&action, node, pod_node, outcome, last).await;
                    if let (Some(hold), Some(name)) = (hold, action.kind.node()) {
                        not_done.insert(name.to_owned(), hold);
                    }
                }
            }
            // Only when a write panicked (or the runtime shuts down): the next pass plans them again.
            Err(error) => tracing::error!(%error, "a pass's writes ended without an answer"),
        }
        not_done
    }

    /// Records what an action's outcome means for the next passes. For a node action that did not happen: why its
    /// node's other actions wait.
    async fn follow_up(
        &mut self,
        action: &Action,
        node: Option<Arc<Node>>,
        pod_node: Option<String>,
        outcome: Result<Outcome, Error>,
        result: &mut PassResult,
    ) -> Option<Hold> {
        if let Some(pod) = action.kind.pod() {
            self.in_flight.answered(pod.uid(), &outcome, Utc::now());
        }
        match outcome {
            Ok(Outcome::Done {
                node_version,
                policy_version,
                deployment_version,
            }) => {
                self.backoff.succeeded(&Subject::of(&action.kind));
                self.reports.record(action, pod_node.as_deref(), Utc::now());
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
                if let ActionKind::Surge {
                    pod, deployment, ..
                } = &action.kind
                {
                    let (namespace, name) =
                        (pod.namespace().to_string(), deployment.name.to_string());
                    let before = self
                        .stores
                        .deployments
                        .get(&ObjectRef::new(&name).within(&namespace))
                        .and_then(|d| d.resource_version())
                        .unwrap_or_default();
                    result
                        .written_deployments
                        .insert((namespace, name), (before, deployment_version));
                }
                None
            }
            Ok(Outcome::Stale(why)) => {
                // The object changed: not a failure, and the next plan decides again from the fresh object.
                tracing::debug!(%why, "action overtaken by a change; planning again");
                self.backoff.succeeded(&Subject::of(&action.kind));
                result.retry_soon = true;
                Some(Hold::Soon)
            }
            Ok(Outcome::Throttled(why)) => {
                // The apiserver is overloaded: the call limit came down; not a failure of the pod's.
                tracing::debug!(%why, "call throttled by the apiserver; trying again soon");
                self.metrics.throttled();
                result.retry_soon = true;
                Some(Hold::Soon)
            }
            Ok(Outcome::DisruptionBudget(message)) => {
                if let ActionKind::Evict { eviction, .. } = &action.kind {
                    self.reaction.refused(&eviction.owner.uid);
                }
                self.metrics.failed(Reason::BlockedByPDB);
                let text = format!("eviction refused by a PodDisruptionBudget: {message}");
                let at = self
                    .failed(action, Reason::BlockedByPDB, text, Some(429))
                    .await;
                result.retry_at(at);
                Some(Hold::Later(Some(at)))
            }
            Err(error) => {
                self.metrics.failed(action.reason);
                let code = error.status_code();
                let answer = backoff::answer(&error);
                let at = self
                    .failed(action, Reason::ActionFailed, answer, code)
                    .await;
                result.retry_at(at);
                Some(Hold::Later(Some(at)))
            }
        }
    }
}

/// The node a cached pod is bound to.
fn node_of(stores: &Stores, pod: &PodRef) -> Option<String> {
    stores
        .pods
        .view(pod.namespace(), pod.name())
        .and_then(|view| view.node_name.as_deref().map(str::to_owned))
}

/// What one action needs: the executor, and where to report it (Events, metrics; the stores for the UIDs Events
/// name). Borrowed from the controller for node writes, owned by the task of a launched call.
type Crew<'a> = (&'a Executor, &'a EventSink, &'a Metrics, &'a Stores);

/// Executes `action` (about the cached `node`, if a node action) and, when done, reports it (log, metrics, Event).
async fn carry_out(
    (executor, events, metrics, stores): Crew<'_>,
    action: &Action,
    node: Option<&Node>,
) -> Result<Outcome, Error> {
    let policy = stores.policies.get(&ObjectRef::new(&action.policy));
    let deployment = match &action.kind {
        ActionKind::Surge {
            pod, deployment, ..
        } => stores
            .deployments
            .get(&ObjectRef::new(&deployment.name).within(pod.namespace())),
        _ => None,
    };
    let cached = Cached {
        node,
        policy: policy.as_deref(),
        deployment: deployment.as_deref(),
    };
    let outcome = executor.execute(action, cached).await;
    if let Ok(Outcome::Done { .. }) = outcome {
        tracing::info!(
            node = action.kind.node(),
            reason = action.reason.as_str(),
            "{}",
            action.message
        );
        metrics.executed(&action.kind, action.reason);
        events.action(action, stores).await;
    }
    outcome
}

/// Whether the status write of a pass decides on a deleted-node record of a node `written` by the pass's job: a
/// record the plan adds or drops (compared with what the cache holds).
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

/// The workloads with a pod that waits on the health rule or a budget after a pass (see `crate::memory::reaction`).
fn waiting_workloads(plan: &k8sm_planner::Plan) -> HashSet<String> {
    plan.nodes
        .iter()
        .flat_map(|n| &n.pods)
        .filter(|p| {
            p.decision == Decision::Wait
                && matches!(
                    p.reason,
                    Some(Reason::WaitingForOwner | Reason::BlockedByPDB)
                )
        })
        .filter_map(|p| p.owner.as_ref().map(|o| o.uid.to_string()))
        .collect()
}

/// The order in which a batch's actions are tried: evictions of the `continuing` workloads first (a pod of the
/// workload became Ready while it waited for one, see `crate::memory::reaction`), then the plan's order. Evictions are the
/// only batch that may not find a call for each action (see [`CallLimit`]); those left wait for a later
/// pass. The plan counted all of a pass's evictions together, so any of them may go without the others. When calls
/// are scarce (the apiserver is the bottleneck), finishing what is started keeps each workload's upgrade short and
/// few workloads in the middle of one at a time, and a workload whose replacement is Ready does not wait behind the
/// first evictions of workloads not started yet.
fn continuations_first<'a>(batch: &'a [Action], continuing: &HashSet<String>) -> Vec<&'a Action> {
    let mut ordered: Vec<&Action> = batch.iter().collect();
    if !continuing.is_empty() {
        // Stable: the plan's order within each group.
        ordered.sort_by_key(|a| !continues(a, continuing));
    }
    ordered
}

/// Whether `action` is an eviction that continues one of the `continuing` workloads.
fn continues(action: &Action, continuing: &HashSet<String>) -> bool {
    matches!(&action.kind, ActionKind::Evict { eviction, .. } if continuing.contains(&*eviction.owner.uid))
}

/// Whether a call may start with `calls` running: `limit` for any, and [`CONTINUATION_CALLS`] more for an eviction
/// that continues a workload.
fn call_free(calls: usize, limit: usize, continues: bool) -> bool {
    calls < limit + if continues { CONTINUATION_CALLS } else { 0 }
}

/// How many of the next actions run together: the next actions of one kind, each on a distinct node for node
/// writes. Kinds keep their order: a node is admitted before its pods move, unmanaged pods are deleted after the
/// evictions of the same pass (docs/design.md §5.3: they go once no owned pod waits), kamikaze comes last.
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

/// The client of every call but the watches: the planner's actions, status and Event writes, the start-up checks.
/// Each request is bounded (reads and writes of the connection; the actions have their own overall timeout too), so a
/// hung apiserver or proxy shows as a failed call instead of a pass that never ends.
///
/// It has none of kube's hidden retries. By default kube retries 429 and 503 answers itself, honouring Retry-After; an
/// eviction that a PodDisruptionBudget refuses answers 429 with Retry-After 10 s, so the pass would sit in that retry
/// until the action's timeout (15 s), holding up every other node, and the refusal would never be reported as
/// BlockedByPDB. The loop retries a failed or refused action itself, with a per-object backoff
/// ([`crate::memory::backoff`]), on fresh data.
///
/// `fence`: the writes' client, whose writes are fenced by leadership ([`crate::leadership::fence`]).
fn calls_client(mut config: kube::Config, fence: Option<FenceLayer>) -> anyhow::Result<Client> {
    config.default_retry = false;
    config.read_timeout = Some(CALL_IO_TIMEOUT);
    config.write_timeout = Some(CALL_IO_TIMEOUT);
    let builder = kube::client::ClientBuilder::try_from(config)?;
    Ok(match fence {
        Some(fence) => builder.with_layer(&fence).build(),
        None => builder.build(),
    })
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
        PodRef::new("ns", name, name)
    }

    fn evict(pod: &str) -> Action {
        evict_of(pod, "web")
    }

    fn evict_of(pod: &str, owner: &str) -> Action {
        action(ActionKind::Evict {
            pod: pod_ref(pod),
            eviction: Eviction {
                owner: OwnerRef {
                    kind: OwnerKind::ReplicaSet,
                    name: owner.into(),
                    uid: owner.into(),
                },
                ready_before: 10,
                ready_after: 9,
                warming_after: 0,
                desired: 10,
                needed: 9,
                threshold: 90,
                use_eviction_api: true,
                size_inferred: false,
            },
        })
    }

    fn delete(pod: &str) -> Action {
        action(ActionKind::DeletePod {
            pod: pod_ref(pod),
            eviction_api: false,
        })
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

    #[test]
    fn evictions_that_continue_a_workload_go_first_in_plan_order() {
        let batch = [
            evict_of("a1", "a"),
            evict_of("b1", "b"),
            evict_of("c1", "c"),
            evict_of("b2", "b"),
            evict_of("d1", "d"),
        ];
        let names = |continuing: &[&str]| -> Vec<String> {
            let continuing = continuing.iter().map(|s| (*s).to_owned()).collect();
            continuations_first(&batch, &continuing)
                .into_iter()
                .map(|a| a.kind.pod().expect("evictions").name().to_owned())
                .collect()
        };
        assert_eq!(names(&[]), ["a1", "b1", "c1", "b2", "d1"]);
        assert_eq!(names(&["b", "d"]), ["b1", "b2", "d1", "a1", "c1"]);
        assert_eq!(names(&["x"]), ["a1", "b1", "c1", "b2", "d1"]);
    }

    #[test]
    fn evictions_that_continue_a_workload_have_calls_of_their_own() {
        let continuing: HashSet<String> = ["b".to_owned()].into();
        assert!(continues(&evict_of("b1", "b"), &continuing));
        assert!(!continues(&evict_of("a1", "a"), &continuing));
        assert!(!continues(&mark("b"), &continuing));
        let limit = 16;
        for calls in 0..limit {
            assert!(
                call_free(calls, limit, false) && call_free(calls, limit, true),
                "{calls}"
            );
        }
        // Every ordinary call busy: continuations still start, up to their own calls.
        for calls in limit..limit + CONTINUATION_CALLS {
            assert!(
                !call_free(calls, limit, false) && call_free(calls, limit, true),
                "{calls}"
            );
        }
        let all = limit + CONTINUATION_CALLS;
        assert!(!call_free(all, limit, false) && !call_free(all, limit, true));
    }
}
