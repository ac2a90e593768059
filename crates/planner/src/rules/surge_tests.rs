use super::*;

fn strategy(max_surge: Option<IntOrString>, max_unavailable: Option<IntOrString>) -> RolloutView {
    RolloutView {
        max_surge,
        max_unavailable,
        ..RolloutView::default()
    }
}

fn int(n: i32) -> Option<IntOrString> {
    Some(IntOrString::Int(n))
}

fn percent(text: &str) -> Option<IntOrString> {
    Some(IntOrString::String(text.into()))
}

/// The Deployment controller's fenceposts for one replica (`ResolveFenceposts` in kubernetes/pkg/controller/
/// deployment/util): maxSurge rounds up, maxUnavailable down, and 0/0 counts as maxUnavailable 1. Only surge ≥ 1
/// with unavailable 0 starts the new pod before the old one goes.
#[test]
fn only_strategies_that_start_the_new_pod_first_can_move_one_replica() {
    let can = [
        (None, None), // the apiserver's default, 25%/25%: 1 and 0
        (int(1), int(0)),
        (int(3), None),
        (percent("1%"), percent("99%")),
        (percent("100%"), percent("0%")),
    ];
    for (surge, unavailable) in can {
        assert_eq!(
            cannot_surge(&strategy(surge.clone(), unavailable.clone())),
            None,
            "{surge:?} {unavailable:?}"
        );
    }
    let cannot = [
        (int(0), int(1), "maxSurge 0"),
        (percent("0%"), percent("25%"), "maxSurge 0%"),
        (int(1), int(1), "maxUnavailable 1"),
        (None, percent("100%"), "maxUnavailable 100%"),
        // 0 and 0 is refused by the apiserver; the controller would take maxUnavailable 1.
        (int(0), int(0), "maxSurge 0"),
    ];
    for (surge, unavailable, why) in cannot {
        let said = cannot_surge(&strategy(surge, unavailable)).expect("cannot surge");
        assert!(said.contains(why), "{said}");
    }
    let recreate = RolloutView {
        rolling_update: false,
        ..RolloutView::default()
    };
    assert!(cannot_surge(&recreate).is_some_and(|s| s.contains("Recreate")));
    let paused = RolloutView {
        paused: true,
        ..RolloutView::default()
    };
    assert!(cannot_surge(&paused).is_some_and(|s| s.contains("paused")));
}

#[test]
fn a_move_record_names_its_pod_and_a_bad_one_is_no_record() {
    let at = DateTime::parse_from_rfc3339("2026-01-01T00:05:00Z")
        .unwrap()
        .with_timezone(&Utc);
    let rollout = |record: &str| RolloutView {
        surge_move: Some(record.into()),
        ..RolloutView::default()
    };
    let written = move_record(at, "uid-1");
    assert_eq!(written, "2026-01-01T00:05:00Z uid-1");
    assert_eq!(move_of(&rollout(&written), "uid-1"), Some(at));
    assert_eq!(move_of(&rollout(&written), "uid-2"), None);
    for bad in ["", "uid-1", "yesterday uid-1", "2026-01-01T00:05:00Z"] {
        assert_eq!(move_of(&rollout(bad), "uid-1"), None, "{bad:?}");
    }
}

#[test]
fn the_deployment_annotation_overrides_the_policy_and_a_bad_one_is_said() {
    let with = |value: Option<&str>| RolloutView {
        surge: value.map(str::to_owned),
        ..RolloutView::default()
    };
    use Surge::{Never, SingleReplica};
    assert_eq!(asked(SingleReplica, &with(None)), (true, None));
    assert_eq!(asked(Never, &with(None)), (false, None));
    assert_eq!(asked(Never, &with(Some("SingleReplica"))), (true, None));
    assert_eq!(asked(SingleReplica, &with(Some("Never"))), (false, None));
    let (asked, note) = asked(SingleReplica, &with(Some("yes")));
    assert!(asked);
    assert!(note.is_some_and(|n| n.contains("\"yes\"") && n.contains(keys::SURGE_ANNOTATION)));
}
