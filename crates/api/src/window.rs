//! `spec.window`: a maintenance window, the weekly hours in which k8sm may admit nodes and send kamikaze (like kured's
//! reboot days and hours, and system-upgrade-controller's `spec.window`). Its days and hours are local to an IANA time
//! zone, so a window keeps its local hours across daylight-saving changes.

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
    /// Days of the week on which the window opens, in timeZone, such as ["Saturday", "Sunday"]. A window that
    /// crosses midnight belongs to the day it opens on.
    #[schemars(length(min = 1, max = 7))]
    pub days: Vec<Weekday>,

    /// Local time at which the window opens, "HH:MM" on a 24-hour clock, such as "22:00".
    #[schemars(regex(pattern = CLOCK_PATTERN))]
    pub start: String,

    /// Local time at which the window closes, "HH:MM". Earlier than start: the next day (a window across midnight,
    /// such as "22:00" to "04:00"); equal to start: 24 hours after it opens.
    #[schemars(regex(pattern = CLOCK_PATTERN))]
    pub end: String,

    /// IANA time zone of days, start and end, such as "Europe/Berlin" (default "UTC"). A local time skipped by a
    /// daylight-saving change opens or closes the window at the first minute after the change; a local time that
    /// happens twice, at its first occurrence.
    #[serde(default = "default_time_zone")]
    #[schemars(length(min = 1, max = TIME_ZONE_MAX_LENGTH))]
    pub time_zone: String,

    /// What nodes that are already draining do while the window is closed. "Finish" (default): they go on moving
    /// their pods under the same SLA rules until they are drained, and wait there (cordoned) for the window to open
    /// before their executors are told to restart, as peers let in-progress drains finish. "Hold": nothing on them
    /// moves until the window opens; they stay cordoned.
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
    /// Open until `closes` (the end of this opening, joined with the openings that follow without a gap).
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
        // Openings by the local day they start on, from the day before today (one across midnight may still be open)
        // to a week after: every listed day comes round within that.
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
            // Unreachable with at least one day, kept total: a window that never opens is closed for a week.
            None => Ok(WindowState::Closed {
                opens: now + chrono::Duration::days(7),
            }),
        }
    }
}

/// The window's days, hours and zone, as an operator reads them: "Mon,Tue 22:00-04:00 Europe/Berlin".
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

/// The instant of a local day and time: the first of two (clocks turned back), or the first minute that exists
/// after it (clocks turned forward; the gaps of the time zone database last at most a few hours).
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
#[path = "window/tests.rs"]
mod tests;
