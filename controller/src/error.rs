//! Errors of the controller's shell. Decisions never fail (the planner is total); I/O does.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    #[error("{action} {object}: {source}")]
    Action {
        action: &'static str,
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("kamikaze POST to {url}: {message}")]
    Http { url: String, message: String },
    #[error(transparent)]
    NotLeader(#[from] crate::leadership::leader::NotLeader),
    #[error("serialising a patch: {0}")]
    Serialize(#[from] serde_json::Error),
    #[error(
        "this identity lacks permissions the controller needs: {}. Apply deploy/rbac.yaml (or grant them) and restart.",
        .0.join(", ")
    )]
    MissingPermissions(Vec<String>),
    #[error("{0}")]
    Other(String),
}

impl Error {
    /// Whether the request was never sent: leadership ended, or had too little left, before it
    /// ([`crate::leadership::fence`]).
    pub fn never_sent(&self) -> bool {
        match self {
            Self::NotLeader(_) => true,
            Self::Kube(error) | Self::Action { source: error, .. } => {
                crate::leadership::fence::never_sent(error).is_some()
            }
            _ => false,
        }
    }

    /// Whether the apiserver was overloaded ([`apiserver_busy`]).
    pub fn overloaded(&self) -> bool {
        match self {
            Self::Kube(source) | Self::Action { source, .. } => apiserver_busy(source),
            _ => false,
        }
    }

    /// The API's HTTP status code, if the error came from the apiserver.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            Self::Kube(kube::Error::Api(status))
            | Self::Action {
                source: kube::Error::Api(status),
                ..
            } => Some(status.code),
            _ => None,
        }
    }
}

/// Whether the apiserver was busy (429: its priority and fairness limits), failing (5xx), or
/// unreachable or slow (no answer): the same request may succeed later. Any other answer
/// (forbidden, invalid, the namespace is gone) would come again.
pub fn apiserver_busy(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code == 429 || status.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}
