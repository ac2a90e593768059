//! Drain progress and stalls (docs/design.md §5.2): a draining node that no pod left for
//! `nodeProgressDeadline` gives up its drain slot, so that no single workload, budget or Job holds
//! the fleet. Progress is recorded on the node itself
//! ([`k8sm_api::keys::DRAIN_PROGRESS_ANNOTATION`]: when the count of pods left last went down, and
//! that count), so that it survives a controller restart.

use chrono::{DateTime, Duration, Utc};

/// A parsed progress record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) at: DateTime<Utc>,
    pub(crate) pods_left: u32,
}

impl Record {
    /// Reads `<RFC 3339 time> <pods left>`; anything else is no record (it is rewritten).
    pub(crate) fn parse(raw: Option<&str>) -> Option<Self> {
        let (at, left) = raw?.trim().split_once(' ')?;
        Some(Self {
            at: DateTime::parse_from_rfc3339(at).ok()?.with_timezone(&Utc),
            pods_left: left.trim().parse().ok()?,
        })
    }
}

/// The annotation value of a record.
pub fn format(at: DateTime<Utc>, pods_left: u32) -> String {
    format!(
        "{} {pods_left}",
        at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    )
}

/// What to do about a draining node's progress in this pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Write a new record: (now, pods left).
    Record,
    /// Nothing to write; plan again at `wake` (when the node would stall, or a pending record is
    /// due).
    Wait { wake: DateTime<Utc> },
    /// No pod left the node since `since`, for at least the deadline: give up the slot.
    Stall { since: DateTime<Utc> },
}

/// How old a record must be before a lower count rewrites it: a tenth of the deadline, between 1 s
/// and 1 min. Recording every departure would double the node writes of a drain.
fn record_every(deadline: Duration) -> Duration {
    (deadline / 10).clamp(Duration::seconds(1), Duration::seconds(60))
}

/// Judges a draining node with `pods_left` pods left and progress record `record` at `now`. While
/// `held` (the policy is paused), nothing moves by design: the record is kept fresh instead, so
/// that a resumed drain gets its whole deadline. A node is stalled only when its count never went
/// below the record's for the whole deadline, so the throttle of `record_every` can delay a
/// stall but never bring one early.
pub(crate) fn judge(
    record: Option<Record>,
    pods_left: u32,
    deadline: Duration,
    held: bool,
    now: DateTime<Utc>,
) -> Verdict {
    let Some(record) = record else {
        return Verdict::Record;
    };
    let every = record_every(deadline);
    let moved = pods_left < record.pods_left;
    if moved || held {
        return match record.at.checked_add_signed(every) {
            Some(due) if due > now => Verdict::Wait { wake: due },
            _ => Verdict::Record,
        };
    }
    match record.at.checked_add_signed(deadline) {
        Some(stall_at) if stall_at > now => Verdict::Wait { wake: stall_at },
        _ => Verdict::Stall { since: record.at },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(seconds: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + chrono::Duration::seconds(seconds)
    }

    const TEN_MINUTES: Duration = Duration::minutes(10);

    fn record(at: i64, pods_left: u32) -> Option<Record> {
        Some(Record {
            at: t(at),
            pods_left,
        })
    }

    #[test]
    fn records_round_trip_and_bad_ones_are_no_record() {
        let text = format(t(5), 12);
        assert_eq!(text, "2026-01-01T00:00:05Z 12");
        assert_eq!(Record::parse(Some(&text)), record(5, 12));
        for bad in [
            "",
            "12",
            "2026-01-01T00:00:05Z",
            "2026-01-01T00:00:05Z -1",
            "x 3",
        ] {
            assert_eq!(Record::parse(Some(bad)), None, "{bad:?}");
        }
        assert_eq!(Record::parse(None), None);
    }

    #[test]
    fn a_node_without_a_record_gets_one() {
        assert_eq!(judge(None, 5, TEN_MINUTES, false, t(0)), Verdict::Record);
    }

    #[test]
    fn no_departure_for_the_deadline_stalls() {
        assert_eq!(
            judge(record(0, 5), 5, TEN_MINUTES, false, t(599)),
            Verdict::Wait { wake: t(600) }
        );
        assert_eq!(
            judge(record(0, 5), 5, TEN_MINUTES, false, t(600)),
            Verdict::Stall { since: t(0) }
        );
        // More pods than recorded (scheduled onto an uncordoned node) is no progress either.
        assert_eq!(
            judge(record(0, 5), 7, TEN_MINUTES, false, t(601)),
            Verdict::Stall { since: t(0) }
        );
    }

    #[test]
    fn a_departure_is_recorded_at_most_every_tenth_of_the_deadline_and_never_stalls() {
        // Moved 30 s after the record: the record is due at 60 s.
        assert_eq!(
            judge(record(0, 5), 4, TEN_MINUTES, false, t(30)),
            Verdict::Wait { wake: t(60) }
        );
        assert_eq!(
            judge(record(0, 5), 4, TEN_MINUTES, false, t(60)),
            Verdict::Record
        );
        // Long past the deadline, a lower count is progress, not a stall.
        assert_eq!(
            judge(record(0, 5), 4, TEN_MINUTES, false, t(5000)),
            Verdict::Record
        );
        // Short deadlines record at least once a second; long ones at least once a minute.
        assert_eq!(
            judge(record(0, 5), 4, Duration::seconds(5), false, t(0)),
            Verdict::Wait { wake: t(1) }
        );
        assert_eq!(
            judge(record(0, 5), 4, Duration::seconds(36_000), false, t(0)),
            Verdict::Wait { wake: t(60) }
        );
    }

    #[test]
    fn a_held_drain_keeps_its_record_fresh_and_never_stalls() {
        assert_eq!(
            judge(record(0, 5), 5, TEN_MINUTES, true, t(10)),
            Verdict::Wait { wake: t(60) }
        );
        assert_eq!(
            judge(record(0, 5), 5, TEN_MINUTES, true, t(3600)),
            Verdict::Record
        );
    }
}
