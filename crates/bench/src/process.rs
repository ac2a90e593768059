//! Child processes of the benchmark (the controller, the simulated executors) and what `/proc` says
//! about their cost: CPU seconds and peak resident memory.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::Context;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::{Pid, SysconfVar, sysconf};

/// A child process, stopped (SIGTERM, then SIGKILL) when dropped. Started under `setpriv
/// --pdeathsig KILL`, like the end-to-end tests' children, so it cannot outlive the benchmark; and
/// in a process group of its own, stopped whole, so that what it started stops with it (a wrapper
/// script given with `--bin-dir`, e.g. one that runs the controller under a profiler, would
/// otherwise leave the controller running).
pub struct ChildProcess {
    pub name: String,
    pub log: PathBuf,
    child: Option<Child>,
}

impl ChildProcess {
    /// Starts `program args…` with `env`, its output appended to `log`. `setpriv` execs the
    /// program, so the pid is the program's own.
    pub fn spawn(
        name: &str,
        program: &Path,
        args: &[String],
        env: &[(&str, &str)],
        log: &Path,
    ) -> anyhow::Result<Self> {
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        let err = out.try_clone()?;
        let child = Command::new("setpriv")
            .args(["--pdeathsig", "KILL", "--"])
            .arg(program)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {name} ({})", program.display()))?;
        Ok(Self {
            name: name.to_owned(),
            log: log.to_owned(),
            child: Some(child),
        })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Fails with the end of its log if the process has exited.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self
            .child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
        {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            anyhow::bail!(
                "{} exited ({status}); end of {}:\n{}",
                self.name,
                self.log.display(),
                tail.join("\n")
            );
        }
        Ok(())
    }

    /// What `/proc` says about the process now.
    pub fn sample(&self) -> anyhow::Result<ProcSample> {
        let pid = self.pid().context("the process was stopped")?;
        ProcSample::read(pid)
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // The group's id is the child's pid: it leads the group it was started in.
            let group = Pid::from_raw(child.id() as i32);
            let _ = killpg(group, Signal::SIGTERM);
            for _ in 0..20 {
                if child.try_wait().ok().flatten().is_some() {
                    // Whatever it started and left behind.
                    let _ = killpg(group, Signal::SIGKILL);
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            let _ = killpg(group, Signal::SIGKILL);
            let _ = child.wait();
        }
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// CPU time and peak memory of a process, from `/proc/<pid>/stat` and `/proc/<pid>/status`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProcSample {
    /// User + system CPU seconds of all its threads so far.
    pub cpu_seconds: f64,
    /// Peak resident set size (`VmHWM`), bytes.
    pub peak_rss_bytes: u64,
}

impl ProcSample {
    pub fn read(pid: u32) -> anyhow::Result<Self> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let ticks = cpu_ticks(&stat).context("parsing /proc/<pid>/stat")?;
        let hz = sysconf(SysconfVar::CLK_TCK)?.unwrap_or(100) as f64;
        let peak_kb = status_kb(&status, "VmHWM").context("VmHWM in /proc/<pid>/status")?;
        Ok(Self {
            cpu_seconds: ticks as f64 / hz,
            peak_rss_bytes: peak_kb * 1024,
        })
    }
}

/// `utime + stime` (clock ticks) from the text of `/proc/<pid>/stat`.
pub fn cpu_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may contain spaces: count fields after the
    // last ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Field 3 (state) is fields[0]; utime is field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// A `kB` value of `/proc/<pid>/status`, e.g. `VmHWM`.
pub fn status_kb(status: &str, key: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let value = line.strip_prefix(key)?.strip_prefix(':')?;
        value.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_add_user_and_system_time_past_a_tricky_command_name() {
        let stat = "4242 (k8sm (ctl) x) S 1 4242 4242 0 -1 4194560 2000 0 0 0 1234 567 0 0 20 0 9 0 100 \
                    1000000 5000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(cpu_ticks(stat), Some(1234 + 567));
        assert_eq!(cpu_ticks("garbage"), None);
    }

    #[test]
    fn status_values_are_read_in_kilobytes() {
        let status = "Name:\tk8sm-controller\nVmPeak:\t  900000 kB\nVmHWM:\t   51200 kB\nVmRSS:\t   40000 kB\n";
        assert_eq!(status_kb(status, "VmHWM"), Some(51_200));
        assert_eq!(status_kb(status, "VmRSS"), Some(40_000));
        assert_eq!(status_kb(status, "VmSwap"), None);
    }

    #[test]
    fn this_process_can_be_sampled() {
        let sample = ProcSample::read(std::process::id()).unwrap();
        assert!(sample.peak_rss_bytes > 0);
        assert!(sample.cpu_seconds >= 0.0);
    }

    /// A wrapper that starts the real program as its own child (as a profiling wrapper does):
    /// stopping the wrapper stops the program too. The program ignores SIGTERM, as a slow one
    /// would, so only the group's SIGKILL stops it.
    #[test]
    fn stopping_a_wrapper_stops_what_it_started() {
        let dir = std::env::temp_dir().join(format!("k8sm-bench-process-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pid_file = dir.join("grandchild.pid");
        let script = format!(
            "sh -c 'trap \"\" TERM; echo $$ > {pid}; while :; do sleep 1; done' & wait",
            pid = pid_file.display()
        );
        let mut wrapper = ChildProcess::spawn(
            "wrapper",
            Path::new("sh"),
            &["-c".to_owned(), script],
            &[],
            &dir.join("log"),
        )
        .unwrap();
        let grandchild = (0..200)
            .find_map(|_| {
                let pid = std::fs::read_to_string(&pid_file)
                    .ok()
                    .and_then(|text| text.trim().parse::<i32>().ok());
                if pid.is_none() {
                    std::thread::sleep(std::time::Duration::from_millis(25));
                }
                pid
            })
            .expect("the wrapper's child wrote its pid");
        wrapper.stop();
        // Killed, and reaped by init once its parent is gone: give it a moment to disappear.
        let gone = (0..200).any(|_| {
            let alive = Path::new(&format!("/proc/{grandchild}")).exists()
                && !std::fs::read_to_string(format!("/proc/{grandchild}/stat")).is_ok_and(|stat| {
                    stat.split(") ")
                        .nth(1)
                        .is_some_and(|rest| rest.starts_with('Z'))
                });
            if alive {
                std::thread::sleep(std::time::Duration::from_millis(25));
            }
            !alive
        });
        let _ = std::fs::remove_dir_all(&dir);
        if !gone {
            let _ = nix::sys::signal::kill(Pid::from_raw(grandchild), Signal::SIGKILL);
        }
        assert!(
            gone,
            "the wrapper's child {grandchild} outlived the wrapper"
        );
    }
}
