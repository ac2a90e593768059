//! Rendering tests of `upgrade status`: a policy with a status in, text out.

use super::*;
use crate::screens::fleet::FleetNode;
use serde_json::json;

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-03-01T12:10:00Z")
        .unwrap()
        .to_utc()
}

const TARGET: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";
const OLD: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

fn policy(spec: serde_json::Value, status: Option<serde_json::Value>) -> ExecutorUpgradePolicy {
    let mut object = json!({
        "apiVersion": "k8s.mesosphere.io/v1alpha1",
        "kind": "ExecutorUpgradePolicy",
        "metadata": {"name": "fleet", "generation": 2},
        "spec": spec,
    });
    if let Some(status) = status {
        object["status"] = status;
    }
    serde_json::from_value(object).unwrap()
}

fn mid_upgrade() -> ExecutorUpgradePolicy {
    policy(
        json!({"targetExecutorId": TARGET}),
        Some(json!({
            "observedGeneration": 2,
            "upgraded": "2/6",
            "counts": {"total": 6, "compatible": 2, "incompatible": 1, "draining": 1, "kamikazeSent": 1, "blocked": 1},
            "eta": "2026-03-01T12:14:30Z",
            "nodes": [
                {"name": "node-0005", "phase": "Incompatible", "podsLeft": 0, "since": "2026-03-01T12:00:00Z", "executorId": OLD},
                {"name": "node-0002", "phase": "Draining", "podsLeft": 3, "since": "2026-03-01T12:08:00Z", "executorId": OLD,
                 "blockers": [
                    "wait: owner ReplicaSet web-6d4f 8/10 ready, needs 9 (threshold 90%)",
                    "wait: owner ReplicaSet web-6d4f 8/10 ready, needs 9 (threshold 90%)",
                    "wait: PodDisruptionBudget shop/db-pdb allows no disruption now"]},
                {"name": "node-0003", "phase": "Blocked", "podsLeft": 1, "since": "2026-03-01T11:00:00Z", "executorId": OLD,
                 "blockers": ["unmanaged pod (no controller): policy Never; delete it, or `kubectl k8sm force node-0003`"]},
                {"name": "node-0001", "phase": "KamikazeSent", "podsLeft": 0, "since": "2026-03-01T12:09:30Z", "executorId": OLD}
            ],
            "blockedPods": [
                {"node": "node-0002", "namespace": "shop", "name": "web-a", "owner": "ReplicaSet/web-6d4f", "reason": "WaitingForOwner", "message": "m"},
                {"node": "node-0002", "namespace": "shop", "name": "web-b", "owner": "ReplicaSet/web-6d4f", "reason": "WaitingForOwner", "message": "m"},
                {"node": "node-0002", "namespace": "shop", "name": "db-0", "owner": "StatefulSet/db", "reason": "BlockedByPDB", "message": "m"},
                {"node": "node-0003", "namespace": "shop", "name": "debug", "reason": "BlockedUnmanagedPod", "message": "m"}
            ],
            "blockedPodsTotal": 4
        })),
    )
}

#[test]
fn a_running_upgrade_shows_progress_phases_and_nodes() {
    let view = StatusScreen::from_policy(&mid_upgrade());
    assert!(!view.done);
    assert_eq!((view.upgraded, view.total, view.percent), (2, 6, 33));
    let text = view.render(false, now(), Palette::PLAIN);
    let expected = format!(
        "Policy:   fleet
Target:   {TARGET}
Progress: [######--------------] 2/6 nodes upgraded (33%), no ETA while 1 node is blocked
Phases:   Compatible 2  Incompatible 1  Draining 1  Drained 0  KamikazeSent 1  Blocked 1
Blocked:  4 pods wait for an operator, an owner or time: kubectl k8sm blocked

NODE        PHASE          SINCE   PODS LEFT   BLOCKED BY
node-0001   KamikazeSent   30s     0           -
node-0002   Draining       2m0s    3           wait: owner ReplicaSet web-6d4f 8/10 ready, needs 9 (threshold 90%) (+1 more)
node-0003   Blocked        70m     1           unmanaged pod (no controller): policy Never; delete it, or `kubectl k8sm force node-0003`
Queued:   1 node waits for a drain slot: kubectl k8sm plan shows the order, --all lists them
"
    );
    assert_eq!(text, expected);
}

#[test]
fn wide_adds_executor_ids_owners_and_every_blocker() {
    let text = StatusScreen::from_policy(&mid_upgrade()).render(true, now(), Palette::PLAIN);
    let header = text.lines().find(|l| l.starts_with("NODE")).unwrap();
    assert!(
        header.contains("EXECUTOR ID") && header.contains("WAITING ON"),
        "{header}"
    );
    let draining = text.lines().find(|l| l.starts_with("node-0002")).unwrap();
    assert!(draining.contains(OLD), "{draining}");
    assert!(
        draining.contains("ReplicaSet/web-6d4f, StatefulSet/db"),
        "owners waited on, each once: {draining}"
    );
    assert!(
        text.contains("allows no disruption now"),
        "wide shows every distinct blocker:\n{text}"
    );
    assert!(!text.contains("more)"), "{text}");
    // The unmanaged pod has no owner to wait on.
    let blocked = text.lines().find(|l| l.starts_with("node-0003")).unwrap();
    assert!(blocked.contains(" - "), "{blocked}");
}

#[test]
fn an_eta_is_shown_when_nothing_waits_for_an_operator() {
    let mut policy = mid_upgrade();
    let status = policy.status.as_mut().unwrap();
    status.counts.blocked = 0;
    status.counts.incompatible += 1;
    let text = StatusScreen::from_policy(&policy).render(false, now(), Palette::PLAIN);
    assert!(
        text.contains("2/6 nodes upgraded (33%), ETA 2026-03-01T12:14:30Z (in 4m30s)"),
        "{text}"
    );
}

#[test]
fn a_finished_upgrade_is_done() {
    let policy = policy(
        json!({"targetExecutorId": TARGET}),
        Some(json!({"observedGeneration": 2, "counts": {"total": 3, "compatible": 3}})),
    );
    let view = StatusScreen::from_policy(&policy);
    assert!(view.done);
    let text = view.render(false, now(), Palette::PLAIN);
    assert!(
        text.contains("[####################] 3/3 nodes upgraded (100%), done"),
        "{text}"
    );
    assert!(
        !text.contains("NODE"),
        "no node table when nothing is left:\n{text}"
    );
}

#[test]
fn a_status_of_an_older_spec_is_not_done() {
    // Right after `upgrade start`: the controller still reports the previous target's 3/3.
    let policy = policy(
        json!({"targetExecutorId": TARGET}),
        Some(json!({"observedGeneration": 1, "counts": {"total": 3, "compatible": 3}})),
    );
    let view = StatusScreen::from_policy(&policy);
    assert!(!view.done);
    let text = view.render(false, now(), Palette::PLAIN);
    assert!(
        text.contains(
            "Status:   from generation 1, the spec is at generation 2: the controller has not caught up yet"
        ),
        "{text}"
    );
}

#[test]
fn no_status_points_at_the_controller() {
    let view = StatusScreen::from_policy(&policy(json!({}), None));
    assert!(!view.done);
    let text = view.render(false, now(), Palette::PLAIN);
    assert_eq!(
        text,
        "Policy:   fleet
Target:   none (only nodes marked by another component are upgraded)
Status:   not reported yet: is k8sm-controller running?
"
    );
}

#[test]
fn paused_and_problems_are_spelled_out() {
    let mut policy = mid_upgrade();
    policy.spec.paused = true;
    policy.status.as_mut().unwrap().conditions = serde_json::from_value(json!([
        {"type": "Conflict", "status": "True", "reason": "PolicyConflict", "message": "node-0009 is also selected by other", "lastTransitionTime": "2026-03-01T12:00:00Z"},
        {"type": "Degraded", "status": "False", "reason": "AsExpected", "message": "", "lastTransitionTime": "2026-03-01T12:00:00Z"},
        {"type": "Paused", "status": "True", "reason": "Paused", "message": "spec.paused", "lastTransitionTime": "2026-03-01T12:00:00Z"}
    ]))
    .unwrap();
    let text = StatusScreen::from_policy(&policy).render(false, now(), Palette::PLAIN);
    assert!(text.contains("no ETA while paused"), "{text}");
    assert!(
        text.contains(
            "Paused:   PAUSED: no eviction, deletion or kamikaze until kubectl k8sm resume --policy fleet"
        ),
        "{text}"
    );
    assert!(
        text.contains("Problem:  node-0009 is also selected by other"),
        "{text}"
    );
    assert_eq!(text.matches("Problem:").count(), 1, "{text}");
}

#[test]
fn the_maintenance_window_says_when_it_opens_or_closes() {
    let mut policy = mid_upgrade();
    policy.spec.window = Some(
        serde_json::from_value(
            json!({"days": ["Sunday", "Saturday"], "start": "01:00", "end": "05:00",
                                      "timeZone": "Europe/Berlin"}),
        )
        .unwrap(),
    );
    let line = |policy: &ExecutorUpgradePolicy| {
        let text = StatusScreen::from_policy(policy).render(false, now(), Palette::PLAIN);
        text.lines()
            .find(|l| l.starts_with("Window:"))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no Window line:\n{text}"))
    };
    assert_eq!(
        line(&policy),
        "Window:   Sat,Sun 01:00-05:00 Europe/Berlin: not reported yet"
    );
    let status = policy.status.as_mut().unwrap();
    status.window =
        serde_json::from_value(json!({"open": false, "opensAt": "2026-03-07T00:00:00Z"})).unwrap();
    let text = StatusScreen::from_policy(&policy).render(false, now(), Palette::PLAIN);
    assert!(
        text.contains("no ETA while the maintenance window is closed"),
        "{text}"
    );
    assert_eq!(
        line(&policy),
        "Window:   Sat,Sun 01:00-05:00 Europe/Berlin: closed, no node is admitted and no executor told to restart \
         until it opens 2026-03-07T00:00:00Z (in 5d11h)"
    );
    let status = policy.status.as_mut().unwrap();
    status.window =
        serde_json::from_value(json!({"open": true, "closesAt": "2026-03-01T13:00:00Z"})).unwrap();
    assert_eq!(
        line(&policy),
        "Window:   Sat,Sun 01:00-05:00 Europe/Berlin: open, closes 2026-03-01T13:00:00Z (in 50m)"
    );
    // No window: no line.
    let text = StatusScreen::from_policy(&mid_upgrade()).render(false, now(), Palette::PLAIN);
    assert!(!text.contains("Window:"), "{text}");
}

#[test]
fn a_policy_that_selects_no_node_says_so_instead_of_done() {
    let policy = policy(
        json!({"targetExecutorId": TARGET, "nodeSelector": {"matchLabels": {"pool": "none"}}}),
        Some(json!({
            "observedGeneration": 2,
            "upgraded": "0/0",
            "counts": {"total": 0},
            "conditions": [
                {"type": "Degraded", "status": "True", "reason": "NoNodesSelected",
                 "message": "NoNodesSelected: spec.nodeSelector \"pool=none\" selects none of the cluster's 6 nodes",
                 "lastTransitionTime": "2026-03-01T12:00:00Z"}
            ]
        })),
    );
    let text = StatusScreen::from_policy(&policy).render(false, now(), Palette::PLAIN);
    assert_eq!(
        text,
        format!(
            "Policy:   fleet
Target:   {TARGET}
Progress: no node selected: nothing to upgrade
Phases:   Compatible 0  Incompatible 0  Draining 0  Drained 0  KamikazeSent 0  Blocked 0
Problem:  NoNodesSelected: spec.nodeSelector \"pool=none\" selects none of the cluster's 6 nodes
"
        )
    );
}

#[test]
fn phases_are_coloured_on_a_terminal() {
    let text = StatusScreen::from_policy(&mid_upgrade()).render(false, now(), Palette::COLOR);
    assert!(text.contains("\x1b[31mBlocked\x1b[0m"), "{text}");
    assert!(text.contains("\x1b[1mfleet\x1b[0m"), "{text}");
}

#[test]
fn json_names_fields_in_camel_case() {
    let value = serde_json::to_value(StatusScreen::from_policy(&mid_upgrade())).unwrap();
    assert_eq!(value["upgraded"], 2);
    assert_eq!(value["total"], 6);
    assert_eq!(value["counts"]["kamikazeSent"], 1);
    assert_eq!(value["nodes"][0]["name"], "node-0001");
    assert_eq!(value["nodes"][1]["podsLeft"], 3);
    assert_eq!(value["eta"], "2026-03-01T12:14:30Z");
    assert_eq!(value["done"], false);
}

#[test]
fn waiting_on_names_owners_of_waits_that_end_by_themselves() {
    let policy = policy(
        json!({"targetExecutorId": TARGET, "nodeProgressDeadline": "5m"}),
        Some(json!({
            "observedGeneration": 2,
            "counts": {"total": 2, "compatible": 0, "draining": 1, "blocked": 1},
            "nodes": [
                {"name": "node-0001", "phase": "Draining", "podsLeft": 3, "since": "2026-03-01T12:05:00Z"},
                {"name": "node-0002", "phase": "Blocked", "podsLeft": 1, "since": "2026-03-01T11:00:00Z",
                 "blockers": ["stalled at 2026-03-01T11:50:00+00:00: no pod left it for nodeProgressDeadline 5m"]}
            ],
            "blockedPods": [
                {"node": "node-0001", "namespace": "ops", "name": "report-x", "owner": "Job/report", "reason": "WaitingForJob", "message": "m"},
                {"node": "node-0001", "namespace": "data", "name": "kafka-0", "owner": "KafkaNodePool/kafka", "reason": "BlockedByPDB", "message": "m"},
                {"node": "node-0001", "namespace": "shop", "name": "pinned", "owner": "Deployment/web", "reason": "BlockedOptOut", "message": "m"},
                {"node": "node-0002", "namespace": "shop", "name": "web-1", "owner": "Deployment/web", "reason": "WaitingForOwner", "message": "m"},
                {"node": "node-0002", "namespace": "shop", "name": "odd", "owner": "Deployment/odd", "reason": "SomeFutureReason", "message": "m"}
            ],
            "blockedPodsTotal": 5,
            "deletedNodes": [{"name": "node-0009", "uid": "u9", "deletedAt": "2026-03-01T12:00:00Z"}]
        })),
    );
    let view = StatusScreen::from_policy(&policy);
    let waiting: Vec<(&str, &[String])> = view
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.waiting_on.as_slice()))
        .collect();
    assert_eq!(
        waiting,
        [
            (
                "node-0001",
                &["Job/report".to_owned(), "KafkaNodePool/kafka".to_owned()][..]
            ),
            ("node-0002", &["Deployment/web".to_owned()][..]),
        ],
        "an opted-out pod waits on itself, not on its Deployment; an unknown reason on nothing"
    );
    let text = view.render(false, now(), Palette::PLAIN);
    assert!(
        text.contains("0/2 nodes upgraded (0%), no ETA while 1 node is blocked"),
        "{text}"
    );
    assert!(
        text.contains("no pod left it for nodeProgressDeadline 5m"),
        "{text}"
    );
}

#[test]
fn a_large_fleet_lists_the_urgent_nodes_and_counts_the_rest() {
    // The controller lists the nodes an operator looks at and counts the queue (omittedNodes).
    let policy = policy(
        json!({"targetExecutorId": TARGET}),
        Some(json!({
            "observedGeneration": 2,
            "upgraded": "3000/10000",
            "counts": {"total": 10000, "compatible": 3000, "incompatible": 6900, "draining": 40,
                       "kamikazeSent": 10, "blocked": 50},
            "nodes": [
                {"name": "node-0002", "phase": "Blocked", "podsLeft": 1, "since": "2026-03-01T11:00:00Z",
                 "blockers": ["opted out by k8s.mesosphere.io/upgrade-opt-out"]},
                {"name": "node-0001", "phase": "Draining", "podsLeft": 3, "since": "2026-03-01T12:08:00Z",
                 "blockers": ["wait: workload Deployment/web 8/10 ready, needs 9 (threshold 90%)"], "omittedBlockers": 2}
            ],
            "omittedNodes": 6998,
            "blockedPodsTotal": 150
        })),
    );
    let view = StatusScreen::from_policy(&policy);
    let omitted: Vec<(NodePhase, u32)> = view.omitted.iter().map(|o| (o.phase, o.count)).collect();
    assert_eq!(
        omitted,
        [
            (NodePhase::Compatible, 3000),
            (NodePhase::Incompatible, 6900),
            (NodePhase::Draining, 39),
            (NodePhase::KamikazeSent, 10),
            (NodePhase::Blocked, 49)
        ]
    );
    let text = view.render(false, now(), Palette::PLAIN);
    let table = &text[text.find("NODE").expect("a node table")..];
    assert_eq!(
        table,
        "NODE        PHASE      SINCE   PODS LEFT   BLOCKED BY
node-0001   Draining   2m0s    3           wait: workload Deployment/web 8/10 ready, needs 9 (threshold 90%) (+2 more)
node-0002   Blocked    70m     1           opted out by k8s.mesosphere.io/upgrade-opt-out
and 39 more Draining, 10 more KamikazeSent, 49 more Blocked: the status lists the most urgent nodes only (--all lists every node)
Queued:   6,900 nodes wait for a drain slot: kubectl k8sm plan shows the order, --all lists them
"
    );
    let json = serde_json::to_value(&view).unwrap();
    assert_eq!(
        json["omitted"][1],
        json!({"phase": "Incompatible", "count": 6900})
    );
}

#[test]
fn a_queue_alone_is_counted_without_a_table() {
    let policy = policy(
        json!({"targetExecutorId": TARGET, "paused": true}),
        Some(json!({
            "observedGeneration": 2,
            "counts": {"total": 1200, "compatible": 200, "incompatible": 1000},
            "omittedNodes": 1000
        })),
    );
    let text = StatusScreen::from_policy(&policy).render(false, now(), Palette::PLAIN);
    assert!(!text.contains("NODE"), "{text}");
    assert!(
        text.ends_with(
            "\nQueued:   1,000 nodes wait for a drain slot: kubectl k8sm plan shows the order, --all lists them\n"
        ),
        "{text}"
    );
}

/// A fleet of 500 nodes as the controller reports it: 80 upgraded, 15 draining, 5 blocked, 400 queued; and the nodes
/// as their annotations tell them (every fifth in zone a).
fn fleet_of_500() -> (ExecutorUpgradePolicy, Vec<FleetNode>) {
    let name = |i: usize| format!("node-{i:04}");
    let rows: Vec<serde_json::Value> = (80..100)
        .map(|i| {
            if i < 95 {
                json!({"name": name(i), "phase": "Draining", "podsLeft": 2, "since": "2026-03-01T12:08:00Z"})
            } else {
                json!({"name": name(i), "phase": "Blocked", "podsLeft": 1, "since": "2026-03-01T11:00:00Z",
                       "blockers": ["opted out by k8s.mesosphere.io/upgrade-opt-out"]})
            }
        })
        .collect();
    let policy = policy(
        json!({"targetExecutorId": TARGET}),
        Some(json!({
            "observedGeneration": 2,
            "counts": {"total": 500, "compatible": 80, "incompatible": 400, "draining": 15, "blocked": 5},
            "nodes": rows,
            "omittedNodes": 400
        })),
    );
    let fleet = (0..500)
        .map(|i| {
            let mut annotations = std::collections::BTreeMap::from([(
                k8sm_api::keys::EXECUTOR_ID_ANNOTATION.to_owned(),
                if i < 80 { TARGET } else { OLD }.to_owned(),
            )]);
            if (80..100).contains(&i) {
                annotations.insert(
                    k8sm_api::keys::DRAINING_ANNOTATION.to_owned(),
                    "2026-03-01T12:00:00Z".to_owned(),
                );
            }
            let zone = if i % 5 == 0 { "a" } else { "b" };
            let labels = std::collections::BTreeMap::from([("zone".to_owned(), zone.to_owned())]);
            FleetNode::classify(&name(i), &labels, &annotations, Some(TARGET))
        })
        .collect();
    (policy, fleet)
}

#[test]
fn a_fleet_of_500_lists_the_nodes_in_flight_or_blocked_and_sums_up_the_queue_in_a_line() {
    let (policy, _) = fleet_of_500();
    let text = StatusScreen::from_policy(&policy).render(false, now(), Palette::PLAIN);
    let rows = text.lines().filter(|l| l.starts_with("node-")).count();
    assert_eq!(rows, 20, "15 draining and 5 blocked:\n{text}");
    assert!(
        text.lines().count() <= 30,
        "the output is bounded by the nodes in flight, not the fleet:\n{text}"
    );
    let queued: Vec<&str> = text.lines().filter(|l| l.contains("400 nodes")).collect();
    assert_eq!(
        queued,
        [
            "Queued:   400 nodes wait for a drain slot: kubectl k8sm plan shows the order, --all lists them"
        ],
        "{text}"
    );
}

#[test]
fn all_lists_every_node_of_the_fleet_once() {
    let (policy, fleet) = fleet_of_500();
    let view = StatusScreen::from_policy(&policy).restricted_to(&fleet, true, None);
    assert!(view.omitted.is_empty(), "{:?}", view.omitted);
    let text = view.render(false, now(), Palette::PLAIN);
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("node-")).collect();
    assert_eq!(rows.len(), 500);
    let distinct: std::collections::HashSet<&str> = rows
        .iter()
        .filter_map(|r| r.split_whitespace().next())
        .collect();
    assert_eq!(distinct.len(), 500);
    // The status's rows keep what only the controller knows: Blocked, and why.
    let blocked = rows.iter().find(|r| r.starts_with("node-0095")).unwrap();
    assert!(
        blocked.contains("Blocked") && blocked.contains("opted out"),
        "{blocked}"
    );
    let queued = rows.iter().find(|r| r.starts_with("node-0100")).unwrap();
    assert!(
        queued.contains("Incompatible") && queued.contains("queued for a drain slot"),
        "{queued}"
    );
    assert!(
        rows.last().unwrap().contains("Compatible"),
        "the upgraded last"
    );
    assert!(!text.contains("Queued:"), "{text}");
}

#[test]
fn a_label_selector_restricts_rows_and_summaries_to_the_matching_nodes() {
    let (policy, fleet) = fleet_of_500();
    let zone_a: Vec<FleetNode> = fleet
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i % 5 == 0)
        .map(|(_, n)| n)
        .collect();
    let text = StatusScreen::from_policy(&policy)
        .restricted_to(&zone_a, false, Some("zone=a"))
        .render(false, now(), Palette::PLAIN);
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("node-"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        rows,
        ["node-0080", "node-0085", "node-0090", "node-0095"],
        "{text}"
    );
    assert!(
        text.contains("Selector: zone=a: 100 nodes of the policy's\n"),
        "{text}"
    );
    assert!(
        text.contains("Queued:   80 nodes wait for a drain slot"),
        "the zone's queue, not the fleet's:\n{text}"
    );
    assert!(
        text.contains("Upgraded: 16 nodes run the target: --all lists them\n"),
        "{text}"
    );
}
