//! Keeps the loop's passes to a share of its time (`--max-busy-share`, docs/design.md §8): with
//! hundreds of nodes draining a pod event comes every few milliseconds, and passes run back to back
//! would take a whole core from the apiserver beside the controller
//! (docs/decisions/0005-loop-under-load.md). After a pass that took `d`, the next starts no sooner
//! than `d × (1 − share) / share` later and takes in every change meanwhile (a pass plans from the
//! caches, not from the events); at a hundred nodes, a pass and its hold take milliseconds.

use std::time::{Duration, Instant};

/// When the next pass may start.
#[derive(Debug)]
pub struct BusyShare {
    /// The largest share of the time spent in passes, in (0, 1].
    share: f64,
    /// The longest hold after a pass, however long it took (the resync period: a pass that slow
    /// already signals trouble, and a longer hold would only hide changes from it).
    longest_hold: Duration,
    /// The earliest start of the next pass.
    next_at: Option<Instant>,
    /// Since when a wake waits for `next_at` (for the metric of the time held).
    held_since: Option<Instant>,
}

impl BusyShare {
    pub fn new(share: f64, longest_hold: Duration) -> Self {
        debug_assert!(share > 0.0 && share <= 1.0, "checked by the flag's parser");
        Self {
            share,
            longest_hold,
            next_at: None,
            held_since: None,
        }
    }

    /// A pass that took `took` ended at `ended`.
    pub fn passed(&mut self, ended: Instant, took: Duration) {
        let hold = took
            .mul_f64((1.0 - self.share) / self.share)
            .min(self.longest_hold);
        self.next_at = Some(ended + hold);
        self.held_since = None;
    }

    /// A wake at `now` that would plan: `None` if the pass may start now, or the instant until
    /// which it waits (the loop sleeps until then, taking in answers and changes meanwhile).
    pub fn hold(&mut self, now: Instant) -> Option<Instant> {
        let next_at = self.next_at.filter(|at| *at > now)?;
        self.held_since.get_or_insert(now);
        Some(next_at)
    }

    /// The instant a held wake waits for, if one does.
    pub fn waiting_until(&self) -> Option<Instant> {
        self.held_since.and(self.next_at)
    }

    /// A pass starts at `now`: how long a wake waited for it.
    pub fn start(&mut self, now: Instant) -> Duration {
        self.held_since
            .take()
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since))
    }
}

/// Parses `--max-busy-share`: a number in (0, 1].
pub fn parse_share(s: &str) -> Result<f64, String> {
    let share: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number: give the share as e.g. 0.5"))?;
    if share > 0.0 && share <= 1.0 {
        Ok(share)
    } else {
        Err(format!(
            "{s} is not in (0, 1]: 0.5 lets passes take half of the time, 1 plans again at once"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn half_the_time_holds_as_long_as_the_pass_took() {
        let start = Instant::now();
        let mut pacer = BusyShare::new(0.5, Duration::from_secs(30));
        assert_eq!(pacer.hold(start), None, "the first pass starts at once");
        assert_eq!(pacer.start(start), Duration::ZERO);
        let ended = start + 140 * MS;
        pacer.passed(ended, 140 * MS);
        assert_eq!(pacer.hold(ended + 10 * MS), Some(ended + 140 * MS));
        assert_eq!(pacer.waiting_until(), Some(ended + 140 * MS));
        // A second wake while held changes nothing, and the time held counts from the first.
        assert_eq!(pacer.hold(ended + 100 * MS), Some(ended + 140 * MS));
        assert_eq!(pacer.hold(ended + 140 * MS), None);
        assert_eq!(pacer.start(ended + 140 * MS), 130 * MS);
        assert_eq!(pacer.waiting_until(), None);
    }

    #[test]
    fn a_quarter_holds_three_times_the_pass_and_never_beyond_the_longest_hold() {
        let start = Instant::now();
        let mut pacer = BusyShare::new(0.25, Duration::from_secs(1));
        pacer.passed(start, 100 * MS);
        assert_eq!(pacer.hold(start), Some(start + 300 * MS));
        pacer.passed(start, Duration::from_secs(2));
        assert_eq!(pacer.hold(start), Some(start + Duration::from_secs(1)));
    }

    #[test]
    fn a_share_of_one_never_holds() {
        let start = Instant::now();
        let mut pacer = BusyShare::new(1.0, Duration::from_secs(30));
        pacer.passed(start, Duration::from_secs(5));
        assert_eq!(pacer.hold(start), None);
        assert_eq!(pacer.waiting_until(), None);
    }

    #[test]
    fn a_wake_after_the_hold_is_not_held() {
        let start = Instant::now();
        let mut pacer = BusyShare::new(0.5, Duration::from_secs(30));
        pacer.passed(start, 50 * MS);
        assert_eq!(pacer.hold(start + 60 * MS), None);
        assert_eq!(pacer.start(start + 60 * MS), Duration::ZERO);
    }

    #[test]
    fn shares_outside_zero_to_one_are_refused_with_what_to_give() {
        assert_eq!(parse_share("0.5"), Ok(0.5));
        assert_eq!(parse_share("1"), Ok(1.0));
        for bad in ["0", "-0.5", "1.5", "NaN"] {
            let error = parse_share(bad).unwrap_err();
            assert!(error.contains("(0, 1]"), "{bad}: {error}");
        }
        assert!(parse_share("half").unwrap_err().contains("e.g. 0.5"));
    }
}
