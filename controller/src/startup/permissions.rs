//! The permissions the controller uses — exactly what `deploy/rbac.yaml` grants — checked at
//! start-up with SelfSubjectAccessReviews, so a missing verb is one clear error instead of a watch
//! that retries forever.
//!
//! Surge moves and the DeleteNode kamikaze need more ([`OPT_IN`]), granted only by the components
//! `deploy/components/surge` and `delete-node` (Helm: `rbac.surge`, `rbac.deleteNode`): without
//! them the controller starts, logs what it lacks, and a refused action says which component to
//! enable ([`opt_in_hint`]).

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};

use crate::Error;
use crate::act::kamikaze_token::ServiceAccountRef;

/// One permission: `verb` on `group`/`resource`[/`subresource`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permission {
    pub group: &'static str,
    pub resource: &'static str,
    pub subresource: &'static str,
    pub verb: &'static str,
    /// Only needed in the leader-election namespace (a Role, not the ClusterRole).
    pub lease: bool,
    /// Limited to one object (`resourceNames`): its default name, as the deployed Role names it.
    /// The start-up check asks about the configured name.
    pub name: Option<&'static str>,
}

/// The Lease's default name (`--leader-elect-lease`), which the deployed Role limits `get` and
/// `update` to.
pub const DEFAULT_LEASE: &str = "k8sm-controller";

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
        name: None,
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
    cluster("", "pods", "eviction", "create"),
    cluster("", "pods", "", "delete"),
    // The policy finalizer (added, and removed once every node is handed back), a patch of
    // metadata.finalizers.
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
    // Leader election: create cannot be limited by name in Kubernetes, get and update are.
    lease("get", Some(DEFAULT_LEASE)),
    lease("create", None),
    lease("update", Some(DEFAULT_LEASE)),
];

const fn lease(verb: &'static str, name: Option<&'static str>) -> Permission {
    Permission {
        group: "coordination.k8s.io",
        resource: "leases",
        subresource: "",
        verb,
        lease: true,
        name,
    }
}

/// A permission that only one mechanism needs, granted only when the operator opts in to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptIn {
    pub permission: Permission,
    /// What needs it, as a policy asks for it.
    pub used_by: &'static str,
    /// The kustomize component that grants it (a directory under `deploy/`).
    pub component: &'static str,
    /// The Helm value that grants it.
    pub helm_value: &'static str,
}

/// Surge moves patch a Deployment: its pod template's restart annotation and k8sm's record of the
/// move. Cluster-wide that reaches kube-system's pod templates, so the component ships an admission
/// policy that allows nothing else.
pub const SURGE: OptIn = OptIn {
    permission: cluster("apps", "deployments", "", "patch"),
    used_by: "a surge move (spec.workloads.surge)",
    component: "deploy/components/surge",
    helm_value: "rbac.surge",
};

/// The DeleteNode kamikaze deletes the drained Node object.
pub const DELETE_NODE: OptIn = OptIn {
    permission: cluster("", "nodes", "", "delete"),
    used_by: "the DeleteNode kamikaze (spec.kamikaze.mechanism: DeleteNode)",
    component: "deploy/components/delete-node",
    helm_value: "rbac.deleteNode",
};

pub const OPT_IN: &[OptIn] = &[SURGE, DELETE_NODE];

impl OptIn {
    /// How to grant it.
    pub fn how(&self) -> String {
        format!(
            "{} needs `{}`: apply the kustomize component {} or set the Helm value {}=true",
            self.used_by, self.permission, self.component, self.helm_value
        )
    }
}

/// What to enable when the apiserver refused an action with `message` for lack of an opt-in
/// permission (RBAC's answer names the verb, resource and group: `cannot patch resource
/// "deployments" in API group "apps"`).
pub fn opt_in_hint(message: &str) -> Option<String> {
    OPT_IN
        .iter()
        .find(|opt_in| {
            let p = opt_in.permission;
            message.contains(&format!(
                "cannot {} resource \"{}\" in API group \"{}\"",
                p.verb, p.resource, p.group
            ))
        })
        .map(OptIn::how)
}

/// The upgrade reports (see [`crate::report::run_records`]): one ConfigMap per run in the
/// controller's namespace, read back, applied, and the oldest deleted (a Role there). Not limited
/// by name: each run's is known only once it starts. The remembered sizes of unknown kinds
/// ([`crate::memory::sizes_store`]) are one more ConfigMap there, read and applied.
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
        name: None,
    }
}

/// Requesting the `Http` kamikaze's token (see [`crate::act::kamikaze_token`]): `create
/// serviceaccounts/token` on the controller's own ServiceAccount only (a Role in its namespace,
/// limited to its name), checked when the controller knows its ServiceAccount.
pub const KAMIKAZE_TOKEN: Permission = Permission {
    group: "",
    resource: "serviceaccounts",
    subresource: "token",
    verb: "create",
    lease: true,
    name: Some(crate::act::kamikaze_token::DEFAULT_SERVICE_ACCOUNT),
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

/// Fails with every permission this identity lacks (leases only when leader election is on, as
/// `lease`: namespace and name; the reports' in their namespace; the kamikaze token only when the
/// controller knows its ServiceAccount). The [`OPT_IN`] permissions are not required: it logs which
/// are missing.
pub async fn check(
    client: &Client,
    lease: Option<(&str, &str)>,
    report_namespace: &str,
    kamikaze_account: Option<&ServiceAccountRef>,
) -> Result<(), Error> {
    let mut missing = Vec::new();
    let required = REQUIRED
        .iter()
        .filter_map(|permission| match (permission.lease, lease) {
            (true, None) => None,
            (true, Some((ns, name))) => Some((permission, Some(ns), permission.name.map(|_| name))),
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
        if !allowed(client, permission, namespace, name).await? {
            missing.push(match (namespace, name) {
                (Some(ns), Some(name)) => format!("{permission} (of {ns}/{name})"),
                (Some(ns), None) => format!("{permission} (in namespace {ns})"),
                (None, _) => permission.to_string(),
            });
        }
    }
    if !missing.is_empty() {
        return Err(Error::MissingPermissions(missing));
    }
    for opt_in in OPT_IN {
        if allowed(client, &opt_in.permission, None, None).await? {
            tracing::info!(permission = %opt_in.permission, "granted: {}", opt_in.used_by);
        } else {
            tracing::warn!(
                "not granted, so refused if a policy asks for it: {}",
                opt_in.how()
            );
        }
    }
    Ok(())
}

/// Whether this identity may make the call (a SelfSubjectAccessReview).
async fn allowed(
    client: &Client,
    permission: &Permission,
    namespace: Option<&str>,
    name: Option<&str>,
) -> Result<bool, Error> {
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
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let answer = reviews.create(&PostParams::default(), &review).await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
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

    /// A granted or required permission: `group|resource[/subresource]`, verb, in the controller's
    /// namespace (a Role), limited to these names.
    type Grant = (String, String, bool, Vec<String>);

    /// What the ClusterRoles and Roles of one manifest file grant.
    fn granted(path: &str) -> Vec<Grant> {
        let text =
            std::fs::read_to_string(format!("{}/../{path}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let mut granted = Vec::new();
        for document in serde_yaml::Deserializer::from_str(&text) {
            let value = serde_yaml::Value::deserialize(document).unwrap();
            let kind = value["kind"].as_str().unwrap_or_default();
            if kind != "ClusterRole" && kind != "Role" {
                continue;
            }
            let role = value["metadata"]["name"].as_str().unwrap_or_default();
            assert!(
                role.starts_with("k8sm-controller"),
                "{path}: a role of the controller: {role}"
            );
            for rule in value["rules"].as_sequence().unwrap() {
                let names: Vec<String> = rule["resourceNames"]
                    .as_sequence()
                    .map(|names| {
                        names
                            .iter()
                            .filter_map(|n| n.as_str())
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
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
                                names.clone(),
                            ));
                        }
                    }
                }
            }
        }
        granted.sort();
        granted
    }

    fn grants<'a>(permissions: impl IntoIterator<Item = &'a Permission>) -> Vec<Grant> {
        let mut grants: Vec<Grant> = permissions
            .into_iter()
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
                    p.name.into_iter().map(str::to_owned).collect(),
                )
            })
            .collect();
        grants.sort();
        grants
    }

    /// deploy/rbac.yaml grants exactly what the controller's default mechanisms use: no more, no
    /// less. The Lease and the token are limited to their names; the token to the controller's
    /// own ServiceAccount, since any other would be a way to act as that account.
    #[test]
    fn the_deployed_roles_grant_exactly_the_required_permissions() {
        assert_eq!(
            granted("deploy/rbac.yaml"),
            grants(REQUIRED.iter().chain(REPORTS).chain([&KAMIKAZE_TOKEN]))
        );
        assert_eq!(
            KAMIKAZE_TOKEN.name,
            Some(crate::act::kamikaze_token::DEFAULT_SERVICE_ACCOUNT)
        );
    }

    /// Each opt-in component grants exactly its permission, which the default role does not.
    #[test]
    fn each_component_grants_exactly_its_opt_in_permission() {
        let default = granted("deploy/rbac.yaml");
        for opt_in in OPT_IN {
            let want = grants([&opt_in.permission]);
            assert_eq!(
                granted(&format!("{}/rbac.yaml", opt_in.component)),
                want,
                "{}",
                opt_in.component
            );
            assert!(
                !default.contains(&want[0]),
                "the default role grants {}",
                opt_in.permission
            );
            assert!(!REQUIRED.contains(&opt_in.permission));
        }
    }

    /// The Lease name the deployed Role allows is the flag's default.
    #[test]
    fn the_lease_name_is_the_flags_default() {
        use clap::Parser;
        let args = crate::startup::args::Args::try_parse_from(["k8sm-controller"]).unwrap();
        assert_eq!(args.leader_elect_lease, DEFAULT_LEASE);
    }

    /// RBAC's refusal of an opt-in verb names what to enable; other refusals (an admission
    /// policy's) do not.
    #[test]
    fn a_refused_opt_in_verb_names_its_component_and_helm_value() {
        let rbac = "deployments.apps \"web\" is forbidden: User \"system:serviceaccount:k8sm-system:k8sm-controller\" \
                    cannot patch resource \"deployments\" in API group \"apps\" in the namespace \"shop\"";
        let hint = opt_in_hint(rbac).expect("a hint");
        assert!(
            hint.contains("deploy/components/surge") && hint.contains("rbac.surge=true"),
            "{hint}"
        );
        let node = "nodes \"n1\" is forbidden: User \"x\" cannot delete resource \"nodes\" in API group \"\" at the \
                    cluster scope";
        let hint = opt_in_hint(node).expect("a hint");
        assert!(
            hint.contains("deploy/components/delete-node") && hint.contains("rbac.deleteNode=true"),
            "{hint}"
        );
        assert_eq!(
            opt_in_hint("denied by ValidatingAdmissionPolicy 'k8sm-controller-surge'"),
            None
        );
        assert_eq!(
            opt_in_hint("cannot delete resource \"pods\" in API group \"\""),
            None
        );
    }

    use serde::Deserialize;
}
