//! The upgrade runs' durable records ([`k8sm_api::report`]): kept in memory, folded from every pass
//! and executed action (`k8sm_planner::report`), read back from their ConfigMaps when the
//! controller (or a new leader) first meets a run, and written back at most every [`WRITE_EVERY`],
//! at once when a run finishes or is superseded, and on shutdown. Reads and writes run in the
//! background: neither holds up a pass (a new leader's first action waits for no read; what it does
//! meanwhile is held for the run and folded in once its record is read). A write that fails is
//! retried with the next one.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

use k8sm_api::report::{REPORT_DATA_KEY, REPORT_POLICY_LABEL, REPORTS_KEPT, UpgradeReport};
use k8sm_planner::report::{self as fold, Runs};
use k8sm_planner::{Action, ClusterView, Plan};

use crate::Error;
use crate::leadership::leader::Leadership;

/// How often a run's record is written while it changes: what a controller that is killed (not
/// stopped: a stop writes everything) can lose, against a write of up to a few hundred kB for a
/// large fleet.
const WRITE_EVERY: Duration = Duration::from_secs(5);

/// The field manager of the server-side applies.
const MANAGER: &str = "k8sm-controller";

/// Actions kept for one run while its record is read back. An apiserver that refuses the read for
/// hours would otherwise grow them without bound; past this, the record undercounts (and the log
/// says so).
const HELD_PER_RUN: usize = 100_000;

/// A run: its policy and target executor ID.
type RunKey = (String, String);

/// An executed action, as [`Reports::record`] takes it.
type Executed = (Action, Option<String>, DateTime<Utc>);

/// The records' side of the apiserver, shared with the background reads and writes.
#[derive(Clone)]
struct Store {
    client: Client,
    namespace: String,
    leadership: Leadership,
}

/// One record to write in a batch.
struct Write {
    report: UpgradeReport,
    /// The policy's live run (not one a new target replaced): written again later if this write
    /// fails.
    live: bool,
    /// Whether to delete the policy's oldest records once written (the first write of a run by
    /// this process).
    prune: bool,
}

/// How a write of a batch went.
struct Written {
    key: RunKey,
    live: bool,
    result: Result<(), Error>,
}

pub struct Reports {
    store: Store,
    runs: Runs,
    /// Policies whose record changed since it was last written.
    dirty: BTreeSet<String>,
    /// Records of runs a new target replaced, to write once more.
    superseded: Vec<UpgradeReport>,
    /// Runs whose stored record was looked for.
    looked_up: BTreeSet<RunKey>,
    /// Reads of stored records under way, by task.
    reading: JoinSet<Result<Option<UpgradeReport>, Error>>,
    being_read: BTreeMap<tokio::task::Id, RunKey>,
    /// Actions executed for runs whose record is being read back: folded into it once it is, so
    /// that a new leader acts at once, without a read of the apiserver between it and its
    /// first action, and loses none of them.
    held: BTreeMap<RunKey, Vec<Executed>>,
    /// Each policy's run as the last pass saw it.
    current: BTreeMap<String, String>,
    /// Policies whose run finished since the last write: written at once.
    finished: BTreeSet<String>,
    /// Runs written by this process: the older runs of their policy were pruned then.
    written: BTreeSet<RunKey>,
    /// The batch being written: one at a time, in the background, so that encoding and writing a
    /// large fleet's record never holds up a pass.
    writing: Option<JoinHandle<Vec<Written>>>,
    last_write: Option<Instant>,
    /// The term this replica led in at the last [`Reports::look_up`]
    /// ([`crate::leadership::leader::Leadership::term`]).
    term: Option<u64>,
}

impl Reports {
    pub fn new(client: Client, namespace: String, leadership: Leadership) -> Self {
        Self {
            store: Store {
                client,
                namespace,
                leadership,
            },
            runs: Runs::new(),
            dirty: BTreeSet::new(),
            superseded: Vec::new(),
            looked_up: BTreeSet::new(),
            reading: JoinSet::new(),
            being_read: BTreeMap::new(),
            held: BTreeMap::new(),
            current: BTreeMap::new(),
            finished: BTreeSet::new(),
            written: BTreeSet::new(),
            writing: None,
            last_write: None,
            term: None,
        }
    }

    /// Takes in the stored records read back since the last pass, and starts reading that of each
    /// run the view shows and this process has not met yet (after a restart or a change of
    /// leader), so that the run goes on where it was. Never waits: until its record is read, a
    /// run is not folded (not recorded from scratch over the stored record), and its executed
    /// actions are held for it.
    pub fn look_up(&mut self, view: &ClusterView) {
        // A replica that begins a term reads every record again: while it stood by, another leader
        // may have gone on recording, and its own copies are behind.
        let term = self.store.leadership.term();
        if term.is_some() && term != self.term {
            self.runs.clear();
            self.looked_up.clear();
            self.dirty.clear();
            self.held.clear();
            self.reading.abort_all();
            self.being_read.clear();
        }
        self.term = term;
        while let Some(joined) = self.reading.try_join_next_with_id() {
            let (id, read) = match joined {
                Ok((id, read)) => (id, read),
                // Aborted (leadership regained: its run is read again) or panicked: read again.
                Err(error) => {
                    self.being_read.remove(&error.id());
                    continue;
                }
            };
            let Some(run) = self.being_read.remove(&id) else {
                continue;
            };
            match read {
                Ok(stored) => {
                    if let Some(stored) = stored.filter(|r| r.target_executor_id == run.1) {
                        tracing::info!(policy = %run.0, "upgrade report read back");
                        self.runs.insert(run.0.clone(), stored);
                    }
                    self.looked_up.insert(run);
                }
                // Read again at the next pass.
                Err(error) => {
                    let name = UpgradeReport::object_name(&run.0, &run.1);
                    tracing::warn!(%error, report = %name, "could not read the upgrade report");
                }
            }
        }
        self.current.clear();
        for policy in &view.policies {
            let Some(target) = policy.spec.target_executor_id.as_deref() else {
                continue;
            };
            let run = (policy.name.clone(), target.to_owned());
            self.current.insert(run.0.clone(), run.1.clone());
            if self.looked_up.contains(&run) || self.being_read.values().any(|r| *r == run) {
                continue;
            }
            let store = self.store.clone();
            let (policy, target) = run.clone();
            let task = self
                .reading
                .spawn(async move { store.read(&policy, &target).await });
            self.being_read.insert(task.id(), run);
        }
        // Actions of a run replaced before its record was read: that record was not the live one
        // any more.
        let current = &self.current;
        self.held
            .retain(|(policy, target), _| current.get(policy) == Some(target));
    }

    /// Folds a pass into the runs (see [`fold::observe`]), but those whose stored record was not
    /// looked for yet; then the actions held for runs now looked up.
    pub fn observe(&mut self, view: &ClusterView, plan: &Plan, now: DateTime<Utc>) {
        let looked_up = &self.looked_up;
        let known = |policy: &str, target: &str| {
            looked_up.contains(&(policy.to_owned(), target.to_owned()))
        };
        let observed = fold::observe(&mut self.runs, view, plan, now, known);
        self.dirty.extend(observed.changed);
        self.superseded.extend(observed.superseded);
        self.finished.extend(observed.finished);
        let ready: Vec<RunKey> = self
            .held
            .keys()
            .filter(|run| self.looked_up.contains(*run))
            .cloned()
            .collect();
        for run in ready {
            for (action, node, at) in self.held.remove(&run).unwrap_or_default() {
                if self.runs.get(&run.0).map(|r| &r.target_executor_id) == Some(&run.1)
                    && fold::record(&mut self.runs, &action, node.as_deref(), at)
                {
                    self.dirty.insert(run.0.clone());
                }
            }
        }
    }

    /// Records an executed action (see [`fold::record`]); `node`: the node of a pod action. Held
    /// for its run while the run's stored record is being read.
    pub fn record(&mut self, action: &Action, node: Option<&str>, now: DateTime<Utc>) {
        if let Some(target) = self.current.get(&action.policy) {
            let run = (action.policy.clone(), target.clone());
            if !self.looked_up.contains(&run) {
                let held = self.held.entry(run).or_default();
                if held.len() < HELD_PER_RUN {
                    held.push((action.clone(), node.map(str::to_owned), now));
                } else {
                    tracing::warn!(policy = %action.policy, "upgrade report not read back yet: an action goes unrecorded");
                }
                return;
            }
        }
        if fold::record(&mut self.runs, action, node, now) {
            self.dirty.insert(action.policy.clone());
        }
    }

    /// Writes what changed, when due: [`WRITE_EVERY`] after the last write, at once for a run that
    /// finished or was superseded. In the background, one batch at a time, unless `now_anyway`
    /// (shutdown): then it waits for the batch under way and writes everything before it
    /// returns.
    pub async fn flush(&mut self, now_anyway: bool) {
        if let Some(writing) = self.writing.take() {
            if now_anyway || writing.is_finished() {
                match writing.await {
                    Ok(written) => self.written_back(written),
                    Err(error) => tracing::warn!(%error, "the upgrade reports' writer failed"),
                }
            } else {
                self.writing = Some(writing);
                return;
            }
        }
        let due = now_anyway
            || !self.finished.is_empty()
            || !self.superseded.is_empty()
            || self.last_write.is_none_or(|at| at.elapsed() >= WRITE_EVERY);
        if !due || (self.dirty.is_empty() && self.superseded.is_empty()) {
            return;
        }
        if self.store.leadership.ensure().is_err() {
            return;
        }
        self.last_write = Some(Instant::now());
        let mut batch: Vec<Write> = std::mem::take(&mut self.superseded)
            .into_iter()
            .map(|report| Write {
                report,
                live: false,
                prune: false,
            })
            .collect();
        for policy in std::mem::take(&mut self.dirty) {
            let Some(run) = self.runs.get(&policy) else {
                continue;
            };
            let key = (policy, run.target_executor_id.clone());
            batch.push(Write {
                report: run.clone(),
                live: true,
                prune: !self.written.contains(&key),
            });
        }
        // Those of the batch are written now; a write that fails puts its policy back in both sets.
        self.finished.clear();
        let store = self.store.clone();
        let writing = tokio::spawn(async move { store.write_all(batch).await });
        if now_anyway {
            match writing.await {
                Ok(written) => self.written_back(written),
                Err(error) => tracing::warn!(%error, "the upgrade reports' writer failed"),
            }
        } else {
            self.writing = Some(writing);
        }
    }

    /// Takes in how a batch went: a live run whose write failed is written with the next batch.
    fn written_back(&mut self, written: Vec<Written>) {
        for Written { key, live, result } in written {
            match result {
                Ok(()) => {
                    self.written.insert(key);
                }
                Err(error) if live => {
                    tracing::warn!(%error, policy = %key.0, "could not write the upgrade report; trying again later");
                    if self.runs.get(&key.0).map(|r| &r.target_executor_id) == Some(&key.1) {
                        if self.runs[&key.0].finished.is_some() {
                            self.finished.insert(key.0.clone());
                        }
                        self.dirty.insert(key.0);
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, policy = %key.0, "could not write the superseded upgrade report");
                }
            }
        }
    }
}

impl Store {
    /// The stored record of a run, if there is one.
    async fn read(&self, policy: &str, target: &str) -> Result<Option<UpgradeReport>, Error> {
        let name = UpgradeReport::object_name(policy, target);
        Ok(self.api().get_opt(&name).await?.and_then(|cm| decode(&cm)))
    }

    /// Writes a batch in order, each record encoded here (off the controller's loop), and prunes
    /// where asked.
    async fn write_all(self, batch: Vec<Write>) -> Vec<Written> {
        let mut written = Vec::with_capacity(batch.len());
        for Write {
            report,
            live,
            prune,
        } in batch
        {
            let key = (report.policy.clone(), report.target_executor_id.clone());
            let result = self.write(report).await;
            if result.is_ok() && prune {
                self.prune(&key.0).await;
            }
            written.push(Written { key, live, result });
        }
        written
    }

    /// Writes one record; past the size bound, encoding drops what matters least from this copy
    /// (see [`UpgradeReport::encode`]), not from the one the controller keeps folding into.
    async fn write(&self, run: UpgradeReport) -> Result<(), Error> {
        // Serialising and compressing a large fleet's record takes tens of milliseconds: not on a
        // runtime thread.
        let (run, bytes) = tokio::task::spawn_blocking(move || {
            let mut run = run;
            let bytes = run.encode();
            (run, bytes)
        })
        .await
        .map_err(|e| Error::Other(format!("encoding the upgrade report: {e}")))?;
        let name = UpgradeReport::object_name(&run.policy, &run.target_executor_id);
        let mut data = BTreeMap::new();
        data.insert("policy".to_owned(), run.policy.clone());
        data.insert(
            "targetExecutorId".to_owned(),
            run.target_executor_id.clone(),
        );
        data.insert("started".to_owned(), run.started.to_rfc3339());
        if let Some(finished) = run.finished {
            data.insert("finished".to_owned(), finished.to_rfc3339());
        }
        data.insert(
            "nodesUpgraded".to_owned(),
            format!("{}/{}", run.nodes_upgraded(), run.nodes.len()),
        );
        data.insert("evicted".to_owned(), run.count("Evicted").to_string());
        data.insert("moved".to_owned(), run.count("Moved").to_string());
        let config_map = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: Some(BTreeMap::from([(
                    REPORT_POLICY_LABEL.to_owned(),
                    label_value(&run.policy),
                )])),
                ..ObjectMeta::default()
            },
            data: Some(data),
            binary_data: Some(BTreeMap::from([(
                REPORT_DATA_KEY.to_owned(),
                ByteString(bytes),
            )])),
            ..ConfigMap::default()
        };
        self.leadership.ensure()?;
        self.api()
            .patch(
                &name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&config_map),
            )
            .await?;
        Ok(())
    }

    /// Deletes the oldest records of `policy` beyond [`REPORTS_KEPT`].
    async fn prune(&self, policy: &str) {
        let selector = format!("{REPORT_POLICY_LABEL}={}", label_value(policy));
        let Ok(list) = self
            .api()
            .list(&ListParams::default().labels(&selector))
            .await
        else {
            return;
        };
        let mut stored: Vec<(String, String)> = list
            .items
            .iter()
            .filter(|cm| {
                cm.data
                    .as_ref()
                    .and_then(|d| d.get("policy"))
                    .map(String::as_str)
                    == Some(policy)
            })
            .filter_map(|cm| {
                let started = cm.data.as_ref()?.get("started")?.clone();
                Some((started, cm.metadata.name.clone()?))
            })
            .collect();
        stored.sort();
        let excess = stored.len().saturating_sub(REPORTS_KEPT);
        for (_, name) in stored.into_iter().take(excess) {
            if self.leadership.ensure().is_err() {
                return;
            }
            if let Err(error) = self.api().delete(&name, &DeleteParams::default()).await {
                tracing::warn!(%error, report = %name, "could not delete an old upgrade report");
            }
        }
    }

    fn api(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }
}

/// The record in a report ConfigMap, if it can be read.
pub fn decode(config_map: &ConfigMap) -> Option<UpgradeReport> {
    let bytes = config_map.binary_data.as_ref()?.get(REPORT_DATA_KEY)?;
    UpgradeReport::decode(&bytes.0)
        .map_err(|error| tracing::warn!(%error, "an upgrade report that cannot be read"))
        .ok()
}

/// A policy name as a label value (at most 63 characters; policy names are DNS subdomains, so only
/// the length can be out of bounds): the data's `policy` key tells truncated names apart.
fn label_value(policy: &str) -> String {
    let mut value: String = policy.chars().take(63).collect();
    while value.ends_with(['.', '-']) {
        value.pop();
    }
    value
}
