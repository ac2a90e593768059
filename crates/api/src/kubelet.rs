//! The executor ID of a kubelet (docs/design.md §6) from what makes it what it is: its binary's
//! SHA-256 and `--version`, its flags, its configuration file flattened into `config.<field path>`
//! settings (so that formatting does not count and any changed value does), and its static pods.
//! The agent (`k8sm-agent run --kubelet`) and `kubectl k8sm executor-id` both end here, so the same
//! inputs give the same ID; settings that name the node itself are left out ([`PER_NODE_FLAGS`],
//! [`PER_NODE_CONFIG`]), or every node would have its own ID and none the target.

use serde_json::Value;

use crate::{ExecutorIdError, ExecutorIdentity};

/// Flags whose value is the node's own (its name, address, cloud identity, labels): not part of the
/// ID.
pub const PER_NODE_FLAGS: [&str; 4] =
    ["hostname-override", "node-ip", "provider-id", "node-labels"];

/// Configuration fields (KubeletConfiguration, by JSON field path) that are the node's own: not
/// part of the ID.
pub const PER_NODE_CONFIG: [&str; 1] = ["providerID"];

/// What makes a kubelet what it is, as read from a node or from files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KubeletInputs {
    /// The first line of `kubelet --version`, such as "Kubernetes v1.36.3".
    pub version: String,
    /// Hex SHA-256 of the kubelet binary.
    pub binary_sha256: String,
    /// Its command line after the program name, as the process got it.
    pub args: Vec<String>,
    /// The text of its `--config` file, if it has one.
    pub config: Option<String>,
    /// Its static pods: (file name, manifest text).
    pub static_pods: Vec<(String, String)>,
}

/// Why the inputs make no ID.
#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    #[error("the kubelet configuration is not YAML or JSON: {0}")]
    Config(#[from] serde_yaml::Error),
    #[error(transparent)]
    ExecutorId(#[from] ExecutorIdError),
}

/// The flags of a kubelet command line as (name, value), in order: `--name=value`, `--name value`
/// (the next argument, when it does not start with `-`), or `--name` alone (a boolean, "true").
/// Arguments that are not flags count as `("", argument)`.
pub fn parse_flags(args: &[String]) -> Vec<(String, String)> {
    let mut flags = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        let Some(flag) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
            flags.push((String::new(), arg.clone()));
            continue;
        };
        if let Some((name, value)) = flag.split_once('=') {
            flags.push((name.to_owned(), value.to_owned()));
        } else if let Some(value) = args.get(i).filter(|next| !next.starts_with('-')) {
            flags.push((flag.to_owned(), value.clone()));
            i += 1;
        } else {
            flags.push((flag.to_owned(), "true".to_owned()));
        }
    }
    flags
}

/// The flag naming the configuration file, and the flag and field naming the static pod directory.
pub const CONFIG_FLAG: &str = "config";
pub const STATIC_POD_FLAG: &str = "pod-manifest-path";
pub const STATIC_POD_CONFIG: &str = "staticPodPath";

/// Where the kubelet reads its configuration file and its static pods: (config path, static pod
/// directory), from its flags and configuration (a flag wins over the file, as in the kubelet).
pub fn paths(args: &[String], config: Option<&str>) -> (Option<String>, Option<String>) {
    let flags = parse_flags(args);
    let flag = |name: &str| {
        flags
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let from_config = config
        .and_then(|text| serde_yaml::from_str::<Value>(text).ok())
        .and_then(|c| c.get(STATIC_POD_CONFIG)?.as_str().map(str::to_owned));
    (flag(CONFIG_FLAG), flag(STATIC_POD_FLAG).or(from_config))
}

/// The version an executor reports: the first line of its `--version` output, trimmed ("Kubernetes
/// v1.36.3").
pub fn version_line(output: &str) -> String {
    output.lines().next().unwrap_or_default().trim().to_owned()
}

/// Whether a directory entry is a static pod manifest, as the kubelet reads its manifest directory:
/// a regular file whose name does not start with a dot.
pub fn is_static_pod_file(name: &str, is_file: bool) -> bool {
    is_file && !name.starts_with('.')
}

impl KubeletInputs {
    /// The executor identity: the flags but the per-node ones and `--config` (its content counts
    /// instead, flattened into `config.*` settings, but the per-node fields), and the static
    /// pods.
    pub fn identity(&self) -> Result<ExecutorIdentity, KubeletError> {
        let mut flags: Vec<(String, String)> = parse_flags(&self.args)
            .into_iter()
            .filter(|(name, _)| name != CONFIG_FLAG && !PER_NODE_FLAGS.contains(&name.as_str()))
            .collect();
        if let Some(text) = &self.config {
            let config: Value = serde_yaml::from_str(text)?;
            flatten("config", &config, &mut flags);
        }
        Ok(ExecutorIdentity {
            version: self.version.trim().to_owned(),
            binary_sha256: self.binary_sha256.clone(),
            flags,
            static_pods: self.static_pods.clone(),
        })
    }
}

/// `value` as `(path, scalar)` settings under `prefix`: objects by field, lists by index.
fn flatten(prefix: &str, value: &Value, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(fields) => {
            for (key, field) in fields {
                let top = prefix == "config";
                if top && PER_NODE_CONFIG.contains(&key.as_str()) {
                    continue;
                }
                flatten(&format!("{prefix}.{key}"), field, out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                flatten(&format!("{prefix}[{i}]"), item, out);
            }
        }
        scalar => out.push((prefix.to_owned(), scalar.to_string())),
    }
}

#[cfg(test)]
mod tests {
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
}
