//! The credential the controller presents with the `Http` kamikaze (DESIGN.md §5.4, §9): a token of its own
//! ServiceAccount from the TokenRequest API, for the kamikaze audience only and bound to the Node it is sent to.
//!
//! The audience keeps the token from working against the apiserver (an agent that receives it cannot act as the
//! controller), and the Node binding keeps it from working against any other agent: an agent obeys only a token whose
//! bound node is its own, so a node that captures the token of its own kamikaze cannot replay it to another. A token
//! is cached per Node object until shortly before it expires, so a POST retried after a failure reuses it.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::{Api, Client, ResourceExt};

use crate::Error;

/// Name of the controller's ServiceAccount in deploy/rbac.yaml: the default, in the namespace the controller runs in.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "k8sm-controller";

/// Where a Pod finds its own namespace.
const IN_CLUSTER_NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// Lifetime asked for: the shortest the TokenRequest API grants.
const TOKEN_LIFETIME: Duration = Duration::from_secs(600);

/// A cached token is replaced this long before it expires, so that it never expires between the request and the
/// agent's TokenReview.
const RENEW_BEFORE_EXPIRY: Duration = Duration::from_secs(120);

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
    /// `configured`, or else [`DEFAULT_SERVICE_ACCOUNT`] in the namespace of the Pod the controller runs in; `None`
    /// outside a cluster without the flag.
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

/// A token and when to stop using it.
struct Cached {
    token: String,
    renew_at: Instant,
}

/// Tokens by Node UID, each used until [`RENEW_BEFORE_EXPIRY`] before it expires.
#[derive(Default)]
struct TokenCache(HashMap<String, Cached>);

impl TokenCache {
    /// The token of `uid`, unless it is due for renewal at `now`.
    fn get(&self, uid: &str, now: Instant) -> Option<String> {
        self.0
            .get(uid)
            .filter(|cached| cached.renew_at > now)
            .map(|cached| cached.token.clone())
    }

    /// Remembers `token`, issued at `issued` for [`TOKEN_LIFETIME`], and forgets every token due for renewal.
    fn put(&mut self, uid: String, token: String, issued: Instant) {
        self.0.retain(|_, cached| cached.renew_at > issued);
        let renew_at = issued + TOKEN_LIFETIME.saturating_sub(RENEW_BEFORE_EXPIRY);
        self.0.insert(uid, Cached { token, renew_at });
    }

    fn forget(&mut self, uid: &str) {
        self.0.remove(uid);
    }
}

/// Issues and caches the kamikaze tokens.
pub struct KamikazeTokens {
    client: Client,
    account: Option<ServiceAccountRef>,
    audience: String,
    /// By Node UID: a Node deleted and registered again under the same name is another object.
    cache: Mutex<TokenCache>,
}

impl KamikazeTokens {
    pub fn new(client: Client, account: Option<ServiceAccountRef>, audience: String) -> Self {
        Self {
            client,
            account,
            audience,
            cache: Mutex::new(TokenCache::default()),
        }
    }

    /// A token for the kamikaze of `node`, from the cache or newly requested.
    pub async fn token_for(&self, node: &Node) -> Result<String, Error> {
        let uid = node.uid().unwrap_or_default();
        let now = Instant::now();
        if let Some(token) = self.lock().get(&uid, now) {
            return Ok(token);
        }
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
            .create_token_request(&account.name, &crate::write_params::post(), &request)
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
        self.lock().put(uid, token.clone(), now);
        Ok(token)
    }

    /// Drops the cached token of `node`: the agent refused it (revoked, say), so the next attempt asks for a new one.
    pub fn forget(&self, node: &Node) {
        self.lock().forget(&node.uid().unwrap_or_default());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TokenCache> {
        // Every update is a single step: a panic elsewhere leaves the cache usable.
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_reused_for_its_node_until_shortly_before_it_expires() {
        let issued = Instant::now();
        let mut cache = TokenCache::default();
        cache.put("uid-a".into(), "token-a".into(), issued);
        let renew_at = issued + Duration::from_secs(600 - 120);
        assert_eq!(cache.get("uid-a", issued).as_deref(), Some("token-a"));
        assert_eq!(
            cache
                .get("uid-a", renew_at - Duration::from_millis(1))
                .as_deref(),
            Some("token-a")
        );
        assert_eq!(
            cache.get("uid-a", renew_at),
            None,
            "renewed 2 minutes before it expires"
        );
        assert_eq!(
            cache.get("uid-b", issued),
            None,
            "another Node has its own token"
        );
        cache.put("uid-b".into(), "token-b".into(), renew_at);
        assert_eq!(cache.0.len(), 1, "tokens due for renewal are dropped");
        cache.forget("uid-b");
        assert_eq!(
            cache.get("uid-b", renew_at),
            None,
            "a refused token is forgotten"
        );
    }

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
