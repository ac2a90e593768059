//! `cargo xtask dist`: the kubectl plugin's release for krew, for the platforms of
//! [`release::PLATFORMS`] (linux/amd64 and linux/arm64; not macOS, which nothing here links). Per
//! platform, an archive of the static `kubectl-k8sm`, its completion shim `kubectl_complete-k8sm`
//! and the LICENSE, its SHA-256 as `sha256sum` writes it, and `k8sm.yaml`, the krew manifest
//! rendered from `plugin/krew.yaml`
//! (krew-release-bot syntax, so the bot can still publish from it) for the platforms built. Then
//! krew's own checks run on the result ([`validate`]): what krew-index runs, and an install exactly
//! as the README tells users to.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail, ensure};
use sha2::{Digest, Sha256};

use crate::release::{self, PLATFORMS, Platform, Profile, VERSION};
use crate::workspace;

/// The plugin's binary (and package) name.
pub const PLUGIN: &str = "kubectl-k8sm";
/// What kubectl runs to complete `kubectl k8sm <TAB>`: a shim that asks the plugin.
pub const COMPLETION_SHIM: &str = "kubectl_complete-k8sm";
/// The plugin's name in krew: `kubectl krew install k8sm`, manifest `k8sm.yaml`.
pub const KREW_NAME: &str = "k8sm";
/// The repository the release URLs point at (`REPOSITORY` in the template).
pub const REPOSITORY: &str = "k8sm/k8sm";

/// Where the release goes, under the workspace root.
pub const DEFAULT_OUT: &str = "target/dist";

#[derive(clap::Args)]
pub struct DistArgs {
    /// Directory for the archives, checksums and manifest.
    #[arg(long, default_value = DEFAULT_OUT)]
    pub out: PathBuf,
    /// Build profile of the plugin. `dev` is only for trying the packaging: it is not what ships.
    #[arg(long, value_enum, default_value = "release")]
    pub profile: Profile,
}

pub fn run(args: DistArgs) -> anyhow::Result<()> {
    let out = workspace::root().join(&args.out);
    let dist = build(&out, args.profile)?;
    validate(&dist)?;
    eprintln!("==> plugin release in {}", out.display());
    for archive in &dist.archives {
        eprintln!(
            "{}  {}  {}",
            archive.path.display(),
            release::mib(archive.bytes),
            archive.sha256
        );
    }
    eprintln!("{}", dist.manifest.display());
    eprintln!(
        "install: kubectl krew install --manifest={} --archive={}",
        dist.manifest.display(),
        dist.archives[0].path.display()
    );
    Ok(())
}

/// One platform's archive.
#[derive(Debug, Clone)]
pub struct Archive {
    pub os: String,
    pub arch: String,
    pub path: PathBuf,
    pub bytes: u64,
    pub sha256: String,
}

impl Archive {
    pub fn file_name(os: &str, arch: &str) -> String {
        format!("{PLUGIN}-{os}-{arch}.tar.gz")
    }
}

#[derive(Debug)]
pub struct Dist {
    pub archives: Vec<Archive>,
    pub manifest: PathBuf,
}

/// Builds the plugin, its archive and checksum for each platform, and renders the manifest, into
/// `out`.
pub fn build(out: &Path, profile: Profile) -> anyhow::Result<Dist> {
    let root = workspace::root();
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let archives = PLATFORMS
        .into_iter()
        .map(|platform| package(out, platform, profile))
        .collect::<anyhow::Result<Vec<_>>>()?;

    let template_path = root.join("plugin/krew.yaml");
    let template = std::fs::read_to_string(&template_path)
        .with_context(|| format!("reading {}", template_path.display()))?;
    let manifest = out.join(format!("{KREW_NAME}.yaml"));
    std::fs::write(
        &manifest,
        render(&template, &format!("v{VERSION}"), &archives)?,
    )?;
    Ok(Dist { archives, manifest })
}

/// One platform's archive of the plugin, and its checksum, in `out`.
fn package(out: &Path, platform: Platform, profile: Profile) -> anyhow::Result<Archive> {
    let (os, arch) = (platform.os, platform.arch);
    let binary = release::build_static(platform, &[PLUGIN], profile)?.remove(0);
    let root = workspace::root();
    // The archive's contents: the binary, the completion shim and the license, at its root, as
    // the manifest's `files` say.
    let staging = out.join(".staging");
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)?;
    std::fs::copy(&binary, staging.join(PLUGIN)).context("copying the plugin")?;
    std::fs::copy(root.join("LICENSE"), staging.join("LICENSE")).context("copying LICENSE")?;
    let shim = staging.join(COMPLETION_SHIM);
    std::fs::copy(root.join("plugin").join(COMPLETION_SHIM), &shim).context("copying the shim")?;
    // kubectl runs it by name: executable whatever the checkout's umask.
    std::fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let tar_path = out.join(".plugin.tar");
    release::run_quiet(
        "tar of the plugin",
        release::reproducible_tar()
            .arg("--file")
            .arg(&tar_path)
            .arg("--mode=go-w")
            .arg("-C")
            .arg(&staging)
            .args(["LICENSE", PLUGIN, COMPLETION_SHIM]),
    )?;
    let path = out.join(Archive::file_name(os, arch));
    gzip(&tar_path, &path)?;
    std::fs::remove_file(&tar_path)?;
    std::fs::remove_dir_all(&staging)?;

    let bytes = std::fs::read(&path)?;
    let sha256 = hex(&Sha256::digest(&bytes));
    let file_name = Archive::file_name(os, arch);
    std::fs::write(
        out.join(format!("{file_name}.sha256")),
        format!("{sha256}  {file_name}\n"),
    )?;
    Ok(Archive {
        os: os.to_owned(),
        arch: arch.to_owned(),
        path,
        bytes: bytes.len() as u64,
        sha256,
    })
}

/// gzip without a name or time in the header (flate2 writes neither unless told), so equal input
/// gives equal bytes.
fn gzip(from: &Path, to: &Path) -> anyhow::Result<()> {
    let input = std::fs::read(from)?;
    let mut encoder = flate2::write::GzEncoder::new(
        std::fs::File::create(to).with_context(|| format!("creating {}", to.display()))?,
        flate2::Compression::best(),
    );
    encoder.write_all(&input)?;
    encoder.finish()?.sync_all()?;
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The concrete manifest from the krew-release-bot template: `{{ .TagName }}` is `tag`,
/// `REPOSITORY` the project's, each `{{ addURIAndSha "URL" .TagName }}` the `uri` and `sha256` of
/// the archive the URL names, and the platforms whose archive was not built are left out.
pub fn render(template: &str, tag: &str, archives: &[Archive]) -> anyhow::Result<String> {
    let by_name: BTreeMap<String, &Archive> = archives
        .iter()
        .map(|a| (Archive::file_name(&a.os, &a.arch), a))
        .collect();
    let mut text = String::new();
    for line in template.replace("{{ .TagName }}", tag).lines() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        if let Some(rest) = trimmed.strip_prefix("{{ addURIAndSha \"") {
            let (url, tail) = rest
                .split_once('"')
                .context("addURIAndSha without a closing quote")?;
            ensure!(
                tail.trim() == ".TagName }}",
                "unexpected addURIAndSha line: {line}"
            );
            // Unknown archives get no checksum here; their platforms are dropped below.
            text.push_str(&format!("{indent}uri: {url}\n"));
        } else {
            text.push_str(line);
            text.push('\n');
        }
    }
    let text = text.replace("REPOSITORY", REPOSITORY);
    ensure!(
        !text.contains("{{"),
        "the template has placeholders this renderer does not know"
    );

    let mut manifest: serde_yaml::Value =
        serde_yaml::from_str(&text).context("the rendered template is not YAML")?;
    let platforms = manifest["spec"]["platforms"]
        .as_sequence_mut()
        .context("the template has no spec.platforms")?;
    let mut kept = Vec::new();
    for mut platform in std::mem::take(platforms) {
        let uri = platform["uri"]
            .as_str()
            .context("a platform without a URL")?;
        let name = uri.rsplit('/').next().unwrap_or_default();
        let Some(archive) = by_name.get(name) else {
            continue;
        };
        let labels = &platform["selector"]["matchLabels"];
        ensure!(
            labels["os"].as_str() == Some(archive.os.as_str())
                && labels["arch"].as_str() == Some(archive.arch.as_str()),
            "the template's platform for {name} selects {labels:?}"
        );
        platform["sha256"] = archive.sha256.clone().into();
        kept.push(platform);
    }
    ensure!(
        kept.len() == archives.len(),
        "the template has no platform for some archives built: {:?}",
        by_name.keys().collect::<Vec<_>>()
    );
    *platforms = kept;
    let platforms: Vec<String> = archives
        .iter()
        .map(|a| format!("{}/{}", a.os, a.arch))
        .collect();
    Ok(format!(
        "# Rendered by `cargo xtask dist` from plugin/krew.yaml for the platforms built: {}.\n{}",
        platforms.join(", "),
        serde_yaml::to_string(&manifest)?
    ))
}

/// krew's own checks: `validate-krew-manifest` (structure, selectors; its install step downloads
/// from the release URL, which does not exist yet, so krew's install is run here instead, from the
/// local archive) and `kubectl krew install --manifest --archive` into a scratch krew root for each
/// platform built, whose plugin must then run, with a license file beside it as krew-index
/// requires.
pub fn validate(dist: &Dist) -> anyhow::Result<()> {
    eprintln!("==> krew v0.4.3 (pinned in tests/go/krew; built once)");
    let krew = k8sm_testcluster::krew().context("building krew from the Go module proxy")?;
    eprintln!("==> validate-krew-manifest {}", dist.manifest.display());
    release::run_quiet(
        "validate-krew-manifest",
        Command::new(&krew.validate_manifest)
            .arg("-manifest")
            .arg(&dist.manifest)
            .arg("-skip-install"),
    )?;
    for archive in &dist.archives {
        eprintln!(
            "==> kubectl krew install --manifest=… --archive={}",
            archive.path.display()
        );
        let krew_root = tempfile_dir(&dist.manifest, "krew-root")?;
        let result = install(&krew.krew, &krew_root, dist, archive);
        let _ = std::fs::remove_dir_all(&krew_root);
        result?;
    }
    Ok(())
}

fn install(krew: &Path, krew_root: &Path, dist: &Dist, archive: &Archive) -> anyhow::Result<()> {
    release::run_quiet(
        "kubectl krew install",
        Command::new(krew)
            .env("KREW_ROOT", krew_root)
            .env("KREW_OS", &archive.os)
            .env("KREW_ARCH", &archive.arch)
            .env("KREW_NO_UPGRADE_CHECK", "1")
            .arg("install")
            .arg(format!("--manifest={}", dist.manifest.display()))
            .arg(format!("--archive={}", archive.path.display())),
    )?;
    let installed = krew_root
        .join("store")
        .join(KREW_NAME)
        .join(format!("v{VERSION}"));
    let licensed = std::fs::read_dir(&installed)
        .with_context(|| format!("listing {}", installed.display()))?
        .filter_map(Result::ok)
        .any(|entry| entry.file_name().to_string_lossy().to_lowercase() == "license");
    ensure!(licensed, "no license file in {}", installed.display());
    let shim = installed.join(COMPLETION_SHIM);
    let mode = std::fs::metadata(&shim)
        .with_context(|| format!("no {COMPLETION_SHIM} in {}", installed.display()))?
        .permissions();
    ensure!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o111 != 0,
        "{} is not executable",
        shim.display()
    );
    // krew links the plugin into its bin directory, where kubectl finds it. Another machine's
    // runs through its emulator: it proves the cross-built binary starts, not just links.
    let platform = PLATFORMS
        .into_iter()
        .find(|p| p.os == archive.os && p.arch == archive.arch)
        .context("an archive of no platform built")?;
    let version = release::run_quiet(
        &format!("the installed {} kubectl-k8sm --version", platform.name()),
        platform
            .run(&krew_root.join("bin").join(PLUGIN))
            .arg("--version"),
    )?;
    if !version.contains(VERSION) {
        bail!("the installed plugin says {version:?}, not {VERSION}");
    }
    if platform.is_host() {
        // The shim, linked beside the plugin as the caveats say, completes through it.
        let path = std::env::join_paths(std::iter::once(krew_root.join("bin")).chain(
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
        ))?;
        let completions = release::run_quiet(
            "the installed kubectl_complete-k8sm",
            Command::new(&shim).env("PATH", path).args(["upgrade", ""]),
        )?;
        ensure!(
            completions.lines().any(|l| l.starts_with("status")),
            "{COMPLETION_SHIM} upgrade '' completes no `status`: {completions:?}"
        );
    }
    Ok(())
}

/// A fresh directory beside `near` (inside the dist directory, so nothing is left elsewhere).
fn tempfile_dir(near: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let dir = near
        .parent()
        .context("the manifest's directory")?
        .join(format!(".{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template() -> String {
        std::fs::read_to_string(workspace::root().join("plugin/krew.yaml")).unwrap()
    }

    fn archive(os: &str, arch: &str, sha: char) -> Archive {
        Archive {
            os: os.into(),
            arch: arch.into(),
            path: PathBuf::new(),
            bytes: 0,
            sha256: sha.to_string().repeat(64),
        }
    }

    #[test]
    fn renders_only_the_platforms_built() {
        let text = render(&template(), "v1.2.3", &[archive("linux", "amd64", 'a')]).unwrap();
        let manifest: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(manifest["spec"]["version"].as_str(), Some("v1.2.3"));
        let platforms = manifest["spec"]["platforms"].as_sequence().unwrap();
        assert_eq!(platforms.len(), 1);
        assert_eq!(
            platforms[0]["uri"].as_str(),
            Some(
                "https://github.com/k8sm/k8sm/releases/download/v1.2.3/kubectl-k8sm-linux-amd64.tar.gz"
            )
        );
        assert_eq!(platforms[0]["sha256"].as_str(), Some(&*"a".repeat(64)));
        assert_eq!(platforms[0]["bin"].as_str(), Some(PLUGIN));
        let files: Vec<&str> = platforms[0]["files"]
            .as_sequence()
            .unwrap()
            .iter()
            .filter_map(|f| f["from"].as_str())
            .collect();
        assert_eq!(files, [PLUGIN, COMPLETION_SHIM, "LICENSE"]);
        assert!(
            manifest["spec"]["caveats"]
                .as_str()
                .is_some_and(|c| c.contains("store/k8sm/v1.2.3/kubectl_complete-k8sm")),
            "the caveats say where the shim is"
        );
        assert!(!text.contains("REPOSITORY") && !text.contains("{{"));
        assert!(
            manifest["spec"]["homepage"]
                .as_str()
                .is_some_and(|h| h.ends_with("/k8sm/k8sm"))
        );

        let two = render(
            &template(),
            "v1.2.3",
            &[
                archive("linux", "amd64", 'a'),
                archive("linux", "arm64", 'b'),
            ],
        )
        .unwrap();
        let manifest: serde_yaml::Value = serde_yaml::from_str(&two).unwrap();
        assert_eq!(
            manifest["spec"]["platforms"].as_sequence().unwrap().len(),
            2
        );
    }

    /// The template offers krew-release-bot exactly the archives a release builds.
    #[test]
    fn the_template_lists_the_platforms_built() {
        let archives: Vec<Archive> = PLATFORMS
            .iter()
            .map(|p| archive(p.os, p.arch, 'a'))
            .collect();
        let text = render(&template(), "v1", &archives).unwrap();
        let manifest: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        let rendered = manifest["spec"]["platforms"].as_sequence().unwrap().len();
        let offered = template().matches("{{ addURIAndSha").count();
        assert_eq!((rendered, offered), (PLATFORMS.len(), PLATFORMS.len()));
    }

    #[test]
    fn refuses_an_archive_the_template_has_no_platform_for() {
        let error = render(&template(), "v1", &[archive("plan9", "mips", 'a')]).unwrap_err();
        assert!(error.to_string().contains("no platform"), "{error}");
    }

    #[test]
    fn refuses_a_template_with_unknown_placeholders() {
        let template = template().replace("homepage:", "homepage: {{ .Other }}");
        assert!(render(&template, "v1", &[archive("linux", "amd64", 'a')]).is_err());
    }
}
