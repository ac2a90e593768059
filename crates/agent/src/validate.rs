//! Validation of the names and IDs the agent is given, on the command line and over HTTP.

use k8sm_api::TARGET_EXECUTOR_ID_MAX_LENGTH;

/// Whether `name` is a valid Node name: a DNS-1123 subdomain (lowercase alphanumerics, `-` and `.`,
/// at most 253 characters, each dot-separated part starting and ending with an alphanumeric).
pub fn is_node_name(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    name.len() <= 253
        && name.split('.').all(|part| {
            part.starts_with(alnum)
                && part.ends_with(alnum)
                && part.chars().all(|c| alnum(c) || c == '-')
        })
}

/// `--node`: a valid Node name.
pub fn node_name(value: &str) -> Result<String, String> {
    if is_node_name(value) {
        Ok(value.to_owned())
    } else {
        Err("not a Node name (lowercase letters, digits, '-' and '.')".to_owned())
    }
}

/// An executor ID as the policy's `targetExecutorId` accepts it (printable ASCII without spaces, at
/// most [`TARGET_EXECUTOR_ID_MAX_LENGTH`] characters): an agent that publishes an ID no policy can
/// target would never be recognised as upgraded.
pub fn executor_id(value: &str) -> Result<String, String> {
    if value.is_empty() || value.len() > TARGET_EXECUTOR_ID_MAX_LENGTH as usize {
        return Err(format!(
            "must have 1 to {TARGET_EXECUTOR_ID_MAX_LENGTH} characters"
        ));
    }
    if !value.chars().all(|c| c.is_ascii_graphic()) {
        return Err("must be printable ASCII without spaces".to_owned());
    }
    Ok(value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_are_dns_subdomains() {
        for good in ["node-0000", "n", "ip-10-0-0-1.ec2.internal", "0"] {
            assert!(is_node_name(good), "{good}");
            assert_eq!(node_name(good).as_deref(), Ok(good));
        }
        let too_long = "a".repeat(254);
        for bad in [
            "",
            "{nodeName}",
            "Node-1",
            "-node",
            "node-",
            "a..b",
            ".a",
            "a/b",
            "a b",
            &too_long,
        ] {
            assert!(!is_node_name(bad), "{bad:?}");
            assert!(node_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn executor_ids_are_what_a_policy_can_target() {
        let longest = "x".repeat(TARGET_EXECUTOR_ID_MAX_LENGTH as usize);
        for good in ["sha256:0123abcd", "exec-old", longest.as_str()] {
            assert_eq!(executor_id(good).as_deref(), Ok(good));
        }
        let too_long = "x".repeat(TARGET_EXECUTOR_ID_MAX_LENGTH as usize + 1);
        for bad in ["", "a b", "tab\there", "é", too_long.as_str()] {
            assert!(executor_id(bad).is_err(), "{bad:?}");
        }
    }
}
