//! The cluster's binaries, built once from the Go modules under `tests/go/` and cached by the pinned versions.
//!
//! Nothing is downloaded but Go modules: Kubernetes, etcd and KWOK are compiled from the module proxy. The cache key
//! is a hash of the three modules' `go.mod` and `go.sum` and of the build recipe, so changing a pin rebuilds and
//! nothing else does. Concurrent callers (parallel tests) wait on a file lock and share one build.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use sha2::{Digest, Sha256};

use crate::Error;

/// Bump when the way binaries are built changes, so existing caches are not reused.
const RECIPE_VERSION: &str = "2";

/// KWOK's own stage definitions that the harness uses, taken from the pinned KWOK module.
const KWOK_STAGES: &[&str] = &[
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
];

const K8S_COMMANDS: &[&str] = &[
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
];

/// Paths of the built binaries.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub dir: PathBuf,
    pub etcd: PathBuf,
    pub kube_apiserver: PathBuf,
    pub kube_controller_manager: PathBuf,
    pub kube_scheduler: PathBuf,
    pub kubectl: PathBuf,
    pub kwok: PathBuf,
    /// KWOK's node and pod Stage documents, one file each.
    pub kwok_stages: PathBuf,
    /// The pinned Kubernetes version, e.g. `v1.36.3`.
    pub kubernetes_version: String,
}

impl Binaries {
    /// Returns the cached binaries, building them first if this set of pins has never been built here.
    pub fn ensure() -> Result<Self, Error> {
        let modules = go_modules_dir();
        let kubernetes_version = pinned_kubernetes_version(&modules.join("k8s/go.mod"))?;
        let key = cache_key(&modules)?;
        let root = cache_root()?.join("cluster-bin");
        let dir = root.join(&key);
        let binaries = Self::at(&dir, kubernetes_version);
        if dir.join("complete").exists() {
            return Ok(binaries);
        }

        std::fs::create_dir_all(&root)
            .map_err(|e| io(format!("creating {}", root.display()), e))?;
        let lock_path = root.join(".lock");
        let lock = File::create(&lock_path)
            .map_err(|e| io(format!("creating {}", lock_path.display()), e))?;
        lock.lock()
            .map_err(|e| io(format!("locking {}", lock_path.display()), e))?;
        if dir.join("complete").exists() {
            return Ok(binaries);
        }
        build(&modules, &dir, &binaries.kubernetes_version)?;
        Ok(binaries)
    }

    fn at(dir: &Path, kubernetes_version: String) -> Self {
        Self {
            dir: dir.to_owned(),
            etcd: dir.join("etcd"),
            kube_apiserver: dir.join("kube-apiserver"),
            kube_controller_manager: dir.join("kube-controller-manager"),
            kube_scheduler: dir.join("kube-scheduler"),
            kubectl: dir.join("kubectl"),
            kwok: dir.join("kwok"),
            kwok_stages: dir.join("kwok-stages"),
            kubernetes_version,
        }
    }
}

/// `tests/go` of this workspace, or `$K8SM_GO_MODULES` when set.
pub fn go_modules_dir() -> PathBuf {
    match std::env::var_os("K8SM_GO_MODULES") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/go"),
    }
}

/// `$K8SM_CACHE_DIR`, else `$XDG_CACHE_HOME/k8sm`, else `~/.cache/k8sm`.
pub fn cache_root() -> Result<PathBuf, Error> {
    if let Some(dir) = std::env::var_os("K8SM_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return Ok(PathBuf::from(dir).join("k8sm"));
    }
    match std::env::var_os("HOME") {
        Some(home) => Ok(PathBuf::from(home).join(".cache/k8sm")),
        None => Err(Error::Setup(
            "cannot place the binary cache: set K8SM_CACHE_DIR, XDG_CACHE_HOME or HOME".into(),
        )),
    }
}

fn pinned_kubernetes_version(go_mod: &Path) -> Result<String, Error> {
    let text = read(go_mod)?;
    // Either `require k8s.io/kubernetes vX` or, inside a require block, `k8s.io/kubernetes vX`.
    text.lines()
        .map(|line| line.trim().trim_start_matches("require").trim())
        .filter(|line| !line.contains("=>"))
        .filter_map(|line| line.strip_prefix("k8s.io/kubernetes "))
        .map(|version| {
            version
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .next()
        .ok_or_else(|| {
            Error::Setup(format!(
                "{} has no `require k8s.io/kubernetes vX.Y.Z` line",
                go_mod.display()
            ))
        })
}

fn cache_key(modules: &Path) -> Result<String, Error> {
    let mut hasher = Sha256::new();
    hasher.update(RECIPE_VERSION.as_bytes());
    for module in ["k8s", "etcd", "kwok"] {
        for file in ["go.mod", "go.sum"] {
            let path = modules.join(module).join(file);
            hasher.update(
                path.strip_prefix(modules)
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .as_bytes(),
            );
            hasher.update(read(&path)?.as_bytes());
        }
    }
    Ok(hex::encode(hasher.finalize())[..16].to_owned())
}

fn build(modules: &Path, dir: &Path, kubernetes_version: &str) -> Result<(), Error> {
    check_go()?;
    let started = Instant::now();
    let staging = dir.with_extension(format!("partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(staging.join("kwok-stages"))
        .map_err(|e| io(format!("creating {}", staging.display()), e))?;
    eprintln!(
        "k8sm-testcluster: building Kubernetes {kubernetes_version}, etcd and KWOK from the Go module proxy into {} \
         (once per set of pins; takes several minutes on a cold Go cache)",
        dir.display()
    );

    let ldflags = version_ldflags(kubernetes_version)?;
    let mut k8s_args = vec!["-ldflags".to_owned(), ldflags];
    k8s_args.extend(
        K8S_COMMANDS
            .iter()
            .map(|c| format!("k8s.io/kubernetes/cmd/{c}")),
    );
    go_build(
        &modules.join("k8s"),
        &format!("{}/", staging.display()),
        &k8s_args,
    )?;
    // etcd's main package is its module root, which `go build` would name `server`.
    let etcd_out = staging.join("etcd").display().to_string();
    go_build(
        &modules.join("etcd"),
        &etcd_out,
        &["go.etcd.io/etcd/server/v3".to_owned()],
    )?;
    let kwok_out = staging.join("kwok").display().to_string();
    go_build(
        &modules.join("kwok"),
        &kwok_out,
        &["sigs.k8s.io/kwok/cmd/kwok".to_owned()],
    )?;
    copy_kwok_stages(&modules.join("kwok"), &staging.join("kwok-stages"))?;

    std::fs::write(
        staging.join("complete"),
        format!("built in {:.0?}\n", started.elapsed()),
    )
    .map_err(|e| io("marking the build complete".into(), e))?;
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&staging, dir)
        .map_err(|e| io(format!("moving the build into {}", dir.display()), e))?;
    eprintln!(
        "k8sm-testcluster: cluster binaries built in {:.0?}",
        started.elapsed()
    );
    Ok(())
}

fn check_go() -> Result<(), Error> {
    match Command::new("go").arg("version").output() {
        Ok(out) if out.status.success() => Ok(()),
        _ => Err(Error::Setup(
            "Go is needed once to build the test cluster's binaries (kube-apiserver, etcd, KWOK) from the Go module \
             proxy, but `go version` does not run. Install Go 1.26 or newer (Debian: `apt-get install golang-go`, or \
             the official tarball) and put `go` on PATH, then run the command again."
                .into(),
        )),
    }
}

/// Stamps the real version into the components, which otherwise report `v0.0.0-master` (KWOK and kubectl read it).
fn version_ldflags(version: &str) -> Result<String, Error> {
    let minor = version
        .trim_start_matches('v')
        .split('.')
        .nth(1)
        .ok_or_else(|| Error::Setup(format!("cannot read the minor version of {version}")))?;
    let pkg = "k8s.io/component-base/version";
    let client = "k8s.io/client-go/pkg/version";
    Ok([
        "-s -w".to_owned(),
        format!("-X {pkg}.gitVersion={version} -X {client}.gitVersion={version}"),
        format!("-X {pkg}.gitMajor=1 -X {pkg}.gitMinor={minor} -X {client}.gitMajor=1 -X {client}.gitMinor={minor}"),
        format!("-X {pkg}.gitTreeState=clean -X {client}.gitTreeState=clean"),
    ]
    .join(" "))
}

/// Runs `go build -o out ARGS` in `module`; `out` is a file, or a directory when it ends in `/`.
fn go_build(module: &Path, out: &str, args: &[String]) -> Result<(), Error> {
    let mut cmd = Command::new("go");
    cmd.current_dir(module)
        .env("CGO_ENABLED", "0")
        .arg("build")
        .arg("-trimpath")
        .arg("-o")
        .arg(out)
        .args(args);
    let output = cmd
        .output()
        .map_err(|e| io(format!("running go build in {}", module.display()), e))?;
    if !output.status.success() {
        return Err(Error::Setup(format!(
            "go build in {} failed:\n{}",
            module.display(),
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    Ok(())
}

fn copy_kwok_stages(kwok_module: &Path, out: &Path) -> Result<(), Error> {
    let output = Command::new("go")
        .current_dir(kwok_module)
        .args(["list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok"])
        .output()
        .map_err(|e| io("locating the KWOK module".into(), e))?;
    if !output.status.success() {
        return Err(Error::Setup(format!(
            "go list -m sigs.k8s.io/kwok failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    let source = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    for stage in KWOK_STAGES {
        let from = source.join(stage);
        let name = Path::new(stage).file_name().unwrap_or_default();
        std::fs::copy(&from, out.join(name))
            .map_err(|e| io(format!("copying {}", from.display()), e))?;
    }
    Ok(())
}

fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|e| io(format!("reading {}", path.display()), e))
}

fn io(context: String, source: std::io::Error) -> Error {
    Error::Io { context, source }
}
