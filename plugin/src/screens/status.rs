//! `upgrade status`: the policy's status, as the controller wrote it, turned into a progress report.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use kube::ResourceExt;
use serde::Serialize;

use k8sm_api::{ExecutorUpgradePolicy, NodeCounts, NodePhase, condition_types};
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
    /// The nodes listed one per row, most advanced first: by default those the status lists (those an operator
    /// looks at: waiting for an operator, blocked, in flight); with `--all`, every node.
    pub nodes: Vec<NodeRow>,
    /// Nodes without a row, by phase, each phase summed up in one line: the upgraded (Compatible), the queue
    /// (Incompatible), and nodes in flight beyond the status's bound.
    pub omitted: Vec<Omitted>,
    /// `-l`: the label selector that restricts the nodes listed and summed up, and how many nodes of the policy it
    /// matches.
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
    /// Open now, as last reported; `None` before the controller reported it (or with a window it cannot read).
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
        let reported = policy.status.is_some();
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
        // A row each only for nodes in flight or blocked: a queued node is listed only when something holds it (a
        // controller lists no other); the rest of the queue is summed up in one line.
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
            paused: policy.spec.paused,
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

    /// The view restricted to `fleet`, the policy's nodes that `-l` selects (all of them without `-l`), each
    /// classified from its annotations ([`FleetNode`]): rows only for those of `fleet`, and with `all` a row for
    /// every one (the status's row where it has one, for its blockers); the rest summed up by phase.
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

    /// The nodes without a row, a line per kind: "and 40 more Draining, …" (in flight beyond the status's bound),
    /// "Queued: 6,900 nodes …", and, when `-l` restricts the view (the Progress line counts the policy's), "Upgraded:
    /// 80 nodes …".
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
            // Blocked: waiting for an operator, or stalled on a workload or budget: no pace to go by either way.
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

/// Whether a pod of `status.blockedPods` waits on its owner (a workload below its bound, a budget over it, its Job):
/// a block that ends by itself, as the planner defines it. A pod that only an operator moves waits on itself.
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

/// What a node waits for: each distinct blocker once (and those the status left out, counted); narrow output shows
/// the first and a count of the rest.
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

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;

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
