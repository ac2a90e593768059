//! Writes the policies' status (built by `crate::report::status`) when it changed, at the pace of
//! [`StatusInterval`] (docs/design.md §8). Urgent writes are awaited by the pass that makes them;
//! the others are launched in the background, since no decision reads what they refresh and a pass
//! that awaited them would hold up every eviction that became possible meanwhile
//! (docs/decisions/0005-loop-under-load.md).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use kube::api::Patch;
use kube::{Api, Client};
use serde_json::json;
use tokio::task::JoinHandle;

use k8sm_api::ExecutorUpgradePolicy;
use k8sm_planner::Plan;

use crate::Error;
use crate::leadership::leader::Leadership;
use crate::report::metrics::Metrics;
use crate::report::status::{
    Troubles, build, executed_records, report_troubles, with_explicit_nulls,
};
use crate::report::status_interval::{self, StatusInterval, Verdict};

/// Writes each policy's status when it differs from what the cluster holds.
pub struct StatusWriter {
    api: Api<ExecutorUpgradePolicy>,
    /// How often each policy's status is written.
    writes: StatusInterval,
    /// The background writes not collected yet, by policy.
    background: HashMap<String, Background>,
    /// Checked right before every write.
    leadership: Leadership,
    /// The per-policy gauges read from the status built, written or not.
    metrics: Arc<Metrics>,
}

/// A write launched in the background.
struct Background {
    started: Instant,
    /// The resourceVersion it is conditional on.
    before: Option<String>,
    /// The patched policy, and how long the call took.
    call: JoinHandle<(Result<ExecutorUpgradePolicy, kube::Error>, Duration)>,
}

/// What a round of status writes did (with the background writes that answered since the round
/// before).
#[derive(Debug, Default)]
pub struct Written {
    /// Policy name, resourceVersion before and after each write: the cache must show the new one
    /// before the next plan, or that plan would miss what was just written.
    pub versions: Vec<(String, Option<String>, Option<String>)>,
    /// Writes refused because the policy changed since the cache saw it.
    pub conflicts: usize,
    /// A changed status waits until then (see [`StatusInterval`]): plan again at that moment.
    pub postponed: Option<Instant>,
}

impl Written {
    fn postpone(&mut self, at: Instant) {
        self.postponed = Some(self.postponed.map_or(at, |p| p.min(at)));
    }
}

impl StatusWriter {
    pub fn new(client: Client, leadership: Leadership, metrics: Arc<Metrics>) -> Self {
        Self {
            api: Api::all(client),
            writes: StatusInterval::default(),
            background: HashMap::new(),
            leadership,
            metrics,
        }
    }

    /// Writes the status of every policy whose status changed, conditional on the cached
    /// resourceVersion (a status built from a stale cache must not overwrite a newer one, such
    /// as a deleted-node record), at the pace of [`StatusInterval`]: a change that waits is
    /// reported in [`Written::postponed`]. `troubles`: what the plan cannot
    /// know, see [`report_troubles`]. `unfinished`: nodes whose action of this pass was not carried
    /// out (see [`executed_records`]).
    pub async fn write(
        &mut self,
        plan: &Plan,
        current: &HashMap<String, Arc<ExecutorUpgradePolicy>>,
        troubles: &Troubles,
        unfinished: &HashSet<String>,
        now: DateTime<Utc>,
    ) -> Result<Written, Error> {
        let mut written = Written::default();
        let answered: Vec<String> = self
            .background
            .iter()
            .filter(|(_, b)| b.call.is_finished())
            .map(|(name, _)| name.clone())
            .collect();
        for name in answered {
            self.collect(&name, &mut written).await?;
        }
        self.writes.retain(|name| current.contains_key(name));
        // A policy being deleted hands its nodes back and goes; nothing to report on it.
        for policy in plan.policies.iter().filter(|p| !p.deleting) {
            let Some(cached) = current.get(&policy.policy) else {
                continue;
            };
            let previous = cached.status.as_ref();
            let cached_version = cached.metadata.resource_version.clone();
            let mut status = build(plan, policy, previous, now);
            report_troubles(&mut status, previous, plan, policy, troubles, now);
            status.deleted_nodes = executed_records(
                &status.deleted_nodes,
                previous.map_or(&[][..], |p| &p.deleted_nodes),
                unfinished,
            );
            self.metrics.observe_status(cached, &status, now);
            if previous == Some(&status) {
                continue;
            }
            let started = Instant::now();
            let verdict = self
                .writes
                .judge(&policy.policy, previous, &status, started);
            let mut version = cached_version.clone();
            match verdict {
                Verdict::At(at) => {
                    written.postpone(at);
                    continue;
                }
                Verdict::Now if self.background.contains_key(&policy.policy) => {
                    // The write before is still on its way: this one follows it, not alongside.
                    written.postpone(started + status_interval::MIN_INTERVAL);
                    continue;
                }
                Verdict::Urgent if self.background.contains_key(&policy.policy) => {
                    // Waits for the background write, and is conditional on what that write made of
                    // the policy when the cache has not shown it yet (the
                    // cache's version would only be refused).
                    let before = self.background[&policy.policy].before.clone();
                    if let Some(after) = self.collect(&policy.policy, &mut written).await?
                        && before == cached_version
                    {
                        version = Some(after);
                    }
                }
                Verdict::Urgent | Verdict::Now => {}
            }
            let patch = json!({
                "metadata": { "resourceVersion": version },
                "status": with_explicit_nulls(&status)?,
            });
            self.leadership.ensure()?;
            let call = {
                let api = self.api.clone();
                let name = policy.policy.clone();
                async move {
                    let answer = api
                        .patch_status(
                            &name,
                            &crate::leadership::write_params::patch(),
                            &Patch::Merge(&patch),
                        )
                        .await;
                    (answer, started.elapsed())
                }
            };
            if verdict == Verdict::Now {
                // Paced from its start: the passes until it answers see it as the last write.
                self.writes.wrote(&policy.policy, started, Duration::ZERO);
                self.background.insert(
                    policy.policy.clone(),
                    Background {
                        started,
                        before: cached_version,
                        call: tokio::spawn(call),
                    },
                );
                continue;
            }
            let (answer, took) = call.await;
            self.writes.wrote(&policy.policy, started, took);
            // Conditional on the cache's version or on the background write's: the cache must move
            // past the former either way.
            record(&policy.policy, cached_version, answer, &mut written)?;
        }
        Ok(written)
    }

    /// Waits for the background writes still on their way (when the controller stops: a standby
    /// takes over only afterwards).
    pub async fn flush(&mut self) {
        let names: Vec<String> = self.background.keys().cloned().collect();
        for name in names {
            let mut written = Written::default();
            if let Err(error) = self.collect(&name, &mut written).await {
                tracing::warn!(%error, "could not write policy status");
            }
        }
    }

    /// Waits for the background write of `policy` (if any) and records its answer; the
    /// resourceVersion it wrote.
    async fn collect(
        &mut self,
        policy: &str,
        written: &mut Written,
    ) -> Result<Option<String>, Error> {
        let Some(background) = self.background.remove(policy) else {
            return Ok(None);
        };
        let (answer, took) = match background.call.await {
            Ok(answered) => answered,
            // Only when the runtime shuts down or the call panicked: nothing was learned.
            Err(error) => {
                tracing::warn!(%error, policy, "a background status write ended without an answer");
                return Ok(None);
            }
        };
        self.writes.wrote(policy, background.started, took);
        record(policy, background.before, answer, written)
    }
}

/// Records a write's answer in `written`; the resourceVersion it wrote.
fn record(
    policy: &str,
    before: Option<String>,
    answer: Result<ExecutorUpgradePolicy, kube::Error>,
    written: &mut Written,
) -> Result<Option<String>, Error> {
    match answer {
        Ok(patched) => {
            let after = patched.metadata.resource_version;
            written
                .versions
                .push((policy.to_owned(), before, after.clone()));
            Ok(after)
        }
        // Deleted meanwhile: nothing to report on.
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        // Changed since the cache saw it: the next pass writes from the fresh object.
        Err(kube::Error::Api(s)) if s.code == 409 => {
            written.conflicts += 1;
            Ok(None)
        }
        Err(source) => Err(Error::Action {
            action: "writing status of",
            object: policy.to_owned(),
            source,
        }),
    }
}
