//! Who may tell a node's executor to terminate over HTTP (docs/design.md §5.4, §9): the controller,
//! with a token of its ServiceAccount issued for the kamikaze audience and bound to this very Node,
//! and only once k8sm drained the Node.
//!
//! The token is verified by the apiserver (a TokenReview for the kamikaze audience): the agent
//! holds no key and trusts no claim it cannot have checked. The audience keeps the controller's
//! apiserver credential out of the agents' hands; the Node binding keeps a token captured by one
//! node from working on any other.

use std::future::Future;
use std::sync::Arc;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, TokenReviewStatus};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::{Client, ResourceExt};

use crate::client::REQUEST_TIMEOUT;
use crate::contract::{NotDrained, drained_by_k8sm};

/// The extra the apiserver gives a token bound to a Node (or to a Pod on one): the Node's name.
pub const NODE_NAME_EXTRA: &str = "authentication.kubernetes.io/node-name";

/// The extra the apiserver gives a token bound to a Node (or to a Pod on one): the Node's UID.
pub const NODE_UID_EXTRA: &str = "authentication.kubernetes.io/node-uid";

/// The controller's identity in deploy/rbac.yaml: what `--kamikaze-from` defaults to.
pub const DEFAULT_CONTROLLER_USER: &str = "system:serviceaccount:k8sm-system:k8sm-controller";

/// Why a kamikaze request is refused, with nothing done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// 401: no `Authorization: Bearer` token.
    #[error(
        "no bearer token: the kamikaze must carry the controller's ServiceAccount token for audience {0}"
    )]
    NoToken(String),
    /// 401: the apiserver does not accept the token for the kamikaze audience.
    #[error("the token is not valid for audience {audience}: {why}")]
    InvalidToken { audience: String, why: String },
    /// 401: the controller's token, obeyed once already: each token is obeyed once
    /// (`crate::obeyed`).
    #[error(
        "this token was already obeyed: each kamikaze token is obeyed once, so a captured one cannot be replayed; \
         request a new token"
    )]
    Replayed,
    /// 403: a valid token of someone other than the controller.
    #[error("the token authenticates {user}, not the controller ({controller})")]
    NotController { user: String, controller: String },
    /// 403: the controller's token, issued for the kamikaze of another node (or of no node).
    #[error(
        "the token is not bound to node {node} (bound to: {bound}): it was issued for another node's kamikaze"
    )]
    OtherNode { node: String, bound: String },
    /// 409: the Node does not exist.
    #[error("node {0} does not exist: nothing to restart")]
    NoNode(String),
    /// 409: the Node does not show that k8sm drained it.
    #[error("node {node} is not drained by k8sm: {why}; kamikaze refused")]
    NotDrained { node: String, why: NotDrained },
    /// 503: the token or the Node could not be checked now; the controller retries.
    #[error("cannot check the request now: {0}")]
    Unavailable(String),
}

impl Refusal {
    /// The HTTP status of the answer.
    pub fn status(&self) -> u16 {
        match self {
            Self::NoToken(_) | Self::InvalidToken { .. } | Self::Replayed => 401,
            Self::NotController { .. } | Self::OtherNode { .. } => 403,
            Self::NoNode(_) | Self::NotDrained { .. } => 409,
            Self::Unavailable(_) => 503,
        }
    }
}

/// Decides whether a kamikaze request for `node` may go ahead; `authorization` is the request's
/// header, if any.
pub trait Gate: Clone + Send + Sync + 'static {
    fn admit(
        &self,
        node: &str,
        authorization: Option<&str>,
    ) -> impl Future<Output = Result<(), Refusal>> + Send;
}

/// The gate of a real agent: TokenReview, then a fresh read of the Node.
#[derive(Clone)]
pub struct TokenGate {
    reviews: Api<TokenReview>,
    nodes: Api<Node>,
    expected: Arc<Expected>,
}

/// What a kamikaze token must show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// The audience it was issued for (and that the TokenReview asks for).
    pub audience: String,
    /// The user it authenticates: the controller's ServiceAccount,
    /// `system:serviceaccount:NS:NAME`.
    pub controller: String,
}

impl TokenGate {
    pub fn new(client: Client, expected: Expected) -> Self {
        Self {
            reviews: Api::all(client.clone()),
            nodes: Api::all(client),
            expected: Arc::new(expected),
        }
    }
}

impl Gate for TokenGate {
    async fn admit(&self, node: &str, authorization: Option<&str>) -> Result<(), Refusal> {
        let audience = &self.expected.audience;
        let token = bearer(authorization).ok_or_else(|| Refusal::NoToken(audience.clone()))?;
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                audiences: Some(vec![audience.clone()]),
            },
            ..TokenReview::default()
        };
        let reviewed = tokio::time::timeout(
            REQUEST_TIMEOUT,
            self.reviews.create(&crate::client::post_params(), &review),
        )
        .await
        .map_err(|_| {
            Refusal::Unavailable(format!(
                "no answer to the TokenReview within {REQUEST_TIMEOUT:?}"
            ))
        })?
        .map_err(|error| Refusal::Unavailable(format!("the TokenReview failed: {error}")))?;
        let bound = authenticated(&reviewed.status.unwrap_or_default(), &self.expected)?;
        let current = tokio::time::timeout(REQUEST_TIMEOUT, self.nodes.get_opt(node))
            .await
            .map_err(|_| {
                Refusal::Unavailable(format!(
                    "no answer reading node {node} within {REQUEST_TIMEOUT:?}"
                ))
            })?
            .map_err(|error| Refusal::Unavailable(format!("reading node {node}: {error}")))?
            .ok_or_else(|| Refusal::NoNode(node.to_owned()))?;
        may_restart(&bound, &current)
    }
}

/// The token of an `Authorization: Bearer <token>` header (the scheme is case-insensitive, RFC 9110
/// §11.1).
pub fn bearer(authorization: Option<&str>) -> Option<&str> {
    let (scheme, token) = authorization?.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The Node a verified token is bound to, as the TokenReview reports it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BoundNode {
    pub name: Option<String>,
    pub uid: Option<String>,
}

/// Judges a TokenReview's answer: the token must be authenticated for the audience and be the
/// controller's.
pub fn authenticated(
    status: &TokenReviewStatus,
    expected: &Expected,
) -> Result<BoundNode, Refusal> {
    let invalid = |why: String| Refusal::InvalidToken {
        audience: expected.audience.clone(),
        why,
    };
    if status.authenticated != Some(true) {
        let why = status
            .error
            .clone()
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| "the apiserver does not authenticate it".into());
        return Err(invalid(why));
    }
    // Asked for one audience, the apiserver answers with the ones the token is good for among them;
    // an authenticator that ignores audiences answers none, which is no proof.
    let audiences = status.audiences.as_deref().unwrap_or_default();
    if !audiences.contains(&expected.audience) {
        return Err(invalid(format!("it is good for {audiences:?} only")));
    }
    let user = status.user.clone().unwrap_or_default();
    let username = user.username.unwrap_or_default();
    if username != expected.controller {
        return Err(Refusal::NotController {
            user: username,
            controller: expected.controller.clone(),
        });
    }
    let extra = user.extra.unwrap_or_default();
    let single = |key: &str| match extra.get(key).map(Vec::as_slice) {
        Some([value]) => Some(value.clone()),
        _ => None,
    };
    Ok(BoundNode {
        name: single(NODE_NAME_EXTRA),
        uid: single(NODE_UID_EXTRA),
    })
}

/// Whether the controller's token, bound to `bound`, may restart `node` now: it was issued for this
/// Node object, and k8sm drained it.
pub fn may_restart(bound: &BoundNode, node: &Node) -> Result<(), Refusal> {
    let name = node.name_any();
    let same_object = bound.uid.is_none() || bound.uid == node.uid();
    if bound.name.as_deref() != Some(name.as_str()) || !same_object {
        let bound = match (&bound.name, &bound.uid) {
            (None, _) => "no node".to_owned(),
            (Some(other), Some(uid)) => format!("{other} (uid {uid})"),
            (Some(other), None) => other.clone(),
        };
        return Err(Refusal::OtherNode { node: name, bound });
    }
    drained_by_k8sm(node).map_err(|why| Refusal::NotDrained { node: name, why })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::authentication::v1::UserInfo;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8sm_api::keys::{
        DRAINING_ANNOTATION, INCOMPATIBLE_EXECUTOR_ANNOTATION, KAMIKAZE_TOKEN_AUDIENCE,
    };

    use super::*;

    fn expected() -> Expected {
        Expected {
            audience: KAMIKAZE_TOKEN_AUDIENCE.into(),
            controller: DEFAULT_CONTROLLER_USER.into(),
        }
    }

    /// What the apiserver answers for the controller's token bound to `node`.
    fn reviewed(user: &str, audiences: &[&str], node: Option<(&str, &str)>) -> TokenReviewStatus {
        let extra = node.map(|(name, uid)| {
            BTreeMap::from([
                (NODE_NAME_EXTRA.to_owned(), vec![name.to_owned()]),
                (NODE_UID_EXTRA.to_owned(), vec![uid.to_owned()]),
            ])
        });
        TokenReviewStatus {
            authenticated: Some(true),
            audiences: Some(audiences.iter().map(|a| (*a).to_owned()).collect()),
            user: Some(UserInfo {
                username: Some(user.into()),
                extra,
                ..UserInfo::default()
            }),
            error: None,
        }
    }

    fn node(name: &str, uid: &str, annotations: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(uid.into()),
                annotations: Some(
                    annotations
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..Node::default()
        }
    }

    const AT: &str = "2025-01-01T00:00:00Z";
    const DRAINED: [(&str, &str); 2] = [
        (INCOMPATIBLE_EXECUTOR_ANNOTATION, AT),
        (DRAINING_ANNOTATION, AT),
    ];

    #[test]
    fn the_bearer_token_is_taken_from_the_header() {
        assert_eq!(bearer(Some("Bearer abc.def")), Some("abc.def"));
        assert_eq!(bearer(Some("bearer  abc ")), Some("abc"));
        for bad in [
            None,
            Some(""),
            Some("Bearer"),
            Some("Bearer "),
            Some("Basic abc"),
            Some("abc"),
        ] {
            assert_eq!(bearer(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn only_the_controllers_token_for_the_audience_passes() {
        let controller = DEFAULT_CONTROLLER_USER;
        let audience = KAMIKAZE_TOKEN_AUDIENCE;
        let bound = BoundNode {
            name: Some("node-a".into()),
            uid: Some("uid-a".into()),
        };
        assert_eq!(
            authenticated(
                &reviewed(controller, &[audience], Some(("node-a", "uid-a"))),
                &expected()
            ),
            Ok(bound)
        );
        let rejected = TokenReviewStatus {
            authenticated: Some(false),
            error: Some("token has expired".into()),
            ..TokenReviewStatus::default()
        };
        // (case, answer, expected status code)
        let cases: [(&str, TokenReviewStatus, u16); 5] = [
            ("not authenticated", rejected, 401),
            ("no answer at all", TokenReviewStatus::default(), 401),
            (
                "another audience only",
                reviewed(controller, &["https://kubernetes.default.svc"], None),
                401,
            ),
            ("no audience reported", reviewed(controller, &[], None), 401),
            (
                "an agent's own token",
                reviewed(
                    "system:serviceaccount:k8sm-system:k8sm-agent",
                    &[audience],
                    Some(("node-a", "u")),
                ),
                403,
            ),
        ];
        for (case, status, code) in cases {
            let refusal = authenticated(&status, &expected()).expect_err(case);
            assert_eq!(refusal.status(), code, "{case}: {refusal}");
        }
        let expired = authenticated(
            &TokenReviewStatus {
                authenticated: Some(false),
                error: Some("token has expired".into()),
                ..TokenReviewStatus::default()
            },
            &expected(),
        )
        .unwrap_err();
        assert!(
            expired.to_string().contains("token has expired"),
            "{expired}"
        );
    }

    #[test]
    fn the_token_must_be_bound_to_this_node_object_and_the_node_drained() {
        let drained = node("node-a", "uid-a", &DRAINED);
        let bound = |name: Option<&str>, uid: Option<&str>| BoundNode {
            name: name.map(str::to_owned),
            uid: uid.map(str::to_owned),
        };
        assert_eq!(
            may_restart(&bound(Some("node-a"), Some("uid-a")), &drained),
            Ok(())
        );
        assert_eq!(
            may_restart(&bound(Some("node-a"), None), &drained),
            Ok(()),
            "a binding without a UID names the node"
        );
        // (case, binding, node, expected status code)
        let cases = [
            (
                "bound to another node",
                bound(Some("node-b"), Some("uid-b")),
                drained.clone(),
                403,
            ),
            ("bound to no node", bound(None, None), drained.clone(), 403),
            (
                "bound to an earlier object of the same name",
                bound(Some("node-a"), Some("uid-old")),
                drained.clone(),
                403,
            ),
            (
                "never drained",
                bound(Some("node-a"), Some("uid-a")),
                node("node-a", "uid-a", &[]),
                409,
            ),
            (
                "marked but not admitted",
                bound(Some("node-a"), Some("uid-a")),
                node("node-a", "uid-a", &DRAINED[..1]),
                409,
            ),
        ];
        for (case, bound, node, code) in cases {
            let refusal = may_restart(&bound, &node).expect_err(case);
            assert_eq!(refusal.status(), code, "{case}: {refusal}");
        }
        let refusal = may_restart(
            &bound(Some("node-a"), Some("uid-a")),
            &node("node-a", "uid-a", &[]),
        )
        .unwrap_err();
        assert!(
            refusal
                .to_string()
                .starts_with("node node-a is not drained by k8sm: it is not marked incompatible"),
            "{refusal}"
        );
    }
}
