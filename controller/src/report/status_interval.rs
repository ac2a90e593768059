//! How often a policy's status is written (docs/design.md §8): what the controller and operators
//! act on (deleted-node records, conditions, observedGeneration) at once, by the pass
//! ([`Verdict::Urgent`]); counts, rows, blocked pods and the ETA at most once per interval, in the
//! background. The interval grows with the last write's duration, so that refreshing the status
//! takes at most a tenth of a slow apiserver's time and evictions do not wait behind it
//! (docs/decisions/0005-loop-under-load.md).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8sm_api::ExecutorUpgradePolicyStatus;

/// The shortest time between two writes of a policy's status that only refresh counts, rows and the
/// ETA.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// The longest: an operator watching the status sees it at most this far behind.
pub const MAX_INTERVAL: Duration = Duration::from_secs(10);
/// The interval is at least this many times as long as the last write took.
pub const TIME_SHARE: u32 = 10;

/// When each policy's status was last written, and the interval until its next paced write.
#[derive(Debug, Default)]
pub struct StatusInterval {
    last_write: HashMap<String, (Instant, Duration)>,
}

/// Whether a changed status is written now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A change the controller or an operator acts on: written by the pass itself, before it plans
    /// again.
    Urgent,
    /// Due: written in the background.
    Now,
    /// Not before then: a pass at that moment writes it.
    At(Instant),
}

impl StatusInterval {
    /// Judges a status that differs from `previous` (what the cluster holds).
    pub fn judge(
        &self,
        policy: &str,
        previous: Option<&ExecutorUpgradePolicyStatus>,
        status: &ExecutorUpgradePolicyStatus,
        now: Instant,
    ) -> Verdict {
        if urgent(previous, status) {
            return Verdict::Urgent;
        }
        match self.last_write.get(policy) {
            Some(&(last, interval)) if now < last + interval => Verdict::At(last + interval),
            _ => Verdict::Now,
        }
    }

    /// Records a write of `policy`'s status that began at `started` and took `took` (attempted: a
    /// refused write is paced too).
    pub fn wrote(&mut self, policy: &str, started: Instant, took: Duration) {
        let interval = took
            .saturating_mul(TIME_SHARE)
            .clamp(MIN_INTERVAL, MAX_INTERVAL);
        self.last_write
            .insert(policy.to_owned(), (started, interval));
    }

    /// Forgets policies that are gone.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.last_write.retain(|name, _| keep(name));
    }
}

/// A change the controller or an operator acts on: written at once.
///
/// A condition counts by its type, status and reason, what `kubectl wait --for=condition=...` and
/// alerts act on. Its message is a refresh like the counts: "12 of 500 selected nodes still to
/// upgrade" changes with every node upgraded, and writing it at once made every node's completion a
/// status write the pass awaited (a third of a second on a loaded apiserver, during which no
/// eviction was sent).
fn urgent(
    previous: Option<&ExecutorUpgradePolicyStatus>,
    status: &ExecutorUpgradePolicyStatus,
) -> bool {
    let Some(previous) = previous else {
        return true;
    };
    previous.deleted_nodes != status.deleted_nodes
        || decisive(previous).ne(decisive(status))
        || previous.observed_generation != status.observed_generation
}

/// What of each condition is acted on: its type, status and reason.
fn decisive(status: &ExecutorUpgradePolicyStatus) -> impl Iterator<Item = (&str, &str, &str)> {
    status
        .conditions
        .iter()
        .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str()))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    use k8sm_api::{DeletedNode, NodeCounts};

    use super::*;

    fn status(compatible: u32) -> ExecutorUpgradePolicyStatus {
        ExecutorUpgradePolicyStatus {
            observed_generation: Some(1),
            counts: NodeCounts {
                compatible,
                ..NodeCounts::default()
            },
            ..ExecutorUpgradePolicyStatus::default()
        }
    }

    /// A status with one condition.
    fn with_condition(
        type_: &str,
        condition_status: &str,
        reason: &str,
        message: &str,
    ) -> ExecutorUpgradePolicyStatus {
        let mut s = status(0);
        s.conditions.push(Condition {
            type_: type_.into(),
            status: condition_status.into(),
            last_transition_time: k8sm_view::time::to_time(chrono::DateTime::UNIX_EPOCH),
            message: message.into(),
            observed_generation: Some(1),
            reason: reason.into(),
        });
        s
    }

    #[test]
    fn a_first_status_is_written_at_once() {
        let pace = StatusInterval::default();
        assert_eq!(
            pace.judge("p", None, &status(0), Instant::now()),
            Verdict::Urgent
        );
    }

    #[test]
    fn counts_are_written_at_most_once_per_interval() {
        let mut pace = StatusInterval::default();
        let t0 = Instant::now();
        assert_eq!(
            pace.judge("p", Some(&status(0)), &status(1), t0),
            Verdict::Now
        );
        pace.wrote("p", t0, Duration::from_millis(20));
        let soon = t0 + MIN_INTERVAL / 2;
        assert_eq!(
            pace.judge("p", Some(&status(1)), &status(2), soon),
            Verdict::At(t0 + MIN_INTERVAL)
        );
        // Another policy has a pace of its own.
        assert_eq!(
            pace.judge("q", Some(&status(1)), &status(2), soon),
            Verdict::Now
        );
        assert_eq!(
            pace.judge("p", Some(&status(1)), &status(2), t0 + MIN_INTERVAL),
            Verdict::Now
        );
    }

    #[test]
    fn a_slow_write_spaces_the_next_ones_out_to_a_tenth_of_the_time_at_most() {
        let mut pace = StatusInterval::default();
        let t0 = Instant::now();
        // 400 ms to write: the next paced write no sooner than 4 s after this one began.
        pace.wrote("p", t0, Duration::from_millis(400));
        let at = t0 + Duration::from_millis(400) * TIME_SHARE;
        assert_eq!(
            pace.judge("p", Some(&status(1)), &status(2), t0 + MIN_INTERVAL),
            Verdict::At(at)
        );
        assert_eq!(
            pace.judge("p", Some(&status(1)), &status(2), at),
            Verdict::Now
        );
        // However slow, the status is at most MAX_INTERVAL behind.
        pace.wrote("p", t0, Duration::from_secs(30));
        assert_eq!(
            pace.judge("p", Some(&status(1)), &status(2), t0 + MIN_INTERVAL),
            Verdict::At(t0 + MAX_INTERVAL)
        );
        // Urgent changes do not wait for it.
        let mut generation = status(1);
        generation.observed_generation = Some(2);
        assert_eq!(
            pace.judge("p", Some(&status(1)), &generation, t0 + MIN_INTERVAL),
            Verdict::Urgent
        );
    }

    #[test]
    fn records_conditions_and_generations_are_written_at_once() {
        let mut pace = StatusInterval::default();
        let t0 = Instant::now();
        pace.wrote("p", t0, Duration::from_millis(20));
        let soon = t0 + Duration::from_millis(10);
        let mut record = status(0);
        record.deleted_nodes.push(DeletedNode {
            name: "n1".into(),
            uid: "uid-1".into(),
            executor_id: None,
            deleted_at: k8sm_view::time::to_time(chrono::Utc::now()),
            target: None,
        });
        assert_eq!(
            pace.judge("p", Some(&status(0)), &record, soon),
            Verdict::Urgent
        );
        let condition = with_condition(
            "Upgraded",
            "True",
            "Upgraded",
            "every selected node runs the target executor",
        );
        assert_eq!(
            pace.judge("p", Some(&status(0)), &condition, soon),
            Verdict::Urgent
        );
        let mut flipped = condition.clone();
        flipped.conditions[0].status = "False".into();
        flipped.conditions[0].reason = "NodesRemaining".into();
        assert_eq!(
            pace.judge("p", Some(&condition), &flipped, soon),
            Verdict::Urgent
        );
        let mut generation = status(0);
        generation.observed_generation = Some(2);
        assert_eq!(
            pace.judge("p", Some(&status(0)), &generation, soon),
            Verdict::Urgent
        );
    }

    #[test]
    fn a_condition_whose_message_alone_changed_waits_for_the_pace() {
        let mut pace = StatusInterval::default();
        let t0 = Instant::now();
        pace.wrote("p", t0, Duration::from_millis(20));
        let soon = t0 + Duration::from_millis(10);
        let progressing = |message| with_condition("Progressing", "True", "Upgrading", message);
        let before = progressing("12 of 500 selected nodes still to upgrade");
        let after = progressing("11 of 500 selected nodes still to upgrade");
        assert_eq!(
            pace.judge("p", Some(&before), &after, soon),
            Verdict::At(t0 + MIN_INTERVAL)
        );
        assert_eq!(
            pace.judge("p", Some(&before), &after, t0 + MIN_INTERVAL),
            Verdict::Now
        );
    }
}
