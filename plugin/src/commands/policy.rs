//! Changing a policy: `upgrade start --to ID` sets its target, `pause` and `resume` flip
//! `spec.paused`.

use kube::api::Patch;
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use k8sm_api::{ExecutorId, ExecutorUpgradePolicy, TARGET_EXECUTOR_ID_MAX_LENGTH};

use crate::cli::{PolicyArg, StartArgs};
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
    if policy.spec.paused {
        text.push_str(&palette.yellow(&format!(
            "The policy is paused: nodes are marked, but nothing moves until kubectl k8sm resume --policy {name}\n"
        )));
    }
    text.push_str("Follow it with: kubectl k8sm upgrade status --watch\n");
    print(&text)
}

pub async fn set_paused(
    client: &Client,
    args: &PolicyArg,
    paused: bool,
    terminal: Terminal,
) -> Result<(), Error> {
    let policy = fetch::policy(client, args.policy.as_deref()).await?;
    let name = policy.name_any();
    let text = match (policy.spec.paused, paused) {
        (true, true) => format!("ExecutorUpgradePolicy {name} is already paused.\n"),
        (false, false) => format!("ExecutorUpgradePolicy {name} is not paused.\n"),
        (_, true) => {
            patch_spec(client, &name, json!({ "paused": true }), "pausing").await?;
            terminal.palette.yellow(&format!(
                "ExecutorUpgradePolicy {name} paused: no eviction, deletion or kamikaze until kubectl k8sm resume --policy {name}\n"
            ))
        }
        (_, false) => {
            patch_spec(client, &name, json!({ "paused": false }), "resuming").await?;
            format!("ExecutorUpgradePolicy {name} resumed: the upgrade goes on where it stopped.\n")
        }
    };
    print(&text)
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
