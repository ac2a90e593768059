//! The allocator's settings, which mimalloc reads from the environment once, as the process starts:
//! the process starts itself again with them when they are not there.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// How long (ms) mimalloc keeps the memory that a pass freed before it gives it back to the
/// system (its default: 10 ms, and 100 ms for its arenas). A large fleet's pass takes longer than
/// that and frees most of what it allocated: given back at the default, the next pass took it
/// again page by page (1,700 page faults a pass at 10,000 nodes, a twelfth of its time). At 1 s
/// a pass reuses it; an idle controller still gives it back (docs/decisions/0003-fleet-scale.md).
pub const PURGE_DELAY: (&str, &str) = ("MIMALLOC_PURGE_DELAY", "1000");

/// The settings missing from `environment`: an operator's own value of one is kept.
fn missing(
    environment: impl IntoIterator<Item = (OsString, OsString)>,
) -> Vec<(&'static str, &'static str)> {
    let set: Vec<OsString> = environment.into_iter().map(|(key, _)| key).collect();
    [PURGE_DELAY]
        .into_iter()
        .filter(|(key, _)| !set.iter().any(|k| k == key))
        .collect()
}

/// Replaces this process (same ID, same arguments) by one whose environment carries the
/// allocator's settings, unless it does already. To be called first thing in `main`, before any
/// thread starts. Returns only when nothing was missing, or when the replacement failed (the
/// process then goes on with mimalloc's defaults: slower, not wrong), with why.
pub fn start_with_settings() -> Result<(), std::io::Error> {
    let missing = missing(std::env::vars_os());
    if missing.is_empty() {
        return Ok(());
    }
    let mut arguments = std::env::args_os();
    let name = arguments.next().unwrap_or_default();
    // The running binary, from /proc; where /proc is not mounted, the name it was started by.
    let program = std::env::current_exe().map_or_else(|_| name.clone(), OsString::from);
    let error = Command::new(program)
        .arg0(name)
        .args(arguments)
        .envs(missing)
        .exec();
    Err(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn environment(keys: &[&str]) -> Vec<(OsString, OsString)> {
        keys.iter()
            .map(|k| (OsString::from(k), OsString::from("5")))
            .collect()
    }

    #[test]
    fn a_setting_is_added_unless_the_environment_has_it() {
        assert_eq!(missing(environment(&["HOME", "PATH"])), vec![PURGE_DELAY]);
        assert_eq!(
            missing(environment(&["HOME", "MIMALLOC_PURGE_DELAY"])),
            vec![]
        );
    }
}
