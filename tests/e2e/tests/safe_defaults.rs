//! Applied as shipped, no policy under deploy/ drains anything: each example, the demo's, and the
//! policies the chart renders from its default values and from its README's values, applied with
//! kubectl to a fresh cluster whose nodes all run an old executor, with the controller running,
//! leave every node unmarked and uncordoned and every pod in place. Then the documented way to
//! start (`upgrade start`, `resume`) does start: the check sees a drain when there is one.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use k8sm_api::ExecutorUpgradePolicy;
use k8sm_e2e::manifests;
use k8sm_e2e::nodes::{has_k8sm_state, is_cordoned, is_marked};
use k8sm_e2e::objects::patch_node;
use k8sm_e2e::plugin::k8sm_ok;
use k8sm_e2e::scenario::Scenario;
use k8sm_e2e::waits::observe_for;
use k8sm_e2e::workloads::{create, deployment, unmanaged_pod};
use k8sm_e2e::{kubectl_ok, workspace_root};
use k8sm_testcluster::{Binaries, node_name};

const NS: &str = "safe-defaults";
const CHART: &str = "deploy/helm/k8sm";
const PROGRESS: Duration = Duration::from_secs(120);

/// Every policy that deploy/ ships, as (where it comes from, the file kubectl applies).
fn shipped_policies(dir: &Path) -> Vec<(String, PathBuf)> {
    let root = workspace_root();
    let mut files: Vec<(String, PathBuf)> = manifests::yaml_files(&root.join("deploy/examples"))
        .into_iter()
        .chain([root.join("deploy/demo/policy.yaml")])
        .map(|file| {
            (
                file.strip_prefix(&root).unwrap().display().to_string(),
                file,
            )
        })
        .collect();
    let readme_values = chart_readme_values(&root.join(CHART).join("README.md"));
    let values_file = dir.join("readme-values.yaml");
    std::fs::write(&values_file, readme_values).unwrap();
    let value_sets = [
        ("the chart's default values", vec![]),
        (
            "the chart README's values",
            vec!["-f".to_owned(), values_file.display().to_string()],
        ),
    ];
    for (what, args) in value_sets {
        let rendered = helm_template(&args);
        let policies: Vec<Value> = manifests::parse(&rendered)
            .unwrap_or_else(|e| panic!("{what}: {e}"))
            .into_iter()
            .filter(|(key, _)| key.kind == "ExecutorUpgradePolicy")
            .map(|(_, object)| object)
            .collect();
        for (i, policy) in policies.iter().enumerate() {
            let file = dir.join(format!("{}-{i}.yaml", what.replace(' ', "-")));
            std::fs::write(&file, serde_yaml::to_string(policy).unwrap()).unwrap();
            files.push((
                format!("{what}, policy {}", policy["metadata"]["name"]),
                file,
            ));
        }
    }
    files
}

/// The values block of the chart's README (the fenced YAML that sets `policies:`).
fn chart_readme_values(readme: &Path) -> String {
    let text = std::fs::read_to_string(readme).unwrap();
    let mut blocks = text
        .split("```yaml\n")
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap_or_default().to_owned());
    blocks
        .find(|block| block.lines().any(|line| line.starts_with("policies:")))
        .expect("the chart's README shows values with policies")
}

fn helm_template(args: &[String]) -> String {
    let helm = Binaries::helm().expect("helm builds");
    let output = std::process::Command::new(helm)
        .current_dir(workspace_root())
        .args(["template", "k8sm", CHART])
        .args(args)
        .output()
        .expect("helm runs");
    assert!(
        output.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// What would show a drain: nodes with any k8sm state, and pods gone or replaced.
async fn disturbances(
    scenario: &Scenario,
    pods: &std::collections::BTreeMap<String, String>,
) -> Vec<String> {
    let mut found: Vec<String> = scenario
        .nodes()
        .await
        .iter()
        .filter(|n| has_k8sm_state(n))
        .map(|n| {
            format!(
                "node {} carries k8sm state {:?}",
                n.name_any(),
                k8sm_e2e::nodes::k8sm_keys(n)
            )
        })
        .collect();
    let now = scenario.live_pods().await;
    found.extend(
        pods.iter()
            .filter(|(name, uid)| now.get(*name) != Some(uid))
            .map(|(name, _)| format!("pod {name} was evicted or deleted")),
    );
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shipped_policies_mark_cordon_and_evict_nothing() {
    let mut scenario = Scenario::start(3, NS, "1s").await;
    // Every node a worker: the aggressive example selects workers only.
    for i in 0..3 {
        patch_node(
            &scenario.client,
            &node_name(i),
            json!({ "metadata": { "labels": { "node-role.kubernetes.io/worker": "" } } }),
        )
        .await;
    }
    create(&scenario.client, &deployment(NS, "web", 3)).await;
    create(
        &scenario.client,
        &unmanaged_pod(NS, "debug", &node_name(1), &[]),
    )
    .await;
    scenario.wait_ready(4).await;
    let pods = scenario.live_pods().await;
    scenario.start_controller(&[]);

    let files = shipped_policies(scenario.cluster.dir());
    assert!(files.len() >= 5, "examples, demo and chart: {files:?}");
    let policies: Api<ExecutorUpgradePolicy> = Api::all(scenario.client.clone());
    for (what, file) in &files {
        let file = file.display().to_string();
        kubectl_ok(&scenario.cluster, &["apply", "-f", &file]);
        // Judged once the controller has planned it (its status describes this generation),
        // and a few passes later.
        let name = manifests::parse(&std::fs::read_to_string(&file).unwrap())
            .unwrap()
            .into_keys()
            .next()
            .unwrap()
            .name;
        scenario
            .wait_until(&format!("{what} is planned"), PROGRESS, || async {
                let policy = policies.get(&name).await.ok()?;
                let status = policy.status.as_ref()?;
                (status.observed_generation == policy.metadata.generation
                    && !status.conditions.is_empty())
                .then_some(())
            })
            .await;
        observe_for(Duration::from_secs(3), || async {
            let disturbed = disturbances(&scenario, &pods).await;
            assert!(
                disturbed.is_empty(),
                "{what} ({file}), applied as shipped: {disturbed:?}"
            );
        })
        .await;
        kubectl_ok(
            &scenario.cluster,
            &["delete", "-f", &file, "--wait", "--timeout=60s"],
        );
    }

    // The documented start, on the aggressive example: `upgrade start` marks (it stays paused),
    // `resume` drains. So a drain is seen when there is one.
    let aggressive = workspace_root().join("deploy/examples/aggressive.yaml");
    kubectl_ok(
        &scenario.cluster,
        &["apply", "-f", aggressive.to_str().unwrap()],
    );
    let target = scenario.new_id.clone();
    k8sm_ok(
        &scenario.cluster,
        &[
            "upgrade",
            "start",
            "--to",
            &target,
            "--policy",
            "aggressive",
        ],
    );
    let nodes: Api<Node> = Api::all(scenario.client.clone());
    scenario
        .wait_until("upgrade start marks the nodes", PROGRESS, || async {
            let list = nodes.list(&Default::default()).await.ok()?;
            list.items.iter().all(is_marked).then_some(())
        })
        .await;
    observe_for(Duration::from_secs(3), || async {
        let listed = nodes.list(&Default::default()).await.unwrap();
        assert!(
            !listed.items.iter().any(is_cordoned),
            "paused: marked, nothing cordoned"
        );
        assert_eq!(scenario.live_pods().await, pods, "paused: no pod moved");
    })
    .await;
    k8sm_ok(&scenario.cluster, &["resume", "--policy", "aggressive"]);
    scenario
        .wait_until("resume starts the drain", PROGRESS, || async {
            let list = nodes.list(&Default::default()).await.ok()?;
            list.items.iter().any(is_cordoned).then_some(())
        })
        .await;
}
