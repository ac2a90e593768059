//! The controller's loop: wait for a change (a watch event or failure, or a timer for what no event
//! announces), then observe → plan → execute → report, as the leader (docs/design.md §8). The pass
//! never branches on why it woke, and it only launches its calls and writes ([`InFlight`],
//! `writes`), so that the next passes plan around them on every watch event instead of waiting for
//! the apiserver's answers.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};
use tokio::sync::watch;
use tokio::task::{JoinError, JoinSet};

use k8sm_planner::Action;

use crate::Args;
use crate::Error;
use crate::act::call_limit::CallLimit;
use crate::act::execute::{Executor, Outcome};
use crate::act::kamikaze_client::KamikazeClient;
use crate::act::kamikaze_token::{KamikazeTokens, ServiceAccountRef};
use crate::leadership::leader::Leadership;
use crate::memory::backoff::Backoff;
use crate::memory::in_flight::InFlight;
use crate::memory::reaction::Reaction;
use crate::memory::sizes_store::SizesStore;
use crate::observe::stores::{Changes, Stores};
use crate::reconcile::busy_share::BusyShare;
use crate::reconcile::planning::Planning;
use crate::report::events::EventSink;
use crate::report::metrics::{Metrics, Stage};
use crate::report::run_records::Reports;
use crate::report::status_writer::StatusWriter;

pub(crate) mod batches;
pub(crate) mod busy_share;
mod calls;
mod carry_out;
mod failures;
mod pass;
mod pass_result;
pub(crate) mod planning;
mod writes;

use pass_result::PassResult;
use writes::{WriteAnswer, Writes};

/// After a pass, how long to wait at most for the caches to show the node writes it made.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(5);
/// A wait for the caches worth a debug line.
const SLOW_SETTLE: Duration = Duration::from_millis(100);
/// How soon to plan again when an action was overtaken by a change (a conflict), or held back to
/// the next pass.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// How late after a backoff ends the loop wakes, so that the backoff has ended when the pass checks
/// it.
const WAKE_MARGIN: Duration = Duration::from_millis(20);
/// How long a stopping controller waits for its last Events to be written: the standby waits for it
/// too, as the Lease is released only afterwards.
const EVENT_FLUSH_TIMEOUT: Duration = Duration::from_secs(1);

pub(crate) struct Controller {
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
    /// The evictions and pod deletions launched and not answered yet (their pods are in
    /// `in_flight`).
    calls: JoinSet<Answer>,
    /// How many of them may run at once.
    call_limit: CallLimit,
    reaction: Reaction,
    sizes_store: SizesStore,
    /// The term ([`Leadership::term`]) in which the stored sizes were last read: until they are
    /// read in the current one, and when storing them before an eviction that counts on them
    /// fails, such evictions wait.
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

/// A launched call's answer.
struct Answer {
    action: Action,
    outcome: Result<Outcome, Error>,
    /// The node the pod was on when the call was launched (the report counts the pod there: once
    /// it is gone, the cache no longer tells).
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

/// What start-up made for the loop: clients, caches, leadership, metrics.
pub(crate) struct Started {
    /// The client of every write but the Lease's, fenced by leadership.
    pub(crate) writes: Client,
    /// The client of the other calls (reads, the kamikaze's TokenRequest).
    pub(crate) calls: Client,
    pub(crate) identity: String,
    pub(crate) kamikaze_account: Option<ServiceAccountRef>,
    pub(crate) report_namespace: String,
    pub(crate) reaction: Reaction,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) stores: Stores,
    pub(crate) leadership: Leadership,
    pub(crate) stopping: watch::Receiver<bool>,
}

impl Controller {
    pub(crate) fn new(args: &Args, started: Started) -> Self {
        let writes = started.writes;
        Self {
            executor: Executor::new(
                writes.clone(),
                started.leadership.clone(),
                KamikazeClient::new(args.kamikaze_ca_file.clone()),
                KamikazeTokens::new(
                    started.calls,
                    started.kamikaze_account,
                    args.kamikaze_audience.clone(),
                ),
            ),
            events: Arc::new(EventSink::new(
                writes.clone(),
                started.identity,
                started.leadership.clone(),
            )),
            status: StatusWriter::new(
                writes.clone(),
                started.leadership.clone(),
                started.metrics.clone(),
            ),
            reports: Reports::new(
                writes.clone(),
                started.report_namespace.clone(),
                started.leadership.clone(),
            ),
            in_flight: InFlight::default(),
            writes: Writes::default(),
            planning: Planning::new(args.pace_by_room),
            calls: JoinSet::new(),
            call_limit: CallLimit::default(),
            reaction: started.reaction,
            sizes_store: SizesStore::new(writes, &started.report_namespace),
            sizes_read: None,
            backoff: Backoff::default(),
            status_failures: 0,
            stale_reported: BTreeSet::new(),
            max_staleness: args.max_watch_staleness,
            pacer: BusyShare::new(args.max_busy_share, args.resync),
            metrics: started.metrics,
            stores: started.stores,
            leadership: started.leadership,
            stopping: started.stopping,
        }
    }

    pub(crate) async fn run(
        &mut self,
        changes: &mut Changes,
        resync: Duration,
    ) -> anyhow::Result<()> {
        // The first pass runs at once: the caches just synced, and in a quiet cluster (e.g. after a
        // restart, when everything waits on this controller) no change may come to wake it
        // before the resync.
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
                // The writes held back meanwhile, and the pods of their nodes, wait for the next
                // pass.
                Wake::Written(answers) => {
                    self.written(answers, &mut last).await;
                }
                Wake::Answer(answer) => {
                    let mut replan = self.answered(*answer, &mut last).await;
                    while let Some(answer) = self.calls.try_join_next() {
                        replan |= self.answered(answer, &mut last).await;
                    }
                    // An accepted call changes nothing the plan counts (its pod was counted as
                    // going from its launch); the watch event that shows the
                    // pod terminating brings the next pass.
                    if !replan {
                        continue;
                    }
                }
            }
            // A wake that would plan too soon after the last pass waits, taking in what comes
            // meanwhile; the sleep above ends at once the hold does.
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
        // The calls in flight end first (each within its own timeout): a standby must not plan on a
        // cache that misses an eviction still on its way. Events are written in the
        // background: the operator should still see those of the last actions. Then the
        // Lease goes, so that a standby takes over at once instead of after the
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

    /// Takes in the changes signalled so far, and waits (bounded) until the caches show this
    /// controller's own node and policy writes: planning on a cache that misses an admission
    /// could over-fill the drain slots, and one that misses a deleted-node record would lose
    /// that node.
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
}
