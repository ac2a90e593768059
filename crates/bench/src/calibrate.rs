//! The apiserver's own eviction throughput on this machine, measured alone: every owned pod of the
//! fleet evicted through the Eviction API at the controller's call concurrency, with no
//! PodDisruptionBudget and no controller logic. No tool can evict faster, so `evictions /
//! throughput` is a lower bound on any upgrade (see [`crate::stats::concurrency_bound`]). The same
//! pass times how long an evicted pod takes to go away, which shows that the fleet's termination
//! grace period is honoured.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{EvictParams, ListParams};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use serde::{Deserialize, Serialize};

use k8sm_testcluster::node_name;

use crate::env::BenchCluster;
use crate::runs::fleet_ready_timeout;
use crate::stats::percentile;
use crate::workload::{DAEMON_SET, Workload};

/// The limit on concurrent API calls the controller starts with (it adapts from there): the
/// calibration evicts at the same concurrency.
pub const CONTROLLER_CALL_CONCURRENCY: usize = k8sm_controller::INITIAL_CALL_CONCURRENCY;

const NAMESPACE: &str = "bench-calibrate";

/// What the calibration measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    /// Pods evicted at `concurrency` in flight (every pod of every owner once, but the one evicted
    /// alone first).
    pub evictions: usize,
    /// Eviction calls in flight at once.
    pub concurrency: usize,
    /// From the first call sent to the last answer received, client side.
    pub wall_seconds: f64,
    /// `evictions / wall_seconds`: the rate the bound uses.
    pub per_second: f64,
    /// The apiserver's mean time per eviction (`apiserver_request_duration_seconds`, subresource
    /// eviction).
    pub server_mean_seconds: Option<f64>,
    /// Eviction calls the apiserver did not accept (answered 429 or an error); the bound counts
    /// accepted ones.
    pub refused: usize,
    /// Accepted eviction → the pod's deletion seen by a watch, for one pod evicted alone first:
    /// the grace period KWOK honours, on an idle cluster.
    #[serde(default)]
    pub removal_alone_seconds: f64,
    /// The same for every pod (the bulk's pods queue at KWOK): median and largest.
    pub removal_p50_seconds: Option<f64>,
    pub removal_max_seconds: Option<f64>,
    /// How far each owned pod's readiness (Ready − PodScheduled transition, whole seconds in the
    /// API) was from its owner's drawn delay: median and largest, seconds. Shows that KWOK
    /// applies the per-owner delays.
    #[serde(default)]
    pub ready_delay_error_p50_seconds: Option<f64>,
    #[serde(default)]
    pub ready_delay_error_max_seconds: Option<f64>,
    /// Evicted pods found gone by a list the watch made again rather than by their deletion event
    /// (their removal time is then the list's, an upper bound).
    #[serde(default)]
    pub removals_seen_by_relist: usize,
}

impl Throughput {
    /// One line for the report.
    pub fn describe(&self) -> String {
        let ms = |s: Option<f64>| s.map_or("–".into(), |s| format!("{:.0} ms", s * 1000.0));
        format!(
            "{} evictions at {} in flight took {:.1} s: {:.1} evictions/s (apiserver mean {} per eviction, {} refused); \
             a pod evicted alone was gone after {}, in the bulk after {} (median), {} at most{}; pods became Ready within {} \
             (median), {} at most, of their owner's drawn delay",
            self.evictions,
            self.concurrency,
            self.wall_seconds,
            self.per_second,
            ms(self.server_mean_seconds),
            self.refused,
            ms(Some(self.removal_alone_seconds)),
            ms(self.removal_p50_seconds),
            ms(self.removal_max_seconds),
            match self.removals_seen_by_relist {
                0 => String::new(),
                n => format!(" ({n} seen gone by a list made again, at the list's time)"),
            },
            ms(self.ready_delay_error_p50_seconds),
            ms(self.ready_delay_error_max_seconds),
        )
    }
}

/// Creates `workload` (no budgets) in a namespace of its own on `cluster`, which should be freshly
/// started (no other namespace's pods competing), waits until all its pods run, evicts every owned
/// pod once at `concurrency` calls in flight, waits until they are gone, and deletes the namespace.
/// Call it once per invocation, before the runs.
pub async fn eviction_throughput(
    cluster: &mut BenchCluster,
    workload: &Workload,
    concurrency: usize,
) -> anyhow::Result<Throughput> {
    cluster.delete_namespace(NAMESPACE).await?;
    cluster.create_namespace(NAMESPACE).await?;
    let client = &cluster.client;
    workload
        .create(client, NAMESPACE, node_name, None)
        .await
        .context("creating the calibration's workload")?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let (owned, ready_errors) = wait_owned_pods_ready(&pods, workload).await?;

    // Deletions are watched by kube's watcher, which resumes a watch the apiserver ends (every few
    // minutes) and lists again when its version is too old: evicting a 1,000-node fleet
    // outlasts any single watch. Its first list is complete before the first eviction, so that
    // no deletion is missed.
    let targets: BTreeSet<String> = owned.iter().map(|(_, uid)| uid.clone()).collect();
    let started = Instant::now();
    let gone = Arc::new(Mutex::new(Removals::default()));
    let (listed, first_list) = tokio::sync::oneshot::channel();
    let deletions = tokio::spawn(record_deletions(
        pods.clone(),
        targets,
        started,
        gone.clone(),
        listed,
    ));
    tokio::time::timeout(Duration::from_secs(300), first_list)
        .await
        .context("the calibration's watch did not list the pods within 5 minutes")?
        .context("the calibration's watch ended before its first list")?;

    // One pod alone first: how long an evicted pod takes to go away on an idle apiserver and KWOK
    // (its grace period, if KWOK honours it, plus little else).
    let (first, bulk) = owned.split_first().context("the fleet has no owned pod")?;
    pods.evict(&first.0, &EvictParams::default())
        .await
        .context("evicting the first pod alone")?;
    let answered_alone = started.elapsed().as_secs_f64();
    let alone_deadline = Instant::now() + Duration::from_secs(60);
    let removal_alone_seconds = loop {
        if let Some(t) = lock(&gone).at.get(&first.1) {
            break t - answered_alone;
        }
        anyhow::ensure!(
            Instant::now() < alone_deadline,
            "the pod evicted alone was not gone after a minute"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };

    let before = cluster.apiserver_requests().await?;
    let bulk_started = started.elapsed().as_secs_f64();
    let mut answers: Vec<(&str, bool, f64)> = futures::stream::iter(bulk)
        .map(|(name, uid)| {
            let pods = &pods;
            async move {
                let accepted = pods.evict(name, &EvictParams::default()).await.is_ok();
                (uid.as_str(), accepted, started.elapsed().as_secs_f64())
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    let wall_seconds = answers.iter().map(|a| a.2).fold(0.0, f64::max) - bulk_started;
    let after = cluster.apiserver_requests().await?;
    let accepted = answers.iter().filter(|a| a.1).count();
    answers.push((first.1.as_str(), true, answered_alone));

    let accepted_uids: Vec<&str> = answers.iter().filter(|a| a.1).map(|a| a.0).collect();
    // KWOK finalises deletions behind a loaded apiserver: the wait grows with the evictions.
    let wait = removal_timeout(accepted_uids.len());
    let deadline = Instant::now() + wait;
    let gone = loop {
        let gone = lock(&gone).clone();
        if accepted_uids.iter().all(|uid| gone.at.contains_key(*uid)) {
            break gone;
        }
        if deletions.is_finished() || Instant::now() > deadline {
            deletions.abort();
            let watched = deletions.await;
            anyhow::bail!(
                "{} of {} evicted pods were seen gone within {} ({watched:?})",
                gone.at.len(),
                accepted_uids.len(),
                humantime::format_duration(wait)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    deletions.abort();
    let removals: Vec<f64> = answers
        .iter()
        .filter_map(|(uid, accepted, answered)| {
            Some(gone.at.get(*uid)? - answered).filter(|_| *accepted)
        })
        .collect();
    cluster.delete_namespace(NAMESPACE).await?;
    Ok(Throughput {
        evictions: accepted,
        concurrency,
        wall_seconds,
        per_second: if wall_seconds > 0.0 {
            accepted as f64 / wall_seconds
        } else {
            0.0
        },
        server_mean_seconds: after.eviction_mean_since(&before),
        refused: bulk.len() - accepted,
        removal_alone_seconds,
        removal_p50_seconds: percentile(&removals, 50.0),
        removal_max_seconds: removals.iter().copied().reduce(f64::max),
        ready_delay_error_p50_seconds: percentile(&ready_errors, 50.0),
        ready_delay_error_max_seconds: ready_errors.iter().copied().reduce(f64::max),
        removals_seen_by_relist: gone.by_relist,
    })
}

/// How long evicted pods may take to be seen gone: 5 minutes per 5,000 evictions, 5 minutes at
/// least.
fn removal_timeout(evictions: usize) -> Duration {
    let per_5000 = u32::try_from(evictions.div_ceil(5_000).max(1)).unwrap_or(u32::MAX);
    Duration::from_secs(300).saturating_mul(per_5000)
}

/// Waits (at most 15 minutes: an ordered StatefulSet starts one pod at a time) until every owner's
/// pods run and are Ready; returns their names and UIDs, and how far each pod's readiness was from
/// its owner's drawn delay (for owners with one).
async fn wait_owned_pods_ready(
    pods: &Api<Pod>,
    workload: &Workload,
) -> anyhow::Result<(Vec<(String, String)>, Vec<f64>)> {
    let owners: BTreeMap<&str, u64> = workload
        .owners
        .iter()
        .map(|o| (o.name.as_str(), o.ready_delay_ms))
        .collect();
    let expected: usize = workload.owners.iter().map(|o| o.replicas as usize).sum();
    let deadline = Instant::now() + fleet_ready_timeout(expected);
    loop {
        let list = pods.list(&ListParams::default()).await?;
        let ready: Vec<&Pod> = list
            .items
            .iter()
            .filter(|p| {
                let app = p.labels().get("app").map(String::as_str);
                app.is_some_and(|a| owners.contains_key(a) && a != DAEMON_SET)
                    && p.metadata.deletion_timestamp.is_none()
                    && k8sm_e2e::scenario::is_ready(p)
            })
            .collect();
        if ready.len() >= expected {
            let errors = ready
                .iter()
                .filter_map(|p| {
                    let drawn = *owners.get(p.labels().get("app")?.as_str())?;
                    let seen = readiness_seconds(p)?;
                    (drawn > 0).then(|| (seen - drawn as f64 / 1000.0).abs())
                })
                .collect();
            let named = ready
                .iter()
                .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
                .collect();
            return Ok((named, errors));
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{} of {expected} owned pods Ready after 15 minutes",
            ready.len()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Seconds from the pod's PodScheduled transition to its Ready one (both whole seconds in the API).
fn readiness_seconds(pod: &Pod) -> Option<f64> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let at = |kind: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == kind && c.status == "True")?
            .last_transition_time
            .as_ref()
            .map(|t| t.0.as_millisecond())
    };
    Some((at("Ready")? - at("PodScheduled")?) as f64 / 1000.0)
}

/// When each evicted pod was seen gone, in seconds since the calibration started, by UID.
#[derive(Clone, Debug, Default)]
struct Removals {
    at: BTreeMap<String, f64>,
    /// Of those, pods found gone by a list the watcher made again (its watch's version too old),
    /// not by their deletion event: their time is the list's, a little later than the
    /// deletion.
    by_relist: usize,
}

type Deletions = Arc<Mutex<Removals>>;

fn lock(deletions: &Deletions) -> std::sync::MutexGuard<'_, Removals> {
    deletions
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Records in `gone` the seconds since `started` at which each pod of `targets` (by UID) is seen
/// deleted, signalling `listed` once the watcher's first list is complete; returns when all are
/// gone. A list made again replaces the pod set (as the recorder and the project's SLA watcher do):
/// a target it lacks is gone.
async fn record_deletions(
    pods: Api<Pod>,
    mut targets: BTreeSet<String>,
    started: Instant,
    gone: Deletions,
    listed: tokio::sync::oneshot::Sender<()>,
) -> anyhow::Result<()> {
    let mut events = std::pin::pin!(watcher(pods, watcher::Config::default()));
    let mut listed = Some(listed);
    let mut listing: Option<BTreeSet<String>> = None;
    while !targets.is_empty() {
        let event = match events.try_next().await {
            Ok(Some(event)) => event,
            Ok(None) => anyhow::bail!(
                "the calibration's watch ended with {} pods not yet gone",
                targets.len()
            ),
            Err(e) => {
                // The watcher resumes or lists again on its own; a short pause keeps a failing
                // apiserver from spinning us.
                tracing::debug!("the calibration's watch: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        match event {
            watcher::Event::Delete(pod) => {
                let uid = pod.uid().unwrap_or_default();
                if targets.remove(&uid) {
                    lock(&gone).at.insert(uid, started.elapsed().as_secs_f64());
                }
            }
            watcher::Event::Init => listing = Some(BTreeSet::new()),
            watcher::Event::InitApply(pod) => {
                if let Some(listing) = &mut listing {
                    listing.insert(pod.uid().unwrap_or_default());
                }
            }
            watcher::Event::InitDone => {
                let listing = listing.take().unwrap_or_default();
                let first = listed.take();
                let t = started.elapsed().as_secs_f64();
                let missing: Vec<String> = targets.difference(&listing).cloned().collect();
                let mut gone = lock(&gone);
                for uid in missing {
                    targets.remove(&uid);
                    gone.at.insert(uid, t);
                    // The first list precedes every eviction: a target missing from it was never
                    // there to evict.
                    if first.is_none() {
                        gone.by_relist += 1;
                    }
                }
                if let Some(first) = first {
                    let _ = first.send(());
                }
            }
            watcher::Event::Apply(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_evictions_may_take_longer_to_be_seen_gone() {
        let minutes = |evictions| removal_timeout(evictions).as_secs() / 60;
        assert_eq!(minutes(0), 5);
        assert_eq!(minutes(600), 5);
        assert_eq!(minutes(5_000), 5);
        assert_eq!(minutes(29_950), 30);
    }
}
