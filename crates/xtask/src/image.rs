//! `cargo xtask image`: OCI image archives of `k8sm-controller` and `k8sm-agent`, without a Docker
//! daemon. Each image is an index of one image per platform (linux/amd64, linux/arm64), each one
//! layer on no base: the static release binary (and, for the agent, a static BusyBox for the shell
//! its DaemonSet and `--on-kamikaze` commands run), assembled by the pinned `crane`
//! (`tests/go/crane`) into a tarred OCI layout that `docker load`, `podman load`, `skopeo copy
//! --all oci-archive:…`, `kind load image-archive` and `crane push` take. `Containerfile` builds
//! the same layout with Docker or Podman; a test below keeps the two from drifting apart.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};

use crate::release::{
    self, LICENSE, LINUX_AMD64, LINUX_ARM64, PLATFORMS, Platform, Profile, SOURCE, VERSION,
};
use crate::workspace;

/// Where the binaries are, in both images: on the PATH of every image, out of the way of what a
/// base would bring.
pub const BINARY_DIR: &str = "/usr/local/bin";

/// The image repository both images are named under, as `deploy/` names them.
pub const REPOSITORY: &str = "k8sm";

/// One image's layout and configuration.
#[derive(Debug)]
pub struct ImageSpec {
    /// Image and binary name.
    pub name: &'static str,
    pub description: &'static str,
    /// `USER`: numeric, since there is no /etc/passwd to look a name up in.
    pub user: &'static str,
    pub path: &'static str,
    /// The environment besides `PATH`, as `KEY=value`.
    pub env: &'static [&'static str],
    pub exposed_ports: &'static [&'static str],
    /// BusyBox applets the image holds, as links to `/bin/busybox` (none: no BusyBox).
    pub busybox_applets: &'static [&'static str],
    /// Whether the image holds the CA certificate bundle at [`CA_CERTIFICATES`].
    pub ca_certificates: bool,
    /// SPDX expression of what the image holds.
    pub licenses: &'static str,
}

impl ImageSpec {
    pub fn entrypoint(&self) -> String {
        format!("{BINARY_DIR}/{}", self.name)
    }

    /// `k8sm/<name>:<version>`, the image `deploy/` runs.
    pub fn reference(&self) -> String {
        format!("{REPOSITORY}/{}:{VERSION}", self.name)
    }

    pub fn archive_name(&self) -> String {
        format!("{}-{VERSION}.oci.tar", self.name)
    }

    pub fn labels(&self, revision: &str) -> BTreeMap<&'static str, String> {
        BTreeMap::from([
            ("org.opencontainers.image.title", self.name.to_owned()),
            ("org.opencontainers.image.version", VERSION.to_owned()),
            ("org.opencontainers.image.revision", revision.to_owned()),
            ("org.opencontainers.image.source", SOURCE.to_owned()),
            (
                "org.opencontainers.image.licenses",
                self.licenses.to_owned(),
            ),
            (
                "org.opencontainers.image.description",
                self.description.to_owned(),
            ),
        ])
    }
}

/// The controller runs as the non-root user deploy/controller.yaml asks for (`runAsUser: 65532`,
/// `runAsNonRoot`), with no command of its own there: the entrypoint is the binary, and the
/// Deployment's `args` are its flags. It holds the system's CA bundle: its `Http` kamikaze client
/// (reqwest with rustls-platform-verifier) verifies an `https` agent with the system roots, and
/// cannot even be built without them (the image test caught the controller exiting
/// in a root without them; it now builds that client only when a policy POSTs a kamikaze).
pub const CONTROLLER: ImageSpec = ImageSpec {
    name: "k8sm-controller",
    description: "The k8sm controller: SLA-safe rolling upgrades of node executors",
    user: "65532:65532",
    path: BINARY_DIR,
    // mimalloc keeps what a pass freed for the next one (controller/src/startup/allocator.rs).
    env: &["MIMALLOC_PURGE_DELAY=1000"],
    exposed_ports: &["8080/tcp"],
    busybox_applets: &[],
    ca_certificates: true,
    licenses: LICENSE,
};

/// The agent runs as root (deploy/agent/daemonset.yaml makes it privileged, with the host's PIDs:
/// it reads the kubelet through /proc and enters the host's namespaces on kamikaze). Its DaemonSet
/// runs `sh -c` to read the executor ID from a file, and the agent runs `--on-kamikaze` with `sh
/// -c` too (`nsenter … systemctl restart …` in deploy/): hence a static BusyBox providing `sh`,
/// `cat` and `nsenter`.
pub const AGENT: ImageSpec = ImageSpec {
    name: "k8sm-agent",
    description: "The node side of k8sm: publishes the executor ID and obeys kamikaze",
    user: "0:0",
    path: "/usr/local/bin:/usr/bin:/bin",
    env: &[],
    exposed_ports: &[],
    busybox_applets: &["/bin/sh", "/bin/cat", "/usr/bin/nsenter"],
    // Its TLS is the cluster's own (the in-cluster CA): it needs no public roots.
    ca_certificates: false,
    licenses: "Apache-2.0 AND GPL-2.0-only",
};

pub const IMAGES: [&ImageSpec; 2] = [&CONTROLLER, &AGENT];

/// Where the agent image's BusyBox lives in it.
pub const BUSYBOX: &str = "/bin/busybox";

/// Where the CA bundle lives in an image: the first place rustls-native-certs (through
/// openssl-probe) looks.
pub const CA_CERTIFICATES: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Where the archives go, under the workspace root (the image test reads them there).
pub const DEFAULT_OUT: &str = "target/image";
/// Debian's busybox-static puts it there.
pub const DEFAULT_BUSYBOX: &str = "/bin/busybox";
/// Where .ci/run unpacks Debian's busybox-static for arm64 (it cannot be installed beside the
/// amd64 one).
pub const DEFAULT_BUSYBOX_ARM64: &str = "/usr/local/lib/k8sm/linux-arm64/busybox";

#[derive(clap::Args)]
pub struct ImageArgs {
    /// Directory for the archives.
    #[arg(long, default_value = DEFAULT_OUT)]
    pub out: PathBuf,
    /// Build profile of the binaries in the images. `dev` is only for trying the packaging: it is
    /// not what ships.
    #[arg(long, value_enum, default_value = "release")]
    pub profile: Profile,
    /// The statically linked BusyBox of the agent's linux/amd64 image (Debian: `apt-get install
    /// busybox-static`).
    #[arg(long, default_value = DEFAULT_BUSYBOX)]
    pub busybox: PathBuf,
    /// The statically linked BusyBox of the agent's linux/arm64 image (Debian's busybox-static
    /// for arm64, unpacked: .ci/run does it).
    #[arg(long, default_value = DEFAULT_BUSYBOX_ARM64)]
    pub busybox_arm64: PathBuf,
    /// The CA bundle of the controller image (Debian: `apt-get install ca-certificates`).
    #[arg(long, default_value = CA_CERTIFICATES)]
    pub ca_certificates: PathBuf,
}

pub fn run(args: ImageArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let out = workspace::root().join(&args.out);
    let built = build(
        &out,
        args.profile,
        &Inputs {
            busybox: BTreeMap::from([
                (LINUX_AMD64.arch, args.busybox),
                (LINUX_ARM64.arch, args.busybox_arm64),
            ]),
            ca_certificates: args.ca_certificates,
        },
    )?;
    eprintln!("==> images ({} in all)", humantime_secs(started));
    for image in &built {
        let layers: Vec<String> = image
            .layer_bytes
            .iter()
            .map(|(platform, bytes)| format!("{platform} {}", release::mib(*bytes)))
            .collect();
        eprintln!(
            "{}  {}  {} (layers uncompressed: {})  {}",
            image.reference,
            image.archive.display(),
            release::mib(image.archive_bytes),
            layers.join(", "),
            image.digest
        );
    }
    Ok(())
}

fn humantime_secs(since: Instant) -> String {
    format!("{:.0}s", since.elapsed().as_secs_f64())
}

/// One built archive.
#[derive(Debug)]
pub struct Built {
    pub reference: String,
    pub archive: PathBuf,
    pub archive_bytes: u64,
    /// Per platform (`linux/arm64`), the size of its one layer, uncompressed.
    pub layer_bytes: Vec<(String, u64)>,
    /// The image index's digest.
    pub digest: String,
}

/// What the images take from the build machine besides k8sm's binaries.
#[derive(Debug)]
pub struct Inputs {
    /// A static BusyBox per architecture (`arm64`) of [`PLATFORMS`].
    pub busybox: BTreeMap<&'static str, PathBuf>,
    pub ca_certificates: PathBuf,
}

impl Default for Inputs {
    fn default() -> Self {
        Self {
            busybox: BTreeMap::from([
                (LINUX_AMD64.arch, DEFAULT_BUSYBOX.into()),
                (LINUX_ARM64.arch, DEFAULT_BUSYBOX_ARM64.into()),
            ]),
            ca_certificates: CA_CERTIFICATES.into(),
        }
    }
}

impl Inputs {
    fn busybox(&self, platform: Platform) -> anyhow::Result<&Path> {
        self.busybox
            .get(platform.arch)
            .map(PathBuf::as_path)
            .with_context(|| format!("no BusyBox given for {}", platform.name()))
    }
}

/// One platform's binaries of both images, in the order of [`IMAGES`].
struct PlatformBinaries {
    platform: Platform,
    binaries: Vec<PathBuf>,
}

/// Builds both images' binaries for every platform and their archives into `out`.
pub fn build(out: &Path, profile: Profile, inputs: &Inputs) -> anyhow::Result<Vec<Built>> {
    let mut platforms = Vec::new();
    for platform in PLATFORMS {
        platforms.push(PlatformBinaries {
            platform,
            binaries: release::build_static(platform, &IMAGES.map(|image| image.name), profile)?,
        });
        release::check_static(inputs.busybox(platform)?, platform).with_context(|| {
            format!(
                "the agent's {} image needs a static BusyBox for it (.ci/run installs it)",
                platform.name()
            )
        })?;
    }
    let bundle = std::fs::read_to_string(&inputs.ca_certificates).unwrap_or_default();
    anyhow::ensure!(
        bundle.contains("-----BEGIN CERTIFICATE-----"),
        "the controller image needs a CA bundle: {} has no certificate (apt-get install ca-certificates)",
        inputs.ca_certificates.display()
    );
    let revision = release::revision()?;
    eprintln!("==> crane (go-containerregistry, pinned in tests/go/crane; built once)");
    let crane = k8sm_testcluster::crane().context("building crane from the Go module proxy")?;
    let work = out.join(".work");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let registry = Registry::start(&crane)?;
    let mut built = Vec::new();
    for (index, image) in IMAGES.iter().enumerate() {
        eprintln!("==> image {}", image.reference());
        let remote = format!("{}/{}", registry.host, image.reference());
        let mut layer_bytes = Vec::new();
        let mut append = Command::new(&crane);
        append.args(["index", "append", "--tag", &remote]);
        for binaries in &platforms {
            let platform = binaries.platform;
            let platform_remote = format!("{remote}-{}", platform.arch);
            let layer = assemble(
                &Assembly {
                    image,
                    platform,
                    binary: &binaries.binaries[index],
                    busybox: inputs.busybox(platform)?,
                    ca_certificates: &inputs.ca_certificates,
                    revision: &revision,
                },
                &crane,
                &platform_remote,
                &work.join(image.name).join(platform.arch),
            )?;
            layer_bytes.push((platform.name(), layer));
            append.args(["--manifest", &platform_remote]);
        }
        // The index lists each image with the platform of its configuration.
        release::run_quiet("crane index append", &mut append)?;
        let (archive, digest) = archive(image, &crane, &remote, &work.join(image.name), out)?;
        built.push(Built {
            reference: image.reference(),
            archive_bytes: size(&archive)?,
            layer_bytes,
            archive,
            digest,
        });
    }
    drop(registry);
    std::fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    Ok(built)
}

/// What goes into one platform's image.
struct Assembly<'a> {
    image: &'a ImageSpec,
    platform: Platform,
    binary: &'a Path,
    busybox: &'a Path,
    ca_certificates: &'a Path,
    revision: &'a str,
}

/// Builds one platform's image in crane's registry as `remote`, returning its layer's size.
fn assemble(what: &Assembly, crane: &Path, remote: &str, work: &Path) -> anyhow::Result<u64> {
    let image = what.image;
    // The layer: the files at their paths in the image, modes set here since tar keeps them.
    let rootfs = work.join("rootfs");
    install(what.binary, &rootfs.join(&image.entrypoint()[1..]), 0o755)?;
    if !image.busybox_applets.is_empty() {
        install(what.busybox, &rootfs.join(&BUSYBOX[1..]), 0o755)?;
        for applet in image.busybox_applets {
            let link = rootfs.join(&applet[1..]);
            create_dir(link.parent().unwrap_or(&rootfs))?;
            std::os::unix::fs::symlink(BUSYBOX, &link)
                .with_context(|| format!("linking {}", link.display()))?;
        }
    }
    if image.ca_certificates {
        install(
            what.ca_certificates,
            &rootfs.join(&CA_CERTIFICATES[1..]),
            0o644,
        )?;
    }
    let layer = work.join("layer.tar");
    let mut tar = release::reproducible_tar();
    tar.arg("--file").arg(&layer).arg("-C").arg(&rootfs);
    tar.args(top_level_entries(&rootfs)?);
    release::run_quiet("tar of the image layer", &mut tar)?;

    // Assemble in crane's registry: the only way crane sets a configuration.
    release::run_quiet(
        "crane append",
        Command::new(crane)
            .args(["append", "--oci-empty-base", "--new_layer"])
            .arg(&layer)
            .args(["--new_tag", remote]),
    )?;
    let mut mutate = Command::new(crane);
    mutate
        .args(["mutate", remote, "--tag", remote])
        .args(["--set-platform", &what.platform.name()])
        .args(["--entrypoint", &image.entrypoint()])
        .args(["--user", image.user, "--workdir", "/"])
        .args(["--env", &format!("PATH={}", image.path)]);
    for variable in image.env {
        mutate.args(["--env", variable]);
    }
    for port in image.exposed_ports {
        mutate.args(["--exposed-ports", port]);
    }
    for (key, value) in image.labels(what.revision) {
        // crane reads each --label as CSV (commas separate pairs): quote it so a value may hold
        // commas.
        mutate.args(["--label", &csv_field(&format!("{key}={value}"))]);
    }
    release::run_quiet("crane mutate", &mut mutate)?;
    size(&layer)
}

/// Takes the index `remote` out of crane's registry as an OCI layout, names it and tars it into
/// `out`: returns the archive and the index's digest.
fn archive(
    image: &ImageSpec,
    crane: &Path,
    remote: &str,
    work: &Path,
    out: &Path,
) -> anyhow::Result<(PathBuf, String)> {
    let layout = work.join("layout");
    release::run_quiet(
        "crane pull --format oci",
        Command::new(crane)
            .args(["pull", "--format", "oci", remote])
            .arg(&layout),
    )?;
    let digest = name_layout(&layout, image)?;
    let platforms = index_platforms(&layout)?;
    let expected: Vec<String> = PLATFORMS.iter().map(Platform::name).collect();
    anyhow::ensure!(
        platforms == expected,
        "the index of {} lists {platforms:?}, not {expected:?}",
        image.name
    );
    create_dir(out)?;
    let archive = out.join(image.archive_name());
    let mut tar = release::reproducible_tar();
    tar.arg("--file").arg(&archive).arg("-C").arg(&layout);
    tar.args(top_level_entries(&layout)?);
    release::run_quiet("tar of the OCI layout", &mut tar)?;
    Ok((archive, digest))
}

/// Names the layout's one index as `docker.io/k8sm/<name>:<version>` (containerd, and so `docker
/// load` and `kind load`, read `io.containerd.image.name`; the OCI annotation holds the tag) and
/// returns its digest.
fn name_layout(layout: &Path, image: &ImageSpec) -> anyhow::Result<String> {
    let index_path = layout.join("index.json");
    let mut index: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&index_path)
            .with_context(|| format!("reading {}", index_path.display()))?,
    )
    .context("parsing the layout's index.json")?;
    let manifests = index["manifests"]
        .as_array_mut()
        .filter(|m| m.len() == 1)
        .context("the layout should hold exactly one index")?;
    let manifest = &mut manifests[0];
    manifest["annotations"] = serde_json::json!({
        "io.containerd.image.name": format!("docker.io/{}", image.reference()),
        "org.opencontainers.image.ref.name": VERSION,
    });
    let digest = manifest["digest"]
        .as_str()
        .context("the image has no digest")?
        .to_owned();
    std::fs::write(&index_path, serde_json::to_vec(&index)?)
        .with_context(|| format!("writing {}", index_path.display()))?;
    Ok(digest)
}

/// The platforms (`linux/arm64`) of the images the layout's one index lists, in its order.
fn index_platforms(layout: &Path) -> anyhow::Result<Vec<String>> {
    let read = |path: PathBuf| -> anyhow::Result<serde_json::Value> {
        let text = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_slice(&text).with_context(|| format!("parsing {}", path.display()))
    };
    let top = read(layout.join("index.json"))?;
    let digest = top["manifests"][0]["digest"]
        .as_str()
        .context("the layout names no index")?;
    let blob = |digest: &str| layout.join("blobs").join(digest.replacen(':', "/", 1));
    let index = read(blob(digest))?;
    anyhow::ensure!(
        index["mediaType"] == "application/vnd.oci.image.index.v1+json",
        "the layout's image is not an OCI index: {}",
        index["mediaType"]
    );
    index["manifests"]
        .as_array()
        .context("the index lists no manifests")?
        .iter()
        .map(|manifest| {
            let platform = &manifest["platform"];
            match (platform["os"].as_str(), platform["architecture"].as_str()) {
                (Some(os), Some(arch)) => Ok(format!("{os}/{arch}")),
                _ => bail!("an image of the index has no platform: {manifest}"),
            }
        })
        .collect()
}

fn csv_field(value: &str) -> String {
    format!("\"{}\"", value.replace('"', "\"\""))
}

fn install(from: &Path, to: &Path, mode: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    create_dir(to.parent().context("a path in the image")?)?;
    std::fs::copy(from, to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("setting the mode of {}", to.display()))
}

/// Creates `dir` and its parents with mode 0755, whatever the umask.
fn create_dir(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("setting the mode of {}", dir.display()))
}

/// The names directly in `dir`, sorted, so that tar stores `usr/…` rather than `./usr/…`.
fn top_level_entries(dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut names = std::fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .map(|entry| Ok(entry?.file_name().to_string_lossy().into_owned()))
        .collect::<std::io::Result<Vec<_>>>()?;
    names.sort();
    Ok(names)
}

fn size(path: &Path) -> anyhow::Result<u64> {
    Ok(std::fs::metadata(path)
        .with_context(|| format!("reading {}", path.display()))?
        .len())
}

/// crane's in-memory registry on a free loopback port, stopped when dropped.
struct Registry {
    child: Child,
    /// `127.0.0.1:<port>` (crane speaks plain HTTP to loopback registries).
    host: String,
}

impl Registry {
    fn start(crane: &Path) -> anyhow::Result<Self> {
        let mut child = Command::new(crane)
            .args(["registry", "serve", "--address", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting crane registry serve")?;
        let stderr = child.stderr.take().context("crane's stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        // It logs `serving on port N` once it listens.
        let port = lines.by_ref().map_while(Result::ok).find_map(|line| {
            line.split("serving on port ")
                .nth(1)
                .map(|port| port.trim().to_owned())
        });
        let mut registry = Self {
            child,
            host: String::new(),
        };
        let Some(port) = port else {
            bail!("crane registry serve exited without listening");
        };
        registry.host = format!("127.0.0.1:{port}");
        // Keep draining its log (one line per request) so that it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Ok(registry)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One stage of the Containerfile: its name and its instructions, continuation lines joined.
    fn stages(containerfile: &str) -> BTreeMap<String, Vec<(String, String)>> {
        let mut joined = Vec::new();
        let mut current = String::new();
        for line in containerfile.lines() {
            let line = line.trim();
            if line.starts_with('#') || (line.is_empty() && current.is_empty()) {
                continue;
            }
            match line.strip_suffix('\\') {
                Some(part) => current.push_str(part),
                None => {
                    current.push_str(line);
                    joined.push(std::mem::take(&mut current));
                }
            }
        }
        let mut stages = BTreeMap::new();
        let mut stage = String::new();
        for instruction in joined.into_iter().filter(|i| !i.is_empty()) {
            let (keyword, rest) = instruction.split_once(' ').unwrap_or((&instruction, ""));
            let (keyword, rest) = (keyword.to_uppercase(), rest.trim().to_owned());
            if keyword == "FROM" {
                stage = rest.rsplit(' ').next().unwrap_or_default().to_owned();
            }
            stages
                .entry(stage.clone())
                .or_insert_with(Vec::new)
                .push((keyword, rest));
        }
        stages
    }

    fn values<'a>(stage: &'a [(String, String)], keyword: &str) -> Vec<&'a str> {
        stage
            .iter()
            .filter(|(k, _)| k == keyword)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The Containerfile's final stages must give the images this file builds: same base (none),
    /// user, entrypoint, PATH, ports, binary path, BusyBox links and labels.
    #[test]
    fn the_containerfile_builds_the_same_layout() {
        let text = std::fs::read_to_string(workspace::root().join("Containerfile")).unwrap();
        let stages = stages(&text);
        for image in IMAGES {
            let stage = stages
                .get(image.name)
                .unwrap_or_else(|| panic!("Containerfile has no stage {}", image.name));
            assert_eq!(
                stage[0],
                ("FROM".to_owned(), format!("scratch AS {}", image.name))
            );
            assert_eq!(values(stage, "USER"), [image.user], "{}", image.name);
            assert_eq!(
                values(stage, "ENTRYPOINT"),
                [format!("[\"{}\"]", image.entrypoint())],
                "{}",
                image.name
            );
            let env: Vec<String> = std::iter::once(format!("PATH={}", image.path))
                .chain(image.env.iter().map(|v| (*v).to_owned()))
                .collect();
            assert_eq!(values(stage, "ENV"), env, "{}", image.name);
            assert_eq!(values(stage, "WORKDIR"), ["/"], "{}", image.name);
            let ports: Vec<String> = image
                .exposed_ports
                .iter()
                .map(|p| (*p).to_owned())
                .collect();
            assert_eq!(values(stage, "EXPOSE"), ports, "{}", image.name);
            let copies = values(stage, "COPY").join("\n");
            assert!(
                copies.contains(&format!(" {}", image.entrypoint())),
                "{}: no COPY to {}:\n{copies}",
                image.name,
                image.entrypoint()
            );
            assert_eq!(
                copies.contains(&format!(" {CA_CERTIFICATES}")),
                image.ca_certificates,
                "{}: CA bundle",
                image.name
            );
            for applet in image.busybox_applets {
                assert!(
                    copies.contains(applet) || text.contains(&format!("ln -s {BUSYBOX} .{applet}")),
                    "{}: no {applet}",
                    image.name
                );
            }
            let labels = values(stage, "LABEL").join(" ");
            for (key, value) in image.labels("REVISION") {
                let expected = match key {
                    "org.opencontainers.image.version" => "\"${VERSION}\"".to_owned(),
                    "org.opencontainers.image.revision" => "\"${REVISION}\"".to_owned(),
                    _ => format!("\"{value}\""),
                };
                assert!(
                    labels.contains(&format!("{key}={expected}")),
                    "{}: label {key}={expected} missing from {labels}",
                    image.name
                );
            }
        }
    }

    #[test]
    fn the_containerfile_tags_this_version() {
        let text = std::fs::read_to_string(workspace::root().join("Containerfile")).unwrap();
        assert!(text.contains(&format!("\nARG VERSION={VERSION}\n")));
        assert!(text.contains(&format!("-t {}", CONTROLLER.reference())));
        assert!(text.contains(&format!("-t {}", AGENT.reference())));
        assert!(text.contains(&format!("RUSTFLAGS='{}'", release::STATIC_RUSTFLAGS)));
    }

    /// The manifests of deploy/ run the images this builds, as they expect them.
    #[test]
    fn deploy_runs_these_images() {
        let root = workspace::root();
        let controller = std::fs::read_to_string(root.join("deploy/controller.yaml")).unwrap();
        assert!(controller.contains(&format!("image: {}\n", CONTROLLER.reference())));
        // No `command:`: the image's entrypoint, the binary, takes the Deployment's args.
        assert!(!controller.contains("command:"));
        assert!(controller.contains("runAsUser: 65532"));
        assert!(CONTROLLER.user.starts_with("65532:"));
        let agent = std::fs::read_to_string(root.join("deploy/agent/daemonset.yaml")).unwrap();
        assert!(agent.contains(&format!("image: {}\n", AGENT.reference())));
        // Its command is `sh -c 'exec k8sm-agent … $(cat …) --on-kamikaze "nsenter …"'`.
        assert!(agent.contains("command: [sh, -c]"));
        for tool in ["/bin/sh", "/bin/cat", "/usr/bin/nsenter"] {
            assert!(AGENT.busybox_applets.contains(&tool));
        }
        assert!(AGENT.path.split(':').any(|dir| dir == BINARY_DIR));
    }

    /// The node affinity's `In` values for `key`, in each term of `affinity`.
    fn required(affinity: &serde_yaml::Value, key: &str) -> Vec<Vec<String>> {
        let terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"]
            .as_sequence()
            .expect("required node selector terms");
        terms
            .iter()
            .map(|term| {
                let expressions = term["matchExpressions"].as_sequence().expect("expressions");
                let expression = expressions
                    .iter()
                    .find(|e| e["key"].as_str() == Some(key))
                    .unwrap_or_else(|| panic!("a term without {key}"));
                assert_eq!(expression["operator"].as_str(), Some("In"));
                let values = expression["values"].as_sequence().expect("values");
                values
                    .iter()
                    .map(|v| v.as_str().expect("a string").to_owned())
                    .collect()
            })
            .collect()
    }

    /// The controller and the agent run only on nodes of the platforms their images hold, in
    /// deploy/ and in the chart's defaults (which the chart's test renders against deploy/).
    #[test]
    fn deploy_schedules_on_the_images_platforms() {
        let root = workspace::root();
        let mut affinities = Vec::new();
        for file in ["deploy/controller.yaml", "deploy/agent/daemonset.yaml"] {
            let text = std::fs::read_to_string(root.join(file)).unwrap();
            for document in text.split("\n---\n") {
                let object: serde_yaml::Value = serde_yaml::from_str(document).unwrap();
                if matches!(object["kind"].as_str(), Some("Deployment" | "DaemonSet")) {
                    let spec = &object["spec"]["template"]["spec"];
                    affinities.push((file.to_owned(), spec["affinity"].clone()));
                }
            }
        }
        let values = std::fs::read_to_string(root.join("deploy/helm/k8sm/values.yaml")).unwrap();
        let values: serde_yaml::Value = serde_yaml::from_str(&values).unwrap();
        for component in ["controller", "agent"] {
            let affinity = values[component]["affinity"].clone();
            affinities.push((format!("the chart's {component}.affinity"), affinity));
        }
        assert_eq!(affinities.len(), 4);
        let arches: Vec<String> = PLATFORMS.iter().map(|p| p.arch.to_owned()).collect();
        for (what, affinity) in &affinities {
            assert_eq!(
                required(affinity, "kubernetes.io/arch"),
                std::slice::from_ref(&arches),
                "{what}"
            );
            assert_eq!(
                required(affinity, "kubernetes.io/os"),
                [["linux"]],
                "{what}"
            );
        }
        assert!(PLATFORMS.iter().all(|p| p.os == "linux"));
    }

    #[test]
    fn labels_are_quoted_for_crane() {
        assert_eq!(csv_field("a=b, \"c\""), "\"a=b, \"\"c\"\"\"");
    }
}
