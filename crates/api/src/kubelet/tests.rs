use super::*;

fn args(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_owned).collect()
}

const CONFIG: &str = r#"
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# the fleet's settings
maxPods: 110
evictionHard:
  memory.available: 100Mi
  nodefs.available: 10%
staticPodPath: /etc/kubernetes/manifests
providerID: aws:///eu-west-1a/i-0123
clusterDNS: [10.0.0.10]
"#;

fn inputs() -> KubeletInputs {
    KubeletInputs {
        version: "Kubernetes v1.36.3\n".into(),
        binary_sha256: "ab".repeat(32),
        args: args(
            "--config=/var/lib/kubelet/config.yaml --kubeconfig /etc/kubernetes/kubelet.conf --v=2 \
             --hostname-override=node-17 --node-ip 10.0.3.17 --register-node",
        ),
        config: Some(CONFIG.into()),
        static_pods: vec![
            (
                "etcd.yaml".into(),
                "kind: Pod\nmetadata: {name: etcd}\n".into(),
            ),
            (
                "proxy.yaml".into(),
                "kind: Pod\nmetadata: {name: proxy}\n".into(),
            ),
        ],
    }
}

fn id(inputs: &KubeletInputs) -> String {
    inputs
        .identity()
        .unwrap()
        .executor_id()
        .unwrap()
        .as_str()
        .to_owned()
}

#[test]
fn flags_read_like_the_kubelets_command_line() {
    assert_eq!(
        parse_flags(&args("--a=1 --b 2 --c --d=x=y -v 3 loose --e")),
        [
            ("a".into(), "1".into()),
            ("b".into(), "2".into()),
            ("c".into(), "true".into()),
            ("d".into(), "x=y".into()),
            ("v".into(), "3".into()),
            (String::new(), "loose".into()),
            ("e".into(), "true".into()),
        ]
    );
}

#[test]
fn the_config_and_static_pods_are_found_where_the_kubelet_looks() {
    let (config, pods) = paths(&inputs().args, Some(CONFIG));
    assert_eq!(config.as_deref(), Some("/var/lib/kubelet/config.yaml"));
    assert_eq!(pods.as_deref(), Some("/etc/kubernetes/manifests"));
    // The flag wins over the file.
    let (_, pods) = paths(&args("--pod-manifest-path=/srv/pods"), Some(CONFIG));
    assert_eq!(pods.as_deref(), Some("/srv/pods"));
    assert_eq!(paths(&[], None), (None, None));
}

#[test]
fn reordering_or_reformatting_changes_nothing() {
    let base = id(&inputs());
    let mut reordered = inputs();
    reordered.args = args(
        "--register-node --node-ip 10.0.3.17 --hostname-override=node-17 --v=2 \
         --kubeconfig=/etc/kubernetes/kubelet.conf --config /var/lib/kubelet/config.yaml",
    );
    reordered.static_pods.reverse();
    reordered.config = Some(
        r#"{"clusterDNS": ["10.0.0.10"], "kind": "KubeletConfiguration", "staticPodPath": "/etc/kubernetes/manifests",
            "evictionHard": {"nodefs.available": "10%", "memory.available": "100Mi"}, "maxPods": 110,
            "apiVersion": "kubelet.config.k8s.io/v1beta1"}"#
            .into(),
    );
    assert_eq!(id(&reordered), base);
}

#[test]
fn what_names_the_node_itself_is_left_out() {
    let base = id(&inputs());
    let mut other_node = inputs();
    other_node.args = args(
        "--config=/var/lib/kubelet/config.yaml --kubeconfig /etc/kubernetes/kubelet.conf --v=2 \
         --hostname-override=node-18 --node-ip 10.0.3.18 --register-node --provider-id=aws:///x --node-labels=zone=b",
    );
    other_node.config = Some(CONFIG.replace("i-0123", "i-0456"));
    assert_eq!(id(&other_node), base);
}

#[test]
fn any_change_of_build_flag_config_or_static_pod_changes_the_id() {
    let base = id(&inputs());
    type Change = fn(&mut KubeletInputs);
    let changes: [(&str, Change); 7] = [
        ("version", |i| i.version = "Kubernetes v1.36.4".into()),
        ("binary", |i| i.binary_sha256 = "cd".repeat(32)),
        ("a flag's value", |i| i.args[2] = "--v=4".into()),
        ("a new flag", |i| i.args.push("--fail-swap-on=false".into())),
        ("a config value", |i| {
            i.config = Some(CONFIG.replace("110", "250"))
        }),
        ("a config field", |i| {
            i.config = Some(format!("{CONFIG}serializeImagePulls: false\n"));
        }),
        ("a static pod", |i| {
            i.static_pods[0].1.push_str("spec: {}\n")
        }),
    ];
    for (what, change) in changes {
        let mut changed = inputs();
        change(&mut changed);
        assert_ne!(id(&changed), base, "{what}");
    }
}

#[test]
fn a_config_that_is_not_yaml_is_an_error() {
    let mut bad = inputs();
    bad.config = Some("maxPods: [".into());
    assert!(matches!(bad.identity(), Err(KubeletError::Config(_))));
}

#[test]
fn the_version_is_the_first_line_and_manifests_are_the_visible_files() {
    assert_eq!(
        version_line("Kubernetes v1.36.3\nmore\n"),
        "Kubernetes v1.36.3"
    );
    assert_eq!(version_line(""), "");
    assert!(is_static_pod_file("etcd.yaml", true));
    assert!(!is_static_pod_file(".etcd.yaml.swp", true));
    assert!(!is_static_pod_file("subdir", false));
}
