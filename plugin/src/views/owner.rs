//! How a pod's owner reads in `plan` and `blocked`: the workload it counts for, and whether it is a controller k8sm
//! does not know (an operator's custom resource), whose pods move one at a time through the Eviction API only.

use k8sm_planner::{PodClass, PodPlan};

/// "Deployment/web", "KafkaNodePool/kafka (other controller)", or `None` when the planner names no owner.
pub fn owner_text(pod: &PodPlan) -> Option<String> {
    let owner = pod.owner.as_ref()?;
    Some(match pod.class {
        PodClass::OtherController => format!("{owner} (other controller)"),
        _ => owner.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use k8sm_planner::{Decision, OwnerKind, OwnerRef, PodRef};

    use super::*;

    fn pod(class: PodClass, owner: Option<(&str, &str)>) -> PodPlan {
        PodPlan {
            pod: PodRef {
                namespace: "shop".into(),
                name: "p".into(),
                uid: "u".into(),
            },
            owner: owner.map(|(kind, name)| OwnerRef {
                kind: OwnerKind::from(kind),
                name: name.into(),
                uid: "o".into(),
            }),
            class,
            decision: Decision::Wait,
            reason: None,
            message: String::new(),
            until: None,
        }
    }

    #[test]
    fn other_controllers_say_so() {
        let cases = [
            (
                PodClass::Owned,
                Some(("Deployment", "web")),
                Some("Deployment/web"),
            ),
            (
                PodClass::OtherController,
                Some(("KafkaNodePool", "kafka")),
                Some("KafkaNodePool/kafka (other controller)"),
            ),
            (PodClass::Job, Some(("Job", "report")), Some("Job/report")),
            (PodClass::Unmanaged, None, None),
        ];
        for (class, owner, expected) in cases {
            assert_eq!(owner_text(&pod(class, owner)).as_deref(), expected);
        }
    }
}
