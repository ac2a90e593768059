//! The cluster's binaries, compiled once from the Go module proxy (nothing else is downloaded) from
//! the modules under `tests/go/`, and cached by their pins and build recipe. Two caches, so that
//! KWOK (quick to build, and patched: `kwok_patch`) can change without rebuilding Kubernetes (many
//! minutes): `kubernetes-<key>` over the `go.mod` and `go.sum` of `tests/go/k8s` and
//! `tests/go/etcd`, `kwok-<key>` over those of `tests/go/kwok` and the patch. Concurrent callers
//! (parallel tests) wait on a file lock and share one build; Helm is built the same way (`helm`).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use sha2::{Digest, Sha256};

use crate::error::{io, read};
use crate::{Error, kwok_patch};

/// Bump when the way Kubernetes and etcd are built changes, so existing caches are not reused.
const KUBERNETES_RECIPE: &str = "2";
/// Bump when the way the kubelet is built changes.
const KUBELET_RECIPE: &str = "1";
/// Bump when the way KWOK is built changes (its patch is hashed on its own).
const KWOK_RECIPE: &str = "1";

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
    /// Holds etcd and the Kubernetes commands.
    pub kubernetes_dir: PathBuf,
    /// Holds KWOK and its stages.
    pub kwok_dir: PathBuf,
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
    /// Returns the cached binaries, building first whichever set of pins has never been built here.
    pub fn ensure() -> Result<Self, Error> {
        let modules = go_modules_dir();
        let kubernetes_version = pinned_kubernetes_version(&modules.join("k8s/go.mod"))?;
        let root = cache_root()?.join("cluster-bin");
        let kubernetes_key = cache_key(&modules, &["k8s", "etcd"], &[KUBERNETES_RECIPE])?;
        let kwok_key = cache_key(
            &modules,
            &["kwok"],
            &[&[KWOK_RECIPE], kwok_patch::FINGERPRINT].concat(),
        )?;
        let binaries = Self::at(
            &root.join(format!("kubernetes-{kubernetes_key}")),
            &root.join(format!("kwok-{kwok_key}")),
            kubernetes_version,
        );
        if binaries.complete() {
            return Ok(binaries);
        }

        let _lock = lock_cache(&root)?;
        check_go()?;
        if !is_complete(&binaries.kubernetes_dir) {
            let version = &binaries.kubernetes_version;
            eprintln!(
                "k8sm-testcluster: building Kubernetes {version} and etcd from the Go module proxy into {} (once per \
                 set of pins; takes 15-25 minutes on two cores with a cold Go cache)",
                binaries.kubernetes_dir.display()
            );
            build_into(&binaries.kubernetes_dir, |out| {
                build_kubernetes(&modules, out, version)
            })?;
        }
        if !is_complete(&binaries.kwok_dir) {
            eprintln!(
                "k8sm-testcluster: building KWOK, patched, from the Go module proxy into {}",
                binaries.kwok_dir.display()
            );
            build_into(&binaries.kwok_dir, |out| {
                build_kwok(&modules.join("kwok"), out)
            })?;
        }
        Ok(binaries)
    }

    /// A kubelet built from the pinned Kubernetes module, cached like the other binaries but built
    /// only when asked for (the clusters run KWOK nodes, not kubelets): the executor of the
    /// tests that compute the executor ID of a real kubelet build. Its version is the pinned
    /// one.
    pub fn kubelet() -> Result<PathBuf, Error> {
        let modules = go_modules_dir();
        let version = pinned_kubernetes_version(&modules.join("k8s/go.mod"))?;
        let root = cache_root()?.join("cluster-bin");
        let key = cache_key(&modules, &["k8s"], &[KUBELET_RECIPE])?;
        let dir = root.join(format!("kubelet-{key}"));
        if is_complete(&dir) {
            return Ok(dir.join("kubelet"));
        }
        let _lock = lock_cache(&root)?;
        if !is_complete(&dir) {
            check_go()?;
            eprintln!(
                "k8sm-testcluster: building the kubelet of Kubernetes {version} from the Go module proxy into {}",
                dir.display()
            );
            build_into(&dir, |out| {
                let args = [
                    "-ldflags".to_owned(),
                    version_ldflags(&version)?,
                    "k8s.io/kubernetes/cmd/kubelet".to_owned(),
                ];
                go_build(
                    &modules.join("k8s"),
                    &out.join("kubelet").display().to_string(),
                    &args,
                )
            })?;
        }
        Ok(dir.join("kubelet"))
    }

    fn at(kubernetes_dir: &Path, kwok_dir: &Path, kubernetes_version: String) -> Self {
        Self {
            kubernetes_dir: kubernetes_dir.to_owned(),
            kwok_dir: kwok_dir.to_owned(),
            etcd: kubernetes_dir.join("etcd"),
            kube_apiserver: kubernetes_dir.join("kube-apiserver"),
            kube_controller_manager: kubernetes_dir.join("kube-controller-manager"),
            kube_scheduler: kubernetes_dir.join("kube-scheduler"),
            kubectl: kubernetes_dir.join("kubectl"),
            kwok: kwok_dir.join("kwok"),
            kwok_stages: kwok_dir.join("kwok-stages"),
            kubernetes_version,
        }
    }

    fn complete(&self) -> bool {
        is_complete(&self.kubernetes_dir) && is_complete(&self.kwok_dir)
    }
}

/// Takes the cache's build lock (released when the file is dropped): parallel tests wait and share
/// one build.
pub(crate) fn lock_cache(root: &Path) -> Result<File, Error> {
    std::fs::create_dir_all(root).map_err(|e| io(format!("creating {}", root.display()), e))?;
    let lock_path = root.join(".lock");
    let lock =
        File::create(&lock_path).map_err(|e| io(format!("creating {}", lock_path.display()), e))?;
    lock.lock()
        .map_err(|e| io(format!("locking {}", lock_path.display()), e))?;
    Ok(lock)
}

pub(crate) fn is_complete(dir: &Path) -> bool {
    dir.join("complete").exists()
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
    pinned_version(go_mod, "k8s.io/kubernetes")
}

/// The version `go.mod` requires of `module`: `require MODULE vX` or, inside a require block,
/// `MODULE vX`.
pub(crate) fn pinned_version(go_mod: &Path, module: &str) -> Result<String, Error> {
    let text = read(go_mod)?;
    let prefix = format!("{module} ");
    text.lines()
        .map(|line| line.trim().trim_start_matches("require").trim())
        .filter(|line| !line.contains("=>"))
        .filter_map(|line| line.strip_prefix(prefix.as_str()))
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
                "{} has no `require {module} vX.Y.Z` line",
                go_mod.display()
            ))
        })
}

pub(crate) fn cache_key(modules: &Path, pins: &[&str], recipe: &[&str]) -> Result<String, Error> {
    let mut hasher = Sha256::new();
    for part in recipe {
        hasher.update(part.as_bytes());
    }
    for module in pins {
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

/// Builds into a staging directory beside `dir` and moves it into place when complete, so an
/// interrupted build is never taken for a finished one.
pub(crate) fn build_into(
    dir: &Path,
    build: impl FnOnce(&Path) -> Result<(), Error>,
) -> Result<(), Error> {
    let started = Instant::now();
    let staging = dir.with_extension(format!("partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)
        .map_err(|e| io(format!("creating {}", staging.display()), e))?;
    build(&staging)?;
    std::fs::write(
        staging.join("complete"),
        format!("built in {:.0?}\n", started.elapsed()),
    )
    .map_err(|e| io("marking the build complete".into(), e))?;
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&staging, dir)
        .map_err(|e| io(format!("moving the build into {}", dir.display()), e))?;
    eprintln!(
        "k8sm-testcluster: built {} in {:.0?}",
        dir.display(),
        started.elapsed()
    );
    Ok(())
}

fn build_kubernetes(modules: &Path, out: &Path, kubernetes_version: &str) -> Result<(), Error> {
    let ldflags = version_ldflags(kubernetes_version)?;
    let mut k8s_args = vec!["-ldflags".to_owned(), ldflags];
    k8s_args.extend(
        K8S_COMMANDS
            .iter()
            .map(|c| format!("k8s.io/kubernetes/cmd/{c}")),
    );
    go_build(
        &modules.join("k8s"),
        &format!("{}/", out.display()),
        &k8s_args,
    )?;
    // etcd's main package is its module root, which `go build` would name `server`.
    go_build(
        &modules.join("etcd"),
        &out.join("etcd").display().to_string(),
        &["go.etcd.io/etcd/server/v3".to_owned()],
    )
}

fn build_kwok(pin_module: &Path, out: &Path) -> Result<(), Error> {
    let source = kwok_module_source(pin_module)?;
    let work = out.join("work");
    let modfile = kwok_patch::prepare(pin_module, &source, &work)?;
    go_build(
        pin_module,
        &out.join("kwok").display().to_string(),
        &[
            format!("-modfile={}", modfile.display()),
            "sigs.k8s.io/kwok/cmd/kwok".to_owned(),
        ],
    )?;
    std::fs::remove_dir_all(&work).map_err(|e| io(format!("removing {}", work.display()), e))?;
    copy_kwok_stages(&source, &out.join("kwok-stages"))
}

pub(crate) fn check_go() -> Result<(), Error> {
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

/// Stamps the real version into the components, which otherwise report `v0.0.0-master` (KWOK and
/// kubectl read it).
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
pub(crate) fn go_build(module: &Path, out: &str, args: &[String]) -> Result<(), Error> {
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

/// Downloads (if needed) the pinned KWOK module and returns its directory in the module cache.
fn kwok_module_source(pin_module: &Path) -> Result<PathBuf, Error> {
    module_source(pin_module, "sigs.k8s.io/kwok")
}

/// Downloads (if needed, checked against its `go.sum`) the version of `module` that the Go module
/// `pin_module` requires, and returns its directory in the module cache (read-only).
pub(crate) fn module_source(pin_module: &Path, module: &str) -> Result<PathBuf, Error> {
    let output = Command::new("go")
        .current_dir(pin_module)
        .args(["mod", "download", "-json", module])
        .output()
        .map_err(|e| io(format!("downloading the module {module}"), e))?;
    let dir = serde_json::from_slice::<serde_json::Value>(&output.stdout)
        .ok()
        .and_then(|info| info["Dir"].as_str().map(PathBuf::from));
    match dir {
        Some(dir) if output.status.success() => Ok(dir),
        _ => Err(Error::Setup(format!(
            "go mod download {module} in {} failed: {}{}",
            pin_module.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))),
    }
}

fn copy_kwok_stages(source: &Path, out: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(out).map_err(|e| io(format!("creating {}", out.display()), e))?;
    for stage in KWOK_STAGES {
        let from = source.join(stage);
        let name = Path::new(stage).file_name().unwrap_or_default();
        std::fs::copy(&from, out.join(name))
            .map_err(|e| io(format!("copying {}", from.display()), e))?;
    }
    Ok(())
}
