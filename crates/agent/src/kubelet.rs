//! `run --kubelet`: the node's executor ID from the kubelet that actually runs (docs/design.md §6),
//! read through `/proc`: the binary the process executes (`/proc/<pid>/exe`: hashed, and asked for
//! its `--version`), its command line (`/proc/<pid>/cmdline`), and its configuration file and
//! static pod manifests as the process sees them (`/proc/<pid>/root`, relative paths from
//! `/proc/<pid>/cwd`), so that it works from the host and from a container that shares the host's
//! PID namespace alike. What the ID is made of is `k8sm_api::kubelet`'s.

use std::path::{Path, PathBuf};
use std::process::Command;

use k8sm_api::kubelet::{KubeletInputs, is_static_pod_file, paths, version_line};
use k8sm_api::{ExecutorId, binary_sha256_of};

/// Why the kubelet's executor ID could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    #[error(
        "no kubelet process found in {0} (run the agent with the host's PID namespace, or pass --kubelet-pid)"
    )]
    NotFound(PathBuf),
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("running `{binary} --version`: {why}")]
    Version { binary: PathBuf, why: String },
    #[error("the kubelet's executor ID: {0}")]
    Id(#[from] k8sm_api::kubelet::KubeletError),
    #[error("the kubelet's executor ID: {0}")]
    ExecutorId(#[from] k8sm_api::ExecutorIdError),
}

/// The PID of the running kubelet: `pid` when given, else the process whose name is `kubelet` (the
/// oldest, if several: the others would be its short-lived children).
pub fn find(proc: &Path, pid: Option<u32>) -> Result<u32, KubeletError> {
    if let Some(pid) = pid {
        return Ok(pid);
    }
    let entries = std::fs::read_dir(proc).map_err(|source| KubeletError::Read {
        path: proc.to_owned(),
        source,
    })?;
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(proc.join(pid.to_string()).join("comm"))
                .is_ok_and(|comm| comm.trim() == "kubelet")
        })
        .min()
        .ok_or_else(|| KubeletError::NotFound(proc.to_owned()))
}

/// What the kubelet `pid` runs, as `/proc` shows it.
pub fn inputs(proc: &Path, pid: u32) -> Result<KubeletInputs, KubeletError> {
    let dir = proc.join(pid.to_string());
    let cmdline = read(&dir.join("cmdline"))?;
    let args: Vec<String> = String::from_utf8_lossy(&cmdline)
        .split('\0')
        .skip(1)
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
        .collect();
    let exe = dir.join("exe");
    let binary_sha256 = binary_sha256_of(&read(&exe)?);
    let version = version(&exe)?;
    // Paths as the process sees them: under its root, relative ones from its working directory.
    let seen = |path: &str| {
        if let Some(absolute) = path.strip_prefix('/') {
            dir.join("root").join(absolute)
        } else {
            dir.join("cwd").join(path)
        }
    };
    let (config_path, _) = paths(&args, None);
    let config = match &config_path {
        Some(path) => Some(String::from_utf8_lossy(&read(&seen(path))?).into_owned()),
        None => None,
    };
    let (_, static_dir) = paths(&args, config.as_deref());
    let static_pods = match static_dir {
        Some(dir) => static_pods(&seen(&dir))?,
        None => Vec::new(),
    };
    Ok(KubeletInputs {
        version,
        binary_sha256,
        args,
        config,
        static_pods,
    })
}

/// The executor ID of the running kubelet.
pub fn executor_id(proc: &Path, pid: Option<u32>) -> Result<ExecutorId, KubeletError> {
    let pid = find(proc, pid)?;
    Ok(inputs(proc, pid)?.identity()?.executor_id()?)
}

/// The first line of `<binary> --version`, such as "Kubernetes v1.36.3".
pub fn version(binary: &Path) -> Result<String, KubeletError> {
    let failed = |why: String| KubeletError::Version {
        binary: binary.to_owned(),
        why,
    };
    let output = Command::new(binary)
        .arg("--version")
        .output()
        .map_err(|e| failed(e.to_string()))?;
    if !output.status.success() {
        return Err(failed(format!(
            "{}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(version_line(&String::from_utf8_lossy(&output.stdout)))
}

/// The manifests of a static pod directory as the kubelet reads them: every regular file but hidden
/// ones; a missing directory has none.
pub fn static_pods(dir: &Path) -> Result<Vec<(String, String)>, KubeletError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(KubeletError::Read {
                path: dir.to_owned(),
                source,
            });
        }
    };
    let mut pods = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if !is_static_pod_file(&name, path.is_file()) {
            continue;
        }
        pods.push((name, String::from_utf8_lossy(&read(&path)?).into_owned()));
    }
    Ok(pods)
}

fn read(path: &Path) -> Result<Vec<u8>, KubeletError> {
    std::fs::read(path).map_err(|source| KubeletError::Read {
        path: path.to_owned(),
        source,
    })
}
