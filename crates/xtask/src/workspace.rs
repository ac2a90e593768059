//! Paths inside the workspace and a helper to run commands loudly.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};

/// The workspace root (two levels above this crate).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root exists")
}

/// Where the long-lived local cluster keeps its state (git-ignored).
pub fn cluster_dir() -> PathBuf {
    root().join(".k8sm/cluster")
}

/// Runs `cmd` with inherited output, failing with `what` when it does not succeed.
pub fn run(what: &str, cmd: &mut Command) -> anyhow::Result<()> {
    eprintln!("==> {what}");
    let status = cmd.status().with_context(|| format!("starting: {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// `cargo`, as the one running xtask.
pub fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(root());
    cmd
}
