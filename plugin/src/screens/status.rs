//! `upgrade status`: the policy's status, as the controller wrote it, turned into a progress
//! report.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use kube::ResourceExt;
use serde::Serialize;

use k8sm_api::{ExecutorUpgradePolicy, NodeCounts, NodePhase, PauseAnnotation, condition_types};
use k8sm_planner::Reason;
use k8sm_view::time::from_time;

use crate::render::{Palette, age, clean, count, duration, table, thousands, timestamp};
use crate::screens::fleet::FleetNode;

/// Where one policy's upgrade stands.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusScreen {
    pub policy: String,
    pub target_executor_id: Option<String>,
    pub paused: bool,
    /// The maintenance window, as the spec writes it, and where the controller last saw it stand.
    pub window: Option<WindowSummary>,
    /// The controller has written a status at all.
    pub reported: bool,
    /// The status describes an older spec than the current one.
    pub stale: Option<Stale>,
    pub upgraded: u32,
    pub total: u32,
    /// Whole percent, rounded down: 100 only when every node is upgraded.
    pub percent: u32,
    pub eta: Option<DateTime<Utc>>,
    pub counts: NodeCounts,
    /// The nodes listed one per row, most advanced first: by default those the status lists (those
    /// an operator looks at: waiting for an operator, blocked, in flight); with `--all`, every
    /// node.
    pub nodes: Vec<NodeRow>,
    /// Nodes without a row, by phase, each phase summed up in one line: the upgraded (Compatible),
    /// the queue (Incompatible), and nodes in flight beyond the status's bound.
    pub omitted: Vec<Omitted>,
    /// `-l`: the label selector that restricts the nodes listed and summed up, and how many nodes
    /// of the policy it matches.
    pub selector: Option<SelectorSummary>,
    pub blocked_pods: u32,
    /// Conflicts and problems the controller reports in the policy's conditions.
    pub problems: Vec<String>,
    /// Every selected node runs the target executor, and the status is current.
    pub done: bool,
}

/// The maintenance window of a policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WindowSummary {
    /// Days, hours and time zone: "Sat,Sun 01:00-05:00 Europe/Berlin".
    pub spec: String,
    /// Open now, as last reported; `None` before the controller reported it (or with a window it
    /// cannot read).
    pub open: Option<bool>,
    pub opens_at: Option<DateTime<Utc>>,
    pub closes_at: Option<DateTime<Utc>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stale {
    pub observed_generation: Option<i64>,
    pub generation: Option<i64>,
}

/// The nodes `-l` selects.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectorSummary {
    pub selector: String,
    pub matching: u32,
}

/// Nodes of one phase that have no row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Omitted {
    pub phase: NodePhase,
    pub count: u32,
}

/// One node in an upgrade phase.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRow {
    pub name: String,
    pub phase: NodePhase,
    pub since: Option<DateTime<Utc>>,
    /// `None` for a node the status does not list, unless its drain progress annotation says.
    pub pods_left: Option<u32>,
    pub blockers: Vec<String>,
    /// Distinct blockers the status left out.
    pub omitted_blockers: u32,
    pub executor_id: Option<String>,
    /// Owners (and budgets' pods' owners) this node waits on, as "Kind/name".
    pub waiting_on: Vec<String>,
}

impl StatusScreen {
    pub fn from_policy(policy: &ExecutorUpgradePolicy) -> Self {
        let generation = policy.metadata.generation;
        let status = policy.status.clone().unwrap_or_default();
        // The apiserver serves an unwritten status as observed at generation 0 (the CRD's
        // default); every status the controller writes names a generation from 1.
        let reported = status.observed_generation.is_some_and(|g| g > 0);
        let stale = match (status.observed_generation, generation) {
            (Some(seen), Some(current)) if seen >= current => None,
            (_, None) => None,
            (seen, current) => Some(Stale {
                observed_generation: seen,
                generation: current,
            }),
        };
        let counts = status.counts;
        let mut nodes: Vec<NodeRow> = status
            .nodes
            .iter()
            .map(|n| {
                let mut waiting_on: Vec<String> = status
                    .blocked_pods
                    .iter()
                    .filter(|p| p.node == n.name && waits_on_owner(&p.reason))
                    .filter_map(|p| p.owner.clone())
                    .collect();
                waiting_on.sort();
                waiting_on.dedup();
                NodeRow {
                    name: n.name.clone(),
                    phase: n.phase,
                    since: n.since.as_ref().map(from_time),
                    pods_left: Some(n.pods_left),
                    blockers: n.blockers.clone(),
                    omitted_blockers: n.omitted_blockers.unwrap_or(0),
                    executor_id: n.executor_id.clone(),
                    waiting_on,
                }
            })
            .collect();
        // A row each only for nodes in flight or blocked: a queued node is listed only when
        // something holds it (a controller lists no other); the rest of the queue is summed
        // up in one line.
        nodes.retain(|n| n.phase != NodePhase::Incompatible || !n.blockers.is_empty());
        nodes.sort_by(|a, b| (rank(a.phase), &a.name).cmp(&(rank(b.phase), &b.name)));
        let omitted = without_rows(&nodes, |phase| counts.get(phase));
        let problems = status
            .conditions
            .iter()
            .filter(|c| {
                c.status == "True"
                    && (c.type_ == condition_types::CONFLICT
                        || c.type_ == condition_types::DEGRADED)
            })
            .map(|c| c.message.clone())
            .collect();
        let (upgraded, total) = (counts.compatible, counts.total);
        Self {
            policy: policy.name_any(),
            target_executor_id: policy.spec.target_executor_id.clone(),
            paused: policy.spec.paused || PauseAnnotation::of(policy.annotations()).pauses(),
            window: policy.spec.window.as_ref().map(|w| {
                let reported = status.window.as_ref();
                WindowSummary {
                    spec: w.to_string(),
                    open: reported.map(|s| s.open),
                    opens_at: reported.and_then(|s| s.opens_at.as_ref()).map(from_time),
                    closes_at: reported.and_then(|s| s.closes_at.as_ref()).map(from_time),
                }
            }),
            reported,
            done: reported && stale.is_none() && upgraded == total,
            stale,
            upgraded,
            total,
            percent: (upgraded * 100).checked_div(total).unwrap_or(100),
            eta: status.eta.as_ref().map(from_time),
            counts,
            nodes,
            omitted,
            selector: None,
            blocked_pods: status.blocked_pods_total.unwrap_or(0),
            problems,
        }
    }

    /// The view restricted to `fleet`, the policy's nodes that `-l` selects (all of them without
    /// `-l`), each classified from its annotations ([`FleetNode`]): rows only for those of
    /// `fleet`, and with `all` a row for every one (the status's row where it has one, for its
    /// blockers); the rest summed up by phase.
    pub fn restricted_to(mut self, fleet: &[FleetNode], all: bool, selector: Option<&str>) -> Self {
        let in_fleet: HashSet<&str> = fleet.iter().map(|n| n.name.as_str()).collect();
        self.nodes
            .retain(|row| in_fleet.contains(row.name.as_str()));
        if all {
            let listed: HashSet<String> = self.nodes.iter().map(|n| n.name.clone()).collect();
            self.nodes
                .extend(
                    fleet
                        .iter()
                        .filter(|n| !listed.contains(&n.name))
                        .map(|n| NodeRow {
                            name: n.name.clone(),
                            phase: n.phase,
                            since: n.since,
                            pods_left: n.pods_left,
                            blockers: Vec::new(),
                            omitted_blockers: 0,
                            executor_id: n.executor_id.clone(),
                            waiting_on: Vec::new(),
                        }),
                );
            self.nodes
                .sort_by(|a, b| (rank(a.phase), &a.name).cmp(&(rank(b.phase), &b.name)));
        }
        // The status's own rows know a node's phase better than its annotations (Drained, Blocked).
        let row_phases: HashMap<&str, NodePhase> = self
            .nodes
            .iter()
            .map(|row| (row.name.as_str(), row.phase))
            .collect();
        let phase_of = |node: &FleetNode| {
            row_phases
                .get(node.name.as_str())
                .copied()
                .unwrap_or(node.phase)
        };
        let by_phase =
            |phase| saturating_u32(fleet.iter().filter(|n| phase_of(n) == phase).count());
        let omitted = without_rows(&self.nodes, by_phase);
        self.omitted = omitted;
        self.selector = selector.map(|selector| SelectorSummary {
            selector: selector.to_owned(),
            matching: saturating_u32(fleet.len()),
        });
        self
    }

    /// Renders the report; `wide` adds executor IDs and the owners being waited on.
    pub fn render(&self, wide: bool, now: DateTime<Utc>, palette: Palette) -> String {
        let mut out = String::new();
        let mut line = |label: &str, text: &str| out.push_str(&format!("{label:<10}{text}\n"));
        line("Policy:", &palette.bold(&self.policy));
        line(
            "Target:",
            &self.target_executor_id.as_deref().map_or_else(
                || "none (only nodes marked by another component are upgraded)".to_owned(),
                |target| clean(target, true),
            ),
        );
        if !self.reported {
            line(
                "Status:",
                &palette.yellow("not reported yet: is k8sm-controller running?"),
            );
            return out;
        }
        if let Some(stale) = &self.stale {
            let seen = stale.observed_generation.map_or_else(
                || "an unknown generation".to_owned(),
                |g| format!("generation {g}"),
            );
            line(
                "Status:",
                &palette.yellow(&format!(
                    "from {seen}, the spec is at generation {}: the controller has not caught up yet",
                    stale.generation.unwrap_or_default()
                )),
            );
        }
        let progress = if self.total == 0 {
            // Not "0/0 (100%), done": nothing was upgraded, and the Problem line below says why.
            "no node selected: nothing to upgrade".to_owned()
        } else {
            format!(
                "{} {}/{} nodes upgraded ({}%), {}",
                bar(self.upgraded, self.total),
                self.upgraded,
                self.total,
                self.percent,
                self.eta_text(now)
            )
        };
        line(
            "Progress:",
            &if self.done {
                palette.green(&progress)
            } else {
                progress
            },
        );
        let phases: Vec<String> = NodePhase::ALL
            .iter()
            .map(|p| format!("{} {}", palette.phase(*p), self.counts.get(*p)))
            .collect();
        line("Phases:", &phases.join("  "));
        if self.paused {
            line(
                "Paused:",
                &palette.yellow(&format!(
                    "PAUSED: no eviction, deletion or kamikaze until kubectl k8sm resume --policy {}",
                    self.policy
                )),
            );
        }
        if let Some(window) = &self.window {
            line("Window:", &window.render(now, palette));
        }
        if self.blocked_pods > 0 {
            line(
                "Blocked:",
                &format!(
                    "{} for an operator, an owner or time: kubectl k8sm blocked",
                    count(self.blocked_pods as usize, "pod waits", "pods wait")
                ),
            );
        }
        for problem in &self.problems {
            line("Problem:", &palette.red(&clean(problem, wide)));
        }
        if let Some(selector) = &self.selector {
            line(
                "Selector:",
                &format!(
                    "{}: {} of the policy's",
                    clean(&selector.selector, wide),
                    count(selector.matching as usize, "node", "nodes")
                ),
            );
        }
        let summed_up = self.omitted_lines();
        if self.nodes.is_empty() && summed_up.is_empty() {
            return out;
        }
        out.push('\n');
        if !self.nodes.is_empty() {
            out.push_str(&self.node_table(wide, now, palette));
        }
        out.push_str(&summed_up);
        out
    }

    /// The nodes without a row, a line per kind: "and 40 more Draining, …" (in flight beyond the
    /// status's bound), "Queued: 6,900 nodes …", and, when `-l` restricts the view (the
    /// Progress line counts the policy's), "Upgraded: 80 nodes …".
    fn omitted_lines(&self) -> String {
        let count_of = |phase| {
            self.omitted
                .iter()
                .find(|o| o.phase == phase)
                .map_or(0, |o| o.count)
        };
        let rest: Vec<String> = self
            .omitted
            .iter()
            .filter(|o| !matches!(o.phase, NodePhase::Incompatible | NodePhase::Compatible))
            .map(|o| format!("{} more {}", thousands(o.count), o.phase))
            .collect();
        let mut out = String::new();
        if !rest.is_empty() {
            out.push_str(&format!(
                "and {}: the status lists the most urgent nodes only (--all lists every node)\n",
                rest.join(", ")
            ));
        }
        let queued = count_of(NodePhase::Incompatible);
        if queued > 0 {
            out.push_str(&format!(
                "{:<10}{} for a drain slot: kubectl k8sm plan shows the order, --all lists them\n",
                "Queued:",
                many(queued, "node waits", "nodes wait")
            ));
        }
        let upgraded = count_of(NodePhase::Compatible);
        if upgraded > 0 && self.selector.is_some() {
            out.push_str(&format!(
                "{:<10}{} the target: --all lists them\n",
                "Upgraded:",
                many(upgraded, "node runs", "nodes run")
            ));
        }
        out
    }

    fn eta_text(&self, now: DateTime<Utc>) -> String {
        if self.done {
            return "done".to_owned();
        }
        if self.paused {
            return "no ETA while paused".to_owned();
        }
        if self.window.as_ref().is_some_and(|w| w.open == Some(false)) {
            // The fleet stands still until the window opens: no pace to go by.
            return "no ETA while the maintenance window is closed".to_owned();
        }
        if self.counts.blocked > 0 {
            // Blocked: waiting for an operator, or stalled on a workload or budget: no pace to go
            // by either way.
            return format!(
                "no ETA while {} blocked",
                count(self.counts.blocked as usize, "node is", "nodes are")
            );
        }
        match self.eta {
            Some(eta) => format!(
                "ETA {} (in {})",
                timestamp(eta),
                duration((eta - now).num_seconds())
            ),
            None => "ETA not known yet".to_owned(),
        }
    }

    fn node_table(&self, wide: bool, now: DateTime<Utc>, palette: Palette) -> String {
        let mut headers = vec!["NODE", "PHASE", "SINCE", "PODS LEFT"];
        if wide {
            headers.extend(["EXECUTOR ID", "WAITING ON"]);
        }
        headers.push("BLOCKED BY");
        let rows: Vec<Vec<String>> = self
            .nodes
            .iter()
            .map(|n| {
                let mut row = vec![
                    clean(&n.name, wide),
                    palette.phase(n.phase),
                    age(n.since, now),
                    n.pods_left
                        .map_or_else(|| "-".to_owned(), |p| p.to_string()),
                ];
                if wide {
                    row.push(
                        n.executor_id
                            .as_deref()
                            .map_or_else(|| "-".into(), |id| clean(id, wide)),
                    );
                    row.push(if n.waiting_on.is_empty() {
                        "-".into()
                    } else {
                        clean(&n.waiting_on.join(", "), wide)
                    });
                }
                row.push(blocked_by(n, wide));
                row
            })
            .collect();
        table(&headers, &rows)
    }
}

/// Whether a pod of `status.blockedPods` waits on its owner (a workload below its bound, a budget
/// over it, its Job): a block that ends by itself, as the planner defines it. A pod that only an
/// operator moves waits on itself.
fn waits_on_owner(reason: &str) -> bool {
    Reason::ALL
        .into_iter()
        .find(|r| r.as_str() == reason)
        .is_some_and(|r| r.blocks() && !r.needs_operator())
}

/// "1 node waits", "6,900 nodes wait".
fn many(n: u32, singular: &str, plural: &str) -> String {
    format!(
        "{} {}",
        thousands(n),
        if n == 1 { singular } else { plural }
    )
}

fn saturating_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Nodes of each phase that have no row in `rows`, of `total(phase)`.
fn without_rows(rows: &[NodeRow], total: impl Fn(NodePhase) -> u32) -> Vec<Omitted> {
    NodePhase::ALL
        .into_iter()
        .filter_map(|phase| {
            let listed = rows.iter().filter(|n| n.phase == phase).count();
            let count = total(phase).saturating_sub(saturating_u32(listed));
            (count > 0).then_some(Omitted { phase, count })
        })
        .collect()
}

/// Most advanced first: what is about to finish is at the top, what has not started at the bottom.
fn rank(phase: NodePhase) -> u8 {
    match phase {
        NodePhase::KamikazeSent => 0,
        NodePhase::Drained => 1,
        NodePhase::Draining => 2,
        NodePhase::Blocked => 3,
        NodePhase::Incompatible => 4,
        NodePhase::Compatible => 5,
    }
}

/// What a node waits for: each distinct blocker once (and those the status left out, counted);
/// narrow output shows the first and a count of the rest.
fn blocked_by(node: &NodeRow, wide: bool) -> String {
    let mut distinct: Vec<String> = Vec::new();
    for blocker in &node.blockers {
        let blocker = clean(blocker, wide);
        if !distinct.contains(&blocker) {
            distinct.push(blocker);
        }
    }
    let left_out = node.omitted_blockers as usize;
    match distinct.as_slice() {
        [] if node.phase == NodePhase::Incompatible => "queued for a drain slot".to_owned(),
        [] => "-".to_owned(),
        all if wide && left_out > 0 => format!("{}\n(+{left_out} more)", all.join("\n")),
        all if wide => all.join("\n"),
        [one] if left_out == 0 => one.clone(),
        [first, rest @ ..] => format!("{first} (+{} more)", rest.len() + left_out),
    }
}

/// A 20-character progress bar.
fn bar(done: u32, total: u32) -> String {
    const WIDTH: u32 = 20;
    let filled = (done * WIDTH).checked_div(total).unwrap_or(WIDTH);
    format!(
        "[{}{}]",
        "#".repeat(filled as usize),
        "-".repeat((WIDTH - filled) as usize)
    )
}

impl WindowSummary {
    /// "Sat,Sun 01:00-05:00 Europe/Berlin: closed, opens 2026-12-05T00:00:00Z (in 3d 12h)".
    fn render(&self, now: DateTime<Utc>, palette: Palette) -> String {
        let when = |at: DateTime<Utc>| {
            format!(
                "{} (in {})",
                timestamp(at),
                duration((at - now).num_seconds())
            )
        };
        match (self.open, self.opens_at, self.closes_at) {
            (Some(true), _, Some(closes)) => {
                format!("{}: open, closes {}", self.spec, when(closes))
            }
            (Some(false), Some(opens), _) => palette.yellow(&format!(
                "{}: closed, no node is admitted and no executor told to restart until it opens {}",
                self.spec,
                when(opens)
            )),
            _ => format!("{}: not reported yet", self.spec),
        }
    }
}

#[cfg(test)]
mod tests {
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
        // Absent, or as the CRD's default serves it before the controller's first write.
        for status in [None, Some(json!({"observedGeneration": 0}))] {
            let view = StatusScreen::from_policy(&policy(json!({}), status.clone()));
            assert!(!view.done);
            let text = view.render(false, now(), Palette::PLAIN);
            assert_eq!(
                text,
                "Policy:   fleet
Target:   none (only nodes marked by another component are upgraded)
Status:   not reported yet: is k8sm-controller running?
",
                "{status:?}"
            );
        }
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
            serde_json::from_value(json!({"open": false, "opensAt": "2026-03-07T00:00:00Z"}))
                .unwrap();
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
            serde_json::from_value(json!({"open": true, "closesAt": "2026-03-01T13:00:00Z"}))
                .unwrap();
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
        let omitted: Vec<(NodePhase, u32)> =
            view.omitted.iter().map(|o| (o.phase, o.count)).collect();
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

    /// A fleet of 500 nodes as the controller reports it: 80 upgraded, 15 draining, 5 blocked, 400
    /// queued; and the nodes as their annotations tell them (every fifth in zone a).
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
                let labels =
                    std::collections::BTreeMap::from([("zone".to_owned(), zone.to_owned())]);
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
}
