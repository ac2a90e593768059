//! What `cargo xtask image` and `cargo xtask dist` share: the release's name, version and revision,
//! and the statically linked release build of k8sm's binaries they package.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use crate::workspace;

/// The workspace's version (xtask shares it): the images' tag and the plugin release's `v` tag.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Where the project lives: the Go modules of `tests/go` are named after it too.
pub const SOURCE: &str = "https://github.com/k8sm/k8sm";

/// The workspace's license (every crate inherits it).
pub const LICENSE: &str = "Apache-2.0";

/// The one Rust target this machine builds (no other target is installed, and none can be
/// downloaded): Linux on x86-64, which krew and the OCI platform call linux/amd64.
pub const TARGET: &str = "x86_64-unknown-linux-gnu";
pub const OS: &str = "linux";
pub const ARCH: &str = "amd64";

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

/// Builds the [`RELEASE_BINARIES`] for [`TARGET`], statically linked, and returns the path of each
/// of `binaries`, after checking that none needs a dynamic loader. All are built together whichever
/// are asked for: their shared dependencies are then built once, with one set of features, for the
/// images and the plugin alike.
///
/// With [`STATIC_RUSTFLAGS`], in its own target directory, `target/static`, so that its flags never
/// invalidate the ordinary builds and its lock never waits on theirs.
pub fn build_static(binaries: &[&str], profile: Profile) -> anyhow::Result<Vec<PathBuf>> {
    let target_dir = workspace::root().join("target/static");
    let mut cargo = workspace::cargo();
    cargo
        .args(["build", "--locked", "--target", TARGET, "--profile"])
        .arg(profile.cargo_name())
        .arg("--target-dir")
        .arg(&target_dir)
        // Only this target's crates: build scripts and proc macros run on the host and need no
        // static linking.
        .env(
            format!(
                "CARGO_TARGET_{}_RUSTFLAGS",
                TARGET.to_uppercase().replace('-', "_")
            ),
            STATIC_RUSTFLAGS,
        );
    for binary in RELEASE_BINARIES {
        cargo.args(["-p", binary]);
    }
    workspace::run(
        &format!(
            "cargo build --profile {} --target {TARGET}, statically linked: {}",
            profile.cargo_name(),
            RELEASE_BINARIES.join(", ")
        ),
        &mut cargo,
    )?;
    let dir = target_dir.join(TARGET).join(profile.dir());
    binaries
        .iter()
        .map(|binary| {
            anyhow::ensure!(
                RELEASE_BINARIES.contains(binary),
                "{binary} is not a release binary"
            );
            let path = dir.join(binary);
            check_static(&path)?;
            Ok(path)
        })
        .collect()
}

/// Fails unless `path` is an ELF executable without a program interpreter (`PT_INTERP`): one that
/// the kernel starts by itself, with no dynamic loader or shared libraries in the image.
pub fn check_static(path: &Path) -> anyhow::Result<()> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    match elf_interpreter(&bytes) {
        Ok(None) => Ok(()),
        Ok(Some(interpreter)) => bail!(
            "{} is dynamically linked (it needs {interpreter}): it would not run in an image without a base",
            path.display()
        ),
        Err(why) => bail!("{}: {why}", path.display()),
    }
}

/// The program interpreter a 64-bit little-endian ELF file asks for, if any.
fn elf_interpreter(bytes: &[u8]) -> Result<Option<String>, String> {
    const PT_INTERP: u32 = 3;
    if bytes.get(..4) != Some(b"\x7fELF".as_slice()) {
        return Err("not an ELF file".into());
    }
    if bytes.get(4) != Some(&2) || bytes.get(5) != Some(&1) {
        return Err("not a 64-bit little-endian ELF file".into());
    }
    let u16_at = |at: usize| -> Result<usize, String> {
        bytes
            .get(at..at + 2)
            .map(|b| usize::from(u16::from_le_bytes([b[0], b[1]])))
            .ok_or_else(|| "truncated ELF header".to_owned())
    };
    let u64_at = |at: usize| -> Result<usize, String> {
        bytes
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
            .and_then(|v| usize::try_from(v).ok())
            .ok_or_else(|| "truncated ELF header".to_owned())
    };
    let (phoff, phentsize, phnum) = (u64_at(0x20)?, u16_at(0x36)?, u16_at(0x38)?);
    for index in 0..phnum {
        let header = phoff + index * phentsize;
        let kind = bytes
            .get(header..header + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
            .ok_or("truncated program header")?;
        if kind == PT_INTERP {
            let (offset, size) = (u64_at(header + 8)?, u64_at(header + 32)?);
            let name = bytes
                .get(offset..offset + size)
                .ok_or("truncated interpreter name")?;
            return Ok(Some(
                String::from_utf8_lossy(name)
                    .trim_end_matches('\0')
                    .to_owned(),
            ));
        }
    }
    Ok(None)
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
    fn finds_the_interpreter_of_a_dynamic_executable_and_none_in_a_static_one() {
        // This test's own executable is an ordinary (dynamic) build; the static busybox of the
        // image, when present, is the counter-example.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let interpreter = elf_interpreter(&me).unwrap();
        assert!(
            interpreter
                .as_deref()
                .is_some_and(|i| i.contains("ld-linux")),
            "{interpreter:?}"
        );
        assert!(check_static(&std::env::current_exe().unwrap()).is_err());
        assert!(elf_interpreter(b"#!/bin/sh\n").is_err());
    }
}
