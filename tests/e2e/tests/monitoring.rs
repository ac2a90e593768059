//! The alerts of deploy/components/monitoring: promtool (built from the module `tests/go/prometheus`
//! pins) checks the PrometheusRule's rule groups and runs their unit tests, which fail on a broken
//! rule (a negative control).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use k8sm_e2e::{KubectlResult, workspace_root};
use serde_json::Value;

const RULE: &str = "deploy/components/monitoring/prometheusrule.yaml";
const RULE_TESTS: &str = "deploy/components/monitoring/tests";

/// The alerts issue #45 asks for, each with its runbook.
const ALERTS: [&str; 5] = [
    "K8smControllerWithoutLeader",
    "K8smNodeStalled",
    "K8smRestartOverdue",
    "K8smPolicyDegraded",
    "K8smUpgradeNoProgress",
];

fn yaml_file(path: &str) -> Value {
    let text = std::fs::read_to_string(workspace_root().join(path)).unwrap();
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The PrometheusRule's spec: a plain rule file, as promtool reads it.
fn rule_groups() -> Value {
    yaml_file(RULE)["spec"].clone()
}

fn rules(groups: &Value) -> Vec<&Value> {
    groups["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules"))
        .collect()
}

fn promtool(dir: &Path, args: &[&str]) -> KubectlResult {
    let binary = k8sm_testcluster::promtool().expect("promtool builds from tests/go/prometheus");
    Command::new(binary)
        .current_dir(dir)
        .args(args)
        .output()
        .expect("promtool runs")
        .into()
}

/// A directory with the rule groups as `k8sm-rules.yaml` and the unit tests beside them.
fn rules_dir(name: &str, groups: &Value) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("k8sm-promtool-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("k8sm-rules.yaml"),
        serde_yaml::to_string(groups).unwrap(),
    )
    .unwrap();
    for entry in std::fs::read_dir(workspace_root().join(RULE_TESTS)).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    dir
}

fn test_files(dir: &Path) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".yaml") && name != "k8sm-rules.yaml")
        .collect();
    files.sort();
    files
}

#[test]
fn promtool_checks_the_alerts_and_runs_their_unit_tests() {
    let groups = rule_groups();
    let alerts: BTreeSet<&str> = rules(&groups)
        .iter()
        .filter_map(|r| r["alert"].as_str())
        .collect();
    assert_eq!(alerts, ALERTS.into_iter().collect(), "the alerts");
    for rule in rules(&groups) {
        let description = rule["annotations"]["description"].as_str().unwrap_or("");
        assert!(
            description.contains("`kubectl k8sm "),
            "{} names the kubectl k8sm command to run: {description}",
            rule["alert"]
        );
    }

    let dir = rules_dir("good", &groups);
    let checked = promtool(&dir, &["check", "rules", "k8sm-rules.yaml"]);
    assert!(
        checked.success,
        "promtool check rules:\n{}{}",
        checked.stdout, checked.stderr
    );
    let files = test_files(&dir);
    assert!(!files.is_empty(), "unit tests in {RULE_TESTS}");
    let args: Vec<&str> = ["test", "rules"]
        .into_iter()
        .chain(files.iter().map(String::as_str))
        .collect();
    let tested = promtool(&dir, &args);
    assert!(
        tested.success,
        "promtool test rules:\n{}{}",
        tested.stdout, tested.stderr
    );
    println!("{}", tested.stdout.trim());

    // The unit tests bite: a stalled node read from the wrong series no longer alerts.
    let mut broken = groups.clone();
    for group in broken["groups"].as_array_mut().unwrap() {
        for rule in group["rules"].as_array_mut().unwrap() {
            if rule["alert"] == "K8smNodeStalled" {
                let expr = rule["expr"].as_str().unwrap().replace("Stalled", "Stall");
                rule["expr"] = Value::String(expr);
            }
        }
    }
    assert_ne!(broken, groups, "the negative control changes a rule");
    let broken_dir = rules_dir("broken", &broken);
    let tested = promtool(&broken_dir, &args);
    let said = format!("{}{}", tested.stdout, tested.stderr);
    assert!(
        !tested.success && said.contains("K8smNodeStalled"),
        "promtool test rules fails on a broken rule:\n{said}"
    );
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(broken_dir);
}
