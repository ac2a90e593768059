//! The ExecutorUpgradePolicy CRD on a real apiserver: it installs, accepts every example, rejects
//! every invalid policy with a message naming the field, fills in defaults, and documents its
//! fields through `kubectl explain`.

use std::path::Path;

use k8sm_e2e::manifests::yaml_files;
use k8sm_e2e::{install_crd, kubectl, kubectl_ok, workspace_root};
use k8sm_testcluster::{ClusterOptions, TestCluster};

fn metadata_name(path: &Path) -> String {
    let doc: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["metadata"]["name"]
        .as_str()
        .expect("metadata.name")
        .to_owned()
}

fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_crd_installs_validates_defaults_and_documents() {
    let cluster = TestCluster::start(ClusterOptions::apiserver_only())
        .await
        .expect("cluster starts");
    println!(
        "tested against kube-apiserver {}",
        cluster.server_version().await.unwrap()
    );
    install_crd(&cluster);

    // Every example policy is accepted and listed with the printer columns.
    let examples = yaml_files(&workspace_root().join("deploy/examples"));
    assert!(
        examples.len() >= 3,
        "deploy/examples holds the example policies"
    );
    for example in &examples {
        kubectl_ok(&cluster, &["create", "-f", example.to_str().unwrap()]);
    }
    let table = kubectl_ok(&cluster, &["get", "eup"]);
    let header = table.lines().next().unwrap_or_default();
    for column in ["NAME", "TARGET", "UPGRADED", "PAUSED", "AGE"] {
        assert!(
            header.contains(column),
            "column {column} missing from:\n{table}"
        );
    }
    for example in &examples {
        assert!(
            table.contains(&metadata_name(example)),
            "{} not listed:\n{table}",
            example.display()
        );
    }

    // Every invalid policy is rejected with a message that names the bad field, and nothing is
    // stored.
    let invalid = yaml_files(&workspace_root().join("tests/e2e/fixtures/invalid"));
    assert!(
        invalid.len() >= 12,
        "at least 12 invalid policies, found {}",
        invalid.len()
    );
    for fixture in &invalid {
        let text = std::fs::read_to_string(fixture).unwrap();
        let expect = text
            .lines()
            .find_map(|line| line.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{} has no `# expect: ` line", fixture.display()))
            .trim();
        let result = kubectl(&cluster, &["create", "-f", fixture.to_str().unwrap()]);
        assert!(!result.success, "{} was accepted", fixture.display());
        assert!(
            result.stderr.contains(expect),
            "{}: the error does not contain {expect:?}:\n{}",
            fixture.display(),
            result.stderr
        );
        let name = metadata_name(fixture);
        assert!(
            !kubectl(&cluster, &["get", "eup", &name]).success,
            "{name} was stored although it was rejected"
        );
        println!(
            "rejected {}: {}",
            fixture.file_name().unwrap().to_string_lossy(),
            result.stderr.trim()
        );
    }

    // An empty spec gets every documented default from the apiserver.
    let minimal = cluster.dir().join("minimal-policy.yaml");
    std::fs::write(
        &minimal,
        "apiVersion: k8s.mesosphere.io/v1alpha1\nkind: ExecutorUpgradePolicy\nmetadata:\n  name: minimal\nspec: {}\n",
    )
    .unwrap();
    kubectl_ok(&cluster, &["create", "-f", minimal.to_str().unwrap()]);
    let stored: serde_json::Value = serde_json::from_str(&kubectl_ok(
        &cluster,
        &["get", "eup", "minimal", "-o", "json"],
    ))
    .unwrap();
    let spec = &stored["spec"];
    assert_eq!(spec["maxConcurrentNodes"], 1, "{spec}");
    assert_eq!(spec["ownerHealthThreshold"], 90, "{spec}");
    assert_eq!(spec["unmanagedPods"]["policy"], "Never", "{spec}");
    assert_eq!(spec["respectPodDisruptionBudgets"], true, "{spec}");
    assert_eq!(spec["cordon"], true, "{spec}");
    assert_eq!(spec["kamikaze"]["mechanism"], "Annotation", "{spec}");
    assert_eq!(spec["restartTimeout"], "10m", "{spec}");
    assert_eq!(spec["paused"], false, "{spec}");
    let typed: k8sm_api::ExecutorUpgradePolicy =
        serde_json::from_value(stored.clone()).expect("stored policy parses");
    assert_eq!(typed.spec, k8sm_api::ExecutorUpgradePolicySpec::default());

    // `kubectl explain` prints each field's documentation from the Rust doc comments.
    let crd = serde_json::to_value(k8sm_api::crd()).unwrap();
    let spec_schema =
        &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let fields = [
        "targetExecutorId",
        "nodeSelector",
        "maxConcurrentNodes",
        "ownerHealthThreshold",
        "unmanagedPods.policy",
        "unmanagedPods.timeout",
        "respectPodDisruptionBudgets",
        "cordon",
        "kamikaze.mechanism",
        "kamikaze.urlTemplate",
        "kamikaze.allowInsecureHttp",
        "restartTimeout",
        "paused",
    ];
    for field in fields {
        let schema = field
            .split('.')
            .fold(spec_schema, |schema, part| &schema["properties"][part]);
        let description = schema["description"]
            .as_str()
            .unwrap_or_else(|| panic!("spec.{field} has no description"));
        let explained = kubectl_ok(
            &cluster,
            &["explain", &format!("executorupgradepolicy.spec.{field}")],
        );
        let first_sentence = description.split(". ").next().unwrap();
        assert!(
            collapse_whitespace(&explained).contains(&collapse_whitespace(first_sentence)),
            "kubectl explain spec.{field} does not show {first_sentence:?}:\n{explained}"
        );
    }
}
