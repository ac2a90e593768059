//! `spec.window`: a maintenance window, the weekly hours in which k8sm may admit nodes and send
//! kamikaze (like kured's reboot days and hours, and system-upgrade-controller's `spec.window`).
//! Its days and hours are local to an IANA time zone, so a window keeps its local hours across
//! daylight-saving changes.

use std::fmt;

use chrono::{DateTime, Datelike, Days, LocalResult, NaiveDate, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// RE2 pattern of `spec.window.start` and `.end`: a 24-hour local time, "HH:MM".
pub const CLOCK_PATTERN: &str = "^([01][0-9]|2[0-3]):[0-5][0-9]$";

/// Default `spec.window.timeZone`.
pub const DEFAULT_TIME_ZONE: &str = "UTC";

/// Longest accepted `spec.window.timeZone` (the longest IANA names have about 30 characters).
pub const TIME_ZONE_MAX_LENGTH: u32 = 64;

/// When the upgrade may disrupt: outside the window no node is admitted and no kamikaze is sent.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceWindow {
    /// Days of the week on which the window opens, in timeZone, such as ["Saturday", "Sunday"]. A
    /// window that crosses midnight belongs to the day it opens on.
    #[schemars(length(min = 1, max = 7))]
    pub days: Vec<Weekday>,

    /// Local time at which the window opens, "HH:MM" on a 24-hour clock, such as "22:00".
    #[schemars(regex(pattern = CLOCK_PATTERN))]
    pub start: String,

    /// Local time at which the window closes, "HH:MM". Earlier than start: the next day (a window
    /// across midnight, such as "22:00" to "04:00"); equal to start: 24 hours after it opens.
    #[schemars(regex(pattern = CLOCK_PATTERN))]
    pub end: String,

    /// IANA time zone of days, start and end, such as "Europe/Berlin" (default "UTC"). A local
    /// time skipped by a daylight-saving change opens or closes the window at the first minute
    /// after the change; a local time that happens twice, at its first occurrence.
    #[serde(default = "default_time_zone")]
    #[schemars(length(min = 1, max = TIME_ZONE_MAX_LENGTH))]
    pub time_zone: String,

    /// What nodes that are already draining do while the window is closed. "Finish" (default):
    /// they go on moving their pods under the same SLA rules until they are drained, and wait
    /// there (cordoned) for the window to open before their executors are told to restart, as
    /// peers let in-progress drains finish. "Hold": nothing on them moves until the window
    /// opens; they stay cordoned.
    #[serde(default)]
    pub in_flight: InFlight,
}

fn default_time_zone() -> String {
    DEFAULT_TIME_ZONE.to_owned()
}

/// A day of the week.
#[derive(
    JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord,
)]
pub enum Weekday {
    Monday,
    Tuesday,
    Wednesday,
    Thursday,
    Friday,
    Saturday,
    Sunday,
}

impl Weekday {
    fn of(day: chrono::Weekday) -> Self {
        match day {
            chrono::Weekday::Mon => Self::Monday,
            chrono::Weekday::Tue => Self::Tuesday,
            chrono::Weekday::Wed => Self::Wednesday,
            chrono::Weekday::Thu => Self::Thursday,
            chrono::Weekday::Fri => Self::Friday,
            chrono::Weekday::Sat => Self::Saturday,
            chrono::Weekday::Sun => Self::Sunday,
        }
    }

    fn short(self) -> &'static str {
        match self {
            Self::Monday => "Mon",
            Self::Tuesday => "Tue",
            Self::Wednesday => "Wed",
            Self::Thursday => "Thu",
            Self::Friday => "Fri",
            Self::Saturday => "Sat",
            Self::Sunday => "Sun",
        }
    }
}

/// What draining nodes do while the window is closed (see [`MaintenanceWindow::in_flight`]).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum InFlight {
    /// Go on moving pods until drained; no kamikaze until the window opens.
    #[default]
    Finish,
    /// Move nothing until the window opens.
    Hold,
}

/// Where a window stands at some instant.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum WindowState {
    /// Open until `closes` (the end of this opening, joined with the openings that follow without a
    /// gap).
    Open { closes: DateTime<Utc> },
    /// Closed until `opens`.
    Closed { opens: DateTime<Utc> },
}

/// Why a window cannot be evaluated, naming the field to fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidWindow {
    #[error(
        "spec.window.timeZone: {0:?} is not an IANA time zone; use a name such as \"Europe/Berlin\" or \"UTC\""
    )]
    TimeZone(String),
    #[error(
        "spec.window.{field}: {value:?} is not a time \"HH:MM\" on a 24-hour clock, such as \"22:00\""
    )]
    Clock { field: &'static str, value: String },
    #[error("spec.window.days: name at least one day, such as [\"Saturday\"]")]
    NoDays,
}

impl MaintenanceWindow {
    /// Where the window stands at `now`.
    pub fn state(&self, now: DateTime<Utc>) -> Result<WindowState, InvalidWindow> {
        let zone: Tz = self
            .time_zone
            .parse()
            .map_err(|_| InvalidWindow::TimeZone(self.time_zone.clone()))?;
        let start = clock("start", &self.start)?;
        let end = clock("end", &self.end)?;
        if self.days.is_empty() {
            return Err(InvalidWindow::NoDays);
        }
        // Openings by the local day they start on, from the day before today (one across midnight
        // may still be open) to a week after: every listed day comes round within that.
        let today = now.with_timezone(&zone).date_naive();
        let openings = (0..=9u64).filter_map(|offset| {
            let day = today
                .checked_sub_days(Days::new(1))?
                .checked_add_days(Days::new(offset))?;
            self.days
                .contains(&Weekday::of(day.weekday()))
                .then(|| opening(zone, day, start, end))
                .flatten()
        });
        let mut open: Option<(DateTime<Utc>, DateTime<Utc>)> = None;
        for (opens, closes) in openings {
            match open {
                // Joined with an opening that starts before (or as) the current one closes.
                Some((from, until)) if opens <= until => open = Some((from, until.max(closes))),
                Some((_, until)) => return Ok(WindowState::Open { closes: until }),
                None if opens <= now && now < closes => open = Some((opens, closes)),
                None if opens > now => return Ok(WindowState::Closed { opens }),
                None => {}
            }
        }
        match open {
            Some((_, until)) => Ok(WindowState::Open { closes: until }),
            // Unreachable with at least one day, kept total: a window that never opens is closed
            // for a week.
            None => Ok(WindowState::Closed {
                opens: now + chrono::Duration::days(7),
            }),
        }
    }
}

/// The window's days, hours and zone, as an operator reads them: "Mon,Tue 22:00-04:00
/// Europe/Berlin".
impl fmt::Display for MaintenanceWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut days = self.days.clone();
        days.sort();
        days.dedup();
        let days: Vec<&str> = days.iter().map(|d| d.short()).collect();
        write!(
            f,
            "{} {}-{} {}",
            days.join(","),
            self.start,
            self.end,
            self.time_zone
        )
    }
}

fn clock(field: &'static str, value: &str) -> Result<NaiveTime, InvalidWindow> {
    let invalid = || InvalidWindow::Clock {
        field,
        value: value.to_owned(),
    };
    // Exactly "HH:MM", as the schema's pattern says (chrono alone would take "9:5").
    if value.len() != 5 || value.as_bytes()[2] != b':' {
        return Err(invalid());
    }
    NaiveTime::parse_from_str(value, "%H:%M").map_err(|_| invalid())
}

/// The opening that starts on local `day`: its start and end instants.
fn opening(
    zone: Tz,
    day: NaiveDate,
    start: NaiveTime,
    end: NaiveTime,
) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    let end_day = if end <= start {
        day.checked_add_days(Days::new(1))?
    } else {
        day
    };
    Some((instant(zone, day, start)?, instant(zone, end_day, end)?))
}

/// The instant of a local day and time: the first of two (clocks turned back), or the first minute
/// that exists after it (clocks turned forward; the gaps of the time zone database last at most a
/// few hours).
fn instant(zone: Tz, day: NaiveDate, time: NaiveTime) -> Option<DateTime<Utc>> {
    let local = day.and_time(time);
    (0..=24 * 60).find_map(|minutes| {
        match zone.from_local_datetime(&(local + chrono::Duration::minutes(minutes))) {
            LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => Some(t.with_timezone(&Utc)),
            LocalResult::None => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Duration, TimeZone, Utc};
    use proptest::prelude::*;

    use super::*;

    fn window(days: &[Weekday], start: &str, end: &str, zone: &str) -> MaintenanceWindow {
        MaintenanceWindow {
            days: days.to_vec(),
            start: start.into(),
            end: end.into(),
            time_zone: zone.into(),
            in_flight: InFlight::default(),
        }
    }

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("an RFC 3339 time")
            .with_timezone(&Utc)
    }

    fn open_until(text: &str) -> WindowState {
        WindowState::Open { closes: utc(text) }
    }

    fn closed_until(text: &str) -> WindowState {
        WindowState::Closed { opens: utc(text) }
    }

    // 2026-11-30 is a Monday.

    #[test]
    fn a_window_across_midnight_belongs_to_the_day_it_opens_on() {
        let w = window(&[Weekday::Monday], "22:00", "04:00", "UTC");
        let at = |t: &str| w.state(utc(t)).unwrap();
        assert_eq!(
            at("2026-11-30T21:59:00Z"),
            closed_until("2026-11-30T22:00:00Z")
        );
        assert_eq!(
            at("2026-11-30T22:00:00Z"),
            open_until("2026-12-01T04:00:00Z")
        );
        // Tuesday is not listed, but Monday's opening runs into it.
        assert_eq!(
            at("2026-12-01T03:59:59Z"),
            open_until("2026-12-01T04:00:00Z")
        );
        // Closed at its end, until Monday next week.
        assert_eq!(
            at("2026-12-01T04:00:00Z"),
            closed_until("2026-12-07T22:00:00Z")
        );
    }

    #[test]
    fn a_window_opening_on_sunday_runs_into_the_next_week() {
        let w = window(&[Weekday::Sunday], "23:00", "01:00", "UTC");
        let at = |t: &str| w.state(utc(t)).unwrap();
        // Saturday 2026-12-05.
        assert_eq!(
            at("2026-12-05T12:00:00Z"),
            closed_until("2026-12-06T23:00:00Z")
        );
        assert_eq!(
            at("2026-12-06T23:30:00Z"),
            open_until("2026-12-07T01:00:00Z")
        );
        assert_eq!(
            at("2026-12-07T00:30:00Z"),
            open_until("2026-12-07T01:00:00Z")
        );
    }

    #[test]
    fn openings_without_a_gap_are_one() {
        // 24 hours from Saturday 00:00 and from Sunday 00:00: open from Saturday to Monday.
        let w = window(
            &[Weekday::Sunday, Weekday::Saturday],
            "00:00",
            "00:00",
            "UTC",
        );
        assert_eq!(
            w.state(utc("2026-12-05T12:00:00Z")).unwrap(),
            open_until("2026-12-07T00:00:00Z")
        );
    }

    #[test]
    fn local_hours_hold_across_daylight_saving_time() {
        let w = window(
            &[Weekday::Monday, Weekday::Tuesday],
            "22:00",
            "23:00",
            "Europe/Berlin",
        );
        // Winter (CET, UTC+1) and summer (CEST, UTC+2).
        assert_eq!(
            w.state(utc("2026-11-30T12:00:00Z")).unwrap(),
            closed_until("2026-11-30T21:00:00Z")
        );
        assert_eq!(
            w.state(utc("2026-06-01T12:00:00Z")).unwrap(),
            closed_until("2026-06-01T20:00:00Z")
        );
    }

    #[test]
    fn a_start_skipped_by_the_clocks_going_forward_opens_at_the_first_minute_after() {
        // Europe/Berlin, Sunday 2026-03-29: 02:00 CET becomes 03:00 CEST; 02:30 does not exist.
        let w = window(&[Weekday::Sunday], "02:30", "05:00", "Europe/Berlin");
        assert_eq!(
            w.state(utc("2026-03-28T12:00:00Z")).unwrap(),
            closed_until("2026-03-29T01:00:00Z") // 03:00 CEST
        );
        assert_eq!(
            w.state(utc("2026-03-29T01:00:00Z")).unwrap(),
            open_until("2026-03-29T03:00:00Z") // 05:00 CEST
        );
    }

    #[test]
    fn a_time_that_happens_twice_counts_at_its_first_occurrence() {
        // Europe/Berlin, Sunday 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:30 happens twice.
        let w = window(&[Weekday::Sunday], "02:30", "03:30", "Europe/Berlin");
        assert_eq!(
            w.state(utc("2026-10-24T12:00:00Z")).unwrap(),
            closed_until("2026-10-25T00:30:00Z") // the first 02:30, CEST
        );
        // Two hours of real time: from 02:30 CEST to 03:30 CET.
        assert_eq!(
            w.state(utc("2026-10-25T00:30:00Z")).unwrap(),
            open_until("2026-10-25T02:30:00Z")
        );
    }

    #[test]
    fn what_cannot_be_evaluated_names_the_field_to_fix() {
        let now = utc("2026-11-30T12:00:00Z");
        let zone = window(&[Weekday::Monday], "22:00", "04:00", "Europe/Berln");
        assert_eq!(
            zone.state(now).unwrap_err().to_string(),
            "spec.window.timeZone: \"Europe/Berln\" is not an IANA time zone; use a name such as \"Europe/Berlin\" or \
         \"UTC\""
        );
        for (start, end, field) in [("24:00", "04:00", "start"), ("22:00", "4:00", "end")] {
            let clock = window(&[Weekday::Monday], start, end, "UTC");
            let message = clock.state(now).unwrap_err().to_string();
            assert!(
                message.starts_with(&format!("spec.window.{field}: ")),
                "{message}"
            );
        }
        assert_eq!(
            window(&[], "22:00", "04:00", "UTC").state(now).unwrap_err(),
            InvalidWindow::NoDays
        );
    }

    #[test]
    fn it_reads_as_an_operator_writes_it() {
        let w = window(
            &[Weekday::Tuesday, Weekday::Monday, Weekday::Monday],
            "22:00",
            "04:00",
            "Europe/Berlin",
        );
        assert_eq!(w.to_string(), "Mon,Tue 22:00-04:00 Europe/Berlin");
    }

    const DAYS: [Weekday; 7] = [
        Weekday::Monday,
        Weekday::Tuesday,
        Weekday::Wednesday,
        Weekday::Thursday,
        Weekday::Friday,
        Weekday::Saturday,
        Weekday::Sunday,
    ];

    /// The oracle, in UTC (no daylight-saving time), minute by minute: open when some listed day's
    /// opening covers the minute, counted from that day's start; an opening lasts from start to
    /// end, 24 hours when they are equal.
    fn open_at(days: &[Weekday], start: u32, end: u32, minute_of_week: i64) -> bool {
        let length = match (end + 1440 - start) % 1440 {
            0 => 1440,
            n => n,
        };
        days.iter().any(|day| {
            let index = DAYS.iter().position(|d| d == day).expect("a day") as i64;
            let opens = index * 1440 + i64::from(start);
            // This week's opening, or last week's running into this one.
            [opens, opens - 7 * 1440]
                .iter()
                .any(|&o| (o..o + i64::from(length)).contains(&minute_of_week))
        })
    }

    proptest! {
        /// Against the minute-by-minute oracle: an open window is open from now until it closes and
        /// closed then; a
        /// closed one is closed from now until it opens and open then.
        #[test]
        fn the_state_agrees_with_the_minute_by_minute_oracle(
            day_mask in 1u8..128,
            start in 0u32..1440,
            end in 0u32..1440,
            anywhere in 0i64..(14 * 1440),
            near in 0u8..3,
            day in 0i64..13,
            delta in -1i64..=1,
        ) {
            // A third of the cases at any minute; the others within a minute of some day's start or
            // end, where the
            // state changes.
            let now = match near {
                0 => anywhere,
                1 => day * 1440 + i64::from(start) + delta,
                _ => day * 1440 + i64::from(end) + delta,
            }
            .max(0);
            let days: Vec<Weekday> = DAYS
                .iter()
                .enumerate()
                .filter(|(i, _)| day_mask & (1 << i) != 0)
                .map(|(_, d)| *d)
                .collect();
            let hhmm = |m: u32| format!("{:02}:{:02}", m / 60, m % 60);
            let w = window(&days, &hhmm(start), &hhmm(end), "UTC");
            let monday = Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).single().expect("a date");
            let minute = |m: i64| monday + Duration::minutes(m);
            let oracle = |m: i64| open_at(&days, start, end, m.rem_euclid(7 * 1440));
            let (expected_now, until) = match w.state(minute(now)).expect("valid") {
                WindowState::Open { closes } => (true, closes),
                WindowState::Closed { opens } => (false, opens),
            };
            let until = (until - monday).num_minutes();
            prop_assert!(until > now);
            prop_assert!(until - now <= 8 * 1440 || expected_now, "opens within a week");
            // Every day listed: a window is never open for good.
            for m in now..until.min(now + 8 * 1440) {
                prop_assert_eq!(oracle(m), expected_now, "minute {}", m);
            }
            if until - now <= 8 * 1440 {
                prop_assert_eq!(oracle(until), !expected_now, "changes at minute {}", until);
            }
        }
    }
}
