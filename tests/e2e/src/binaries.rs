//! k8sm's own binaries (controller, agent, plugin) run as real child processes, stopped when their
//! guard drops.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Binaries already (re)built by this test process.
static BUILT: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Path of a workspace binary, brought up to date with `cargo build` once per test process, so that
/// running one test file alone never uses a stale binary (under `cargo xtask test` the build is a
/// no-op).
pub fn binary(name: &str) -> PathBuf {
    // target/<profile>/deps/<test-binary> → target/<profile>/<name>
    let exe = std::env::current_exe().expect("the test executable's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/");
    let path = profile_dir.join(name);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !built.iter().any(|b| b == name) {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut build = Command::new(cargo);
        build
            .current_dir(crate::workspace_root())
            .args(["build", "--bin", name]);
        if profile_dir.file_name().is_some_and(|p| p == "release") {
            build.arg("--release");
        }
        // Cargo gave this test its own package's variables (CARGO_PKG_NAME, CARGO_MANIFEST_DIR, …);
        // build scripts rerun when those change, so passing them on would rebuild half the
        // dependency tree every time.
        for (var, _) in std::env::vars_os() {
            let var = var.to_string_lossy();
            let package_specific = ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_BIN_"]
                .iter()
                .any(|p| var.starts_with(p))
                || [
                    "CARGO_CRATE_NAME",
                    "CARGO_PRIMARY_PACKAGE",
                    "CARGO_TARGET_TMPDIR",
                    "OUT_DIR",
                ]
                .contains(&&*var);
            if package_specific {
                build.env_remove(&*var);
            }
        }
        let status = build.status().expect("cargo runs");
        assert!(status.success(), "cargo build --bin {name} failed");
        built.push(name.to_owned());
    }
    path
}

/// A child process of a test, killed (and reaped) when dropped, also when the test panics.
#[derive(Debug)]
pub struct ChildGuard {
    pub name: String,
    child: Mutex<Option<Child>>,
    pub log: PathBuf,
}

impl ChildGuard {
    /// Starts `program args…` with output appended to `log`, under `setpriv --pdeathsig KILL` so
    /// that it cannot outlive the test process.
    pub fn spawn(name: &str, program: &Path, args: &[String], log: &Path) -> Self {
        Self::spawn_with_env(name, program, args, &[], log)
    }

    /// Like [`ChildGuard::spawn`], with these environment variables set too.
    pub fn spawn_with_env(
        name: &str,
        program: &Path,
        args: &[String],
        env: &[(&str, &str)],
        log: &Path,
    ) -> Self {
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .expect("log file");
        let err = out.try_clone().expect("log handle");
        let child = Command::new("setpriv")
            .args(["--pdeathsig", "KILL", "--"])
            .arg(program)
            .args(args)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info,kube=warn".into()),
            )
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        Self {
            name: name.to_owned(),
            child: Mutex::new(Some(child)),
            log: log.to_owned(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.lock().as_ref().map(Child::id).unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends a signal (SIGKILL for crash tests) and reaps the process.
    pub fn kill_with(&self, signal: Signal) {
        let taken = self.lock().take();
        if let Some(mut child) = taken {
            // Exited and reaped already (its PID may be another process's by now): nothing to stop.
            if child.try_wait().ok().flatten().is_some() {
                return;
            }
            let _ = kill(Pid::from_raw(child.id() as i32), signal);
            if signal != Signal::SIGKILL {
                std::thread::sleep(std::time::Duration::from_millis(500));
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }

    /// Panics with the end of the log if the process has exited.
    pub fn assert_running(&self) {
        let status = self
            .lock()
            .as_mut()
            .and_then(|child| child.try_wait().ok().flatten());
        if let Some(status) = status {
            panic!(
                "{} exited ({status}); log {}:\n{}",
                self.name,
                self.log.display(),
                self.log_tail(60)
            );
        }
    }

    /// Waits up to `timeout` for the process to exit by itself; its exit status, if it did.
    pub fn wait_exit(&self, timeout: std::time::Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self
                .lock()
                .as_mut()
                .and_then(|child| child.try_wait().ok().flatten())
            {
                return Some(status);
            }
            if std::time::Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// Sends SIGTERM, as a service manager stopping the process does, and waits up to `timeout` for
    /// it to exit; its exit status, if it did. Unlike [`ChildGuard::kill_with`], never kills it.
    pub fn terminate(&self, timeout: std::time::Duration) -> Option<std::process::ExitStatus> {
        if let Some(child) = self.lock().as_ref() {
            kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM)
                .unwrap_or_else(|e| panic!("SIGTERM to {}: {e}", self.name));
        }
        self.wait_exit(timeout)
    }

    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

/// How many of its last lines a failed test prints of each of its processes' logs.
const LOG_TAIL_LINES: usize = 300;

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.kill_with(Signal::SIGTERM);
        // The log sits in the cluster's temporary directory, which goes with the test: a failed
        // test prints its tail, so that what the process did lands in the test's own output.
        if std::thread::panicking() {
            println!(
                "--- {} (the last {LOG_TAIL_LINES} lines of {})",
                self.name,
                self.log.display()
            );
            println!("{}", self.log_tail(LOG_TAIL_LINES));
        }
    }
}
