//! The status of a policy over 10,000 nodes whose annotations are as large and as hostile as a Node
//! allows stays far below etcd's object size limit (1.5 MiB), and still counts every node in its
//! phase (docs/design.md §5.1). The fleet is generated in known states ([`Group`], the oracle),
//! planned by the real planner and reported by the controller's status builder; names are as long
//! as Kubernetes allows.

use std::collections::BTreeMap;

use k8sm_api::text::is_unsafe;
use k8sm_api::{
    ExecutorUpgradePolicyStatus, KamikazeMechanism, MAX_BLOCKED_PODS, MAX_MESSAGE, MAX_NODES,
    MaxConcurrentNodes, NodePhase, keys,
};
use k8sm_controller::build_status;
use k8sm_planner::testing::{at, node, policy, replica_set, unmanaged_pod};
use k8sm_planner::{ClusterView, DeletedNodeRecord, NodeView};

const NODES: usize = 10_000;
/// Far under etcd's 1.5 MiB request limit.
const LIMIT: usize = 256 * 1024;
/// The annotation values, full of control characters, of every node that may be listed (blocked
/// or in flight: 1,000, plus 100 deleted nodes), where the planner reads or reports them (the
/// executor ID, the incompatible-executor time).
const BIG: usize = 200 * 1024;
/// Those of the 8,900 others: `BIG` for every node would make this test hold 2 GB.
const SMALL: usize = 4 * 1024;

/// The generated groups: how many nodes, in which phase, whether an operator must act, whether they
/// carry `BIG` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Group {
    Upgraded,
    Queued,
    /// Queued, with an incompatible-executor annotation that is no time.
    Malformed,
    /// Draining, its one pod waiting for its workload.
    Draining,
    Kamikazed,
    /// Told to terminate long ago, not back.
    Overdue,
    /// Back from kamikaze with its old executor.
    CameBackWrong,
    /// Gave up its slot, queued again.
    Stalled,
    /// Draining, its one pod opted out.
    OptedOutPod,
    /// Deleted as its kamikaze (mechanism DeleteNode), not back yet: only in `status.deletedNodes`.
    Deleted,
}

impl Group {
    const ALL: [(Self, usize); 10] = [
        (Self::Upgraded, 3_000),
        (Self::Queued, 5_900),
        (Self::Malformed, 200),
        (Self::Draining, 200),
        (Self::Kamikazed, 200),
        (Self::Overdue, 100),
        (Self::CameBackWrong, 50),
        (Self::Stalled, 50),
        (Self::OptedOutPod, 200),
        (Self::Deleted, 100),
    ];

    fn phase(self) -> NodePhase {
        match self {
            Self::Upgraded => NodePhase::Compatible,
            Self::Queued | Self::Malformed => NodePhase::Incompatible,
            Self::Draining => NodePhase::Draining,
            Self::Kamikazed | Self::Overdue | Self::Deleted => NodePhase::KamikazeSent,
            Self::CameBackWrong | Self::Stalled | Self::OptedOutPod => NodePhase::Blocked,
        }
    }

    fn needs_operator(self) -> bool {
        matches!(
            self,
            Self::Malformed | Self::Overdue | Self::CameBackWrong | Self::OptedOutPod
        )
    }

    fn value_size(self) -> usize {
        match self {
            Self::Upgraded | Self::Queued => SMALL,
            _ => BIG,
        }
    }

    /// Nodes that hold a drain slot (the policy has exactly that many, so nothing is admitted).
    fn holds_slot(self) -> bool {
        matches!(
            self,
            Self::Draining | Self::Kamikazed | Self::Overdue | Self::CameBackWrong | Self::Deleted
        )
    }
}

/// A name of `len` bytes (Kubernetes allows 253 for nodes and pods, 63 for namespaces) ending in
/// `i`.
fn long_name(prefix: &str, i: usize, len: usize) -> String {
    let tail = format!("{prefix}-{i:05}");
    format!("{}{tail}", "a".repeat(len - tail.len()))
}

/// `size` bytes that would clear a terminal, ring its bell and reverse its text, distinct per node.
fn hostile(i: usize, size: usize) -> String {
    let mut value = format!("\x1b[2J\x07\u{202e}{i}\n");
    value.push_str(&"\x1b[31m;\r".repeat(size / 8));
    value.truncate(size);
    value
}

struct Fleet {
    view: ClusterView,
    groups: BTreeMap<String, Group>,
    blocked_pods: usize,
}

fn fleet() -> Fleet {
    let target = format!("sha256:{}", "f".repeat(249));
    let namespace = long_name("ns", 0, 63);
    let mut view = ClusterView::default();
    let mut groups = BTreeMap::new();
    let mut deleted = Vec::new();
    let mut blocked_pods = 0;
    let mut i = 0;
    for (group, count) in Group::ALL {
        for _ in 0..count {
            i += 1;
            let name = long_name("node", i, 253);
            groups.insert(name.clone(), group);
            let value = hostile(i, group.value_size());
            let old = node(&name).executor(&value);
            let n: NodeView = match group {
                Group::Upgraded => node(&name).executor(&target),
                Group::Queued => old.marked(at(0)),
                Group::Malformed => NodeView {
                    incompatible_since: Some(value),
                    ..old.marked(at(0))
                },
                Group::Draining | Group::OptedOutPod => {
                    old.marked(at(0)).admitted(at(1)).progressed(at(59), 1)
                }
                Group::Kamikazed => old.marked(at(0)).admitted(at(1)).kamikazed(at(59)),
                Group::Overdue => old.marked(at(0)).admitted(at(1)).kamikazed(at(2)),
                Group::CameBackWrong => NodeView {
                    kamikaze: None,
                    kamikaze_obeyed: true,
                    ..old.marked(at(0)).admitted(at(1)).kamikazed(at(30))
                },
                Group::Stalled => old.marked(at(0)).stalled(at(50)),
                Group::Deleted => {
                    deleted.push(DeletedNodeRecord {
                        name,
                        uid: format!("uid-{i}"),
                        // As an earlier version recorded it: raw.
                        executor_id: Some(value),
                        deleted_at: at(59),
                        target: None,
                    });
                    continue;
                }
            };
            view.nodes.push(n);
            match group {
                Group::Draining => {
                    // Its workload has 2 replicas and the other one is not Ready: the pod here
                    // waits.
                    let workload = replica_set(&namespace, &long_name("web", i, 253), 2);
                    view.pods
                        .push(workload.pod(&long_name("pod", i, 253), &name).into());
                    let elsewhere = long_name("node", 1, 253);
                    view.pods.push(
                        workload
                            .pod(&long_name("other", i, 253), &elsewhere)
                            .not_ready()
                            .into(),
                    );
                    view.owners.push(workload.into());
                    blocked_pods += 1;
                }
                Group::OptedOutPod => {
                    let pod = unmanaged_pod(&namespace, &long_name("pinned", i, 253), &name)
                        .label(keys::UPGRADE_OPT_OUT_LABEL, keys::UPGRADE_OPT_OUT_VALUE);
                    view.pods.push(pod.into());
                    blocked_pods += 1;
                }
                _ => {}
            }
        }
    }
    let slots = Group::ALL
        .iter()
        .filter(|(g, _)| g.holds_slot())
        .map(|(_, n)| u32::try_from(*n).unwrap())
        .sum::<u32>();
    let mut p = policy("fleet").with(|s| {
        s.target_executor_id = Some(target);
        s.kamikaze.mechanism = KamikazeMechanism::DeleteNode;
        s.max_concurrent_nodes = MaxConcurrentNodes::Count(slots.try_into().unwrap());
    });
    p.deleted_nodes = deleted;
    view.policies.push(p);
    Fleet {
        view,
        groups,
        blocked_pods,
    }
}

#[test]
fn the_status_of_10_000_nodes_with_huge_annotations_stays_far_below_the_object_size_limit() {
    let fleet = fleet();
    assert_eq!(fleet.groups.len(), NODES);
    let now = at(60);
    let plan = k8sm_planner::plan(&fleet.view, now);
    let policy = plan.policy("fleet").expect("the policy's plan");
    let status: ExecutorUpgradePolicyStatus = build_status(&plan, policy, None, now);
    let json = serde_json::to_vec(&status).unwrap();
    println!(
        "status of {NODES} nodes: {} bytes ({} nodes listed, {} blocked pods listed, {} deleted nodes)",
        json.len(),
        status.nodes.len(),
        status.blocked_pods.len(),
        status.deleted_nodes.len()
    );
    assert!(json.len() < LIMIT, "{} bytes", json.len());

    // Every node counted in its phase.
    let mut expected = k8sm_api::NodeCounts::default();
    for (group, count) in Group::ALL {
        for _ in 0..count {
            expected.add(group.phase());
        }
    }
    assert_eq!(status.counts, expected);
    assert_eq!(status.counts.total as usize, NODES);
    assert_eq!(
        status.upgraded.as_deref(),
        Some(format!("3000/{NODES}").as_str())
    );

    // Listed: the most urgent, within the bounds; counted: the rest.
    let upgrading = NODES - 3_000;
    assert!(!status.nodes.is_empty() && status.nodes.len() <= MAX_NODES);
    assert_eq!(
        status.omitted_nodes,
        Some(u32::try_from(upgrading - status.nodes.len()).unwrap())
    );
    let operator_nodes: usize = Group::ALL
        .iter()
        .filter(|(g, _)| g.needs_operator())
        .map(|(_, n)| n)
        .sum();
    assert!(
        operator_nodes >= MAX_NODES,
        "the test fills the list with them"
    );
    for entry in &status.nodes {
        let group = fleet.groups[&entry.name];
        assert!(
            group.needs_operator(),
            "{group:?} listed before those that need an operator"
        );
        assert_eq!(entry.phase, group.phase(), "{group:?}");
    }
    assert_eq!(
        status.blocked_pods_total,
        Some(u32::try_from(fleet.blocked_pods).unwrap())
    );
    assert!(!status.blocked_pods.is_empty() && status.blocked_pods.len() <= MAX_BLOCKED_PODS);
    for pod in &status.blocked_pods {
        assert_eq!(
            pod.reason, "BlockedOptOut",
            "those that need an operator first"
        );
    }
    assert_eq!(status.deleted_nodes.len(), 100);

    // No string from the nodes' data is copied raw.
    let text = String::from_utf8(json).unwrap();
    assert!(
        !text.contains("\\u001b"),
        "an escape character reached the status"
    );
    let from_nodes = status
        .nodes
        .iter()
        .flat_map(|n| n.blockers.iter().chain(&n.executor_id))
        .chain(status.blocked_pods.iter().map(|p| &p.message))
        .chain(
            status
                .deleted_nodes
                .iter()
                .filter_map(|d| d.executor_id.as_ref()),
        );
    for s in from_nodes {
        assert!(s.len() <= MAX_MESSAGE, "{} bytes", s.len());
        assert!(!s.chars().any(is_unsafe), "{s:?}");
    }
    for condition in &status.conditions {
        assert!(!condition.message.chars().any(is_unsafe), "{condition:?}");
    }
}
