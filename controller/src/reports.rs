//! The upgrade runs' durable records ([`k8sm_api::report`]): kept in memory, folded from every pass and executed
//! action (`k8sm_planner::report`), read back from their ConfigMaps when the controller (or a new leader) first
//! meets a run, and written back at most every [`WRITE_EVERY`], at once when a run finishes or is superseded, and on
//! shutdown. A write that fails is retried with the next one; it never holds up a pass.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use tokio::time::Instant;

use k8sm_api::report::{REPORT_DATA_KEY, REPORT_POLICY_LABEL, REPORTS_KEPT, UpgradeReport};
use k8sm_planner::report::{self as fold, Runs};
use k8sm_planner::{Action, ClusterView, Plan};

use crate::Error;
use crate::leader::Leadership;

/// How often a run's record is written while it changes: what a controller that is killed (not stopped: a stop
/// writes everything) can lose, against a write of up to a few hundred kB for a large fleet.
const WRITE_EVERY: Duration = Duration::from_secs(5);
/// The field manager of the server-side applies.
const MANAGER: &str = "k8sm-controller";

pub struct Reports {
    client: Client,
    namespace: String,
    leadership: Leadership,
    runs: Runs,
    /// Policies whose record changed since it was last written.
    dirty: BTreeSet<String>,
    /// Records of runs a new target replaced, to write once more.
    superseded: Vec<UpgradeReport>,
    /// Runs (policy, target) whose stored record was looked for.
    looked_up: BTreeSet<(String, String)>,
    /// Policies whose run finished since the last write: written at once.
    finished: BTreeSet<String>,
    /// Runs (policy, target) written by this process: the older runs of their policy were pruned then.
    written: BTreeSet<(String, String)>,
    last_write: Option<Instant>,
    /// Whether this replica led at the last [`Reports::load`].
    leading: bool,
}

impl Reports {
    pub fn new(client: Client, namespace: String, leadership: Leadership) -> Self {
        Self {
            client,
            namespace,
            leadership,
            runs: Runs::new(),
            dirty: BTreeSet::new(),
            superseded: Vec::new(),
            looked_up: BTreeSet::new(),
            finished: BTreeSet::new(),
            written: BTreeSet::new(),
            last_write: None,
            leading: false,
        }
    }

    /// Reads back the stored record of each run the view shows and this process has not met yet (after a restart or
    /// a change of leader), so that the run goes on where it was. Only the leader writes, but every replica reads.
    pub async fn load(&mut self, view: &ClusterView) {
        // A replica that just became the leader reads every record again: while it stood by, the leader went on
        // recording, and its own copies are behind.
        let leading = self.leadership.ensure().is_ok();
        if leading && !self.leading {
            self.runs.clear();
            self.looked_up.clear();
            self.dirty.clear();
        }
        self.leading = leading;
        for policy in &view.policies {
            let Some(target) = policy.spec.target_executor_id.as_deref() else {
                continue;
            };
            let run = (policy.name.clone(), target.to_owned());
            if self.looked_up.contains(&run) {
                continue;
            }
            let name = UpgradeReport::object_name(&policy.name, target);
            match self.api().get_opt(&name).await {
                Ok(found) => {
                    self.looked_up.insert(run);
                    let stored = found.and_then(|cm| decode(&cm));
                    if let Some(stored) = stored.filter(|r| r.target_executor_id == target) {
                        tracing::info!(policy = %policy.name, "upgrade report read back");
                        self.runs.insert(policy.name.clone(), stored);
                    }
                }
                // Tried again next pass; meanwhile the run is not recorded from scratch over the stored record.
                Err(error) => {
                    tracing::warn!(%error, report = %name, "could not read the upgrade report");
                    return;
                }
            }
        }
    }

    /// Folds a pass into the runs (see [`fold::observe`]), but those whose stored record was not looked for yet.
    pub fn observe(&mut self, view: &ClusterView, plan: &Plan, now: DateTime<Utc>) {
        let looked_up = &self.looked_up;
        let known = |policy: &str, target: &str| {
            looked_up.contains(&(policy.to_owned(), target.to_owned()))
        };
        let observed = fold::observe(&mut self.runs, view, plan, now, known);
        self.dirty.extend(observed.changed);
        self.superseded.extend(observed.superseded);
        self.finished.extend(observed.finished);
    }

    /// Records an executed action (see [`fold::record`]); `node`: the node of a pod action.
    pub fn record(&mut self, action: &Action, node: Option<&str>, now: DateTime<Utc>) {
        if fold::record(&mut self.runs, action, node, now) {
            self.dirty.insert(action.policy.clone());
        }
    }

    /// Writes what changed, when due: [`WRITE_EVERY`] after the last write, at once for a run that finished or was
    /// superseded, or with `now_anyway` (shutdown).
    pub async fn flush(&mut self, now_anyway: bool) {
        let due = now_anyway
            || !self.finished.is_empty()
            || !self.superseded.is_empty()
            || self.last_write.is_none_or(|at| at.elapsed() >= WRITE_EVERY);
        if !due || (self.dirty.is_empty() && self.superseded.is_empty()) {
            return;
        }
        if self.leadership.ensure().is_err() {
            return;
        }
        self.last_write = Some(Instant::now());
        for mut old in std::mem::take(&mut self.superseded) {
            if let Err(error) = self.write(&mut old).await {
                tracing::warn!(%error, policy = %old.policy, "could not write the superseded upgrade report");
            }
        }
        let dirty = std::mem::take(&mut self.dirty);
        for policy in dirty {
            let Some(mut run) = self.runs.remove(&policy) else {
                continue;
            };
            let written = self.write(&mut run).await;
            let key = (policy.clone(), run.target_executor_id.clone());
            self.runs.insert(policy.clone(), run);
            match written {
                Ok(()) => {
                    self.finished.remove(&policy);
                    if self.written.insert(key) {
                        self.prune(&policy).await;
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, %policy, "could not write the upgrade report; trying again later");
                    self.dirty.insert(policy);
                }
            }
        }
    }

    async fn write(&self, run: &mut UpgradeReport) -> Result<(), Error> {
        let bytes = run.encode();
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

/// A policy name as a label value (at most 63 characters; policy names are DNS subdomains, so only the length can be
/// out of bounds): the data's `policy` key tells truncated names apart.
fn label_value(policy: &str) -> String {
    let mut value: String = policy.chars().take(63).collect();
    while value.ends_with(['.', '-']) {
        value.pop();
    }
    value
}
