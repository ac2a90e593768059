//! The cargo-deny step of `cargo xtask test`: licenses, bans and sources of the dependency tree, as
//! `deny.toml` configures them.
//!
//! The advisories check is not run: the RustSec advisory database cannot be fetched from the
//! networks this project is built on.

use std::process::Stdio;

use anyhow::bail;

use crate::workspace;

/// The cargo-deny release the gate uses; `.ci/run` installs this one (it reads it from this line).
pub const CARGO_DENY_VERSION: &str = "0.20.2";

pub fn check() -> anyhow::Result<()> {
    let version = workspace::cargo()
        .args(["deny", "--version"])
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success());
    let Some(version) = version else {
        bail!(
            "cargo-deny is not installed: run `cargo install cargo-deny --locked --version {CARGO_DENY_VERSION}`"
        );
    };
    let version = String::from_utf8_lossy(&version.stdout);
    let version = version.trim();
    if version != format!("cargo-deny {CARGO_DENY_VERSION}") {
        eprintln!(
            "note: found {version}, the gate pins {CARGO_DENY_VERSION} \
             (`cargo install cargo-deny --locked --version {CARGO_DENY_VERSION}`)"
        );
    }
    workspace::run(
        "cargo deny check licenses bans sources",
        workspace::cargo().args([
            "deny",
            "--locked",
            "check",
            "--hide-inclusion-graph",
            "licenses",
            "bans",
            "sources",
        ]),
    )
}
