//! The clocks a leader's term is measured on. `Instant` is CLOCK_MONOTONIC, which stops while the
//! machine is suspended or its VM paused: a replica resumed after a pause longer than the Lease
//! would still believe it leads. A term is therefore measured on CLOCK_BOOTTIME, which keeps
//! counting through suspend, and on the wall clock as a second check: it ends when either clock
//! passes its deadline.

use std::time::{Duration, SystemTime};

/// The time on both clocks at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    since_boot: Duration,
    wall: SystemTime,
}

impl Reading {
    pub fn now() -> Self {
        Self {
            since_boot: since_boot(),
            wall: SystemTime::now(),
        }
    }

    #[must_use]
    pub fn plus(self, duration: Duration) -> Self {
        Self {
            since_boot: self.since_boot + duration,
            wall: self.wall + duration,
        }
    }

    /// `Ok(left)`: the time left until `deadline`, the shorter of the two clocks'. `Err(ago)`: how
    /// long ago the first of them passed it.
    pub fn until(self, deadline: Self) -> Result<Duration, Duration> {
        let on_boot = deadline.since_boot.checked_sub(self.since_boot);
        let on_wall = deadline.wall.duration_since(self.wall).ok();
        match (on_boot, on_wall) {
            (Some(boot), Some(wall)) if !boot.is_zero() && !wall.is_zero() => Ok(boot.min(wall)),
            _ => Err((self.since_boot.saturating_sub(deadline.since_boot)).max(
                self.wall
                    .duration_since(deadline.wall)
                    .unwrap_or(Duration::ZERO),
            )),
        }
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn since_boot() -> Duration {
    // Present on every Linux since 2.6.39; failing it would mean no clock at all.
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .map(Duration::from)
        .expect("CLOCK_BOOTTIME")
}

/// Elsewhere (a developer's machine), the monotonic clock: the wall clock still ends a term that a
/// suspend outlasted.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn since_boot() -> Duration {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed()
}

#[cfg(test)]
impl Reading {
    /// A reading `boot` and `wall` after an arbitrary origin.
    pub fn at(boot: Duration, wall: Duration) -> Self {
        Self {
            since_boot: boot,
            wall: SystemTime::UNIX_EPOCH + wall,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn the_time_left_is_the_shorter_of_the_two_clocks() {
        let deadline = Reading::at(100 * S, 1000 * S);
        assert_eq!(Reading::at(90 * S, 995 * S).until(deadline), Ok(5 * S));
        assert_eq!(Reading::at(97 * S, 990 * S).until(deadline), Ok(3 * S));
    }

    #[test]
    fn a_suspend_that_stopped_the_monotonic_clock_still_ends_the_term() {
        // Renewed at boot 90 s: deadline 100 s. The VM is paused for a minute; CLOCK_BOOTTIME and
        // the wall clock move on by 60 s while CLOCK_MONOTONIC (not read here) would still
        // say 91 s.
        let deadline = Reading::at(100 * S, 1000 * S);
        assert_eq!(Reading::at(151 * S, 1051 * S).until(deadline), Err(51 * S));
    }

    #[test]
    fn a_wall_clock_set_back_does_not_extend_the_term_nor_one_set_forward_the_other_way() {
        let deadline = Reading::at(100 * S, 1000 * S);
        // Set back ten minutes: boot time still ends the term.
        assert_eq!(Reading::at(101 * S, 400 * S).until(deadline), Err(S));
        // Set forward past the deadline: the wall clock ends it early (safe; the next renewal
        // starts afresh).
        assert_eq!(Reading::at(95 * S, 1010 * S).until(deadline), Err(10 * S));
        assert_eq!(
            Reading::at(100 * S, 990 * S).until(deadline),
            Err(Duration::ZERO)
        );
    }

    #[test]
    fn boot_time_counts_on_from_one_reading_to_the_next() {
        let first = Reading::now();
        std::thread::sleep(Duration::from_millis(20));
        let second = Reading::now();
        assert!(second.since_boot >= first.since_boot + Duration::from_millis(20));
        assert!(first.plus(S).until(second).is_err());
        assert!(second.until(first.plus(S)).is_ok());
    }
}
