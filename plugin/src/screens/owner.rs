//! How a pod's owner reads in `plan` and `blocked`: the workload it counts for, and whether it is a
//! controller k8sm does not know (an operator's custom resource), whose pods move one at a time
//! through the Eviction API only.

use k8sm_planner::PodClass;

/// The OWNER column: "Deployment/web", "KafkaNodePool/kafka (other controller)", or "none". Machine
/// output keeps the owner and the class apart.
pub fn owner_column(class: &PodClass, owner: Option<&str>) -> String {
    match (owner, class) {
        (Some(owner), PodClass::OtherController) => format!("{owner} (other controller)"),
        (Some(owner), _) => owner.to_owned(),
        (None, _) => "none".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_controllers_say_so() {
        let cases = [
            (PodClass::Owned, Some("Deployment/web"), "Deployment/web"),
            (
                PodClass::OtherController,
                Some("KafkaNodePool/kafka"),
                "KafkaNodePool/kafka (other controller)",
            ),
            (PodClass::Job, Some("Job/report"), "Job/report"),
            (PodClass::Unmanaged, None, "none"),
        ];
        for (class, owner, expected) in cases {
            assert_eq!(owner_column(&class, owner), expected);
        }
    }
}
