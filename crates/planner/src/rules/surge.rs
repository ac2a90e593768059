//! Surge moves (`spec.workloads.surge`, docs/design.md §5.3): the only pod of a Deployment leaves
//! its draining node by a rollout of the Deployment that starts the new pod first, instead of an
//! eviction that leaves the workload with no Ready pod until its replacement is Ready. The
//! Deployment's own controller does the move; the record on the Deployment
//! ([`k8sm_api::keys::SURGE_MOVE_ANNOTATION`]) lets any pass, of any replica, after any restart,
//! know it is under way.

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8sm_api::{Surge, keys};

use crate::{
    PodView, model::view::RolloutView, objects::workload::Workload,
    rules::node_context::NodeContext,
};

/// What the surge rule says about a pod of a workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Move {
    /// The ordinary rule applies. `why_not`: why a move that was asked for cannot happen, for the
    /// eviction's message.
    Ordinary { why_not: Option<String> },
    /// Start a move now.
    Start,
    /// A move of this pod is under way since `since`: wait, until `until` at most.
    UnderWay {
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    },
    /// The pod moves by a rollout, but not yet: its node is not cordoned yet.
    NotYet,
    /// The pod moves by a rollout once the Deployment's last rollout is complete (`kubectl rollout
    /// status`'s test).
    AfterRollout,
    /// The move started at `since` brought no Ready pod in time: evict by the ordinary rule,
    /// although the Deployment is rolling out (its rollout waits for the new pod, so it takes
    /// nothing away meanwhile).
    Overdue { since: DateTime<Utc> },
}

/// Judges `pod`, a pod of `workload`, on the node of `ctx`.
pub(crate) fn judge(pod: &PodView, workload: Workload, ctx: &NodeContext) -> Move {
    let ordinary = Move::Ordinary { why_not: None };
    let Some(rollout) = workload.rollout() else {
        return ordinary;
    };
    let (asked, malformed) = asked(ctx.spec.workloads.surge, rollout);
    if !asked || workload.desired() != Some(1) || !pod.ready {
        // A pod that is not Ready costs no readiness to evict.
        return ordinary;
    }
    if let Some(since) = move_of(rollout, &pod.uid) {
        let deadline = ctx.spec.progress_deadline();
        return match since.checked_add_signed(deadline) {
            Some(until) if !ctx.reached(until) => Move::UnderWay { since, until },
            _ => Move::Overdue { since },
        };
    }
    let why_not = if !ctx.node.unschedulable && !ctx.spec.cordon {
        Some(
            "the node is not cordoned (cordon: false), so the new pod could start on it".to_owned(),
        )
    } else {
        cannot_surge(rollout)
    };
    match why_not {
        Some(why) => Move::Ordinary {
            why_not: Some(match malformed {
                Some(note) => format!("{why}; {note}"),
                None => why,
            }),
        },
        None if !rollout.complete || workload.replacing() => Move::AfterRollout,
        None if !ctx.node.unschedulable => Move::NotYet,
        None => Move::Start,
    }
}

/// Whether a move is asked for: the Deployment's annotation, else the policy. With a note when the
/// annotation is neither value (the policy's setting applies).
fn asked(policy: Surge, rollout: &RolloutView) -> (bool, Option<String>) {
    match rollout
        .surge
        .as_deref()
        .map(|v| (v, Surge::parse(v.trim())))
    {
        None => (policy == Surge::SingleReplica, None),
        Some((_, Some(own))) => (own == Surge::SingleReplica, None),
        Some((value, None)) => (
            policy == Surge::SingleReplica,
            Some(format!(
                "its annotation {}={value:?} is neither SingleReplica nor Never, so the policy's surge setting \
                 applies",
                keys::SURGE_ANNOTATION
            )),
        ),
    }
}

/// When the move of the pod `uid` started, by the Deployment's record; `None` when the record names
/// another pod or cannot be read (a new move then starts, which is harmless: a rollout of a
/// complete Deployment).
fn move_of(rollout: &RolloutView, uid: &str) -> Option<DateTime<Utc>> {
    let (at, pod) = rollout.surge_move.as_deref()?.trim().split_once(' ')?;
    (pod.trim() == uid).then_some(())?;
    Some(DateTime::parse_from_rfc3339(at).ok()?.with_timezone(&Utc))
}

/// The annotation value of a move of pod `uid` started at `at`.
pub fn move_record(at: DateTime<Utc>, uid: &str) -> String {
    format!(
        "{} {uid}",
        at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    )
}

/// Why the Deployment's rollout cannot move its one pod without downtime, if it cannot. The
/// Deployment controller resolves maxSurge rounding up and maxUnavailable rounding down (with one
/// replica, 25%/25% is 1/0), and when both come to 0 it takes maxUnavailable as 1.
fn cannot_surge(rollout: &RolloutView) -> Option<String> {
    if !rollout.rolling_update {
        return Some("its strategy is Recreate, which stops the old pod first".into());
    }
    if rollout.paused {
        return Some("it is paused, so it does not roll out".into());
    }
    let surge = scaled(rollout.max_surge.as_ref(), true);
    let unavailable = scaled(rollout.max_unavailable.as_ref(), false);
    let shown = |value: Option<&IntOrString>| match value {
        Some(IntOrString::Int(n)) => n.to_string(),
        Some(IntOrString::String(s)) => s.clone(),
        None => "25%".into(),
    };
    if surge < 1 {
        return Some(format!(
            "its maxSurge {} starts no new pod before the old one goes",
            shown(rollout.max_surge.as_ref())
        ));
    }
    if unavailable > 0 {
        return Some(format!(
            "its maxUnavailable {} lets its rollout stop the old pod first",
            shown(rollout.max_unavailable.as_ref())
        ));
    }
    None
}

/// A rolling update bound for one replica: a count as is, a percentage of one replica rounded up or
/// down; `None` is the default, 25%. A value that cannot be read counts as 0 (the apiserver rejects
/// such values anyway).
fn scaled(value: Option<&IntOrString>, round_up: bool) -> i64 {
    let percent = match value {
        Some(IntOrString::Int(n)) => return i64::from(*n),
        Some(IntOrString::String(s)) => match s.trim().strip_suffix('%').map(str::parse::<i64>) {
            Some(Ok(p)) => p,
            _ => return 0,
        },
        None => 25,
    };
    if round_up {
        (percent + 99).div_euclid(100)
    } else {
        percent.div_euclid(100)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strategy(
        max_surge: Option<IntOrString>,
        max_unavailable: Option<IntOrString>,
    ) -> RolloutView {
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

    /// The Deployment controller's fenceposts for one replica (`ResolveFenceposts` in
    /// kubernetes/pkg/controller/ deployment/util): maxSurge rounds up, maxUnavailable down,
    /// and 0/0 counts as maxUnavailable 1. Only surge ≥ 1 with unavailable 0 starts the new pod
    /// before the old one goes.
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
}
