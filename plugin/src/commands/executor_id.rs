//! `executor-id`: the executor ID of DESIGN.md §6, from a version, a binary (or its hash), flags and static pods.

use std::path::Path;

use serde::Serialize;

use k8sm_api::{ExecutorIdentity, binary_sha256_of};

use crate::cli::{ExecutorIdArgs, Output};
use crate::error::Error;
use crate::output::{encode, print};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    executor_id: String,
    identity: ExecutorIdentity,
}

pub fn run(args: &ExecutorIdArgs) -> Result<(), Error> {
    let binary_sha256 = match (&args.binary, &args.binary_sha256) {
        (Some(path), _) => binary_sha256_of(&read(path)?),
        (None, Some(hex)) => hex.clone(),
        (None, None) => unreachable!("clap requires --binary or --binary-sha256"),
    };
    let identity = ExecutorIdentity {
        version: args.executor_version.clone(),
        binary_sha256,
        flags: args
            .flags
            .iter()
            .map(|f| parse_flag(f))
            .collect::<Result<_, _>>()?,
        static_pods: match &args.static_pods {
            Some(dir) => static_pods(dir)?,
            None => Vec::new(),
        },
    };
    let id = identity.executor_id()?.to_string();
    let report = Report {
        executor_id: id.clone(),
        identity,
    };
    let text = match args.output {
        Output::Table | Output::Wide => format!("{id}\n"),
        format => encode(&report, format)?.unwrap_or_default(),
    };
    print(&text)
}

/// `NAME=VALUE` (split at the first `=`); a bare `NAME` is a flag without a value.
pub fn parse_flag(flag: &str) -> Result<(String, String), Error> {
    let (name, value) = flag.split_once('=').unwrap_or((flag, ""));
    if name.is_empty() {
        return Err(Error::InvalidFlag(flag.to_owned()));
    }
    Ok((name.to_owned(), value.to_owned()))
}

/// Every regular, non-hidden file of `dir`, as (file name, text), the way the kubelet reads a static pod directory.
fn static_pods(dir: &Path) -> Result<Vec<(String, String)>, Error> {
    let entries = std::fs::read_dir(dir).map_err(|source| Error::Read {
        path: dir.to_owned(),
        source,
    })?;
    let mut pods = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| Error::Read {
            path: dir.to_owned(),
            source,
        })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if name.starts_with('.') || !path.is_file() {
            continue;
        }
        let text = String::from_utf8(read(&path)?).map_err(|e| Error::Read {
            path: path.clone(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        })?;
        pods.push((name, text));
    }
    Ok(pods)
}

fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_split_at_the_first_equals_sign() {
        assert_eq!(
            parse_flag("--cluster=a=b").unwrap(),
            ("--cluster".to_owned(), "a=b".to_owned())
        );
        assert_eq!(
            parse_flag("--verbose").unwrap(),
            ("--verbose".to_owned(), String::new())
        );
        assert!(parse_flag("=x").is_err());
    }

    #[test]
    fn static_pods_skip_hidden_files_and_directories() {
        let dir = std::env::temp_dir().join(format!("k8sm-static-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("etcd.yaml"), "kind: Pod\n").unwrap();
        std::fs::write(dir.join(".swp"), "junk").unwrap();
        let pods = static_pods(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(pods, [("etcd.yaml".to_owned(), "kind: Pod\n".to_owned())]);
    }
}
