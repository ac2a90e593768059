//! The Helm chart (deploy/helm/k8sm), rendered by the real Helm (built from the module
//! `tests/go/helm` pins) and checked against the real kubectl and apiserver: the chart must render
//! exactly what the kustomize manifests hold, refuse values that would install something broken,
//! and render only objects the apiserver accepts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use k8sm_e2e::manifests::{self, ObjectKey};
use k8sm_e2e::{KubectlResult, kubectl, kubectl_ok, workspace_root};
use k8sm_testcluster::{Binaries, ClusterOptions, TestCluster};
use serde_json::{Value, json};

const CHART: &str = "deploy/helm/k8sm";

type Objects = BTreeMap<ObjectKey, Value>;

/// The real Helm, run from the workspace root against the test cluster, with its own config, cache
/// and data directories (never the user's ~/.config/helm).
struct Helm {
    binary: PathBuf,
    home: PathBuf,
    kubeconfig: PathBuf,
}

impl Helm {
    fn new(binary: PathBuf, cluster: &TestCluster) -> Self {
        let home = cluster.dir().join("helm");
        std::fs::create_dir_all(&home).unwrap();
        Self {
            binary,
            home,
            kubeconfig: cluster.kubeconfig().to_owned(),
        }
    }

    /// Runs helm and waits for it (`output` reaps the child: nothing is left running).
    fn run(&self, args: &[&str]) -> KubectlResult {
        Command::new(&self.binary)
            .current_dir(workspace_root())
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HELM_CONFIG_HOME", self.home.join("config"))
            .env("HELM_CACHE_HOME", self.home.join("cache"))
            .env("HELM_DATA_HOME", self.home.join("data"))
            .args(args)
            .output()
            .expect("helm runs")
            .into()
    }

    fn ok(&self, args: &[&str]) -> String {
        let result = self.run(args);
        assert!(
            result.success,
            "helm {} failed:\n{}{}",
            args.join(" "),
            result.stdout,
            result.stderr
        );
        result.stdout
    }

    /// `helm template` of the chart (release `k8sm`, CRDs included) with these extra arguments, as
    /// objects.
    fn render(&self, extra: &[&str]) -> Objects {
        let args = [&["template", "k8sm", CHART, "--include-crds"], extra].concat();
        parse("helm template", &self.ok(&args))
    }

    /// Writes a values file for `-f`.
    fn values_file(&self, name: &str, values: &Value) -> String {
        let path = self.home.join(name);
        std::fs::write(&path, serde_yaml::to_string(values).unwrap()).unwrap();
        path.display().to_string()
    }
}

fn parse(what: &str, yaml: &str) -> Objects {
    manifests::parse(yaml).unwrap_or_else(|e| panic!("{what} printed unreadable YAML: {e}\n{yaml}"))
}

/// Asserts that the two sets of objects are equal, printing every difference when not.
fn assert_same(want_name: &str, want: &Objects, have_name: &str, have: &Objects) {
    let diff = manifests::differences(want_name, want, have_name, have);
    assert!(
        diff.is_empty(),
        "{have_name} differs from {want_name}:\n{diff}"
    );
}

/// The objects of `all` that `base` lacks.
fn added(all: &Objects, base: &Objects) -> Objects {
    all.iter()
        .filter(|(key, _)| !base.contains_key(key))
        .map(|(key, object)| (key.clone(), object.clone()))
        .collect()
}

/// The example policies (deploy/examples/*.yaml), as objects and as the chart's `policies` value.
fn example_policies() -> (Objects, Value) {
    let files = manifests::yaml_files(&workspace_root().join("deploy/examples"));
    let mut objects = Objects::new();
    let mut values = Vec::new();
    for file in &files {
        let parsed = parse(
            &file.display().to_string(),
            &std::fs::read_to_string(file).unwrap(),
        );
        for (key, object) in parsed {
            values.push(json!({ "name": key.name, "spec": object["spec"] }));
            objects.insert(key, object);
        }
    }
    assert!(
        objects.len() >= 3,
        "deploy/examples holds the example policies"
    );
    (objects, json!({ "policies": values }))
}

fn kustomize(cluster: &TestCluster, dir: &str) -> Objects {
    parse(
        &format!("kubectl kustomize {dir}"),
        &kubectl_ok(cluster, &["kustomize", dir]),
    )
}

/// The chart, rendered by the real Helm and checked against the real kubectl and apiserver:
///
/// - `helm lint` passes, with the default values and with every option on;
/// - with the default values, the chart renders exactly the objects of `kubectl kustomize deploy/`,
///   object for object and field for field (no normalisation: the chart adds no label or annotation
///   the base lacks); with the agent on it adds exactly `kubectl kustomize deploy/agent`, with
///   `rbac.surge` and `rbac.deleteNode` exactly what the components deploy/components/surge and
///   delete-node add, with `metrics.prometheusRule` and `metrics.dashboard` what
///   deploy/components/monitoring adds, and its `policies` render exactly the example policies;
/// - the comparison fails on a change (a negative control: one extra controller argument is
///   reported);
/// - values that would install something broken are refused, with the fix in the message;
/// - `helm install` installs the CRD from the chart's crds/ before the policies that need it, and
///   `helm uninstall` removes what it installed but the CRD (Helm never deletes a CRD: that would
///   delete every policy);
/// - the apiserver accepts every object of the render with every option on (server-side dry-run),
///   the ServiceMonitor and the PrometheusRule against the Prometheus Operator's real CRDs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_chart_renders_the_kustomize_base_and_the_apiserver_accepts_it() {
    let helm_binary = Binaries::helm().expect("helm builds from tests/go/helm");
    let cluster = TestCluster::start(ClusterOptions::apiserver_only())
        .await
        .expect("cluster starts");
    let helm = Helm::new(helm_binary, &cluster);
    println!(
        "{} against kube-apiserver {}",
        helm.ok(&["version", "--short"]).trim(),
        cluster.server_version().await.unwrap()
    );

    // Default values: exactly the kustomize base.
    helm.ok(&["lint", "--strict", CHART]);
    let base = kustomize(&cluster, "deploy");
    let default = helm.render(&[]);
    assert_same(
        "kubectl kustomize deploy",
        &base,
        "the chart's default render",
        &default,
    );
    assert!(
        base.keys()
            .any(|key| key.kind == "CustomResourceDefinition")
            && base.keys().any(|key| key.kind == "Namespace")
            && base.keys().any(|key| key.kind == "Deployment"),
        "the base holds the CRD, the namespace and the controller: {:?}",
        base.keys().collect::<Vec<_>>()
    );

    // The comparison sees a change: one more controller argument is reported, with its path.
    let changed = helm.render(&["--set", "controller.extraArgs={--log-format=json}"]);
    let diff = manifests::differences("base", &base, "chart", &changed);
    assert!(
        diff.contains("apps/v1 Deployment k8sm-system/k8sm-controller: differs")
            && diff.contains(".spec.template.spec.containers[0].args"),
        "an extra argument is reported:\n{diff}"
    );

    // One replica: no PodDisruptionBudget, whose minAvailable 1 would forbid evicting it and so
    // block its node's drain.
    let single = helm.render(&["--set", "controller.replicas=1"]);
    assert!(
        !single.keys().any(|key| key.kind == "PodDisruptionBudget")
            && default.keys().any(|key| key.kind == "PodDisruptionBudget"),
        "the PodDisruptionBudget is rendered with two replicas or more only"
    );

    // The agent: exactly the objects of deploy/agent, added to the base.
    let with_agent = helm.render(&["--set", "agent.enabled=true"]);
    assert_same(
        "kubectl kustomize deploy/agent",
        &kustomize(&cluster, "deploy/agent"),
        "the chart's agent.enabled=true render (less the base)",
        &added(&with_agent, &default),
    );

    // The opt-in permissions: exactly what the kustomize components add to the base.
    for (values, components) in [
        ("rbac.surge=true", &["surge"][..]),
        ("rbac.deleteNode=true", &["delete-node"][..]),
        (
            "rbac.surge=true,rbac.deleteNode=true",
            &["surge", "delete-node"][..],
        ),
        (
            "metrics.prometheusRule.enabled=true,metrics.dashboard.enabled=true",
            &["monitoring"][..],
        ),
    ] {
        let overlay = manifests::overlay_with_components(&cluster.dir().join(values), components);
        let overlay = kustomize(&cluster, overlay.to_str().unwrap());
        assert_same(
            &format!("deploy/components {components:?} (less the base)"),
            &added(&overlay, &base),
            &format!("the chart's {values} render (less the base)"),
            &added(&helm.render(&["--set", values]), &default),
        );
    }

    // Policies: each renders as the example it was taken from.
    let (examples, policies) = example_policies();
    let policies_file = helm.values_file("policies.yaml", &policies);
    let with_policies = helm.render(&["-f", &policies_file]);
    assert_same(
        "deploy/examples",
        &examples,
        "the chart's policies (less the base)",
        &added(&with_policies, &default),
    );

    // Values that would install something broken are refused, saying how to fix them.
    let refused = helm.run(&["template", "k8sm", CHART, "--namespace", "k8sm-system"]);
    assert!(
        !refused.success && refused.stderr.contains("namespace.create=false"),
        "a release recorded in the namespace the chart creates is refused:\n{}",
        refused.stderr
    );
    let refused = helm.run(&[
        "template",
        "k8sm",
        CHART,
        "--set",
        "namespace.name=ops,agent.enabled=true",
    ]);
    assert!(
        !refused.success
            && refused
                .stderr
                .contains("--kamikaze-from system:serviceaccount:ops:k8sm-controller"),
        "an agent that would not trust the controller of another namespace is refused:\n{}",
        refused.stderr
    );

    // The alerts tell the operator where to look: in the namespace the chart installs into.
    let elsewhere = helm.render(&[
        "--set",
        "namespace.name=ops,metrics.prometheusRule.enabled=true",
    ]);
    let rule = serde_json::to_string(
        &elsewhere[&key("monitoring.coreos.com/v1", "PrometheusRule", "ops", "k8sm")],
    )
    .unwrap();
    assert!(
        rule.contains("kubectl -n ops logs deploy/k8sm-controller")
            && rule.contains("kubectl -n ops logs ds/k8sm-agent")
            && !rule.contains("k8sm-system"),
        "the alerts name the release's namespace:\n{rule}"
    );

    install_and_uninstall(&helm, &cluster, &policies_file);
    everything_on_is_accepted(&helm, &cluster, &policies);
}

/// `helm install` on a cluster without the CRD: Helm installs it from the chart's crds/ first, so
/// the policies of the same release are accepted; `helm uninstall` removes the release's objects
/// but keeps the CRD. In a namespace of its own, so that the dry-run below starts from a cluster
/// without k8sm's namespace.
fn install_and_uninstall(helm: &Helm, cluster: &TestCluster, policies_file: &str) {
    let crd = "crd/executorupgradepolicies.k8s.mesosphere.io";
    assert!(
        !kubectl(cluster, &["get", crd]).success,
        "no CRD before the install"
    );
    helm.ok(&[
        "install",
        "k8sm",
        CHART,
        "--namespace",
        "default",
        "--set",
        "namespace.name=k8sm-helm",
        "-f",
        policies_file,
    ]);
    kubectl_ok(cluster, &["get", crd]);
    kubectl_ok(
        cluster,
        &[
            "-n",
            "k8sm-helm",
            "get",
            "deployment/k8sm-controller",
            "serviceaccount/k8sm-controller",
        ],
    );
    let listed = kubectl_ok(cluster, &["get", "eup", "-o", "name"]);
    for name in ["aggressive", "conservative", "default"] {
        assert!(listed.contains(name), "policy {name} installed:\n{listed}");
    }
    assert!(
        helm.ok(&["list", "--namespace", "default"])
            .contains("deployed")
    );

    helm.ok(&["uninstall", "k8sm", "--namespace", "default"]);
    kubectl_ok(cluster, &["get", crd]);
    // Cluster-wide (policies, RBAC) and in the release's namespace (which, without a namespace
    // controller in this cluster, stays Terminating, but Helm deletes its objects one by one).
    let left: Vec<String> = [
        vec!["get", "eup,clusterroles,clusterrolebindings", "-o", "name"],
        vec![
            "-n",
            "k8sm-helm",
            "get",
            "all,serviceaccounts,roles,rolebindings,pdb",
            "-o",
            "name",
        ],
    ]
    .iter()
    .flat_map(|args| {
        kubectl_ok(cluster, args)
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    })
    .filter(|name| name.contains("k8sm") || name.starts_with("executorupgradepolic"))
    .collect();
    assert!(left.is_empty(), "helm uninstall leaves {left:?}");
}

/// Every option on, applied with a server-side dry-run: the apiserver validates each object
/// (schema, admission) and stores none. The CRDs and the namespace the objects need are created for
/// real first.
fn everything_on_is_accepted(helm: &Helm, cluster: &TestCluster, policies: &Value) {
    let mut values = json!({
        "controller": {
            "replicas": 3,
            "image": { "tag": "0.1.1", "pullPolicy": "Always" },
            "imagePullSecrets": [{ "name": "registry" }],
            "extraArgs": ["--log-format=json"],
            "extraEnv": [{ "name": "TZ", "value": "UTC" }],
            "kamikazeCA": { "configMap": "agents-ca" },
            "resources": { "requests": { "cpu": "200m", "memory": "256Mi" }, "limits": { "memory": "1Gi" } },
            "podLabels": { "team": "platform" },
            "podAnnotations": { "example.com/owner": "platform" },
            "nodeSelector": { "kubernetes.io/os": "linux" },
            "tolerations": [{ "key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule" }],
        },
        "metrics": {
            "serviceMonitor": { "enabled": true, "labels": { "release": "prometheus" }, "scrapeTimeout": "10s" },
            "prometheusRule": { "enabled": true, "labels": { "release": "prometheus" } },
            "dashboard": { "enabled": true, "labels": { "team": "platform" } },
        },
        "rbac": { "surge": true, "deleteNode": true },
        "agent": {
            "enabled": true,
            "hostNetwork": true,
            "logFormat": "json",
            "extraEnv": [{ "name": "HOST_IP", "valueFrom": { "fieldRef": { "fieldPath": "status.hostIP" } } }],
            "nodeSelector": { "kubernetes.io/os": "linux" },
        },
    });
    values["policies"] = policies["policies"].clone();
    let values_file = helm.values_file("everything.yaml", &values);
    helm.ok(&["lint", "--strict", CHART, "-f", &values_file]);
    let rendered = helm.ok(&[
        "template",
        "k8sm",
        CHART,
        "--include-crds",
        "-f",
        &values_file,
    ]);
    let objects = parse("helm template (everything on)", &rendered);

    let deployment = &objects[&key("apps/v1", "Deployment", "k8sm-system", "k8sm-controller")];
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert_eq!(container["image"], "k8sm/k8sm-controller:0.1.1");
    assert_eq!(container["resources"]["limits"]["memory"], "1Gi");
    assert_eq!(
        container["args"][2],
        "--kamikaze-ca-file=/etc/k8sm/kamikaze-ca/ca.crt"
    );
    assert_eq!(container["args"][3], "--log-format=json");
    assert_eq!(
        container["volumeMounts"][0],
        json!({ "name": "kamikaze-ca", "mountPath": "/etc/k8sm/kamikaze-ca", "readOnly": true })
    );
    assert_eq!(
        deployment["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"],
        "agents-ca"
    );
    let agent = &objects[&key("apps/v1", "DaemonSet", "k8sm-system", "k8sm-agent")];
    assert_eq!(
        agent["spec"]["template"]["spec"]["containers"][0]["env"][1],
        json!({ "name": "K8SM_LOG_FORMAT", "value": "json" })
    );
    for (api_version, kind, namespace, name) in [
        (
            "monitoring.coreos.com/v1",
            "ServiceMonitor",
            "k8sm-system",
            "k8sm-controller",
        ),
        (
            "policy/v1",
            "PodDisruptionBudget",
            "k8sm-system",
            "k8sm-controller",
        ),
        (
            "monitoring.coreos.com/v1",
            "PrometheusRule",
            "k8sm-system",
            "k8sm",
        ),
        ("v1", "ConfigMap", "k8sm-system", "k8sm-dashboard"),
        ("apps/v1", "DaemonSet", "k8sm-system", "k8sm-agent"),
        (
            "admissionregistration.k8s.io/v1",
            "ValidatingAdmissionPolicy",
            "",
            "k8sm-agent-own-node",
        ),
        (
            "k8s.mesosphere.io/v1alpha1",
            "ExecutorUpgradePolicy",
            "",
            "conservative",
        ),
        (
            "admissionregistration.k8s.io/v1",
            "ValidatingAdmissionPolicy",
            "",
            "k8sm-controller-surge",
        ),
        (
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            "",
            "k8sm-controller-delete-node",
        ),
    ] {
        assert!(
            objects.contains_key(&key(api_version, kind, namespace, name)),
            "{kind} {name} rendered"
        );
    }

    // The CRD as the chart's README says to update it after a chart upgrade: Helm's field manager
    // owns it since the install above, so the apply takes its fields over (--force-conflicts).
    apply_crd(
        cluster,
        &workspace_root()
            .join(CHART)
            .join("crds/executorupgradepolicy.yaml"),
        "crd/executorupgradepolicies.k8s.mesosphere.io",
    );
    let service_monitor_crd =
        Binaries::service_monitor_crd().expect("the ServiceMonitor CRD from its module");
    apply_crd(
        cluster,
        &service_monitor_crd,
        "crd/servicemonitors.monitoring.coreos.com",
    );
    let prometheus_rule_crd =
        Binaries::prometheus_rule_crd().expect("the PrometheusRule CRD from its module");
    apply_crd(
        cluster,
        &prometheus_rule_crd,
        "crd/prometheusrules.monitoring.coreos.com",
    );
    kubectl_ok(cluster, &["create", "namespace", "k8sm-system"]);

    let file = helm.home.join("everything-rendered.yaml");
    std::fs::write(&file, &rendered).unwrap();
    let applied = kubectl_ok(
        cluster,
        &[
            "apply",
            "--server-side",
            "--dry-run=server",
            "-f",
            file.to_str().unwrap(),
        ],
    );
    let accepted = applied
        .lines()
        .filter(|line| line.ends_with("(server dry run)"))
        .count();
    assert_eq!(
        accepted,
        objects.len(),
        "the apiserver accepts every object of the render:\n{applied}"
    );
    println!(
        "the apiserver accepts all {accepted} objects of the render with every option on (server-side dry-run)"
    );
    // A dry run stores nothing.
    assert!(
        !kubectl(
            cluster,
            &["-n", "k8sm-system", "get", "deployment/k8sm-controller"]
        )
        .success
    );
}

fn apply_crd(cluster: &TestCluster, file: &Path, name: &str) {
    kubectl_ok(
        cluster,
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            file.to_str().unwrap(),
        ],
    );
    kubectl_ok(
        cluster,
        &["wait", "--for=condition=Established", "--timeout=60s", name],
    );
}

fn key(api_version: &str, kind: &str, namespace: &str, name: &str) -> ObjectKey {
    ObjectKey {
        api_version: api_version.into(),
        kind: kind.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}
