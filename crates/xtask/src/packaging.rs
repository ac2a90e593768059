//! The release packaging of `cargo xtask test` (images and krew release for every platform),
//! built beside the tests at the lowest CPU priority: the release builds are the gate's longest
//! CPU work, and the end-to-end tests mostly wait on their clusters, so the builds take the idle
//! cores without stretching the tests' timings.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use anyhow::{Context, anyhow};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::{dist, image, workspace};

/// `cargo xtask image` then `cargo xtask dist`, running in the background.
pub struct Packaging {
    child: Mutex<Option<Child>>,
    log: PathBuf,
    started: Instant,
    outcome: OnceLock<Result<(), String>>,
}

impl Packaging {
    /// Starts the packaging: this very xtask, niced, with its output in `target/e2e-logs/`.
    pub fn start() -> anyhow::Result<Self> {
        let logs = workspace::root().join("target/e2e-logs");
        std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
        let log = logs.join("packaging.log");
        let out = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let xtask = std::env::current_exe().context("the xtask executable's path")?;
        let script = format!(
            r#""$0" image --out {images} && "$0" dist --out {dist}"#,
            images = image::DEFAULT_OUT,
            dist = dist::DEFAULT_OUT
        );
        eprintln!(
            "==> the release packaging (images, krew release) builds beside the tests, niced: {}",
            log.display()
        );
        let child = Command::new("nice")
            .args(["-n", "19", "sh", "-c", &script])
            .arg(xtask)
            .current_dir(workspace::root())
            // Its own process group, so that stopping it stops the cargo and compilers under it.
            .process_group(0)
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .context("starting the release packaging (nice, sh)")?;
        Ok(Packaging {
            child: Mutex::new(Some(child)),
            log,
            started: Instant::now(),
            outcome: OnceLock::new(),
        })
    }

    /// Where the images are, once [`Packaging::wait`] succeeded.
    pub fn images(&self) -> PathBuf {
        workspace::root().join(image::DEFAULT_OUT)
    }

    /// Blocks until the packaging is done (callers after the first get the same answer).
    pub fn wait(&self) -> anyhow::Result<()> {
        let outcome = self.outcome.get_or_init(|| {
            let child = self.child.lock().unwrap_or_else(|e| e.into_inner()).take();
            let Some(mut child) = child else {
                return Err("the packaging was stopped".to_owned());
            };
            match child.wait() {
                Ok(status) if status.success() => {
                    eprintln!(
                        "==> release packaging done in {:.0} s",
                        self.started.elapsed().as_secs_f64()
                    );
                    Ok(())
                }
                Ok(status) => Err(format!("{status}")),
                Err(e) => Err(format!("waiting for it: {e}")),
            }
        });
        outcome.clone().map_err(|why| {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(60).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            anyhow!(
                "the release packaging failed ({why}); the end of {}:\n{}",
                self.log.display(),
                tail.join("\n")
            )
        })
    }
}

impl Drop for Packaging {
    /// A gate that fails early stops its packaging, the whole process group.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let pid = i32::try_from(child.id()).expect("a pid fits i32");
            let _ = killpg(Pid::from_raw(pid), Signal::SIGTERM);
            let _ = child.wait();
        }
    }
}
