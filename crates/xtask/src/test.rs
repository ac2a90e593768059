//! `cargo xtask test`: the whole gate CI runs — formatting, the source layout (import cycles, paths
//! in the docs), the docs' commands, lints, CRD drift, dependency licenses, bans and sources
//! (cargo-deny), the release packaging (images, krew release), unit and end-to-end tests (with
//! Helm's and promtool's checks of the chart and the alerts).

use std::process::Command;

use anyhow::Context;
use k8sm_testcluster::Binaries;

use crate::packaging::Packaging;
use crate::{crdgen, deny, docs, e2e, layout, workspace};

#[derive(clap::Args)]
pub struct TestArgs {
    /// End-to-end tests run at once, each on its own cluster.
    #[arg(long, default_value_t = e2e::DEFAULT_JOBS)]
    jobs: usize,
    /// Extra arguments for `cargo test` (e.g. a test name filter).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    cargo_test_args: Vec<String>,
}

pub fn run(args: TestArgs, xtask: docs::Parse) -> anyhow::Result<()> {
    workspace::run(
        "cargo fmt --check",
        workspace::cargo().args(["fmt", "--all", "--", "--check"]),
    )?;
    // Before clippy: it parses the sources without compiling them, so a cycle fails the gate in a
    // second.
    layout::run()?;
    // As quick: the documented commands of k8sm's programs parse with their clap definitions.
    docs::check_parse(xtask, false)?;
    workspace::run(
        "cargo clippy -D warnings",
        workspace::cargo().args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]),
    )?;
    crdgen::run_check()?;
    deny::check()?;

    eprintln!("==> cluster binaries (built from the Go module proxy on first use)");
    let binaries = Binaries::ensure().context("building the test cluster's binaries")?;
    let version = Command::new(&binaries.kube_apiserver)
        .arg("--version")
        .output()
        .context("running kube-apiserver --version")?;
    eprintln!(
        "==> end-to-end tests run against kube-apiserver {} ({})",
        String::from_utf8_lossy(&version.stdout).trim(),
        binaries.kubernetes_dir.display()
    );
    // The Helm chart's test renders it with the pinned Helm: build it here, where its first build
    // is announced, rather than silently inside a test.
    let helm = Binaries::helm().context("building Helm for the chart's test")?;
    eprintln!("==> the Helm chart is tested with {}", helm.display());
    // kubectl's and Helm's documented commands, on an apiserver of their own (seconds).
    docs::check_tools(&binaries.kubectl, &helm, false)?;
    // promtool, which tests/e2e/tests/monitoring.rs runs on the alerts and their unit tests, is
    // built here for the same reason as Helm.
    let promtool =
        k8sm_testcluster::promtool().context("building promtool for the alerts' test")?;
    eprintln!(
        "==> the alerting rules are tested with {}",
        promtool.display()
    );

    // End-to-end tests run k8sm's binaries as child processes: build them first (a nested cargo
    // inside `cargo test` would wait on the build lock the outer one holds).
    workspace::run(
        "cargo build --workspace --bins (but xtask, which runs)",
        workspace::cargo().args(["build", "--workspace", "--exclude", "xtask", "--bins"]),
    )?;
    // The release packaging, for real, for every platform of release::PLATFORMS: the container
    // images (tests/e2e/tests/image.rs unpacks the controller's into an empty root and runs it
    // against the cluster as a Pod would) and the krew release (krew's own checks). Beside the
    // tests: see packaging.rs.
    let packaging = Packaging::start()?;
    workspace::run(
        "cargo test --workspace (but the end-to-end tests)",
        workspace::cargo()
            .args(["test", "--workspace", "--exclude", e2e::PACKAGE, "--"])
            .args(&args.cargo_test_args),
    )?;
    let images = packaging.images();
    e2e::run(
        args.jobs,
        &args.cargo_test_args,
        &[("K8SM_IMAGE_DIR", images.into_os_string())],
        e2e::Held {
            files: &["image"],
            until: &|| packaging.wait(),
        },
    )?;
    // The packaging's own checks (binaries' architectures, krew's validator) fail the gate even
    // when no test waited for it.
    packaging.wait()
}
