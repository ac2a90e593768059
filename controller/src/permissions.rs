//! The permissions the controller uses — exactly what `deploy/rbac.yaml` grants — checked at start-up with
//! SelfSubjectAccessReviews, so a missing verb is one clear error instead of a watch that retries forever.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};

use crate::Error;
use crate::kamikaze_token::ServiceAccountRef;

/// One permission: `verb` on `group`/`resource`[/`subresource`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permission {
    pub group: &'static str,
    pub resource: &'static str,
    pub subresource: &'static str,
    pub verb: &'static str,
    /// Only needed in the leader-election namespace (a Role, not the ClusterRole).
    pub lease: bool,
}

const fn cluster(
    group: &'static str,
    resource: &'static str,
    subresource: &'static str,
    verb: &'static str,
) -> Permission {
    Permission {
        group,
        resource,
        subresource,
        verb,
        lease: false,
    }
}

/// Everything the controller does, by API call.
pub const REQUIRED: &[Permission] = &[
    // Observe (reflectors: list + watch).
    cluster("", "nodes", "", "list"),
    cluster("", "nodes", "", "watch"),
    cluster("", "pods", "", "list"),
    cluster("", "pods", "", "watch"),
    cluster("apps", "deployments", "", "list"),
    cluster("apps", "deployments", "", "watch"),
    cluster("apps", "replicasets", "", "list"),
    cluster("apps", "replicasets", "", "watch"),
    cluster("", "replicationcontrollers", "", "list"),
    cluster("", "replicationcontrollers", "", "watch"),
    cluster("apps", "statefulsets", "", "list"),
    cluster("apps", "statefulsets", "", "watch"),
    cluster("batch", "jobs", "", "list"),
    cluster("batch", "jobs", "", "watch"),
    cluster("policy", "poddisruptionbudgets", "", "list"),
    cluster("policy", "poddisruptionbudgets", "", "watch"),
    cluster("k8s.mesosphere.io", "executorupgradepolicies", "", "list"),
    cluster("k8s.mesosphere.io", "executorupgradepolicies", "", "watch"),
    cluster("", "persistentvolumes", "", "list"),
    cluster("", "persistentvolumes", "", "watch"),
    // Act.
    cluster("", "nodes", "", "patch"),
    cluster("", "nodes", "", "delete"),
    cluster("", "pods", "eviction", "create"),
    cluster("", "pods", "", "delete"),
    // Surge moves: a Deployment's pod template annotation and k8sm's record of the move.
    cluster("apps", "deployments", "", "patch"),
    // The policy finalizer (added, and removed once every node is handed back), a patch of metadata.finalizers.
    cluster("k8s.mesosphere.io", "executorupgradepolicies", "", "patch"),
    cluster(
        "k8s.mesosphere.io",
        "executorupgradepolicies",
        "status",
        "patch",
    ),
    // Report.
    cluster("events.k8s.io", "events", "", "create"),
    cluster("events.k8s.io", "events", "", "patch"),
    // Leader election.
    Permission {
        group: "coordination.k8s.io",
        resource: "leases",
        subresource: "",
        verb: "get",
        lease: true,
    },
    Permission {
        group: "coordination.k8s.io",
        resource: "leases",
        subresource: "",
        verb: "create",
        lease: true,
    },
    Permission {
        group: "coordination.k8s.io",
        resource: "leases",
        subresource: "",
        verb: "update",
        lease: true,
    },
];

/// The upgrade reports (see [`crate::reports`]): one ConfigMap per run in the controller's namespace, read back,
/// applied, and the oldest deleted (a Role there).
pub const REPORTS: &[Permission] = &[
    namespaced("", "configmaps", "get"),
    namespaced("", "configmaps", "list"),
    namespaced("", "configmaps", "create"),
    namespaced("", "configmaps", "patch"),
    namespaced("", "configmaps", "delete"),
];

const fn namespaced(group: &'static str, resource: &'static str, verb: &'static str) -> Permission {
    Permission {
        group,
        resource,
        subresource: "",
        verb,
        lease: true,
    }
}

/// Requesting the `Http` kamikaze's token (see [`crate::kamikaze_token`]): `create serviceaccounts/token` on the
/// controller's own ServiceAccount only (a Role in its namespace, limited to its name), checked when the controller
/// knows its ServiceAccount.
pub const KAMIKAZE_TOKEN: Permission = Permission {
    group: "",
    resource: "serviceaccounts",
    subresource: "token",
    verb: "create",
    lease: true,
};

impl std::fmt::Display for Permission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            String::new()
        } else {
            format!(".{}", self.group)
        };
        let sub = if self.subresource.is_empty() {
            String::new()
        } else {
            format!("/{}", self.subresource)
        };
        write!(f, "{} {}{sub}{group}", self.verb, self.resource)
    }
}

/// Fails with every permission this identity lacks (leases only when leader election is on; the reports' in their
/// namespace; the kamikaze token only when the controller knows its ServiceAccount).
pub async fn check(
    client: &Client,
    lease_namespace: Option<&str>,
    report_namespace: &str,
    kamikaze_account: Option<&ServiceAccountRef>,
) -> Result<(), Error> {
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let mut missing = Vec::new();
    let required =
        REQUIRED
            .iter()
            .filter_map(|permission| match (permission.lease, lease_namespace) {
                (true, None) => None,
                (true, Some(ns)) => Some((permission, Some(ns), None)),
                (false, _) => Some((permission, None, None)),
            });
    let token = kamikaze_account.map(|account| {
        (
            &KAMIKAZE_TOKEN,
            Some(account.namespace.as_str()),
            Some(account.name.as_str()),
        )
    });
    let reports = REPORTS
        .iter()
        .map(|permission| (permission, Some(report_namespace), None));
    for (permission, namespace, name) in required.chain(reports).chain(token) {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    group: Some(permission.group.to_owned()),
                    resource: Some(permission.resource.to_owned()),
                    subresource: Some(permission.subresource.to_owned()).filter(|s| !s.is_empty()),
                    verb: Some(permission.verb.to_owned()),
                    namespace: namespace.map(str::to_owned),
                    name: name.map(str::to_owned),
                    ..ResourceAttributes::default()
                }),
                ..SelfSubjectAccessReviewSpec::default()
            },
            ..SelfSubjectAccessReview::default()
        };
        let answer = reviews.create(&PostParams::default(), &review).await?;
        if !answer.status.is_some_and(|s| s.allowed) {
            missing.push(match (namespace, name) {
                (Some(ns), Some(name)) => format!("{permission} (of {ns}/{name})"),
                (Some(ns), None) => format!("{permission} (in namespace {ns})"),
                (None, _) => permission.to_string(),
            });
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Error::MissingPermissions(missing))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_read_like_kubectl_auth_can_i() {
        assert_eq!(
            cluster("", "pods", "eviction", "create").to_string(),
            "create pods/eviction"
        );
        assert_eq!(
            cluster(
                "k8s.mesosphere.io",
                "executorupgradepolicies",
                "status",
                "patch"
            )
            .to_string(),
            "patch executorupgradepolicies/status.k8s.mesosphere.io"
        );
    }

    /// deploy/rbac.yaml grants exactly what the controller uses: no more, no less.
    #[test]
    fn the_deployed_roles_grant_exactly_the_required_permissions() {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/rbac.yaml"))
                .unwrap();
        let mut granted: Vec<(String, String, bool)> = Vec::new();
        for document in serde_yaml::Deserializer::from_str(&text) {
            let value = serde_yaml::Value::deserialize(document).unwrap();
            let kind = value["kind"].as_str().unwrap_or_default();
            if kind != "ClusterRole" && kind != "Role" {
                continue;
            }
            if value["metadata"]["name"].as_str() != Some("k8sm-controller") {
                continue;
            }
            for rule in value["rules"].as_sequence().unwrap() {
                let resources = rule["resources"].as_sequence().unwrap();
                if resources
                    .iter()
                    .any(|r| r.as_str() == Some("serviceaccounts/token"))
                {
                    // Its own ServiceAccount's tokens only: any other would be a way to act as that account.
                    let names: Vec<&str> = rule["resourceNames"]
                        .as_sequence()
                        .map(|names| names.iter().filter_map(|n| n.as_str()).collect())
                        .unwrap_or_default();
                    assert_eq!(
                        names,
                        [crate::kamikaze_token::DEFAULT_SERVICE_ACCOUNT],
                        "serviceaccounts/token limited to the controller's own"
                    );
                }
                for group in rule["apiGroups"].as_sequence().unwrap() {
                    for resource in rule["resources"].as_sequence().unwrap() {
                        for verb in rule["verbs"].as_sequence().unwrap() {
                            granted.push((
                                format!(
                                    "{}|{}",
                                    group.as_str().unwrap(),
                                    resource.as_str().unwrap()
                                ),
                                verb.as_str().unwrap().to_owned(),
                                kind == "Role",
                            ));
                        }
                    }
                }
            }
        }
        let mut required: Vec<(String, String, bool)> = REQUIRED
            .iter()
            .chain(REPORTS)
            .chain([&KAMIKAZE_TOKEN])
            .map(|p| {
                let resource = if p.subresource.is_empty() {
                    p.resource.to_owned()
                } else {
                    format!("{}/{}", p.resource, p.subresource)
                };
                (
                    format!("{}|{resource}", p.group),
                    p.verb.to_owned(),
                    p.lease,
                )
            })
            .collect();
        granted.sort();
        required.sort();
        assert_eq!(granted, required);
    }

    use serde::Deserialize;
}
