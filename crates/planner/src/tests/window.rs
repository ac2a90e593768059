//! The maintenance window (`spec.window`): outside it no node is admitted and no executor told to
//! restart; draining nodes finish (or hold); the pass plans again when the window opens or closes.

use k8sm_api::{InFlight, MaintenanceWindow, Weekday};

use super::*;
use crate::testing::{node, policy, replica_set};

// `now()` is 2026-01-01T01:00:00Z, a Thursday.

fn window(start: &str, end: &str, in_flight: InFlight) -> MaintenanceWindow {
    MaintenanceWindow {
        days: vec![Weekday::Thursday],
        start: start.into(),
        end: end.into(),
        time_zone: "UTC".into(),
        in_flight,
    }
}

/// A marked node n1, a drained node d1 (admitted, nothing left on it) and a draining node w1, each
/// of the last two with a pod of a workload that can lose one (w1's goes first), under a policy
/// with `window`.
fn fleet(window: Option<MaintenanceWindow>) -> ClusterView {
    let rs = replica_set("shop", "web", 10);
    let mut pods: Vec<PodView> = (0..8).map(|i| rs.pod(&format!("up-{i}"), "up")).collect();
    pods.push(rs.pod("web-n1", "n1"));
    pods.push(rs.pod("web-w1", "w1"));
    cluster(
        vec![
            node("n1").marked(at(0)),
            node("d1").marked(at(0)).admitted(at(1)),
            node("w1").marked(at(0)).admitted(at(1)),
            node("up").executor(crate::testing::NEW),
        ],
        vec![rs],
        pods,
        vec![policy("p").with(|s| {
            s.max_concurrent_nodes = "3".parse().expect("a count");
            s.window = window;
        })],
    )
}

fn conditions(plan: &Plan) -> Vec<(Reason, String)> {
    plan.policies[0]
        .conditions
        .iter()
        .map(|c| (c.reason, c.message.clone()))
        .collect()
}

#[test]
fn without_a_window_or_inside_it_the_upgrade_goes_on() {
    for window in [None, Some(window("00:30", "02:00", InFlight::Finish))] {
        let plan = plan_now(&fleet(window.clone()));
        assert_eq!(
            summary(&plan),
            ["Admit n1 +cordon", "Evict shop/web-w1", "Kamikaze d1"],
            "{window:?}"
        );
        let reasons: Vec<Reason> = conditions(&plan).into_iter().map(|(r, _)| r).collect();
        assert!(!reasons.contains(&Reason::OutsideWindow));
    }
    // The pass plans again when the window closes.
    let plan = plan_now(&fleet(Some(window("00:30", "02:00", InFlight::Finish))));
    assert!(plan.next_wake.is_some_and(|w| w <= at(120)));
}

#[test]
fn outside_the_window_no_node_is_admitted_and_no_executor_restarted_but_draining_nodes_finish() {
    let plan = plan_now(&fleet(Some(window("02:00", "03:00", InFlight::Finish))));
    assert_eq!(summary(&plan), ["Evict shop/web-w1"]);
    assert_eq!(phase(&plan, "d1"), NodePhase::Drained);
    assert_eq!(blocker_reasons(&plan, "d1"), [Reason::OutsideWindow]);
    assert_eq!(phase(&plan, "n1"), NodePhase::Incompatible);
    assert_eq!(blocker_reasons(&plan, "n1"), [Reason::OutsideWindow]);
    assert_eq!(
        conditions(&plan),
        [(
            Reason::OutsideWindow,
            "outside the maintenance window (Thu 02:00-03:00 UTC): no node is admitted and no executor told to \
             restart until it opens at 2026-01-01T02:00:00+00:00; nodes already draining finish draining"
                .to_owned()
        )]
    );
    // It plans again the moment the window opens.
    assert_eq!(plan.next_wake, Some(at(120)));
    assert_eq!(
        plan.policies[0].window,
        Some(k8sm_api::WindowState::Closed { opens: at(120) })
    );
    // Then the upgrade goes on.
    let opened = crate::plan(
        &fleet(Some(window("02:00", "03:00", InFlight::Finish))),
        at(120),
    );
    assert_eq!(
        summary(&opened),
        ["Admit n1 +cordon", "Evict shop/web-w1", "Kamikaze d1"]
    );
}

#[test]
fn with_in_flight_hold_nothing_moves_and_no_node_stalls_while_the_window_is_closed() {
    let plan = plan_now(&fleet(Some(window("02:00", "03:00", InFlight::Hold))));
    assert_eq!(summary(&plan), Vec::<String>::new());
    let (decision, reason, message) = pod_decision(&plan, "w1", "web-w1");
    assert_eq!(
        (decision, reason),
        (crate::Decision::Wait, Some(Reason::OutsideWindow))
    );
    assert!(
        message.starts_with("outside the maintenance window; would evict"),
        "{message}"
    );
    assert!(blocker_reasons(&plan, "w1").contains(&Reason::OutsideWindow));
    // Held for longer than nodeProgressDeadline (10 minutes) since its last progress: held, not
    // stalled; its progress record is kept fresh, so that it gets its whole deadline when the
    // window opens.
    let mut view = fleet(Some(window("02:00", "03:00", InFlight::Hold)));
    for node in &mut view.nodes {
        if node.name == "w1" {
            *node = node.clone().progressed(at(1), 1);
        }
    }
    let later = crate::plan(&view, at(119));
    assert_eq!(phase(&later, "w1"), NodePhase::Draining);
    assert_eq!(with_bookkeeping(&later), ["Progress w1 1"]);
}

#[test]
fn a_window_that_cannot_be_read_is_closed_and_says_what_to_fix() {
    let mut unreadable = window("00:30", "02:00", InFlight::Finish);
    unreadable.time_zone = "Europe/Berln".into();
    let plan = plan_now(&fleet(Some(unreadable)));
    assert_eq!(summary(&plan), ["Evict shop/web-w1"]);
    let (reason, message) = conditions(&plan).remove(0);
    assert_eq!(reason, Reason::InvalidPolicy);
    assert!(
        message.starts_with("spec.window.timeZone: \"Europe/Berln\" is not an IANA time zone"),
        "{message}"
    );
    assert_eq!(plan.policies[0].window, None);
}
