//! Helm, built from the Go module `tests/go/helm` like the cluster's binaries, for the tests of the
//! chart in `deploy/helm/k8sm`. Built only when asked for (most tests never run it) and cached
//! apart from the cluster's binaries, keyed by its own `go.mod` and `go.sum`, so a Helm bump
//! rebuilds neither Kubernetes nor KWOK. The chart's optional ServiceMonitor is checked against the
//! real CRD of the Prometheus Operator, from the module `tests/go/prometheus-operator` pins.

use std::path::PathBuf;

use crate::Error;
use crate::binaries::{
    Binaries, build_into, cache_key, cache_root, check_go, go_build, go_modules_dir, is_complete,
    lock_cache, module_source, pinned_version,
};

/// The module `tests/go/helm` pins; its major version is in the path of the main package.
const HELM_MODULE: &str = "helm.sh/helm/v4";
/// Bump when the way Helm is built changes.
const HELM_RECIPE: &str = "1";

impl Binaries {
    /// The `helm` command of the pinned Helm module, built once (minutes with a cold Go build
    /// cache, seconds with a warm one) and cached under `cluster-bin/helm-<key>`. Concurrent
    /// callers wait on the cache's lock and share one build.
    pub fn helm() -> Result<PathBuf, Error> {
        let modules = go_modules_dir();
        let module = modules.join("helm");
        let version = pinned_version(&module.join("go.mod"), HELM_MODULE)?;
        let root = cache_root()?.join("cluster-bin");
        let key = cache_key(&modules, &["helm"], &[HELM_RECIPE])?;
        let dir = root.join(format!("helm-{key}"));
        if is_complete(&dir) {
            return Ok(dir.join("helm"));
        }
        let _lock = lock_cache(&root)?;
        if !is_complete(&dir) {
            check_go()?;
            eprintln!(
                "k8sm-testcluster: building Helm {version} from the Go module proxy into {}",
                dir.display()
            );
            build_into(&dir, |out| {
                // Without it `helm version` says only the minor version (the module build carries
                // no release tag).
                let ldflags = format!("-s -w -X {HELM_MODULE}/internal/version.version={version}");
                go_build(
                    &module,
                    &out.join("helm").display().to_string(),
                    &[
                        "-ldflags".to_owned(),
                        ldflags,
                        format!("{HELM_MODULE}/cmd/helm"),
                    ],
                )
            })?;
        }
        Ok(dir.join("helm"))
    }

    /// The Prometheus Operator's ServiceMonitor CRD (monitoring.coreos.com/v1), as the pinned
    /// module ships it: a file in the read-only Go module cache, downloaded once and checked
    /// against `tests/go/prometheus-operator/go.sum`.
    pub fn service_monitor_crd() -> Result<PathBuf, Error> {
        prometheus_operator_crd("monitoring.coreos.com_servicemonitors.yaml")
    }

    /// The Prometheus Operator's PrometheusRule CRD, from the same pinned module as
    /// [`Binaries::service_monitor_crd`]: the chart's and deploy/'s alerts are checked against it.
    pub fn prometheus_rule_crd() -> Result<PathBuf, Error> {
        prometheus_operator_crd("monitoring.coreos.com_prometheusrules.yaml")
    }
}

/// A CRD file of the pinned Prometheus Operator module (`tests/go/prometheus-operator`), in the
/// read-only Go module cache.
fn prometheus_operator_crd(file: &str) -> Result<PathBuf, Error> {
    let module = go_modules_dir().join("prometheus-operator");
    check_go()?;
    let source = module_source(
        &module,
        "github.com/prometheus-operator/prometheus-operator",
    )?;
    Ok(source.join("example/prometheus-operator-crd").join(file))
}
