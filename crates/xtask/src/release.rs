//! What `cargo xtask image` and `cargo xtask dist` share: the release's name, version and revision,
//! and the statically linked release build of k8sm's binaries they package.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, anyhow, bail, ensure};

use crate::{executable, workspace};

/// The workspace's version (xtask shares it): the images' tag and the plugin release's `v` tag.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Where the project lives: the Go modules of `tests/go` are named after it too.
pub const SOURCE: &str = "https://github.com/k8sm/k8sm";

/// The workspace's license (every crate inherits it).
pub const LICENSE: &str = "Apache-2.0";

/// A platform a release is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Platform {
    /// The Rust target: glibc, linked statically (see [`STATIC_RUSTFLAGS`]).
    pub triple: &'static str,
    /// The name krew and the OCI platform give its OS and architecture.
    pub os: &'static str,
    pub arch: &'static str,
    /// The ELF `e_machine` of its binaries.
    pub machine: u16,
    /// The C cross compiler that links its binaries and compiles ring's C code, and the Debian
    /// packages that bring it with the target's static glibc; `None` for this machine's own.
    pub cross_gcc: Option<(&'static str, &'static str)>,
    /// The user-mode emulator (Debian's qemu-user) that runs its binaries on another machine.
    pub emulator: &'static str,
}

impl Platform {
    /// `linux/arm64`.
    pub fn name(&self) -> String {
        format!("{}/{}", self.os, self.arch)
    }

    /// Whether this machine runs its binaries.
    pub fn is_host(&self) -> bool {
        self.os == std::env::consts::OS && self.triple.starts_with(std::env::consts::ARCH)
    }

    /// A command that runs `binary`, one of its binaries, here: itself on its own machine, else
    /// through [`Platform::emulator`].
    pub fn run(&self, binary: &Path) -> Command {
        if self.is_host() {
            Command::new(binary)
        } else {
            let mut emulated = Command::new(self.emulator);
            emulated.arg(binary);
            emulated
        }
    }
}

pub const LINUX_AMD64: Platform = Platform {
    triple: "x86_64-unknown-linux-gnu",
    os: "linux",
    arch: "amd64",
    machine: executable::EM_X86_64,
    cross_gcc: None,
    emulator: "qemu-x86_64",
};

/// Cross-built here with Debian's aarch64 GCC; its standard library comes from rustup (.ci/run
/// installs both).
pub const LINUX_ARM64: Platform = Platform {
    triple: "aarch64-unknown-linux-gnu",
    os: "linux",
    arch: "arm64",
    machine: executable::EM_AARCH64,
    cross_gcc: Some((
        "aarch64-linux-gnu-gcc",
        "gcc-aarch64-linux-gnu libc6-dev-arm64-cross",
    )),
    emulator: "qemu-aarch64",
};

/// Every platform a release is built for: both images (one multi-arch index each) and the plugin's
/// archives. Not macOS: the plugin's TLS roots (security-framework, through kube's rustls) link
/// Apple's Security and CoreFoundation frameworks, which no toolchain from the registries has (zig
/// links libSystem without the SDK, but not frameworks).
pub const PLATFORMS: [Platform; 2] = [LINUX_AMD64, LINUX_ARM64];

/// The build profile of what is packaged.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// Optimised: what a release ships.
    Release,
    /// Unoptimised, statically linked all the same: quicker to build, for trying the packaging
    /// itself.
    Dev,
}

impl Profile {
    fn cargo_name(self) -> &'static str {
        match self {
            Profile::Release => "release",
            Profile::Dev => "dev",
        }
    }

    /// The directory cargo builds into under `target/<triple>/`.
    fn dir(self) -> &'static str {
        match self {
            Profile::Release => "release",
            Profile::Dev => "debug",
        }
    }
}

/// `git rev-parse HEAD` of the workspace, with `-dirty` when the work tree has changes, so that a
/// label never claims a commit the binaries were not built from.
pub fn revision() -> anyhow::Result<String> {
    let head = git(&["rev-parse", "HEAD"])?;
    let changes = git(&["status", "--porcelain", "--untracked-files=no"])?;
    Ok(if changes.is_empty() {
        head
    } else {
        format!("{head}-dirty")
    })
}

fn git(args: &[&str]) -> anyhow::Result<String> {
    let output = Command::new("git")
        .current_dir(workspace::root())
        .args(args)
        .output()
        .with_context(|| format!("running git {}", args.join(" ")))?;
    if !output.status.success() {
        bail!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// The flags of the static build (the Containerfile's build uses the same; a test checks it).
///
/// `+crt-static`: static glibc (libc.a from libc6-dev), because no musl target is installed; the
/// binaries resolve no host names through NSS (in a cluster the API server is an address), so
/// glibc's static-NSS caveat does not bite. `getrandom_backend="linux_getrandom"`: getrandom 0.3
/// and later look `getrandom` up with `dlsym`, which finds nothing in a static binary, and then
/// fall back to reading /dev/urandom; the image test caught the controller panicking on that in a
/// root with no /dev. This makes them call glibc's `getrandom` (the system call) directly.
/// `strip=symbols`: a third of the size.
pub const STATIC_RUSTFLAGS: &str =
    "-C target-feature=+crt-static --cfg getrandom_backend=\"linux_getrandom\" -C strip=symbols";

/// Every binary a release packages (each the binary of the package of the same name).
pub const RELEASE_BINARIES: [&str; 3] = ["k8sm-controller", "k8sm-agent", "kubectl-k8sm"];

/// Builds the [`RELEASE_BINARIES`] for `platform`, statically linked, and returns the path of each
/// of `binaries`, after checking that each is for the platform's machine and needs no dynamic
/// loader. All are built together whichever are asked for: their shared dependencies are then built
/// once, with one set of features, for the images and the plugin alike, and a second call is a
/// no-op.
///
/// With [`STATIC_RUSTFLAGS`], in its own target directory, `target/static`, so that its flags never
/// invalidate the ordinary builds and its lock never waits on theirs.
pub fn build_static(
    platform: Platform,
    binaries: &[&str],
    profile: Profile,
) -> anyhow::Result<Vec<PathBuf>> {
    let target_dir = workspace::root().join("target/static");
    let env_triple = platform.triple.to_uppercase().replace('-', "_");
    let mut cargo = workspace::cargo();
    cargo
        .args([
            "build",
            "--locked",
            "--target",
            platform.triple,
            "--profile",
        ])
        .arg(profile.cargo_name())
        .arg("--target-dir")
        .arg(&target_dir)
        // Only this target's crates: build scripts and proc macros run on the host and need no
        // static linking.
        .env(
            format!("CARGO_TARGET_{env_triple}_RUSTFLAGS"),
            STATIC_RUSTFLAGS,
        );
    if let Some((gcc, packages)) = platform.cross_gcc {
        if Command::new(gcc).arg("--version").output().is_err() {
            bail!(
                "{} needs the cross compiler {gcc} (apt-get install {packages}; .ci/run does)",
                platform.name()
            );
        }
        // ring's C code (through the cc crate) and the link, both for the target.
        cargo
            .env(format!("CARGO_TARGET_{env_triple}_LINKER"), gcc)
            .env(format!("CC_{}", platform.triple.replace('-', "_")), gcc);
    }
    for binary in RELEASE_BINARIES {
        cargo.args(["-p", binary]);
    }
    let started = Instant::now();
    workspace::run(
        &format!(
            "cargo build --profile {} --target {}, statically linked: {}",
            profile.cargo_name(),
            platform.triple,
            RELEASE_BINARIES.join(", ")
        ),
        &mut cargo,
    )
    .with_context(|| {
        format!(
            "building for {} (its Rust standard library: rustup target add {})",
            platform.name(),
            platform.triple
        )
    })?;
    eprintln!(
        "==> {} release binaries up to date in {:.0}s",
        platform.name(),
        started.elapsed().as_secs_f64()
    );
    let dir = target_dir.join(platform.triple).join(profile.dir());
    binaries
        .iter()
        .map(|binary| {
            anyhow::ensure!(
                RELEASE_BINARIES.contains(binary),
                "{binary} is not a release binary"
            );
            let path = dir.join(binary);
            check_static(&path, platform)?;
            Ok(path)
        })
        .collect()
}

/// Fails unless `path` is an ELF executable for `platform`'s machine without a program interpreter
/// (`PT_INTERP`): one that the kernel starts by itself, with no dynamic loader or shared libraries
/// in the image.
pub fn check_static(path: &Path, platform: Platform) -> anyhow::Result<()> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let machine =
        executable::elf_machine(&bytes).map_err(|why| anyhow!("{}: {why}", path.display()))?;
    ensure!(
        machine == platform.machine,
        "{} is for ELF machine {machine}, not {} ({})",
        path.display(),
        platform.machine,
        platform.name()
    );
    match executable::elf_interpreter(&bytes) {
        Ok(None) => Ok(()),
        Ok(Some(interpreter)) => bail!(
            "{} is dynamically linked (it needs {interpreter}): it would not run in an image without a base",
            path.display()
        ),
        Err(why) => bail!("{}: {why}", path.display()),
    }
}

/// `tar` with the options that make an archive depend on the files' contents and modes only: sorted
/// names, root owner, the epoch as every time. GNU tar (every Linux has it) rather than another
/// crate.
pub fn reproducible_tar() -> Command {
    let mut tar = Command::new("tar");
    tar.args([
        "--create",
        "--format=gnu",
        "--sort=name",
        "--owner=0",
        "--group=0",
        "--numeric-owner",
        "--mtime=@0",
    ]);
    tar
}

/// Runs `cmd`, failing with its stderr.
pub fn run_quiet(what: &str, cmd: &mut Command) -> anyhow::Result<String> {
    let output = cmd.output().with_context(|| format!("starting {what}"))?;
    if !output.status.success() {
        bail!(
            "{what} failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Human size: `12.3 MiB`.
pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dynamic_executable_or_one_for_another_machine_is_refused() {
        // This test's own executable is an ordinary (dynamic) build.
        let me = std::env::current_exe().unwrap();
        let host = PLATFORMS.into_iter().find(Platform::is_host).unwrap();
        let error = check_static(&me, host).unwrap_err().to_string();
        assert!(error.contains("dynamically linked"), "{error}");
        let other = PLATFORMS.into_iter().find(|p| !p.is_host()).unwrap();
        let error = check_static(&me, other).unwrap_err().to_string();
        assert!(error.contains(&format!("not {}", other.machine)), "{error}");
    }

    #[test]
    fn platforms_are_named_as_krew_and_oci_name_them() {
        let names: Vec<String> = PLATFORMS.iter().map(Platform::name).collect();
        assert_eq!(names, ["linux/amd64", "linux/arm64"]);
        assert!(LINUX_AMD64.is_host() != LINUX_ARM64.is_host());
    }
}
