//! Release tools built from the Go module proxy like the cluster's binaries, each pinned in its own
//! module under `tests/go/` (so their dependency graphs do not meet the Kubernetes pins) and built
//! only when first asked for: go-containerregistry's `crane` assembles the container images of
//! `cargo xtask image`; krew and its `validate-krew-manifest` check the plugin release of `cargo
//! xtask dist`; a kstatus command (`tests/go/kstatus`) judges a policy's health as GitOps tools do;
//! Prometheus' `promtool` checks and unit-tests the alerting rules of deploy/.

use std::path::PathBuf;

use crate::Error;
use crate::binaries::{build_into, cache_key, cache_root, check_go, go_build, go_modules_dir};
use crate::binaries::{is_complete, lock_cache};

/// Bump when the way these tools are built changes, so existing caches are not reused.
const TOOLS_RECIPE: &str = "1";

/// `crane` of github.com/google/go-containerregistry, as pinned in `tests/go/crane`.
pub fn crane() -> Result<PathBuf, Error> {
    let dir = go_tools(
        "crane",
        &[("crane", "github.com/google/go-containerregistry/cmd/crane")],
        &[],
    )?;
    Ok(dir.join("crane"))
}

/// krew and its manifest validator, as pinned in `tests/go/krew`.
#[derive(Debug, Clone)]
pub struct Krew {
    /// `krew` itself, named as kubectl finds it (`kubectl krew …` runs `kubectl-krew`).
    pub krew: PathBuf,
    /// `validate-krew-manifest`, the check krew-index runs on every submitted manifest.
    pub validate_manifest: PathBuf,
}

pub fn krew() -> Result<Krew, Error> {
    let dir = go_tools(
        "krew",
        &[
            ("kubectl-krew", "sigs.k8s.io/krew/cmd/krew"),
            (
                "validate-krew-manifest",
                "sigs.k8s.io/krew/cmd/validate-krew-manifest",
            ),
        ],
        &[],
    )?;
    Ok(Krew {
        krew: dir.join("kubectl-krew"),
        validate_manifest: dir.join("validate-krew-manifest"),
    })
}

/// A command printing kstatus' verdict on the object it reads (`tests/go/kstatus/main.go`, with
/// sigs.k8s.io/cli-utils as pinned there).
pub fn kstatus() -> Result<PathBuf, Error> {
    let dir = go_tools("kstatus", &[("kstatus", ".")], &[])?;
    Ok(dir.join("kstatus"))
}

/// `promtool` of Prometheus, as pinned in `tests/go/prometheus`: `check rules` and `test rules`.
pub fn promtool() -> Result<PathBuf, Error> {
    // Without the service discoveries (Prometheus' own build tag): rules need none, and the
    // cloud SDKs would triple the build.
    let dir = go_tools(
        "prometheus",
        &[("promtool", "github.com/prometheus/prometheus/cmd/promtool")],
        &["-tags=remove_all_sd"],
    )?;
    Ok(dir.join("promtool"))
}

/// Builds `commands` (output name, Go package) of the module `tests/go/<module>` once into the
/// cache with the extra `go build` flags, keyed by that module's `go.mod` and `go.sum`, and
/// returns their directory.
fn go_tools(module: &str, commands: &[(&str, &str)], flags: &[&str]) -> Result<PathBuf, Error> {
    let modules = go_modules_dir();
    let root = cache_root()?.join("cluster-bin");
    // A module with a command of its own (main.go): its source is part of the key too.
    let main = std::fs::read_to_string(modules.join(module).join("main.go")).unwrap_or_default();
    let recipe = [&[TOOLS_RECIPE, main.as_str()][..], flags].concat();
    let key = cache_key(&modules, &[module], &recipe)?;
    let dir = root.join(format!("{module}-{key}"));
    if is_complete(&dir) {
        return Ok(dir);
    }
    let _lock = lock_cache(&root)?;
    if !is_complete(&dir) {
        check_go()?;
        eprintln!(
            "k8sm-testcluster: building {} from the Go module proxy into {}",
            commands
                .iter()
                .map(|(_, package)| *package)
                .collect::<Vec<_>>()
                .join(", "),
            dir.display()
        );
        build_into(&dir, |out| {
            for (name, package) in commands {
                let args: Vec<String> = ["-ldflags=-s -w"]
                    .iter()
                    .chain(flags)
                    .chain([package])
                    .map(|a| (*a).to_owned())
                    .collect();
                go_build(
                    &modules.join(module),
                    &out.join(name).display().to_string(),
                    &args,
                )?;
            }
            Ok(())
        })?;
    }
    Ok(dir)
}
