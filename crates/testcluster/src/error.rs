//! Errors of the test cluster harness, each saying what failed and where to look.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Setup(String),
    #[error("{name} {how}; its log is {log}, ending with:\n{log_tail}")]
    ProcessExited {
        name: String,
        how: String,
        log: PathBuf,
        log_tail: String,
    },
    #[error("timed out after {seconds}s waiting for {what}")]
    Timeout { what: String, seconds: u64 },
    #[error("generating certificates: {0}")]
    Certificates(#[from] rcgen::Error),
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
}

pub(crate) fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|e| io(format!("reading {}", path.display()), e))
}

pub(crate) fn io(context: String, source: std::io::Error) -> Error {
    Error::Io { context, source }
}
