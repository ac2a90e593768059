//! Changing a policy: `upgrade start --to ID` sets its target; `pause` and `resume` set and remove
//! the pause annotation (and `resume` clears a `spec.paused` that kubectl wrote).

use kube::api::Patch;
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use k8sm_api::keys::PAUSE_ANNOTATION;
use k8sm_api::{ExecutorId, ExecutorUpgradePolicy, PauseAnnotation, TARGET_EXECUTOR_ID_MAX_LENGTH};

use crate::cli::{PolicyArg, ResumeArgs, StartArgs};
use crate::error::{Error, KubeContext};
use crate::fetch;
use crate::output::{Terminal, print};

/// Checks a target executor ID before the apiserver does, with a message that says what is wrong.
/// IDs of external executors may take any printable form; one that starts like k8sm's own must be
/// one.
pub fn validate_target(id: &str) -> Result<(), Error> {
    let invalid = |why| {
        Err(Error::InvalidExecutorId {
            id: id.to_owned(),
            why,
        })
    };
    if id.is_empty() {
        return invalid("it is empty");
    }
    if id.len() > TARGET_EXECUTOR_ID_MAX_LENGTH as usize {
        return invalid("it is longer than 256 characters");
    }
    if !id.bytes().all(|b| (b'!'..=b'~').contains(&b)) {
        return invalid("only printable ASCII characters without spaces are allowed");
    }
    if id.starts_with(k8sm_api::EXECUTOR_ID_PREFIX) && id.parse::<ExecutorId>().is_err() {
        return invalid(
            "a sha256: ID has 64 lowercase hexadecimal digits; print one with kubectl k8sm executor-id",
        );
    }
    Ok(())
}

pub async fn start(client: &Client, args: &StartArgs, terminal: Terminal) -> Result<(), Error> {
    validate_target(&args.to)?;
    let policy = fetch::policy(client, args.policy.policy.as_deref()).await?;
    let name = policy.name_any();
    let palette = terminal.palette;
    if policy.spec.target_executor_id.as_deref() == Some(args.to.as_str()) {
        return print(&format!(
            "ExecutorUpgradePolicy {name} already targets {}: follow it with kubectl k8sm upgrade status --watch\n",
            args.to
        ));
    }
    patch_spec(
        client,
        &name,
        json!({ "targetExecutorId": args.to }),
        "setting the target of",
    )
    .await?;
    let mut text = format!(
        "ExecutorUpgradePolicy {} now targets {}: every selected node running another executor is upgraded.\n",
        palette.bold(&name),
        args.to
    );
    if policy.spec.paused || PauseAnnotation::of(policy.annotations()).pauses() {
        text.push_str(&palette.yellow(&format!(
            "The policy is paused: nodes are marked, but nothing moves until kubectl k8sm resume --policy {name}\n"
        )));
    }
    text.push_str("Follow it with: kubectl k8sm upgrade status --watch\n");
    print(&text)
}

/// `pause`: the pause annotation, never the spec, so that Helm or a GitOps tool that owns the spec
/// does not undo it on its next sync.
pub async fn pause(client: &Client, args: &PolicyArg, terminal: Terminal) -> Result<(), Error> {
    let policy = fetch::policy(client, args.policy.as_deref()).await?;
    let name = policy.name_any();
    if PauseAnnotation::of(policy.annotations()) == PauseAnnotation::Paused {
        return print(&format!(
            "ExecutorUpgradePolicy {name} is already paused.\n"
        ));
    }
    patch_annotation(client, &name, json!("true"), "pausing").await?;
    print(&terminal.palette.yellow(&format!(
        "ExecutorUpgradePolicy {name} paused (annotation {PAUSE_ANNOTATION}): no eviction, deletion or kamikaze \
         until kubectl k8sm resume --policy {name}\n"
    )))
}

/// `resume`: removes the pause annotation; sets `spec.paused` to false only where kubectl wrote it
/// (or with `--override-spec`), since another manager would set it back.
pub async fn resume(client: &Client, args: &ResumeArgs) -> Result<(), Error> {
    let policy = fetch::policy(client, args.policy.policy.as_deref()).await?;
    let name = policy.name_any();
    let annotation = PauseAnnotation::of(policy.annotations());
    let spec_managers = paused_by(&policy);
    if policy.spec.paused && !args.override_spec && !spec_managers.is_empty() {
        return Err(Error::SpecPausedByManager {
            policy: name,
            managers: spec_managers.join(", "),
        });
    }
    if !policy.spec.paused && !annotation.pauses() {
        return print(&format!("ExecutorUpgradePolicy {name} is not paused.\n"));
    }
    if annotation != PauseAnnotation::Absent {
        patch_annotation(client, &name, serde_json::Value::Null, "resuming").await?;
    }
    if policy.spec.paused {
        patch_spec(client, &name, json!({ "paused": false }), "resuming").await?;
    }
    print(&format!(
        "ExecutorUpgradePolicy {name} resumed: the upgrade goes on where it stopped.\n"
    ))
}

/// The field managers other than kubectl's that own `spec.paused` (Helm, Argo CD, Flux, …): a
/// change made here would be undone on their next sync.
fn paused_by(policy: &ExecutorUpgradePolicy) -> Vec<String> {
    let mut managers: Vec<String> = policy
        .managed_fields()
        .iter()
        .filter(|entry| {
            entry
                .fields_v1
                .as_ref()
                .is_some_and(|fields| fields.0.pointer("/f:spec/f:paused").is_some())
        })
        .filter_map(|entry| entry.manager.clone())
        .filter(|manager| !is_kubectl(manager))
        .collect();
    managers.sort();
    managers.dedup();
    managers
}

/// kubectl's own managers (`kubectl`, `kubectl-client-side-apply`, `kubectl-edit`,
/// `kubectl-patch`, …) and this plugin's: an operator at a terminal.
fn is_kubectl(manager: &str) -> bool {
    manager == "kubectl" || manager.starts_with("kubectl-")
}

async fn patch_annotation(
    client: &Client,
    name: &str,
    value: serde_json::Value,
    what: &str,
) -> Result<(), Error> {
    let api: Api<ExecutorUpgradePolicy> = Api::all(client.clone());
    let patch = json!({ "metadata": { "annotations": { PAUSE_ANNOTATION: value } } });
    api.patch(name, &crate::connect::patch_params(), &Patch::Merge(patch))
        .await
        .kube_context(format!("{what} ExecutorUpgradePolicy {name}"))?;
    Ok(())
}

async fn patch_spec(
    client: &Client,
    name: &str,
    spec: serde_json::Value,
    what: &str,
) -> Result<(), Error> {
    let api: Api<ExecutorUpgradePolicy> = Api::all(client.clone());
    api.patch(
        name,
        &crate::connect::patch_params(),
        &Patch::Merge(json!({ "spec": spec })),
    )
    .await
    .kube_context(format!("{what} ExecutorUpgradePolicy {name}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Who wrote `spec.paused` decides whether `resume` may clear it: only kubectl's managers.
    #[test]
    fn resume_leaves_a_spec_pause_that_helm_or_gitops_owns() {
        let policy = |entries: serde_json::Value| -> ExecutorUpgradePolicy {
            serde_json::from_value(json!({
                "apiVersion": "k8s.mesosphere.io/v1alpha1",
                "kind": "ExecutorUpgradePolicy",
                "metadata": { "name": "p", "managedFields": entries },
                "spec": { "paused": true },
            }))
            .unwrap()
        };
        let entry = |manager: &str, fields: serde_json::Value| json!({ "manager": manager, "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": fields });
        let paused = json!({ "f:spec": { "f:paused": {} } });
        let other = json!({ "f:spec": { "f:maxConcurrentNodes": {} } });
        let owned = policy(json!([
            entry("kubectl-client-side-apply", paused.clone()),
            entry("helm", paused.clone()),
            entry("argocd-controller", paused.clone()),
            entry("kustomize-controller", other.clone()),
        ]));
        assert_eq!(paused_by(&owned), ["argocd-controller", "helm"]);
        let by_hand = policy(json!([
            entry("kubectl-client-side-apply", paused.clone()),
            entry("kubectl-k8sm", paused),
            entry("helm", other),
        ]));
        assert!(paused_by(&by_hand).is_empty());
        assert!(paused_by(&policy(json!([]))).is_empty());
    }

    #[test]
    fn targets_are_checked_with_a_reason() {
        let id = format!("sha256:{}", "0a".repeat(32));
        assert!(validate_target(&id).is_ok());
        assert!(
            validate_target("v1.36.3-mesos").is_ok(),
            "external IDs pass"
        );
        let error = |id: &str| validate_target(id).unwrap_err().to_string();
        assert_eq!(error(""), "invalid executor ID \"\": it is empty");
        assert!(error("a b").contains("without spaces"));
        assert!(error("sha256:abc").contains("64 lowercase hexadecimal digits"));
        assert!(
            error(&format!("sha256:{}", "0A".repeat(32))).contains("64 lowercase"),
            "upper case is a typo"
        );
        assert!(error(&"x".repeat(257)).contains("longer than 256"));
    }
}
