//! Free loopback ports, so that several clusters can run side by side, in one process or in
//! several (the gate runs end-to-end test binaries in parallel).

use std::fs::{File, OpenOptions};
use std::net::TcpListener;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Mutex;

use crate::Error;

/// Lock files of the ports this process holds, kept open until it exits: the kernel releases the
/// locks then, even after a crash, so a port is never claimed twice by live processes.
static CLAIMED: Mutex<Vec<File>> = Mutex::new(Vec::new());

/// Below Linux's default ephemeral range (32768–60999): a client's outgoing connection cannot take
/// a claimed port in the seconds before its component binds it, as one from `bind(0)` could.
const RANGE: Range<u16> = 20000..32768;

/// A port on 127.0.0.1 that is free now and that no other live process using this function holds.
///
/// Another program could still bind it before the component does, which is unlikely enough that a
/// start-up failure is reported rather than retried here.
pub fn free_port() -> Result<u16, Error> {
    let dir = std::env::temp_dir().join("k8sm-testcluster-ports");
    std::fs::create_dir_all(&dir)
        .map_err(|source| crate::error::io(format!("creating {}", dir.display()), source))?;
    let span = u32::from(RANGE.end - RANGE.start);
    // Processes start their search at different places, so they seldom contend for a lock.
    let start = std::process::id().wrapping_mul(7919) % span;
    let mut claimed = CLAIMED.lock().unwrap_or_else(|p| p.into_inner());
    for step in 0..span {
        let port = RANGE.start + ((start + step * 13) % span) as u16;
        let Some(lock) = try_claim(&dir, port)? else {
            continue;
        };
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            claimed.push(lock);
            return Ok(port);
        }
    }
    Err(Error::Setup(format!(
        "no free port in 127.0.0.1:{}..{}",
        RANGE.start, RANGE.end
    )))
}

/// The port's lock file, locked by this process, or None when another process holds it (or this one
/// already does: locks are per open file, so a second open of our own lock fails too).
fn try_claim(dir: &std::path::Path, port: u16) -> Result<Option<File>, Error> {
    let path: PathBuf = dir.join(port.to_string());
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| crate::error::io(format!("opening {}", path.display()), source))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(source)) => Err(crate::error::io(
            format!("locking {}", path.display()),
            source,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_never_handed_out_twice() {
        let ports: Vec<u16> = (0..50).map(|_| free_port().unwrap()).collect();
        let mut unique = ports.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), ports.len(), "{ports:?}");
        assert!(ports.iter().all(|p| RANGE.contains(p)));
    }

    #[test]
    fn a_port_locked_by_another_process_is_not_claimed() {
        let dir = std::env::temp_dir().join(format!("k8sm-ports-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let port = 20000;
        // A child holds the lock as another test binary would: the shell opens the file, flock(1)
        // locks it, and the shell becomes `sleep`, the lock's only holder.
        let mut holder = std::process::Command::new("sh")
            .args(["-c", r#"exec 9>"$0" && flock 9 && exec sleep 30"#])
            .arg(dir.join(port.to_string()))
            .spawn()
            .unwrap();
        let refused = (0..100).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(50));
            try_claim(&dir, port).unwrap().is_none()
        });
        holder.kill().unwrap();
        holder.wait().unwrap();
        let claimed_after = try_claim(&dir, port).unwrap().is_some();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(refused, "a port locked by another process was claimed");
        assert!(claimed_after, "the lock was not released with its process");
    }
}
