//! How many calls run at once (evictions and deletions, and a pass's node writes): additive
//! increase, multiplicative decrease (AIMD), as TCP paces a connection, on the apiserver's own
//! signals ([`Answer`], docs/design.md §8). A fixed cap holds throughput to the cap over the
//! latency whatever the apiserver can take, and overloads one that can take less. The limit grows
//! by one for each limit's worth of calls answered quickly and halves at most once per
//! [`COOL_DOWN`], so that the answers of one burst do not halve it again and again.

use std::time::{Duration, Instant};

/// The limit a controller starts with: the fixed cap it replaces.
pub const INITIAL: usize = 16;
/// Never fewer: an upgrade must go on when the apiserver is slow.
pub const FLOOR: usize = 4;
/// Never more: past this, a pass's evictions are no longer what the calls limit.
pub const CEILING: usize = 128;
/// A call answered slower than this means the apiserver is queueing (an eviction takes milliseconds
/// when it is not).
pub const SLOW_CALL: Duration = Duration::from_secs(2);
/// The least time between two decreases.
pub const COOL_DOWN: Duration = Duration::from_secs(2);

/// How a call was answered, as far as the apiserver's load goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Answered, whatever the answer (a budget's refusal included), in this time.
    Took(Duration),
    /// The apiserver is overloaded: priority and fairness refused it (429 without a budget's
    /// cause), it failed (5xx), or it did not answer.
    Overloaded,
}

impl Answer {
    /// What a call's `outcome`, answered after `took`, says of the apiserver's load.
    pub fn of(
        outcome: &Result<crate::act::execute::Outcome, crate::Error>,
        took: Duration,
    ) -> Self {
        match outcome {
            Ok(crate::act::execute::Outcome::Throttled(_)) => Self::Overloaded,
            Err(error) if error.overloaded() => Self::Overloaded,
            _ => Self::Took(took),
        }
    }
}

/// The current limit and what moves it.
#[derive(Debug)]
pub struct CallLimit {
    limit: f64,
    last_decrease: Option<Instant>,
}

impl Default for CallLimit {
    fn default() -> Self {
        Self {
            limit: INITIAL as f64,
            last_decrease: None,
        }
    }
}

impl CallLimit {
    /// How many calls may run at once now.
    pub fn current(&self) -> usize {
        (self.limit.floor() as usize).clamp(FLOOR, CEILING)
    }

    /// Takes in one call's answer, at `now`.
    pub fn answered(&mut self, answer: Answer, now: Instant) {
        let congested = match answer {
            Answer::Took(took) => took > SLOW_CALL,
            Answer::Overloaded => true,
        };
        if !congested {
            self.limit = (self.limit + 1.0 / self.limit).min(CEILING as f64);
            return;
        }
        let cooled = self
            .last_decrease
            .is_none_or(|at| now.saturating_duration_since(at) >= COOL_DOWN);
        if cooled {
            self.limit = (self.limit / 2.0).max(FLOOR as f64);
            self.last_decrease = Some(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUICK: Answer = Answer::Took(Duration::from_millis(30));

    #[test]
    fn grows_by_one_per_limit_of_quick_answers_up_to_the_ceiling() {
        let (mut limit, now) = (CallLimit::default(), Instant::now());
        assert_eq!(limit.current(), INITIAL);
        // 1/16 + 1/16.06 + … : one more after 17 answers.
        for _ in 0..INITIAL {
            limit.answered(QUICK, now);
        }
        assert_eq!(limit.current(), INITIAL);
        limit.answered(QUICK, now);
        assert_eq!(limit.current(), INITIAL + 1);
        for _ in 0..100_000 {
            limit.answered(QUICK, now);
        }
        assert_eq!(limit.current(), CEILING);
    }

    #[test]
    fn halves_on_overload_or_a_slow_answer_once_per_cool_down_down_to_the_floor() {
        let (mut limit, start) = (CallLimit::default(), Instant::now());
        limit.answered(Answer::Overloaded, start);
        assert_eq!(limit.current(), INITIAL / 2);
        // The rest of the burst, within the cool-down: no further decrease.
        for _ in 0..10 {
            limit.answered(Answer::Overloaded, start + Duration::from_millis(500));
        }
        assert_eq!(limit.current(), INITIAL / 2);
        let slow = Answer::Took(SLOW_CALL + Duration::from_millis(1));
        limit.answered(slow, start + COOL_DOWN);
        assert_eq!(limit.current(), INITIAL / 4);
        for i in 2..10 {
            limit.answered(Answer::Overloaded, start + COOL_DOWN * i);
        }
        assert_eq!(limit.current(), FLOOR);
    }

    #[test]
    fn only_throttling_failures_and_missing_answers_are_overload() {
        use crate::act::execute::Outcome;
        let took = Duration::from_millis(30);
        let api = |code: u16| -> Result<Outcome, crate::Error> {
            let status = kube::core::Status::failure("no", "Whatever").with_code(code);
            Err(crate::Error::Action {
                action: "patching",
                object: "node-1".into(),
                source: kube::Error::Api(Box::new(status)),
            })
        };
        let throttled = Ok(Outcome::Throttled("too many requests".into()));
        for overloaded in [throttled, api(429), api(500), api(503)] {
            assert_eq!(
                Answer::of(&overloaded, took),
                Answer::Overloaded,
                "{overloaded:?}"
            );
        }
        let refused = Ok(Outcome::DisruptionBudget("budget".into()));
        let stale = Ok(Outcome::Stale("gone".into()));
        for answered in [refused, stale, api(404), api(409), api(422)] {
            assert_eq!(
                Answer::of(&answered, took),
                Answer::Took(took),
                "{answered:?}"
            );
        }
    }

    #[test]
    fn an_answer_at_the_slow_bound_is_not_congestion() {
        let (mut limit, now) = (CallLimit::default(), Instant::now());
        limit.answered(Answer::Took(SLOW_CALL), now);
        assert!(limit.current() >= INITIAL);
    }
}
