//! Least privilege (docs/design.md §9, docs/permissions.md): the controller needs exactly the
//! shipped role, the shipped install cannot change other Deployments, the opt-in surge component
//! allows the surge move and nothing more, and the ServiceAccount can do exactly the documented
//! list.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use k8sm_api::keys::{RESTARTED_AT_ANNOTATION, SURGE_MOVE_ANNOTATION};
use k8sm_api::{ExecutorUpgradePolicySpec, Surge, condition_types};
use k8sm_e2e::events::{note, regards};
use k8sm_e2e::manifests::overlay_with_components;
use k8sm_e2e::scenario::Scenario;
use k8sm_e2e::status::condition;
use k8sm_e2e::tokens::{
    CONTROLLER_ACCOUNT, K8SM_NAMESPACE, apply_controller_account, client_from, request_token,
    token_kubeconfig,
};
use k8sm_e2e::workloads::{create, deployment};
use k8sm_e2e::{kubectl_ok, workspace_root};
use k8sm_testcluster::{ClusterOptions, TestCluster, node_name};

const NS: &str = "rbac";

/// The controller completes an upgrade with a ServiceAccount token bound to exactly
/// deploy/rbac.yaml, and with one verb taken away it refuses to start, naming the missing
/// permission.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_needs_exactly_the_deployed_role() {
    let mut scenario = Scenario::start(3, NS, "1s").await;
    let (kubeconfig, token) = scenario.deployed_controller_identity();
    let election = ["--leader-elect", "--leader-elect-namespace=k8sm-system"];

    create(&scenario.client, &deployment(NS, "web", 3)).await;
    scenario
        .wait_ready_within(NS, 3, Duration::from_secs(60))
        .await;
    scenario.start_controller_as(&kubeconfig, &election);
    scenario
        .create_policy(
            "fleet",
            ExecutorUpgradePolicySpec {
                target_executor_id: Some(scenario.new_id.clone()),
                owner_health_threshold: 60,
                ..ExecutorUpgradePolicySpec::default()
            },
        )
        .await;
    scenario
        .wait_nodes_upgraded(3, Duration::from_secs(300))
        .await;
    // The status is written in the pass after the last node's change: wait for it rather than race
    // it.
    let status = scenario
        .wait_until(
            "the policy status says 3/3",
            Duration::from_secs(60),
            || async {
                let status = scenario.policy("fleet").await.status?;
                (status.upgraded.as_deref() == Some("3/3")).then_some(status)
            },
        )
        .await;
    assert_eq!(status.upgraded.as_deref(), Some("3/3"));
    assert!(
        !scenario.events("Evicted").await.is_empty(),
        "it evicted through the Eviction API"
    );
    // Nothing secret is logged: the whole upgrade's log holds no part of the credential it ran
    // with.
    let log = scenario.controllers[0].log_tail(usize::MAX);
    assert!(token.len() > 64, "a real token: {} chars", token.len());
    assert!(
        !log.contains(&token[token.len() - 32..]) && !log.contains(&token[..32]),
        "the controller's log contains its ServiceAccount token"
    );

    // Take one verb away: a new controller refuses to start and says which permission is missing.
    scenario.controllers[0].kill_with(nix::sys::signal::Signal::SIGTERM);
    scenario.patch_controller_role(&remove_rule(&scenario, "pods/eviction"));
    let index = scenario.start_controller_as(&kubeconfig, &election);
    let controller = &scenario.controllers[index];
    let status = controller
        .wait_exit(Duration::from_secs(60))
        .unwrap_or_else(|| {
            panic!(
                "the controller kept running without pods/eviction:\n{}",
                controller.log_tail(20)
            )
        });
    assert!(!status.success());
    let log = controller.log_tail(20);
    assert!(
        log.contains("create pods/eviction"),
        "the error names the missing permission:\n{log}"
    );
}

/// A JSON patch removing the ClusterRole rule that grants `resource`.
fn remove_rule(scenario: &Scenario, resource: &str) -> String {
    let rules = kubectl_ok(
        &scenario.cluster,
        &[
            "get",
            "clusterrole",
            "k8sm-controller",
            "-o",
            "jsonpath={.rules[*].resources}",
        ],
    );
    let index = rules
        .split("] [")
        .position(|r| r.contains(&format!("\"{resource}\"")))
        .unwrap_or_else(|| panic!("no rule grants {resource}: {rules}"));
    format!(r#"[{{"op":"remove","path":"/rules/{index}"}}]"#)
}

/// The controller's ServiceAccount as `kubectl auth can-i --as` names it.
const AS_CONTROLLER: &str = "--as=system:serviceaccount:k8sm-system:k8sm-controller";

/// A client with a token of the controller's ServiceAccount (deploy/rbac.yaml applied first).
async fn controller_client(cluster: &TestCluster) -> Client {
    let token = request_token(
        &cluster.client(),
        K8SM_NAMESPACE,
        CONTROLLER_ACCOUNT,
        None,
        None::<&Node>,
    )
    .await;
    client_from(&token_kubeconfig(cluster, "controller-account", &token)).await
}

/// A PATCH of `namespace/name`'s container image: the apiserver's status code (200 when accepted)
/// and message.
async fn patch_image(client: &Client, namespace: &str, name: &str) -> (u16, String) {
    let patch = json!({ "spec": { "template": { "spec": { "containers": [
        { "name": "app", "image": "registry.invalid/attacker:1" }
    ] } } } });
    answer(client, namespace, name, &patch).await
}

async fn answer(
    client: &Client,
    namespace: &str,
    name: &str,
    patch: &serde_json::Value,
) -> (u16, String) {
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => (200, String::new()),
        Err(kube::Error::Api(status)) => (status.code, status.message),
        Err(error) => panic!("PATCH of Deployment {namespace}/{name}: {error}"),
    }
}

async fn image_of(client: &Client, namespace: &str, name: &str) -> String {
    let deployment = Api::<Deployment>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .expect("the Deployment");
    deployment
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|s| s.containers[0].image.clone())
        .unwrap_or_default()
}

/// Applies an overlay of deploy/ with `components` (dirs under deploy/components), as an operator
/// opting in does.
fn apply_with_components(cluster: &TestCluster, components: &[&str]) {
    let dir = overlay_with_components(&cluster.dir().join("overlay"), components);
    kubectl_ok(
        cluster,
        &["apply", "--server-side", "-k", dir.to_str().unwrap()],
    );
}

/// With the shipped install, the controller's ServiceAccount cannot change a kube-system
/// Deployment's pod template: a PATCH of its image is refused with 403 (the finding this guards:
/// docs/threat-model.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_install_cannot_change_a_kube_system_pod_template() {
    let cluster = TestCluster::start(ClusterOptions::apiserver_only())
        .await
        .expect("cluster starts");
    apply_controller_account(&cluster);
    let admin = cluster.client();
    create(&admin, &deployment("kube-system", "coredns", 1)).await;
    let controller = controller_client(&cluster).await;

    let (code, message) = patch_image(&controller, "kube-system", "coredns").await;
    println!("PATCH of kube-system/coredns's image with the controller's token: {code} {message}");
    assert_eq!(
        code, 403,
        "the controller's token changed a kube-system pod template"
    );
    assert_eq!(
        image_of(&admin, "kube-system", "coredns").await,
        "registry.invalid/app:1"
    );
    // Not even the surge move's own change: without components/surge, no Deployment patch at all.
    let restart = json!({ "spec": { "template": { "metadata": { "annotations": {
        RESTARTED_AT_ANNOTATION: "2024-01-01T00:00:00Z"
    } } } } });
    let (code, _) = answer(&controller, "kube-system", "coredns", &restart).await;
    assert_eq!(code, 403, "a restart without the surge component");
}

/// Without deploy/components/surge a policy asking for surge moves is Degraded, naming the
/// component and the Helm value; with it the controller moves a single-replica Deployment by a
/// surge rollout, and the component's admission policy refuses any other change to a Deployment
/// by that account.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_surge_component_it_moves_a_deployment_and_nothing_more() {
    const NS: &str = "surge-rbac";
    let mut scenario = Scenario::start(2, NS, "1s").await;
    let (kubeconfig, token) = scenario.deployed_controller_identity();
    let client = scenario.client.clone();
    scenario
        .pin_to(&node_name(0), 1, || async {
            create(&client, &deployment(NS, "solo", 1)).await;
        })
        .await;
    let pod = scenario.app_pods("solo").await[0].name_any();

    // Without the component: the controller starts, and the refused move says what to enable; the
    // pod stays.
    scenario.start_controller_as(
        &kubeconfig,
        &["--leader-elect", "--leader-elect-namespace=k8sm-system"],
    );
    let mut spec = ExecutorUpgradePolicySpec {
        owner_health_threshold: 60,
        ..scenario.policy_spec(1)
    };
    spec.workloads.surge = Surge::SingleReplica;
    spec.node_progress_deadline = "3m".parse().expect("a duration");
    scenario.create_policy("fleet", spec).await;
    let says_what_to_enable =
        |text: &str| text.contains("deploy/components/surge") && text.contains("rbac.surge=true");
    let message = scenario
        .wait_until(
            "the policy is Degraded, naming the component",
            Duration::from_secs(120),
            || async {
                let policy = scenario.policy("fleet").await;
                let degraded = condition(&policy, condition_types::DEGRADED)?;
                says_what_to_enable(&degraded.message).then(|| degraded.message.clone())
            },
        )
        .await;
    println!("Degraded without the surge component: {message}");
    let failed = scenario.events("ActionFailed").await;
    assert!(
        failed
            .iter()
            .any(|e| regards(e, &pod) && says_what_to_enable(note(e))),
        "an ActionFailed Event on {pod} names the component: {failed:?}"
    );
    assert!(
        scenario.pod(&pod).await.is_some(),
        "{pod} was not evicted instead"
    );

    // With it, the move is retried and completes.
    apply_with_components(&scenario.cluster, &["surge"]);
    scenario
        .wait_all_upgraded("fleet", 2, Duration::from_secs(300))
        .await;
    let moved = scenario.events("Moved").await;
    assert!(
        moved.iter().any(|e| regards(e, &pod)),
        "solo's pod moved by a surge rollout: {moved:?}"
    );
    assert!(
        !scenario
            .events("Evicted")
            .await
            .iter()
            .any(|e| regards(e, &pod)),
        "solo's pod was not evicted"
    );
    let annotations = Api::<Deployment>::namespaced(client.clone(), NS)
        .get("solo")
        .await
        .expect("solo")
        .annotations()
        .clone();
    assert!(
        annotations.contains_key(SURGE_MOVE_ANNOTATION),
        "{annotations:?}"
    );

    // The same token may not change the image, of this Deployment or of one in kube-system.
    let controller = client_from(&token_kubeconfig(
        &scenario.cluster,
        "controller-account",
        &token,
    ))
    .await;
    create(&client, &deployment("kube-system", "coredns", 1)).await;
    for (namespace, name) in [(NS, "solo"), ("kube-system", "coredns")] {
        let (code, message) = patch_image(&controller, namespace, name).await;
        println!(
            "PATCH of {namespace}/{name}'s image with the controller's token: {code} {message}"
        );
        assert_eq!(
            code, 403,
            "the admission policy refuses an image change of {namespace}/{name}"
        );
        assert!(
            message.contains("k8sm-controller may not change a Deployment's pod template"),
            "the refusal says why: {message}"
        );
        assert_eq!(
            image_of(&client, namespace, name).await,
            "registry.invalid/app:1"
        );
    }
    // Nor any other annotation, of the template or of the Deployment.
    let sneaky = json!({ "metadata": { "annotations": { "example.com/x": "y" } } });
    let (code, message) = answer(&controller, "kube-system", "coredns", &sneaky).await;
    assert_eq!(code, 403, "{message}");
    assert!(message.contains("example.com/x"), "{message}");
}

/// `kubectl auth can-i --list` for the account equals the lists in docs/permissions.md, without
/// and with the opt-in components.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_account_can_do_exactly_the_documented_list() {
    let cluster = TestCluster::start(ClusterOptions::apiserver_only())
        .await
        .expect("cluster starts");
    apply_controller_account(&cluster);
    let doc = std::fs::read_to_string(workspace_root().join("docs/permissions.md"))
        .expect("docs/permissions.md");
    // k8sm's rows, and what Kubernetes grants every ServiceAccount.
    let listed = |blocks: &[&str]| {
        let mut want = Rules::new();
        for block in blocks.iter().chain(&["everyone"]) {
            for (key, verbs) in documented(&doc, block) {
                want.entry(key).or_default().extend(verbs);
            }
        }
        want
    };
    for (block, namespace) in [("default", "default"), ("k8sm-system", K8SM_NAMESPACE)] {
        assert_lists(&cluster, namespace, &listed(&[block]));
    }
    apply_with_components(&cluster, &["surge", "delete-node"]);
    for (block, namespace) in [("default", "default"), ("k8sm-system", K8SM_NAMESPACE)] {
        assert_lists(&cluster, namespace, &listed(&[block, "opt-in"]));
    }
}

/// A row of `kubectl auth can-i --list`: resource, non-resource URLs and resource names; its verbs.
type Rules = BTreeMap<(String, String, String), BTreeSet<String>>;

fn assert_lists(cluster: &TestCluster, namespace: &str, want: &Rules) {
    let text = kubectl_ok(
        cluster,
        &["auth", "can-i", "--list", AS_CONTROLLER, "-n", namespace],
    );
    let have = rules(&text);
    assert_eq!(
        &have, want,
        "kubectl auth can-i --list -n {namespace} differs from docs/permissions.md:\n{text}"
    );
}

/// The rows of the fenced block after `<!-- can-i: NAME -->` in the doc.
fn documented(doc: &str, name: &str) -> Rules {
    let marker = format!("<!-- can-i: {name} -->");
    let after = doc
        .split_once(&marker)
        .unwrap_or_else(|| panic!("docs/permissions.md has no {marker}"))
        .1;
    let block: String = after
        .lines()
        .skip_while(|l| !l.starts_with("```"))
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .map(|l| format!("{l}\n"))
        .collect();
    rules(&block)
}

/// Rows as kubectl prints them (`Resources  Non-Resource URLs  Resource Names  Verbs`, the first
/// column blank for non-resource URLs), merged by their first three columns; the header skipped.
fn rules(text: &str) -> Rules {
    let mut rules = Rules::new();
    for line in text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("Resources"))
    {
        let at = line
            .find('[')
            .unwrap_or_else(|| panic!("not a can-i row: {line}"));
        let resource = line[..at].trim().to_owned();
        // The bracketed lists: non-resource URLs, resource names, verbs.
        let lists: Vec<&str> = line[at..]
            .split(']')
            .filter_map(|l| l.trim().strip_prefix('['))
            .collect();
        assert_eq!(lists.len(), 3, "not a can-i row: {line}");
        let verbs = rules
            .entry((resource, lists[0].to_owned(), lists[1].to_owned()))
            .or_default();
        verbs.extend(lists[2].split_whitespace().map(str::to_owned));
    }
    rules
}
