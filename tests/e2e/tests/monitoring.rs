//! The alerts and the dashboard of deploy/components/monitoring (and the chart's copies):
//!
//! - promtool (built from the module `tests/go/prometheus` pins) checks the PrometheusRule's rule
//!   groups and runs their unit tests, which fail on a broken rule (a negative control);
//! - every metric the dashboard's queries and the alerts' expressions name is exported by a
//!   running controller, checked against its scrape; the policy gauges carry the policy's name.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8sm_e2e::http::{free_port, get};
use k8sm_e2e::scenario::Scenario;
use k8sm_e2e::{KubectlResult, promql, workspace_root};
use serde_json::Value;

const RULE: &str = "deploy/components/monitoring/prometheusrule.yaml";
const RULE_TESTS: &str = "deploy/components/monitoring/tests";
const DASHBOARD: &str = "deploy/components/monitoring/k8sm-dashboard.json";
const CHART_RULES: &str = "deploy/helm/k8sm/monitoring/k8sm-rules.yaml";
const CHART_DASHBOARD: &str = "deploy/helm/k8sm/monitoring/k8sm-dashboard.json";

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

fn json_file(path: &str) -> Value {
    let text = std::fs::read_to_string(workspace_root().join(path)).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
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
    assert_eq!(
        groups,
        yaml_file(CHART_RULES),
        "{CHART_RULES} holds the spec of {RULE}"
    );
    assert_eq!(
        json_file(DASHBOARD),
        json_file(CHART_DASHBOARD),
        "the chart's dashboard is {DASHBOARD}"
    );
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

/// Every PromQL expression of the dashboard: its panels' targets and its variables' queries.
fn dashboard_expressions(dashboard: &Value) -> Vec<String> {
    let mut exprs = Vec::new();
    let mut panels: Vec<&Value> = dashboard["panels"].as_array().unwrap().iter().collect();
    while let Some(panel) = panels.pop() {
        panels.extend(panel["panels"].as_array().into_iter().flatten());
        for target in panel["targets"].as_array().into_iter().flatten() {
            exprs.push(target["expr"].as_str().expect("a target's expr").to_owned());
        }
    }
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        if variable["type"] == "query" {
            let query = &variable["query"];
            let query = query["query"].as_str().or(query.as_str()).unwrap();
            exprs.push(query.to_owned());
        }
    }
    exprs
}

/// The names a scrape exports: its samples', and those its metadata promise (a counter's
/// `_total`, a histogram's `_bucket`, `_sum`, `_count`), which have no sample until counted.
fn exported_names(scrape: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in scrape.lines() {
        if let Some(typed) = line.strip_prefix("# TYPE ") {
            let mut words = typed.split_whitespace();
            let (Some(name), Some(kind)) = (words.next(), words.next()) else {
                continue;
            };
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                "info" => &["_info"],
                _ => &[""],
            };
            names.extend(suffixes.iter().map(|s| format!("{name}{s}")));
        } else if !line.starts_with('#') && !line.is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            names.insert(line[..end].to_owned());
        }
    }
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_and_the_alerts_name_only_metrics_the_controller_exports() {
    // What the dashboard and the alerts read.
    let mut used: BTreeSet<(String, String)> = BTreeSet::new();
    let mut expressions: Vec<(String, String)> = dashboard_expressions(&json_file(DASHBOARD))
        .into_iter()
        .map(|e| (DASHBOARD.to_owned(), e))
        .collect();
    for rule in rules(&rule_groups()) {
        let name = rule["alert"].as_str().unwrap();
        expressions.push((
            format!("{RULE} {name}"),
            rule["expr"].as_str().unwrap().to_owned(),
        ));
    }
    for (origin, expr) in &expressions {
        let names = promql::metric_names(expr).unwrap_or_else(|e| panic!("{origin}: {e}: {expr}"));
        assert!(!names.is_empty(), "{origin} reads no metric: {expr}");
        used.extend(names.into_iter().map(|n| (n, origin.clone())));
    }

    // What a running controller exports: a paused policy, then its upgrade under way (an ETA
    // exists once a node upgraded and others remain; each restart takes 5 s).
    let mut scenario = Scenario::start(3, "monitoring", "5s").await;
    let metrics_addr = format!("127.0.0.1:{}", free_port());
    scenario.start_controller(&[&format!("--metrics-addr={metrics_addr}")]);
    let mut spec = scenario.policy_spec(1);
    spec.paused = true;
    scenario.create_policy("fleet", spec).await;
    let scrape_when = |what: &'static str, series: &'static str| {
        let metrics_addr = metrics_addr.clone();
        let scenario = &scenario;
        async move {
            scenario
                .wait_until(what, Duration::from_secs(120), || async {
                    let (code, body) = get(&metrics_addr, "/metrics").ok()?;
                    (code == 200 && body.contains(series)).then_some(body)
                })
                .await
        }
    };
    let paused = scrape_when(
        "the controller reports on paused policy fleet",
        "k8sm_policy_degraded{policy=\"fleet\"}",
    )
    .await;
    for line in [
        "k8sm_nodes{policy=\"fleet\",phase=\"Incompatible\"} 3",
        "k8sm_policy_paused{policy=\"fleet\"} 1",
        "k8sm_policy_window_open{policy=\"fleet\"} 1",
        "k8sm_policy_degraded{policy=\"fleet\"} 0",
        "k8sm_policy_condition_nodes{policy=\"fleet\",reason=\"Stalled\"} 0",
        "k8sm_evictions_total{policy=\"fleet\",reason=\"Evicted\"} 0",
        "k8sm_is_leader 1",
    ] {
        assert!(
            paused.lines().any(|l| l == line),
            "/metrics has {line}:\n{paused}"
        );
    }
    assert!(
        paused
            .lines()
            .any(|l| l.starts_with("k8sm_build_info{version=\"")
                && l.contains(",commit=\"")
                && l.ends_with("} 1")),
        "/metrics has k8sm_build_info:\n{paused}"
    );
    assert!(
        !paused.contains("k8sm_policy_eta_seconds{"),
        "no ETA while paused:\n{paused}"
    );
    scenario
        .patch_policy("fleet", serde_json::json!({ "paused": false }))
        .await;
    let upgrading = scrape_when(
        "the controller reports an ETA for policy fleet",
        "k8sm_policy_eta_seconds{policy=\"fleet\"}",
    )
    .await;
    let scrape = format!("{paused}\n{upgrading}");

    let exported = exported_names(&scrape);
    let missing: Vec<String> = used
        .iter()
        .filter(|(name, _)| !exported.contains(name))
        .map(|(name, origin)| format!("{name} (in {origin})"))
        .collect();
    assert!(
        missing.is_empty(),
        "metrics the controller does not export: {missing:#?}\nexported: {exported:#?}"
    );
    println!(
        "{} metric names of {} expressions, all exported",
        used.iter().map(|(n, _)| n).collect::<BTreeSet<_>>().len(),
        expressions.len()
    );
}
