//! Child processes of a test cluster: started with their logs in files, tied to their parent,
//! stopped on drop.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::Error;

/// How long a process gets to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// A process this harness started. Dropping it stops it (SIGTERM, then SIGKILL) and reaps it.
///
/// Only processes started through [`ManagedProcess::spawn`] are ever signalled: the harness never
/// looks processes up by name, so it cannot touch one it did not start.
#[derive(Debug)]
pub struct ManagedProcess {
    name: String,
    child: Option<Child>,
    log: PathBuf,
    /// The command line, to start the process again ([`ManagedProcess::respawn`]).
    program: PathBuf,
    args: Vec<String>,
}

impl ManagedProcess {
    /// Starts `program` with `args`, stdout and stderr appended to `log`.
    ///
    /// The process runs under `setpriv --pdeathsig KILL`, so the kernel kills it if the thread that
    /// started it dies without running destructors (a SIGKILLed test run, an abort): no
    /// orphaned etcd outlives its test.
    pub fn spawn(name: &str, program: &Path, args: &[String], log: &Path) -> Result<Self, Error> {
        let child = launch(name, program, args, log)?;
        Ok(Self {
            name: name.to_owned(),
            child: Some(child),
            log: log.to_owned(),
            program: program.to_owned(),
            args: args.to_vec(),
        })
    }

    /// The same command, not started (see [`ManagedProcess::respawn`]); stands in while this one is
    /// being stopped.
    pub(crate) fn not_started(&self) -> Self {
        Self {
            name: self.name.clone(),
            child: None,
            log: self.log.clone(),
            program: self.program.clone(),
            args: self.args.clone(),
        }
    }

    /// Starts the process again with the same command line and log (appended to), as a supervisor
    /// restarts a component that exited. An instance still running is killed first.
    pub fn respawn(&mut self) -> Result<(), Error> {
        if let Some(mut old) = self.child.take() {
            let _ = old.kill();
            let _ = old.wait();
        }
        self.child = Some(launch(&self.name, &self.program, &self.args, &self.log)?);
        Ok(())
    }

    /// Whether the process was started and has exited by itself since.
    pub fn has_exited(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|child| matches!(child.try_wait(), Ok(Some(_))))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Fails with the end of the process's log when it has already exited.
    pub fn check_running(&mut self) -> Result<(), Error> {
        let Some(child) = self.child.as_mut() else {
            return Err(self.exited("was stopped"));
        };
        match child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(self.exited(&format!("exited with {status}"))),
            Err(source) => Err(Error::Io {
                context: format!("checking on {}", self.name),
                source,
            }),
        }
    }

    fn exited(&self, how: &str) -> Error {
        Error::ProcessExited {
            name: self.name.clone(),
            how: how.to_owned(),
            log: self.log.clone(),
            log_tail: log_tail(&self.log, 40),
        }
    }

    /// Sends a signal without waiting (used by tests that inject faults, e.g. SIGKILL or SIGSTOP).
    pub fn signal(&self, signal: Signal) -> Result<(), Error> {
        let pid = self.pid().ok_or_else(|| self.exited("was stopped"))?;
        kill(Pid::from_raw(pid as i32), signal).map_err(|errno| Error::Io {
            context: format!("sending {signal} to {}", self.name),
            source: errno.into(),
        })
    }

    /// Stops the process: SIGTERM, then SIGKILL after a grace period. Idempotent.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        // The direct child is setpriv's exec of the real binary, so this pid is the component
        // itself.
        let pid = Pid::from_raw(child.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                tracing::debug!(name = %self.name, "stopped");
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        tracing::debug!(name = %self.name, "killed after grace period");
    }
}

impl Drop for ManagedProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts `program` with `args` under `setpriv --pdeathsig KILL`, stdout and stderr appended to
/// `log`.
fn launch(name: &str, program: &Path, args: &[String], log: &Path) -> Result<Child, Error> {
    let out = File::options()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|source| Error::Io {
            context: format!("opening log {}", log.display()),
            source,
        })?;
    let err = out.try_clone().map_err(|source| Error::Io {
        context: format!("duplicating log handle {}", log.display()),
        source,
    })?;
    let child = Command::new("setpriv")
        .arg("--pdeathsig")
        .arg("KILL")
        .arg("--")
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|source| Error::Io {
            context: format!(
                "starting {name} ({}) under setpriv (from util-linux)",
                program.display()
            ),
            source,
        })?;
    tracing::debug!(name, pid = child.id(), "started");
    Ok(child)
}

/// The last `lines` lines of a log file, for error messages.
pub fn log_tail(path: &Path, lines: usize) -> String {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(could not read {}: {e})", path.display()),
    }
}
