//! The plugin's errors. Each one reads as a sentence that says what went wrong and, where the
//! operator can act, how to fix it: never a panic and never a raw API object.

use std::path::PathBuf;

/// Where to find the CRD and an example policy, relative to a checkout of k8sm.
pub const CRD_FILE: &str = "crds/executorupgradepolicy.yaml";
pub const EXAMPLE_POLICY_FILE: &str = "deploy/examples/default.yaml";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the ExecutorUpgradePolicy CRD is not installed: kubectl apply -f {CRD_FILE}")]
    CrdMissing,

    #[error(
        "no ExecutorUpgradePolicy exists: create one, for example kubectl apply -f {EXAMPLE_POLICY_FILE}"
    )]
    NoPolicy,

    #[error(
        "no upgrade report{}: the controller writes one per run, from the first pass after a policy gets a target (kubectl k8sm upgrade start)",
        .policy.as_deref().map(|p| format!(" of policy {p:?}{}", .to.as_deref().map(|t| format!(" for target {t}")).unwrap_or_default())).unwrap_or_default()
    )]
    NoReport {
        policy: Option<String>,
        to: Option<String>,
    },

    #[error(
        "ExecutorUpgradePolicy {name:?} does not exist: {}",
        existing_hint(existing)
    )]
    PolicyNotFound { name: String, existing: Vec<String> },

    #[error("{} ExecutorUpgradePolicies exist ({}): choose one with --policy NAME", names.len(), names.join(", "))]
    AmbiguousPolicy { names: Vec<String> },

    #[error("ExecutorUpgradePolicy {0:?} was deleted")]
    PolicyDeleted(String),

    #[error("node {0:?} does not exist: see kubectl get nodes")]
    NodeNotFound(String),

    #[error(
        "node {0:?} is not upgraded by exactly one ExecutorUpgradePolicy, so k8sm does not drain it: nothing to force"
    )]
    NodeNotManaged(String),

    #[error("node {node:?} cannot retry its kamikaze: {why}")]
    CannotRetryKamikaze { node: String, why: String },

    /// What the command would do, such as "delete pods".
    #[error(
        "refusing to {0} without confirmation: standard input is not a terminal; pass --yes to confirm"
    )]
    NeedsConfirmation(&'static str),

    /// What nothing was, such as "deleted".
    #[error("aborted: nothing was {0}")]
    Aborted(&'static str),

    #[error(
        "ExecutorUpgradePolicy {policy} has spec.paused: true, written by {managers}, which would set it back on its \
         next sync: set paused: false where it comes from (the chart's values or the Git repository), or pass \
         --override-spec to change it here anyway"
    )]
    SpecPausedByManager { policy: String, managers: String },

    #[error("invalid executor ID {id:?}: {why}")]
    InvalidExecutorId { id: String, why: &'static str },

    #[error("invalid --flag {0:?}: expected NAME=VALUE")]
    InvalidFlag(String),

    #[error(transparent)]
    ExecutorIdentity(#[from] k8sm_api::ExecutorIdError),

    #[error("kubeconfig: {0}")]
    Kubeconfig(String),

    /// The apiserver answered with an error: its message is the useful part, one sentence.
    #[error("{what}: {message}")]
    Api {
        what: String,
        code: u16,
        message: String,
    },

    /// The request never got an answer (connection refused, TLS, timeout): the cause chain says
    /// why.
    #[error("{what}: cannot reach the Kubernetes API")]
    Unreachable {
        what: String,
        #[source]
        source: kube::Error,
    },

    #[error("reading {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("writing output")]
    Write(#[from] std::io::Error),

    #[error("encoding output: {0}")]
    Encode(String),
}

impl Error {
    /// Wraps a kube error with what the plugin was doing.
    pub fn kube(what: impl Into<String>, source: kube::Error) -> Self {
        let what = what.into();
        match source {
            kube::Error::Api(status) => Self::Api {
                what,
                code: status.code,
                message: status.message.trim_end_matches('.').to_owned(),
            },
            source => Self::Unreachable { what, source },
        }
    }

    /// The HTTP status of an API error.
    pub fn code(&self) -> Option<u16> {
        match self {
            Self::Api { code, .. } => Some(*code),
            _ => None,
        }
    }
}

fn existing_hint(existing: &[String]) -> String {
    match existing {
        [] => format!(
            "no policy exists; create one, for example kubectl apply -f {EXAMPLE_POLICY_FILE}"
        ),
        names => format!("existing policies: {}", names.join(", ")),
    }
}

/// `.kube_context("listing pods")` on kube results.
pub trait KubeContext<T> {
    fn kube_context(self, what: impl Into<String>) -> Result<T, Error>;
}

impl<T> KubeContext<T> for Result<T, kube::Error> {
    fn kube_context(self, what: impl Into<String>) -> Result<T, Error> {
        self.map_err(|e| Error::kube(what, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_how_to_fix_it() {
        assert_eq!(
            Error::CrdMissing.to_string(),
            "the ExecutorUpgradePolicy CRD is not installed: kubectl apply -f crds/executorupgradepolicy.yaml"
        );
        assert_eq!(
            Error::AmbiguousPolicy {
                names: vec!["a".into(), "b".into()]
            }
            .to_string(),
            "2 ExecutorUpgradePolicies exist (a, b): choose one with --policy NAME"
        );
        assert_eq!(
            Error::PolicyNotFound {
                name: "x".into(),
                existing: vec!["a".into()]
            }
            .to_string(),
            "ExecutorUpgradePolicy \"x\" does not exist: existing policies: a"
        );
        assert!(
            Error::PolicyNotFound {
                name: "x".into(),
                existing: vec![]
            }
            .to_string()
            .ends_with("kubectl apply -f deploy/examples/default.yaml")
        );
    }

    #[test]
    fn refusals_name_what_was_not_done() {
        assert_eq!(
            Error::NeedsConfirmation("delete pods").to_string(),
            "refusing to delete pods without confirmation: standard input is not a terminal; pass --yes to confirm"
        );
        assert_eq!(
            Error::Aborted("removed").to_string(),
            "aborted: nothing was removed"
        );
    }

    #[test]
    fn api_errors_keep_only_the_message() {
        let status = kube::core::Status {
            code: 403,
            message: "pods is forbidden: User \"bob\" cannot list resource \"pods\".".into(),
            ..kube::core::Status::failure("", "")
        };
        let error = Error::kube("listing pods", kube::Error::Api(Box::new(status)));
        assert_eq!(error.code(), Some(403));
        assert_eq!(
            error.to_string(),
            "listing pods: pods is forbidden: User \"bob\" cannot list resource \"pods\""
        );
    }
}
