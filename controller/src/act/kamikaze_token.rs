//! The credential the controller presents with the `Http` kamikaze (docs/design.md §5.4, §9): a
//! token of its own ServiceAccount from the TokenRequest API, for the kamikaze audience only (an
//! agent that receives it cannot act as the controller) and bound to the Node it is sent to (a node
//! that captures its own kamikaze's token cannot replay it to another agent). Each POST gets a new
//! token: there is one kamikaze per node, and a short-lived token is never reused.

use std::str::FromStr;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::{Api, Client, ResourceExt};

use crate::Error;

/// Name of the controller's ServiceAccount in deploy/rbac.yaml: the default, in the namespace the
/// controller runs in.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "k8sm-controller";

/// Where a Pod finds its own namespace.
const IN_CLUSTER_NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// Lifetime asked for: the shortest the TokenRequest API grants (the agent remembers it until
/// then).
const TOKEN_LIFETIME: Duration = Duration::from_secs(600);

/// A ServiceAccount, `NAMESPACE/NAME` on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccountRef {
    pub namespace: String,
    pub name: String,
}

impl FromStr for ServiceAccountRef {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let expected = || format!("expected NAMESPACE/NAME of a ServiceAccount, got {value:?}");
        let (namespace, name) = value.split_once('/').ok_or_else(expected)?;
        let valid = |part: &str| {
            !part.is_empty()
                && part.len() <= 253
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        };
        if !valid(namespace) || !valid(name) {
            return Err(expected());
        }
        Ok(Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })
    }
}

impl std::fmt::Display for ServiceAccountRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

impl ServiceAccountRef {
    /// `configured`, or else [`DEFAULT_SERVICE_ACCOUNT`] in the namespace of the Pod the controller
    /// runs in; `None` outside a cluster without the flag.
    pub fn or_in_cluster_default(configured: Option<Self>) -> Option<Self> {
        configured.or_else(|| {
            let namespace = std::fs::read_to_string(IN_CLUSTER_NAMESPACE_FILE).ok()?;
            Some(Self {
                namespace: namespace.trim().to_owned(),
                name: DEFAULT_SERVICE_ACCOUNT.to_owned(),
            })
        })
    }
}

/// Issues the kamikaze tokens.
pub struct KamikazeTokens {
    client: Client,
    account: Option<ServiceAccountRef>,
    audience: String,
}

impl KamikazeTokens {
    pub fn new(client: Client, account: Option<ServiceAccountRef>, audience: String) -> Self {
        Self {
            client,
            account,
            audience,
        }
    }

    /// A new token for one kamikaze POST to `node`.
    pub async fn token_for(&self, node: &Node) -> Result<String, Error> {
        let account = self.account.as_ref().ok_or_else(|| {
            Error::Other(
                "no ServiceAccount to authenticate the Http kamikaze with: the controller runs outside a cluster; \
                 set --kamikaze-service-account=NAMESPACE/NAME"
                    .into(),
            )
        })?;
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: Some(vec![self.audience.clone()]),
                expiration_seconds: Some(TOKEN_LIFETIME.as_secs() as i64),
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Node".into()),
                    name: Some(node.name_any()),
                    uid: node.uid(),
                }),
            }),
            ..TokenRequest::default()
        };
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), &account.namespace);
        let issued = api
            .create_token_request(
                &account.name,
                &crate::leadership::write_params::post(),
                &request,
            )
            .await
            .map_err(|source| Error::Action {
                action: "requesting the Http kamikaze's token (TokenRequest) of ServiceAccount",
                object: account.to_string(),
                source,
            })?;
        let token = issued
            .status
            .and_then(|status| status.token)
            .filter(|token| !token.is_empty())
            .ok_or_else(|| {
                Error::Other(format!("the TokenRequest of {account} returned no token"))
            })?;
        Ok(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_account_is_namespace_slash_name() {
        assert_eq!(
            "k8sm-system/k8sm-controller".parse(),
            Ok(ServiceAccountRef {
                namespace: "k8sm-system".into(),
                name: "k8sm-controller".into()
            })
        );
        for bad in ["k8sm-controller", "/x", "x/", "a/b/c", "A/b", "a b/c", ""] {
            let error = bad.parse::<ServiceAccountRef>().expect_err(bad);
            assert!(
                error.starts_with("expected NAMESPACE/NAME"),
                "{bad}: {error}"
            );
        }
        assert_eq!(
            ServiceAccountRef::or_in_cluster_default(Some("a/b".parse().unwrap()))
                .unwrap()
                .to_string(),
            "a/b",
            "the flag wins"
        );
    }
}
