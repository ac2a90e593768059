//! Clusters the rendering tests share, built with the planner's test builders.

use k8sm_api::MaxConcurrentNodes;
use k8sm_planner::testing::{NEW, at, node, owner, pdb, policy, replica_set};
use k8sm_planner::{ClusterView, NodeView, OwnerKind};

/// A fleet that is stuck in the ways the planner reports as Blocked, with two drain slots:
/// - n1 stalled before and queues again: web-1 waits for its workload (web-2 is not Ready); api-1
///   could go and waits for a slot;
/// - n3 drains: kafka-0, a pod of a controller k8sm does not know, waits for a budget that allows
///   nothing;
/// - n4 runs the target;
/// - n5 came back from kamikaze still running its old executor (it acknowledged the kamikaze by
///   removing it), and keeps its slot.
pub fn stuck_cluster() -> ClusterView {
    let web = replica_set("shop", "web", 2);
    let api = replica_set("shop", "api", 3);
    let kafka = owner(
        OwnerKind::Other("KafkaNodePool".into()),
        "data",
        "kafka",
        None,
    );
    let came_back = NodeView {
        kamikaze: None,
        kamikaze_obeyed: true,
        ..node("n5").marked(at(0)).admitted(at(1)).kamikazed(at(5))
    };
    ClusterView {
        nodes: vec![
            node("n1").marked(at(0)).stalled(at(20)),
            node("n3")
                .marked(at(0))
                .admitted(at(21))
                .progressed(at(21), 1),
            node("n4").executor(NEW),
            came_back,
        ],
        pods: k8sm_planner::testing::shared_pods([
            web.pod("web-1", "n1"),
            web.pod("web-2", "n4").not_ready(),
            api.pod("api-1", "n1"),
            api.pod("api-2", "n4"),
            api.pod("api-3", "n4"),
            kafka.pod("kafka-0", "n3").label("app", "kafka"),
            kafka.pod("kafka-1", "n4").label("app", "kafka"),
        ]),
        owners: vec![web.into(), api.into()],
        pdbs: vec![pdb("data", "kafka", &[("app", "kafka")], 0)],
        policies: vec![policy("fleet").with(|s| {
            s.max_concurrent_nodes =
                MaxConcurrentNodes::Count(std::num::NonZeroU32::MIN.saturating_add(1))
        })],
        ..ClusterView::default()
    }
}
