//! The container images of `cargo xtask image`, run for real without a container runtime: the OCI
//! archive is unpacked into an empty root and the controller started from it as a Pod of
//! deploy/controller.yaml would be, against the real local cluster, where it upgrades the nodes.
//! The root holds only what the image brings, so the test fails if the binary needs more. Each
//! archive is an index of linux/amd64 and linux/arm64: the other platform's image is checked to
//! hold the same files, built for its machine.
//! The archives are read from `$K8SM_IMAGE_DIR`, else `target/image` (`cargo xtask test` builds
//! them first).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use serde_json::Value;
use sha2::{Digest, Sha256};

use k8sm_api::ExecutorUpgradePolicySpec;
use k8sm_e2e::binaries::ChildGuard;
use k8sm_e2e::http::{free_port, get};
use k8sm_e2e::manifests;
use k8sm_e2e::scenario::Scenario;
use k8sm_e2e::workloads::{create, deployment};
use k8sm_e2e::{kubectl_ok, workspace_root};

const NS: &str = "image";
const VERSION: &str = env!("CARGO_PKG_VERSION");
const SERVICE_ACCOUNT_DIR: &str = "var/run/secrets/kubernetes.io/serviceaccount";
/// The Pod this stands for.
const POD_NAME: &str = "k8sm-controller-7d9f8b6c5d-image";
/// The platforms of each image's index, in its order, with the ELF `e_machine` of their binaries
/// and the emulator (Debian's qemu-user) that runs them on another machine.
const PLATFORMS: [(&str, u16, &str); 2] =
    [("amd64", 62, "qemu-x86_64"), ("arm64", 183, "qemu-aarch64")];

/// The controller image, unpacked (digests checked, layers applied in order) into an empty root
/// file system, runs as a Pod of deploy/controller.yaml would: the image's entrypoint, user and
/// environment, the Deployment's args and env, the in-cluster variables and a ServiceAccount token
/// and CA of deploy/rbac.yaml mounted at /var/run/secrets/kubernetes.io/serviceaccount; against
/// the real local cluster it upgrades the nodes.
///
/// The root has no /dev or /proc, and of /etc only what the image brings: the controller needs no
/// more (a container runtime would provide the first two, but what the binary does not need cannot
/// go missing). The root is entered with a user namespace (`unshare --user --root`), which works
/// as root and as a plain user, maps the image's user (65532) onto the test's own, and keeps the
/// test's `--pdeathsig` guard (a real switch of user would clear it, and a killed test could leave
/// the controller behind).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_from_its_image_upgrades_nodes_as_a_pod() {
    let started = Instant::now();
    let mut scenario = Scenario::start(3, NS, "1s").await;
    let root = scenario.cluster.dir().join("controller-rootfs");
    let image = unpack(&archive("k8sm-controller"), host_arch(), &root);
    assert_eq!(
        image.files,
        [
            "etc",
            "etc/ssl",
            "etc/ssl/certs",
            "etc/ssl/certs/ca-certificates.crt",
            "usr",
            "usr/local",
            "usr/local/bin",
            "usr/local/bin/k8sm-controller"
        ],
        "the controller image holds its binary and the CA bundle, nothing else"
    );
    let container = deployed_container();
    // deploy/controller.yaml gives no command: the image's entrypoint runs, with the Deployment's
    // args.
    assert!(container.get("command").is_none());
    assert_eq!(image.entrypoint, ["/usr/local/bin/k8sm-controller"]);
    assert!(image.cmd.is_empty());
    let (uid, gid) = image.user.split_once(':').expect("user uid:gid");
    assert_eq!(
        uid,
        deployed_run_as_user().to_string(),
        "the image's user is the Deployment's runAsUser"
    );

    // What the kubelet mounts into the Pod: the token of its ServiceAccount, bound to exactly
    // deploy/rbac.yaml, the cluster's CA as kube-root-ca.crt publishes it, and the namespace.
    let (_, token) = scenario.deployed_controller_identity();
    let ca = scenario
        .wait_until(
            "kube-root-ca.crt is published in k8sm-system",
            Duration::from_secs(60),
            || async {
                let args = [
                    "get",
                    "configmap",
                    "kube-root-ca.crt",
                    "-n",
                    "k8sm-system",
                    "-o",
                    "jsonpath={.data.ca\\.crt}",
                ];
                let result = k8sm_e2e::kubectl(&scenario.cluster, &args);
                (result.success && result.stdout.contains("BEGIN CERTIFICATE"))
                    .then_some(result.stdout)
            },
        )
        .await;
    let secrets = root.join(SERVICE_ACCOUNT_DIR);
    std::fs::create_dir_all(&secrets).expect("service account dir");
    std::fs::write(secrets.join("token"), &token).expect("token");
    std::fs::write(secrets.join("ca.crt"), &ca).expect("ca.crt");
    std::fs::write(secrets.join("namespace"), "k8sm-system").expect("namespace");

    // The Pod's environment: the image's, the container's (fieldRefs resolved), the in-cluster
    // variables. Nothing of the test's own (no KUBECONFIG, no HOME).
    let server = scenario.cluster.server().trim_start_matches("https://");
    let (host, port) = server.rsplit_once(':').expect("host:port");
    let mut env: BTreeMap<String, String> = image
        .env
        .iter()
        .filter_map(|e| e.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    for var in container["env"].as_array().expect("env") {
        let name = var["name"].as_str().expect("env name").to_owned();
        let value = match var["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
            Some("metadata.name") => POD_NAME.to_owned(),
            Some("metadata.namespace") => "k8sm-system".to_owned(),
            Some(other) => panic!("deploy/controller.yaml reads {other}: teach this test"),
            None => var["value"].as_str().expect("env value").to_owned(),
        };
        env.insert(name, value);
    }
    env.extend([
        ("HOSTNAME".to_owned(), POD_NAME.to_owned()),
        ("KUBERNETES_SERVICE_HOST".to_owned(), host.to_owned()),
        ("KUBERNETES_SERVICE_PORT".to_owned(), port.to_owned()),
        ("KUBERNETES_SERVICE_PORT_HTTPS".to_owned(), port.to_owned()),
    ]);

    // The Deployment's args, but the metrics address: a Pod has its own network, this test shares
    // the host's.
    let metrics = format!("127.0.0.1:{}", free_port());
    let mut args: Vec<String> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("arg").to_owned())
        .collect();
    let metrics_arg = args
        .iter_mut()
        .find(|a| a.starts_with("--metrics-addr="))
        .expect("the Deployment sets --metrics-addr");
    *metrics_arg = format!("--metrics-addr={metrics}");

    let mut command: Vec<String> = vec!["-i".to_owned()];
    command.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
    command.extend([
        on_path("unshare").display().to_string(),
        "--user".to_owned(),
        format!("--map-user={uid}"),
        format!("--map-group={gid}"),
        format!("--root={}", root.display()),
        format!("--wd={}", image.working_dir),
        "--".to_owned(),
    ]);
    command.extend(image.entrypoint.iter().cloned());
    command.extend(args);
    create(&scenario.client, &deployment(NS, "web", 3)).await;
    scenario
        .wait_ready_within(NS, 3, Duration::from_secs(60))
        .await;
    let log = scenario.cluster.dir().join("controller-image.log");
    let controller = ChildGuard::spawn("k8sm-controller (image)", Path::new("env"), &command, &log);
    let pid = controller.pid();
    scenario.controllers.push(controller);
    let from_start = Instant::now();

    // It is the image's binary, in the image's root, as the image's user.
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let in_root = scenario
        .wait_until(
            "the controller enters the image's root",
            Duration::from_secs(10),
            || async {
                let exe = std::fs::read_link(proc.join("exe")).ok()?;
                exe.starts_with(&root).then_some(exe)
            },
        )
        .await;
    assert_eq!(in_root, root.join("usr/local/bin/k8sm-controller"));
    let uid_map = std::fs::read_to_string(proc.join("uid_map")).expect("uid_map");
    assert_eq!(uid_map.split_whitespace().next(), Some(uid), "{uid_map}");
    // With the allocator's settings, which the image sets.
    let environ = std::fs::read(proc.join("environ")).expect("environ");
    assert!(
        environ
            .split(|&b| b == 0)
            .any(|v| v == b"MIMALLOC_PURGE_DELAY=1000"),
        "{}",
        String::from_utf8_lossy(&environ)
    );

    // Ready, as the readinessProbe asks, once it leads.
    scenario
        .wait_until(
            "the controller is ready",
            Duration::from_secs(60),
            || async {
                scenario.controllers[0].assert_running();
                (get(&metrics, "/readyz").ok()?.0 == 200).then_some(())
            },
        )
        .await;
    let ready_after = from_start.elapsed();
    let lease: Lease = Api::namespaced(scenario.client.clone(), "k8sm-system")
        .get("k8sm-controller")
        .await
        .expect("the leader's Lease in its own namespace");
    let holder = lease
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    assert!(holder.starts_with(POD_NAME), "Lease held by {holder:?}");

    scenario
        .create_policy(
            "fleet",
            ExecutorUpgradePolicySpec {
                target_executor_id: Some(scenario.new_id.clone()),
                owner_health_threshold: 60,
                ..ExecutorUpgradePolicySpec::default()
            },
        )
        .await;
    scenario
        .wait_nodes_upgraded(3, Duration::from_secs(300))
        .await;
    assert!(
        !scenario.events("Evicted").await.is_empty(),
        "it evicted through the Eviction API"
    );
    // The upgrade report went to the controller's own namespace (from POD_NAMESPACE).
    let reports = kubectl_ok(
        &scenario.cluster,
        &["get", "configmaps", "-n", "k8sm-system", "-o", "name"],
    );
    assert!(
        reports.lines().any(|l| l != "configmap/kube-root-ca.crt"),
        "no upgrade report in k8sm-system: {reports}"
    );
    eprintln!(
        "image test: the controller from the unpacked image led and was ready {ready_after:.1?} after its start, had \
         upgraded 3 nodes {:.1?} after it; whole test {:.1?}",
        from_start.elapsed(),
        started.elapsed()
    );
}

/// The agent image: its binary runs from its root, and the shell, `cat` and `nsenter` its
/// DaemonSet's command and kamikaze command use are there, on the image's PATH.
#[test]
fn agent_image_has_what_its_daemonset_runs() {
    let dir = tempdir("agent-rootfs");
    let image = unpack(&archive("k8sm-agent"), host_arch(), &dir);
    assert_eq!(image.entrypoint, ["/usr/local/bin/k8sm-agent"]);
    assert_eq!(image.user, "0:0");
    let daemonset =
        std::fs::read_to_string(workspace_root().join("deploy/agent/daemonset.yaml")).unwrap();
    assert!(daemonset.contains(&format!("image: k8sm/k8sm-agent:{VERSION}\n")));
    assert!(daemonset.contains("command: [sh, -c]"));
    for link in ["bin/sh", "bin/cat", "usr/bin/nsenter"] {
        assert!(image.files.iter().any(|f| f == link), "no {link}");
        assert_eq!(
            std::fs::read_link(dir.join(link)).ok(),
            Some(PathBuf::from("/bin/busybox"))
        );
    }
    let mut run = Command::new("env");
    run.arg("-i")
        .args(&image.env)
        .arg(on_path("unshare"))
        .args(["--user", "--map-root-user"])
        .arg(format!("--root={}", dir.display()))
        .args(["--wd=/", "--", "sh", "-c"])
        .arg("echo id | /bin/cat && /usr/bin/nsenter --help 2>&1; exec k8sm-agent --version");
    let output = run.output().expect("unshare runs");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.first(), Some(&"id"), "{stdout}");
    assert!(
        lines.iter().any(|l| l.starts_with("Usage: nsenter")),
        "{stdout}"
    );
    // The binary names the commit it was built from: this checkout's.
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(workspace_root())
        .output()
        .expect("git runs");
    let head = String::from_utf8_lossy(&head.stdout);
    assert_eq!(
        lines.last().copied(),
        Some(&*format!("k8sm-agent {VERSION} (commit {})", head.trim()))
    );
}

/// Both images hold the same files and configuration for every platform, their binaries (and the
/// agent's BusyBox) built for that platform's machine: the ELF header's `e_machine`. Each binary
/// starts (through the emulator on another machine) and names this version.
#[test]
fn every_platform_of_the_index_holds_its_own_binaries() {
    for name in ["k8sm-controller", "k8sm-agent"] {
        let mut first: Option<Image> = None;
        for (arch, machine, emulator) in PLATFORMS {
            let dir = tempdir(&format!("{name}-{arch}"));
            let image = unpack(&archive(name), arch, &dir);
            let mut executables = vec![format!("usr/local/bin/{name}")];
            if name == "k8sm-agent" {
                executables.push("bin/busybox".to_owned());
            }
            for executable in &executables {
                let bytes = std::fs::read(dir.join(executable)).expect("the executable");
                assert_eq!(
                    elf_machine(&bytes),
                    Some(machine),
                    "{name} linux/{arch}: {executable}"
                );
            }
            let binary = dir.join("usr/local/bin").join(name);
            let mut version = if arch == host_arch() {
                Command::new(&binary)
            } else {
                let mut emulated = Command::new(emulator);
                emulated.arg(&binary);
                emulated
            };
            let version = run(version.arg("--version"));
            assert!(
                version.starts_with(&format!("{name} {VERSION} ")),
                "{name} linux/{arch}: {version}"
            );
            let _ = std::fs::remove_dir_all(&dir);
            match &first {
                None => first = Some(image),
                Some(first) => {
                    assert_eq!(image.files, first.files, "{name} linux/{arch}");
                    assert_eq!(image.entrypoint, first.entrypoint, "{name} linux/{arch}");
                    assert_eq!(image.user, first.user, "{name} linux/{arch}");
                    assert_eq!(image.env, first.env, "{name} linux/{arch}");
                }
            }
        }
    }
}

/// The `e_machine` of a 64-bit little-endian ELF file.
fn elf_machine(bytes: &[u8]) -> Option<u16> {
    (bytes.get(..6)? == b"\x7fELF\x02\x01").then_some(())?;
    let machine = bytes.get(0x12..0x14)?;
    Some(u16::from_le_bytes([machine[0], machine[1]]))
}

/// This machine's architecture, as the OCI platform names it.
fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => panic!("no image for {other}"),
    }
}

/// An unpacked image: its configuration and the files of its layers.
struct Image {
    entrypoint: Vec<String>,
    cmd: Vec<String>,
    user: String,
    env: Vec<String>,
    working_dir: String,
    /// Every path the layers hold, sorted.
    files: Vec<String>,
}

/// The OCI archive of image `name`, from `$K8SM_IMAGE_DIR`, else `target/image`: `cargo xtask test`
/// builds them first (`cargo xtask image` does too); running this file alone needs them built.
fn archive(name: &str) -> PathBuf {
    let dir = std::env::var_os("K8SM_IMAGE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/image"));
    let path = dir.join(format!("{name}-{VERSION}.oci.tar"));
    assert!(
        path.exists(),
        "{} is missing: run `cargo xtask image` (cargo xtask test does)",
        path.display()
    );
    path
}

/// Unpacks the linux/`arch` image of the OCI archive into `root` (which must not exist): reads the
/// layout's one index, which must list [`PLATFORMS`], checks every blob against its digest and
/// applies the layers in order.
fn unpack(archive: &Path, arch: &str, root: &Path) -> Image {
    let layout = root.with_extension("layout");
    let _ = std::fs::remove_dir_all(&layout);
    std::fs::create_dir_all(&layout).unwrap();
    run(Command::new("tar")
        .arg("-xf")
        .arg(archive)
        .arg("-C")
        .arg(&layout));
    let blob = |descriptor: &Value| -> Vec<u8> {
        let digest = descriptor["digest"].as_str().expect("digest");
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        let bytes = std::fs::read(layout.join("blobs/sha256").join(hex)).expect("blob");
        assert_eq!(
            Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>(),
            hex,
            "blob {digest}"
        );
        assert_eq!(descriptor["size"].as_u64(), Some(bytes.len() as u64));
        bytes
    };
    let index: Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let manifests = index["manifests"].as_array().expect("manifests");
    assert_eq!(manifests.len(), 1, "one index per archive");
    let name = archive.file_name().unwrap().to_string_lossy();
    let reference = manifests[0]["annotations"]["io.containerd.image.name"]
        .as_str()
        .expect("the image's name");
    assert!(
        name.starts_with(
            reference
                .rsplit('/')
                .next()
                .unwrap()
                .split(':')
                .next()
                .unwrap()
        ),
        "{name} holds {reference}"
    );
    let index: Value = serde_json::from_slice(&blob(&manifests[0])).unwrap();
    assert_eq!(
        index["mediaType"],
        "application/vnd.oci.image.index.v1+json"
    );
    let images = index["manifests"].as_array().expect("the index's images");
    let platforms: Vec<String> = images
        .iter()
        .map(|m| {
            let p = &m["platform"];
            format!(
                "{}/{}",
                p["os"].as_str().unwrap(),
                p["architecture"].as_str().unwrap()
            )
        })
        .collect();
    let expected: Vec<String> = PLATFORMS
        .iter()
        .map(|(a, ..)| format!("linux/{a}"))
        .collect();
    assert_eq!(platforms, expected, "{name}");
    let descriptor = images
        .iter()
        .find(|m| m["platform"]["architecture"] == arch)
        .expect("the platform's image");
    let manifest: Value = serde_json::from_slice(&blob(descriptor)).unwrap();
    assert_eq!(
        manifest["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    let config: Value = serde_json::from_slice(&blob(&manifest["config"])).unwrap();
    assert_eq!(config["os"], "linux");
    assert_eq!(config["architecture"], arch);
    assert_eq!(
        config["config"]["Labels"]["org.opencontainers.image.version"],
        VERSION
    );
    std::fs::create_dir_all(root).unwrap();
    let mut files = Vec::new();
    for layer in manifest["layers"].as_array().expect("layers") {
        assert_eq!(
            layer["mediaType"],
            "application/vnd.oci.image.layer.v1.tar+gzip"
        );
        let path = layout.join("layer.tar.gz");
        std::fs::write(&path, blob(layer)).unwrap();
        let listing = run(Command::new("tar").arg("-tzf").arg(&path));
        files.extend(listing.lines().map(|l| l.trim_end_matches('/').to_owned()));
        run(Command::new("tar")
            .arg("-xzf")
            .arg(&path)
            .arg("-C")
            .arg(root));
    }
    std::fs::remove_dir_all(&layout).unwrap();
    files.sort();
    let strings = |value: &Value| -> Vec<String> {
        value
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let c = &config["config"];
    Image {
        entrypoint: strings(&c["Entrypoint"]),
        cmd: strings(&c["Cmd"]),
        user: c["User"].as_str().unwrap_or_default().to_owned(),
        env: strings(&c["Env"]),
        working_dir: c["WorkingDir"].as_str().unwrap_or("/").to_owned(),
        files,
    }
}

/// The controller container of deploy/controller.yaml's Deployment, as JSON.
fn deployed_container() -> Value {
    deployed_pod_spec()["containers"][0].clone()
}

fn deployed_run_as_user() -> u64 {
    deployed_pod_spec()["securityContext"]["runAsUser"]
        .as_u64()
        .expect("runAsUser")
}

fn deployed_pod_spec() -> Value {
    let text = std::fs::read_to_string(workspace_root().join("deploy/controller.yaml")).unwrap();
    manifests::parse(&text)
        .expect("deploy/controller.yaml")
        .into_values()
        .find(|doc| doc["kind"] == "Deployment")
        .expect("a Deployment in deploy/controller.yaml")["spec"]["template"]["spec"]
        .clone()
}

fn on_path(program: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("{program} is not on PATH (util-linux)"))
}

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("k8sm-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn run(cmd: &mut Command) -> String {
    let output = cmd.output().expect("command runs");
    assert!(
        output.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}
