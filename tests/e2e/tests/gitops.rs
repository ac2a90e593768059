//! A policy managed by a GitOps tool, as the tool sees it: kstatus' own computation
//! (`tests/go/kstatus`, the one Flux and kpt wait on) reads it InProgress while it upgrades,
//! Failed while only an operator can go on, Current when done; and `kubectl k8sm pause` and
//! `resume` do not fight the tool's server-side apply of the spec (docs/design.md §5.1).

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use k8sm_api::{ExecutorUpgradePolicy, UnmanagedPodPolicy, condition_types, keys};
use k8sm_e2e::plugin::{k8sm, k8sm_ok};
use k8sm_e2e::scenario::Scenario;
use k8sm_e2e::status::{condition, is_true};
use k8sm_e2e::waits::observe_for;
use k8sm_e2e::workloads::{create, deployment, unmanaged_pod};
use k8sm_testcluster::node_name;

const POLICY: &str = "fleet";
/// Argo CD's field manager: the tool that owns the policy's spec here.
const GITOPS: &str = "argocd-controller";
const PROGRESS: Duration = Duration::from_secs(180);

/// kstatus' verdict on `policy`: its status (InProgress, Current, Failed, …) and message.
fn kstatus(policy: &ExecutorUpgradePolicy) -> (String, String) {
    let binary = k8sm_testcluster::kstatus().expect("kstatus builds");
    let mut child = Command::new(binary)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kstatus runs");
    let object = serde_json::to_vec(policy).expect("a policy serialises");
    child.stdin.take().unwrap().write_all(&object).unwrap();
    let output = child.wait_with_output().expect("kstatus ends");
    assert!(
        output.status.success(),
        "kstatus: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let verdict: Value = serde_json::from_slice(&output.stdout).expect("kstatus prints JSON");
    let field = |name: &str| verdict[name].as_str().unwrap_or_default().to_owned();
    (field("status"), field("message"))
}

/// The policy as the GitOps tool applies it from Git, with server-side apply under its own field
/// manager, forcing conflicts as Argo CD and Flux do.
async fn gitops_apply(scenario: &Scenario, paused: bool) {
    let mut spec = serde_json::to_value(scenario.policy_spec(1)).unwrap();
    spec["paused"] = json!(paused);
    spec["unmanagedPods"] = json!({ "policy": UnmanagedPodPolicy::Never });
    let manifest = json!({
        "apiVersion": "k8s.mesosphere.io/v1alpha1",
        "kind": "ExecutorUpgradePolicy",
        "metadata": { "name": POLICY },
        "spec": spec,
    });
    Api::<ExecutorUpgradePolicy>::all(scenario.client.clone())
        .patch(
            POLICY,
            &PatchParams::apply(GITOPS).force(),
            &Patch::Apply(manifest),
        )
        .await
        .expect("the GitOps tool applies the policy");
}

/// Waits until kstatus reads `expected` on the policy; returns the policy then.
async fn wait_kstatus(scenario: &Scenario, expected: &str) -> ExecutorUpgradePolicy {
    scenario
        .wait_until(
            &format!("kstatus reads {POLICY} {expected}"),
            PROGRESS,
            || async {
                let policy = scenario.policy(POLICY).await;
                (kstatus(&policy).0 == expected).then_some(policy)
            },
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitops_reads_the_policy_and_pause_survives_its_sync() {
    const NS: &str = "gitops";
    // Built before the upgrade starts, so that its first reading comes while nodes are left.
    k8sm_testcluster::kstatus().expect("kstatus builds");
    // Executors that take 20 s to come back: the upgrade is in progress long enough to be seen.
    let mut scenario = Scenario::start(3, NS, "20s").await;
    create(&scenario.client, &deployment(NS, "web", 3)).await;
    // Only an operator can clear this node: it is left for last, and the upgrade stalls on it.
    let held = node_name(0);
    create(&scenario.client, &unmanaged_pod(NS, "debug", &held, &[])).await;
    scenario.wait_ready(4).await;

    gitops_apply(&scenario, false).await;
    // No controller has read it yet: the tool must not take it for done.
    let unread = scenario.policy(POLICY).await;
    let (verdict, message) = kstatus(&unread);
    assert_eq!(verdict, "InProgress", "before any status write: {message}");
    scenario.start_controller(&[]);
    let running = scenario
        .wait_until("the controller reconciles", PROGRESS, || async {
            let policy = scenario.policy(POLICY).await;
            is_true(&policy, condition_types::RECONCILING).then_some(policy)
        })
        .await;
    assert_eq!(kstatus(&running).0, "InProgress", "upgrading");

    // The operator pauses by hand: an annotation, which the tool's next sync leaves alone.
    k8sm_ok(&scenario.cluster, &["pause", "--policy", POLICY]);
    gitops_apply(&scenario, false).await;
    let paused = scenario
        .wait_until("the pause is reported", PROGRESS, || async {
            let policy = scenario.policy(POLICY).await;
            is_true(&policy, condition_types::PAUSED).then_some(policy)
        })
        .await;
    assert_eq!(
        paused
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(keys::PAUSE_ANNOTATION)),
        Some(&"true".to_owned()),
        "the sync kept the operator's annotation"
    );
    let message = &condition(&paused, condition_types::PAUSED).unwrap().message;
    assert!(message.contains(keys::PAUSE_ANNOTATION), "{message}");
    assert_eq!(kstatus(&paused).0, "InProgress", "paused with nodes left");
    let upgraded =
        |policy: &ExecutorUpgradePolicy| policy.status.as_ref().map(|s| s.counts.compatible);
    // A node told to restart before the pause may still come back: count from after that.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let at_pause = upgraded(&scenario.policy(POLICY).await);
    gitops_apply(&scenario, false).await;
    observe_for(Duration::from_secs(5), || async {
        let still = scenario.policy(POLICY).await;
        assert!(
            is_true(&still, condition_types::PAUSED),
            "still paused after a sync"
        );
        assert_eq!(upgraded(&still), at_pause, "no node finished while paused");
    })
    .await;

    // Git pauses it too: resume refuses to change a spec the tool owns, naming it.
    gitops_apply(&scenario, true).await;
    let refused = k8sm(&scenario.cluster, &["resume", "--policy", POLICY]);
    assert!(
        !refused.success,
        "resume of a spec Git pauses:\n{}",
        refused.stdout
    );
    assert!(
        refused.stderr.contains(GITOPS) && refused.stderr.contains("--override-spec"),
        "{}",
        refused.stderr
    );
    let kept = scenario.policy(POLICY).await;
    assert!(kept.spec.paused, "the spec is left as Git has it");
    assert!(
        kept.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(keys::PAUSE_ANNOTATION)),
        "a refused resume changes nothing"
    );

    // Git resumes, then the operator: the upgrade goes on until only the held node is left.
    gitops_apply(&scenario, false).await;
    k8sm_ok(&scenario.cluster, &["resume", "--policy", POLICY]);
    let stalled = wait_kstatus(&scenario, "Failed").await;
    let reason = &condition(&stalled, condition_types::STALLED)
        .unwrap()
        .reason;
    assert_eq!(reason, "WaitingForOperator");
    assert_eq!(upgraded(&stalled), Some(2), "every other node is upgraded");

    // The operator clears the node: the upgrade completes and kstatus reads Current.
    k8sm_ok(&scenario.cluster, &["force", &held, "--yes"]);
    let done = wait_kstatus(&scenario, "Current").await;
    assert!(is_true(&done, condition_types::READY));
    assert_eq!(upgraded(&done), Some(3));
}
