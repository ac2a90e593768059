//! `blocked`: every pod that keeps a draining node from finishing, from a live plan: why, and since
//! when.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use k8sm_planner::{ClusterView, Plan, PodClass, Reason};

use crate::render::{Palette, age, clean, grid};
use crate::screens::owner::owner_column;

/// Which namespaces to show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Namespaces {
    All,
    One(String),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockedPodRow {
    pub policy: String,
    pub node: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// "Kind/name" of the workload it counts for, or none for an unmanaged pod.
    pub owner: Option<String>,
    /// How the planner classes it: a workload's pod (`owned`), a pod of a controller of a kind
    /// k8sm does not know (`otherController`), a Job's, an unmanaged or an opted-out pod.
    pub class: PodClass,
    pub reason: Reason,
    /// Only an operator moves it ([`k8sm_planner::PodPlan::needs_operator`]); the other waits end
    /// by themselves.
    pub needs_operator: bool,
    pub message: String,
    /// Since the node started draining, or since the pod arrived if it came later.
    pub since: Option<DateTime<Utc>>,
    /// For waits that end by themselves at a known time.
    pub until: Option<DateTime<Utc>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockedScreen {
    /// `None`: every namespace.
    pub namespace: Option<String>,
    pub pods: Vec<BlockedPodRow>,
}

impl BlockedScreen {
    pub fn from_plan(plan: &Plan, view: &ClusterView, namespaces: &Namespaces) -> Self {
        let created: HashMap<&str, DateTime<Utc>> = view
            .pods
            .iter()
            .filter_map(|p| Some((&*p.uid, p.created?)))
            .collect();
        // The planner names owners only of pods it judges by their owner; an opted-out pod has one
        // all the same.
        let controllers: HashMap<&str, String> = view
            .pods
            .iter()
            .filter_map(|p| {
                let c = p.controller.as_ref()?;
                Some((&*p.uid, format!("{}/{}", c.kind, c.name)))
            })
            .collect();
        let mut pods: Vec<BlockedPodRow> = plan
            .nodes
            .iter()
            .flat_map(|node| node.pods.iter().map(move |pod| (node, pod)))
            .filter(|(_, pod)| pod.is_blocked())
            .filter(|(_, pod)| match namespaces {
                Namespaces::All => true,
                Namespaces::One(ns) => *pod.pod.namespace() == **ns,
            })
            .filter_map(|(node, pod)| Some((node, pod, pod.reason?)))
            .map(|(node, pod, reason)| {
                let arrived = created.get(pod.pod.uid()).copied();
                BlockedPodRow {
                    policy: node.policy.clone(),
                    node: node.node.clone(),
                    namespace: pod.pod.namespace().to_string(),
                    name: pod.pod.name().to_string(),
                    uid: pod.pod.uid().to_string(),
                    owner: pod
                        .owner
                        .as_ref()
                        .map(ToString::to_string)
                        .or_else(|| controllers.get(pod.pod.uid()).cloned()),
                    class: pod.class.clone(),
                    reason,
                    needs_operator: pod.needs_operator(),
                    message: pod.message.to_string(),
                    since: node.since.max(arrived),
                    until: pod.until,
                }
            })
            .collect();
        // Oldest first, like the policy's status: the longest wait is the most urgent.
        pods.sort_by(|a, b| {
            (a.since.is_none(), a.since, &a.node, &a.namespace, &a.name).cmp(&(
                b.since.is_none(),
                b.since,
                &b.node,
                &b.namespace,
                &b.name,
            ))
        });
        Self {
            namespace: match namespaces {
                Namespaces::All => None,
                Namespaces::One(ns) => Some(ns.clone()),
            },
            pods,
        }
    }

    /// With headers, as the tests read it.
    #[cfg(test)]
    pub fn render(&self, wide: bool, now: DateTime<Utc>, palette: Palette) -> String {
        self.render_table(wide, true, now, palette)
    }

    /// The table, without its header line unless `headers_shown` (`--no-headers`: then an
    /// empty list prints nothing, for scripts).
    pub fn render_table(
        &self,
        wide: bool,
        headers_shown: bool,
        now: DateTime<Utc>,
        palette: Palette,
    ) -> String {
        if self.pods.is_empty() && !headers_shown {
            return String::new();
        }
        if self.pods.is_empty() {
            return match &self.namespace {
                Some(ns) => format!("No blocked pods in namespace {ns}.\n"),
                None => "No blocked pods.\n".to_owned(),
            };
        }
        let mut columns = vec!["NODE"];
        if self.namespace.is_none() {
            columns.push("NAMESPACE");
        }
        columns.extend(["POD", "OWNER", "REASON", "SINCE"]);
        if wide {
            columns.extend(["POLICY", "UID"]);
        }
        columns.push("WHY");
        let rows: Vec<Vec<String>> = self
            .pods
            .iter()
            .map(|p| {
                let mut row = vec![clean(&p.node, wide)];
                if self.namespace.is_none() {
                    row.push(clean(&p.namespace, wide));
                }
                row.extend([
                    clean(&p.name, wide),
                    clean(&owner_column(&p.class, p.owner.as_deref()), wide),
                    reason_text(p, palette),
                    age(p.since, now),
                ]);
                if wide {
                    row.extend([clean(&p.policy, wide), clean(&p.uid, wide)]);
                }
                row.push(clean(
                    p.message.strip_prefix("wait: ").unwrap_or(&p.message),
                    wide,
                ));
                row
            })
            .collect();
        grid(headers_shown.then_some(&columns[..]), &rows)
    }
}

/// Operator-only blocks in red, waits that resolve by themselves in yellow.
fn reason_text(pod: &BlockedPodRow, palette: Palette) -> String {
    if pod.needs_operator {
        palette.red(pod.reason.as_str())
    } else {
        palette.yellow(pod.reason.as_str())
    }
}

#[cfg(test)]
mod tests {
    //! Rendering tests of `blocked`: plans in, text out.

    use super::*;
    use crate::screens::fixtures::stuck_cluster;
    use k8sm_api::UnmanagedPodPolicy;
    use k8sm_planner::testing::{at, node, policy, replica_set, unmanaged_pod};
    use k8sm_planner::{
        ClusterView, Decision, NodePlan, OwnerKind, OwnerRef, PodClass, PodPlan, PodRef,
    };

    fn pod_plan(
        namespace: &str,
        name: &str,
        owner: Option<(&str, &str)>,
        decision: Decision,
        reason: Option<Reason>,
        message: &str,
    ) -> PodPlan {
        PodPlan {
            pod: PodRef::new(namespace, name, format!("{namespace}/{name}")),
            owner: owner.map(|(kind, name)| OwnerRef {
                kind: OwnerKind::from(kind),
                name: name.into(),
                uid: format!("uid-{name}").into(),
            }),
            class: if owner.is_some() {
                PodClass::Owned
            } else {
                PodClass::Unmanaged
            },
            decision,
            reason,
            message: message.into(),
            until: None,
        }
    }

    fn node_plan(name: &str, since_minutes: i64, pods: Vec<PodPlan>) -> NodePlan {
        NodePlan {
            node: name.into(),
            policy: "fleet".into(),
            phase: k8sm_api::NodePhase::Draining,
            since: Some(at(since_minutes)),
            pods_left: pods.len() as u32,
            executor_id: None,
            ready: true,
            blockers: vec![],
            admission_position: None,
            operator_pods: 0,
            pods: pods.into(),
        }
    }

    fn sample() -> Plan {
        Plan {
            nodes: vec![
                node_plan(
                    "node-2",
                    5,
                    vec![
                        pod_plan(
                            "shop",
                            "web-a",
                            Some(("ReplicaSet", "web-6d4f")),
                            Decision::Wait,
                            Some(Reason::WaitingForOwner),
                            "wait: owner ReplicaSet web-6d4f 8/10 ready, needs 9 (threshold 90%)",
                        ),
                        pod_plan(
                            "shop",
                            "web-b",
                            Some(("ReplicaSet", "web-6d4f")),
                            Decision::Evict,
                            Some(Reason::Evicted),
                            "evict: …",
                        ),
                        pod_plan(
                            "kube-system",
                            "agent-x",
                            Some(("DaemonSet", "agent")),
                            Decision::Ignore,
                            None,
                            "DaemonSet pod",
                        ),
                        pod_plan(
                            "shop",
                            "web-c",
                            Some(("ReplicaSet", "web-6d4f")),
                            Decision::Wait,
                            Some(Reason::WaitingForTermination),
                            "terminating",
                        ),
                    ],
                ),
                node_plan(
                    "node-1",
                    1,
                    vec![
                        pod_plan(
                            "ops",
                            "debug",
                            None,
                            Decision::Block,
                            Some(Reason::BlockedUnmanagedPod),
                            "unmanaged pod (no controller): policy Never; delete it, or `kubectl k8sm force node-1`",
                        ),
                        pod_plan(
                            "shop",
                            "db-0",
                            Some(("StatefulSet", "db")),
                            Decision::Wait,
                            Some(Reason::BlockedByPDB),
                            "wait: PodDisruptionBudget shop/db-pdb allows no disruption now",
                        ),
                    ],
                ),
            ],
            ..Plan::default()
        }
    }

    #[test]
    fn no_headers_leaves_out_the_header_line_and_the_empty_sentence() {
        let view = BlockedScreen::from_plan(&sample(), &ClusterView::default(), &Namespaces::All);
        let text = view.render_table(false, false, at(10), Palette::PLAIN);
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(text.starts_with("node-1   ops    debug   none "), "{text}");
        let empty =
            BlockedScreen::from_plan(&Plan::default(), &ClusterView::default(), &Namespaces::All);
        assert_eq!(empty.render_table(false, false, at(10), Palette::PLAIN), "");
        assert_eq!(
            empty.render(false, at(10), Palette::PLAIN),
            "No blocked pods.\n"
        );
    }

    #[test]
    fn only_pods_that_block_are_listed_oldest_first() {
        let view = BlockedScreen::from_plan(&sample(), &ClusterView::default(), &Namespaces::All);
        let names: Vec<&str> = view.pods.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["debug", "db-0", "web-a"]);
        let text = view.render(false, at(10), Palette::PLAIN);
        assert_eq!(
        text,
        "NODE     NAMESPACE   POD     OWNER                 REASON                SINCE   WHY
node-1   ops         debug   none                  BlockedUnmanagedPod   9m0s    unmanaged pod (no controller): policy Never; delete it, or `kubectl k8sm force node-1`
node-1   shop        db-0    StatefulSet/db        BlockedByPDB          9m0s    PodDisruptionBudget shop/db-pdb allows no disruption now
node-2   shop        web-a   ReplicaSet/web-6d4f   WaitingForOwner       5m0s    owner ReplicaSet web-6d4f 8/10 ready, needs 9 (threshold 90%)
"
    );
    }

    #[test]
    fn one_namespace_drops_the_namespace_column() {
        let view = BlockedScreen::from_plan(
            &sample(),
            &ClusterView::default(),
            &Namespaces::One("shop".into()),
        );
        let text = view.render(false, at(10), Palette::PLAIN);
        assert!(text.starts_with("NODE     POD     OWNER"), "{text}");
        assert!(!text.contains("debug"), "{text}");
        assert_eq!(text.lines().count(), 3, "{text}");
    }

    #[test]
    fn wide_adds_policy_and_uid() {
        let view = BlockedScreen::from_plan(&sample(), &ClusterView::default(), &Namespaces::All);
        let text = view.render(true, at(10), Palette::PLAIN);
        let debug = text.lines().find(|l| l.contains("debug")).unwrap();
        assert!(
            debug.contains("fleet") && debug.contains("ops/debug"),
            "{debug}"
        );
    }

    #[test]
    fn nothing_blocked_says_so() {
        let empty = Plan::default();
        let all = BlockedScreen::from_plan(&empty, &ClusterView::default(), &Namespaces::All);
        assert_eq!(
            all.render(false, at(0), Palette::PLAIN),
            "No blocked pods.\n"
        );
        let one = BlockedScreen::from_plan(
            &empty,
            &ClusterView::default(),
            &Namespaces::One("shop".into()),
        );
        assert_eq!(
            one.render(false, at(0), Palette::PLAIN),
            "No blocked pods in namespace shop.\n"
        );
    }

    #[test]
    fn since_is_when_the_pod_arrived_if_after_the_drain_started() {
        let mut plan = sample();
        plan.nodes.truncate(1);
        let mut view = ClusterView::default();
        let mut late = unmanaged_pod("shop", "web-a", "node-2");
        late.created = Some(at(8));
        view.pods.push(late.into());
        let blocked = BlockedScreen::from_plan(&plan, &view, &Namespaces::All);
        assert_eq!(blocked.pods[0].since, Some(at(8)));
    }

    #[test]
    fn the_live_planner_blocks_never_and_opted_out_pods() {
        // One node with an unmanaged pod under policy Never and an opted-out pod of a healthy
        // Deployment.
        let web = replica_set("shop", "web", 3);
        let view = ClusterView {
            nodes: vec![
                node("n1").marked(at(0)).admitted(at(1)),
                node("n3").executor(k8sm_planner::testing::NEW),
            ],
            pods: k8sm_planner::testing::shared_pods([
                unmanaged_pod("ops", "debug", "n1"),
                web.pod("web-1", "n1")
                    .label(k8sm_api::keys::UPGRADE_OPT_OUT_LABEL, "true"),
                web.pod("web-2", "n3"),
                web.pod("web-3", "n3"),
            ]),
            owners: vec![web.into()],
            policies: vec![
                policy("fleet").with(|s| s.unmanaged_pods.policy = UnmanagedPodPolicy::Never),
            ],
            ..ClusterView::default()
        };
        let plan = k8sm_planner::plan(&view, at(2));
        let blocked = BlockedScreen::from_plan(&plan, &view, &Namespaces::All);
        let rows: Vec<(&str, &str, Reason)> = blocked
            .pods
            .iter()
            .map(|p| (p.node.as_str(), p.name.as_str(), p.reason))
            .collect();
        assert_eq!(
            rows,
            [
                ("n1", "debug", Reason::BlockedUnmanagedPod),
                ("n1", "web-1", Reason::BlockedOptOut)
            ]
        );
        let text = blocked.render(false, at(3), Palette::PLAIN);
        assert!(
            text.lines()
                .any(|l| l.contains("web-1") && l.contains("ReplicaSet/web")),
            "{text}"
        );
    }

    #[test]
    fn a_stalled_node_lists_what_it_waits_on_not_its_wait_for_a_slot() {
        let view = stuck_cluster();
        let plan = k8sm_planner::plan(&view, at(22));
        let n1 = plan.node("n1").unwrap();
        assert_eq!(n1.phase, k8sm_api::NodePhase::Blocked);
        let blocked = BlockedScreen::from_plan(&plan, &view, &Namespaces::All);
        let rows: Vec<(&str, &str, Reason, bool)> = blocked
            .pods
            .iter()
            .map(|p| (p.node.as_str(), p.name.as_str(), p.reason, p.needs_operator))
            .collect();
        // api-1 could go but waits for a slot: not a block. kafka-0, of another controller, is
        // asked for whatever its budget's count says (the Eviction API decides): not a
        // block either until the API refuses it.
        assert_eq!(rows, [("n1", "web-1", Reason::WaitingForOwner, false)]);
        let text = blocked.render(false, at(23), Palette::PLAIN);
        assert!(
            text.lines()
                .any(|l| l.contains("web-1") && l.contains("ReplicaSet/web")),
            "{text}"
        );
    }

    #[test]
    fn operator_only_reasons_are_red_and_waits_yellow() {
        let view = BlockedScreen::from_plan(&sample(), &ClusterView::default(), &Namespaces::All);
        let text = view.render(false, at(10), Palette::COLOR);
        let line = |name: &str| text.lines().find(|l| l.contains(name)).unwrap().to_owned();
        assert!(
            line("debug").contains("\x1b[31mBlockedUnmanagedPod"),
            "{text}"
        );
        assert!(line("db-0").contains("\x1b[33mBlockedByPDB"), "{text}");
        assert!(line("web-a").contains("\x1b[33mWaitingForOwner"), "{text}");
    }
}
