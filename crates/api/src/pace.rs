//! The ETA of an upgrade, from durable state only (docs/design.md §5.1). The pace is measured from
//! a start ([`PaceStart`]: when the upgrade was first seen with nodes left, and how many nodes ran
//! the target then) kept in the policy's status, so that a new leader goes on from the same start:
//! begun again at a takeover, the next node to finish would make the ETA jump by the ratio of the
//! takeover's age to the upgrade's. The estimate is a pure function of the start, the counts and
//! the time, so every leader, and the plugin, compute the same one.

use chrono::{DateTime, Timelike, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::status::PaceStart;

/// The start of the pace of a status about to be written: `previous` (that of the status the
/// cluster holds) while the upgrade goes on; a new start now when an upgrade begins (nodes left, no
/// start yet) or when fewer nodes run the target than at the start (a new target, or upgraded nodes
/// gone: the pace so far says nothing about what is left); none when no node is left (the next
/// upgrade's pace is measured from when it starts).
pub fn pace_start(
    previous: Option<&PaceStart>,
    compatible: u32,
    remaining: u32,
    now: DateTime<Utc>,
) -> Option<PaceStart> {
    if remaining == 0 {
        return None;
    }
    match previous {
        Some(start) if start.compatible <= compatible => Some(start.clone()),
        _ => Some(PaceStart {
            // To the second, as the apiserver keeps a Time: what a leader writes is what the next
            // one reads.
            since: Time(to_timestamp(now.with_nanosecond(0).unwrap_or(now))),
            compatible,
        }),
    }
}

/// When every node should run the target, at the pace since `start`: the time per node upgraded
/// since then, times the nodes `remaining`. `None` before any node was upgraded since the start.
pub fn eta(
    start: &PaceStart,
    compatible: u32,
    remaining: u32,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let done = compatible
        .checked_sub(start.compatible)
        .filter(|d| *d > 0)?;
    let elapsed = (now - from_timestamp(&start.since.0)).num_milliseconds();
    if elapsed <= 0 {
        return None;
    }
    let per_node_ms = elapsed / i64::from(done);
    Some(now + chrono::Duration::milliseconds(per_node_ms.saturating_mul(i64::from(remaining))))
}

fn to_timestamp(time: DateTime<Utc>) -> Timestamp {
    // Every chrono UTC time within Kubernetes' range is a valid jiff timestamp; clamp the
    // impossible rest.
    Timestamp::new(time.timestamp(), time.timestamp_subsec_nanos() as i32)
        .unwrap_or(Timestamp::UNIX_EPOCH)
}

fn from_timestamp(time: &Timestamp) -> DateTime<Utc> {
    DateTime::from_timestamp(time.as_second(), time.subsec_nanosecond().max(0) as u32)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(minutes: i64) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-03-01T12:00:00Z")
            .unwrap()
            .to_utc()
            + chrono::Duration::minutes(minutes)
    }

    #[test]
    fn the_pace_is_measured_from_the_kept_start() {
        let start = pace_start(None, 10, 90, at(0)).expect("an upgrade with nodes left");
        assert_eq!(
            (from_timestamp(&start.since.0), start.compatible),
            (at(0), 10)
        );
        // Nothing upgraded since the start: no pace to go by.
        assert_eq!(eta(&start, 10, 90, at(5)), None);
        // 20 nodes in 40 minutes: 2 minutes each, 80 left.
        let kept = pace_start(Some(&start), 30, 80, at(40)).unwrap();
        assert_eq!(kept, start);
        assert_eq!(eta(&kept, 30, 80, at(40)), Some(at(40 + 160)));
    }

    #[test]
    fn the_start_is_kept_to_the_second_as_the_apiserver_keeps_it() {
        let now = at(0) + chrono::Duration::milliseconds(750);
        let start = pace_start(None, 0, 10, now).unwrap();
        assert_eq!(from_timestamp(&start.since.0), at(0));
    }

    #[test]
    fn a_new_target_or_a_finished_upgrade_starts_over() {
        let start = pace_start(None, 10, 90, at(0)).unwrap();
        // A new target: nodes that ran the old one are incompatible again.
        let restarted = pace_start(Some(&start), 0, 100, at(30)).unwrap();
        assert_eq!(
            (from_timestamp(&restarted.since.0), restarted.compatible),
            (at(30), 0)
        );
        assert_eq!(pace_start(Some(&start), 100, 0, at(60)), None);
    }

    #[test]
    fn a_start_read_back_gives_the_same_eta() {
        // What a new leader (or the plugin) reads from the status: the JSON the old leader wrote.
        let start = pace_start(None, 0, 100, at(0)).unwrap();
        let written = serde_json::to_string(&start).unwrap();
        let read: PaceStart = serde_json::from_str(&written).unwrap();
        assert_eq!(eta(&read, 25, 75, at(50)), eta(&start, 25, 75, at(50)));
        assert_eq!(eta(&read, 25, 75, at(50)), Some(at(50 + 150)));
    }
}
