//! Waiting for what a scenario's cluster reaches — pods Ready, a budget's status, every node
//! upgraded — and watching that something holds for a while. Every wait panics with the
//! controllers' logs when it times out ([`Scenario::wait_until`]).
//!
//! Every wait of the harness and of the tests polls with [`poll`]; tests without a [`Scenario`]
//! wait with [`wait_until`].

use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::binaries::ChildGuard;
use crate::nodes::has_k8sm_state;
use crate::objects::{patch_node, pods_in};
use crate::polling::{POLL, poll};
use crate::scenario::{Scenario, is_ready, is_upgraded};

/// How long workloads may take to become Ready: generous, as the clusters of one test file run two
/// at a time on small machines.
const SETUP: Duration = Duration::from_secs(120);

/// For tests without a [`Scenario`]: polls `check` every `every` until it yields a value, insisting
/// at each look that every process of `running` keeps running (one that died would leave the wait
/// to its timeout); after `timeout`, panics naming `what`, with the end of each one's log.
pub async fn wait_until<T, F, Fut>(
    what: &str,
    timeout: Duration,
    every: Duration,
    running: &[&ChildGuard],
    mut check: F,
) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let looked = poll(timeout, every, || {
        running.iter().for_each(|process| process.assert_running());
        let answer = check();
        async move { answer.await.ok_or(()) }
    })
    .await;
    looked.unwrap_or_else(|()| {
        let logs: Vec<String> = running
            .iter()
            .map(|c| format!("--- {} ---\n{}", c.log.display(), c.log_tail(40)))
            .collect();
        panic!(
            "timed out after {timeout:?} waiting until {what}\n{}",
            logs.join("\n")
        )
    })
}

impl Scenario {
    /// Waits until at least `count` pods of the scenario's namespace are Ready.
    pub async fn wait_ready(&self, count: usize) {
        self.wait_ready_in(&self.namespace, count).await;
    }

    /// Waits until at least `count` pods of `namespace` are Ready.
    pub async fn wait_ready_in(&self, namespace: &str, count: usize) {
        self.wait_ready_within(namespace, count, SETUP).await;
    }

    /// Like [`Scenario::wait_ready_in`], for a test that gives its workloads less (or more) time.
    pub async fn wait_ready_within(&self, namespace: &str, count: usize, timeout: Duration) {
        self.wait_until(
            &format!("{count} pods of {namespace} are ready"),
            timeout,
            || async {
                let pods = pods_in(&self.client, namespace).await;
                (pods.iter().filter(|p| is_ready(p)).count() >= count).then_some(())
            },
        )
        .await;
    }

    /// Waits until the budget `name` of the scenario's namespace has seen `healthy` pods and allows
    /// `allowed` disruptions.
    pub async fn wait_budget(&self, name: &str, healthy: u32, allowed: i32) {
        let pdbs: Api<PodDisruptionBudget> = Api::namespaced(self.client.clone(), &self.namespace);
        self.wait_until(
            &format!("the budget {name} allows {allowed} disruptions"),
            SETUP,
            || async {
                let pdb = pdbs.get(name).await.ok()?;
                let generation = pdb.metadata.generation;
                let status = pdb.status?;
                (status.observed_generation == generation
                    && status.current_healthy == i32::try_from(healthy).ok()
                    && status.disruptions_allowed == Some(allowed))
                .then_some(())
            },
        )
        .await;
    }

    /// Runs `start` while only `node` is schedulable, waits until `ready` pods of the namespace are
    /// Ready, and makes every node schedulable again: how a test puts a workload's pods on one
    /// node.
    pub async fn pin_to<T, F, Fut>(&self, node: &str, ready: usize, start: F) -> T
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        let others: Vec<String> = self
            .nodes()
            .await
            .iter()
            .map(ResourceExt::name_any)
            .filter(|n| n != node)
            .collect();
        for other in &others {
            let cordon = json!({ "spec": { "unschedulable": true } });
            patch_node(&self.client, other, cordon).await;
        }
        let started = start().await;
        self.wait_ready(ready).await;
        for other in &others {
            let uncordon = json!({ "spec": { "unschedulable": null } });
            patch_node(&self.client, other, uncordon).await;
        }
        started
    }

    /// Until `total` nodes run the new executor, insisting that the first controller keeps running
    /// (a controller that died would leave the wait to its timeout).
    pub async fn wait_nodes_upgraded(&self, total: usize, timeout: Duration) {
        self.wait_until("every node runs the new executor", timeout, || async {
            self.controllers[0].assert_running();
            (self.upgraded_nodes().await == total).then_some(())
        })
        .await;
    }

    /// Waits until every one of the `total` nodes runs the new executor without upgrade state, and
    /// the status of `policy` says so (`total/total`, no node left in it), while the first
    /// controller keeps running.
    pub async fn wait_all_upgraded(&self, policy: &str, total: usize, timeout: Duration) {
        let expected = format!("{total}/{total}");
        self.wait_until(
            &format!("all {total} nodes are upgraded and {policy} reports {expected}"),
            timeout,
            || async {
                self.controllers[0].assert_running();
                if self.upgraded_nodes().await != total {
                    return None;
                }
                let status = self.policy(policy).await.status?;
                (status.upgraded.as_deref() == Some(expected.as_str()) && status.nodes.is_empty())
                    .then_some(())
            },
        )
        .await;
    }

    /// Like [`Scenario::wait_all_upgraded`], and then until no node keeps any of k8sm's keys (but
    /// the executor ID) or a cordon, and the status lists no blocked pod.
    pub async fn wait_all_upgraded_and_clean(&self, policy: &str, total: usize, timeout: Duration) {
        self.wait_all_upgraded(policy, total, timeout).await;
        self.wait_until(
            &format!("all {total} nodes are clean and {policy} lists no blocked pod"),
            Duration::from_secs(60),
            || async {
                let clean = self
                    .nodes()
                    .await
                    .iter()
                    .filter(|n| is_upgraded(n, &self.new_id) && !has_k8sm_state(n))
                    .count();
                let status = self.policy(policy).await.status?;
                (clean == total && status.blocked_pods.is_empty()).then_some(())
            },
        )
        .await;
    }
}

/// Calls `check` (which panics on a violation) every [`POLL`] for `duration`.
pub async fn observe_for<F, Fut>(duration: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let end = Instant::now() + duration;
    while Instant::now() < end {
        check().await;
        tokio::time::sleep(POLL).await;
    }
    check().await;
}
