//! Node annotations as large and as hostile as the apiserver accepts, on the keys k8sm reads, on a
//! real cluster: nothing crashes, what k8sm shows of them (Events, status, the plugin's output) is
//! escaped and cut, and every node but an opted-out one is upgraded. (Bad input of other kinds is
//! in bad_input.rs.)

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use serde_json::json;

use k8sm_api::text::is_unsafe;
use k8sm_api::{ExecutorUpgradePolicyStatus, MAX_EXECUTOR_ID, NodePhase, keys};
use k8sm_e2e::events::{events_about, k8sm_events, print_k8sm_events};
use k8sm_e2e::objects::patch_node;
use k8sm_e2e::plugin;
use k8sm_e2e::scenario::{Scenario, is_upgraded};
use k8sm_testcluster::node_name;

const NODES: usize = 6;
const PROGRESS: Duration = Duration::from_secs(120);
/// The status of 6 nodes, two of them listed with every value at its bound, takes a few kilobytes;
/// copied raw, the 200 KiB values would take hundreds.
const STATUS_BOUND: usize = 16 * 1024;

/// `size` bytes that would clear a terminal, ring its bell, reverse its text and break its lines.
fn hostile(size: usize) -> String {
    let mut value = String::new();
    while value.len() < size {
        value.push_str("\x1b[2J\x1b[31m\x07\u{202e}\r\n");
    }
    value.truncate(size);
    value
}

/// On the keys k8sm reads:
///
/// - node-0000: an incompatible-executor time of 200 KiB full of control characters (screen
///   clear, bell, bidirectional override, carriage return, newline);
/// - node-0001: an executor ID of 2 KiB of the same;
/// - node-0002: opted out, reporting an executor ID of 200 KiB of the same (it stays listed in the
///   status);
/// - node-0003: a drain-progress record of 200 KiB of the same.
///
/// Nothing crashes; the malformed time is reported as Events whose notes quote it escaped and cut;
/// the status stays small and keeps being written (with the values cut and escaped); the plugin's
/// `-o wide` outputs print no raw control character; and every node but the opted-out one is
/// upgraded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_annotations_are_reported_cut_and_escaped_and_every_other_node_is_upgraded() {
    let mut scenario = Scenario::start(NODES, "hostile", "1s").await;
    let client = scenario.client.clone();
    let (malformed, long_id, opted_out, progress) =
        (node_name(0), node_name(1), node_name(2), node_name(3));
    let huge = hostile(200 * 1024);
    let patches = [
        (
            &malformed,
            json!({ "metadata": { "annotations": { keys::INCOMPATIBLE_EXECUTOR_ANNOTATION: huge } } }),
        ),
        (
            &long_id,
            json!({ "metadata": { "annotations": { keys::EXECUTOR_ID_ANNOTATION: hostile(2048) } } }),
        ),
        (
            &opted_out,
            json!({ "metadata": {
                "labels": { keys::UPGRADE_OPT_OUT_LABEL: keys::UPGRADE_OPT_OUT_VALUE },
                "annotations": { keys::EXECUTOR_ID_ANNOTATION: huge },
            } }),
        ),
        (
            &progress,
            json!({ "metadata": { "annotations": { keys::DRAIN_PROGRESS_ANNOTATION: huge } } }),
        ),
    ];
    for (node, patch) in patches {
        patch_node(&client, node, patch).await;
    }

    // Paused first: nodes are marked and reported, nothing is drained, so the hostile values stay
    // on the nodes while the status and the plugin show them.
    scenario.start_controller(&[]);
    let mut spec = scenario.policy_spec(2);
    spec.paused = true;
    scenario.create_policy("fleet", spec).await;
    let status = scenario
        .wait_until(
            "the status lists the node with the malformed time and the opted-out one",
            PROGRESS,
            || async {
                scenario.controllers[0].assert_running();
                let status = scenario.policy("fleet").await.status?;
                let listed = |name: &str| status.nodes.iter().any(|n| n.name == name);
                (listed(&malformed) && listed(&opted_out) && status.counts.total == 6)
                    .then_some(status)
            },
        )
        .await;
    assert_small_and_escaped(&status);
    let entry = |name: &str| {
        status
            .nodes
            .iter()
            .find(|n| n.name == name)
            .cloned()
            .expect("listed")
    };
    let id = entry(&opted_out).executor_id.expect("its executor ID");
    assert!(
        id.starts_with("\\u{1b}[2J\\u{1b}[31m\\u{7}\\u{202e}\\r\\n")
            && id.ends_with("(truncated, 204800 bytes)"),
        "{id}"
    );
    assert!(id.len() <= MAX_EXECUTOR_ID, "{id}");
    let blockers = entry(&malformed).blockers;
    assert!(
        blockers.iter().any(|b| b.starts_with(&format!(
            "annotation {} is \"\\u{{1b}}[2J",
            keys::INCOMPATIBLE_EXECUTOR_ANNOTATION
        )) && b
            .contains("…(truncated, 204800 bytes), not an RFC 3339 time")),
        "{blockers:?}"
    );

    // The plugin, as an operator runs it: no raw control character, whatever the nodes carry.
    for args in [
        &["upgrade", "status", "--policy", "fleet", "-o", "wide"][..],
        &["upgrade", "status", "--policy", "fleet"],
        &["plan", "--policy", "fleet", "-o", "wide"],
        &["blocked", "-A", "-o", "wide"],
    ] {
        // `blocked` exits with 3 when it lists pods.
        let result = plugin::k8sm(&scenario.cluster, args);
        assert!(
            matches!(result.code, Some(0 | 3)),
            "{args:?}: {}",
            result.stderr
        );
        assert_terminal_safe(&result.stdout, args);
    }
    let wide = plugin::k8sm_ok(
        &scenario.cluster,
        &["upgrade", "status", "--policy", "fleet", "-o", "wide"],
    );
    let row = wide
        .lines()
        .find(|l| l.starts_with(&opted_out))
        .unwrap_or_else(|| panic!("{opted_out} listed:\n{wide}"));
    assert!(row.contains("\\u{1b}[2J"), "shown escaped: {row}");
    assert!(
        wide.contains("for a drain slot: kubectl k8sm plan shows the order, --all lists them"),
        "{wide}"
    );
    let plan = plugin::k8sm_ok(
        &scenario.cluster,
        &["plan", "--policy", "fleet", "-o", "wide"],
    );
    assert!(
        plan.contains("…(truncated, 204800 bytes), not an RFC 3339 time"),
        "{plan}"
    );

    // Resumed: every node but the opted-out one is upgraded, the hostile values notwithstanding.
    scenario
        .patch_policy("fleet", json!({ "paused": false }))
        .await;
    let others: Vec<String> = (0..NODES)
        .map(node_name)
        .filter(|n| *n != opted_out)
        .collect();
    let status = scenario
        .wait_until(
            "every node but the opted-out one is upgraded",
            PROGRESS,
            || async {
                scenario.controllers[0].assert_running();
                let nodes = scenario.nodes().await;
                let upgraded = others.iter().all(|name| {
                    nodes
                        .iter()
                        .any(|n| n.name_any() == *name && is_upgraded(n, &scenario.new_id))
                });
                let status = scenario.policy("fleet").await.status?;
                (upgraded && status.upgraded.as_deref() == Some("5/6")).then_some(status)
            },
        )
        .await;
    print_k8sm_events(&client).await;
    assert_small_and_escaped(&status);
    let left: Vec<(&str, NodePhase)> = status
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.phase))
        .collect();
    assert_eq!(left, [(opted_out.as_str(), NodePhase::Incompatible)]);

    // The malformed time is reported once on its node and on the policy, quoted escaped and cut.
    let notes = |events: Vec<Event>| -> Vec<String> {
        events
            .iter()
            .map(|e| e.note.clone().unwrap_or_default())
            .collect()
    };
    let on_node = notes(events_about(&client, "MalformedAnnotation", &malformed).await);
    assert_eq!(on_node.len(), 1, "{on_node:?}");
    assert!(
        on_node[0].starts_with(&format!(
            "annotation {} is \"\\u{{1b}}[2J\\u{{1b}}[31m\\u{{7}}\\u{{202e}}\\r\\n",
            keys::INCOMPATIBLE_EXECUTOR_ANNOTATION
        )) && on_node[0]
            .ends_with("…(truncated, 204800 bytes), not an RFC 3339 time: fix or remove it"),
        "{}",
        on_node[0]
    );
    assert_eq!(
        notes(events_about(&client, "MalformedAnnotation", "fleet").await),
        [format!(
            "1 node(s) carry unreadable k8sm annotations: {malformed}"
        )]
    );
    let marked = notes(events_about(&client, "Marked", &long_id).await);
    assert_eq!(marked.len(), 1, "{marked:?}");
    assert!(
        marked[0].starts_with(&format!(
            "marked incompatible: annotation {} is \"\\u{{1b}}[2J",
            keys::EXECUTOR_ID_ANNOTATION
        )) && marked[0].contains("…(truncated, 2048 bytes), not the target"),
        "{}",
        marked[0]
    );
    // No Event of the controller carries a raw control character, nor more than the Events API
    // allows.
    for event in k8sm_events(&client).await {
        let note = event.note.unwrap_or_default();
        assert!(note.len() <= 1024, "{} bytes: {note}", note.len());
        assert!(!note.chars().any(is_unsafe), "{note:?}");
    }
    scenario.controllers[0].assert_running();
}

/// The status is small (the 200 KiB values are not in it), and holds no control character.
fn assert_small_and_escaped(status: &ExecutorUpgradePolicyStatus) {
    let json = serde_json::to_string(status).expect("JSON");
    assert!(
        json.len() < STATUS_BOUND,
        "{} bytes: {json:.2000}",
        json.len()
    );
    // serde_json writes a control character as \u00XX; the escaped text from the nodes has none
    // left.
    assert!(!json.contains("\\u00"), "{json:.2000}");
    assert!(!json.chars().any(is_unsafe), "{json:.2000}");
}

/// Fails on any control or invisible character in the plugin's output other than line breaks (there
/// is no terminal, so no colour either).
fn assert_terminal_safe(out: &str, args: &[&str]) {
    if let Some((i, c)) = out
        .char_indices()
        .find(|(_, c)| *c != '\n' && is_unsafe(*c))
    {
        let around: String = out[i..].chars().take(40).collect();
        panic!(
            "kubectl k8sm {} printed {c:?} at byte {i}: {around:?}",
            args.join(" ")
        );
    }
}
