//! The demo cluster the docs' kubectl and Helm commands run against: a real apiserver with what
//! an operator has after following the README (the chart installed, the default policy applied,
//! an upgrade done), so that reads find their objects and waits end. Changes run as server-side
//! dry runs, which the apiserver admits and validates without keeping; `helm install` as a
//! client-side one.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8sm_testcluster::{ClusterOptions, TestCluster};

use super::bounded;
use super::placeholders::{NODE, POLICY};
use super::programs::Tool;
use crate::workspace;

/// kubectl commands that only read, run as they are.
const KUBECTL_READS: &[&str] = &[
    "get",
    "describe",
    "explain",
    "wait",
    "auth",
    "kustomize",
    "api-resources",
    "api-versions",
    "version",
    "events",
];

/// kubectl commands that change objects, run with `--dry-run=server`.
const KUBECTL_CHANGES: &[&str] = &[
    "apply", "create", "delete", "patch", "label", "annotate", "replace", "scale", "cordon",
    "uncordon", "drain", "taint", "rollout", "set",
];

/// Values files the docs pass with `-f` and leave to the reader: empty ones here.
const READERS_FILES: &[&str] = &["my-values.yaml", "my-policies.yaml"];

/// How long one documented command may take: a `kubectl wait` must find its condition met.
const DEADLINE: Duration = Duration::from_secs(60);

pub struct Demo {
    cluster: TestCluster,
    helm: PathBuf,
    /// Helm's homes and the reader's files.
    scratch: PathBuf,
}

impl Demo {
    /// Starts an apiserver and sets it up: the chart installed as release `k8sm`, the default
    /// policy applied with its upgrade done (Upgraded), and the node the docs' examples name.
    pub fn start(runtime: &tokio::runtime::Runtime, helm: PathBuf) -> anyhow::Result<Self> {
        let cluster = runtime
            .block_on(TestCluster::start(ClusterOptions::apiserver_only()))
            .context("starting the demo cluster")?;
        let scratch = cluster.dir().join("docs");
        for dir in ["config", "cache", "data"] {
            std::fs::create_dir_all(scratch.join("helm").join(dir))?;
        }
        for file in READERS_FILES {
            std::fs::write(scratch.join(file), "{}\n")?;
        }
        let demo = Self {
            cluster,
            helm,
            scratch,
        };
        demo.set_up()?;
        Ok(demo)
    }

    fn set_up(&self) -> anyhow::Result<()> {
        self.must(Tool::Helm, &["install", "k8sm", "deploy/helm/k8sm"])?;
        self.must(
            Tool::Kubectl,
            &[
                "wait",
                "--for=condition=Established",
                "crd/executorupgradepolicies.k8s.mesosphere.io",
            ],
        )?;
        self.must(
            Tool::Kubectl,
            &["apply", "-f", "deploy/examples/default.yaml"],
        )?;
        // As the controller writes it: observed at the policy's generation, without which
        // `kubectl wait --for=condition=…` waits on (the CRD serves generation 0 until then).
        let upgraded = serde_json::json!({"status": {"observedGeneration": 1, "conditions": [{
            "type": "Upgraded",
            "status": "True",
            "reason": "AllNodesUpgraded",
            "message": "every selected node runs the target",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }]}});
        self.must(
            Tool::Kubectl,
            &[
                "patch",
                "eup",
                POLICY,
                "--subresource=status",
                "--type=merge",
                "-p",
                &upgraded.to_string(),
            ],
        )?;
        let node = serde_json::json!({"apiVersion": "v1", "kind": "Node",
                                      "metadata": {"name": NODE}});
        let path = self.scratch.join("node.json");
        std::fs::write(&path, node.to_string())?;
        self.must(
            Tool::Kubectl,
            &["create", "-f", &path.display().to_string()],
        )?;
        // `kubectl explain` reads the CRD's schema from the published OpenAPI, which lags.
        let start = Instant::now();
        while self
            .tool(Tool::Kubectl, &["explain", "executorupgradepolicy.spec"])
            .is_err()
        {
            if start.elapsed() > DEADLINE {
                bail!("the CRD's schema was not published within {DEADLINE:?}");
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        Ok(())
    }

    fn must(&self, tool: Tool, args: &[&str]) -> anyhow::Result<()> {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        self.tool(tool, &args)
            .map_err(|e| anyhow::anyhow!("setting up the demo cluster: {e}"))
    }

    /// Runs a documented command: reads as they are, changes as dry runs.
    pub fn run(&self, tool: Tool, args: &[String]) -> Result<(), String> {
        let mut args: Vec<String> = args
            .iter()
            .map(|a| match READERS_FILES.contains(&a.as_str()) {
                true => self.scratch.join(a).display().to_string(),
                false => a.clone(),
            })
            .collect();
        args.extend(dry_run(tool, &args)?.map(str::to_owned));
        self.tool(tool, &args)
    }

    fn tool(&self, tool: Tool, args: &[impl AsRef<str>]) -> Result<(), String> {
        let program: &Path = match tool {
            Tool::Kubectl => &self.cluster.binaries().kubectl,
            Tool::Helm => &self.helm,
            Tool::Cargo => return Err("cargo is not run against the cluster".into()),
        };
        let helm = self.scratch.join("helm");
        let mut command = Command::new(program);
        command
            .args(args.iter().map(AsRef::as_ref))
            .current_dir(workspace::root())
            .env("KUBECONFIG", self.cluster.kubeconfig())
            .env("HELM_CONFIG_HOME", helm.join("config"))
            .env("HELM_CACHE_HOME", helm.join("cache"))
            .env("HELM_DATA_HOME", helm.join("data"));
        let output = bounded::run(&mut command, DEADLINE)?;
        if output.success {
            return Ok(());
        }
        let words: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
        Err(format!(
            "`{} {}` failed:\n{}{}",
            tool.name(),
            words.join(" "),
            output.stdout,
            output.stderr.trim_end()
        ))
    }
}

/// The flag that makes a documented command a dry run, if it changes anything; an error for a
/// command with no rule here.
fn dry_run(tool: Tool, args: &[String]) -> Result<Option<&'static str>, String> {
    let mut verbs = args
        .iter()
        .filter(|a| !a.starts_with('-'))
        .map(String::as_str);
    let verb = verbs.next().unwrap_or_default();
    match tool {
        Tool::Kubectl
            if verb == "rollout" && matches!(verbs.next(), Some("status" | "history")) =>
        {
            Ok(None)
        }
        Tool::Kubectl if KUBECTL_READS.contains(&verb) => Ok(None),
        Tool::Kubectl if KUBECTL_CHANGES.contains(&verb) => Ok(Some("--dry-run=server")),
        // Rendered and checked by the chart, not against the cluster: the demo's release owns the
        // objects, so a second install beside it (the docs' alternatives) would be refused.
        Tool::Helm if verb == "install" => Ok(Some("--dry-run=client")),
        Tool::Helm if verb == "upgrade" => Ok(Some("--dry-run=server")),
        Tool::Helm if matches!(verb, "uninstall" | "rollback") => Ok(Some("--dry-run")),
        Tool::Helm
            if matches!(
                verb,
                "template" | "lint" | "show" | "list" | "status" | "get"
            ) =>
        {
            Ok(None)
        }
        _ => Err(format!(
            "no rule to run `{} {verb}` on the demo cluster (a read, or a change with a dry run): \
             add one to crates/xtask/src/docs/on_cluster.rs",
            tool.name()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dry(tool: Tool, text: &str) -> Result<Option<&'static str>, String> {
        let args: Vec<String> = text.split(' ').map(str::to_owned).collect();
        dry_run(tool, &args)
    }

    #[test]
    fn changes_are_dry_runs_and_reads_run_as_they_are() {
        assert_eq!(
            dry(Tool::Kubectl, "apply -k deploy/"),
            Ok(Some("--dry-run=server"))
        );
        assert_eq!(dry(Tool::Kubectl, "get events -A"), Ok(None));
        assert_eq!(dry(Tool::Kubectl, "rollout status deploy/x"), Ok(None));
        assert_eq!(
            dry(Tool::Kubectl, "rollout restart deploy/x"),
            Ok(Some("--dry-run=server"))
        );
        assert_eq!(
            dry(Tool::Helm, "install k8sm c"),
            Ok(Some("--dry-run=client"))
        );
        assert_eq!(
            dry(Tool::Helm, "upgrade k8sm c"),
            Ok(Some("--dry-run=server"))
        );
        assert_eq!(dry(Tool::Helm, "uninstall k8sm"), Ok(Some("--dry-run")));
        assert!(dry(Tool::Kubectl, "exec -it x").is_err());
    }
}
