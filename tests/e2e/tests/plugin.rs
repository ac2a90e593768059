//! The kubectl plugin as an operator uses it: the cluster's real kubectl runs `kubectl k8sm …` (the
//! plugin found on `PATH`) during live upgrades. `plan` names the controller's first wave before
//! the start, `upgrade status --watch` follows the upgrade to its end, `blocked` lists exactly the
//! pods that hold nodes, `force` unblocks them, `pause` stops progress and `resume` restarts it;
//! mistakes get one sentence that says how to fix them.

use std::collections::BTreeSet;
use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use serde_json::Value;

use k8sm_api::{
    ExecutorIdentity, ExecutorUpgradePolicy, ExecutorUpgradePolicySpec, UnmanagedPodPolicy,
    UnmanagedPods, binary_sha256_of, keys,
};
use k8sm_e2e::connect_proxy::ConnectProxy;
use k8sm_e2e::plugin::{
    blocked_rows, complete, k8sm, k8sm_exits, k8sm_fails, k8sm_ok, kubectl_with_plugin,
};
use k8sm_e2e::scenario::{Scenario, executor_id};
use k8sm_e2e::workloads::{create, deployment, unmanaged_pod};
use k8sm_e2e::{install_crd, kubectl_ok};
use k8sm_testcluster::{ClusterOptions, TestCluster, node_name};

fn cordon(scenario: &Scenario, nodes: &[usize], on: bool) {
    for &i in nodes {
        kubectl_ok(
            &scenario.cluster,
            &[if on { "cordon" } else { "uncordon" }, &node_name(i)],
        );
    }
}

/// Events of `reason` about pods, oldest first, as "namespace/name".
async fn pod_events(scenario: &Scenario, reason: &str) -> Vec<(Event, String)> {
    let mut events: Vec<(Event, String)> = scenario
        .events(reason)
        .await
        .into_iter()
        .filter_map(|e| {
            let r = e.regarding.as_ref()?;
            let pod = format!("{}/{}", r.namespace.as_deref()?, r.name.as_deref()?);
            Some((e, pod))
        })
        .collect();
    events.sort_by_key(|(e, _)| e.event_time.as_ref().map(|t| t.0));
    events
}

/// The pods a plan (`-o json`) evicts now, as "namespace/name".
fn planned_evictions(plan: &Value) -> BTreeSet<String> {
    plan["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .flat_map(|n| n["pods"].as_array().cloned().unwrap_or_default())
        .filter(|p| p["decision"] == "Evict")
        .map(|p| {
            format!(
                "{}/{}",
                p["namespace"].as_str().unwrap(),
                p["name"].as_str().unwrap()
            )
        })
        .collect()
}

const WEB_MIN_READY_SECONDS: i32 = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_names_the_first_wave_and_status_follows_the_upgrade_to_the_end() {
    const NS: &str = "shop";
    let mut scenario = Scenario::start(4, NS, "2s").await;
    let client = scenario.client.clone();
    // node-0000: both pods of `web` (2 replicas, so one may go at a time) and the only pod of
    // `api`; the other nodes three unmanaged pods each. Equal pod counts: the admission queue
    // takes node-0000 first, by name. `web` counts a pod only after 5 s Ready: KWOK readies a
    // replacement within a pass, which would let web's second pod join the first wave.
    cordon(&scenario, &[1, 2, 3], true);
    let mut web = deployment(NS, "web", 2);
    if let Some(spec) = web.spec.as_mut() {
        spec.min_ready_seconds = Some(WEB_MIN_READY_SECONDS);
    }
    create(&client, &web).await;
    create(&client, &deployment(NS, "api", 1)).await;
    scenario.wait_ready(3).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    scenario
        .wait_until(
            "web's 2 pods are available",
            Duration::from_secs(60),
            || async {
                let status = deployments.get_status("web").await.ok()?.status?;
                (status.available_replicas == Some(2)).then_some(())
            },
        )
        .await;
    cordon(&scenario, &[1, 2, 3], false);
    for node in 1..4 {
        for i in 0..3 {
            create(
                &client,
                &unmanaged_pod(NS, &format!("filler-{node}-{i}"), &node_name(node), &[]),
            )
            .await;
        }
    }
    scenario.wait_ready(12).await;
    assert!(
        scenario
            .pods()
            .await
            .iter()
            .filter(|p| p
                .labels()
                .get("app")
                .is_some_and(|a| a == "web" || a == "api"))
            .all(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some("node-0000")),
        "web and api run on node-0000"
    );

    scenario.start_controller(&[]);
    scenario
        .create_policy(
            "fleet",
            ExecutorUpgradePolicySpec {
                unmanaged_pods: UnmanagedPods {
                    policy: UnmanagedPodPolicy::Delete,
                    timeout: None,
                },
                ..ExecutorUpgradePolicySpec::default()
            },
        )
        .await;
    // Without a target every node counts as compatible: status says so, and the plugin says it is
    // done.
    scenario
        .wait_until(
            "the controller reports on the policy",
            Duration::from_secs(60),
            || async {
                let status = scenario.policy("fleet").await.status?;
                (status.observed_generation == Some(1) && status.counts.total == 4).then_some(())
            },
        )
        .await;
    let cluster = &scenario.cluster;
    assert!(k8sm_ok(cluster, &["upgrade", "status"]).contains("4/4 nodes upgraded (100%), done"));

    // The dry run, before the start.
    let new_id = scenario.new_id.clone();
    let plan: Value =
        serde_json::from_str(&k8sm_ok(cluster, &["plan", "--to", &new_id, "-o", "json"]))
            .expect("plan JSON");
    assert_eq!(plan["simulatedTarget"], true);
    assert_eq!(
        plan["nodes"][0]["name"], "node-0000",
        "node-0000 goes first: {plan:#}"
    );
    let first_wave = planned_evictions(&plan);
    assert_eq!(
        first_wave.len(),
        2,
        "one pod of web and the pod of api: {plan:#}"
    );
    assert!(
        first_wave.iter().any(|p| p.starts_with("shop/api-")),
        "{first_wave:?}"
    );
    let waits: Vec<&Value> = plan["nodes"][0]["pods"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["decision"] == "Wait")
        .collect();
    assert_eq!(waits.len(), 1, "the other pod of web waits: {plan:#}");
    assert_eq!(waits[0]["reason"], "WaitingForOwner");
    let human = k8sm_ok(cluster, &["plan", "--to", &new_id]);
    for pod in &first_wave {
        let line = human
            .lines()
            .find(|l| l.contains(pod.as_str()))
            .unwrap_or_default();
        assert!(line.contains("evict now"), "{pod} in:\n{human}");
    }
    assert!(human.contains("wait: workload Deployment web "), "{human}");
    assert!(
        human.contains("This pass: mark 4 nodes, admit or cordon 1 node, evict 2 pods"),
        "{human}"
    );
    assert!(
        scenario.events("Evicted").await.is_empty(),
        "plan changes nothing"
    );
    assert_eq!(scenario.policy("fleet").await.spec.target_executor_id, None);

    // The start, followed by a watch until the end.
    let started = k8sm_ok(cluster, &["upgrade", "start", "--to", &new_id]);
    assert!(
        started.contains("ExecutorUpgradePolicy fleet now targets"),
        "{started}"
    );
    let watch = watch_until_done(cluster, Duration::from_secs(300));

    // The controller's first wave is exactly what plan said: its first two eviction attempts. An
    // attempt the apiserver refused (busy, under a loaded CI machine) is reported too, and
    // tried again later, maybe after the other pod of `web` went: the first attempts, not the
    // first successes, are the wave.
    let mut attempts = Vec::new();
    for reason in ["Evicted", "ActionFailed", "BlockedByPDB"] {
        attempts.extend(
            pod_events(&scenario, reason)
                .await
                .into_iter()
                .filter_map(|(e, pod)| {
                    let at = e.event_time.map(|t| t.0)?;
                    (pod.starts_with("shop/web-") || pod.starts_with("shop/api-"))
                        .then_some((at, reason, pod))
                }),
        );
    }
    attempts.sort();
    let mut first = BTreeSet::new();
    for (_, _, pod) in &attempts {
        if first.len() < 2 {
            first.insert(pod.clone());
        }
    }
    let attempts: Vec<String> = attempts
        .iter()
        .map(|(at, reason, pod)| format!("{at} {reason} {pod}"))
        .collect();
    assert_eq!(
        first,
        first_wave,
        "the eviction attempts, oldest first:\n{}",
        attempts.join("\n")
    );

    // The watch saw progress move, node by node, and end at 4/4.
    // Frames start with the policy's name; the first ones may still show the status of the spec
    // before the start.
    let frames: Vec<&str> = watch
        .split("Policy:")
        .filter(|f| !f.trim().is_empty())
        .collect();
    let current: Vec<&str> = frames
        .iter()
        .copied()
        .filter(|f| !f.contains("has not caught up yet"))
        .collect();
    let progress: Vec<u32> = current
        .iter()
        .filter_map(|f| {
            f.split_once("/4 nodes upgraded")?
                .0
                .rsplit(' ')
                .next()?
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(
        progress.len(),
        current.len(),
        "every frame has a progress line:\n{watch}"
    );
    assert_eq!(progress.last(), Some(&4), "ends at 4/4:\n{watch}");
    assert!(
        progress.windows(2).all(|w| w[0] <= w[1]),
        "never goes back: {progress:?}"
    );
    let distinct: BTreeSet<u32> = progress.iter().copied().collect();
    assert!(
        distinct.len() >= 3,
        "progress moved through several values: {progress:?}\n{watch}"
    );
    assert!(
        watch
            .lines()
            .any(|l| l.starts_with("node-") && l.contains("KamikazeSent")),
        "a node table showed a node restarting:\n{watch}"
    );

    let status = k8sm_ok(cluster, &["upgrade", "status"]);
    assert!(
        status.contains("4/4 nodes upgraded (100%), done"),
        "{status}"
    );
    let json: Value =
        serde_json::from_str(&k8sm_ok(cluster, &["upgrade", "status", "-o", "json"])).unwrap();
    assert_eq!(
        (
            json["upgraded"].as_u64(),
            json["total"].as_u64(),
            json["done"].as_bool()
        ),
        (Some(4), Some(4), Some(true))
    );
    assert_eq!(json["targetExecutorId"], new_id);

    // --all lists every node of the policy, -l only those the apiserver says its query selects.
    let rows = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with("node-"))
            .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
            .collect()
    };
    let all = k8sm_ok(cluster, &["upgrade", "status", "--all"]);
    assert_eq!(
        rows(&all),
        (0..4)
            .map(|i| format!("{} Compatible", node_name(i)))
            .collect::<Vec<_>>(),
        "{all}"
    );
    let selector = format!(
        "kubernetes.io/hostname in ({},{})",
        node_name(1),
        node_name(3)
    );
    let some = k8sm_ok(cluster, &["upgrade", "status", "--all", "-l", &selector]);
    assert_eq!(
        rows(&some),
        [
            format!("{} Compatible", node_name(1)),
            format!("{} Compatible", node_name(3))
        ],
        "{some}"
    );
    assert!(
        some.contains(&format!("Selector: {selector}: 2 nodes of the policy's\n")),
        "{some}"
    );
    // The watch renders the same from its caches of the policy and the selected nodes, and ends at
    // once: done.
    let watched = k8sm_ok(
        cluster,
        &["upgrade", "status", "--watch", "--all", "-l", &selector],
    );
    assert_eq!(watched, some);
    let plan_of_one = k8sm_ok(
        cluster,
        &[
            "plan",
            "-o",
            "json",
            "-l",
            &format!("kubernetes.io/hostname={}", node_name(2)),
        ],
    );
    let plan_of_one: Value = serde_json::from_str(&plan_of_one).unwrap();
    let planned: Vec<&str> = plan_of_one["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter_map(|n| n["name"].as_str())
        .collect();
    assert_eq!(planned, [node_name(2)]);
    // A query the apiserver cannot read is refused in its words.
    let bad = k8sm(cluster, &["upgrade", "status", "-l", "a b"]);
    assert!(
        !bad.success && bad.stderr.contains("listing nodes"),
        "{}",
        bad.stderr
    );
}

/// Runs `kubectl k8sm upgrade status --watch` until it exits by itself; panics with its output
/// after `timeout`.
/// kubectl's habits, for scripts and shells, while node-0001 (unmanaged pod `debug`, policy Never)
/// and node-0002 (opted-out pod `pinned`) are Blocked: exit statuses, `-o name`, `-o jsonpath`,
/// custom columns, `-n`/`-A`, and `kubectl k8sm <TAB>` completing names from the cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_and_shells_get_kubectls_habits() {
    const NS: &str = "ops";
    let mut scenario = Scenario::start(3, NS, "2s").await;
    let client = scenario.client.clone();
    create(&client, &unmanaged_pod(NS, "debug", &node_name(1), &[])).await;
    create(
        &client,
        &unmanaged_pod(
            NS,
            "pinned",
            &node_name(2),
            &[(keys::UPGRADE_OPT_OUT_LABEL, "true")],
        ),
    )
    .await;
    scenario.wait_ready(2).await;
    scenario.start_controller(&[]);
    scenario
        .create_policy(
            "fleet",
            ExecutorUpgradePolicySpec {
                target_executor_id: Some(scenario.new_id.clone()),
                ..ExecutorUpgradePolicySpec::default()
            },
        )
        .await;
    scenario
        .wait_until(
            "two nodes are Blocked",
            Duration::from_secs(120),
            || async { (scenario.policy("fleet").await.status?.counts.blocked == 2).then_some(()) },
        )
        .await;
    kubectl_habits_on_two_blocked_nodes(&scenario.cluster, NS);
}

fn kubectl_habits_on_two_blocked_nodes(cluster: &TestCluster, ns: &str) {
    let lines = |text: String| text.lines().map(str::to_owned).collect::<BTreeSet<_>>();
    let set = |items: &[&str]| items.iter().map(|&i| i.to_owned()).collect::<BTreeSet<_>>();
    // 3 with --exit-code only: a plain status is a success.
    k8sm_exits(cluster, &["upgrade", "status", "--exit-code"], 3);
    k8sm_exits(cluster, &["upgrade", "status"], 0);
    assert_eq!(
        lines(k8sm_exits(cluster, &["blocked", "-o", "name"], 3)),
        set(&["pod/debug", "pod/pinned"])
    );
    let names = lines(k8sm_ok(cluster, &["upgrade", "status", "-o", "name"]));
    assert!(
        names.is_superset(&set(&["node/node-0001", "node/node-0002"])),
        "{names:?}"
    );
    let template = r#"jsonpath={range .pods[*]}{.namespace}/{.name} on {.node}{"
"}{end}"#;
    assert_eq!(
        lines(k8sm_exits(cluster, &["blocked", "-A", "-o", template], 3)),
        set(&[
            &format!("{ns}/debug on node-0001"),
            &format!("{ns}/pinned on node-0002")
        ])
    );
    assert_eq!(
        k8sm_exits(
            cluster,
            &[
                "blocked",
                "-o",
                r#"jsonpath={.pods[?(@.reason=="BlockedOptOut")].node}"#
            ],
            3
        ),
        "node-0002"
    );
    let columns = "custom-columns=NODE:.node,POD:.name,REASON:.reason";
    let table = k8sm_exits(cluster, &["blocked", "-o", columns, "--no-headers"], 3);
    let rows: BTreeSet<String> = table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        rows,
        set(&[
            "node-0001 debug BlockedUnmanagedPod",
            "node-0002 pinned BlockedOptOut"
        ]),
        "no header line:\n{table}"
    );
    // plan -n/-A: the lists of pods, one namespace or all.
    let planned = |namespaces: &[&str]| {
        let mut args = vec!["plan", "-o", "jsonpath={.nodes[*].pods[*].name}"];
        args.extend(namespaces);
        k8sm_ok(cluster, &args)
    };
    let all = planned(&["-A"]);
    assert!(all.contains("debug") && all.contains("pinned"), "{all}");
    assert!(planned(&["-n", ns]).contains("pinned"));
    let other = planned(&["-n", "default"]);
    assert!(
        !other.contains("debug") && !other.contains("pinned"),
        "{other}"
    );
    // kubectl k8sm <TAB>: commands, then names from the cluster.
    assert!(complete(cluster, &[""]).contains(&"blocked".to_owned()));
    assert_eq!(
        complete(cluster, &["force", "node-000"]),
        ["node-0000", "node-0001", "node-0002"]
    );
    assert_eq!(complete(cluster, &["pause", "--policy", ""]), ["fleet"]);
}

fn watch_until_done(cluster: &TestCluster, timeout: Duration) -> String {
    let mut child = kubectl_with_plugin(cluster)
        .args(["k8sm", "upgrade", "status", "--watch"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    let mut stdout = child.stdout.take().expect("stdout");
    // Read while it runs, so that a full pipe never stalls it.
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the watch") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let text = reader.join().expect("reader");
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    match status {
        Some(status) if status.success() => text,
        Some(status) => panic!("the watch failed ({status}):\n{text}\n{stderr}"),
        None => panic!("the watch did not end within {timeout:?}:\n{text}\n{stderr}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocked_force_pause_and_resume_steer_a_live_upgrade() {
    const NS: &str = "ops";
    // Restarts take 6s: time enough to pause before the second node starts, however busy the
    // machine.
    let mut scenario = Scenario::start(4, NS, "6s").await;
    let client = scenario.client.clone();
    // node-0001 holds an unmanaged pod (policy Never), node-0002 an opted-out one; the 4 pods of
    // `web` run on node-0000 and node-0003, so both of those have pods to evict.
    cordon(&scenario, &[1, 2], true);
    create(&client, &deployment(NS, "web", 4)).await;
    scenario.wait_ready(4).await;
    cordon(&scenario, &[1, 2], false);
    create(&client, &unmanaged_pod(NS, "debug", &node_name(1), &[])).await;
    create(
        &client,
        &unmanaged_pod(
            NS,
            "pinned",
            &node_name(2),
            &[(keys::UPGRADE_OPT_OUT_LABEL, "true")],
        ),
    )
    .await;
    scenario.wait_ready(6).await;

    scenario.start_controller(&[]);
    scenario
        .create_policy(
            "fleet",
            ExecutorUpgradePolicySpec {
                target_executor_id: Some(scenario.new_id.clone()),
                ..ExecutorUpgradePolicySpec::default()
            },
        )
        .await;

    // Pause as soon as the first node is told to restart: the second must not start draining while
    // paused.
    scenario
        .wait_until("a first KamikazeSent", Duration::from_secs(120), || async {
            (!scenario.events("KamikazeSent").await.is_empty()).then_some(())
        })
        .await;
    let cluster = &scenario.cluster;
    let paused = k8sm_ok(cluster, &["pause"]);
    assert!(
        paused.contains("ExecutorUpgradePolicy fleet paused"),
        "{paused}"
    );
    scenario
        .wait_until(
            "the controller observes the pause",
            Duration::from_secs(30),
            || async {
                let policy = scenario.policy("fleet").await;
                let status = policy.status?;
                let paused = status
                    .conditions
                    .iter()
                    .any(|c| c.type_ == "Paused" && c.status == "True");
                (paused && status.observed_generation == policy.metadata.generation).then_some(())
            },
        )
        .await;
    let evicted = scenario.events("Evicted").await.len();
    let kamikazes = scenario.events("KamikazeSent").await.len();
    assert_eq!(
        kamikazes, 1,
        "paused before a second node was told to restart (else nothing is left to stop)"
    );
    // The node told to restart comes back (that needs no action), and still nothing else moves.
    scenario
        .wait_until(
            "the first node is upgraded",
            Duration::from_secs(60),
            || async { (scenario.upgraded_nodes().await == 1).then_some(()) },
        )
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = k8sm_ok(cluster, &["upgrade", "status"]);
    assert!(status.contains("PAUSED"), "{status}");
    assert!(
        status.contains("1/4 nodes upgraded (25%), no ETA while paused"),
        "{status}"
    );
    assert_eq!(
        scenario.events("Evicted").await.len(),
        evicted,
        "no eviction while paused"
    );
    assert_eq!(
        scenario.events("KamikazeSent").await.len(),
        kamikazes,
        "no kamikaze while paused"
    );
    assert_eq!(
        k8sm_ok(cluster, &["pause"]),
        "ExecutorUpgradePolicy fleet is already paused.\n"
    );

    let resumed = k8sm_ok(cluster, &["resume", "--policy", "fleet"]);
    assert!(
        resumed.contains("ExecutorUpgradePolicy fleet resumed"),
        "{resumed}"
    );
    scenario
        .wait_until(
            "the second node is upgraded",
            Duration::from_secs(120),
            || async { (scenario.upgraded_nodes().await == 2).then_some(()) },
        )
        .await;
    assert!(
        scenario.events("Evicted").await.len() > evicted,
        "evictions went on after resume"
    );
    assert!(
        scenario.events("KamikazeSent").await.len() > kamikazes,
        "kamikaze went on after resume"
    );

    // Both remaining nodes end up Blocked, each with a pod only an operator can move; neither is
    // started (a pod of `web` stays on node-0002 until the opted-out pod goes), and only those
    // two pods are blocked.
    scenario
        .wait_until(
            "two nodes are Blocked",
            Duration::from_secs(120),
            || async { (scenario.policy("fleet").await.status?.counts.blocked == 2).then_some(()) },
        )
        .await;
    // Exit status 3: pods hold their nodes.
    let blocked = k8sm_exits(cluster, &["blocked", "-o", "json"], 3);
    let rows: BTreeSet<(String, String, String, Option<String>)> = blocked_rows(&blocked)
        .into_iter()
        .map(|r| {
            (
                r.node,
                format!("{}/{}", r.namespace, r.name),
                r.reason,
                r.owner,
            )
        })
        .collect();
    assert_eq!(
        rows,
        BTreeSet::from([
            (
                "node-0001".into(),
                "ops/debug".into(),
                "BlockedUnmanagedPod".into(),
                None
            ),
            (
                "node-0002".into(),
                "ops/pinned".into(),
                "BlockedOptOut".into(),
                None
            ),
        ]),
        "exactly the pods that block: {blocked}"
    );
    let table = k8sm_exits(cluster, &["blocked"], 3);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "a header and two pods:\n{table}");
    assert!(
        lines[0].starts_with("NODE") && lines[0].contains("REASON"),
        "{table}"
    );
    assert!(
        table.contains("policy Never") && table.contains("opted out"),
        "{table}"
    );
    assert_eq!(
        k8sm_exits(cluster, &["blocked", "-n", NS], 3)
            .lines()
            .count(),
        3
    );
    assert_eq!(
        k8sm_ok(cluster, &["blocked", "-n", "default"]),
        "No blocked pods in namespace default.\n"
    );
    // -l: only the pods the apiserver says the query selects.
    let debug_only = k8sm_exits(cluster, &["blocked", "-l", "app=debug"], 3);
    let lines: Vec<&str> = debug_only.lines().collect();
    assert_eq!(lines.len(), 2, "a header and the debug pod:\n{debug_only}");
    assert!(lines[1].contains("debug"), "{debug_only}");
    let status = k8sm_ok(cluster, &["upgrade", "status", "-o", "wide"]);
    assert!(status.contains("kubectl k8sm force node-0001"), "{status}");

    // force: refused without a terminal or --yes; a dry run deletes nothing; opted-out pods need
    // the flag.
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    k8sm_fails(
        cluster,
        &["force", "node-0001"],
        "refusing to delete pods without confirmation: standard input is not a terminal; pass --yes to confirm",
    );
    let dry = k8sm_ok(cluster, &["force", "node-0001", "--dry-run"]);
    assert!(
        dry.contains("pod/ops/debug would be deleted (dry run)"),
        "{dry}"
    );
    let opted_out = k8sm_ok(cluster, &["force", "node-0002", "--yes"]);
    assert!(
        opted_out.contains("only 1 opted-out pod (ops/pinned) blocks it; add --include-opted-out"),
        "{opted_out}"
    );
    assert!(pods.get_opt("debug").await.unwrap().is_some());
    assert!(pods.get_opt("pinned").await.unwrap().is_some());

    // The audit comes first: a user who may delete the pod but not record what is forced is
    // refused, and the pod stays.
    kubectl_ok(
        cluster,
        &[
            "create",
            "clusterrole",
            "delete-without-audit",
            "--verb=get,list,watch",
            "--resource=*.*",
        ],
    );
    kubectl_ok(
        cluster,
        &[
            "create",
            "clusterrole",
            "delete-pods",
            "--verb=delete",
            "--resource=pods",
        ],
    );
    for role in ["delete-without-audit", "delete-pods"] {
        kubectl_ok(
            cluster,
            &[
                "create",
                "clusterrolebinding",
                role,
                &format!("--clusterrole={role}"),
                "--user=no-audit",
            ],
        );
    }
    let refused = k8sm(cluster, &["force", "node-0001", "--yes", "--as=no-audit"]);
    assert!(
        !refused.success
            && refused.stderr.starts_with(
                "error: recording on node node-0001 what is forced, which comes first (nothing was deleted): "
            ),
        "{}{}",
        refused.stdout,
        refused.stderr
    );
    assert!(
        pods.get_opt("debug").await.unwrap().is_some(),
        "the pod stays"
    );

    let forced = k8sm_ok(cluster, &["force", "node-0001", "--yes"]);
    assert!(
        forced.contains("pod/ops/debug deleted; Forced event recorded"),
        "{forced}"
    );
    let user = SelfSubjectReview::default();
    let me = Api::<SelfSubjectReview>::all(client.clone())
        .create(&PostParams::default(), &user)
        .await
        .expect("a SelfSubjectReview")
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .expect("a user name");
    let events = pod_events(&scenario, "Forced").await;
    assert_eq!(events.len(), 1, "{events:?}");
    let (event, pod) = &events[0];
    assert_eq!(pod, "ops/debug");
    assert_eq!(event.reporting_controller.as_deref(), Some("kubectl-k8sm"));
    let note = event.note.as_deref().unwrap_or_default();
    assert!(
        note.starts_with(&format!(
            "deletion forced by {me} with `kubectl k8sm force node-0001`"
        )),
        "the event names the user {me}: {note}"
    );
    scenario
        .wait_until(
            "node-0001 is upgraded once unblocked",
            Duration::from_secs(120),
            || async { (scenario.upgraded_nodes().await == 3).then_some(()) },
        )
        .await;

    let forced = k8sm_ok(
        cluster,
        &["force", "node-0002", "--include-opted-out", "--yes"],
    );
    assert!(
        forced.contains("pod/ops/pinned deleted; Forced event recorded"),
        "{forced}"
    );
    scenario
        .wait_until(
            "every node is upgraded",
            Duration::from_secs(120),
            || async { (scenario.upgraded_nodes().await == 4).then_some(()) },
        )
        .await;
    assert_eq!(k8sm_ok(cluster, &["blocked"]), "No blocked pods.\n");
    assert_eq!(k8sm_ok(cluster, &["blocked", "--no-headers"]), "");
    scenario
        .wait_until("status reports 4/4", Duration::from_secs(30), || async {
            k8sm_ok(&scenario.cluster, &["upgrade", "status"])
                .contains("4/4 nodes upgraded (100%), done")
                .then_some(())
        })
        .await;
    k8sm_exits(cluster, &["upgrade", "status", "--exit-code"], 0);
    // The run's report keeps who forced what where, after the Events are gone.
    let report: k8sm_api::report::UpgradeReport =
        serde_json::from_str(&k8sm_ok(cluster, &["upgrade", "report", "-o", "json"]))
            .expect("the report as JSON");
    let forced: Vec<(&str, &str, &str)> = report
        .forced
        .iter()
        .map(|f| (f.node.as_str(), f.user.as_str(), f.what.as_str()))
        .collect();
    assert_eq!(
        forced,
        [
            ("node-0001", me.as_str(), "deleted ops/debug"),
            ("node-0002", me.as_str(), "deleted ops/pinned"),
        ],
        "{report:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mistakes_get_a_sentence_that_says_how_to_fix_them() {
    let cluster = TestCluster::start(ClusterOptions::default().with_nodes(1))
        .await
        .expect("cluster starts");
    let help = k8sm_ok(&cluster, &["-h"]);
    assert!(help.contains("Usage: kubectl k8sm"), "{help}");

    let no_crd = "the ExecutorUpgradePolicy CRD is not installed: kubectl apply -f crds/executorupgradepolicy.yaml";
    for args in [
        &["upgrade", "status"][..],
        &["blocked"],
        &["plan"],
        &["pause"],
    ] {
        k8sm_fails(&cluster, args, no_crd);
    }
    // A command line that does not parse: clap's usage status, 2 (errors above: 1).
    let usage = k8sm(&cluster, &["blocked", "-o", "jsonpath={.pods[0}"]);
    assert_eq!(usage.code, Some(2), "{}", usage.stderr);
    assert!(
        usage.stderr.contains("unterminated array"),
        "{}",
        usage.stderr
    );
    install_crd(&cluster);
    let no_policy = "no ExecutorUpgradePolicy exists: create one, for example kubectl apply -f deploy/examples/default.yaml";
    k8sm_fails(&cluster, &["upgrade", "status"], no_policy);
    // Impersonation, as kubectl's --as: the apiserver judges each request with that user's rights,
    // and says so in its own words; in a group that may, the answer is the admin's.
    let jane = k8sm(&cluster, &["--as=jane", "upgrade", "status"]);
    assert!(!jane.success, "{}", jane.stdout);
    assert!(
        jane.stderr.contains(
            "executorupgradepolicies.k8s.mesosphere.io is forbidden: User \"jane\" cannot list resource \
             \"executorupgradepolicies\" in API group \"k8s.mesosphere.io\" at the cluster scope"
        ),
        "{}",
        jane.stderr
    );
    k8sm_fails(
        &cluster,
        &[
            "--as=jane",
            "--as-group=system:masters",
            "upgrade",
            "status",
        ],
        no_policy,
    );
    k8sm_fails(
        &cluster,
        &["upgrade", "start", "--to", &executor_id("2.0.0")],
        no_policy,
    );
    assert_eq!(k8sm_ok(&cluster, &["blocked"]), "No blocked pods.\n");

    let policies: Api<ExecutorUpgradePolicy> = Api::all(cluster.client());
    for name in ["a", "b"] {
        policies
            .create(
                &PostParams::default(),
                &ExecutorUpgradePolicy::new(name, ExecutorUpgradePolicySpec::default()),
            )
            .await
            .expect("policy");
    }
    k8sm_fails(
        &cluster,
        &["pause"],
        "2 ExecutorUpgradePolicies exist (a, b): choose one with --policy NAME",
    );
    k8sm_fails(
        &cluster,
        &["upgrade", "status", "--policy", "c"],
        "ExecutorUpgradePolicy \"c\" does not exist: existing policies: a, b",
    );
    k8sm_ok(&cluster, &["pause", "--policy", "a"]);
    let paused = |policy: ExecutorUpgradePolicy| {
        let annotations = policy.metadata.annotations.unwrap_or_default();
        annotations.get(keys::PAUSE_ANNOTATION).map(String::as_str) == Some("true")
    };
    assert!(paused(policies.get("a").await.unwrap()));
    assert!(!paused(policies.get("b").await.unwrap()));
    k8sm_fails(
        &cluster,
        &["upgrade", "start", "--policy", "a", "--to", "sha256:abc"],
        "invalid executor ID \"sha256:abc\": a sha256: ID has 64 lowercase hexadecimal digits; print one with kubectl k8sm executor-id",
    );
    // Both policies select the one node, so neither drains it.
    k8sm_fails(
        &cluster,
        &["force", &node_name(0), "--yes"],
        "node \"node-0000\" is not upgraded by exactly one ExecutorUpgradePolicy, so k8sm does not drain it: nothing to force",
    );
    k8sm_fails(
        &cluster,
        &["force", "nope"],
        "node \"nope\" does not exist: see kubectl get nodes",
    );
    let wrong_context = k8sm(&cluster, &["--context", "nope", "blocked"]);
    assert!(!wrong_context.success);
    assert!(
        wrong_context.stderr.starts_with("error: kubeconfig: ")
            && wrong_context.stderr.contains("nope"),
        "{}",
        wrong_context.stderr
    );

    // executor-id computes the library's ID, from a hash or from the binary, flags and static pods.
    let hash = format!("{:0>64}", "200");
    let id = k8sm_ok(
        &cluster,
        &[
            "executor-id",
            "--version",
            "2.0.0",
            "--binary-sha256",
            &hash,
            "--flag=--cluster=test",
        ],
    );
    assert_eq!(id, format!("{}\n", executor_id("2.0.0")));
    let dir = cluster.dir().join("executor");
    std::fs::create_dir_all(dir.join("manifests")).unwrap();
    std::fs::write(dir.join("executor"), b"binary bytes").unwrap();
    std::fs::write(
        dir.join("manifests/etcd.yaml"),
        "kind: Pod\nmetadata: {name: etcd}\n",
    )
    .unwrap();
    let expected = ExecutorIdentity {
        version: "v1.36.3".into(),
        binary_sha256: binary_sha256_of(b"binary bytes"),
        flags: vec![
            ("--v".into(), "2".into()),
            ("--cluster".into(), "prod".into()),
        ],
        static_pods: vec![(
            "etcd.yaml".into(),
            "{\"metadata\":{\"name\":\"etcd\"},\"kind\":\"Pod\"}".into(),
        )],
    }
    .executor_id()
    .unwrap();
    let binary = dir.join("executor");
    let manifests = dir.join("manifests");
    let json: Value = serde_json::from_str(&k8sm_ok(
        &cluster,
        &[
            "executor-id",
            "--version",
            "v1.36.3",
            "--binary",
            binary.to_str().unwrap(),
            "--flag",
            "--cluster=prod",
            "--flag=--v=2",
            "--static-pods",
            manifests.to_str().unwrap(),
            "-o",
            "json",
        ],
    ))
    .unwrap();
    assert_eq!(json["executorId"], expected.to_string());
    k8sm_fails(
        &cluster,
        &[
            "executor-id",
            "--version",
            "1",
            "--binary",
            "/nonexistent/executor",
        ],
        "reading /nonexistent/executor: No such file or directory (os error 2)",
    );
}

/// `upgrade report`: the durable record of a run outlives the controller that began it. Three
/// nodes, a Deployment of 4 (at threshold 50, two may go at once) and an unmanaged pod per node
/// (deleted: policy Delete). The controller is stopped once a node is upgraded and a second one
/// finishes the run: the record it reads back and completes accounts for every eviction and
/// deletion the Events show, every node's admission, kamikaze and return in order,
/// and the Deployment's fewest Ready pods, which is never below what the SLA watcher saw nor below
/// its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upgrade_report_outlives_the_controller_and_accounts_for_every_action() {
    const NS: &str = "report";
    let mut scenario = Scenario::start(3, NS, "1s").await;
    let client = scenario.client.clone();
    create(&client, &deployment(NS, "web", 4)).await;
    for node in 0..3 {
        create(
            &client,
            &unmanaged_pod(NS, &format!("loose-{node}"), &node_name(node), &[]),
        )
        .await;
    }
    scenario.wait_ready(7).await;
    let sla = k8sm_e2e::sla::SlaWatcher::start(client.clone(), NS, 50);
    sla.arm();
    scenario.start_controller(&[]);
    let mut spec = scenario.policy_spec(1);
    spec.owner_health_threshold = 50;
    spec.unmanaged_pods = UnmanagedPods {
        policy: UnmanagedPodPolicy::Delete,
        timeout: None,
    };
    scenario.create_policy("fleet", spec).await;
    scenario
        .wait_until("a node is upgraded", Duration::from_secs(180), || async {
            (scenario.upgraded_nodes().await >= 1).then_some(())
        })
        .await;
    // A graceful stop writes the record; the next controller reads it back and goes on.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(scenario.controllers[0].pid() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    assert!(
        scenario.controllers[0]
            .wait_exit(Duration::from_secs(30))
            .is_some(),
        "the controller stops on SIGTERM"
    );
    scenario.start_controller(&[]);
    // (`wait_all_upgraded` insists that the first controller keeps running.)
    scenario
        .wait_until(
            "every node is upgraded",
            Duration::from_secs(300),
            || async { (scenario.upgraded_nodes().await == 3).then_some(()) },
        )
        .await;
    scenario.controllers[1].assert_running();
    let cluster = &scenario.cluster;
    let report: k8sm_api::report::UpgradeReport = scenario
        .wait_until(
            "the report says the run finished",
            Duration::from_secs(60),
            || async {
                let json = k8sm_ok(cluster, &["upgrade", "report", "-o", "json"]);
                let report: k8sm_api::report::UpgradeReport = serde_json::from_str(&json).ok()?;
                report.finished.is_some().then_some(report)
            },
        )
        .await;
    assert_eq!(report.policy, "fleet");
    assert_eq!(report.target_executor_id, scenario.new_id);
    // Every action the Events show, counted once (this test runs well within the Events' hour).
    let evicted = scenario.events("Evicted").await.len();
    let deleted = scenario.events("DeletedUnmanagedPod").await.len();
    assert_eq!(report.count("Evicted") as usize, evicted, "{report:#?}");
    assert_eq!(report.count("DeletedUnmanagedPod") as usize, deleted);
    assert_eq!(deleted, 3, "one unmanaged pod per node");
    assert_eq!(report.count("KamikazeSent"), 3);
    let per_node: u32 = report.nodes.values().map(|n| n.evictions).sum();
    assert_eq!(per_node as usize, evicted, "each eviction on its node");
    assert_eq!(report.nodes.len(), 3);
    for (name, node) in &report.nodes {
        let (admitted, kamikaze, upgraded) = (
            node.admitted.expect("admitted"),
            node.kamikaze.expect("told to restart"),
            node.upgraded.expect("back"),
        );
        assert!(
            admitted <= kamikaze && kamikaze <= upgraded,
            "{name}: {node:?}"
        );
        assert_eq!(node.deletions, 1, "{name}");
    }
    assert!(
        report.started
            <= report
                .nodes
                .values()
                .filter_map(|n| n.admitted)
                .min()
                .unwrap()
    );
    // The Deployment: its fewest Ready pods by the controller's count, which takes in two things.
    // What each eviction left it, as the controller counted (its Evicted Event says "ready R/D
    // → N"; conservative: a replacement the cache does not show Ready yet is not counted), so
    // the record is at most the fewest of those; and what the passes observed (a past state of
    // the pods, each also seen by the watcher, which sees every change), so the record is at
    // least the lower of the watcher's truth and the Events' fewest. And at or above its bound.
    let web = &report.workloads[&format!("Deployment {NS}/web")];
    assert_eq!((web.desired, web.bound), (4, 2));
    assert_eq!(web.disruptions as usize, evicted);
    let truth = sla
        .records()
        .into_iter()
        .find(|r| r.name == "web")
        .expect("the watcher judged web");
    let left_by_evictions: Vec<u32> = scenario
        .events("Evicted")
        .await
        .iter()
        .filter_map(|e| ready_after_eviction(e.note.as_deref()?))
        .collect();
    assert_eq!(
        left_by_evictions.len(),
        evicted,
        "every Evicted Event says what it left"
    );
    let fewest_left = left_by_evictions.iter().copied().min().expect("evictions");
    assert!(
        web.min_ready <= fewest_left
            && web.min_ready >= truth.min_ready.min(fewest_left)
            && web.min_ready >= web.bound,
        "report {web:?}, watcher {truth:?}, left by each eviction {left_by_evictions:?}"
    );
    // The same record for people: a table and a Markdown document.
    let table = k8sm_ok(cluster, &["upgrade", "report", "--policy", "fleet"]);
    assert!(table.contains("Nodes: 3 upgraded of 3"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("Deployment report/web")),
        "{table}"
    );
    let markdown = k8sm_ok(cluster, &["upgrade", "report", "-o", "markdown"]);
    assert!(
        markdown.starts_with("# Upgrade report: policy fleet"),
        "{markdown}"
    );
    assert!(markdown.contains("| NODE | ADMITTED |"), "{markdown}");
    // A run that does not exist gets one sentence.
    k8sm_fails(
        cluster,
        &["upgrade", "report", "--to", "sha256:none"],
        "no upgrade report: the controller writes one per run, from the first pass after a policy gets a target \
         (kubectl k8sm upgrade start)",
    );
}

/// kubectl's `proxy-url`: with it in the kubeconfig, the plugin reaches the real apiserver only
/// through the proxy (an HTTP CONNECT proxy on loopback that records its tunnels); with the proxy
/// gone, it fails instead of going around it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubeconfigs_proxy_url_carries_every_request_of_the_plugin() {
    let cluster = TestCluster::start(ClusterOptions::default().with_nodes(1))
        .await
        .expect("cluster starts");
    install_crd(&cluster);
    let proxy = ConnectProxy::start();
    let mut kubeconfig: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(cluster.kubeconfig()).expect("the cluster's kubeconfig"),
    )
    .expect("YAML");
    let clusters = kubeconfig["clusters"]
        .as_sequence_mut()
        .expect("a list of clusters");
    let server = clusters[0]["cluster"]["server"]
        .as_str()
        .expect("a server URL")
        .to_owned();
    for entry in clusters {
        entry["cluster"]["proxy-url"] = proxy.url().into();
    }
    // Next to the cluster's own kubeconfig: removed with the cluster's directory.
    let proxied = cluster
        .kubeconfig()
        .with_file_name("kubeconfig-through-proxy");
    std::fs::write(&proxied, serde_yaml::to_string(&kubeconfig).unwrap()).unwrap();
    let kubeconfig_flag = format!("--kubeconfig={}", proxied.display());
    let run = |args: &[&str]| -> k8sm_e2e::KubectlResult {
        kubectl_with_plugin(&cluster)
            // The proxy is that of the kubeconfig alone, whatever the environment says.
            .env_remove("NO_PROXY")
            .env_remove("no_proxy")
            .arg("k8sm")
            .arg(&kubeconfig_flag)
            .args(args)
            .output()
            .expect("kubectl runs")
            .into()
    };

    // `blocked` lists every kind the planner reads: many requests, all through the proxy, to the
    // apiserver.
    let blocked = run(&["blocked"]);
    assert!(blocked.success, "{}", blocked.stderr);
    assert_eq!(blocked.stdout, "No blocked pods.\n");
    let apiserver = server
        .trim_start_matches("https://")
        .trim_end_matches('/')
        .to_owned();
    let tunnels = proxy.tunnels();
    assert!(!tunnels.is_empty(), "no request went through the proxy");
    assert!(
        tunnels.iter().all(|t| *t == apiserver),
        "{tunnels:?} {apiserver}"
    );

    // The proxy gone: the plugin fails rather than reaching the apiserver around it.
    drop(proxy);
    let direct = run(&["--request-timeout=5s", "blocked"]);
    assert!(!direct.success, "{}", direct.stdout);
    assert!(direct.stderr.starts_with("error: "), "{}", direct.stderr);
}

/// What an eviction left its workload, by the controller's count, from the Evicted Event's note: "…
/// ready R/D → N …" for a Ready pod, "… keeps N/D ready …" for one that was not Ready.
fn ready_after_eviction(note: &str) -> Option<u32> {
    let count = |rest: &str| -> Option<u32> {
        rest.trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    match note.split_once('→') {
        Some((_, rest)) => count(rest),
        None => count(note.split_once(" keeps ")?.1),
    }
}
