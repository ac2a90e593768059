//! Leader election under faults (docs/design.md §9): two replicas with `--leader-elect` and a 6 s
//! Lease (renew deadline 4 s, the default two thirds) on a real cluster, mid-upgrade. Whether the
//! leader is frozen, stopped or delayed, the standby takes over, no write of the old leader lands
//! after its term, and the upgrade completes. The measured takeover times are printed: run with
//! `--nocapture`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;
use kube::{Api, Client};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

use k8sm_api::ExecutorUpgradePolicySpec;
use k8sm_e2e::admission::wait_refused;
use k8sm_e2e::audit_log;
use k8sm_e2e::delaying_proxy::DelayingProxy;
use k8sm_e2e::events::{ACTIONS, CONTROLLER, first_seen, k8sm_events, last_seen, utc};
use k8sm_e2e::kubectl_ok;
use k8sm_e2e::scenario::Scenario;
use k8sm_e2e::workloads::{create, deployment};
use k8sm_testcluster::ClusterOptions;

const LEASE: Duration = Duration::from_secs(6);
/// The controller's default renew deadline for a 6 s Lease: how long after its last renewal the
/// leader may act.
const RENEW_DEADLINE: Duration = Duration::from_secs(4);
const LEASE_NAMESPACE: &str = "k8sm-system";
const LEASE_NAME: &str = "k8sm-controller";
const ELECTION: [&str; 3] = [
    "--leader-elect",
    "--leader-elect-namespace=k8sm-system",
    "--leader-elect-lease-duration=6s",
];
/// controller-0 runs as the deployed ServiceAccount; controller-1 as the cluster's admin.
const LEADER_USER: &str = "system:serviceaccount:k8sm-system:k8sm-controller";
const LEADER: &str = "controller-0";
const STANDBY: &str = "controller-1";
const POLICY: &str = "fleet";
/// The admission policy that refuses the frozen leader's writes, and what its refusals say.
const TRIPWIRE: &str = "leadership-tripwire";
const UPGRADE: Duration = Duration::from_secs(240);

// ---------------------------------------------------------------------------------------------------------------
// The leader frozen for twice the lease duration
// ---------------------------------------------------------------------------------------------------------------

/// The leader frozen with SIGSTOP for twice the lease duration, then resumed with SIGCONT: the
/// standby takes over while it is frozen; the frozen leader writes nothing after its deadline —
/// none of its Events (they carry the reporting replica and the time) is later than the freeze
/// plus the renew deadline, and no write of its reaches the apiserver after the freeze (a
/// ValidatingAdmissionPolicy armed during the freeze refuses every write of the leader's
/// ServiceAccount but its Lease calls, and such a refusal would be in the leader's log); its log
/// says it found its deadline passed; the two replicas' spans of Events do not overlap; no pod is
/// evicted twice; the upgrade completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_frozen_past_its_deadline_takes_no_action_and_the_standby_takes_over() {
    const NODES: usize = 10;
    let pair = Pair::start("frozen", NODES, 8, "3s").await;
    pair.create_policy(1).await;

    // Freeze the leader right after it reported an action of the drain, so it is likely in the
    // middle of a pass.
    pair.scenario
        .wait_until("the leader drains a node", UPGRADE, || async {
            pair.actions_of(LEADER)
                .await
                .iter()
                .any(|e| matches!(e.reason.as_deref(), Some("Admitted" | "Evicted")))
                .then_some(())
        })
        .await;
    let leader = pair.scenario.controllers[0].pid();
    kill(Pid::from_raw(leader as i32), Signal::SIGSTOP).expect("SIGSTOP");
    let stopped = Instant::now();
    let stopped_at = Utc::now();
    pair.arm_tripwire().await;
    let armed = stopped.elapsed();
    let acquired_at = pair.wait_holder(STANDBY).await;
    tokio::time::sleep((LEASE * 2).saturating_sub(stopped.elapsed())).await;
    // From here on, whatever the leader logs, it logs after it wakes.
    let log_before_resume = std::fs::read_to_string(&pair.scenario.controllers[0].log)
        .expect("the leader's log")
        .len();
    kill(Pid::from_raw(leader as i32), Signal::SIGCONT).expect("SIGCONT");
    let resumed_at = Utc::now();
    let frozen = stopped.elapsed();

    pair.wait_upgraded(NODES).await;
    pair.scenario.controllers[0].assert_running();
    pair.scenario.controllers[1].assert_running();

    let spans = pair.spans().await;
    let leader_span = spans.get(LEADER).copied().expect("the leader's Events");
    let standby_span = spans.get(STANDBY).copied().expect("the standby's Events");
    let standby_first_action = pair.first_action(STANDBY).await.expect("the standby acted");
    let deadline_bound = stopped_at + RENEW_DEADLINE;
    let rel = |t: DateTime<Utc>| (t - stopped_at).num_milliseconds() as f64 / 1000.0;
    eprintln!(
        "[frozen] leader SIGSTOPped for {:.1}s (tripwire armed after {:.1}s); standby acquired the Lease {:+.2}s and \
         first acted {:+.2}s after the SIGSTOP",
        frozen.as_secs_f64(),
        armed.as_secs_f64(),
        rel(acquired_at),
        rel(standby_first_action)
    );
    for (who, span) in &spans {
        eprintln!(
            "[frozen] {who}: {} Events, from {:+.2}s to {:+.2}s relative to the SIGSTOP (resumed at {:+.2}s)",
            span.count,
            rel(span.first),
            rel(span.last),
            rel(resumed_at)
        );
    }

    // The frozen leader did nothing after its deadline: not after it woke, nor after the latest its
    // deadline can be.
    assert!(
        leader_span.last <= deadline_bound,
        "the frozen leader reported an Event at {} (SIGSTOP at {stopped_at}, resumed at {resumed_at}): after its \
         deadline, at the latest {deadline_bound}",
        leader_span.last
    );
    let log = std::fs::read_to_string(&pair.scenario.controllers[0].log).expect("the leader's log");
    assert!(
        !log.contains(TRIPWIRE),
        "a write of the frozen leader reached the apiserver after the SIGSTOP:\n{}",
        pair.scenario.controllers[0].log_tail(40)
    );
    let woke = &log[log_before_resume..];
    assert!(
        woke.contains("deadline passed"),
        "the leader's log says on waking that its deadline passed:\n{woke}"
    );
    // The standby took over while the leader was frozen, and the two never acted at the same time.
    assert!(
        acquired_at > stopped_at && standby_first_action < resumed_at,
        "the standby acquired the Lease at {acquired_at} and first acted at {standby_first_action}; the leader was \
         frozen from {stopped_at} to {resumed_at}"
    );
    assert!(
        leader_span.last < standby_span.first,
        "the replicas' Events overlap in time: {spans:?}"
    );
    assert_eq!(
        spans.len(),
        2,
        "Events from the two replicas only: {spans:?}"
    );
    let twice: Vec<_> = pair
        .scenario
        .evictions_per_pod()
        .await
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .collect();
    assert!(twice.is_empty(), "pods evicted more than once: {twice:?}");
}

// ---------------------------------------------------------------------------------------------------------------
// The leader stopped with SIGTERM
// ---------------------------------------------------------------------------------------------------------------

/// The leader SIGTERMed as work appears: it releases the Lease on its way out and the standby
/// takes it before it could have expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_sigtermed_releases_the_lease_and_the_standby_takes_it_before_it_expires() {
    const NODES: usize = 4;
    let pair = Pair::start("sigterm", NODES, 4, "1s").await;
    // A rollout of the controller as work comes in: the policy appears as the leader is told to
    // stop, so the next leader has work from the moment it leads.
    let leader = pair.scenario.controllers[0].pid();
    // The Lease as last renewed before the SIGTERM: had the leader not released it, nobody could
    // take it before this renewal plus the lease duration (a renewal after this read only
    // pushes that later).
    let renewed = pair.renew_time().await;
    kill(Pid::from_raw(leader as i32), Signal::SIGTERM).expect("SIGTERM");
    let sigterm_at = Utc::now();
    pair.create_policy(4).await;

    let first_action = pair
        .scenario
        .wait_until("the standby acts", UPGRADE, || pair.first_action(STANDBY))
        .await;
    let status = pair.scenario.controllers[0]
        .wait_exit(Duration::from_secs(20))
        .unwrap_or_else(|| {
            panic!(
                "the leader did not exit after SIGTERM:\n{}",
                pair.scenario.controllers[0].log_tail(20)
            )
        });
    let acquired_at = pair.wait_holder(STANDBY).await;
    let takeover = (first_action - sigterm_at).to_std().unwrap_or_default();
    eprintln!(
        "[sigterm] leader SIGTERMed: standby acquired the Lease {:.2}s and first acted {:.2}s after the SIGTERM",
        (acquired_at - sigterm_at).num_milliseconds() as f64 / 1000.0,
        takeover.as_secs_f64()
    );
    assert!(status.success(), "the leader exits cleanly: {status}");
    let log = pair.scenario.controllers[0].log_tail(usize::MAX);
    assert!(
        log.contains("released the Lease"),
        "the leader says it released the Lease:\n{log}"
    );
    // Released, not expired. How soon the standby acts is printed, never asserted: a loaded machine
    // stretches it.
    let expiry = renewed + chrono::Duration::from_std(LEASE).expect("a short lease");
    assert!(
        acquired_at < expiry,
        "the standby acquired the Lease at {acquired_at}, not before it could expire at {expiry}: not released"
    );
    // Whatever the old leader still did before it stopped came before the new leader's first write.
    let spans = pair.spans().await;
    if let (Some(old), Some(new)) = (spans.get(LEADER), spans.get(STANDBY)) {
        assert!(
            old.last < new.first,
            "the replicas' Events overlap: {spans:?}"
        );
    }
    pair.wait_upgraded(NODES).await;
    pair.scenario.controllers[1].assert_running();
}

// ---------------------------------------------------------------------------------------------------------------
// The leader's requests delayed beyond the lease
// ---------------------------------------------------------------------------------------------------------------

/// The users the two replicas authenticate as in the delayed-leader test (client certificates), so
/// that the audit log tells their requests apart.
const LEADER_CERT_USER: &str = "k8sm-leader";
const STANDBY_CERT_USER: &str = "k8sm-standby";
/// How long the path from the leader to the apiserver holds each request: well beyond the lease
/// (the standby has taken over when a request sent at the delay's start arrives), and below the
/// 15 s a request's I/O may take (docs/design.md §9), so that a write not abandoned at its write
/// timeout would land.
const PATH_DELAY: Duration = Duration::from_secs(10);
/// What a replica creates or writes that changes nothing of the cluster's workloads: its permission
/// checks, and the Lease (whose writes carry the resourceVersion they read, so an old holder's late
/// write is refused anyway).
const CHECKS_AND_LEASES: [&str; 2] = ["selfsubjectaccessreviews", "leases"];

/// The leader's requests delayed beyond the lease mid-upgrade (a TCP proxy holds what it sends;
/// answers come back at once, so it goes on acting on a live view): the standby takes over, and
/// none of the old leader's writes reaches the apiserver after the standby's first write, by the
/// apiserver's audit log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_delayed_beyond_the_lease_lands_no_write_after_the_standby_takes_over() {
    const NODES: usize = 10;
    const NS: &str = "delayed";
    let audit_dir = std::env::temp_dir().join(format!("k8sm-e2e-delayed-{}", std::process::id()));
    let (apiserver_args, audit_path) =
        audit_log::apiserver_args(&audit_dir, &[LEADER_CERT_USER, STANDBY_CERT_USER]);
    let mut options = ClusterOptions::default().with_nodes(NODES);
    options.apiserver_args = apiserver_args;
    options.users = vec![LEADER_CERT_USER.to_owned(), STANDBY_CERT_USER.to_owned()];
    let mut scenario = Scenario::start_with_options(options, NS, "3s", &[]).await;
    scenario
        .cluster
        .create_namespace(LEASE_NAMESPACE)
        .await
        .expect("the Lease's namespace");
    for name in ["web", "api", "db"] {
        create(&scenario.client, &deployment(NS, name, 8)).await;
    }
    scenario.wait_ready(24).await;

    // controller-0 talks to the apiserver through the proxy; controller-1 directly.
    let upstream = scenario
        .cluster
        .server()
        .trim_start_matches("https://")
        .parse()
        .expect("the apiserver's address");
    let proxy = DelayingProxy::start(upstream);
    let direct = scenario
        .cluster
        .user_kubeconfig(LEADER_CERT_USER)
        .expect("the leader's kubeconfig");
    let through_proxy = scenario
        .cluster
        .dir()
        .join("leader-through-proxy.kubeconfig");
    let text = std::fs::read_to_string(&direct).expect("the kubeconfig");
    std::fs::write(
        &through_proxy,
        text.replace(
            scenario.cluster.server(),
            &format!("https://{}", proxy.address()),
        ),
    )
    .expect("a kubeconfig through the proxy");
    scenario.start_controller_as(&through_proxy, &ELECTION);
    let leases = Api::namespaced(scenario.client.clone(), LEASE_NAMESPACE);
    let mut pair = Pair { scenario, leases };
    pair.wait_holder(LEADER).await;
    let standby = pair
        .scenario
        .cluster
        .user_kubeconfig(STANDBY_CERT_USER)
        .expect("the standby's kubeconfig");
    pair.scenario.start_controller_as(&standby, &ELECTION);
    pair.wait_standby().await;
    pair.create_policy(NODES as u32).await;

    // Delay the leader's path right after one of its actions is reported, while its writes go on.
    let before = pair
        .scenario
        .wait_until("the leader drains", UPGRADE, || async {
            let actions = pair.actions_of(LEADER).await;
            (!actions.is_empty()).then_some(actions.len())
        })
        .await;
    pair.scenario
        .wait_until("the leader reports another action", UPGRADE, || async {
            (pair.actions_of(LEADER).await.len() > before).then_some(())
        })
        .await;
    proxy.delay_requests(PATH_DELAY);
    let delayed_at = Utc::now();
    let acquired_at = pair.wait_holder(STANDBY).await;
    pair.wait_upgraded(NODES).await;
    // Whatever the path still held of the leader's has arrived or been dropped by now.
    let held_until =
        delayed_at + chrono::Duration::from_std(PATH_DELAY + Duration::from_secs(2)).unwrap();
    if let Ok(left) = (held_until - Utc::now()).to_std() {
        tokio::time::sleep(left).await;
    }

    let requests = audit_log::read(&audit_path);
    // The standby's first write as the leader: the Lease it acquired (its start-up permission
    // checks came before).
    let standby_first = requests
        .iter()
        .filter(|r| {
            r.user == STANDBY_CERT_USER && r.writes() && r.resource == "leases" && r.succeeded()
        })
        .min_by_key(|r| r.received)
        .expect("the standby acquired the Lease")
        .clone();
    let leader_writes: Vec<_> = requests
        .iter()
        .filter(|r| {
            r.user == LEADER_CERT_USER
                && r.writes()
                && !CHECKS_AND_LEASES.contains(&r.resource.as_str())
        })
        .collect();
    let late: Vec<_> = leader_writes
        .iter()
        .filter(|r| r.received > standby_first.received)
        .collect();
    let log = pair.scenario.controllers[0].log_tail(usize::MAX);
    let abandoned = log.matches("no answer within the write timeout").count();
    let refused = log.matches("not the leader for long enough").count();
    let rel = |t: DateTime<Utc>| (t - delayed_at).num_milliseconds() as f64 / 1000.0;
    eprintln!(
        "[delayed] leader's requests delayed by {PATH_DELAY:?}; standby acquired the Lease {:+.2}s (its first write \
         {} {} received {:+.2}s); leader: {} writes before, {} after the standby's first write; {abandoned} \
         abandoned at the write timeout, {refused} not started for lack of term",
        rel(acquired_at),
        standby_first.verb,
        standby_first.resource,
        rel(standby_first.received),
        leader_writes.len() - late.len(),
        late.len(),
    );
    assert!(
        late.is_empty(),
        "writes of the old leader reached the apiserver after the standby's first write ({} received at {}): {late:#?}",
        standby_first.resource,
        standby_first.received
    );
    let twice: Vec<_> = pair
        .scenario
        .evictions_per_pod()
        .await
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .collect();
    assert!(twice.is_empty(), "pods evicted more than once: {twice:?}");
    pair.scenario.controllers[1].assert_running();
    let _ = std::fs::remove_dir_all(&audit_dir);
}

// ---------------------------------------------------------------------------------------------------------------
// Two replicas
// ---------------------------------------------------------------------------------------------------------------

/// Per reporting replica: how many Events, the first one's time and the last one's.
#[derive(Debug, Clone, Copy)]
struct Span {
    count: usize,
    first: DateTime<Utc>,
    last: DateTime<Utc>,
}

struct Pair {
    scenario: Scenario,
    leases: Api<Lease>,
}

impl Pair {
    /// `nodes` KWOK nodes (their executors come back `restart_delay` after a kamikaze), a
    /// Deployment `web` of `replicas` Ready pods, and two controllers electing a leader on a 6
    /// s Lease: controller-0, the leader, authenticated as the deployed ServiceAccount
    /// (deploy/rbac.yaml), and controller-1, a standby with synced caches, as the cluster
    /// admin.
    async fn start(namespace: &str, nodes: usize, replicas: i32, restart_delay: &str) -> Self {
        let mut scenario = Scenario::start(nodes, namespace, restart_delay).await;
        let (kubeconfig, _) = scenario.deployed_controller_identity();
        create(&scenario.client, &deployment(namespace, "web", replicas)).await;
        scenario.wait_ready(replicas as usize).await;
        scenario.start_controller_as(&kubeconfig, &ELECTION);
        let leases = Api::namespaced(scenario.client.clone(), LEASE_NAMESPACE);
        let mut pair = Self { scenario, leases };
        pair.wait_holder(LEADER).await;
        pair.scenario.start_controller(&ELECTION);
        pair.wait_standby().await;
        pair
    }

    /// Waits until controller-1 is up as a standby, its caches synced.
    async fn wait_standby(&self) {
        self.scenario
            .wait_until(
                "controller-1 is up as a standby",
                Duration::from_secs(60),
                || async {
                    let log = std::fs::read_to_string(&self.scenario.controllers[1].log).ok()?;
                    log.contains("caches synced").then_some(())
                },
            )
            .await;
    }

    async fn create_policy(&self, slots: u32) {
        let spec = ExecutorUpgradePolicySpec {
            owner_health_threshold: 60,
            ..self.scenario.policy_spec(slots)
        };
        self.scenario.create_policy(POLICY, spec).await;
    }

    /// Waits until `who` holds the Lease; when it acquired it (its acquireTime).
    async fn wait_holder(&self, who: &str) -> DateTime<Utc> {
        self.scenario
            .wait_until(&format!("{who} holds the Lease"), UPGRADE, || async {
                let spec = self.leases.get_opt(LEASE_NAME).await.ok()??.spec?;
                (spec.holder_identity.as_deref() == Some(who))
                    .then(|| spec.acquire_time.map(|t| utc(&t.0)))
                    .flatten()
            })
            .await
    }

    /// The Lease's last renewal.
    async fn renew_time(&self) -> DateTime<Utc> {
        let spec = self.leases.get(LEASE_NAME).await.expect("the Lease").spec;
        let renewed = spec.and_then(|s| s.renew_time).expect("a renewed Lease");
        utc(&renewed.0)
    }

    /// Waits until all `nodes` run the new executor and carry no upgrade state.
    async fn wait_upgraded(&self, nodes: usize) {
        self.scenario
            .wait_until("every node is upgraded", UPGRADE, || async {
                (self.scenario.upgraded_nodes().await == nodes).then_some(())
            })
            .await;
    }

    /// The Events of executed actions that `who` reported.
    async fn actions_of(&self, who: &str) -> Vec<Event> {
        let mut events = k8sm_events(&self.scenario.client).await;
        events.retain(|e| {
            e.reporting_instance.as_deref() == Some(who)
                && ACTIONS.contains(&e.reason.as_deref().unwrap_or_default())
        });
        events
    }

    /// When `who` first reported an executed action.
    async fn first_action(&self, who: &str) -> Option<DateTime<Utc>> {
        self.actions_of(who).await.iter().map(first_seen).min()
    }

    /// Per replica, the span of every Event it reported (an Event repeated is one object with a
    /// series: its last occurrence counts).
    async fn spans(&self) -> BTreeMap<String, Span> {
        let mut spans: BTreeMap<String, Span> = BTreeMap::new();
        for event in k8sm_events(&self.scenario.client).await {
            assert_eq!(event.reporting_controller.as_deref(), Some(CONTROLLER));
            let who = event.reporting_instance.clone().unwrap_or_default();
            let first = first_seen(&event);
            let last = last_seen(&event);
            spans
                .entry(who)
                .and_modify(|span| {
                    span.count += 1;
                    span.first = span.first.min(first);
                    span.last = span.last.max(last);
                })
                .or_insert(Span {
                    count: 1,
                    first,
                    last,
                });
        }
        spans
    }

    /// Refuses, from now on, every write of controller-0's ServiceAccount but those to its Lease;
    /// returns once a server-side dry run as that account is refused.
    async fn arm_tripwire(&self) {
        let path = self.scenario.cluster.dir().join("tripwire.yaml");
        std::fs::write(&path, tripwire()).expect("tripwire written");
        kubectl_ok(
            &self.scenario.cluster,
            &["apply", "-f", path.to_str().expect("a UTF-8 path")],
        );
        // A server-side dry run of a write as that account (impersonated by the admin): refused
        // once armed.
        let mut config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(self.scenario.cluster.kubeconfig())
                .expect("kubeconfig"),
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .expect("a client configuration");
        config.auth_info.impersonate = Some(LEADER_USER.to_owned());
        let nodes: Api<Node> = Api::all(Client::try_from(config).expect("a client"));
        let probe = json!({ "metadata": { "annotations": { "tripwire.k8sm.test/probe": "1" } } });
        let (timeout, every) = (Duration::from_secs(30), Duration::from_millis(200));
        wait_refused(&nodes, "node-0000", &probe, TRIPWIRE, timeout, every).await;
    }
}

/// A ValidatingAdmissionPolicy and its binding refusing every write of [`LEADER_USER`] to what the
/// controller writes (nodes, pods, evictions, policies and their status, Events), so that any such
/// write shows in its log.
fn tripwire() -> String {
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {TRIPWIRE}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [""]
        apiVersions: ["*"]
        operations: [CREATE, UPDATE, DELETE]
        resources: [nodes, nodes/status, pods, pods/eviction, pods/status, events]
      - apiGroups: [events.k8s.io]
        apiVersions: ["*"]
        operations: [CREATE, UPDATE, DELETE]
        resources: [events]
      - apiGroups: [k8s.mesosphere.io]
        apiVersions: ["*"]
        operations: [CREATE, UPDATE, DELETE]
        resources: [executorupgradepolicies, executorupgradepolicies/status]
  validations:
    - expression: "request.userInfo.username != '{LEADER_USER}'"
      message: "{TRIPWIRE}: a write of the frozen leader"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {TRIPWIRE}
spec:
  policyName: {TRIPWIRE}
  validationActions: [Deny]
"#
    )
}
