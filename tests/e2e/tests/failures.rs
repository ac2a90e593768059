//! Failures on the real cluster, as an SRE meets them: actions the apiserver refuses, a pod watch
//! that fails while writes still work, and the apiserver throttling the controller's calls. What
//! fails is reported and retried (with backoff, or at a lower call limit) and holds up no more than
//! it must, a stale view every action; once the fault goes, the upgrade finishes. Each test runs
//! its own cluster, side by side.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::json;

use k8sm_api::{
    ExecutorUpgradePolicy, ExecutorUpgradePolicySpec, MaxConcurrentNodes, UnmanagedPodPolicy,
    UnmanagedPods, condition_types,
};
use k8sm_e2e::events::{first_seen, k8sm_events_about, last_seen, note, occurrences, with_reason};
use k8sm_e2e::http::{free_port, get, metric};
use k8sm_e2e::kubectl_ok;
use k8sm_e2e::nodes::has_k8sm_state;
use k8sm_e2e::objects::{dry_run_eviction, patch_node};
use k8sm_e2e::scenario::{Scenario, is_upgraded};
use k8sm_e2e::sla::{SlaWatcher, assert_within_bounds};
use k8sm_e2e::status::condition;
use k8sm_e2e::waits::observe_for;
use k8sm_e2e::workload_policy::only_node;
use k8sm_e2e::workloads::{create, deployment, unmanaged_pod};
use k8sm_testcluster::node_name;
use kube::Api;

/// Generous deadlines: the clusters of this file run side by side on small machines.
const SETUP: Duration = Duration::from_secs(90);
const PROGRESS: Duration = Duration::from_secs(150);

// ---------------------------------------------------------------------------------------------------------------
// Refused actions back off
// ---------------------------------------------------------------------------------------------------------------

/// What the admission policies answer: an operator's words, which the controller must pass on.
const EVICTION_DENIED: &str = "evictions of guarded pods need a change ticket";
const DELETION_DENIED: &str = "pinned pods may not be deleted";
/// Attempts observed of the refused eviction before the admission policies go.
const ATTEMPTS: u32 = 5;

/// Two ValidatingAdmissionPolicies with their bindings: evictions (CREATE of `pods/eviction`) of
/// pods named `guarded-*` are forbidden (403), and of pods named `pinned-*` invalid (422).
fn admission_policies() -> String {
    let policy =
        |name: &str, operation: &str, resource: &str, prefix: &str, reason: &str, message: &str| {
            format!(
                "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {name}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [\"\"]
      apiVersions: [\"v1\"]
      operations: [{operation}]
      resources: [{resource}]
  validations:
  - expression: \"!request.name.startsWith('{prefix}')\"
    reason: {reason}
    message: \"{message}\"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {name}
spec:
  policyName: {name}
  validationActions: [Deny]
"
            )
        };
    [
        policy(
            "deny-guarded-evictions",
            "CREATE",
            "pods/eviction",
            "guarded-",
            "Forbidden",
            EVICTION_DENIED,
        ),
        policy(
            "protect-pinned-pods",
            "CREATE",
            "pods/eviction",
            "pinned-",
            "Invalid",
            DELETION_DENIED,
        ),
    ]
    .join("---\n")
}

/// Waits until the admission policies refuse (dry-run) evictions of `evicted` and of `deleted`.
async fn wait_until_refused(scenario: &Scenario, evicted: &str, deleted: &str) {
    let (client, ns) = (&scenario.client, &scenario.namespace);
    let refused = |answer: kube::Result<()>, words: &str| match answer {
        Err(kube::Error::Api(status)) => status.message.contains(words),
        _ => false,
    };
    scenario
        .wait_until("the admission policies are in force", SETUP, || async {
            let evict = dry_run_eviction(client, ns, evicted).await;
            let delete = dry_run_eviction(client, ns, deleted).await;
            (refused(evict, EVICTION_DENIED) && refused(delete, DELETION_DENIED)).then_some(())
        })
        .await;
}

/// Each time the controller reported `ActionFailed` about the pod `name` (the Events API folds the
/// repeats into one Event with a series): (occurrences so far, when the last was observed), and the
/// note.
async fn failures_reported(
    scenario: &Scenario,
    name: &str,
) -> Option<(u32, DateTime<Utc>, String)> {
    let events = k8sm_events_about(&scenario.client, "Pod", name, Some("ActionFailed")).await;
    let count: u32 = events.iter().map(occurrences).sum();
    let last = events.iter().map(last_seen).max()?;
    Some((count, last, note(&events[0]).to_owned()))
}

/// Samples of `failures_reported`: (count, time), one per new count.
#[derive(Default, Debug)]
struct Attempts(Vec<(u32, DateTime<Utc>)>);

impl Attempts {
    fn observe(&mut self, sample: Option<&(u32, DateTime<Utc>, String)>) {
        if let Some((count, at, _)) = sample
            && self.0.last().is_none_or(|(seen, _)| seen < count)
        {
            self.0.push((*count, *at));
        }
    }

    fn count(&self) -> u32 {
        self.0.last().map_or(0, |(count, _)| *count)
    }

    /// The interval after the n-th failure, for each n whose next failure was seen alone (no
    /// attempt skipped).
    fn intervals(&self) -> Vec<(u32, Duration)> {
        self.0
            .windows(2)
            .filter(|w| w[1].0 == w[0].0 + 1)
            .map(|w| (w[0].0, (w[1].1 - w[0].1).to_std().unwrap_or_default()))
            .collect()
    }
}

/// ValidatingAdmissionPolicies deny the eviction of one pod (403 Forbidden) and the deletion of an
/// unmanaged pod (422 Invalid; k8sm deletes unmanaged pods by eviction, so it is the eviction that
/// the policy denies). Each refused object backs off (the intervals between attempts, read from
/// the series of its `ActionFailed` Event, at least double each time), every attempt's answer is
/// reported, the status lists both pods as blocked with the apiserver's message, and the node
/// without a refused pod finishes. Once the policies go, everything finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_actions_back_off_are_reported_and_block_only_their_nodes() {
    let mut scenario = Scenario::start(3, "refused", "1s").await;
    let ns = scenario.namespace.clone();
    let (guarded_node, pinned_node, free_node) = (node_name(0), node_name(1), node_name(2));
    let rules = scenario.cluster.dir().join("admission-policies.yaml");
    std::fs::write(&rules, admission_policies()).expect("policies written");
    kubectl_ok(
        &scenario.cluster,
        &["apply", "-f", &rules.display().to_string()],
    );

    let guarded_deployment = deployment(&ns, "guarded", 1);
    scenario
        .pin_to(&guarded_node, 1, || {
            create(&scenario.client, &guarded_deployment)
        })
        .await;
    create(
        &scenario.client,
        &unmanaged_pod(&ns, "pinned-0", &pinned_node, &[]),
    )
    .await;
    create(&scenario.client, &deployment(&ns, "web", 3)).await;
    scenario.wait_ready(5).await;
    let guarded = scenario.app_pods("guarded").await[0]
        .metadata
        .name
        .clone()
        .expect("a name");
    // The apiserver enforces an admission policy once its informers have seen the policy and its
    // binding: a moment after `kubectl apply`, longer on a loaded machine. Until both refuse,
    // an eviction the test expects refused could go through
    // (docs/decisions/0009-end-to-end-fault-tests.md).
    wait_until_refused(&scenario, &guarded, "pinned-0").await;

    scenario.start_controller(&[]);
    let mut spec = scenario.policy_spec(3);
    spec.owner_health_threshold = 50;
    spec.unmanaged_pods = UnmanagedPods {
        policy: UnmanagedPodPolicy::Delete,
        timeout: None,
    };
    scenario.create_policy("fleet", spec).await;
    let started = Instant::now();

    // The refused eviction is tried again ever later; the node without a refused pod finishes
    // meanwhile. Sampled from the waits' closure, which may not hold on to a mutable borrow
    // across its polls.
    let attempts = std::cell::RefCell::new((Attempts::default(), Attempts::default()));
    let (eviction_report, deletion_report) = scenario
        .wait_until(
            &format!(
                "{ATTEMPTS} refused evictions of {guarded}, a refused deletion of pinned-0, {free_node} upgraded"
            ),
            PROGRESS,
            || async {
                let eviction = failures_reported(&scenario, &guarded).await;
                let deletion = failures_reported(&scenario, "pinned-0").await;
                let free = scenario.nodes().await.iter().any(|n| {
                    n.metadata.name.as_ref() == Some(&free_node) && is_upgraded(n, &scenario.new_id)
                });
                let mut attempts = attempts.borrow_mut();
                attempts.0.observe(eviction.as_ref());
                attempts.1.observe(deletion.as_ref());
                (attempts.0.count() >= ATTEMPTS && attempts.1.count() >= 1 && free)
                    .then(|| (eviction.expect("seen"), deletion.expect("seen")))
            },
        )
        .await;
    let (evictions, deletions) = attempts.into_inner();
    let observed = started.elapsed();

    // Each interval is at least the backoff's: 1 s after the first failure, doubling.
    let intervals = evictions.intervals();
    assert!(
        intervals.len() >= 3,
        "too few consecutive attempts were seen to judge the backoff: {evictions:?}"
    );
    for (n, interval) in &intervals {
        let floor = Duration::from_secs(1 << (n - 1)).mul_f64(0.9);
        assert!(
            *interval >= floor,
            "attempt {} of the eviction came {interval:?} after attempt {n}: the backoff is at least {floor:?}: {evictions:?}",
            n + 1
        );
    }
    let (first, last) = (intervals[0].1, intervals[intervals.len() - 1].1);
    assert!(last >= first * 3, "the intervals grow: {intervals:?}");
    // Without backoff the pass retried every second: as many attempts as seconds observed.
    assert!(
        evictions.count() <= ATTEMPTS + 2,
        "{} attempts in {observed:?}",
        evictions.count()
    );

    // The Events name the action and carry the apiserver's answer.
    let (_, _, eviction_note) = &eviction_report;
    assert!(
        eviction_note.contains(&format!("evict pod {ns}/{guarded} failed: 403"))
            && eviction_note.contains(EVICTION_DENIED),
        "{eviction_note}"
    );
    let (_, _, deletion_note) = &deletion_report;
    assert!(
        deletion_note.contains(&format!("delete pod {ns}/pinned-0 failed: 422"))
            && deletion_note.contains(DELETION_DENIED),
        "{deletion_note}"
    );

    // After three failures in a row both pods are blocked in status, with the answer; the policy is
    // Degraded.
    let policy = scenario
        .wait_until(
            "the status lists both refused pods as blocked",
            SETUP,
            || async {
                let policy = scenario.policy("fleet").await;
                let status = policy.status.as_ref()?;
                let blocked = |name: &str, words: &str| {
                    status.blocked_pods.iter().any(|p| {
                        p.name == name && p.reason == "ActionFailed" && p.message.contains(words)
                    })
                };
                (blocked(&guarded, EVICTION_DENIED) && blocked("pinned-0", DELETION_DENIED))
                    .then_some(policy)
            },
        )
        .await;
    let degraded = condition(&policy, condition_types::DEGRADED).expect("a Degraded condition");
    assert_eq!(
        (degraded.status.as_str(), degraded.reason.as_str()),
        ("True", "ActionFailed"),
        "{degraded:?}"
    );
    let status = policy.status.as_ref().expect("status");
    for (node, words) in [
        (&guarded_node, EVICTION_DENIED),
        (&pinned_node, DELETION_DENIED),
    ] {
        let entry = status.nodes.iter().find(|n| &n.name == node);
        assert!(
            entry.is_some_and(|e| e.blockers.iter().any(|b| b.contains(words))),
            "{node}'s blockers name the refusal: {entry:?}"
        );
    }
    assert!(
        !scenario
            .nodes()
            .await
            .iter()
            .any(|n| n.metadata.name.as_ref() != Some(&free_node)
                && is_upgraded(n, &scenario.new_id)),
        "the nodes of the refused pods are not upgraded"
    );

    // The operator lifts the refusals: the next attempts succeed, everything finishes, and nothing
    // is left blocked.
    kubectl_ok(
        &scenario.cluster,
        &["delete", "-f", &rules.display().to_string()],
    );
    let lifted = Instant::now();
    scenario.wait_all_upgraded("fleet", 3, PROGRESS).await;
    let finished = lifted.elapsed();
    let policy = scenario
        .wait_until("the policy is no longer Degraded", SETUP, || async {
            let policy = scenario.policy("fleet").await;
            let degraded = condition(&policy, condition_types::DEGRADED)?;
            (degraded.status == "False").then_some(policy)
        })
        .await;
    assert!(
        policy
            .status
            .as_ref()
            .is_some_and(|s| s.blocked_pods.is_empty()),
        "{:?}",
        policy.status
    );

    eprintln!(
        "[refused] eviction of {guarded} refused {} times in {:.1}s; intervals after each failure: {}; deletion of \
         pinned-0 refused {} times (intervals {}); everything upgraded {:.1}s after the admission policies went",
        evictions.count(),
        observed.as_secs_f64(),
        intervals
            .iter()
            .map(|(n, d)| format!("#{n}→{:.2}s", d.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", "),
        deletions.count(),
        deletions
            .intervals()
            .iter()
            .map(|(_, d)| format!("{:.2}s", d.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", "),
        finished.as_secs_f64(),
    );
}

// ---------------------------------------------------------------------------------------------------------------
// A stale pod watch stops every action
// ---------------------------------------------------------------------------------------------------------------

const STALENESS: &str = "5s";

/// The index of the deployed ClusterRole's rule on `pods` itself, and its verbs.
fn pods_rule(scenario: &Scenario) -> (usize, Vec<String>) {
    let role = kubectl_ok(
        &scenario.cluster,
        &["get", "clusterrole", "k8sm-controller", "-o", "json"],
    );
    let role: serde_json::Value = serde_json::from_str(&role).expect("a ClusterRole");
    let rules = role["rules"].as_array().expect("rules");
    rules
        .iter()
        .enumerate()
        .find(|(_, r)| r["resources"] == json!(["pods"]))
        .map(|(i, r)| {
            let verbs = r["verbs"].as_array().expect("verbs");
            (
                i,
                verbs
                    .iter()
                    .map(|v| v.as_str().unwrap_or_default().to_owned())
                    .collect(),
            )
        })
        .expect("a rule on pods")
}

fn set_pods_verbs(scenario: &Scenario, index: usize, verbs: &[String]) {
    let patch =
        json!([{ "op": "replace", "path": format!("/rules/{index}/verbs"), "value": verbs }]);
    scenario.patch_controller_role(&patch.to_string());
}

/// The Degraded condition's reason and message, once written.
fn degraded(policy: &ExecutorUpgradePolicy) -> Option<(String, String)> {
    let c = condition(policy, condition_types::DEGRADED)?;
    Some((c.reason.clone(), c.message.clone()))
}

/// The pod watch fails while writes still work: the controller runs with the deployed
/// ClusterRole, `list` and `watch` on pods are taken away, and the apiserver is restarted so that
/// the open watch breaks (RBAC is checked when a watch starts; an open watch outlives a change of
/// the rules). After `--max-watch-staleness` the policy reads Degraded (`WatchFailing`) and nothing
/// is done even when nodes become selected; once the rule is back it recovers by itself and the
/// upgrade finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_pod_watch_stops_every_action_until_it_recovers() {
    let mut scenario = Scenario::start(3, "stale", "1s").await;
    let (kubeconfig, _) = scenario.deployed_controller_identity();
    let ns = scenario.namespace.clone();
    create(&scenario.client, &deployment(&ns, "web", 3)).await;
    scenario.wait_ready(3).await;
    let before = scenario.live_pods().await;

    // A policy that selects no node yet: the controller runs, synced, with nothing to do.
    let mut spec = scenario.policy_spec(3);
    spec.owner_health_threshold = 60;
    spec.node_selector = LabelSelector {
        match_labels: Some(BTreeMap::from([("upgrade".to_owned(), "now".to_owned())])),
        ..LabelSelector::default()
    };
    scenario.create_policy("fleet", spec).await;
    scenario.start_controller_as(
        &kubeconfig,
        &[
            &format!("--max-watch-staleness={STALENESS}"),
            // The deployed Role grants the reports' ConfigMaps in the controller's namespace only.
            "--report-namespace=k8sm-system",
        ],
    );
    scenario
        .wait_until("the controller reports on the policy", SETUP, || async {
            let policy = scenario.policy("fleet").await;
            (degraded(&policy)?.0 == "NoNodesSelected").then_some(())
        })
        .await;

    // Cut the pod watch: no more list or watch on pods (delete stays), and break the open watch.
    let (index, verbs) = pods_rule(&scenario);
    set_pods_verbs(&scenario, index, &["delete".to_owned()]);
    let cut = Instant::now();
    let down = scenario
        .cluster
        .restart_apiserver()
        .await
        .expect("the kube-apiserver restarts");
    let message = scenario
        .wait_until(
            "the policy is Degraded because of the pod watch alone",
            SETUP,
            || async {
                let (reason, message) = degraded(&scenario.policy("fleet").await)?;
                (reason == "WatchFailing"
                    && message.contains("the watch of Pod objects")
                    && !message.contains("the watch of Node objects"))
                .then_some(message)
            },
        )
        .await;
    let to_degraded = cut.elapsed();
    assert!(
        message.contains("forbidden") && message.contains(&format!("longer than {STALENESS}")),
        "the condition says why: {message}"
    );
    let warned = with_reason(&scenario.client, "WatchFailing").await;
    assert!(
        warned
            .iter()
            .any(|e| note(e).contains("the watch of Pod objects")),
        "a WatchFailing Event: {warned:?}"
    );

    // Every node becomes selected: the controller sees it (the nodes' watch works) and still does
    // nothing.
    for i in 0..3 {
        patch_node(
            &scenario.client,
            &node_name(i),
            json!({ "metadata": { "labels": { "upgrade": "now" } } }),
        )
        .await;
    }
    scenario
        .wait_until("the status counts the selected nodes", SETUP, || async {
            let status = scenario.policy("fleet").await.status?;
            (status.counts.total == 3).then_some(())
        })
        .await;
    let stale_since = Instant::now();
    observe_for(Duration::from_secs(8), || async {
        let marked: Vec<String> = scenario
            .nodes()
            .await
            .iter()
            .filter(|n| has_k8sm_state(n))
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        assert!(
            marked.is_empty(),
            "nodes changed on a stale view: {marked:?}"
        );
        assert_eq!(
            scenario.live_pods().await,
            before,
            "pods moved on a stale view"
        );
        let (reason, _) = degraded(&scenario.policy("fleet").await).expect("Degraded");
        assert_eq!(reason, "WatchFailing");
    })
    .await;
    let stopped_for = stale_since.elapsed();

    // The rule comes back: the watch recovers by itself, and the upgrade goes on and finishes.
    set_pods_verbs(&scenario, index, &verbs);
    let restored = Instant::now();
    let restored_at = Utc::now();
    scenario
        .wait_until(
            "the policy is no longer Degraded by the watch",
            SETUP,
            || async {
                let (reason, _) = degraded(&scenario.policy("fleet").await)?;
                (reason != "WatchFailing").then_some(())
            },
        )
        .await;
    let to_recover = restored.elapsed();
    let deadline = Instant::now() + PROGRESS;
    loop {
        // The scheduler may exit after the apiserver's restart; kubelet would restart it.
        scenario
            .cluster
            .restart_exited()
            .expect("exited components restart");
        if scenario.upgraded_nodes().await == 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the upgrade did not finish after the watch recovered"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    scenario.wait_all_upgraded("fleet", 3, PROGRESS).await;
    let marks = with_reason(&scenario.client, "Marked").await;
    assert!(
        !marks.is_empty(),
        "the nodes were marked after the recovery"
    );
    let early: Vec<&Event> = marks
        .iter()
        .filter(|e| first_seen(e) < restored_at)
        .collect();
    assert!(
        early.is_empty(),
        "marked before the watch recovered: {early:?}"
    );
    assert!(
        !with_reason(&scenario.client, "Evicted").await.is_empty(),
        "pods were evicted after the recovery"
    );

    eprintln!(
        "[stale] apiserver down {:.1}s; Degraded (WatchFailing) {:.1}s after the cut (bound {STALENESS}); no action \
         for the {:.1}s observed with every node selected; recovered {:.1}s after the rule came back",
        down.as_secs_f64(),
        to_degraded.as_secs_f64(),
        stopped_for.as_secs_f64(),
        to_recover.as_secs_f64(),
    );
}

// ---------------------------------------------------------------------------------------------------------------
// The apiserver throttles evictions
// ---------------------------------------------------------------------------------------------------------------

/// A priority level of one share (7 of the test apiserver's 1,500 seats), lending and borrowing
/// none, that rejects what it cannot seat at once; and a FlowSchema that sends the controller's
/// `verb` calls on `resource` there, and nothing else of it.
fn starved(name: &str, verb: &str, group: &str, resource: &str) -> String {
    format!(
        "apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata:
  name: {name}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    lendablePercent: 0
    borrowingLimitPercent: 0
    limitResponse:
      type: Reject
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata:
  name: {name}
spec:
  priorityLevelConfiguration:
    name: {name}
  matchingPrecedence: 100
  distinguisherMethod:
    type: ByUser
  rules:
  - subjects:
    - kind: ServiceAccount
      serviceAccount:
        namespace: k8sm-system
        name: k8sm-controller
    resourceRules:
    - verbs: [{verb}]
      apiGroups: [\"{group}\"]
      resources: [{resource}]
      clusterScope: true
      namespaces: [\"*\"]
"
    )
}

/// Applies [`starved`] to the scenario's cluster.
fn starve(scenario: &Scenario, name: &str, verb: &str, resource: &str) {
    let rules = scenario.cluster.dir().join(format!("{name}.yaml"));
    std::fs::write(&rules, starved(name, verb, "", resource)).expect("the flow schema written");
    kubectl_ok(
        &scenario.cluster,
        &["apply", "-f", &rules.display().to_string()],
    );
}

/// Starts the controller as its deployed ServiceAccount (which the flow schemas of [`starved`]
/// match), serving metrics; its address, and the lowest call limit the controller reports while it
/// works.
fn start_sampled_controller(scenario: &mut Scenario) -> (String, LowestCallLimit) {
    let (kubeconfig, _) = scenario.deployed_controller_identity();
    let metrics_addr = format!("127.0.0.1:{}", free_port());
    scenario.start_controller_as(
        &kubeconfig,
        &[
            "--leader-elect",
            "--leader-elect-namespace=k8sm-system",
            &format!("--metrics-addr={metrics_addr}"),
        ],
    );
    let lowest = LowestCallLimit::start(&metrics_addr);
    (metrics_addr, lowest)
}

/// The lowest call limit a controller's metrics report, sampled every 100 ms until stopped.
struct LowestCallLimit {
    lowest: Arc<AtomicU64>,
    watching: Arc<AtomicBool>,
    sampler: std::thread::JoinHandle<()>,
}

impl LowestCallLimit {
    fn start(metrics_addr: &str) -> Self {
        let lowest = Arc::new(AtomicU64::new(u64::MAX));
        let watching = Arc::new(AtomicBool::new(true));
        let sampler = {
            let (lowest, watching) = (lowest.clone(), watching.clone());
            let addr = metrics_addr.to_owned();
            std::thread::spawn(move || {
                while watching.load(Ordering::Relaxed) {
                    if let Some(limit) = get(&addr, "/metrics")
                        .ok()
                        .and_then(|(_, scrape)| metric(&scrape, "k8sm_call_limit"))
                    {
                        lowest.fetch_min(limit as u64, Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        };
        Self {
            lowest,
            watching,
            sampler,
        }
    }

    fn stop(self) -> u64 {
        self.watching.store(false, Ordering::Relaxed);
        self.sampler.join().expect("the metrics sampler");
        self.lowest.load(Ordering::Relaxed)
    }
}

/// The apiserver's priority and fairness throttles the controller's evictions: web's 40 pods on one
/// node, half of which may go at once, are launched 16 at a time against 7 seats. The 429s carry no
/// budget's cause: the controller reads them as the apiserver's (never BlockedByPDB), lowers its
/// call limit, tries again soon, and finishes the node without taking web below its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_evictions_lower_the_call_limit_and_the_node_finishes() {
    const REPLICAS: u32 = 40;
    const THRESHOLD: u8 = 50;
    let mut scenario = Scenario::start(2, "throttled", "1s").await;
    let client = scenario.client.clone();
    let ns = scenario.namespace.clone();
    let held = node_name(0);
    let web = deployment(&ns, "web", REPLICAS as i32);
    scenario
        .pin_to(&held, REPLICAS as usize, || create(&client, &web))
        .await;
    starve(
        &scenario,
        "k8sm-evictions-starved",
        "create",
        "pods/eviction",
    );
    let sla = SlaWatcher::start(client.clone(), &ns, u32::from(THRESHOLD));
    sla.arm();

    let (metrics_addr, lowest) = start_sampled_controller(&mut scenario);
    scenario
        .create_policy(
            "fleet",
            ExecutorUpgradePolicySpec {
                target_executor_id: Some(scenario.new_id.clone()),
                owner_health_threshold: THRESHOLD,
                node_selector: only_node(&held),
                ..ExecutorUpgradePolicySpec::default()
            },
        )
        .await;
    let nodes: Api<Node> = Api::all(client.clone());
    let new_id = scenario.new_id.clone();
    scenario
        .wait_until(&format!("{held} is upgraded"), PROGRESS * 2, || async {
            let node = nodes.get(&held).await.ok()?;
            is_upgraded(&node, &new_id).then_some(())
        })
        .await;
    let (_, scrape) = get(&metrics_addr, "/metrics").expect("the controller's metrics");
    let lowest = lowest.stop();
    let throttled = metric(&scrape, "k8sm_calls_throttled_total").unwrap_or_default();
    eprintln!("[throttled] {throttled} evictions throttled; call limit down to {lowest}");
    assert!(
        throttled > 0.0,
        "the apiserver throttled evictions: {scrape}"
    );
    assert!(lowest < 16, "the call limit came down from 16: {lowest}");
    assert!(
        scenario.events("BlockedByPDB").await.is_empty(),
        "a 429 of priority and fairness is not a budget's refusal"
    );
    assert_within_bounds(&sla, THRESHOLD, &[("Deployment", "web", REPLICAS)]);
}

/// The apiserver's priority and fairness throttles the controller's node writes: 24 empty nodes,
/// all of which may drain at once, are marked, admitted, told to restart and completed, each
/// batch's patches at once against 7 seats. The throttled writes lower the call limit (the width of
/// the next batches) and are tried again, and every node is upgraded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_node_writes_lower_the_call_limit_and_every_node_finishes() {
    const NODES: usize = 24;
    let mut scenario = Scenario::start(NODES, "throttled-writes", "1s").await;
    starve(&scenario, "k8sm-node-writes-starved", "patch", "nodes");
    let (_, lowest) = start_sampled_controller(&mut scenario);
    scenario
        .create_policy(
            "fleet",
            ExecutorUpgradePolicySpec {
                target_executor_id: Some(scenario.new_id.clone()),
                max_concurrent_nodes: MaxConcurrentNodes::Percent(100),
                ..ExecutorUpgradePolicySpec::default()
            },
        )
        .await;
    let nodes: Api<Node> = Api::all(scenario.client.clone());
    let new_id = scenario.new_id.clone();
    scenario
        .wait_until("every node is upgraded", PROGRESS * 2, || async {
            let list = nodes.list(&Default::default()).await.ok()?;
            (list.items.len() == NODES && list.items.iter().all(|n| is_upgraded(n, &new_id)))
                .then_some(())
        })
        .await;
    let lowest = lowest.stop();
    eprintln!("[throttled writes] call limit down to {lowest}");
    assert!(
        lowest < 16,
        "throttled node writes brought the call limit down from 16: {lowest}"
    );
}
