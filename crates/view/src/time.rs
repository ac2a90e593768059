//! Conversions between the planner's chrono times and k8s-openapi's jiff timestamps.

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::jiff::Timestamp;

pub fn to_timestamp(time: DateTime<Utc>) -> Timestamp {
    // Every chrono UTC time within Kubernetes' range is a valid jiff timestamp; clamp the
    // impossible rest.
    Timestamp::new(time.timestamp(), time.timestamp_subsec_nanos() as i32)
        .unwrap_or(Timestamp::UNIX_EPOCH)
}

pub fn from_timestamp(time: &Timestamp) -> DateTime<Utc> {
    DateTime::from_timestamp(time.as_second(), time.subsec_nanosecond().max(0) as u32)
        .unwrap_or_default()
}

pub fn to_time(time: DateTime<Utc>) -> Time {
    Time(to_timestamp(time))
}

pub fn from_time(time: &Time) -> DateTime<Utc> {
    from_timestamp(&time.0)
}

pub fn to_micro_time(time: DateTime<Utc>) -> MicroTime {
    MicroTime(to_timestamp(time))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let t = DateTime::parse_from_rfc3339("2026-11-29T17:00:00.123456Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(from_timestamp(&to_timestamp(t)), t);
        assert_eq!(from_time(&to_time(t)), t);
        assert_eq!(from_timestamp(&to_micro_time(t).0), t);
    }
}
