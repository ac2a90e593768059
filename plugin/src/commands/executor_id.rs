//! `executor-id`: the executor ID of docs/design.md §6, from a version, a binary (or its hash),
//! flags and static pods.

use std::path::Path;

use serde::Serialize;

use k8sm_api::kubelet::{self, KubeletInputs};
use k8sm_api::{ExecutorIdentity, binary_sha256_of};

use crate::cli::{ExecutorIdArgs, IdOutput, Output};
use crate::error::Error;
use crate::output::{encode, print};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    executor_id: String,
    identity: ExecutorIdentity,
}

pub fn run(args: &ExecutorIdArgs) -> Result<(), Error> {
    let identity = match &args.kubelet_binary {
        Some(binary) => kubelet_identity(binary, args)?,
        None => identity(args)?,
    };
    let id = identity.executor_id()?.to_string();
    let report = Report {
        executor_id: id.clone(),
        identity,
    };
    let text = match args.output {
        IdOutput::Table | IdOutput::Wide => format!("{id}\n"),
        IdOutput::Json => encode(&report, &Output::Json)?,
        IdOutput::Yaml => encode(&report, &Output::Yaml)?,
    };
    print(&text)
}

/// The identity of a kubelet build, its command line, configuration and static pods
/// (`k8sm_api::kubelet`).
fn kubelet_identity(binary: &Path, args: &ExecutorIdArgs) -> Result<ExecutorIdentity, Error> {
    let version = match &args.executor_version {
        Some(version) => version.clone(),
        None => kubelet_version(binary)?,
    };
    let cmdline = match &args.kubelet_cmdline {
        Some(path) => command_line(&String::from_utf8_lossy(&read(path)?)),
        None => Vec::new(),
    };
    let (config_path, _) = kubelet::paths(&cmdline, None);
    let config = match (&args.kubelet_config, config_path) {
        (Some(path), _) => Some(String::from_utf8_lossy(&read(path)?).into_owned()),
        (None, Some(named)) => {
            return Err(Error::InvalidFlag(format!(
                "--kubelet-cmdline names the configuration file {named}: pass its content with --kubelet-config FILE"
            )));
        }
        (None, None) => None,
    };
    let inputs = KubeletInputs {
        version,
        binary_sha256: binary_sha256_of(&read(binary)?),
        args: cmdline,
        config,
        static_pods: match &args.static_pods {
            Some(dir) => static_pods(dir)?,
            None => Vec::new(),
        },
    };
    inputs
        .identity()
        .map_err(|e| Error::InvalidFlag(format!("--kubelet-config: {e}")))
}

/// A command line as `/proc/<pid>/cmdline` holds it (NUL-separated) or as text; without the program
/// name.
fn command_line(text: &str) -> Vec<String> {
    let words: Vec<String> = if text.contains('\0') {
        text.split('\0')
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect()
    } else {
        text.split_whitespace().map(str::to_owned).collect()
    };
    match words.first() {
        Some(program) if !program.starts_with('-') => words[1..].to_vec(),
        _ => words,
    }
}

/// The first line of `<binary> --version`.
fn kubelet_version(binary: &Path) -> Result<String, Error> {
    let output = std::process::Command::new(binary)
        .arg("--version")
        .output()
        .map_err(|source| Error::Read {
            path: binary.to_owned(),
            source,
        })?;
    if !output.status.success() {
        return Err(Error::InvalidFlag(format!(
            "{} --version failed ({}); pass the version with --version",
            binary.display(),
            output.status
        )));
    }
    Ok(kubelet::version_line(&String::from_utf8_lossy(
        &output.stdout,
    )))
}

/// The identity of any executor, from its version, binary (or hash), flags and static pods.
fn identity(args: &ExecutorIdArgs) -> Result<ExecutorIdentity, Error> {
    let binary_sha256 = match (&args.binary, &args.binary_sha256) {
        (Some(path), _) => binary_sha256_of(&read(path)?),
        (None, Some(hex)) => hex.clone(),
        (None, None) => unreachable!("clap requires --binary or --binary-sha256"),
    };
    Ok(ExecutorIdentity {
        version: args.executor_version.clone().unwrap_or_default(),
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
    })
}

/// `NAME=VALUE` (split at the first `=`); a bare `NAME` is a flag without a value.
pub fn parse_flag(flag: &str) -> Result<(String, String), Error> {
    let (name, value) = flag.split_once('=').unwrap_or((flag, ""));
    if name.is_empty() {
        return Err(Error::InvalidFlag(flag.to_owned()));
    }
    Ok((name.to_owned(), value.to_owned()))
}

/// Every regular, non-hidden file of `dir`, as (file name, text), the way the kubelet reads a
/// static pod directory.
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
        if !kubelet::is_static_pod_file(&name, path.is_file()) {
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
