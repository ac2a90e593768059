//! The agent's errors. Library code returns them; only `main` turns them into an exit status.

use std::net::SocketAddr;

/// What can stop the agent.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("inferring the cluster configuration (no --kubeconfig given): {0}")]
    InferConfig(#[source] kube::config::InferConfigError),
    #[error("building the Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    #[error("listing nodes with selector {selector:?}: {source}")]
    ListNodes {
        selector: String,
        #[source]
        source: kube::Error,
    },
    #[error("binding the HTTP endpoint to {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("reading the tokens obeyed so far from {}: {source}", path.display())]
    ObeyedTokens {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the HTTPS endpoint's certificate: {0}")]
    Tls(String),
    #[error("installing the signal handlers: {0}")]
    Signal(#[source] std::io::Error),
    #[error("running the kamikaze command `{command}`: {source}")]
    Command {
        command: String,
        #[source]
        source: std::io::Error,
    },
}
